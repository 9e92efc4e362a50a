"""The ``from_template`` task: render a file from a template with given values (a file edit).

Its writes are pre-approved, as for the other edit tasks (``edits``).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from agent.tasks.base import PlannedReply, PlanView, Task
from agent.tasks.suite.plans import (
    EDITS_AUTO,
    call,
    play,
    python_check,
    reply,
    result_text,
    template_text,
)

# -- from_template -----------------------------------------------------------------------------


class FromTemplateParams(BaseModel):
    name: str = Field("billing", pattern=r"^[a-z][a-z0-9-]{0,30}$", description="Service name.")
    port: int = Field(8080, ge=1024, le=65535, description="Port it listens on.")
    replicas: int = Field(2, ge=1, le=20, description="How many replicas run.")


def render(template: str, p: FromTemplateParams) -> str:
    for key, value in p.model_dump().items():
        template = template.replace("{{" + key + "}}", str(value))
    return template


def _from_template_plan(p: FromTemplateParams, view: PlanView) -> PlannedReply:
    return play(
        view,
        [
            [
                reply("Reading the template.", call("read_file", path="service.tmpl")),
                lambda v: reply(
                    "Writing service.yaml with the placeholders filled in.",
                    call("write_file", path="service.yaml", content=render(result_text(v), p)),
                ),
                reply("service.yaml is rendered from service.tmpl."),
            ]
        ],
    )


TEMPLATE_CHECK = """
import json, sys
template, values = sys.argv[1], json.loads(sys.argv[2])
want = template
for key, value in values.items():
    want = want.replace('{{' + key + '}}', str(value))
if open('service.tmpl').read() != template:
    sys.exit('service.tmpl was changed; it must stay as it is')
try:
    got = open('service.yaml').read()
except FileNotFoundError:
    sys.exit('service.yaml does not exist')
if '{{' in got:
    sys.exit('service.yaml still has placeholders')
if got != want:
    sys.exit(f'service.yaml is\\n{got}\\nexpected\\n{want}')
print('service.yaml matches the template and the values')
"""

FROM_TEMPLATE = Task(
    name="from_template",
    title="Create a file from a template with given values",
    params_model=FromTemplateParams,
    instruction=lambda p: (
        "Create service.yaml from the template service.tmpl: replace {{name}} with "
        f"{p.name!r}, {{{{port}}}} with {p.port} and {{{{replicas}}}} with {p.replicas}; keep "
        "every other line as it is, and leave service.tmpl unchanged."
    ),
    check=lambda p: python_check(
        TEMPLATE_CHECK, template_text("from_template", "service.tmpl"), p.model_dump_json()
    ),
    plan=_from_template_plan,
    template="from_template",
    policy=EDITS_AUTO,
    kind="edit",
)

"""schemathesis against a live server: the OpenAPI document tells the truth, and nothing a
client sends gets a 5xx.

Every operation of ``/openapi.json``, in all of schemathesis' generating phases (coverage,
fuzzing, and stateful sequences along the document's links), with a fixed seed and a bounded
number of cases, under four checks: ``not_a_server_error``, ``status_code_conformance``,
``response_schema_conformance``, ``content_type_conformance``. Afterwards the server still
answers, and every thread it stored can still be read.
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx
import pytest

from tests.api.test_hostile_input import all_threads_readable
from tests.utils.server import ServerProcess

schemathesis = pytest.importorskip("schemathesis")

SEED = int(os.environ.get("SCHEMATHESIS_SEED", "20261201"))
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_MAX_EXAMPLES", "6"))
"""Cases per operation and phase: with the coverage phase's own, ~1500 cases in 20-40 s. Set
``SCHEMATHESIS_MAX_EXAMPLES`` (and ``SCHEMATHESIS_SEED``) for a longer, different run."""
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "response_schema_conformance",
    "content_type_conformance",
)


def config(base_url: str) -> Any:
    checks: dict[str, Any] = {"enabled": False}
    checks.update({name: {"enabled": True} for name in CHECKS})
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "base-url": base_url,
            "request-timeout": 30,
            "workers": 1,
            "generation": {
                "max-examples": MAX_EXAMPLES,
                "database": "none",
                "deterministic": True,
            },
            "checks": checks,
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                "fuzzing": {"enabled": True},
                "stateful": {"enabled": True, "max-steps": 6},
            },
        }
    )


def run(base_url: str) -> tuple[list[str], dict[str, int]]:
    """Run every phase; return the failures (described) and counts of what ran."""
    from schemathesis.engine import Status, events, from_schema

    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json", config=config(base_url))
    failures: list[str] = []
    counts = {"operations": len(list(schema.get_all_operations())), "cases": 0, "scenarios": 0}
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            counts["scenarios"] += 1
            counts["cases"] += len(event.recorder.cases)
            for case_id, checks in event.recorder.checks.items():
                for check in checks:
                    if check.status != Status.FAILURE or check.failure_info is None:
                        continue
                    info = check.failure_info
                    failures.append(
                        f"{event.label} [{event.phase.value}] {check.name}: "
                        f"{info.failure.title}: {info.failure.message[:500]}\n"
                        f"  {info.code_sample[:1500]}  (case {case_id})"
                    )
        elif isinstance(event, events.NonFatalError):
            failures.append(f"{event.label}: error {event.info.title}: {event.info.message[:500]}")
        elif isinstance(event, events.FatalError):
            failures.append(f"fatal: {event.exception!r}")
    return sorted(set(failures)), counts


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_openapi_conformance(server: ServerProcess) -> None:
    started = time.monotonic()
    failures, counts = run(server.url)
    elapsed = time.monotonic() - started
    print(f"schemathesis: {counts} in {elapsed:.1f}s")
    assert counts["operations"] >= 25, counts
    assert counts["cases"] > 300, counts
    assert not failures, "\n\n".join(failures)
    # The server still answers, and every thread stored meanwhile can be read back.
    with httpx.Client(base_url=server.url, timeout=30) as client:
        assert client.get("/ok").status_code == 200
        seen = all_threads_readable(client)
        assert seen > 0

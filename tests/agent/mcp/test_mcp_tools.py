"""External MCP tools in the registry: names, schemas, configuration, and calls against a real
stdio server (``echo_server.py``, on the SDK's own ``MCPServer``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from agent.approval import AskedCall, approval_request, parse_decisions
from agent.settings import AgentSettings
from agent.tools import ToolContext, execute_tool
from agent.tools.mcp import McpToolSpec, discover_tools
from agent.tools.mcp_config import parse_mcp_servers
from agent.tools.mcp_schema import args_model, tool_name, tool_names

OPENAI_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ECHO = str(Path(__file__).with_name("echo_server.py"))
SCHEMA = {
    "type": "object",
    "properties": {
        "repo_path": {"title": "Repo Path", "type": "string"},
        "files": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["repo_path", "files"],
    "title": "addArguments",
}


def test_names_are_namespaced_and_valid_for_openai() -> None:
    assert tool_name("git", "git_status") == "git__git_status"
    assert tool_name("docs", "search.pages v2") == "docs__search_pages_v2"
    long = tool_name("srv", "x" * 100)
    assert OPENAI_NAME.match(long) and len(long) == 64
    assert long == tool_name("srv", "x" * 100)  # deterministic


def test_colliding_names_get_a_deterministic_hash_whatever_the_listing_order() -> None:
    one = tool_names("s", ["a.b", "a_b", "a-b"])
    two = tool_names("s", ["a-b", "a_b", "a.b"])
    assert one == two
    assert len(set(one.values())) == 3 and all(OPENAI_NAME.match(n) for n in one.values())
    assert tool_names("s", ["x"], taken={"s__x"})["x"] != "s__x"


def test_the_argument_model_validates_against_the_json_schema() -> None:
    model = args_model("git__git_add", SCHEMA)
    assert model.model_validate({"repo_path": ".", "files": ["a"]}).arguments() == {
        "repo_path": ".",
        "files": ["a"],
    }
    with pytest.raises(ValueError, match="'repo_path' is a required property"):
        model.model_validate({"files": ["a"]})
    with pytest.raises(ValueError, match=r"files: \[\] should be non-empty"):
        model.model_validate({"repo_path": ".", "files": []})
    assert model.model_json_schema() == SCHEMA
    assert args_model("bad", {"type": "string"}).model_json_schema()["type"] == "object"


async def echo_tools(tmp_path: Path, **extra: object) -> dict[str, McpToolSpec]:
    config = {"command": sys.executable, "args": [ECHO], "timeout": 5, **extra}
    (status,) = await discover_tools(parse_mcp_servers({"echo": config}))
    assert status.status == "ok", status.error
    return {t.name: t for t in status.tools}


async def test_schema_read_only_meta_errors_and_structured_content(tmp_path: Path) -> None:
    untrusted = await echo_tools(tmp_path)
    assert sorted(untrusted) == ["echo__count", "echo__echo_meta", "echo__fail", "echo__slow"]
    assert not any(t.read_only for t in untrusted.values())  # hints ignored: not trusted
    tools = await echo_tools(tmp_path, trusted=True)
    assert tools["echo__echo_meta"].read_only and not tools["echo__fail"].read_only

    meta = tools["echo__echo_meta"]
    fn = meta.openai_schema()["function"]
    assert fn["name"] == "echo__echo_meta"
    assert fn["parameters"] == meta.args_schema.model_json_schema()
    assert fn["parameters"]["required"] == ["text"]
    # The approval form's schema is the remote one, and edits are validated against it.
    request = approval_request(
        [AskedCall(tool=meta, call_id="c1", args={"text": "hi"}, ruling={"rule": "ask"})]
    )
    assert request["review_configs"][0]["args_schema"] == fn["parameters"]
    edit = {"type": "edit", "edited_action": {"name": meta.name, "args": {"text": 3}}}
    with pytest.raises(ValueError, match="3 is not of type 'string'"):
        parse_decisions({"decisions": [edit]}, [meta], [meta.name])

    ctx = ToolContext(workspace=tmp_path, idempotency_key="thread-1:call-1")
    ok = await execute_tool(meta, ctx, {"text": "hi"})
    assert ok.ok and "hi key=thread-1:call-1" in ok.content
    failed = await execute_tool(tools["echo__fail"], ctx, {"reason": "no"})
    assert not failed.ok and "refused: no" in failed.content
    counted = await execute_tool(tools["echo__count"], ctx, {"n": 2})
    assert counted.ok and '"double": 4' in counted.content
    invalid = await execute_tool(tools["echo__count"], ctx, {"n": "two"})
    assert not invalid.ok and "'two' is not of type 'integer'" in invalid.content
    assert "Expected arguments: n" in invalid.content


async def test_a_timeout_is_a_failed_call(tmp_path: Path) -> None:
    # The server's timeout bounds its tool listing too: 5 s (not less) lets a loaded machine
    # start the server and list its tools; the call still cannot finish in it.
    tools = await echo_tools(tmp_path, timeout=5)
    ctx = ToolContext(workspace=tmp_path, idempotency_key="t:c")
    out = await execute_tool(tools["echo__slow"], ctx, {"seconds": 30})
    assert not out.ok and "did not finish slow within 5s" in out.content


async def test_servers_that_cannot_start_are_reported_not_fatal(tmp_path: Path) -> None:
    configs = parse_mcp_servers(
        {
            "missing": {"command": str(tmp_path / "no-such-program")},
            "crashes": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
            "echo": {"command": sys.executable, "args": [ECHO]},
        }
    )
    missing, crashes, echo = await discover_tools(configs)
    assert missing.status == "error" and "no-such-program" in (missing.error or "")
    assert crashes.status == "error" and crashes.error
    assert echo.status == "ok" and echo.tools
    assert missing.describe()["tools"] == []


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ([], "must be a JSON object"),
        ({"bad name!": {"command": "x"}}, "must be 1-32 letters"),
        ({"a": {"command": "x", "url": "http://h"}}, "exactly one of 'command'"),
        ({"a": {}}, "exactly one of 'command'"),
        ({"a": {"command": "x", "args": "-v"}}, "'args' must be a list of strings"),
        ({"a": {"command": "x", "trusted": "yes"}}, "'trusted' must be true or false"),
        ({"a": {"url": "ftp://h"}}, "http:// or https://"),
        ({"a": {"url": "http://h", "headers": {"x": 1}}}, "'headers' must be an object"),
        ({"a": {"url": "http://h", "args": []}}, "unknown keys ['args']"),
        ({"a": {"command": "x", "timeout": 0}}, "'timeout' must be a positive"),
    ],
)
def test_bad_configuration_is_refused_with_what_is_wrong(raw: object, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        parse_mcp_servers(raw)


def test_the_setting_is_validated(monkeypatch: pytest.MonkeyPatch, clean_env: None) -> None:
    monkeypatch.setenv("THREADLINE_MCP_SERVERS", '{"git": {"command": "x", "args": 1}}')
    with pytest.raises(ValueError, match="'args' must be a list of strings"):
        AgentSettings()
    monkeypatch.setenv("THREADLINE_MCP_SERVERS", '{"git": {"url": "http://h/mcp"}}')
    assert AgentSettings().mcp_servers == {"git": {"url": "http://h/mcp"}}

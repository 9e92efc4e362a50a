"""The hooks a server may put in ``config["configurable"]`` for the agent's nodes to call.

Both are optional: without them the graph runs as plain LangGraph. The server sets them for every
run and refuses client config keys that start with ``__``, so a client cannot set them.
"""

PRIOR_RESULT_KEY = "__threadline_prior_result"
"""An async callable ``(idempotency_key) -> {"ok", "content", "duration"} | None``: the recorded
result of a call that already executed. A call that finished but whose result was not
checkpointed before the process died returns that result instead of running again; only a death
between a tool's effect and its record can still repeat it."""
RECORD_TOOL_KEY = "__threadline_record_tool"
"""An async callable that durably records each execution (the server's audit log). A streamed
event is stored later than the task's result may be checkpointed, so an audit written from the
stream could miss an execution when the process dies in between."""

"""AG-UI 1.0 (the Agent User Interaction protocol) at ``/ag-ui/{assistant_id}``: a door onto the
same durable runs as the LangGraph API, A2A and MCP.

- ``endpoint``: the routes. ``POST /ag-ui/{assistant_id}`` takes a ``RunAgentInput`` (422 naming
  what is wrong) and answers the run's AG-UI events as SSE; the same ``threadId`` and ``runId``
  again, with ``Last-Event-ID``, continue that run's stream instead of starting one (any replica,
  after a crash); ``GET .../threads/{thread_id}/runs/{run_id}/stream`` does the same for
  ``EventSource``.
- ``run_input``: a ``RunAgentInput`` as a ``RunCreate``: the messages the thread does not hold
  yet, or ``resume`` answers as ``command.resume`` (exactly once; audited as ``via: ag-ui``);
  what it refuses (frontend ``tools``, ``context``, ``forwardedProps``, a ``state`` that is not
  the thread's).
- ``interrupts``: LangGraph interrupts as AG-UI ``Interrupt`` objects, resume entries as answers.
- ``stream``: the stored events after a position (``api.durable.event_follow``), as frames;
  ``resume_point``: positions, and what a continuation re-opens.
- ``translate`` (with ``chat`` for messages and ``snapshots`` for state and message snapshots):
  stored events → AG-UI events, deterministic, so a resumed stream continues exactly.

Each module's docstring holds its rules. Imports ``ag_ui`` through its public modules only.
"""

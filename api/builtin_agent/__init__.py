"""The built-in agent, as the service serves it: the one place ``api/`` meets ``agent/``.

- ``checks``: what a run of the agent may send (input, command, approval rules).
- ``adapter``: :class:`~api.builtin_agent.adapter.BuiltinAgent`, the agent's ``GraphAdapter``
  (run checks, approval answers, tool-call hooks into the audit log, workspaces, ``/info``).
- ``wiring``: the agent built from its settings (``agent.settings.AgentSettings``: model, tools,
  sandbox, tasks, policy, budgets), read from the environment when it is opened.
- ``routes``: its HTTP routes (the thread's workspace, ``/tasks``).

The rest of ``api/`` serves any LangGraph graph and imports nothing from ``agent/``
(``tests/test_structure.py`` checks it).
"""

BUILTIN_ASSISTANT = "agent"
"""The built-in agent's assistant (and graph) id."""

"""What a team's LangGraph project brings, read from its ``langgraph.json``: its environment
and dependencies, its graphs (and graph factories), how the service treats each graph
(``adapters``, the seam), its ``"http"`` and ``"store"`` configuration, and what
``/assistants/{id}/graph`` shows of a graph.

Imports only the layers below it."""

"""The HTTP edge: routes (``routes/``), SSE delivery of a run's stored events, the checks at
the door (strict JSON, bounded parameters, body size), errors as answers, authentication of
requests, MCP's endpoint, and the project's own app served beside the API.

Imports only the layers below it; the composition root (``api/app.py``) assembles it."""

"""The API's contract: request and response bodies in the shapes of LangGraph Server's API
(pydantic models the SDKs read), and what a body's fields check on their own (a webhook's
host, fields threadline does not serve, a thread's ``extract``).

Imports only the layers below it (platform, store)."""

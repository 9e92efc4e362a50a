"""Who the caller is and what they may see: API keys, the project's custom ``Auth`` handlers
(LangGraph's ``langgraph_sdk.Auth``), the request's user, and the access rules that scope
threads, runs and assistants to their owners.

Imports only the layers below it."""

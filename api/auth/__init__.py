"""Who is asking: authentication (custom ``langgraph_sdk.Auth`` or built-in API keys), the
authorization handlers' filters, and thread ownership. See ``api.auth.access``."""

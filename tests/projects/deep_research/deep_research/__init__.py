"""A research agent built with deepagents' ``create_deep_agent``, laid out as a project a team
would deploy with ``langgraph.json``: a lead agent that delegates the search to a ``researcher``
sub-agent (deepagents' ``task`` tool) and asks a human before it publishes (``interrupt_on``).
The model is built at import from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (the project's
``.env``)."""

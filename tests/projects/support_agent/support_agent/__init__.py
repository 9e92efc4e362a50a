"""A customer-support agent built with LangChain v1's ``create_agent``, laid out as a project a
team would deploy with ``langgraph.json``: it imports itself (``from support_agent import
tools``), builds its model at import from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` (the
project's ``.env``), reads the caller's run ``context`` in its tools, and asks a human before a
refund (``HumanInTheLoopMiddleware``)."""

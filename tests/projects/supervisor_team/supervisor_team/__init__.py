"""A team of agents built with ``langgraph-supervisor``'s ``create_supervisor``, laid out as a
project a team would deploy with ``langgraph.json``: a supervisor that hands the work to a
researcher (LangChain v1 ``create_agent``) and then to an analyst (LangGraph's prebuilt
``create_react_agent``). The model is built at import from ``OPENAI_API_KEY`` /
``OPENAI_BASE_URL`` (the project's ``.env``)."""

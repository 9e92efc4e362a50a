"""A document flow built with LangGraph's ``StateGraph``, laid out as a project a team would
deploy with ``langgraph.json``: the parent graph collects a topic, hands it to a ``review``
node that is itself a compiled graph (it drafts, reports its progress with
``get_stream_writer()`` and asks a human with ``interrupt()``), then publishes."""

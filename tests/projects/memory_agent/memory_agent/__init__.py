"""A memory agent (the shape of langchain-ai/memory-agent) for threadline's tests."""

"""A graph package that imports itself (``from greeter_agent import tools``), as LangGraph's
templates do: it runs only when the project's ``dependencies`` are importable."""

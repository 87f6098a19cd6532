"""LangGraph graphs (and ``create_agent`` agents) as a host: the engine's own governed loop, one
invocation of a graph, and its updates as run events."""

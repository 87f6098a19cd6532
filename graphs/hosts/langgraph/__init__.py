"""LangGraph graphs (and ``create_agent`` agents) as a host: the engine's own governed loop
(``agent``), the ``AgentHost`` that starts and resumes a graph's runs (``host``, a held input in
``held``), one invocation of a graph (``invocation``), its updates as run events
(``streaming``), and what a registry entry built, as this host (``registration``)."""

"""LangChain's ``create_agent`` under the engine: ``ApprovalMiddleware``
(HumanInTheLoopMiddleware's superset), its model and tool seams, ``GovernedToolNode``, and the
in-process path."""

"""approvals: durable human approval for the sensitive tool calls of LangGraph agents.

This package is the domain core: records (``model``), errors, content identity, the decision
service (``decisions``) and the ports the adapters implement. It imports no adapter; the
composition root ``web.engine.open_engine`` wires it to PostgreSQL and LangGraph.
"""

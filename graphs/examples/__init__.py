"""Example governed agents that run without an LLM: ``refund`` and ``email``."""

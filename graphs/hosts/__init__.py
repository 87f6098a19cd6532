"""The agent frameworks the engine hosts, each behind the one ``AgentHost`` interface, and the
registry that finds them by name."""

"""The AGENT-HOOKS-0.1 host side: the emitter, the interceptors it ships, a run's governance, and
the approval slot a human answers."""

"""make compat: the peers' own test suites run against our classes (docs/compat.md)."""

"""Execution: pure functions of a task (scan tasks today; compaction file groups later)."""

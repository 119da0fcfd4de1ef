"""Distributed compaction, scans and changelogs on Spark (PySpark), the driver planning and committing,
executors running :mod:`gpu_engine.execute` (no logic of its own beyond orchestration). Needs
``pyspark`` (the ``spark`` extra)."""

from __future__ import annotations

from .changes import changes
from .compact import compact
from .config import local_session, rapids_conf, session
from .runner import GroupRewriteFailed, SparkRunner
from .scan import scan

__all__ = [
    "GroupRewriteFailed",
    "SparkRunner",
    "changes",
    "compact",
    "local_session",
    "rapids_conf",
    "scan",
    "session",
]

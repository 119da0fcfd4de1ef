"""``gpu_engine.spark.compact``: the single-process compaction with its groups run by Spark executors.

Planning, validation, partial progress and commits are those of :func:`gpu_engine.commit.compact.compact`
(on the driver); only where groups run differs (:class:`~gpu_engine.spark.runner.SparkRunner`). Unless
``max-concurrent-file-group-rewrites`` is given, as many groups run at once as the cluster has task slots
(``spark.sparkContext.defaultParallelism``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import _args
from ..commit.compact import CompactionProgress, CompactionResult
from ..commit.compact import compact as compact_table
from ..errors import InvalidOption
from ..expressions import Expression
from ..iceberg.sorting import SortOrder
from .runner import SparkRunner

if TYPE_CHECKING:
    from ..table import Table


def compact(
    spark: Any,
    table: Table,
    *,
    strategy: str = "binpack",
    sort_order: str | Sequence[str] | SortOrder | None = None,
    options: Mapping[str, Any] | None = None,
    where: str | Expression | None = None,
    branch: str = "main",
    backend: str = "auto",
    dry_run: bool = False,
    progress: CompactionProgress | None = None,
    fail_attempts: Mapping[int, int] | None = None,
    crash_after_write: bool = False,
    parquet_io: str = "auto",
) -> CompactionResult:
    """Compact ``table`` with its file groups rewritten on ``spark``'s executors (see the module doc);
    ``fail_attempts`` and ``crash_after_write`` are test hooks (see :class:`SparkRunner`); ``parquet_io``
    as for :meth:`Table.compact <gpu_engine.table.Table.compact>`, ``auto`` decided on each executor."""
    given = dict(_args.mapping(options, "options", InvalidOption))
    given.setdefault("max-concurrent-file-group-rewrites", str(spark.sparkContext.defaultParallelism))
    return compact_table(
        table, strategy=strategy, sort_order=sort_order, options=given, where=where, branch=branch,
        backend=backend, dry_run=dry_run, progress=progress, parquet_io=parquet_io,
        runner=SparkRunner(spark, fail_attempts=fail_attempts, crash_after_write=crash_after_write),
    )  # fmt: skip

"""``Table.incremental_changelog_scan(...)``: the rows each snapshot of a range inserted and deleted,
merge-on-read deletes of every kind included (:mod:`gpu_engine.planning.changelog` says how), as Arrow
with Spark's changelog columns ``_change_type``, ``_change_ordinal`` and ``_commit_snapshot_id``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .execute.changelog import ChangelogRun, changelog_schema, execute_changelog
from .execute.projection import project
from .planning.changelog import ChangelogPlan, plan_changelog
from .planning.scan import ScanOptions
from .planning.snapshot_range import SnapshotRange

if TYPE_CHECKING:
    from .table import Table


@dataclass(frozen=True)
class ChangelogScan:
    table: Table
    options: ScanOptions
    since: SnapshotRange
    columns: tuple[str, ...] | None = None
    backend: str = "auto"
    remove_carry_overs: bool = True
    workers: int | None = None
    runs: list[ChangelogRun] = field(default_factory=list, compare=False, repr=False)

    def plan(self) -> ChangelogPlan:
        """Per snapshot of the range, the data files whose rows changed (see ChangeTask)."""
        return plan_changelog(self.table.metadata, self.table.io, self.options, self.since)

    def schema(self) -> pa.Schema:
        """The requested columns (current schema) followed by the three change columns."""
        md = self.table.metadata
        return changelog_schema(
            project(md, md.schema, self.columns, case_sensitive=self.options.case_sensitive)
        )

    @property
    def last_run(self) -> ChangelogRun | None:
        return self.runs[-1] if self.runs else None

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """Change batches, by snapshot (oldest first), DELETEs before INSERTs within a snapshot."""
        run, batches = execute_changelog(
            self.table.metadata,
            self.table.io,
            self.plan(),
            self.columns,
            backend=self.backend,
            case_sensitive=self.options.case_sensitive,
            workers=self.workers,
            remove_carry_overs=self.remove_carry_overs,
        )
        self.runs.append(run)
        return batches

    def to_arrow(self) -> pa.Table:
        batches = list(self.to_batches())
        return pa.Table.from_batches(batches, schema=self.schema())

    def to_pandas(self, **kwargs: Any) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

"""``Table.incremental_changelog_scan(...)``: the rows each snapshot of a range inserted and deleted,
merge-on-read deletes of every kind included (:mod:`gpu_engine.planning.changelog` says how), as Arrow
with Spark's changelog columns ``_change_type``, ``_change_ordinal`` and ``_commit_snapshot_id``.

:func:`update_keys` resolves the identifier columns updates are paired on (``compute_updates``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _args
from .errors import PlanningError
from .execute.changelog import ChangelogRun, changelog_schema, execute_changelog, key_columns
from .execute.projection import project
from .planning.changelog import ChangelogPlan, plan_changelog
from .planning.scan import ScanOptions
from .planning.snapshot_range import SnapshotRange

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .iceberg.metadata import TableMetadata
    from .iceberg.schema import Schema
    from .table import Table


def update_keys(schema: Schema, identifier_columns: Sequence[str] | None) -> tuple[str, ...]:
    """The columns updates are paired on: ``identifier_columns``, else the schema's identifier fields
    (top-level ones; a PlanningError when there are none, or one is nested)."""
    if identifier_columns is not None:
        if not identifier_columns:
            raise PlanningError("compute_updates: identifier_columns is empty")
        return tuple(identifier_columns)
    names = [schema.names_by_id[i] for i in schema.identifier_field_ids]
    if not names:
        raise PlanningError(
            "compute_updates needs identifier columns: pass identifier_columns, or set the table's "
            "identifier fields (update_schema().set_identifier_fields(...))"
        )
    nested = [n for n in names if len(schema.paths_by_id[schema.ids_by_name[n]]) > 1]
    if nested:
        raise PlanningError(
            f"compute_updates: identifier fields {nested} are nested in structs; pass top-level "
            "identifier_columns instead"
        )
    return tuple(names)


def checked_update_keys(
    md: TableMetadata,
    columns: Sequence[str] | None,
    identifier_columns: object,
    compute_updates: bool,
    case_sensitive: bool,
) -> tuple[str, ...]:
    """The update keys of a changelog of ``columns`` (:func:`update_keys`), checked before anything is
    planned or read (a Spark job would fail only in its executors): each among the changelog's data
    columns. ``identifier_columns`` without ``compute_updates`` is refused, not ignored."""
    if identifier_columns is not None:
        identifier_columns = _args.names(identifier_columns, "identifier_columns", PlanningError)
    if not compute_updates:
        if identifier_columns is not None:
            raise PlanningError(
                f"identifier_columns={list(identifier_columns)}: only used with compute_updates=True"
            )
        return ()
    keys = update_keys(md.schema, identifier_columns)
    out = project(md, md.schema, columns, case_sensitive=case_sensitive)
    data_columns = tuple(n for n in out.names if n not in out.metadata_names)
    return key_columns(keys, data_columns, case_sensitive)


@dataclass(frozen=True)
class ChangelogScan:
    table: Table
    options: ScanOptions
    since: SnapshotRange
    columns: tuple[str, ...] | None = None
    backend: str = "auto"
    remove_carry_overs: bool = True
    update_keys: tuple[str, ...] = ()
    net_changes: bool = False
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
            update_keys=self.update_keys,
            net_changes=self.net_changes,
        )
        self.runs.append(run)
        return batches

    def to_arrow(self) -> pa.Table:
        batches = list(self.to_batches())
        return pa.Table.from_batches(batches, schema=self.schema())

    def to_pandas(self, **kwargs: Any) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

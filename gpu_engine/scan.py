"""``Table.scan(...)``: what to read (filter, columns, snapshot); :meth:`TableScan.plan`: which files.

Execution (``to_arrow``, ``to_batches``, ``to_cudf``) arrives with the scan-execution work; planning is the
CPU stage that feeds it and never touches the device.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .backend.select import BACKENDS
from .errors import UnsupportedFeature
from .expressions import TRUE, Expression
from .planning.scan import ScanOptions, plan_scan
from .tasks import ScanPlan

if TYPE_CHECKING:
    from .table import Table


@dataclass(frozen=True)
class TableScan:
    table: Table
    options: ScanOptions
    columns: tuple[str, ...] | None = None
    backend: str = "auto"

    def plan(self) -> ScanPlan:
        """The files to read, each with its deletes and residual filter, and a summary of what was pruned."""
        plan = plan_scan(self.table.metadata, self.table.io, self.options)
        if self.columns is not None:
            for name in self.columns:
                plan.schema.find_field(name, case_sensitive=self.options.case_sensitive)
        return plan

    def filter(self, expr: str | Expression) -> TableScan:
        return replace(self, options=replace(self.options, filter=expr))


def new_scan(
    table: Table,
    *,
    filter: str | Expression = TRUE,
    columns: Sequence[str] | None = None,
    snapshot_id: int | None = None,
    as_of: int | None = None,
    ref: str | None = None,
    case_sensitive: bool = True,
    backend: str = "auto",
) -> TableScan:
    if backend not in BACKENDS:
        raise UnsupportedFeature(f"backend={backend!r}: expected one of {', '.join(map(repr, BACKENDS))}")
    options = ScanOptions(filter, snapshot_id, as_of, ref, case_sensitive)
    return TableScan(table, options, tuple(columns) if columns is not None else None, backend)

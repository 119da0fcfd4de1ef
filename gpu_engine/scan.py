"""``Table.scan(...)``: what to read (filter, columns, snapshot); :meth:`TableScan.plan`: which files;
``to_batches`` / ``to_arrow`` / ``to_pandas`` / ``to_cudf``: the rows, every delete applied.

Planning is the CPU stage and never touches the device; execution (:mod:`gpu_engine.execute`) chooses
the backend once per scan and records why (:attr:`TableScan.last_run`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import _args
from .backend.select import check_backend_name
from .errors import InvalidType, UnsupportedFeature
from .execute.frame_scan import frame_stream
from .execute.frames import Frames
from .execute.projection import Projection, project
from .execute.scan import ScanProgress, ScanRun, execute
from .expressions import TRUE, Expression, and_, parse
from .planning.scan import ScanOptions, plan_scan
from .planning.snapshot_range import SnapshotRange
from .tasks import ScanPlan

if TYPE_CHECKING:
    from .table import Table


@dataclass(frozen=True)
class TableScan:
    table: Table
    options: ScanOptions
    columns: tuple[str, ...] | None = None
    backend: str = "auto"
    limit: int | None = None
    workers: int | None = None
    runs: list[ScanRun] = field(default_factory=list, compare=False, repr=False)

    def plan(self) -> ScanPlan:
        """The files to read, each with its deletes and residual filter, and a summary of what was pruned."""
        plan = plan_scan(self.table.metadata, self.table.io, self.options)
        self.projection(plan)
        return plan

    def projection(self, plan: ScanPlan) -> Projection:
        """The scan's output columns (the requested ones, metadata columns included) for ``plan``."""
        md = self.table.metadata
        return project(md, plan.schema, self.columns, case_sensitive=self.options.case_sensitive)

    @property
    def last_run(self) -> ScanRun | None:
        """The last execution's plan, output projection and backend choice (with its reason)."""
        return self.runs[-1] if self.runs else None

    def to_batches(self, *, progress: ScanProgress | None = None) -> Iterator[pa.RecordBatch]:
        """Stream the rows as RecordBatches of :meth:`schema`, in task order, with bounded memory."""
        return self._execute(progress)[1]

    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows this scan returns."""
        return self.projection(self.plan()).arrow_schema

    def to_arrow(self) -> pa.Table:
        projection, batches = self._execute(None)
        return pa.Table.from_batches(list(batches), schema=projection.arrow_schema)

    def _execute(self, progress: ScanProgress | None) -> tuple[Projection, Iterator[pa.RecordBatch]]:
        plan, projection, how = self._planned()
        run, batches = execute(self.table.metadata, self.table.io, plan, projection, **how, progress=progress)
        self.runs.append(run)
        return projection, batches

    def _planned(self) -> tuple[ScanPlan, Projection, dict[str, Any]]:
        """The plan, its output projection and the execution options both executors take."""
        plan = self.plan()
        how = {
            "backend": self.backend,
            "case_sensitive": self.options.case_sensitive,
            "workers": self.workers,
            "limit": self.limit,
        }
        return plan, self.projection(plan), how

    def to_pandas(self, **kwargs: Any) -> Any:
        """:meth:`to_arrow` as a pandas DataFrame (``kwargs`` go to ``pyarrow.Table.to_pandas``)."""
        return self.to_arrow().to_pandas(**kwargs)

    def to_cudf(self, *, host_decode: bool = True) -> Any:
        """The rows as a cuDF DataFrame in device memory, equal to ``cudf.DataFrame.from_arrow(to_arrow())``
        (needs cuDF: BackendUnavailable otherwise).

        Data files are decoded by cuDF's GPU Parquet reader. A file whose columns cuDF cannot decode as
        the host reader does (nested, binary, INT96, ... columns: see :mod:`gpu_engine.io.device_decode`)
        is decoded on the host and copied over, its path and the reason listed in
        ``last_run.host_decoded``; ``host_decode=False`` refuses it instead (UnsupportedFeature naming the
        file and column).
        """
        from .backend.cudf_frames import CudfFrames

        return self.to_frame(CudfFrames(), host_decode=host_decode)

    def to_frame(self, frames: Frames, *, host_decode: bool = True) -> Any:
        """The rows as one frame of the frame library ``frames`` (what :meth:`to_cudf` does with cuDF's;
        :class:`gpu_engine.execute.frames.ArrowFrames` does the same steps with pyarrow on the host)."""
        decode = _args.boolean(host_decode, "host_decode", InvalidType)
        plan, projection, how = self._planned()
        run, stream = frame_stream(
            self.table.metadata, self.table.io, plan, projection, frames, **how, host_decode=decode
        )
        frame = frames.concat([part.frame for part in stream], projection.arrow_schema)
        self.runs.append(run)
        return frame

    def with_limit(self, limit: int | None) -> TableScan:
        return replace(self, limit=_limit(limit), runs=[])

    def filter(self, expr: str | Expression) -> TableScan:
        """This scan with ``expr`` added to its filter (and), as Java's and PyIceberg's ``filter``."""
        current, more = (parse(e) if isinstance(e, str) else e for e in (self.options.filter, expr))
        return replace(self, options=replace(self.options, filter=and_(current, more)), runs=[])


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
    limit: int | None = None,
    appends_since: SnapshotRange | None = None,
) -> TableScan:
    check_backend_name(backend)
    options = ScanOptions(filter, snapshot_id, as_of, ref, case_sensitive, appends_since=appends_since)
    return TableScan(table, options, scan_columns(columns), backend, _limit(limit))


def scan_columns(columns: object) -> tuple[str, ...] | None:
    """A scan's ``columns`` as a tuple; :class:`InvalidType` naming the argument when it is not a list of
    strings (a bare string is refused, not read as its characters)."""
    return None if columns is None else _args.names(columns, "scan columns", InvalidType)


def _limit(limit: object) -> int | None:
    """A scan's ``limit``: None or an integer >= 0 (not a bool, float or string)."""
    return None if limit is None else _args.integer(limit, "scan limit", UnsupportedFeature, minimum=0)

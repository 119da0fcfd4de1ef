"""``tbl.compact(...)``: plan -> rewrite groups -> commit, with Iceberg's partial-progress semantics.

Without partial progress every group is rewritten first and all are committed in one ``replace``
snapshot; a group that fails fails the compaction and every file written is deleted. With
``partial-progress.enabled`` groups are committed as they finish, in up to
``partial-progress.max-commits`` commits; a group that fails to rewrite or to validate is reported in
:attr:`CompactionResult.failures` and the others still commit, unless more than
``partial-progress.max-failed-commits`` commits fail (then :class:`CompactionFailed`, after what landed
stays landed). An unknown commit state is raised at once (its files are kept: they may be the table's).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import CommitStateUnknown, GpuEngineError, InvalidOption
from ..execute.rewrite import rewrite_group
from ..expressions import TRUE, Expression
from ..iceberg.sorting import SortOrder
from ..planning.compaction import CompactionPlan, plan_compaction
from ..planning.rewrite_options import RewriteOptions
from ..tasks import STRATEGIES, FileGroup, RewriteResult, RewriteStrategy
from .dangling import remove_dangling_deletes
from .producer import check_committable, delete_files
from .rewrite import commit_rewrite, conflicting_groups, dropped_deletes
from .spec_parse import parse_sort_order
from .update import CommitResult, Faults

if TYPE_CHECKING:
    from ..table import Table


class CompactionFailed(GpuEngineError):
    """More commits failed than ``partial-progress.max-failed-commits`` allows; ``result`` holds what
    landed and what failed."""

    def __init__(self, message: str, result: CompactionResult):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class GroupFailure:
    group_index: int
    stage: str  # "rewrite", "validation" or "commit"
    error: str

    def __str__(self) -> str:
        return f"group {self.group_index} failed at {self.stage}: {self.error}"


@dataclass(frozen=True)
class GroupOutcome:
    """A group that was rewritten and committed."""

    group_index: int
    files_rewritten: int
    bytes_rewritten: int
    files_added: int
    bytes_added: int
    delete_files_removed: int
    rows: int
    read_seconds: float
    order_seconds: float
    write_seconds: float
    snapshot_id: int


@dataclass(frozen=True)
class CompactionResult:
    """What a compaction did (``dry_run``: what it would do, nothing written)."""

    plan: CompactionPlan
    groups: tuple[GroupOutcome, ...] = ()
    failures: tuple[GroupFailure, ...] = ()
    commits: tuple[CommitResult, ...] = ()
    backend: str = "cpu"
    seconds: float = 0.0
    dry_run: bool = False
    dangling_deletes_removed: int = 0

    @property
    def rewritten_data_files(self) -> int:
        return sum(g.files_rewritten for g in self.groups)

    @property
    def rewritten_bytes(self) -> int:
        return sum(g.bytes_rewritten for g in self.groups)

    @property
    def added_data_files(self) -> int:
        return sum(g.files_added for g in self.groups)

    @property
    def added_bytes(self) -> int:
        return sum(g.bytes_added for g in self.groups)

    @property
    def removed_delete_files(self) -> int:
        return sum(g.delete_files_removed for g in self.groups)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.plan.table_location,
            "branch": self.plan.branch,
            "snapshot-id": self.plan.snapshot_id,
            "strategy": str(self.plan.strategy),
            "dry-run": self.dry_run,
            "backend": self.backend,
            "options": self.plan.options.as_dict(),
            "planned-groups": len(self.plan.groups),
            "planned-files": self.plan.files,
            "planned-bytes": self.plan.input_bytes,
            "rewritten-data-files-count": self.rewritten_data_files,
            "rewritten-bytes-count": self.rewritten_bytes,
            "added-data-files-count": self.added_data_files,
            "added-bytes-count": self.added_bytes,
            "removed-delete-files-count": self.removed_delete_files,
            "removed-dangling-deletes-count": self.dangling_deletes_removed,
            "failed-groups": [str(f) for f in self.failures],
            "commits": [c.snapshot_id for c in self.commits],
            "seconds": round(self.seconds, 3),
            "groups": [g.__dict__ for g in self.groups],
        }


class CompactionProgress(Protocol):
    def group_started(self, group: FileGroup) -> None: ...
    def group_finished(self, group: FileGroup, result: RewriteResult | None, error: str | None) -> None: ...


def resolve_strategy(
    table: Table, strategy: str, sort_order: str | Sequence[str] | SortOrder | None
) -> RewriteStrategy:
    """``strategy`` with its order: ``sort`` by ``sort_order`` or the table's sort order; ``zorder`` over
    the columns of ``sort_order`` (``"a, b"`` or ``"zorder(a, b)"``)."""
    kind = strategy.strip().lower()
    if kind not in STRATEGIES:
        raise InvalidOption(f"strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")
    md = table.metadata
    if kind == "binpack":
        if sort_order is not None:
            raise InvalidOption("sort_order is for the sort and zorder strategies, not binpack")
        return RewriteStrategy()
    if kind == "zorder":
        columns = _zorder_columns(sort_order)
        for c in columns:
            md.schema.find_field(c)
        return RewriteStrategy("zorder", zorder_columns=columns)
    if isinstance(sort_order, SortOrder):
        order = sort_order
    elif sort_order is not None:
        order = parse_sort_order(sort_order, md.schema, order_id=md.default_sort_order_id or 1)
    else:
        order = md.sort_order
    if order.is_unsorted:
        raise InvalidOption(
            f"table {md.location} has no sort order: give one (sort_order='id DESC NULLS LAST, ...')"
        )
    return RewriteStrategy("sort", sort_order=order)


def _zorder_columns(sort_order: str | Sequence[str] | SortOrder | None) -> tuple[str, ...]:
    if sort_order is None or isinstance(sort_order, SortOrder):
        raise InvalidOption("the zorder strategy needs columns: sort_order='zorder(a, b)' or 'a, b'")
    text = sort_order if isinstance(sort_order, str) else ", ".join(sort_order)
    text = text.strip()
    if text.lower().startswith("zorder(") and text.endswith(")"):
        text = text[len("zorder(") : -1]
    columns = tuple(c.strip() for c in text.split(",") if c.strip())
    if not columns or len(set(columns)) != len(columns):
        raise InvalidOption(f"zorder columns {text!r}: one or more distinct column names")
    return columns


def compact(
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
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> CompactionResult:
    """Compact ``branch`` of ``table`` (see the module doc and :mod:`gpu_engine.planning.compaction`)."""
    start = time.perf_counter()
    if not dry_run:
        check_committable(table)
    resolved = RewriteOptions.resolve(options, table.properties)
    how = resolve_strategy(table, strategy, sort_order)
    plan = plan_compaction(
        table.metadata, table.io, strategy=how, options=resolved, where=TRUE if where is None else where,
        branch=branch,
    )  # fmt: skip
    if dry_run:
        return CompactionResult(plan, dry_run=True, seconds=time.perf_counter() - start)
    run = _Run(table, plan, backend, progress, faults, sleep)
    run.execute()
    dangling = 0
    if resolved.remove_dangling_deletes:
        dangling, landed = remove_dangling_deletes(table, branch=branch, faults=faults, sleep=sleep)
        run.commits.extend([] if landed is None else [landed])
    out = CompactionResult(
        plan, tuple(run.outcomes), tuple(run.failures), tuple(run.commits), run.backend,
        time.perf_counter() - start, dangling_deletes_removed=dangling,
    )  # fmt: skip
    limit = resolved.partial_progress_max_failed_commits
    if resolved.partial_progress_enabled and limit is not None and run.failed_commits > limit:
        raise CompactionFailed(
            f"compaction of {table.location}: {run.failed_commits} commit(s) failed, more than "
            f"partial-progress.max-failed-commits={limit}: {[str(f) for f in run.failures][:3]}",
            out,
        )
    return out


@dataclass
class _Run:
    table: Table
    plan: CompactionPlan
    backend_requested: str
    progress: CompactionProgress | None
    faults: Faults | None
    sleep: Callable[[float], None]
    outcomes: list[GroupOutcome] = field(default_factory=list)
    failures: list[GroupFailure] = field(default_factory=list)
    commits: list[CommitResult] = field(default_factory=list)
    failed_commits: int = 0
    backend: str = "cpu"

    def execute(self) -> None:
        o = self.plan.options
        groups = self.plan.groups
        per_commit = math.ceil(len(groups) / o.partial_progress_max_commits)
        pending: list[tuple[FileGroup, RewriteResult]] = []
        uncommitted: list[RewriteResult] = []
        md, io = self.table.metadata, self.table.io
        with ThreadPoolExecutor(max_workers=o.max_concurrent_file_group_rewrites) as pool:
            futures: dict[Future[RewriteResult], FileGroup] = {}
            queue = list(groups)
            try:
                while queue or futures:
                    while queue and len(futures) < o.max_concurrent_file_group_rewrites:
                        g = queue.pop(0)
                        if self.progress is not None:
                            self.progress.group_started(g)
                        futures[pool.submit(rewrite_group, md, io, g, self.plan.strategy,
                                            backend=self.backend_requested)] = g  # fmt: skip
                    finished, _ = wait(futures, return_when=FIRST_COMPLETED)
                    for fut in finished:
                        g = futures.pop(fut)
                        exc = fut.exception()
                        if exc is not None:
                            if self.progress is not None:
                                self.progress.group_finished(g, None, f"{type(exc).__name__}: {exc}")
                            if not o.partial_progress_enabled:
                                raise exc
                            self.failures.append(
                                GroupFailure(g.index, "rewrite", f"{type(exc).__name__}: {exc}")
                            )
                            continue
                        r = fut.result()
                        self.backend = r.backend
                        uncommitted.append(r)
                        if self.progress is not None:
                            self.progress.group_finished(g, r, None)
                        pending.append((g, r))
                        if o.partial_progress_enabled and len(pending) >= per_commit:
                            self._commit(pending, uncommitted)
                            pending = []
                if pending:
                    self._commit(pending, uncommitted)
            except BaseException:
                for f in futures:
                    f.cancel()
                for fut in list(futures):
                    if not fut.cancelled() and fut.exception() is None:
                        uncommitted.append(fut.result())
                delete_files(io, [f.path for r in uncommitted for f in r.added], fault=None)
                raise

    def _commit(self, done: list[tuple[FileGroup, RewriteResult]], uncommitted: list[RewriteResult]) -> None:
        partial = self.plan.options.partial_progress_enabled
        self.table.refresh()
        bad = conflicting_groups(self.table, self.plan, [g for g, _ in done]) if partial else {}
        for g, r in done:
            if g.index in bad:
                self.failures.append(GroupFailure(g.index, "validation", str(bad[g.index])))
                delete_files(self.table.io, [f.path for f in r.added], fault=None)
                uncommitted.remove(r)
        ok = [(g, r) for g, r in done if g.index not in bad]
        if not ok:
            self.failed_commits += 1
            return
        try:
            landed = commit_rewrite(self.table, self.plan, ok, faults=self.faults, sleep=self.sleep)
        except CommitStateUnknown:
            for _, r in ok:
                uncommitted.remove(r)  # possibly the table's files now: never deleted
            raise
        except Exception as exc:
            for _, r in ok:
                uncommitted.remove(r)  # commit() deleted them
            if not partial:
                raise
            self.failed_commits += 1
            for g, _ in ok:
                self.failures.append(GroupFailure(g.index, "commit", f"{type(exc).__name__}: {exc}"))
            return
        self.commits.append(landed)
        for g, r in ok:
            uncommitted.remove(r)
            self.outcomes.append(
                GroupOutcome(
                    group_index=g.index,
                    files_rewritten=len(g.files),
                    bytes_rewritten=g.input_bytes,
                    files_added=len(r.added),
                    bytes_added=r.bytes_written,
                    delete_files_removed=len(dropped_deletes(g)),
                    rows=r.rows_written,
                    read_seconds=r.read_seconds,
                    order_seconds=r.order_seconds,
                    write_seconds=r.write_seconds,
                    snapshot_id=landed.snapshot_id,
                )
            )

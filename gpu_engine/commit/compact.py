"""``tbl.compact(...)``: plan -> rewrite groups -> commit, with Iceberg's partial-progress semantics.

Without partial progress every group is rewritten first and all are committed in one ``replace``
snapshot; a group that fails fails the compaction and every file written is deleted. With
``partial-progress.enabled`` groups are committed as they finish, in up to
``partial-progress.max-commits`` commits (one, of every group, where it is a v3 table's first v3 snapshot:
each row gets its id once); a group that fails to rewrite or to validate is reported in
:attr:`CompactionResult.failures` and the others still commit, unless more than
``partial-progress.max-failed-commits`` of the planned commits do not land, through failed rewrites or
failed commits (then :class:`CompactionFailed`, after what landed stays landed). An unknown commit state
is raised at once (its files are kept: they may be the table's).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from .. import _args
from ..backend.select import check_backend_name, choose
from ..errors import (
    CommitConflict,
    CommitStateUnknown,
    GpuEngineError,
    InvalidOption,
    ManifestError,
    ValidationError,
)
from ..execute.group_rewrite import check_parquet_io, discard
from ..execute.group_runner import GroupJob, GroupRunner, LocalRunner
from ..expressions import TRUE, Expression
from ..iceberg.sorting import SortField, SortOrder
from ..planning.compaction import CompactionPlan, plan_compaction
from ..planning.rewrite_options import RewriteOptions
from ..tasks import STRATEGIES, FileGroup, RewriteResult, RewriteStrategy
from .dangling import remove_dangling_deletes
from .producer import check_committable, delete_files, moved_on
from .rewrite import commit_rewrite, conflicting_groups, dropped_keys
from .spec_parse import check_sort_fields, column_names, parse_sort_order
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
    rows: int
    read_seconds: float
    order_seconds: float
    write_seconds: float
    snapshot_id: int
    parquet_io: str = "pyarrow"  # who decoded and encoded the group's Parquet files
    parquet_io_reason: str | None = None  # why pyarrow did where a frame library was asked for


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
    delete_files_removed: int = 0  # by the rewrite commits: deletes of the replaced files only
    dangling_deletes_failure: str | None = None  # why remove-dangling-deletes committed nothing

    @property
    def failed(self) -> bool:
        """A group failed, or the dangling deletes asked to go were left (a scheduled job must see it)."""
        return bool(self.failures) or self.dangling_deletes_failure is not None

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
        """Delete files removed: those of the replaced files, and dangling ones when asked."""
        return self.delete_files_removed + self.dangling_deletes_removed

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
            "dangling-deletes-failure": self.dangling_deletes_failure,
            "failed-groups": [str(f) for f in self.failures],
            "commits": [c.snapshot_id for c in self.commits],
            "seconds": round(self.seconds, 3),
            "groups": [g.__dict__ for g in self.groups],  # those rewritten
            "planned": self.plan.groups_json(),
        }


class CompactionProgress(Protocol):
    def group_started(self, group: FileGroup) -> None: ...
    def group_finished(self, group: FileGroup, result: RewriteResult | None, error: str | None) -> None: ...


def resolve_strategy(
    table: Table, strategy: str, sort_order: str | Sequence[str] | SortOrder | None
) -> RewriteStrategy:
    """``strategy`` with its order: ``sort`` by ``sort_order`` or the table's sort order; ``zorder`` over
    the columns of ``sort_order`` (``"a, b"`` or ``"zorder(a, b)"``; ``sort`` with ``"zorder(a, b)"`` is a
    zorder too, as Java's rewrite_data_files reads it)."""
    kind = _args.text(strategy, "strategy", InvalidOption).strip().lower()
    if kind not in STRATEGIES:
        raise InvalidOption(f"strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}")
    if kind == "sort" and isinstance(sort_order, str) and _ZORDER_CALL.match(sort_order):
        kind = "zorder"
    md = table.metadata
    if kind == "binpack":
        if sort_order is not None:
            raise InvalidOption("sort_order is for the sort and zorder strategies, not binpack")
        return RewriteStrategy()
    if kind == "zorder":
        columns = _zorder_columns(sort_order)
        # checked as a sort's columns (primitive, not inside a list or map) before any group reads its rows
        keys = [
            SortField((md.schema.find_field(c).field_id,), "identity", "asc", "nulls-first") for c in columns
        ]
        check_sort_fields(keys, md.schema, where="zorder columns")
        return RewriteStrategy("zorder", zorder_columns=columns)
    if isinstance(sort_order, SortOrder):
        checked = check_sort_fields(sort_order.fields, md.schema, where="sort_order")
        order = replace(sort_order, fields=checked)
    elif sort_order is not None:
        order = parse_sort_order(sort_order, md.schema, order_id=md.default_sort_order_id or 1)
    else:
        order = md.sort_order
    if order.is_unsorted:
        raise InvalidOption(
            f"table {md.location} has no sort order: give one (sort_order='id DESC NULLS LAST, ...')"
        )
    return RewriteStrategy("sort", sort_order=order)


_ZORDER_CALL = re.compile(r"^\s*zorder\s*\(.*\)\s*$", re.IGNORECASE | re.DOTALL)


def _zorder_columns(sort_order: str | Sequence[str] | SortOrder | None) -> tuple[str, ...]:
    if sort_order is None or isinstance(sort_order, SortOrder):
        raise InvalidOption("the zorder strategy needs columns: sort_order='zorder(a, b)' or 'a, b'")
    if isinstance(sort_order, str):
        text = sort_order.strip()
        if _ZORDER_CALL.match(text):
            text = text[text.index("(") + 1 : text.rindex(")")]
        columns = column_names(text, f"zorder columns {text!r}")
        text = repr(text)
    else:  # names as given: a comma or a space is part of a column's name
        columns = tuple(_args.names(sort_order, "sort_order", InvalidOption))
        text = repr(list(columns))
    if not columns or len(set(columns)) != len(columns):
        raise InvalidOption(f"zorder columns {text}: one or more distinct column names")
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
    runner: GroupRunner | None = None,
    parquet_io: str = "auto",
) -> CompactionResult:
    """Compact ``branch`` of ``table`` (see the module doc and :mod:`gpu_engine.planning.compaction`).
    ``runner``: where groups are rewritten (default: threads of this process; see
    :mod:`gpu_engine.execute.group_runner`). ``parquet_io``: who decodes and encodes the Parquet files
    (:mod:`gpu_engine.execute.group_rewrite`: ``auto`` is cuDF on the CUDA backend where it is
    installed)."""
    start = time.perf_counter()
    check_backend_name(backend)  # before any group is shipped (a Spark runner's executors would all fail)
    check_parquet_io(parquet_io)
    dry_run = _args.boolean(dry_run, "dry_run", InvalidOption)  # "no" would be truthy
    options = _args.mapping(options, "options", InvalidOption)  # a str was iterated per character
    if not dry_run:
        check_committable(table)

    def planned() -> CompactionPlan:
        how = resolve_strategy(table, strategy, sort_order)
        return plan_compaction(
            table.metadata, table.io, strategy=how, options=RewriteOptions.resolve(options, table.properties),
            where=TRUE if where is None else where, branch=branch,
        )  # fmt: skip

    try:
        plan = planned()
    except ManifestError:  # a snapshot another writer expired since this handle was loaded: plan again
        if table.catalog is None or not moved_on(table.catalog, table):
            raise
        table.refresh()
        plan = planned()
    resolved = plan.options
    if dry_run:
        return CompactionResult(plan, dry_run=True, seconds=time.perf_counter() - start)
    run = _Run(table, plan, backend, progress, faults, sleep, parquet_io)
    if runner is None or isinstance(runner, LocalRunner):  # a Spark driver needs no device: executors choose
        run.backend = choose(backend).name  # what ran when no group runs ('cuda' without a device: an error)
    run.execute(runner or LocalRunner())
    dangling, dangling_failure = 0, None
    if resolved.remove_dangling_deletes:
        try:
            dangling, landed = remove_dangling_deletes(table, branch=branch, faults=faults, sleep=sleep)
        except (ValidationError, CommitConflict) as exc:  # the rewrites landed: report them, and this
            dangling_failure = f"{type(exc).__name__}: {exc}"
        else:
            run.commits.extend([] if landed is None else [landed])
    out = CompactionResult(
        plan, tuple(run.outcomes), tuple(run.failures), tuple(run.commits), run.backend,
        time.perf_counter() - start, dangling_deletes_removed=dangling,
        delete_files_removed=run.deletes_removed, dangling_deletes_failure=dangling_failure,
    )  # fmt: skip
    limit = resolved.partial_progress_max_failed_commits
    failed = run.planned_commits - run.rewrite_commits
    if resolved.partial_progress_enabled and limit is not None and failed > limit:
        raise CompactionFailed(
            f"compaction of {table.location}: {failed} of {run.planned_commits} commit(s) failed, more than "
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
    parquet_io: str
    outcomes: list[GroupOutcome] = field(default_factory=list)
    failures: list[GroupFailure] = field(default_factory=list)
    commits: list[CommitResult] = field(default_factory=list)
    planned_commits: int = 0  # the commits the groups were cut into (partial progress: up to max-commits)
    rewrite_commits: int = 0  # those that landed; the others failed, in the rewrite or in the commit
    backend: str = "cpu"
    replaced: set[str] = field(default_factory=set)  # data files replaced by this compaction's commits
    deletes_removed: int = 0

    def execute(self, runner: GroupRunner) -> None:
        o = self.plan.options
        per_commit = max(1, math.ceil(len(self.plan.groups) / o.partial_progress_max_commits))
        if self.table.metadata.format_version >= 3 and not self.plan.read_lineage:
            per_commit = max(1, len(self.plan.groups))  # a first v3 snapshot: one commit gives rows ids
        partial = o.partial_progress_enabled
        self.planned_commits = math.ceil(len(self.plan.groups) / per_commit) if partial else 1
        pending: list[tuple[FileGroup, RewriteResult]] = []
        uncommitted: list[RewriteResult] = []
        io = self.table.io
        job = GroupJob(self.table.metadata, self.table.metadata_location, io, self.plan.strategy,
                       self.backend_requested, self.parquet_io)  # fmt: skip
        outcomes = runner.run(
            job, self.plan.groups, concurrency=o.max_concurrent_file_group_rewrites, started=self._started
        )
        try:
            for g, out in outcomes:
                if isinstance(out, Exception):
                    if self.progress is not None:
                        self.progress.group_finished(g, None, f"{type(out).__name__}: {out}")
                    if not o.partial_progress_enabled:
                        raise out
                    self.failures.append(GroupFailure(g.index, "rewrite", f"{type(out).__name__}: {out}"))
                    continue
                self.backend = out.backend
                uncommitted.append(out)
                if self.progress is not None:
                    self.progress.group_finished(g, out, None)
                pending.append((g, out))
                if o.partial_progress_enabled and len(pending) >= per_commit:
                    self._commit(pending, uncommitted)
                    pending = []
            if pending:
                self._commit(pending, uncommitted)
        except BaseException:
            outcomes.close()
            for r in uncommitted:
                discard(io, r)
            raise

    def _started(self, group: FileGroup) -> None:
        if self.progress is not None:
            self.progress.group_started(group)

    def _commit(self, done: list[tuple[FileGroup, RewriteResult]], uncommitted: list[RewriteResult]) -> None:
        partial = self.plan.options.partial_progress_enabled
        self.table.refresh()
        own = frozenset(c.snapshot_id for c in self.commits)  # this compaction's earlier commits
        bad = conflicting_groups(self.table, self.plan, [g for g, _ in done], own) if partial else {}
        for g, r in done:
            if g.index in bad:
                self.failures.append(GroupFailure(g.index, "validation", str(bad[g.index])))
                delete_files(self.table.io, [f.path for f in r.added], fault=None)
                uncommitted.remove(r)
        ok = [(g, r) for g, r in done if g.index not in bad]
        if not ok:
            return
        dropped = dropped_keys(self.plan, [g for g, _ in ok], self.replaced)  # raising: still uncommitted
        for _, r in ok:  # from here the commit owns them: it deletes them when it fails, keeps them when it
            uncommitted.remove(r)  # landed or may have (an interruption just after it landed deleted them)
        try:
            landed = commit_rewrite(
                self.table,
                self.plan,
                ok,
                replaced_before=self.replaced,
                own=own,
                faults=self.faults,
                sleep=self.sleep,
            )
        except CommitStateUnknown:
            raise
        except Exception as exc:  # commit_rewrite() deleted them
            if not partial:
                raise
            for g, _ in ok:
                self.failures.append(GroupFailure(g.index, "commit", f"{type(exc).__name__}: {exc}"))
            return
        self.commits.append(landed)
        self.rewrite_commits += 1
        self.replaced.update(f.path for g, _ in ok for f in g.files)
        self.deletes_removed += len(dropped)
        for g, r in ok:
            self.outcomes.append(
                GroupOutcome(
                    group_index=g.index,
                    files_rewritten=len(g.files),
                    bytes_rewritten=g.input_bytes,
                    files_added=len(r.added),
                    bytes_added=r.bytes_written,
                    rows=r.rows_written,
                    read_seconds=r.read_seconds,
                    order_seconds=r.order_seconds,
                    write_seconds=r.write_seconds,
                    snapshot_id=landed.snapshot_id,
                    parquet_io=r.parquet_io,
                    parquet_io_reason=r.parquet_io_reason,
                )
            )

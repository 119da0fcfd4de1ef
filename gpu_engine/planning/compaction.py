"""Compaction planning (Iceberg's ``rewrite_data_files`` planner): which files to rewrite, in which groups.

Stages, as Iceberg Java's size-based planner runs them:

1. The files of the branch head that may hold rows matching ``where`` (partition and metrics pruning of
   the scan planner; whole files are selected, never rows), with the deletes that apply to each.
2. Files worth rewriting: outside ``[min-file-size-bytes, max-file-size-bytes]``, with at least
   ``delete-file-threshold`` delete files, with file-scoped deletes (DVs, position deletes of one file)
   covering at least ``delete-ratio-threshold`` of their rows, or written with another spec than the output
   spec (not a Java rule: Java selects such files by size and deletes only). ``rewrite-all`` takes every
   file.
3. Files grouped by partition (files of other specs together: their rows may belong to several
   partitions of the output spec), packed into groups of at most ``max-file-group-size-bytes``.
4. Groups worth rewriting: ≥ 2 files and ≥ ``min-input-files``; ≥ 2 files and more bytes than the target;
   more bytes than ``max-file-size-bytes`` (Java's ``tooMuchContent``: a lone oversized file is split); or
   a file with too many deletes or of another spec.
5. ``rewrite-job-order``, then ``max-files-to-rewrite`` (the last group cut to fit). Java cuts in its
   partition map's (hash) order before sorting; cutting in job order keeps the groups the order puts
   first (with ``bytes-desc``, the largest).

The plan is a frozen, picklable value: the snapshot it read, the sequence number new files keep
(``use-starting-sequence-number``) and the groups, each with its scan tasks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import InvalidOption, PlanningError
from ..expressions import TRUE, Expression
from ..iceberg.metadata import TableMetadata
from ..iceberg.metadata_columns import has_lineage
from ..iceberg.partitioning import partition_key
from ..io.fileio import FileIO
from ..tasks import DataFile, DeleteFile, FileGroup, RewriteStrategy, ScanTask
from .binpack import expected_output_files, input_split_size, pack
from .rewrite_options import RewriteOptions
from .scan import ScanOptions, plan_scan


@dataclass(frozen=True)
class CompactionPlan:
    """A planned compaction of ``branch`` read at ``snapshot_id`` (None: the branch has no snapshot)."""

    table_location: str
    branch: str
    snapshot_id: int | None
    starting_sequence_number: int
    strategy: RewriteStrategy
    options: RewriteOptions
    where: str
    groups: tuple[FileGroup, ...]
    files_considered: int
    files_selected: int
    position_delete_targets: tuple[tuple[tuple[str, int | None], frozenset[str]], ...] = ()
    """Per position delete file (not DV) that applies to a file of the groups: every live data file of the
    branch it applies to. A compaction drops it once all of those are rewritten."""
    read_lineage: bool = False
    """The planned snapshot's rows have row lineage (format version 3 and a ``first-row-id``): its rewrite
    copies their ``_row_id`` and ``_last_updated_sequence_number`` into the new files."""

    @property
    def files(self) -> int:
        return sum(len(g.files) for g in self.groups)

    @property
    def input_bytes(self) -> int:
        return sum(g.input_bytes for g in self.groups)

    def groups_json(self) -> list[dict[str, Any]]:
        """Each planned group as JSON (partition values as JSON numbers, strings, booleans or null, others
        as their text): what a scheduler or a dry run's reader needs of it."""
        return [
            {
                "index": g.index,
                "spec-id": g.spec_id,
                "partition": [_json_value(v) for v in g.partition],
                "files": len(g.files),
                "bytes": g.input_bytes,
                "rows": g.input_rows,
                "delete-files": len(g.delete_files),
                "expected-output-files": g.expected_output_files,
                "output-spec-id": g.output_spec_id,
            }
            for g in self.groups
        ]

    def explain(self) -> str:
        """A human-readable account of the plan: what is rewritten and why the rest is not."""
        o = self.options
        lines = [
            f"compaction of {self.table_location} (branch {self.branch}, snapshot {self.snapshot_id}), "
            f"strategy {self.strategy}" + (f", where {self.where}" if self.where != "true" else ""),
            f"  target file size {o.target_file_size_bytes} B (min {o.min_file_size_bytes}, "
            f"max {o.max_file_size_bytes}), min-input-files {o.min_input_files}, "
            f"rewrite-all {str(o.rewrite_all).lower()}",
            f"  {self.files_considered} live data file(s) matched; {self.files_selected} worth rewriting; "
            f"{self.files} in {len(self.groups)} group(s), {self.input_bytes} B",
        ]
        for g in self.groups:
            where = "files of other specs" if g.spec_id is None else f"partition {g.partition}"
            lines.append(
                f"  group {g.index}: {where}: {len(g.files)} file(s), {g.input_bytes} B, "
                f"{len(g.delete_files)} delete file(s) -> ~{g.expected_output_files} file(s) of spec "
                f"{g.output_spec_id}"
            )
        if not self.groups:
            lines.append("  nothing to rewrite")
        return "\n".join(lines)


def _json_value(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return v.hex() if isinstance(v, bytes) else str(v)


def _check_sources(md: TableMetadata, spec_id: int) -> None:
    """:class:`InvalidOption` where a field of the output spec partitions by a column the table's schema
    has dropped (rows of that schema cannot be partitioned by it)."""
    for f in md.specs[spec_id].fields:
        if f.transform != "void" and f.source_id not in md.schema.by_id:
            raise InvalidOption(
                f"compaction option output-spec-id={spec_id}: partition field {f.name!r} ({f.transform}) of "
                f"that spec partitions by source column id {f.source_id}, which the current schema "
                "dropped"
            )


def plan_compaction(
    md: TableMetadata,
    io: FileIO,
    *,
    strategy: RewriteStrategy,
    options: RewriteOptions,
    where: str | Expression = TRUE,
    branch: str = "main",
    case_sensitive: bool = True,
) -> CompactionPlan:
    """Plan a compaction of ``branch`` (see the module doc)."""
    output_spec_id = md.default_spec_id if options.output_spec_id is None else options.output_spec_id
    if output_spec_id not in md.specs:
        raise InvalidOption(
            f"compaction option output-spec-id={output_spec_id}: table {md.location} has no partition spec "
            f"with that id (spec ids: {sorted(md.specs)})"
        )
    _check_sources(md, output_spec_id)
    if branch in md.refs and md.refs[branch].is_tag:
        raise PlanningError(f"table {md.location}: {branch!r} is a tag; compaction rewrites a branch")
    has_head = branch in md.refs or (branch == "main" and md.current_snapshot() is not None)
    scan_options = ScanOptions(
        filter=where, ref=branch if branch in md.refs else None, case_sensitive=case_sensitive
    )
    if branch != "main" and branch not in md.refs:
        raise PlanningError(f"table {md.location}: no branch named {branch!r} (refs: {sorted(md.refs)})")
    where_text = str(where) if not isinstance(where, str) else (where.strip() or "true")
    if not has_head:
        return CompactionPlan(md.location, branch, None, 0, strategy, options, where_text, (), 0, 0, ())
    scan = plan_scan(md, io, scan_options)
    snapshot = md.snapshot_by_id(scan.summary.snapshot_id) if scan.summary.snapshot_id is not None else None
    files = _by_file(scan.tasks)
    selected = [f for f in files if options.rewrite_all or _worth_rewriting(f, options, output_spec_id)]
    groups: list[list[_File]] = []
    for key, members in _by_partition(selected, output_spec_id).items():
        del key
        for bin_ in pack(members, lambda f: f.data.file_size_in_bytes, options.max_file_group_size_bytes):
            if options.rewrite_all or _group_worth_rewriting(bin_, options, output_spec_id):
                groups.append(bin_)
    groups = _limit(_order(groups, options.rewrite_job_order), options.max_files_to_rewrite)
    built = tuple(_group(i, g, output_spec_id, options) for i, g in enumerate(groups))
    seq = snapshot.sequence_number if snapshot is not None else 0

    def every_task() -> tuple[ScanTask, ...]:
        return (
            scan.tasks
            if where_text == "true"
            else plan_scan(md, io, replace(scan_options, filter=TRUE)).tasks
        )

    targets = _position_targets(built, every_task)
    return CompactionPlan(
        md.location, branch, None if snapshot is None else snapshot.snapshot_id, seq, strategy, options,
        where_text, built, len(files), len(selected), targets, has_lineage(md, snapshot),
    )  # fmt: skip


def _position_targets(
    groups: Sequence[FileGroup], every_task: Callable[[], Sequence[ScanTask]]
) -> tuple[tuple[tuple[str, int | None], frozenset[str]], ...]:
    """The data files each position delete file of the groups applies to, over the whole snapshot
    (``every_task``: its unfiltered tasks, planned only when the groups have position delete files)."""
    wanted = {
        (d.path, d.content_offset)
        for g in groups
        for d in g.delete_files
        if d.content == 1 and not d.is_deletion_vector
    }
    if not wanted:
        return ()
    targets: dict[tuple[str, int | None], set[str]] = {k: set() for k in wanted}
    for t in every_task():
        for d in t.deletes:
            key = (d.path, d.content_offset)
            if key in targets:
                targets[key].add(t.file.path)
    return tuple((k, frozenset(v)) for k, v in sorted(targets.items(), key=repr))


@dataclass(frozen=True)
class _File:
    data: DataFile
    tasks: tuple[ScanTask, ...]
    deletes: tuple[DeleteFile, ...]


def _by_file(tasks: Sequence[ScanTask]) -> list[_File]:
    """The planned files in plan order, each with its tasks made residual-free (every row is rewritten)."""
    out: dict[str, list[ScanTask]] = {}
    for t in tasks:
        out.setdefault(t.file.path, []).append(replace(t, residual=TRUE))
    return [_File(ts[0].file, tuple(ts), ts[0].deletes) for ts in out.values()]


def _file_scoped(d: DeleteFile) -> bool:
    return d.is_deletion_vector or (d.content == 1 and d.referenced_data_file is not None)


def _too_many_deletes(f: _File, o: RewriteOptions) -> bool:
    return len(f.deletes) >= o.delete_file_threshold


def _too_high_delete_ratio(f: _File, o: RewriteOptions) -> bool:
    if not f.deletes or f.data.record_count <= 0:
        return False
    known = sum(d.record_count for d in f.deletes if _file_scoped(d))
    return min(known, f.data.record_count) / f.data.record_count >= o.delete_ratio_threshold


def _other_spec(f: _File, output_spec_id: int) -> bool:
    return f.data.spec_id != output_spec_id


def _worth_rewriting(f: _File, o: RewriteOptions, output_spec_id: int) -> bool:
    size = f.data.file_size_in_bytes
    return (
        size < o.min_file_size_bytes
        or size > o.max_file_size_bytes
        or _too_many_deletes(f, o)
        or _too_high_delete_ratio(f, o)
        or _other_spec(f, output_spec_id)
    )


def _group_worth_rewriting(group: list[_File], o: RewriteOptions, output_spec_id: int) -> bool:
    size = sum(f.data.file_size_in_bytes for f in group)
    several = len(group) > 1
    return (
        (several and len(group) >= o.min_input_files)
        or (several and size > o.target_file_size_bytes)
        or size > o.max_file_size_bytes
        or any(
            _too_many_deletes(f, o) or _too_high_delete_ratio(f, o) or _other_spec(f, output_spec_id)
            for f in group
        )
    )


def _by_partition(files: Sequence[_File], output_spec_id: int) -> dict[tuple[Any, ...], list[_File]]:
    """Files by (spec id, partition) compared as the spec compares them (all NaNs one partition, -0.0 and
    0.0 two); files of other specs than the output spec under one key."""
    out: dict[tuple[Any, ...], list[_File]] = {}
    for f in files:
        key = (
            partition_key(f.data.spec_id, f.data.partition)
            if f.data.spec_id == output_spec_id
            else (None, ())
        )
        out.setdefault(key, []).append(f)
    return out


def _order(groups: list[list[_File]], job_order: str) -> list[list[_File]]:
    if job_order == "none":
        return groups
    by, direction = job_order.split("-")

    def key(g: list[_File]) -> int:
        return sum(f.data.file_size_in_bytes for f in g) if by == "bytes" else len(g)

    return sorted(groups, key=key, reverse=direction == "desc")


def _limit(groups: list[list[_File]], max_files: int | None) -> list[list[_File]]:
    if max_files is None:
        return groups
    out: list[list[_File]] = []
    left = max_files
    for g in groups:
        if left <= 0:
            break
        out.append(g[:left])
        left -= len(out[-1])
    return out


def _group(index: int, files: list[_File], output_spec_id: int, o: RewriteOptions) -> FileGroup:
    first = files[0].data
    same_spec = first.spec_id == output_spec_id
    size = sum(f.data.file_size_in_bytes for f in files)
    count = expected_output_files(
        size, o.target_file_size_bytes, o.min_file_size_bytes, o.write_max_file_size
    )
    return FileGroup(
        index=index,
        spec_id=first.spec_id if same_spec else None,
        partition=first.partition if same_spec else (),
        files=tuple(f.data for f in files),
        tasks=tuple(t for f in files for t in f.tasks),
        output_spec_id=output_spec_id,
        expected_output_files=count,
        max_output_file_size=o.write_max_file_size,
        split_size=input_split_size(size, count, o.target_file_size_bytes, o.write_max_file_size),
    )

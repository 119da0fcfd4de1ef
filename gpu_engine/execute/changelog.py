"""Changelog execution: a :class:`~gpu_engine.planning.changelog.ChangelogPlan` -> row changes, each row
with ``_change_type`` (INSERT / DELETE), ``_change_ordinal`` and ``_commit_snapshot_id`` (Spark's
changelog view columns) after the requested columns.

Reads go through the scan executor (:func:`.scan.execute`, :func:`.compare.compare`), so every delete
kind, residuals and the backend choice are the scan's; the delete files they load are kept for the next
snapshots (:mod:`.delete_cache`). Per snapshot, DELETEs come before INSERTs:

1. rows of removed files (read with the parent's deletes);
2. files whose deletes changed are read once with both snapshots' deletes (:mod:`.compare`): rows alive
   before but not after are DELETEs; positions alive after but not before are remembered;
3. rows at remembered positions (alive again, e.g. after a DV was replaced by a smaller one; their files
   are read again), then rows of added files, are INSERTs.

A snapshot that both deleted rows and added data files (a copy-on-write rewrite, an overwrite, an upsert)
may list rows it left as they were as a DELETE and an equal INSERT (carried over); with
``remove_carry_overs`` (the default, as Spark's ``create_changelog_view``) those pairs cancel, compared
on the requested data columns, or on every column of the scan schema when none is requested (only
metadata columns, or none: read for the comparison, not returned). With
``update_keys``, a key a snapshot both deleted and inserted becomes an UPDATE_BEFORE / UPDATE_AFTER pair.
With ``net_changes``, equal DELETEs and INSERTs cancel across the whole range (Spark's ``net_changes``),
compared on the same columns: what is left is exactly the difference between the range's first parent
and its last snapshot.

Memory: the positions alive again of a snapshot (8 bytes a row), plus the scans' own; the changes of
a snapshot that both deleted and added are held whole while carry-overs are removed (with update
pairing, every snapshot's), and the whole range's for net changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..backend.select import BackendChoice
from ..errors import PlanningError, UnsupportedFeature
from ..iceberg import metadata_columns as mc
from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..planning.changelog import DELETE, INSERT, ChangelogPlan, ChangeTask
from ..tasks import PlanSummary, ScanPlan, ScanTask
from .carry_over import cancel_carry_overs
from .compare import Difference, FilePair, compare
from .delete_cache import DeleteCache
from .projection import Projection, project
from .scan import execute
from .updates import pair_updates

CHANGE_FIELDS = (
    pa.field("_change_type", pa.string(), nullable=False),
    pa.field("_change_ordinal", pa.int32(), nullable=False),
    pa.field("_commit_snapshot_id", pa.int64(), nullable=False),
)
_KEYS = ((mc.FILE.name, mc.HIDDEN_FILE), (mc.POS.name, mc.HIDDEN_POS))  # (public, hidden) names


@dataclass
class ChangelogRun:
    """What an execution did: the backend chosen (with why) and the rows it emitted per change type."""

    plan: ChangelogPlan
    projection: Projection
    backend: BackendChoice | None = None
    rows: dict[str, int] = field(default_factory=lambda: {INSERT: 0, DELETE: 0})  # by _change_type

    @property
    def arrow_schema(self) -> pa.Schema:
        return changelog_schema(self.projection)


def changelog_schema(projection: Projection) -> pa.Schema:
    return pa.schema([*projection.arrow_schema, *CHANGE_FIELDS])


def execute_changelog(
    md: TableMetadata,
    io: FileIO,
    plan: ChangelogPlan,
    columns: Sequence[str] | None,
    *,
    backend: str = "auto",
    case_sensitive: bool = True,
    workers: int | None = None,
    remove_carry_overs: bool = True,
    update_keys: Sequence[str] = (),
    net_changes: bool = False,
    delete_cache: DeleteCache | None = None,
) -> tuple[ChangelogRun, Iterator[pa.RecordBatch]]:
    """The run record and the stream of change batches (see the module doc); ``remove_carry_overs``:
    cancel the rows a rewriting snapshot deleted and inserted unchanged (:mod:`.carry_over`);
    ``update_keys``: pair each snapshot's DELETE and INSERT of a key into an update (:mod:`.updates`);
    ``net_changes``: only the range's net changes (not with ``update_keys``); ``delete_cache``: where the
    delete files loaded are kept (default: a new cache for this changelog).

    Rows compare (carry-overs, net changes) on the requested data columns; when ``columns`` names none
    (``[]``, or metadata columns only), on every column of the scan schema, read for the comparison and
    dropped from the output, so such a changelog has as many rows of each kind as one of every column.
    Spark's ``create_changelog_view`` compares on all the view's columns, which are all the table's
    (its ``identifier_columns`` only pair updates, and are required for that): a projection without
    data columns then gives the counts of Spark's view. Update keys must be among the requested columns.
    """
    out = project(md, plan.schema, columns, case_sensitive=case_sensitive)
    data_columns = tuple(n for n in out.names if n not in out.metadata_names)
    keys = key_columns(update_keys, data_columns, case_sensitive)
    if net_changes and keys:
        raise UnsupportedFeature("net changes cannot be paired into updates: choose one of the two")
    wide = out
    if not data_columns and (remove_carry_overs or net_changes):
        wide = _with_every_column(out)
    compared = tuple(n for n in wide.names if n not in wide.metadata_names)
    post = _Post(remove_carry_overs, compared, keys, net_changes)
    run = ChangelogRun(plan, out)
    kept = DeleteCache() if delete_cache is None else delete_cache  # consecutive snapshots share most

    def read(tasks: Iterable[ScanTask], projection: Projection) -> Iterator[pa.RecordBatch]:
        scan_plan = ScanPlan(plan.schema, plan.filter, tuple(tasks), PlanSummary(snapshot_id=None))
        scan, batches = execute(
            md, io, scan_plan, projection, backend=backend, case_sensitive=case_sensitive, workers=workers,
            delete_cache=kept,
        )  # fmt: skip
        run.backend = run.backend or scan.backend
        return batches

    def differences(pairs: Sequence[FilePair], projection: Projection) -> Iterator[Difference]:
        choice, found = compare(
            md, io, plan.schema, pairs, projection, backend=backend, case_sensitive=case_sensitive,
            workers=workers, delete_cache=kept,
        )  # fmt: skip
        run.backend = run.backend or choice
        return found

    keyed, located_by = _with_keys(md, wide)
    return run, _stream(plan, run, out, _Reads(read, differences, wide, keyed, located_by), post)


@dataclass(frozen=True)
class _Reads:
    read: Callable[[Iterable[ScanTask], Projection], Iterator[pa.RecordBatch]]
    compare: Callable[[Sequence[FilePair], Projection], Iterator[Difference]]
    wide: Projection  # the output columns, plus every data column when they are compared but not returned
    keyed: Projection  # ``wide`` plus _file and _pos (hidden names unless ``wide`` has the metadata columns)
    located_by: tuple[str, str]  # the names ``keyed`` gives the metadata columns _file and _pos


def key_columns(keys: Sequence[str], data_columns: Sequence[str], case_sensitive: bool) -> tuple[str, ...]:
    """``keys`` as the changelog's data columns they name (by any case unless ``case_sensitive``, as the
    columns and the filter resolve)."""
    named = {(c if case_sensitive else c.lower()): c for c in data_columns}
    missing = [k for k in keys if (k if case_sensitive else k.lower()) not in named]
    if missing:
        raise UnsupportedFeature(
            f"identifier columns {missing} are not among the changelog's data columns {list(data_columns)}: "
            "updates are paired on top-level columns the changelog returns"
        )
    return tuple(named[k if case_sensitive else k.lower()] for k in keys)


def _with_every_column(out: Projection) -> Projection:
    """``out`` (no data columns) followed by every column of its scan schema."""
    every = out.scan_schema
    return replace(out, data=every, names=(*out.names, *(f.name for f in every.fields)))


def _with_keys(md: TableMetadata, out: Projection) -> tuple[Projection, tuple[str, str]]:
    """``out`` with the metadata columns _file and _pos that locate its rows, and their names there:
    those ``out`` already returns (under the metadata name, or the hidden one), else added under their
    hidden names (the two would share a field id; a table column called ``_file`` or ``_pos`` is no
    metadata column and does not stand in for one)."""
    metadata, names, located_by = list(out.metadata), list(out.names), []
    for public, hidden in _KEYS:
        present = [n for n in (hidden, public) if n in out.metadata_names]
        if present:
            located_by.append(present[0])
        else:
            metadata.append(mc.field(md, hidden))
            names.append(hidden)
            located_by.append(hidden)
    keyed = replace(out, metadata=tuple(metadata), names=tuple(names))
    return keyed, (located_by[0], located_by[1])


def _stream(
    plan: ChangelogPlan, run: ChangelogRun, out: Projection, reads: _Reads, post: _Post
) -> Iterator[pa.RecordBatch]:
    schema = changelog_schema(reads.wide)
    batches = _by_snapshot(plan, reads, post, schema)
    if post.net_changes:
        batches = _net(batches, schema, post.compared)
    returned = changelog_schema(out).names
    for batch in batches:
        if batch.num_rows:
            if reads.wide is not out:  # the columns read only to compare rows dropped
                batch = batch.select(returned)
            for kind_count in pc.value_counts(batch.column(len(out.names))).to_pylist():
                kind, n = kind_count["values"], kind_count["counts"]
                run.rows[kind] = run.rows.get(kind, 0) + n
            yield batch


def _by_snapshot(
    plan: ChangelogPlan, reads: _Reads, post: _Post, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    tag = _Tagger(reads.wide, schema)
    for _, group in itertools.groupby(plan.tasks, key=lambda t: t.ordinal):
        changes = list(group)
        batches = _snapshot_changes(changes, reads, tag)
        mixed = any(not c.added for c in changes) and any(c.added for c in changes)
        carry = post.remove_carry_overs and mixed
        if carry or post.update_keys:
            carried = post.compared if carry else None
            batches = _finished(batches, schema, carried, post.update_keys, changes[0].snapshot_id)
        yield from batches


def _net(
    batches: Iterator[pa.RecordBatch], schema: pa.Schema, columns: tuple[str, ...]
) -> Iterator[pa.RecordBatch]:
    """The range's changes held in memory, equal DELETEs and INSERTs cancelled across snapshots (a row
    inserted and later deleted, or deleted and later inserted back, is no net change); the rest in
    snapshot order, each keeping its own ordinal and snapshot id."""
    deleted, inserted = _sides(batches, schema)
    deleted, inserted = cancel_carry_overs(deleted, inserted, columns)
    both = pa.concat_tables([deleted, inserted])
    order = pc.sort_indices(both, sort_keys=[("_change_ordinal", "ascending")])  # stable: DELETEs first
    yield from both.take(order).to_batches()


def _sides(batches: Iterable[pa.RecordBatch], schema: pa.Schema) -> tuple[pa.Table, pa.Table]:
    sides: dict[str, list[pa.RecordBatch]] = {DELETE: [], INSERT: []}
    for batch in batches:
        if batch.num_rows:
            sides[batch.column(schema.get_field_index("_change_type"))[0].as_py()].append(batch)
    return pa.Table.from_batches(sides[DELETE], schema=schema), pa.Table.from_batches(
        sides[INSERT], schema=schema
    )


@dataclass(frozen=True)
class _Post:
    """What happens to the changes once read: per snapshot, carry-over removal (for snapshots that both
    deleted and added) and update pairing on these identifier columns; over the range, cancellation of
    equal DELETEs and INSERTs (net changes). Rows are equal when equal on ``compared`` (the switches are
    the flags: no columns would make every row equal, not disable the work)."""

    remove_carry_overs: bool
    compared: tuple[str, ...]
    update_keys: tuple[str, ...]
    net_changes: bool = False


def _snapshot_changes(changes: list[ChangeTask], reads: _Reads, tag: _Tagger) -> Iterator[pa.RecordBatch]:
    """One snapshot's change batches, DELETEs first (see the module doc)."""
    first = changes[0]
    removed = [task for c in changes if c.removed for task in c.before]
    if removed:
        yield from tag(reads.read(removed, tag.out), DELETE, first)
    changed = [c for c in changes if c.changed]
    again: dict[str, list[np.ndarray]] = {}
    if changed:
        for diff in reads.compare([_pair(c) for c in changed], tag.out):
            yield from tag([diff.gone], DELETE, first)
            if len(diff.again):
                again.setdefault(diff.path, []).append(diff.again)
    if again:
        positions = _bitmaps(again)
        after = (t for c in changed if c.path in positions for t in c.after)
        at = _at(reads.read(after, reads.keyed), positions, reads.located_by, keep=True)
        yield from tag(at, INSERT, first)
    added = [task for c in changes if c.added for task in c.after]
    if added:
        yield from tag(reads.read(added, tag.out), INSERT, first)


def _pair(change: ChangeTask) -> FilePair:
    """The file's rows with the parent's and with the snapshot's deletes, each side as one task (both sides
    plan the same file, residual included)."""
    before, after = _whole(change.before), _whole(change.after)
    if before.residual != after.residual:
        raise PlanningError(
            f"internal: {change.path} has residual {before.residual} before snapshot {change.snapshot_id} "
            f"and {after.residual} after it"
        )
    return FilePair(before, after)


def _whole(tasks: tuple[ScanTask, ...]) -> ScanTask:
    """The tasks of one file (its splits, all with the same deletes) as one task over their bytes."""
    start = min(t.start for t in tasks)
    end = max(t.start + t.length for t in tasks)
    rows = sum(t.estimated_rows for t in tasks)
    return replace(tasks[0], start=start, length=end - start, estimated_rows=rows)


def _finished(
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    carry_over_columns: tuple[str, ...] | None,
    update_keys: tuple[str, ...],
    snapshot_id: int,
) -> Iterator[pa.RecordBatch]:
    """One snapshot's changes, held in memory: carried-over rows (equal on ``carry_over_columns``; None:
    kept) cancelled, updates paired."""
    deleted, inserted = _sides(batches, schema)
    if carry_over_columns is not None:
        deleted, inserted = cancel_carry_overs(deleted, inserted, carry_over_columns)
    updates = None
    if update_keys:
        deleted, updates, inserted = pair_updates(deleted, inserted, update_keys, snapshot_id=snapshot_id)
    yield from deleted.to_batches()
    if updates is not None:
        yield from updates.to_batches()
    yield from inserted.to_batches()


@dataclass(frozen=True)
class _Tagger:
    """Output batches: the requested columns, then the change columns."""

    out: Projection
    schema: pa.Schema

    def __call__(
        self, batches: Iterable[pa.RecordBatch], change: str, task: ChangeTask
    ) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            n = batch.num_rows
            if not n:
                continue
            columns = [batch.column(batch.schema.get_field_index(name)) for name in self.out.names]
            tags = [
                pa.array([change] * n, pa.string()),
                pa.array(np.full(n, task.ordinal, np.int32)),
                pa.array(np.full(n, task.snapshot_id, np.int64)),
            ]
            yield pa.RecordBatch.from_arrays([*columns, *tags], schema=self.schema)


def _bitmaps(positions: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """Per file, a boolean array set at the given row positions (sized by the largest)."""
    out = {}
    for path, arrays in positions.items():
        pos = np.concatenate(arrays)
        bitmap = np.zeros(int(pos.max()) + 1 if pos.size else 0, bool)
        bitmap[pos] = True
        out[path] = bitmap
    return out


def _at(
    batches: Iterator[pa.RecordBatch],
    bitmaps: dict[str, np.ndarray],
    located_by: tuple[str, str],
    *,
    keep: bool,
) -> Iterator[pa.RecordBatch]:
    """Rows of keyed batches (their file path and position in the columns ``located_by`` names) whose
    position is (``keep``) or is not set in their file's bitmap."""
    file_name, pos_name = located_by
    for batch in batches:
        files = batch.column(batch.schema.get_field_index(file_name))
        pos = batch.column(batch.schema.get_field_index(pos_name)).to_numpy(zero_copy_only=False)
        hit = np.zeros(batch.num_rows, dtype=bool)
        for path in pc.unique(files).to_pylist():
            mine = pc.equal(files, path).to_numpy(zero_copy_only=False)
            bitmap = bitmaps.get(path, np.zeros(0, bool))
            at = pos[mine]
            inside = at < len(bitmap)
            hit[mine] = inside & bitmap[np.where(inside, at, 0)] if len(bitmap) else False
        yield batch.filter(pa.array(hit if keep else ~hit))

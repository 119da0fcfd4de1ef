"""Snapshot expiration (spec "Snapshot Retention Policy"): a metadata-only commit that drops expired
snapshots, their ``snapshot-log`` entries and statistics, and refs past ``max-ref-age-ms`` (never ``main``);
after the commit lands, the files reachable only from expired snapshots are deleted.

Retention per ref: tags keep their snapshot; a branch keeps its head and the ancestors that are among its
first ``min-snapshots-to-keep`` (ref setting, else ``history.expire.min-snapshots-to-keep``, else 1; raised
to ``retain_last`` when given) or younger than its cutoff (``now - max-snapshot-age-ms`` of the ref, else
``older_than``, else ``now - history.expire.max-snapshot-age-ms`` (5 days)). Snapshots in no ref's history
expire when older than that table-level cutoff. ``older_than`` also bounds everything: a snapshot at or
after it never expires. Snapshots named by ``snapshot_ids`` expire besides, whatever their age and the
retention policies, unless a ref points at one (Java's ``expireSnapshotId``).

The commit is :func:`.metadata_commit.commit_metadata_change` (``commit.retry.*``, the catalog swap and
its failure rules; on REST catalogs ``remove-snapshots`` and ``remove-snapshot-ref`` updates, required to
apply while every ref is where it was); every attempt recomputes the expiration on the refreshed table.
Files: reachable = manifest lists, manifests and the live (added or existing) entries' files of the kept
snapshots, plus their statistics files; candidates = manifest lists, manifests and every entry's file of the
expired snapshots; candidates minus reachable are deleted. A file a kept snapshot removed (a ``DELETED``
entry) is reachable only through the expired snapshots before it, so it goes, as in Iceberg Java.
Nothing is deleted when the commit fails (but the attempt's own metadata file, when the failure is
definite). ``faults``: the producer's test hook, called with ``metadata``, ``swap`` and ``cleanup``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Collection, Iterable, Sequence, Set
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from .. import _args
from .._args import JAVA_INT_MAX, JAVA_LONG_MAX
from ..errors import GpuEngineError, InvalidOption, UnsupportedFeature, ValidationError
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifests import read_manifest
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import MAIN_BRANCH, Snapshot, SnapshotLogEntry, SnapshotRef
from ..io.fileio import FileIO, file_identity
from .entries import snapshot_manifests
from .metadata_commit import RestForm, commit_metadata_change
from .producer import delete_files
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table

_log = logging.getLogger("gpu_engine.commit")

MAX_SNAPSHOT_AGE_MS = "history.expire.max-snapshot-age-ms"
MIN_SNAPSHOTS_TO_KEEP = "history.expire.min-snapshots-to-keep"
MAX_REF_AGE_MS = "history.expire.max-ref-age-ms"
DEFAULT_MAX_SNAPSHOT_AGE_MS = 5 * 24 * 3600 * 1000
DEFAULT_MIN_SNAPSHOTS_TO_KEEP = 1
_POSITION_OR_EQUALITY = (1, 2)
_DELETED = 2  # manifest entry status


@dataclass(frozen=True)
class ExpireResult:
    """What :func:`expire_snapshots` did. ``metadata_location`` is None when nothing expired (no commit);
    ``undeleted``: files that should have been deleted but could not be."""

    expired_snapshot_ids: tuple[int, ...]
    removed_refs: tuple[str, ...]
    metadata_location: str | None
    deleted_manifest_lists: tuple[str, ...] = ()
    deleted_manifests: tuple[str, ...] = ()
    deleted_data_files: tuple[str, ...] = ()
    deleted_delete_files: tuple[str, ...] = ()
    deleted_statistics_files: tuple[str, ...] = ()
    undeleted: tuple[str, ...] = ()


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_ms(value: int | dt.datetime, what: str = "older_than") -> int:
    """Milliseconds since the epoch (an int, numpy's included, within a Java long); a naive datetime is
    read as UTC. InvalidOption naming ``what`` for anything else (a date: which zone's midnight?)."""
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)  # exact (float seconds lose a ms)
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        hint = " (give a datetime: datetime.datetime(y, m, d, tzinfo=...))" * isinstance(value, dt.date)
        raise InvalidOption(
            f"{what}={value!r}: expected milliseconds since the epoch or a datetime, "
            f"not {type(value).__name__}{hint}"
        )
    return _args.integer(value, what, InvalidOption, minimum=-JAVA_LONG_MAX - 1, maximum=JAVA_LONG_MAX)


def _retain_last(value: object) -> int:
    """``retain_last``: an integer in 1..2**31-1 (Java's ``retainLast(int)``)."""
    return _args.integer(value, "retain_last", InvalidOption, minimum=1, maximum=JAVA_INT_MAX)


def _snapshot_ids(value: object) -> list[int]:
    """``snapshot_ids`` as ints (numpy's too); InvalidOption naming the argument for a non-collection or a
    non-integer id."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidOption(f"snapshot_ids={value!r}: expected a collection of snapshot ids (ints)")
    return [_args.integer(v, "snapshot_ids item", InvalidOption) for v in value]


def _int_prop(md: TableMetadata, name: str, default: int | None) -> int | None:
    raw = md.properties.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise UnsupportedFeature(f"table property {name}={raw!r}: expected a positive integer")
    return value


@dataclass(frozen=True)
class _Plan:
    expired: tuple[Snapshot, ...]
    removed_refs: tuple[str, ...]
    kept_refs: dict[str, SnapshotRef]


def plan_expiration(
    md: TableMetadata,
    *,
    now: int,
    older_than: int | None,
    retain_last: int | None,
    snapshot_ids: Collection[int] = (),
) -> _Plan:
    """Which snapshots expire and which refs are removed (see the module doc); pure."""
    if retain_last is not None:
        retain_last = _retain_last(retain_last)
    table_age = _int_prop(md, MAX_SNAPSHOT_AGE_MS, DEFAULT_MAX_SNAPSHOT_AGE_MS)
    assert table_age is not None
    table_min = _int_prop(md, MIN_SNAPSHOTS_TO_KEEP, DEFAULT_MIN_SNAPSHOTS_TO_KEEP)
    assert table_min is not None
    table_ref_age = _int_prop(md, MAX_REF_AGE_MS, None)
    table_cutoff = older_than if older_than is not None else now - table_age
    by_id = md.snapshots_by_id

    kept_refs: dict[str, SnapshotRef] = {}
    removed: list[str] = []
    for name, ref in sorted(md.refs.items()):
        head = by_id.get(ref.snapshot_id)
        max_ref_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else table_ref_age
        if (
            name != MAIN_BRANCH
            and max_ref_age is not None
            and (head is None or now - head.timestamp_ms > max_ref_age)
        ):
            removed.append(name)
        else:
            kept_refs[name] = ref

    retained: set[int] = set()
    for ref in kept_refs.values():
        retained.add(ref.snapshot_id)
        if not ref.is_branch:
            continue
        min_keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else table_min
        if retain_last is not None:
            min_keep = max(min_keep, retain_last)
        cutoff = now - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else table_cutoff
        snap: Snapshot | None = by_id.get(ref.snapshot_id)
        count = 0
        while snap is not None and (count < min_keep or snap.timestamp_ms >= cutoff):
            retained.add(snap.snapshot_id)
            count += 1
            parent = snap.parent_snapshot_id
            snap = None if parent is None else by_id.get(parent)
    heads = {r.snapshot_id: name for name, r in kept_refs.items()}
    for sid in snapshot_ids:
        md.snapshot_by_id(sid)  # SnapshotNotFound naming it
        if sid in heads or sid == md.current_snapshot_id:
            raise ValidationError(
                f"table {md.location}: cannot expire snapshot {sid}: it is the head of "
                f"{heads.get(sid, MAIN_BRANCH)!r} (remove or move that ref first)"
            )
    # a branch's history is referenced (it expires by the branch's retention); a tag references its
    # snapshot only, as in Java's RemoveSnapshots: a tag's ancestors are unreferenced, kept while young
    in_ref_history = _ancestors(md, (r.snapshot_id for r in kept_refs.values() if r.is_branch))
    expired = []
    for s in md.snapshots:
        if s.snapshot_id in snapshot_ids:
            expired.append(s)  # named: expires whatever its age and the retention policies
            continue
        if s.snapshot_id in retained:
            continue
        if older_than is not None and s.timestamp_ms >= older_than:
            continue
        if s.snapshot_id not in in_ref_history and s.timestamp_ms >= table_cutoff:
            continue  # unreferenced snapshots expire by the table-level cutoff only
        expired.append(s)
    return _Plan(tuple(expired), tuple(removed), kept_refs)


def _ancestors(md: TableMetadata, heads: Iterable[int]) -> set[int]:
    return {sid for head in heads for sid in md.ancestor_ids(head)}


def _without(md: TableMetadata, plan: _Plan) -> TableMetadata:
    gone = {s.snapshot_id for s in plan.expired}
    refs = dict(plan.kept_refs)
    if MAIN_BRANCH not in md.snapshot_refs and set(refs) <= {MAIN_BRANCH}:
        refs.pop(MAIN_BRANCH, None)  # an implied main stays implied while no other ref is written
    return replace(
        md,
        snapshots=tuple(s for s in md.snapshots if s.snapshot_id not in gone),
        snapshot_refs=refs,
        # as Java's updateSnapshotLog: rewritten only when snapshots go (an entry of a snapshot another
        # writer removed cuts the history only then)
        snapshot_log=_log_after(md.snapshot_log, {s.snapshot_id for s in md.snapshots} - gone)
        if gone
        else md.snapshot_log,
        statistics=tuple(f for f in md.statistics if f.snapshot_id not in gone),
        partition_statistics=tuple(f for f in md.partition_statistics if f.snapshot_id not in gone),
    )


def _log_after(log: Sequence[SnapshotLogEntry], kept: Set[int]) -> tuple[SnapshotLogEntry, ...]:
    """The snapshot-log without the expired snapshots and every entry before them.

    The spec (``snapshot-log``) and Java's ``TableMetadata.Builder.updateSnapshotLog``: dropping only the
    expired entries would show the snapshot current before a gap as current through it, so time travel
    (``as_of``) into the gap would read a snapshot that was not current then.
    """
    out: list[SnapshotLogEntry] = []
    for entry in log:
        if entry.snapshot_id in kept:
            out.append(entry)
        else:
            out.clear()
    return tuple(out)


def expire_snapshots(
    table: Table,
    *,
    older_than: int | dt.datetime | None = None,
    retain_last: int | None = None,
    snapshot_ids: Collection[int] = (),
    sleep: Callable[[float], None] = time.sleep,
    faults: Faults | None = None,
) -> ExpireResult:
    """Expire snapshots of ``table`` (see the module doc); ``table`` moves to the new metadata."""
    check_gc_enabled(table.metadata, "expire snapshots")
    cutoff = None if older_than is None else to_ms(older_than)
    if retain_last is not None:  # checked before any commit is tried
        retain_last = _retain_last(retain_last)
    named = frozenset(_snapshot_ids(snapshot_ids))
    planned: list[tuple[_Plan, _Cleanup]] = []  # per attempt: what it expires, what it would delete

    def change(base: TableMetadata) -> TableMetadata | None:
        check_gc_enabled(base, "expire snapshots")
        plan = plan_expiration(  # ages by this clock, as Java's: not by a fast writer's last-updated-ms
            base, now=int(time.time() * 1000), older_than=cutoff, retain_last=retain_last,
            snapshot_ids=named,
        )  # fmt: skip
        if not plan.expired and not plan.removed_refs:
            return None
        if base.current_snapshot_id in {s.snapshot_id for s in plan.expired}:
            raise ValidationError(f"table {base.location}: refusing to expire the current snapshot")
        new = _without(base, plan)
        # read before committing: a kept manifest list or manifest that cannot be read refuses the
        # expiration with nothing committed (read after it, the error came once it had landed)
        planned.append((plan, _unreachable(table.io, base, new, plan)))
        return new

    committed = commit_metadata_change(
        table, change, action="expire_snapshots", faults=faults, sleep=sleep, rest=_rest_form
    )
    if committed is None:
        return ExpireResult((), (), None)
    _, location = committed
    plan, cleanup = planned[-1]
    return _delete(table.io, cleanup, plan, location, faults or (lambda stage: None))


def _rest_form(base: TableMetadata, new: TableMetadata) -> RestForm:
    """``remove-snapshot-ref`` and ``remove-snapshots`` updates, required to apply while every ref of the base
    still points where it did (else the expiration is planned again on the refreshed table)."""
    requirements: list[dict[str, Any]] = [
        {"type": "assert-ref-snapshot-id", "ref": name, "snapshot-id": ref.snapshot_id}
        for name, ref in sorted(base.snapshot_refs.items())
    ]
    kept = {s.snapshot_id for s in new.snapshots}
    gone = [s.snapshot_id for s in base.snapshots if s.snapshot_id not in kept]
    updates: list[dict[str, Any]] = [  # refs first, as Java sends them: no ref left on a removed snapshot
        {"action": "remove-snapshot-ref", "ref-name": name}
        for name in sorted(base.snapshot_refs)
        if name not in new.snapshot_refs
    ]
    if gone:
        updates.append({"action": "remove-snapshots", "snapshot-ids": gone})
    return requirements, updates


def _files_of(io: FileIO, manifests: Iterable[ManifestFile], *, live: bool) -> dict[str, int]:
    """The files of ``manifests``' entries (``live``: added or existing ones only, else any status) with
    their content type."""
    out: dict[str, int] = {}
    for m in manifests:
        resolved = replace(m, manifest_path=io.resolve(m.manifest_path))
        entries = read_manifest(resolved, open_input=io.open_input)
        if live:
            entries = entries.filter(pc.not_equal(entries.column("status"), _DELETED))
        paths = entries.column("file_path").to_pylist()
        contents = entries.column("content").to_pylist()
        out.update(zip(paths, contents, strict=True))
    return out


def _stats_paths(md: TableMetadata) -> set[str]:
    return {f.statistics_path for f in md.statistics} | {f.statistics_path for f in md.partition_statistics}


@dataclass(frozen=True)
class _Cleanup:
    """The files an expiration leaves unreachable, by kind (recorded paths)."""

    lists: list[str]
    manifests: list[str]
    data: list[str]
    deletes: list[str]
    statistics: list[str]


def _unreachable(io: FileIO, base: TableMetadata, new_md: TableMetadata, plan: _Plan) -> _Cleanup:
    """What expiring ``plan`` from ``base`` (giving ``new_md``) leaves unreachable. A kept snapshot's
    manifest list or manifest that cannot be read raises (nothing can be known reachable); an expired
    one is skipped with a warning (its files are left, for orphan removal)."""
    kept_lists: set[str] = set()
    kept_manifests: dict[str, ManifestFile] = {}
    for s in new_md.snapshots:
        if s.manifest_list is not None:
            kept_lists.add(s.manifest_list)
        kept_manifests.update((m.manifest_path, m) for m in snapshot_manifests(io, s))
    expired_lists: set[str] = set()
    expired_manifests: dict[str, ManifestFile] = {}
    for s in plan.expired:
        if s.manifest_list is not None:
            expired_lists.add(s.manifest_list)
        try:
            manifests = snapshot_manifests(io, s)
        except (OSError, GpuEngineError) as exc:  # a broken expired snapshot: delete what is known
            _log.warning("expire: cannot read the manifests of snapshot %d: %s", s.snapshot_id, exc)
            continue
        expired_manifests.update((m.manifest_path, m) for m in manifests)
    only_expired = {p: m for p, m in expired_manifests.items() if p not in kept_manifests}
    candidates: dict[str, int] = {}
    for path, m in only_expired.items():
        try:
            candidates.update(_files_of(io, [m], live=False))
        except (OSError, GpuEngineError) as exc:
            _log.warning("expire: cannot read manifest %s of expired snapshots: %s", path, exc)
    # the kept manifests are read only when some file may go (Java's ReachableFileCleanup)
    reachable = _files_of(io, kept_manifests.values(), live=True) if candidates else {}
    doomed = {p: c for p, c in candidates.items() if p not in reachable}
    # statistics files are named by the engines that wrote them, each in its own spelling: one a kept
    # snapshot names in any spelling stays; one named twice is deleted once
    kept_stats = {file_identity(io, p) for p in _stats_paths(new_md)}
    stats = {file_identity(io, p): p for p in sorted(_stats_paths(base))}
    return _Cleanup(
        lists=sorted(expired_lists - kept_lists),
        manifests=sorted(only_expired),
        data=sorted(p for p, c in doomed.items() if c not in _POSITION_OR_EQUALITY),
        deletes=sorted(p for p, c in doomed.items() if c in _POSITION_OR_EQUALITY),
        statistics=sorted(p for key, p in stats.items() if key not in kept_stats),
    )


def _delete(io: FileIO, c: _Cleanup, plan: _Plan, location: str, fault: Faults) -> ExpireResult:
    left = set(delete_files(io, [*c.data, *c.deletes, *c.manifests, *c.lists, *c.statistics], fault=fault))

    def done(paths: Iterable[str]) -> tuple[str, ...]:
        return tuple(p for p in paths if p not in left)

    return ExpireResult(
        expired_snapshot_ids=tuple(s.snapshot_id for s in plan.expired),
        removed_refs=plan.removed_refs,
        metadata_location=location,
        deleted_manifest_lists=done(c.lists),
        deleted_manifests=done(c.manifests),
        deleted_data_files=done(c.data),
        deleted_delete_files=done(c.deletes),
        deleted_statistics_files=done(c.statistics),
        undeleted=tuple(sorted(left)),
    )


GC_ENABLED = "gc.enabled"


def check_gc_enabled(md: TableMetadata, action: str) -> None:
    """:class:`ValidationError` unless the table's ``gc.enabled`` is unset or true (Iceberg's guard for
    tables whose files may belong to another table, such as those made by a snapshot procedure). Any other
    value is false, as Iceberg Java reads it (``Boolean.parseBoolean``: ``0``, ``no``, `` true``)."""
    raw = md.properties.get(GC_ENABLED)
    if raw is not None and raw.lower() != "true":
        read = "" if raw.strip().lower() == "false" else " (read as false, as Iceberg Java reads it)"
        raise ValidationError(
            f"table {md.location}: cannot {action}: {GC_ENABLED}={raw!r}{read}: deleting files may corrupt "
            "other tables"
        )

"""Branches, tags and the current snapshot (spec "Snapshot References"), Iceberg's ``ManageSnapshots``:
changes to refs committed together as one metadata-only commit.

.. code-block:: python

    with tbl.manage_snapshots() as m:        # commits when the block ends without an error
        m.create_tag("eod-2026-11-25", max_ref_age_ms=30 * 86_400_000)
        m.create_branch("audit")             # at the current snapshot
    tbl.append(batch, branch="audit")        # write-audit-publish: write to the branch, check it, then
    tbl.manage_snapshots().fast_forward("main", "audit").commit()   # publish it
    tbl.manage_snapshots().rollback_to(snapshot_id).commit()        # undo a bad write (an ancestor)

Operations apply in the order they are made: ``create_branch`` / ``create_tag`` (at a snapshot, default the
current one), ``replace_ref`` (point a branch or tag elsewhere), ``remove_branch`` / ``remove_tag``
(``main`` stays), ``rollback_to`` (a branch back to one of its ancestors), ``set_current_snapshot`` (main
to any snapshot), ``fast_forward`` (a branch to another ref's head, which must descend from it; a missing
branch is created there), and the retention settings :mod:`.expire` honours (``set_retention``). Moving
``main`` moves the current snapshot and appends to the ``snapshot-log``. Every error names the ref and the
snapshot.

A lost race re-applies the operations on the refreshed table while every ref they touch is still where it
was when the update started (created refs still absent); otherwise :class:`ValidationError`. REST catalogs
get ``set-snapshot-ref`` / ``remove-snapshot-ref`` updates with an ``assert-ref-snapshot-id`` per touched
ref (``null``: must not exist).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import SnapshotNotFound, ValidationError
from ..iceberg import types as it
from ..iceberg.metadata import TableMetadata
from ..iceberg.snapshots import (
    MAIN_BRANCH,
    SnapshotLogEntry,
    SnapshotRef,
    record_to_json,
    tag_with_branch_retention,
)
from . import table_update
from .metadata_commit import MetadataUpdate, RestForm, commit_metadata_change
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table

Refs = dict[str, SnapshotRef]
_Op = Callable[[TableMetadata, Refs], None]


class InvalidRefChange(ValidationError):
    """A branch or tag change the table does not allow; names the ref."""


class RefsUpdate(MetadataUpdate):
    """Changes to ``table``'s branches and tags, committed by :meth:`commit` (see the module doc)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._base = table.metadata
        self._ops: list[_Op] = []
        self._touched: dict[str, int | None] = {}  # ref -> its snapshot id when the update started
        self._preview: Refs = dict(self._base.refs)  # the refs after the operations so far

    # -- the changes --------------------------------------------------------------------------------------

    def create_branch(
        self,
        name: str,
        snapshot_id: int | None = None,
        *,
        min_snapshots_to_keep: int | None = None,
        max_snapshot_age_ms: int | None = None,
        max_ref_age_ms: int | None = None,
    ) -> RefsUpdate:
        """A new branch at ``snapshot_id`` (default: the current snapshot), with optional retention."""
        where = f"create branch {name!r}"
        target = self._snapshot(snapshot_id, where)
        ref = SnapshotRef(target, "branch", min_snapshots_to_keep, max_snapshot_age_ms, max_ref_age_ms)
        _check_retention(ref, where)
        return self._create(name, ref, where)

    def create_tag(
        self, name: str, snapshot_id: int | None = None, *, max_ref_age_ms: int | None = None
    ) -> RefsUpdate:
        """A new tag at ``snapshot_id`` (default: the current snapshot), kept ``max_ref_age_ms`` when set."""
        where = f"create tag {name!r}"
        if name == MAIN_BRANCH:
            raise InvalidRefChange(
                f"{where}: 'main' is the table's current branch; a tag cannot take its name"
            )
        ref = SnapshotRef(self._snapshot(snapshot_id, where), "tag", max_ref_age_ms=max_ref_age_ms)
        _check_retention(ref, where)
        return self._create(name, ref, where)

    def remove_branch(self, name: str) -> RefsUpdate:
        """Remove branch ``name`` (not ``main``); its snapshots go with the next expiration."""
        return self._remove(name, "branch")

    def remove_tag(self, name: str) -> RefsUpdate:
        """Remove tag ``name``."""
        return self._remove(name, "tag")

    def replace_ref(self, name: str, snapshot_id: int) -> RefsUpdate:
        """Point branch or tag ``name`` at ``snapshot_id`` (any snapshot; its retention stays)."""
        where = f"replace {name!r}"
        self._existing(name, None, where)
        snapshot_id = self._snapshot(snapshot_id, where)  # the table's int (a numpy id is no JSON)
        self._add(lambda md, refs: _move(refs, name, snapshot_id))
        return self

    def rollback_to(self, snapshot_id: int, branch: str = MAIN_BRANCH) -> RefsUpdate:
        """Move ``branch`` back to ``snapshot_id``, which must be one of its ancestors."""
        where = f"roll back branch {branch!r} to snapshot {snapshot_id}"
        self._existing(branch, "branch", where)
        snapshot_id = self._snapshot(snapshot_id, where)

        def op(md: TableMetadata, refs: Refs) -> None:
            if snapshot_id not in md.ancestor_ids(refs[branch].snapshot_id):
                raise InvalidRefChange(
                    f"{where}: not an ancestor of the branch's head {refs[branch].snapshot_id} "
                    "(set_current_snapshot or replace_ref move it anywhere)"
                )
            _move(refs, branch, snapshot_id)

        self._add(op)
        return self

    def set_current_snapshot(self, snapshot_id: int) -> RefsUpdate:
        """Make ``snapshot_id`` (any snapshot of the table) the current snapshot: the head of ``main``."""
        where = f"set the current snapshot to {snapshot_id}"
        snapshot_id = self._snapshot(snapshot_id, where)
        self._touch(MAIN_BRANCH)
        self._add(lambda md, refs: _move(refs, MAIN_BRANCH, snapshot_id, create=True))
        return self

    def fast_forward(self, branch: str, to: str) -> RefsUpdate:
        """Move ``branch`` to the head of ref ``to``, which must descend from ``branch``'s head; a branch the
        table lacks is created there (as Iceberg Java >= 1.5: publishing the first audited write of a new
        table creates ``main``)."""
        where = f"fast-forward branch {branch!r} to {to!r}"
        if branch in self._preview:
            self._existing(branch, "branch", where)
        else:
            self._touch(branch)  # created: it must still be absent when the commit lands
        self._existing(to, None, where)

        def op(md: TableMetadata, refs: Refs) -> None:
            target = refs[to].snapshot_id
            if branch not in refs:
                refs[branch] = SnapshotRef(target, "branch")
                return
            head = refs[branch].snapshot_id
            if head not in md.ancestor_ids(target):
                raise InvalidRefChange(
                    f"{where}: {to!r} (snapshot {target}) does not descend from {branch!r} (snapshot {head})"
                )
            _move(refs, branch, target)

        self._add(op)
        return self

    def set_retention(
        self,
        name: str,
        *,
        min_snapshots_to_keep: int | None = None,
        max_snapshot_age_ms: int | None = None,
        max_ref_age_ms: int | None = None,
    ) -> RefsUpdate:
        """Set the retention settings given of branch or tag ``name`` (a tag takes ``max_ref_age_ms``)."""
        where = f"set retention of {name!r}"
        given = (min_snapshots_to_keep, max_snapshot_age_ms, max_ref_age_ms)
        _check_retention(_with_retention(self._existing(name, None, where), *given), where)

        def op(md: TableMetadata, refs: Refs) -> None:
            refs[name] = _with_retention(refs[name], *given)

        self._add(op)
        return self

    # -- applying and committing ----------------------------------------------------------------------------

    def apply(self, base: TableMetadata | None = None) -> TableMetadata:
        """``base`` (default: the metadata the update started from) with the changes (not committed)."""
        md = self._base if base is None else base
        refs = dict(md.refs)
        for name, started in self._touched.items():
            now = refs[name].snapshot_id if name in refs else None
            if now != started:
                raise ValidationError(
                    f"table {md.location}: ref {name!r} moved (from {started} to {now}) since this update "
                    "started: build it again"
                )
        for op in self._ops:
            op(md, refs)
        for name, ref in sorted(refs.items()):  # a snapshot named when the update started may be gone
            if md.refs.get(name) != ref and ref.snapshot_id not in md.snapshots_by_id:
                raise ValidationError(
                    f"table {md.location}: ref {name!r} would point at snapshot {ref.snapshot_id}, which the "
                    "table no longer has (expired since this update started?)"
                )
        return _with_refs(md, refs)

    def commit(self, *, faults: Faults | None = None) -> TableMetadata:
        """Commit the changes; the table's metadata after them."""

        def change(base: TableMetadata) -> TableMetadata | None:
            new = self.apply(base)
            return None if new.refs == base.refs else new

        def rest(base: TableMetadata, new: TableMetadata) -> RestForm:
            requirements = [
                {"type": "assert-ref-snapshot-id", "ref": name, "snapshot-id": started}
                for name, started in sorted(self._touched.items())
            ]
            updates: list[dict[str, Any]] = []
            for name in sorted(base.refs.keys() - new.refs.keys()):
                updates.append({"action": "remove-snapshot-ref", "ref-name": name})
            for name, ref in sorted(new.refs.items()):
                if base.refs.get(name) != ref:
                    updates.append({"action": "set-snapshot-ref", "ref-name": name, **record_to_json(ref)})
            return requirements, updates

        commit_metadata_change(self._table, change, action="manage_snapshots", faults=faults, rest=rest)
        return self._table.metadata

    # -- helpers --------------------------------------------------------------------------------------------

    def _snapshot(self, snapshot_id: int | None, where: str) -> int:
        if snapshot_id is None:
            if self._base.current_snapshot_id is None:
                raise InvalidRefChange(f"{where}: the table has no current snapshot; name one")
            return self._base.current_snapshot_id
        try:
            return self._base.snapshot_by_id(snapshot_id).snapshot_id
        except SnapshotNotFound as exc:
            raise InvalidRefChange(f"{where}: {exc}") from None

    def _add(self, op: _Op) -> None:
        """Check ``op`` on the refs after the operations so far, then keep it."""
        op(self._base, self._preview)
        self._ops.append(op)

    def _touch(self, name: str) -> None:
        if name not in self._touched:
            ref = self._base.refs.get(name)
            self._touched[name] = None if ref is None else ref.snapshot_id

    def _create(self, name: str, ref: SnapshotRef, where: str) -> RefsUpdate:
        if not isinstance(name, str) or not name:
            raise InvalidRefChange(f"{where}: the name must be a non-empty string")
        self._touch(name)

        def op(md: TableMetadata, refs: Refs) -> None:
            if name in refs:
                raise InvalidRefChange(f"{where}: a {refs[name].type} of that name exists")
            refs[name] = ref

        self._add(op)
        return self

    def _remove(self, name: str, kind: str) -> RefsUpdate:
        where = f"remove {kind} {name!r}"
        if name == MAIN_BRANCH:
            raise InvalidRefChange(f"{where}: the main branch cannot be removed")
        self._existing(name, kind, where)

        def op(md: TableMetadata, refs: Refs) -> None:
            del refs[name]

        self._add(op)
        return self

    def _existing(self, name: str, kind: str | None, where: str) -> SnapshotRef:
        ref = self._preview.get(name)
        if ref is None:
            raise InvalidRefChange(
                f"{where}: the table has no branch or tag {name!r} ({sorted(self._preview)})"
            )
        if kind is not None and ref.type != kind:
            raise InvalidRefChange(f"{where}: {name!r} is a {ref.type}, not a {kind}")
        self._touch(name)
        return ref


def _move(refs: Refs, name: str, snapshot_id: int, *, create: bool = False) -> None:
    if name not in refs:
        if not create:
            raise InvalidRefChange(f"ref {name!r}: removed earlier in this update")
        refs[name] = SnapshotRef(snapshot_id, "branch")
        return
    refs[name] = replace(refs[name], snapshot_id=snapshot_id)


def _with_retention(
    ref: SnapshotRef,
    min_snapshots_to_keep: int | None,
    max_snapshot_age_ms: int | None,
    max_ref_age_ms: int | None,
) -> SnapshotRef:
    """``ref`` with the retention settings given (not None) replaced."""
    return replace(
        ref,
        min_snapshots_to_keep=ref.min_snapshots_to_keep
        if min_snapshots_to_keep is None
        else min_snapshots_to_keep,
        max_snapshot_age_ms=ref.max_snapshot_age_ms if max_snapshot_age_ms is None else max_snapshot_age_ms,
        max_ref_age_ms=ref.max_ref_age_ms if max_ref_age_ms is None else max_ref_age_ms,
    )


def _check_retention(ref: SnapshotRef, where: str) -> None:
    if tag_with_branch_retention(ref):
        raise InvalidRefChange(f"{where}: a tag takes max_ref_age_ms only")
    for key in ("min_snapshots_to_keep", "max_snapshot_age_ms", "max_ref_age_ms"):
        value = getattr(ref, key)
        top = it.INT_RANGE[1] if key == "min_snapshots_to_keep" else it.LONG_RANGE[1]  # Java int / long
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= top
        ):
            raise InvalidRefChange(f"{where}: {key} must be a positive integer up to {top}, not {value!r}")


def _with_refs(md: TableMetadata, refs: Refs) -> TableMetadata:
    """``md`` with ``refs``; a moved ``main`` moves the current snapshot and logs it."""
    main = refs.get(MAIN_BRANCH)
    current = None if main is None else main.snapshot_id
    changes: dict[str, Any] = {"snapshot_refs": refs}
    if current is not None and current != md.current_snapshot_id:
        changes["current_snapshot_id"] = current
        changes["snapshot_log"] = (*md.snapshot_log, SnapshotLogEntry(table_update.now_ms(md), current))
    return replace(md, **changes)

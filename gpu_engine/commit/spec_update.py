"""Partition evolution (spec "Partition Evolution"), Iceberg's ``UpdatePartitionSpec``: fields added, removed
or renamed, committed together as the table's new default spec. Files already written keep their spec;
new writes (and compaction output, by default) use the new one.

.. code-block:: python

    with tbl.update_spec() as update:        # commits when the block ends without an error
        update.add_field("bucket(16, id)")    # named id_bucket; forms of commit.spec_parse
        update.add_field("day(ts)", name="day")
        update.remove_field("region")         # by partition field name
        update.rename_field("ts_day", "day")

As Iceberg Java's ``BaseUpdatePartitionSpec``: a field whose (source, transform) an earlier spec had gets
that field's id back (v2+, when no other name is asked for, and while no field of the new spec holds the id),
others take ids after ``last-partition-id``. A format version 1 spec keeps its fields in order, so a removed
field becomes a ``void`` field there; a void field whose name a new or renamed field takes is renamed
``<name>_<field id>``. Removing a field and adding it back in one update leaves it as it was (renamed when
a new name is given). A field whose (source, transform) the spec has already, or two time transforms
(year, month, day, hour) of one source added together, are refused. The new spec reuses the id of an equal
earlier spec, else takes the next id. As for schema updates, a lost race re-applies the update only while
the table's default spec is still the one it started from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedTransform, ValidationError
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import PartitionField, PartitionSpec, spec_to_json
from .metadata_commit import MetadataUpdate, RestForm, commit_metadata_change, require_unchanged
from .spec_parse import TIME_TRANSFORMS, added_field_name, parse_partition_field
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table


class InvalidSpecChange(ValidationError):
    """A partition spec change the spec or the table does not allow; names the field."""


@dataclass(frozen=True)
class _Added:
    source_id: int
    transform: str
    name: str
    text: str
    named: bool  # the caller gave the name


class SpecUpdate(MetadataUpdate):
    """Changes to ``table``'s default partition spec, committed by :meth:`commit` (see the module doc)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._base = table.metadata
        self._spec = self._base.spec
        self._adds: list[_Added] = []
        self._removes: set[int] = set()  # field ids
        self._renames: dict[int, str] = {}

    def add_field(self, text: str, *, name: str | None = None) -> SpecUpdate:
        """Partition new writes by ``text`` too (``"bucket(16, id)"``, ``"day(ts)"``, ``"region"``)."""
        where = f"add partition field {text!r}"
        try:
            transform, source, _ = parse_partition_field(text, self._base.schema)
        except UnsupportedTransform as exc:
            raise InvalidSpecChange(str(exc)) from None
        same = [f for f in self._spec.fields if (f.source_id, f.transform) == (source.field_id, transform)]
        if same and same[0].field_id in self._removes:  # removed and added back: as it was
            self._removes.discard(same[0].field_id)
            if name is not None and name != self._current_name(same[0]):
                self.rename_field(self._current_name(same[0]), name)
            return self
        added = [(a.source_id, a.transform) for a in self._adds]
        if same or (source.field_id, transform) in added:
            raise InvalidSpecChange(f"{where}: the spec has this field already")
        if transform in TIME_TRANSFORMS and any(
            s == source.field_id and t in TIME_TRANSFORMS for s, t in added
        ):
            raise InvalidSpecChange(f"{where}: a time transform of {source.name!r} is added already")
        earlier = self._historical(source.field_id, transform, name)
        default_name = added_field_name(transform, self._base.schema.names_by_id[source.field_id])
        free = earlier is not None and earlier.field_id not in {f.field_id for f in self._spec.fields}
        chosen = (
            name if name is not None else (earlier.name if earlier is not None and free else default_name)
        )
        self._check_name(chosen, where, source.field_id if transform == "identity" else None)
        self._adds.append(_Added(source.field_id, transform, chosen, text, name is not None))
        return self

    def remove_field(self, name: str) -> SpecUpdate:
        """Stop partitioning new writes by the field called ``name``."""
        f = self._find(name, f"remove partition field {name!r}")
        self._removes.add(f.field_id)
        return self

    def rename_field(self, name: str, new_name: str) -> SpecUpdate:
        """Rename the partition field ``name``."""
        where = f"rename partition field {name!r} to {new_name!r}"
        f = self._find(name, where)
        self._check_name(new_name, where, f.source_id if f.transform == "identity" else None)
        self._renames[f.field_id] = new_name
        return self

    def apply(self) -> PartitionSpec:
        """The new spec (not committed)."""
        md = self._base
        fields: list[PartitionField] = []
        for f in self._spec.fields:
            renamed = replace(f, name=self._current_name(f))
            if f.field_id not in self._removes:
                fields.append(renamed)
            elif md.format_version == 1:  # v1 specs keep their fields: a removed one yields null
                fields.append(replace(renamed, transform="void"))
        # past every spec's field ids too: metadata whose last-partition-id lags one (another writer's
        # slip) would otherwise give a new field an id a field holds
        next_id = max([md.last_partition_id, *(f.field_id for s in md.specs.values() for f in s.fields)])
        for a in self._adds:
            taken = {f.field_id for f in fields}
            field_id = self._recycled(a) if md.format_version >= 2 else None
            if field_id is None or field_id in taken:  # ids are unique within a spec
                next_id += 1
                field_id = next_id
            fields.append(PartitionField((a.source_id,), field_id, a.name, a.transform))
        return _numbered(PartitionSpec(0, tuple(fields)), md)

    def commit(self, *, faults: Faults | None = None) -> PartitionSpec:
        """Commit the new spec as the table's default spec; the committed spec."""
        built = self.apply()

        def change(base: TableMetadata) -> TableMetadata | None:
            require_unchanged(base, "partition spec", base.default_spec_id, self._base.default_spec_id)
            # field ids were assigned from the base's last-partition-id: another writer's may have taken them
            require_unchanged(base, "last partition id", base.last_partition_id, self._base.last_partition_id)
            spec = _numbered(built, base)  # numbered again: another writer may have added specs since
            if spec.spec_id == base.default_spec_id:
                return None
            for f in spec.fields:  # another writer may have dropped a source column since it was built
                if f.transform != "void" and any(i not in base.schema.by_id for i in f.source_ids):
                    raise ValidationError(
                        f"update_spec on {base.location}: partition field {f.name!r} ({f.transform}) has no "
                        "source column in the table's schema any more (it changed since this update was "
                        "built)"
                    )
            known = spec.spec_id in base.specs
            ids = [f.field_id for f in spec.fields]
            return replace(
                base,
                partition_specs=base.partition_specs if known else (*base.partition_specs, spec),
                default_spec_id=spec.spec_id,
                last_partition_id=max([base.last_partition_id, *ids]),
            )

        def rest(base: TableMetadata, new: TableMetadata) -> RestForm:
            requirements = [
                {"type": "assert-default-spec-id", "default-spec-id": base.default_spec_id},
                {
                    "type": "assert-last-assigned-partition-id",
                    "last-assigned-partition-id": base.last_partition_id,
                },
                # the schema its fields' sources were found in stays
                {"type": "assert-current-schema-id", "current-schema-id": base.current_schema_id},
            ]
            spec = new.specs[new.default_spec_id]
            added = spec.spec_id not in base.specs
            updates: list[dict[str, Any]] = (
                [{"action": "add-spec", "spec": spec_to_json(spec)}] if added else []
            )
            updates.append({"action": "set-default-spec", "spec-id": -1 if added else spec.spec_id})
            return requirements, updates

        commit_metadata_change(self._table, change, action="update_spec", faults=faults, rest=rest)
        return self._table.metadata.spec  # as committed (a REST server numbers it)

    def _find(self, name: str, where: str) -> PartitionField:
        for f in self._spec.fields:
            if self._renames.get(f.field_id, f.name) == name and f.field_id not in self._removes:
                return f
        names = [f.name for f in self._spec.fields]
        raise InvalidSpecChange(f"{where}: spec {self._spec.spec_id} has no such field (fields: {names})")

    def _current_name(self, f: PartitionField) -> str:
        return self._renames.get(f.field_id, f.name)

    def _check_name(self, name: str, where: str, identity_of: int | None) -> None:
        """``name`` is free in the new spec, and a column's name only for that column's identity field
        (``identity_of``: the source id when the field is an identity). A void field, or one removed in this
        update, holding it is renamed ``<name>_<field id>``, as Java does."""
        if not isinstance(name, str) or not name:
            raise InvalidSpecChange(f"{where}: the field name must be a non-empty string, not {name!r}")
        holders = [f for f in self._spec.fields if self._current_name(f) == name]
        live = [f for f in holders if f.transform != "void" and f.field_id not in self._removes]
        if live or name in {a.name for a in self._adds}:
            raise InvalidSpecChange(f"{where}: the spec has a field named {name!r} already")
        column = self._base.schema.ids_by_name.get(name)
        if column is not None and column != identity_of:
            raise InvalidSpecChange(
                f"{where}: {name!r} is a column name (only its identity field may take it)"
            )
        for f in holders:  # void or removed: it gives the name up
            self._renames[f.field_id] = f"{name}_{f.field_id}"

    def _recycled(self, a: _Added) -> int | None:
        """The id an earlier spec gave (source, transform), if any; a name asked for must be its name."""
        earlier = self._historical(a.source_id, a.transform, a.name if a.named else None)
        return None if earlier is None else earlier.field_id

    def _historical(self, source_id: int, transform: str, name: str | None) -> PartitionField | None:
        """The field an earlier spec had for (source, transform), under ``name`` when one is asked for (Java's
        ``recycleOrCreatePartitionField``: without a name the field comes back with its id and its name)."""
        for s in self._base.partition_specs:
            for f in s.fields:
                if (f.source_id, f.transform) == (source_id, transform) and (name is None or f.name == name):
                    return f
        return None


def _numbered(spec: PartitionSpec, md: TableMetadata) -> PartitionSpec:
    """``spec`` with the id of an equal spec of ``md``, else the next free id."""
    for old in md.partition_specs:
        if replace(old, spec_id=0) == replace(spec, spec_id=0):
            return old
    return replace(spec, spec_id=max(s.spec_id for s in md.partition_specs) + 1)

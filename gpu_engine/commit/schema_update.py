"""Schema evolution (spec "Schema Evolution"), Iceberg's ``UpdateSchema``: columns added, renamed, deleted,
promoted or made optional, committed together as the table's new current schema.

.. code-block:: python

    with tbl.update_schema() as update:      # commits when the block ends without an error
        update.add_column("price", "decimal(10, 2)", doc="list price")
        update.add_column(("location", "zone"), "string")          # into the struct ``location``
        update.rename_column("name", "full_name")
        update.update_column("count", "long")                      # int -> long
        update.delete_column("legacy")
        update.move_after("price", "full_name")                     # column order within a struct
        update.set_identifier_fields("id")                          # the row key (equality deletes)
        update.union_by_name(arrow_schema)                          # add what it has and the table lacks

Columns are named by their full path in the schema the update started from (a dotted string, or a tuple
when names hold dots); list elements and map keys and values as ``xs.element``, ``m.key``, ``m.value``:
an element or a value can be promoted or made optional, a map key cannot change. New columns get fresh
ids after the table's ``last-column-id``, nested ones too; a required column or a default
(``initial-default`` and ``write-default``) needs format version 3. A column that a partition field or
the sort order uses cannot be deleted, nor one of the identifier fields unless they are set anew; a
promotion that would change a partition value (date to timestamp under an identity or bucket partition
field; year, month and day agree) is refused. Identifier fields are named
in the new schema and must be required primitive columns (not float or double) nested only in required
structs. Each change is checked when it is made (identifier fields when the schema is built) and every
error names the column. The new schema reuses the id of an equal earlier schema, else takes the next
id; ``schema.name-mapping.default`` gets renamed columns' new names (old names kept, for files without
field ids) and the added columns.

The update is re-applied on the refreshed table after a lost race, as long as the table's current schema is
still the one it started from; otherwise it fails with :class:`ValidationError` (build it again).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from ..errors import InvalidType, ValidationError
from ..iceberg import types as it
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import (
    NAME_MAPPING_PROPERTY,
    MappedField,
    NameMapping,
    mapping_for_schema,
    name_mapping_of,
    name_mapping_to_json,
)
from ..iceberg.schema import (
    Schema,
    check_format_version,
    check_lineage_names,
    children_by_parent,
    identifier_field_problem,
    schema_to_json,
    unstored_struct,
)
from .column_default import default_json
from .metadata_commit import MetadataUpdate, RestForm, commit_metadata_change, require_unchanged
from .schema_changes import (
    InvalidSchemaChange,
    Move,
    MoveKind,
    SchemaChanges,
    column_properties_after,
    fresh,
    ids_in,
    rebuild,
)
from .schema_from_arrow import arrow_type_to_iceberg, schema_from_arrow
from .schema_union import union_fields
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table

__all__ = ["ColumnPath", "InvalidSchemaChange", "SchemaUpdate", "TypeLike"]

ColumnPath: TypeAlias = str | Sequence[str]
TypeLike: TypeAlias = str | it.IcebergType | pa.DataType

_SAME_FOR_DATE_AND_TIMESTAMP = frozenset({"year", "month", "day", "void"})


def numbered(schema: Schema, md: TableMetadata) -> Schema:
    """``schema`` with the id of an equal schema of ``md`` (identifier fields compared as a set, as Java's
    Schema.sameSchema), else the next free id (Java's TableMetadata.Builder.addSchema)."""
    for old in md.schemas:
        if _same_schema(old, schema):
            return old
    return replace(schema, schema_id=max(s.schema_id for s in md.schemas) + 1)


def _same_schema(a: Schema, b: Schema) -> bool:
    return a.fields == b.fields and set(a.identifier_field_ids) == set(b.identifier_field_ids)


class SchemaUpdate(MetadataUpdate):
    """Changes to ``table``'s current schema, committed by :meth:`commit` (see the module doc)."""

    def __init__(self, table: Table, *, case_sensitive: bool = True) -> None:
        self._table = table
        self._base = table.metadata
        self._schema = self._base.schema
        self._case_sensitive = case_sensitive
        self._c = SchemaChanges(next_id=self._base.last_column_id)
        self._roles = _roles(self._schema)  # list elements, map keys and values: their role
        self._frozen = _in_map_keys(self._schema)

    @property
    def format_version(self) -> int:
        """The table's format version (what the changes may use)."""
        return self._base.format_version

    # -- the changes --------------------------------------------------------------------------------------

    def add_column(
        self,
        path: ColumnPath,
        type: TypeLike,
        *,
        required: bool = False,
        doc: str | None = None,
        default: Any = None,
    ) -> SchemaUpdate:
        """Add a column at ``path`` (its parent must be a struct); ``default`` (v3): the value rows written
        before, and rows written without it, read."""
        names = _split(path)
        where = f"add column {'.'.join(names)!r}"
        _check_doc(doc, where)
        parent_id = 0 if len(names) == 1 else self._struct_id(names[:-1], where)
        name = names[-1]
        if not name:
            raise InvalidSchemaChange(f"{where}: empty column name")
        if self._sibling_named(parent_id, name) is not None:
            raise InvalidSchemaChange(f"{where}: the column exists already")
        held = _find(self._schema, names, self._case_sensitive)  # a base column renamed in this update
        if held is not None and held not in self._c.deletes:
            raise InvalidSchemaChange(f"{where}: the column exists already (renamed in this update)")
        version = self._base.format_version
        if (required or default is not None) and version < 3:
            raise InvalidSchemaChange(
                f"{where}: a required column or a default needs format version 3 (initial-default); "
                f"the table is version {version}"
            )
        if required and default is None:
            raise InvalidSchemaChange(f"{where}: a required column needs a default for the existing rows")
        ids = iter(range(self._c.next_id + 1, 1 << 31))
        field_id = next(ids)
        new_type = fresh(_as_type(type, where), ids)
        defaults: dict[str, Any] = {}
        if default is not None:
            value = default_json(new_type, default, where)
            defaults = dict(initial_default=value, write_default=value, has_initial_default=True)
            defaults["has_write_default"] = True
        added = it.NestedField(field_id, name, new_type, required, doc, **defaults)
        self._c.next_id = max([field_id, *ids_in(new_type)])
        self._c.adds.setdefault(parent_id, []).append(added)
        return self

    def rename_column(self, path: ColumnPath, new_name: str) -> SchemaUpdate:
        """Rename the column at ``path`` (its field id, and so its data, stay)."""
        f = self._field(path, "rename column")
        where = f"rename column {self._name(f)!r} to {new_name!r}"
        if f.field_id in self._roles:
            raise InvalidSchemaChange(f"{where}: a {self._roles[f.field_id]} is named by its place")
        if not isinstance(new_name, str) or not new_name:
            raise InvalidSchemaChange(f"{where}: the new name must be a non-empty string")
        clash = self._sibling_named(self._parent_id(f.field_id), new_name)
        if clash is not None and clash != f.field_id:
            raise InvalidSchemaChange(f"{where}: a column of that name exists already")
        self._c.renames[f.field_id] = new_name
        return self

    def delete_column(self, path: ColumnPath) -> SchemaUpdate:
        """Delete the column at ``path`` (and what it contains)."""
        f = self._field(path, "delete column")
        where = f"delete column {self._name(f)!r}"
        if f.field_id in self._roles:
            raise InvalidSchemaChange(f"{where}: a {self._roles[f.field_id]} cannot be deleted")
        doomed = {f.field_id, *ids_in(f.type)}
        user = _user_of(self._base, doomed)
        if user is not None:
            raise InvalidSchemaChange(f"{where}: {user} uses it")
        updated = (self._c.renames, self._c.types, self._c.docs, self._c.optional)
        if any(f.field_id in change for change in updated):  # Java: "Cannot delete a column that has updates"
            raise InvalidSchemaChange(f"{where}: it is renamed or updated in this update")
        if doomed & (self._c.moved() | set(self._c.adds)):
            raise InvalidSchemaChange(f"{where}: columns in it are moved or added in this update")
        self._c.deletes |= doomed
        return self

    def update_column(
        self, path: ColumnPath, type: TypeLike | None = None, *, doc: str | None = None
    ) -> SchemaUpdate:
        """Promote the column at ``path`` (an existing one or one added in this update) to ``type`` (int to
        long, float to double, a wider decimal; v3: date to timestamp), and/or set its doc."""
        f = self._for_update(path, "update column")
        where = f"update column {self._name(f)!r}"
        if type is not None:
            new = _as_type(type, where)
            if not it.can_promote(f.type, new, self._base.format_version):
                raise InvalidSchemaChange(
                    f"{where}: {f.type} cannot be promoted to {new} in format version "
                    f"{self._base.format_version}"
                )
            changed = [  # the spec: day/month/year of a date and its timestamp agree; identity, bucket not
                p
                for s in self._base.partition_specs
                for p in s.fields
                if f.field_id in p.source_ids and p.transform not in _SAME_FOR_DATE_AND_TIMESTAMP
            ]
            if f.type == it.DATE and new != f.type and changed:
                raise InvalidSchemaChange(
                    f"{where}: partition field {changed[0].name!r} ({changed[0].transform}) uses it, and "
                    f"{new} changes its values"
                )
            self._c.types[f.field_id] = new
        if doc is not None:
            _check_doc(doc, where)
            if f.field_id in self._roles:
                raise InvalidSchemaChange(f"{where}: a {self._roles[f.field_id]} has no doc of its own")
            self._c.docs[f.field_id] = doc
        return self

    def make_optional(self, path: ColumnPath) -> SchemaUpdate:
        """Let the column at ``path`` (an existing one or one added in this update) hold nulls."""
        f = self._for_update(path, "make column optional")
        self._c.optional.add(f.field_id)
        return self

    def move_first(self, path: ColumnPath) -> SchemaUpdate:
        """Make the column at ``path`` (an existing one or one added in this update) first in its struct."""
        return self._move(path, "first", None)

    def move_before(self, path: ColumnPath, before: ColumnPath) -> SchemaUpdate:
        """Place the column at ``path`` just before its sibling ``before``."""
        return self._move(path, "before", before)

    def move_after(self, path: ColumnPath, after: ColumnPath) -> SchemaUpdate:
        """Place the column at ``path`` just after its sibling ``after``."""
        return self._move(path, "after", after)

    def set_identifier_fields(self, *paths: ColumnPath) -> SchemaUpdate:
        """Make these columns (named in the new schema) the table's identifier fields; none: no identifier
        fields. Checked when the schema is built (:meth:`apply`)."""
        self._c.identifiers = tuple(dict.fromkeys(_split(p) for p in paths))
        return self

    def union_by_name(self, schema: Schema | pa.Schema, *, relax_required: bool = True) -> SchemaUpdate:
        """Evolve the table's schema to hold ``schema``'s columns, matched by name (nested too): those the
        table lacks are added (optional), wider types promote the table's, optional columns make the
        table's optional (unless ``relax_required`` is False), docs are copied; narrower types are kept as
        they are. A column whose types cannot be unified fails naming it; nothing is dropped."""
        other = schema_from_arrow(schema) if isinstance(schema, pa.Schema) else schema
        union_fields(
            self, self._schema.fields, other.fields, case_sensitive=self._case_sensitive,
            relax_required=relax_required,
        )  # fmt: skip
        return self

    # -- applying and committing ----------------------------------------------------------------------------

    def apply(self) -> Schema:
        """The new schema (not committed)."""
        fields = rebuild(self._schema.fields, 0, self._c)
        empty = unstored_struct(Schema(fields))
        if empty is not None:
            raise InvalidSchemaChange(
                f"update_schema: struct {empty!r} would have no field a data file can store (Parquet has no "
                "empty group): delete the struct itself, or add a field to it"
            )
        identifiers = self._identifiers(Schema(fields))
        return numbered(Schema(fields, schema_id=0, identifier_field_ids=identifiers), self._base)

    def commit(self, *, faults: Faults | None = None) -> Schema:
        """Commit the new schema as the table's current schema; the committed schema."""
        schema = self.apply()

        def change(base: TableMetadata) -> TableMetadata | None:
            require_unchanged(base, "schema", base.current_schema_id, self._base.current_schema_id)
            # field ids were assigned from the base's last-column-id: another writer's columns took them
            require_unchanged(base, "last column id", base.last_column_id, self._base.last_column_id)
            # the deleted columns checked again: another writer may have partitioned or sorted by one
            user = _user_of(base, self._c.deletes)
            if user is not None:
                raise ValidationError(
                    f"update_schema on {base.location}: {user} uses a deleted column (it changed since "
                    "this update was built)"
                )
            committed = numbered(schema, base)  # numbered again: another writer may have added schemas
            check_format_version(committed, base.format_version)
            check_lineage_names(committed, base.format_version, base.schema)
            if committed.schema_id == base.current_schema_id:
                return None  # no change
            known = committed.schema_id in base.schemas_by_id
            schemas = base.schemas if known else (*base.schemas, committed)
            props = column_properties_after(base.properties, self._schema, schema, self._c)
            mapping = name_mapping_of(base)
            if mapping is not None:
                props[NAME_MAPPING_PROPERTY] = json.dumps(name_mapping_to_json(self._mapping(mapping)))
            return replace(
                base, schemas=schemas, current_schema_id=committed.schema_id, properties=props,
                last_column_id=max(base.last_column_id, self._c.next_id),
            )  # fmt: skip

        def rest(base: TableMetadata, new: TableMetadata) -> RestForm:
            requirements = [
                {"type": "assert-current-schema-id", "current-schema-id": base.current_schema_id},
                {"type": "assert-last-assigned-field-id", "last-assigned-field-id": base.last_column_id},
            ]
            if self._c.deletes:  # the spec and order checked not to use a deleted column stay
                requirements += [
                    {"type": "assert-default-spec-id", "default-spec-id": base.default_spec_id},
                    {
                        "type": "assert-default-sort-order-id",
                        "default-sort-order-id": base.default_sort_order_id,
                    },
                ]
            updates: list[dict[str, Any]] = []
            committed = new.schemas_by_id[new.current_schema_id]
            added = committed.schema_id not in base.schemas_by_id
            if added:  # the server numbers it: -1 = the one just added
                # last-column-id: deprecated, but servers still read it (and refuse one that decreases)
                add = {
                    "action": "add-schema",
                    "schema": schema_to_json(committed),
                    "last-column-id": new.last_column_id,
                }
                updates.append(add)
            current = -1 if added else committed.schema_id
            updates.append({"action": "set-current-schema", "schema-id": current})
            changed = {k: v for k, v in new.properties.items() if base.properties.get(k) != v}
            if changed:
                updates.append({"action": "set-properties", "updates": changed})
            removed = sorted(base.properties.keys() - new.properties.keys())
            if removed:
                updates.append({"action": "remove-properties", "removals": removed})
            return requirements, updates

        commit_metadata_change(self._table, change, action="update_schema", faults=faults, rest=rest)
        return self._table.metadata.schema  # as committed (a REST server numbers it)

    # -- lookups -------------------------------------------------------------------------------------------

    def _for_update(self, path: ColumnPath, action: str) -> it.NestedField:
        """A column of the base schema or one added in this update (Java's findForUpdate)."""
        names = _split(path)
        found = _find(self._schema, names, self._case_sensitive)
        if found is None or found in self._c.deletes:
            parent_id = 0 if len(names) == 1 else self._struct_id(names[:-1], action)
            fold = (lambda t: t) if self._case_sensitive else str.lower
            for added in self._c.adds.get(parent_id, []):
                if fold(added.name) == fold(names[-1]):
                    return added
        return self._field(names, action)

    def _field(self, path: ColumnPath, action: str) -> it.NestedField:
        names = _split(path)
        field_id = _find(self._schema, names, self._case_sensitive)
        if field_id is None:
            raise InvalidSchemaChange(
                f"{action} {'.'.join(names)!r}: schema {self._schema.schema_id} has no such column"
            )
        if field_id in self._c.deletes:
            raise InvalidSchemaChange(f"{action} {'.'.join(names)!r}: it is deleted in this update")
        if field_id in self._frozen:
            raise InvalidSchemaChange(f"{action} {'.'.join(names)!r}: a map's keys cannot change")
        return self._schema.by_id[field_id]

    def _move(self, path: ColumnPath, kind: MoveKind, reference: ColumnPath | None) -> SchemaUpdate:
        where = f"move column {'.'.join(_split(path))!r}" + (
            "" if reference is None else f" {kind} {'.'.join(_split(reference))!r}"
        )
        field_id, parent_id = self._movable(path, where)
        ref_id = None
        if reference is not None:
            ref_id, ref_parent = self._movable(reference, where)
            if ref_id == field_id:
                raise InvalidSchemaChange(f"{where}: a column cannot be moved {kind} itself")
            if ref_parent != parent_id:
                raise InvalidSchemaChange(f"{where}: the two columns are not in the same struct")
        self._c.moves.setdefault(parent_id, []).append(Move(field_id, kind, ref_id))
        return self

    def _movable(self, path: ColumnPath, where: str) -> tuple[int, int]:
        """(field id, parent struct id) of a struct field of the base schema or one added in this update."""
        names = _split(path)
        found = _find(self._schema, names, self._case_sensitive)
        if found is None or found in self._c.deletes:  # added in this update (Java's findForMove)
            parent_id = 0 if len(names) == 1 else self._struct_id(names[:-1], where)
            added = self._sibling_named(parent_id, names[-1])
            if added is not None:
                return added, parent_id
            if found is None:
                raise InvalidSchemaChange(f"{where}: no column {'.'.join(names)!r} in the table or added")
        f = self._field(names, where)
        if f.field_id in self._roles:
            raise InvalidSchemaChange(f"{where}: a {self._roles[f.field_id]} has no place to move to")
        return f.field_id, self._parent_id(f.field_id)

    def _identifiers(self, draft: Schema) -> tuple[int, ...]:
        """The new schema's identifier field ids, checked against the spec's rules."""
        if self._c.identifiers is None:
            for i in self._schema.identifier_field_ids:
                if i in self._c.deletes:
                    raise InvalidSchemaChange(
                        f"delete column {self._schema.names_by_id[i]!r}: it is an identifier field "
                        "(set_identifier_fields to change them)"
                    )
            ids = self._schema.identifier_field_ids
        else:
            found = [(names, _find(draft, names, self._case_sensitive)) for names in self._c.identifiers]
            missing = [".".join(names) for names, i in found if i is None]
            if missing:
                raise InvalidSchemaChange(f"identifier fields: the new schema has no column {missing[0]!r}")
            ids = tuple(i for _, i in found if i is not None)
        for i in ids:
            problem = identifier_field_problem(draft, i)
            if problem is not None:
                raise InvalidSchemaChange(f"identifier field {draft.names_by_id[i]!r}: {problem}")
        return ids

    def _name(self, f: it.NestedField) -> str:
        return self._schema.names_by_id.get(f.field_id, f.name)  # a column added in this update: its name

    def _struct_id(self, names: Sequence[str], where: str) -> int:
        parent = self._field(names, where)
        if isinstance(parent.type, it.StructType):
            return parent.field_id
        raise InvalidSchemaChange(f"{where}: {'.'.join(names)!r} is a {parent.type}, not a struct")

    def _parent_id(self, field_id: int) -> int:
        for parent_id, children in children_by_parent(self._schema.fields, 0):
            if field_id in {c.field_id for c in children}:
                return parent_id
        raise AssertionError(f"field {field_id} has no parent")  # every field found has one

    def _sibling_named(self, parent_id: int, name: str) -> int | None:
        """The id of the column called ``name`` in ``parent_id`` after this update's changes so far."""
        siblings = dict(children_by_parent(self._schema.fields, 0)).get(parent_id, ())
        fold = (lambda s: s) if self._case_sensitive else str.lower
        for c in siblings:
            if c.field_id not in self._c.deletes and fold(self._c.renames.get(c.field_id, c.name)) == fold(
                name
            ):
                return c.field_id
        added = (a.field_id for a in self._c.adds.get(parent_id, []) if fold(a.name) == fold(name))
        return next(added, None)

    def _mapping(self, mapping: NameMapping) -> NameMapping:
        """``mapping`` with the new names of renamed columns and the added columns; a name a renamed or
        added column takes is removed from its siblings' entries (Java's MappingUtil.update), so a column
        dropped and added again, or a name moved to another column, no longer reaches the old files' column
        (they read it as missing)."""

        def walk(fields: Sequence[MappedField], parent_id: int) -> tuple[MappedField, ...]:
            added = self._c.adds.get(parent_id, [])
            claimed = {a.name: a.field_id for a in added}
            claimed.update(
                {self._c.renames[m.field_id]: m.field_id for m in fields if m.field_id in self._c.renames}
            )
            out = []
            for m in fields:
                names = tuple(n for n in m.names if claimed.get(n, m.field_id) == m.field_id)
                if m.field_id is not None and m.field_id in self._c.renames:
                    new = self._c.renames[m.field_id]
                    names = names if new in names else (*names, new)
                children = walk(m.fields, m.field_id) if m.field_id is not None else m.fields
                out.append(replace(m, names=names, fields=children))
            for a in added:
                out.extend(_added_mapping(a))
            return tuple(out)

        return NameMapping(walk(tuple(mapping), 0))


def _split(path: ColumnPath) -> tuple[str, ...]:
    names = tuple(path.split(".")) if isinstance(path, str) else tuple(path)
    bad = [n for n in names if not isinstance(n, str)]
    if bad or not names:
        raise InvalidSchemaChange(
            f"column path {path!r}: expected a dotted name or a sequence of names (strings)"
        )
    return names


def _find(schema: Schema, names: tuple[str, ...], case_sensitive: bool) -> int | None:
    """The id of the field at name path ``names`` in ``schema``, or None."""
    fold = (lambda p: p) if case_sensitive else (lambda p: tuple(n.lower() for n in p))
    want = fold(names)
    return next((i for i, p in schema.paths_by_id.items() if fold(p) == want), None)


def _roles(schema: Schema) -> dict[int, str]:
    """List elements, map keys and map values (at any depth) by id: what they are."""
    roles: dict[int, str] = {}
    for f in schema.by_id.values():
        t = f.type
        if isinstance(t, it.ListType):
            roles[t.element_id] = "list element"
        elif isinstance(t, it.MapType):
            roles[t.key_id], roles[t.value_id] = "map key", "map value"
    return roles


def _in_map_keys(schema: Schema) -> set[int]:
    """Every map key, and every field nested in one: fixed for the map's life."""
    return {
        i
        for f in schema.by_id.values()
        if isinstance(f.type, it.MapType)
        for i in (f.type.key_id, *ids_in(f.type.key))
    }


def _as_type(t: TypeLike, where: str) -> it.IcebergType:
    try:
        if isinstance(t, str):
            return it.parse_type(t)
        if isinstance(t, pa.DataType):
            return arrow_type_to_iceberg(t, where)
    except InvalidType as exc:
        raise InvalidSchemaChange(f"{where}: {exc}") from None
    if not isinstance(t, (it.PrimitiveType, it.StructType, it.ListType, it.MapType)):
        raise InvalidSchemaChange(  # else written into the metadata: the table could not be loaded again
            f"{where}: type {t!r} is not an Iceberg type string, Iceberg type or pyarrow type"
        )
    return t


def _check_doc(doc: object, where: str) -> None:
    if doc is not None and not isinstance(doc, str):
        raise InvalidSchemaChange(f"{where}: doc {doc!r} must be a string (the spec's JSON type)")


def _added_mapping(f: it.NestedField) -> list[MappedField]:
    return list(mapping_for_schema(it.StructType((f,))))


def _user_of(md: TableMetadata, doomed: set[int]) -> str | None:
    """What of ``md``'s default partition spec and sort order uses a column of ``doomed``, or None."""
    uses = [(f"partition field {p.name!r}", p.source_ids) for p in md.spec.fields if p.transform != "void"]
    uses += [(f"sort order {md.sort_order.order_id}", s.source_ids) for s in md.sort_order.fields]
    return next((what for what, ids in uses if doomed & set(ids)), None)

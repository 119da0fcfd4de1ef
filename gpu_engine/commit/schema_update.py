"""Schema evolution (spec "Schema Evolution"), Iceberg's ``UpdateSchema``: columns added, renamed, deleted,
promoted or made optional, committed together as the table's new current schema.

.. code-block:: python

    with tbl.update_schema() as update:      # commits when the block ends without an error
        update.add_column("price", "decimal(10, 2)", doc="list price")
        update.add_column(("location", "zone"), "string")          # into the struct ``location``
        update.rename_column("name", "full_name")
        update.update_column("count", "long")                      # int -> long
        update.delete_column("legacy")

Columns are named by their full path in the schema the update started from (a dotted string, or a tuple
when names hold dots). New columns get fresh ids after the table's ``last-column-id``, nested ones too; a
required column or a default (``initial-default`` and ``write-default``) needs format version 3. A column
that a partition field, the sort order or the identifier fields use cannot be deleted; a promotion that
would change a partition value (date to timestamp) is refused. Each change is checked when it is made and
every error names the column. The new schema reuses the id of an equal earlier schema, else takes the next
id; ``schema.name-mapping.default`` gets renamed columns' new names (old names kept, for files without
field ids) and the added columns.

The update is re-applied on the refreshed table after a lost race, as long as the table's current schema is
still the one it started from; otherwise it fails with :class:`ValidationError` (build it again).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from ..errors import InvalidType, SingleValueError, ValidationError
from ..iceberg import types as it
from ..iceberg.json_values import from_json, to_json
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import (
    NAME_MAPPING_PROPERTY,
    MappedField,
    NameMapping,
    mapping_for_schema,
    name_mapping_of,
    name_mapping_to_json,
)
from ..iceberg.schema import Schema, schema_to_json
from .metadata_commit import MetadataUpdate, RestForm, commit_metadata_change, require_unchanged
from .schema_from_arrow import arrow_type_to_iceberg
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table

ColumnPath: TypeAlias = str | Sequence[str]
TypeLike: TypeAlias = str | it.IcebergType | pa.DataType


class InvalidSchemaChange(ValidationError):
    """A schema change the spec or the table does not allow; names the column."""


@dataclass
class _Changes:
    """What an update does, by field id of the base schema (0: the top-level struct)."""

    deletes: set[int] = field(default_factory=set)
    renames: dict[int, str] = field(default_factory=dict)
    types: dict[int, it.IcebergType] = field(default_factory=dict)
    docs: dict[int, str] = field(default_factory=dict)
    optional: set[int] = field(default_factory=set)
    adds: dict[int, list[it.NestedField]] = field(default_factory=dict)
    next_id: int = 0


class SchemaUpdate(MetadataUpdate):
    """Changes to ``table``'s current schema, committed by :meth:`commit` (see the module doc)."""

    def __init__(self, table: Table, *, case_sensitive: bool = True) -> None:
        self._table = table
        self._base = table.metadata
        self._schema = self._base.schema
        self._case_sensitive = case_sensitive
        self._c = _Changes(next_id=self._base.last_column_id)

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
        parent_id = 0 if len(names) == 1 else self._struct_id(names[:-1], where)
        name = names[-1]
        if not name:
            raise InvalidSchemaChange(f"{where}: empty column name")
        if self._sibling_named(parent_id, name) is not None:
            raise InvalidSchemaChange(f"{where}: the column exists already")
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
        new_type = _fresh(_as_type(type, where), ids)
        defaults: dict[str, Any] = {}
        if default is not None:
            value = _default_json(new_type, default, where)
            defaults = dict(initial_default=value, write_default=value, has_initial_default=True)
            defaults["has_write_default"] = True
        added = it.NestedField(field_id, name, new_type, required, doc, **defaults)
        self._c.next_id = max([field_id, *_ids_in(new_type)])
        self._c.adds.setdefault(parent_id, []).append(added)
        return self

    def rename_column(self, path: ColumnPath, new_name: str) -> SchemaUpdate:
        """Rename the column at ``path`` (its field id, and so its data, stay)."""
        f = self._field(path, "rename column")
        where = f"rename column {self._name(f)!r} to {new_name!r}"
        if not new_name:
            raise InvalidSchemaChange(f"{where}: empty column name")
        clash = self._sibling_named(self._parent_id(f.field_id), new_name)
        if clash is not None and clash != f.field_id:
            raise InvalidSchemaChange(f"{where}: a column of that name exists already")
        self._c.renames[f.field_id] = new_name
        return self

    def delete_column(self, path: ColumnPath) -> SchemaUpdate:
        """Delete the column at ``path`` (and what it contains)."""
        f = self._field(path, "delete column")
        where = f"delete column {self._name(f)!r}"
        doomed = {f.field_id, *_ids_in(f.type)}
        md = self._base
        uses = [
            (f"partition field {p.name!r}", p.source_ids) for p in md.spec.fields if p.transform != "void"
        ]
        uses += [(f"sort order {md.sort_order.order_id}", s.source_ids) for s in md.sort_order.fields]
        uses += [("the identifier fields", self._schema.identifier_field_ids)]
        for what, ids in uses:
            if doomed & set(ids):
                raise InvalidSchemaChange(f"{where}: {what} uses it")
        if f.field_id in self._c.renames or f.field_id in self._c.types:
            raise InvalidSchemaChange(f"{where}: it is renamed or updated in this update")
        self._c.deletes |= doomed
        return self

    def update_column(
        self, path: ColumnPath, type: TypeLike | None = None, *, doc: str | None = None
    ) -> SchemaUpdate:
        """Promote the column at ``path`` to ``type`` (int to long, float to double, a wider decimal; v3:
        date to timestamp), and/or set its doc."""
        f = self._field(path, "update column")
        where = f"update column {self._name(f)!r}"
        if type is not None:
            new = _as_type(type, where)
            if not it.can_promote(f.type, new, self._base.format_version):
                raise InvalidSchemaChange(
                    f"{where}: {f.type} cannot be promoted to {new} in format version "
                    f"{self._base.format_version}"
                )
            sources = {i for s in self._base.partition_specs for p in s.fields for i in p.source_ids}
            if f.type == it.DATE and new != f.type and f.field_id in sources:
                raise InvalidSchemaChange(f"{where}: a partition field uses it, and {new} changes its values")
            self._c.types[f.field_id] = new
        if doc is not None:
            self._c.docs[f.field_id] = doc
        return self

    def make_optional(self, path: ColumnPath) -> SchemaUpdate:
        """Let the column at ``path`` hold nulls."""
        f = self._field(path, "make column optional")
        self._c.optional.add(f.field_id)
        return self

    # -- applying and committing ----------------------------------------------------------------------------

    def apply(self) -> Schema:
        """The new schema (not committed)."""
        fields = _rebuild(self._schema.fields, 0, self._c)
        live = {i for f in fields for i in (f.field_id, *_ids_in(f.type))}
        identifiers = tuple(i for i in self._schema.identifier_field_ids if i in live)
        schema = Schema(fields, schema_id=0, identifier_field_ids=identifiers)
        for old in self._base.schemas:  # an equal earlier schema keeps its id
            if replace(old, schema_id=0) == schema:
                return old
        return replace(schema, schema_id=max(s.schema_id for s in self._base.schemas) + 1)

    def commit(self, *, faults: Faults | None = None) -> Schema:
        """Commit the new schema as the table's current schema; the committed schema."""
        schema = self.apply()

        def change(base: TableMetadata) -> TableMetadata | None:
            require_unchanged(base, "schema", base.current_schema_id, self._base.current_schema_id)
            if schema.schema_id == base.current_schema_id:
                return None  # no change
            schemas = base.schemas if schema.schema_id in base.schemas_by_id else (*base.schemas, schema)
            props = dict(base.properties)
            mapping = name_mapping_of(base)
            if mapping is not None:
                props[NAME_MAPPING_PROPERTY] = json.dumps(name_mapping_to_json(self._mapping(mapping)))
            return replace(
                base, schemas=schemas, current_schema_id=schema.schema_id, properties=props,
                last_column_id=max(base.last_column_id, self._c.next_id),
            )  # fmt: skip

        def rest(base: TableMetadata, new: TableMetadata) -> RestForm:
            requirements = [
                {"type": "assert-current-schema-id", "current-schema-id": base.current_schema_id},
                {"type": "assert-last-assigned-field-id", "last-assigned-field-id": base.last_column_id},
            ]
            updates: list[dict[str, Any]] = []
            if schema.schema_id not in base.schemas_by_id:  # the server numbers it: -1 = the one just added
                updates.append({"action": "add-schema", "schema": schema_to_json(schema)})
            added = schema.schema_id not in base.schemas_by_id
            updates.append({"action": "set-current-schema", "schema-id": -1 if added else schema.schema_id})
            changed = {k: v for k, v in new.properties.items() if base.properties.get(k) != v}
            if changed:
                updates.append({"action": "set-properties", "updates": changed})
            return requirements, updates

        commit_metadata_change(self._table, change, action="update_schema", faults=faults, rest=rest)
        return schema

    # -- lookups -------------------------------------------------------------------------------------------

    def _field(self, path: ColumnPath, action: str) -> it.NestedField:
        names = _split(path)
        try:
            f = self._schema.find_field(".".join(names), case_sensitive=self._case_sensitive)
        except InvalidType:
            raise InvalidSchemaChange(
                f"{action} {'.'.join(names)!r}: schema {self._schema.schema_id} has no such column"
            ) from None
        if f.field_id in self._c.deletes:
            raise InvalidSchemaChange(f"{action} {'.'.join(names)!r}: it is deleted in this update")
        return f

    def _name(self, f: it.NestedField) -> str:
        return self._schema.names_by_id[f.field_id]

    def _struct_id(self, names: Sequence[str], where: str) -> int:
        parent = self._field(names, where)
        if isinstance(parent.type, it.StructType):
            return parent.field_id
        raise InvalidSchemaChange(f"{where}: {'.'.join(names)!r} is a {parent.type}, not a struct")

    def _parent_id(self, field_id: int) -> int:
        for parent_id, children in _children_by_parent(self._schema.fields, 0):
            if field_id in {c.field_id for c in children}:
                return parent_id
        raise AssertionError(f"field {field_id} has no parent")  # every field found has one

    def _sibling_named(self, parent_id: int, name: str) -> int | None:
        """The id of the column called ``name`` in ``parent_id`` after this update's changes so far."""
        siblings = dict(_children_by_parent(self._schema.fields, 0)).get(parent_id, ())
        fold = (lambda s: s) if self._case_sensitive else str.lower
        for c in siblings:
            if c.field_id not in self._c.deletes and fold(self._c.renames.get(c.field_id, c.name)) == fold(
                name
            ):
                return c.field_id
        added = (a.field_id for a in self._c.adds.get(parent_id, []) if fold(a.name) == fold(name))
        return next(added, None)

    def _mapping(self, mapping: NameMapping) -> NameMapping:
        """``mapping`` with the new names of renamed columns and the added columns."""

        def walk(fields: Sequence[MappedField], parent_id: int) -> tuple[MappedField, ...]:
            out = []
            for m in fields:
                names = m.names
                if m.field_id is not None and m.field_id in self._c.renames:
                    new = self._c.renames[m.field_id]
                    names = names if new in names else (*names, new)
                children = walk(m.fields, m.field_id) if m.field_id is not None else m.fields
                out.append(replace(m, names=names, fields=children))
            for a in self._c.adds.get(parent_id, []):
                out.extend(_added_mapping(a))
            return tuple(out)

        return NameMapping(walk(tuple(mapping), 0))


def _split(path: ColumnPath) -> tuple[str, ...]:
    return tuple(path.split(".")) if isinstance(path, str) else tuple(path)


def _as_type(t: TypeLike, where: str) -> it.IcebergType:
    try:
        if isinstance(t, str):
            return it.parse_type(t)
        if isinstance(t, pa.DataType):
            return arrow_type_to_iceberg(t, where)
    except InvalidType as exc:
        raise InvalidSchemaChange(f"{where}: {exc}") from None
    return t


def _fresh(t: it.IcebergType, ids: Iterator[int]) -> it.IcebergType:
    """``t`` with new ids for everything nested in it, assigned as for a new table (fields first)."""
    if isinstance(t, it.StructType):
        assigned = [next(ids) for _ in t.fields]
        return it.StructType(
            tuple(
                replace(f, field_id=i, type=_fresh(f.type, ids))
                for i, f in zip(assigned, t.fields, strict=True)
            )
        )
    if isinstance(t, it.ListType):
        element_id = next(ids)
        return replace(t, element_id=element_id, element=_fresh(t.element, ids))
    if isinstance(t, it.MapType):
        key_id, value_id = next(ids), next(ids)
        return replace(
            t, key_id=key_id, key=_fresh(t.key, ids), value_id=value_id, value=_fresh(t.value, ids)
        )
    return t


def _ids_in(t: it.IcebergType) -> list[int]:
    """The ids of every field nested in ``t``."""
    if isinstance(t, it.StructType):
        return [i for f in t.fields for i in (f.field_id, *_ids_in(f.type))]
    if isinstance(t, it.ListType):
        return [t.element_id, *_ids_in(t.element)]
    if isinstance(t, it.MapType):
        return [t.key_id, *_ids_in(t.key), t.value_id, *_ids_in(t.value)]
    return []


def _children_by_parent(
    fields: Sequence[it.NestedField], parent_id: int
) -> Iterator[tuple[int, Sequence[it.NestedField]]]:
    """(struct field id, its fields) for the top level (0) and every struct, also inside lists and maps."""
    yield parent_id, fields
    for f in fields:
        yield from _nested_structs(f.field_id, f.type)


def _nested_structs(owner: int, t: it.IcebergType) -> Iterator[tuple[int, Sequence[it.NestedField]]]:
    if isinstance(t, it.StructType):
        yield from _children_by_parent(t.fields, owner)
    elif isinstance(t, it.ListType):
        yield from _nested_structs(t.element_id, t.element)
    elif isinstance(t, it.MapType):
        yield from _nested_structs(t.value_id, t.value)


def _rebuild(fields: Sequence[it.NestedField], parent_id: int, c: _Changes) -> tuple[it.NestedField, ...]:
    out = []
    for f in fields:
        if f.field_id in c.deletes:
            continue
        t = c.types.get(f.field_id, _rebuild_type(f.field_id, f.type, c))
        out.append(
            replace(
                f,
                name=c.renames.get(f.field_id, f.name),
                type=t,
                doc=c.docs.get(f.field_id, f.doc),
                required=f.required and f.field_id not in c.optional,
            )
        )
    out.extend(c.adds.get(parent_id, []))
    return tuple(out)


def _rebuild_type(owner: int, t: it.IcebergType, c: _Changes) -> it.IcebergType:
    if isinstance(t, it.StructType):
        return it.StructType(_rebuild(t.fields, owner, c))
    if isinstance(t, it.ListType):
        return replace(t, element=_rebuild_type(t.element_id, t.element, c))
    if isinstance(t, it.MapType):
        return replace(t, value=_rebuild_type(t.value_id, t.value, c))
    return t


def _added_mapping(f: it.NestedField) -> list[MappedField]:
    return list(mapping_for_schema(it.StructType((f,))))


def _default_json(t: it.IcebergType, value: Any, where: str) -> Any:
    """The JSON single-value form of the Python ``value`` as a default of type ``t``."""
    if not isinstance(t, it.PrimitiveType):
        raise InvalidSchemaChange(f"{where}: defaults are supported for primitive columns only, not {t}")
    try:
        scalar = pa.scalar(value, type=it.to_arrow(t))
        physical = scalar.value if isinstance(scalar, pa.ExtensionScalar) else scalar
        if pa.types.is_temporal(physical.type):  # days, or time units since midnight / the epoch
            raw = physical.cast(pa.int32() if pa.types.is_date32(physical.type) else pa.int64()).as_py()
        else:
            raw = physical.as_py()
        encoded = to_json(t, raw)
        from_json(t, encoded)
    except (pa.ArrowException, SingleValueError, TypeError, ValueError) as exc:
        raise InvalidSchemaChange(f"{where}: default {value!r} is not a {t}: {exc}") from None
    return encoded

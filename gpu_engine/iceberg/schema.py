"""Iceberg schemas: a struct with an id, identifier fields, and indexes by field id and by full name."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from ..errors import InvalidType, SingleValueError, UnsupportedFeature
from . import json_values
from . import types as it

_SCHEMA_KEYS = {"type", "schema-id", "identifier-field-ids", "fields"}


@dataclass(frozen=True)
class Schema:
    """A table schema (Appendix C): top-level fields, ``schema-id`` and ``identifier-field-ids``."""

    fields: tuple[it.NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = ()
    extra: tuple[tuple[str, Any], ...] = field(default=(), compare=False)  # unknown JSON keys, kept
    schema_id_written: bool = field(default=True, compare=False)  # v1 schemas may lack schema-id
    identifiers_written: bool = field(default=False, compare=False)  # an empty list is kept as written

    def __post_init__(self) -> None:
        self.ids_by_name  # noqa: B018 -- a full name held by two fields is refused here, as Java's indexByName
        seen: dict[int, str] = {}
        for path, f in _walk(self.fields, ()):
            name = seen.setdefault(f.field_id, ".".join(path))
            if name != ".".join(path):  # the spec: unique ids (a write would mix the two columns' values)
                raise InvalidType(
                    f"invalid schema: field id {f.field_id} is held by {name!r} and {'.'.join(path)!r}"
                )

    @property
    def as_struct(self) -> it.StructType:
        return it.StructType(self.fields)

    @cached_property
    def by_id(self) -> dict[int, it.NestedField]:
        """Every field at any depth (struct fields, list elements, map keys and values) by id."""
        return {f.field_id: f for _, f in _walk(self.fields, ())}

    @cached_property
    def names_by_id(self) -> dict[int, str]:
        """Dotted full name of every field (list elements as ``a.element``, maps as ``m.key``/``m.value``)."""
        return {f.field_id: ".".join(path) for path, f in _walk(self.fields, ())}

    @cached_property
    def paths_by_id(self) -> dict[int, tuple[str, ...]]:
        """Name path of every field (names may contain dots, so paths are tuples)."""
        return {f.field_id: path for path, f in _walk(self.fields, ())}

    @cached_property
    def ids_by_name(self) -> dict[str, int]:
        """Field ids by dotted full name; two fields with one full name (a column ``a.b`` beside a struct
        ``a`` with a field ``b``) are an :class:`InvalidType`, as in Iceberg Java and PyIceberg: a name would
        reach the wrong column."""
        out: dict[str, int] = {}
        for fid, name in self.names_by_id.items():
            other = out.setdefault(name, fid)
            if other != fid:
                raise InvalidType(
                    f"invalid schema: fields {other} and {fid} both have the full name {name!r}"
                )
        return out

    @property
    def highest_field_id(self) -> int:
        return max(self.by_id, default=0)

    def find_field(self, key: int | str, *, case_sensitive: bool = True) -> it.NestedField:
        """A field by id or dotted name; :class:`InvalidType` naming the key when there is none."""
        if isinstance(key, int):
            if key in self.by_id:
                return self.by_id[key]
            raise InvalidType(f"schema {self.schema_id} has no field with id {key}")
        fid = self.ids_by_name.get(key)  # an exact match wins, with or without case (as filters bind)
        if fid is None and not case_sensitive:
            matches = sorted(n for n in self.ids_by_name if n.lower() == key.lower())
            if len(matches) > 1:
                raise InvalidType(
                    f"schema {self.schema_id}: {key!r} is ambiguous without case: it matches {matches}"
                )
            fid = self.ids_by_name[matches[0]] if matches else None
        if fid is None:
            raise InvalidType(f"schema {self.schema_id} has no field named {key!r}")
        return self.by_id[fid]

    def find_type(self, key: int | str) -> it.IcebergType:
        return self.find_field(key).type


def unstored_struct(schema: Schema) -> str | None:
    """The full name of a struct of ``schema`` (at any depth) with no field a data file stores (none, or
    only ``unknown`` ones), or None. The spec allows such a type, but Parquet has no group without fields:
    no writer can store it (Java cannot either), so tables are not made or evolved to hold one."""
    for fid, f in schema.by_id.items():
        if isinstance(f.type, it.StructType) and all(g.type == it.UNKNOWN for g in f.type.fields):
            return schema.names_by_id[fid]
    return None


def identifier_field_problem(schema: Schema, field_id: int) -> str | None:
    """Why field ``field_id`` of ``schema`` cannot be an identifier field, or None when it can: the spec
    asks for a required primitive column, not float, double, variant or geo, nested only in required
    structs (not in lists or maps)."""
    f = schema.by_id.get(field_id)
    if f is None:
        return "the schema has no such column"
    if not isinstance(f.type, it.PrimitiveType) or f.type in (it.VARIANT, it.UNKNOWN):
        return f"it is a {f.type}, not a primitive column"
    if f.type in (it.FLOAT, it.DOUBLE) or isinstance(f.type, (it.GeometryType, it.GeographyType)):
        return f"a {f.type} column cannot identify a row"
    if not f.required:
        return "it is optional"
    path = schema.paths_by_id[field_id]
    by_path = {p: i for i, p in schema.paths_by_id.items()}
    for depth in range(len(path) - 1, 0, -1):
        parent = schema.by_id[by_path[path[:depth]]]
        if not isinstance(parent.type, it.StructType):
            return f"it is nested in the {parent.type.__class__.__name__.removesuffix('Type').lower()} " + (
                f"{'.'.join(path[:depth])!r}"
            )
        if not parent.required:
            return f"it is nested in the optional struct {'.'.join(path[:depth])!r}"
    return None


Path = tuple[str, ...]


def _walk(fields: tuple[it.NestedField, ...], prefix: Path) -> Iterator[tuple[Path, it.NestedField]]:
    for f in fields:
        path = (*prefix, f.name)
        yield path, f
        yield from _walk_type(f.type, path)


def _walk_type(t: it.IcebergType, path: Path) -> Iterator[tuple[Path, it.NestedField]]:
    if isinstance(t, it.StructType):
        yield from _walk(t.fields, path)
    elif isinstance(t, it.ListType):
        element = it.NestedField(t.element_id, "element", t.element, t.element_required)
        yield (*path, "element"), element
        yield from _walk_type(t.element, (*path, "element"))
    elif isinstance(t, it.MapType):
        key = it.NestedField(t.key_id, "key", t.key, True)
        value = it.NestedField(t.value_id, "value", t.value, t.value_required)
        yield (*path, "key"), key
        yield from _walk_type(t.key, (*path, "key"))
        yield (*path, "value"), value
        yield from _walk_type(t.value, (*path, "value"))


def schema_from_json(obj: dict[str, Any]) -> Schema:
    if obj.get("type", "struct") != "struct" or "fields" not in obj:
        raise InvalidType(f"a schema must be a JSON struct with fields: {str(obj)[:200]}")
    return Schema(
        fields=tuple(it.field_from_json(f) for f in obj["fields"]),
        schema_id=int(obj.get("schema-id", 0)),
        identifier_field_ids=tuple(int(i) for i in obj.get("identifier-field-ids", ())),
        extra=tuple((k, v) for k, v in obj.items() if k not in _SCHEMA_KEYS),
        schema_id_written="schema-id" in obj,
        identifiers_written="identifier-field-ids" in obj,
    )


def schema_to_json(schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "struct"}
    if schema.schema_id_written or schema.schema_id != 0:  # a reader takes a missing id for 0
        out["schema-id"] = schema.schema_id
    if schema.identifier_field_ids or schema.identifiers_written:
        out["identifier-field-ids"] = list(schema.identifier_field_ids)
    out["fields"] = [it.field_to_json(f) for f in schema.fields]
    out.update(dict(schema.extra))
    return out


def prune(schema: Schema, ids: set[int] | frozenset[int]) -> Schema:
    """``schema`` keeping the fields in ``ids`` (whole subtrees) and the structs leading to them.

    A struct with only some children selected keeps those children; a list or map with any selected
    descendant is kept whole (its element, key and value are not pruned).
    """
    return Schema(_prune_fields(schema.fields, ids), schema.schema_id, schema.identifier_field_ids)


def _prune_fields(
    fields: tuple[it.NestedField, ...], ids: set[int] | frozenset[int]
) -> tuple[it.NestedField, ...]:
    out = []
    for f in fields:
        if f.field_id in ids:
            out.append(f)
        elif isinstance(f.type, it.StructType):
            children = _prune_fields(f.type.fields, ids)
            if children:
                out.append(replace(f, type=it.StructType(children)))
        elif any(sub.field_id in ids for _, sub in _walk_type(f.type, ())):
            out.append(f)
    return tuple(out)


V3_TYPES = ("timestamp_ns", "timestamptz_ns", "unknown", "variant", "geometry", "geography")


# the names of the row-lineage metadata columns: v3 data files store them under these names
ROW_LINEAGE_NAMES = ("_row_id", "_last_updated_sequence_number")


def check_lineage_names(schema: Schema, version: int, before: Schema | None = None) -> None:
    """UnsupportedFeature for a top-level column named as a row-lineage column that ``schema`` brings
    to a format-``version`` 3+ table (added, or renamed to it, since ``before``): v3 data files keep
    lineage in columns of those names, and rows could not be rewritten with both. A column another
    engine already gave such a name is left alone (Java checks no names)."""
    if version < 3:
        return
    had = {} if before is None else {f.field_id: f.name for f in before.fields}
    for f in schema.fields:
        if f.name in ROW_LINEAGE_NAMES and had.get(f.field_id) != f.name:
            raise UnsupportedFeature(
                f"column {f.name!r}: a format-version {version} table keeps row lineage in a column of "
                "that name (the _row_id and _last_updated_sequence_number metadata columns): rename it"
            )


def check_format_version(schema: Schema, version: int) -> None:
    """UnsupportedFeature naming the first column whose type the table's format ``version`` lacks (spec
    Appendix E: these types came with v3; Java's Schema.checkCompatibility when a schema is added)."""
    if version >= 3:
        return
    for fid, f in schema.by_id.items():
        if isinstance(f.type, it.PrimitiveType) and f.type.name.split("(", 1)[0] in V3_TYPES:
            raise UnsupportedFeature(
                f"column {schema.names_by_id[fid]!r} has type {f.type}, which needs format-version 3 "
                f"(the table's: {version})"
            )


def check_new_schema(schema: Schema, version: int) -> None:
    """:class:`UnsupportedFeature` naming the first identifier field that cannot identify a row
    (:func:`identifier_field_problem`) or the first default value that is no value of its column's type,
    or a default in a format ``version`` before 3 (spec "Default values"); as Java's Schema and
    Schema.checkCompatibility refuse a new table's schema (a table created with them could not be loaded
    by other readers, or refused every write)."""
    for fid in schema.identifier_field_ids:
        problem = identifier_field_problem(schema, fid)
        if problem is not None:
            name = schema.names_by_id.get(fid, f"field id {fid}")
            raise UnsupportedFeature(f"identifier field {name!r} cannot identify a row: {problem}")
    for fid, f in schema.by_id.items():
        for key, has, value in (
            ("initial-default", f.has_initial_default, f.initial_default),
            ("write-default", f.has_write_default, f.write_default),
        ):
            if not has or value is None:
                continue
            where = f"column {schema.names_by_id[fid]!r}: {key} {value!r}"
            if version < 3:
                raise UnsupportedFeature(
                    f"{where}: default values need format-version 3 (the table's: {version})"
                )
            try:
                json_values.from_json(f.type, value)
            except (SingleValueError, ValueError, TypeError) as e:
                raise UnsupportedFeature(f"{where} is not a {f.type} value: {e}") from None


def children_by_parent(
    fields: Sequence[it.NestedField], parent_id: int
) -> Iterator[tuple[int, Sequence[it.NestedField]]]:
    """(struct field id, its fields) for the top level (0) and every struct, also inside lists and maps
    (a list element's or map value's struct is keyed by the element's or value's id; a map key's by the
    key's id)."""
    yield parent_id, fields
    for f in fields:
        yield from _nested_structs(f.field_id, f.type)


def _nested_structs(owner: int, t: it.IcebergType) -> Iterator[tuple[int, Sequence[it.NestedField]]]:
    if isinstance(t, it.StructType):
        yield from children_by_parent(t.fields, owner)
    elif isinstance(t, it.ListType):
        yield from _nested_structs(t.element_id, t.element)
    elif isinstance(t, it.MapType):
        yield from _nested_structs(t.key_id, t.key)
        yield from _nested_structs(t.value_id, t.value)

"""Name mapping (spec "Column Projection", Appendix C "Name Mapping Serialization"): fallback field ids for
data files written without them (Hive/Impala-migrated tables), from ``schema.name-mapping.default``.

A mapping is a list of mapped fields, each with the names a file may use for it, an optional field id and
the mappings of its children (struct fields; ``element`` for lists; ``key`` and ``value`` for maps). Names
are literal: ``a.b`` names a field called ``a.b``, never child ``b`` of ``a``. Lookups are case-sensitive.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import MetadataError
from . import types as it
from .schema import Schema, children_by_parent

NAME_MAPPING_PROPERTY = "schema.name-mapping.default"


@dataclass(frozen=True)
class MappedField:
    """One field mapping: the names a file may use, the field id (None: known but not in the table)."""

    names: tuple[str, ...]
    field_id: int | None = None
    fields: tuple[MappedField, ...] = ()
    _by_name: dict[str, MappedField] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        where = f"the mapping of {'/'.join(self.names) or 'a field'}"
        object.__setattr__(self, "_by_name", _index(self.fields, where))

    def child(self, name: str) -> MappedField | None:
        return self._by_name.get(name)


@dataclass(frozen=True)
class NameMapping:
    """The top-level field mappings of a table; ``find("location", "lat")`` looks up a name path."""

    fields: tuple[MappedField, ...]
    _by_name: dict[str, MappedField] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_name", _index(self.fields, "the name mapping"))

    def child(self, name: str) -> MappedField | None:
        return self._by_name.get(name)

    def find(self, *path: str) -> MappedField | None:
        """The mapping of the field reached by ``path`` (one name per level), or None."""
        if not path:
            return None
        found = self.child(path[0])
        for name in path[1:]:
            if found is None:
                return None
            found = found.child(name)
        return found

    def id_of(self, *path: str) -> int | None:
        found = self.find(*path)
        return None if found is None else found.field_id

    def __iter__(self) -> Iterator[MappedField]:
        return iter(self.fields)


def _index(fields: Sequence[MappedField], where: str) -> dict[str, MappedField]:
    out: dict[str, MappedField] = {}
    for f in fields:
        for name in f.names:
            if name in out:
                raise MetadataError(f"{NAME_MAPPING_PROPERTY}: {where} maps name {name!r} twice")
            out[name] = f
    return out


# -- JSON -----------------------------------------------------------------------------------------------


def parse_name_mapping(text: str | bytes | Sequence[Any]) -> NameMapping:
    """A name mapping from its JSON text (or already-parsed JSON list); MetadataError naming what is wrong."""
    obj: Any = text
    if isinstance(text, (str, bytes)):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise MetadataError(f"{NAME_MAPPING_PROPERTY} is not valid JSON: {exc}") from None
    if not isinstance(obj, list):
        raise MetadataError(
            f"{NAME_MAPPING_PROPERTY} must be a JSON list of field mappings, got {obj!r:.200}"
        )
    return NameMapping(tuple(_mapped_field(f) for f in obj))


def _mapped_field(obj: Any) -> MappedField:
    if not isinstance(obj, dict):
        raise MetadataError(
            f"{NAME_MAPPING_PROPERTY}: a field mapping must be a JSON object, got {obj!r:.200}"
        )
    names = obj.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise MetadataError(f"{NAME_MAPPING_PROPERTY}: 'names' must be a list of strings in {obj!r:.200}")
    fid = obj.get("field-id")
    if fid is not None and (isinstance(fid, bool) or not isinstance(fid, int)):
        raise MetadataError(f"{NAME_MAPPING_PROPERTY}: 'field-id' must be an integer in {obj!r:.200}")
    children = obj.get("fields")
    children = [] if children is None else children
    if not isinstance(children, list):
        raise MetadataError(f"{NAME_MAPPING_PROPERTY}: 'fields' must be a list in {obj!r:.200}")
    return MappedField(tuple(names), fid, tuple(_mapped_field(c) for c in children))


def name_mapping_to_json(mapping: NameMapping) -> list[dict[str, Any]]:
    return [_field_to_json(f) for f in mapping.fields]


def _field_to_json(f: MappedField) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if f.field_id is not None:
        out["field-id"] = f.field_id
    out["names"] = list(f.names)
    if f.fields:
        out["fields"] = [_field_to_json(c) for c in f.fields]
    return out


class _HasProperties(Protocol):
    @property
    def properties(self) -> Mapping[str, str]: ...


def name_mapping_of(source: Mapping[str, str] | _HasProperties) -> NameMapping | None:
    """The default name mapping (``schema.name-mapping.default``) of table properties, or of a table or its
    metadata; None when there is none."""
    properties = source if isinstance(source, Mapping) else source.properties
    text = properties.get(NAME_MAPPING_PROPERTY)
    return None if text is None else parse_name_mapping(text)


# -- from a schema ----------------------------------------------------------------------------------------


def mapping_for_schema(schema: Schema | it.StructType) -> NameMapping:
    """The mapping Iceberg creates for a schema: each field by its current name (lists: ``element``;
    maps: ``key``/``value``)."""
    fields = schema.fields
    return NameMapping(tuple(_mapped(f.field_id, f.name, f.type) for f in fields))


def mapping_for_schemas(current: Schema, schemas: Sequence[Schema]) -> NameMapping:
    """The mapping the table would have had it kept one since its first schema, as ``update_schema`` keeps
    one (Java's ``MappingUtil.update``): each field of ``current`` by its current name, and by the names it
    had in older ``schemas`` that no other field of its struct took since (dropped ones included: the
    latest holder of a name keeps it). A file written without field ids before a rename still reaches the
    renamed column."""
    held: dict[int, list[tuple[int, str, int]]] = {}  # struct's parent id -> (schema id, name, field id)
    for schema in schemas:
        for parent, fields in children_by_parent(schema.fields, 0):
            held.setdefault(parent, []).extend((schema.schema_id, f.name, f.field_id) for f in fields)
    return NameMapping(_aliased(current.fields, 0, held))


_Held = Mapping[int, list[tuple[int, str, int]]]


def _aliased(fields: Sequence[it.NestedField], parent: int, held: _Held) -> tuple[MappedField, ...]:
    claimed = {f.name: f.field_id for f in fields}
    for _, name, field_id in sorted(held.get(parent, ()), key=lambda h: -h[0]):  # newest schema first
        claimed.setdefault(name, field_id)
    out = []
    for f in fields:
        aliases = [n for n, i in claimed.items() if i == f.field_id and n != f.name]
        out.append(MappedField((f.name, *aliases), f.field_id, _children(f.type, held, f.field_id)))
    return tuple(out)


def _mapped(field_id: int, name: str, t: it.IcebergType) -> MappedField:
    return MappedField((name,), field_id, _children(t))


def _children(t: it.IcebergType, held: _Held | None = None, field_id: int = 0) -> tuple[MappedField, ...]:
    """The mappings below a field of type ``t`` (``held``: with older names, see :func:`mapping_for_schemas`;
    ``field_id``: the field's, the parent of a struct's fields)."""
    if isinstance(t, it.StructType):
        if held is not None:
            return _aliased(t.fields, field_id, held)
        return tuple(_mapped(f.field_id, f.name, f.type) for f in t.fields)
    if isinstance(t, it.ListType):
        return (MappedField(("element",), t.element_id, _children(t.element, held, t.element_id)),)
    if isinstance(t, it.MapType):
        return (
            MappedField(("key",), t.key_id, _children(t.key, held, t.key_id)),
            MappedField(("value",), t.value_id, _children(t.value, held, t.value_id)),
        )
    return ()

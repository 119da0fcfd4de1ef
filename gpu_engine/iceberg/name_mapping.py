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
from .schema import Schema

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


def _mapped(field_id: int, name: str, t: it.IcebergType) -> MappedField:
    return MappedField((name,), field_id, _children(t))


def _children(t: it.IcebergType) -> tuple[MappedField, ...]:
    if isinstance(t, it.StructType):
        return tuple(_mapped(f.field_id, f.name, f.type) for f in t.fields)
    if isinstance(t, it.ListType):
        return (_mapped(t.element_id, "element", t.element),)
    if isinstance(t, it.MapType):
        return (_mapped(t.key_id, "key", t.key), _mapped(t.value_id, "value", t.value))
    return ()

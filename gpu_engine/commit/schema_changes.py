"""What a schema update does, by field id, and how it is applied to the fields of the schema it started from.

:class:`SchemaChanges` is filled by :class:`~gpu_engine.commit.schema_update.SchemaUpdate` (which checks each
change when it is made); :func:`rebuild` applies them: deleted fields dropped, renames, promotions, docs and
optionality set (list elements and map values too: their type and requiredness live on the list or map),
added fields appended to their struct, then the struct's moves applied in the order they were made;
:func:`column_properties_after` carries the table properties that name columns over the changes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..errors import ValidationError
from ..iceberg import types as it
from ..iceberg.json_values import promoted
from ..iceberg.schema import Schema
from ..io.metrics_config import COLUMN_MODE_PREFIX

MoveKind = Literal["first", "before", "after"]


class InvalidSchemaChange(ValidationError):
    """A schema change the spec or the table does not allow; names the column."""


@dataclass(frozen=True)
class Move:
    """Move field ``field_id`` first in its struct, or just before / after the field ``reference``."""

    field_id: int
    kind: MoveKind
    reference: int | None = None


@dataclass
class SchemaChanges:
    """An update's changes by field id of the base schema (parent id 0: the top-level struct)."""

    deletes: set[int] = field(default_factory=set)
    renames: dict[int, str] = field(default_factory=dict)
    types: dict[int, it.IcebergType] = field(default_factory=dict)
    docs: dict[int, str] = field(default_factory=dict)
    optional: set[int] = field(default_factory=set)
    adds: dict[int, list[it.NestedField]] = field(default_factory=dict)
    moves: dict[int, list[Move]] = field(default_factory=dict)
    identifiers: tuple[tuple[str, ...], ...] | None = None  # names in the new schema; None: unchanged
    next_id: int = 0

    def moved(self) -> set[int]:
        """Every field a move names (moved, or the one it is placed against)."""
        return {
            i for ms in self.moves.values() for m in ms for i in (m.field_id, m.reference) if i is not None
        }


def rebuild(fields: Sequence[it.NestedField], parent_id: int, c: SchemaChanges) -> tuple[it.NestedField, ...]:
    """The fields of struct ``parent_id`` with ``c`` applied (see the module doc)."""
    out = []
    for f in (*fields, *c.adds.get(parent_id, [])):  # added columns take updates too (type, doc, optional)
        if f.field_id in c.deletes:
            continue
        changed = _changed_type(f.field_id, f.type, c)
        defaults = {}
        if f.field_id in c.types:  # a promotion: defaults in the new type (a date's become timestamps)
            defaults = {
                "initial_default": promoted(f.type, changed, f.initial_default),
                "write_default": promoted(f.type, changed, f.write_default),
            }
        out.append(
            replace(
                f,
                name=c.renames.get(f.field_id, f.name),
                type=changed,
                doc=c.docs.get(f.field_id, f.doc),
                required=f.required and f.field_id not in c.optional,
                **defaults,
            )
        )
    for move in c.moves.get(parent_id, []):
        out = _moved(out, move)
    return tuple(out)


def _changed_type(field_id: int, t: it.IcebergType, c: SchemaChanges) -> it.IcebergType:
    """The type of field ``field_id``: its promotion, else ``t`` with its nested changes."""
    if field_id in c.types:
        return c.types[field_id]
    if isinstance(t, it.StructType):
        return it.StructType(rebuild(t.fields, field_id, c))
    if isinstance(t, it.ListType):
        return replace(
            t,
            element=_changed_type(t.element_id, t.element, c),
            element_required=t.element_required and t.element_id not in c.optional,
        )
    if isinstance(t, it.MapType):
        return replace(
            t,
            value=_changed_type(t.value_id, t.value, c),
            value_required=t.value_required and t.value_id not in c.optional,
        )
    return t


def _moved(fields: list[it.NestedField], move: Move) -> list[it.NestedField]:
    ids = [f.field_id for f in fields]
    moving = fields[ids.index(move.field_id)]
    rest = [f for f in fields if f.field_id != move.field_id]
    at = 0
    if move.reference is not None:  # before or after it
        at = [f.field_id for f in rest].index(move.reference) + (move.kind == "after")
    return [*rest[:at], moving, *rest[at:]]


def fresh(t: it.IcebergType, ids: Iterator[int]) -> it.IcebergType:
    """``t`` with new ids for everything nested in it, assigned as for a new table (fields first)."""
    if isinstance(t, it.StructType):
        assigned = [next(ids) for _ in t.fields]
        return it.StructType(
            tuple(
                replace(f, field_id=i, type=fresh(f.type, ids))
                for i, f in zip(assigned, t.fields, strict=True)
            )
        )
    if isinstance(t, it.ListType):
        element_id = next(ids)
        return replace(t, element_id=element_id, element=fresh(t.element, ids))
    if isinstance(t, it.MapType):
        key_id, value_id = next(ids), next(ids)
        return replace(t, key_id=key_id, key=fresh(t.key, ids), value_id=value_id, value=fresh(t.value, ids))
    return t


def ids_in(t: it.IcebergType) -> list[int]:
    """The ids of every field nested in ``t``."""
    if isinstance(t, it.StructType):
        return [i for f in t.fields for i in (f.field_id, *ids_in(f.type))]
    if isinstance(t, it.ListType):
        return [t.element_id, *ids_in(t.element)]
    if isinstance(t, it.MapType):
        return [t.key_id, *ids_in(t.key), t.value_id, *ids_in(t.value)]
    return []


COLUMN_PROPERTY_PREFIXES = (COLUMN_MODE_PREFIX, "write.parquet.bloom-filter-enabled.column.")
"""Table properties that name a column: they follow its renames and go with it when it is deleted."""


def column_properties_after(
    properties: Mapping[str, str], old: Schema, new: Schema, changes: SchemaChanges
) -> dict[str, str]:
    """``properties`` with the column settings of renamed columns under their new names and those of
    deleted columns removed, as Iceberg Java's schema updates keep them (a column set to metrics ``none``
    keeps it when renamed). A setting follows its column's field id: the columns nested in a renamed struct,
    list or map take the new path, those under a deleted one go with it; a name that is no column of ``old``
    is kept as it is."""
    old_ids, new_names = old.ids_by_name, new.names_by_id
    out: dict[str, str] = {}
    for key, value in properties.items():
        prefix = next((p for p in COLUMN_PROPERTY_PREFIXES if key.startswith(p)), None)
        if prefix is None:
            out[key] = value
            continue
        field_id = old_ids.get(key[len(prefix) :])
        if field_id is None:
            out[key] = value
        elif field_id in new_names and field_id not in changes.deletes:
            out[prefix + new_names[field_id]] = value
    return out

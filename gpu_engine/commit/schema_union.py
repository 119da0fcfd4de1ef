"""``union_by_name``: the schema changes that let a table's schema hold another schema's columns.

Walks the other schema beside the table's, matching fields by name at every depth (struct fields, list
elements, map keys and values), and asks the update for what differs: a missing column is added (optional,
with its doc); a wider primitive type promotes the table's (``int`` -> ``long``); a narrower one is kept
(its values fit); an optional field makes the table's optional; a new doc is set. Anything else (a struct
against a list, ``string`` against ``int``, a map key that would change) fails naming the column. Nothing
is dropped or renamed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..iceberg import types as it
from .schema_changes import InvalidSchemaChange

if TYPE_CHECKING:
    from .schema_update import SchemaUpdate

Path = tuple[str, ...]
Fold = Callable[[str], str]


def union_fields(
    update: SchemaUpdate,
    existing: Sequence[it.NestedField],
    other: Sequence[it.NestedField],
    *,
    case_sensitive: bool,
) -> None:
    """Ask ``update`` for the changes that let the top-level ``existing`` fields hold ``other``."""
    _union_struct(update, existing, (), other, (lambda s: s) if case_sensitive else str.lower)


def _union_struct(
    update: SchemaUpdate,
    existing: Sequence[it.NestedField],
    path: Path,
    other: Sequence[it.NestedField],
    fold: Fold,
) -> None:
    by_name = {fold(f.name): f for f in existing}
    for new in other:
        old = by_name.get(fold(new.name))
        if old is None:
            update.add_column((*path, new.name), new.type, doc=new.doc)
            continue
        where = (*path, old.name)
        _union_type(update, where, old.type, new.type, fold)
        if old.required and not new.required:
            update.make_optional(where)
        if new.doc is not None and new.doc != old.doc:
            update.update_column(where, doc=new.doc)


def _union_type(
    update: SchemaUpdate, path: Path, old: it.IcebergType, new: it.IcebergType, fold: Fold
) -> None:
    """Changes for the field at ``path`` typed ``old`` to hold ``new`` values."""
    if isinstance(old, it.StructType) and isinstance(new, it.StructType):
        _union_struct(update, old.fields, path, new.fields, fold)
    elif isinstance(old, it.ListType) and isinstance(new, it.ListType):
        element = (*path, "element")
        _union_type(update, element, old.element, new.element, fold)
        if old.element_required and not new.element_required:
            update.make_optional(element)
    elif isinstance(old, it.MapType) and isinstance(new, it.MapType):
        if not _fits(old.key, new.key, fold, update.format_version):
            raise _error(
                (*path, "key"), f"the table has {old.key}, the schema {new.key}: a map key cannot change"
            )
        value = (*path, "value")
        _union_type(update, value, old.value, new.value, fold)
        if old.value_required and not new.value_required:
            update.make_optional(value)
    elif isinstance(old, it.PrimitiveType) and isinstance(new, it.PrimitiveType):
        if _fits(old, new, fold, update.format_version):
            return
        if not it.can_promote(old, new, update.format_version):
            raise _error(
                path, f"the table has {old}, the schema {new}: no promotion leads from one to the other"
            )
        update.update_column(path, new)
    else:
        raise _error(path, f"the table has {old}, the schema {new}")


def _fits(old: it.IcebergType, new: it.IcebergType, fold: Fold, version: int) -> bool:
    """Whether ``old`` holds every ``new`` value as it is: the same type, or a narrower primitive, or
    nested types whose fields all fit (and are not optional where ``old``'s are required)."""
    if isinstance(old, it.PrimitiveType) and isinstance(new, it.PrimitiveType):
        return old == new or it.can_promote(new, old, version)
    if isinstance(old, it.StructType) and isinstance(new, it.StructType):
        mine = {fold(f.name): f for f in old.fields}
        return all(
            fold(f.name) in mine
            and _fits(mine[fold(f.name)].type, f.type, fold, version)
            and not (mine[fold(f.name)].required and not f.required)
            for f in new.fields
        )
    if isinstance(old, it.ListType) and isinstance(new, it.ListType):
        return _fits(old.element, new.element, fold, version) and not (
            old.element_required and not new.element_required
        )
    if isinstance(old, it.MapType) and isinstance(new, it.MapType):
        return (
            _fits(old.key, new.key, fold, version)
            and _fits(old.value, new.value, fold, version)
            and not (old.value_required and not new.value_required)
        )
    return False


def _error(path: Path, why: str) -> InvalidSchemaChange:
    return InvalidSchemaChange(f"union by name, column {'.'.join(path)!r}: {why}")

"""``union_by_name``: the schema changes that let a table's schema hold another schema's columns.

Walks the other schema beside the table's, matching fields by name at every depth (struct fields, list
elements, map keys and values), and asks the update for what differs: a missing column is added (optional,
with its doc); a wider primitive type promotes the table's (``int`` -> ``long``); a narrower one is kept
(its values fit); an optional field makes the table's optional (unless ``relax_required`` is off, as an
append's ``merge_schema`` asks: Arrow fields are nullable by default, the rows decide); a new doc is set.
Anything else (a struct against a list, ``string`` against ``int``, a map key that would change) fails naming
the column. Nothing is dropped or renamed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..iceberg import types as it
from .schema_changes import InvalidSchemaChange

if TYPE_CHECKING:
    from .schema_update import SchemaUpdate

Path = tuple[str, ...]


@dataclass(frozen=True)
class _Rules:
    fold: Callable[[str], str]  # names compared after folding (case-insensitive: str.lower)
    relax: bool  # an optional field makes the table's optional
    version: int  # the table's format version (promotions)


def union_fields(
    update: SchemaUpdate,
    existing: Sequence[it.NestedField],
    other: Sequence[it.NestedField],
    *,
    case_sensitive: bool,
    relax_required: bool = True,
) -> None:
    """Ask ``update`` for the changes that let the top-level ``existing`` fields hold ``other``."""
    fold: Callable[[str], str] = (lambda s: s) if case_sensitive else str.lower
    _union_struct(update, existing, (), other, _Rules(fold, relax_required, update.format_version))


def _union_struct(
    update: SchemaUpdate,
    existing: Sequence[it.NestedField],
    path: Path,
    other: Sequence[it.NestedField],
    rules: _Rules,
) -> None:
    by_name = {rules.fold(f.name): f for f in existing}
    for new in other:
        old = by_name.get(rules.fold(new.name))
        if old is None:
            update.add_column((*path, new.name), new.type, doc=new.doc)
            continue
        where = (*path, old.name)
        _union_type(update, where, old.type, new.type, rules)
        if rules.relax and old.required and not new.required:
            update.make_optional(where)
        if new.doc is not None and new.doc != old.doc:
            update.update_column(where, doc=new.doc)


def _union_type(
    update: SchemaUpdate, path: Path, old: it.IcebergType, new: it.IcebergType, rules: _Rules
) -> None:
    """Changes for the field at ``path`` typed ``old`` to hold ``new`` values."""
    if isinstance(old, it.StructType) and isinstance(new, it.StructType):
        _union_struct(update, old.fields, path, new.fields, rules)
    elif isinstance(old, it.ListType) and isinstance(new, it.ListType):
        element = (*path, "element")
        _union_type(update, element, old.element, new.element, rules)
        if rules.relax and old.element_required and not new.element_required:
            update.make_optional(element)
    elif isinstance(old, it.MapType) and isinstance(new, it.MapType):
        if not _fits(old.key, new.key, rules):
            raise _error(
                (*path, "key"), f"the table has {old.key}, the schema {new.key}: a map key cannot change"
            )
        value = (*path, "value")
        _union_type(update, value, old.value, new.value, rules)
        if rules.relax and old.value_required and not new.value_required:
            update.make_optional(value)
    elif isinstance(old, it.PrimitiveType) and isinstance(new, it.PrimitiveType):
        if _fits(old, new, rules):
            return
        if not it.can_promote(old, new, rules.version):
            raise _error(
                path, f"the table has {old}, the schema {new}: no promotion leads from one to the other"
            )
        update.update_column(path, new)
    else:
        raise _error(path, f"the table has {old}, the schema {new}")


def _fits(old: it.IcebergType, new: it.IcebergType, rules: _Rules) -> bool:
    """Whether ``old`` holds every ``new`` value as it is: the same type, or a narrower primitive, or
    nested types whose fields all fit (and, when optional fields relax, are not optional where ``old``'s
    are required)."""

    def looser(old_required: bool, new_required: bool) -> bool:
        return rules.relax and old_required and not new_required

    if isinstance(old, it.PrimitiveType) and isinstance(new, it.PrimitiveType):
        return old == new or it.can_promote(new, old, rules.version)
    if isinstance(old, it.StructType) and isinstance(new, it.StructType):
        mine = {rules.fold(f.name): f for f in old.fields}
        return all(
            rules.fold(f.name) in mine
            and _fits(mine[rules.fold(f.name)].type, f.type, rules)
            and not looser(mine[rules.fold(f.name)].required, f.required)
            for f in new.fields
        )
    if isinstance(old, it.ListType) and isinstance(new, it.ListType):
        return _fits(old.element, new.element, rules) and not looser(
            old.element_required, new.element_required
        )
    if isinstance(old, it.MapType) and isinstance(new, it.MapType):
        return (
            _fits(old.key, new.key, rules)
            and _fits(old.value, new.value, rules)
            and not looser(old.value_required, new.value_required)
        )
    return False


def _error(path: Path, why: str) -> InvalidSchemaChange:
    return InvalidSchemaChange(f"union by name, column {'.'.join(path)!r}: {why}")

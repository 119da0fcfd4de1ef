"""Binding: resolve column names to field ids and convert literals to the field's physical values.

``bind(expr, schema)`` returns an expression whose predicates are all :class:`BoundPredicate`.
Comparisons are rewritten exactly where a literal has no exact value in the column's type (see
:mod:`._literals`) and folded where their outcome is known from the type alone:

- nothing is below the type's minimum or above its maximum: ``int_col > 2**40`` and ``int_col < MIN``
  are false, and so is ``x = v`` for a ``v`` the type cannot hold;
- ``int_col < 2**40``, ``x <= MAX``, ``x != 2**40`` and ``x not in (<only unrepresentable values>)``
  match every non-null value: they become ``x is not null`` (Iceberg Java folds these to true, which
  also matches nulls; here comparisons never match nulls, so the fold keeps that);
- ``is null`` on a required field is false and ``is not null`` true; ``in`` with one value is ``=``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from ..errors import ExpressionError
from ..iceberg import types as it
from ..iceberg.schema import Schema
from . import _literals as lit
from .tree import (
    FALSE,
    BoundPredicate,
    BoundReference,
    Expression,
    Kind,
    Op,
    Predicate,
    UnboundPredicate,
    bound_set,
    bound_unary,
    map_predicates,
    rewrite_not,
)

_FLOATING = frozenset({"float", "double"})
_NOT_COMPARABLE = frozenset({"unknown", "variant", "geometry", "geography"})


def bind(expr: Expression, schema: Schema, *, case_sensitive: bool = True) -> Expression:
    """Bind every predicate of ``expr`` to ``schema`` (names as dotted paths through structs).

    Not is pushed down first (:func:`~.tree.rewrite_not`), so folding sees the negated comparison:
    ``not (int_col > MAX)`` binds as ``int_col <= MAX``, i.e. ``int_col is not null``. The result has no Not.
    """
    index = _StructIndex(schema)

    def bind_one(pred: Predicate) -> Expression:
        if isinstance(pred, BoundPredicate):
            return pred
        return bind_predicate(pred, index.resolve(pred.term, case_sensitive))

    return map_predicates(rewrite_not(expr), bind_one)


def rename_by_id(
    expr: Expression, old: Schema, new: Schema, *, case_sensitive: bool = True
) -> tuple[Expression, list[BoundReference]]:
    """``expr``'s column names resolved in ``old`` and named as ``new`` names the same field ids (two
    schemas of one table: a column renamed between them keeps its predicates); also the references to
    fields ``new`` does not have (dropped), whose predicates are left as they are. Unknown names raise as
    :func:`bind` does."""
    index, names, dropped = _StructIndex(old), new.names_by_id, []

    def rename(pred: Predicate) -> Expression:
        if not isinstance(pred, UnboundPredicate):
            return pred
        ref = index.resolve(pred.term, case_sensitive)
        if ref.field_id not in names:
            dropped.append(ref)
            return pred
        return UnboundPredicate(pred.op, names[ref.field_id], pred.literals)

    return map_predicates(expr, rename), dropped


def bind_predicate(pred: UnboundPredicate, ref: BoundReference) -> Expression:
    """Bind one predicate to a resolved field: type checks, literal conversion and folding."""
    op, t = pred.op, ref.type
    what = f"{pred} (column {ref.name!r}, {t})"
    if op.kind is Kind.UNARY:
        if op in (Op.IS_NAN, Op.NOT_NAN) and t.name not in _FLOATING:
            raise ExpressionError(f"{what}: is_nan / not_nan apply only to float and double columns")
        return bound_unary(op, ref)
    if t.name in _NOT_COMPARABLE:
        raise ExpressionError(f"{what}: values of type {t} cannot be compared; only is null / is not null")
    if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
        if t.name != "string" or not isinstance(pred.literal, str):
            raise ExpressionError(f"{what}: starts_with needs a string column and a string prefix")
        return BoundPredicate(op, ref, (pred.literal,))
    if op.kind is Kind.SET:
        fits = [lit.fit(v, t, what) for v in pred.literals]
        return bound_set(op, ref, [f.value for f in fits if isinstance(f, lit.Exact)])
    return compare(op, ref, lit.fit(pred.literal, t, what))


def compare(op: Op, ref: BoundReference, fitted: lit.Fit) -> Expression:
    """``ref op value`` for a fitted literal, rewritten exactly and folded at the type's limits.

    A timestamp column matching no row for a literal beyond its range (``< '1500-01-01'`` on nanoseconds)
    is not folded to false but compared with the range's end: a date column promoted to it may hold dates
    the type cannot (spec "Schema Evolution": a runtime failure), and its files must still be read to
    fail; metrics skip the others."""
    limits = lit.bounds(ref.type)
    beyond = limits is not None and ref.type.name in it.TIMESTAMP_NAMES
    if isinstance(fitted, lit.Between):
        if beyond and limits is not None:
            if fitted.below is None and op in (Op.LT, Op.LT_EQ, Op.EQ):
                return BoundPredicate(Op.LT, ref, (limits[0],))
            if fitted.above is None and op in (Op.GT, Op.GT_EQ, Op.EQ):
                return BoundPredicate(Op.GT, ref, (limits[1],))
        if op in (Op.LT, Op.LT_EQ):
            return FALSE if fitted.below is None else compare(Op.LT_EQ, ref, lit.Exact(fitted.below))
        if op in (Op.GT, Op.GT_EQ):
            return FALSE if fitted.above is None else compare(Op.GT_EQ, ref, lit.Exact(fitted.above))
        return FALSE if op is Op.EQ else bound_unary(Op.NOT_NULL, ref)
    value = fitted.value
    if limits is not None:
        low, high = limits
        if (op is Op.LT and value == low) or (op is Op.GT and value == high):
            return BoundPredicate(op, ref, (value,)) if beyond else FALSE
        if (op is Op.LT_EQ and value == high) or (op is Op.GT_EQ and value == low):
            return bound_unary(Op.NOT_NULL, ref)
    return BoundPredicate(op, ref, (value,))


class _StructIndex:
    """Fields reachable through structs only (lists and maps hold no filterable columns), by full name."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.by_name: dict[str, it.NestedField] = {}
        self.never_null: set[int] = set()  # required, and so is every struct around it
        for name, f, required in _walk_structs(schema.fields, "", True):
            self.by_name[name] = f
            if required:
                self.never_null.add(f.field_id)

    def resolve(self, name: str, case_sensitive: bool) -> BoundReference:
        field = self.by_name.get(name)
        if field is None and not case_sensitive:
            matches = [f for n, f in self.by_name.items() if n.lower() == name.lower()]
            if len(matches) > 1:
                names = sorted(n for n in self.by_name if n.lower() == name.lower())
                raise ExpressionError(f"column {name!r} is ambiguous without case: it matches {names}")
            field = matches[0] if matches else None
        if field is None:
            raise ExpressionError(self._unknown(name, case_sensitive))
        if not isinstance(field.type, it.PrimitiveType):
            raise ExpressionError(f"column {name!r} is a {field.type}: filters apply to primitive columns")
        full_name = self.schema.names_by_id[field.field_id]
        return BoundReference(field.field_id, full_name, field.type, field.field_id in self.never_null)

    def _unknown(self, name: str, case_sensitive: bool) -> str:
        msg = f"unknown column {name!r} in schema {self.schema.schema_id}"
        if name in self.schema.ids_by_name:
            return f"column {name!r} is inside a list or map: filters apply to struct fields only"
        if case_sensitive:
            same = [n for n in self.by_name if n.lower() == name.lower()]
            if same:
                return f"{msg}; did you mean {', '.join(map(repr, same))}? (names are case-sensitive)"
        close = difflib.get_close_matches(name, list(self.by_name), n=3, cutoff=0.6)
        lowered = {n.lower(): n for n in self.by_name}
        close += [lowered[n] for n in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)]
        close = list(dict.fromkeys(close))[:3]
        if close:
            return f"{msg}; did you mean {', '.join(map(repr, close))}?"
        top = [n for n in self.by_name if "." not in n][:12]
        return f"{msg}; columns: {', '.join(top)}"


def _walk_structs(
    fields: tuple[it.NestedField, ...], prefix: str, parents_required: bool
) -> Iterator[tuple[str, it.NestedField, bool]]:
    for f in fields:
        name = f"{prefix}{f.name}"
        required = parents_required and f.required
        yield name, f, required
        if isinstance(f.type, it.StructType):
            yield from _walk_structs(f.type.fields, name + ".", required)


def bound_literal(value: Any, t: it.PrimitiveType) -> Any:
    """``value`` converted exactly to the physical value of ``t``; an error if it has none."""
    fitted = lit.fit(value, t, f"literal {value!r}")
    if isinstance(fitted, lit.Between):
        raise ExpressionError(f"literal {value!r} has no exact value in type {t}")
    return fitted.value

"""Evaluate bound expressions with Arrow compute, with the semantics stated in :mod:`.tree`.

- :func:`to_arrow_filter` builds a ``pyarrow.compute.Expression`` for row-level (residual) filtering,
  e.g. ``table.filter(to_arrow_filter(expr, {1: "id"}))`` or a dataset scan's ``filter=``.
- :func:`evaluate` computes a boolean mask over a Table, RecordBatch or StructArray in one vectorised
  pass (the planner evaluates partition projections over all partition tuples of a manifest at once).

Columns are found by ``field_names`` (field id -> column name, or a tuple path into struct columns) or by
the reference's name. Literals take the Arrow mapping of the Iceberg type; :func:`evaluate` first casts
a column whose Arrow type differs (for example a ``day`` partition stored as int32) to that mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExpressionError
from ..iceberg import types as it
from . import _arrow
from .tree import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BoundPredicate,
    Expression,
    Not,
    Op,
    Or,
    UnboundPredicate,
    predicates,
    rewrite_not,
)

FieldNames = Mapping[int, str | Sequence[str]]
Column = Any  # a pc.Expression (field reference) or an Arrow array/chunked array
_FALSE = pa.scalar(False)


def to_arrow_filter(expr: Expression, field_names: FieldNames | None = None) -> pc.Expression:
    """A pyarrow compute expression equivalent to the bound ``expr`` (null results become false)."""
    names = field_names or {}

    def column(pred: BoundPredicate) -> Column:
        name = names.get(pred.ref.field_id, pred.ref.name)
        return pc.field(name) if isinstance(name, str) else pc.field(*name)

    built = _build(rewrite_not(expr), column, pc.scalar(True), pc.scalar(False))
    return pc.coalesce(built, pc.scalar(False))


def evaluate(
    expr: Expression,
    data: pa.Table | pa.RecordBatch | pa.StructArray,
    field_names: FieldNames | None = None,
) -> pa.BooleanArray:
    """The rows of ``data`` that the bound ``expr`` matches, as a mask without nulls."""
    if isinstance(data, pa.StructArray):
        data = pa.RecordBatch.from_struct_array(data)
    names = field_names or {}
    n = data.num_rows
    columns: dict[int, Column] = {}
    for pred in predicates(expr):
        if isinstance(pred, UnboundPredicate):
            raise ExpressionError(f"cannot evaluate unbound predicate {pred}: bind the filter first")
        if pred.ref.field_id not in columns:
            name = names.get(pred.ref.field_id, pred.ref.name)
            columns[pred.ref.field_id] = _normalized(_lookup(data, name), pred.ref.type, name)

    def column(pred: BoundPredicate) -> Column:
        return columns[pred.ref.field_id]

    result = _build(rewrite_not(expr), column, pa.repeat(True, n), pa.repeat(False, n))
    mask = pc.coalesce(result, _FALSE)
    assert isinstance(mask, pa.BooleanArray)
    return mask


def _lookup(data: pa.Table | pa.RecordBatch, name: str | Sequence[str]) -> Column:
    path = [name] if isinstance(name, str) else list(name)
    try:
        col: Any = data.column(path[0])
        for part in path[1:]:  # struct_field: a null struct makes its children null, whatever they hold
            index = col.type.get_field_index(part)
            if index < 0:
                raise KeyError(part)
            col = pc.struct_field(col, [index])
    except (KeyError, IndexError):
        raise ExpressionError(f"column {name!r} is not in the data (columns: {data.schema.names})") from None
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _normalized(col: Column, t: it.PrimitiveType, name: object) -> Column:
    target = _arrow.arrow_type(t)
    actual = col.type
    same_kind = (
        actual == target
        or (pa.types.is_integer(actual) and pa.types.is_integer(target))
        or (pa.types.is_decimal(actual) and pa.types.is_decimal(target) and actual.scale == target.scale)
        or (_is_string(actual) and _is_string(target))
        or (_is_binary(actual) and _is_binary(target) and not pa.types.is_fixed_size_binary(target))
    )
    if same_kind:
        return col
    try:
        return col.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        msg = f"column {name!r} of Arrow type {actual} cannot be read as Iceberg {t}: {exc}"
        raise ExpressionError(msg) from None


def _is_string(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


def _build(expr: Expression, column: Callable[[BoundPredicate], Column], true: Any, false: Any) -> Any:
    """``expr`` (without Not) as Kleene logic over Arrow compute: an Expression or arrays, by ``column``."""
    if isinstance(expr, AlwaysTrue):
        return true
    if isinstance(expr, AlwaysFalse):
        return false
    if isinstance(expr, And):
        return pc.and_kleene(_build(expr.left, column, true, false), _build(expr.right, column, true, false))
    if isinstance(expr, Or):
        return pc.or_kleene(_build(expr.left, column, true, false), _build(expr.right, column, true, false))
    if isinstance(expr, Not):  # not produced by rewrite_not; kept for completeness
        return pc.invert(_build(expr.child, column, true, false))
    if isinstance(expr, BoundPredicate):
        return _predicate(expr, column(expr))
    raise ExpressionError(f"cannot evaluate {expr}: bind the filter first")


def _predicate(pred: BoundPredicate, col: Column) -> Any:
    op, t = pred.op, pred.ref.type
    if op is Op.IS_NULL:
        return pc.is_null(col)
    if op is Op.NOT_NULL:
        return pc.is_valid(col)
    if op is Op.IS_NAN:
        return pc.coalesce(pc.is_nan(col), _FALSE)
    if op is Op.NOT_NAN:
        return pc.coalesce(pc.invert(pc.is_nan(col)), pa.scalar(True))
    if op in (Op.IN, Op.NOT_IN):
        values = _arrow.array(pred.literals, t)
        if t.name in ("float", "double"):  # is_in compares bits: -0.0 must find 0.0, as = does
            col, values = pc.add(col, _arrow.scalar(0.0, t)), pc.add(values, _arrow.scalar(0.0, t))
        found = pc.is_in(col, value_set=values)  # a null value is not found
        return found if op is Op.IN else pc.and_kleene(pc.is_valid(col), pc.invert(found))
    if op in (Op.STARTS_WITH, Op.NOT_STARTS_WITH):
        found = pc.starts_with(col, pattern=pred.literal)  # null stays null: neither matches
        return found if op is Op.STARTS_WITH else pc.invert(found)
    return _COMPARE[op](col, _arrow.scalar(pred.literal, t))  # NaN matches only !=; null matches none


_COMPARE: dict[Op, Callable[[Any, Any], Any]] = {
    Op.LT: pc.less,
    Op.LT_EQ: pc.less_equal,
    Op.GT: pc.greater,
    Op.GT_EQ: pc.greater_equal,
    Op.EQ: pc.equal,
    Op.NOT_EQ: pc.not_equal,
}

"""Inclusive pruning by column statistics, vectorised: one boolean "rows might match" per file (or manifest).

The same rules serve data-file metrics (bounds, value/null/NaN counts from manifests) and manifest partition
summaries (bounds, contains_null/contains_nan). As in Iceberg Java's InclusiveMetricsEvaluator and
ManifestEvaluator: missing statistics never prune; NaN bounds (old writers) are treated as missing; a column
whose values are all null matches only ``is_null``; truncated string/binary bounds stay valid bounds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ExpressionError
from ..expressions import AlwaysFalse, AlwaysTrue, And, BoundPredicate, Expression, Op, Or, rewrite_not
from ..expressions.tree import BoundReference

_MAX_IN_LITERALS = 200  # larger IN sets are not checked against bounds (as in Iceberg Java)


@dataclass(frozen=True)
class ColumnStats:
    """Statistics of one column across n files; any array may be None (unknown) or hold nulls (unknown)."""

    lower: pa.Array | None = None
    upper: pa.Array | None = None
    null_count: pa.Array | None = None
    nan_count: pa.Array | None = None
    value_count: pa.Array | None = None
    all_null: pa.Array | None = None  # bool: every value is null (known)


StatsFor = Callable[[BoundReference], ColumnStats]


def might_match(expr: Expression, n: int, stats_for: StatsFor) -> pa.BooleanArray:
    """Which of n files may hold rows matching the bound ``expr`` (True where statistics cannot tell)."""
    cache: dict[int, ColumnStats] = {}

    def stats(ref: BoundReference) -> ColumnStats:
        if ref.field_id not in cache:
            cache[ref.field_id] = stats_for(ref)
        return cache[ref.field_id]

    def walk(e: Expression) -> pa.BooleanArray:
        if isinstance(e, AlwaysTrue):
            return pa.repeat(True, n)
        if isinstance(e, AlwaysFalse):
            return pa.repeat(False, n)
        if isinstance(e, And):
            return pc.and_(walk(e.left), walk(e.right))
        if isinstance(e, Or):
            return pc.or_(walk(e.left), walk(e.right))
        if isinstance(e, BoundPredicate):
            cannot = _cannot_match(e, stats(e.ref))
            if cannot is None:
                return pa.repeat(True, n)
            return pc.invert(pc.fill_null(cannot, False))
        raise ExpressionError(f"cannot evaluate {e} against statistics: bind the filter first")

    result = walk(rewrite_not(expr))
    assert isinstance(result, pa.BooleanArray)
    return result


def _scalar(value: Any, arrow_type: pa.DataType) -> pa.Scalar:
    if isinstance(value, uuid.UUID):
        value = value.bytes
    if isinstance(value, Decimal) and pa.types.is_decimal(arrow_type):
        return pa.scalar(value, type=pa.decimal128(38, arrow_type.scale))
    return pa.scalar(value, type=arrow_type)


def _valid_bound(bound: pa.Array | None) -> pa.Array | None:
    if bound is None:
        return None
    if pa.types.is_floating(bound.type):
        return pc.if_else(pc.is_nan(bound), pa.scalar(None, bound.type), bound)
    return bound


def _or(*conds: Any) -> Any:
    present = [c for c in conds if c is not None]
    if not present:
        return None
    out = pc.fill_null(present[0], False)
    for c in present[1:]:
        out = pc.or_(out, pc.fill_null(c, False))
    return out


def _cannot_match(pred: BoundPredicate, s: ColumnStats) -> Any:
    """A boolean array, True where the statistics prove no row matches; None when nothing can be proved."""
    op = pred.op
    if op is Op.IS_NULL:
        return None if s.null_count is None else pc.equal(s.null_count, 0)
    all_null = s.all_null
    if op is Op.NOT_NULL:
        return all_null
    if op is Op.IS_NAN:
        return _or(all_null, None if s.nan_count is None else pc.equal(s.nan_count, 0))
    if op is Op.NOT_NAN:
        if s.nan_count is None or s.value_count is None:
            return None
        return pc.equal(s.nan_count, s.value_count)
    if op in (Op.NOT_EQ, Op.NOT_IN):
        return None
    lower, upper = _valid_bound(s.lower), _valid_bound(s.upper)
    if op is Op.NOT_STARTS_WITH:
        return _not_starts_with(pred, s, lower, upper)
    return _or(all_null, _range_excludes(pred, lower, upper))


def _range_excludes(pred: BoundPredicate, lower: pa.Array | None, upper: pa.Array | None) -> Any:
    op = pred.op
    if op is Op.STARTS_WITH:
        return _prefix_outside(pred.literal, lower, upper)
    if op is Op.IN:
        if len(pred.literals) > _MAX_IN_LITERALS or lower is None or upper is None:
            return None
        inside = None  # some literal lies within [lower, upper] (unknown bounds: maybe)
        for lit in pred.literals:
            within = pc.and_(
                pc.fill_null(pc.less_equal(lower, _scalar(lit, lower.type)), True),
                pc.fill_null(pc.greater_equal(upper, _scalar(lit, upper.type)), True),
            )
            inside = within if inside is None else pc.or_(inside, within)
        return None if inside is None else pc.invert(inside)
    value = pred.literal
    checks = {
        Op.LT: (lower, pc.greater_equal),
        Op.LT_EQ: (lower, pc.greater),
        Op.GT: (upper, pc.less_equal),
        Op.GT_EQ: (upper, pc.less),
    }
    if op in checks:
        bound, compare = checks[op]
        return None if bound is None else compare(bound, _scalar(value, bound.type))
    if op is Op.EQ:
        above = None if lower is None else pc.greater(lower, _scalar(value, lower.type))
        below = None if upper is None else pc.less(upper, _scalar(value, upper.type))
        return _or(above, below)
    raise ExpressionError(f"no statistics rule for predicate {pred}")


def _slice_prefix(bound: pa.Array, length: int) -> pa.Array:
    if pa.types.is_string(bound.type) or pa.types.is_large_string(bound.type):
        return pc.binary_slice(bound.cast(pa.binary()), 0, length)
    return pc.binary_slice(bound, 0, length)


def _as_bytes(prefix: Any) -> bytes:
    return prefix.encode() if isinstance(prefix, str) else bytes(prefix)


def _prefix_outside(prefix: Any, lower: pa.Array | None, upper: pa.Array | None) -> Any:
    raw = _as_bytes(prefix)
    lit = pa.scalar(raw, pa.binary())
    above = None if lower is None else pc.greater(_slice_prefix(lower, len(raw)), lit)
    below = None if upper is None else pc.less(_slice_prefix(upper, len(raw)), lit)
    return _or(above, below)


def _not_starts_with(pred: BoundPredicate, s: ColumnStats, lower: Any, upper: Any) -> Any:
    if lower is None or upper is None or s.null_count is None:
        return None
    raw = _as_bytes(pred.literal)
    lit = pa.scalar(raw, pa.binary())
    both = pc.and_(
        pc.equal(_slice_prefix(lower, len(raw)), lit), pc.equal(_slice_prefix(upper, len(raw)), lit)
    )
    return pc.and_(pc.equal(s.null_count, 0), both)

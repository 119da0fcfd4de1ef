"""Evaluator tests: Arrow evaluation against a plain-Python reference of the documented semantics
(nulls match no comparison, NaN matches only != and not in, not is Iceberg's negation), and the
vectorised evaluation over partition tuples."""

from __future__ import annotations

import math
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.errors import ExpressionError
from gpu_engine.expressions import (
    FALSE,
    TRUE,
    BoundPredicate,
    Expression,
    Op,
    UnboundPredicate,
    and_,
    bind,
    evaluate,
    not_,
    or_,
    parse,
    project_inclusive,
    rewrite_not,
    to_arrow_filter,
)
from gpu_engine.expressions.tree import map_predicates
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.iceberg.serde import decimal_of

NF = it.NestedField
COLUMNS: dict[str, tuple[it.PrimitiveType, st.SearchStrategy[Any]]] = {
    "l": (it.LONG, st.integers(-3, 3)),
    "f": (it.DOUBLE, st.sampled_from([0.0, -0.0, 1.5, -1.5, math.inf, -math.inf, math.nan])),
    "s": (it.STRING, st.text(alphabet="ab", max_size=3)),
    "d": (it.decimal(5, 2), st.integers(-3, 3).map(lambda n: decimal_of(n * 50, 2))),
    "day": (it.DATE, st.integers(-2, 2)),
    "ts": (it.TIMESTAMP, st.integers(-2, 2)),
    "u": (it.UUID, st.sampled_from([uuid.UUID(int=1), uuid.UUID(int=2**127)])),
    "b": (it.BINARY, st.sampled_from([b"", b"\x00", b"\xff"])),
    "flag": (it.BOOLEAN, st.booleans()),
}
SCHEMA = Schema(tuple(NF(i + 1, name, t) for i, (name, (t, _)) in enumerate(COLUMNS.items())))
ARROW = {
    "l": pa.int64(),
    "f": pa.float64(),
    "s": pa.large_string(),
    "d": pa.decimal128(5, 2),
    "day": pa.date32(),
    "ts": pa.timestamp("us"),
    "u": pa.binary(16),
    "b": pa.binary(),
    "flag": pa.bool_(),
}


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def reference(expr: Expression, row: dict[str, Any]) -> bool:
    """The documented semantics, one row at a time, in plain Python."""

    def leaf(p: BoundPredicate) -> bool:
        v = row[p.ref.name]
        if p.op in (Op.IS_NULL, Op.NOT_NULL):
            return (v is None) == (p.op is Op.IS_NULL)
        if p.op in (Op.IS_NAN, Op.NOT_NAN):
            return _is_nan(v) == (p.op is Op.IS_NAN)
        if v is None:
            return False
        if p.op is Op.NOT_EQ:
            return _is_nan(v) or v != p.literal
        if p.op is Op.NOT_IN:
            return _is_nan(v) or v not in p.literals
        if p.op is Op.STARTS_WITH:
            return bool(v.startswith(p.literal))
        if p.op is Op.NOT_STARTS_WITH:
            return not v.startswith(p.literal)
        if _is_nan(v):
            return False
        if p.op is Op.IN:
            return v in p.literals
        compare = {Op.LT: v < p.literal, Op.LT_EQ: v <= p.literal, Op.GT: v > p.literal}
        compare |= {Op.GT_EQ: v >= p.literal, Op.EQ: v == p.literal}
        return bool(compare[p.op])

    def walk(e: Expression) -> bool:
        if e in (TRUE, FALSE):
            return e == TRUE
        if isinstance(e, BoundPredicate):
            return leaf(e)
        left, right = walk(e.left), walk(e.right)  # type: ignore[attr-defined]
        return (left and right) if type(e).__name__ == "And" else (left or right)

    return walk(rewrite_not(expr))


@st.composite
def _leaf(draw: st.DrawFn) -> Expression:
    name = draw(st.sampled_from(list(COLUMNS)))
    t, values = COLUMNS[name]
    ops = [Op.IS_NULL, Op.NOT_NULL, Op.IN, Op.NOT_IN, Op.LT, Op.LT_EQ, Op.GT, Op.GT_EQ, Op.EQ, Op.NOT_EQ]
    if t == it.DOUBLE:
        ops += [Op.IS_NAN, Op.NOT_NAN]
    if t == it.STRING:
        ops += [Op.STARTS_WITH, Op.NOT_STARTS_WITH]
    op = draw(st.sampled_from(ops))
    literals = values.filter(lambda v: not _is_nan(v))
    if op.kind.value == "unary":
        return UnboundPredicate(op, name)
    if op.kind.value == "set":
        return UnboundPredicate(op, name, tuple(draw(st.lists(literals, min_size=1, max_size=3))))
    return UnboundPredicate(op, name, (draw(literals),))


FILTERS = st.recursive(
    _leaf() | st.sampled_from([TRUE, FALSE]),
    lambda inner: st.builds(and_, inner, inner) | st.builds(or_, inner, inner) | st.builds(not_, inner),
    max_leaves=5,
)


@st.composite
def _rows(draw: st.DrawFn) -> list[dict[str, Any]]:
    row = st.fixed_dictionaries({n: values | st.none() for n, (_, values) in COLUMNS.items()})
    return draw(st.lists(row, max_size=12))


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    def arrow_value(v: Any) -> Any:
        return v.bytes if isinstance(v, uuid.UUID) else v

    return pa.table({n: pa.array([arrow_value(r[n]) for r in rows], ARROW[n]) for n in COLUMNS})


@given(expr=FILTERS, rows=_rows())
def test_arrow_evaluation_matches_the_reference(expr: Expression, rows: list[dict[str, Any]]) -> None:
    bound = bind(expr, SCHEMA)
    table = _table(rows)
    expected = [reference(bound, r) for r in rows]
    assert evaluate(bound, table).to_pylist() == expected, str(bound)
    kept = table.append_column("_i", pa.array(range(len(rows)), pa.int64())).filter(to_arrow_filter(bound))
    assert kept.column("_i").to_pylist() == [i for i, e in enumerate(expected) if e], str(bound)


@given(expr=FILTERS, rows=_rows())
def test_not_is_the_negation_table(expr: Expression, rows: list[dict[str, Any]]) -> None:
    """``not e`` matches exactly the rows where the pushed-down negation matches (null and NaN aside)."""
    table = _table(rows)
    negated = evaluate(bind(not_(expr), SCHEMA), table).to_pylist()
    pushed = map_predicates(rewrite_not(not_(expr)), lambda p: bind(p, SCHEMA))
    assert negated == evaluate(pushed, table).to_pylist()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("l != 1", [False, True, False, True]),  # null matches no comparison
        ("l not in (1, 5)", [False, True, False, True]),
        ("not (l = 1)", [False, True, False, True]),
        ("l is null or l = 1", [True, False, True, False]),
        ("f is not nan", [True, False, True, True]),  # null is not NaN
        ("f is nan", [False, True, False, False]),
        ("f != 1.5", [False, True, False, True]),  # NaN matches !=
        ("f > 1", [True, False, False, False]),
        ("not (f > 1)", [False, False, False, True]),  # NaN matches neither f > 1 nor f <= 1
        ("f = 0", [False, False, False, True]),  # -0.0 equals 0.0
        ("f not in (1.5)", [False, True, False, True]),
        ("f in (0, 5)", [False, False, False, True]),  # -0.0 is in, as it equals 0.0
        ("f in (-0.0, 1.5)", [True, False, False, True]),
        ("f not in (0, 5)", [True, True, False, False]),
        ("s like 'a%'", [True, False, False, False]),
        ("s not like 'a%'", [False, False, False, True]),  # null matches neither
    ],
)
def test_null_and_nan_semantics(text: str, expected: list[bool]) -> None:
    table = pa.table(
        {
            "l": pa.array([1, 2, None, 3], pa.int64()),
            "f": pa.array([1.5, math.nan, None, -0.0]),
            "s": pa.array(["ab", None, None, "ba"], pa.large_string()),
        }
    )
    expr = bind(parse(text), SCHEMA)
    assert evaluate(expr, table).to_pylist() == expected
    assert table.filter(to_arrow_filter(expr)).num_rows == sum(expected)


# -- partition tuples ----------------------------------------------------------------------------------

SPEC = PartitionSpec(
    0,
    (
        PartitionField((6,), 1000, "ts_day", "day"),
        PartitionField((1,), 1001, "l_bucket", "bucket[4]"),
        PartitionField((3,), 1002, "s_trunc", "truncate[1]"),
    ),
)
FILTER = "ts >= '1970-01-03' and s like 'b%'"


def test_partition_tuples_as_struct_array_table_and_batches() -> None:
    projected = project_inclusive(bind(parse(FILTER), SCHEMA), SPEC)
    days = pa.array([1, 2, 3, None, 5], pa.int32())  # a day partition stored as int32: cast to date
    names = pa.array(["a", "b", "b", "b", None])
    buckets = pa.array([0, 1, 2, 3, 0], pa.int32())
    struct = pa.StructArray.from_arrays([days, buckets, names], ["ts_day", "l_bucket", "s_trunc"])
    expected = [False, True, True, False, False]
    assert evaluate(projected, struct).to_pylist() == expected
    chunked = pa.Table.from_batches([pa.RecordBatch.from_struct_array(struct.slice(i, 2)) for i in (0, 2, 4)])
    assert evaluate(projected, chunked).to_pylist() == expected
    by_id = pa.table({"a": days.cast(pa.date32()), "b": names})
    assert evaluate(projected, by_id, {1000: "a", 1002: "b"}).to_pylist() == expected


def test_nested_columns_by_path() -> None:
    schema = Schema((NF(1, "p", it.StructType((NF(2, "q", it.LONG),))),))
    expr = bind(parse("p.q > 1"), schema)
    inner = pa.StructArray.from_arrays([pa.array([1, 2, None], pa.int64())], ["q"])
    table = pa.table({"p": inner})
    assert evaluate(expr, table, {2: ("p", "q")}).to_pylist() == [False, True, False]
    assert table.filter(to_arrow_filter(expr, {2: ("p", "q")})).num_rows == 1


def test_a_null_struct_makes_its_children_null() -> None:
    """A child may hold a value under a null parent (a default column built for rows written before the
    child was added): the filter sees null, as the read value is."""
    schema = Schema((NF(1, "p", it.StructType((NF(2, "q", it.LONG),))),))
    child = pa.array([7, 7, None], pa.int64())
    table = pa.table({"p": pa.StructArray.from_arrays([child], ["q"], mask=pa.array([False, True, False]))})
    for text, expected in [("p.q = 7", [True, False, False]), ("p.q is null", [False, True, True])]:
        expr = bind(parse(text), schema)
        assert evaluate(expr, table, {2: ("p", "q")}).to_pylist() == expected, text
        assert table.filter(to_arrow_filter(expr, {2: ("p", "q")})).num_rows == sum(expected), text


def test_constants_and_empty_inputs() -> None:
    table = pa.table({"l": pa.array([1, None], pa.int64())})
    assert evaluate(TRUE, table).to_pylist() == [True, True]
    assert evaluate(FALSE, table).to_pylist() == [False, False]
    assert evaluate(bind(parse("l = 1"), SCHEMA), table.slice(0, 0)).to_pylist() == []
    assert table.filter(to_arrow_filter(TRUE)).num_rows == 2
    assert table.filter(to_arrow_filter(FALSE)).num_rows == 0


def test_evaluation_errors() -> None:
    table = pa.table({"x": pa.array([1])})
    with pytest.raises(ExpressionError, match="bind the filter"):
        evaluate(parse("x = 1"), table)
    with pytest.raises(ExpressionError, match="'l' is not in the data"):
        evaluate(bind(parse("l = 1"), SCHEMA), table)
    with pytest.raises(ExpressionError, match="cannot be read as Iceberg"):
        evaluate(bind(parse("l = 1"), SCHEMA), pa.table({"l": pa.array(["one"])}))


def test_decimal_literals_beyond_the_precision_compare() -> None:
    # truncate[50] of decimal(5, 2) -999.99 is -1000.00: projected literals may exceed the precision
    table = pa.table({"d": pa.array([Decimal("-999.99"), Decimal("1.00")], pa.decimal128(5, 2))})
    expr = BoundPredicate(Op.GT, bind(parse("d = 1"), SCHEMA).ref, (Decimal("-1000.00"),))  # type: ignore[attr-defined]
    assert evaluate(expr, table).to_pylist() == [True, True]
    assert pc.all(evaluate(expr, table)).as_py()

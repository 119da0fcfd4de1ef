"""Binding tests: name resolution, literal conversion to physical values, exact rewrites and folding."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.errors import ExpressionError
from gpu_engine.expressions import (
    FALSE,
    TRUE,
    BoundPredicate,
    Expression,
    Not,
    Op,
    UnboundPredicate,
    bind,
    equal_to,
    evaluate,
    greater_than,
    greater_than_or_equal,
    is_in,
    parse,
    rename_by_id,
)
from gpu_engine.expressions.tree import predicates
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema

NF = it.NestedField
SCHEMA = Schema(
    (
        NF(1, "id", it.LONG, required=True),
        NF(2, "i", it.INT),
        NF(3, "d", it.decimal(9, 2)),
        NF(4, "ts", it.TIMESTAMP),
        NF(5, "tz", it.TIMESTAMPTZ),
        NF(6, "ns", it.TIMESTAMP_NS),
        NF(7, "day", it.DATE),
        NF(8, "t", it.TIME),
        NF(9, "name", it.STRING),
        NF(10, "u", it.UUID),
        NF(11, "fx", it.fixed(3)),
        NF(12, "bin", it.BINARY),
        NF(13, "f", it.FLOAT),
        NF(14, "dbl", it.DOUBLE),
        NF(15, "flag", it.BOOLEAN),
        NF(16, "s", it.StructType((NF(17, "inner", it.INT, required=True),)), required=False),
        NF(18, "r", it.StructType((NF(19, "leaf", it.INT, required=True),)), required=True),
        NF(20, "l", it.ListType(21, it.INT)),
        NF(22, "v", it.VARIANT),
        NF(23, "CamelCase", it.INT),
    )
)
TS_2024 = 1_704_067_200_000_000  # 2024-01-01T00:00:00 in micros
U = uuid.UUID("12345678-1234-5678-1234-567812345678")


def _b(text: str) -> Expression:
    return bind(parse(text), SCHEMA)


def _one(text: str) -> BoundPredicate:
    out = _b(text)
    assert isinstance(out, BoundPredicate), out
    return out


@pytest.mark.parametrize(
    ("text", "op", "value"),
    [
        ("id = 5", Op.EQ, 5),
        ("i < 2.5", Op.LT_EQ, 2),
        ("i > 2.5", Op.GT_EQ, 3),
        ("i >= -2.5", Op.GT_EQ, -2),
        ("i <= 2.0", Op.LT_EQ, 2),
        ("d = 1.5", Op.EQ, Decimal("1.50")),
        ("d < 1.255", Op.LT_EQ, Decimal("1.25")),
        ("d >= -1.255", Op.GT_EQ, Decimal("-1.25")),
        ("d > 7", Op.GT, Decimal("7.00")),
        ("d = '2.10'", Op.EQ, Decimal("2.10")),
        ("ts >= '2024-01-01'", Op.GT_EQ, TS_2024),
        ("ts >= '2024-01-01T10:00:00'", Op.GT_EQ, TS_2024 + 36_000_000_000),
        ("ts >= '2024-01-01 10:00'", Op.GT_EQ, TS_2024 + 36_000_000_000),
        ("ts < '2024-01-01T00:00:00.0000005'", Op.LT_EQ, TS_2024),
        ("ts > '2024-01-01T00:00:00.0000005'", Op.GT_EQ, TS_2024 + 1),
        ("ts = '1969-12-31T23:59:59.999999'", Op.EQ, -1),
        ("tz >= '2024-01-01T02:00:00+02:00'", Op.GT_EQ, TS_2024),
        ("tz >= '2024-01-01T00:00:00Z'", Op.GT_EQ, TS_2024),
        ("tz >= '2024-01-01'", Op.GT_EQ, TS_2024),  # no offset: UTC
        ("tz >= '2023-12-31T18:30:00-0530'", Op.GT_EQ, TS_2024),
        ("ns = '2024-01-01T00:00:00.000000001'", Op.EQ, TS_2024 * 1000 + 1),
        ("ns < 5", Op.LT, 5),
        ("day = '2024-01-01'", Op.EQ, 19723),
        ("day > '2024-01-01T10:00'", Op.GT_EQ, 19724),
        ("day < '1969-12-31T10:00'", Op.LT_EQ, -1),
        ("day = 3", Op.EQ, 3),
        ("t = '10:00:00.5'", Op.EQ, 36_000_500_000),
        ("name = 'x'", Op.EQ, "x"),
        (f"u = '{U}'", Op.EQ, U),
        ("fx = X'010203'", Op.EQ, b"\x01\x02\x03"),
        ("bin = X''", Op.EQ, b""),
        ("f = 0.1", Op.EQ, float(np.float32(0.1))),
        ("dbl = 0.1", Op.EQ, 0.1),
        ("dbl > 1", Op.GT, 1.0),
        ("dbl = 'inf'", Op.EQ, math.inf),  # infinity as text is infinity, not a value beyond the range
        ("dbl > '-Infinity'", Op.GT, -math.inf),
        ("f != 'inf'", Op.NOT_EQ, math.inf),
        ("flag = true", Op.EQ, True),
        ("s.inner > 1", Op.GT, 1),
        ("i in (1, 2.5, 5000000000)", Op.EQ, 1),
        ("i not in (1, 2.5, 5000000000)", Op.NOT_EQ, 1),
    ],
)
def test_literals_become_physical_values(text: str, op: Op, value: Any) -> None:
    pred = _one(text)
    assert (pred.op, pred.literal) == (op, value)
    assert type(pred.literal) is type(value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i > 3000000000", "false"),
        ("i >= 2147483648", "false"),
        ("i < 3000000000", "i is not null"),
        ("i <= 2147483647", "i is not null"),
        ("i > 2147483647", "false"),
        ("i < -2147483648", "false"),
        ("i >= -2147483648", "i is not null"),
        ("i != 3000000000", "i is not null"),
        ("i = 3000000000", "false"),
        ("i in (3000000000, 4000000000)", "false"),
        ("i not in (3000000000)", "i is not null"),
        ("not (i > 2147483647)", "i is not null"),
        ("d = 1.255", "false"),
        ("d != 1.255", "d is not null"),
        ("d > 99999999", "false"),
        ("d < 10000000", "d is not null"),
        ("t > '23:59:59.999999'", "false"),
        ("f < 1e39", "f <= 3.4028234663852886e+38"),
        ("f > -1e39", "f >= -3.4028234663852886e+38"),
        ("dbl < 1e400", "dbl <= 1.7976931348623157e+308"),
        ("dbl < 1" + "0" * 400, "dbl <= 1.7976931348623157e+308"),  # an integer as 1e400
        ("i = 9e99999999", "false"),  # magnitudes beyond every range decided without their exact value
        ("i > -9e99999999", "i is not null"),
        ("i < 1e-99999999", "i <= 0"),
        ("d > 1e-99999999", "d >= Decimal('0.01')"),
        ("d = -1e-99999999", "false"),
        # timestamps: compared with the range's end, not folded to false (a promoted date may lie beyond)
        ("ns < '1500-01-01T00:00:00'", "ns < -9223372036854775808"),
        ("ns = '1500-01-01T00:00:00'", "ns < -9223372036854775808"),
        ("ns > '2300-01-01T00:00:00'", "ns > 9223372036854775807"),
        ("ns >= '1500-01-01T00:00:00'", "ns is not null"),
        ("ns != '1500-01-01T00:00:00'", "ns is not null"),
        ("id is null", "false"),
        ("id is not null", "true"),
        ("r.leaf is null", "false"),
        ("s.inner is null", "s.inner is null"),  # required, but inside an optional struct
        ("not (i < 5 and name = 'x')", "(i >= 5 or name != 'x')"),
    ],
)
def test_folding_and_rewrites(text: str, expected: str) -> None:
    assert str(_b(text)) == expected


def test_bound_expressions_have_no_not() -> None:
    out = _b("not (not (i = 1) or not (name like 'a%'))")
    assert not isinstance(out, Not) and str(out) == "(i = 1 and name starts with 'a')"


def test_python_api_literals() -> None:
    aware = dt.datetime(2024, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert _bind_value("tz", aware) == TS_2024
    assert _bind_value("ts", dt.datetime(2024, 1, 1)) == TS_2024
    assert _bind_value("ts", dt.date(2024, 1, 1)) == TS_2024
    assert _bind_value("day", dt.date(1969, 12, 31)) == -1
    assert _bind_value("t", dt.time(0, 0, 1)) == 1_000_000
    assert _bind_value("u", U.bytes) == U
    assert _bind_value("d", 1.1) == Decimal("1.10")  # a float's shortest decimal form, not its binary value
    assert _bind_value("i", 7.0) == 7
    assert bind(is_in("i", []), SCHEMA) == FALSE


def _bind_value(column: str, value: Any) -> Any:
    pred = bind(equal_to(column, value), SCHEMA)
    assert isinstance(pred, BoundPredicate)
    return pred.literal


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nme = 1", "unknown column 'nme' in schema 0; did you mean 'name'?"),
        ("camelcase = 1", "did you mean 'CamelCase'? (names are case-sensitive)"),
        ("zzzz = 1", "columns: id, i, d"),
        ("l.element = 1", "inside a list or map"),
        ("s = 1", "primitive columns"),
        ("id is nan", "only to float and double"),
        ("i like 'a%'", "string column"),
        ("name > 5", "literal 5 (int) cannot be compared with string"),
        ("v = 1", "cannot be compared"),
        ("ts > '2024-01-01T00:00:00+02:00'", "offset is not allowed"),
        ("day = '2024-13-01'", "cannot convert '2024-13-01' to date"),
        ("t = '25:00:00'", "out of range"),
        ("fx = X'01'", "1 bytes given for fixed[3]"),
        ("i = true", "a boolean is not a number"),
        ("flag = 1", "expected true or false"),
        ("u = 'not-a-uuid'", "cannot convert 'not-a-uuid' to uuid"),
        ("id = 'abc'", "not a number"),
        ("dbl > 'abc'", "cannot convert 'abc' to double: not a number"),
    ],
)
def test_errors_name_the_column_and_literal(text: str, message: str) -> None:
    with pytest.raises(ExpressionError) as info:
        _b(text)
    assert message in str(info.value)


def test_pandas_timestamps_keep_their_nanoseconds() -> None:
    """pandas.Timestamp is a datetime whose microsecond leaves out its nanoseconds: counted, a literal
    between two microseconds matches no microsecond value (it matched the one below)."""
    import pandas as pd  # type: ignore[import-untyped]

    stamp = pd.Timestamp("2024-01-01 00:00:00.000000001")
    assert str(bind(equal_to("ts", stamp), SCHEMA)) == "false"
    assert _one_bound(bind(greater_than_or_equal("ts", stamp), SCHEMA)).literal == TS_2024 + 1
    assert _one_bound(bind(equal_to("ns", stamp), SCHEMA)).literal == TS_2024 * 1000 + 1
    aware = pd.Timestamp("2024-01-01 02:00:00.000000001+02:00")
    assert str(bind(equal_to("tz", aware), SCHEMA)) == "false"
    assert _one_bound(bind(greater_than_or_equal("tz", aware), SCHEMA)).literal == TS_2024 + 1


def _one_bound(e: Expression) -> BoundPredicate:
    assert isinstance(e, BoundPredicate), e
    return e


def test_integers_too_long_to_print_bind_or_fail_clearly() -> None:
    """Python prints no int of more than 4300 digits: binding one folds by range, or fails naming its size
    (it raised a bare ValueError)."""
    assert str(bind(greater_than("dbl", 10**5000), SCHEMA)) == "dbl >= inf"  # exactly: infinity is more
    assert str(bind(greater_than("i", -(10**5000)), SCHEMA)) == "i is not null"
    with pytest.raises(ExpressionError, match=r"literal <an integer of 16610 bits> .* cannot be compared"):
        bind(equal_to("name", 10**5000), SCHEMA)


def test_nan_literals_are_rejected() -> None:
    with pytest.raises(ExpressionError, match="is_nan"):
        equal_to("dbl", math.nan)


def test_case_insensitive_binding() -> None:
    pred = bind(parse("CAMELcase = 1 and NAME = 'x'"), SCHEMA, case_sensitive=False)
    assert [p.ref.field_id for p in predicates(pred)] == [23, 9]  # type: ignore[union-attr]
    twins = Schema((NF(1, "Ab", it.INT), NF(2, "aB", it.INT)))
    with pytest.raises(ExpressionError, match="ambiguous"):
        bind(parse("ab = 1"), twins, case_sensitive=False)
    # an exact match wins over case-insensitive ones
    assert bind(parse("aB = 1"), twins, case_sensitive=False).ref.field_id == 2  # type: ignore[attr-defined]


def test_bound_predicates_pass_through_and_constants_stay() -> None:
    bound = _one("id = 5")
    assert bind(bound, SCHEMA) is bound
    assert bind(TRUE, SCHEMA) == TRUE
    assert bind(UnboundPredicate(Op.IS_NULL, "i") & FALSE, SCHEMA) == FALSE


# -- exactness: the bound comparison agrees with exact arithmetic on every representable value ----------

OPS = [Op.LT, Op.LT_EQ, Op.GT, Op.GT_EQ, Op.EQ, Op.NOT_EQ]
EXACT = {
    Op.LT: lambda a, b: a < b,
    Op.LT_EQ: lambda a, b: a <= b,
    Op.GT: lambda a, b: a > b,
    Op.GT_EQ: lambda a, b: a >= b,
    Op.EQ: lambda a, b: a == b,
    Op.NOT_EQ: lambda a, b: a != b,
}


@given(
    op=st.sampled_from(OPS),
    literal=st.one_of(
        st.decimals(min_value=-1000, max_value=1000, places=4),
        st.integers(-(2**64), 2**64).map(Decimal),
    ),
    values=st.lists(st.integers(-100_000, 100_000) | st.sampled_from([10**11 - 1, 1 - 10**11]), max_size=20),
)
def test_decimal_comparisons_are_exact(op: Op, literal: Decimal, values: list[int]) -> None:
    schema = Schema((NF(1, "d", it.decimal(11, 2)), NF(2, "i", it.INT)))
    decimals = [Decimal(v).scaleb(-2) for v in values]
    ints = [max(min(v, 2**31 - 1), -(2**31)) for v in values]
    table = pa.table({"d": pa.array(decimals, pa.decimal128(11, 2)), "i": pa.array(ints, pa.int32())})
    for column, data in (("d", decimals), ("i", ints)):
        expr = bind(UnboundPredicate(op, column, (literal,)), schema)
        got = evaluate(expr, table).to_pylist()
        exact = [EXACT[op](Fraction(v), Fraction(literal)) for v in data]
        assert got == exact, f"{column} {op.symbol} {literal}"


@given(
    op=st.sampled_from(OPS),
    nanos=st.integers(-(10**12), 10**12),
    values=st.lists(st.integers(-(10**9), 10**9), max_size=20),
)
def test_timestamp_literals_finer_than_the_column_are_exact(op: Op, nanos: int, values: list[int]) -> None:
    seconds, frac = divmod(nanos, 10**9)
    text = (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)).isoformat() + f".{frac:09d}"
    table = pa.table({"ts": pa.array(values, pa.timestamp("us"))})
    got = evaluate(bind(UnboundPredicate(op, "ts", (text,)), SCHEMA), table).to_pylist()
    assert got == [EXACT[op](v * 1000, nanos) for v in values], text


# -- rename_by_id: a filter moved between two schemas of one table -------------------------------------

RENAME_OLD = Schema(
    (NF(1, "id", it.LONG, True), NF(2, "s", it.StructType((NF(3, "x", it.INT),))), NF(4, "gone", it.STRING))
)
RENAME_NEW = Schema((NF(1, "key", it.LONG, True), NF(2, "t", it.StructType((NF(3, "y", it.LONG),)))))


def test_renamed_columns_take_their_new_names_dropped_ones_are_returned() -> None:
    renamed, dropped = rename_by_id(parse("id < 5 and (s.x in (1, 2) or gone = 'a')"), RENAME_OLD, RENAME_NEW)
    assert str(renamed) == str(parse("key < 5 and (t.y in (1, 2) or gone = 'a')"))
    assert [(r.field_id, r.name) for r in dropped] == [(4, "gone")]


def test_names_resolve_as_binding_does() -> None:
    renamed, dropped = rename_by_id(parse("ID = 1"), RENAME_OLD, RENAME_NEW, case_sensitive=False)
    assert str(renamed) == str(parse("key = 1")) and not dropped
    with pytest.raises(ExpressionError, match="unknown column 'ID'"):
        rename_by_id(parse("ID = 1"), RENAME_OLD, RENAME_NEW)

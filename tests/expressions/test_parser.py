"""Parser tests: the documented grammar, a render-and-parse round trip, and errors that point at the token."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.errors import ExpressionError
from gpu_engine.expressions import (
    FALSE,
    TRUE,
    And,
    Expression,
    Not,
    Op,
    Or,
    UnboundPredicate,
    and_,
    equal_to,
    greater_than,
    greater_than_or_equal,
    is_in,
    is_nan,
    is_null,
    less_than,
    less_than_or_equal,
    not_,
    not_equal_to,
    not_in,
    not_nan,
    not_null,
    not_starts_with,
    or_,
    parse,
    starts_with,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "ts >= '2024-01-01' and id in (1, 2) and name is not null",
            and_(greater_than_or_equal("ts", "2024-01-01"), is_in("id", [1, 2]), not_null("name")),
        ),
        ("not (a < 3 or b = 'x')", not_(or_(less_than("a", 3), equal_to("b", "x")))),
        ("x between 1 and 5", and_(greater_than_or_equal("x", 1), less_than_or_equal("x", 5))),
        ("x not between -1 and 5", not_(and_(greater_than_or_equal("x", -1), less_than_or_equal("x", 5)))),
        ("s like 'abc%'", starts_with("s", "abc")),
        ("s not like 'abc%'", not_starts_with("s", "abc")),
        ("s like 'a\\%b\\_c%'", starts_with("s", "a%b_c")),
        ("s like 'exact'", equal_to("s", "exact")),
        ("s LIKE '%'", starts_with("s", "")),
        ("f is nan", is_nan("f")),
        ("f IS NOT NAN", not_nan("f")),
        ("f is null", is_null("f")),
        ("id not in (1,2)", not_in("id", [1, 2])),
        ("name != 'x'", not_equal_to("name", "x")),
        ("name <> 'x'", not_equal_to("name", "x")),
        ("x == 1", equal_to("x", 1)),
        ("`select`.`a.b` > 1", greater_than("select.a.b", 1)),
        ('"my col" = 2', equal_to("my col", 2)),
        ('"a""b" = 2', equal_to('a"b', 2)),
        ("a.b.c > 1", greater_than("a.b.c", 1)),
        ("x = -12", equal_to("x", -12)),
        ("x = +12", equal_to("x", 12)),
        ("x = 1.50", equal_to("x", Decimal("1.50"))),
        ("x = -2.5e-3", equal_to("x", Decimal("-0.0025"))),
        ("x = 1E3", equal_to("x", Decimal("1E3"))),
        ("x = -12345678901234567890123456789.5", equal_to("x", Decimal("-12345678901234567890123456789.5"))),
        ("x = .5", equal_to("x", Decimal("0.5"))),
        ("x = 'it''s'", equal_to("x", "it's")),
        ("x = X'00ff'", equal_to("x", b"\x00\xff")),
        ("flag = true", equal_to("flag", True)),
        ("flag = FALSE", equal_to("flag", False)),
        ("true = flag", equal_to("flag", True)),
        ("5 < x", greater_than("x", 5)),
        ("5 >= x", less_than_or_equal("x", 5)),
        ("'a' = x", equal_to("x", "a")),
        ("true", TRUE),
        ("false or x = 1", equal_to("x", 1)),
        ("true and x = 1", equal_to("x", 1)),
        ("NOT NOT x = 1", equal_to("x", 1)),
        ("a = 1 or b = 2 and c = 3", or_(equal_to("a", 1), and_(equal_to("b", 2), equal_to("c", 3)))),
        ("(a = 1 or b = 2) and c = 3", and_(or_(equal_to("a", 1), equal_to("b", 2)), equal_to("c", 3))),
        ("x in ('a')", UnboundPredicate(Op.IN, "x", ("a",))),
    ],
)
def test_parse(text: str, expected: Expression) -> None:
    assert parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("x = ", "expected a literal", 4),
        ("x in ()", "at least one value", 6),
        ("s like '%abc'", "only 'prefix%'", 7),
        ("s like 'a_c%'", "'_' wildcards", 7),
        ("x = null", "IS NULL", 4),
        ("null = x", "IS NULL", 0),
        ("x is nul", "NULL or NAN", 5),
        ("(x = 1", "expected ')'", 6),
        ("x = 1 y = 2", "AND, OR or the end", 6),
        ("and x = 1", "column name", 0),
        ("x @ 1", "unexpected character", 2),
        ("x = 'abc", "unterminated '-quoted", 4),
        ("x = `abc", "unterminated `-quoted", 4),
        ("x = X'0g'", "hex digits", 4),
        ("x = 1abc", "unexpected character", 4),
        ("x", "comparison, IS, IN, BETWEEN or LIKE", 1),
        ("5 = 6", "column name", 4),
        ("x between 1 or 2", "expected AND", 12),
        ("x in (1, nan)", "IS NAN", 9),
        ("a. = 1", "field name after '.'", 3),
        ("x = -'a'", "number after", 5),
        ("``.a = 1", "empty quoted", 0),
    ],
)
def test_errors_point_at_the_token(text: str, message: str, position: int) -> None:
    with pytest.raises(ExpressionError) as info:
        parse(text)
    assert message in str(info.value)
    assert f"at position {position} " in str(info.value)
    assert str(info.value).splitlines()[-1] == "  " + " " * position + "^"


def test_empty_and_non_string_filters_are_rejected() -> None:
    with pytest.raises(ExpressionError, match="empty filter"):
        parse("  ")
    with pytest.raises(ExpressionError, match="filter string"):
        parse(42)  # type: ignore[arg-type]


def test_errors_are_value_errors() -> None:
    with pytest.raises(ValueError, match="position"):
        parse("x =")


# -- round trip: render a random tree as text and parse it back ------------------------------------------

NAMES = st.sampled_from(["a", "b_2", "nested.leaf", "`with space`", "`and`", '"quoted"'])
LITERALS = st.one_of(
    st.integers(-(10**20), 10**20),
    st.decimals(allow_nan=False, allow_infinity=False, places=3),
    st.text(max_size=5),
    st.binary(max_size=3),
    st.booleans(),
)


def _name(text: str) -> str:
    return ".".join(p.strip('`"') for p in text.split(".")) if text[0] not in '`"' else text[1:-1]


def _render_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "TRUE" if v else "false"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bytes):
        return f"x'{v.hex()}'"
    return str(v)


@st.composite
def _leaf(draw: st.DrawFn) -> tuple[str, Expression]:
    text = draw(NAMES)
    name = _name(text)
    kind = draw(st.sampled_from(["cmp", "unary", "set", "like"]))
    if kind == "unary":
        op = draw(st.sampled_from([Op.IS_NULL, Op.NOT_NULL, Op.IS_NAN, Op.NOT_NAN]))
        return f"{text} {op.symbol}", UnboundPredicate(op, name)
    if kind == "set":
        op = draw(st.sampled_from([Op.IN, Op.NOT_IN]))
        values = draw(st.lists(LITERALS, min_size=1, max_size=3))
        return f"{text} {op.symbol} ({', '.join(map(_render_literal, values))})", UnboundPredicate(
            op, name, tuple(values)
        )
    if kind == "like":
        prefix = draw(st.text(alphabet="ab%_\\'", max_size=4))
        escaped = "".join("\\" + c if c in "%_\\" else c for c in prefix).replace("'", "''")
        return f"{text} like '{escaped}%'", starts_with(name, prefix)
    op = draw(st.sampled_from([Op.LT, Op.LT_EQ, Op.GT, Op.GT_EQ, Op.EQ, Op.NOT_EQ]))
    value = draw(LITERALS)
    if draw(st.booleans()):
        return f"{_render_literal(value)} {op.flip().symbol} {text}", UnboundPredicate(op, name, (value,))
    return f"{text} {op.symbol} {_render_literal(value)}", UnboundPredicate(op, name, (value,))


Case = tuple[str, Expression]


def _combine(children: st.SearchStrategy[Case]) -> st.SearchStrategy[Case]:
    pair = st.tuples(children, children)
    return st.one_of(
        pair.map(lambda p: (f"({p[0][0]}) AND ({p[1][0]})", And(p[0][1], p[1][1]))),
        pair.map(lambda p: (f"({p[0][0]}) or ({p[1][0]})", Or(p[0][1], p[1][1]))),
        children.filter(lambda c: not isinstance(c[1], Not)).map(lambda c: (f"not ({c[0]})", Not(c[1]))),
    )


@given(st.recursive(_leaf(), _combine, max_leaves=6))
def test_render_and_parse_round_trip(case: tuple[str, Expression]) -> None:
    text, expected = case
    assert parse(text) == expected, text


def test_constants_fold() -> None:
    assert parse("false and x = 1") == FALSE
    assert parse("not true") == FALSE
    assert parse("x = 1 or true") == TRUE

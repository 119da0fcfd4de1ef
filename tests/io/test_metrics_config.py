"""Metrics modes from table properties, against hand-derived expectations of Iceberg's MetricsConfig rules
(and PyIceberg's parser for the mode strings both accept)."""

from __future__ import annotations

import pytest
from pyiceberg.io.pyarrow import match_metrics_mode

from gpu_engine.errors import InvalidProperty
from gpu_engine.iceberg import metadata_columns as mc
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.iceberg.sorting import SortField, SortOrder
from gpu_engine.io.metrics_config import (
    COUNTS,
    DEFAULT_MODE,
    FULL,
    NONE,
    MetricsMode,
    metrics_config,
    parse_mode,
    truncate,
)

F = it.NestedField

# ids: 1 a, 2 b, 3 s{4 x, 5 y{6 z}}, 7 l<8>, 9 m<10, 11>, 12 c
SCHEMA = Schema(
    (
        F(1, "a", it.LONG, True),
        F(2, "b", it.STRING),
        F(3, "s", it.StructType((F(4, "x", it.INT), F(5, "y", it.StructType((F(6, "z", it.DOUBLE),)))))),
        F(7, "l", it.ListType(8, it.STRING)),
        F(9, "m", it.MapType(10, it.STRING, 11, it.LONG)),
        F(12, "c", it.DATE),
    )
)
LEAVES = (1, 2, 4, 6, 8, 10, 11, 12)


def modes(props: dict[str, str], **kw: SortOrder) -> dict[int, MetricsMode]:
    config = metrics_config(SCHEMA, props, **kw)
    return {fid: config.mode(fid) for fid in LEAVES}


def test_default_is_truncate_16_everywhere():
    assert str(DEFAULT_MODE) == "truncate(16)"
    assert truncate(16) == DEFAULT_MODE
    assert modes({}) == dict.fromkeys(LEAVES, truncate(16))


@pytest.mark.parametrize(
    ("text", "mode"),
    [
        ("none", NONE),
        ("counts", COUNTS),
        ("full", FULL),
        ("truncate(1)", truncate(1)),
        ("Truncate(32)", truncate(32)),
        ("  FULL ", FULL),
        ("truncate(0016)", truncate(16)),
    ],
)
def test_parse_mode(text: str, mode: MetricsMode):
    assert parse_mode(text, prop="p") == mode
    ref = match_metrics_mode(text)  # PyIceberg's parser agrees on every form it accepts
    assert (ref.type.value, ref.length) == (mode.kind, mode.length)


@pytest.mark.parametrize(
    "text", ["", "all", "truncate(0)", "truncate(-1)", "truncate()", "truncate(x)", "truncate 4"]
)
def test_bad_mode_names_the_property(text: str):
    with pytest.raises(InvalidProperty, match=r"write\.metadata\.metrics\.default"):
        metrics_config(SCHEMA, {"write.metadata.metrics.default": text})
    with pytest.raises(InvalidProperty, match=r"write\.metadata\.metrics\.column\.s\.x"):
        metrics_config(SCHEMA, {"write.metadata.metrics.column.s.x": text})


def test_mode_flags():
    assert (NONE.counts, NONE.bounds) == (False, False)
    assert (COUNTS.counts, COUNTS.bounds) == (True, False)
    assert (truncate(3).counts, truncate(3).bounds) == (True, True)
    assert (FULL.counts, FULL.bounds) == (True, True)


def test_default_and_column_overrides_by_full_name():
    props = {
        "write.metadata.metrics.default": "counts",
        "write.metadata.metrics.column.a": "full",
        "write.metadata.metrics.column.s.y.z": "none",
        "write.metadata.metrics.column.l.element": "truncate(4)",
        "write.metadata.metrics.column.m.value": "full",
        "write.metadata.metrics.column.s": "full",  # a struct: no primitive column, ignored as in Java
        "write.metadata.metrics.column.dropped": "full",  # no such column (any more): ignored
    }
    assert modes(props) == {
        1: FULL,
        2: COUNTS,
        4: COUNTS,
        6: NONE,
        8: truncate(4),
        10: COUNTS,
        11: FULL,
        12: COUNTS,
    }


def test_a_bad_value_fails_even_for_an_unknown_column():
    with pytest.raises(InvalidProperty, match=r"column\.gone"):
        metrics_config(SCHEMA, {"write.metadata.metrics.column.gone": "sometimes"})


# -- write.metadata.metrics.max-inferred-column-defaults -----------------------------------------------


def test_inferred_defaults_limited_to_the_first_primitive_columns():
    # the top struct's primitives first (a, b, c), then nested types in field order: s (x, then y.z),
    # l.element, m.key, m.value
    order = [1, 2, 12, 4, 6, 8, 10, 11]
    for limit in range(len(order) + 1):
        got = modes({"write.metadata.metrics.max-inferred-column-defaults": str(limit)})
        expected = {fid: (truncate(16) if fid in order[:limit] else NONE) for fid in LEAVES}
        if limit == len(order):  # not more columns than the limit: the default applies everywhere
            expected = dict.fromkeys(LEAVES, truncate(16))
        assert got == expected, limit


def test_row_lineage_columns_written_by_a_rewrite_are_not_table_columns():
    with_lineage = Schema((*SCHEMA.fields, *mc.LINEAGE))
    for limit in range(len(LEAVES) + 1):
        props = {"write.metadata.metrics.max-inferred-column-defaults": str(limit)}
        got = metrics_config(with_lineage, props)
        assert {fid: got.mode(fid) for fid in LEAVES} == modes(props), limit


def test_limit_counts_primitives_not_top_level_columns():
    wide = Schema(tuple(F(i, f"c{i}", it.INT) for i in range(1, 102)))
    config = metrics_config(wide, {})
    assert [config.mode(i) for i in (1, 100, 101)] == [truncate(16), truncate(16), NONE]
    nested = Schema((F(1, "s", it.StructType(tuple(F(i, f"f{i}", it.INT) for i in range(2, 103)))),))
    config = metrics_config(nested, {})
    assert [config.mode(i) for i in (2, 101, 102)] == [truncate(16), truncate(16), NONE]


def test_an_explicit_default_is_not_limited_and_columns_still_override():
    props = {
        "write.metadata.metrics.max-inferred-column-defaults": "1",
        "write.metadata.metrics.default": "full",
        "write.metadata.metrics.column.b": "counts",
    }
    assert modes(props) == {**dict.fromkeys(LEAVES, FULL), 2: COUNTS}
    limited = modes(
        {
            "write.metadata.metrics.max-inferred-column-defaults": "1",
            "write.metadata.metrics.column.c": "full",
        }
    )
    assert limited == {**dict.fromkeys(LEAVES, NONE), 1: truncate(16), 12: FULL}


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_bad_limit_names_the_property(value: str):
    with pytest.raises(InvalidProperty, match="max-inferred-column-defaults"):
        metrics_config(SCHEMA, {"write.metadata.metrics.max-inferred-column-defaults": value})


# -- sort order columns ----------------------------------------------------------------------------------


def order(*fields: tuple[int, str]) -> SortOrder:
    return SortOrder(1, tuple(SortField((sid,), tr, "asc", "nulls-first") for sid, tr in fields))


def test_sorted_columns_get_bounds_when_the_default_has_none():
    props = {"write.metadata.metrics.default": "none", "write.metadata.metrics.column.c": "counts"}
    got = modes(props, sort_order=order((1, "identity"), (2, "truncate[4]"), (4, "bucket[8]"), (12, "day")))
    # identity/truncate/day preserve order; bucket does not; a column setting wins over the sort default
    assert got == {**dict.fromkeys(LEAVES, NONE), 1: truncate(16), 2: truncate(16), 12: COUNTS}


def test_sorted_columns_keep_a_default_with_bounds():
    got = modes({"write.metadata.metrics.default": "full"}, sort_order=order((1, "identity")))
    assert got == dict.fromkeys(LEAVES, FULL)


def test_the_tables_sort_order_gets_bounds_too():
    """As Java's MetricsConfig.forTable: the table's order counts whether or not the rows follow it."""
    props = {"write.metadata.metrics.default": "counts"}
    got = modes(props, sort_order=order((1, "identity")), table_order=order((2, "truncate[4]")))
    assert got == {**dict.fromkeys(LEAVES, COUNTS), 1: truncate(16), 2: truncate(16)}

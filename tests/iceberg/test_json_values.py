"""JSON single-value serialization (Appendix D): the spec's examples with hand-computed physical values,
every default value the fixture tables carry, round trips, and malformed input."""

from __future__ import annotations

import json
import math
import uuid
from decimal import Decimal
from typing import Any

import pytest

from gpu_engine.errors import SingleValueError
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.json_values import from_json, to_json
from gpu_engine.iceberg.metadata import metadata_from_json
from tests.planning._support import FIXTURES

F = it.NestedField
DAY_US = 86_400_000_000


@pytest.mark.parametrize(
    ("t", "text", "value"),
    [
        (it.BOOLEAN, True, True),
        (it.INT, 34, 34),
        (it.LONG, -9223372036854775808, -(2**63)),
        (it.FLOAT, 1.0, 1.0),
        (it.FLOAT, 0.34234, 0.34233999252319336),  # rounded to float32 (numpy.float32)
        (it.DOUBLE, 0.342343242342342, 0.342343242342342),
        (it.decimal(4, 2), "14.20", Decimal("14.20")),
        (it.decimal(9, 2), "-0.01", Decimal("-0.01")),
        (it.decimal(21, 0), "2E+20", Decimal("200000000000000000000")),
        (it.DATE, "2017-11-16", 17486),
        (it.DATE, "1969-12-31", -1),
        (it.TIME, "22:31:08.123456", ((22 * 60 + 31) * 60 + 8) * 1_000_000 + 123456),
        (it.TIME, "00:00:00.012345", 12345),
        (it.TIMESTAMP, "2017-11-16T22:31:08.123456", 17486 * DAY_US + 81068123456),
        (it.TIMESTAMP, "1969-12-31T23:59:59.123456", -876544),
        (it.TIMESTAMPTZ, "2017-11-16T22:31:08.123456+00:00", 17486 * DAY_US + 81068123456),
        (it.TIMESTAMPTZ, "2017-11-17T00:31:08.123456+02:00", 17486 * DAY_US + 81068123456),
        (it.TIMESTAMP_NS, "2017-11-16T22:31:08.123456789", (17486 * DAY_US + 81068123456) * 1000 + 789),
        (
            it.TIMESTAMPTZ_NS,
            "2017-11-16T22:31:08.123456789+00:00",
            (17486 * DAY_US + 81068123456) * 1000 + 789,
        ),
        (it.STRING, "iceberg", "iceberg"),
        (it.UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7", uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")),
        (it.fixed(4), "000102ff", b"\x00\x01\x02\xff"),
        (it.BINARY, "000102ff", b"\x00\x01\x02\xff"),
        (it.STRING, None, None),
        (it.UNKNOWN, None, None),
    ],
)
def test_primitives(t: it.PrimitiveType, text: Any, value: Any) -> None:
    assert from_json(t, text) == value


def test_nan_and_infinities() -> None:
    assert math.isnan(from_json(it.DOUBLE, "NaN")) and from_json(it.FLOAT, "-Infinity") == -math.inf


def test_nested_values() -> None:
    struct = it.StructType((F(1, "a", it.INT), F(2, "b", it.STRING)))
    assert from_json(struct, {"1": 1, "2": "bar"}) == {1: 1, 2: "bar"}
    assert from_json(struct, {}) == {}
    assert from_json(it.ListType(3, it.DATE), ["1970-01-02", None]) == [1, None]
    m = it.MapType(4, it.STRING, 5, it.LONG)
    assert from_json(m, {"keys": ["a", "b"], "values": [1, 2]}) == [("a", 1), ("b", 2)]
    assert to_json(m, [("a", 1), ("b", 2)]) == {"keys": ["a", "b"], "values": [1, 2]}
    assert to_json(struct, {1: 1, 2: "bar"}) == {"1": 1, "2": "bar"}


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (it.BOOLEAN, "true"),
        (it.INT, 2**31),
        (it.INT, True),
        (it.INT, 1.5),
        (it.LONG, "5"),
        (it.FLOAT, 1e40),
        (it.DOUBLE, "nan"),
        (it.decimal(4, 2), "14.205"),
        (it.decimal(4, 2), "123.45"),
        (it.decimal(4, 2), 1.5),
        (it.decimal(4, 2), "NaN"),
        (it.DATE, "2017-13-01"),
        (it.TIME, "25:00:00"),
        (it.TIME, "10:00:00.1234567"),
        (it.TIMESTAMP, "2017-11-16T22:31:08+00:00"),
        (it.TIMESTAMPTZ, "2017-11-16T22:31:08"),
        (it.TIMESTAMP, "2017-11-16T22:31:08.123456789"),
        (it.UUID, "not-a-uuid"),
        (it.fixed(4), "0001"),
        (it.BINARY, "xyz"),
        (it.STRING, 5),
        (it.UNKNOWN, 1),
        (it.VARIANT, "x"),
        (it.GeometryType("geometry"), "POINT (30 10)"),
        (it.StructType((F(1, "a", it.INT),)), {"2": 1}),
        (it.StructType((F(1, "a", it.INT),)), {"x": 1}),
        (it.StructType((F(1, "a", it.INT, required=True),)), {"1": None}),
        (it.ListType(1, it.INT, element_required=True), [None]),
        (it.MapType(1, it.INT, 2, it.INT), {"keys": [1], "values": []}),
        (it.MapType(1, it.INT, 2, it.INT), {"keys": [None], "values": [1]}),
    ],
)
def test_malformed_values(t: it.IcebergType, text: Any) -> None:
    with pytest.raises(SingleValueError, match=f"not a valid {str(t)[:5]}"):
        from_json(t, text)


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (it.decimal(16, 2), "12345.00"),
        (it.decimal(38, 10), "-1234567890123456789012345678.0123456789"),
        (it.DATE, "0001-01-01"),
        (it.TIME, "23:59:59.999999"),
        (it.TIMESTAMP, "1970-01-01T00:00:00.012345"),
        (it.TIMESTAMPTZ, "1970-01-01T00:00:00.012345+00:00"),
        (it.TIMESTAMP_NS, "1677-09-21T00:12:43.145224192"),
        (it.UUID, "f79c3e09-677c-4bbd-a479-3f349cb785e7"),
        (it.fixed(5), "010203ff03"),
    ],
)
def test_canonical_round_trip(t: it.PrimitiveType, text: str) -> None:
    assert to_json(t, from_json(t, text)) == text


def _fields(t: Any) -> Any:
    if isinstance(t, it.StructType):
        for f in t.fields:
            yield f
            yield from _fields(f.type)
    elif isinstance(t, it.ListType):
        yield from _fields(t.element)
    elif isinstance(t, it.MapType):
        yield from _fields(t.key)
        yield from _fields(t.value)


def test_every_fixture_default_parses() -> None:
    """All initial-/write-defaults of every fixture table's latest metadata parse for their field's type."""
    seen = 0
    for path in sorted(FIXTURES.rglob("*.metadata.json")):
        text = path.read_bytes().decode("utf-8", errors="replace")  # skips the gzip-compressed ones below
        if "initial-default" not in text:
            continue
        md = metadata_from_json(json.loads(text), source=str(path))
        for schema in md.schemas:
            for f in _fields(schema.as_struct):
                for has, value in (
                    (f.has_initial_default, f.initial_default),
                    (f.has_write_default, f.write_default),
                ):
                    if has:
                        parsed = from_json(f.type, value)
                        if value is not None and not isinstance(f.type, it.StructType):
                            assert from_json(f.type, to_json(f.type, parsed)) == parsed or parsed != parsed
                        seen += 1
    assert seen >= 30

"""A column default given in Python becomes the spec's JSON single value exactly, or is refused naming the
column (the table-level behaviour is in test_schema_update.py)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.commit.column_default import default_json
from gpu_engine.commit.schema_changes import InvalidSchemaChange
from gpu_engine.iceberg import types as it


@pytest.mark.parametrize(
    ("type_", "value", "expected"),
    [
        (
            "timestamp_ns",
            np.datetime64("1969-12-31T23:59:59.000000001", "ns"),
            "1969-12-31T23:59:59.000000001",
        ),
        ("time", pa.scalar(3_723_000_001, pa.time64("us")), "01:02:03.000001"),
        ("date", "1969-12-31", "1969-12-31"),
        ("date", pa.scalar(-1, pa.date32()), "1969-12-31"),
        ("uuid", "12345678-1234-5678-1234-567812345678", "12345678-1234-5678-1234-567812345678"),
        ("decimal(5, 2)", Decimal("1.50"), "1.50"),
        ("long", 7, 7),
    ],
)
def test_values_become_the_spec_json_form(type_: str, value: Any, expected: Any) -> None:
    assert default_json(it.parse_type(type_), value, "price") == expected


@pytest.mark.parametrize(
    ("type_", "value", "message"),
    [
        ("timestamp", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "has a time zone"),
        ("int", "x", "is not a int"),
        ("decimal(5, 2)", Decimal("1.505"), "is not a decimal(5, 2)"),
        ("uuid", "not-a-uuid", "is not a uuid"),
        ("date", "2024-02-30", "is not a date"),
    ],
)
def test_values_of_another_type_are_refused_naming_the_column(type_: str, value: Any, message: str) -> None:
    with pytest.raises(InvalidSchemaChange, match=f"^price: .*{re.escape(message)}"):
        default_json(it.parse_type(type_), value, "price")


def test_nested_columns_take_no_default() -> None:
    struct = it.StructType((it.NestedField(5, "a", it.parse_type("int"), required=False),))
    with pytest.raises(InvalidSchemaChange, match=r"^loc: defaults are supported for primitive columns only"):
        default_json(struct, {"a": 1}, "loc")

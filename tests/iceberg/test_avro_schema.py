"""Avro schema helpers of the manifest reader: the Iceberg type of a partition field's Avro type."""

from __future__ import annotations

from typing import Any

import pytest

from gpu_engine.errors import ManifestError
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.avro_schema import iceberg_type


@pytest.mark.parametrize(
    "avro, expected",
    [
        (["null", "int"], it.INT),
        ([{"type": "null"}, "int"], it.INT),  # the null branch written as a type object
        (["long", {"type": "null"}], it.LONG),
        ([{"type": "null"}, {"type": "int", "logicalType": "date"}], it.DATE),
        ({"type": "fixed", "name": "f", "size": 16, "logicalType": "uuid"}, it.UUID),
    ],
)
def test_partition_field_types(avro: Any, expected: it.PrimitiveType):
    assert iceberg_type("m.avro", "p", avro, {}) == expected


def test_a_union_of_two_values_is_refused_naming_the_field():
    with pytest.raises(ManifestError, match=r"m\.avro: partition field 'p' has a non-primitive"):
        iceberg_type("m.avro", "p", ["null", "int", "string"], {})

"""Partition specs from metadata JSON: transforms in Iceberg's spelling whatever case they were written in."""

from __future__ import annotations

import pytest

from gpu_engine.iceberg.partitioning import spec_from_json
from gpu_engine.transforms import Bucket


@pytest.mark.parametrize(
    ("written", "spelled"),
    [
        ("IDENTITY", "identity"),
        ("Bucket[16]", "bucket[16]"),
        ("truncate[ 4 ]", "truncate[4]"),
        ("DAY", "day"),
    ],
)
def test_transforms_are_read_in_any_case(written: str, spelled: str) -> None:
    """Java's Transforms.fromString ignores case and writes lower case. Compared as written, an
    ``IDENTITY`` field's values were not filled in for files without the column (read as null, and
    compaction wrote the nulls), and a ``VOID``-only spec's equality deletes were not global."""
    spec = spec_from_json(
        {"spec-id": 3, "fields": [{"source-id": 1, "field-id": 1000, "name": "p", "transform": written}]}
    )
    assert spec.fields[0].transform == spelled
    assert not spec.is_unpartitioned


def test_a_void_only_spec_is_unpartitioned_in_any_case() -> None:
    spec = spec_from_json(
        {"spec-id": 1, "fields": [{"source-id": 2, "field-id": 1000, "name": "s", "transform": "VOID"}]}
    )
    assert spec.is_unpartitioned and spec.fields[0].transform == "void"


def test_unknown_transforms_are_kept_as_written() -> None:
    spec = spec_from_json(
        {"spec-id": 0, "fields": [{"source-id": 1, "field-id": 1000, "name": "z", "transform": "Zorder"}]}
    )
    assert spec.fields[0].transform == "Zorder"
    assert spec_from_json(
        {"spec-id": 0, "fields": [{"source-id": 1, "field-id": 1000, "name": "b", "transform": "BUCKET[8]"}]}
    ).fields[0].parsed == Bucket(8)

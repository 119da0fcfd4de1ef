"""Manifest entries -> DataFile values: a v2 data file without a data sequence number is an error."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.errors import PlanningError
from gpu_engine.planning.scan import _data_files


def entries(seq: int | None) -> pa.Table:
    one = {
        "file_path": ["/t/data/a.parquet"], "file_format": ["PARQUET"], "spec_id": [0],
        "record_count": [10], "file_size_in_bytes": [100], "sequence_number": [seq], "first_row_id": [None],
        "split_offsets": [[4]], "sort_order_id": [None], "manifest_path": ["/t/metadata/m0.avro"],
    }  # fmt: skip
    table = pa.table(one)
    partition = pa.StructArray.from_arrays([pa.array([7])], names=["x"])
    return table.append_column("partition", partition)


def test_entries_become_data_files() -> None:
    (data,) = _data_files(entries(3), format_version=2)
    assert (data.path, data.partition, data.data_sequence_number, data.split_offsets) == (
        "/t/data/a.parquet", (7,), 3, (4,),
    )  # fmt: skip


def test_missing_sequence_number_names_file_and_manifest() -> None:
    with pytest.raises(PlanningError, match=r"a\.parquet in manifest /t/metadata/m0\.avro"):
        _data_files(entries(None), format_version=2)
    assert _data_files(entries(None), format_version=1)[0].data_sequence_number is None

"""Dictionary or plain per column: columns whose first values hold no repeat are written plainly (the
dictionary cannot pay there, as parquet-mr's fallback finds after its first page), others keep pyarrow's
dictionary; the files read back the same and come out smaller than all-dictionary ones."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.partitioning import PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_schema import to_arrow_schema
from gpu_engine.io.dictionary_choice import dictionary_columns, falls_back
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.parquet_write import write_data_files

N = 20_000
RNG = np.random.default_rng(3)


@pytest.mark.parametrize(
    ("column", "plain"),
    [
        (pa.array(RNG.permutation(N)), True),  # ids
        (pa.array(RNG.standard_normal(N)), True),  # measurements
        (pa.array(np.sort(RNG.integers(0, 10**12, N)).astype("datetime64[us]")), True),  # timestamps
        (pa.array([uuid.uuid4().bytes for _ in range(N)], pa.uuid()), True),
        (pa.array([f"user-{i}" for i in RNG.permutation(N)]), True),
        (pa.array(RNG.integers(0, 100, N)), False),  # low cardinality
        (pa.array([f"cat-{i % 7}" for i in range(N)]), False),
        (pa.array([*range(1000), 5, *range(1000, 3000)]), False),  # one repeat among the probed values
        (pa.array([None, None, *range(3000)], pa.int64()), True),  # nulls are not values
        (pa.array(RNG.integers(0, 2, N).astype(bool)), False),  # booleans: pyarrow's default
        (pa.array([[i] for i in range(N)]), False),  # nested: pyarrow's default
        (pa.nulls(N), False),
        (pa.array([7]), False),  # nothing to compare
    ],
    ids=lambda v: str(v) if isinstance(v, bool) else None,
)
def test_columns_of_distinct_values_fall_back(column: pa.Array, plain: bool) -> None:
    assert falls_back(column) is plain
    assert falls_back(pa.chunked_array([column[:10], column[10:]], column.type)) is plain


def test_use_dictionary_lists_every_other_leaf() -> None:
    table = pa.table(
        {
            "id": pa.array(range(N)),
            "cat": pa.array([f"c{i % 3}" for i in range(N)]),
            "s": pa.array([{"x": i, "y": "q"} for i in range(N)]),
        }
    )
    assert dictionary_columns(table, ["id", "cat", "s.x", "s.y"]) == ["cat", "s.x", "s.y"]
    assert dictionary_columns(table.drop_columns(["id"]), ["cat", "s.x", "s.y"]) is True


SCHEMA = Schema(
    (
        it.NestedField(1, "id", it.LONG, True),
        it.NestedField(2, "value", it.DOUBLE),
        it.NestedField(3, "category", it.STRING),
    )
)


def test_written_files_encode_distinct_columns_plainly_and_are_smaller(tmp_path: Path) -> None:
    data = pa.table(
        {
            "id": pa.array(RNG.permutation(N), pa.int64()),
            "value": pa.array(RNG.standard_normal(N)),
            "category": pa.array([f"cat-{i % 11}" for i in range(N)]),
        },
        schema=to_arrow_schema(SCHEMA),
    )
    [f] = write_data_files(LocalFileIO(), str(tmp_path), SCHEMA, PartitionSpec(0), data)
    path = f.path.removeprefix("file://")
    md = pq.read_metadata(path)
    chunks = [md.row_group(0).column(i) for i in range(md.num_columns)]
    encodings = {c.path_in_schema: c.encodings for c in chunks}
    assert "RLE_DICTIONARY" not in encodings["id"] and "RLE_DICTIONARY" not in encodings["value"]
    assert "RLE_DICTIONARY" in encodings["category"]
    assert pq.read_table(path).cast(data.schema).equals(data)
    everything = tmp_path / "all-dictionary.parquet"
    pq.write_table(data, everything, compression="zstd", version="2.6")
    assert f.file_size_in_bytes < everything.stat().st_size

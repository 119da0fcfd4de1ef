"""write_position_deletes against independent readers: pyarrow (rows, Parquet schema and field ids, footer),
hand-computed metrics, and our own loader (load_position_deletes) for the round trip."""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import InvalidProperty, PlanningError, UnsupportedFeature
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.locations import DataLocations
from gpu_engine.io.position_delete_write import delete_properties, write_position_deletes
from gpu_engine.io.position_deletes import load_position_deletes
from gpu_engine.tasks import DeleteFile

IO = LocalFileIO()
PATH_ID, POS_ID = 2147483546, 2147483545
UNPARTITIONED = PartitionSpec(0)
SCHEMA = Schema((it.NestedField(1, "id", it.LONG, True), it.NestedField(2, "region", it.STRING)))
BY_REGION = PartitionSpec(1, (PartitionField((2,), 1000, "region", "identity"),))


def as_delete_file(f: ContentFile) -> DeleteFile:
    return DeleteFile(
        path=f.path, file_format=f.file_format, content=f.content, spec_id=f.spec_id, partition=f.partition,
        record_count=f.record_count, file_size_in_bytes=f.file_size_in_bytes, data_sequence_number=1,
        referenced_data_file=f.referenced_data_file,
    )  # fmt: skip


def unpartitioned(paths: list[str]) -> dict[str, tuple[int, tuple[Any, ...]]]:
    return {p: (0, ()) for p in paths}


def test_rows_schema_metrics_and_round_trip(tmp_path: Path) -> None:
    long_path = "s3://bucket/warehouse/db/table/data/" + "x" * 80 + ".parquet"  # bounds must not truncate
    deletes: dict[str, Any] = {
        "s3://bucket/warehouse/db/table/data/b.parquet": np.array([5, 1, 1, 3], dtype=np.int64),
        long_path: [7],
        "s3://bucket/warehouse/db/table/data/a.parquet": np.array([2], dtype=np.int32),
        "s3://bucket/warehouse/db/table/data/c.parquet": np.array([], dtype=np.int64),  # nothing: no rows
    }
    f = write_position_deletes(
        IO, str(tmp_path), UNPARTITIONED, 0, (), deletes, data_partitions=unpartitioned(list(deletes))
    )
    local = Path(f.path)
    assert local.parent == tmp_path / "data" and local.name.endswith("-deletes.parquet")
    assert (f.content, f.file_format, f.spec_id, f.partition) == (1, "PARQUET", 0, ())
    assert f.file_size_in_bytes == local.stat().st_size
    assert f.referenced_data_file is None  # three data files

    # pyarrow: rows sorted by file_path then pos, duplicates dropped, paths spelled as given
    rows = pq.read_table(local).to_pylist()
    expected: list[dict[str, Any]] = [
        {"file_path": "s3://bucket/warehouse/db/table/data/a.parquet", "pos": 2},
        {"file_path": "s3://bucket/warehouse/db/table/data/b.parquet", "pos": 1},
        {"file_path": "s3://bucket/warehouse/db/table/data/b.parquet", "pos": 3},
        {"file_path": "s3://bucket/warehouse/db/table/data/b.parquet", "pos": 5},
        {"file_path": long_path, "pos": 7},
    ]
    assert rows == expected
    assert f.record_count == 5

    # Parquet schema: field ids, required, string and int64 (not dictionary) as readers see them
    pf = pq.ParquetFile(local)
    arrow = pf.schema_arrow
    assert [(fl.name, fl.metadata[b"PARQUET:field_id"], fl.nullable) for fl in arrow] == [
        ("file_path", str(PATH_ID).encode(), False),
        ("pos", str(POS_ID).encode(), False),
    ]
    assert arrow.field("file_path").type == pa.string() and arrow.field("pos").type == pa.int64()
    assert [pf.schema.column(i).max_definition_level for i in range(2)] == [0, 0]  # required columns

    # metrics by hand: full (untruncated) path bounds, position min/max over all rows
    assert f.value_counts == {PATH_ID: 5, POS_ID: 5}
    assert f.null_value_counts == {PATH_ID: 0, POS_ID: 0}
    assert f.nan_value_counts == {}
    assert f.lower_bounds == {PATH_ID: expected[0]["file_path"].encode(), POS_ID: struct.pack("<q", 1)}
    assert f.upper_bounds == {PATH_ID: long_path.encode(), POS_ID: struct.pack("<q", 7)}
    md = pf.metadata
    sizes = {PATH_ID: 0, POS_ID: 0}
    for g in range(md.num_row_groups):
        sizes[PATH_ID] += md.row_group(g).column(0).total_compressed_size
        sizes[POS_ID] += md.row_group(g).column(1).total_compressed_size
    assert f.column_sizes == sizes
    assert f.split_offsets is not None and f.split_offsets[0] == 4  # first row group right after "PAR1"

    # our loader reads it back
    loaded = load_position_deletes(IO, as_delete_file(f))
    assert loaded.positions_for("/warehouse/db/table/data/b.parquet").tolist() == [1, 3, 5]
    assert loaded.positions_for(long_path).tolist() == [7]
    assert len(loaded) == 5


def test_one_target_sets_referenced_data_file(tmp_path: Path) -> None:
    path = "/wh/t/data/only.parquet"
    f = write_position_deletes(
        IO, str(tmp_path), UNPARTITIONED, 0, (), {path: [3, 1]}, data_partitions=unpartitioned([path])
    )
    assert f.referenced_data_file == path
    assert pq.read_table(f.path).to_pydict() == {"file_path": [path, path], "pos": [1, 3]}


def test_paths_sort_by_utf8_bytes(tmp_path: Path) -> None:
    # UTF-16 order would put U+FFFD after U+1F600's surrogates; code point (UTF-8) order puts it before
    paths = [
        "/d/\U0001f600.parquet",
        "/d/\ufffd.parquet",
        "/d/z.parquet",
        "/d/\u00e9.parquet",
        "/d/Z.parquet",
    ]
    f = write_position_deletes(
        IO, str(tmp_path), UNPARTITIONED, 0, (), {p: [0] for p in paths}, data_partitions=unpartitioned(paths)
    )
    written = pq.read_table(f.path).column("file_path").to_pylist()
    assert written == sorted(paths, key=lambda p: p.encode("utf-8"))
    assert written == [
        "/d/Z.parquet",
        "/d/z.parquet",
        "/d/\u00e9.parquet",
        "/d/\ufffd.parquet",
        "/d/\U0001f600.parquet",
    ]
    assert f.lower_bounds[PATH_ID] == written[0].encode() and f.upper_bounds[PATH_ID] == written[-1].encode()


def test_partitioned_file_goes_to_its_partition(tmp_path: Path) -> None:
    paths = ["/wh/t/data/region=eu/a.parquet", "/wh/t/data/region=eu/b.parquet"]
    f = write_position_deletes(
        IO, DataLocations(str(tmp_path)), BY_REGION, 1, ("eu",), {p: [0, 9] for p in paths},
        data_partitions={p: (1, ("eu",)) for p in paths}, schema=SCHEMA,
    )  # fmt: skip
    assert Path(f.path).parent == tmp_path / "data" / "region=eu"
    assert (f.spec_id, f.partition, f.record_count) == (1, ("eu",), 4)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ((1, ("us",)), "lies in spec 1 partition ('us',)"),
        ((0, ("eu",)), "lies in spec 0 partition ('eu',)"),
        (None, "its partition is unknown"),
    ],
)
def test_data_file_of_another_partition_raises(
    tmp_path: Path, where: tuple[int, tuple[Any, ...]] | None, message: str
) -> None:
    good, bad = "/wh/t/data/region=eu/a.parquet", "/wh/t/data/region=us/b.parquet"
    partitions = {good: (1, ("eu",))} | ({bad: where} if where is not None else {})
    with pytest.raises(
        PlanningError, match=rf"data file {bad}: .*{message.replace('(', '.').replace(')', '.')}"
    ):
        write_position_deletes(
            IO, str(tmp_path), BY_REGION, 1, ("eu",), {good: [0], bad: [1]}, data_partitions=partitions
        )
    assert not (tmp_path / "data").exists()  # nothing written


def test_float_partition_values_compare_by_bits(tmp_path: Path) -> None:
    spec = PartitionSpec(2, (PartitionField((3,), 1001, "x", "identity"),))
    nan_file, zero_file = "/d/nan.parquet", "/d/zero.parquet"
    f = write_position_deletes(
        IO,
        str(tmp_path),
        spec,
        2,
        (float("nan"),),
        {nan_file: [0]},
        data_partitions={nan_file: (2, (float("nan"),))},
    )
    assert f.record_count == 1
    with pytest.raises(PlanningError, match=r"zero\.parquet"):  # -0.0 and 0.0 are different partitions
        write_position_deletes(
            IO, str(tmp_path), spec, 2, (0.0,), {zero_file: [0]}, data_partitions={zero_file: (2, (-0.0,))}
        )


def test_partition_arity_is_checked(tmp_path: Path) -> None:
    with pytest.raises(PlanningError, match="has 0 values, spec 1 has 1 fields"):
        write_position_deletes(
            IO, str(tmp_path), BY_REGION, 1, (), {"/a": [0]}, data_partitions={"/a": (1, ())}
        )


@pytest.mark.parametrize(
    ("positions", "message"),
    [
        (np.array([1, -2]), "negative position -2"),
        (np.array([1.5]), "expected a 1-d array of integers"),
        (np.array([[1, 2]]), "expected a 1-d array of integers"),
        (np.array([2**63], dtype=np.uint64), "9223372036854775808 is beyond the largest long"),
    ],
)
def test_bad_positions_raise_naming_the_data_file(tmp_path: Path, positions: Any, message: str) -> None:
    with pytest.raises(ValueError, match=rf"deleted positions of /d/f\.parquet: {message}"):
        write_position_deletes(
            IO,
            str(tmp_path),
            UNPARTITIONED,
            0,
            (),
            {"/d/f.parquet": positions},
            data_partitions={"/d/f.parquet": (0, ())},
        )


def test_nothing_to_delete_raises(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no positions to delete"):
        write_position_deletes(
            IO, str(tmp_path), UNPARTITIONED, 0, (), {"/a": []}, data_partitions={"/a": (0, ())}
        )


def test_delete_properties_override_data_properties(tmp_path: Path) -> None:
    props = {"write.parquet.compression-codec": "snappy", "write.delete.parquet.compression-codec": "gzip"}
    f = write_position_deletes(
        IO,
        str(tmp_path),
        UNPARTITIONED,
        0,
        (),
        {"/a": [0]},
        data_partitions={"/a": (0, ())},
        properties=props,
    )
    assert pq.ParquetFile(f.path).metadata.row_group(0).column(0).compression == "GZIP"
    with pytest.raises(UnsupportedFeature, match=r"write\.delete\.format\.default='avro'"):
        write_position_deletes(
            IO, str(tmp_path), UNPARTITIONED, 0, (), {"/a": [0]}, data_partitions={"/a": (0, ())},
            properties={"write.delete.format.default": "avro"},
        )  # fmt: skip


def test_large_file_round_trips(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    deletes = {
        f"/wh/t/data/f{i:03d}.parquet": rng.choice(1 << 40, size=2000, replace=False) for i in range(40)
    }
    f = write_position_deletes(
        IO, str(tmp_path), UNPARTITIONED, 0, (), deletes, data_partitions=unpartitioned(list(deletes))
    )
    table = pq.read_table(f.path)
    assert table.num_rows == f.record_count == 80_000
    paths = table.column("file_path").to_pylist()
    pos = table.column("pos").to_numpy()
    assert paths == sorted(paths)
    for path, positions in deletes.items():
        mine = pos[[p == path for p in paths]]
        assert mine.tolist() == sorted(positions.tolist())
    loaded = load_position_deletes(IO, as_delete_file(f))
    assert all(loaded.positions_for(p).tolist() == sorted(v.tolist()) for p, v in deletes.items())
    assert f.lower_bounds[POS_ID] == struct.pack("<q", int(min(v.min() for v in deletes.values())))
    assert f.upper_bounds[POS_ID] == struct.pack("<q", int(max(v.max() for v in deletes.values())))


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("write.delete.target-file-size-bytes", "x", InvalidProperty),
        ("write.delete.parquet.compression-codec", "foo", InvalidProperty),
        ("write.delete.format.default", "avro", UnsupportedFeature),
    ],
)
def test_bad_delete_settings_name_their_own_key(key: str, value: str, error: type) -> None:
    """The error named the data file key the delete key stands for (a key the table did not have)."""
    with pytest.raises(error, match=rf"property {re.escape(key)}="):
        delete_properties({key: value})


def test_delete_files_default_to_javas_64_mib_target() -> None:
    assert delete_properties({})["write.target-file-size-bytes"] == str(64 << 20)
    assert delete_properties({"write.target-file-size-bytes": "9"})["write.target-file-size-bytes"] == str(
        64 << 20
    )
    assert (
        delete_properties({"write.delete.target-file-size-bytes": "9"})["write.target-file-size-bytes"] == "9"
    )
    bloom = {"write.parquet.bloom-filter-enabled.column.id": "true"}
    assert not [k for k in delete_properties(bloom) if "bloom" in k]  # Java's deleteContext: none

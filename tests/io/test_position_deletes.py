"""Position delete files: every fixture table's files against a row-by-row reference, spellings of paths,
Parquet with and without field ids, Avro, and malformed files (NULLs, negative positions, truncation)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import DataFileError, UnsupportedFeature
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.paths import PathMap, normalize
from gpu_engine.io.position_deletes import PATH_FIELD_ID, POS_FIELD_ID, load_position_deletes
from gpu_engine.planning import scan as planning_scan
from gpu_engine.planning.position_scope import UNSCOPED
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.tasks import DeleteFile
from tests.planning._support import MISSING, inventory, inventory_paths, load

NULL_TABLE = "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_null_delete_record"
# live delete files whose targets are not in the current snapshot (a compaction rewrote the data file)
DANGLING = {
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_spark_compaction_with_dangling_delete": 1
}


def with_position_deletes() -> list[str]:
    paths = inventory_paths()
    if paths == [MISSING]:
        return paths
    return [p for p in paths if "pos(" in inventory()[p]["delete_files"] and p != NULL_TABLE]


def reference(path: str, path_map: PathMap) -> dict[str, list[int]]:
    """Row by row: normalised mapped file_path -> sorted set of positions."""
    out: dict[str, set[int]] = {}
    for row in pq.read_table(path, columns=["file_path", "pos"]).to_pylist():
        out.setdefault(normalize(path_map.apply(row["file_path"])), set()).add(row["pos"])
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("rel", with_position_deletes())
def test_fixture_tables(rel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # every position delete file planned for its whole partition (as without file_path bounds), so that
    # each reaches a task, the dangling ones too
    monkeypatch.setattr(planning_scan, "path_scopes", lambda table, path_map: [UNSCOPED] * len(table))
    tbl = load(rel)
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    data = {normalize(t.file.path) for t in plan.tasks}
    files = {d.path: d for t in plan.tasks for d in t.deletes if d.kind == "position"}
    assert files
    dangling = 0
    for path, entry in files.items():
        index = load_position_deletes(tbl.io, entry)
        expected = reference(path, tbl.io.path_map)
        assert {k: v.tolist() for k, v in index.by_file.items()} == expected
        assert len(index) == sum(len(v) for v in expected.values())
        for positions in index.by_file.values():
            assert positions.dtype == np.int64 and bool(np.all(np.diff(positions) > 0))
        dangling += len(index.targets - data)
        for task in plan.tasks:  # what a task's reader asks for
            np.testing.assert_array_equal(
                index.positions_for(task.file.path), expected.get(normalize(task.file.path), [])
            )
    assert dangling == DANGLING.get(rel, 0)


def test_impala_hdfs_spellings_match_data_files() -> None:
    """Impala delete files say hdfs://localhost:20500/test-warehouse/..., its manifests /test-warehouse/..."""
    tbl = load("impala/iceberg_test/hadoop_catalog/ice/iceberg_lineitem_multiblock")
    (task,) = plan_scan(tbl.metadata, tbl.io, ScanOptions()).tasks
    (entry,) = task.deletes
    raw = pq.read_table(entry.path, columns=["file_path"]).column(0)[0].as_py()
    assert raw.startswith("hdfs://localhost:20500/test-warehouse/")
    positions = load_position_deletes(tbl.io, entry).positions_for(task.file.path)
    assert len(positions) == entry.record_count == 2114
    assert int(positions[-1]) < task.file.record_count


@pytest.mark.parametrize(
    ("name", "nulls"),
    [
        ("delete_null_first_and_last.parq", 2),
        ("delete_null_first.parq", 1),
        ("delete_null_last.parq", 1),
        ("delete_null_single.parq", 1),
        ("delete_three_nulls.parq", 3),
    ],
)
def test_null_file_path_fixture(name: str, nulls: int) -> None:
    tbl = load(NULL_TABLE)
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    (entry,) = {d.path: d for t in plan.tasks for d in t.deletes if d.path.endswith("/" + name)}.values()
    with pytest.raises(DataFileError, match=f"{nulls} NULL file_path") as exc:
        load_position_deletes(tbl.io, entry)
    assert entry.path in str(exc.value)


# -- files written here ----------------------------------------------------------------------------------


def entry(path: Path, rows: int, fmt: str = "PARQUET") -> DeleteFile:
    return DeleteFile(str(path), fmt, 1, 0, (), rows, path.stat().st_size, 1)


def field(name: str, kind: pa.DataType, fid: int | None, nullable: bool = False) -> pa.Field:
    meta = None if fid is None else {b"PARQUET:field_id": str(fid).encode()}
    return pa.field(name, kind, nullable=nullable, metadata=meta)


def write_parquet(
    path: Path,
    paths: list[Any],
    pos: list[Any],
    *,
    ids: bool = True,
    names: tuple[str, str] = ("file_path", "pos"),
) -> Path:
    schema = pa.schema(
        [
            field(names[0], pa.string(), PATH_FIELD_ID if ids else None, nullable=True),
            field(names[1], pa.int64(), POS_FIELD_ID if ids else None, nullable=True),
            field("row", pa.struct([pa.field("x", pa.int32())]), 2147483544 if ids else None, nullable=True),
        ]
    )
    rows = [{"x": i} for i in range(len(pos))]
    pq.write_table(pa.table([paths, pos, rows], schema=schema), path)
    return path


PATHS = ["hdfs://nn:8020/wh/t/data/b.parquet", "/wh/t/data/a.parquet", "file:/wh/t/data/b.parquet"]
MAP = PathMap.of({"/wh/t": "/local/t"})


def test_spellings_unsorted_rows_and_duplicates(tmp_path: Path) -> None:
    paths = [PATHS[i % 3] for i in range(12)]
    pos = [7, 5, 3, 1, 9, 1, 2, 3, 4, 11, 0, 5]
    f = write_parquet(tmp_path / "d.parquet", paths, pos)
    index = load_position_deletes(LocalFileIO(MAP), entry(f, 12))
    assert index.targets == {"/local/t/data/a.parquet", "/local/t/data/b.parquet"}
    # rows i % 3 == 0 and 2 name b (as hdfs:// and file:), rows i % 3 == 1 name a
    assert index.positions_for("/local/t/data/b.parquet").tolist() == [1, 2, 3, 4, 5, 7, 11]
    assert index.positions_for("file:///local/t/data/a.parquet").tolist() == [0, 3, 5, 9]
    assert index.positions_for("/local/t/data/c.parquet").tolist() == []
    assert index.positions_for("/wh/t/data/a.parquet").tolist() == []  # keys are mapped paths


@pytest.mark.parametrize("ids", [True, False])
def test_parquet_with_and_without_field_ids(tmp_path: Path, ids: bool) -> None:
    f = write_parquet(tmp_path / "d.parquet", ["/a", "/a", "/b"], [4, 2, 0], ids=ids)
    index = load_position_deletes(LocalFileIO(), entry(f, 3))
    assert {k: v.tolist() for k, v in index.by_file.items()} == {"/a": [2, 4], "/b": [0]}


def test_columns_are_matched_by_field_id(tmp_path: Path) -> None:
    # ids win over names: "pos" here is the file_path column's name
    f = write_parquet(tmp_path / "d.parquet", ["/a"], [3], names=("pos", "file_path_renamed"))
    assert load_position_deletes(LocalFileIO(), entry(f, 1)).positions_for("/a").tolist() == [3]
    f = write_parquet(tmp_path / "s.parquet", ["/a", "/a"], [3, 1], names=("pos", "file_path"))  # swapped
    assert load_position_deletes(LocalFileIO(), entry(f, 2)).positions_for("/a").tolist() == [1, 3]
    schema = pa.schema([field("file_path", pa.string(), PATH_FIELD_ID), field("pos", pa.int64(), 7)])
    pq.write_table(pa.table([["/a"], [1]], schema=schema), tmp_path / "e.parquet")
    with pytest.raises(DataFileError, match=r"e\.parquet: not a position delete file: no column pos"):
        load_position_deletes(LocalFileIO(), entry(tmp_path / "e.parquet", 1))
    pq.write_table(pa.table({"path": ["/a"], "pos": [1]}), tmp_path / "n.parquet")
    with pytest.raises(DataFileError, match=r"no column file_path .* by name"):
        load_position_deletes(LocalFileIO(), entry(tmp_path / "n.parquet", 1))


def test_int32_positions_are_widened(tmp_path: Path) -> None:
    pq.write_table(
        pa.table({"file_path": ["/a", "/a"], "pos": pa.array([5, 1], pa.int32())}), tmp_path / "d.parquet"
    )
    positions = load_position_deletes(LocalFileIO(), entry(tmp_path / "d.parquet", 2)).positions_for("/a")
    assert positions.dtype == np.int64 and positions.tolist() == [1, 5]


@pytest.mark.parametrize(
    ("paths", "pos", "message"),
    [
        (["/a", None], [1, 2], r"1 NULL file_path value\(s\) \(first at row 1\)"),
        (["/a", "/a"], [1, None], r"1 NULL pos value\(s\) \(first at row 1\)"),
        (["/a", "/a", "/a"], [1, -4, 2], "negative position -4 at row 1"),
    ],
)
def test_malformed_rows(tmp_path: Path, paths: list[Any], pos: list[Any], message: str) -> None:
    f = write_parquet(tmp_path / "bad.parquet", paths, pos)
    with pytest.raises(DataFileError, match=message) as exc:
        load_position_deletes(LocalFileIO(), entry(f, len(pos)))
    assert str(f) in str(exc.value)


def test_missing_truncated_and_inconsistent_files(tmp_path: Path) -> None:
    f = write_parquet(tmp_path / "d.parquet", ["/a"] * 100, list(range(100)))
    good = entry(f, 100)
    with pytest.raises(DataFileError, match="manifest entry says 99"):
        load_position_deletes(LocalFileIO(), replace(good, record_count=99))
    with pytest.raises(UnsupportedFeature, match="ORC position delete files"):
        load_position_deletes(LocalFileIO(), replace(good, file_format="ORC"))
    with pytest.raises(DataFileError, match="not a position delete file"):
        load_position_deletes(LocalFileIO(), replace(good, content=2))
    data = f.read_bytes()
    for cut in (data[: len(data) // 2], data[:-1], b""):
        f.write_bytes(cut)
        with pytest.raises(DataFileError, match=r"d\.parquet: corrupt or truncated Parquet file"):
            load_position_deletes(LocalFileIO(), good)
    with pytest.raises(DataFileError, match=r"gone\.parquet: position delete file not found"):
        load_position_deletes(LocalFileIO(), replace(good, path=str(tmp_path / "gone.parquet")))


def test_many_files_and_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    n = 300_000
    file_ids = rng.integers(0, 40, n)
    pos = rng.integers(0, 50_000, n)
    paths = pa.array([f"s3://bucket/wh/t/data/f{i:02d}.parquet" for i in range(40)]).take(pa.array(file_ids))
    f = write_parquet(tmp_path / "big.parquet", paths.to_pylist(), pos.tolist())
    index = load_position_deletes(LocalFileIO(PathMap.of({"s3://bucket/wh": "/x"})), entry(f, n))
    for i in range(40):
        expected = sorted(set(pos[file_ids == i].tolist()))
        assert index.positions_for(f"/x/t/data/f{i:02d}.parquet").tolist() == expected


# -- Avro ------------------------------------------------------------------------------------------------


def avro_schema(ids: bool, nullable: bool = False) -> dict[str, Any]:
    def f(name: str, kind: Any, fid: int) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "type": ["null", kind] if nullable else kind}
        if ids:
            out["field-id"] = fid
        return out

    x = {"name": "x", "type": "int", **({"field-id": 1} if ids else {})}
    row = {"type": "record", "name": "r102", "fields": [x]}
    return {
        "type": "record",
        "name": "delete",
        "fields": [
            f("file_path", "string", PATH_FIELD_ID),
            f("pos", "long", POS_FIELD_ID),
            {
                "name": "row",
                "type": ["null", row],
                "default": None,
                **({"field-id": 2147483544} if ids else {}),
            },
        ],
    }


def write_avro(
    path: Path, schema: dict[str, Any], rows: list[dict[str, Any]], codec: str = "deflate"
) -> Path:
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), rows, codec=codec)
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("ids", [True, False])
def test_avro(tmp_path: Path, ids: bool) -> None:
    rows = [
        {"file_path": PATHS[i % 3], "pos": p, "row": {"x": i} if i % 2 else None}
        for i, p in enumerate([4, 8, 2, 6, 1, 0, 3])
    ]
    f = write_avro(tmp_path / "d.avro", avro_schema(ids), rows)
    index = load_position_deletes(LocalFileIO(MAP), entry(f, len(rows), "AVRO"))
    assert {k: v.tolist() for k, v in index.by_file.items()} == {
        "/local/t/data/b.parquet": [0, 2, 3, 4, 6],
        "/local/t/data/a.parquet": [1, 8],
    }


def test_avro_nulls_truncation_and_missing_fields(tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"file_path": "/a", "pos": 1}, {"file_path": None, "pos": 2}]
    f = write_avro(tmp_path / "n.avro", avro_schema(True, nullable=True), rows, codec="null")
    with pytest.raises(DataFileError, match=r"n\.avro: 1 NULL file_path"):
        load_position_deletes(LocalFileIO(), entry(f, 2, "AVRO"))
    good = write_avro(
        tmp_path / "g.avro", avro_schema(True), [{"file_path": "/a", "pos": i} for i in range(50)]
    )
    data = good.read_bytes()
    good.write_bytes(data[: len(data) - 30])
    with pytest.raises(DataFileError, match=r"g\.avro"):
        load_position_deletes(LocalFileIO(), entry(good, 50, "AVRO"))
    schema = {"type": "record", "name": "d", "fields": [{"name": "file_path", "type": "string"}]}
    f = write_avro(tmp_path / "p.avro", schema, [{"file_path": "/a"}])
    with pytest.raises(DataFileError, match=r"p\.avro: not a position delete file: no column pos"):
        load_position_deletes(LocalFileIO(), entry(f, 1, "AVRO"))
    with pytest.raises(DataFileError, match=r"gone\.avro.*not found"):
        load_position_deletes(LocalFileIO(), replace(entry(f, 1, "AVRO"), path=str(tmp_path / "gone.avro")))

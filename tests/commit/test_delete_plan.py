"""plan_row_deletes / write_row_deletes on fixture tables, against an independent oracle: data files,
position delete files and equality delete files read with pyarrow, deletion vectors parsed by hand
(Puffin footer as json, bitmap by pyroaring's BitMap64), recorded paths and equality ids read from the
manifests with fastavro. Only the scope rules of "Scan Planning" (which delete applies to which data
file, tests/planning/_support.spec_deletes) and the live manifest entries are shared test helpers."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile
from pyroaring import BitMap64

import gpu_engine as ge
from gpu_engine.commit import SnapshotUpdate
from gpu_engine.commit.delete_plan import RowDeletes, plan_row_deletes, write_row_deletes
from gpu_engine.commit.update import Removed, file_key
from gpu_engine.errors import ExpressionError, UnsupportedFeature
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.deletion_vectors import read_dv
from gpu_engine.io.paths import normalize
from gpu_engine.table import Table
from gpu_engine.tasks import DeleteFile
from tests.commit._support import sql_catalog
from tests.planning._support import FIXTURES, live_entries, load, spec_deletes, unpartitioned_specs

V2_POS = "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_positional_not_all_data_files_have_delete_files"
V3_DV = "pg_lake/sample_tables_v3/public/v3_pos_dv"
V3_TWO_DVS = "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors"
EQ_AND_POS = "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_both_eq_and_pos"
EQ_PARTITIONED = "dremio-oss/iceberg/v2/products_with_eq_deletes"
V1 = "duckdb-iceberg/data/iceberg/generated_spec1_0_001/pyspark_iceberg_table"

Row = dict[str, Any]
Key = tuple[str, int | None]  # normalised resolved path, content offset


def _num(col: str, op: Callable[[Any], bool]) -> Callable[[Row], bool]:
    return lambda r: r[col] is not None and op(r[col])


CASES: list[tuple[str, str, Callable[[Row], bool]]] = [
    (V2_POS, "i > 1", _num("i", lambda v: v > 1)),
    (V2_POS, "s = 'b' or s = 'X'", lambda r: r["s"] in ("b", "X")),
    (V2_POS, "i < 100", _num("i", lambda v: v < 100)),
    (V3_DV, "id < 10 or id > 45", _num("id", lambda v: v < 10 or v > 45)),
    (
        V3_DV,
        "payload in ('row-5', 'row-6', 'row-12')",
        lambda r: r["payload"] in ("row-5", "row-6", "row-12"),
    ),
    (V3_DV, "id >= 0", _num("id", lambda v: v >= 0)),
    (V3_TWO_DVS, "i >= 0", _num("i", lambda v: v >= 0)),
    (EQ_AND_POS, "i >= 0", _num("i", lambda v: v >= 0)),
    (EQ_PARTITIONED, "category = 'gadget'", lambda r: r["category"] == "gadget"),
    (
        EQ_PARTITIONED,
        "product_id < 120 or color = 'red'",
        lambda r: r["product_id"] < 120 or r["color"] == "red",
    ),
]


# -- the oracle -----------------------------------------------------------------------------------------


@dataclass
class Expected:
    recorded: str  # the data file's path as its manifest entry records it
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    positional: set[int]  # deleted by the DVs / position delete files that apply
    live: set[int]  # not deleted by anything
    matching: set[int]  # live rows matching the predicate
    applied: set[Key]  # DVs and position delete files that apply


def recorded_entries(tbl: Table) -> dict[Key, dict[str, Any]]:
    """Live entries' data_file records read with fastavro (recorded paths), by resolved path and offset."""
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    out: dict[Key, dict[str, Any]] = {}
    with open(normalize(tbl.io.resolve(snapshot.manifest_list)), "rb") as f:
        manifests: list[Any] = list(fastavro.reader(f))
    for m in manifests:
        with open(normalize(tbl.io.resolve(m["manifest_path"])), "rb") as f:
            entries: list[Any] = list(fastavro.reader(f))
            for entry in entries:
                if entry["status"] == 2:
                    continue
                data_file = entry["data_file"]
                key = (normalize(tbl.io.resolve(data_file["file_path"])), data_file.get("content_offset"))
                out[key] = data_file
    return out


def dv_positions(path: str, offset: int, length: int) -> set[int]:
    data = Path(path).read_bytes()
    (size,) = struct.unpack("<i", data[-12:-8])
    blobs = json.loads(data[-12 - size : -12])["blobs"]
    assert [b["length"] for b in blobs if b["offset"] == offset] == [length]
    blob = data[offset : offset + length]
    return set(BitMap64.deserialize(blob[8:-4]))


def oracle(tbl: Table, predicate: Callable[[Row], bool]) -> dict[str, Expected]:
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None
    entries = live_entries(tbl, snapshot)
    by_key = {e.key: e for e in entries}
    recorded = recorded_entries(tbl)
    applies = spec_deletes(entries, unpartitioned_specs(tbl.metadata))
    names = {f.field_id: f.name for f in tbl.metadata.schema.fields}
    out = {}
    for data in (e for e in entries if e.content == 0):
        rows = pq.read_table(data.path).to_pylist()
        positional: set[int] = set()
        equality: set[int] = set()
        applied: set[Key] = set()
        for key in applies[data.path]:
            d = by_key[key]
            if d.is_dv:
                assert d.offset is not None
                positional |= dv_positions(d.path, d.offset, recorded[key]["content_size_in_bytes"])
                applied.add(key)
            elif d.content == 1:
                for r in pq.read_table(d.path, columns=["file_path", "pos"]).to_pylist():
                    if normalize(tbl.io.path_map.apply(r["file_path"])) == data.path:
                        positional.add(r["pos"])
                applied.add(key)
            else:
                cols = [names[i] for i in recorded[key]["equality_ids"]]
                keys = {tuple(r[c] for c in cols) for r in pq.read_table(d.path, columns=cols).to_pylist()}
                equality |= {i for i, r in enumerate(rows) if tuple(r[c] for c in cols) in keys}
        live = set(range(len(rows))) - positional - equality
        matching = {i for i in live if predicate(rows[i])}
        out[data.path] = Expected(
            recorded[(data.path, None)]["file_path"],
            data.spec_id,
            data.partition,
            len(rows),
            positional,
            live,
            matching,
            applied,
        )
    return out


def targets(tbl: Table, key: Key) -> set[str]:
    """The normalised data files a position delete file names (pyarrow)."""
    rows = pq.read_table(key[0], columns=["file_path"]).column("file_path").to_pylist()
    return {normalize(tbl.io.path_map.apply(p)) for p in rows}


def key_of(tbl: Table, f: ContentFile) -> Key:
    return normalize(tbl.io.resolve(f.path)), f.content_offset


# -- plan_row_deletes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "filter", "predicate"), CASES, ids=[f"{c[0].split('/')[-1]}:{c[1]}" for c in CASES]
)
def test_plan_matches_the_oracle(rel: str, filter: str, predicate: Callable[[Row], bool]) -> None:
    tbl = load(rel)
    plan = plan_row_deletes(tbl, filter, backend="cpu")
    expected = oracle(tbl, predicate)
    recorded = recorded_entries(tbl)
    assert plan.snapshot_id == tbl.metadata.current_snapshot_id
    assert plan.format_version == tbl.format_version
    got = {normalize(tbl.io.resolve(f.path)): f for f in plan.files}
    assert set(got) == {p for p, e in expected.items() if e.matching}, "files with rows to delete"
    assert [f.path for f in plan.files] == sorted((f.path for f in plan.files), key=lambda p: p.encode())
    covered = {p for p, f in got.items() if plan.format_version >= 3 or f.fully_deleted}
    for path, f in got.items():
        e = expected[path]
        assert f.path == e.recorded  # spelled as the manifest records it
        assert (f.record_count, f.spec_id) == (
            e.record_count,
            recorded[(path, None)].get("spec_id", f.spec_id),
        )
        assert f.new_positions.tolist() == sorted(e.matching)
        assert f.existing_positions.tolist() == sorted(e.positional)
        assert f.merged_positions.tolist() == sorted(e.positional | e.matching)  # old DV / pos deletes + new
        assert f.new_positions.dtype == np.int64
        assert f.live_rows == len(e.live)
        assert f.fully_deleted == (e.matching == e.live)
        assert {key_of(tbl, d) for d in f.applied} == e.applied
        assert all(d.path == recorded[key_of(tbl, d)]["file_path"] for d in f.applied)
        want: set[Key] = set()
        if path in covered:
            want = {k for k in e.applied if k[0].endswith(".puffin") or targets(tbl, k) <= covered}
        assert {key_of(tbl, d) for d in f.replaced} == want
    assert plan.deleted_rows == sum(len(e.matching) for e in expected.values())


def test_scan_after_planned_deletes_would_drop_exactly_the_matching_rows() -> None:
    """The positions found are the rows the filter selects: reading those positions from the data files with
    pyarrow gives the scan's matching rows."""
    tbl = load(V3_DV)
    plan = plan_row_deletes(tbl, "id < 10 or id > 45", backend="cpu")
    (f,) = plan.files
    rows = pq.read_table(tbl.io.resolve(f.path)).take(f.new_positions).to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(
        tbl.scan(filter="id < 10 or id > 45").to_arrow().column("id").to_pylist()
    )


def test_v3_replaces_the_old_dv_entry_only() -> None:
    tbl = load(V3_TWO_DVS)
    plan = plan_row_deletes(tbl, "i >= 0", backend="cpu")
    # the two files with DVs are fully deleted already and so have nothing left to delete
    assert all(not f.applied and not f.replaced for f in plan.files)
    tbl = load(V3_DV)
    (f,) = plan_row_deletes(tbl, "id = 0", backend="cpu").files
    (dv,) = f.replaced
    assert (dv.file_format, dv.content_offset, dv.referenced_data_file) == ("PUFFIN", 4, f.path)
    assert dv.path.startswith("/var/folders/")  # recorded, not resolved


def test_nothing_matches() -> None:
    tbl = load(V3_DV)
    plan = plan_row_deletes(tbl, "id = 5", backend="cpu")  # row 5 is deleted by the DV already
    assert plan.files == () and plan.deleted_rows == 0
    assert plan_row_deletes(tbl, "id > 1000", backend="cpu").files == ()


def test_bad_filter_raises_and_v1_tables_get_no_delete_files() -> None:
    with pytest.raises(ExpressionError, match="nope"):
        plan_row_deletes(load(V3_DV), "nope = 1", backend="cpu")
    v1 = load(V1)
    plan = plan_row_deletes(v1, "true", backend="cpu")  # planned (copy-on-write deletes use it) ...
    assert plan.files and all(f.fully_deleted for f in plan.files)
    with pytest.raises(
        UnsupportedFeature,
        match=r"format version 1 has no row-level deletes \(upgrade it: tbl.update_properties\(\)",
    ):
        write_row_deletes(v1, plan)  # ... but not written as delete files


def test_partitions_group_by_spec_and_value() -> None:
    tbl = load(EQ_PARTITIONED)
    plan = plan_row_deletes(tbl, "product_id < 120 or color = 'red'", backend="cpu")
    groups = plan.partitions()
    assert sorted(p for _, p, _ in groups) == sorted({f.partition for f in plan.files})
    for spec_id, partition, files in groups:
        assert all((f.spec_id, f.partition) == (spec_id, partition) for f in files)


# -- write_row_deletes on copies of the fixtures ----------------------------------------------------------


def copy_of(rel: str, tmp_path: Path) -> Table:
    dest = tmp_path / rel.split("/")[-1]
    shutil.copytree(FIXTURES / rel, dest)
    return ge.load_table(dest, relocate=True)


def as_delete_file(tbl: Table, f: ContentFile) -> DeleteFile:
    return DeleteFile(
        path=tbl.io.resolve(f.path), file_format=f.file_format, content=f.content, spec_id=f.spec_id,
        partition=f.partition, record_count=f.record_count, file_size_in_bytes=f.file_size_in_bytes,
        data_sequence_number=1, referenced_data_file=f.referenced_data_file, content_offset=f.content_offset,
        content_size_in_bytes=f.content_size_in_bytes,
    )  # fmt: skip


def test_write_v3_merged_dv(tmp_path: Path) -> None:
    tbl = copy_of(V3_DV, tmp_path)
    plan = plan_row_deletes(tbl, "id < 10 or id > 45", backend="cpu")
    (f,) = plan.files
    out = write_row_deletes(tbl, plan)
    (dv,) = out.added
    assert (dv.file_format, dv.referenced_data_file, dv.record_count) == ("PUFFIN", f.path, 17)
    assert dv.path.startswith(tbl.location)  # recorded under the table's recorded location
    merged = read_dv(tbl.io, as_delete_file(tbl, dv))
    assert merged.tolist() == f.merged_positions.tolist()
    assert set(f.existing_positions.tolist()) <= set(merged.tolist())
    (vector,) = deletion_vectors_from_puffin_file(PuffinFile(Path(tbl.io.resolve(dv.path)).read_bytes()))
    assert vector.referenced_data_file == f.path and vector.to_vector().to_pylist() == merged.tolist()
    assert out.removed_data_files == ()
    assert [(d.path, d.content_offset) for d in out.removed_delete_files] == [
        (d.path, d.content_offset) for d in f.replaced
    ]


def test_write_v3_fully_deleted_file_is_removed_with_its_dv(tmp_path: Path) -> None:
    tbl = copy_of(V3_DV, tmp_path)
    plan = plan_row_deletes(tbl, "id >= 0", backend="cpu")
    (f,) = plan.files
    assert f.fully_deleted
    out = write_row_deletes(tbl, plan)
    assert out.added == () and out.removed_data_files == (f.path,)
    assert [d.file_format for d in out.removed_delete_files] == ["PUFFIN"]
    kept = write_row_deletes(tbl, plan, remove_fully_deleted=False)
    (dv,) = kept.added
    assert read_dv(tbl.io, as_delete_file(tbl, dv)).tolist() == list(range(50))
    assert kept.removed_data_files == () and len(kept.removed_delete_files) == 1


def test_write_v2_position_deletes(tmp_path: Path) -> None:
    tbl = copy_of(V2_POS, tmp_path)
    plan = plan_row_deletes(tbl, "i > 1", backend="cpu")
    assert any(f.fully_deleted for f in plan.files) and not all(f.fully_deleted for f in plan.files)
    out = write_row_deletes(tbl, plan)
    partial = [f for f in plan.files if not f.fully_deleted]
    (added,) = out.added
    assert (added.content, added.file_format, added.spec_id, added.partition) == (1, "PARQUET", 0, ())
    rows = pq.read_table(tbl.io.resolve(added.path)).to_pylist()
    assert [(r["file_path"], r["pos"]) for r in rows] == sorted(
        (f.path, int(p)) for f in partial for p in f.new_positions
    )
    assert out.removed_data_files == tuple(f.path for f in plan.files if f.fully_deleted)
    want = {(d.path, d.content_offset) for f in plan.files if f.fully_deleted for d in f.replaced}
    assert {(d.path, d.content_offset) for d in out.removed_delete_files} == want
    assert want  # the fixture has a position delete file that only targets removed files


def test_write_failure_deletes_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_engine.io.position_delete_write import write_position_deletes as real

    tbl = copy_of(EQ_PARTITIONED, tmp_path)
    plan = plan_row_deletes(tbl, "product_id < 120 or color = 'red'", backend="cpu")
    assert len(plan.partitions()) > 1
    written: list[str] = []

    def flaky(*args: Any, **kwargs: Any) -> ContentFile:
        if written:
            raise OSError("disk full")
        f = real(*args, **kwargs)
        written.append(tbl.io.resolve(f.path))
        return f

    monkeypatch.setattr("gpu_engine.commit.delete_plan.write_position_deletes", flaky)
    with pytest.raises(OSError, match="disk full"):
        write_row_deletes(tbl, plan, remove_fully_deleted=False)
    assert written and not Path(written[0]).exists()


# -- tables written here (recorded paths are real: no path map), committed with the snapshot producer -------

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])


def appended_table(tmp_path: Path, version: str) -> Table:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        f"db.t{version}", schema=SCHEMA, partition_spec=["region"], properties={"format-version": version}
    )
    for k in range(2):
        ids = list(range(k * 100, k * 100 + 100))
        tbl.append(pa.table({"id": ids, "region": ["eu" if i % 3 else "us" for i in ids]}, schema=SCHEMA))
    return tbl


def commit_deletes(tbl: Table, filter: str) -> RowDeletes:
    plan = plan_row_deletes(tbl, filter, backend="cpu")
    out = write_row_deletes(tbl, plan)
    removed: list[Removed] = [*out.removed_data_files, *(file_key(d) for d in out.removed_delete_files)]
    tbl.commit(SnapshotUpdate("delete", added=out.added, removed=removed))
    return plan


def ids_of(tbl: Table) -> tuple[list[int], list[int]]:
    ours = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    theirs = sorted(
        StaticTable.from_metadata(tbl.metadata_location).scan().to_arrow().column("id").to_pylist()
    )
    return ours, theirs


def test_v2_deletes_commit_and_read_back_in_pyiceberg(tmp_path: Path) -> None:
    tbl = appended_table(tmp_path, "2")
    expected = set(range(200))
    for filter, gone in [
        ("id < 30", set(range(30))),
        ("id >= 20 and id < 40", set(range(20, 40))),
        ("region = 'us' and id < 100", {i for i in range(100) if i % 3 == 0}),
    ]:
        plan = commit_deletes(tbl, filter)
        assert plan.deleted_rows == len(expected & gone)
        assert all(not f.path.startswith("file:") and Path(f.path).is_file() for f in plan.files)  # recorded
        expected -= gone
        ours, theirs = ids_of(tbl)
        assert ours == theirs == sorted(expected)
    assert plan.fully_deleted  # the last delete emptied the us file of the first append: it was removed


def test_v3_dv_merges_across_commits(tmp_path: Path) -> None:
    tbl = appended_table(tmp_path, "3")
    eu = "region = 'eu' and id < 100"  # one data file: one DV per commit
    first = commit_deletes(tbl, f"{eu} and id < 50")
    second = commit_deletes(tbl, f"{eu} and id >= 40 and id < 70")
    (f1,), (f2,) = first.files, second.files
    assert f1.path == f2.path and not f1.replaced
    (old,) = f2.replaced
    assert old.file_format == "PUFFIN" and old.referenced_data_file == f1.path
    assert f2.existing_positions.tolist() == f1.merged_positions.tolist()
    assert f2.merged_positions.tolist() == sorted(
        set(f1.new_positions.tolist()) | set(f2.new_positions.tolist())
    )
    deletes = [d for task in tbl.scan().plan().tasks for d in task.deletes]
    assert [d.kind for d in deletes] == ["dv"] and deletes[0].record_count == len(f2.merged_positions)
    gone = {i for i in range(70) if i % 3}
    ours, theirs = ids_of(tbl)
    assert ours == theirs == sorted(set(range(200)) - gone)

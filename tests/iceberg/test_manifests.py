"""Manifest lists and manifests: every fixture table read in place, cross-checked against PyIceberg's reader,
inheritance rules on crafted manifests, deletion vectors against their Puffin footers, and bad input."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO, cast

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list as pyi_read_manifest_list

from gpu_engine.errors import ManifestError
from gpu_engine.iceberg.manifest_list import ManifestFile, manifest_files_from_paths, read_manifest_list
from gpu_engine.iceberg.manifests import ENTRY_COLUMNS, read_manifest, read_manifests
from gpu_engine.io.paths import PathMap

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"


@dataclass
class FixtureTable:
    inventory: dict[str, Any]
    root: Path
    path_map: PathMap
    snapshots: list[dict[str, Any]]  # every snapshot of every metadata file (deduplicated by id)
    current: dict[str, Any] | None  # the current snapshot of the newest metadata file
    next_row_id: int | None
    lists: dict[str, tuple[ManifestFile, ...]] = field(default_factory=dict)  # by remapped list path
    missing: set[str] = field(default_factory=set)  # remapped paths of unresolvable refs


def _load_json(path: Path) -> dict[str, Any]:
    opener = gzip.open if ".gz" in path.name else open
    with opener(path, "rt") as f:
        return dict(json.load(f))


def _fixture_tables() -> list[FixtureTable]:
    if not (FIXTURES / "INVENTORY.json").is_file():
        pytest.fail(f"fixtures not found at {FIXTURES} (expected ../shared/fixtures next to the repo)")
    out = []
    for entry in json.loads((FIXTURES / "INVENTORY.json").read_text())["tables"]:
        root = FIXTURES.parent / entry["path"]
        # the recorded location, plus the inventory's spellings of it (relative, file:, mixed forms)
        prefixes = {p: str(root) for p in entry["path_prefixes_to_remap"]}
        path_map = PathMap.relocate(entry["location_in_metadata"], str(root)).merged(PathMap.of(prefixes))
        metas = [_load_json(p) for p in sorted((root / "metadata").glob("*.metadata.json*"))]
        metas.sort(key=lambda m: int(m.get("last-updated-ms", 0)))
        snapshots = {s["snapshot-id"]: s for m in metas for s in m.get("snapshots") or []}
        newest = metas[-1]
        current = snapshots.get(newest.get("current-snapshot-id") or -1)
        out.append(
            FixtureTable(entry, root, path_map, list(snapshots.values()), current, newest.get("next-row-id"))
        )
    return out


@pytest.fixture(scope="module")
def tables() -> list[FixtureTable]:
    tables = _fixture_tables()
    for t in tables:
        for snap in t.snapshots:
            assert "manifests" not in snap  # no fixture has v1 inline manifest lists
            list_path = t.path_map.apply(snap["manifest-list"])
            if not os.path.exists(list_path):
                t.missing.add(list_path)
                with pytest.raises(ManifestError, match="file not found") as info:
                    read_manifest_list(list_path, path_map=t.path_map)
                assert list_path in str(info.value)
                continue
            t.lists[list_path] = read_manifest_list(list_path, path_map=t.path_map)
    return tables


def _manifests(t: FixtureTable) -> Iterator[ManifestFile]:
    seen: set[tuple[Any, ...]] = set()
    for manifests in t.lists.values():
        for m in manifests:
            key = (m.manifest_path, m.sequence_number, m.added_snapshot_id, m.first_row_id)
            if key not in seen:
                seen.add(key)
                yield m


def test_fixtures_present() -> None:
    assert (FIXTURES / "INVENTORY.json").is_file(), f"fixtures missing at {FIXTURES}"
    assert len(_fixture_tables()) == 96


def test_every_list_and_manifest_reads(tables: list[FixtureTable]) -> None:
    n_lists = n_manifests = n_entries = 0
    for t in tables:
        n_lists += len(t.lists)
        readable = [m for m in _manifests(t) if os.path.exists(m.manifest_path)]
        t.missing |= {m.manifest_path for m in _manifests(t) if not os.path.exists(m.manifest_path)}
        for m, table in zip(readable, read_manifests(readable, path_map=t.path_map), strict=True):
            n_manifests += 1
            n_entries += table.num_rows
            assert table.column_names == list(ENTRY_COLUMNS)
            assert table.schema.metadata[b"manifest_path"] == m.manifest_path.encode()
            assert set(table["spec_id"].to_pylist()) <= {m.partition_spec_id}
            if m.is_delete_manifest:
                assert 0 not in table["content"].to_pylist()
            else:
                assert set(table["content"].to_pylist()) <= {0}
            for path in table["file_path"].to_pylist():
                if not os.path.exists(path):
                    t.missing.add(path)
        # the inventory counts the refs of any snapshot that do not resolve under its prefixes
        assert len(t.missing) == t.inventory["unresolvable_refs_in_any_snapshot"], (t.root, sorted(t.missing))
    assert sum(t.inventory["unresolvable_refs_in_any_snapshot"] for t in tables) == 10
    assert n_lists == 216  # every readable manifest list of every snapshot
    assert sum(len(ms) for t in tables for ms in t.lists.values()) == 545  # their entries
    assert n_manifests == 255  # distinct manifests (path, inherited values)
    assert n_entries > 400


# -- PyIceberg's reader as the oracle ------------------------------------------------------------------------


def _as_dict(value: Any) -> dict[Any, Any]:
    return dict(value or {})


def test_manifest_lists_match_pyiceberg(tables: list[FixtureTable]) -> None:
    fileio = PyArrowFileIO()
    compared = 0
    for t in tables:
        for list_path, ours in t.lists.items():
            theirs = list(pyi_read_manifest_list(fileio.new_input(list_path)))
            assert len(ours) == len(theirs)
            for a, b in zip(ours, theirs, strict=True):
                compared += 1
                assert a.manifest_path == t.path_map.apply(b.manifest_path)
                assert (a.manifest_length, a.partition_spec_id, a.content) == (
                    b.manifest_length,
                    b.partition_spec_id,
                    int(b.content),
                )
                assert (a.sequence_number, a.min_sequence_number, a.added_snapshot_id) == (
                    b.sequence_number,
                    b.min_sequence_number,
                    b.added_snapshot_id,
                )
                counts = ("added_files_count", "existing_files_count", "deleted_files_count")
                rows = ("added_rows_count", "existing_rows_count", "deleted_rows_count")
                for name in counts + rows:
                    assert getattr(a, name) == getattr(b, name), name
                assert a.key_metadata == b.key_metadata
                if b.partitions is None:
                    assert a.partitions is None
                else:
                    assert a.partitions is not None
                    assert [
                        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in a.partitions
                    ] == [
                        (s.contains_null, s.contains_nan, s.lower_bound, s.upper_bound) for s in b.partitions
                    ]
    assert compared > 500


def test_manifest_entries_match_pyiceberg(tables: list[FixtureTable]) -> None:
    fileio = PyArrowFileIO()
    compared_manifests = compared_entries = 0
    for t in tables:
        for list_path in t.lists:
            for pyi_manifest in pyi_read_manifest_list(fileio.new_input(list_path)):
                pyi_manifest[0] = t.path_map.apply(pyi_manifest.manifest_path)
                ours_mf = next(m for m in t.lists[list_path] if m.manifest_path == pyi_manifest.manifest_path)
                if not os.path.exists(ours_mf.manifest_path):
                    continue
                theirs = pyi_manifest.fetch_manifest_entry(fileio, discard_deleted=False)
                ours = read_manifest(ours_mf, path_map=t.path_map).to_pylist()
                assert len(ours) == len(theirs), ours_mf.manifest_path
                compared_manifests += 1
                for row, entry in zip(ours, theirs, strict=True):
                    compared_entries += 1
                    _compare_entry(t, row, entry)
    assert compared_manifests > 500
    assert compared_entries > 800
    # the one double partition value among the fixtures (Hive's iceberg_alltypes_part, p_double = 2.222)
    assert _PYICEBERG_DOUBLE_LOSSES
    assert all("/iceberg_alltypes_part/" in p for p in _PYICEBERG_DOUBLE_LOSSES)


def test_double_partition_values_keep_double_precision(tables: list[FixtureTable]) -> None:
    t = next(tb for tb in tables if tb.root.name == "iceberg_alltypes_part")
    (table,) = read_manifests(list(_manifests(t)), path_map=t.path_map)
    partition = table["partition"][0].as_py()
    assert partition["p_double"] == 2.222  # the exact Avro double
    assert partition["p_float"] == float(np.float32(1.1))
    assert partition["p_decimal"] == Decimal("123.321")
    assert partition["p_date"] == 19045  # 2022-02-22 as days: the physical value


_PYICEBERG_DOUBLE_LOSSES: list[str] = []


def _compare_entry(t: FixtureTable, row: dict[str, Any], entry: Any) -> None:
    df = entry.data_file
    where = row["file_path"]
    assert row["status"] == int(entry.status), where
    assert row["snapshot_id"] == entry.snapshot_id, where
    assert row["sequence_number"] == entry.sequence_number, where
    assert row["file_sequence_number"] == entry.file_sequence_number, where
    assert row["content"] == int(df.content), where
    assert row["file_path"] == t.path_map.apply(df.file_path)
    assert row["file_format"] == df.file_format.value, where
    assert row["spec_id"] == df.spec_id, where
    assert len(row["partition"]) == len(df.partition._data), where
    for ours, theirs in zip(row["partition"].values(), df.partition._data, strict=True):
        if isinstance(ours, float) and ours != theirs:
            # PyIceberg 0.12's compiled Avro decoder reads doubles at single precision (2.222 ->
            # 2.2219998836517334, 1e300 -> inf); the Avro double itself is what we return
            assert float(np.float32(ours)) == theirs, where
            _PYICEBERG_DOUBLE_LOSSES.append(where)
        else:
            assert ours == theirs, where
    assert (row["record_count"], row["file_size_in_bytes"]) == (df.record_count, df.file_size_in_bytes)
    for name in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts"):
        assert _as_dict(row[name]) == _as_dict(getattr(df, name)), (where, name)
    for name in ("lower_bounds", "upper_bounds"):
        assert _as_dict(row[name]) == _as_dict(getattr(df, name)), (where, name)
    assert row["key_metadata"] == df.key_metadata, where
    assert row["split_offsets"] == df.split_offsets, where
    assert row["equality_ids"] == df.equality_ids, where
    assert row["sort_order_id"] == df.sort_order_id, where


def test_partition_types_follow_the_manifest(tables: list[FixtureTable]) -> None:
    by_name = {t.root.name: t for t in tables}
    expected = {
        "partition_decimal_hugeint": "decimal(36, 23)",
        "partition_decimal_smallint": "decimal(3, 2)",
        "partition_time": "time",
        "partition_timestamp": "timestamp",
        "partition_timestamptz": "timestamptz",
        "partition_fixed_length_binary": "fixed[11]",
        "partition_binary": "binary",
        "partition_bool": "boolean",
        "partition_float": "float",
        "hive_partitioned_table": "date",
        "v3_partitioned_temporal": None,  # year/month/day/hour: checked below
    }
    for name, type_str in expected.items():
        t = by_name[name]
        for table in read_manifests(list(_manifests(t)), path_map=t.path_map):
            first = table.schema.field("partition").type[0]
            if type_str is not None:
                assert first.metadata[b"iceberg_type"].decode() == type_str, name
                assert first.metadata[b"field_id"] == b"1000"
            else:
                kind = {b"int", b"date"}
                assert first.metadata[b"iceberg_type"] in kind
                assert first.type == pa.int32()
    # the day transform's result type is date: physical int32 days
    day = [
        table
        for table in read_manifests(list(_manifests(by_name["v3_partitioned_temporal"])))
        if table.schema.field("partition").type[0].name.endswith("_day")
    ]
    assert day and all(
        tb.schema.field("partition").type[0].metadata[b"iceberg_type"] == b"date" for tb in day
    )


# -- v3: row lineage and deletion vectors ------------------------------------------------------------------


def test_first_row_ids_are_inherited_without_overlap(tables: list[FixtureTable]) -> None:
    checked = 0
    for t in tables:
        if t.inventory["format_version"] != 3 or t.current is None:
            continue
        manifests = t.lists[t.path_map.apply(t.current["manifest-list"])]
        ranges = []
        for m, table in zip(manifests, read_manifests(manifests, path_map=t.path_map), strict=True):
            with open(m.manifest_path, "rb") as f:
                raw = [cast(dict[str, Any], r)["data_file"].get("first_row_id") for r in fastavro.reader(f)]
            expected_next = m.first_row_id
            for row, written in zip(table.to_pylist(), raw, strict=True):
                if row["content"] != 0:
                    assert row["first_row_id"] is None
                elif written is not None or m.first_row_id is None:
                    assert row["first_row_id"] == written
                elif row["status"] == 2:
                    assert row["first_row_id"] is None
                else:
                    assert row["first_row_id"] == expected_next
                    assert expected_next is not None
                    expected_next += row["record_count"]
                if row["content"] == 0 and row["status"] != 2 and row["first_row_id"] is not None:
                    ranges.append((row["first_row_id"], row["first_row_id"] + row["record_count"]))
                    checked += 1
        ranges.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ranges)), t.root
        if ranges and t.next_row_id is not None:
            assert ranges[-1][1] <= t.next_row_id
    assert checked >= 20


def _puffin_blobs(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == data[-4:] == b"PFA1"
    size, flags = struct.unpack("<ii", data[-12:-4])
    assert flags & 1 == 0  # uncompressed footer
    return list(json.loads(data[-12 - size : -12])["blobs"])


@pytest.mark.parametrize(
    "table_dir",
    [
        "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors",
        "pg_lake/sample_tables_v3/public/v3_pos_dv",
    ],
)
def test_deletion_vectors_match_puffin_footers(tables: list[FixtureTable], table_dir: str) -> None:
    t = next(tb for tb in tables if tb.root == FIXTURES / table_dir)
    assert t.current is not None
    manifests = t.lists[t.path_map.apply(t.current["manifest-list"])]
    dvs = [
        row
        for table in read_manifests(manifests, path_map=t.path_map)
        for row in table.to_pylist()
        if row["content"] == 1
    ]
    assert dvs and len(dvs) == int(t.inventory["delete_files"].split("(")[1].rstrip(")"))
    for dv in dvs:
        assert dv["file_format"] == "PUFFIN"
        assert dv["referenced_data_file"] is not None and os.path.exists(dv["referenced_data_file"])
        assert dv["first_row_id"] is None
        (blob,) = [b for b in _puffin_blobs(dv["file_path"]) if b["offset"] == dv["content_offset"]]
        assert blob["type"] == "deletion-vector-v1"
        assert blob["length"] == dv["content_size_in_bytes"]
        assert t.path_map.apply(blob["properties"]["referenced-data-file"]) == dv["referenced_data_file"]
        assert int(blob["properties"]["cardinality"]) == dv["record_count"]


# -- inheritance rules on crafted manifests ------------------------------------------------------------------


def _template(tables: list[FixtureTable]) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """A v3 fixture manifest's writer schema, metadata and first record (all v3 fields present)."""
    t = next(tb for tb in tables if tb.root.name == "v3_pos_dv")
    m = next(m for m in _manifests(t) if not m.is_delete_manifest)
    with open(m.manifest_path, "rb") as f:
        reader = fastavro.reader(f)
        first = cast(dict[str, Any], next(iter(reader)))
        meta = {k: str(v) for k, v in reader.metadata.items() if not k.startswith("avro.")}
        return cast(dict[str, Any], reader.writer_schema), meta, first


def _write(path: Path, schema: dict[str, Any], meta: dict[str, str], records: list[dict[str, Any]]) -> str:
    with open(path, "wb") as f:
        fastavro.writer(f, schema, records, metadata=meta, codec="deflate")
    return str(path)


def _entry(
    base: dict[str, Any], status: int, content: int = 0, rows: int = 10, **entry: Any
) -> dict[str, Any]:
    df = dict(base["data_file"], content=content, record_count=rows, first_row_id=None)
    df["file_path"] = f"/old/warehouse/t/data/{status}-{content}-{rows}.parquet"
    return dict(base, status=status, snapshot_id=None, sequence_number=None, file_sequence_number=None,
                data_file=df) | entry  # fmt: skip


def test_inheritance_rules(tables: list[FixtureTable], tmp_path: Path) -> None:
    schema, meta, base = _template(tables)
    records = [
        _entry(base, 1, rows=10),  # ADDED data: inherits everything
        _entry(base, 0, rows=5, snapshot_id=11, sequence_number=3, file_sequence_number=4),  # EXISTING
        _entry(base, 2, rows=7, snapshot_id=12, sequence_number=2, file_sequence_number=2),  # DELETED
        _entry(base, 1, rows=20),
        _entry(base, 0, rows=6),  # EXISTING without sequence numbers: stays null (manifest seq != 0)
        _entry(base, 1, content=1, rows=3),  # a delete file: first_row_id stays null
        _entry(base, 1, rows=4) | {"data_file": dict(_entry(base, 1)["data_file"], first_row_id=999)},
    ]
    path = _write(tmp_path / "m.avro", schema, meta, records)
    m = ManifestFile(
        path, os.path.getsize(path), 3, sequence_number=9, added_snapshot_id=77, first_row_id=100
    )
    table = read_manifest(m, path_map=PathMap.of({"/old/warehouse/t": "/new/t"}))
    assert table["status"].to_pylist() == [1, 0, 2, 1, 0, 1, 1]
    assert table["snapshot_id"].to_pylist() == [77, 11, 12, 77, 77, 77, 77]
    assert table["sequence_number"].to_pylist() == [9, 3, 2, 9, None, 9, 9]
    assert table["file_sequence_number"].to_pylist() == [9, 4, 2, 9, None, 9, 9]
    # 100; EXISTING 5 rows -> 110; DELETED skipped; 20 rows at 115; EXISTING 6 at 135; delete file; kept 999
    assert table["first_row_id"].to_pylist() == [100, 110, None, 115, 135, None, 999]
    assert set(table["spec_id"].to_pylist()) == {3}
    assert table["file_path"][0].as_py() == "/new/t/data/1-0-10.parquet"
    # a manifest with sequence number 0 (v1 manifests in a list) gives every null sequence number 0
    zero = read_manifest(replace(m, sequence_number=0, first_row_id=None))
    assert zero["sequence_number"].to_pylist() == [0, 3, 2, 0, 0, 0, 0]
    assert zero["first_row_id"].to_pylist() == [None, None, None, None, None, None, 999]


def test_v1_shaped_manifest_defaults(tables: list[FixtureTable]) -> None:
    t = next(tb for tb in tables if tb.root.name == "iceberg_partitioned")
    assert t.inventory["format_version"] == 1
    (m,) = list(_manifests(t))
    table = read_manifest(m, path_map=t.path_map)
    assert set(table["content"].to_pylist()) == {0}
    assert set(table["sequence_number"].to_pylist()) == {0}
    assert set(table["file_sequence_number"].to_pylist()) == {0}
    assert table["snapshot_id"].null_count == 0


def test_manifest_files_from_paths(tables: list[FixtureTable]) -> None:
    """A v1 snapshot's ``manifests`` field: spec id from the file, sequence numbers 0, snapshot id given."""
    t = next(tb for tb in tables if tb.root.name == "v3_partitioned_temporal")
    listed = list(_manifests(t))
    raw_paths = [m.manifest_path.replace(str(t.root), "/elsewhere/t") for m in listed]
    (first, *_) = from_paths = manifest_files_from_paths(
        raw_paths, snapshot_id=5, path_map=PathMap.of({"/elsewhere/t": str(t.root)})
    )
    assert first.manifest_path == listed[0].manifest_path
    assert (first.content, first.sequence_number, first.added_snapshot_id) == (0, 0, 5)
    assert (
        first.partition_spec_id is None and first.manifest_length is None and first.added_files_count is None
    )
    for m, mf in zip(listed, from_paths, strict=True):
        table = read_manifest(mf)
        assert set(table["spec_id"].to_pylist()) == {m.partition_spec_id}
        assert set(table["sequence_number"].to_pylist()) == {0}


def test_read_manifests_keeps_order_and_uses_open_input(tables: list[FixtureTable]) -> None:
    t = next(tb for tb in tables if tb.root.name == "products_with_eq_deletes")
    manifests = list(_manifests(t))
    assert len(manifests) >= 5
    opened: list[str] = []

    def open_input(path: str) -> BinaryIO:
        opened.append(path)
        return io.BytesIO(Path(path).read_bytes())

    sequential = [read_manifest(m, path_map=t.path_map) for m in manifests]
    parallel = read_manifests(manifests, path_map=t.path_map, open_input=open_input, max_workers=4)
    assert [tb.equals(other) for tb, other in zip(parallel, sequential, strict=True)] == [True] * len(
        manifests
    )
    assert sorted(opened) == sorted(m.manifest_path for m in manifests)


# -- bad input: a clear error naming the file, never a partial result ----------------------------------------


@pytest.fixture(scope="module")
def real_manifest(tables: list[FixtureTable]) -> tuple[ManifestFile, bytes]:
    t = next(tb for tb in tables if tb.root.name == "multi_rowgroup_orders_with_deletes")
    m = max(_manifests(t), key=lambda m: os.path.getsize(m.manifest_path))
    return m, Path(m.manifest_path).read_bytes()


def test_truncated_manifests_raise(real_manifest: tuple[ManifestFile, bytes], tmp_path: Path) -> None:
    m, data = real_manifest
    for cut in (0, 3, 10, 100, len(data) // 2, len(data) - 17, len(data) - 1):
        path = tmp_path / f"cut{cut}.avro"
        path.write_bytes(data[:cut])
        with pytest.raises(ManifestError, match=str(path)):
            read_manifest(replace(m, manifest_path=str(path)))


def test_truncated_manifest_list_raises(tables: list[FixtureTable], tmp_path: Path) -> None:
    list_path = max((p for t in tables for p in t.lists), key=os.path.getsize)
    data = Path(list_path).read_bytes()
    for cut in (5, len(data) // 2, len(data) - 1):
        path = tmp_path / f"list{cut}.avro"
        path.write_bytes(data[:cut])
        with pytest.raises(ManifestError, match=str(path)):
            read_manifest_list(str(path))


def test_corrupt_and_foreign_files_raise(real_manifest: tuple[ManifestFile, bytes], tmp_path: Path) -> None:
    m, data = real_manifest
    rng = __import__("random").Random(7)
    cases = {
        "random.avro": bytes(rng.randrange(256) for _ in range(2000)),
        "empty.avro": b"",
        "magic_only.avro": b"Obj\x01" + bytes(rng.randrange(256) for _ in range(50)),
        "flipped.avro": data[: len(data) // 2]
        + bytes(b ^ 0x5A for b in data[len(data) // 2 : -20])
        + data[-20:],
    }
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(ManifestError, match=str(path)):
            read_manifest(replace(m, manifest_path=str(path)))
        with pytest.raises(ManifestError, match=str(path)):
            read_manifest_list(str(path))
    with pytest.raises(ManifestError, match="file not found") as info:
        read_manifest(replace(m, manifest_path=str(tmp_path / "nope.avro")))
    assert "nope.avro" in str(info.value)
    with pytest.raises(ManifestError, match=r"nope\.avro: file not found"):
        read_manifests([m, replace(m, manifest_path=str(tmp_path / "nope.avro"))], max_workers=2)


def test_wrong_schemas_raise(tables: list[FixtureTable], tmp_path: Path) -> None:
    schema, meta, base = _template(tables)
    t = next(tb for tb in tables if tb.root.name == "v3_pos_dv")
    list_path = next(iter(t.lists))
    m = next(m for m in _manifests(t) if not m.is_delete_manifest)
    # a manifest list read as a manifest, and a manifest read as a manifest list
    with pytest.raises(ManifestError, match=r"manifest_entry schema lacks required field.*status"):
        read_manifest(replace(m, manifest_path=list_path))
    with pytest.raises(ManifestError, match=r"manifest list schema lacks required field.*manifest_path"):
        read_manifest_list(m.manifest_path)
    # data_file without file_path
    bad = json.loads(json.dumps(schema))
    df = next(f for f in bad["fields"] if f["name"] == "data_file")["type"]
    df["fields"] = [f for f in df["fields"] if f["name"] != "file_path"]
    path = _write(tmp_path / "nofilepath.avro", bad, meta, [base])
    with pytest.raises(
        ManifestError, match=r"nofilepath\.avro: data_file schema lacks .*file_path \(id 100\)"
    ):
        read_manifest(replace(m, manifest_path=path))
    # an invalid status code
    path = _write(tmp_path / "status.avro", schema, meta, [dict(base, status=7)])
    with pytest.raises(ManifestError, match=r"status\.avro: invalid status 7"):
        read_manifest(replace(m, manifest_path=path))


def test_fewer_entries_than_the_list_counts_raises(tables: list[FixtureTable], tmp_path: Path) -> None:
    schema, meta, base = _template(tables)
    path = _write(tmp_path / "short.avro", schema, meta, [base])
    m = ManifestFile(path, 1, 0, added_files_count=2, existing_files_count=0, deleted_files_count=0)
    with pytest.raises(ManifestError, match=r"short\.avro: holds 1 entries but the manifest list counts 2"):
        read_manifest(m)
    assert read_manifest(replace(m, added_files_count=1)).num_rows == 1


def test_file_uris_open_locally(tables: list[FixtureTable]) -> None:
    t = next(tb for tb in tables if tb.root.name == "v3_pos_dv")
    list_path, manifests = next(iter(t.lists.items()))
    for uri in (f"file:{list_path}", f"file://{list_path}"):
        assert read_manifest_list(uri, path_map=t.path_map) == manifests
    m = manifests[0]
    assert read_manifest(replace(m, manifest_path=f"file://{m.manifest_path}")).num_rows == (
        read_manifest(m).num_rows
    )


@pytest.mark.parametrize("codec", ["zstandard", "snappy", "deflate"])
def test_manifest_lists_in_every_codec_java_writes(codec: str, tmp_path: Path) -> None:
    """Iceberg Java writes manifest lists with write.avro.compression-codec (zstd among them); a zstandard
    one was refused as corrupt (fastavro needs backports.zstd for that codec before Python 3.14)."""
    source = sorted(
        (Path(__file__).resolve().parents[2].parent / "shared" / "fixtures").rglob("snap-*.avro")
    )[0]
    with source.open("rb") as f:
        reader = fastavro.reader(f)
        schema = cast(dict[str, Any], reader.writer_schema)
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
        records = list(reader)
    target = tmp_path / f"snap-{codec}.avro"
    with target.open("wb") as f:
        fastavro.writer(f, schema, records, metadata=meta, codec=codec)
    assert read_manifest_list(str(target)) == read_manifest_list(str(source))


def _rewrite_partition_record(path: Path, change: str) -> None:
    """Write the data manifest ``path`` again with its partition record's fields reversed, with an
    extra field of no spec field, or without its first field (field ids kept)."""
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        meta = {k: v for k, v in cast(dict[str, Any], reader.metadata).items() if not k.startswith("avro.")}
        schema = json.loads(cast(dict[str, Any], reader.metadata)["avro.schema"])
        records = list(reader)
    data_file = next(f for f in schema["fields"] if f["name"] == "data_file")["type"]
    partition = next(f for f in data_file["fields"] if f["name"] == "partition")["type"]
    if change == "reversed":
        partition["fields"].reverse()
    elif change == "extra":
        partition["fields"].insert(
            0, {"field-id": 9999, "name": "extra", "type": ["null", "int"], "default": None}
        )
        for r in records:
            cast(dict[str, Any], r)["data_file"]["partition"]["extra"] = 5
    else:
        dropped = partition["fields"].pop(0)["name"]
        for r in records:
            del cast(dict[str, Any], r)["data_file"]["partition"][dropped]
    out = io.BytesIO()
    fastavro.writer(out, schema, records, metadata=meta)
    path.write_bytes(out.getvalue())


@pytest.mark.parametrize("change", ["reversed", "extra", "missing"])
def test_partition_values_are_read_by_field_id(tmp_path: Path, change: str) -> None:
    """Values were taken by position: a record listing the spec's fields in another order, or one more,
    gave data files partition tuples their position deletes did not share, and deleted rows came back."""
    from tests.commit._support import sql_catalog

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("g", pa.int32())])
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, partition_spec=["bucket(2, id)", "g"], properties={"format-version": "2"}
    )
    tbl.append(pa.table({"id": list(range(10)), "g": pa.array([7] * 10, pa.int32())}, schema=schema))
    tbl.delete("id = 4")
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    manifests = read_manifest_list(snapshot.manifest_list)
    [data] = [m for m in manifests if m.content == 0]
    expected = read_manifest(data).column("partition").to_pylist()
    _rewrite_partition_record(Path(data.manifest_path), change)
    if change == "missing":
        with pytest.raises(
            ManifestError, match=r"lacks field\(s\) id_bucket \(field id 1000\) of its partition spec 0"
        ):
            read_manifest(data)
        return
    partition = read_manifest(data).column("partition")
    assert [f.name for f in partition.type] == ["id_bucket", "g"] and partition.to_pylist() == expected
    assert sorted(tbl.refresh().scan().to_arrow()["id"].to_pylist()) == [0, 1, 2, 3, 5, 6, 7, 8, 9]


def test_a_delete_manifest_listing_data_content_is_refused_naming_it(tmp_path: Path) -> None:
    """Read as an equality delete ('not a position delete file (equality)'), as Java refuses it."""
    from gpu_engine.errors import PlanningError
    from tests.commit._support import sql_catalog

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2"})
    tbl.append(pa.table({"id": list(range(10))}, schema=schema))
    tbl.delete("id = 4")
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    [deletes] = [m for m in read_manifest_list(snapshot.manifest_list) if m.content == 1]
    path = Path(deletes.manifest_path)
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        meta = {k: v for k, v in cast(dict[str, Any], reader.metadata).items() if not k.startswith("avro.")}
        avro_schema = json.loads(cast(dict[str, Any], reader.metadata)["avro.schema"])
        records = list(reader)
    for r in records:
        cast(dict[str, Any], r)["data_file"]["content"] = 0
    out = io.BytesIO()
    fastavro.writer(out, avro_schema, records, metadata=meta)
    path.write_bytes(out.getvalue())
    with pytest.raises(
        PlanningError, match=rf"delete manifest {path}.* with content 0 \(a delete file's is 1"
    ):
        tbl.refresh().scan().to_arrow()

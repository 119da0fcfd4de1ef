"""The independent readers the scan-execution tests compare our engine against (tests/execute/oracles.py).

For every Iceberg fixture table (current snapshot): PyIceberg and DuckDB must read it unless listed in
``PYICEBERG_CANNOT`` / ``DUCKDB_CANNOT`` (and must still fail, for the recorded reason, where listed), must
agree with each other where both read it, and with the results a fixture ships. Plus: time travel through
both oracles, the remapped metadata copy, and the multiset comparison's normalisations.
"""

from __future__ import annotations

import decimal
import json
import math
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from gpu_engine.io.paths import normalize

from ..planning._support import MISSING, PATH_FIELD_ID, RemappingFileIO, inventory, inventory_paths
from .oracles import (
    DUCKDB_CANNOT,
    HAND_CHECKED,
    KNOWN_WRONG,
    PYICEBERG_CANNOT,
    Limit,
    OracleUnavailable,
    assert_same_rows,
    current_metadata_file,
    duckdb_rows,
    expected_row_count,
    expected_rows,
    metadata_json,
    pyiceberg_rows,
    remapped_copy,
    table_path_map,
)

TABLES = inventory_paths()
Reader = Callable[..., pa.Table]


def _short(rel: str) -> str:
    return rel.removeprefix("fixtures/")


def _read(name: str, reader: Reader, limits: dict[str, Limit], rel: str) -> pa.Table | None:
    """``reader``'s rows, or None where ``limits`` lists the table (then it must fail as recorded)."""
    limit = limits.get(rel)
    if limit is None:
        try:
            return reader(rel)
        except OracleUnavailable as exc:
            pytest.fail(f"{name} unexpectedly cannot read {rel} (not in its CANNOT list): {exc.reason}")
    with pytest.raises(OracleUnavailable, match=limit.match):
        reader(rel)
        pytest.fail(f"{name} now reads {rel}: remove it from its CANNOT list ({limit.reason})")
    return None


@pytest.mark.parametrize("rel", TABLES, ids=_short)
def test_oracles_agree(rel: str) -> None:
    assert rel != MISSING, "fixtures missing"
    results = {
        "pyiceberg": _read("PyIceberg", pyiceberg_rows, PYICEBERG_CANNOT, rel),
        "duckdb": _read("DuckDB", duckdb_rows, DUCKDB_CANNOT, rel),
    }
    trusted = {n: t for n, t in results.items() if t is not None and (n, rel) not in KNOWN_WRONG}
    expected, count = expected_rows(rel), expected_row_count(rel)
    if len(trusted) == 2:
        assert_same_rows(trusted["pyiceberg"], trusted["duckdb"], context=f"{rel}: PyIceberg vs DuckDB")
    for name, rows in trusted.items():
        if expected is not None:
            assert_same_rows(rows, expected, context=f"{rel}: {name} vs the shipped expected results")
        if count is not None:
            assert rows.num_rows == count, f"{rel}: {name} reads {rows.num_rows} rows, documented {count}"
    for (name, wrong_rel), why in KNOWN_WRONG.items():
        if wrong_rel != rel:
            continue
        wrong = results[name]
        assert wrong is not None, f"{name} no longer reads {rel}; drop its KNOWN_WRONG entry"
        reference = expected if expected is not None else next(iter(trusted.values()))
        with pytest.raises(AssertionError):
            assert_same_rows(wrong, reference, context=rel)
            pytest.fail(f"{name} now reads {rel} right: drop its KNOWN_WRONG entry ({why})")


def test_limit_lists_name_inventory_tables() -> None:
    tables = set(inventory())
    assert set(PYICEBERG_CANNOT) <= tables
    assert set(DUCKDB_CANNOT) <= tables
    assert {rel for _, rel in KNOWN_WRONG} <= tables
    assert {name for name, _ in KNOWN_WRONG} <= {"pyiceberg", "duckdb"}
    for name, rel in KNOWN_WRONG:  # a wrong answer is still an answer: the table is not in a CANNOT list
        assert rel not in (PYICEBERG_CANNOT if name == "pyiceberg" else DUCKDB_CANNOT)
    both = tables - set(PYICEBERG_CANNOT) - set(DUCKDB_CANNOT) - {rel for _, rel in KNOWN_WRONG}
    assert len(both) >= 70, len(both)  # the tables where the two oracles are compared row by row
    assert len(tables - set(DUCKDB_CANNOT)) >= 90


def test_expected_results_and_counts() -> None:
    spec = "fixtures/duckdb-iceberg/data/iceberg/generated_spec{}_0_001/pyspark_iceberg_table"
    for version, rows in ((1, 7690), (2, 6592)):
        shipped = expected_rows(spec.format(version))
        assert shipped is not None and shipped.num_rows == rows
        assert expected_row_count(spec.format(version)) == rows
    eq = "dremio-oss/iceberg/v2/products_with_eq_deletes"
    assert expected_rows(eq) is None and expected_row_count(eq) == 450
    others = set(inventory()) - {spec.format(1), spec.format(2), "fixtures/" + eq} - HAND_CHECKED
    assert all(expected_rows(r) is None and expected_row_count(r) is None for r in others)
    assert all(expected_rows(r) is not None for r in HAND_CHECKED)


# -- time travel -----------------------------------------------------------------------------------------

TIME_TRAVEL = [
    # 7 snapshots: appends, overwrites, position deletes, schema evolution (add column, int -> long)
    "fixtures/duckdb-iceberg/data/iceberg/generated_spec2_0_001/pyspark_iceberg_table",
    # 4 snapshots: position deletes against 2-row-group files
    "fixtures/dremio-oss/iceberg/v2/multi_rowgroup_orders_with_deletes",
    # Impala position deletes spelled hdfs://... against /test-warehouse/... manifests
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_positional_not_all_data_files_have_delete_files",
]


@pytest.mark.parametrize("rel", TIME_TRAVEL, ids=_short)
def test_time_travel_agrees(rel: str) -> None:
    md = metadata_json(rel)
    counts = []
    for snap in md["snapshots"]:
        sid = int(snap["snapshot-id"])
        ours = pyiceberg_rows(rel, sid)
        assert_same_rows(ours, duckdb_rows(rel, sid), context=f"{rel} @ {sid}")
        counts.append(ours.num_rows)
    assert len(set(counts)) > 1, counts  # the snapshot id is honoured
    current = pyiceberg_rows(rel, md["current-snapshot-id"])
    assert_same_rows(pyiceberg_rows(rel), current, context=f"{rel}: current snapshot")


def test_time_travel_to_an_unreadable_snapshot_fails() -> None:
    rel = "fixtures/pg_lake/sample_tables/public/spark_generated_iceberg_test_2"  # oldest manifest lists gone
    md = metadata_json(rel)
    oldest = int(min(md["snapshots"], key=lambda s: s["timestamp-ms"])["snapshot-id"])
    with pytest.raises(OracleUnavailable, match="No such file"):
        pyiceberg_rows(rel, oldest)
    with pytest.raises(OracleUnavailable, match="No such file"):
        duckdb_rows(rel, oldest)


# -- the metadata the oracles read -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rel", "name"),
    [
        ("duckdb-iceberg/data/persistent/uuid", "00001-43fda1f4-1c96-4376-ad16-91beb71d0759.metadata.json"),
        ("impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors", "v3.metadata.json"),  # empty hint
        ("pg_lake/sample_tables_v3/public/v3_evolution_full", "v16.metadata.json"),  # v16 after v9
        ("duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg_gz", "v2.gz.metadata.json"),
        (
            "duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t",
            "vfinal.metadata.json",
        ),
        ("duckdb-iceberg/data/persistent/name_mapping/warehouse_1/mydb/t1", "v7.metadata.json"),  # hint wins
        ("impala/iceberg_test/hadoop_catalog/ice/airports_parquet", "v2.metadata.json"),  # .txt hint
    ],
)
def test_current_metadata_file(rel: str, name: str) -> None:
    assert current_metadata_file(rel).name == name


def _avro(path: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        return dict(reader.metadata), [cast(dict[str, Any], r) for r in reader]


REMAPPED = [
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_partitioned_position_deletes",
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_multiple_storage_locations",
    "fixtures/duckdb-iceberg/data/persistent/map_stats/default.db/map_stats",
    "fixtures/duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg",
    "fixtures/dremio-oss/iceberg/v2/products_with_eq_deletes",
    "fixtures/impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors",
]


@pytest.mark.parametrize("rel", REMAPPED, ids=_short)
def test_remapped_copy_points_at_existing_files(rel: str) -> None:
    copy = remapped_copy(rel)
    md, original = json.loads(copy.read_text()), metadata_json(rel)
    assert md["location"] == str(current_metadata_file(rel).parent.parent)
    assert [s["snapshot-id"] for s in md["snapshots"]] == [s["snapshot-id"] for s in original["snapshots"]]
    current = next(s for s in md["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    was = next(s for s in original["snapshots"] if s["snapshot-id"] == md["current-snapshot-id"])
    list_meta, manifests = _avro(current["manifest-list"])
    original_meta, original_manifests = _avro(table_path_map(rel).apply(was["manifest-list"]))
    assert json.loads(list_meta.pop("avro.schema")) == json.loads(original_meta.pop("avro.schema"))
    assert list_meta == original_meta  # codec and Iceberg's keys kept
    assert [m["added_snapshot_id"] for m in manifests] == [m["added_snapshot_id"] for m in original_manifests]
    seen = {0: 0, 1: 0, 2: 0}
    for m, was_m in zip(manifests, original_manifests, strict=True):
        meta, entries = _avro(m["manifest_path"])
        original_meta, original_entries = _avro(table_path_map(rel).apply(was_m["manifest_path"]))
        assert json.loads(meta.pop("avro.schema")) == json.loads(original_meta.pop("avro.schema"))
        assert meta == original_meta  # "schema", "partition-spec", "format-version", "content", ...
        assert len(entries) == len(original_entries)
        for entry in entries:
            data_file = entry["data_file"]
            assert Path(data_file["file_path"]).is_absolute() and Path(data_file["file_path"]).is_file()
            content = data_file.get("content", 0)
            seen[content] += 1
            if data_file.get("referenced_data_file"):
                assert Path(data_file["referenced_data_file"]).is_file()
            if content == 1 and data_file["file_format"] == "PARQUET":
                deletes = pq.read_table(data_file["file_path"])
                assert (
                    deletes.schema.field("file_path").metadata[b"PARQUET:field_id"]
                    == str(PATH_FIELD_ID).encode()
                )
                targets = {p for p in deletes.column("file_path").to_pylist() if p is not None}
                assert targets and all(Path(p).is_file() for p in targets), targets
                assert PATH_FIELD_ID not in {kv["key"] for kv in data_file.get("lower_bounds") or []}
    assert seen[0] > 0


def test_pyiceberg_needs_respelled_position_deletes() -> None:
    """PyIceberg matches position deletes by raw path: Impala's hdfs:// spellings match nothing unless
    respelled (oracles.pyiceberg_rows does); this pins the reason for that workaround."""
    rel = "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_partitioned_position_deletes"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        static = StaticTable.from_metadata(str(current_metadata_file(rel)))
        static.io = RemappingFileIO(table_path_map(rel))
        raw = static.scan().to_arrow()
    assert (raw.num_rows, pyiceberg_rows(rel).num_rows, duckdb_rows(rel).num_rows) == (20, 10, 10)
    manifest_paths = {normalize(t.file.file_path) for t in static.scan().plan_files()}
    assert all(p.startswith("/test-warehouse/") for p in manifest_paths)


# -- assert_same_rows ------------------------------------------------------------------------------------


def _same(a: pa.Table, b: pa.Table) -> bool:
    try:
        assert_same_rows(a, b, context="t")
    except AssertionError:
        return False
    return True


def _col(values: list[Any], type_: pa.DataType, name: str = "c") -> pa.Table:
    return pa.table({name: pa.array(values, type=type_)})


def test_rows_compare_as_multisets_ignoring_order() -> None:
    a = pa.table({"x": [1, 2, 2], "y": ["a", "b", "b"]})
    assert _same(a, pa.table({"y": ["b", "a", "b"], "x": [2, 1, 2]}))
    assert not _same(a, pa.table({"x": [1, 1, 2], "y": ["a", "a", "b"]}))
    assert not _same(a, pa.table({"x": [1, 2], "y": ["a", "b"]}))  # multiplicity counts
    assert not _same(a, pa.table({"x": [1, 2, 2], "Y": ["a", "b", "b"]}))  # names are case-sensitive
    with pytest.raises(AssertionError, match=r"columns differ: only in actual \['y'\]"):
        assert_same_rows(a, pa.table({"x": [1, 2, 2]}), context="t")
    with pytest.raises(AssertionError, match=r"(?s)t: rows differ: .*1 rows only in actual.*'x': 1"):
        assert_same_rows(a, pa.table({"x": [3, 2, 2], "y": ["a", "b", "b"]}), context="t")


def test_representations_that_are_not_value_differences() -> None:
    assert _same(_col(["a", None], pa.string()), _col(["a", None], pa.large_string()))
    assert _same(_col([b"a"], pa.binary()), _col([b"a"], pa.large_binary()))
    assert _same(_col([b"ab"], pa.binary(2)), _col([b"ab"], pa.binary()))
    assert _same(_col([1], pa.int32()), _col([1], pa.int64()))
    assert _same(_col([1.5], pa.float32()), _col([1.5], pa.float64()))
    assert _same(_col([[1, 2]], pa.list_(pa.int32())), _col([[1, 2]], pa.large_list(pa.int64())))
    ts = [1_600_000_000_000_000]
    assert _same(_col(ts, pa.timestamp("us", "UTC")), _col(ts, pa.timestamp("us", "+00:00")))
    assert _same(_col(ts, pa.timestamp("us", "UTC")), _col([ts[0] * 1000], pa.timestamp("ns", "Etc/UTC")))
    dec = decimal.Decimal("1.50")
    assert _same(_col([dec], pa.decimal128(9, 2)), _col([dec], pa.decimal128(38, 2)))
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    uuid_ext = pa.table({"c": pa.ExtensionArray.from_storage(pa.uuid(), pa.array([u.bytes], pa.binary(16)))})
    assert _same(uuid_ext, _col([str(u)], pa.string()))
    assert _same(_col([u.bytes], pa.binary(16)), _col([str(u)], pa.string()))
    assert _same(uuid_ext, _col([u.bytes], pa.binary(16)))
    assert _same(_col([math.nan], pa.float64()), _col([float("nan")], pa.float32()))
    m = pa.map_(pa.string(), pa.int32())
    assert _same(_col([[("a", 1), ("b", 2)]], m), _col([[("b", 2), ("a", 1)]], m))
    s1 = pa.array([{"a": 1, "b": "x"}])
    s2 = pa.array([{"b": "x", "a": 1}])
    assert _same(pa.table({"c": s1}), pa.table({"c": s2}))
    assert _same(_col([[1], None], pa.list_(pa.int32())).slice(1), _col([None], pa.list_(pa.int32())))


def test_value_differences_are_kept() -> None:
    assert not _same(_col([0.0], pa.float64()), _col([-0.0], pa.float64()))  # the sign of zero is a value
    assert not _same(_col([0.1], pa.float64()), _col([0.1], pa.float32()))  # float32(0.1) != 0.1
    ts = [1_600_000_000_000_000]
    assert not _same(_col(ts, pa.timestamp("us")), _col(ts, pa.timestamp("us", "UTC")))  # ts vs tstz
    assert not _same(_col([1], pa.int64()), _col([decimal.Decimal(1)], pa.decimal128(9, 0)))
    assert not _same(_col([1], pa.int64()), _col([True], pa.bool_()))
    assert not _same(_col(["1"], pa.string()), _col([b"1"], pa.binary()))
    assert not _same(_col(["a"], pa.string()), _col([None], pa.string()))
    assert not _same(_col([[1, 2]], pa.list_(pa.int32())), _col([[2, 1]], pa.list_(pa.int32())))
    assert not _same(_col([[]], pa.list_(pa.int32())), _col([None], pa.list_(pa.int32())))

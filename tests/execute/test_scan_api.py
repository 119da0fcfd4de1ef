"""``Table.scan(...)`` as a user calls it, on fixture tables: column selection (nested and metadata
columns), row lineage, filters, limits and the ways to get rows out.

Expected values come from outside the engine: DuckDB's rows (oracles.duckdb_rows) filtered or projected in
pyarrow, the data files read with pyarrow.parquet, and the manifest list and manifests read here with
fastavro, applying the spec's inheritance rules (sequence numbers, First Row ID Inheritance) directly.
"""

from __future__ import annotations

import types
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyroaring import BitMap64

from gpu_engine._deps import optional
from gpu_engine.backend import probe_cuda
from gpu_engine.errors import BackendUnavailable, InvalidType, PlanningError, UnsupportedFeature
from gpu_engine.execute.metadata import metadata_column
from gpu_engine.execute.scan import ScanProgress
from gpu_engine.iceberg import metadata_columns as mc
from gpu_engine.io.paths import normalize
from gpu_engine.tasks import DataFile

from ..commit._support import sql_catalog
from ..planning._support import FIXTURES, load
from .oracles import assert_same_rows, duckdb_rows, metadata_json, table_path_map

WITH_DELETE = "dremio-oss/iceberg/table_with_delete"  # identity(category), 6 files, a position delete file
ORDERS = "dremio-oss/iceberg/v2/multi_rowgroup_orders_with_deletes"  # 2 row groups a file, 4 pos delete files
PG_DV = "pg_lake/sample_tables_v3/public/v3_pos_dv"
IMPALA_DV = "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors"
TEMPORAL = "pg_lake/sample_tables_v3/public/v3_partitioned_temporal"  # year -> month -> day -> hour
NESTED = "pg_lake/sample_tables_v3/public/v3_nested_basic"
EQ_NULLS = "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_nulls"
NULLS = "duckdb-iceberg/data/persistent/is_null_is_not_null"
PG_LINEAGE = "pg_lake/sample_tables_v3/public/v3_row_lineage_appends"
IMPALA_LINEAGE = "impala/iceberg_test/iceberg_v3/iceberg_v3_row_lineage"
V2_POSITIONAL = "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_positional"


# -- the table's files, read independently with fastavro -------------------------------------------------


@dataclass(frozen=True)
class ManifestEntry:
    path: str  # local, normalised
    content: int  # 0 data, 1 position deletes / DV, 2 equality deletes
    file_format: str
    spec_id: int
    partition: dict[str, Any]
    record_count: int
    data_seq: int
    first_row_id: int | None  # after First Row ID Inheritance (data files)
    referenced: str | None  # local, normalised
    content_offset: int | None
    content_size: int | None


def _avro_records(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        records: list[dict[str, Any]] = [r for r in fastavro.reader(f) if isinstance(r, dict)]
    return records


@cache
def live_entries(rel: str, snapshot_id: int | None = None) -> tuple[ManifestEntry, ...]:
    """The live (ADDED/EXISTING) entries of ``rel``'s snapshot, with inherited sequence numbers and
    first row ids, as the spec defines them (independent of gpu_engine's manifest reader)."""
    md = metadata_json(rel)
    pm = table_path_map(rel)

    def local(p: str) -> str:
        return normalize(pm.apply(p))

    sid = md["current-snapshot-id"] if snapshot_id is None else snapshot_id
    snapshot = next(s for s in md["snapshots"] if s["snapshot-id"] == sid)
    out = []
    for manifest in _avro_records(local(snapshot["manifest-list"])):
        next_row_id = manifest.get("first_row_id")
        for entry in _avro_records(local(manifest["manifest_path"])):
            df = entry["data_file"]
            first_row_id = df.get("first_row_id")
            if df["content"] == 0 and first_row_id is None and next_row_id is not None:
                first_row_id = next_row_id  # "First Row ID Inheritance"
                next_row_id += df["record_count"]
            if entry["status"] == 2:  # DELETED
                continue
            seq = entry.get("sequence_number")
            ref = df.get("referenced_data_file")
            out.append(
                ManifestEntry(
                    path=local(df["file_path"]),
                    content=df["content"],
                    file_format=df["file_format"].upper(),
                    spec_id=manifest["partition_spec_id"],
                    partition=dict(df["partition"] or {}),
                    record_count=df["record_count"],
                    data_seq=manifest["sequence_number"] if seq is None else seq,
                    first_row_id=first_row_id,
                    referenced=None if ref is None else local(ref),
                    content_offset=df.get("content_offset"),
                    content_size=df.get("content_size_in_bytes"),
                )
            )
    return tuple(out)


def data_files(rel: str, snapshot_id: int | None = None) -> dict[str, ManifestEntry]:
    return {e.path: e for e in live_entries(rel, snapshot_id) if e.content == 0}


def deleted_positions(rel: str) -> set[tuple[str, int]]:
    """(data file, position) of every row a position delete file or DV of the current snapshot deletes."""
    pm = table_path_map(rel)
    data = data_files(rel)
    out: set[tuple[str, int]] = set()
    for d in live_entries(rel):
        if d.content != 1:
            continue
        if d.file_format == "PUFFIN":
            assert d.referenced is not None and d.content_offset is not None and d.content_size is not None
            with open(d.path, "rb") as f:
                f.seek(d.content_offset)
                blob = f.read(d.content_size)
            # length (4) | magic (4) | portable 64-bit Roaring bitmap | CRC (4)
            pairs = [(d.referenced, int(p)) for p in BitMap64.deserialize(blob[8:-4])]
        else:
            table = pq.read_table(d.path, columns=["file_path", "pos"])
            paths = [normalize(pm.apply(p)) for p in table.column("file_path").to_pylist()]
            pairs = list(zip(paths, table.column("pos").to_pylist(), strict=True))
        out |= {(f, p) for f, p in pairs if f in data and data[f].data_seq <= d.data_seq}
    return out


@cache
def _file_rows(path: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = pq.read_table(path).to_pylist()
    return rows


def _rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(sorted(row.items())) for row in table.to_pylist())


# -- columns -------------------------------------------------------------------------------------------


def test_column_subset_in_requested_order() -> None:
    scan = load(WITH_DELETE).scan(columns=["category", "id"], backend="cpu")
    actual = scan.to_arrow()
    assert actual.column_names == ["category", "id"]
    assert actual.schema == scan.schema()
    expected = duckdb_rows(WITH_DELETE).select(["category", "id"])
    assert_same_rows(actual, expected, context="columns=[category, id]")


def test_nested_column_by_dotted_name() -> None:
    actual = load(NESTED).scan(columns=["point.y", "id"], backend="cpu").to_arrow()
    assert actual.column_names == ["point", "id"]
    assert [f.name for f in actual.schema.field("point").type] == ["y"]
    full = duckdb_rows(NESTED)
    point = full.column("point").combine_chunks()
    only_y = pa.StructArray.from_arrays([point.field("y")], names=["y"], mask=point.is_null())
    expected = pa.table({"point": only_y, "id": full.column("id")})
    assert_same_rows(actual, expected, context="columns=[point.y, id]")


def test_no_columns_keeps_the_row_count() -> None:
    actual = load(WITH_DELETE).scan(columns=[], backend="cpu").to_arrow()
    assert actual.num_columns == 0
    assert actual.num_rows == duckdb_rows(WITH_DELETE).num_rows


@pytest.mark.parametrize("rel", [WITH_DELETE, ORDERS, PG_DV, IMPALA_DV])
def test_file_and_pos_point_at_the_row_in_the_data_file(rel: str) -> None:
    """Every row is the row at ``_pos`` of ``_file`` as pyarrow reads it, and the (file, pos) pairs are
    exactly the positions of the live data files minus the deleted ones."""
    tbl = load(rel)
    names = [f.name for f in tbl.metadata.schema.fields]
    actual = tbl.scan(columns=["_file", *names, "_pos"], backend="cpu").to_arrow()
    assert actual.column_names == ["_file", *names, "_pos"]
    for row in actual.to_pylist():
        stored = _file_rows(row["_file"])[row["_pos"]]
        assert {n: stored[n] for n in names} == {n: row[n] for n in names}, row
    seen = list(zip(actual.column("_file").to_pylist(), actual.column("_pos").to_pylist(), strict=True))
    assert len(seen) == len(set(seen)), "a (file, pos) pair is returned twice"
    live = {(f, p) for f, e in data_files(rel).items() for p in range(e.record_count)}
    deleted = deleted_positions(rel)
    assert deleted, f"{rel}: the fixture has no deletes to check positions against"
    assert set(seen) == live - deleted
    assert_same_rows(actual.select(names), duckdb_rows(rel), context=f"{rel}: data columns vs DuckDB")


def test_multi_row_group_positions_continue_across_row_groups() -> None:
    tbl = load(ORDERS)
    actual = tbl.scan(columns=["_file", "_pos"], backend="cpu").to_arrow()
    path = actual.column("_file")[0].as_py()
    md = pq.read_metadata(path)
    assert md.num_row_groups > 1
    first_group = md.row_group(0).num_rows
    positions = pc.filter(actual.column("_pos"), pc.equal(actual.column("_file"), path)).to_pylist()
    assert max(positions) >= first_group, "no position from the second row group"


@pytest.mark.parametrize("rel", [TEMPORAL, WITH_DELETE])
def test_spec_id_and_partition_columns(rel: str) -> None:
    tbl = load(rel)
    actual = tbl.scan(columns=["id", "_spec_id", "_partition", "_file"], backend="cpu").to_arrow()
    md = metadata_json(rel)
    every_field = list(dict.fromkeys(f["name"] for s in md["partition-specs"] for f in s["fields"]))
    assert [f.name for f in actual.schema.field("_partition").type] == every_field
    files = data_files(rel)
    specs = set()
    for row in actual.to_pylist():
        entry = files[normalize(row["_file"])]
        assert row["_spec_id"] == entry.spec_id, row
        expected = {name: entry.partition.get(name) for name in every_field}
        assert row["_partition"] == expected, row  # other specs' fields are null
        specs.add(entry.spec_id)
    if rel == TEMPORAL:
        assert specs == {0, 1, 2, 3}, "the partition-evolved table should have a file per spec"


# -- row lineage -----------------------------------------------------------------------------------------


def _lineage_stored(path: str, name: str) -> list[int | None]:
    """The data file's own lineage column (by field id), or nulls when it does not store one."""
    field_id = {"_row_id": mc.ROW_ID.field_id, "_last_updated_sequence_number": 2147483539}[name]
    table = pq.read_table(path)
    for i, f in enumerate(table.schema):
        if (f.metadata or {}).get(b"PARQUET:field_id") == str(field_id).encode():
            values: list[int | None] = table.column(i).to_pylist()
            return values
    return [None] * table.num_rows


def _snapshots(rel: str) -> list[int]:
    return [int(s["snapshot-id"]) for s in metadata_json(rel)["snapshots"]]


@pytest.mark.parametrize("rel", [PG_LINEAGE, IMPALA_LINEAGE])
def test_row_lineage_columns(rel: str) -> None:
    tbl = load(rel)
    checked = 0
    for snapshot_id in _snapshots(rel):
        actual = tbl.scan(
            columns=["_row_id", "_last_updated_sequence_number", "_file", "_pos"],
            snapshot_id=snapshot_id,
            backend="cpu",
        ).to_arrow()
        files = data_files(rel, snapshot_id)
        row_ids = actual.column("_row_id").to_pylist()
        assert None not in row_ids
        assert len(set(row_ids)) == len(row_ids), f"{rel}@{snapshot_id}: duplicate row ids"
        for row in actual.to_pylist():
            entry = files[normalize(row["_file"])]
            assert entry.first_row_id is not None
            stored_id = _lineage_stored(row["_file"], "_row_id")[row["_pos"]]
            stored_seq = _lineage_stored(row["_file"], "_last_updated_sequence_number")[row["_pos"]]
            expected_id = entry.first_row_id + row["_pos"] if stored_id is None else stored_id
            expected_seq = entry.data_seq if stored_seq is None else stored_seq
            assert row["_row_id"] == expected_id, (snapshot_id, row, entry)
            assert row["_last_updated_sequence_number"] == expected_seq, (snapshot_id, row, entry)
            checked += 1
    assert checked


def test_row_lineage_stored_values_win_over_inheritance() -> None:
    """Impala's compacted file stores row ids and sequence numbers that differ from the inherited ones."""
    actual = load(IMPALA_LINEAGE).scan(columns=["i", "_row_id", "_last_updated_sequence_number"]).to_arrow()
    assert sorted(actual.to_pylist(), key=lambda r: r["i"]) == [
        {"i": 1, "_row_id": 0, "_last_updated_sequence_number": 1},
        {"i": 2, "_row_id": 1, "_last_updated_sequence_number": 2},
        {"i": 3, "_row_id": 2, "_last_updated_sequence_number": 3},
    ]


def test_row_lineage_is_null_without_first_row_id() -> None:
    """Spec: a data file with a null first_row_id (written before the upgrade to v3) reads both columns
    as null, whatever the file stores."""
    data = DataFile("/x.parquet", "PARQUET", 0, (), 3, 100, data_sequence_number=4, first_row_id=None)
    pos = np.arange(3, dtype=np.int64)
    stored = pa.array([7, None, 9], pa.int64())
    for field in mc.LINEAGE:
        for given in (None, stored):
            column = metadata_column(field, data, pos, stored=given)
            assert column.to_pylist() == [None, None, None], field.name
    with_id = DataFile("/x.parquet", "PARQUET", 0, (), 3, 100, data_sequence_number=4, first_row_id=10)
    assert metadata_column(mc.ROW_ID, with_id, pos, stored=stored).to_pylist() == [7, 11, 9]
    seq = metadata_column(mc.LAST_UPDATED_SEQUENCE_NUMBER, with_id, pos, stored=stored)
    assert seq.to_pylist() == [7, 4, 9]


# -- filters ---------------------------------------------------------------------------------------------

FILTERS: list[tuple[str, str, pc.Expression]] = [
    (WITH_DELETE, "category = 'qux'", pc.field("category") == "qux"),  # partition; the file with deletes
    (WITH_DELETE, "id in (1, 5, 399, 400, 401, 599)", pc.field("id").isin([1, 5, 399, 400, 401, 599])),
    (WITH_DELETE, "category like 'qu%'", pc.starts_with(pc.field("category"), "qu")),
    (WITH_DELETE, "id < 50 or category <> 'foo'", (pc.field("id") < 50) | (pc.field("category") != "foo")),
    (WITH_DELETE, "not (id between 100 and 450)", ~((pc.field("id") >= 100) & (pc.field("id") <= 450))),
    (ORDERS, "order_year = 2021", pc.field("order_year") == 2021),
    (
        ORDERS,
        "order_year >= 2020 and source_id in (1, 2)",
        (pc.field("order_year") >= 2020) & pc.field("source_id").isin([1, 2]),
    ),
    (ORDERS, "product_name like 'Gadget 1%'", pc.starts_with(pc.field("product_name"), "Gadget 1")),
    (
        ORDERS,
        "amount > 90.5 and order_id < 5000",
        (pc.field("amount") > 90.5) & (pc.field("order_id") < 5000),
    ),
    (NULLS, "value is null", pc.field("value").is_null()),
    (NULLS, "value is not null and id > 2", pc.field("value").is_valid() & (pc.field("id") > 2)),
    (EQ_NULLS, "i is null", pc.field("i").is_null()),
    (EQ_NULLS, "i in (1, 2, 3, 4)", pc.field("i").isin([1, 2, 3, 4])),
    (
        EQ_NULLS,
        "s like 'str%' and i is not null",
        pc.starts_with(pc.field("s"), "str") & pc.field("i").is_valid(),
    ),
    (PG_DV, "id in (4, 5, 6, 12, 13, 47)", pc.field("id").isin([4, 5, 6, 12, 13, 47])),
    (PG_DV, "payload like 'row-1%'", pc.starts_with(pc.field("payload"), "row-1")),
    (
        TEMPORAL,
        "ts >= '2023-06-21T00:00:00+00:00'",
        pc.field("ts") >= pa.scalar(1687305600000000, pa.timestamp("us", "UTC")),
    ),
]


@pytest.mark.parametrize(
    ("rel", "text", "expr"), FILTERS, ids=[f"{r.split('/')[-1]}: {t}" for r, t, _ in FILTERS]
)
def test_filter_equals_oracle_rows_filtered_in_pyarrow(rel: str, text: str, expr: pc.Expression) -> None:
    actual = load(rel).scan(filter=text, backend="cpu").to_arrow()
    expected = duckdb_rows(rel).filter(expr)
    assert 0 < expected.num_rows < duckdb_rows(rel).num_rows, f"{text}: not a selective filter here"
    assert_same_rows(actual, expected, context=f"{rel}: filter {text!r}")


def test_filter_with_columns_not_selected() -> None:
    """The filter's column need not be among the returned columns."""
    actual = load(WITH_DELETE).scan(filter="category = 'qux'", columns=["id"], backend="cpu").to_arrow()
    expected = duckdb_rows(WITH_DELETE).filter(pc.field("category") == "qux").select(["id"])
    assert_same_rows(actual, expected, context="filter on an unselected column")


def test_filter_on_a_scan_adds_to_its_filter() -> None:
    """TableScan.filter ands with the scan's filter (as Java's and PyIceberg's filter), never replaces it."""
    tbl = load(WITH_DELETE)
    both = tbl.scan(filter="category = 'qux'", backend="cpu").filter("id < 50").to_arrow()
    rows = duckdb_rows(WITH_DELETE)
    expected = rows.filter((pc.field("category") == "qux") & (pc.field("id") < 50))
    assert_same_rows(both, expected, context="two filters")
    with pytest.raises(UnsupportedFeature, match="limit=-1"):
        tbl.scan().with_limit(-1)


def test_columns_without_case_prefer_the_exact_name_and_refuse_ambiguity(tmp_path: Path) -> None:
    """As filters bind: an exact match wins; a name matching several columns only without case is an error."""
    import gpu_engine as ge

    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("ID", pa.int64())]))
    tbl.append(pa.table({"id": [1], "ID": [2]}))
    assert tbl.scan(columns=["ID"], case_sensitive=False).to_arrow().to_pylist() == [{"ID": 2}]
    assert tbl.scan(columns=["id"], case_sensitive=False).to_arrow().to_pylist() == [{"id": 1}]
    with pytest.raises(InvalidType, match="'Id' is ambiguous without case"):
        tbl.scan(columns=["Id"], case_sensitive=False).to_arrow()


def test_metadata_columns_and_snapshot_ids_as_a_scan_takes_them(tmp_path: Path) -> None:
    """Metadata columns resolve without case too (``_FILE``: ``_file``); a snapshot id that is not an
    integer is refused naming it (a string was "not found" beside itself in the list of ids)."""
    tbl = _id_table(tmp_path)
    got = tbl.scan(columns=["ID", "_FILE", "_Pos"], case_sensitive=False).to_arrow()
    assert got.column_names == ["id", "_file", "_pos"] and got["_pos"].to_pylist() == [0, 1, 2]
    with pytest.raises(InvalidType, match="'_FILE'"):
        tbl.scan(columns=["_FILE"]).to_arrow()
    head = tbl.metadata.current_snapshot_id
    for bad in (str(head), True):
        with pytest.raises(PlanningError, match=r"scan snapshot_id.*an integer"):
            tbl.scan(snapshot_id=bad).to_arrow()


def test_columns_naming_one_column_twice_without_case_are_refused(tmp_path: Path) -> None:
    """``['id', 'ID']`` without case selects the column ``id`` twice: refused as ``['id', 'id']`` is,
    not silently returned as one column."""
    tbl = _id_table(tmp_path)
    for columns, case_sensitive in ((["id", "id"], True), (["id", "ID"], False), (["ID", "id"], False)):
        with pytest.raises(InvalidType, match="name a column twice"):
            tbl.scan(columns=columns, case_sensitive=case_sensitive).to_arrow()


def _id_table(tmp_path: Path) -> Any:
    import gpu_engine as ge

    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([("id", pa.int64()), ("name", pa.string())]))
    tbl.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}))
    return tbl


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (5, r"scan columns=5: expected a list of names, not int"),
        ("id", r"scan columns='id': expected a list of names, not a string"),  # not 'i', 'd'
        ([5], r"scan columns=\[5\]: names must be strings, not 5"),
        (["id", None], r"names must be strings, not None"),
        ({"id": 1}, r"expected a list of names, not dict"),
        (b"id", r"expected a list of names, not bytes"),
    ],
)
def test_scan_columns_of_the_wrong_type_are_refused(tmp_path: Path, columns: Any, message: str) -> None:
    """``columns`` must be a list of strings: anything else is an InvalidType naming the argument (a string
    was read per character, an int raised a bare TypeError, ``[5]`` an AttributeError deep in planning)."""
    tbl = _id_table(tmp_path)
    with pytest.raises(InvalidType, match=message):
        tbl.scan(columns=columns).to_arrow()
    with pytest.raises(InvalidType, match=message):
        tbl.incremental_changelog_scan(columns=columns)


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("5", r"scan limit='5': expected an integer >= 0, not str"),
        (1.5, r"scan limit=1.5: expected an integer >= 0, not float"),
        (float("nan"), r"scan limit=nan: expected an integer >= 0, not float"),
        (True, r"scan limit=True: expected an integer >= 0, not a bool"),
        (-1, r"scan limit=-1: expected an integer >= 0"),
    ],
)
def test_scan_limits_of_the_wrong_type_are_refused(tmp_path: Path, limit: Any, message: str) -> None:
    """A limit is None or an integer >= 0, in ``scan`` and ``with_limit`` alike (``True`` was one row,
    ``nan`` every row, ``"5"`` a bare TypeError)."""
    tbl = _id_table(tmp_path)
    with pytest.raises(UnsupportedFeature, match=message):
        tbl.scan(limit=limit).to_arrow()
    with pytest.raises(UnsupportedFeature, match=message):
        tbl.scan().with_limit(limit)


def test_scan_limit_takes_numpy_integers(tmp_path: Path) -> None:
    """A numpy integer is an integer: the limit it gives is the plain int's."""
    tbl = _id_table(tmp_path)
    assert tbl.scan(limit=np.int64(2)).to_arrow().num_rows == 2
    assert tbl.scan().with_limit(np.int32(1)).limit == 1


def _shadowing_table(tmp_path: Path, mode: str = "merge-on-read") -> Any:
    """A v2 table with data columns called ``_pos`` and ``_file`` (the spec reserves the metadata
    columns' field ids, not their names), two files of three rows."""
    import gpu_engine as ge

    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    schema = pa.schema([("id", pa.int64()), ("_pos", pa.int64()), ("_file", pa.string())])
    tbl = cat.create_table("db.t", schema, properties={"format-version": "2", "write.delete.mode": mode})
    for start in (0, 3):
        ids = list(range(start, start + 3))
        tbl.append(
            pa.table({"id": ids, "_pos": [100 + i for i in ids], "_file": [f"f{i}" for i in ids]}, schema)
        )
    return tbl


def _data_rows(tbl: Any) -> list[dict[str, Any]]:
    return sorted(tbl.scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def test_a_table_column_named_like_a_metadata_column_is_the_tables(tmp_path: Path) -> None:
    """As in Spark, a table column shadows the metadata column of its name: selected, filtered and
    compacted it keeps the user's values (compaction wrote file positions and paths into them)."""
    tbl = _shadowing_table(tmp_path)
    expected = [{"id": i, "_pos": 100 + i, "_file": f"f{i}"} for i in range(6)]
    assert _data_rows(tbl) == expected
    got = tbl.scan(columns=["id", "_pos", "_file"], filter="_pos >= 104").to_arrow().to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == expected[4:]
    assert tbl.scan(columns=["_spec_id"]).to_arrow().column(0).to_pylist() == [0] * 6  # not shadowed
    tbl.compact(options={"rewrite-all": "true"})
    assert len(tbl.inspect.files().to_pylist()) == 1
    assert _data_rows(tbl) == expected


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_deletes_locate_rows_under_a_shadowed_metadata_name(tmp_path: Path, mode: str) -> None:
    """Deletes find rows by the metadata columns _file/_pos, also when table columns take those names."""
    tbl = _shadowing_table(tmp_path, mode)
    tbl.delete("id = 1")
    tbl.delete_rows(pa.table({"id": pa.array([4], pa.int64())}), on=["id"])
    assert [r["id"] for r in _data_rows(tbl)] == [0, 2, 3, 5]
    assert all(r["_pos"] == 100 + r["id"] and r["_file"] == f"f{r['id']}" for r in _data_rows(tbl))


def test_a_changelog_pairs_rows_under_a_shadowed_metadata_name(tmp_path: Path) -> None:
    tbl = _shadowing_table(tmp_path)
    before = tbl.metadata.current_snapshot().snapshot_id
    tbl.delete("id = 1")
    changes = tbl.incremental_changelog_scan(from_snapshot_id=before).to_arrow().to_pylist()
    assert [(c["id"], c["_pos"], c["_file"], c["_change_type"]) for c in changes] == [
        (1, 101, "f1", "DELETE")
    ]


# -- limit -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, 1, 99, 100, 101, 593, 594, 595, 10_000])
def test_limit_returns_a_sub_multiset_of_the_full_scan(limit: int) -> None:
    tbl = load(WITH_DELETE)
    full = tbl.scan(backend="cpu").to_arrow()
    assert full.num_rows == 594
    scan = tbl.scan(limit=limit, backend="cpu")
    progress = ScanProgress()
    limited = pa.Table.from_batches(list(scan.to_batches(progress=progress)), schema=scan.schema())
    assert limited.num_rows == min(limit, full.num_rows) == progress.rows  # rows of a cut piece count too
    assert bool(progress.files) == bool(limited.num_rows)
    assert limited.schema == scan.schema()
    assert not _rows(limited) - _rows(full)


@pytest.mark.parametrize("limit", [0, 7, 1500, 10_000])
def test_limit_with_filter_and_batches(limit: int) -> None:
    tbl = load(ORDERS)
    full = tbl.scan(filter="order_year >= 2020", backend="cpu").to_arrow()
    scan = tbl.scan(filter="order_year >= 2020", limit=limit, backend="cpu")
    batches = list(scan.to_batches())
    assert sum(b.num_rows for b in batches) == min(limit, full.num_rows)
    limited = pa.Table.from_batches(batches, schema=scan.schema())
    assert not _rows(limited) - _rows(full)


# -- the ways to get rows out ----------------------------------------------------------------------------


def _open_files_under(root: Path) -> list[str]:
    fd_dir = Path("/proc/self/fd")
    if not fd_dir.is_dir():
        return []
    prefix = str(root.resolve())
    out = []
    for fd in fd_dir.iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(prefix):
            out.append(target)
    return out


def test_to_batches_streams_the_scan_schema() -> None:
    scan = load(ORDERS).scan(columns=["order_id", "_pos", "product_name"], backend="cpu")
    batches = scan.to_batches()
    assert isinstance(batches, Iterator)
    collected = list(batches)
    assert len(collected) > 1
    schema = scan.schema()
    assert all(b.schema == schema for b in collected)
    assert pa.Table.from_batches(collected, schema=schema).equals(scan.to_arrow())


def test_abandoned_batch_stream_closes_its_files() -> None:
    batches = load(ORDERS).scan(backend="cpu").to_batches()
    assert next(batches).num_rows > 0
    assert isinstance(batches, types.GeneratorType)
    batches.close()
    assert not _open_files_under(FIXTURES / ORDERS)


def test_to_pandas_equals_arrow_to_pandas() -> None:
    pd = optional("pandas")
    if pd is None:
        pytest.skip("pandas is not installed")
    scan = load(WITH_DELETE).scan(backend="cpu")
    pd.testing.assert_frame_equal(scan.to_pandas(), scan.to_arrow().to_pandas())


def test_to_cudf_without_cudf() -> None:
    if optional("cudf") is not None:
        pytest.skip("cudf is installed here")
    with pytest.raises(BackendUnavailable, match=r"'cudf'"):
        load(WITH_DELETE).scan().to_cudf()


def test_last_run_records_the_backend_and_why() -> None:
    tbl = load(WITH_DELETE)
    scan = tbl.scan(backend="cpu")
    assert not scan.runs
    scan.to_arrow()
    assert len(scan.runs) == 1
    run = scan.last_run
    assert run is scan.runs[0]
    assert (run.backend.name, run.backend.reason) == ("cpu", "backend='cpu' requested")
    assert len(run.plan.tasks) == 6
    auto = tbl.scan(backend="auto")
    list(auto.to_batches())
    assert auto.last_run is not None
    probe = probe_cuda()
    assert auto.last_run.backend.name == ("cuda" if probe.available else "cpu")
    assert auto.last_run.backend.reason == f"auto: {probe.detail}"


def test_tasks_of_one_scan_read_their_own_residual_columns(tmp_path: Path) -> None:
    """Residuals differ by partition (here on ``v`` for one region, ``w`` for the other), and each task
    reads its own residual's columns, none of them returned."""
    schema = pa.schema([("id", pa.int64()), ("region", pa.string()), ("v", pa.int64()), ("w", pa.int64())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, partition_spec=["region"])
    n = 40
    rows = pa.table(
        {
            "id": range(n),
            "region": ["eu", "us"] * (n // 2),
            "v": [i % 5 for i in range(n)],
            "w": [i % 7 for i in range(n)],
        },
        schema=schema,
    )
    tbl.append(rows)
    where = "(region = 'eu' and v > 2) or (region = 'us' and w > 2)"
    scan = tbl.scan(filter=where, columns=["id"], backend="cpu")
    residuals = {str(t.residual) for t in scan.plan().tasks}
    assert len(residuals) == 2, residuals
    want = [r["id"] for r in rows.to_pylist() if (r["v"] > 2 if r["region"] == "eu" else r["w"] > 2)]
    assert sorted(scan.to_arrow()["id"].to_pylist()) == want


@pytest.mark.parametrize("delete_mode", ["merge-on-read", "copy-on-write"])
def test_truncate_partitions_near_the_minimum_filter_and_delete_exactly(
    tmp_path: Path, delete_mode: str
) -> None:
    """truncate[10] of the least ints is stored wrapped around (as Iceberg Java stores it): filters near
    the minimum and over the whole range neither prune those rows nor keep others as if they matched."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("x", pa.int32()), pa.field("y", pa.int64())])
    properties = {"format-version": "2", "write.delete.mode": delete_mode}
    properties["write.metadata.metrics.default"] = "none"  # no file metrics to hide a wrong projection
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, partition_spec=["truncate(10, x)", "truncate(10, y)"], properties=properties
    )
    low32, low64 = -(2**31), -(2**63)
    xs, ys = [low32, low32 + 1, -7, 1, 20], [low64, low64 + 2, -7, 1, 20]
    tbl.append(
        pa.table(
            {"id": pa.array(range(5), pa.int64()), "x": pa.array(xs, pa.int32()), "y": ys}, schema=schema
        )
    )

    def ids(text: str) -> list[int]:
        return sorted(tbl.scan(filter=text, columns=["id"]).to_arrow()["id"].to_pylist())

    assert ids("x < 0") == ids("y < 0") == [0, 1, 2]
    assert ids(f"x > {low32}") == ids(f"y > {low64}") == [1, 2, 3, 4]
    assert ids(f"x >= {low32 + 1}") == ids(f"y >= {low64 + 1}") == [1, 2, 3, 4]
    assert ids(f"x < {low32 + 1}") == ids(f"y <= {low64 + 1}") == [0]
    assert ids(f"x = {low32}") == [0] and ids(f"y in ({low64}, 20)") == [0, 4]
    assert ids(f"x > {2**31 - 20}") == ids(f"y > {2**63 - 20}") == []
    assert tbl.delete(f"x <= {low32}").deleted_rows == 1
    assert ids("true") == [1, 2, 3, 4]
    assert tbl.delete(f"y < {low64 + 1}").deleted_rows == 0
    assert tbl.delete("x < 0").deleted_rows == 2
    assert ids("true") == [3, 4]


def test_a_file_without_field_ids_keeps_its_column_after_a_rename(tmp_path: Path) -> None:
    """A table without a name mapping reads files without field ids by its columns' names; a rename keeps
    the old name reaching the column (the mapping update_schema would have kept), not nulls."""
    from gpu_engine.commit.update import SnapshotUpdate
    from gpu_engine.iceberg.content_file import ContentFile

    data = pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"]})
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", data.schema, properties={"format-version": "2"})
    path = tmp_path / "written-by-hive.parquet"
    pq.write_table(data, path)  # no PARQUET:field_id
    added = ContentFile(
        path=f"file://{path}", file_format="PARQUET", spec_id=0, partition=(), record_count=2,
        file_size_in_bytes=path.stat().st_size,
    )  # fmt: skip
    tbl.commit(SnapshotUpdate.append([added]))
    tbl = tbl.refresh()
    with tbl.update_schema() as update:
        update.rename_column("name", "label")
    tbl = tbl.refresh()
    assert tbl.properties.get("schema.name-mapping.default") is None
    assert tbl.scan().to_arrow().column("label").to_pylist() == ["a", "b"]
    assert tbl.scan(filter="label = 'b'").to_arrow().column("id").to_pylist() == [2]

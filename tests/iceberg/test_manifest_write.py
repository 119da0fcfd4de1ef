"""Manifest writer (v1-v3): every field read back by our reader (inheritance applied) and by PyIceberg 0.12,
the Avro schema's field ids and types as fastavro parses them, the key-value metadata, partition summaries
against hand computations, validation errors, and real fixture manifests rewritten entry for entry."""

from __future__ import annotations

import datetime as dt
import json
import struct
import uuid
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import fastavro
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.manifest import read_manifest_list as pyi_read_manifest_list

from gpu_engine.errors import ManifestError
from gpu_engine.iceberg import serde
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.content_file import DATA, EQUALITY_DELETES, POSITION_DELETES, ContentFile
from gpu_engine.iceberg.manifest_list import FieldSummary, ManifestFile, read_manifest_list
from gpu_engine.iceberg.manifest_write import (
    UNASSIGNED_SEQ,
    ManifestEntry,
    WrittenManifestList,
    write_manifest,
    write_manifest_list,
)
from gpu_engine.iceberg.manifests import ADDED, DELETED, EXISTING, read_manifest
from gpu_engine.iceberg.metadata import parse_metadata
from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.fileio import LocalFileIO

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
IO = LocalFileIO()
SNAPSHOT, LIST_SEQ, FIRST_ROW_ID = 77, 9, 1000
SCHEMA = Schema(
    (
        it.NestedField(1, "id", it.LONG, required=True),
        it.NestedField(2, "name", it.STRING),
        it.NestedField(3, "ts", it.TIMESTAMPTZ),
        it.NestedField(4, "amount", it.decimal(9, 2)),
    ),
    schema_id=3,
)
_FIELDS = {
    "identity": PartitionField((2,), 1000, "name", "identity"),
    "bucket": PartitionField((1,), 1001, "id_bucket", "bucket[16]"),
    "day": PartitionField((3,), 1002, "ts_day", "day"),
    "truncate": PartitionField((2,), 1003, "name-trunc", "truncate[3]"),  # '-' is not valid in Avro names
    "decimal": PartitionField((4,), 1004, "amount", "identity"),
}
SPECS = {name: PartitionSpec(i + 1, (f,)) for i, (name, f) in enumerate(_FIELDS.items())}
SPECS["unpartitioned"] = PartitionSpec(0, ())
SPECS["multi"] = PartitionSpec(7, tuple(_FIELDS.values()))
# per partition result type: values cycled over the entries (None: a null partition value)
VALUES: dict[str, list[Any]] = {
    "string": ["kiwi", "apple", "zü", None, "apple"],
    "int": [7, 0, 15, None, 3],
    "date": [19000, 18000, 20000, None, -5],
    "decimal(9, 2)": [Decimal("1.50"), Decimal("-2.25"), Decimal("10.00"), None, Decimal("0.01")],
}
KINDS = {1: ["data"], 2: ["data", "pos", "eq"], 3: ["data", "pos", "eq", "dv"]}
CASES = [pytest.param(v, s, k, id=f"v{v}-{s}-{k}") for v in (1, 2, 3) for k in KINDS[v] for s in SPECS]
MAPS = (
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
)


def wm(path: Path, v: int, es: list[ManifestEntry], **kw: Any) -> ManifestFile:
    """write_manifest with this module's defaults (identity spec, SCHEMA, data, SNAPSHOT)."""
    args: dict[str, Any] = {
        "spec": SPECS["identity"],
        "schema": SCHEMA,
        "content": "data",
        "snapshot_id": SNAPSHOT,
    }
    return write_manifest(IO, str(path), format_version=v, entries=es, **(args | kw))


def wl(path: Path, v: int, ms: list[ManifestFile], parent: int | None = None) -> WrittenManifestList:
    seq, first = (None if v == 1 else LIST_SEQ), (FIRST_ROW_ID if v == 3 else None)
    return write_manifest_list(
        IO, str(path), format_version=v, snapshot_id=SNAPSHOT, parent_snapshot_id=parent, sequence_number=seq,
        manifests=ms, first_row_id=first,
    )  # fmt: skip


def content_file(v: int, spec: PartitionSpec, kind: str, i: int) -> ContentFile:
    dv = kind == "dv"
    return ContentFile(
        path=f"s3://bucket/t/{kind}/{i}.{'puffin' if dv else 'parquet'}",
        file_format="PUFFIN" if dv else "parquet",
        spec_id=spec.spec_id,
        partition=tuple(VALUES[str(f.type)][i] for f in spec.partition_type(SCHEMA).fields),
        record_count=10 * i + 3,
        file_size_in_bytes=1000 + i,
        content={"data": DATA, "eq": EQUALITY_DELETES}.get(kind, POSITION_DELETES),
        column_sizes={} if dv else {2: 20 + i, 1: 10 + i},  # kept in this order
        value_counts={1: 10 * i + 3},
        null_value_counts={1: 0, 2: i},
        nan_value_counts={5: i} if i % 2 else {},
        lower_bounds={1: serde.to_bytes(it.LONG, -i), 2: b"a"},
        upper_bounds={1: serde.to_bytes(it.LONG, i * 100)},
        key_metadata=b"\x00key" if i == 1 else None,
        split_offsets=(4, 1000 + i) if kind == "data" else None,
        equality_ids=((1,) if i % 2 else (1, 2)) if kind == "eq" else None,
        sort_order_id=0 if kind in ("data", "eq") else None,
        first_row_id=500 if (v == 3 and kind == "data" and i == 2) else None,
        referenced_data_file=f"s3://bucket/t/data/{i}.parquet" if dv or (kind == "pos" and i % 2) else None,
        content_offset=4 + 40 * i if dv else None,
        content_size_in_bytes=40 if dv else None,
    )


def entries(v: int, spec: PartitionSpec, kind: str) -> list[ManifestEntry]:
    """ADDED (inheriting), ADDED with an explicit older data sequence number, EXISTING, DELETED (inheriting
    its snapshot id), ADDED. v3 adds position deletes only as DVs: EXISTING entries there."""
    fs = [content_file(v, spec, kind, i) for i in range(5)]
    if v == 3 and kind == "pos":
        return [ManifestEntry(EXISTING, 11, 2, 3, f) for f in fs]
    return [
        ManifestEntry(ADDED, None, None, None, fs[0]),
        ManifestEntry(ADDED, None, 4, None, fs[1]),
        ManifestEntry(EXISTING, 11, 3, 5, fs[2]),
        ManifestEntry(DELETED, None, 1, 2, fs[3]),
        ManifestEntry(ADDED, None, None, None, fs[4]),
    ]


def expected_rows(v: int, es: list[ManifestEntry], manifest: ManifestFile) -> list[dict[str, Any]]:
    """What a reader must return, inheritance applied by hand (spec "Sequence Number Inheritance",
    "First Row ID Inheritance")."""
    out = []
    next_id = manifest.first_row_id
    for e in es:
        f = e.file
        inherits = e.status == ADDED or manifest.sequence_number == 0
        seqs = [
            0 if v == 1 else (manifest.sequence_number if value is None and inherits else value)
            for value in (e.sequence_number, e.file_sequence_number)
        ]

        first = f.first_row_id
        if f.content == DATA and first is None and e.status != DELETED and next_id is not None:
            first, next_id = next_id, next_id + f.record_count
        same = ("content", "record_count", "file_size_in_bytes", "key_metadata", "sort_order_id",
                "referenced_data_file", "content_offset", "content_size_in_bytes", "spec_id")  # fmt: skip
        row = {name: getattr(f, name) for name in same}
        out.append(
            row
            | {name: list(getattr(f, name).items()) or None for name in MAPS}
            | {
                "status": e.status,
                "snapshot_id": manifest.added_snapshot_id if e.snapshot_id is None else e.snapshot_id,
                "sequence_number": seqs[0],
                "file_sequence_number": seqs[1],
                "file_path": f.path,
                "file_format": f.file_format.upper(),
                "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
                "equality_ids": None if f.equality_ids is None else list(f.equality_ids),
                "first_row_id": first,
                "partition": list(f.partition),
            }
        )
    return out


def read_avro(path: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str], str]:
    """fastavro's own reading of a file: writer schema, records, metadata, codec."""
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        records = [cast(dict[str, Any], r) for r in reader]
        return cast(dict[str, Any], reader.writer_schema), records, dict(reader.metadata), str(reader.codec)


def our_rows(manifest: ManifestFile) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = read_manifest(manifest).drop_columns(["manifest_path"]).to_pylist()
    for r in rows:
        r["partition"] = list(r["partition"].values())
    return rows


def write_case(tmp_path: Path, v: int, spec_name: str, kind: str) -> tuple[ManifestFile, list[ManifestEntry]]:
    es = entries(v, SPECS[spec_name], kind)
    content = "data" if kind == "data" else "deletes"
    return wm(tmp_path / f"m-v{v}.avro", v, es, spec=SPECS[spec_name], content=content), es


@pytest.mark.parametrize(("v", "spec_name", "kind"), CASES)
def test_our_reader_reads_back_every_field(tmp_path: Path, v: int, spec_name: str, kind: str) -> None:
    m, es = write_case(tmp_path, v, spec_name, kind)
    assert m.manifest_length == Path(m.manifest_path).stat().st_size
    records = read_avro(m.manifest_path)[1]  # as stored: nulls left for inheritance (v2+)
    raw = [(r["snapshot_id"], r.get("sequence_number"), r.get("file_sequence_number")) for r in records]
    if v == 1:
        assert raw == [(SNAPSHOT if e.snapshot_id is None else e.snapshot_id, None, None) for e in es]
    else:
        assert raw == [(e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in es]
    assert (m.partition_spec_id, m.content, m.added_snapshot_id) == (
        SPECS[spec_name].spec_id,
        kind != "data",
        SNAPSHOT,
    )
    by_status = [[e for e in es if e.status == s] for s in (ADDED, EXISTING, DELETED)]
    assert (m.added_files_count, m.existing_files_count, m.deleted_files_count) == tuple(map(len, by_status))
    assert (m.added_rows_count, m.existing_rows_count, m.deleted_rows_count) == tuple(
        sum(e.file.record_count for e in group) for group in by_status
    )
    live_seqs = [e.sequence_number for e in es if e.status != DELETED and e.sequence_number is not None]
    if v == 1:
        assert (m.sequence_number, m.min_sequence_number) == (0, 0)
    else:
        assert (m.sequence_number, m.min_sequence_number) == (
            UNASSIGNED_SEQ,
            min(live_seqs, default=UNASSIGNED_SEQ),
        )
    written = wl(tmp_path / "list.avro", v, [m])
    (listed,) = read_manifest_list(written.path)
    assert (listed,) == written.manifests
    assert listed.sequence_number == (0 if v == 1 else LIST_SEQ)
    assert listed.first_row_id == (FIRST_ROW_ID if v == 3 and kind == "data" else None)
    assert our_rows(listed) == expected_rows(v, es, listed)


@pytest.mark.parametrize(("v", "spec_name", "kind"), CASES)
def test_pyiceberg_reads_the_same(tmp_path: Path, v: int, spec_name: str, kind: str) -> None:
    m, es = write_case(tmp_path, v, spec_name, kind)
    written = wl(tmp_path / "list.avro", v, [m], parent=5)
    (listed,) = written.manifests
    pio = PyArrowFileIO()
    (pm,) = list(pyi_read_manifest_list(pio.new_input(written.path)))
    attrs = (
        "manifest_path",
        "manifest_length",
        "partition_spec_id",
        "sequence_number",
        "min_sequence_number",
    )
    assert [getattr(pm, a) for a in attrs] + [int(pm.content)] == [getattr(listed, a) for a in attrs] + [
        m.content
    ]
    got = pm.fetch_manifest_entry(pio, discard_deleted=False)
    entry_attrs = ("snapshot_id", "sequence_number", "file_sequence_number")
    file_attrs = ("file_path", "record_count", "file_size_in_bytes", "key_metadata", "split_offsets",
                  "equality_ids", "sort_order_id")  # fmt: skip
    expected = expected_rows(v, es, listed)
    assert len(got) == len(expected)
    for e, want in zip(got, expected, strict=True):
        d = e.data_file
        assert [int(e.status), int(d.content), d.file_format.value] == [
            want[a] for a in ("status", "content", "file_format")
        ]
        assert [getattr(e, a) for a in entry_attrs] == [want[a] for a in entry_attrs]
        assert [getattr(d, a) for a in file_attrs] == [want[a] for a in file_attrs]
        assert [x.bytes if isinstance(x, uuid.UUID) else x for x in cast(Any, d.partition)] == want[
            "partition"
        ]
        for name in MAPS:
            value = getattr(d, name)
            assert (None if value is None else dict(value)) == (dict(want[name]) if want[name] else None), (
                name
            )


# -- the Avro schema and metadata, as fastavro parses them ------------------------------------------------

# transcribed from the spec's tables ("Manifest Entry Fields", "DATA FILE FIELDS"): id -> (name, required)
# fmt: off
R, OPT = True, False
ENTRY = {1: {0: ("status", R), 1: ("snapshot_id", R), 2: ("data_file", R)},
         2: {0: ("status", R), 1: ("snapshot_id", OPT), 3: ("sequence_number", OPT),
             4: ("file_sequence_number", OPT), 2: ("data_file", R)}}
ENTRY[3] = ENTRY[2]
_COMMON = {100: ("file_path", R), 101: ("file_format", R), 102: ("partition", R), 103: ("record_count", R),
           104: ("file_size_in_bytes", R), 108: ("column_sizes", OPT), 109: ("value_counts", OPT),
           110: ("null_value_counts", OPT), 137: ("nan_value_counts", OPT), 125: ("lower_bounds", OPT),
           128: ("upper_bounds", OPT), 131: ("key_metadata", OPT), 132: ("split_offsets", OPT),
           140: ("sort_order_id", OPT)}
DATA_FILE = {1: {**_COMMON, 105: ("block_size_in_bytes", R)},
             2: {134: ("content", R), **_COMMON, 135: ("equality_ids", OPT),
                 143: ("referenced_data_file", OPT)}}
DATA_FILE[3] = {**DATA_FILE[2], 142: ("first_row_id", OPT), 144: ("content_offset", OPT),
                145: ("content_size_in_bytes", OPT)}
MAP_IDS = {108: (117, 118, "long"), 109: (119, 120, "long"), 110: (121, 122, "long"), 137: (138, 139, "long"),
           125: (126, 127, "bytes"), 128: (129, 130, "bytes")}
LIST_IDS = {132: (133, "long"), 135: (136, "int")}
PRIMITIVE = {0: "int", 1: "long", 3: "long", 4: "long", 134: "int", 100: "string", 101: "string", 103: "long",
             104: "long", 105: "long", 131: "bytes", 140: "int", 142: "long", 143: "string", 144: "long",
             145: "long"}
# fmt: on


def _fields(record: dict[str, Any]) -> dict[int, tuple[str, bool, Any]]:
    """Field id -> (name, required, non-null Avro type); optional fields are [null, T] with default null."""
    out = {}
    for f in record["fields"]:
        t, optional = f["type"], isinstance(f["type"], list)
        if optional:
            assert t[0] == "null" and len(t) == 2 and f["default"] is None, f
            t = t[1]
        out[f["field-id"]] = (f["name"], not optional, t)
    return out


@pytest.mark.parametrize("v", [1, 2, 3])
def test_avro_schema_carries_every_field_id(tmp_path: Path, v: int) -> None:
    m, _ = write_case(tmp_path, v, "multi", "data")
    schema, _, meta, codec = read_avro(m.manifest_path)
    assert codec == "deflate"
    entry = _fields(schema)
    assert [(fid, n, r) for fid, (n, r, _) in entry.items()] == [(fid, *nr) for fid, nr in ENTRY[v].items()]
    data_file = _fields(entry[2][2])
    assert {fid: (n, r) for fid, (n, r, _) in data_file.items()} == DATA_FILE[v]
    for fid, (_, _, t) in {**entry, **data_file}.items():
        if fid in PRIMITIVE:
            assert t == PRIMITIVE[fid], fid
        elif fid in MAP_IDS:
            key_id, value_id, value = MAP_IDS[fid]
            assert (t["type"], t["logicalType"]) == ("array", "map")
            kv = [(f["name"], f["field-id"], f["type"]) for f in t["items"]["fields"]]
            assert kv == [("key", key_id, "int"), ("value", value_id, value)]
        elif fid in LIST_IDS:
            assert (t["type"], t["element-id"], t["items"]) == ("array", *LIST_IDS[fid])
    partition = data_file[102][2]
    assert partition["type"] == "record"
    decimal = {
        "type": "fixed",
        "name": "r102_f1004",
        "size": 4,
        "logicalType": "decimal",
        "precision": 9,
        "scale": 2,
    }
    assert [(f["field-id"], f["name"], f["type"][1]) for f in partition["fields"]] == [
        (1000, "name", "string"),
        (1001, "id_bucket", "int"),
        (1002, "ts_day", {"type": "int", "logicalType": "date"}),
        (1003, "name_x2Dtrunc", "string"),
        (1004, "amount", decimal),
    ]
    assert json.loads(meta["schema"])["fields"][0] == {
        "id": 1,
        "name": "id",
        "required": True,
        "type": "long",
    }
    spec_json = [{"name": f.name, "transform": f.transform, "source-id": f.source_id, "field-id": f.field_id}
                 for f in _FIELDS.values()]  # fmt: skip
    assert json.loads(meta["partition-spec"]) == spec_json
    assert [meta["schema-id"], meta["partition-spec-id"], meta["format-version"]] == ["3", "7", str(v)]
    assert meta.get("content") == (None if v == 1 else "data")


def _decimal(p: int, s: int, size: int) -> dict[str, Any]:
    return {"type": "fixed", "size": size, "logicalType": "decimal", "precision": p, "scale": s}


def _ts(logical: str, utc: bool) -> dict[str, Any]:
    return {"type": "long", "logicalType": logical, "adjust-to-utc": utc}


# Avro types of partition values (Appendix A) for each primitive a transform can produce
TYPED = [
    (it.BOOLEAN, True, "boolean"), (it.INT, -4, "int"), (it.LONG, 2**40, "long"), (it.FLOAT, 1.5, "float"),
    (it.DOUBLE, -0.25, "double"), (it.DATE, 19000, {"type": "int", "logicalType": "date"}),
    (it.TIME, 3_600_000_000, {"type": "long", "logicalType": "time-micros"}),
    (it.TIMESTAMP, 10**15, _ts("timestamp-micros", False)),
    (it.TIMESTAMPTZ, -(10**15), _ts("timestamp-micros", True)),
    (it.TIMESTAMP_NS, 10**18, _ts("timestamp-nanos", False)),
    (it.TIMESTAMPTZ_NS, 5, _ts("timestamp-nanos", True)),
    (it.STRING, "é", "string"), (it.BINARY, b"\x00\xff", "bytes"),
    (it.UUID, uuid.UUID(int=2**127 + 5), {"type": "fixed", "size": 16, "logicalType": "uuid"}),
    (it.fixed(3), b"abc", {"type": "fixed", "size": 3}),
    (it.decimal(1, 0), Decimal("-7"), _decimal(1, 0, 1)),
    (it.decimal(10, 3), Decimal("-1234567.891"), _decimal(10, 3, 5)),
    (it.decimal(18, 0), Decimal(10**18 - 1), _decimal(18, 0, 8)),
    (it.decimal(19, 0), Decimal(-(10**19) + 1), _decimal(19, 0, 9)),
    (it.decimal(38, 10), Decimal("1" * 28 + "." + "9" * 10), _decimal(38, 10, 16)),
]  # fmt: skip


def test_every_partition_type_round_trips(tmp_path: Path) -> None:
    n = len(TYPED)
    schema = Schema(tuple(it.NestedField(i + 1, f"c{i}", t) for i, (t, _, _) in enumerate(TYPED)))
    spec = PartitionSpec(0, tuple(PartitionField((i + 1,), 1000 + i, f"p{i}", "identity") for i in range(n)))
    value = tuple(v for _, v, _ in TYPED)
    es = [
        ManifestEntry.added(ContentFile(f"/d/{i}", "PARQUET", 0, value if i else (None,) * n, 1, 1))
        for i in (0, 1)
    ]
    m = wm(tmp_path / "m.avro", 3, es, spec=spec, schema=schema)
    partition = _fields(_fields(read_avro(m.manifest_path)[0])[2][2])[102][2]
    for f, (_, _, avro) in zip(partition["fields"], TYPED, strict=True):
        t = f["type"][1]
        assert ({k: x for k, x in t.items() if k != "name"} if isinstance(t, dict) else t) == avro
    rows = our_rows(replace(m, sequence_number=1, min_sequence_number=1, first_row_id=0))
    assert rows[0]["partition"] == [None] * n
    assert rows[1]["partition"] == [x.bytes if isinstance(x, uuid.UUID) else x for x in value]
    bounds = [serde.to_bytes(t, x) for t, x, _ in TYPED]
    assert m.partitions == tuple(FieldSummary(True, False, b, b) for b in bounds)


def test_nan_partition_values_are_written_canonical(tmp_path: Path) -> None:
    """Avro writes floats as Java's doubleToLongBits / floatToIntBits: one NaN bit pattern."""
    schema = Schema((it.NestedField(1, "d", it.DOUBLE), it.NestedField(2, "f", it.FLOAT)))
    spec = PartitionSpec(
        0, (PartitionField((1,), 1000, "d", "identity"), PartitionField((2,), 1001, "f", "identity"))
    )
    negative_nan = struct.unpack("<d", bytes.fromhex("000000000000f8ff"))[0]
    es = [ManifestEntry.added(ContentFile("/d/0", "PARQUET", 0, (negative_nan, negative_nan), 1, 1))]
    m = wm(tmp_path / "m.avro", 2, es, spec=spec, schema=schema)
    (record,) = read_avro(m.manifest_path)[1]
    d, f = record["data_file"]["partition"].values()
    assert struct.pack("<d", d).hex() == "000000000000f87f" and struct.pack("<f", f).hex() == "0000c07f"


def test_a_partition_value_its_type_cannot_hold_names_the_file_and_field(tmp_path: Path) -> None:
    """truncate(10) of decimal(9, 2) -9999999.99 is -10000000.00: ten digits (Java refuses it too)."""
    schema = Schema((it.NestedField(1, "d", it.decimal(9, 2)),))
    spec = PartitionSpec(0, (PartitionField((1,), 1000, "d_trunc", "truncate[10]"),))
    es = [ManifestEntry.added(ContentFile("/d/0.parquet", "PARQUET", 0, (Decimal("-10000000.00"),), 1, 1))]
    with pytest.raises(
        ManifestError, match=r"'/d/0.parquet': partition field 'd_trunc': .*needs more than 9 digits"
    ):
        wm(tmp_path / "m.avro", 2, es, spec=spec, schema=schema)


# -- partition summaries ----------------------------------------------------------------------------------


def test_partition_summaries_by_hand(tmp_path: Path) -> None:
    types = (it.STRING, it.DOUBLE, it.INT, it.UUID, it.decimal(5, 1))
    schema = Schema(tuple(it.NestedField(i + 1, f"c{i}", t) for i, t in enumerate(types)))
    spec = PartitionSpec(0, tuple(PartitionField((i + 1,), 1000 + i, f"p{i}", "identity") for i in range(5)))
    rows = [
        ("b", 0.0, None, uuid.UUID(int=1), Decimal("-1.5")),
        ("a", float("nan"), None, uuid.UUID(int=2**127), Decimal("2.0")),
        ("ab", -0.0, None, uuid.UUID(int=7), None),
        ("é", 3.5, None, uuid.UUID(int=2**126), Decimal("-10.0")),  # é (U+00E9) after ASCII, as in UTF-8
    ]
    statuses = [ADDED, EXISTING, DELETED, ADDED]
    es = [ManifestEntry(s, 1, 1 + i, 1, ContentFile(f"/f{i}", "PARQUET", 0, r, 1, 1))
          for i, (r, s) in enumerate(zip(rows, statuses, strict=True))]  # fmt: skip
    m = wm(tmp_path / "m.avro", 2, es, spec=spec, schema=schema)
    assert m.partitions == (
        FieldSummary(False, False, b"a", "é".encode()),  # DELETED entries count too, as in Iceberg Java
        FieldSummary(False, True, struct.pack("<d", -0.0), struct.pack("<d", 3.5)),  # -0.0 < +0.0; NaN noted
        FieldSummary(True, False, None, None),  # only nulls: no bounds
        FieldSummary(False, False, uuid.UUID(int=1).bytes, uuid.UUID(int=2**127).bytes),  # unsigned bytes
        FieldSummary(True, False, b"\x9c", b"\x14"),  # -10.0 (unscaled -100) .. 2.0 (20), minimal bytes
    )
    assert m.min_sequence_number == 1  # the live entries' lowest data sequence number
    only_zero = [replace(es[0], file=replace(es[0].file, partition=("b", 0.0, None, None, None)))]
    m2 = wm(tmp_path / "m2.avro", 2, only_zero, spec=spec, schema=schema)
    assert m2.partitions is not None and m2.partitions[1].lower_bound == struct.pack("<d", 0.0)
    assert m2.partitions[3] == FieldSummary(True, False, None, None)
    assert wm(tmp_path / "m3.avro", 2, [], spec=PartitionSpec(0, ())).partitions == ()


# -- rejected input ---------------------------------------------------------------------------------------


def _added(**kw: Any) -> list[ManifestEntry]:
    base: dict[str, Any] = {"path": "/d/f.parquet", "file_format": "PARQUET", "spec_id": 1,
                            "partition": ("a",), "record_count": 1, "file_size_in_bytes": 1}  # fmt: skip
    return [ManifestEntry.added(ContentFile(**(base | kw)))]


def _with(status: int, snapshot_id: int | None, seq: int | None, file_seq: int | None) -> list[ManifestEntry]:
    return [ManifestEntry(status, snapshot_id, seq, file_seq, _added()[0].file)]


_DV = {"content": POSITION_DELETES, "file_format": "PUFFIN", "referenced_data_file": "/x"}
BAD = [
    (1, "deletes", _added(content=POSITION_DELETES), "no delete manifests"),
    (2, "data", _added(content=POSITION_DELETES), "cannot go in a data manifest"),
    (2, "deletes", _added(), "cannot go in a deletes manifest"),
    (2, "data", _added(spec_id=4), "partition spec 4"),
    (2, "data", _added(partition=()), "partition tuple has 0 values"),
    (2, "data", _added(partition=(5,)), "partition field 'name'"),
    (2, "data", _with(7, 1, 1, 1), "invalid status 7"),
    (2, "data", _with(EXISTING, None, 1, 1), "EXISTING entry must carry the id"),
    (2, "data", _with(EXISTING, 3, None, 1), "must carry its data and file sequence"),
    (2, "data", _with(DELETED, 3, 1, None), "must carry its data and file sequence"),
    (2, "deletes", _added(content=EQUALITY_DELETES), "require equality_ids"),
    (2, "data", _added(first_row_id=3), "cannot record first_row_id"),
    (1, "data", _added(referenced_data_file="/x"), "cannot record referenced_data_file"),
    (2, "deletes", _added(**_DV, content_offset=4, content_size_in_bytes=5), "cannot record content_offset"),
    (3, "deletes", _added(**_DV), "deletion vector"),
    (3, "deletes", _added(content=POSITION_DELETES), "only as deletion vectors"),
    (3, "deletes", _added(content=EQUALITY_DELETES, equality_ids=(1,), first_row_id=0), "no first_row_id"),
    (3, "data", _added(content_offset=3), "go together"),
    (4, "data", _added(), "format version 4"),
]


@pytest.mark.parametrize(("v", "content", "es", "match"), BAD, ids=[b[3] for b in BAD])
def test_rejects_what_the_version_cannot_hold(
    tmp_path: Path, v: int, content: str, es: list[ManifestEntry], match: str
) -> None:
    with pytest.raises(ManifestError, match=match):
        wm(tmp_path / "m.avro", v, es, content=content)
    assert not (tmp_path / "m.avro").exists()


def test_never_overwrites_and_codec(tmp_path: Path) -> None:
    (tmp_path / "m.avro").write_bytes(b"old")
    with pytest.raises(FileExistsError):
        wm(tmp_path / "m.avro", 2, _added())
    assert (tmp_path / "m.avro").read_bytes() == b"old"
    assert read_avro(wm(tmp_path / "m2.avro", 2, _added(), codec="null").manifest_path)[3] == "null"
    with pytest.raises(ManifestError, match="codec"):
        wm(tmp_path / "m3.avro", 2, _added(), codec="nope")


# -- real manifests, rewritten ----------------------------------------------------------------------------

ROUND_TRIP = [
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_alltypes_part",  # v1, 8 identity types, no Avro metadata
    # v1, hour + identity
    "impala/iceberg_test/hadoop_catalog/hadoop_catalog_test/functional_parquet/hadoop_catalog_test",
    "dremio-oss/iceberg/v2/products_with_eq_deletes",  # v2 position + equality deletes, EXISTING/DELETED
    "duckdb-iceberg/data/persistent/partition_decimal_hugeint",  # v2 decimal identity
    "pg_lake/sample_tables_v3/public/v3_partitioned_multi",  # v3 identity, day, bucket
    "pg_lake/sample_tables_v3/public/v3_partitioned_temporal",  # v3 year -> month -> day -> hour specs
    "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors",  # v3 DVs, row lineage
]
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _physical(x: Any) -> Any:
    """fastavro's logical-type conversions undone: Iceberg physical values."""
    if isinstance(x, dt.datetime):
        delta = (x if x.tzinfo else x.replace(tzinfo=dt.UTC)) - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(x, dt.date):
        return (x - _EPOCH.date()).days
    if isinstance(x, dt.time):
        return ((x.hour * 60 + x.minute) * 60 + x.second) * 1_000_000 + x.microsecond
    return x


def _entry(raw: dict[str, Any], spec: PartitionSpec, partition_names: dict[int, str]) -> ManifestEntry:
    """A manifest entry as fastavro decodes it, rebuilt as the writer's input."""
    d = raw["data_file"]
    keep = ("key_metadata", "sort_order_id", "first_row_id", "referenced_data_file", "content_offset",
            "content_size_in_bytes")  # fmt: skip
    extra: dict[str, Any] = {name: {e["key"]: e["value"] for e in d.get(name) or []} for name in MAPS}
    extra |= {name: d.get(name) for name in keep}
    f = ContentFile(
        path=d["file_path"],
        file_format=d["file_format"],
        spec_id=spec.spec_id,
        partition=tuple(_physical(d["partition"][partition_names[pf.field_id]]) for pf in spec.fields),
        record_count=d["record_count"],
        file_size_in_bytes=d["file_size_in_bytes"],
        content=d.get("content", 0),
        split_offsets=None if d.get("split_offsets") is None else tuple(d["split_offsets"]),
        equality_ids=None if d.get("equality_ids") is None else tuple(d["equality_ids"]),
        **extra,
    )
    return ManifestEntry(
        raw["status"], raw["snapshot_id"], raw.get("sequence_number"), raw.get("file_sequence_number"), f
    )


def _comparable(manifest: ManifestFile) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = read_manifest(manifest).drop_columns(["manifest_path"]).to_pylist()
    for r in rows:  # an empty metrics map is written as null
        r |= {name: r[name] or None for name in MAPS}
    return rows


@pytest.mark.parametrize("table", ROUND_TRIP)
def test_fixture_manifests_rewritten(tmp_path: Path, table: str) -> None:
    root = FIXTURES / table / "metadata"
    metas = [parse_metadata(p.read_bytes(), source=str(p)) for p in root.glob("*.metadata.json")]
    md = max(metas, key=lambda m: m.last_updated_ms)
    counts = ("added_files_count", "existing_files_count", "deleted_files_count", "added_rows_count",
              "existing_rows_count", "deleted_rows_count")  # fmt: skip
    checked = 0
    for list_path in sorted(root.glob("snap-*.avro")):
        for listed in read_manifest_list(str(list_path)):
            original = replace(listed, manifest_path=str(root / Path(listed.manifest_path).name))
            spec = md.spec_by_id(listed.partition_spec_id or 0)
            schema, records, _, _ = read_avro(original.manifest_path)
            partition = _fields(_fields(_fields(schema)[2][2])[102][2])
            es = [_entry(r, spec, {fid: name for fid, (name, _, _) in partition.items()}) for r in records]
            content = "deletes" if listed.content else "data"
            ours = wm(tmp_path / f"{checked}.avro", md.format_version, es, spec=spec, schema=md.schema,
                      content=content, snapshot_id=listed.added_snapshot_id)  # fmt: skip
            rewritten = replace(
                original, manifest_path=ours.manifest_path, manifest_length=ours.manifest_length
            )
            assert _comparable(rewritten) == _comparable(original)
            assert [getattr(ours, c) for c in counts if getattr(listed, c) is not None] == [
                getattr(listed, c) for c in counts if getattr(listed, c) is not None
            ]
            if md.format_version >= 2:
                assert ours.min_sequence_number in (UNASSIGNED_SEQ, listed.min_sequence_number)
            if listed.partitions is not None:  # the writer's summaries equal Java's
                assert ours.partitions is not None and len(ours.partitions) == len(listed.partitions)
                for a, b in zip(ours.partitions, listed.partitions, strict=True):
                    assert (a.contains_null, a.lower_bound, a.upper_bound) == (
                        b.contains_null,
                        b.lower_bound,
                        b.upper_bound,
                    )
                    assert b.contains_nan is None or a.contains_nan == b.contains_nan
            checked += 1
    assert checked > 0

"""Field ids set in the footer of a Parquet file written without them (as cuDF's Python writer writes):
pyarrow then reads each column's ``PARQUET:field_id``, our reader resolves the columns by id, and the
data pages are the same bytes."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gpu_engine.errors import DataFileError, SchemaMismatch
from gpu_engine.iceberg import types as it
from gpu_engine.iceberg.schema import Schema
from gpu_engine.io.arrow_schema import to_arrow_schema
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.parquet_footer_schema import conform_file, with_iceberg_schema
from gpu_engine.io.parquet_read import ParquetSource

F = it.NestedField
SCHEMA = Schema((
    F(1, "id", it.LONG, required=True),
    F(2, "name", it.STRING),
    F(3, "point", it.StructType((F(4, "x", it.DOUBLE), F(5, "y", it.DOUBLE)))),
    F(6, "tags", it.ListType(7, it.StructType((F(8, "k", it.STRING), F(9, "n", it.INT))))),
    F(10, "attrs", it.MapType(11, it.STRING, 12, it.ListType(13, it.LONG))),
    F(14, "price", it.decimal(9, 2)),
))  # fmt: skip
ROWS = {
    "id": [1, 2],
    "name": ["a", None],
    "point": [{"x": 1.0, "y": 2.0}, None],
    "tags": [[{"k": "t", "n": 1}], []],
    "attrs": [[("a", [1, 2])], None],
    "price": [None, None],
}


def _without_ids(**options: object) -> bytes:
    """The table written by pyarrow with no field ids anywhere (names only, as cuDF writes)."""
    schema = pa.schema([f.remove_metadata() for f in to_arrow_schema(SCHEMA)])
    plain = pa.schema([_strip(f) for f in schema])
    out = io.BytesIO()
    pq.write_table(pa.table(ROWS, schema=plain), out, **options)
    return out.getvalue()


def _strip(f: pa.Field) -> pa.Field:
    t = f.type
    if pa.types.is_struct(t):
        t = pa.struct([_strip(t.field(i)) for i in range(t.num_fields)])
    elif pa.types.is_list(t):
        t = pa.list_(_strip(t.value_field))
    elif pa.types.is_map(t):
        t = pa.map_(_strip(t.key_field), _strip(t.item_field))
    return pa.field(f.name, t, nullable=f.nullable)


def _ids(t: pa.DataType | pa.Field) -> list[object]:
    """Every field id of a field and its descendants, depth-first (None where missing)."""
    if isinstance(t, pa.Field):
        own = (t.metadata or {}).get(b"PARQUET:field_id")
        return [None if own is None else int(own), *_ids(t.type)]
    children = []
    if pa.types.is_struct(t):
        children = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_map(t):
        children = [t.key_field, t.item_field]
    elif pa.types.is_list(t):
        children = [t.value_field]
    return [i for c in children for i in _ids(c)]


@pytest.mark.parametrize("store_schema", [True, False], ids=["arrow-schema", "no-arrow-schema"])
def test_every_column_gets_its_field_id(tmp_path: Path, store_schema: bool) -> None:
    data = _without_ids(store_schema=store_schema)
    assert all(i is None for f in pq.ParquetFile(io.BytesIO(data)).schema_arrow for i in _ids(f))
    patched = with_iceberg_schema(data, SCHEMA)
    got = pq.ParquetFile(io.BytesIO(patched))
    expected = to_arrow_schema(SCHEMA)
    assert [_ids(f) for f in got.schema_arrow] == [_ids(f) for f in expected]
    assert _ids(got.schema_arrow.field("tags")) == [6, 7, 8, 9]
    assert got.read().to_pylist() == pq.read_table(io.BytesIO(data)).to_pylist()
    body = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    assert patched[:body] == data[:body]  # pages untouched
    path = tmp_path / "f.parquet"
    path.write_bytes(patched)
    renamed = Schema((F(1, "key", it.LONG, required=True), F(5, "why", it.DOUBLE)))
    with ParquetSource.open(LocalFileIO(), str(path)) as src:  # resolved by id, not by name
        rows = pa.Table.from_batches([b.batch for b in src.batches(renamed)]).to_pylist()
    assert rows == [{"key": 1, "why": None}, {"key": 2, "why": None}]


def test_already_set_ids_are_replaced() -> None:
    once = with_iceberg_schema(_without_ids(), SCHEMA)
    moved = Schema(tuple(F(f.field_id + 100, f.name, f.type, required=f.required) for f in SCHEMA.fields))
    twice = with_iceberg_schema(once, moved)
    ids = [_ids(f)[0] for f in pq.ParquetFile(io.BytesIO(twice)).schema_arrow]
    assert ids == [101, 102, 103, 106, 110, 114]


def test_a_column_the_schema_lacks_is_named() -> None:
    short = Schema(tuple(f for f in SCHEMA.fields if f.name != "point"))
    with pytest.raises(SchemaMismatch, match=r"^f\.parquet: column 'point' is not in the table schema$"):
        with_iceberg_schema(_without_ids(), short, path="f.parquet")
    inner = Schema(
        (*SCHEMA.fields[:2], F(3, "point", it.StructType((F(4, "x", it.DOUBLE),))), *SCHEMA.fields[3:])
    )
    with pytest.raises(SchemaMismatch, match=r"column 'point\.y' is not in the table schema"):
        with_iceberg_schema(_without_ids(), inner)
    flat = Schema((*SCHEMA.fields[:2], F(3, "point", it.DOUBLE), *SCHEMA.fields[3:]))
    with pytest.raises(SchemaMismatch, match=r"column 'point' is a group, the table's field is double"):
        with_iceberg_schema(_without_ids(), flat)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"PAR1", "not a Parquet file"),
        (b"PAR1" + b"\x00" * 8 + b"\xff\x00\x00\x00PAR1", "footer length 255 runs past the start"),
        (b"PAR1" + b"\x19\x1c" + b"\x02\x00\x00\x00PAR1", "unreadable Parquet footer"),
    ],
)
def test_broken_files_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(DataFileError, match=message):
        with_iceberg_schema(data, SCHEMA, path="bad.parquet")


TIMES = Schema((
    F(1, "ts", it.TIMESTAMP),
    F(2, "tstz", it.TIMESTAMPTZ),
    F(3, "day", it.DATE),
    F(4, "ns", it.TIMESTAMP_NS),
))  # fmt: skip


def _times(day_type: pa.DataType | None = None) -> bytes:
    """Timestamps with the wrong UTC flag each (as cuDF writes one flag for all) and days as plain ints."""
    table = pa.table({
        "ts": pa.array([1_000_000, None], pa.timestamp("us", "UTC")),
        "tstz": pa.array([2_000_000, 3], pa.timestamp("us")),
        "day": pa.array([19_000, -1], day_type or pa.int32()),
        "ns": pa.array([5, 6], pa.timestamp("ns", "UTC")),
    })  # fmt: skip
    out = io.BytesIO()
    pq.write_table(table, out, coerce_timestamps=None, store_schema=False)
    return out.getvalue()


def test_timestamps_get_the_tables_utc_flag_and_dates_their_annotation() -> None:
    data = _times()
    before = pq.ParquetFile(io.BytesIO(data)).schema_arrow
    assert [f.type for f in before] == [
        pa.timestamp("us", "UTC"), pa.timestamp("us"), pa.int32(), pa.timestamp("ns", "UTC"),
    ]  # fmt: skip
    got = pq.ParquetFile(io.BytesIO(with_iceberg_schema(data, TIMES)))
    assert [f.type for f in got.schema_arrow] == [
        pa.timestamp("us"), pa.timestamp("us", "UTC"), pa.date32(), pa.timestamp("ns"),
    ]  # fmt: skip
    column = {got.schema.column(i).name: got.schema.column(i) for i in range(4)}
    assert column["day"].converted_type == "DATE"
    assert column["ts"].converted_type == "NONE"  # TIMESTAMP_MICROS means UTC: dropped
    rows = got.read().to_pylist()
    assert [r["day"] for r in rows] == [dt.date(2022, 1, 8), dt.date(1969, 12, 31)]
    assert rows[0]["tstz"] == dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC)
    assert rows[0]["ts"] == dt.datetime(1970, 1, 1, 0, 0, 1)
    stats = got.metadata.row_group(0).column(2).statistics
    assert (stats.min, stats.max) == (dt.date(1969, 12, 31), dt.date(2022, 1, 8))


def test_a_column_stored_unlike_its_type_is_named() -> None:
    with pytest.raises(SchemaMismatch, match=r"^t\.parquet: column 'day' is not stored as INT32"):
        with_iceberg_schema(_times(pa.int64()), TIMES, path="t.parquet")
    swapped = Schema((F(1, "ts", it.TIMESTAMP), F(2, "tstz", it.TIMESTAMPTZ), F(3, "day", it.TIMESTAMP),
                      F(4, "ns", it.TIMESTAMP_NS)))  # fmt: skip
    with pytest.raises(SchemaMismatch, match=r"column 'day' is not a timestamp, the table's is timestamp"):
        with_iceberg_schema(_times(), swapped)


def test_a_file_is_conformed_in_place(tmp_path: Path) -> None:
    data = _times()
    path = tmp_path / "t.parquet"
    path.write_bytes(data + b"")
    conform_file(str(path), TIMES)
    assert path.read_bytes() == with_iceberg_schema(data, TIMES)
    path.write_bytes(b"PAR1" + b"\x00" * 8 + b"\xff\x00\x00\x00PAR1")
    with pytest.raises(DataFileError, match=r"t\.parquet: footer length 255 runs past the start"):
        conform_file(str(path), TIMES)
    assert path.read_bytes() == b"PAR1" + b"\x00" * 8 + b"\xff\x00\x00\x00PAR1"  # untouched on failure

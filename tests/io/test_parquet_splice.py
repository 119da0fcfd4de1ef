"""Splicing independently encoded row groups into one Parquet file: byte-identical to pyarrow's own
multi-row-group file, read back equal by pyarrow (page CRCs verified) and DuckDB, and refusing parts it
cannot splice."""

from __future__ import annotations

import io
import itertools
import tracemalloc
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.io.parquet_splice import (
    SpliceError,
    SpliceFile,
    column_ranges,
    encode_columns,
    encode_row_group,
    join_columns,
    parse_part,
    schema_footer,
)

POINT = pa.struct([("x", pa.int16()), ("y", pa.string())])
OPTIONS: dict[str, Any] = {"version": "2.6", "compression": "zstd", "write_page_checksum": True}


def rich_table(n: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "name": pa.array([None if i % 11 == 0 else f"name-{i % 97}" for i in range(n)]),
            "price": pa.array([Decimal(i) / 100 for i in range(n)], pa.decimal128(12, 2)),
            "tags": pa.array([[i, i + 1] if i % 3 else None for i in range(n)], pa.list_(pa.int32())),
            "attrs": pa.array([[("k", float(i))] for i in range(n)], pa.map_(pa.string(), pa.float64())),
            "point": pa.array([{"x": i % 30_000, "y": None} for i in range(n)], POINT),
            "flag": pa.array([i % 2 == 0 for i in range(n)]),
        }
    )


def spliced(table: pa.Table, cuts: list[int], options: dict[str, Any] = OPTIONS) -> bytes:
    out = io.BytesIO()
    f = SpliceFile(out)
    bounds = [0, *cuts, table.num_rows]
    for lo, hi in itertools.pairwise(bounds):
        written = f.append(encode_row_group(table.slice(lo, hi - lo), table.schema, options))
        assert written > 0
    f.close()
    assert f.tell() == len(out.getvalue())
    return out.getvalue()


def sequential(table: pa.Table, cuts: list[int], options: dict[str, Any] = OPTIONS) -> bytes:
    out = io.BytesIO()
    bounds = [0, *cuts, table.num_rows]
    with pq.ParquetWriter(out, table.schema, **options) as w:
        for lo, hi in itertools.pairwise(bounds):
            w.write_table(table.slice(lo, hi - lo), row_group_size=max(hi - lo, 1))
    return out.getvalue()


@pytest.mark.parametrize(
    "options",
    [
        OPTIONS,
        {"compression": "snappy"},
        {"compression": "none", "use_dictionary": False, "data_page_size": 1024},
        {"compression": "gzip", "compression_level": 9, "store_decimal_as_integer": True},
    ],
    ids=["zstd-crc", "snappy", "plain-small-pages", "gzip"],
)
def test_spliced_file_is_byte_identical_to_pyarrows_own(options: dict[str, Any]):
    table = rich_table(20_000)
    cuts = [1, 7_000, 7_001, 15_000]
    assert spliced(table, cuts, options) == sequential(table, cuts, options)


def column_ranged(
    table: pa.Table, cuts: list[int], ranges: list[list[str]], options: dict[str, Any] = OPTIONS
) -> bytes:
    """``table``'s row groups (cut at ``cuts``), each encoded as the column ranges ``ranges`` joined."""
    out = io.BytesIO()
    f = SpliceFile(out)
    footer = schema_footer(table.schema, options)
    for lo, hi in itertools.pairwise([0, *cuts, table.num_rows]):
        rows = table.slice(lo, hi - lo)
        f.append(
            join_columns([encode_columns(rows, table.schema, options, names) for names in ranges], footer)
        )
    f.close()
    return out.getvalue()


@pytest.mark.parametrize(
    "options",
    [OPTIONS, {"compression": "snappy", "use_dictionary": ["name", "tags.list.element"]}],
    ids=["zstd-crc", "some-dictionaries"],
)
@pytest.mark.parametrize("parts", [2, 3, 7])
def test_row_groups_joined_from_column_ranges_are_byte_identical(options: dict[str, Any], parts: int):
    """Column ranges encoded apart and joined: the bytes pyarrow writes for whole row groups (the column
    chunks follow each other in schema order, the totals are the sums)."""
    table = rich_table(12_000)
    ranges = column_ranges(table, parts)
    assert len(ranges) == parts and [n for r in ranges for n in r] == table.column_names
    assert column_ranged(table, [5_000], ranges, options) == sequential(table, [5_000], options)


def test_a_joined_row_group_with_bloom_filters_reads_back_and_probes(tmp_path: Path):
    """Bloom filters lie after their range's column chunks: read back, and probed by DuckDB."""
    table = rich_table(3_000)
    options = {**OPTIONS, "bloom_filter_options": {"id": {"ndv": 1000, "fpp": 0.01}, "point.y": True}}
    path = tmp_path / "joined.parquet"
    path.write_bytes(
        column_ranged(table, [1_000], [["id", "name"], ["price", "tags", "attrs", "point", "flag"]], options)
    )
    pf = pq.ParquetFile(path, page_checksum_verification=True)
    assert pf.read().equals(table)
    assert pf.metadata.row_group(0).column(0).bloom_filter_length > 0
    assert duckdb.sql(f"select count(*) from '{path}'").fetchone() == (3_000,)
    probe = (
        f"select bloom_filter_excludes from parquet_bloom_probe('{path}', 'id', 1500) order by row_group_id"
    )
    assert [r[0] for r in duckdb.sql(probe).fetchall()] == [True, False]


def test_column_ranges_that_do_not_make_the_schema_are_refused():
    table = rich_table(10)
    footer = schema_footer(table.schema, OPTIONS)
    parts = [encode_columns(table, table.schema, OPTIONS, names) for names in (["id"], ["name"])]
    with pytest.raises(SpliceError, match="2 column chunks joined for a schema of 9 columns"):
        join_columns(parts, footer)
    other = encode_columns(table.slice(0, 5), table.schema, OPTIONS, ["name"])
    with pytest.raises(SpliceError, match="different row counts"):
        join_columns([parts[0], other], footer)
    two_groups = parse_part([sequential(table.select(["id"]), [5], OPTIONS)])
    with pytest.raises(SpliceError, match="2 row groups"):
        join_columns([two_groups, parts[1]], footer)


@given(st.lists(st.integers(0, 1_000), min_size=1, max_size=12), st.integers(1, 15))
def test_column_ranges_cover_every_column_in_order(sizes: list[int], parts: int):
    table = pa.table({f"c{i}": pa.array([b"x" * size], pa.binary()) for i, size in enumerate(sizes)})
    ranges = column_ranges(table, parts)
    assert [n for r in ranges for n in r] == table.column_names
    assert all(ranges) and len(ranges) == min(parts, len(sizes))


def test_spliced_file_reads_back_equal(tmp_path: Path):
    table = rich_table(50_000)
    path = tmp_path / "s.parquet"
    path.write_bytes(spliced(table, [10_000, 20_000, 49_999]))
    pf = pq.ParquetFile(path, page_checksum_verification=True)
    md = pf.metadata
    assert md.num_rows == 50_000 and md.num_row_groups == 4
    assert [md.row_group(i).num_rows for i in range(4)] == [10_000, 10_000, 29_999, 1]
    assert pf.read().equals(table)
    for i in range(4):  # each group on its own: its offsets point at its own pages
        lo = [0, 10_000, 20_000, 49_999][i]
        assert pf.read_row_group(i).equals(table.slice(lo, md.row_group(i).num_rows))
        stats = md.row_group(i).column(0).statistics
        assert (stats.min, stats.max) == (lo, lo + md.row_group(i).num_rows - 1)
    duckdb = pytest.importorskip("duckdb")
    got = duckdb.sql(f"SELECT count(*), sum(id), count(tags), count(name) FROM '{path}'").fetchone()
    assert got == (50_000, sum(range(50_000)), sum(1 for i in range(50_000) if i % 3), 50_000 - 4546)


def test_an_open_file_holds_its_row_groups_in_their_encoded_size():
    """A compaction into many partitions keeps a file open per partition, each with thousands of small row
    groups: held as trees of objects they took ~20 KB each (2 million rows into 2000 buckets: 400 MB)."""
    table = rich_table(3)
    part = encode_row_group(table, table.schema, OPTIONS)

    class Discard:
        def write(self, data: bytes | memoryview, /) -> int:
            return len(data)

    f = SpliceFile(Discard())
    f.append(part)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(300):
            f.append(part)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    footer = sum(len(c) for c in part.chunks) - part.body_end  # the part's footer: its row group and schema
    assert held / 300 < footer, (held / 300, footer)
    f.close()


def test_empty_row_group_and_parse_part_of_a_file():
    table = rich_table(10)
    data = spliced(table.slice(0, 0), [])
    assert pq.read_metadata(pa.BufferReader(data)).num_rows == 0
    part = parse_part([sequential(table, [4])])
    assert part.num_rows == 10 and len(part.row_groups) == 2


def test_parts_with_page_indexes_are_refused():
    table = rich_table(100)
    with pytest.raises(SpliceError, match="page indexes"):
        encode_row_group(table, table.schema, {"write_page_index": True})


def test_bloom_filters_move_with_their_part(tmp_path: Path):
    """A bloom filter lies in its part's body: each one's bytes are found at its shifted offset, and DuckDB
    (an independent reader) probes them per row group."""
    table = rich_table(300)
    options = {**OPTIONS, "bloom_filter_options": {"id": {"ndv": 100, "fpp": 0.01}, "name": True}}
    path = tmp_path / "bloom.parquet"
    path.write_bytes(spliced(table, [100, 200], options))
    md = pq.read_metadata(path)
    data = path.read_bytes()
    for i, lo in enumerate((0, 100, 200)):
        part = sequential(table.slice(lo, 100), [], options)
        for name in ("id", "name"):
            j = table.schema.get_field_index(name)
            ours, theirs = (
                md.row_group(i).column(j),
                pq.read_metadata(pa.BufferReader(part)).row_group(0).column(j),
            )
            assert ours.bloom_filter_length == theirs.bloom_filter_length > 0
            at, was = ours.bloom_filter_offset, theirs.bloom_filter_offset
            assert data[at : at + ours.bloom_filter_length] == part[was : was + theirs.bloom_filter_length]
    for value, expected in ((150, [True, False, True]), (10_000, [True, True, True])):
        probe = f"select bloom_filter_excludes from parquet_bloom_probe('{path}', 'id', {value})"
        probe += " order by row_group_id"
        assert [r[0] for r in duckdb.sql(probe).fetchall()] == expected


@pytest.mark.parametrize(
    "data, message",
    [
        (b"PAR1", "magic missing"),
        (b"XXXX" + b"\x00" * 8 + b"PAR1", "magic missing"),
        (b"PAR1" + b"\x00" * 4 + b"\xff\x00\x00\x00PAR1", "beyond the file"),
        (b"PAR1" + b"\x15\x02\x00\x00" + b"\x04\x00\x00\x00PAR1", "footer of 3 bytes"),
    ],
)
def test_not_parquet_is_refused(data: bytes, message: str):
    with pytest.raises(SpliceError, match=message):
        parse_part([data[:5], data[5:]])


def test_closing_without_parts_is_refused():
    with pytest.raises(SpliceError, match="no part"):
        SpliceFile(io.BytesIO()).close()

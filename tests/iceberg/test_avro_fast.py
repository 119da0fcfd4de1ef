"""The columnar Avro decoder (avro_fast) against the fastavro path: every fixture manifest, every codec,
generated manifests (hypothesis), filters and column selection, schema fallback, and corrupt input."""

from __future__ import annotations

import bz2
import json
import logging
import lzma
import os
import random
import re
import subprocess
import sys
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import cramjam
import fastavro
import pyarrow as pa
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.errors import ManifestError
from gpu_engine.iceberg import avro_fast, avro_vm
from gpu_engine.iceberg import manifest_list as ml
from gpu_engine.iceberg.avro_program import UnsupportedSchema, compile_program
from gpu_engine.iceberg.manifest_list import ManifestFile, open_local, read_manifest_list
from gpu_engine.iceberg.manifests import OPTIONAL_COLUMNS, read_manifest
from tests.iceberg.test_manifests import FixtureTable, _fixture_tables, _manifests, _template


@pytest.fixture(scope="module")
def tables() -> list[FixtureTable]:
    out = _fixture_tables()
    for table, snap in ((t, snap) for t in out for snap in t.snapshots):
        if os.path.exists(path := table.path_map.apply(snap["manifest-list"])):
            table.lists[path] = read_manifest_list(path, path_map=table.path_map)
    return out


def assert_same(fast: pa.Table, slow: pa.Table) -> None:
    """Equal tables, schemas (field metadata included) and schema metadata but for the decoder tag."""
    assert fast.schema.metadata[b"decoder"] == b"fast"
    assert slow.schema.metadata[b"decoder"].startswith(b"fastavro")
    assert fast.schema.remove_metadata().equals(slow.schema.remove_metadata(), check_metadata=True)
    meta = [{k: v for k, v in t.schema.metadata.items() if k != b"decoder"} for t in (fast, slow)]
    assert meta[0] == meta[1]
    assert fast.equals(slow)


def both(m: ManifestFile, **options: Any) -> pa.Table:
    fast = read_manifest(m, decoder="fast", **options)
    assert_same(fast, read_manifest(m, decoder="fastavro", **options))
    assert read_manifest(m, **options).schema.metadata[b"decoder"] == b"fast"  # auto
    return fast


PICK: dict[str, Any] = {"stats_columns": {1, 2, 3}, "columns": ("lower_bounds", "value_counts")}


def test_every_fixture_manifest(tables: list[FixtureTable]) -> None:
    """Equal tables for all 255 fixture manifests, whole and with stats filtered and columns picked."""
    found = [(t, m) for t in tables for m in _manifests(t) if os.path.exists(m.manifest_path)]
    for t, m in found:
        full = both(m, path_map=t.path_map)
        picked = both(m, path_map=t.path_map, **PICK)
        for name in ("upper_bounds", "column_sizes", "split_offsets", "key_metadata"):
            assert picked[name].null_count == len(picked)
        lower = full["lower_bounds"].to_pylist()
        assert picked["lower_bounds"].to_pylist() == [
            v and [e for e in v if e[0] in (1, 2, 3)] for v in lower
        ]
        rest = [c for c in full.column_names if c not in OPTIONAL_COLUMNS]
        assert picked.select(rest).equals(full.select(rest))
    assert len(found) == 255


# -- codecs ------------------------------------------------------------------------------------------------


def recode(src: bytes, codec: str, transform: Callable[[bytes], bytes]) -> bytes:
    """The container ``src`` with every block's bytes passed through ``transform`` and ``codec`` declared."""
    meta, end = ml._parse_header(src)
    sync, pos = src[end : end + 16], end + 16
    out = [ml._encode_header({**meta, "avro.codec": codec.encode()}), sync]
    while pos < len(src):
        count, pos = ml._read_long(src, pos)
        size, pos = ml._read_long(src, pos)
        block = transform(src[pos : pos + size])
        pos += size + 16
        out += [ml._write_long(count), ml._write_long(len(block)), block, sync]
    return b"".join(out)


def _deflate(b: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return c.compress(b) + c.flush()


ZSTD = zstandard.ZstdCompressor()
COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "null": lambda b: b,
    "deflate": _deflate,
    "snappy": lambda b: bytes(cramjam.snappy.compress_raw(b)) + zlib.crc32(b).to_bytes(4, "big"),
    "zstandard": ZSTD.compress,
    "zstandard, 2 frames": lambda b: ZSTD.compress(b[: len(b) // 2]) + ZSTD.compress(b[len(b) // 2 :]),
    "bzip2": bz2.compress,
    "xz": lzma.compress,
}


@pytest.fixture(scope="module")
def plain(tables: list[FixtureTable], tmp_path_factory: pytest.TempPathFactory) -> tuple[ManifestFile, bytes]:
    """300 entries shaped like a v3 fixture's, null codec, many small blocks; the list counts them all."""
    schema, meta, base = _template(tables)
    records = [_vary(base, i) for i in range(300)]
    path = tmp_path_factory.mktemp("plain") / "plain.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, schema, records, metadata=meta, codec="null", sync_interval=400)
    m = ManifestFile(str(path), path.stat().st_size, 0, sequence_number=3, added_snapshot_id=9,
                     added_files_count=300, existing_files_count=0, deleted_files_count=0)  # fmt: skip
    return m, path.read_bytes()


def _vary(base: dict[str, Any], i: int) -> dict[str, Any]:
    df = dict(base["data_file"], file_path=f"/w/t/data/{i}-ü.parquet", record_count=i + 1)
    df["lower_bounds"] = [{"key": k, "value": bytes([i % 256]) * (k % 5)} for k in range(i % 7)]
    df["split_offsets"] = None if i % 3 == 0 else list(range(i % 4))
    return dict(base, status=i % 3, snapshot_id=None if i % 2 else i, data_file=df)


@pytest.mark.parametrize("codec", sorted(COMPRESSORS))
def test_every_codec(plain: tuple[ManifestFile, bytes], codec: str, tmp_path: Path) -> None:
    """Blocks recompressed here (fastavro cannot write zstandard without backports.zstd): the same table."""
    m, data = plain
    name = codec.split(",")[0]
    path = tmp_path / f"{name}.avro"
    path.write_bytes(recode(data, name, COMPRESSORS[codec]))
    got = read_manifest(replace(m, manifest_path=str(path)), decoder="fast")
    expected = read_manifest(m, decoder="fastavro")
    assert got.drop_columns(["manifest_path"]).equals(expected.drop_columns(["manifest_path"]))
    assert avro_fast.read_container(str(path), open_local).codec == name


@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "bzip2", "xz", "zstandard"])
def test_codecs_written_by_fastavro(tables: list[FixtureTable], codec: str, tmp_path: Path) -> None:
    schema, meta, base = _template(tables)
    path = tmp_path / f"{codec}.avro"
    with open(path, "wb") as f:
        fastavro.writer(f, schema, [_vary(base, i) for i in range(50)], metadata=meta, codec=codec)
    both(ManifestFile(str(path), path.stat().st_size, 0, sequence_number=1, added_snapshot_id=2))


def test_missing_codec_package_and_unknown_codec(
    plain: tuple[ManifestFile, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    m, data = plain
    monkeypatch.setitem(sys.modules, "cramjam", None)  # as if not installed: importing raises ImportError
    monkeypatch.setitem(sys.modules, "lz4.block", None)
    for codec, match in (
        ("snappy", r"Avro codec 'snappy' needs the Python package 'cramjam' \(pip install cramjam\)"),
        ("lz4", r"needs the Python package 'lz4'"),
        ("brotli", r"unsupported Avro codec 'brotli'"),
    ):
        path = tmp_path / f"{codec}.avro"
        path.write_bytes(recode(data, codec, lambda b: b))
        with pytest.raises(ManifestError, match=rf"{path}: .*{match}"):
            read_manifest(replace(m, manifest_path=str(path)), decoder="fast")


# -- corrupt input -----------------------------------------------------------------------------------------


def _expect_error_or_table(m: ManifestFile, path: Path, data: bytes) -> bool:
    path.write_bytes(data)
    try:
        read_manifest(replace(m, manifest_path=str(path)), decoder="fast")
    except ManifestError as exc:
        assert str(path) in str(exc)
        return True
    return False


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_truncations_raise(plain: tuple[ManifestFile, bytes], codec: str, tmp_path: Path) -> None:
    m, data = plain
    data = recode(data, codec, COMPRESSORS[codec])
    cuts = sorted({*range(0, len(data), 53), *range(len(data) - 40, len(data))})
    assert len(cuts) > 100
    for cut in cuts:  # the list counts every entry, so even a cut between blocks is an error
        assert _expect_error_or_table(m, tmp_path / f"cut{cut}.avro", data[:cut]), cut


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_bit_flips_never_crash(plain: tuple[ManifestFile, bytes], codec: str, tmp_path: Path) -> None:
    m, data = plain
    data = recode(data, codec, COMPRESSORS[codec])
    rng = random.Random(11)
    header_end = ml._parse_header(data)[1] + 16
    raised = 0
    for i in range(300):
        flipped = bytearray(data)
        for _ in range(rng.choice((1, 1, 3))):
            flipped[rng.randrange(header_end, len(data))] ^= 1 << rng.randrange(8)
        raised += _expect_error_or_table(m, tmp_path / f"flip{i}.avro", bytes(flipped))
    assert raised > 50


def test_bad_sync_marker(plain: tuple[ManifestFile, bytes], tmp_path: Path) -> None:
    m, data = plain
    end = ml._parse_header(data)[1]
    second = data.index(data[end : end + 16], end + 16)  # the sync marker after block 0
    path = tmp_path / "sync.avro"
    path.write_bytes(data[:second] + bytes(16) + data[second + 16 :])
    with pytest.raises(
        ManifestError, match=rf"{path}: corrupt or truncated Avro data: block 0 is not followed"
    ):
        read_manifest(replace(m, manifest_path=str(path)), decoder="fast")


_HUGE_BLOCK_CHILD = """
import sys
from gpu_engine.errors import ManifestError
from gpu_engine.iceberg.manifest_list import ManifestFile
from gpu_engine.iceberg.manifests import read_manifest
m = ManifestFile(sys.argv[1], int(sys.argv[2]), 0, sequence_number=1, added_snapshot_id=2)
try:
    read_manifest(m, decoder="fast")
except ManifestError as e:
    print(e)
"""


def test_a_block_size_near_2_63_is_an_error_not_a_crash(
    plain: tuple[ManifestFile, bytes], tmp_path: Path
) -> None:
    """``pos + size`` wrapped around for sizes near 2**63, passed the bounds check, and the scan read far
    outside the buffer (SIGSEGV: numba checks no bounds). In a child process, so a crash fails the test."""
    data = plain[1]
    end = ml._parse_header(data)[1] + 16
    pos = ml._read_long(data, end)[1]  # after block 0's count: its size
    after = ml._read_long(data, pos)[1]
    path = tmp_path / "huge.avro"
    for size in ((1 << 63) - 1, (1 << 63) - 1000):
        path.write_bytes(data[:pos] + ml._write_long(size) + data[after:])
        argv = [sys.executable, "-c", _HUGE_BLOCK_CHILD, str(path), str(path.stat().st_size)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, (size, done.returncode, done.stderr[-2000:])
        assert f"{path}: corrupt or truncated Avro data" in done.stdout


TINY = {"type": "record", "name": "t", "fields": [
    {"name": "a", "type": ["null", "long"]},
    {"name": "s", "type": "string"},
    {"name": "m", "type": {"type": "array", "items": {"type": "record", "name": "kv", "fields": [
        {"name": "key", "type": "int"}, {"name": "value", "type": "long"}]}}},
]}  # fmt: skip
TINY_TARGET = pa.struct([("a", pa.int64()), ("s", pa.string()), ("m", pa.map_(pa.int32(), pa.int64()))])


def container(path: Path, blocks: list[tuple[int, bytes]]) -> Path:
    sync = bytes(range(16))
    meta = {"avro.schema": json.dumps(TINY).encode(), "avro.codec": b"null"}
    body = [ml._write_long(n) + ml._write_long(len(b)) + b + sync for n, b in blocks]
    path.write_bytes(ml._encode_header(meta) + sync + b"".join(body))
    return path


VALID = b"\x02\x04" + b"\x02x" + b"\x02\x02\x06\x00"  # a=2, s="x", m={1: 3}


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"\x02" + b"\xff" * 10 + b"\x01", avro_vm.E_VARINT),
        (b"\x02\x04\x01", avro_vm.E_LENGTH),  # string length -1
        (b"\x04\x00\x00", avro_vm.E_UNION),
        (b"\x00\x02x" + b"\xd0\x0f", avro_vm.E_COUNT),  # 1000 map entries in 2 bytes
        (b"\x00\x02x\x02" + ml._write_long(2**40) + b"\x00\x00", avro_vm.E_INT),  # key past int32
        (b"\x02\x04\x0ax", avro_vm.E_TRUNC),  # string of 5 bytes, 1 there
        (VALID + b"\x00", avro_vm.E_TRAILING),
    ],
)
def test_interpreter_errors(payload: bytes, error: int, tmp_path: Path) -> None:
    path = container(tmp_path / "tiny.avro", [(1, VALID), (1, payload)])
    c = avro_fast.read_container(str(path), open_local)
    program = avro_fast.program_for(c.avro, TINY_TARGET)
    with pytest.raises(ManifestError, match=rf"{path}: .*{re.escape(avro_vm.ERRORS[error])} \(block 1, byte"):
        avro_fast.decode(c, program)


def test_tiny_container_and_key_filter(tmp_path: Path) -> None:
    entries = b"\x06" + b"\x02\x06" + b"\x04\x08" + b"\x06\x0a" + b"\x00"  # {1: 3, 2: 4, 3: 5}
    path = container(tmp_path / "tiny.avro", [(2, VALID + b"\x00\x00\x00"), (1, b"\x02\x00\x00" + entries)])
    c = avro_fast.read_container(str(path), open_local)
    got = avro_fast.decode(c, avro_fast.program_for(c.avro, TINY_TARGET))
    assert got.to_pylist() == [{"a": 2, "s": "x", "m": [(1, 3)]}, {"a": None, "s": "", "m": []},
                               {"a": 0, "s": "", "m": [(1, 3), (2, 4), (3, 5)]}]  # fmt: skip
    kept = avro_fast.decode(c, avro_fast.program_for(c.avro, TINY_TARGET, {("m",): [3, 1, 70000]}))
    assert kept.field("m").to_pylist() == [[(1, 3)], [], [(1, 3), (3, 5)]]
    assert avro_fast.filter_map_keys(got.field("m"), {3, 1, 70000}).equals(kept.field("m"))
    path = container(tmp_path / "claims.avro", [(5, b"\x00" * 14)])  # a record takes at least 3 bytes
    c = avro_fast.read_container(str(path), open_local)
    with pytest.raises(ManifestError, match=rf"{path}: .*block 0 claims 5 records in 14 bytes"):
        avro_fast.decode(c, avro_fast.program_for(c.avro, TINY_TARGET))


def test_compiler_rejections() -> None:
    def rejects(field_type: Any, target: pa.DataType, match: str) -> None:
        schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": field_type}]}
        with pytest.raises(UnsupportedSchema, match=match):
            compile_program(schema, pa.struct([("x", target)]))

    rejects(["null", "int", "string"], pa.int32(), "union of 3 types")
    rejects({"type": "map", "values": "long"}, pa.map_(pa.string(), pa.int64()), "'map' is not supported")
    rejects({"type": "enum", "name": "e", "symbols": ["A"]}, pa.string(), "'enum' is not supported")
    rejects({"type": "array", "items": "null"}, pa.list_(pa.null()), "zero bytes")
    rejects("string", pa.int64(), "Avro string read as int64")
    rejects({"type": "fixed", "name": "f", "size": 4}, pa.binary(3), r"fixed\[4\] read as")
    recursive = {"type": "record", "name": "n", "fields": [{"name": "next", "type": ["null", "n"]}]}
    rejects(recursive, pa.struct([("next", pa.struct([]))]), "recursive record")


def test_auto_falls_back_for_rejected_schemas(
    tables: list[FixtureTable], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    schema, meta, base = _template(tables)
    odd = json.loads(json.dumps(schema))
    df = next(f for f in odd["fields"] if f["name"] == "data_file")["type"]
    df["fields"].append({"name": "extra", "type": {"type": "map", "values": "long"}})
    path = tmp_path / "odd.avro"
    with open(path, "wb") as f:
        record = dict(base, data_file=dict(base["data_file"], extra={"a": 1}))
        fastavro.writer(f, odd, [record], metadata=meta)
    m = ManifestFile(str(path), 1, 0, added_snapshot_id=1)
    with caplog.at_level(logging.DEBUG, logger="gpu_engine.iceberg.manifests"):
        auto = read_manifest(m)
    tag = auto.schema.metadata[b"decoder"].decode()
    assert tag == "fastavro (the fast decoder rejects the schema: Avro type 'map' is not supported)"
    assert "rejects the schema" in caplog.text and str(path) in caplog.text
    assert auto.equals(read_manifest(m, decoder="fastavro"))
    with pytest.raises(ManifestError, match=rf"{path}: the fast Avro decoder cannot read this schema"):
        read_manifest(m, decoder="fast")


def test_options_are_checked(plain: tuple[ManifestFile, bytes]) -> None:
    m, _ = plain
    with pytest.raises(ValueError, match="decoder must be"):
        read_manifest(m, decoder="avro")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\['file_path'\] are not optional columns"):
        read_manifest(m, columns=["file_path"])


# -- generated manifests -----------------------------------------------------------------------------------

INT32, INT64 = st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)


def _decimal(size: int) -> st.SearchStrategy[bytes]:
    return st.integers(-(10**8) + 1, 10**8 - 1).map(lambda v: v.to_bytes(size, "big", signed=True))


PARTITION_TYPES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    ("int", INT32), ("long", INT64), ({"type": "int", "logicalType": "date"}, INT32),
    ({"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": True}, INT64),
    ("string", st.text(max_size=20)), ("bytes", st.binary(max_size=20)), ("boolean", st.booleans()),
    ("float", st.floats(width=32, allow_nan=False)), ("double", st.floats(allow_nan=False)),
    ({"type": "fixed", "size": 5}, st.binary(min_size=5, max_size=5)),
    ({"type": "fixed", "size": 16, "logicalType": "uuid"}, st.binary(min_size=16, max_size=16)),
    ({"type": "fixed", "size": 6, "logicalType": "decimal", "precision": 12, "scale": 3}, _decimal(6)),
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, _decimal(4)),
]  # fmt: skip
KEYS = st.one_of(st.integers(1, 20), INT32)
COUNTS = st.lists(st.fixed_dictionaries({"key": KEYS, "value": INT64}), max_size=40)
BOUNDS = st.lists(st.fixed_dictionaries({"key": KEYS, "value": st.binary(max_size=17)}), max_size=5)
COUNT_MAPS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
NULLABLE = {"key_metadata": st.binary(max_size=8), "split_offsets": st.lists(INT64, max_size=300),
            "equality_ids": st.lists(INT32, max_size=4), "sort_order_id": INT32, "first_row_id": INT64,
            "referenced_data_file": st.text(max_size=10), "content_offset": INT64,
            "content_size_in_bytes": INT64, "lower_bounds": BOUNDS, "upper_bounds": BOUNDS,
            **dict.fromkeys(COUNT_MAPS, COUNTS)}  # fmt: skip
Generated = tuple[list[tuple[str, Any, st.SearchStrategy[Any], bool]], list[dict[str, Any]], dict[str, Any]]


@st.composite
def manifests(draw: st.DrawFn) -> Generated:
    picks = draw(st.lists(st.tuples(st.sampled_from(range(len(PARTITION_TYPES))), st.booleans()), max_size=4))
    fields = [(f"p{i}", *PARTITION_TYPES[t], nullable) for i, (t, nullable) in enumerate(picks)]
    records = []
    for _ in range(draw(st.integers(0, 25))):
        part = {name: draw(st.none() if nullable and draw(st.booleans()) else values)
                for name, _, values, nullable in fields}  # fmt: skip
        df = {"content": draw(st.sampled_from((0, 0, 1, 2))), "file_path": draw(st.text(min_size=1)),
              "file_format": draw(st.sampled_from(("parquet", "AVRO", "orc"))), "partition": part,
              "record_count": draw(INT64), "file_size_in_bytes": draw(INT64),
              **{name: draw(st.none() | values) for name, values in NULLABLE.items()}}  # fmt: skip
        seqs = {name: draw(st.none() | INT64) for name in ("snapshot_id", "sequence_number",
                                                           "file_sequence_number")}  # fmt: skip
        records.append({"status": draw(st.integers(0, 2)), **seqs, "data_file": df})
    options = {"codec": draw(st.sampled_from(("null", "deflate", "snappy"))),
               "sync_interval": draw(st.sampled_from((50, 500, 16000))),
               "stats": draw(st.none() | st.sets(KEYS, max_size=4))}  # fmt: skip
    return fields, records, options


@given(manifests())
def test_generated_manifests_decode_alike(tables: list[FixtureTable], tmp_path: Path, gen: Generated) -> None:
    fields, records, options = gen
    schema, meta, _ = _template(tables)
    schema = json.loads(json.dumps(schema))
    df = next(f for f in schema["fields"] if f["name"] == "data_file")["type"]
    part = next(f for f in df["fields"] if f["name"] == "partition")
    avro_fields = []
    for i, (name, avro, _, nullable) in enumerate(fields):
        avro = dict(avro, name=f"fx{i}") if isinstance(avro, dict) and avro["type"] == "fixed" else avro
        avro_fields.append({"name": name, "type": ["null", avro] if nullable else avro, "field-id": 1000 + i})
    part["type"] = {"type": "record", "name": "r102", "fields": avro_fields}
    meta = {k: v for k, v in meta.items() if k not in ("partition-spec", "schema", "iceberg.schema")}
    path = tmp_path / f"gen{random.randrange(1 << 30)}.avro"
    with open(path, "wb") as f:
        fastavro.writer(
            f, schema, records, metadata=meta, codec=options["codec"], sync_interval=options["sync_interval"]
        )
    m = ManifestFile(str(path), 1, 0, sequence_number=5, added_snapshot_id=3, first_row_id=100)
    assert len(both(m, stats_columns=options["stats"])) == len(records)

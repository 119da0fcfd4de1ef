"""Deletion vectors: Java-written blobs and bitmaps with known contents, the DVs of real v3 tables,
byte-exact re-encoding, an independent decoder (pyroaring's BitMap64) and corruptions."""

from __future__ import annotations

import struct
import zlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap64

from gpu_engine.errors import DataFileError
from gpu_engine.iceberg.deletion_vectors import (
    MAGIC,
    decode_bitmap64,
    decode_dv,
    encode_bitmap64,
    encode_dv,
    read_dv,
)
from gpu_engine.iceberg.puffin import blob_data, read_footer
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.io.paths import normalize
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.tasks import DeleteFile
from tests.planning._support import load

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
DVS = FIXTURES / "iceberg-go" / "table" / "dv" / "testdata" / "deletes"
GO = FIXTURES / "iceberg-go" / "puffin" / "testdata"
IO = LocalFileIO()


def read(path: Path) -> bytes:
    if not path.is_file():
        pytest.fail(f"fixture {path} is missing (expected ../shared/fixtures next to the repo)")
    return path.read_bytes()


def ranges(*parts: tuple[int, int]) -> np.ndarray:
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in parts])


def pyroaring_values(bitmap: bytes) -> np.ndarray:
    """An independent decoder: CRoaring's portable 64-bit deserializer."""
    return np.frombuffer(BitMap64.deserialize(bitmap).to_array(), dtype=np.uint64).astype(np.int64)


C = 1 << 16  # one 32-bit Roaring container
K = 1 << 32  # one 64-bit bucket
# apache/iceberg TestBitmapPositionDeleteIndex: array containers, run containers (small and full) in two keys
ALL_CONTAINER_TYPES = np.concatenate(
    [
        np.array([5, 7]),
        ranges((C + 1, C + 1000), (2 * C + 1, 3 * C - 1)),
        np.array([K + 10, K + 20]),
        ranges((K + C + 10, K + C + 500), (K + 2 * C + 1, K + 3 * C - 1)),
    ]
)
POSITION_INDEXES = {
    "small-alternating-values": np.array([1, 3, 5, 7, 9]),
    "small-and-large-values": np.array([100, 101, 2**31 - 1 + 100, 2**31 - 1 + 101]),
    "empty": np.array([], dtype=np.int64),
    "all-container-types": ALL_CONTAINER_TYPES,
}


@pytest.mark.parametrize("name", sorted(POSITION_INDEXES))
def test_java_position_indexes(name: str) -> None:
    blob = read(DVS / f"{name}-position-index.bin")
    positions = decode_dv(blob, source=name)
    assert positions.dtype == np.int64
    np.testing.assert_array_equal(positions, POSITION_INDEXES[name])
    np.testing.assert_array_equal(positions, pyroaring_values(blob[8:-4]))
    assert encode_dv(positions) == blob  # Iceberg Java's layout: run-optimized, byte for byte


def test_iceberg_go_payload() -> None:
    blob = read(GO / "deletion-vector-v1-payload.bin")
    np.testing.assert_array_equal(decode_dv(blob, source="go"), [1, 3, 5, 7, 9])
    assert encode_dv([9, 7, 5, 3, 1, 1]) == blob


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("64mapempty", np.array([], dtype=np.int64)),
        ("64map32bitvals", np.arange(10)),
        ("64mapspreadvals", np.array([k * K + v for k in range(10) for v in range(10)])),
    ],
)
def test_portable_64bit_bitmaps(name: str, expected: np.ndarray) -> None:
    data = read(DVS / f"{name}.bin")
    values = decode_bitmap64(data, source=name)
    np.testing.assert_array_equal(values, expected)
    np.testing.assert_array_equal(values, pyroaring_values(data))
    # written by RoaringBitmap's tests without run optimization; ours are run-optimized like Iceberg's
    np.testing.assert_array_equal(decode_bitmap64(encode_bitmap64(values), source=name), expected)


def test_corrupted_fixture_bitmap_is_rejected() -> None:
    """The fixture copy of 64maphighvals.bin went through a UTF-8 decoder: its 0xFF bytes are U+FFFD."""
    data = read(DVS / "64maphighvals.bin")
    assert data.count(b"\xef\xbf\xbd") > 100
    with pytest.raises(DataFileError, match=r"64maphighvals: Roaring bitmap bucket key \d+ at byte 8"):
        decode_bitmap64(data, source="64maphighvals")


def test_empty_buckets_are_written_like_java() -> None:
    """Java writes a bucket for every key up to the largest: key 0 is an empty bitmap here."""
    one = bytes.fromhex("3a3000000100000000000000100000000100")  # 32-bit bitmap {1}
    empty = bytes.fromhex("3a30000000000000")
    expected = struct.pack("<Q", 2) + struct.pack("<I", 0) + empty + struct.pack("<I", 1) + one
    assert encode_bitmap64([K + 1]) == expected
    np.testing.assert_array_equal(decode_bitmap64(expected, source="x"), [K + 1])


def test_no_positions_encode_as_javas_empty_index() -> None:
    """``[]`` (numpy makes it float64) is the empty bitmap: Java's empty-position-index, not a TypeError."""
    assert encode_bitmap64([]) == struct.pack("<Q", 0)
    assert len(decode_dv(encode_dv([]), source="empty")) == 0


@given(
    st.lists(
        st.one_of(st.integers(0, 70_000), st.integers(0, 3 * K), st.integers(5 * K, 5 * K + 200_000)),
        max_size=300,
    ),
    st.lists(st.tuples(st.integers(0, 3 * K), st.integers(1, 70_000)), max_size=3),
)
def test_roundtrip_against_pyroaring(values: list[int], runs: list[tuple[int, int]]) -> None:
    positions = np.array(values + [p for start, n in runs for p in range(start, start + n)], dtype=np.int64)
    expected = np.array(sorted(set(positions.tolist())), dtype=np.int64)
    blob = encode_dv(positions)
    np.testing.assert_array_equal(decode_dv(blob, source="h"), expected)
    np.testing.assert_array_equal(pyroaring_values(blob[8:-4]), expected)
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8 and blob[4:8] == MAGIC
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])


def test_encode_rejects_bad_positions() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        encode_dv([3, -1])
    with pytest.raises(ValueError, match="beyond"):
        encode_dv(np.array([2**63 - 1], dtype=np.int64))
    with pytest.raises(TypeError):
        encode_dv(np.array([1.5]))


# -- Puffin files and real tables -----------------------------------------------------------------------


def test_iceberg_go_puffin_dvs() -> None:
    for name, expected in (
        ("single-blob-dv", [[1, 3, 5, 7, 9]]),
        ("multi-blob-dv", [[0, 100, 200], [50, 150]]),
    ):
        path = DVS / f"{name}.puffin"
        data = read(path)
        blobs = read_footer(IO, str(path)).blobs
        got = [decode_dv(blob_data(data, b, source=name), source=name).tolist() for b in blobs]
        assert got == expected
        assert [int(b.properties["cardinality"]) for b in blobs] == [len(e) for e in expected]
        for b, e in zip(blobs, expected, strict=True):
            dv = DeleteFile(str(path), "PUFFIN", 1, 0, (), len(e), len(data), 1, (), "x", b.offset, b.length)
            assert read_dv(IO, dv).tolist() == e


DV_TABLES = {
    "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors": [[0], [0]],
    "pg_lake/sample_tables_v3/public/v3_pos_dv": [[5, 12, 21, 33, 47]],
}


@pytest.mark.parametrize("rel", sorted(DV_TABLES))
def test_real_table_dvs(rel: str) -> None:
    tbl = load(rel)
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    seen = []
    for task in plan.tasks:
        for dv in task.deletes:
            assert dv.is_deletion_vector
            positions = read_dv(tbl.io, dv)
            assert len(positions) == dv.record_count
            assert np.all(np.diff(positions) > 0)
            assert int(positions[-1]) < task.file.record_count
            assert dv.referenced_data_file is not None
            assert normalize(dv.referenced_data_file) == normalize(task.file.path)
            # the blob sits exactly where the manifest says, and the footer names the same data file
            footer = read_footer(tbl.io, dv.path)
            (blob,) = [b for b in footer.blobs if b.offset == dv.content_offset]
            assert blob.length == dv.content_size_in_bytes and blob.type == "deletion-vector-v1"
            assert int(blob.properties["cardinality"]) == dv.record_count
            assert normalize(tbl.io.resolve(blob.properties["referenced-data-file"])) == normalize(
                task.file.path
            )
            raw = Path(dv.path).read_bytes()[blob.offset : blob.offset + blob.length]
            np.testing.assert_array_equal(positions, pyroaring_values(raw[8:-4]))
            assert encode_dv(positions) == raw
            seen.append(positions.tolist())
    assert sorted(seen) == sorted(DV_TABLES[rel])


# -- corruptions ----------------------------------------------------------------------------------------


def reframe(body: bytes) -> bytes:
    """A blob around ``body`` (magic + bitmap) with a correct length and CRC."""
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


BLOB = encode_dv([1, 3, 5, 7, 9, 70_000, K + 2])


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (BLOB[:-1] + bytes([BLOB[-1] ^ 1]), "CRC-32 mismatch"),
        (BLOB[:20] + bytes([BLOB[20] ^ 0x10]) + BLOB[21:], "CRC-32 mismatch"),
        (reframe(b"\xd1\xd3\x39\x65" + BLOB[8:-4]), "magic is d1d33965"),
        (BLOB[:-3], "length field says"),
        (BLOB[:-1] + b"\x00\x00", "length field says"),
        (struct.pack(">I", 7) + BLOB[4:], "length field says 7"),
        (BLOB[:6], "too short"),
        (reframe(BLOB[4:-4] + b"\x00"), "1 bytes follow the Roaring bitmap"),
        (reframe(BLOB[4:-6]), "truncated"),
        (reframe(MAGIC + struct.pack("<Q", 1000) + BLOB[16:-4]), "claims 1000 buckets"),
        (reframe(MAGIC + BLOB[8:20] + b"\x05" + BLOB[21:-4]), "cookie"),
    ],
    ids=[
        "crc-byte",
        "bitmap-bit",
        "magic",
        "truncated",
        "longer",
        "length-field",
        "tiny",
        "trailing",
        "short-bitmap",
        "bucket-count",
        "cookie",
    ],
)
def test_corrupt_blobs(blob: bytes, message: str) -> None:
    with pytest.raises(DataFileError, match=message) as exc:
        decode_dv(blob, source="/t/deletes.puffin (blob at offset 4)")
    assert "/t/deletes.puffin (blob at offset 4)" in str(exc.value)


def test_unsorted_and_inconsistent_bitmaps_are_rejected() -> None:
    def bucket(key: int, values: list[int]) -> bytes:
        return struct.pack("<I", key) + encode_bitmap64(values)[12:]

    swapped = struct.pack("<Q", 2) + bucket(1, [1]) + bucket(0, [1])
    with pytest.raises(DataFileError, match="key 0 at byte 30 is out of order"):
        decode_bitmap64(swapped, source="x")
    # an array container whose values are not increasing (header and size intact)
    one = bytearray(encode_bitmap64([3, 9]))
    one[-4:] = struct.pack("<HH", 9, 3)
    with pytest.raises(DataFileError, match=r"byte 12: .*array elements not strictly increasing"):
        decode_bitmap64(bytes(one), source="x")


def dv_entry(path: Path, offset: int, size: int, count: int) -> DeleteFile:
    return DeleteFile(
        str(path), "PUFFIN", 1, 0, (), count, path.stat().st_size, 1, (), "d.parquet", offset, size
    )


def test_read_dv_checks_the_manifest(tmp_path: Path) -> None:
    data = read(DVS / "multi-blob-dv.puffin")
    path = tmp_path / "dv.puffin"
    path.write_bytes(data)
    assert read_dv(IO, dv_entry(path, 50, 44, 2)).tolist() == [50, 150]
    with pytest.raises(DataFileError, match=r"dv\.puffin \(blob at offset 50\): deletion vector holds 2"):
        read_dv(IO, dv_entry(path, 50, 44, 3))
    with pytest.raises(DataFileError, match=r"\(blob at offset 50\): deletion vector length field"):
        read_dv(IO, dv_entry(path, 50, 46, 2))  # the manifest's size is wrong
    with pytest.raises(DataFileError, match=r"\(blob at offset 6\)"):
        read_dv(IO, dv_entry(path, 6, 44, 2))  # the manifest's offset is wrong
    with pytest.raises(DataFileError, match="lie outside the Puffin file"):
        read_dv(IO, dv_entry(path, len(data) - 10, 44, 2))
    with pytest.raises(DataFileError, match="without content_offset"):
        read_dv(IO, replace(dv_entry(path, 4, 46, 3), content_offset=None))
    with pytest.raises(DataFileError, match="not a deletion vector"):
        read_dv(IO, replace(dv_entry(path, 4, 46, 3), file_format="PARQUET"))
    entry = dv_entry(path, 50, 44, 2)
    path.write_bytes(data[:70])  # truncated after the manifest was written
    with pytest.raises(DataFileError, match=r"\(blob at offset 50\): truncated: 20 of 44 bytes"):
        read_dv(IO, entry)
    path.unlink()
    with pytest.raises(DataFileError, match=r"dv\.puffin: deletion vector file not found"):
        read_dv(IO, entry)

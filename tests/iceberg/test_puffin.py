"""Puffin files: the canonical Java files from apache/iceberg, the DV files of iceberg-go and real tables,
Trino's statistics files, byte-exact re-writing, and every kind of corruption."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import cramjam
import pytest

from gpu_engine.errors import DataFileError, UnsupportedFeature
from gpu_engine.iceberg.puffin import (
    MAGIC,
    Blob,
    BlobMetadata,
    PuffinFooter,
    blob_data,
    parse_footer,
    read_blob,
    read_footer,
    write_puffin,
)
from gpu_engine.io.fileio import LocalFileIO

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
JAVA = FIXTURES / "iceberg-go" / "puffin" / "testdata"
DVS = FIXTURES / "iceberg-go" / "table" / "dv" / "testdata" / "deletes"
IO = LocalFileIO()

# the two blobs of apache/iceberg's sample-metric-data files (PuffinFormatTestUtil / TestPuffinReader)
BLOB_A = b"abcdefghi"
BLOB_B = "some blob \x00 binary data 🤯 that is not very very very very very very long, is it?".encode()


def fixture(path: Path) -> Path:
    if not path.is_file():
        pytest.fail(f"fixture {path} is missing (expected ../shared/fixtures next to the repo)")
    return path


def every_puffin_file() -> list[Path]:
    found = sorted(FIXTURES.glob("**/*.puffin")) + sorted(FIXTURES.glob("**/*.stats"))
    return found + [
        JAVA / f"{n}.bin" for n in ("empty-puffin-uncompressed", "sample-metric-data-uncompressed")
    ]


def footer_of(path: Path) -> PuffinFooter:
    return parse_footer(path.read_bytes(), source=str(path))


def rewrite(data: bytes, footer: PuffinFooter) -> bytes:
    blobs = [
        Blob(
            b.type,
            blob_data(data, b, source="x"),
            b.fields,
            b.snapshot_id,
            b.sequence_number,
            b.compression_codec,
            b.properties,
        )
        for b in footer.blobs
    ]
    return write_puffin(blobs, footer.properties)


# -- the canonical Java files --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "codec"), [("uncompressed", None), ("compressed-zstd", "zstd")])
def test_sample_metric_data(name: str, codec: str | None) -> None:
    path = fixture(JAVA / f"sample-metric-data-{name}.bin")
    data = path.read_bytes()
    footer = parse_footer(data, source=str(path))
    lengths = (9, 83) if codec is None else (22, 77)
    assert footer.blobs == (
        BlobMetadata("some-blob", (1,), 2, 1, 4, lengths[0], codec),
        BlobMetadata("some-other-blob", (2,), 2, 1, 4 + lengths[0], lengths[1], codec),
    )
    assert footer.properties == {"created-by": "Test 1234"}
    assert footer.file_size == len(data)
    assert footer.footer_size == len(data) - 4 - sum(lengths)
    assert [blob_data(data, b, source=str(path)) for b in footer.blobs] == [BLOB_A, BLOB_B]
    assert read_footer(IO, str(path)) == footer
    assert [read_blob(IO, str(path), b) for b in footer.blobs] == [BLOB_A, BLOB_B]


def test_empty_puffin() -> None:
    path = fixture(JAVA / "empty-puffin-uncompressed.bin")
    footer = footer_of(path)
    assert footer.blobs == ()
    assert footer.properties == {}
    assert footer.footer_size == 28
    assert write_puffin([]) == path.read_bytes()


def test_writer_reproduces_java_bytes() -> None:
    for name, codec in (("uncompressed", None), ("compressed-zstd", "zstd")):
        blobs = [
            Blob("some-blob", BLOB_A, (1,), 2, 1, codec),
            Blob("some-other-blob", BLOB_B, (2,), 2, 1, codec),
        ]
        expected = fixture(JAVA / f"sample-metric-data-{name}.bin").read_bytes()
        assert write_puffin(blobs, {"created-by": "Test 1234"}) == expected


@pytest.mark.parametrize("path", every_puffin_file(), ids=lambda p: p.name[:40])
def test_every_fixture_file_reads_and_rewrites_byte_for_byte(path: Path) -> None:
    data = fixture(path).read_bytes()
    footer = parse_footer(data, source=str(path))
    assert read_footer(IO, str(path)) == footer
    for blob in footer.blobs:
        assert read_blob(IO, str(path), blob) == blob_data(data, blob, source=str(path))
    assert rewrite(data, footer) == data


def test_written_offsets_are_what_the_footer_says() -> None:
    blobs = [Blob("a", b"1" * 10), Blob("b", b"2" * 1000, (7,), 5, 3, "zstd", {"k": "v"}), Blob("c", b"")]
    data = write_puffin(blobs, {"created-by": "gpu-engine"})
    footer = parse_footer(data, source="mem")
    assert [(b.offset, b.type) for b in footer.blobs] == [
        (4, "a"),
        (14, "b"),
        (14 + footer.blobs[1].length, "c"),
    ]
    assert footer.blobs[1].length < 1000  # compressed
    assert footer.blobs[1] == BlobMetadata("b", (7,), 5, 3, 14, footer.blobs[1].length, "zstd", {"k": "v"})
    assert [blob_data(data, b, source="mem") for b in footer.blobs] == [b"1" * 10, b"2" * 1000, b""]


def test_trino_statistics_files_match_table_metadata() -> None:
    """``file-size-in-bytes``/``file-footer-size-in-bytes`` recorded by Trino for its statistics files."""
    checked = 0
    for md_path in sorted((FIXTURES / "impala").glob("**/metadata/*.metadata.json")):
        for stats in json.loads(md_path.read_text()).get("statistics") or []:
            local = md_path.parent / stats["statistics-path"].rsplit("/", 1)[1]
            if not local.is_file():
                continue
            footer = footer_of(local)
            assert footer.file_size == stats["file-size-in-bytes"]
            assert footer.footer_size == stats["file-footer-size-in-bytes"]
            assert [(b.type, list(b.fields), b.sequence_number, b.properties) for b in footer.blobs] == [
                (s["type"], s["fields"], s["sequence-number"], s["properties"])
                for s in stats["blob-metadata"]
            ]
            # the two trino_* tables' metadata JSON went through doubles: its snapshot ids end in 000
            assert all(float(b.snapshot_id) == float(stats["snapshot-id"]) for b in footer.blobs)
            checked += 1
    assert checked >= 3


def test_deletion_vector_puffin_files() -> None:
    single = footer_of(fixture(DVS / "single-blob-dv.puffin"))
    assert [(b.type, b.fields, b.offset, b.length) for b in single.blobs] == [
        ("deletion-vector-v1", (2147483645,), 4, 50)
    ]
    assert single.blobs[0].properties == {
        "referenced-data-file": "s3://warehouse/db/table/data/00000-0-abc.parquet",
        "cardinality": "5",
    }
    multi = footer_of(fixture(DVS / "multi-blob-dv.puffin"))
    assert [(b.offset, b.length, b.properties["cardinality"]) for b in multi.blobs] == [
        (4, 46, "3"),
        (50, 44, "2"),
    ]
    go = footer_of(fixture(JAVA / "deletion-vector-v1.puffin"))
    payload = fixture(JAVA / "deletion-vector-v1-payload.bin").read_bytes()
    assert blob_data((JAVA / "deletion-vector-v1.puffin").read_bytes(), go.blobs[0], source="go") == payload
    assert go.blobs[0].fields == ()


# -- corruption ----------------------------------------------------------------------------------------


def assemble(blobs: bytes, doc: Any, *, flags: bytes = bytes(4), payload: bytes | None = None) -> bytes:
    body = json.dumps(doc).encode() if payload is None else payload
    return MAGIC + blobs + MAGIC + body + struct.pack("<i", len(body)) + flags + MAGIC


def blob_doc(offset: Any, length: int, **extra: Any) -> dict[str, Any]:
    return {"type": "t", "fields": [1], "snapshot-id": 1, "sequence-number": 1, "offset": offset,
            "length": length, **extra}  # fmt: skip


SAMPLE = JAVA / "sample-metric-data-uncompressed.bin"


def _sample() -> bytes:
    return fixture(SAMPLE).read_bytes()


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda d: b"PFA2" + d[4:], "starts with"),
        (lambda d: d[:-1] + b"2", "ends with"),
        (lambda d: d[:-1], "ends with"),
        (lambda d: d[:-13], "ends with"),
        (lambda d: d[:-12] + struct.pack("<i", 5000) + d[-8:], "payload size 5000"),
        (lambda d: d[:-12] + struct.pack("<i", -1) + d[-8:], "payload size -1"),
        (lambda d: d[:-12] + struct.pack("<i", struct.unpack("<i", d[-12:-8])[0] - 1) + d[-8:], "no magic"),
        (lambda d: d[:100] + b"X" + d[101:], "not UTF-8 JSON"),
        (lambda d: d[:10], "too short"),
        (lambda d: b"", "too short"),
    ],
    ids=[
        "head-magic",
        "tail-magic",
        "truncated-1",
        "truncated-tail",
        "size-too-big",
        "size-negative",
        "size-off-by-one",
        "json",
        "tiny",
        "empty",
    ],
)
def test_corrupt_files_name_the_file(tmp_path: Path, corrupt: Any, message: str) -> None:
    path = tmp_path / "bad.puffin"
    path.write_bytes(corrupt(_sample()))
    with pytest.raises(DataFileError, match=message) as exc:
        read_footer(IO, str(path))
    assert str(path) in str(exc.value)
    with pytest.raises(DataFileError, match=message):
        parse_footer(path.read_bytes(), source=str(path))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"blobs": [blob_doc(4, 100)]}, "outside the blob area"),
        ({"blobs": [blob_doc(2, 3)]}, "outside the blob area"),
        ({"blobs": [blob_doc(4, -1)]}, "outside the blob area"),
        ({"blobs": [blob_doc("4", 3)]}, "'offset' must be an integer"),
        ({"blobs": [blob_doc(4, 3, **{"snapshot-id": True})]}, "'snapshot-id' must be an integer"),
        ({"blobs": [{**blob_doc(4, 3), "type": None}]}, "'type' must be a string"),
        ({"blobs": [{**blob_doc(4, 3), "fields": ["1"]}]}, "'fields' must be a list"),
        ({"blobs": [blob_doc(4, 3, properties={"a": 1})]}, "'properties' must map"),
        ({"blobs": [blob_doc(4, 3, **{"compression-codec": 3})]}, "'compression-codec' must be a string"),
        ({"blobs": [1]}, "blob 0 is not a JSON object"),
        ({"blob": []}, "no 'blobs' list"),
        ([], "no 'blobs' list"),
    ],
)
def test_malformed_footers(doc: Any, message: str) -> None:
    with pytest.raises(DataFileError, match=message) as exc:
        parse_footer(assemble(b"abc", doc), source="/x/f.puffin")
    assert "/x/f.puffin" in str(exc.value)


def test_blob_outside_file_and_truncated_blob(tmp_path: Path) -> None:
    data = _sample()
    footer = parse_footer(data, source="s")
    beyond = BlobMetadata("t", (), 1, 1, len(data) - 2, 10)
    with pytest.raises(DataFileError, match="outside the file"):
        blob_data(data, beyond, source="s")
    path = tmp_path / "cut.puffin"
    path.write_bytes(data[:50])
    with pytest.raises(DataFileError, match=r"cut.puffin: truncated: 37 of 83 bytes at offset 13"):
        read_blob(IO, str(path), footer.blobs[1])
    with pytest.raises(DataFileError, match="file not found"):
        read_footer(IO, str(tmp_path / "missing.puffin"))
    with pytest.raises(DataFileError, match=r"missing\.puffin: file not found"):
        read_blob(IO, str(tmp_path / "missing.puffin"), footer.blobs[0])


def test_corrupt_zstd_blob_names_file_and_offset() -> None:
    data = fixture(JAVA / "sample-metric-data-compressed-zstd.bin").read_bytes()
    footer = parse_footer(data, source="z")
    blob = footer.blobs[1]
    cut = BlobMetadata(blob.type, blob.fields, 2, 1, blob.offset, blob.length - 5, "zstd")
    with pytest.raises(DataFileError, match=r"z \(blob at offset 26\): zstd data does not decompress"):
        blob_data(data, cut, source="z")
    garbage = data[: blob.offset + 10] + b"\xff" * 20 + data[blob.offset + 30 :]
    with pytest.raises(DataFileError, match="blob at offset 26"):
        blob_data(garbage, blob, source="z")


def test_codecs_and_flags() -> None:
    payload = b"hello puffin " * 20
    frame = bytes(cramjam.lz4.compress(payload))
    doc = {"blobs": [blob_doc(4, len(frame), **{"compression-codec": "lz4"})]}
    data = assemble(frame, doc)
    footer = parse_footer(data, source="l")
    assert blob_data(data, footer.blobs[0], source="l") == payload
    # an LZ4-compressed footer (flag bit 0)
    body = json.dumps(doc).encode()
    packed = assemble(frame, None, flags=b"\x01\x00\x00\x00", payload=bytes(cramjam.lz4.compress(body)))
    assert parse_footer(packed, source="l").blobs == footer.blobs
    with pytest.raises(UnsupportedFeature, match=r"f.puffin: Puffin footer flags 02000000"):
        parse_footer(assemble(frame, doc, flags=b"\x02\x00\x00\x00"), source="f.puffin")
    with pytest.raises(UnsupportedFeature, match=r"f.puffin \(blob at offset 4\).*'snappy'"):
        parse_footer(
            assemble(b"abc", {"blobs": [blob_doc(4, 3, **{"compression-codec": "snappy"})]}),
            source="f.puffin",
        )
    with pytest.raises(UnsupportedFeature, match="'lz4'"):
        write_puffin([Blob("t", b"x", compression_codec="lz4")])

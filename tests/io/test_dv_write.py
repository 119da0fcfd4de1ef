"""write_deletion_vectors against independent readers: the Puffin footer parsed by hand (json), each blob's
framing checked by hand (length, magic, CRC-32) and its bitmap read by pyroaring's BitMap64, PyIceberg's
deletion vector reader, and our own readers (parse_footer, read_dv) for the round trip."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile
from pyroaring import BitMap64

from gpu_engine.errors import PlanningError
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.iceberg.deletion_vectors import read_dv
from gpu_engine.iceberg.puffin import parse_footer
from gpu_engine.io.dv_write import DeletionVector, write_deletion_vectors
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.tasks import DeleteFile

IO = LocalFileIO()
ROW_POSITION_ID = 2147483645  # the _pos metadata column: what Iceberg Java lists as a DV blob's fields


def as_delete_file(f: ContentFile) -> DeleteFile:
    return DeleteFile(
        path=f.path, file_format=f.file_format, content=f.content, spec_id=f.spec_id, partition=f.partition,
        record_count=f.record_count, file_size_in_bytes=f.file_size_in_bytes, data_sequence_number=1,
        referenced_data_file=f.referenced_data_file, content_offset=f.content_offset,
        content_size_in_bytes=f.content_size_in_bytes,
    )  # fmt: skip


def footer_by_hand(data: bytes) -> dict[str, Any]:
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    assert data[-8:-4] == bytes(4)  # flags: footer not compressed
    (size,) = struct.unpack("<i", data[-12:-8])
    assert data[-12 - size - 4 : -12 - size] == b"PFA1"
    doc: dict[str, Any] = json.loads(data[-12 - size : -12])
    return doc


def bitmap_by_hand(blob: bytes) -> list[int]:
    (length,) = struct.unpack(">I", blob[:4])
    assert length == len(blob) - 8
    assert blob[4:8] == bytes([0xD1, 0xD3, 0x39, 0x64])
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])
    return list(BitMap64.deserialize(blob[8:-4]))


RNG = np.random.default_rng(11)
INPUTS = [
    DeletionVector("s3://b/wh/t/data/a.parquet", np.array([9, 1, 1, 5, 0]), ("eu", 3), 1),
    ("s3://b/wh/t/data/b.parquet", np.arange(100_000, 170_000), ("us", 4), 1),  # a run container
    DeletionVector("/wh/t/data/c.parquet", [3, (1 << 32) + 7, (5 << 32) + 1], (None,), 0),  # high keys
    DeletionVector("/wh/t/data/d.parquet", RNG.choice(1 << 22, size=5000, replace=False), (), 2),
]


def test_blobs_footer_and_entries(tmp_path: Path) -> None:
    files = write_deletion_vectors(IO, str(tmp_path), INPUTS)
    assert len(files) == len(INPUTS)
    assert len({f.path for f in files}) == 1  # one Puffin file
    local = Path(files[0].path)
    assert local.parent == tmp_path / "data" and local.name.endswith("-deletes.puffin")
    data = local.read_bytes()
    doc = footer_by_hand(data)
    assert doc["properties"]["created-by"].startswith("gpu-engine ")
    assert len(doc["blobs"]) == len(INPUTS)
    for item, f, blob in zip(INPUTS, files, doc["blobs"], strict=True):
        path, positions, partition, spec_id = item
        expected = sorted(set(np.asarray(positions).tolist()))
        assert blob["type"] == "deletion-vector-v1"
        assert blob["fields"] == [ROW_POSITION_ID]
        assert (blob["snapshot-id"], blob["sequence-number"]) == (-1, -1)
        assert "compression-codec" not in blob
        assert blob["properties"] == {"referenced-data-file": path, "cardinality": str(len(expected))}
        # the manifest entry
        assert (f.content, f.file_format, f.file_size_in_bytes) == (1, "PUFFIN", len(data))
        assert (f.referenced_data_file, f.partition, f.spec_id) == (path, partition, spec_id)
        assert (f.content_offset, f.content_size_in_bytes) == (blob["offset"], blob["length"])
        assert f.record_count == len(expected)
        assert f.value_counts == {} and f.lower_bounds == {}  # DVs carry no column metrics
        # the blob, by hand and by pyroaring
        assert bitmap_by_hand(data[blob["offset"] : blob["offset"] + blob["length"]]) == expected
        # our reader
        assert read_dv(IO, as_delete_file(f)).tolist() == expected
    # blobs are back to back after the magic
    offsets = [b["offset"] for b in doc["blobs"]]
    assert offsets[0] == 4
    assert offsets[1:] == [b["offset"] + b["length"] for b in doc["blobs"][:-1]]
    # our footer parser agrees
    assert [(b.offset, b.length) for b in parse_footer(data, source=str(local)).blobs] == [
        (f.content_offset, f.content_size_in_bytes) for f in files
    ]


def test_pyiceberg_reads_the_vectors(tmp_path: Path) -> None:
    files = write_deletion_vectors(IO, str(tmp_path), INPUTS)
    dvs = deletion_vectors_from_puffin_file(PuffinFile(Path(files[0].path).read_bytes()))
    got = {dv.referenced_data_file: dv.to_vector().to_pylist() for dv in dvs}
    assert got == {item[0]: sorted(set(np.asarray(item[1]).tolist())) for item in INPUTS}


def test_write_data_path_property(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    files = write_deletion_vectors(
        IO, str(tmp_path), [("/d/a.parquet", [1], (), 0)], properties={"write.data.path": str(target)}
    )
    assert Path(files[0].path).parent == target


@pytest.mark.parametrize(
    ("dvs", "error", "message"),
    [
        ([], ValueError, "no deletion vectors to write"),
        ([("/d/a", [1], (), 0), ("/d/a", [2], (), 0)], ValueError, "data file /d/a appears twice"),
        ([("/d/a", [], (), 0)], ValueError, "deletion vector of /d/a: no positions"),
        ([("/d/a", [-1], (), 0)], ValueError, "deleted positions of /d/a: negative position -1"),
        ([("/d/a", [1], ["eu"], 0)], PlanningError, "partition must be a tuple"),
        ([("", [1], (), 0)], ValueError, "is not a non-empty string"),
    ],
)
def test_bad_input_raises(tmp_path: Path, dvs: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        write_deletion_vectors(IO, str(tmp_path), dvs)
    assert not (tmp_path / "data").exists()

"""Deletion vectors: Puffin ``deletion-vector-v1`` blobs (Iceberg v3) to sorted int64 row positions.

A blob is ``length (4 bytes, big-endian) | magic D1 D3 39 64 | bitmap | CRC-32 (4 bytes, big-endian)``
where ``length`` counts magic and bitmap and the CRC covers them. The bitmap is the portable 64-bit Roaring
serialization: a little-endian uint64 bucket count, then per bucket (keys ascending) a little-endian
uint32 key (the positions' high 32 bits) and a standard 32-bit Roaring bitmap of their low 32 bits.

Decoding walks the bucket headers here (exact sizes, so trailing or missing bytes are caught) and hands
each 32-bit bitmap to pyroaring (CRoaring); the result is checked to be strictly increasing and to hold
as many positions as the headers claim. Encoding writes what Iceberg Java writes: run-optimized
containers and one bucket for every key from 0 to the largest (empty buckets included).
Every malformed blob raises :class:`~gpu_engine.errors.DataFileError` naming the file and offset.
"""

from __future__ import annotations

import array
import struct
import zlib
from typing import Protocol

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from ..errors import DataFileError
from ..io.fileio import FileIO

__all__ = [
    "BLOB_TYPE",
    "MAGIC",
    "DeletionVectorFile",
    "decode_bitmap64",
    "decode_dv",
    "encode_bitmap64",
    "encode_dv",
    "read_dv",
]

BLOB_TYPE = "deletion-vector-v1"
MAGIC = b"\xd1\xd3\x39\x64"
_MAX_KEY = 0x7FFFFFFE  # positions are non-negative longs: Iceberg Java's largest key
_NO_RUNS = 12346  # 32-bit Roaring cookies (RoaringFormatSpec)
_RUNS = 12347
_ARRAY_MAX = 4096  # containers holding more values are bitsets (8 KiB) unless they are runs
_EMPTY = np.empty(0, dtype=np.int64)
_EMPTY.flags.writeable = False

Positions = npt.NDArray[np.int64]


class DeletionVectorFile(Protocol):
    """What :func:`read_dv` needs of a manifest's delete entry (:class:`gpu_engine.tasks.DeleteFile`;
    not imported: the metadata layer stays below the planner's values)."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def is_deletion_vector(self) -> bool: ...
    @property
    def record_count(self) -> int: ...
    @property
    def file_size_in_bytes(self) -> int: ...
    @property
    def content_offset(self) -> int | None: ...
    @property
    def content_size_in_bytes(self) -> int | None: ...


def decode_dv(blob: bytes, *, source: str) -> Positions:
    """The sorted, unique deleted positions of one ``deletion-vector-v1`` blob (a read-only array);
    ``source`` names the file and offset in errors."""
    if len(blob) < 12:
        raise DataFileError(f"{source}: deletion vector blob is {len(blob)} bytes, too short")
    (length,) = struct.unpack(">I", blob[:4])
    if length != len(blob) - 8:
        raise DataFileError(
            f"{source}: deletion vector length field says {length} bytes of magic and bitmap, "
            f"the blob holds {len(blob) - 8}"
        )
    if blob[4:8] != MAGIC:
        raise DataFileError(f"{source}: deletion vector magic is {blob[4:8].hex()}, not {MAGIC.hex()}")
    body = blob[4:-4]
    (crc,) = struct.unpack(">I", blob[-4:])
    if zlib.crc32(body) != crc:
        raise DataFileError(
            f"{source}: deletion vector CRC-32 mismatch (stored {crc:08x}, computed {zlib.crc32(body):08x})"
        )
    return decode_bitmap64(body[4:], source=source)


def encode_dv(positions: npt.ArrayLike) -> bytes:
    """The ``deletion-vector-v1`` blob of ``positions`` (any order, duplicates allowed, each >= 0)."""
    body = MAGIC + encode_bitmap64(positions)
    return struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))


def read_dv(io: FileIO, delete_file: DeletionVectorFile) -> Positions:
    """The deleted positions of the deletion vector ``delete_file`` (its ``path`` already resolved),
    reading exactly ``content_size_in_bytes`` at ``content_offset``; the blob's own length field, magic,
    CRC and cardinality (the manifest's ``record_count``) must agree with the manifest."""
    path, offset, size = delete_file.path, delete_file.content_offset, delete_file.content_size_in_bytes
    if not delete_file.is_deletion_vector:
        raise DataFileError(f"{path}: not a deletion vector ({delete_file.kind} delete file)")
    if offset is None or size is None:
        raise DataFileError(f"{path}: deletion vector entry without content_offset/content_size_in_bytes")
    source = f"{path} (blob at offset {offset})"
    if offset < 4 or size < 0 or offset + size > delete_file.file_size_in_bytes:
        raise DataFileError(
            f"{source}: {size} bytes at offset {offset} lie outside the Puffin file "
            f"({delete_file.file_size_in_bytes} bytes per the manifest)"
        )
    try:
        with io.open_input(path) as f:
            f.seek(offset)
            blob = bytes(f.read(size))
    except FileNotFoundError:
        raise DataFileError(f"{path}: deletion vector file not found") from None
    except OSError as exc:
        raise DataFileError(f"{source}: cannot read: {exc}") from None
    if len(blob) != size:
        raise DataFileError(f"{source}: truncated: {len(blob)} of {size} bytes")
    positions = decode_dv(blob, source=source)
    if len(positions) != delete_file.record_count:
        raise DataFileError(
            f"{source}: deletion vector holds {len(positions)} positions, the manifest's record_count "
            f"says {delete_file.record_count}"
        )
    return positions


# -- the portable 64-bit Roaring format ------------------------------------------------------------------


def decode_bitmap64(data: bytes, *, source: str) -> Positions:
    """The values of a portable 64-bit Roaring bitmap filling ``data`` exactly, sorted, as int64."""
    if len(data) < 8:
        raise DataFileError(f"{source}: Roaring bitmap is {len(data)} bytes, too short for its bucket count")
    (count,) = struct.unpack_from("<Q", data)
    if count > (len(data) - 8) // 12:  # a bucket takes >= 12 bytes (key, cookie, container count)
        raise DataFileError(f"{source}: Roaring bitmap claims {count} buckets in {len(data)} bytes")
    pos = 8
    parts: list[Positions] = []
    last = -1
    for _ in range(count):
        if pos + 4 > len(data):
            raise DataFileError(f"{source}: Roaring bitmap truncated at bucket key (byte {pos})")
        (key,) = struct.unpack_from("<I", data, pos)
        if key <= last or key > _MAX_KEY:
            raise DataFileError(
                f"{source}: Roaring bitmap bucket key {key} at byte {pos} is out of order or out of range"
            )
        last = key
        pos += 4
        end, cardinality = _roaring32_extent(data, pos, source)
        if cardinality:
            try:
                low = np.frombuffer(BitMap.deserialize(data[pos:end]).to_array(), dtype=np.uint32)
            except ValueError as exc:
                raise DataFileError(f"{source}: corrupt 32-bit Roaring bitmap at byte {pos}: {exc}") from None
            if len(low) != cardinality:
                raise DataFileError(
                    f"{source}: 32-bit Roaring bitmap at byte {pos} holds {len(low)} values, "
                    f"its header says {cardinality}"
                )
            parts.append(low.astype(np.int64) | (key << 32) if key else low.astype(np.int64))
        pos = end
    if pos != len(data):
        raise DataFileError(f"{source}: {len(data) - pos} bytes follow the Roaring bitmap (byte {pos})")
    out = parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts else _EMPTY)
    if len(out) > 1 and not bool(np.all(out[1:] > out[:-1])):
        raise DataFileError(f"{source}: Roaring bitmap containers are not sorted or overlap")
    out.flags.writeable = False  # shared by every task of the data file
    return out


def _roaring32_extent(data: bytes, start: int, source: str) -> tuple[int, int]:
    """Where the standard 32-bit Roaring bitmap at ``start`` ends, and its cardinality per its headers."""

    def need(n: int, what: str) -> None:
        if n > len(data):
            raise DataFileError(f"{source}: Roaring bitmap at byte {start} truncated in its {what}")

    need(start + 4, "cookie")
    (cookie,) = struct.unpack_from("<I", data, start)
    if cookie & 0xFFFF == _RUNS:
        n = (cookie >> 16) + 1
        need(start + 4 + (n + 7) // 8, "run flags")
        flags = np.frombuffer(data, np.uint8, (n + 7) // 8, start + 4)
        runs = np.unpackbits(flags, bitorder="little")[:n].astype(bool)
        at = start + 4 + (n + 7) // 8
        has_offsets = n >= 4
    elif cookie == _NO_RUNS:
        need(start + 8, "container count")
        (n,) = struct.unpack_from("<I", data, start + 4)
        if n > 65536:
            raise DataFileError(f"{source}: Roaring bitmap at byte {start} claims {n} containers")
        runs = np.zeros(n, dtype=bool)
        at = start + 8
        has_offsets = True
    else:
        raise DataFileError(f"{source}: not a Roaring bitmap at byte {start} (cookie {cookie:#x})")
    need(at + 4 * n, "container keys")
    header = np.frombuffer(data, "<u2", 2 * n, at).reshape(n, 2).astype(np.int64)
    keys, cards = header[:, 0], header[:, 1] + 1
    if n > 1 and not bool(np.all(keys[1:] > keys[:-1])):
        raise DataFileError(f"{source}: Roaring bitmap at byte {start} has unsorted container keys")
    at += 4 * n
    if has_offsets:
        need(at + 4 * n, "container offsets")
        offsets = np.frombuffer(data, "<u4", n, at).astype(np.int64)
        at += 4 * n
    sizes = np.where(cards > _ARRAY_MAX, 8192, 2 * cards)
    if n == 0:
        return at, 0
    if has_offsets:  # run containers' sizes are in their first two bytes, found through the offsets
        starts = start + offsets
        run_starts = starts[runs]
        if len(run_starts):
            need(int(run_starts.max()) + 2, "run containers")
            raw = np.frombuffer(data, np.uint8)
            nruns = raw[run_starts].astype(np.int64) | raw[run_starts + 1].astype(np.int64) << 8
            sizes[runs] = 2 + 4 * nruns
        if not np.array_equal(starts, at + np.concatenate(([0], np.cumsum(sizes[:-1])))):
            raise DataFileError(
                f"{source}: Roaring bitmap at byte {start} has inconsistent container offsets"
            )
    else:  # runs and fewer than four containers: walk them
        starts = np.empty(n, dtype=np.int64)
        p = at
        for i in range(n):
            starts[i] = p
            if runs[i]:
                need(p + 2, "run containers")
                sizes[i] = 2 + 4 * struct.unpack_from("<H", data, p)[0]
            p += int(sizes[i])
    end = int(starts[-1] + sizes[-1])
    need(end, "containers")
    return end, int(cards.sum())


def encode_bitmap64(positions: npt.ArrayLike) -> bytes:
    """The portable 64-bit Roaring serialization of ``positions`` as Iceberg Java writes it: containers
    run-length encoded where that is smaller, one bucket per key from 0 to the largest."""
    given = np.asarray(positions)
    given = given.astype(np.int64) if given.size == 0 else given  # [] is float64: no position either way
    values = sorted_unique(given.astype(np.int64, casting="same_kind", copy=False))
    if len(values) and values[0] < 0:
        raise ValueError(f"deleted positions must be >= 0, got {int(values[0])}")
    if len(values) and values[-1] >> 32 > _MAX_KEY:
        raise ValueError(f"deleted position {int(values[-1])} is beyond the largest supported position")
    keys = values >> 32
    n_keys = int(keys[-1]) + 1 if len(values) else 0
    bounds = np.searchsorted(keys, np.arange(n_keys + 1))
    out = [struct.pack("<Q", n_keys)]
    for key in range(n_keys):
        low = (values[bounds[key] : bounds[key + 1]] & 0xFFFFFFFF).astype(np.uint32)
        bitmap = BitMap(array.array("I", low.tobytes()))
        bitmap.run_optimize()
        out += [struct.pack("<I", key), bitmap.serialize()]
    return b"".join(out)


def sorted_unique(values: Positions) -> Positions:
    """``values`` sorted without duplicates (np.unique is ~50x slower here: it hashes)."""
    if len(values) > 1 and not bool(np.all(values[1:] > values[:-1])):
        values = np.sort(values)
        keep = np.empty(len(values), dtype=bool)
        keep[0] = True
        np.not_equal(values[1:], values[:-1], out=keep[1:])
        values = values[keep]
    return values

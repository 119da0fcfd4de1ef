"""Puffin files (Iceberg's Puffin spec): blobs such as deletion vectors and statistics sketches, and a
JSON footer describing them.

Layout: ``Magic Blob* Magic FooterPayload FooterPayloadSize Flags Magic`` with ``Magic = "PFA1"``,
``FooterPayloadSize`` a little-endian int32 and ``Flags`` four bytes (byte 0 bit 0: the payload is LZ4
compressed; every other bit is reserved). Blobs are stored uncompressed or as one ``zstd`` or ``lz4``
frame (``compression-codec``).

Readers check everything they rely on (both magics, sizes, offsets inside the file, the JSON shape) and
raise :class:`~gpu_engine.errors.DataFileError` naming the file (and the blob offset) at fault; codecs
and flags this reader does not know raise :class:`~gpu_engine.errors.UnsupportedFeature`.
:func:`write_puffin` writes the footer JSON exactly as Iceberg Java does (compact, the same key order),
so a file re-written from what :func:`parse_footer` read is byte-for-byte the original.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import cramjam
import zstandard

from ..errors import DataFileError, UnsupportedFeature
from ..io.fileio import FileIO

__all__ = [
    "MAGIC",
    "Blob",
    "BlobMetadata",
    "PuffinFooter",
    "blob_data",
    "parse_footer",
    "read_blob",
    "read_footer",
    "write_puffin",
]

MAGIC = b"PFA1"
_TAIL = 12  # FooterPayloadSize (4) + Flags (4) + Magic (4)
_FOOTER_COMPRESSED = 0x01  # byte 0, bit 0 of Flags
_CODECS = ("zstd", "lz4")
_WRITE_CODECS = ("zstd",)  # Iceberg Java reads no lz4 blobs: never write them


@dataclass(frozen=True)
class BlobMetadata:
    """One blob as the footer describes it (``offset``/``length`` are of the stored, compressed bytes)."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PuffinFooter:
    """A checked Puffin footer. ``footer_size`` is the whole footer (magic to magic): the statistics
    file's ``file-footer-size-in-bytes``."""

    path: str
    file_size: int
    footer_size: int
    blobs: tuple[BlobMetadata, ...]
    properties: Mapping[str, str]


@dataclass(frozen=True)
class Blob:
    """A blob to write: ``data`` uncompressed; ``compression_codec`` None or ``"zstd"``."""

    type: str
    data: bytes
    fields: tuple[int, ...] = ()
    snapshot_id: int = -1
    sequence_number: int = -1
    compression_codec: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


# -- reading -------------------------------------------------------------------------------------------


def parse_footer(data: bytes, *, source: str) -> PuffinFooter:
    """The footer of the whole Puffin file ``data``; ``source`` names the file in errors."""
    size = len(data)
    if size < len(MAGIC) + len(MAGIC) + _TAIL:
        raise DataFileError(f"{source}: not a Puffin file: {size} bytes is too short for magic and footer")
    start, payload_size, flags = _footer_start(data[-_TAIL:], size, source)
    return _parse(data[:4], data[start:], size, payload_size, flags, source)


def read_footer(io: FileIO, path: str) -> PuffinFooter:
    """Read and check the footer of the Puffin file at ``path`` (a resolved path), reading only its tail."""
    with _open(io, path) as f:
        size = f.seek(0, os.SEEK_END)
        if size < len(MAGIC) + len(MAGIC) + _TAIL:
            raise DataFileError(f"{path}: not a Puffin file: {size} bytes is too short for magic and footer")
        head = _read_at(f, 0, len(MAGIC), path)
        start, payload_size, flags = _footer_start(_read_at(f, size - _TAIL, _TAIL, path), size, path)
        footer = _read_at(f, start, size - start, path)
    return _parse(head, footer, size, payload_size, flags, path)


def blob_data(data: bytes, blob: BlobMetadata, *, source: str) -> bytes:
    """The uncompressed content of ``blob`` from the whole Puffin file ``data``."""
    if blob.offset < 0 or blob.length < 0 or blob.offset + blob.length > len(data):
        raise DataFileError(
            f"{source}: blob at offset {blob.offset} ({blob.length} bytes) lies outside the file "
            f"({len(data)} bytes)"
        )
    raw = data[blob.offset : blob.offset + blob.length]
    return decompress(raw, blob.compression_codec, source=f"{source} (blob at offset {blob.offset})")


def read_blob(io: FileIO, path: str, blob: BlobMetadata) -> bytes:
    """The uncompressed content of ``blob`` (from :func:`read_footer`), reading only its bytes."""
    with _open(io, path) as f:
        raw = _read_at(f, blob.offset, blob.length, path)
    return decompress(raw, blob.compression_codec, source=f"{path} (blob at offset {blob.offset})")


def decompress(raw: bytes, codec: str | None, *, source: str) -> bytes:
    """A blob's stored bytes uncompressed: ``codec`` None (stored as is), ``zstd`` or ``lz4`` (one frame)."""
    if codec is None:
        return raw
    if codec not in _CODECS:
        raise UnsupportedFeature(f"{source}: unsupported Puffin compression codec {codec!r}")
    try:
        return bytes(cramjam.lz4.decompress(raw)) if codec == "lz4" else _unzstd(raw)
    except Exception as exc:  # cramjam.DecompressionError, zstandard.ZstdError, ValueError
        raise DataFileError(f"{source}: {codec} data does not decompress: {exc}") from None


def _unzstd(raw: bytes) -> bytes:
    """One complete zstd frame (with or without its content size), nothing after it."""
    d = zstandard.ZstdDecompressor().decompressobj()
    out = d.decompress(raw)
    if not d.eof:
        raise ValueError("truncated zstd frame")
    if d.unused_data:
        raise ValueError(f"{len(d.unused_data)} bytes follow the zstd frame")
    return out


def _open(io: FileIO, path: str) -> BinaryIO:
    try:
        return io.open_input(path)
    except FileNotFoundError:
        raise DataFileError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc}") from None


def _read_at(f: BinaryIO, offset: int, length: int, path: str) -> bytes:
    try:
        f.seek(offset)
        out = bytes(f.read(length))
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read {length} bytes at offset {offset}: {exc}") from None
    if len(out) != length:
        raise DataFileError(f"{path}: truncated: {len(out)} of {length} bytes at offset {offset}")
    return out


def _footer_start(tail: bytes, size: int, source: str) -> tuple[int, int, bytes]:
    """Where the footer's leading magic starts, the payload size and the flags, from the last 12 bytes."""
    if tail[-4:] != MAGIC:
        raise DataFileError(f"{source}: not a Puffin file: ends with {tail[-4:]!r}, not the magic {MAGIC!r}")
    (payload_size,) = struct.unpack("<i", tail[:4])
    start = size - _TAIL - payload_size - len(MAGIC)
    if payload_size < 0 or start < len(MAGIC):
        raise DataFileError(
            f"{source}: corrupt Puffin footer: payload size {payload_size} does not fit in {size} bytes"
        )
    return start, payload_size, tail[4:8]


def _parse(
    head: bytes, footer: bytes, size: int, payload_size: int, flags: bytes, source: str
) -> PuffinFooter:
    if head != MAGIC:
        raise DataFileError(f"{source}: not a Puffin file: starts with {head!r}, not the magic {MAGIC!r}")
    if footer[:4] != MAGIC:
        raise DataFileError(
            f"{source}: corrupt Puffin footer: no magic at offset {size - len(footer)} "
            f"(payload size {payload_size})"
        )
    if flags[0] & ~_FOOTER_COMPRESSED or any(flags[1:]):
        raise UnsupportedFeature(f"{source}: Puffin footer flags {flags.hex()} set reserved bits")
    payload = footer[4 : 4 + payload_size]
    if flags[0] & _FOOTER_COMPRESSED:
        payload = decompress(payload, "lz4", source=f"{source} (footer)")
    try:
        doc = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DataFileError(f"{source}: corrupt Puffin footer: not UTF-8 JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("blobs"), list):
        raise DataFileError(f"{source}: corrupt Puffin footer: no 'blobs' list")
    footer_start = size - len(footer)
    blobs = tuple(_blob(b, i, footer_start, source) for i, b in enumerate(doc["blobs"]))
    properties = _properties(doc.get("properties"), f"{source}: Puffin footer")
    return PuffinFooter(source, size, len(footer), blobs, properties)


def _blob(doc: Any, index: int, footer_start: int, source: str) -> BlobMetadata:
    where = f"{source}: Puffin footer blob {index}"
    if not isinstance(doc, dict):
        raise DataFileError(f"{where} is not a JSON object")
    kind = _get(doc, "type", str, where)
    fields = doc.get("fields")
    if not isinstance(fields, list) or not all(_is_int(x) for x in fields):
        raise DataFileError(f"{where}: 'fields' must be a list of field ids, not {fields!r}")
    offset, length = _get(doc, "offset", int, where), _get(doc, "length", int, where)
    if offset < len(MAGIC) or length < 0 or offset + length > footer_start:
        raise DataFileError(
            f"{where}: blob at offset {offset} ({length} bytes) lies outside the blob area "
            f"[{len(MAGIC)}, {footer_start})"
        )
    codec = doc.get("compression-codec")
    if codec is not None and not isinstance(codec, str):
        raise DataFileError(f"{where}: 'compression-codec' must be a string, not {codec!r}")
    if codec is not None and codec not in _CODECS:
        raise UnsupportedFeature(
            f"{source} (blob at offset {offset}): unsupported Puffin compression codec {codec!r}"
        )
    return BlobMetadata(
        type=kind,
        fields=tuple(fields),
        snapshot_id=_get(doc, "snapshot-id", int, where),
        sequence_number=_get(doc, "sequence-number", int, where),
        offset=offset,
        length=length,
        compression_codec=codec,
        properties=_properties(doc.get("properties"), where),
    )


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _get(doc: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = doc.get(key)
    if not (_is_int(value) if kind is int else isinstance(value, kind)):
        expected = "an integer" if kind is int else "a string"
        raise DataFileError(f"{where}: {key!r} must be {expected}, not {value!r}")
    return value


def _properties(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise DataFileError(f"{where}: 'properties' must map strings to strings, not {value!r}")
    return dict(value)


# -- writing -------------------------------------------------------------------------------------------


def write_puffin(blobs: Sequence[Blob], properties: Mapping[str, str] | None = None) -> bytes:
    """A whole Puffin file holding ``blobs`` in order (footer uncompressed, as Iceberg Java writes it).

    Blob ``i`` starts at ``4 + sum of the stored lengths before it``; :func:`parse_footer` on the result
    gives each blob's offset and length (what a manifest's ``content_offset``/``content_size_in_bytes``
    must say for a deletion vector).
    """
    parts = [MAGIC]
    offset = len(MAGIC)
    entries: list[dict[str, Any]] = []
    for blob in blobs:
        stored = _compress(blob)
        entry: dict[str, Any] = {
            "type": blob.type,
            "fields": [int(f) for f in blob.fields],
            "snapshot-id": int(blob.snapshot_id),
            "sequence-number": int(blob.sequence_number),
            "offset": offset,
            "length": len(stored),
        }
        if blob.compression_codec is not None:
            entry["compression-codec"] = blob.compression_codec
        if blob.properties:
            entry["properties"] = dict(blob.properties)
        entries.append(entry)
        parts.append(stored)
        offset += len(stored)
    doc: dict[str, Any] = {"blobs": entries}
    if properties:
        doc["properties"] = dict(properties)
    payload = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    parts += [MAGIC, payload, struct.pack("<i", len(payload)), bytes(4), MAGIC]
    return b"".join(parts)


def _compress(blob: Blob) -> bytes:
    if blob.compression_codec is None:
        return bytes(blob.data)
    if blob.compression_codec not in _WRITE_CODECS:
        raise UnsupportedFeature(
            f"cannot write a {blob.type!r} blob with compression codec {blob.compression_codec!r}: "
            f"use one of {_WRITE_CODECS} or None"
        )
    # level 3 with a content checksum: the frames Iceberg Java writes
    return zstandard.ZstdCompressor(level=3, write_checksum=True).compress(bytes(blob.data))

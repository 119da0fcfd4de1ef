"""Manifest lists (spec "Manifest Lists", v1-v3) read with fastavro, and the Avro reading they share with
manifests (:mod:`gpu_engine.iceberg.manifests`).

Fields are resolved by Iceberg field id (``field-id`` in the Avro schema), falling back to the v1/v2 names,
so v1 lists (``added_data_files_count``, no ``content``/sequence numbers) and v2/v3 lists read alike.
v1 defaults: content data (0), sequence_number and min_sequence_number 0.

Every failure (missing file, not Avro, truncated or corrupt data, required fields absent) raises
:class:`~gpu_engine.errors.ManifestError` naming the file; a partial result is never returned.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, BinaryIO, cast

import fastavro

from ..errors import ManifestError
from ..io.paths import PathMap

OpenInput = Callable[[str], BinaryIO]
"""Opens a file for binary reading; the seam where a FileIO plugs in (defaults to the local filesystem)."""

_MAGIC = b"Obj\x01"
_SYNC_SIZE = 16


def open_local(path: str) -> BinaryIO:
    """Open a local file; ``file:`` URIs (``file:/x``, ``file:///x``) are accepted too."""
    if path.startswith("file://"):
        path = path[len("file://") :]
        if not path.startswith("/"):  # file://host/x: keep the path part
            path = path[path.find("/") :] if "/" in path else path
    elif path.startswith("file:"):
        path = path[len("file:") :]
    return open(path, "rb")


# -- Avro container files -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AvroContents:
    """A whole Avro object container file: writer schema (with logical types), key-value metadata, records.

    Records are decoded with logical types *ignored*: dates, times and timestamps stay ints, decimals and
    uuids stay bytes (the Iceberg physical values), so no value is converted per record in Python.
    """

    path: str
    schema_json: str
    schema: dict[str, Any]  # shared between files with the same schema: never mutate
    metadata: dict[str, str]
    records: list[dict[str, Any]]


@dataclass(frozen=True)
class AvroHeader:
    """A checked Avro object container header, with the whole file's bytes."""

    path: str
    data: bytes
    raw_meta: dict[str, bytes]
    header_end: int  # where the header's sync marker ends and the first block begins, minus 16
    schema_json: str
    schema: dict[str, Any]
    schema_without_logical_types: bytes

    @property
    def user_metadata(self) -> dict[str, str]:
        return {k: v.decode("utf-8") for k, v in self.raw_meta.items() if not k.startswith("avro.")}

    @property
    def codec(self) -> str:
        return self.raw_meta.get("avro.codec", b"null").decode("utf-8") or "null"


def read_header(path: str, open_input: OpenInput = open_local) -> AvroHeader:
    """Read an Avro object container file and check its header (magic, metadata, a record schema), or
    raise :class:`ManifestError` naming ``path``."""
    try:
        with open_input(path) as f:
            data = bytes(f.read())
    except FileNotFoundError:
        raise ManifestError(f"{path}: file not found") from None
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from None
    if data[:4] != _MAGIC:
        what = "empty file" if not data else f"starts with {data[:4]!r}, not the Avro magic 'Obj\\x01'"
        raise ManifestError(f"{path}: not an Avro object container file ({what})")
    try:
        raw_meta, header_end = _parse_header(data)
        metadata = {k: v.decode("utf-8") for k, v in raw_meta.items()}
        schema_json = metadata["avro.schema"]
        schema, stripped = _parse_schema(schema_json)
    except (ValueError, KeyError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: corrupt Avro header: {type(exc).__name__}: {exc}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ManifestError(f"{path}: Avro schema is not a record: {schema_json[:200]}")
    return AvroHeader(path, data, raw_meta, header_end, schema_json, schema, stripped)


def read_avro(path: str, open_input: OpenInput = open_local) -> AvroContents:
    """Read an Avro object container file completely, or raise :class:`ManifestError` naming ``path``."""
    header = read_header(path, open_input)
    raw_meta = dict(header.raw_meta)
    raw_meta["avro.schema"] = header.schema_without_logical_types
    rewritten = _encode_header(raw_meta) + header.data[header.header_end :]
    try:
        records = cast(list[dict[str, Any]], list(fastavro.reader(io.BytesIO(rewritten))))
    except Exception as exc:  # fastavro raises EOFError, ValueError, struct/zlib errors, ...
        raise ManifestError(f"{path}: corrupt or truncated Avro data: {type(exc).__name__}: {exc}") from None
    return AvroContents(path, header.schema_json, header.schema, header.user_metadata, records)


@lru_cache(maxsize=256)
def _parse_schema(schema_json: str) -> tuple[Any, bytes]:
    """The writer schema, and its JSON without logical types (cached: manifests share a few schemas)."""
    schema = json.loads(schema_json)
    return schema, json.dumps(_strip_logical_types(schema)).encode()


def _read_long(buf: bytes, pos: int) -> tuple[int, int]:
    shift = acc = 0
    while True:
        if pos >= len(buf):
            raise ValueError("header ends inside a number")
        b = buf[pos]
        pos += 1
        acc |= (b & 0x7F) << shift
        if not b & 0x80:
            return (acc >> 1) ^ -(acc & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("malformed variable-length number")


def _write_long(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _read_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _read_long(buf, pos)
    if n < 0 or pos + n > len(buf):
        raise ValueError("header ends inside a metadata entry")
    return buf[pos : pos + n], pos + n


def _parse_header(buf: bytes) -> tuple[dict[str, bytes], int]:
    """The header's metadata map and the offset of its sync marker."""
    pos = len(_MAGIC)
    meta: dict[str, bytes] = {}
    while True:
        count, pos = _read_long(buf, pos)
        if count == 0:
            break
        if count < 0:  # a block with its byte size
            count = -count
            _, pos = _read_long(buf, pos)
        for _ in range(count):
            key, pos = _read_bytes(buf, pos)
            value, pos = _read_bytes(buf, pos)
            meta[key.decode("utf-8")] = value
    if pos + _SYNC_SIZE > len(buf):
        raise ValueError("header ends before its sync marker")
    return meta, pos


def _encode_header(meta: dict[str, bytes]) -> bytes:
    out = [_MAGIC, _write_long(len(meta))]
    for key, value in meta.items():
        k = key.encode("utf-8")
        out += [_write_long(len(k)), k, _write_long(len(value)), value]
    out.append(_write_long(0))
    return b"".join(out)


def _strip_logical_types(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_logical_types(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [_strip_logical_types(s) for s in schema]
    return schema


def record_fields(path: str, record: dict[str, Any], what: str) -> dict[int, str]:
    """Avro field names of ``record`` by Iceberg field id (fields without ``field-id`` are left out)."""
    out: dict[int, str] = {}
    for f in record.get("fields", []):
        if "field-id" in f:
            try:
                out[int(f["field-id"])] = f["name"]
            except (TypeError, ValueError):
                raise ManifestError(f"{path}: {what} field {f.get('name')!r} has a bad field-id") from None
    return out


def resolve(
    path: str, record: dict[str, Any], wanted: dict[int, tuple[str, ...]], required: set[int], what: str
) -> dict[int, str]:
    """Map each wanted field id to its Avro field name: by ``field-id``, else by any of the known names."""
    by_id = record_fields(path, record, what)
    names = {f["name"] for f in record.get("fields", [])}
    out: dict[int, str] = {}
    for fid, candidates in wanted.items():
        if fid in by_id:
            out[fid] = by_id[fid]
        else:
            found = next((n for n in candidates if n in names), None)
            if found is not None:
                out[fid] = found
    missing = sorted(required - set(out))
    if missing:
        lacking = ", ".join(f"{wanted[i][0]} (id {i})" for i in missing)
        raise ManifestError(f"{path}: {what} schema lacks required field(s) {lacking}")
    return out


# -- manifest lists -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSummary:
    """Partition field summary (field id 508): bounds as Appendix D bytes of the partition field's type."""

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(frozen=True)
class ManifestFile:
    """One manifest tracked by a snapshot (a manifest list entry), with v1 defaults applied.

    ``manifest_length`` and ``partition_spec_id`` are ``None`` only for manifests named by a v1 snapshot's
    ``manifests`` field (:func:`manifest_files_from_paths`); the reader then takes the spec id from the
    manifest's own metadata (``partition-spec-id``, else 0).
    """

    manifest_path: str
    manifest_length: int | None
    partition_spec_id: int | None
    content: int = 0  # 0 data, 1 deletes
    sequence_number: int = 0
    min_sequence_number: int = 0
    added_snapshot_id: int | None = None
    added_files_count: int | None = None
    existing_files_count: int | None = None
    deleted_files_count: int | None = None
    added_rows_count: int | None = None
    existing_rows_count: int | None = None
    deleted_rows_count: int | None = None
    partitions: tuple[FieldSummary, ...] | None = None
    key_metadata: bytes | None = None
    first_row_id: int | None = None

    @property
    def is_delete_manifest(self) -> bool:
        return self.content == 1

    def has_added_files(self) -> bool:
        """False only when the list says there are none (a null count is assumed non-zero)."""
        return self.added_files_count is None or self.added_files_count > 0

    def has_existing_files(self) -> bool:
        return self.existing_files_count is None or self.existing_files_count > 0

    @property
    def entry_count(self) -> int | None:
        """Added + existing + deleted entries, when the list records all three counts."""
        counts = (self.added_files_count, self.existing_files_count, self.deleted_files_count)
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


# field id -> accepted names (the first is the spec's current name)
# fmt: off
_LIST_FIELDS: dict[int, tuple[str, ...]] = {
    500: ("manifest_path",), 501: ("manifest_length",), 502: ("partition_spec_id",), 517: ("content",),
    515: ("sequence_number",), 516: ("min_sequence_number",), 503: ("added_snapshot_id",),
    504: ("added_files_count", "added_data_files_count"),
    505: ("existing_files_count", "existing_data_files_count"),
    506: ("deleted_files_count", "deleted_data_files_count"),
    512: ("added_rows_count",), 513: ("existing_rows_count",), 514: ("deleted_rows_count",),
    507: ("partitions",), 519: ("key_metadata",), 520: ("first_row_id",),
}
_SUMMARY_FIELDS: dict[int, tuple[str, ...]] = {
    509: ("contains_null",), 518: ("contains_nan",), 510: ("lower_bound",), 511: ("upper_bound",),
}
# fmt: on
_LIST_REQUIRED = {500, 501, 502, 503}


def read_manifest_list(
    path: str, *, path_map: PathMap | None = None, open_input: OpenInput = open_local
) -> tuple[ManifestFile, ...]:
    """The manifests of a snapshot's manifest list (v1-v3), in list order; ``manifest_path`` remapped."""
    avro = read_avro(path, open_input)
    names = resolve(path, avro.schema, _LIST_FIELDS, _LIST_REQUIRED, "manifest list")
    summary_names = _summary_names(path, avro.schema, names.get(507))
    try:
        return tuple(_manifest_file(rec, names, summary_names, path_map) for rec in avro.records)
    except (KeyError, TypeError, ValueError) as exc:
        raise ManifestError(f"{path}: malformed manifest list entry: {type(exc).__name__}: {exc}") from None


def check_listed_totals(
    path: str, snapshot_id: int, summary: Mapping[str, str] | None, manifests: Sequence[ManifestFile]
) -> None:
    """:class:`ManifestError` where the live file counts of the ``manifests`` a snapshot's manifest list
    at ``path`` lists do not add up to its summary's ``total-data-files`` / ``total-delete-files`` (where
    both are known): an Avro file cut at a block boundary, or written again empty, still parses, and every
    reader of it (a scan, an expiry, an orphan removal, a commit on top of it) would lose its files."""
    for content, key in ((0, "total-data-files"), (1, "total-delete-files")):
        counts = [(m.added_files_count, m.existing_files_count) for m in manifests if m.content == content]
        if summary is None or key not in summary or any(a is None or e is None for a, e in counts):
            continue
        try:
            expected = int(summary[key])
        except ValueError:
            continue
        live = sum((a or 0) + (e or 0) for a, e in counts)
        if live != expected:
            raise ManifestError(
                f"manifest list {path} lists {live} live {key[6:]} but snapshot {snapshot_id}'s summary "
                f"records {key}={expected}: the manifest list is truncated or inconsistent"
            )


def _summary_names(path: str, schema: dict[str, Any], partitions_name: str | None) -> dict[int, str]:
    if partitions_name is None:
        return {}
    field = next(f for f in schema["fields"] if f["name"] == partitions_name)
    array = _non_null(field["type"])
    item = array.get("items") if isinstance(array, dict) else None
    if not isinstance(item, dict) or item.get("type") != "record":
        raise ManifestError(f"{path}: manifest list field {partitions_name!r} is not a list of field_summary")
    return resolve(path, item, _SUMMARY_FIELDS, {509}, "field_summary")


def _non_null(avro_type: Any) -> Any:
    if isinstance(avro_type, list):
        branches = [b for b in avro_type if b != "null"]
        return branches[0] if len(branches) == 1 else avro_type
    return avro_type


def _manifest_file(
    rec: dict[str, Any], names: dict[int, str], summary: dict[int, str], path_map: PathMap | None
) -> ManifestFile:
    def get(fid: int, default: Any = None) -> Any:
        name = names.get(fid)
        value = rec.get(name) if name is not None else None
        return default if value is None else value

    for fid in _LIST_REQUIRED:
        if get(fid) is None:
            raise ValueError(f"required field {_LIST_FIELDS[fid][0]} is null")
    parts = get(507)
    path = str(get(500))
    return ManifestFile(
        manifest_path=path_map.apply(path) if path_map else path,
        manifest_length=int(get(501)),
        partition_spec_id=int(get(502)),
        content=int(get(517, 0)),
        sequence_number=int(get(515, 0)),
        min_sequence_number=int(get(516, 0)),
        added_snapshot_id=int(get(503)),
        added_files_count=_opt_int(get(504)),
        existing_files_count=_opt_int(get(505)),
        deleted_files_count=_opt_int(get(506)),
        added_rows_count=_opt_int(get(512)),
        existing_rows_count=_opt_int(get(513)),
        deleted_rows_count=_opt_int(get(514)),
        partitions=None if parts is None else tuple(_field_summary(p, summary) for p in parts),
        key_metadata=_opt_bytes(get(519)),
        first_row_id=_opt_int(get(520)),
    )


def _field_summary(rec: dict[str, Any], names: dict[int, str]) -> FieldSummary:
    def get(fid: int) -> Any:
        return rec.get(names[fid]) if fid in names else None

    nan = get(518)
    return FieldSummary(
        contains_null=bool(get(509)),
        contains_nan=None if nan is None else bool(nan),
        lower_bound=_opt_bytes(get(510)),
        upper_bound=_opt_bytes(get(511)),
    )


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def manifest_files_from_paths(
    paths: Sequence[str], *, snapshot_id: int | None = None, path_map: PathMap | None = None
) -> tuple[ManifestFile, ...]:
    """Manifests named directly by a v1 snapshot's ``manifests`` field (no manifest list).

    As Iceberg Java does for such snapshots: content data, sequence numbers 0, ``added_snapshot_id`` the
    snapshot's id, counts, partition summaries and length unknown; the spec id is read from each manifest.
    """
    return tuple(
        ManifestFile(
            manifest_path=path_map.apply(p) if path_map else p,
            manifest_length=None,
            partition_spec_id=None,
            added_snapshot_id=snapshot_id,
        )
        for p in paths
    )

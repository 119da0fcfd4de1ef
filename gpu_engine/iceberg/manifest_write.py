"""Writing manifests and manifest lists (spec "Manifests", "Manifest Lists", v1-v3) with fastavro.

:func:`write_manifest` writes :class:`ManifestEntry` rows and returns the manifest's list row (counts per
status, partition field summaries, length); its sequence numbers stay :data:`UNASSIGNED_SEQ` (v2+) until
:func:`write_manifest_list` assigns the snapshot's, and, in v3, the data manifests' ``first_row_id`` ("First
Row ID Assignment": + ``added_rows_count`` + ``existing_rows_count`` per assigned manifest, in order).
``None`` snapshot ids and sequence numbers of entries are written as null, to be inherited (v1 writes the
manifest's snapshot id and no sequence numbers). Files are built in memory and created exclusively with
``FileIO.write_bytes`` (``FileExistsError`` if present). What a format version cannot represent, or a value
that does not fit its type, raises :class:`ManifestError`. Partition values use :mod:`.serde`'s forms.
"""

from __future__ import annotations

import io as _io
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

import fastavro

from ..errors import GpuEngineError, ManifestError
from ..io.fileio import FileIO
from . import serde
from . import types as it
from .content_file import DATA, EQUALITY_DELETES, POSITION_DELETES, ContentFile
from .manifest_list import FieldSummary, ManifestFile
from .manifest_schemas import (
    DEFAULT_BLOCK_SIZE,
    FORMAT_VERSIONS,
    avro_field_name,
    manifest_entry_schema,
    manifest_list_schema,
    map_datum,
    partition_datum,
)
from .manifests import ADDED, DELETED, EXISTING, STATS_COLUMNS
from .partitioning import PartitionSpec, spec_to_json
from .schema import Schema, schema_to_json

UNASSIGNED_SEQ = -1
"""Sequence number of a manifest written but not yet committed (assigned by the manifest list)."""
DEFAULT_CODEC = "deflate"  # what Iceberg Java writes by default (write.avro.compression-codec = gzip)
ManifestContent = Literal["data", "deletes"]
_STATUSES = {EXISTING: "EXISTING", ADDED: "ADDED", DELETED: "DELETED"}


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest row: status (:data:`~.manifests.ADDED`, ``EXISTING``, ``DELETED``), tracking ids, file.

    ``None`` snapshot id or sequence numbers are written as null and inherited from the manifest list row.
    """

    status: int
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    file: ContentFile

    @classmethod
    def added(cls, file: ContentFile, *, snapshot_id: int | None = None) -> ManifestEntry:
        """A new file: sequence numbers (and, by default, the snapshot id) inherited at commit."""
        return cls(ADDED, snapshot_id, None, None, file)


@dataclass(frozen=True)
class WrittenManifestList:
    """What :func:`write_manifest_list` wrote: the rows as written (sequence numbers and row ids assigned)."""

    path: str
    length: int
    manifests: tuple[ManifestFile, ...]
    added_rows: int | None  # v3: row ids assigned by this list (the snapshot's ``added-rows``); else None
    next_row_id: int | None  # v3: ``first_row_id + added_rows`` (the table's new ``next-row-id``); else None


def is_unassigned(sequence_number: int | None) -> bool:
    """True for a manifest sequence number still to be assigned at commit."""
    return sequence_number is None or sequence_number == UNASSIGNED_SEQ


# -- manifests ------------------------------------------------------------------------------------------


def write_manifest(
    io: FileIO,
    path: str,
    *,
    format_version: int,
    spec: PartitionSpec,
    schema: Schema,
    content: ManifestContent,
    snapshot_id: int,
    entries: Sequence[ManifestEntry],
    codec: str = DEFAULT_CODEC,
) -> ManifestFile:
    """Write a manifest of ``entries`` at ``path`` (create-exclusive); its manifest list row."""
    _check_version(format_version, path)
    if content not in ("data", "deletes"):
        raise ManifestError(f"{path}: manifest content must be 'data' or 'deletes', not {content!r}")
    if format_version == 1 and content != "data":
        raise ManifestError(f"{path}: format version 1 has no delete manifests")
    ptype = spec.partition_type(schema)
    try:
        avro_schema = fastavro.parse_schema(manifest_entry_schema(format_version, ptype))
    except ManifestError as exc:
        raise ManifestError(f"{path}: {exc}") from None
    stats = _Stats(ptype)
    records = []
    for entry in entries:
        _check_entry(path, format_version, content, spec, entry)
        stats.add(path, entry)  # first: it checks the partition values, naming the file and field
        records.append(_entry_record(format_version, snapshot_id, ptype, entry))
    metadata = {
        "schema": json.dumps(schema_to_json(schema), separators=(",", ":")),
        "schema-id": str(schema.schema_id),
        "partition-spec": json.dumps(spec_to_json(spec)["fields"], separators=(",", ":")),
        "partition-spec-id": str(spec.spec_id),
        "format-version": str(format_version),
    }
    if format_version >= 2:
        metadata["content"] = content
    data = _container(path, avro_schema, records, metadata, codec)
    io.write_bytes(path, data)
    v1 = format_version == 1
    return ManifestFile(
        manifest_path=path,
        manifest_length=len(data),
        partition_spec_id=spec.spec_id,
        content=0 if content == "data" else 1,
        sequence_number=0 if v1 else UNASSIGNED_SEQ,
        min_sequence_number=0 if v1 else (UNASSIGNED_SEQ if stats.min_seq is None else stats.min_seq),
        added_snapshot_id=snapshot_id,
        added_files_count=stats.files[ADDED],
        existing_files_count=stats.files[EXISTING],
        deleted_files_count=stats.files[DELETED],
        added_rows_count=stats.rows[ADDED],
        existing_rows_count=stats.rows[EXISTING],
        deleted_rows_count=stats.rows[DELETED],
        partitions=stats.summaries(),
    )


def _check_version(format_version: int, path: str) -> None:
    if format_version not in FORMAT_VERSIONS:
        raise ManifestError(f"{path}: cannot write format version {format_version} (supported: 1, 2, 3)")


_FORMATS = frozenset({"PARQUET", "AVRO", "ORC", "PUFFIN"})  # the spec's file_format values


def _check_entry(path: str, v: int, content: str, spec: PartitionSpec, entry: ManifestEntry) -> None:
    f = entry.file

    def fail(why: str) -> ManifestError:
        return ManifestError(f"{path}: entry for {f.path!r}: {why}")

    if entry.status not in _STATUSES:
        raise fail(f"invalid status {entry.status} (0 EXISTING, 1 ADDED, 2 DELETED)")
    if entry.status == EXISTING and entry.snapshot_id is None:
        raise fail("an EXISTING entry must carry the id of the snapshot that added the file")
    if v >= 2 and entry.status != ADDED and None in (entry.sequence_number, entry.file_sequence_number):
        raise fail(f"a {_STATUSES[entry.status]} entry must carry its data and file sequence numbers")
    if f.content not in (DATA, POSITION_DELETES, EQUALITY_DELETES):
        raise fail(f"invalid content {f.content}")
    if (f.content == DATA) != (content == "data"):
        raise fail(f"a {'data' if f.content == DATA else 'delete'} file cannot go in a {content} manifest")
    if f.spec_id != spec.spec_id:
        raise fail(f"partition spec {f.spec_id} differs from the manifest's spec {spec.spec_id}")
    if f.file_format.upper() not in _FORMATS:  # readers refuse others ('CSV' is not a valid FileFormat)
        raise fail(f"file_format {f.file_format!r}: expected one of {sorted(_FORMATS)}")
    for name in ("record_count", "file_size_in_bytes"):
        value = getattr(f, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise fail(f"{name} {value!r} is not a count (a non-negative integer)")
    if not isinstance(f.partition, (tuple, list)):
        raise fail(f"partition {f.partition!r} is not a tuple of the spec's values (() when unpartitioned)")
    if len(f.partition) != len(spec.fields):
        raise fail(
            f"partition tuple has {len(f.partition)} values, spec {spec.spec_id} has {len(spec.fields)}"
        )
    if f.content == EQUALITY_DELETES and not f.equality_ids:
        raise fail("equality delete files require equality_ids")
    if f.content != DATA and f.first_row_id is not None:
        raise fail("delete files have no first_row_id")
    if (f.content_offset is None) != (f.content_size_in_bytes is None):
        raise fail("content_offset and content_size_in_bytes go together")
    is_dv = f.file_format.upper() == "PUFFIN"
    if is_dv and (
        f.content != POSITION_DELETES or f.referenced_data_file is None or f.content_offset is None
    ):
        raise fail("a deletion vector is a position delete with referenced_data_file and content offset/size")
    unsupported = {
        "first_row_id": v < 3 and f.first_row_id is not None,
        "content_offset": v < 3 and f.content_offset is not None,
        "deletion vectors": v < 3 and is_dv,
        "referenced_data_file": v < 2 and f.referenced_data_file is not None,
        "equality_ids": v < 2 and f.equality_ids is not None,
    }
    for what, bad in unsupported.items():
        if bad:
            raise fail(f"format version {v} cannot record {what}")
    if v >= 3 and entry.status == ADDED and f.content == POSITION_DELETES and not is_dv:
        raise fail("format version 3 adds position deletes only as deletion vectors")


_PLAIN = ("content", "record_count", "file_size_in_bytes", "key_metadata", "sort_order_id", "first_row_id",
          "referenced_data_file", "content_offset", "content_size_in_bytes")  # fmt: skip


def _entry_record(v: int, snapshot_id: int, ptype: it.StructType, entry: ManifestEntry) -> dict[str, Any]:
    f = entry.file
    data_file: dict[str, Any] = {name: getattr(f, name) for name in _PLAIN}
    data_file |= {name: map_datum(getattr(f, name)) for name in STATS_COLUMNS}
    data_file |= {
        "file_path": f.path,
        "file_format": f.file_format.upper(),
        "partition": {
            avro_field_name(pf.name): partition_datum(pf.type, value)
            for pf, value in zip(ptype.fields, f.partition, strict=True)
        },
        "block_size_in_bytes": DEFAULT_BLOCK_SIZE,
        "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
        "equality_ids": None if f.equality_ids is None else list(f.equality_ids),
    }
    if v == 1:  # snapshot_id is required; no sequence numbers
        sid = snapshot_id if entry.snapshot_id is None else entry.snapshot_id
        return {"status": entry.status, "snapshot_id": sid, "data_file": data_file}
    return {
        "status": entry.status,
        "snapshot_id": entry.snapshot_id,
        "sequence_number": entry.sequence_number,
        "file_sequence_number": entry.file_sequence_number,
        "data_file": data_file,
    }


# -- partition summaries and counts ---------------------------------------------------------------------


def _order_key(t: it.PrimitiveType) -> Callable[[Any], Any]:
    """Sort key of partition values of ``t``: -0.0 before +0.0, uuids by their bytes (unsigned)."""
    if t.name in ("float", "double"):
        return lambda v: (v, math.copysign(1.0, v) > 0)
    if t.name == "uuid":
        return lambda v: serde.to_bytes(t, v)
    return lambda v: v


class _Stats:
    """Counts per status, the lowest live data sequence number and partition field summaries."""

    def __init__(self, ptype: it.StructType) -> None:
        self.types = [f.type if isinstance(f.type, it.PrimitiveType) else it.UNKNOWN for f in ptype.fields]
        self.names = [f.name for f in ptype.fields]
        self.files = dict.fromkeys(_STATUSES, 0)
        self.rows = dict.fromkeys(_STATUSES, 0)
        self.min_seq: int | None = None
        self.nulls = [False] * len(self.types)
        self.nans = [False] * len(self.types)
        self.lower: list[Any] = [None] * len(self.types)
        self.upper: list[Any] = [None] * len(self.types)
        self.keys = [_order_key(t) for t in self.types]

    def add(self, path: str, entry: ManifestEntry) -> None:
        self.files[entry.status] += 1
        self.rows[entry.status] += entry.file.record_count
        seq = entry.sequence_number
        if entry.status != DELETED and seq is not None and (self.min_seq is None or seq < self.min_seq):
            self.min_seq = seq
        for i, value in enumerate(entry.file.partition):
            if value is None:
                self.nulls[i] = True
                continue
            t = self.types[i]
            if t == it.UNKNOWN:
                raise ManifestError(
                    f"{path}: {entry.file.path!r}: partition field {self.names[i]!r} has an unknown type, "
                    f"so its value must be null, not {value!r}"
                )
            try:
                serde.to_bytes(t, value)  # validates the value against the field's type
            except GpuEngineError as exc:
                raise ManifestError(
                    f"{path}: {entry.file.path!r}: partition field {self.names[i]!r}: {exc}"
                ) from None
            if t.name in ("float", "double") and math.isnan(value):
                self.nans[i] = True
                continue
            key = self.keys[i]
            if self.lower[i] is None or key(value) < key(self.lower[i]):
                self.lower[i] = value
            if self.upper[i] is None or key(value) > key(self.upper[i]):
                self.upper[i] = value

    def summaries(self) -> tuple[FieldSummary, ...]:
        def bound(t: it.PrimitiveType, value: Any) -> bytes | None:
            return None if value is None else serde.to_bytes(t, value)

        return tuple(
            FieldSummary(self.nulls[i], self.nans[i], bound(t, self.lower[i]), bound(t, self.upper[i]))
            for i, t in enumerate(self.types)
        )


def _container(
    path: str, schema: Any, records: list[dict[str, Any]], metadata: dict[str, str], codec: str
) -> bytes:
    buf = _io.BytesIO()
    try:
        fastavro.writer(buf, schema, records, codec=codec, metadata=metadata)
    except (TypeError, ValueError, OverflowError, KeyError, AttributeError) as exc:
        raise ManifestError(f"{path}: cannot encode as Avro: {type(exc).__name__}: {exc}") from None
    return buf.getvalue()


# -- manifest lists -------------------------------------------------------------------------------------


def write_manifest_list(
    io: FileIO,
    path: str,
    *,
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int | None,
    manifests: Sequence[ManifestFile],
    first_row_id: int | None = None,
    codec: str = DEFAULT_CODEC,
) -> WrittenManifestList:
    """Write the manifest list of snapshot ``snapshot_id`` at ``path`` (create-exclusive).

    ``sequence_number`` (v2+) is assigned to manifests whose own is unassigned (:func:`is_unassigned`),
    and to their unassigned ``min_sequence_number``; ``added_snapshot_id`` ``None`` becomes
    ``snapshot_id``. v3: ``first_row_id`` is the snapshot's (the table's ``next-row-id``), assigned to data
    manifests without one as "First Row ID Assignment" says.
    """
    _check_version(format_version, path)
    v = format_version
    if v >= 2 and sequence_number is None:
        raise ManifestError(
            f"{path}: a format version {v} manifest list needs the snapshot's sequence number"
        )
    if (v >= 3) != (first_row_id is not None):
        need = "needs the snapshot's first_row_id" if v >= 3 else "has no first_row_id"
        raise ManifestError(f"{path}: a format version {v} manifest list {need}")
    rows = []
    next_row_id = first_row_id
    for m in manifests:
        m, next_row_id = _assign(path, v, m, snapshot_id, sequence_number, next_row_id)
        rows.append(m)
    records = [_list_record(m) for m in rows]
    metadata = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": "null" if parent_snapshot_id is None else str(parent_snapshot_id),
        "format-version": str(v),
    }
    if v >= 2:
        metadata["sequence-number"] = str(sequence_number)
    if v >= 3:
        metadata["first-row-id"] = str(first_row_id)
    data = _container(path, fastavro.parse_schema(manifest_list_schema(v)), records, metadata, codec)
    io.write_bytes(path, data)
    added = None if next_row_id is None or first_row_id is None else next_row_id - first_row_id
    return WrittenManifestList(path, len(data), tuple(rows), added, next_row_id)


def _assign(
    path: str, v: int, m: ManifestFile, snapshot_id: int, seq: int | None, next_row_id: int | None
) -> tuple[ManifestFile, int | None]:
    """``m`` with inherited values assigned, and the next row id; :class:`ManifestError` if ``v`` cannot
    list it."""

    def fail(why: str) -> ManifestError:
        return ManifestError(f"{path}: manifest {m.manifest_path!r}: {why}")

    if m.manifest_length is None or m.partition_spec_id is None:
        raise fail("manifest_length and partition_spec_id are required")
    if m.content not in (0, 1) or (v == 1 and m.content != 0):
        raise fail(f"content {m.content} cannot be listed in format version {v}")
    counts = (m.added_files_count, m.existing_files_count, m.deleted_files_count)
    rows = (m.added_rows_count, m.existing_rows_count, m.deleted_rows_count)
    if v >= 2 and any(c is None for c in (*counts, *rows)):
        raise fail(f"format version {v} requires the file and row counts")
    changes: dict[str, Any] = {}
    if m.added_snapshot_id is None:
        changes["added_snapshot_id"] = snapshot_id
    if v >= 2 and seq is not None:
        if is_unassigned(m.sequence_number):
            changes["sequence_number"] = seq
        if is_unassigned(m.min_sequence_number):
            changes["min_sequence_number"] = seq
    if v < 3 and m.first_row_id is not None:
        raise fail(f"format version {v} has no first_row_id")
    if m.content == 1 and m.first_row_id is not None:
        raise fail("delete manifests have no first_row_id")
    if v >= 3 and m.content == 0 and m.first_row_id is None and next_row_id is not None:
        changes["first_row_id"] = next_row_id  # counts are known: checked above
        next_row_id += (m.added_rows_count or 0) + (m.existing_rows_count or 0)
    return (replace(m, **changes) if changes else m), next_row_id


def _list_record(m: ManifestFile) -> dict[str, Any]:
    """The ``manifest_file`` record: the dataclass fields are named as the spec's (summaries too)."""
    record = {name: getattr(m, name) for name in _MANIFEST_FILE_FIELDS}  # shallow: asdict deep-copies
    if m.partitions is not None:  # a list: fastavro reads a tuple in a union as (type name, value)
        record["partitions"] = [{name: getattr(s, name) for name in _SUMMARY_FIELDS} for s in m.partitions]
    return record


_MANIFEST_FILE_FIELDS = tuple(f.name for f in fields(ManifestFile))
_SUMMARY_FIELDS = tuple(f.name for f in fields(FieldSummary))

"""Manifests (spec "Manifests", v1-v3) decoded into one columnar Arrow table per manifest.

Columns: :data:`ENTRY_COLUMNS` (schema: :func:`entries_schema`), with every inheritance rule applied from the
listing :class:`ManifestFile`: a null ``snapshot_id`` takes its ``added_snapshot_id``; null data and file
sequence numbers take its ``sequence_number`` when the entry is ADDED or that number is 0 (v1 manifests have
no such columns and read 0); EXISTING/DELETED v2 entries lacking them stay null, as in Iceberg Java. A null
``first_row_id`` of a non-DELETED data file takes the manifest's ``first_row_id`` plus the record counts of
the preceding such files ("First Row ID Inheritance"; DELETED entries neither inherit nor count, as in Java);
delete files read null. ``spec_id`` is the manifest's; v1 ``content`` is 0.

DELETED entries (status 2) are kept: the planner filters them. ``file_path`` and ``referenced_data_file``
are remapped; ``file_format`` is upper-cased. ``partition`` holds Iceberg physical values typed by the
manifest's own partition record (its Avro schema, refined by the ``partition-spec``/``schema`` metadata),
children tagged with ``field_id``/``iceberg_type`` metadata. Bounds stay raw bytes: decode them per column
type with :func:`gpu_engine.iceberg.serde.decode_array`. The decoder: :mod:`.avro_fast`, or fastavro when
asked or for schemas the former rejects; the schema metadata ``decoder`` names it (and why, on a fallback).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import GpuEngineError, ManifestError
from ..io.paths import PathMap
from . import avro_fast, serde
from . import types as it
from .avro_schema import avro_names, field_type, iceberg_type, record_type
from .manifest_list import AvroContents, ManifestFile, OpenInput, open_local, read_avro, resolve
from .partitioning import spec_from_json
from .schema import schema_from_json

EXISTING, ADDED, DELETED = 0, 1, 2
DATA, POSITION_DELETES, EQUALITY_DELETES = 0, 1, 2

_COUNTS = pa.map_(pa.int32(), pa.int64())
_BOUNDS = pa.map_(pa.int32(), pa.binary())
# fmt: off
_ENTRY_FIELDS: dict[int, tuple[str, ...]] = {
    0: ("status",), 1: ("snapshot_id",), 3: ("sequence_number",), 4: ("file_sequence_number",),
    2: ("data_file",),
}
_ENTRY_TYPES = {0: pa.int32(), 1: pa.int64(), 3: pa.int64(), 4: pa.int64()}
# data_file field id -> (column name, Arrow type); partition (102) is typed per manifest
_FILE_FIELDS: dict[int, tuple[str, pa.DataType]] = {
    134: ("content", pa.int32()), 100: ("file_path", pa.string()), 101: ("file_format", pa.string()),
    102: ("partition", pa.null()), 103: ("record_count", pa.int64()), 104: ("file_size_in_bytes", pa.int64()),
    108: ("column_sizes", _COUNTS), 109: ("value_counts", _COUNTS), 110: ("null_value_counts", _COUNTS),
    137: ("nan_value_counts", _COUNTS), 125: ("lower_bounds", _BOUNDS), 128: ("upper_bounds", _BOUNDS),
    131: ("key_metadata", pa.binary()), 132: ("split_offsets", pa.list_(pa.int64())),
    135: ("equality_ids", pa.list_(pa.int32())), 140: ("sort_order_id", pa.int32()),
    142: ("first_row_id", pa.int64()), 143: ("referenced_data_file", pa.string()),
    144: ("content_offset", pa.int64()), 145: ("content_size_in_bytes", pa.int64()),
}
_FILE_REQUIRED = {100, 101, 102, 103, 104}
_NOT_NULL = ("status", "content", "file_path", "file_format", "spec_id", "partition", "record_count",
             "file_size_in_bytes", "manifest_path")
ENTRY_COLUMNS: tuple[str, ...] = (
    "status", "snapshot_id", "sequence_number", "file_sequence_number", "content", "file_path", "file_format",
    "spec_id", "partition", "record_count", "file_size_in_bytes", "column_sizes", "value_counts",
    "null_value_counts", "nan_value_counts", "lower_bounds", "upper_bounds", "key_metadata", "split_offsets",
    "equality_ids", "sort_order_id", "first_row_id", "referenced_data_file", "content_offset",
    "content_size_in_bytes", "manifest_path",
)
STATS_COLUMNS = ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                 "upper_bounds")
OPTIONAL_COLUMNS = (*STATS_COLUMNS, "key_metadata", "split_offsets", "equality_ids", "sort_order_id")
# fmt: on
Decoder = Literal["auto", "fast", "fastavro"]
_log = logging.getLogger("gpu_engine.iceberg.manifests")
_TYPES: dict[str, pa.DataType] = {
    **{_ENTRY_FIELDS[fid][0]: t for fid, t in _ENTRY_TYPES.items()},
    **{name: t for name, t in _FILE_FIELDS.values()},
    "spec_id": pa.int32(),
    "manifest_path": pa.string(),
}


@dataclass(frozen=True)
class PartitionField:
    """One field of a manifest's partition tuple, as written: Avro name, field id and Iceberg type."""

    avro_name: str
    field_id: int
    name: str
    type: it.PrimitiveType

    @property
    def arrow_field(self) -> pa.Field:
        meta = {b"field_id": str(self.field_id).encode(), b"iceberg_type": str(self.type).encode()}
        return pa.field(self.name, serde.physical_arrow_type(self.type), metadata=meta)


def entries_schema(partition_fields: Sequence[PartitionField] = ()) -> pa.Schema:
    """The Arrow schema of a manifest's entries table for a partition tuple of ``partition_fields``."""
    partition = pa.struct([f.arrow_field for f in partition_fields])
    return pa.schema(
        [
            pa.field(name, partition if name == "partition" else _TYPES[name], nullable=name not in _NOT_NULL)
            for name in ENTRY_COLUMNS
        ]
    )


def read_manifest(
    manifest: ManifestFile,
    *,
    path_map: PathMap | None = None,
    open_input: OpenInput = open_local,
    decoder: Decoder = "auto",
    stats_columns: Collection[int] | None = None,
    columns: Collection[str] | None = None,
) -> pa.Table:
    """The entries of one manifest as an Arrow table (see the module doc), inheritance applied.

    ``decoder``: "fast", "fastavro", or "auto" (fast unless it rejects the schema). ``stats_columns``: keep
    the entries of the :data:`STATS_COLUMNS` maps only for these field ids. ``columns``: which of
    :data:`OPTIONAL_COLUMNS` to materialise, the others read null (None: all).
    """
    if decoder not in ("auto", "fast", "fastavro"):
        raise ValueError(f"decoder must be 'auto', 'fast' or 'fastavro', not {decoder!r}")
    if columns is not None and not set(columns) <= set(OPTIONAL_COLUMNS):
        raise ValueError(f"columns {sorted(set(columns) - set(OPTIONAL_COLUMNS))} are not optional columns")
    keep = None if columns is None else frozenset(columns)
    stats = None if stats_columns is None else frozenset(stats_columns)
    try:
        return _entries_table(manifest, path_map, open_input, decoder, stats, keep)
    except ManifestError:
        raise
    except (pa.ArrowException, KeyError, TypeError, ValueError, OverflowError) as exc:
        raise ManifestError(
            f"{manifest.manifest_path}: malformed manifest entries: {type(exc).__name__}: {exc}"
        ) from None


def read_manifests(
    manifests: Sequence[ManifestFile],
    *,
    path_map: PathMap | None = None,
    open_input: OpenInput = open_local,
    max_workers: int | None = None,
    decoder: Decoder = "auto",
    stats_columns: Collection[int] | None = None,
    columns: Collection[str] | None = None,
) -> list[pa.Table]:
    """:func:`read_manifest` for each manifest, concurrently; tables in input order.

    If any manifest fails, the first failure (in input order) is raised: never a partial list.
    """
    read = partial(
        read_manifest, path_map=path_map, open_input=open_input, decoder=decoder,
        stats_columns=stats_columns, columns=columns,
    )  # fmt: skip
    if len(manifests) <= 1 or max_workers == 1:
        return [read(m) for m in manifests]
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="manifest-read")
    try:
        futures = [pool.submit(read, m) for m in manifests]
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # after a failure, pending reads are dropped


@dataclass(frozen=True)
class _Layout:
    """How to decode one manifest schema: Avro names by field id, the partition tuple, the Arrow type."""

    names: dict[int, str]
    file_names: dict[int, str]
    partition: tuple[PartitionField, ...]
    entry_struct: pa.StructType


_LAYOUTS: dict[tuple[str, str | None, str | None, int], _Layout] = {}


def _layout(avro: AvroContents, spec_id: int) -> _Layout:
    """The decoding layout of ``avro``'s schema, cached (only on success) since manifests share schemas."""
    key = (avro.schema_json, avro.metadata.get("partition-spec"), avro.metadata.get("schema"), spec_id)
    found = _LAYOUTS.get(key)
    if found is not None:
        return found
    path = avro.path
    named = dict(avro_names(avro.schema))
    names = resolve(path, avro.schema, _ENTRY_FIELDS, {0, 2}, "manifest_entry")
    df_schema = record_type(path, field_type(avro.schema, names[2]), named, "data_file")
    wanted: dict[int, tuple[str, ...]] = {fid: (name,) for fid, (name, _) in _FILE_FIELDS.items()}
    file_names = resolve(path, df_schema, wanted, _FILE_REQUIRED, "data_file")
    partition_schema = record_type(path, field_type(df_schema, file_names[102]), named, "partition")
    pfields = partition_fields(path, partition_schema, named, avro.metadata, spec_id)
    file_struct = pa.struct(
        [
            pa.field(file_names[fid], _convert_type(pfields) if fid == 102 else t)
            for fid, (_, t) in _FILE_FIELDS.items()
            if fid in file_names
        ]
    )
    entry_struct = pa.struct(
        [pa.field(names[fid], file_struct if fid == 2 else _ENTRY_TYPES[fid]) for fid in names]
    )
    layout = _Layout(names, file_names, pfields, entry_struct)
    if len(_LAYOUTS) > 256:
        _LAYOUTS.clear()
    _LAYOUTS[key] = layout
    return layout


def _wanted(column: str, keep: frozenset[str] | None) -> bool:
    return keep is None or column in keep or column not in OPTIONAL_COLUMNS


def _spec_id(manifest: ManifestFile, avro: AvroContents) -> int:
    spec_id = manifest.partition_spec_id
    return int(avro.metadata.get("partition-spec-id", 0)) if spec_id is None else spec_id


def _decode(
    manifest: ManifestFile, open_input: OpenInput, decoder: Decoder, stats: frozenset[int] | None,
    keep: frozenset[str] | None,
) -> tuple[AvroContents, _Layout, pa.StructArray, str]:  # fmt: skip
    """(contents without records, layout, the entries as decoded, the decoder tag)."""
    path, tag = manifest.manifest_path, "fastavro"
    if decoder != "fastavro":
        container = avro_fast.read_container(path, open_input)
        layout = _layout(container.avro, _spec_id(manifest, container.avro))
        df_name, entry, avro_name = layout.names[2], layout.entry_struct, layout.file_names.get
        drop = {avro_name(f) for f, (name, _) in _FILE_FIELDS.items() if not _wanted(name, keep)}
        df = pa.struct([f for f in entry.field(df_name).type if f.name not in drop])  # the columns kept
        target = pa.struct([f.with_type(df) if f.name == df_name else f for f in entry])
        maps = [(df_name, avro_name(f)) for f, (name, _) in _FILE_FIELDS.items() if name in STATS_COLUMNS]
        filters = {cast(tuple[str, ...], m): stats for m in maps if m[1] and stats is not None}
        try:
            program = avro_fast.program_for(container.avro, target, filters)
        except avro_fast.UnsupportedSchema as exc:
            if decoder == "fast":
                raise ManifestError(f"{path}: the fast Avro decoder cannot read this schema: {exc}") from None
            _log.debug("%s: decoding with fastavro: the fast decoder rejects the schema: %s", path, exc)
            tag = f"fastavro (the fast decoder rejects the schema: {exc})"
        else:
            return container.avro, layout, avro_fast.decode(container, program), "fast"
    avro = read_avro(path, open_input)
    layout = _layout(avro, _spec_id(manifest, avro))
    return avro, layout, pa.array(avro.records, type=layout.entry_struct), tag


def _entries_table(
    manifest: ManifestFile, path_map: PathMap | None, open_input: OpenInput, decoder: Decoder,
    stats: frozenset[int] | None, keep: frozenset[str] | None,
) -> pa.Table:  # fmt: skip
    avro, layout, decoded, tag = _decode(manifest, open_input, decoder, stats, keep)
    path, spec_id = avro.path, _spec_id(manifest, avro)
    names, file_names, pfields = layout.names, layout.file_names, layout.partition
    n = len(decoded)
    if n < (manifest.entry_count or 0):
        raise ManifestError(
            f"{path}: holds {n} entries but the manifest list counts {manifest.entry_count} (truncated?)"
        )
    data_file = decoded.field(names[2])
    cols: dict[str, pa.Array] = {"data_file": data_file}
    present = set(data_file.type.names)
    for fid, (name, t) in _FILE_FIELDS.items():
        found = _wanted(name, keep) and file_names.get(fid) in present
        cols[name] = data_file.field(file_names[fid]) if found else pa.nulls(n, t)
        if stats is not None and name in STATS_COLUMNS and tag != "fast":
            cols[name] = avro_fast.filter_map_keys(cols[name], stats)
    for fid, t in _ENTRY_TYPES.items():
        cols[_ENTRY_FIELDS[fid][0]] = decoded.field(names[fid]) if fid in names else pa.nulls(n, t)
    if 134 not in file_names:  # v1: every file is data
        cols["content"] = pa.array(np.zeros(n, dtype=np.int32))
    for name in ("data_file", *_NOT_NULL[:4], "record_count", "file_size_in_bytes"):
        if cols[name].null_count:
            raise ManifestError(f"{path}: required field {name} is null in {cols[name].null_count} entries")
    _check_codes(path, cols["status"], "status", (EXISTING, ADDED, DELETED))
    _check_codes(path, cols["content"], "content", (DATA, POSITION_DELETES, EQUALITY_DELETES))
    _inherit(manifest, cols)
    cols["partition"] = _finish_partition(cols["partition"], pfields)
    cols["spec_id"] = pa.array(np.full(n, spec_id, dtype=np.int32))
    cols["file_format"] = pc.utf8_upper(cols["file_format"])
    if path_map:
        cols["file_path"] = path_map.apply_array(cols["file_path"])
        cols["referenced_data_file"] = path_map.apply_array(cols["referenced_data_file"])
    cols["manifest_path"] = pa.array([manifest.manifest_path] * n, type=pa.string())
    schema = entries_schema(pfields).with_metadata(_table_metadata(manifest, avro) | {"decoder": tag})
    return pa.Table.from_arrays([cols[name] for name in ENTRY_COLUMNS], schema=schema)


def _inherit(manifest: ManifestFile, cols: dict[str, pa.Array]) -> None:
    status = cols["status"]
    if manifest.added_snapshot_id is not None:
        cols["snapshot_id"] = pc.fill_null(
            cols["snapshot_id"], pa.scalar(manifest.added_snapshot_id, pa.int64())
        )
    seq = pa.scalar(manifest.sequence_number, pa.int64())
    inherits = pc.equal(status, ADDED) if manifest.sequence_number != 0 else pc.is_valid(status)
    for name in ("sequence_number", "file_sequence_number"):
        col = cols[name]
        cols[name] = pc.if_else(pc.and_(pc.is_null(col), inherits), seq, col)
    is_data = pc.equal(cols["content"], DATA)
    first = cols["first_row_id"]
    if manifest.first_row_id is not None:
        mask = pc.and_(pc.and_(pc.is_null(first), pc.not_equal(status, DELETED)), is_data)
        mask_np = mask.to_numpy(zero_copy_only=False)
        counts = np.where(mask_np, cols["record_count"].to_numpy(zero_copy_only=False), 0)
        assigned = manifest.first_row_id + np.cumsum(counts) - counts
        first = pc.if_else(mask, pa.array(assigned, type=pa.int64()), first)
    cols["first_row_id"] = pc.if_else(is_data, first, pa.scalar(None, pa.int64()))


def _check_codes(path: str, values: pa.Array, name: str, allowed: tuple[int, ...]) -> None:
    codes = values.to_numpy(zero_copy_only=False)  # non-null (checked before); numpy: no per-call overhead
    bad = ~np.isin(codes, allowed)
    if bad.any():
        raise ManifestError(f"{path}: invalid {name} {int(codes[bad][0])} (allowed: {allowed})")


def _table_metadata(manifest: ManifestFile, avro: AvroContents) -> dict[str, str]:
    keep = ("format-version", "content", "partition-spec-id", "partition-spec", "schema-id", "schema")
    meta = {k: avro.metadata[k] for k in keep if k in avro.metadata}
    return meta | {"manifest_path": manifest.manifest_path}


# -- the partition tuple -------------------------------------------------------------------------------------


def partition_fields(
    path: str,
    record: dict[str, Any],
    named: dict[str, dict[str, Any]],
    metadata: dict[str, str],
    spec_id: int,
) -> tuple[PartitionField, ...]:
    """The partition tuple of a manifest: Avro record fields, typed by their Avro types and named and
    typed by the manifest's ``partition-spec`` + ``schema`` metadata where present and consistent. With
    that spec, the tuple is its fields by field id, in its order: a record listing them in another order,
    or with fields of no spec field, is read by id (its values were taken by position: deleted rows came
    back); a spec field the record lacks is a :class:`ManifestError` naming it."""
    from_spec = _spec_partition_type(metadata, spec_id)
    out = []
    for i, f in enumerate(record.get("fields", [])):
        fid = int(f.get("field-id", 1000 + i))
        t = iceberg_type(path, f["name"], f["type"], named)
        name = str(f["name"])
        spec_field = from_spec.get(fid)
        if spec_field is not None:
            name = spec_field.name
            spec_type = spec_field.type
            if (
                isinstance(spec_type, it.PrimitiveType)
                and spec_type != it.UNKNOWN
                and _physical(spec_type) == _physical(t)
            ):
                t = spec_type
        out.append(PartitionField(str(f["name"]), fid, name, t))
    if not from_spec:
        return tuple(out)
    by_id = {f.field_id: f for f in out}
    missing = [f"{f.name} (field id {fid})" for fid, f in from_spec.items() if fid not in by_id]
    if missing:
        raise ManifestError(
            f"{path}: the partition struct lacks field(s) {', '.join(missing)} of its partition spec "
            f"{spec_id}"
        )
    return tuple(by_id[fid] for fid in from_spec)


def _physical(t: it.PrimitiveType) -> pa.DataType | None:
    try:
        return serde.physical_arrow_type(t)
    except GpuEngineError:  # a type with no physical form here: the Avro type stands
        return None


def _spec_partition_type(metadata: dict[str, str], spec_id: int) -> dict[int, it.NestedField]:
    if "partition-spec" not in metadata or "schema" not in metadata:
        return {}
    try:
        schema = schema_from_json(json.loads(metadata["schema"]))
        spec = spec_from_json(json.loads(metadata["partition-spec"]), spec_id)
        return {f.field_id: f for f in spec.partition_type(schema).fields}
    except (GpuEngineError, ValueError, KeyError, TypeError):
        return {}  # the Avro record's own types stand


def _convert_type(pfields: Sequence[PartitionField]) -> pa.DataType:
    """The Arrow type fastavro's records convert to: decimals as raw bytes, decoded in a second step."""
    return pa.struct(
        [
            pa.field(f.avro_name, pa.binary() if isinstance(f.type, it.DecimalType) else f.arrow_field.type)
            for f in pfields
        ]
    )


def _finish_partition(raw: pa.Array, pfields: Sequence[PartitionField]) -> pa.Array:
    if not pfields:
        return raw  # struct<>
    children = [
        serde.decode_array(f.type, raw.field(f.avro_name))
        if isinstance(f.type, it.DecimalType)
        else raw.field(f.avro_name)
        for f in pfields
    ]
    return pa.StructArray.from_arrays(children, fields=[f.arrow_field for f in pfields])

"""Metadata tables, as Arrow tables: ``tbl.inspect.partitions()``, ``files()``, ``manifests()``,
``snapshots()``, ``refs()`` and ``history()``, with the column names of Iceberg Java's metadata tables
(``db.t.partitions``, ...; PyIceberg's ``inspect`` uses them too).

These are what a compaction user watches: per partition, how many data files and bytes there are and how
many position, DV and equality delete records pile up (``partitions``); every live file with its metrics
(``files``). ``files``, ``partitions`` and ``manifests`` read the current snapshot, or ``snapshot_id``.
An unpartitioned table's ``partitions`` has a single row and no ``partition`` / ``spec_id`` columns, as in
Java. ``partition`` is the table-wide struct of every spec's fields (a file's fields of other specs null),
the ``_partition`` metadata column's type.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .commit.entries import entries_of, manifest_spec_id, snapshot_manifests
from .iceberg import metadata_columns as mc
from .iceberg import types as it
from .iceberg.content_file import DATA, EQUALITY_DELETES, POSITION_DELETES
from .iceberg.manifest_list import ManifestFile
from .iceberg.manifest_write import ManifestEntry
from .iceberg.manifests import read_manifest
from .iceberg.schema import Schema
from .iceberg.snapshots import Snapshot
from .io.arrow_schema import to_arrow_schema

if TYPE_CHECKING:
    from .table import Table

_TS = pa.timestamp("ms", tz="UTC")
_COUNTS = pa.map_(pa.int32(), pa.int64())
_BOUNDS = pa.map_(pa.int32(), pa.binary())


class InspectTable:
    """The metadata tables of ``table`` (see the module doc)."""

    def __init__(self, table: Table) -> None:
        self._table = table

    def snapshots(self) -> pa.Table:
        md = self._table.metadata
        rows = [
            {
                "committed_at": s.timestamp_ms,
                "snapshot_id": s.snapshot_id,
                "parent_id": s.parent_snapshot_id,
                "operation": s.operation,
                "manifest_list": s.manifest_list,
                "summary": sorted((s.summary or {}).items()),
            }
            for s in sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number))
        ]
        schema = pa.schema(
            [
                pa.field("committed_at", _TS, nullable=False),
                pa.field("snapshot_id", pa.int64(), nullable=False),
                ("parent_id", pa.int64()),
                ("operation", pa.string()),
                ("manifest_list", pa.string()),
                ("summary", pa.map_(pa.string(), pa.string())),
            ]
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def refs(self) -> pa.Table:
        md = self._table.metadata
        rows = [
            {
                "name": name,
                "type": ref.type.upper(),
                "snapshot_id": ref.snapshot_id,
                "max_reference_age_in_ms": ref.max_ref_age_ms,
                "min_snapshots_to_keep": ref.min_snapshots_to_keep,
                "max_snapshot_age_in_ms": ref.max_snapshot_age_ms,
            }
            for name, ref in sorted(md.refs.items())
        ]
        schema = pa.schema(
            [
                pa.field("name", pa.string(), nullable=False),
                pa.field("type", pa.string(), nullable=False),
                pa.field("snapshot_id", pa.int64(), nullable=False),
                ("max_reference_age_in_ms", pa.int64()),
                ("min_snapshots_to_keep", pa.int32()),
                ("max_snapshot_age_in_ms", pa.int64()),
            ]
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def history(self) -> pa.Table:
        """Each time a snapshot became current (the ``snapshot-log``), and whether it is an ancestor of the
        current snapshot (a rollback leaves entries that are not)."""
        md = self._table.metadata
        current = md.current_snapshot_id
        ancestors = set(() if current is None else md.ancestor_ids(current))
        rows = [
            {
                "made_current_at": e.timestamp_ms,
                "snapshot_id": e.snapshot_id,
                "parent_id": _parent(md.snapshots_by_id.get(e.snapshot_id)),
                "is_current_ancestor": e.snapshot_id in ancestors,
            }
            for e in md.snapshot_log
        ]
        schema = pa.schema(
            [
                pa.field("made_current_at", _TS, nullable=False),
                pa.field("snapshot_id", pa.int64(), nullable=False),
                ("parent_id", pa.int64()),
                pa.field("is_current_ancestor", pa.bool_(), nullable=False),
            ]
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def manifests(self, snapshot_id: int | None = None) -> pa.Table:
        snapshot = self._snapshot(snapshot_id)
        manifests = () if snapshot is None else snapshot_manifests(self._table.io, snapshot)
        rows = []
        for m in manifests:
            data = m.content == 0
            rows.append(
                {
                    "content": m.content,
                    "path": m.manifest_path,
                    "length": m.manifest_length,
                    "partition_spec_id": m.partition_spec_id,
                    "added_snapshot_id": m.added_snapshot_id,
                    "added_data_files_count": m.added_files_count if data else 0,
                    "existing_data_files_count": m.existing_files_count if data else 0,
                    "deleted_data_files_count": m.deleted_files_count if data else 0,
                    "added_delete_files_count": 0 if data else m.added_files_count,
                    "existing_delete_files_count": 0 if data else m.existing_files_count,
                    "deleted_delete_files_count": 0 if data else m.deleted_files_count,
                }
            )
        fields: list[pa.Field] = [
            pa.field("content", pa.int32(), nullable=False),
            pa.field("path", pa.string(), nullable=False),
            pa.field("length", pa.int64()),
            pa.field("partition_spec_id", pa.int32()),
            pa.field("added_snapshot_id", pa.int64()),
        ]
        counts = ("added", "existing", "deleted")
        fields += [
            pa.field(f"{c}_{kind}_files_count", pa.int32()) for kind in ("data", "delete") for c in counts
        ]
        return pa.Table.from_pylist(rows, schema=pa.schema(fields))

    def files(self, snapshot_id: int | None = None) -> pa.Table:
        """Every live data and delete file (content 0 data, 1 position deletes or DVs, 2 equality deletes)."""
        partition = _Partitions.of(self._table)
        rows = []
        for entry, ids in self._entries(snapshot_id):
            f = entry.file
            rows.append(
                {
                    "content": f.content,
                    "file_path": f.path,
                    "file_format": f.file_format,
                    "spec_id": f.spec_id,
                    "partition": partition.row(ids, f.partition),
                    "record_count": f.record_count,
                    "file_size_in_bytes": f.file_size_in_bytes,
                    "column_sizes": sorted(f.column_sizes.items()),
                    "value_counts": sorted(f.value_counts.items()),
                    "null_value_counts": sorted(f.null_value_counts.items()),
                    "nan_value_counts": sorted(f.nan_value_counts.items()),
                    "lower_bounds": sorted(f.lower_bounds.items()),
                    "upper_bounds": sorted(f.upper_bounds.items()),
                    "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
                    "equality_ids": None if f.equality_ids is None else list(f.equality_ids),
                    "sort_order_id": f.sort_order_id,
                    "first_row_id": f.first_row_id,
                    "referenced_data_file": f.referenced_data_file,
                    "sequence_number": entry.sequence_number,
                    "file_sequence_number": entry.file_sequence_number,
                }
            )
        schema = pa.schema(
            [
                pa.field("content", pa.int32(), nullable=False),
                pa.field("file_path", pa.string(), nullable=False),
                pa.field("file_format", pa.string(), nullable=False),
                pa.field("spec_id", pa.int32(), nullable=False),
                pa.field("partition", partition.arrow, nullable=False),
                pa.field("record_count", pa.int64(), nullable=False),
                pa.field("file_size_in_bytes", pa.int64(), nullable=False),
                ("column_sizes", _COUNTS),
                ("value_counts", _COUNTS),
                ("null_value_counts", _COUNTS),
                ("nan_value_counts", _COUNTS),
                ("lower_bounds", _BOUNDS),
                ("upper_bounds", _BOUNDS),
                ("split_offsets", pa.list_(pa.int64())),
                ("equality_ids", pa.list_(pa.int32())),
                ("sort_order_id", pa.int32()),
                ("first_row_id", pa.int64()),
                ("referenced_data_file", pa.string()),
                ("sequence_number", pa.int64()),
                ("file_sequence_number", pa.int64()),
            ]
        )
        return pa.Table.from_pylist(rows, schema=schema)

    def partitions(self, snapshot_id: int | None = None) -> pa.Table:
        """Per partition (and spec): data records, files and bytes, position (and DV) and equality delete
        records and files, and when a file of it was last added."""
        md = self._table.metadata
        partition = _Partitions.of(self._table)
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        for entry, ids in self._entries(snapshot_id):
            f = entry.file
            value = partition.row(ids, f.partition)
            key = (f.spec_id, *(_hashable(v) for v in value.values()))
            row = groups.setdefault(key, _empty_partition(value, f.spec_id))
            if f.content == DATA:
                row["record_count"] += f.record_count
                row["file_count"] += 1
                row["total_data_file_size_in_bytes"] += f.file_size_in_bytes
            elif f.content == POSITION_DELETES:
                row["position_delete_record_count"] += f.record_count
                row["position_delete_file_count"] += 1
            elif f.content == EQUALITY_DELETES:
                row["equality_delete_record_count"] += f.record_count
                row["equality_delete_file_count"] += 1
            added = md.snapshots_by_id.get(entry.snapshot_id) if entry.snapshot_id is not None else None
            if added is not None and (row["last_updated_at"] or -1) < added.timestamp_ms:
                row["last_updated_at"], row["last_updated_snapshot_id"] = (
                    added.timestamp_ms,
                    added.snapshot_id,
                )
        fields: list[pa.Field] = []
        if partition.ids:
            fields += [
                pa.field("partition", partition.arrow, nullable=False),
                pa.field("spec_id", pa.int32()),
            ]
        fields += [pa.field(n, pa.int64(), nullable=False) for n in ("record_count",)]
        fields += [pa.field("file_count", pa.int32(), nullable=False)]
        fields += [pa.field("total_data_file_size_in_bytes", pa.int64(), nullable=False)]
        for kind in ("position", "equality"):
            fields += [
                pa.field(f"{kind}_delete_record_count", pa.int64(), nullable=False),
                pa.field(f"{kind}_delete_file_count", pa.int32(), nullable=False),
            ]
        fields += [pa.field("last_updated_at", _TS), pa.field("last_updated_snapshot_id", pa.int64())]
        schema = pa.schema(fields)
        rows = [
            {k: v for k, v in row.items() if k in schema.names}
            for _, row in sorted(groups.items(), key=_order)
        ]
        return pa.Table.from_pylist(rows, schema=schema)

    # -- helpers --------------------------------------------------------------------------------------------

    def _snapshot(self, snapshot_id: int | None) -> Snapshot | None:
        md = self._table.metadata
        return md.current_snapshot() if snapshot_id is None else md.snapshot_by_id(snapshot_id)

    def _entries(self, snapshot_id: int | None) -> list[tuple[ManifestEntry, tuple[int, ...]]]:
        """The live entries of the snapshot, each with its spec's partition field ids."""
        md, io = self._table.metadata, self._table.io
        snapshot = self._snapshot(snapshot_id)
        if snapshot is None:
            return []
        out = []
        for m in snapshot_manifests(io, snapshot):
            table = read_manifest(
                replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input
            )
            spec = md.spec_by_id(manifest_spec_id(m, table))
            ids = tuple(f.field_id for f in spec.fields)
            out += [(e, ids) for e in entries_of(table, _with_spec(m, spec.spec_id), spec)]
        return out


def _with_spec(m: ManifestFile, spec_id: int) -> ManifestFile:
    return m if m.partition_spec_id is not None else replace(m, partition_spec_id=spec_id)


def _parent(snapshot: Snapshot | None) -> int | None:
    return None if snapshot is None else snapshot.parent_snapshot_id


@dataclass(frozen=True)
class _Partitions:
    """The table-wide partition struct: its Arrow type, field names and partition field ids."""

    arrow: pa.StructType
    names: tuple[str, ...]
    ids: tuple[int, ...]

    @staticmethod
    def of(table: Table) -> _Partitions:
        field = mc.partition_field(table.metadata)
        struct = to_arrow_schema(Schema((field,))).field(0).type
        assert isinstance(struct, pa.StructType) and isinstance(field.type, it.StructType)
        fields = field.type.fields
        return _Partitions(struct, tuple(f.name for f in fields), tuple(f.field_id for f in fields))

    def row(self, spec_ids: tuple[int, ...], values: tuple[Any, ...]) -> dict[str, Any]:
        """A file's partition ``values`` (of its spec's field ids ``spec_ids``) as the struct's value."""
        by_id = dict(zip(spec_ids, values, strict=True))
        return {name: by_id.get(i) for name, i in zip(self.names, self.ids, strict=True)}


def _hashable(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else value


def _empty_partition(partition: dict[str, Any], spec_id: int) -> dict[str, Any]:
    return {
        "partition": partition,
        "spec_id": spec_id,
        "record_count": 0,
        "file_count": 0,
        "total_data_file_size_in_bytes": 0,
        "position_delete_record_count": 0,
        "position_delete_file_count": 0,
        "equality_delete_record_count": 0,
        "equality_delete_file_count": 0,
        "last_updated_at": None,
        "last_updated_snapshot_id": None,
    }


def _order(item: tuple[tuple[Any, ...], dict[str, Any]]) -> tuple[Any, ...]:
    """Partitions by spec, then values (nulls first)."""
    key = item[0]
    return tuple((v is not None, str(v)) for v in key)

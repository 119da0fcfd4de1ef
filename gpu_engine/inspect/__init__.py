"""Metadata tables, as Arrow tables: ``tbl.inspect.partitions()``, ``files()`` (also ``data_files()``,
``delete_files()``), ``entries()``, ``manifests()``, ``snapshots()``, ``refs()``, ``history()``,
``metadata_log_entries()``, and over every snapshot ``all_manifests()``, ``all_files()``
(``all_data_files()``, ``all_delete_files()``), ``all_entries()``, with the column names of Iceberg
Java's metadata tables (``db.t.partitions``, ...; PyIceberg's ``inspect`` uses them too).

These are what a compaction user watches: per partition, how many data files and bytes there are and how
many position, DV and equality delete records pile up (``partitions``); every live file with its metrics
(``files``, with ``readable_metrics``: :mod:`.metrics`). ``files``, ``entries``, ``partitions`` and
``manifests`` read the current snapshot, or ``snapshot_id``.
An unpartitioned table's ``partitions`` has a single row and no ``partition`` / ``spec_id`` columns, as in
Java. ``partition`` is the table-wide struct of every spec's fields (a file's fields of other specs null),
the ``_partition`` metadata column's type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..commit.entries import entries_of, manifest_spec_id, snapshot_manifests
from ..errors import MetadataError
from ..iceberg import types as it
from ..iceberg.content_file import DATA, EQUALITY_DELETES, POSITION_DELETES
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifest_write import ManifestEntry
from ..iceberg.manifests import read_manifest
from ..iceberg.partitioning import value_key
from ..iceberg.snapshots import Snapshot
from .metrics import readable_metrics
from .rows import (
    DATA_ONLY,
    DELETES_ONLY,
    TS,
    Contents,
    Partitions,
    empty_partition,
    entry_schema,
    file_row,
    file_schema,
    manifest_row,
    manifest_schema,
    order,
    parent,
    with_spec,
)  # fmt: skip

if TYPE_CHECKING:
    from ..table import Table

_LONG = it.LONG_RANGE


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
                # Java's SnapshotParser keeps "operation" out of the summary (it is its own column)
                "summary": sorted((k, v) for k, v in (s.summary or {}).items() if k != "operation"),
            }
            for s in sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number))
        ]
        schema = pa.schema(
            [
                pa.field("committed_at", TS, nullable=False),
                pa.field("snapshot_id", pa.int64(), nullable=False),
                ("parent_id", pa.int64()),
                ("operation", pa.string()),
                ("manifest_list", pa.string()),
                ("summary", pa.map_(pa.string(), pa.string())),
            ]
        )
        return self._arrow(rows, schema)

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
        return self._arrow(rows, schema)

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
                "parent_id": parent(md.snapshots_by_id.get(e.snapshot_id)),
                "is_current_ancestor": e.snapshot_id in ancestors,
            }
            for e in md.snapshot_log
        ]
        schema = pa.schema(
            [
                pa.field("made_current_at", TS, nullable=False),
                pa.field("snapshot_id", pa.int64(), nullable=False),
                ("parent_id", pa.int64()),
                pa.field("is_current_ancestor", pa.bool_(), nullable=False),
            ]
        )
        return self._arrow(rows, schema)

    def manifests(self, snapshot_id: int | None = None) -> pa.Table:
        snapshot = self._snapshot(snapshot_id)
        manifests = () if snapshot is None else snapshot_manifests(self._table.io, snapshot)
        return self._arrow([manifest_row(m, self._table.metadata) for m in manifests], manifest_schema())

    def all_manifests(self) -> pa.Table:
        """The manifests of every snapshot, one row per snapshot listing a manifest
        (``reference_snapshot_id``)."""
        io = self._table.io
        rows = [
            {**manifest_row(m, self._table.metadata), "reference_snapshot_id": s.snapshot_id}
            for s in self._table.metadata.snapshots
            for m in snapshot_manifests(io, s)
        ]
        schema = manifest_schema().append(pa.field("reference_snapshot_id", pa.int64(), nullable=False))
        return self._arrow(rows, schema)

    def metadata_log_entries(self) -> pa.Table:
        """Every metadata file of the ``metadata-log`` and the current one, with the snapshot that was
        current when it was written (by the ``snapshot-log``), that snapshot's schema and sequence number."""
        md = self._table.metadata
        files = [(e.timestamp_ms, e.metadata_file) for e in md.metadata_log]
        files.append((md.last_updated_ms, self._table.metadata_location))
        rows = []
        for timestamp, path in files:
            snap = next((e for e in reversed(md.snapshot_log) if e.timestamp_ms <= timestamp), None)
            latest = None if snap is None else md.snapshots_by_id.get(snap.snapshot_id)
            rows.append(
                {
                    "timestamp": timestamp,
                    "file": path,
                    "latest_snapshot_id": None if latest is None else latest.snapshot_id,
                    "latest_schema_id": None if latest is None else latest.schema_id,
                    "latest_sequence_number": None if latest is None else latest.sequence_number,
                }
            )
        schema = pa.schema(
            [
                pa.field("timestamp", TS, nullable=False),
                pa.field("file", pa.string(), nullable=False),
                ("latest_snapshot_id", pa.int64()),
                ("latest_schema_id", pa.int32()),
                ("latest_sequence_number", pa.int64()),
            ]
        )
        return self._arrow(rows, schema)

    def files(self, snapshot_id: int | None = None) -> pa.Table:
        """Every live data and delete file (content 0 data, 1 position deletes or DVs, 2 equality deletes)."""
        return self._files(self._entries(snapshot_id))

    def data_files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live data files (:meth:`files` of content 0)."""
        return self._files(self._entries(snapshot_id), DATA_ONLY)

    def delete_files(self, snapshot_id: int | None = None) -> pa.Table:
        """The live delete files (:meth:`files` of content 1 and 2)."""
        return self._files(self._entries(snapshot_id), DELETES_ONLY)

    def all_files(self) -> pa.Table:
        """The live entries of every manifest of every snapshot, each manifest read once (a file listed
        by several manifests appears once per manifest, as in Java)."""
        return self._files(self._all_entries())

    def all_data_files(self) -> pa.Table:
        return self._files(self._all_entries(), DATA_ONLY)

    def all_delete_files(self) -> pa.Table:
        return self._files(self._all_entries(), DELETES_ONLY)

    def entries(self, snapshot_id: int | None = None) -> pa.Table:
        """Every entry of the snapshot's manifests, DELETED ones (status 2) included: ``status``,
        ``snapshot_id``, ``sequence_number``, ``file_sequence_number``, the file as ``data_file`` and its
        ``readable_metrics`` (Java's ``entries`` table)."""
        snapshot = self._snapshot(snapshot_id)
        manifests = [] if snapshot is None else snapshot_manifests(self._table.io, snapshot)
        return self._entry_table(self._read(manifests, with_deleted=True))

    def all_entries(self) -> pa.Table:
        """:meth:`entries` of every distinct manifest of every snapshot."""
        return self._entry_table(self._read(self._all_manifests(), with_deleted=True))

    def _entry_table(self, entries: list[tuple[ManifestEntry, tuple[int, ...]]]) -> pa.Table:
        partition = Partitions.of(self._table)
        files = self._arrow(
            [file_row(e, partition.row(ids, e.file.partition)) for e, ids in entries],
            file_schema(partition.arrow),
        )
        entry_columns = ("status", "snapshot_id", "sequence_number", "file_sequence_number")
        head = self._arrow([{c: getattr(e, c) for c in entry_columns} for e, _ in entries], entry_schema())
        nested = files.drop_columns(["sequence_number", "file_sequence_number"])
        data_file = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in nested.columns], fields=list(nested.schema)
        )
        metrics = readable_metrics(self._table.metadata.schema, [e.file for e, _ in entries])
        return head.append_column("data_file", data_file).append_column("readable_metrics", metrics)

    def _files(
        self, entries: list[tuple[ManifestEntry, tuple[int, ...]]], contents: Contents = None
    ) -> pa.Table:
        partition = Partitions.of(self._table)
        picked = [(e, ids) for e, ids in entries if contents is None or e.file.content in contents]
        rows = [file_row(entry, partition.row(ids, entry.file.partition)) for entry, ids in picked]
        table = self._arrow(rows, file_schema(partition.arrow))
        metrics = readable_metrics(self._table.metadata.schema, [e.file for e, _ in picked])
        return table.append_column("readable_metrics", metrics)

    def partitions(self, snapshot_id: int | None = None) -> pa.Table:
        """Per partition: data records, files and bytes, position (and DV) and equality delete records and
        files, and when a file of it was last added. As Java's PartitionsTable: files group by their
        partition in the table-wide partition type and by how many of its fields their spec has (not by
        spec: a renamed or reordered field keeps one partition); ``spec_id`` is the spec of the partition's
        most recently added file."""
        md = self._table.metadata
        partition = Partitions.of(self._table)
        present = set(partition.ids)
        projected = {sid: sum(f.field_id in present for f in spec.fields) for sid, spec in md.specs.items()}
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        for entry, ids in self._entries(snapshot_id):
            f = entry.file
            value = partition.row(ids, f.partition)
            key = (projected.get(f.spec_id, 0), *(value_key(v) for v in value.values()))  # floats by bits
            row = groups.setdefault(key, empty_partition(value, f.spec_id))
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
            rank = (-1 if added is None else added.timestamp_ms, f.spec_id)
            if rank >= row["spec_rank"]:
                row["spec_rank"], row["spec_id"] = rank, f.spec_id
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
        fields += [pa.field("last_updated_at", TS), pa.field("last_updated_snapshot_id", pa.int64())]
        schema = pa.schema(fields)
        rows = [
            {k: v for k, v in row.items() if k in schema.names}
            for _, row in sorted(groups.items(), key=order)
        ]
        return self._arrow(rows, schema)

    # -- helpers --------------------------------------------------------------------------------------------

    def _arrow(self, rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
        """``rows`` as a table of ``schema``; :class:`MetadataError` naming a value that is no long (a
        snapshot id past 2**63 - 1 some writers put in metadata) instead of Arrow's OverflowError."""
        try:
            return pa.Table.from_pylist(rows, schema=schema)
        except OverflowError:
            bad = next(
                (
                    f"{k} {v}"
                    for r in rows
                    for k, v in r.items()
                    if isinstance(v, int) and not _LONG[0] <= v <= _LONG[1]
                ),
                "a value",
            )
            raise MetadataError(
                f"table {self._table.metadata_location}: {bad} does not fit a long (Iceberg's ids and counts "
                "are 64-bit signed integers)"
            ) from None

    def _snapshot(self, snapshot_id: int | None) -> Snapshot | None:
        md = self._table.metadata
        return md.current_snapshot() if snapshot_id is None else md.snapshot_by_id(snapshot_id)

    def _entries(self, snapshot_id: int | None) -> list[tuple[ManifestEntry, tuple[int, ...]]]:
        """The live entries of the snapshot, each with its spec's partition field ids."""
        snapshot = self._snapshot(snapshot_id)
        if snapshot is None:
            return []
        return self._live(snapshot_manifests(self._table.io, snapshot))

    def _all_entries(self) -> list[tuple[ManifestEntry, tuple[int, ...]]]:
        """The live entries of every distinct manifest of every snapshot."""
        return self._live(self._all_manifests())

    def _all_manifests(self) -> list[ManifestFile]:
        io = self._table.io
        manifests = {
            m.manifest_path: m for s in self._table.metadata.snapshots for m in snapshot_manifests(io, s)
        }
        return list(manifests.values())

    def _live(self, manifests: Sequence[ManifestFile]) -> list[tuple[ManifestEntry, tuple[int, ...]]]:
        return self._read(manifests, with_deleted=False)

    def _read(
        self, manifests: Sequence[ManifestFile], *, with_deleted: bool
    ) -> list[tuple[ManifestEntry, tuple[int, ...]]]:
        md, io = self._table.metadata, self._table.io
        out = []
        for m in manifests:
            table = read_manifest(
                replace(m, manifest_path=io.resolve(m.manifest_path)), open_input=io.open_input
            )
            spec = md.spec_by_id(manifest_spec_id(m, table))
            ids = tuple(f.field_id for f in spec.fields)
            entries = entries_of(table, with_spec(m, spec.spec_id), spec, with_deleted=with_deleted)
            out += [(e, ids) for e in entries]
        return out

"""The rows and Arrow schemas of the metadata tables (:mod:`gpu_engine.inspect`): manifests, files, and the
table-wide ``partition`` struct with the per-partition aggregates."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..iceberg import metadata_columns as mc
from ..iceberg import types as it
from ..iceberg.content_file import DATA, EQUALITY_DELETES, POSITION_DELETES
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifest_write import ManifestEntry
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..iceberg.serde import from_bytes
from ..iceberg.snapshots import Snapshot
from ..io.arrow_schema import to_arrow_schema
from ..io.partition_split import human_string

if TYPE_CHECKING:
    from ..table import Table

TS = pa.timestamp("ms", tz="UTC")
_COUNTS = pa.map_(pa.int32(), pa.int64())
_BOUNDS = pa.map_(pa.int32(), pa.binary())

Contents = frozenset[int] | None
DATA_ONLY: Contents = frozenset({DATA})
DELETES_ONLY: Contents = frozenset({POSITION_DELETES, EQUALITY_DELETES})


def manifest_row(m: ManifestFile, md: TableMetadata) -> dict[str, Any]:
    data = m.content == 0
    return {
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
        "partition_summaries": partition_summaries(m, md),
    }


def partition_summaries(m: ManifestFile, md: TableMetadata) -> list[dict[str, Any]] | None:
    """Java's ManifestsTable ``partition_summaries``: per partition field, whether it holds nulls / NaNs
    and its bounds as the transform's human string (``"null"`` where a bound is absent, as Java)."""
    spec = None if m.partition_spec_id is None else md.specs.get(m.partition_spec_id)
    if m.partitions is None or spec is None:
        return None
    types = spec.partition_type(md.schema_for_spec(spec)).fields
    out = []
    for summary, pf, t in zip(m.partitions, spec.fields, types, strict=False):
        bounds = [
            human_string(pf.transform, t.type, None if b is None else from_bytes(t.type, b))
            if isinstance(t.type, it.PrimitiveType)
            else None
            for b in (summary.lower_bound, summary.upper_bound)
        ]
        out.append(
            {
                "contains_null": summary.contains_null,
                "contains_nan": summary.contains_nan,
                "lower_bound": bounds[0],
                "upper_bound": bounds[1],
            }
        )
    return out


def manifest_schema() -> pa.Schema:
    fields: list[pa.Field] = [
        pa.field("content", pa.int32(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("length", pa.int64()),
        pa.field("partition_spec_id", pa.int32()),
        pa.field("added_snapshot_id", pa.int64()),
    ]
    counts = ("added", "existing", "deleted")
    fields += [pa.field(f"{c}_{kind}_files_count", pa.int32()) for kind in ("data", "delete") for c in counts]
    summary = pa.struct(
        [
            pa.field("contains_null", pa.bool_(), nullable=False),
            pa.field("contains_nan", pa.bool_()),
            pa.field("lower_bound", pa.string()),
            pa.field("upper_bound", pa.string()),
        ]
    )
    fields.append(pa.field("partition_summaries", pa.list_(pa.field("item", summary, nullable=False))))
    return pa.schema(fields)


def file_row(entry: ManifestEntry, partition: dict[str, Any]) -> dict[str, Any]:
    f = entry.file
    return {
        "content": f.content,
        "file_path": f.path,
        "file_format": f.file_format,
        "spec_id": f.spec_id,
        "partition": partition,
        "record_count": f.record_count,
        "file_size_in_bytes": f.file_size_in_bytes,
        "column_sizes": sorted(f.column_sizes.items()),
        "value_counts": sorted(f.value_counts.items()),
        "null_value_counts": sorted(f.null_value_counts.items()),
        "nan_value_counts": sorted(f.nan_value_counts.items()),
        "lower_bounds": sorted(f.lower_bounds.items()),
        "upper_bounds": sorted(f.upper_bounds.items()),
        "key_metadata": f.key_metadata,
        "split_offsets": None if f.split_offsets is None else list(f.split_offsets),
        "equality_ids": None if f.equality_ids is None else list(f.equality_ids),
        "sort_order_id": f.sort_order_id,
        "first_row_id": f.first_row_id,
        "referenced_data_file": f.referenced_data_file,
        "content_offset": f.content_offset,
        "content_size_in_bytes": f.content_size_in_bytes,
        "sequence_number": entry.sequence_number,
        "file_sequence_number": entry.file_sequence_number,
    }


def file_schema(partition: pa.DataType) -> pa.Schema:
    return pa.schema(
        [
            pa.field("content", pa.int32(), nullable=False),
            pa.field("file_path", pa.string(), nullable=False),
            pa.field("file_format", pa.string(), nullable=False),
            pa.field("spec_id", pa.int32(), nullable=False),
            pa.field("partition", partition, nullable=False),
            pa.field("record_count", pa.int64(), nullable=False),
            pa.field("file_size_in_bytes", pa.int64(), nullable=False),
            ("column_sizes", _COUNTS),
            ("value_counts", _COUNTS),
            ("null_value_counts", _COUNTS),
            ("nan_value_counts", _COUNTS),
            ("lower_bounds", _BOUNDS),
            ("upper_bounds", _BOUNDS),
            ("key_metadata", pa.binary()),
            ("split_offsets", pa.list_(pa.int64())),
            ("equality_ids", pa.list_(pa.int32())),
            ("sort_order_id", pa.int32()),
            ("first_row_id", pa.int64()),
            ("referenced_data_file", pa.string()),
            ("content_offset", pa.int64()),
            ("content_size_in_bytes", pa.int64()),
            ("sequence_number", pa.int64()),
            ("file_sequence_number", pa.int64()),
        ]
    )


def entry_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("status", pa.int32(), nullable=False),
            pa.field("snapshot_id", pa.int64()),
            pa.field("sequence_number", pa.int64()),
            pa.field("file_sequence_number", pa.int64()),
        ]
    )


def with_spec(m: ManifestFile, spec_id: int) -> ManifestFile:
    return m if m.partition_spec_id is not None else replace(m, partition_spec_id=spec_id)


def parent(snapshot: Snapshot | None) -> int | None:
    return None if snapshot is None else snapshot.parent_snapshot_id


@dataclass(frozen=True)
class Partitions:
    """The table-wide partition struct: its Arrow type, field names and partition field ids."""

    arrow: pa.StructType
    names: tuple[str, ...]
    ids: tuple[int, ...]

    @staticmethod
    def of(table: Table) -> Partitions:
        field = mc.partition_field(table.metadata)
        struct = to_arrow_schema(Schema((field,))).field(0).type
        assert isinstance(struct, pa.StructType) and isinstance(field.type, it.StructType)
        fields = field.type.fields
        return Partitions(struct, tuple(f.name for f in fields), tuple(f.field_id for f in fields))

    def row(self, spec_ids: tuple[int, ...], values: tuple[Any, ...]) -> dict[str, Any]:
        """A file's partition ``values`` (of its spec's field ids ``spec_ids``) as the struct's value."""
        by_id = dict(zip(spec_ids, values, strict=True))
        return {name: by_id.get(i) for name, i in zip(self.names, self.ids, strict=True)}


def empty_partition(partition: dict[str, Any], spec_id: int) -> dict[str, Any]:
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
        "spec_rank": (-2, -1),  # (added at, spec id) of the file that set spec_id; not a column
    }


def order(item: tuple[tuple[Any, ...], dict[str, Any]]) -> tuple[Any, ...]:
    """Partitions by their spec's field count, then values (nulls first)."""
    key = item[0]
    return tuple((v is not None, str(v)) for v in key)

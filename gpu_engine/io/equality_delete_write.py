"""Equality delete files (spec "Equality Delete Files"): Parquet files of key columns, each row deleting
the data rows whose equality columns equal it (a NULL key matches a NULL value, as ``col IS NULL``).

The files hold exactly the equality columns (with the structs leading to nested ones), with the table's
field ids and types, and record ``equality_ids``. The columns follow the spec's identifier field rules
except that optional columns are allowed: primitive, not float or double, not inside a list or map.

Scope: an equality delete file applies to the data files of its own partition, or to every data file
when its spec is unpartitioned (a "global" delete). Rows are therefore split by partition when the
equality columns include the source column of every partition field (the keys then determine the
partition); in a partitioned spec whose fields use other columns the keys cannot be placed, and the
table needs an unpartitioned spec for them: :class:`UnsupportedFeature`. Bounds are full for every key
column (never truncated), so planners can prune by them. Rolling, compression and publishing are the
data file writer's (:func:`~gpu_engine.io.parquet_write.write_data_files`), with the delete properties.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

from ..errors import SchemaMismatch, UnsupportedFeature
from ..iceberg import types as it
from ..iceberg.content_file import EQUALITY_DELETES, ContentFile
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema, prune
from .fileio import FileIO
from .locations import LocationProvider, location_provider
from .metrics_config import COLUMN_MODE_PREFIX, DEFAULT_MODE_PROPERTY, MAX_INFERRED_PROPERTY
from .parquet_write import write_data_files
from .position_delete_write import delete_properties

__all__ = ["equality_delete_schema", "write_equality_deletes"]


def write_equality_deletes(
    io: FileIO,
    locations: str | LocationProvider,
    schema: Schema,
    spec: PartitionSpec,
    spec_id: int,
    keys: pa.Table | pa.RecordBatch,
    equality_ids: Sequence[int],
    *,
    properties: Mapping[str, str] | None = None,
    backend: str = "auto",
) -> list[ContentFile]:
    """Write ``keys`` (columns named as the table's equality columns, nothing else) as equality delete
    files of spec ``spec``/``spec_id`` and return their manifest entries (``content`` 2, ``equality_ids``
    as given); none for no rows. :class:`SchemaMismatch` names a column that is missing, extra, of an
    incompatible type or NULL where the table requires a value."""
    ids = tuple(int(i) for i in equality_ids)
    key_schema = equality_delete_schema(schema, ids)
    _check_scope(schema, spec, spec_id, ids)
    table = keys if isinstance(keys, pa.Table) else pa.Table.from_batches([keys])
    _check_columns(table.schema, key_schema.fields, "")
    props = {
        k: v
        for k, v in delete_properties(properties).items()
        if not k.startswith(COLUMN_MODE_PREFIX) and k != MAX_INFERRED_PROPERTY
    }
    props[DEFAULT_MODE_PROPERTY] = "full"
    files = write_data_files(
        io,
        _DeleteNames(location_provider(locations, props)),
        key_schema,
        spec,
        table,
        properties=props,
        spec_id=spec_id,
        backend=backend,
    )
    return [replace(f, content=EQUALITY_DELETES, equality_ids=ids, sort_order_id=None) for f in files]


def equality_delete_schema(schema: Schema, equality_ids: Sequence[int]) -> Schema:
    """The schema of an equality delete file with ``equality_ids``: those fields and the structs leading
    to them, checked to be usable as delete columns."""
    ids = tuple(equality_ids)
    if not ids:
        raise SchemaMismatch("equality deletes need at least one equality column (equality_ids is empty)")
    if len(set(ids)) != len(ids):
        raise SchemaMismatch(f"equality_ids {list(ids)} name a column twice")
    for fid in ids:
        f = schema.by_id.get(fid)
        if f is None:
            raise SchemaMismatch(f"equality delete column id {fid} is not in schema {schema.schema_id}")
        name = schema.names_by_id[fid]
        if not isinstance(f.type, it.PrimitiveType):
            raise UnsupportedFeature(f"equality delete column {name!r} is a {f.type}, not a primitive column")
        if f.type.name in ("float", "double"):
            raise UnsupportedFeature(
                f"equality delete column {name!r} is a {f.type}: the spec excludes float and double columns"
            )
        parent: it.IcebergType = schema.as_struct
        for step in schema.paths_by_id[fid][:-1]:
            if not isinstance(parent, it.StructType):
                break
            parent = next(c.type for c in parent.fields if c.name == step)
        if not isinstance(parent, it.StructType):
            raise UnsupportedFeature(f"equality delete column {name!r} lies inside a list or map")
    return prune(schema, frozenset(ids))


def _check_scope(schema: Schema, spec: PartitionSpec, spec_id: int, ids: tuple[int, ...]) -> None:
    if spec.is_unpartitioned:
        return
    outside = [
        f for f in spec.fields if f.transform != "void" and not all(src in ids for src in f.source_ids)
    ]
    if outside:
        described = []
        for f in outside:
            sources = ", ".join(schema.names_by_id.get(s, str(s)) for s in f.source_ids)
            described.append(f"{f.name} ({f.transform} of {sources})")
        columns = [schema.names_by_id[i] for i in ids]
        raise UnsupportedFeature(
            f"equality deletes on {columns} cannot be placed in partitions of spec {spec_id}: its fields "
            f"{', '.join(described)} use other columns. Include those columns in the keys, or add an "
            "unpartitioned spec to the table and write the deletes with it (global equality deletes)"
        )


def _check_columns(arrow: pa.Schema | pa.StructType, fields: Sequence[it.NestedField], prefix: str) -> None:
    """The Arrow columns (or struct fields) must be exactly ``fields`` by name, recursively into structs."""
    names = [f.name for f in arrow] if isinstance(arrow, pa.StructType) else list(arrow.names)
    wanted = [f.name for f in fields]
    for name in names:
        if names.count(name) > 1:
            raise SchemaMismatch(f"equality delete keys: column {prefix + name!r} appears twice")
    if extra := [n for n in names if n not in wanted]:
        raise SchemaMismatch(
            f"equality delete keys: column {prefix + extra[0]!r} is not an equality column "
            f"(expected exactly {[prefix + w for w in wanted]})"
        )
    if missing := [w for w in wanted if w not in names]:
        raise SchemaMismatch(f"equality delete keys: equality column {prefix + missing[0]!r} is missing")
    for f in fields:
        if isinstance(f.type, it.StructType):
            at = arrow.field(f.name).type
            if not pa.types.is_struct(at):
                raise SchemaMismatch(
                    f"equality delete keys: column {prefix + f.name!r} is {at}, the table has a struct there"
                )
            _check_columns(at, f.type.fields, f"{prefix}{f.name}.")


@dataclass(frozen=True)
class _DeleteNames:
    """Names equality delete files ``<name>-deletes.parquet`` (as Iceberg Java), locations as ``inner``."""

    inner: LocationProvider

    def new_data_location(self, file_name: str, partition_path: str | None) -> str:
        stem = file_name.removesuffix(".parquet")
        return self.inner.new_data_location(f"{stem}-deletes.parquet", partition_path)

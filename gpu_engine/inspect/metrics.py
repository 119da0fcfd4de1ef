"""``readable_metrics``: each file's column metrics per primitive column, bounds decoded (Iceberg Java's
``MetricsUtil.readableMetricsSchema``): a struct with a field per primitive column of the current schema at
any depth (``a.b``, ``xs.element``, ``m.key``), sorted by name, each holding ``column_size``,
``value_count``, ``null_value_count``, ``nan_value_count`` and ``lower_bound`` / ``upper_bound`` in the
column's type. Bounds are decoded per column in one vectorised call (so 4-byte bounds written before an
int -> long promotion decode too); columns without bounds (geometry, geography, unknown) read null
bounds. Variant columns have no field: Java's VariantType is no primitive type.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.content_file import ContentFile
from ..iceberg.schema import Schema
from ..io.arrow_schema import to_arrow_type

_COUNTS = ("column_size", "value_count", "null_value_count", "nan_value_count")


def _columns(schema: Schema) -> list[tuple[str, it.NestedField, it.PrimitiveType]]:
    leaves = [
        (schema.names_by_id[fid], f, f.type)
        for fid, f in schema.by_id.items()
        if isinstance(f.type, it.PrimitiveType) and f.type != it.VARIANT
    ]
    return sorted(leaves, key=lambda item: item[0])


def _has_bounds(t: it.PrimitiveType) -> bool:
    return t not in (it.VARIANT, it.UNKNOWN) and not isinstance(t, (it.GeometryType, it.GeographyType))


def _bound_type(t: it.PrimitiveType) -> pa.DataType:
    # fixed(N) bounds are cut to 16 bytes under truncate(16) (Java's ParquetUtil too): binary, not fixed
    return to_arrow_type(t) if _has_bounds(t) and not isinstance(t, it.FixedType) else pa.binary()


def readable_metrics_type(schema: Schema) -> pa.StructType:
    fields = []
    for name, _, t in _columns(schema):
        bound = _bound_type(t)
        metrics = [pa.field(c, pa.int64()) for c in _COUNTS]
        metrics += [pa.field("lower_bound", bound), pa.field("upper_bound", bound)]
        fields.append(pa.field(name, pa.struct(metrics), nullable=False))
    return pa.struct(fields)


def readable_metrics(schema: Schema, files: Sequence[ContentFile]) -> pa.StructArray:
    """The ``readable_metrics`` of ``files`` (one struct per file)."""
    struct_type = readable_metrics_type(schema)
    if not struct_type.num_fields:
        return pa.array([{}] * len(files), struct_type)
    children = []
    for (_, f, t), field in zip(_columns(schema), struct_type, strict=True):
        fid = f.field_id
        counts = [
            pa.array([getattr(x, attr).get(fid) for x in files], pa.int64())
            for attr in ("column_sizes", "value_counts", "null_value_counts", "nan_value_counts")
        ]
        arrow = field.type.field("lower_bound").type
        bounds = [
            _bounds(t, arrow, [getattr(x, attr).get(fid) for x in files])
            for attr in ("lower_bounds", "upper_bounds")
        ]
        children.append(pa.StructArray.from_arrays([*counts, *bounds], fields=list(field.type)))
    return pa.StructArray.from_arrays(children, fields=list(struct_type))


def _bounds(t: it.PrimitiveType, arrow: pa.DataType, raw: list[bytes | None]) -> pa.Array:
    if not _has_bounds(t):
        return pa.nulls(len(raw), arrow)
    # a bound that does not decode shows as null (its bytes stay in lower_bounds / upper_bounds)
    decoded = serde.decode_array(t, pa.array(raw, pa.binary()), invalid_as_unknown=True)
    return decoded if decoded.type == arrow else decoded.cast(arrow)

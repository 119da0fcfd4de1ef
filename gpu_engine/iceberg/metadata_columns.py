"""Reserved metadata columns a scan can return (spec "Reserved Field IDs" and "Row Lineage").

``_file``, ``_pos``, ``_spec_id`` and ``_partition`` are computed by the reader; ``_row_id`` and
``_last_updated_sequence_number`` may also be stored in data files (v3) and are then read by field id,
with nulls filled by inheritance (:func:`gpu_engine.execute.metadata.inherit_lineage`).
"""

from __future__ import annotations

from . import types as it
from .metadata import TableMetadata

FILE = it.NestedField(2147483646, "_file", it.STRING, required=True)
POS = it.NestedField(2147483645, "_pos", it.LONG, required=True)
SPEC_ID = it.NestedField(2147483643, "_spec_id", it.INT, required=True)
PARTITION_ID = 2147483642
PARTITION_NAME = "_partition"
ROW_ID = it.NestedField(2147483540, "_row_id", it.LONG)
LAST_UPDATED_SEQUENCE_NUMBER = it.NestedField(2147483539, "_last_updated_sequence_number", it.LONG)

LINEAGE = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
NAMES = (FILE.name, POS.name, SPEC_ID.name, PARTITION_NAME, ROW_ID.name, LAST_UPDATED_SEQUENCE_NUMBER.name)


def partition_field(md: TableMetadata) -> it.NestedField:
    """``_partition``: a struct of every partition field of every spec (by partition field id, first
    spec first), so rows of files written under different specs share one type."""
    fields: dict[int, it.NestedField] = {}
    for spec_id in sorted(md.specs):
        spec = md.specs[spec_id]
        for f in spec.partition_type(md.schema_for_spec(spec)).fields:
            fields.setdefault(f.field_id, f)
    return it.NestedField(PARTITION_ID, PARTITION_NAME, it.StructType(tuple(fields.values())), required=True)


def field(md: TableMetadata, name: str) -> it.NestedField:
    """The metadata column called ``name`` (one of :data:`NAMES`)."""
    if name == PARTITION_NAME:
        return partition_field(md)
    by_name = {f.name: f for f in (FILE, POS, SPEC_ID, ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)}
    return by_name[name]

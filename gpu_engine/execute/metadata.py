"""Metadata columns of a task's rows: ``_file``, ``_pos``, ``_spec_id``, ``_partition`` and row lineage.

``_row_id`` and ``_last_updated_sequence_number`` are inherited where the file stores null (or does not
store them): ``first_row_id + _pos`` and the file's data sequence number (spec "Row Lineage"). A file
without a ``first_row_id`` (written before the table was upgraded to v3) reads both as null.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..iceberg import metadata_columns as mc
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..io.arrow_schema import to_arrow_schema
from ..tasks import DataFile


def positions(first_pos: int, n: int) -> np.ndarray:
    return np.arange(first_pos, first_pos + n, dtype=np.int64)


def metadata_column(
    field: it.NestedField,
    data: DataFile,
    pos: np.ndarray,
    *,
    partition_ids: tuple[int, ...] = (),
    stored: pa.Array | None = None,
) -> pa.Array:
    """``field``'s values for rows at file positions ``pos`` of ``data``. ``partition_ids``: the partition
    field ids of the file's spec, in the order of ``data.partition``; ``stored``: the file's own column
    for a row-lineage field, when it has one."""
    n = len(pos)
    if field.field_id == mc.FILE.field_id:
        return pa.repeat(pa.scalar(data.path, pa.large_string()), n)
    if field.field_id == mc.POS.field_id:
        return pa.array(pos, pa.int64())
    if field.field_id == mc.SPEC_ID.field_id:
        return pa.repeat(pa.scalar(data.spec_id, pa.int32()), n)
    if field.field_id == mc.PARTITION_ID:
        return _partition(field, dict(zip(partition_ids, data.partition, strict=True)), n)
    if data.first_row_id is None and field.field_id in {f.field_id for f in mc.LINEAGE}:
        return pa.nulls(n, pa.int64())  # spec "Row Lineage": no first_row_id, both columns read as null
    if field.field_id == mc.ROW_ID.field_id:
        inherited = None if data.first_row_id is None else pa.array(pos + data.first_row_id, pa.int64())
        return _inherit(stored, inherited, n)
    if field.field_id == mc.LAST_UPDATED_SEQUENCE_NUMBER.field_id:
        seq = data.data_sequence_number
        return _inherit(stored, None if seq is None else pa.repeat(pa.scalar(seq, pa.int64()), n), n)
    raise KeyError(f"{field.name} is not a metadata column")


def lineage_column(
    field: it.NestedField, files: Sequence[DataFile], pos: Sequence[np.ndarray], stored: pa.Array | None
) -> pa.Array:
    """Row-lineage column ``field`` of the rows at file positions ``pos[i]`` of ``files[i]``, in order:
    :func:`metadata_column` of each file, concatenated, made at once (a compaction's batch holds hundreds
    of files). ``stored``: the files' own column for all those rows, when they have one."""
    counts = np.fromiter((len(p) for p in pos), dtype=np.int64, count=len(pos))
    n = int(counts.sum())
    known = np.fromiter((f.first_row_id is not None for f in files), dtype=bool, count=len(files))
    if field.field_id == mc.ROW_ID.field_id:
        starts = np.fromiter((f.first_row_id or 0 for f in files), dtype=np.int64, count=len(files))
        values = np.concatenate(pos).astype(np.int64, copy=False) if len(pos) else np.empty(0, np.int64)
        values += np.repeat(starts, counts)  # in place: a new array already (one allocation less)
    elif field.field_id == mc.LAST_UPDATED_SEQUENCE_NUMBER.field_id:
        seqs = [f.data_sequence_number for f in files]
        known &= np.fromiter((s is not None for s in seqs), dtype=bool, count=len(files))
        values = np.repeat(np.fromiter((s or 0 for s in seqs), dtype=np.int64, count=len(files)), counts)
    else:
        raise KeyError(f"{field.name} is not a row-lineage column")
    valid = np.repeat(known, counts)
    inherited = pa.array(values, pa.int64(), mask=None if valid.all() else ~valid)
    if stored is None or stored.null_count == n:
        return inherited
    first_row_ids = np.repeat(
        np.fromiter((f.first_row_id is not None for f in files), dtype=bool, count=len(files)), counts
    )
    if not first_row_ids.all():  # no first_row_id: the file's stored values are not read either
        stored = pc.if_else(pa.array(first_row_ids), stored, pa.scalar(None, pa.int64()))
    out = pc.coalesce(stored, inherited)
    assert isinstance(out, pa.Array)
    return out


def _inherit(stored: pa.Array | None, inherited: pa.Array | None, n: int) -> pa.Array:
    if inherited is None:
        return stored if stored is not None else pa.nulls(n, pa.int64())
    if stored is None or stored.null_count == len(stored):
        return inherited
    out = pc.coalesce(stored, inherited)
    assert isinstance(out, pa.Array)
    return out


def _partition(field: it.NestedField, by_id: dict[int, Any], n: int) -> pa.Array:
    """The file's partition tuple in the table-wide ``_partition`` struct (fields of other specs null)."""
    struct = field.type
    assert isinstance(struct, it.StructType)
    arrow_type = to_arrow_schema(Schema((field,))).field(0).type
    values = {f.name: by_id.get(f.field_id) for f in struct.fields}
    row = pa.array([values], type=arrow_type)
    return row.take(pa.array(np.zeros(n, dtype=np.int32)))

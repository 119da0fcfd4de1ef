"""A frame's rows split by partition tuple, where the frame is (the frame twin of
:func:`gpu_engine.io.partition_split.split_by_partition`).

The partition source columns only are copied to the host; :func:`split_by_partition` computes the keys
there (the transform kernels of ``backend``) and numbers the rows of each partition; partitions are told
apart as Iceberg Java's partition keys are (every NaN one partition:
:func:`~gpu_engine.io.partition_split.partition_key`), and each partition's rows are gathered from the
frame in their order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from ..iceberg import types as it
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from ..io.partition_split import partition_key, split_by_partition
from .frame_sink import FrameSink

_ROW = "\x00row"  # the row index column of the source copy (no Iceberg name holds a NUL)


def split_frame(
    sink: FrameSink, frame: Any, schema: Schema, spec: PartitionSpec, arrow_schema: pa.Schema, backend: str
) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(partition tuple in ``spec``, that partition's rows) of ``frame`` (columns named as ``schema``'s,
    of ``arrow_schema``'s types), first seen first; the whole frame where all rows are one partition."""
    n = sink.num_rows(frame)
    if not spec.fields:
        yield (), frame
        return
    tops = sorted(
        {
            schema.paths_by_id[f.source_id][0]
            for f in spec.fields
            if f.transform != "void" and schema.find_field(f.source_id).type != it.UNKNOWN  # no values
        }
    )
    host = [sink.to_arrow(sink.column(frame, name), arrow_schema.field(name).type) for name in tops]
    batch = pa.record_batch([*host, pa.array(np.arange(n, dtype=np.int64))], names=[*tops, _ROW])
    groups: dict[tuple[Any, ...], tuple[tuple[Any, ...], list[np.ndarray]]] = {}
    for key, part in split_by_partition(batch, schema, spec, backend):
        groups.setdefault(partition_key(key), (key, []))[1].append(part.column(_ROW).to_numpy())
    for key, parts in groups.values():
        rows = np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        yield key, frame if len(rows) == n else sink.take(frame, rows)

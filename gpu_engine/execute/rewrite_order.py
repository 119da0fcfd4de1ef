"""The row order of a rewrite: as read (binpack), sorted, or z-ordered, within a memory budget.

Ordering holds at most ``budget_bytes`` of Arrow data, in units of a third of it: the rows being ordered
(made one chunk, then let go), their ordered copy, and the previous unit's copy while the writer still
holds slices of it. A group whose rows fit one unit is ordered in memory. A larger one is range-partitioned
through spill files (Arrow IPC, in a temporary directory removed afterwards, read without memory maps so
the pages read stay out of the resident set):

1. the rows stream to a spill file while a uniform sample of them is kept;
2. the sorted sample gives ``B - 1`` boundary rows, ``B`` chosen so each range holds about one unit; each
   spilled batch is ordered together with the boundary rows, and a row goes to the range of the
   boundaries ordered before it (ties go to the lower range, the same way in every batch);
3. each range is read back, ordered in memory and streamed out, ranges in order.

For ``sort`` this is a global sort of the group. For ``zorder`` the ranges come from z-ordering each
batch with the boundaries, and rows are z-ordered within their range: a clustering as good as the
sample, not the exact Morton order of the whole group.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from ..iceberg.schema import Schema
from ..tasks import RewriteStrategy
from .ordering import sort_indices, zorder_indices

SAMPLE_ROWS = 20_000
MAX_OPEN_RANGES = 256  # range files written at once (file descriptors): more ranges take more passes
_SEED = 20261123


def ordered(
    batches: Iterator[pa.RecordBatch],
    strategy: RewriteStrategy,
    schema: Schema,
    arrow_schema: pa.Schema,
    *,
    backend: str,
    budget_bytes: int,
    expected_rows: int,
    spill_dir: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """``batches`` in the strategy's order (see the module doc)."""
    if strategy.kind == "binpack":
        yield from batches
        return
    held: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        held.append(batch)
        size += batch.nbytes
        if size > _unit(budget_bytes):
            yield from _external(held, batches, strategy, schema, arrow_schema, backend, budget_bytes,
                                 expected_rows, spill_dir)  # fmt: skip
            return
    if held:  # the table is made in the call: no frame here holds the unordered rows
        yield from _ordered_batches(_take_all(held, arrow_schema), strategy, schema, backend)


def _unit(budget_bytes: int) -> int:
    return max(budget_bytes // 3, 1)


def _take_all(held: list[pa.RecordBatch], arrow_schema: pa.Schema) -> pa.Table:
    table = pa.Table.from_batches(held, schema=arrow_schema)
    held.clear()
    return table


def _ordered_batches(
    table: pa.Table, strategy: RewriteStrategy, schema: Schema, backend: str
) -> Iterator[pa.RecordBatch]:
    """``table``'s rows in order, ``table`` let go before the first batch goes out (only its ordered
    copy is held while they are written)."""
    if table.num_rows == 0:
        return
    single = table.combine_chunks()  # a take of many chunks would concatenate them first: a third copy
    del table
    out = _in_memory(single, strategy, schema, backend)
    del single
    yield from out.to_batches()


def order_indices(table: pa.Table, strategy: RewriteStrategy, schema: Schema, backend: str) -> np.ndarray:
    """Row indices that put ``table`` (at least the columns the strategy reads) in the strategy's order."""
    if strategy.kind == "sort":
        assert strategy.sort_order is not None
        return sort_indices(table, schema, strategy.sort_order, backend=backend)
    return zorder_indices(table, schema, strategy.zorder_columns, backend=backend)


def _in_memory(table: pa.Table, strategy: RewriteStrategy, schema: Schema, backend: str) -> pa.Table:
    if table.num_rows <= 1:
        return table
    return table.take(pa.array(order_indices(table, strategy, schema, backend), pa.int64()))


def _external(
    held: list[pa.RecordBatch],
    rest: Iterator[pa.RecordBatch],
    strategy: RewriteStrategy,
    schema: Schema,
    arrow_schema: pa.Schema,
    backend: str,
    budget_bytes: int,
    expected_rows: int,
    spill_dir: str | None,
) -> Iterator[pa.RecordBatch]:
    work = tempfile.mkdtemp(prefix="gpu-engine-sort-", dir=spill_dir)
    try:
        rng = np.random.default_rng(_SEED)
        rate = min(1.0, SAMPLE_ROWS / max(expected_rows, 1))
        spill = os.path.join(work, "all.arrow")
        samples: list[pa.RecordBatch] = []
        total = 0
        with pa.OSFile(spill, "wb") as sink, pa.ipc.new_file(sink, arrow_schema) as writer:
            for batch in _chain(held, rest):
                total += batch.nbytes
                writer.write_batch(batch)
                pick = np.flatnonzero(rng.random(batch.num_rows) < rate)
                if len(pick):
                    samples.append(batch.take(pa.array(pick, pa.int64())))
        held.clear()
        ranges = max(1, -(-total // _unit(budget_bytes)))
        bounds = _boundaries(samples, arrow_schema, ranges, strategy, schema, backend)
        paths = [os.path.join(work, f"range-{i}.arrow") for i in range(bounds.num_rows + 1)]
        _partition(spill, paths, bounds, arrow_schema, strategy, schema, backend)
        os.remove(spill)
        for path in paths:
            yield from _ordered_batches(_read_range(path), strategy, schema, backend)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _read_range(path: str) -> pa.Table:
    """A range file's rows (the file removed)."""
    with pa.OSFile(path) as source:
        table = pa.ipc.open_file(source).read_all()
    os.remove(path)
    return table


def _chain(held: list[pa.RecordBatch], rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    while held:
        yield held.pop(0)
    yield from rest


def _boundaries(
    samples: list[pa.RecordBatch], arrow_schema: pa.Schema, ranges: int, strategy: RewriteStrategy,
    schema: Schema, backend: str,
) -> pa.Table:  # fmt: skip
    """``ranges - 1`` sample rows at even quantiles of the order (fewer when the sample is small)."""
    sample = _in_memory(pa.Table.from_batches(samples, schema=arrow_schema), strategy, schema, backend)
    n = sample.num_rows
    if ranges <= 1 or n == 0:
        return sample.slice(0, 0)
    cuts = sorted({min(n - 1, (i * n) // ranges) for i in range(1, ranges)})
    return sample.take(pa.array(cuts, pa.int64()))


def _partition(
    spill: str, paths: list[str], bounds: pa.Table, arrow_schema: pa.Schema, strategy: RewriteStrategy,
    schema: Schema, backend: str,
) -> None:  # fmt: skip
    """Route every spilled row to the range file of the boundaries ordered before it; at most
    ``MAX_OPEN_RANGES`` range files are open at once (one pass over the spill file per that many)."""
    for lo in range(0, len(paths), MAX_OPEN_RANGES):
        _partition_pass(spill, paths, lo, bounds, arrow_schema, strategy, schema, backend)


def _partition_pass(
    spill: str, paths: list[str], lo: int, bounds: pa.Table, arrow_schema: pa.Schema,
    strategy: RewriteStrategy, schema: Schema, backend: str,
) -> None:  # fmt: skip
    hi = min(len(paths), lo + MAX_OPEN_RANGES)
    sinks = [pa.OSFile(p, "wb") for p in paths[lo:hi]]
    writers = [pa.ipc.new_file(s, arrow_schema) for s in sinks]
    try:
        with pa.OSFile(spill) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                if batch.num_rows == 0:
                    continue
                if bounds.num_rows == 0:
                    writers[0].write_batch(batch)
                    continue
                joint = pa.concat_tables([pa.Table.from_batches([batch], schema=arrow_schema), bounds])
                order = order_indices(joint, strategy, schema, backend)
                position = np.empty(len(order), dtype=np.int64)
                position[order] = np.arange(len(order), dtype=np.int64)
                bound_pos = np.sort(position[batch.num_rows :])
                which = np.searchsorted(bound_pos, position[: batch.num_rows], side="left")
                for r in np.unique(which):
                    if lo <= r < hi:
                        rows = np.flatnonzero(which == r)
                        writers[int(r) - lo].write_batch(batch.take(pa.array(rows, pa.int64())))
    finally:
        for w in writers:
            w.close()
        for s in sinks:
            s.close()

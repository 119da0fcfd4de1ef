"""The row order of a rewrite: as read (binpack), sorted, or z-ordered, within a memory budget.

Ordering holds at most ``budget_bytes`` of Arrow data, in units of a third of it: the rows being ordered
(made one chunk, then let go), their ordered copy, and the previous unit's copy while the writer still
holds slices of it. A group whose rows fit one unit is ordered in memory. A larger one is range-partitioned
through spill files (Arrow IPC, in a temporary directory removed afterwards, read without memory maps so
the pages read stay out of the resident set):

1. the rows stream to a spill file while a uniform sample of them is kept;
2. the sorted sample gives ``B - 1`` boundary rows, ``B`` chosen so each range holds about one unit, of
   which the distinct ones are kept (rows tied in the order are one boundary). A boundary value the
   sample holds often (1 / :data:`HEAVY` of a range's rows or more) gets a *tie range* of its
   own: the rows tied with it, whatever their number. Each spilled batch is ordered together with the
   boundary rows; a row goes to the tie range of the boundary it ties with, or else to the range of the
   boundaries ordered before it (rows tied with a boundary of no tie range go to the lower range, the
   same way in every batch);
3. ranges are read back in order. A tie range is streamed as spilled: its rows are equal in the order,
   so their input order is their order. Any other range is read, ordered in memory and streamed out;
   one that came out over :data:`OVERSIZE` units (a sample of some of the rows that missed: a sample of
   every row cuts ranges as evenly as rows allow) is first partitioned again, its own sample giving its
   boundaries, as in steps 2-3.

Every range holds the rows of an interval of the order, rows tied in the order keep their input order
through the spill and range files, and orderings are stable: for ``sort`` this is the global stable sort
of the group, the in-memory sort's very sequence, whatever the sample. For ``zorder`` the ranges come
from z-ordering each batch with the boundaries, and rows are z-ordered within their range: a clustering
as good as the sample, not the exact Morton order of the whole group.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from ..iceberg.schema import Schema
from ..iceberg.sorting import SortOrder
from ..tasks import RewriteStrategy
from .ordering import sort_indices, zorder_indices

SAMPLE_ROWS = 20_000
MAX_OPEN_RANGES = 256  # range files written at once (file descriptors): more ranges take more passes
OVERSIZE = 1.25  # units a range may hold before it is partitioned again
MAX_DEPTH = 4  # times a range is partitioned again at most (then ordered in memory whatever its size)
HEAVY = 8  # a boundary gets a tie range when the sample holds 1 / HEAVY of a range's rows tied with it
_SEED = 20261123

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class _Order:
    """What orders rows: the strategy over the schema on a backend."""

    strategy: RewriteStrategy
    schema: Schema
    arrow_schema: pa.Schema
    backend: str

    def indices(self, table: pa.Table) -> Ints:
        return order_indices(table, self.strategy, self.schema, self.backend)


@dataclass
class _Spilled:
    """Rows in a spill file: their number, their Arrow bytes and a uniform sample of them (``exact``:
    every row)."""

    path: str
    rows: int
    nbytes: int
    sample: list[pa.RecordBatch]
    exact: bool


@dataclass(frozen=True)
class _Ranges:
    """How a spill file is partitioned: the distinct boundary rows (in order) and, in output order, the
    files rows go to: ``strict[i]`` the slot of the rows between boundaries ``i - 1`` and ``i``,
    ``tied[i]`` that of the rows tied with boundary ``i`` (``strict[i]`` when it has no tie range)."""

    bounds: pa.Table
    strict: Ints
    tied: Ints
    tie_slot: npt.NDArray[np.bool_]  # per slot: a tie range (its rows all equal in the order)

    @property
    def slots(self) -> int:
        return len(self.tie_slot)


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
    if not strategy.orders_rows:
        yield from batches
        return
    held: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        held.append(batch)
        size += batch.nbytes
        if size > _unit(budget_bytes):
            how = _Order(strategy, schema, arrow_schema, backend)
            yield from _external(held, batches, how, budget_bytes, expected_rows, spill_dir)
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
    """Row indices that put ``table`` (at least the columns the strategy reads) in the strategy's order,
    by its ``cluster`` fields first."""
    if strategy.kind == "zorder":
        return zorder_indices(
            table, schema, strategy.zorder_columns, backend=backend, prefix=strategy.cluster
        )
    fields = strategy.sort_order.fields if strategy.sort_order is not None else ()
    return sort_indices(table, schema, SortOrder(0, (*strategy.cluster, *fields)), backend=backend)


def _in_memory(table: pa.Table, strategy: RewriteStrategy, schema: Schema, backend: str) -> pa.Table:
    if table.num_rows <= 1:
        return table
    return table.take(pa.array(order_indices(table, strategy, schema, backend), pa.int64()))


def _external(
    held: list[pa.RecordBatch],
    rest: Iterator[pa.RecordBatch],
    how: _Order,
    budget_bytes: int,
    expected_rows: int,
    spill_dir: str | None,
) -> Iterator[pa.RecordBatch]:
    work = tempfile.mkdtemp(prefix="gpu-engine-sort-", dir=spill_dir)
    try:
        spill = os.path.join(work, "all.arrow")
        spilled = _spill(_chain(held, rest), spill, how.arrow_schema, expected_rows)
        held.clear()
        yield from _range_sorted(spilled, how, budget_bytes, 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _spill(
    batches: Iterable[pa.RecordBatch], path: str, arrow_schema: pa.Schema, expected_rows: int
) -> _Spilled:
    """Write ``batches`` to ``path``, sampling about :data:`SAMPLE_ROWS` of their ``expected_rows``."""
    rng = np.random.default_rng(_SEED)
    rate = min(1.0, SAMPLE_ROWS / max(expected_rows, 1))
    spilled = _Spilled(path, 0, 0, [], rate >= 1.0)
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, arrow_schema) as writer:
        for batch in batches:
            spilled.rows += batch.num_rows
            spilled.nbytes += batch.nbytes
            writer.write_batch(batch)
            pick = np.flatnonzero(rng.random(batch.num_rows) < rate)
            if len(pick):
                spilled.sample.append(batch.take(pa.array(pick, pa.int64())))
    return spilled


def _resample(path: str, rows: int, nbytes: int) -> _Spilled:
    """A range file to partition again, with a sample of its own."""
    rng = np.random.default_rng(_SEED)
    rate = min(1.0, SAMPLE_ROWS / max(rows, 1))
    spilled = _Spilled(path, rows, nbytes, [], rate >= 1.0)
    for batch in _batches_of(path):
        pick = np.flatnonzero(rng.random(batch.num_rows) < rate)
        if len(pick):
            spilled.sample.append(batch.take(pa.array(pick, pa.int64())))
    return spilled


def _range_sorted(spilled: _Spilled, how: _Order, budget_bytes: int, depth: int) -> Iterator[pa.RecordBatch]:
    """The rows of a spill file in order, range by range (the module doc's steps 2 and 3)."""
    unit = _unit(budget_bytes)
    ranges = _ranges(spilled.sample, max(1, -(-spilled.nbytes // unit)), how)
    spilled.sample.clear()
    stem = spilled.path.removesuffix(".arrow")
    paths = [f"{stem}.{i}.arrow" for i in range(ranges.slots)]
    sizes = np.zeros((ranges.slots, 2), dtype=np.int64)  # rows and Arrow bytes written to each slot
    _partition(spilled.path, paths, ranges, how, sizes)
    os.remove(spilled.path)
    for path, tie, (rows, nbytes) in zip(paths, ranges.tie_slot, sizes.tolist(), strict=True):
        if tie or rows == 0:  # rows equal in the order: their input order is their order
            yield from _batches_of(path)
            os.remove(path)
        elif not spilled.exact and nbytes > OVERSIZE * unit and rows > 1 and depth < MAX_DEPTH:
            yield from _range_sorted(_resample(path, rows, nbytes), how, budget_bytes, depth + 1)
        else:
            yield from _ordered_batches(_read_range(path), how.strategy, how.schema, how.backend)


def _read_range(path: str) -> pa.Table:
    """A range file's rows (the file removed)."""
    with pa.OSFile(path) as source:
        table = pa.ipc.open_file(source).read_all()
    os.remove(path)
    return table


def _batches_of(path: str) -> Iterator[pa.RecordBatch]:
    """A spill or range file's batches, one read at a time."""
    with pa.OSFile(path) as source:
        reader = pa.ipc.open_file(source)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)


def _chain(held: list[pa.RecordBatch], rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    while held:
        yield held.pop(0)
    yield from rest


def _ranges(samples: list[pa.RecordBatch], ranges: int, how: _Order) -> _Ranges:
    """The boundaries of ``ranges`` ranges from the sample: ``ranges - 1`` sample rows at even quantiles
    of the order, the distinct ones kept (fewer when the sample is small), and their tie ranges."""
    sample = _in_memory(
        pa.Table.from_batches(samples, schema=how.arrow_schema), how.strategy, how.schema, how.backend
    )
    n = sample.num_rows
    if ranges <= 1 or n == 0:
        none = np.zeros(1, dtype=np.int64)
        return _Ranges(sample.slice(0, 0), none, none[:0], np.zeros(1, dtype=np.bool_))
    at = sorted({min(n - 1, (i * n) // ranges) for i in range(1, ranges)})
    cuts = sample.take(pa.array(at, pa.int64()))
    rows, below, _ = _classes(cuts, cuts, how)
    first = rows[below == np.arange(len(rows))]  # the first cut of each run of tied cuts
    bounds = cuts.take(pa.array(np.sort(first), pa.int64()))
    _, below, at_or_below = _classes(sample, bounds, how)
    ties = np.bincount(below[at_or_below > below], minlength=bounds.num_rows)
    heavy = ties >= max(2.0, n / ranges / HEAVY)
    # output order: strict range 0, [tie range 0], strict range 1, [tie range 1], ..., strict range D
    kinds = [False]
    strict, tied = [0], []
    for h in heavy.tolist():
        if h:
            tied.append(len(kinds))
            kinds.append(True)
        else:
            tied.append(strict[-1])
        strict.append(len(kinds))
        kinds.append(False)
    return _Ranges(bounds, np.array(strict, np.int64), np.array(tied, np.int64), np.array(kinds, np.bool_))


def _classes(rows: pa.Table, bounds: pa.Table, how: _Order) -> tuple[Ints, Ints, Ints]:
    """``rows``' indices in order and, for each, the number of ``bounds`` (in order) ordered before it
    and that number plus the bounds it ties with: ``rows`` are ordered between two copies of ``bounds``,
    and a stable order puts a row after the first copy's tied bounds and before the second's."""
    d, n = bounds.num_rows, rows.num_rows
    order = how.indices(pa.concat_tables([bounds, rows, bounds]))
    at_or_below = np.cumsum(order < d)
    below = np.cumsum(order >= d + n)
    mine = (order >= d) & (order < d + n)
    return order[mine] - d, below[mine], at_or_below[mine]


def _partition(spill: str, paths: list[str], ranges: _Ranges, how: _Order, sizes: Ints) -> None:
    """Route every spilled row to its range file (``sizes``: rows and Arrow bytes written to each); at
    most ``MAX_OPEN_RANGES`` range files are open at once (one pass over the spill file per that many)."""
    for lo in range(0, len(paths), MAX_OPEN_RANGES):
        _partition_pass(spill, paths, lo, ranges, how, sizes)


def _partition_pass(spill: str, paths: list[str], lo: int, ranges: _Ranges, how: _Order, sizes: Ints) -> None:
    hi = min(len(paths), lo + MAX_OPEN_RANGES)
    sinks = [pa.OSFile(p, "wb") for p in paths[lo:hi]]
    writers = [pa.ipc.new_file(s, how.arrow_schema) for s in sinks]
    try:
        for batch in _batches_of(spill):
            if batch.num_rows == 0:
                continue
            if ranges.bounds.num_rows == 0:
                rows, slot = np.arange(batch.num_rows), np.zeros(batch.num_rows, dtype=np.int64)
            else:  # the rows in order: their slots do not decrease, tied rows keep their input order
                table = pa.Table.from_batches([batch], schema=how.arrow_schema)
                rows, below, at_or_below = _classes(table, ranges.bounds, how)
                tie = ranges.tied[np.minimum(below, len(ranges.tied) - 1)]
                slot = np.where(at_or_below > below, tie, ranges.strict[below])
            starts = np.searchsorted(slot, np.arange(lo, hi + 1))
            for r in range(lo, hi):
                start, end = starts[r - lo], starts[r - lo + 1]
                if start == end:
                    continue
                if end - start == batch.num_rows:
                    piece = batch
                else:
                    piece = batch.take(pa.array(rows[start:end], pa.int64()))
                writers[r - lo].write_batch(piece)
                sizes[r] += (piece.num_rows, piece.nbytes)
    finally:
        for w in writers:
            w.close()
        for s in sinks:
            s.close()

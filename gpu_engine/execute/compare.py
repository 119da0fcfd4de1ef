"""Data files live in two snapshots, read once with each snapshot's deletes: what a changelog needs of
the files whose deletes changed.

For each :class:`FilePair` (one file, as planned in the parent and in the snapshot) the rows alive in the
parent but not in the snapshot come out as the projection's batches, with the positions alive in the
snapshot but not in the parent (rows a smaller deletion vector brought back). Each side's deletes are
loaded by a :class:`~gpu_engine.execute.deletes.DeleteLoader` of its own, so each holds the tasks of
one snapshot as planned (the contract of :mod:`.deletes`); ``delete_cache`` lets consecutive
comparisons share what they load. Pairs run on worker threads in order, like a scan's tasks; with
fewer pairs than workers, each pair's row groups run as pairs of their own.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from ..backend.select import BackendChoice, choose
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..io.fileio import FileIO
from ..planning.splits import row_group_ranges
from ..tasks import ScanTask
from .delete_cache import DeleteCache
from .deletes import DeleteLoader
from .projection import Projection
from .scan import default_workers, read_name_mapping
from .stream import ordered
from .task import TaskContext, compare_task


@dataclass(frozen=True)
class FilePair:
    """One data file's rows (the same bytes of it) with the parent's and with the snapshot's deletes."""

    before: ScanTask
    after: ScanTask


@dataclass(frozen=True)
class Difference:
    path: str
    gone: pa.RecordBatch  # rows alive before, not after: the projection's columns
    again: np.ndarray  # int64 positions alive after, not before


def compare(
    md: TableMetadata,
    io: FileIO,
    schema: Schema,
    pairs: Sequence[FilePair],
    projection: Projection,
    *,
    backend: str = "auto",
    case_sensitive: bool = True,
    workers: int | None = None,
    delete_cache: DeleteCache | None = None,
) -> tuple[BackendChoice, Iterator[Difference]]:
    """The backend chosen and the differences of ``pairs``, in their order (see the module doc)."""
    choice = choose(backend)
    workers = workers or default_workers()
    pieces = _pieces(pairs, workers)
    mapping = read_name_mapping(md)

    def loader(tasks: tuple[ScanTask, ...]) -> DeleteLoader:
        return DeleteLoader(md, io, schema, tasks, choice.name, mapping, delete_cache)

    before = loader(tuple(p.before for p in pieces))
    after = loader(tuple(p.after for p in pieces))
    ctx = TaskContext(md, io, projection, before, choice.name, mapping, case_sensitive)

    def run(pair: FilePair) -> Iterator[Difference]:
        for gone, again in compare_task(pair.before, pair.after, ctx, after):
            yield Difference(pair.before.file.path, gone, again)

    def finished(pair: FilePair) -> None:
        before.release(pair.before)
        after.release(pair.after)

    return choice, ordered(pieces, run, workers=workers, done=finished)


def _pieces(pairs: Sequence[FilePair], workers: int) -> tuple[FilePair, ...]:
    """The pairs, or with fewer pairs than ``workers`` each pair's row groups."""
    if len(pairs) >= workers:
        return tuple(pairs)
    out = []
    for p in pairs:
        for start, length in row_group_ranges(p.before.file, p.before.start, p.before.length):
            out.append(
                FilePair(
                    replace(p.before, start=start, length=length),
                    replace(p.after, start=start, length=length),
                )
            )
    return tuple(out)

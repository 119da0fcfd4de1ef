"""Where a compaction's file groups are rewritten: :class:`LocalRunner` (threads of this process) or a
cluster runner with the same protocol (:class:`gpu_engine.spark.SparkRunner`).

A runner yields each group with its :class:`~gpu_engine.tasks.RewriteResult`, or the exception that
failed it, as groups finish, running at most ``concurrency`` at once. Closing the iterator early cancels
the groups not started and deletes the files of groups that finished but were not yet yielded.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Protocol

from ..iceberg.metadata import TableMetadata
from ..io.fileio import FileIO
from ..tasks import FileGroup, RewriteResult, RewriteStrategy
from .delete_cache import DeleteCache
from .group_rewrite import discard, rewrite_file_group

Outcome = RewriteResult | Exception


@dataclass(frozen=True)
class GroupJob:
    """What every group of one compaction shares: the table as planned and how to rewrite."""

    metadata: TableMetadata
    metadata_location: str
    io: FileIO
    strategy: RewriteStrategy
    backend: str
    parquet_io: str = "pyarrow"  # see :mod:`.group_rewrite`


class GroupRunner(Protocol):
    def run(
        self,
        job: GroupJob,
        groups: Sequence[FileGroup],
        *,
        concurrency: int,
        started: Callable[[FileGroup], None],
    ) -> Generator[tuple[FileGroup, Outcome], None, None]: ...


def pooled(
    groups: Sequence[FileGroup],
    work: Callable[[FileGroup], RewriteResult],
    *,
    io: FileIO,
    concurrency: int,
    started: Callable[[FileGroup], None],
    cancel: Callable[[], None] | None = None,
) -> Generator[tuple[FileGroup, Outcome], None, None]:
    """The runner loop: ``work`` on each group from a thread pool, at most ``concurrency`` at once, outcomes
    as they finish. Closed early, it cancels what has not started (and calls ``cancel`` for what runs
    elsewhere), waits for the rest and discards their results."""
    queue = list(groups)
    futures: dict[Future[RewriteResult], FileGroup] = {}
    slots = max(1, concurrency)
    pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="gpu-engine-group")
    try:
        while queue or futures:
            while queue and len(futures) < slots:
                g = queue.pop(0)
                started(g)
                futures[pool.submit(work, g)] = g
            finished, _ = wait(futures, return_when=FIRST_COMPLETED)
            for fut in finished:
                g = futures.pop(fut)
                exc = fut.exception()
                if exc is not None and not isinstance(exc, Exception):
                    raise exc  # KeyboardInterrupt and the like end the compaction
                yield g, exc if exc is not None else fut.result()
    finally:
        for fut in futures:
            fut.cancel()
        if futures and cancel is not None:
            cancel()
        pool.shutdown(wait=True)
        for fut in futures:
            if not fut.cancelled() and fut.exception() is None:
                discard(io, fut.result())


class LocalRunner:
    """Groups on a thread pool of this process, sharing the delete files they load (:mod:`.delete_cache`:
    groups of one partition, or under global deletes, use the same equality deletes)."""

    def run(
        self,
        job: GroupJob,
        groups: Sequence[FileGroup],
        *,
        concurrency: int,
        started: Callable[[FileGroup], None],
    ) -> Generator[tuple[FileGroup, Outcome], None, None]:
        kept = DeleteCache()

        def work(g: FileGroup) -> RewriteResult:
            return rewrite_file_group(
                job.metadata, job.io, g, job.strategy, parquet_io=job.parquet_io, backend=job.backend,
                delete_cache=kept,
            )  # fmt: skip

        return pooled(groups, work, io=job.io, concurrency=concurrency, started=started)

"""Run tasks on worker threads and stream their batches in task order, with bounded memory.

At most ``workers`` tasks run at once and each may run at most ``depth`` batches ahead of the consumer,
so at most ``workers * depth`` batches are in flight whatever the table's size. Parquet decoding and the
kernels release the GIL, so threads overlap I/O, decoding and masks. Stopping early (a ``limit``, an
exception, a closed generator) stops the workers at their next batch.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
B = TypeVar("B")


@dataclass(frozen=True)
class _Done:
    error: BaseException | None = None


class _Cancelled(Exception):
    """The consumer stopped: the worker drops its task."""


class _Channel(Generic[B]):
    def __init__(self, depth: int, stop: threading.Event) -> None:
        self.q: queue.Queue[B | _Done] = queue.Queue(maxsize=depth)
        self.stop = stop

    def put(self, item: B | _Done) -> None:
        while True:
            if self.stop.is_set():
                raise _Cancelled
            try:
                self.q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue


def ordered(
    tasks: Sequence[T],
    run: Callable[[T], Iterator[B]],
    *,
    workers: int,
    depth: int = 2,
    done: Callable[[T], None] | None = None,
) -> Iterator[B]:
    """``run(task)``'s items for every task, in task order; ``done(task)`` after each task finishes."""
    if workers <= 1:
        for task in tasks:
            yield from run(task)
            if done is not None:
                done(task)
        return
    stop = threading.Event()

    def produce(task: T, channel: _Channel[B]) -> None:
        try:
            for item in run(task):
                channel.put(item)
            if done is not None:
                done(task)
            channel.put(_Done())
        except _Cancelled:
            return
        except BaseException as e:  # handed to the consumer, which raises it in order
            with contextlib.suppress(_Cancelled):
                channel.put(_Done(e))

    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpu-engine-scan")
    channels: list[_Channel[B]] = []
    try:
        submitted = 0
        for i in range(len(tasks)):
            while submitted < len(tasks) and submitted < i + workers:
                channel: _Channel[B] = _Channel(depth, stop)
                channels.append(channel)
                pool.submit(produce, tasks[submitted], channel)
                submitted += 1
            current = channels[i]
            while True:
                item = current.q.get()
                if isinstance(item, _Done):
                    if item.error is not None:
                        raise item.error
                    break
                yield item
            channels[i] = _Channel(0, stop)  # drop the finished channel's references
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)

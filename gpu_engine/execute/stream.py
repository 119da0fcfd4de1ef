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


def prefetch(items: Iterator[B], *, max_bytes: int, size: Callable[[B], int]) -> Iterator[B]:
    """``items``, pulled by a background thread while the consumer works, up to ``max_bytes`` (by
    ``size``) ahead of it: a writer encoding a row group no longer stalls the reads feeding it. One item
    is always allowed, however large. Errors reach the consumer in order; stopping early stops the thread
    at its next item."""
    cond = threading.Condition()
    buffered: list[B | _Done] = []
    held = [0]
    stop = threading.Event()

    def pull() -> None:
        try:
            for item in _closing(items):
                n = size(item)
                with cond:
                    while held[0] > 0 and held[0] + n > max_bytes and not stop.is_set():
                        cond.wait(0.05)
                    if stop.is_set():
                        return
                    buffered.append(item)
                    held[0] += n
                    cond.notify_all()
            done: _Done = _Done()
        except BaseException as e:  # handed to the consumer
            done = _Done(e)
        with cond:
            buffered.append(done)
            cond.notify_all()

    thread = threading.Thread(target=pull, name="gpu-engine-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            with cond:
                while not buffered:
                    cond.wait()
                item = buffered.pop(0)
                if not isinstance(item, _Done):
                    held[0] -= size(item)
                    cond.notify_all()
            if isinstance(item, _Done):
                if item.error is not None:
                    raise item.error
                return
            yield item
    finally:
        stop.set()
        with cond:
            cond.notify_all()
        if thread is not threading.current_thread():  # closed by the collector on the thread itself (an
            thread.join()  # error it handed over kept this generator alive): it ends on returning


def _closing(items: Iterator[B]) -> Iterator[B]:
    """``items``, closed (a generator's cleanup run) when the loop over it ends, early or not."""
    try:
        yield from items
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()

"""Ordered, bounded streaming of task batches over worker threads."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator

import pytest

from gpu_engine.execute.stream import ordered, prefetch


def _batches(task: int) -> Iterator[tuple[int, int]]:
    for j in range(task % 4):
        time.sleep(0.001 * ((task * 7 + j) % 3))  # tasks finish out of order
        yield task, j


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_items_come_in_task_order(workers: int) -> None:
    tasks = list(range(30))
    done: list[int] = []
    lock = threading.Lock()

    def finished(t: int) -> None:
        with lock:
            done.append(t)

    out = list(ordered(tasks, _batches, workers=workers, depth=1, done=finished))
    assert out == [(t, j) for t in tasks for j in range(t % 4)]
    assert sorted(done) == tasks


def test_error_of_a_task_is_raised_in_order() -> None:
    def run(task: int) -> Iterator[int]:
        if task == 3:
            raise ValueError("task 3 failed")
        yield task

    seen = []
    with pytest.raises(ValueError, match="task 3 failed"):
        for item in ordered(list(range(10)), run, workers=3):
            seen.append(item)
    assert seen == [0, 1, 2]


def test_items_in_flight_are_bounded_and_workers_stop_early() -> None:
    produced = 0
    lock = threading.Lock()

    def run(task: int) -> Iterator[int]:
        nonlocal produced
        for j in range(1000):
            with lock:
                produced += 1
            yield j

    workers, depth = 3, 2
    stream = ordered(list(range(50)), run, workers=workers, depth=depth)
    assert isinstance(stream, Generator)
    for consumed, _ in enumerate(stream, start=1):
        if consumed == 10:
            time.sleep(0.2)  # let the workers run ahead as far as they can
            with lock:
                ahead = produced - consumed
            # each worker holds at most `depth` queued items plus the one it is trying to put
            assert ahead <= workers * (depth + 1)
            break
    stream.close()  # stops the workers; the pool shuts down
    with lock:
        stopped_at = produced
    time.sleep(0.1)
    with lock:
        assert produced == stopped_at


def test_prefetch_keeps_order_and_reads_ahead_within_its_bytes() -> None:
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for i in range(10):
            pulled.append(i)
            yield i

    out = prefetch(source(), max_bytes=3, size=lambda _: 1)
    assert next(out) == 0
    deadline = time.monotonic() + 5
    while len(pulled) < 5 and time.monotonic() < deadline:  # the thread reads ahead while we wait
        time.sleep(0.01)
    time.sleep(0.05)
    assert len(pulled) == 5  # 0 consumed, 1..3 buffered (3 bytes), 4 waiting for room; no more
    assert list(out) == list(range(1, 10))


def test_prefetch_raises_errors_in_order_and_stops_early() -> None:
    closed = threading.Event()

    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("bad batch")

    out = prefetch(failing(), max_bytes=10, size=lambda _: 1)
    assert next(out) == 1
    with pytest.raises(ValueError, match="bad batch"):
        next(out)

    def endless() -> Generator[int, None, None]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    early = prefetch(endless(), max_bytes=4, size=lambda _: 1)
    assert [next(early) for _ in range(3)] == [0, 1, 2]
    early.close()  # type: ignore[attr-defined]
    assert closed.wait(5)  # the source was closed, its cleanup ran


def test_prefetch_passes_one_item_larger_than_its_bytes() -> None:
    assert list(prefetch(iter([10, 1, 10]), max_bytes=2, size=lambda n: n)) == [10, 1, 10]


def test_prefetch_closed_on_its_own_thread_ends_without_joining_itself() -> None:
    """The collector may finalize a prefetch on its reading thread (an error handed over kept it in a
    cycle): its cleanup joined the current thread ('cannot join current thread' printed as ignored)."""
    holder: dict[str, Generator[int, None, None]] = {}
    taken = threading.Event()
    errors: list[BaseException] = []

    def items() -> Iterator[int]:
        yield 1
        taken.wait(5)
        try:
            holder["gen"].close()  # as the collector would, on this thread
        except BaseException as e:
            errors.append(e)
        yield 2

    gen = prefetch(items(), max_bytes=10, size=lambda _: 1)
    assert isinstance(gen, Generator)
    holder["gen"] = gen
    assert next(gen) == 1
    taken.set()
    deadline = time.monotonic() + 5
    while (
        not errors
        and time.monotonic() < deadline
        and any(t.name == "gpu-engine-prefetch" and t.is_alive() for t in threading.enumerate())
    ):
        time.sleep(0.01)
    assert errors == []

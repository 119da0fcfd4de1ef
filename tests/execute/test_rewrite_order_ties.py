"""Ordering through spill files when the order has ties: keys with few distinct values (a constant, a
day, a mostly-null column) put runs of equal boundary rows in the sample. Every range read back into
memory stays within its unit whatever the keys (rows tied with a boundary held often in the sample are
streamed, not read whole; a range past :data:`~gpu_engine.execute.rewrite_order.OVERSIZE` units is
partitioned again), and the rows come out as the in-memory (stable) order puts them."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pytest

from gpu_engine.commit.schema_from_arrow import schema_from_arrow
from gpu_engine.execute import rewrite_order
from gpu_engine.iceberg.sorting import SortField, SortOrder
from gpu_engine.tasks import RewriteStrategy

ROWS, BATCH = 120_000, 6_000
BUDGET = 3 * (64 << 10)  # units of 64 KiB: 44 ranges of the 2.7 MiB of rows
UNIT = BUDGET // 3
SCHEMA = pa.schema([("k", pa.int64()), ("j", pa.int64()), ("v", pa.int64())])

Keys = Callable[[np.random.Generator, int], pa.Array]


def _constant(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(np.full(n, 7, dtype=np.int64))


def _three(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.choice(np.array([-5, 0, 9], dtype=np.int64), n, p=[0.2, 0.5, 0.3]))


def _mostly_null(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.integers(0, 1 << 40, n), mask=rng.random(n) < 0.9)


def _one_heavy(rng: np.random.Generator, n: int) -> pa.Array:
    """A day holding 60% of the rows among many values held once or twice."""
    return pa.array(np.where(rng.random(n) < 0.6, 1 << 20, rng.integers(0, 1 << 21, n)))


def _distinct(rng: np.random.Generator, n: int) -> pa.Array:
    return pa.array(rng.integers(0, 1 << 60, n))


KEYS: dict[str, Keys] = {
    "constant": _constant, "three-values": _three, "mostly-null": _mostly_null, "one-heavy": _one_heavy,
    "distinct": _distinct,
}  # fmt: skip


def _batches(keys: Keys) -> Iterator[pa.RecordBatch]:
    rng = np.random.default_rng(11)
    for start in range(0, ROWS, BATCH):
        j = rng.integers(0, 4, BATCH)  # a second z-order column with ties of its own
        v = np.arange(start, start + BATCH)  # the input order, to see ties keep it
        yield pa.record_batch([keys(rng, BATCH), pa.array(j), pa.array(v)], SCHEMA)


def _strategy(kind: str) -> RewriteStrategy:
    if kind == "zorder":
        return RewriteStrategy("zorder", zorder_columns=("k", "j"))
    return RewriteStrategy("sort", SortOrder(1, (SortField((1,), "identity", "asc", "nulls-first"),)))


def _run(
    monkeypatch: pytest.MonkeyPatch, keys: Keys, kind: str, expected_rows: int
) -> tuple[pa.Table, list[int]]:
    """The rows ``ordered`` puts out and the Arrow bytes of every range it read whole."""
    loaded: list[int] = []
    real = rewrite_order._read_range

    def spy(path: str) -> pa.Table:
        table = real(path)
        loaded.append(table.nbytes)
        return table

    monkeypatch.setattr(rewrite_order, "_read_range", spy)
    out = rewrite_order.ordered(
        _batches(keys), _strategy(kind), schema_from_arrow(SCHEMA), SCHEMA, backend="cpu",
        budget_bytes=BUDGET, expected_rows=expected_rows,
    )  # fmt: skip
    return pa.Table.from_batches(list(out), schema=SCHEMA), loaded


def _in_memory(keys: Keys, kind: str) -> pa.Table:
    table = pa.Table.from_batches(list(_batches(keys)), schema=SCHEMA)
    return rewrite_order._in_memory(table, _strategy(kind), schema_from_arrow(SCHEMA), "cpu")


@pytest.mark.parametrize("kind", ["sort", "zorder"])
@pytest.mark.parametrize("name", sorted(KEYS))
def test_ranges_read_back_stay_within_their_unit_whatever_the_ties(
    monkeypatch: pytest.MonkeyPatch, name: str, kind: str
) -> None:
    """Before tie ranges, rows tied with a run of equal boundaries all went to one range, read and
    ordered whole: the group itself for a constant key (2.7 MiB, 44 units)."""
    out, loaded = _run(monkeypatch, KEYS[name], kind, ROWS)
    assert max(loaded, default=0) <= 1.25 * UNIT, (max(loaded) / UNIT, len(loaded))  # OVERSIZE
    # integer columns: the ranges are intervals of the whole group's order, so even the z-order is the
    # in-memory one; both stable (``v`` the input order)
    assert out.equals(_in_memory(KEYS[name], kind))


@pytest.mark.parametrize("kind", ["sort", "zorder"])
def test_a_range_a_small_sample_missed_is_partitioned_again(
    monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A group 1000 times smaller than expected is sampled at a thousandth of the rate: ~20 sample rows
    for 44 ranges, so some ranges come out several units large; each is partitioned again from a
    sample of its own rather than read whole."""
    again: list[int] = []
    real = rewrite_order._resample

    def spy(path: str, rows: int, nbytes: int) -> rewrite_order._Spilled:
        again.append(nbytes)
        return real(path, rows, nbytes)

    monkeypatch.setattr(rewrite_order, "_resample", spy)
    out, loaded = _run(monkeypatch, _distinct, kind, 1000 * ROWS)
    assert again and max(again) > 2 * UNIT  # the sample missed ...
    assert max(loaded) <= 1.25 * UNIT  # ... and no range was read whole past its unit
    assert out.equals(_in_memory(_distinct, kind))

"""``make demo``: what gpu-engine does today, for real, on generated data.

Computes the partition values of a generated million-row events table (Iceberg transforms day, hour,
bucket, truncate) on the best available backend, checks them against the CPU backend when that
backend is CUDA, and prints per-transform throughput.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.table import Table

from . import transforms
from .backend import choose
from .kernels.elementwise import PARALLEL_FROM

# (column, Iceberg source type, transform): a typical events table's partition candidates
PARTITION_FIELDS = [
    ("ts", "timestamp", "day"),
    ("ts", "timestamp", "hour"),
    ("ts", "timestamp", "month"),
    ("id", "long", "bucket[16]"),
    ("user", "string", "bucket[64]"),
    ("user", "string", "truncate[4]"),
    ("amount", "decimal(18, 2)", "bucket[8]"),
    ("amount", "decimal(18, 2)", "truncate[100]"),
]


def events(rows: int, seed: int = 7) -> pa.Table:
    """A generated events table with ~1% nulls in every column."""
    rng = np.random.default_rng(seed)
    start = np.datetime64("2023-01-01T00:00:00", "us").astype(np.int64)
    ts = start + rng.integers(0, 400 * 86_400_000_000, rows)
    users = np.array([f"user-{i:06d}-{'x' * (i % 7)}" for i in range(5_000)])
    cents = rng.integers(-(10**9), 10**9, rows)
    mask = rng.random(rows) < 0.01
    return pa.table(
        {
            "id": pa.array(rng.integers(0, 2**62, rows), mask=mask),
            "ts": pa.array(ts, pa.timestamp("us"), mask=mask),
            "user": pa.array(users[rng.integers(0, len(users), rows)], pa.string(), mask=mask),
            "amount": _decimals(cents, 2, mask),
        }
    )


def _decimals(unscaled: np.ndarray[Any, Any], scale: int, mask: np.ndarray[Any, Any]) -> pa.Array:
    """decimal128(18, scale) values from int64 unscaled values (two little-endian words each)."""
    words = np.stack([unscaled, unscaled >> 63], axis=1).ravel()
    dtype = pa.decimal128(18, scale)
    values = pa.Array.from_buffers(dtype, len(unscaled), [None, pa.py_buffer(words)])
    return pc.if_else(pa.array(mask), pa.scalar(None, dtype), values)


@dataclass(frozen=True)
class Timing:
    column: str
    transform: str
    seconds: float
    rows: int

    @property
    def mrows_per_s(self) -> float:
        return self.rows / self.seconds / 1e6


def run(rows: int, backend: str, console: Console) -> list[Timing]:
    choice = choose(backend)
    console.print(f"[bold]backend[/bold] {choice.name}: {choice.reason}")
    table = events(rows)
    console.print(
        f"generated {rows:,} rows ({table.nbytes / 1e6:.0f} MB), columns {', '.join(table.column_names)}"
    )
    timings = []
    for column, source_type, transform in PARTITION_FIELDS:
        values = table[column]
        # compile first (the parallel CPU loop is only used from PARALLEL_FROM elements on)
        transforms.apply(transform, source_type, values.slice(0, 2 * PARALLEL_FROM), backend=choice.name)
        t0 = time.perf_counter()
        result = transforms.apply(transform, source_type, values, backend=choice.name)
        elapsed = time.perf_counter() - t0
        if choice.name == "cuda":
            expected = transforms.apply(transform, source_type, values, backend="cpu")
            if not result.equals(expected):
                raise AssertionError(f"{transform}({column}): CUDA and CPU results differ")
        timings.append(Timing(column, transform, elapsed, rows))
    return timings


def report(timings: list[Timing], console: Console) -> None:
    table = Table(title="Iceberg partition transforms")
    for name, justify in (("transform", "left"), ("source", "left"), ("ms", "right"), ("M rows/s", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for t in timings:
        table.add_row(t.transform, t.column, f"{t.seconds * 1e3:.1f}", f"{t.mrows_per_s:.1f}")
    console.print(table)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"])
    args = parser.parse_args(argv)
    console = Console()
    report(run(args.rows, args.backend, console), console)


if __name__ == "__main__":
    main()

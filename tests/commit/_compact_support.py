"""Shared helpers of the compaction tests: tables with small files and merge-on-read deletes, strict row
comparison (floats by their bits), the files snapshots reference, the manifest entries of a snapshot and a
progress hook that commits through a second handle while a compaction runs."""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit.entries import live_entries, snapshot_manifests
from gpu_engine.iceberg.manifest_write import ManifestEntry
from gpu_engine.table import Table
from gpu_engine.tasks import FileGroup, RewriteResult

from ._support import referenced_files, sql_catalog

FAST_RETRIES = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}
REGIONS = ("eu", "us", "apac")
NAMES = ("alma", "bea", "cy", "dora", "émile", "zoë", "Ann", "b")
SPECIAL_FLOATS = (math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("x", pa.float64()),
        pa.field("a", pa.int32()),
        pa.field("b", pa.int64()),
        pa.field("region", pa.string()),
    ]
)


def gen_rows(start: int, n: int, *, seed: int = 0) -> pa.Table:
    """``n`` rows with ids ``start..start+n-1``: short names (nulls, non-ASCII), floats with NaN of both
    signs, infinities and both zeros, small ints with nulls."""
    rng = random.Random(seed * 1_000_003 + start)

    def maybe(v: object, p: float = 0.1) -> object:
        return None if rng.random() < p else v

    def x() -> object:
        r = rng.random()
        if r < 0.1:
            return None
        if r < 0.25:
            return rng.choice(SPECIAL_FLOATS)
        return rng.choice((-1.0, 1.0)) * rng.randrange(0, 50) / 4

    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": [maybe(rng.choice(NAMES)) for _ in range(n)],
            "x": pa.array([x() for _ in range(n)], pa.float64()),
            "a": [maybe(rng.randrange(-20, 20)) for _ in range(n)],
            "b": [maybe(rng.randrange(-(1 << 40), 1 << 40)) for _ in range(n)],
            "region": [rng.choice(REGIONS) for _ in range(n)],
        },
        schema=SCHEMA,
    )


def new_table(
    tmp_path: Path,
    version: int,
    *,
    partitioned: bool = False,
    name: str = "t",
    properties: dict[str, str] | None = None,
) -> tuple[SqlCatalog, Table]:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        f"db.{name}",
        schema=SCHEMA,
        partition_spec=["region"] if partitioned else [],
        properties={"format-version": str(version), **FAST_RETRIES, **(properties or {})},
    )
    return cat, tbl


# -- strict comparison ------------------------------------------------------------------------------------


def _canon(v: Any) -> Any:
    if isinstance(v, float):  # by bits: NaN == NaN of the same sign, -0.0 != 0.0
        return ("f", struct.unpack("<q", struct.pack("<d", v))[0])
    return v


def canonical_rows(table: pa.Table, key: Sequence[str] = ("id",)) -> list[tuple[Any, ...]]:
    """The rows of ``table`` sorted by ``key`` then by everything, floats compared by their bits."""
    names = table.column_names
    cols = [table.column(n).to_pylist() for n in names]
    out = [tuple(_canon(c[i]) for c in cols) for i in range(table.num_rows)]
    idx = [names.index(k) for k in key]
    return sorted(out, key=lambda r: (tuple(r[i] for i in idx), repr(r)))


def _plain(t: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_large_string(t) else t


def assert_rows_equal(actual: pa.Table, expected: pa.Table, *, context: str = "") -> None:
    """Same column names and types and the same multiset of rows (sorted tables compared row by row)."""
    assert actual.column_names == expected.column_names, (context, actual.column_names, expected.column_names)
    for n in actual.column_names:
        assert _plain(actual.schema.field(n).type) == _plain(expected.schema.field(n).type), (context, n)
    assert actual.num_rows == expected.num_rows, (context, actual.num_rows, expected.num_rows)
    a, e = canonical_rows(actual), canonical_rows(expected)
    if a != e:
        diff = [(x, y) for x, y in zip(a, e, strict=True) if x != y][:5]
        raise AssertionError(f"{context}: rows differ, first differences (actual, expected): {diff}")


# -- files and entries ------------------------------------------------------------------------------------


def data_files(tbl: Table) -> list[str]:
    """The live data files of the current snapshot."""
    return sorted({t.file.path for t in tbl.scan().plan().tasks})


def parquet_files_on_disk(tbl: Table) -> set[str]:
    return {str(p) for p in Path(tbl.location, "data").rglob("*.parquet")}


def snapshot_entries(tbl: Table, snapshot_id: int | None = None) -> list[ManifestEntry]:
    """The live manifest entries (data and deletes) of a snapshot (default: the current one)."""
    md = tbl.metadata
    snap = md.current_snapshot() if snapshot_id is None else md.snapshot_by_id(snapshot_id)
    assert snap is not None
    out: list[ManifestEntry] = []
    for m in snapshot_manifests(tbl.io, snap):
        spec = md.spec_by_id(m.partition_spec_id or 0)
        out.extend(live_entries(tbl.io, m, spec))
    return out


def operation(snapshot: Any) -> str | None:
    """The ``operation`` of a snapshot's summary."""
    return (snapshot.summary or {}).get("operation")


def replace_snapshots(tbl: Table) -> int:
    return sum(operation(s) == "replace" for s in tbl.metadata.snapshots)


def assert_nothing_referenced_is_missing(tbl: Table) -> None:
    missing = sorted(p for p in referenced_files(tbl) if not Path(p).exists())
    assert not missing, missing


def assert_files_consistent(tbl: Table) -> None:
    """Every file a snapshot references exists, and every Parquet file under data/ is referenced."""
    refs = referenced_files(tbl)
    missing = sorted(p for p in refs if not Path(p).exists())
    assert not missing, missing
    stray = parquet_files_on_disk(tbl) - refs
    assert not stray, sorted(stray)


def assert_no_stray_data_files(tbl: Table) -> None:
    """Every Parquet file under data/ is referenced by a snapshot (failed rewrites left nothing)."""
    stray = parquet_files_on_disk(tbl) - referenced_files(tbl)
    assert not stray, sorted(stray)


def read_file(path: str) -> pa.Table:
    return pq.read_table(path)


# -- a concurrent writer ----------------------------------------------------------------------------------


@dataclass
class Meanwhile:
    """A compaction progress hook that runs ``action`` once, when the group ``at`` (by index, or the first
    to finish when None) has been rewritten: after planning, before that group commits."""

    action: Callable[[FileGroup], object]
    at: int | None = None
    done: list[object] = field(default_factory=list)
    started: list[int] = field(default_factory=list)
    finished: list[tuple[int, str | None]] = field(default_factory=list)

    def group_started(self, group: FileGroup) -> None:
        self.started.append(group.index)

    def group_finished(self, group: FileGroup, result: RewriteResult | None, error: str | None) -> None:
        self.finished.append((group.index, error))
        if not self.done and (self.at is None or self.at == group.index):
            self.done.append(self.action(group))

"""Shared helpers of the commit tests: a SQLite catalog, generated rows, the independent readers, and the
files a table's snapshots reference."""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.catalog.sql import SqlCatalog as PyIcebergSqlCatalog
from pyiceberg.table import StaticTable

import gpu_engine as ge
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit.entries import snapshot_manifests
from gpu_engine.iceberg.manifest_list import ManifestFile, read_manifest_list
from gpu_engine.iceberg.manifests import read_manifest
from gpu_engine.io import fileio
from gpu_engine.table import Table

from ..execute.oracles import _duckdb, assert_same_rows

__all__ = ["assert_same_rows"]

CATALOG_NAME = "writes"
FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}  # short retry waits

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us")),
        pa.field("d", pa.date32()),
        pa.field("region", pa.string()),
        pa.field("s", pa.string()),
        pa.field("amount", pa.decimal128(9, 2)),
        pa.field("score", pa.float64()),
        pa.field("flag", pa.bool_()),
    ]
)
REGIONS = ("eu", "us", "apac")


def count_opens(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts, by local path, the files opened for reading through the local FileIO while ``monkeypatch``
    (a test's, or one of its contexts) is in force."""
    opened: Counter[str] = Counter()
    original = fileio.LocalFileIO.open_input

    def counting(self: fileio.LocalFileIO, path: str) -> BinaryIO:
        opened[fileio.local_path(path)] += 1
        return original(self, path)

    monkeypatch.setattr(fileio.LocalFileIO, "open_input", counting)
    return opened


def sql_catalog(tmp_path: Path) -> SqlCatalog:
    cat = ge.load_catalog(
        CATALOG_NAME, uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=str(tmp_path / "wh")
    )
    assert isinstance(cat, SqlCatalog)
    if not cat.namespace_exists("db"):
        cat.create_namespace("db")
    return cat


def rows(start: int, n: int, *, seed: int = 0) -> pa.Table:
    """``n`` rows with ids ``start..start+n-1`` and a few nulls in every optional column."""
    rng = random.Random(seed * 7919 + start)
    base = dt.datetime(2024, 3, 1)

    def maybe(v: object) -> object:
        return None if rng.random() < 0.1 else v

    return pa.table(
        {
            "id": list(range(start, start + n)),
            "ts": [maybe(base + dt.timedelta(hours=rng.randrange(0, 24 * 40))) for _ in range(n)],
            "d": [maybe(dt.date(2020 + rng.randrange(0, 4), 1 + rng.randrange(12), 1)) for _ in range(n)],
            "region": [maybe(rng.choice(REGIONS)) for _ in range(n)],
            "s": [maybe("".join(rng.choice("abc") for _ in range(rng.randrange(1, 5)))) for _ in range(n)],
            "amount": [maybe(Decimal(rng.randrange(-10_000, 10_000)) / 100) for _ in range(n)],
            "score": [maybe(rng.uniform(-1, 1)) for _ in range(n)],
            "flag": [maybe(rng.random() < 0.5) for _ in range(n)],
        },
        schema=SCHEMA,
    )


def keyed_rows(start: int, n: int, *, seed: int = 0) -> pa.Table:
    """:func:`rows` with ``region`` never null, for equality deletes keyed on it that DuckDB must read
    (DuckDB 1.5.5 aborts with "Comparison on NULL values" when a key column holds nulls)."""
    t = rows(start, n, seed=seed)
    region = pc.fill_null(t["region"], "eu")
    return t.set_column(t.schema.get_field_index("region"), "region", region)


def ours(tbl: Table) -> pa.Table:
    return tbl.scan().to_arrow()


def pyiceberg_static(tbl: Table) -> pa.Table:
    return StaticTable.from_metadata(tbl.metadata_location).scan().to_arrow()


def pyiceberg_catalog(tmp_path: Path, identifier: str) -> pa.Table:
    cat = PyIcebergSqlCatalog(
        CATALOG_NAME, uri=f"sqlite:///{tmp_path / 'catalog.db'}", warehouse=str(tmp_path / "wh")
    )
    try:
        return cat.load_table(identifier).scan().to_arrow()
    finally:
        cat.engine.dispose()


def duckdb_rows(tbl: Table) -> pa.Table:
    result = _duckdb().execute(f"SELECT * FROM iceberg_scan('{tbl.metadata_location}')").arrow()
    return result if isinstance(result, pa.Table) else result.read_all()


def assert_all_readers(tbl: Table, expected: pa.Table, *, pyiceberg: bool = True) -> None:
    """Our scan, PyIceberg's StaticTable and DuckDB's iceberg_scan all return ``expected``'s rows."""
    assert_same_rows(ours(tbl), expected, context="gpu_engine scan")
    if pyiceberg:
        assert_same_rows(pyiceberg_static(tbl), expected, context="pyiceberg StaticTable")
    assert_same_rows(duckdb_rows(tbl), expected, context="duckdb iceberg_scan")


def referenced_files(tbl: Table) -> set[str]:
    """Every file any snapshot of ``tbl`` references: manifest lists, manifests, and the data and delete
    files of live (added or existing) entries: a DELETED entry's file is live in an earlier snapshot, or
    gone with it (expiration deletes it)."""
    out: set[str] = set()
    manifests: dict[str, ManifestFile] = {}
    for snap in tbl.metadata.snapshots:
        if snap.manifest_list:
            out.add(snap.manifest_list)
        manifests.update((m.manifest_path, m) for m in snapshot_manifests(tbl.io, snap))
    for path, m in manifests.items():  # each manifest read once: snapshots share them
        out.add(path)
        entries = read_manifest(m)
        out.update(entries.filter(pc.not_equal(entries["status"], 2)).column("file_path").to_pylist())
    return out


def table_files(tbl: Table) -> set[str]:
    """Every file under the table's location (temporary files included)."""
    root = Path(tbl.location)
    return {str(p) for p in root.rglob("*") if p.is_file()}


def raise_at(stage: str, error: BaseException, times: int = 1) -> tuple[list[str], Callable[[str], None]]:
    """A commit ``faults`` hook raising ``error`` the first ``times`` times ``stage`` runs, and the list of
    the stages it saw."""
    seen: list[str] = []
    left = [times]

    def hook(name: str) -> None:
        seen.append(name)
        if name == stage and left[0] > 0:
            left[0] -= 1
            raise error

    return seen, hook


def listed(tbl: Table) -> list[ManifestFile]:
    """The manifests of the current snapshot, in manifest-list order."""
    snap = tbl.metadata.current_snapshot()
    assert snap is not None and snap.manifest_list is not None
    return list(read_manifest_list(snap.manifest_list))


def avro_entries(path: str) -> list[dict[str, Any]]:
    """A manifest's entries as fastavro reads them (independent of our reader)."""
    with open(path, "rb") as f:
        return [dict(r) for r in fastavro.reader(f) if isinstance(r, dict)]


def once_at(stage: str, action: Callable[[], object]) -> Callable[[str], None]:
    """A commit ``faults`` hook that runs ``action`` (another writer's commit) the first time ``stage``
    runs, so that the commit under test loses a race."""
    calls: list[str] = []

    def hook(name: str) -> None:
        calls.append(name)
        if name == stage and calls.count(name) == 1:
            action()

    return hook


def without_matches(data: pa.Table, mask: pa.ChunkedArray | pa.Array) -> pa.Table:
    """The rows of ``data`` where ``mask`` is not true (a null match keeps the row, as in SQL)."""
    return data.filter(pc.invert(pc.fill_null(mask, False)))


def appending(other: Table, extra: pa.Table) -> Callable[[str], None]:
    """A faults hook appending ``extra`` through ``other`` (another writer's handle) while the commit under
    test runs (when it writes its first manifest)."""
    return once_at("manifest", lambda: other.append(extra))


def region_table(tmp_path: Path, version: int, **props: str) -> Table:
    """Table ``db.t`` of :func:`rows`' schema partitioned by ``region``, format ``version``, short retry
    waits, ``props`` more properties, in a fresh SQL catalog."""
    properties = {"format-version": str(version), **FAST, **props}
    return sql_catalog(tmp_path).create_table(
        "db.t", rows(0, 0).schema, partition_spec=["region"], properties=properties
    )


def with_raw_properties(tbl: Table, identifier: str, props: dict[str, str]) -> Table:
    """``tbl`` committed with ``props`` added unchecked (bad values another engine may have written, which
    create_table and update_properties refuse)."""
    from dataclasses import replace

    from gpu_engine.commit import table_update

    bad = replace(tbl.metadata, properties={**tbl.metadata.properties, **props})
    path = table_update.metadata_path(bad, tbl.metadata_location, file_system_table=False)
    table_update.write_metadata(tbl.io, tbl.io.resolve(path), bad)
    assert tbl.catalog is not None
    tbl.catalog.commit_metadata(identifier, tbl.metadata_location, path)
    return tbl.catalog.load_table(identifier)


class Interrupted(BaseException):
    """Like KeyboardInterrupt: not an Exception."""


def swap_lands_then(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """Make the SQL catalog's swap commit, then raise ``error``: the caller cannot tell it landed."""
    real = SqlCatalog.commit_metadata

    def lands_then(self: SqlCatalog, identifier: Any, expected: str | None, new: str) -> str:
        real(self, identifier, expected, new)
        raise error

    monkeypatch.setattr(SqlCatalog, "commit_metadata", lands_then)


def lines_between(
    function: Callable[..., object], first: str, last: str, *, from_first: bool = False
) -> list[int]:
    """The line numbers of ``function``'s source from the line after the one holding ``first`` (that one,
    ``from_first``) to the one holding ``last``: where an interruption may arrive."""
    import inspect

    source, start = inspect.getsourcelines(function)
    at = next(i for i, text in enumerate(source) if first in text)
    end = next(i for i, text in enumerate(source) if i > at and last in text)
    return [start + i for i in range(at if from_first else at + 1, end + 1)]


@contextlib.contextmanager
def interrupted_at(function: Callable[..., object], line: int) -> Iterator[None]:
    """A KeyboardInterrupt (Ctrl-C) raised when ``function`` first reaches ``line`` (traced: the code under
    test is not edited)."""
    code = function.__code__
    fired: list[int] = []

    def local(frame: Any, event: str, arg: object) -> Any:
        if event == "line" and frame.f_lineno == line and not fired:
            fired.append(line)
            raise KeyboardInterrupt
        return local

    def tracer(frame: Any, event: str, arg: object) -> Any:
        return local if frame.f_code is code else None

    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(None)
    assert fired, f"line {line} of {function.__qualname__} was not reached"

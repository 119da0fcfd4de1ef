"""Writer processes (on SQLite and PostgreSQL catalogs) running random appends, deletes by filter
(merge-on-read or copy-on-write), upserts, overwrites and compactions against one table at once. Every
operation that lands is recorded with its sequence number; replaying them in that order on a plain list of
rows must give exactly the table's rows (read by our scan and by DuckDB). That holds only if the commits
are serializable: a delete or overwrite that planned before a matching append and committed after it must
have been refused, and upserts' equality deletes must reach exactly the rows committed before them."""

from __future__ import annotations

import multiprocessing
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import gpu_engine as ge

from . import _mixed_writer
from ._compact_support import assert_no_stray_data_files
from ._support import CATALOG_NAME, duckdb_rows
from .test_concurrency import catalog_uri

__all__ = ["catalog_uri"]  # the SQLite / PostgreSQL catalog fixture

PROPS = {
    "commit.retry.num-retries": "1000",
    "commit.retry.min-wait-ms": "10",
    "commit.retry.max-wait-ms": "200",
    "commit.manifest.min-count-to-merge": "8",
}
WRITERS, OPS = 4, 12
Row = dict[str, int]


def replay(records: list[_mixed_writer.Record]) -> list[Row]:
    rows: list[Row] = []
    for _, kind, what in sorted(records, key=lambda r: r[0]):
        if kind == "append":
            rows += what
        elif kind == "delete":
            rows = [r for r in rows if r["k"] != what]
        elif kind == "upsert":
            keys = {(r["id"], r["writer"]) for r in what}
            rows = [r for r in rows if (r["id"], r["writer"]) not in keys] + what
        else:
            writer, k, new = what
            rows = [r for r in rows if not (r["writer"] == writer and r["k"] == k)] + new
    return rows


def _bag(rows: list[dict[str, Any]]) -> Counter[tuple[int, int, int, int]]:
    return Counter((r["id"], r["writer"], r["k"], r["v"]) for r in rows)


@pytest.mark.parametrize(
    ("version", "mode"), [(2, "merge-on-read"), (3, "merge-on-read"), (3, "copy-on-write")]
)
def test_mixed_writers_replay_in_commit_order(
    tmp_path: Path, catalog_uri: str, version: int, mode: str
) -> None:
    uri, warehouse = catalog_uri, str(tmp_path / "wh")
    cat = ge.load_catalog(CATALOG_NAME, uri=uri, warehouse=warehouse)
    try:
        cat.create_namespace("db")
        props = {**PROPS, "format-version": str(version), "write.delete.mode": mode}
        tbl = cat.create_table("db.t", _mixed_writer.SCHEMA, partition_spec=["writer"], properties=props)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(WRITERS) as pool:
            jobs = [
                pool.apply_async(_mixed_writer.run, (uri, warehouse, w, OPS, version)) for w in range(WRITERS)
            ]
            results = [j.get(timeout=600) for j in jobs]
        records = [r for recs, _ in results for r in recs]
        outcomes: Counter[str] = Counter()
        for _, counts in results:
            outcomes.update(counts)
        print(f"\n{version} {mode}: {dict(outcomes)}")

        seqs = [seq for seq, _, _ in records]
        assert len(set(seqs)) == len(seqs)  # one snapshot per landed operation
        tbl.refresh()
        by_seq = {s.sequence_number: s for s in tbl.metadata.snapshots}
        for seq, kind, _ in records:
            operation = (by_seq[seq].summary or {}).get("operation")
            assert operation == {"append": "append", "upsert": "overwrite", "overwrite": "overwrite"}.get(
                kind, operation
            ), (seq, kind, operation)
        expected = _bag(replay(records))
        assert sum(expected.values()) > 0
        assert _bag(tbl.scan().to_arrow().to_pylist()) == expected
        assert _bag(duckdb_rows(tbl).to_pylist()) == expected
        assert_no_stray_data_files(tbl)  # refused operations left nothing behind
        assert outcomes["append"] == sum(1 for _, kind, _ in records if kind == "append")
    finally:
        cat.close()


def test_replay_semantics() -> None:
    """The reference model itself: operations apply in sequence-number order, not in list order."""
    a = {"id": 1, "writer": 0, "k": 1, "v": 5}
    b = {"id": 1, "writer": 0, "k": 2, "v": 6}
    records: list[_mixed_writer.Record] = [(3, "delete", 2), (1, "append", [a]), (2, "upsert", [b])]
    assert replay(records) == []  # append a, upsert a -> b, delete k = 2
    assert replay([(1, "append", [a]), (2, "overwrite", (0, 1, [b]))]) == [b]
    assert pa.Table.from_pylist(replay([(1, "append", [a, b])])).num_rows == 2

"""Every real fixture table, scanned by our engine, gives exactly the rows the independent readers give.

For each Iceberg table of INVENTORY.json the current snapshot is scanned with
``ge.load_table(dir, relocate=True).scan().to_arrow()`` (through tests/planning/_support.load, which adds
INVENTORY's extra path prefixes) and compared as a multiset of rows with, where available: the results
the fixture ships, DuckDB's iceberg extension and PyIceberg (oracles.py explains each and lists what each
cannot read). A table no oracle can read is still scanned and must match its documented row count.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from gpu_engine.errors import DataFileError

from ..planning._support import FIXTURES, MISSING, inventory, inventory_paths, load, missing_metadata_files
from .oracles import (
    DUCKDB_CANNOT,
    KNOWN_WRONG,
    PYICEBERG_CANNOT,
    OracleUnavailable,
    assert_same_rows,
    duckdb_rows,
    expected_row_count,
    expected_rows,
    pyiceberg_rows,
)

# Tables our engine refuses with a clear error, and the error it must give.
ENGINE_CANNOT: dict[str, tuple[type[Exception], str]] = {
    # malformed: position delete files whose file_path column holds NULLs (Impala test data)
    "fixtures/impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_null_delete_record": (
        DataFileError,
        r"delete_null\w*\.parq: \d+ NULL file_path value",
    ),
    # a Hive-written Parquet file pyarrow cannot decode (Logical type Null on a group node)
    "fixtures/impala/iceberg_test/iceberg_migrated_complex_test": (
        DataFileError,
        r"000000_0: not a readable Parquet file: Logical type Null cannot be applied to group node",
    ),
}

TABLES = inventory_paths()


def _scan(rel: str, snapshot_id: int | None = None) -> pa.Table:
    return load(rel).scan(snapshot_id=snapshot_id).to_arrow()


def _oracles(rel: str, snapshot_id: int | None = None) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    if snapshot_id is None and (shipped := expected_rows(rel)) is not None:
        out["shipped or spec-derived results"] = shipped
    if rel not in DUCKDB_CANNOT and ("duckdb", rel) not in KNOWN_WRONG:
        out["duckdb"] = duckdb_rows(rel, snapshot_id)
    if rel not in PYICEBERG_CANNOT and ("pyiceberg", rel) not in KNOWN_WRONG:
        try:
            out["pyiceberg"] = pyiceberg_rows(rel, snapshot_id)
        except OracleUnavailable:
            if snapshot_id is None:
                raise
    return out


@pytest.mark.parametrize("rel", TABLES)
def test_current_snapshot_matches_independent_readers(rel: str) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if rel in ENGINE_CANNOT:
        error, match = ENGINE_CANNOT[rel]
        with pytest.raises(error, match=match):
            _scan(rel)
        return
    actual = _scan(rel)
    oracles = _oracles(rel)
    for name, rows in oracles.items():
        assert_same_rows(actual, rows, context=f"{rel}: ours vs {name}")
    count = expected_row_count(rel)
    if count is not None:
        assert actual.num_rows == count, f"{rel}: documented {count} rows, we read {actual.num_rows}"
    if not oracles:
        assert count is not None, f"{rel}: no oracle and no documented count: nothing checks this table"


def _rich_tables() -> list[str]:
    """Tables with several snapshots and row-level deletes or schema evolution: time travel targets."""
    if MISSING in TABLES:
        return [MISSING]
    out = []
    for rel, entry in inventory().items():
        if entry.get("snapshots", 0) >= 3 and (entry.get("delete_files") or entry.get("schemas", 1) > 1):
            out.append(rel)
    return sorted(out)


@pytest.mark.parametrize("rel", _rich_tables())
def test_time_travel_matches_independent_readers(rel: str) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if rel in ENGINE_CANNOT:
        pytest.skip(f"engine refuses this table: {ENGINE_CANNOT[rel][1]}")
    tbl = load(rel)
    checked = 0
    for snapshot in tbl.metadata.snapshots:
        if missing_metadata_files(tbl, snapshot):  # the fixture kept only some snapshots' manifests
            continue
        oracles = _oracles(rel, snapshot.snapshot_id)
        if not oracles:
            continue
        actual = _scan(rel, snapshot.snapshot_id)
        for name, rows in oracles.items():
            assert_same_rows(actual, rows, context=f"{rel}@{snapshot.snapshot_id}: ours vs {name}")
        checked += 1
    assert checked, f"{rel}: no snapshot could be checked ({json.dumps(inventory()[rel])[:200]})"

"""A writer process of the mixed concurrency test: seeded random appends, deletes by filter, upserts,
overwrites and compactions against one table; each operation that lands is recorded with its sequence
number and what it did, so the test can replay them in commit order (a module of its own so that spawned
children import little)."""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

import gpu_engine as ge
from gpu_engine.errors import CommitConflict, ValidationError

# ``writer`` (the partition column, an upsert key) is a long: DuckDB 1.5.5 fails ("Expected unified vector
# format of type INT32, but found type INT64") on equality deletes keyed on an int identity partition column
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("writer", pa.int64(), nullable=False),
        pa.field("k", pa.int32(), nullable=False),
        pa.field("v", pa.int64(), nullable=False),
    ]
)
Record = tuple[int, str, Any]  # (sequence number, operation, what it did)


def _rows(rng: random.Random, writer: int, ids: list[int], k: int | None = None) -> list[dict[str, int]]:
    return [
        {"id": i, "writer": writer, "k": rng.randrange(4) if k is None else k, "v": rng.randrange(10**6)}
        for i in ids
    ]


def run(uri: str, warehouse: str, writer: int, ops: int, seed: int) -> tuple[list[Record], dict[str, int]]:
    """``ops`` random operations by ``writer``: the records of those that landed, and counts of outcomes."""
    rng = random.Random(seed * 1000 + writer)
    cat = ge.load_catalog("writes", uri=uri, warehouse=warehouse)
    tbl = cat.load_table("db.t")
    mine: list[int] = []  # ids this writer wrote
    next_id = writer * 1_000_000
    records: list[Record] = []
    outcomes: dict[str, int] = {}
    for _ in range(ops):
        kind = rng.choice(["append", "append", "delete", "upsert", "overwrite", "compact"])
        try:
            if kind == "append":
                ids = list(range(next_id, next_id + rng.randrange(1, 8)))
                next_id += len(ids)
                rows = _rows(rng, writer, ids)
                seq = tbl.append(
                    pa.Table.from_pylist(rows, schema=SCHEMA), backend="cpu"
                ).commit.sequence_number
                mine += ids
                records.append((seq, kind, rows))
            elif kind == "delete":
                k = rng.randrange(4)
                deleted = tbl.delete(f"k = {k}", backend="cpu")
                if deleted.commit is not None:
                    records.append((deleted.commit.sequence_number, kind, k))
            elif kind == "upsert":
                old = rng.sample(mine, min(len(mine), rng.randrange(1, 4)))
                ids = list(range(next_id, next_id + rng.randrange(0, 3)))
                next_id += len(ids)
                rows = _rows(rng, writer, old + ids)
                data = pa.Table.from_pylist(rows, schema=SCHEMA)
                result = tbl.upsert(data, on=["id", "writer"], backend="cpu")
                assert result is not None
                mine += ids
                records.append((result.commit.sequence_number, kind, rows))
            elif kind == "overwrite":
                k = rng.randrange(4)
                ids = list(range(next_id, next_id + rng.randrange(1, 4)))
                next_id += len(ids)
                rows = _rows(rng, writer, ids, k)
                data = pa.Table.from_pylist(rows, schema=SCHEMA)
                where = f"writer = {writer} and k = {k}"
                over = tbl.overwrite(data, where, backend="cpu")
                mine += ids
                records.append((over.commit.sequence_number, kind, (writer, k, rows)))
            else:
                tbl.compact(options={"min-input-files": "2"}, backend="cpu")
            outcomes[kind] = outcomes.get(kind, 0) + 1
        except (ValidationError, CommitConflict):  # refused: nothing landed (checked by the replay)
            outcomes[f"{kind} refused"] = outcomes.get(f"{kind} refused", 0) + 1
            tbl.refresh()
    return records, outcomes

"""Bounds that do not decode (a string bound cut inside a UTF-8 character, as DuckDB's Iceberg writer wrote
them before duckdb-iceberg#1138) are no bounds: a filtered scan reads every file they could hide rows in
(it failed with an error naming no file), a partition summary without a valid lower bound is not taken
for "only nulls", and ``inspect.files()`` shows them as null in ``readable_metrics``."""

from __future__ import annotations

import glob
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

from gpu_engine.table import Table

from ..commit._support import sql_catalog

CUT = "AAAAAAAAAAAAAAA\u2022".encode()[:16]  # ends inside the bullet's three bytes: not UTF-8
SCHEMA = pa.schema([pa.field("k", pa.string()), pa.field("text", pa.string())])
ROWS = pa.table(
    {"k": ["k1", "k2"], "text": ["AAAAAAAAAAAAAAA\u2022 bullet on byte sixteen", "zzzz ascii"]}, schema=SCHEMA
)


def _rewrite_avro(path: str, edit: Callable[[dict[str, Any]], None]) -> None:
    with open(path, "rb") as fh:
        reader = fastavro.reader(fh)
        schema, meta = reader.writer_schema, dict(reader.metadata)
        records: list[Any] = list(reader)
    for record in records:
        edit(record)
    with open(path, "wb") as fh:
        kept = {k: v for k, v in meta.items() if not k.startswith("avro.")}
        fastavro.writer(fh, schema, records, metadata=kept)


def _table(tmp_path: Path, partitioned: bool) -> Table:
    cat = sql_catalog(tmp_path)
    spec = ["text"] if partitioned else None
    tbl = cat.create_table("db.t", SCHEMA, partition_spec=spec, properties={"format-version": "2"})
    tbl.append(ROWS)
    return cat.load_table("db.t")


def _metadata_files(tbl: Table, manifest_lists: bool) -> list[str]:
    pattern = os.path.join(tbl.location.removeprefix("file://"), "metadata", "*.avro")
    return [p for p in glob.glob(pattern) if os.path.basename(p).startswith("snap-") == manifest_lists]


def test_a_cut_string_bound_of_a_file_is_none(tmp_path: Path) -> None:
    tbl = _table(tmp_path, partitioned=False)

    def cut(record: dict[str, Any]) -> None:
        for pair in record["data_file"]["lower_bounds"]:
            if pair["key"] == 2:  # text
                pair["value"] = CUT

    [manifest] = _metadata_files(tbl, manifest_lists=False)
    _rewrite_avro(manifest, cut)
    got = tbl.scan(filter="text = 'AAAAAAAAAAAAAAA\u2022 bullet on byte sixteen'").to_arrow()
    assert got.column("k").to_pylist() == ["k1"]
    assert tbl.scan(filter="text < 'B'").to_arrow().column("k").to_pylist() == ["k1"]
    files = tbl.inspect.files()
    [metrics] = files.column("readable_metrics").to_pylist()
    assert metrics["text"]["lower_bound"] is None and metrics["text"]["upper_bound"] == "zzzz ascii"
    [lower] = files.column("lower_bounds").to_pylist()
    assert dict(lower)[2] == CUT  # the stored bytes, as they are


def test_a_cut_partition_summary_bound_is_none_not_only_nulls(tmp_path: Path) -> None:
    tbl = _table(tmp_path, partitioned=True)

    def cut(record: dict[str, Any]) -> None:
        for summary in record["partitions"] or []:
            summary["lower_bound"] = CUT
            summary["contains_null"] = True  # nulls and a bound: some values are not null

    [manifest_list] = _metadata_files(tbl, manifest_lists=True)
    _rewrite_avro(manifest_list, cut)
    assert tbl.scan(filter="text is not null").to_arrow().num_rows == 2
    got = tbl.scan(filter="text = 'zzzz ascii'").to_arrow()
    assert got.column("k").to_pylist() == ["k2"]

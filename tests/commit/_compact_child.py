"""A compaction run in a child process by test_compact_faults.py, which kills it with SIGKILL.

``python -m tests.commit._compact_child URI WAREHOUSE MODE``: compacts ``db.t`` and, at the point ``MODE``
names, prints ``ready`` and blocks reading stdin (the parent kills it there):

- ``rewritten``: the first group's files are written, nothing committed;
- ``mid-write``: the first output file is complete and the second has rows in flight;
- ``swap``: the commit's manifests, manifest list and metadata file are written, the swap not yet run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

import gpu_engine as ge
import gpu_engine.execute.rewrite as rewrite_module
from gpu_engine.io.parquet_write import write_data_files as real_write_data_files
from gpu_engine.tasks import FileGroup, RewriteResult
from tests.commit._support import CATALOG_NAME


def _block() -> None:
    print("ready", flush=True)
    sys.stdin.read()  # until killed
    raise SystemExit("the parent closed stdin instead of killing this process")


class _AfterFirstGroup:
    def group_started(self, group: FileGroup) -> None:
        pass

    def group_finished(self, group: FileGroup, result: RewriteResult | None, error: str | None) -> None:
        _block()


def _block_in_second_file() -> None:
    real = real_write_data_files
    calls = [0]

    def write_data_files(io: Any, location: str, schema: Any, spec: Any, batches: Any, **kw: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            batches = _then_block(batches)
        return real(io, location, schema, spec, batches, **kw)

    setattr(rewrite_module, "write_data_files", write_data_files)  # noqa: B010 (not an exported name)


def _then_block(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for i, b in enumerate(batches):
        yield b
        if i == 0:
            _block()


def main(uri: str, warehouse: str, mode: str) -> None:
    tbl = ge.load_catalog(CATALOG_NAME, uri=uri, warehouse=warehouse).load_table("db.t")
    options = {"rewrite-all": "true"}
    progress = None
    faults = None
    if mode == "rewritten":
        progress = _AfterFirstGroup()
    elif mode == "mid-write":
        _block_in_second_file()
        options["target-file-size-bytes"] = sys.argv[4]
    elif mode == "swap":

        def faults(stage: str) -> None:
            if stage == "swap":
                _block()

    else:
        raise SystemExit(f"unknown mode {mode!r}")
    tbl.compact("sort", sort_order="id", options=options, progress=progress, faults=faults, backend="cpu")
    raise SystemExit("the compaction finished: the parent should have killed this process")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])

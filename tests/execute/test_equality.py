"""An equality set of several delete files with different data sequence numbers deletes exactly the rows
whose key is held by a file newer than the row's data file (null equals null, hash collisions confirmed
by value), against a pure-Python reference on random inputs."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu_engine.execute import keys
from gpu_engine.execute.equality import load_equality_set
from gpu_engine.iceberg.schema import Schema, schema_from_json
from gpu_engine.io.fileio import LocalFileIO
from gpu_engine.tasks import EQUALITY_DELETES, DeleteFile

SCHEMA: Schema = schema_from_json(
    {
        "type": "struct",
        "schema-id": 0,
        "fields": [
            {"id": 1, "name": "k", "required": False, "type": "long"},
            {"id": 2, "name": "s", "required": False, "type": "string"},
        ],
    }
)
ARROW = pa.schema(
    [
        pa.field("k", pa.int64(), metadata={"PARQUET:field_id": "1"}),
        pa.field("s", pa.string(), metadata={"PARQUET:field_id": "2"}),
    ]
)
IDS = (1, 2)
Key = tuple[int | None, str | None]
_names = itertools.count()


def _delete_file(root: Path, key_rows: list[Key], seq: int) -> DeleteFile:
    path = root / f"eq-{next(_names)}.parquet"
    table = pa.Table.from_pylist([{"k": k, "s": s} for k, s in key_rows], schema=ARROW)
    pq.write_table(table, path)
    return DeleteFile(
        str(path), "PARQUET", EQUALITY_DELETES, 0, (), len(key_rows), path.stat().st_size, seq, IDS
    )


def _batch(rows: Sequence[Key]) -> pa.RecordBatch:
    schema = pa.schema([pa.field("k", pa.int64()), pa.field("s", pa.string())])
    return pa.RecordBatch.from_pylist([{"k": k, "s": s} for k, s in rows], schema=schema)


def _expected(files: Sequence[tuple[int, Sequence[Key]]], rows: Sequence[Key], data_seq: int) -> list[bool]:
    live = {key for seq, file_keys in files if seq > data_seq for key in file_keys}
    return [row in live for row in rows]


KEYS = st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.one_of(st.none(), st.sampled_from(["a", "b"])))


@given(
    files=st.lists(st.tuples(st.integers(1, 5), st.lists(KEYS, max_size=8)), min_size=1, max_size=4),
    rows=st.lists(KEYS, max_size=40),
    data_seq=st.integers(0, 6),
    collide=st.booleans(),
)
def test_rows_deleted_only_by_files_newer_than_their_data_file(
    backend: str, files: list[tuple[int, list[Key]]], rows: list[Key], data_seq: int, collide: bool
) -> None:
    hashing = keys.row_hashes

    def few_hashes(columns: Any, n: int, on: str) -> np.ndarray:
        return hashing(columns, n, on) % np.uint64(3)  # most keys collide: every hit needs its confirmation

    with tempfile.TemporaryDirectory(prefix="eq-set-") as root:  # one per example: hypothesis reruns the body
        deletes = [_delete_file(Path(root), file_keys, seq) for seq, file_keys in files]
        with mock.patch.object(keys, "row_hashes", few_hashes if collide else hashing):
            eq = load_equality_set(LocalFileIO(), deletes, SCHEMA, IDS, backend, None)
            got = eq.deleted(_batch(rows), SCHEMA, backend, data_seq)
    assert got.tolist() == _expected(files, rows, data_seq)
    assert eq.sources == tuple(d.path for d in deletes)


def test_a_key_held_by_several_files_keeps_the_highest_sequence_number(tmp_path: Path, backend: str) -> None:
    """The deduplicated key must not keep the older file's number, whatever order the files come in."""
    old = _delete_file(tmp_path, [(1, "a"), (2, None)], 2)
    new = _delete_file(tmp_path, [(1, "a"), (None, None)], 5)
    rows = [(1, "a"), (2, None), (None, None), (3, "a")]
    for files in ([old, new], [new, old]):
        eq = load_equality_set(LocalFileIO(), files, SCHEMA, IDS, backend, None)
        assert len(eq) == 3
        assert eq.deleted(_batch(rows), SCHEMA, backend, 1).tolist() == [True, True, True, False]
        assert eq.deleted(_batch(rows), SCHEMA, backend, 3).tolist() == [True, False, True, False]
        assert eq.deleted(_batch(rows), SCHEMA, backend, 5).tolist() == [False] * 4


@pytest.mark.parametrize("n", [0, 3])
def test_an_empty_set_deletes_nothing(tmp_path: Path, n: int) -> None:
    eq = load_equality_set(LocalFileIO(), [_delete_file(tmp_path, [], 4)], SCHEMA, IDS, "cpu", None)
    assert len(eq) == 0 and eq.deleted(_batch([(1, "a")] * n), SCHEMA, "cpu", 0).tolist() == [False] * n


@pytest.mark.gpu
def test_the_set_is_copied_to_the_device_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks of a group share one set: its sorted hashes and directory go to the device on first use only,
    not once per batch."""
    from numba import cuda

    files = [_delete_file(tmp_path, [(k, "a") for k in range(50)], 3)]
    eq = load_equality_set(LocalFileIO(), files, SCHEMA, IDS, "cuda", None)
    copied: list[int] = []
    real = cuda.to_device

    def counting(array: Any, *args: Any, **kwargs: Any) -> Any:
        copied.extend(1 for own in (eq.hashes, eq.directory) if array is own)
        return real(array, *args, **kwargs)

    monkeypatch.setattr(cuda, "to_device", counting)
    for batch in ([(1, "a"), (7, "b")], [(49, "a")], [(50, "a"), (0, "a")]):
        got = eq.deleted(_batch(batch), SCHEMA, "cuda", 0).tolist()
        assert got == _expected([(3, [(k, "a") for k in range(50)])], batch, 0)
    assert len(copied) == 2  # the hashes and the directory, once each


@pytest.mark.gpu
def test_the_set_is_copied_to_each_gpu_that_uses_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Spark worker's tasks may run on different GPUs of its executor and share a cached set: each GPU
    gets its own copy (a kernel reading another GPU's memory fails, and the failure sticks)."""
    from numba import cuda

    files = [_delete_file(tmp_path, [(k, "a") for k in range(50)], 3)]
    eq = load_equality_set(LocalFileIO(), files, SCHEMA, IDS, "cuda", None)
    real_device = cuda.get_current_device
    current = [0]
    monkeypatch.setattr(cuda, "get_current_device", lambda: SimpleNamespace(id=current[0]))
    copies: dict[int, tuple[Any, Any]] = {}
    for device in (0, 1, 0, 1):
        current[0] = device
        copies.setdefault(device, eq._lookup("cuda"))
        assert eq._lookup("cuda") is copies[device]
    assert copies[0] is not copies[1] and copies[0][0] is not copies[1][0]
    monkeypatch.setattr(cuda, "get_current_device", real_device)
    assert eq.deleted(_batch([(1, "a"), (51, "a")]), SCHEMA, "cuda", 0).tolist() == [True, False]

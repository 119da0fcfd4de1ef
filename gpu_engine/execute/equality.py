"""Equality deletes as an anti-join: a row is deleted when its key equals a key of a delete file.

Keys are the equality columns (by field id) read with the table's types, so a key written as ``int``
matches a column promoted to ``long``. Null equals null; floats compare by value bits with every NaN
equal (-0.0 and 0.0 differ), as Iceberg Java's struct comparison does.

The kernels hash each key to 64 bits (:func:`gpu_engine.kernels.deletes.hash_rows`) and look data
hashes up in the sorted delete hashes through a bucket directory
(:func:`~gpu_engine.kernels.deletes.member_sorted`); every hash
hit is then confirmed by comparing the key values themselves, so a hash collision never deletes a row.

An :class:`EqualitySet` holds the keys of several delete files, each key with the highest data sequence
number of the files holding it; a data file's row is deleted when its key is in the set with a sequence
number above the data file's (the spec's "strictly lower" rule), so one set serves data files of any
sequence number. Which files go into one set is the caller's decision (:mod:`.deletes`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import UnsupportedFeature
from ..iceberg.name_mapping import NameMapping
from ..iceberg.schema import Schema
from ..io.fileio import FileIO
from ..io.parquet_read import ParquetSource
from ..kernels.deletes import directory_for
from ..tasks import DeleteFile
from . import keys
from .masks import DEVICE_LOCK


@dataclass(frozen=True)
class EqualitySet:
    """The distinct delete keys of some equality delete files, sorted by hash, each with the highest data
    sequence number of the files holding it."""

    ids: tuple[int, ...]
    hashes: np.ndarray  # uint64, sorted, one per distinct key
    keys: tuple[pa.Array, ...]  # key columns (in ``ids`` order), rows in ``hashes`` order
    sequence_numbers: np.ndarray  # int64, per key in ``hashes`` order
    sources: tuple[str, ...]
    directory: np.ndarray  # bucket directory over ``hashes`` (kernels.deletes.directory_for)
    # device copies of ``hashes`` and ``directory``, made by the first batch probed on cuda: a set is
    # shared by every task of its group and may hold millions of keys
    _device: dict[int, Any] = field(default_factory=dict, compare=False, repr=False)  # by CUDA device

    def __len__(self) -> int:
        return len(self.hashes)

    @property
    def nbytes(self) -> int:
        arrays = (self.hashes, self.sequence_numbers, self.directory)
        return sum(int(a.nbytes) for a in arrays) + sum(int(k.nbytes) for k in self.keys)

    @cached_property
    def _newest(self) -> int:
        """The highest sequence number of the set (-1 when empty)."""
        return int(self.sequence_numbers.max()) if len(self.sequence_numbers) else -1

    @cached_property
    def _colliding(self) -> bool:
        """Whether two distinct keys of the set share a hash (then a hash hit has several candidates)."""
        return bool(len(self.hashes) > 1 and (self.hashes[1:] == self.hashes[:-1]).any())

    def _lookup(self, backend: str) -> tuple[Any, Any]:
        """The sorted hashes and their directory on ``backend``'s side: on ``cuda``, copied once to each
        GPU that uses the set (a Spark worker's tasks may run on different GPUs of its executor and share
        the cached set; a kernel must not read another GPU's memory)."""
        if backend != "cuda":
            return self.hashes, self.directory
        from numba import cuda

        with DEVICE_LOCK:
            device = int(getattr(cuda.get_current_device(), "id", None) or 0)  # the simulator has no id
            if device not in self._device:
                self._device[device] = (keys.resident(self.hashes), keys.resident(self.directory))
            found: tuple[Any, Any] = self._device[device]
        return found

    def deleted(
        self, batch: pa.RecordBatch, schema: Schema, backend: str, data_sequence_number: int
    ) -> np.ndarray:
        """Bool mask of the rows of ``batch`` (read with ``schema``, from a data file with
        ``data_sequence_number``) whose key is in the set with a higher sequence number."""
        n = batch.num_rows
        if not len(self.hashes) or not n or data_sequence_number >= self._newest:
            return np.zeros(n, dtype=bool)
        columns = keys.key_columns(batch, schema, self.ids)
        hashes = keys.row_hashes(columns, n, backend)
        hit = keys.members(*self._lookup(backend), hashes, backend)
        candidates = np.flatnonzero(hit)
        out = np.zeros(n, dtype=bool)
        if len(candidates):
            out[candidates] = self._confirm(columns, hashes[candidates], candidates, data_sequence_number)
        return out

    def _confirm(
        self, columns: Sequence[pa.Array], hashes: np.ndarray, rows: np.ndarray, data_sequence_number: int
    ) -> np.ndarray:
        """Which candidate ``rows`` (hash hits) equal a delete key with the same hash and a sequence number
        above ``data_sequence_number``."""
        lo = np.searchsorted(self.hashes, hashes, side="left")
        hi = np.searchsorted(self.hashes, hashes, side="right") if self._colliding else lo + 1
        found = np.zeros(len(rows), dtype=bool)
        data = [c.take(pa.array(rows)) for c in columns]
        for step in range(int((hi - lo).max())):
            pending = ~found & (lo + step < hi)
            pending[pending] = self.sequence_numbers[lo[pending] + step] > data_sequence_number
            todo = np.flatnonzero(pending)
            if not len(todo):
                continue
            against = pa.array(lo[todo] + step)
            same = keys.rows_equal(
                [d.take(pa.array(todo)) for d in data], [k.take(against) for k in self.keys]
            )
            found[todo[same]] = True
        return found


@dataclass(frozen=True)
class FileKeys:
    """The key columns of one equality delete file (in ``ids`` order) and their row hashes."""

    columns: tuple[pa.Array, ...]
    hashes: np.ndarray  # uint64, per row

    @property
    def nbytes(self) -> int:
        return int(self.hashes.nbytes) + sum(int(c.nbytes) for c in self.columns)


def read_file_keys(
    io: FileIO,
    f: DeleteFile,
    schema: Schema,
    ids: tuple[int, ...],
    backend: str,
    name_mapping: NameMapping | None,
) -> FileKeys:
    """The key columns ``ids`` of the equality delete file ``f`` (read with ``schema``), hashed."""
    if f.file_format.upper() != "PARQUET":
        raise UnsupportedFeature(f"{f.path}: {f.file_format} equality delete files are not supported")
    parts: list[list[pa.Array]] = []
    with ParquetSource.open(io, f.path, role="equality delete file") as source:
        for fb in source.batches(schema, name_mapping=name_mapping):
            parts.append(keys.key_columns(fb.batch, schema, ids))
    if not parts:
        columns = tuple(pa.array([], type=keys.arrow_type_of(schema, i)) for i in ids)
    else:
        columns = tuple(pa.concat_arrays([p[j] for p in parts]) for j in range(len(ids)))
    n = len(columns[0]) if columns else 0
    hashes = keys.row_hashes(list(columns), n, "cpu" if backend != "cuda" else backend) if n else _NO_HASHES
    return FileKeys(columns, np.asarray(hashes, dtype=np.uint64))


_NO_HASHES = np.empty(0, np.uint64)


def load_equality_set(
    io: FileIO,
    files: Sequence[DeleteFile],
    schema: Schema,
    ids: tuple[int, ...],
    backend: str,
    name_mapping: NameMapping | None,
    read: Callable[[DeleteFile], FileKeys] | None = None,
) -> EqualitySet:
    """Read the key columns ``ids`` of every file (with ``schema``; through ``read`` when given, e.g. a
    cache of :func:`read_file_keys`) into one deduplicated set."""
    if read is None:
        read = lambda f: read_file_keys(io, f, schema, ids, backend, name_mapping)  # noqa: E731
    parts = [read(f) for f in files]
    sources = tuple(f.path for f in files)
    total = sum(len(p.hashes) for p in parts)
    if not total:
        empty = tuple(pa.array([], type=keys.arrow_type_of(schema, i)) for i in ids)
        return EqualitySet(ids, _NO_HASHES, empty, np.empty(0, np.int64), sources, directory_for(_NO_HASHES))
    columns = [pa.concat_arrays([p.columns[j] for p in parts]) for j in range(len(ids))]
    sequence_numbers = np.concatenate(
        [
            np.full(len(p.hashes), f.data_sequence_number, dtype=np.int64)
            for f, p in zip(files, parts, strict=True)
        ]
    )
    hashes = np.concatenate([p.hashes for p in parts])
    order = np.lexsort((-sequence_numbers, hashes))  # by hash, the highest sequence number first
    hashes = hashes[order]
    taken = [c.take(pa.array(order)) for c in columns]
    unique = _first_of_equal_runs(hashes, taken)
    kept = [c.filter(pa.array(unique)) for c in taken]
    distinct = hashes[unique]
    return EqualitySet(
        ids, distinct, tuple(kept), sequence_numbers[order][unique], sources, directory_for(distinct)
    )


def _first_of_equal_runs(hashes: np.ndarray, columns: list[pa.Array]) -> np.ndarray:
    """Mask keeping the first row of each run of equal keys (rows sorted by hash, so equal keys are
    adjacent unless another key with the same hash sits between them, which only costs a duplicate)."""
    keep = np.ones(len(hashes), dtype=bool)
    if len(hashes) < 2:
        return keep
    same_hash = np.flatnonzero(hashes[1:] == hashes[:-1]) + 1
    if len(same_hash):
        prev = pa.array(same_hash - 1)
        cur = pa.array(same_hash)
        equal = keys.rows_equal([c.take(cur) for c in columns], [c.take(prev) for c in columns])
        keep[same_hash[equal]] = False
    return keep

"""The deletes of one task, loaded through the scan's shared cache: deleted positions and equality sets.

Position delete files and deletion vectors become one sorted array of deleted positions of the task's
data file (checked against the file's row count: a position past the end means the delete file and the
data file disagree, and the scan stops naming both). Equality delete files become one
:class:`~gpu_engine.execute.equality.EqualitySet` per set of equality ids.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass

import numpy as np

from ..errors import DataFileError
from ..iceberg.deletion_vectors import read_dv, sorted_unique
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import NameMapping
from ..iceberg.schema import Schema
from ..io.fileio import FileIO
from ..io.position_deletes import PositionDeletes, load_position_deletes
from ..tasks import EQUALITY_DELETES, DeleteFile, ScanTask
from .equality import EqualitySet, load_equality_set
from .projection import equality_schema
from .shared_loads import SharedLoads

_NO_POSITIONS = np.empty(0, dtype=np.int64)


def delete_key(d: DeleteFile) -> Hashable:
    return ("file", d.path, d.content_offset)


def equality_key(task: ScanTask, ids: tuple[int, ...]) -> Hashable:
    files = tuple(sorted((d.path, d.data_sequence_number) for d in task.deletes if _ids(d) == ids))
    return ("eq", ids, files)


def _ids(d: DeleteFile) -> tuple[int, ...] | None:
    return tuple(sorted(d.equality_ids)) if d.content == EQUALITY_DELETES else None


def uses(tasks: Iterator[ScanTask] | tuple[ScanTask, ...]) -> Iterator[Hashable]:
    """Every (task, shared value) use of a scan, for :class:`SharedLoads`' reference counts."""
    for task in tasks:
        yield from task_keys(task)


def task_keys(task: ScanTask) -> list[Hashable]:
    keys: list[Hashable] = [delete_key(d) for d in task.deletes if d.content != EQUALITY_DELETES]
    eq_ids = dict.fromkeys(ids for d in task.deletes if (ids := _ids(d)) is not None)
    keys.extend(equality_key(task, ids) for ids in eq_ids)
    return keys


@dataclass(frozen=True)
class TaskDeletes:
    positions: np.ndarray  # sorted unique deleted positions of the task's data file (int64)
    equality: tuple[EqualitySet, ...]

    @property
    def empty(self) -> bool:
        return not len(self.positions) and not self.equality


class DeleteLoader:
    """Loads each delete file of a scan once and hands every task its deletes."""

    def __init__(
        self,
        md: TableMetadata,
        io: FileIO,
        scan_schema: Schema,
        tasks: tuple[ScanTask, ...],
        backend: str,
        name_mapping: NameMapping | None,
    ) -> None:
        self.md = md
        self.io = io
        self.scan_schema = scan_schema
        self.backend = backend
        self.name_mapping = name_mapping
        self.cache: SharedLoads[object] = SharedLoads(uses(tasks))

    def for_task(self, task: ScanTask, file_rows: int) -> TaskDeletes:
        parts: list[np.ndarray] = []
        for d in task.deletes:
            if d.content == EQUALITY_DELETES:
                continue
            if d.is_deletion_vector:
                dv = self.cache.get(delete_key(d), lambda d=d: read_dv(self.io, d))  # type: ignore[misc]
                parts.append(_checked(np.asarray(dv, dtype=np.int64), d, task, file_rows))
            else:
                index = self.cache.get(delete_key(d), lambda d=d: load_position_deletes(self.io, d))  # type: ignore[misc]
                assert isinstance(index, PositionDeletes)
                parts.append(_checked(index.positions_for(task.file.path), d, task, file_rows))
        positions = _NO_POSITIONS
        if len(parts) == 1:
            positions = parts[0]
        elif parts:
            positions = sorted_unique(np.concatenate(parts))
        equality = []
        for ids in dict.fromkeys(i for d in task.deletes if (i := _ids(d)) is not None):
            files = tuple(d for d in task.deletes if _ids(d) == ids)
            value = self.cache.get(
                equality_key(task, ids),
                lambda files=files, ids=ids: self._load_equality(files, ids),  # type: ignore[misc]
            )
            assert isinstance(value, EqualitySet)
            equality.append(value)
        return TaskDeletes(positions, tuple(equality))

    def _load_equality(self, files: tuple[DeleteFile, ...], ids: tuple[int, ...]) -> EqualitySet:
        schema = equality_schema(self.md, self.scan_schema, ids, files[0].path)
        return load_equality_set(self.io, files, schema, ids, self.backend, self.name_mapping)

    def release(self, task: ScanTask) -> None:
        for key in task_keys(task):
            self.cache.release(key)


def _checked(positions: np.ndarray, d: DeleteFile, task: ScanTask, file_rows: int) -> np.ndarray:
    if len(positions) and int(positions[-1]) >= file_rows:
        raise DataFileError(
            f"{d.path}: deletes position {int(positions[-1])} of {task.file.path}, which has only "
            f"{file_rows} rows (the delete file does not belong to this data file)"
        )
    return positions

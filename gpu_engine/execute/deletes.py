"""The deletes of one task, loaded through the scan's shared cache: deleted positions and equality sets.

Position delete files and deletion vectors become one sorted array of deleted positions of the task's
data file (checked against the file's row count: a position past the end means the delete file and the
data file disagree, and the scan stops naming both).

Equality delete files are grouped by equality ids and scope: their partition (spec id and values), or
"global" for files of an unpartitioned spec. Each group is loaded once per scan as one
:class:`~gpu_engine.execute.equality.EqualitySet` of all the group's files that any task uses, shared by
every task using one of them. A row is deleted when its key is in the set with a data sequence number
above its data file's, so for a task the set acts as exactly the spec's applicable files of the group
plus those its metrics rule out (which hold no key of the file's rows). This needs the tasks of one
scan to carry every delete file the spec rules attach, less only such ruled-out ones, as planned tasks
of one snapshot do; the group's files with a sequence number above the data file's that the task does
not carry must be of that kind.

With a :class:`~gpu_engine.execute.delete_cache.DeleteCache`, what is loaded (position delete indexes,
deletion vectors, each equality delete file's keys and each merged set) is also kept for the job's next
executions.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from ..errors import DataFileError
from ..iceberg.deletion_vectors import read_dv, sorted_unique
from ..iceberg.metadata import TableMetadata
from ..iceberg.name_mapping import NameMapping
from ..iceberg.partitioning import partition_key
from ..iceberg.schema import Schema
from ..io.fileio import FileIO
from ..io.position_deletes import PositionDeletes, load_position_deletes
from ..tasks import EQUALITY_DELETES, DeleteFile, ScanTask
from .delete_cache import DeleteCache
from .equality import EqualitySet, FileKeys, load_equality_set, read_file_keys
from .projection import equality_schema
from .shared_loads import SharedLoads

_NO_POSITIONS = np.empty(0, dtype=np.int64)


def delete_key(d: DeleteFile) -> Hashable:
    return ("file", d.path, d.content_offset)


EqualityGroup = tuple[str, tuple[int, ...], Hashable]  # ("eq", ids, scope)


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
        kept: DeleteCache | None = None,
    ) -> None:
        self.md = md
        self.kept = kept
        self.io = io
        self.scan_schema = scan_schema
        self.backend = backend
        self.name_mapping = name_mapping
        self._global_specs = frozenset(sid for sid, spec in md.specs.items() if spec.is_unpartitioned)
        # per equality group, its files used by any task (one entry per file)
        self._groups: dict[EqualityGroup, dict[tuple[str, int], DeleteFile]] = {}
        # a task's position deletes and equality groups, by id() of its deletes tuple (kept alive by the
        # tasks): a Flink table's data files carry thousands of equality deletes each, walked once a scan
        self._by_deletes: dict[int, tuple[tuple[DeleteFile, ...], tuple[EqualityGroup, ...]]] = {}
        self._group_of: dict[int, EqualityGroup] = {}  # by id() of an equality delete file
        self.cache: SharedLoads[object] = SharedLoads(key for task in tasks for key in self._keys(task))

    def _split(self, task: ScanTask) -> tuple[tuple[DeleteFile, ...], tuple[EqualityGroup, ...]]:
        """The task's position deletes and DVs, and its equality groups (registering their files)."""
        found = self._by_deletes.get(id(task.deletes))
        if found is None:
            positional: list[DeleteFile] = []
            groups: dict[EqualityGroup, None] = {}
            for d in task.deletes:
                if d.content != EQUALITY_DELETES:
                    positional.append(d)
                    continue
                group = self._group_of.get(id(d))
                if group is None:
                    group = self._group_of[id(d)] = ("eq", tuple(sorted(d.equality_ids)), self._scope(d))
                    self._groups.setdefault(group, {}).setdefault((d.path, d.data_sequence_number), d)
                groups[group] = None
            found = self._by_deletes[id(task.deletes)] = (tuple(positional), tuple(groups))
        return found

    def _scope(self, d: DeleteFile) -> Hashable:
        return None if d.spec_id in self._global_specs else partition_key(d.spec_id, d.partition)

    def _keys(self, task: ScanTask) -> list[Hashable]:
        """The shared values ``task`` uses (for :class:`SharedLoads`' reference counts)."""
        positional, groups = self._split(task)
        return [*map(delete_key, positional), *groups]

    def equality_ids(self, task: ScanTask) -> frozenset[int]:
        """The field ids of the task's equality deletes (from its walked deletes, see :meth:`_split`)."""
        return frozenset(i for group in self._split(task)[1] for i in group[1])

    def for_task(self, task: ScanTask, file_rows: int) -> TaskDeletes:
        parts: list[np.ndarray] = []
        positional, groups = self._split(task)
        for d in positional:
            if d.is_deletion_vector:
                dv = self.cache.get(delete_key(d), lambda d=d: self._dv(d))  # type: ignore[misc]
                parts.append(_checked(np.asarray(dv, dtype=np.int64), d, task, file_rows))
            else:
                index = self.cache.get(delete_key(d), lambda d=d: self._position_deletes(d))  # type: ignore[misc]
                assert isinstance(index, PositionDeletes)
                parts.append(_checked(index.positions_for(task.file.path), d, task, file_rows))
        positions = _NO_POSITIONS
        if len(parts) == 1:
            positions = parts[0]
        elif parts:
            positions = sorted_unique(np.concatenate(parts))
        equality = []
        for group in groups:
            value = self.cache.get(group, lambda group=group: self._load_equality(group))  # type: ignore[misc]
            assert isinstance(value, EqualitySet)
            equality.append(value)
        return TaskDeletes(positions, tuple(equality))

    def _dv(self, d: DeleteFile) -> np.ndarray:
        def load() -> np.ndarray:
            return np.asarray(read_dv(self.io, d), dtype=np.int64)

        if self.kept is None:
            return load()
        return self.kept.get(self._kept_key(d), load, lambda a: int(a.nbytes))

    def _position_deletes(self, d: DeleteFile) -> PositionDeletes:
        if self.kept is None:
            return load_position_deletes(self.io, d)
        return self.kept.get(self._kept_key(d), lambda: load_position_deletes(self.io, d), _index_bytes)

    def _kept_key(self, d: DeleteFile) -> Hashable:
        """A position delete file's or DV's key in ``kept``: by the file it resolves to (a kept value may
        serve another table's scan, e.g. one of a relocated copy)."""
        return ("file", self.io.resolve(d.path), d.content_offset)

    def _load_equality(self, group: EqualityGroup) -> EqualitySet:
        files = tuple(self._groups[group].values())
        ids = group[1]
        schema = equality_schema(self.md, self.scan_schema, ids, files[0].path)

        def load(read: Callable[[DeleteFile], FileKeys] | None = None) -> EqualitySet:
            return load_equality_set(self.io, files, schema, ids, self.backend, self.name_mapping, read)

        kept = self.kept
        if kept is None:
            return load()

        # keys read depend on the table's schema (by id), the name mapping (files without field ids) and
        # the backend (where the set lives)
        context = (self.md.location, schema.schema_id, self.name_mapping, self.backend)

        def read(f: DeleteFile) -> FileKeys:
            key = ("eq-keys", self.io.resolve(f.path), ids, context)
            args = (self.io, f, schema, ids, self.backend, self.name_mapping)
            return kept.get(key, lambda: read_file_keys(*args), lambda k: k.nbytes)

        files_read = frozenset((self.io.resolve(f.path), f.data_sequence_number) for f in files)
        key = ("eq-set", ids, context, files_read)
        return kept.get(key, lambda: load(read), lambda s: s.nbytes)

    def release(self, task: ScanTask) -> None:
        for key in self._keys(task):
            self.cache.release(key)


def _index_bytes(index: PositionDeletes) -> int:
    return sum(int(a.nbytes) + len(p) for p, a in index.by_file.items())


def _checked(positions: np.ndarray, d: DeleteFile, task: ScanTask, file_rows: int) -> np.ndarray:
    if len(positions) and int(positions[-1]) >= file_rows:
        raise DataFileError(
            f"{d.path}: deletes position {int(positions[-1])} of {task.file.path}, which has only "
            f"{file_rows} rows (the delete file does not belong to this data file)"
        )
    return positions

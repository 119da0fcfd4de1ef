"""The deletes of one task, loaded through the scan's shared cache: deleted positions and equality sets.

Position delete files and deletion vectors become one sorted array of deleted positions of the task's
data file (checked against the file's row count: a position past the end means the delete file and the
data file disagree, and the scan stops naming both).

Equality delete files are grouped by equality ids and scope: their partition (spec id and values), or
"global" for files of an unpartitioned spec. A task probes one
:class:`~gpu_engine.execute.equality.EqualitySet` per group, of its own files of the group and possibly
other files of the group that other tasks carry. A row is deleted when its key is in the set with a data
sequence number above its data file's, so for a task the set acts as exactly the spec's applicable files
of the group plus those its metrics rule out (which hold no key of the file's rows). This needs the tasks
of one scan to carry every delete file the spec rules attach, less only such ruled-out ones, as planned
tasks of one snapshot do; the group's files with a sequence number above the data file's that the task
does not carry must be of that kind.

Which tasks share a set is decided up front from the files they carry, so that memory follows the largest
task, not the table: the largest file sets first, a task joins a set that holds its files (tasks with the
same deletes; a Flink upsert table's data files, each deleted from by every later commit, carry nested
sets: the oldest's holds the others) or one it grows to no more than ``_SHARED_SIZE`` times the delete
rows of the group's largest task, and else starts its own (data files each with deletes of their own key
range: one set each, not one of all of them). Each set is built once and dropped after the last task
using it; each file's keys are read once per scan, and kept until the last set holding the file is built.

With a :class:`~gpu_engine.execute.delete_cache.DeleteCache`, what is loaded (position delete indexes,
deletion vectors, each equality delete file's keys and each merged set) is also kept for the job's next
executions.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

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
_SHARED_SIZE = 1.25  # a set shared by tasks of other files holds at most this many times the largest's rows


def delete_key(d: DeleteFile) -> Hashable:
    return ("file", d.path, d.content_offset)


EqualityGroup = tuple[str, tuple[int, ...], Hashable]  # ("eq", ids, scope)
EqualitySetKey = tuple[str, tuple[int, ...], Hashable, int]  # ("eq", ids, scope, mask of the group's files)


@dataclass(frozen=True)
class TaskDeletes:
    positions: np.ndarray  # sorted unique deleted positions of the task's data file (int64)
    equality: tuple[EqualitySet, ...]

    @property
    def empty(self) -> bool:
        return not len(self.positions) and not self.equality


@dataclass
class _Group:
    """The equality delete files of one group (ids and scope) that the scan's tasks carry, each a bit of
    the masks naming sets of them, and the sets to build (masks): ``served`` maps a task's files to the
    set it probes."""

    key: EqualityGroup
    files: list[DeleteFile] = field(default_factory=list)  # by bit
    bits: dict[tuple[str, int], int] = field(default_factory=dict)  # by (path, data sequence number)
    sets: list[int] = field(default_factory=list)
    by_bit: dict[int, list[int]] = field(default_factory=dict)  # the sets holding each file (indexes)
    served: dict[int, int] = field(default_factory=dict)  # a task's mask -> the index of its set

    def bit(self, d: DeleteFile) -> int:
        found = self.bits.get((d.path, d.data_sequence_number))
        if found is None:
            found = self.bits[(d.path, d.data_sequence_number)] = len(self.files)
            self.files.append(d)
        return found

    def plan(self, masks: Iterable[int]) -> None:
        """The sets of the tasks' ``masks``, all known up front: the largest first, each mask joins a set
        holding its files, or one it grows to no more than ``_SHARED_SIZE`` times the largest mask's delete
        rows, or starts one."""
        rows = np.array([d.record_count for d in self.files], dtype=np.int64)
        ordered = sorted({m: _rows(m, rows) for m in masks}.items(), key=lambda kv: -kv[1])
        cap = _SHARED_SIZE * ordered[0][1] if ordered else 0
        for mask, _ in ordered:
            if mask in self.served:
                continue
            i = self._holding(mask)
            if i is None:  # a set it grows within the cap: one holding some of its files
                held = sorted({i for b in _bits(mask) for i in self.by_bit.get(b, ())})
                i = next((i for i in held if _rows(self.sets[i] | mask, rows) <= cap), None)
            self._add(mask, i)

    def serve(self, mask: int) -> int:
        """The set a task carrying the files of ``mask`` probes (a task not known up front: a set holding
        its files, or a new one of its own)."""
        found = self.served.get(mask)
        if found is None:
            found = self._add(mask, self._holding(mask))
        return self.sets[found]

    def _holding(self, mask: int) -> int | None:
        """A set holding every file of ``mask`` (one holding its first file, looked up by it)."""
        first = (mask & -mask).bit_length() - 1
        return next((i for i in self.by_bit.get(first, ()) if not mask & ~self.sets[i]), None)

    def _add(self, mask: int, i: int | None) -> int:
        if i is None:
            self.sets.append(0)
            i = len(self.sets) - 1
        for b in _bits(mask & ~self.sets[i]):
            self.by_bit.setdefault(b, []).append(i)
        self.sets[i] |= mask
        self.served[mask] = i
        return i

    def of(self, mask: int) -> tuple[DeleteFile, ...]:
        return tuple(self.files[b] for b in _bits(mask))


def _rows(mask: int, rows: np.ndarray) -> int:
    """The delete rows of the files of ``mask``."""
    return int(rows[_bits(mask)].sum())


def _mask(bits: list[int]) -> int:
    flags = np.zeros(max(bits) + 1, dtype=bool)
    flags[bits] = True
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def _bits(mask: int) -> list[int]:
    raw = np.frombuffer(mask.to_bytes((mask.bit_length() + 7) // 8, "little"), dtype=np.uint8)
    return np.flatnonzero(np.unpackbits(raw, bitorder="little")).tolist()


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
        self._groups: dict[EqualityGroup, _Group] = {}
        # a task's position deletes and its equality files (a mask per group), by id() of its deletes
        # tuple (kept alive by the tasks): a Flink table's data files carry thousands of equality deletes
        # each, walked once a scan
        self._by_deletes: dict[int, tuple[tuple[DeleteFile, ...], tuple[tuple[EqualityGroup, int], ...]]] = {}
        self._group_of: dict[int, tuple[EqualityGroup, int]] = {}  # by id() of an equality delete file
        self._lock = threading.Lock()  # tasks not known up front are registered late
        demands: dict[EqualityGroup, dict[int, None]] = {}
        for task in tasks:
            for group, mask in self._split(task)[1]:
                demands.setdefault(group, {})[mask] = None
        for group, masks in demands.items():
            self._groups[group].plan(masks)
        uses = [key for task in tasks for key in self._keys(task)]
        for group, g in self._groups.items():  # each file's keys are kept until its last set is built
            uses += [self._file_key(group, g.files[b]) for mask in g.sets for b in _bits(mask)]
        self.cache: SharedLoads[object] = SharedLoads(uses)

    def _split(self, task: ScanTask) -> tuple[tuple[DeleteFile, ...], tuple[tuple[EqualityGroup, int], ...]]:
        """The task's position deletes and DVs, and its equality files: a mask in each group."""
        found = self._by_deletes.get(id(task.deletes))
        if found is not None:
            return found
        with self._lock:
            positional: list[DeleteFile] = []
            bits: dict[EqualityGroup, list[int]] = {}
            last: EqualityGroup | None = None
            of_last: list[int] = []
            placed_of = self._group_of.get
            for d in task.deletes:  # thousands each on a Flink table's files
                placed = placed_of(id(d))
                if placed is None:
                    if d.content != EQUALITY_DELETES:
                        positional.append(d)
                        continue
                    g = _Group(("eq", tuple(sorted(d.equality_ids)), self._scope(d)))
                    g = self._groups.setdefault(g.key, g)
                    placed = self._group_of[id(d)] = (g.key, g.bit(d))  # g.key: compared by identity
                group, bit = placed
                if group is not last:
                    last, of_last = group, bits.setdefault(group, [])
                of_last.append(bit)
            masks = tuple((group, _mask(b)) for group, b in bits.items())
            found = self._by_deletes[id(task.deletes)] = (tuple(positional), masks)
        return found

    def _scope(self, d: DeleteFile) -> Hashable:
        return None if d.spec_id in self._global_specs else partition_key(d.spec_id, d.partition)

    def _sets(self, task: ScanTask) -> list[EqualitySetKey]:
        """The equality sets ``task`` probes, one per group."""
        out = []
        for group, mask in self._split(task)[1]:
            g = self._groups[group]
            i = g.served.get(mask)
            if i is not None:
                out.append((*group, g.sets[i]))
                continue
            with self._lock:  # a task not known up front
                out.append((*group, g.serve(mask)))
        return out

    def _keys(self, task: ScanTask) -> list[Hashable]:
        """The shared values ``task`` uses (for :class:`SharedLoads`' reference counts)."""
        return [*map(delete_key, self._split(task)[0]), *self._sets(task)]

    def equality_ids(self, task: ScanTask) -> frozenset[int]:
        """The field ids of the task's equality deletes (from its walked deletes, see :meth:`_split`)."""
        return frozenset(i for group, _ in self._split(task)[1] for i in group[1])

    def for_task(self, task: ScanTask, file_rows: int) -> TaskDeletes:
        parts: list[np.ndarray] = []
        positional = self._split(task)[0]
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
        for key in self._sets(task):
            value = self.cache.get(key, lambda key=key: self._load_equality(key))  # type: ignore[misc]
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

    @staticmethod
    def _file_key(group: EqualityGroup, d: DeleteFile) -> Hashable:
        return ("eq-keys", group[1], d.path, d.data_sequence_number)

    def _load_equality(self, key: EqualitySetKey) -> EqualitySet:
        """The set of the files of ``key``'s mask, each file's keys read once per scan (kept until the
        last set holding the file is built) and, with ``kept``, once per job."""
        group: EqualityGroup = key[:3]
        files = self._groups[group].of(key[3])
        ids = group[1]
        schema = equality_schema(self.md, self.scan_schema, ids, files[0].path)
        kept = self.kept
        # keys read depend on the table's schema (by id), the name mapping (files without field ids) and
        # the backend (where the set lives)
        context = (self.md.location, schema.schema_id, self.name_mapping, self.backend)

        def read_file(f: DeleteFile) -> FileKeys:
            args = (self.io, f, schema, ids, self.backend, self.name_mapping)
            if kept is None:
                return read_file_keys(*args)
            kept_key = ("eq-keys", self.io.resolve(f.path), ids, context)
            return kept.get(kept_key, lambda: read_file_keys(*args), lambda k: k.nbytes)

        def read(f: DeleteFile) -> FileKeys:
            keys = self.cache.get(self._file_key(group, f), lambda: read_file(f))
            assert isinstance(keys, FileKeys)
            return keys

        def load() -> EqualitySet:
            return load_equality_set(self.io, files, schema, ids, self.backend, self.name_mapping, read)

        try:
            if kept is None:
                return load()
            files_read = frozenset((self.io.resolve(f.path), f.data_sequence_number) for f in files)
            return kept.get(("eq-set", ids, context, files_read), load, lambda s: s.nbytes)
        finally:
            for f in files:  # this set is built (or failed): its files' keys are one set nearer release
                self.cache.release(self._file_key(group, f))

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

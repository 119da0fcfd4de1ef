"""The delete index: which delete files apply to which data file, per the spec's "Scan Planning" rules.

- A deletion vector applies to the data file named by its ``referenced_data_file`` when the data file's
  data sequence number is <= the vector's and both have the same partition (spec id and values).
- A position delete file applies when its ``referenced_data_file`` (if set) names the data file, the data
  sequence number is <= the delete's, partitions are equal, and no deletion vector applies to the file;
  one without a referenced file only when its ``file_path`` bounds allow the data file's path
  (:mod:`.position_scope`).
- An equality delete file applies when the data sequence number is strictly < the delete's, and the
  partitions are equal or the delete's spec is unpartitioned (a global delete); the planner then drops
  those whose key metrics rule the data file out (:mod:`.equality_pruning`). Equality deletes are kept
  per partition (and globally) as :class:`EqualityRun` s sorted by sequence number, so a data file's
  are a suffix of each run, found by bisection (Flink tables hold thousands per partition).

File paths are compared after normalising scheme and authority (writers spell one file several ways).
Partition values compare by their bits for floats (NaN canonical, -0.0 != 0.0), as the spec's note 3 says.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ..iceberg.partitioning import PartitionKey, partition_key
from ..io.paths import normalize
from ..tasks import EQUALITY_DELETES, DataFile, DeleteFile
from .position_scope import PathScope, path_head


@dataclass(frozen=True, eq=False)
class EqualityRun:
    """Equality delete files of one scope (a partition, or global), sorted by data sequence number."""

    files: tuple[DeleteFile, ...]
    sequence_numbers: tuple[int, ...]

    @staticmethod
    def of(files: Sequence[DeleteFile]) -> EqualityRun:
        ordered = tuple(sorted(files, key=lambda d: d.data_sequence_number))
        return EqualityRun(ordered, tuple(d.data_sequence_number for d in ordered))

    def after(self, sequence_number: int) -> int:
        """Index of the first file whose sequence number is above ``sequence_number``."""
        return bisect.bisect_right(self.sequence_numbers, sequence_number)


EqualityCandidates = list[tuple[EqualityRun, int]]  # runs with the index their applicable suffix starts at


@dataclass
class DeleteIndex:
    unpartitioned_specs: frozenset[int]
    dvs: dict[str, list[DeleteFile]] = field(default_factory=lambda: defaultdict(list))
    positions_by_file: dict[str, list[DeleteFile]] = field(default_factory=lambda: defaultdict(list))
    positions_by_partition: dict[PartitionKey, list[DeleteFile]] = field(
        default_factory=lambda: defaultdict(list)
    )
    equality_by_partition: dict[PartitionKey, EqualityRun] = field(default_factory=dict)
    global_equality: EqualityRun = field(default_factory=lambda: EqualityRun.of(()))
    # partition-scoped position delete files' file_path ranges, by id() of the DeleteFile
    path_ranges: Mapping[int, PathScope] = field(default_factory=dict)
    # (data file, position delete file) pairs the spec rules attach but file_path ranges ruled out
    skipped_by_metrics: int = 0

    @staticmethod
    def build(
        deletes: Iterable[DeleteFile],
        unpartitioned_specs: frozenset[int],
        path_ranges: Mapping[int, PathScope] | None = None,
    ) -> DeleteIndex:
        index = DeleteIndex(unpartitioned_specs, path_ranges=path_ranges or {})
        equality: defaultdict[PartitionKey | None, list[DeleteFile]] = defaultdict(list)
        for d in deletes:
            key = partition_key(d.spec_id, d.partition)
            if d.content == EQUALITY_DELETES:
                equality[None if d.spec_id in unpartitioned_specs else key].append(d)
            elif d.is_deletion_vector:
                index.dvs[normalize(d.referenced_data_file or "")].append(d)
            elif d.referenced_data_file is not None:
                index.positions_by_file[normalize(d.referenced_data_file)].append(d)
            else:
                index.positions_by_partition[key].append(d)
        index.global_equality = EqualityRun.of(equality.pop(None, ()))
        index.equality_by_partition = {
            k: EqualityRun.of(files) for k, files in equality.items() if k is not None
        }
        return index

    def for_data_file(self, data: DataFile) -> tuple[DeleteFile, ...]:
        """Every delete file that applies to ``data``: DVs or position deletes, then equality deletes (the
        caller may prune those further by column metrics: see :mod:`.equality_pruning`)."""
        runs = self.equality_for(data)
        return self.positional_for(data) + tuple(d for run, start in runs for d in run.files[start:])

    def equality_for(self, data: DataFile) -> EqualityCandidates:
        """The equality delete runs that apply to ``data``, each with the index its applicable suffix
        (sequence numbers above the data file's) starts at; runs with none are left out."""
        seq = data.data_sequence_number if data.data_sequence_number is not None else 0
        out: EqualityCandidates = []
        scoped = self.equality_by_partition.get(partition_key(data.spec_id, data.partition))
        for run in (scoped, self.global_equality):
            if run is not None and (start := run.after(seq)) < len(run.files):
                out.append((run, start))
        return out

    def positional_for(self, data: DataFile) -> tuple[DeleteFile, ...]:
        """The DVs, or else the position delete files, that apply to ``data``."""
        seq = data.data_sequence_number if data.data_sequence_number is not None else 0
        key = partition_key(data.spec_id, data.partition)
        path = normalize(data.path)
        dvs = [d for d in self.dvs.get(path, ()) if seq <= d.data_sequence_number and _same(key, d)]
        if dvs:
            positional = dvs
        else:
            by_file = self.positions_by_file.get(path, ())
            by_partition = self.positions_by_partition.get(key, ())
            positional = [d for d in by_file if seq <= d.data_sequence_number and _same(key, d)]
            if by_partition:
                scoped = [d for d in by_partition if seq <= d.data_sequence_number and _same(key, d)]
                head = path_head(data.path)  # once, not per delete file
                kept = [d for d in scoped if self._may_hold(d, data.path, head)]
                self.skipped_by_metrics += len(scoped) - len(kept)
                positional += kept
        return tuple(positional)

    def _may_hold(self, d: DeleteFile, path: str, head: str | None) -> bool:
        scope = self.path_ranges.get(id(d))
        return scope is None or scope.may_hold(path, head)


def _same(key: PartitionKey, d: DeleteFile) -> bool:
    return partition_key(d.spec_id, d.partition) == key

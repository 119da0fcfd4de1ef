"""Snapshot summaries (spec "Snapshots" ``operation``, Appendix F "Optional Snapshot Summary Fields").

Added and removed counters are written when non-zero, as Iceberg Java does; the ``total-*`` fields are the
parent snapshot's totals plus what was added minus what was removed (a first snapshot starts from zero;
a total the parent does not record is left out, since it cannot be known without reading every manifest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ..iceberg.content_file import DATA, EQUALITY_DELETES, POSITION_DELETES, ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import partition_key
from ..io.partition_split import partition_path
from ..properties import int_property

ENGINE_NAME = "gpu-engine"
PARTITION_LIMIT = "write.summary.partition-limit"
TOTALS = (
    "total-records", "total-files-size", "total-data-files", "total-delete-files", "total-position-deletes",
    "total-equality-deletes",
)  # fmt: skip


@dataclass
class _Counts:
    data_files: int = 0
    records: int = 0
    files_size: int = 0
    delete_files: int = 0
    position_delete_files: int = 0
    dvs: int = 0
    equality_delete_files: int = 0
    position_deletes: int = 0
    equality_deletes: int = 0

    def add(self, f: ContentFile) -> None:
        dv = f.content == POSITION_DELETES and f.file_format.upper() == "PUFFIN"
        # a DV counts its blob, as Java's ScanTaskUtil.contentSizeInBytes: DVs share one Puffin file
        self.files_size += (
            f.content_size_in_bytes if dv and f.content_size_in_bytes is not None else f.file_size_in_bytes
        )
        if f.content == DATA:
            self.data_files += 1
            self.records += f.record_count
            return
        self.delete_files += 1
        if f.content == POSITION_DELETES:
            self.position_deletes += f.record_count
            if dv:
                self.dvs += 1
            else:
                self.position_delete_files += 1
        elif f.content == EQUALITY_DELETES:
            self.equality_delete_files += 1
            self.equality_deletes += f.record_count


def snapshot_summary(
    operation: str,
    *,
    added: Iterable[ContentFile],
    removed: Iterable[ContentFile],
    parent: Mapping[str, str] | None,
    has_parent: bool,
    extra: Mapping[str, str] | None = None,
    partition_path: Callable[[ContentFile], str] = lambda f: "",
    partition_limit: int = 0,
) -> dict[str, str]:
    """The summary of a snapshot adding ``added`` and removing ``removed`` on top of ``parent``'s summary.

    ``has_parent=False``: the first snapshot of its branch (totals start at zero). ``partition_limit``
    (``write.summary.partition-limit``): with at most this many changed partitions, a ``partitions.<path>``
    entry per partition (``partition_path``: Iceberg's partitionToPath of a file's partition) and
    ``partition-summaries-included=true``, as Java's SnapshotSummary.Builder (nothing otherwise).
    """
    added, removed = list(added), list(removed)
    plus, minus = _Counts(), _Counts()
    partitions: set[tuple[object, ...]] = set()
    for f in added:
        plus.add(f)
        partitions.add(partition_key(f.spec_id, f.partition))
    for f in removed:
        minus.add(f)
        partitions.add(partition_key(f.spec_id, f.partition))
    out: dict[str, str] = {"operation": operation}
    out.update(_counters(plus, minus))
    change = {
        "total-records": plus.records - minus.records,
        "total-files-size": plus.files_size - minus.files_size,
        "total-data-files": plus.data_files - minus.data_files,
        "total-delete-files": plus.delete_files - minus.delete_files,
        "total-position-deletes": plus.position_deletes - minus.position_deletes,
        "total-equality-deletes": plus.equality_deletes - minus.equality_deletes,
    }
    for key in TOTALS:
        before = _total(parent, key) if has_parent else 0
        if before is not None:
            out[key] = str(before + change[key])
    out["changed-partition-count"] = str(len(partitions))
    out.update(_partition_summaries(added, removed, partition_path, partition_limit))
    out["engine-name"] = ENGINE_NAME
    for key, value in (extra or {}).items():
        out[key] = value
    return out


def summary_partition_limit(properties: Mapping[str, str]) -> int:
    """``write.summary.partition-limit`` (default 0: no per-partition summaries)."""
    return int_property(properties, PARTITION_LIMIT, 0, minimum=0)


def partition_paths(md: TableMetadata) -> Callable[[ContentFile], str]:
    """A file's partition as Iceberg's partitionToPath under its spec (``""`` unpartitioned)."""

    def path(f: ContentFile) -> str:
        spec = md.specs.get(f.spec_id)
        if spec is None or not spec.fields:
            return ""
        return partition_path(spec, md.schema_for_spec(spec), f.partition)

    return path


def _counters(plus: _Counts, minus: _Counts) -> dict[str, str]:
    """The non-zero added/removed counters, in the order of Java's UpdateMetrics.addTo."""
    pairs = (
        ("added-data-files", plus.data_files), ("deleted-data-files", minus.data_files),
        ("added-equality-delete-files", plus.equality_delete_files),
        ("removed-equality-delete-files", minus.equality_delete_files),
        ("added-position-delete-files", plus.position_delete_files),
        ("removed-position-delete-files", minus.position_delete_files),
        ("added-dvs", plus.dvs), ("removed-dvs", minus.dvs),
        ("added-delete-files", plus.delete_files), ("removed-delete-files", minus.delete_files),
        ("added-records", plus.records), ("deleted-records", minus.records),
        ("added-files-size", plus.files_size), ("removed-files-size", minus.files_size),
        ("added-position-deletes", plus.position_deletes),
        ("removed-position-deletes", minus.position_deletes),
        ("added-equality-deletes", plus.equality_deletes),
        ("removed-equality-deletes", minus.equality_deletes),
    )  # fmt: skip
    return {key: str(value) for key, value in pairs if value}


def _partition_summaries(
    added: Iterable[ContentFile],
    removed: Iterable[ContentFile],
    partition_path: Callable[[ContentFile], str],
    limit: int,
) -> dict[str, str]:
    """Java's SnapshotSummary.Builder.build: with at most ``limit`` changed partitions (by path),
    ``partition-summaries-included=true`` and a ``partitions.<path>`` entry per non-root partition."""
    if limit <= 0:  # the default: no path is needed (a commit may list 100k files)
        return {}
    per_path: dict[str, tuple[_Counts, _Counts]] = {}
    paths: dict[tuple[object, ...], str] = {}  # one path per partition, not per file
    for files, side in ((added, 0), (removed, 1)):
        for f in files:
            key = partition_key(f.spec_id, f.partition)
            path = paths.get(key)
            if path is None:
                path = paths[key] = partition_path(f)
            per_path.setdefault(path, (_Counts(), _Counts()))[side].add(f)
    if not per_path or len(per_path) > limit:
        return {}
    out = {"partition-summaries-included": "true"}
    for path, (plus, minus) in per_path.items():
        if path:
            out[f"partitions.{path}"] = ",".join(f"{k}={v}" for k, v in _counters(plus, minus).items())
    return out


def _total(summary: Mapping[str, str] | None, key: str) -> int | None:
    raw = (summary or {}).get(key)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None

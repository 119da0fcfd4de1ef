"""Manifest and data-file pruning: inclusive partition projection and column metrics, vectorised.

Manifests are pruned by their partition summaries (per the manifest's own spec); manifest entries by
partition tuples (a vectorised evaluation of the projected filter over the ``partition`` struct column)
and, for data files, by column metrics (:mod:`.metrics`). DELETED entries are dropped here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..expressions import AlwaysTrue, Expression, evaluate, project_inclusive
from ..expressions.tree import BoundReference
from ..iceberg import serde
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifests import DELETED
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import PartitionSpec
from ..iceberg.schema import Schema
from .metrics import ColumnStats, StatsFor, might_match


def prune_manifests(
    md: TableMetadata, schema: Schema, row_filter: Expression, manifests: Sequence[ManifestFile]
) -> list[ManifestFile]:
    """The manifests that may hold live files matching ``row_filter`` (order kept)."""
    live = [m for m in manifests if m.has_added_files() or m.has_existing_files()]
    keep = [True] * len(live)
    by_spec: dict[int, list[int]] = {}
    for i, m in enumerate(live):
        if m.partition_spec_id is not None and m.partitions is not None:
            by_spec.setdefault(m.partition_spec_id, []).append(i)
    for spec_id, positions in by_spec.items():
        spec = md.spec_by_id(spec_id)
        projected = project_inclusive(row_filter, spec)
        if isinstance(projected, AlwaysTrue):
            continue
        group = [live[i] for i in positions]
        mask = might_match(projected, len(group), _summary_stats(spec, group)).to_pylist()
        for i, ok in zip(positions, mask, strict=True):
            keep[i] = bool(ok)
    return [m for m, k in zip(live, keep, strict=True) if k]


def _summary_stats(spec: PartitionSpec, manifests: Sequence[ManifestFile]) -> StatsFor:
    position = {f.field_id: i for i, f in enumerate(spec.fields)}

    def stats(ref: BoundReference) -> ColumnStats:
        i = position.get(ref.field_id)
        found = [
            m.partitions[i] if m.partitions and i is not None and i < len(m.partitions) else None
            for m in manifests
        ]
        summaries = [s for s in found if s is not None]
        if len(summaries) != len(found):
            return ColumnStats()
        lows = pa.array([s.lower_bound for s in summaries], pa.binary())
        highs = pa.array([s.upper_bound for s in summaries], pa.binary())
        lower = serde.decode_array(ref.type, lows, invalid_as_unknown=True)
        upper = serde.decode_array(ref.type, highs, invalid_as_unknown=True)
        contains_null = pa.array([s.contains_null for s in summaries], pa.bool_())
        contains_nan = pa.array([s.contains_nan for s in summaries], pa.bool_())
        null_count = pc.if_else(contains_null, pa.scalar(None, pa.int64()), pa.scalar(0, pa.int64()))
        no_nans = pc.equal(contains_nan, False)
        nan_count = pc.if_else(no_nans, pa.scalar(0, pa.int64()), pa.scalar(None, pa.int64()))
        # all values null: nulls present, no lower bound, and (for floats) no NaN either
        no_nan = pc.fill_null(no_nans, not pa.types.is_floating(lower.type))
        all_null = pc.and_(pc.and_(contains_null, pc.is_null(lows)), no_nan)  # no bound stored
        return ColumnStats(lower, upper, null_count, nan_count, None, all_null)

    return stats


@dataclass
class PrunedEntries:
    kept: list[pa.Table] = field(default_factory=list)
    total: int = 0
    pruned_by_partition: int = 0
    pruned_by_metrics: int = 0
    bytes_total: int = 0


def prune_entries(
    md: TableMetadata,
    schema: Schema,
    row_filter: Expression,
    tables: Sequence[pa.Table],
    *,
    use_metrics: bool,
    into: PrunedEntries | None = None,
) -> PrunedEntries:
    """Live entries of each manifest table that may match ``row_filter``; counts of what was pruned
    (added to ``into`` when given)."""
    out = into if into is not None else PrunedEntries()
    for table in tables:
        table = table.filter(pc.not_equal(table.column("status"), DELETED))
        n = table.num_rows
        out.total += n
        out.bytes_total += int(pc.sum(table.column("file_size_in_bytes")).as_py() or 0)
        if n == 0:
            continue
        spec_id = table.column("spec_id")[0].as_py()
        projected = project_inclusive(row_filter, md.spec_by_id(spec_id))
        if not isinstance(projected, AlwaysTrue):
            partition = table.column("partition").combine_chunks()
            keep = evaluate(projected, partition, field_names=partition_field_names(partition.type))
            table = table.filter(keep)
            out.pruned_by_partition += n - table.num_rows
        if use_metrics and table.num_rows and not isinstance(row_filter, AlwaysTrue):
            before = table.num_rows
            table = table.filter(might_match(row_filter, before, _file_stats(table)))
            out.pruned_by_metrics += before - table.num_rows
        if table.num_rows:
            out.kept.append(table)
    return out


def partition_field_names(struct_type: pa.StructType) -> dict[int, str]:
    """Partition field id -> child name of a manifest table's ``partition`` struct."""
    names = {}
    for i in range(struct_type.num_fields):
        child = struct_type.field(i)
        if child.metadata and b"field_id" in child.metadata:
            names[int(child.metadata[b"field_id"])] = child.name
    return names


_NO_BOUNDS = frozenset({"variant", "geometry", "geography", "unknown"})


def lookup(table: pa.Table, column: str, field_id: int) -> pa.Array:
    return pc.map_lookup(table.column(column).combine_chunks(), pa.scalar(field_id, pa.int32()), "first")


def _file_stats(table: pa.Table) -> StatsFor:
    def stats(ref: BoundReference) -> ColumnStats:
        if ref.type.name in _NO_BOUNDS:
            return ColumnStats()
        fid = ref.field_id
        # a bound that does not decode is none (a string some writers cut inside a character)
        lower = serde.decode_array(ref.type, lookup(table, "lower_bounds", fid), invalid_as_unknown=True)
        upper = serde.decode_array(ref.type, lookup(table, "upper_bounds", fid), invalid_as_unknown=True)
        values = lookup(table, "value_counts", fid)
        nulls = lookup(table, "null_value_counts", fid)
        nans = lookup(table, "nan_value_counts", fid)
        all_null = pc.equal(values, nulls)
        return ColumnStats(lower, upper, nulls, nans, values, all_null)

    return stats

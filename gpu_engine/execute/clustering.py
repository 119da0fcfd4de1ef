"""The row clustering a repartitioning rewrite adds to its strategy, as Iceberg Java's rewrite does.

A group of files of other specs than the output spec (``FileGroup.spec_id`` None) is written into the
output spec's partitions. Its rows come in the order of the old layout, every output partition's rows
spread over all of it: a writer splitting them by partition, its buffer shared by all partitions, cuts
each partition's rows into small row groups (a few hundred rows each for a group into thousands of
partitions). Java's ``rewrite_data_files`` asks Spark for the rows clustered by the output partitions
then: ``binpack`` with a range distribution, ``sort`` and ``zorder`` with the partition fields put before
their order (``SortOrderUtil.buildSortOrder``: the fields the order's leading fields do not already
cluster by). :func:`clustered` gives the strategy those leading fields (:attr:`RewriteStrategy.cluster`):
each output partition's rows then come together, and its files are written one full row group after
another. ``binpack`` orders by the partition fields only (within a partition rows keep their order).

Clustering is a layout choice, not one the caller made: a ``binpack`` on a backend that cannot order rows
(CUDA without CuPy) is written unclustered, as before, with a warning naming why (a ``sort`` or ``zorder``
there fails as it asks for an order).

A sort field clusters a partition field with the same transform of the same column, or a finer one of the
same column: ``identity`` clusters by any order-preserving transform of it (``truncate``, the temporal
ones), ``hour`` by ``day``, ``month`` and ``year``, ``day`` by ``month`` and ``year``, ``month`` by
``year`` (Java's ``satisfiesOrderOf``). Void fields and transforms this engine cannot compute cluster
nothing and are left out.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from ..errors import BackendUnavailable
from ..iceberg.metadata import TableMetadata
from ..iceberg.partitioning import PartitionField
from ..iceberg.sorting import SortField
from ..tasks import FileGroup, RewriteStrategy
from ..transforms.spec import Temporal, UnknownTransform, Void, parse_transform
from .ordering import array_module

_GRAIN = {"hour": 0, "day": 1, "month": 2, "year": 3}  # finer first
_log = logging.getLogger("gpu_engine.execute")


def clustered(
    md: TableMetadata, group: FileGroup, strategy: RewriteStrategy, backend: str = "cpu"
) -> RewriteStrategy:
    """``strategy`` with the partition fields it must order by first on ``backend`` (see the module doc):
    none but for a group of files of other specs written into a partitioned spec."""
    if group.spec_id is not None:
        return strategy
    if strategy.kind == "binpack":
        try:
            array_module(backend)
        except BackendUnavailable as exc:
            _log.warning("group %d: rows written unclustered by partition: %s", group.index, exc)
            return strategy
    required = [f for f in md.spec_by_id(group.output_spec_id).fields if _computable(f)]
    if strategy.kind == "sort":
        assert strategy.sort_order is not None
        for s in strategy.sort_order.fields:  # the order's leading fields that cluster by partition fields
            met = [p for p in required if _clusters(s, p)]
            required = [p for p in required if p not in met]
            if not any(_same(s, p) for p in met):
                break
    cluster = tuple(SortField(f.source_ids, f.transform, "asc", "nulls-first") for f in required)
    return replace(strategy, cluster=cluster) if cluster else strategy


def _computable(f: PartitionField) -> bool:
    parsed = parse_transform(f.transform, strict=False)
    return len(f.source_ids) == 1 and not isinstance(parsed, (Void, UnknownTransform))


def _same(s: SortField, p: PartitionField) -> bool:
    return s.source_ids == p.source_ids and s.transform == p.transform


def _clusters(s: SortField, p: PartitionField) -> bool:
    """Whether rows ordered by sort field ``s`` come clustered by partition field ``p``."""
    if s.source_ids != p.source_ids:
        return False
    if s.transform == p.transform:
        return True
    mine, theirs = parse_transform(s.transform, strict=False), parse_transform(p.transform, strict=False)
    if s.transform == "identity":
        return theirs.name == "truncate" or isinstance(theirs, Temporal)
    if isinstance(mine, Temporal) and isinstance(theirs, Temporal):
        return _GRAIN[mine.name] <= _GRAIN[theirs.name]
    return False

"""Whether an equality delete file can delete a row of a data file, judged from both files' column
metrics, so that a scan neither loads nor probes deletes that cannot match (Iceberg Java's
``DeleteFileIndex.canContainEqDeletesForFile``).

Per equality field, the delete file is passed over when

- the data file's column is all null and the delete file holds no null key, or the other way round; or
- both have lower and upper bounds and the ranges do not overlap.

Everything unknown counts as a possible match: metrics left out (metrics modes ``none``/``counts``, a
column added after the data file was written, identity partition columns some writers leave out of
the file), a field dropped from the schema, bounds that do not decode, types whose bound order is not
the value order (``uuid``, nested, geospatial, variant). Stricter than Java: ranges of ``float``/``double``
fields are compared only when both files record that they hold no NaN (NaN keys match NaN rows but are
never bounds).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..errors import GpuEngineError
from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..tasks import EQUALITY_DELETES, DeleteFile
from .pruning import lookup

# types whose decoded bounds (serde.from_bytes) order as the values do
_ORDERED = frozenset(
    ("boolean", "int", "long", "float", "double", "date", "time", "timestamp", "timestamptz", "timestamp_ns",
     "timestamptz_ns", "string", "binary", "decimal")
)  # fmt: skip
_FLOATS = frozenset(("float", "double"))


@dataclass(frozen=True, slots=True)
class ColumnMetrics:
    """One column's metrics in one file; None where the file's manifest entry does not record it."""

    lower: Any = None
    upper: Any = None
    nulls: int | None = None
    values: int | None = None
    nans: int | None = None


Metrics = Mapping[int, ColumnMetrics]  # by field id
UNKNOWN = ColumnMetrics()


def prunable_types(schema: Schema, field_ids: Iterable[int]) -> dict[int, it.PrimitiveType]:
    """The equality fields of ``schema`` whose bounds can rule a delete file out (see the module doc)."""
    out: dict[int, it.PrimitiveType] = {}
    for fid in field_ids:
        field = schema.by_id.get(fid)
        if field is None or not isinstance(field.type, it.PrimitiveType):
            continue
        if field.type.name in _ORDERED or isinstance(field.type, it.FixedType):
            out[fid] = field.type
    return out


_METRIC_COLUMNS = ("lower_bounds", "upper_bounds", "null_value_counts", "value_counts", "nan_value_counts")


class EntryMetrics:
    """The ``types`` fields' metrics of a manifest table's entries, decoded per entry on first use (a plan
    asks only for data files that have an equality delete to judge)."""

    def __init__(self, entries: pa.Table, types: Mapping[int, it.PrimitiveType]) -> None:
        self._types = dict(types)
        self._columns = {fid: [lookup(entries, name, fid) for name in _METRIC_COLUMNS] for fid in types}
        self._decoded: dict[int, dict[int, ColumnMetrics]] = {}

    def __getitem__(self, i: int) -> dict[int, ColumnMetrics]:
        found = self._decoded.get(i)
        if found is None:
            found = self._decoded[i] = {fid: self._decode(fid, i) for fid in self._types}
        return found

    def _decode(self, fid: int, i: int) -> ColumnMetrics:
        lower, upper, nulls, values, nans = (column[i].as_py() for column in self._columns[fid])
        t = self._types[fid]
        return ColumnMetrics(_bound(t, lower), _bound(t, upper), nulls, values, nans)


def entry_metrics(entries: pa.Table, types: Mapping[int, it.PrimitiveType]) -> list[dict[int, ColumnMetrics]]:
    """Per manifest entry of ``entries``, the metrics of the ``types`` fields."""
    lazy = EntryMetrics(entries, types)
    return [lazy[i] for i in range(entries.num_rows)]


def _bound(t: it.PrimitiveType, raw: bytes | None) -> Any:
    if raw is None:
        return None
    try:
        value = serde.from_bytes(t, raw)
    except GpuEngineError:
        return None  # a bound that does not decode rules nothing out
    return None if serde.is_nan_bound(t, value) else value


def may_match(
    data: Metrics, delete: Metrics, equality_ids: Iterable[int], types: Mapping[int, it.PrimitiveType]
) -> bool:
    """Whether the delete file (``delete``'s metrics, keyed on ``equality_ids``) may delete a row of the
    data file (``data``'s metrics); False only when one equality field proves that no key matches."""
    for fid in equality_ids:
        t = types.get(fid)
        if t is None:
            continue
        d, x = data.get(fid, UNKNOWN), delete.get(fid, UNKNOWN)
        if _has_null(d) and _has_null(x):
            continue  # null keys match null rows
        if (_all_null(d) and _no_null(x)) or (_all_null(x) and _no_null(d)):
            return False
        if t.name in _FLOATS and not (d.nans == 0 and x.nans == 0):
            continue
        if None in (d.lower, d.upper, x.lower, x.upper):
            continue
        try:
            if d.upper < x.lower or x.upper < d.lower:
                return False
        except TypeError:
            continue  # bounds of unlike Python types (a malformed entry): assume a match
    return True


def _has_null(m: ColumnMetrics) -> bool:
    return m.nulls is not None and m.nulls > 0


def _no_null(m: ColumnMetrics) -> bool:
    return m.nulls == 0


def _all_null(m: ColumnMetrics) -> bool:
    return m.nulls is not None and m.values is not None and m.nulls == m.values


class EqualityPruner:
    """The equality delete files of one plan with their key metrics: which of them may delete rows of
    each data file of a manifest table."""

    def __init__(self, schema: Schema, deletes: Iterable[tuple[pa.Table, Sequence[DeleteFile]]]) -> None:
        """``deletes``: each delete manifest table kept by the plan with the delete files of its rows."""
        pairs = list(deletes)
        ids = {fid for _, files in pairs for d in files for fid in d.equality_ids}
        self.types = prunable_types(schema, ids)
        # by object identity (hashing a DeleteFile hashes all its fields); _files keeps the ids valid
        self._files = [d for _, files in pairs for d in files]
        self._metrics: dict[int, Metrics] = {}
        self.skipped = 0  # (data file, equality delete) pairs ruled out by :meth:`keep`
        if self.types:
            for table, files in pairs:
                self._metrics.update(zip(map(id, files), entry_metrics(table, self.types), strict=True))

    @property
    def field_ids(self) -> frozenset[int]:
        """The fields whose data-file metrics the pruning reads."""
        return frozenset(self.types)

    def metrics_of(self, entries: pa.Table) -> EntryMetrics | None:
        """The data files' metrics of a manifest table, decoded on use; None when nothing can be pruned."""
        return EntryMetrics(entries, self.types) if self.types else None

    def keep(self, deletes: tuple[DeleteFile, ...], metrics: EntryMetrics, i: int) -> tuple[DeleteFile, ...]:
        """``deletes`` (those the spec rules attach to entry ``i``) less the equality deletes whose keys
        its metrics rule out (counted in :attr:`skipped`)."""
        kept = tuple(
            d
            for d in deletes
            if d.content != EQUALITY_DELETES
            or may_match(metrics[i], self._metrics.get(id(d), {}), d.equality_ids, self.types)
        )
        self.skipped += len(deletes) - len(kept)
        return kept

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

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..errors import GpuEngineError
from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.schema import Schema
from ..tasks import DeleteFile
from .pruning import lookup

if TYPE_CHECKING:
    from .deletes import EqualityCandidates

# types whose decoded bounds (serde.from_bytes) order as the values do
_ORDERED = it.TIMESTAMP_NAMES | frozenset(
    ("boolean", "int", "long", "float", "double", "date", "time", "string", "binary", "decimal")
)
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


class _FieldVectors:
    """One equality field's metrics over a run of delete files, as arrays (-1: count unknown)."""

    def __init__(self, floating: bool, uses: np.ndarray, metrics: Sequence[ColumnMetrics]) -> None:
        self.floating = floating
        self.uses = uses  # which files have the field among their equality ids
        self.nulls = _counts([m.nulls for m in metrics])
        self.values = _counts([m.values for m in metrics])
        self.nans = _counts([m.nans for m in metrics])
        self.bounded = np.array([m.lower is not None and m.upper is not None for m in metrics], dtype=bool)
        if floating:
            self.bounded &= self.nans == 0
        self.lower = _values([m.lower for m in metrics])
        self.upper = _values([m.upper for m in metrics])

    def rules_out(self, d: ColumnMetrics, start: int) -> np.ndarray:
        """Which files from ``start`` on this field proves hold no key of the data file (metrics ``d``):
        :func:`may_match`'s rules for one field, over the run."""
        nulls = self.nulls[start:]
        out = np.zeros(len(nulls), dtype=bool)
        if _all_null(d):
            out |= nulls == 0
        if _no_null(d):
            out |= (nulls >= 0) & (nulls == self.values[start:])  # only null keys
        if d.lower is not None and d.upper is not None and not (self.floating and d.nans != 0):
            which = np.flatnonzero(self.bounded[start:] & ~out)
            if len(which):
                out[which] = _disjoint(d, self.lower[start:][which], self.upper[start:][which])
        if _has_null(d):
            out &= ~(nulls > 0)  # null keys match null rows
        ruled_out: np.ndarray = out & self.uses[start:]
        return ruled_out


def _counts(counts: Sequence[int | None]) -> np.ndarray:
    return np.array([-1 if c is None else c for c in counts], dtype=np.int64)


def _values(bounds: Sequence[Any]) -> np.ndarray:
    """Bounds as an int64 or float64 array when they are all such numbers, else as objects (None where
    unknown: never read)."""
    known = [b for b in bounds if b is not None]
    for kind, dtype in ((int, np.int64), (float, np.float64)):
        if known and all(type(b) is kind for b in known):
            try:
                return np.array([known[0] if b is None else b for b in bounds], dtype=dtype)
            except OverflowError:
                break
    out = np.empty(len(bounds), dtype=object)
    out[:] = list(bounds)
    return out


def _disjoint(d: ColumnMetrics, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Whether each delete range [lower, upper] misses the data range (False where they do not compare)."""
    data_lower, data_upper = _like(d.lower, lower), _like(d.upper, upper)
    try:
        return np.asarray((data_upper < lower) | (upper < data_lower), dtype=bool)
    except TypeError:  # bounds of unlike Python types (a malformed entry): judge them one by one
        out = np.zeros(len(lower), dtype=bool)
        for j, (lo, hi) in enumerate(zip(lower, upper, strict=True)):
            try:
                out[j] = bool(d.upper < lo or hi < d.lower)
            except TypeError:
                continue
        return out


def _like(value: Any, bounds: np.ndarray) -> Any:
    """``value`` ready to compare with ``bounds``: boxed as an object when they are objects, since NumPy
    would otherwise make a ``bytes`` or ``str`` a fixed-width scalar, which drops trailing NULs
    (``b"\\x01\\x00"`` would compare as ``b"\\x01"``)."""
    if bounds.dtype != object:
        return value
    box = np.empty((), dtype=object)
    box[()] = value
    return box


class RunMetrics:
    """The equality-field metrics of an :class:`~gpu_engine.planning.deletes.EqualityRun`'s files, as
    arrays: which of a suffix of the run may delete rows of a data file is a few array operations."""

    def __init__(
        self,
        files: Sequence[DeleteFile],
        metrics: Mapping[int, Metrics],
        types: Mapping[int, it.PrimitiveType],
    ) -> None:
        self.size = len(files)
        self.fields: dict[int, _FieldVectors] = {}
        for fid, t in types.items():
            uses = np.array([fid in d.equality_ids for d in files], dtype=bool)
            if uses.any():
                ms = [metrics.get(id(d), {}).get(fid, UNKNOWN) for d in files]
                self.fields[fid] = _FieldVectors(t.name in _FLOATS, uses, ms)

    def may_match(self, data: Metrics, start: int) -> np.ndarray:
        """Bool mask over the run's files from ``start`` on: :func:`may_match` of each with ``data``."""
        keep = np.ones(self.size - start, dtype=bool)
        for fid, vectors in self.fields.items():
            keep &= ~vectors.rules_out(data.get(fid, UNKNOWN), start)
        return keep


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
        self._runs: dict[int, RunMetrics] = {}  # by id() of the EqualityRun
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

    def keep(self, runs: EqualityCandidates, metrics: EntryMetrics, i: int) -> tuple[DeleteFile, ...]:
        """The equality deletes of ``runs`` (those the spec rules attach to entry ``i``) less those whose
        keys its metrics rule out (counted in :attr:`skipped`)."""
        kept: list[DeleteFile] = []
        for run, start in runs:
            vectors = self._runs.get(id(run))
            if vectors is None:
                vectors = self._runs[id(run)] = RunMetrics(run.files, self._metrics, self.types)
            mask = vectors.may_match(metrics[i], start)
            kept.extend(itertools.compress(run.files[start:], mask))
            self.skipped += len(mask) - int(np.count_nonzero(mask))
        return tuple(kept)

"""Which of a parent's manifests can list the files a commit removes, so that the commit reads only those.

A file's content (data or deletes) and partition spec never change, and its partition tuple is in every
manifest's partition field summaries that list it (bounds, ``contains_null``, ``contains_nan``), so a
manifest of another kind, or whose summaries rule out every removed file's values, is kept unread: as
Iceberg Java's ``ManifestFilterManager`` judges manifests against the files a commit deletes. A manifest
without summaries, or with bounds that cannot be read, is read.

Partition values are judged a field at a time (a manifest is read when, for every field, some removed
file's value can be in it), which keeps the test to a few binary searches per manifest whatever the
number of removed files; a manifest read needlessly is only read, never changed.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from ..errors import SingleValueError
from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.manifest_list import FieldSummary, ManifestFile
from ..iceberg.metadata import TableMetadata

ManifestKind: TypeAlias = tuple[Literal["data", "deletes"], int]
"""A manifest's content and partition spec id: which files it can list."""


def kind_of(m: ManifestFile) -> ManifestKind:
    assert m.partition_spec_id is not None
    return ("deletes" if m.content == 1 else "data", m.partition_spec_id)


class Partitioned(Protocol):
    @property
    def spec_id(self) -> int: ...

    @property
    def partition(self) -> tuple[Any, ...]: ...


@dataclass(frozen=True)
class _FieldValues:
    """One partition field's values among the removed files of one kind."""

    values: tuple[Any, ...]  # sorted, distinct, neither null nor NaN
    null: bool
    nan: bool
    unknown: bool = False  # values that do not fit the field's type: no manifest is ruled out

    def may_be_in(self, t: it.PrimitiveType, summary: FieldSummary) -> bool:
        if self.unknown or (self.null and summary.contains_null):
            return True
        if self.nan and summary.contains_nan is not False:
            return True
        if not self.values:
            return False
        if summary.lower_bound is None and summary.upper_bound is None:
            # only nulls (and NaN) when nulls are recorded; otherwise unknown
            return not summary.contains_null
        if summary.lower_bound is None or summary.upper_bound is None:
            return True
        try:
            lower = serde.from_bytes(t, summary.lower_bound)
            upper = serde.from_bytes(t, summary.upper_bound)
        except SingleValueError:
            return True
        if serde.is_nan_bound(t, lower) or serde.is_nan_bound(t, upper):
            return True
        first = bisect.bisect_left(self.values, lower)
        return first < len(self.values) and self.values[first] <= upper


@dataclass(frozen=True)
class RemovalScope:
    """The manifests that can list a commit's removed files: of ``kinds`` and, for the kinds in
    ``values`` (one entry per partition field of the kind's spec), whose summaries admit them."""

    kinds: frozenset[ManifestKind]
    values: Mapping[ManifestKind, tuple[_FieldValues, ...]]

    @classmethod
    def of_kinds(cls, kinds: Iterable[ManifestKind]) -> RemovalScope:
        """Any manifest of ``kinds``, whatever its partitions."""
        return cls(frozenset(kinds), {})

    @classmethod
    def of_files(
        cls, md: TableMetadata, data: Iterable[Partitioned] = (), deletes: Iterable[Partitioned] = ()
    ) -> RemovalScope:
        """The manifests that can list the removed ``data`` and ``deletes`` files, by their partitions."""
        tuples: dict[ManifestKind, set[tuple[Any, ...]]] = {}
        for content, files in (("data", data), ("deletes", deletes)):
            for f in files:
                tuples.setdefault((content, f.spec_id), set()).add(tuple(f.partition))  # type: ignore[arg-type]
        values = {kind: _field_values(md, kind[1], found) for kind, found in tuples.items()}
        return cls(frozenset(tuples), values)

    def may_list(self, md: TableMetadata, manifest: ManifestFile) -> bool:
        kind = kind_of(manifest)
        if kind not in self.kinds:
            return False
        fields = self.values.get(kind)
        summaries = manifest.partitions
        if fields is None or summaries is None or len(summaries) != len(fields):
            return True
        types = _partition_types(md, kind[1])
        return all(f.may_be_in(t, s) for f, t, s in zip(fields, types, summaries, strict=True))


def _partition_types(md: TableMetadata, spec_id: int) -> list[it.PrimitiveType]:
    spec = md.spec_by_id(spec_id)
    ptype = spec.partition_type(md.schema_for_spec(spec))
    return [f.type if isinstance(f.type, it.PrimitiveType) else it.UNKNOWN for f in ptype.fields]


def _field_values(
    md: TableMetadata, spec_id: int, tuples: Iterable[tuple[Any, ...]]
) -> tuple[_FieldValues, ...]:
    types = _partition_types(md, spec_id)
    columns: list[list[Any]] = [[] for _ in types]
    for values in tuples:
        if len(values) != len(types):
            raise ValueError(
                f"a partition tuple {values!r} does not fit spec {spec_id} ({len(types)} fields)"
            )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    return tuple(_one_field(t, column) for t, column in zip(types, columns, strict=True))


def _one_field(t: it.PrimitiveType, column: Sequence[Any]) -> _FieldValues:
    null = nan = False
    found = set()
    for value in column:
        if value is None:
            null = True
        elif t.name in ("float", "double") and math.isnan(value):
            nan = True
        else:
            try:
                found.add(serde.from_bytes(t, serde.to_bytes(t, value)))  # the form bounds decode to
            except SingleValueError:
                return _FieldValues((), null, nan, unknown=True)
    return _FieldValues(tuple(sorted(found)), null, nan)

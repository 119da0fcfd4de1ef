"""Iceberg partition transforms as the spec defines them: parse, applicability and result type.

Pure metadata logic (no kernels, no device): the planner and the metadata layer import this module;
:mod:`gpu_engine.transforms.compute` holds each transform's kernel dispatch.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

from ..errors import UnsupportedTransform
from ..iceberg import types as it

INTEGERS = frozenset({"int", "long"})
TIMESTAMPS = it.TIMESTAMP_NAMES
NANOS = frozenset({"timestamp_ns", "timestamptz_ns"})
HASHABLE = frozenset(
    {"int", "long", "decimal", "date", "time", "string", "uuid", "fixed", "binary", *TIMESTAMPS}
)
HASHABLE_NOT_BUCKETABLE = frozenset({"boolean", "float", "double"})  # the spec's "not currently valid" table
_NOT_IDENTITY = frozenset({"variant", "geometry", "geography"})


@dataclass(frozen=True)
class Transform(ABC):
    """A partition transform; subclasses implement one spec row of "Partition Transforms"."""

    name: ClassVar[str]

    def __str__(self) -> str:
        return self.name

    @abstractmethod
    def can_transform(self, source: it.PrimitiveType) -> bool: ...

    @abstractmethod
    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType: ...


@dataclass(frozen=True)
class Identity(Transform):
    name: ClassVar[str] = "identity"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name not in _NOT_IDENTITY

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return source


@dataclass(frozen=True)
class Void(Transform):
    name: ClassVar[str] = "void"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return True

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return source


@dataclass(frozen=True)
class Bucket(Transform):
    num_buckets: int
    name: ClassVar[str] = "bucket"

    def __post_init__(self) -> None:
        if not 0 < self.num_buckets <= 0x7FFFFFFF:
            raise UnsupportedTransform(f"bucket[{self.num_buckets}]: N must be in 1..2147483647")

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name in HASHABLE

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return it.INT


@dataclass(frozen=True)
class Truncate(Transform):
    width: int
    name: ClassVar[str] = "truncate"

    def __post_init__(self) -> None:
        if not 0 < self.width <= 0x7FFFFFFF:
            raise UnsupportedTransform(f"truncate[{self.width}]: W must be in 1..2147483647")

    def __str__(self) -> str:
        return f"truncate[{self.width}]"

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name in {"int", "long", "decimal", "string", "binary"}

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return source


@dataclass(frozen=True)
class Temporal(Transform):
    """year, month, day and hour: whole units since 1970-01-01 00:00, floored for earlier values."""

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return source.name in TIMESTAMPS or (source.name == "date" and self.name != "hour")

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        return it.DATE if self.name == "day" else it.INT


@dataclass(frozen=True)
class Year(Temporal):
    name: ClassVar[str] = "year"


@dataclass(frozen=True)
class Month(Temporal):
    name: ClassVar[str] = "month"


@dataclass(frozen=True)
class Day(Temporal):
    name: ClassVar[str] = "day"


@dataclass(frozen=True)
class Hour(Temporal):
    name: ClassVar[str] = "hour"


@dataclass(frozen=True)
class UnknownTransform(Transform):
    """A transform this engine does not know, kept by name; readers ignore it for pruning (spec)."""

    text: str
    name: ClassVar[str] = "unknown"

    def __str__(self) -> str:
        return self.text

    def can_transform(self, source: it.PrimitiveType) -> bool:
        return False

    def result_type(self, source: it.PrimitiveType) -> it.PrimitiveType:
        raise UnsupportedTransform(f"unknown partition transform {self.text!r} has no result type")


_PARAMETERLESS: dict[str, Transform] = {
    t.name: t for t in (Identity(), Void(), Year(), Month(), Day(), Hour())
}
_PARAMETERIZED = re.compile(r"(bucket|truncate)\[\s*(\d+)\s*\]")


def parse_transform(text: str, *, strict: bool = True) -> Transform:
    """Parse Iceberg's transform string: identity, void, bucket[N], truncate[W], year, month, day, hour.

    ``strict=False`` returns an :class:`UnknownTransform` for other strings (metadata written by newer
    writers) instead of raising.
    """
    s = text.strip().lower()
    if s in _PARAMETERLESS:
        return _PARAMETERLESS[s]
    if m := _PARAMETERIZED.fullmatch(s):
        n = int(m.group(2))
        return Bucket(n) if m.group(1) == "bucket" else Truncate(n)
    if not strict:
        return UnknownTransform(text.strip())
    raise UnsupportedTransform(
        f"unknown partition transform {text!r}: expected identity, void, bucket[N], truncate[W], "
        "year, month, day or hour"
    )

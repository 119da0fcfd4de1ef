"""Iceberg primitive types, their string forms (``"decimal(9,2)"``, ``"fixed[16]"``) and Arrow mappings."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from ..errors import InvalidType


@dataclass(frozen=True)
class PrimitiveType:
    """A primitive type named as in the spec's JSON serialization (Appendix C)."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class DecimalType(PrimitiveType):
    precision: int
    scale: int

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"


@dataclass(frozen=True)
class FixedType(PrimitiveType):
    length: int

    def __str__(self) -> str:
        return f"fixed[{self.length}]"


UNKNOWN = PrimitiveType("unknown")
BOOLEAN = PrimitiveType("boolean")
INT = PrimitiveType("int")
LONG = PrimitiveType("long")
FLOAT = PrimitiveType("float")
DOUBLE = PrimitiveType("double")
DATE = PrimitiveType("date")
TIME = PrimitiveType("time")
TIMESTAMP = PrimitiveType("timestamp")
TIMESTAMPTZ = PrimitiveType("timestamptz")
TIMESTAMP_NS = PrimitiveType("timestamp_ns")
TIMESTAMPTZ_NS = PrimitiveType("timestamptz_ns")
STRING = PrimitiveType("string")
UUID = PrimitiveType("uuid")
BINARY = PrimitiveType("binary")

_SIMPLE = {
    t.name: t
    for t in (
        UNKNOWN,
        BOOLEAN,
        INT,
        LONG,
        FLOAT,
        DOUBLE,
        DATE,
        TIME,
        TIMESTAMP,
        TIMESTAMPTZ,
        TIMESTAMP_NS,
        TIMESTAMPTZ_NS,
        STRING,
        UUID,
        BINARY,
    )
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_FIXED = re.compile(r"fixed\[\s*(\d+)\s*\]")
MAX_DECIMAL_PRECISION = 38


def decimal(precision: int, scale: int) -> DecimalType:
    if not 0 < precision <= MAX_DECIMAL_PRECISION or not 0 <= scale <= precision:
        raise InvalidType(
            f"decimal({precision}, {scale}): need 0 < precision <= 38 and 0 <= scale <= precision"
        )
    return DecimalType("decimal", precision, scale)


def fixed(length: int) -> FixedType:
    if length <= 0:
        raise InvalidType(f"fixed[{length}]: length must be positive")
    return FixedType("fixed", length)


def parse_type(text: str) -> PrimitiveType:
    """Parse a primitive type string as Iceberg writes it (``"decimal(9,2)"``, ``"fixed[16]"``)."""
    s = text.strip().lower()
    if s in _SIMPLE:
        return _SIMPLE[s]
    if m := _DECIMAL.fullmatch(s):
        return decimal(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.fullmatch(s):
        return fixed(int(m.group(1)))
    raise InvalidType(f"unknown Iceberg primitive type {text!r}")


def to_arrow(t: PrimitiveType) -> pa.DataType:
    """The Arrow type Iceberg readers use for ``t`` (Appendix A's Parquet mapping, as Arrow)."""
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale)
    if isinstance(t, FixedType):
        return pa.binary(t.length)
    return _ARROW[t.name]


_ARROW: dict[str, pa.DataType] = {
    "unknown": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "date": pa.date32(),
    "time": pa.time64("us"),
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "timestamp_ns": pa.timestamp("ns"),
    "timestamptz_ns": pa.timestamp("ns", tz="UTC"),
    "string": pa.large_string(),
    "uuid": pa.binary(16),
    "binary": pa.large_binary(),
}

"""Thrift's compact protocol, generically: bytes <-> a tree of fields, keeping every field and its order.

Parquet footers are Thrift structs in the compact protocol. This codec knows no schema: a struct decodes
to a :class:`Struct` (its fields as ``[field id, type, value]`` in stream order), a list or set to a
:class:`ThriftList`, a map to a :class:`ThriftMap`; integers (zigzag varints), doubles and binaries to
Python values. Encoding writes the same tree back, so ``encode_struct(decode_struct(b)) == b`` for any
struct written canonically (short field headers wherever the id delta allows, as every Thrift library
does); fields this module has never heard of survive untouched. That is what splicing Parquet files
needs (:mod:`.parquet_splice`): patch a few offsets, keep the rest byte for byte.

Malformed input raises :class:`ThriftError` (never an IndexError deep inside).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import TypeAlias

# compact type ids
BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
_INTS = (BYTE, I16, I32, I64)
_MAX_DEPTH = 64


class ThriftError(ValueError):
    """Bytes that are not a well-formed compact-protocol struct."""


@dataclass
class ThriftList:
    elem_type: int
    items: list[Value]
    is_set: bool = False


@dataclass
class ThriftMap:
    key_type: int
    value_type: int
    items: list[tuple[Value, Value]]


@dataclass
class Struct:
    """A struct's fields in stream order: ``[field id, compact type, value]`` (bools: type and value)."""

    fields: list[list[object]] = field(default_factory=list)

    def get(self, fid: int) -> Value | None:
        for f in self.fields:
            if f[0] == fid:
                return f[2]  # type: ignore[return-value]
        return None

    def set(self, fid: int, value: Value) -> None:
        """Replace the value of an existing field ``fid`` (its type stays)."""
        for f in self.fields:
            if f[0] == fid:
                f[2] = value
                return
        raise KeyError(fid)

    def put(self, fid: int, ctype: int, value: Value) -> None:
        """Set field ``fid`` to ``value`` of compact type ``ctype``: replaced where present, else inserted
        before the first field of a higher id (fields stay in ascending order, as writers emit them)."""
        for i, f in enumerate(self.fields):
            if f[0] == fid:
                self.fields[i] = [fid, ctype, value]
                return
            if isinstance(f[0], int) and f[0] > fid:
                self.fields.insert(i, [fid, ctype, value])
                return
        self.fields.append([fid, ctype, value])


@dataclass(frozen=True)
class EncodedStruct:
    """A struct already encoded (:func:`encode_struct`'s bytes), written as it is where a struct goes: a
    file's footer keeps its row groups so, a few hundred bytes each rather than a tree of objects."""

    data: bytes


Value: TypeAlias = bool | int | float | bytes | ThriftList | ThriftMap | Struct | EncodedStruct


# -- decoding -------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes | memoryview):
        self.data = memoryview(data).cast("B")  # bytes as 0..255, whatever the exporter says
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError(f"truncated at byte {self.pos}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ThriftError(f"varint too long at byte {self.pos}")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError(f"truncated: {n} bytes wanted at byte {self.pos}")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, ctype: int, depth: int) -> Value:
        if depth > _MAX_DEPTH:
            raise ThriftError("nesting too deep")
        if ctype in (BOOL_TRUE, BOOL_FALSE):  # as a list element: one byte
            return self.byte() == BOOL_TRUE
        if ctype in _INTS:
            if ctype == BYTE:
                return int(struct.unpack("b", self.take(1))[0])
            return self.zigzag()
        if ctype == DOUBLE:
            return float(struct.unpack("<d", self.take(8))[0])
        if ctype == BINARY:
            return self.take(self.varint())
        if ctype in (LIST, SET):
            header = self.byte()
            size, elem = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            return ThriftList(elem, [self.value(elem, depth + 1) for _ in range(size)], ctype == SET)
        if ctype == MAP:
            size = self.varint()
            if size == 0:
                return ThriftMap(0, 0, [])
            kinds = self.byte()
            k, v = kinds >> 4, kinds & 0x0F
            items = [(self.value(k, depth + 1), self.value(v, depth + 1)) for _ in range(size)]
            return ThriftMap(k, v, items)
        if ctype == STRUCT:
            return self.struct(depth + 1)
        raise ThriftError(f"unknown compact type {ctype} at byte {self.pos}")

    def struct(self, depth: int = 0) -> Struct:
        out = Struct()
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                return out
            delta, ctype = header >> 4, header & 0x0F
            fid = last + delta if delta else self.zigzag()
            if ctype in (BOOL_TRUE, BOOL_FALSE):
                value: Value = ctype == BOOL_TRUE
            else:
                value = self.value(ctype, depth)
            out.fields.append([fid, ctype, value])
            last = fid


def decode_struct(data: bytes | memoryview) -> tuple[Struct, int]:
    """The struct at the start of ``data`` and the number of bytes it took."""
    reader = _Reader(data)
    return reader.struct(), reader.pos


# -- encoding -------------------------------------------------------------------------------------------


def _varint(out: bytearray, n: int) -> None:
    while True:
        if n < 0x80:
            out.append(n)
            return
        out.append((n & 0x7F) | 0x80)
        n >>= 7


def _zigzag(out: bytearray, n: int) -> None:
    _varint(out, (n << 1) ^ (n >> 63) if n < 0 else n << 1)


def _value(out: bytearray, ctype: int, value: Value) -> None:
    if ctype in (BOOL_TRUE, BOOL_FALSE):
        out.append(BOOL_TRUE if value else BOOL_FALSE)
    elif ctype == BYTE:
        out += struct.pack("b", value)
    elif ctype in _INTS:
        assert isinstance(value, int)
        _zigzag(out, value)
    elif ctype == DOUBLE:
        out += struct.pack("<d", value)
    elif ctype == BINARY:
        assert isinstance(value, bytes)
        _varint(out, len(value))
        out += value
    elif ctype in (LIST, SET):
        assert isinstance(value, ThriftList)
        n = len(value.items)
        if n < 15:
            out.append((n << 4) | value.elem_type)
        else:
            out.append(0xF0 | value.elem_type)
            _varint(out, n)
        for item in value.items:
            _value(out, value.elem_type, item)
    elif ctype == MAP:
        assert isinstance(value, ThriftMap)
        _varint(out, len(value.items))
        if value.items:
            out.append((value.key_type << 4) | value.value_type)
            for k, v in value.items:
                _value(out, value.key_type, k)
                _value(out, value.value_type, v)
    elif ctype == STRUCT and isinstance(value, EncodedStruct):
        out += value.data
    elif ctype == STRUCT:
        assert isinstance(value, Struct)
        _struct(out, value)
    else:
        raise ThriftError(f"unknown compact type {ctype}")


def _struct(out: bytearray, s: Struct) -> None:
    last = 0
    for fid, ctype, value in s.fields:
        assert isinstance(fid, int) and isinstance(ctype, int)
        if ctype in (BOOL_TRUE, BOOL_FALSE):
            ctype = BOOL_TRUE if value else BOOL_FALSE
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | ctype)
        else:
            out.append(ctype)
            _zigzag(out, fid)
        if ctype not in (BOOL_TRUE, BOOL_FALSE):
            _value(out, ctype, value)  # type: ignore[arg-type]
        last = fid
    out.append(0)


def encode_struct(s: Struct) -> bytes:
    out = bytearray()
    _struct(out, s)
    return bytes(out)

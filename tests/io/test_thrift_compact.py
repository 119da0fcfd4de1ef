"""The generic compact-protocol codec: byte-exact round trips of every Parquet footer in the fixtures,
hand-built values of every type, and clear errors on malformed input."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from gpu_engine.io import thrift_compact as tc
from gpu_engine.io.thrift_compact import (
    Struct,
    ThriftError,
    ThriftList,
    ThriftMap,
    decode_struct,
    encode_struct,
)
from tests.planning._support import FIXTURES

PARQUET_FILES = sorted(FIXTURES.rglob("*.parquet"))


def footer(path: Path) -> bytes:
    data = path.read_bytes()
    (length,) = struct.unpack("<I", data[-8:-4])
    return data[-8 - length : -8]


def test_fixture_files_are_there():
    assert len(PARQUET_FILES) > 500


@pytest.mark.parametrize("path", PARQUET_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_every_fixture_footer_round_trips_byte_for_byte(path: Path):
    raw = footer(path)
    decoded, used = decode_struct(raw)
    assert used == len(raw)
    assert encode_struct(decoded) == raw
    rows = decoded.get(3)  # num_rows
    assert isinstance(rows, int) and rows >= 0


def every_kind() -> Struct:
    inner = Struct([[1, tc.I32, -7], [2, tc.BINARY, b"x"]])
    return Struct(
        [
            [1, tc.BOOL_TRUE, True],
            [2, tc.BOOL_FALSE, False],
            [3, tc.BYTE, -128],
            [4, tc.I16, -32768],
            [5, tc.I32, 2**31 - 1],
            [6, tc.I64, -(2**63)],
            [7, tc.I64, 2**63 - 1],
            [8, tc.DOUBLE, -0.0],
            [9, tc.BINARY, bytes(range(256)) * 3],
            [10, tc.LIST, ThriftList(tc.I64, list(range(-20, 20)))],  # 40 items: long list header
            [11, tc.SET, ThriftList(tc.BINARY, [b"a", b"b"], is_set=True)],
            [12, tc.MAP, ThriftMap(tc.BINARY, tc.STRUCT, [(b"k", inner), (b"", Struct())])],
            [13, tc.MAP, ThriftMap(0, 0, [])],
            [14, tc.LIST, ThriftList(tc.BOOL_TRUE, [True, False, True])],
            [40, tc.STRUCT, inner],  # id jump beyond 15: long field header
            [2, tc.I32, 1],  # going back: long field header too
            [300, tc.LIST, ThriftList(tc.STRUCT, [inner] * 16)],
        ]
    )


def test_every_type_round_trips():
    value = every_kind()
    data = encode_struct(value)
    decoded, used = decode_struct(data + b"trailing")
    assert used == len(data)
    assert decoded == value
    assert encode_struct(decoded) == data


def test_zigzag_varints_match_the_protocol():
    # field 1, i32: header 0x15, then zigzag(-1) = 1, zigzag(1) = 2, zigzag(300) = 600 = 0xd8 0x04
    assert encode_struct(Struct([[1, tc.I32, -1]])) == b"\x15\x01\x00"
    assert encode_struct(Struct([[1, tc.I32, 1]])) == b"\x15\x02\x00"
    assert encode_struct(Struct([[1, tc.I64, 300]])) == b"\x16\xd8\x04\x00"
    assert encode_struct(Struct([[1, tc.BOOL_TRUE, False]])) == b"\x12\x00"  # the value decides the type


def test_get_and_set():
    s = Struct([[4, tc.I64, 10]])
    assert s.get(4) == 10 and s.get(5) is None
    s.set(4, 11)
    assert s.get(4) == 11
    with pytest.raises(KeyError):
        s.set(5, 1)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "truncated"),
        (b"\x15", "truncated"),  # a field with no value
        (b"\x18\x05ab", "truncated"),  # binary longer than the data
        (b"\x1d\x00", "unknown compact type 13"),
        (b"\x16" + b"\xff" * 12, "varint too long"),
        (b"\x19\xfc\x7f", "truncated"),  # a list claiming 127 structs
    ],
)
def test_malformed_input_raises_thrift_error(data: bytes, message: str):
    with pytest.raises(ThriftError, match=message):
        decode_struct(data)


def test_nesting_is_bounded():
    data = b"\x1c" * 100 + b"\x00" * 101  # field 1: struct, 100 deep
    with pytest.raises(ThriftError, match="too deep"):
        decode_struct(data)


def test_bytes_above_127_read_as_unsigned_from_any_buffer():
    import pyarrow as pa

    value = Struct([[1, tc.LIST, ThriftList(tc.I32, list(range(20)))], [2, tc.I64, 10**12]])
    data = encode_struct(value)
    assert memoryview(pa.py_buffer(data)).format == "b"  # pyarrow exports signed chars
    assert decode_struct(memoryview(pa.py_buffer(data)))[0] == value


def test_put_replaces_or_inserts_a_field_in_id_order() -> None:
    s = Struct([[1, tc.I32, 5], [4, tc.BINARY, b"x"], [10, tc.I32, 7]])
    s.put(9, tc.I32, 42)
    s.put(4, tc.BINARY, b"yz")
    s.put(12, tc.I64, -1)
    s.put(0, tc.I32, 3)
    assert [f[0] for f in s.fields] == [0, 1, 4, 9, 10, 12]
    again, used = decode_struct(encode_struct(s))
    assert used == len(encode_struct(s))
    assert [(f[0], f[2]) for f in again.fields] == [(0, 3), (1, 5), (4, b"yz"), (9, 42), (10, 7), (12, -1)]

"""Which columns cuDF cannot hold: decided from the Arrow schema alone, so that ``to_cudf`` names the
column at fault before reading anything (the GPU tests check the list against cuDF itself)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gpu_engine.backend.cudf_frames import cudf_unsupported

HELD = [
    pa.bool_(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(38, 10),
    pa.date32(),
    pa.timestamp("us"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns", tz="UTC"),
    pa.large_string(),
    pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.large_string())]),
    pa.list_(pa.struct([pa.field("a", pa.float64())])),
]
NOT_HELD = [
    (pa.large_binary(), "x"),
    (pa.binary(), "x"),
    (pa.binary(16), "x"),
    (pa.time64("us"), "x"),
    (pa.map_(pa.large_string(), pa.int32()), "x"),
    (pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.binary(5))]), "x.b"),
    (pa.list_(pa.time64("us")), "x.element"),
    (pa.struct([pa.field("s", pa.list_(pa.map_(pa.int32(), pa.int32())))]), "x.s.element"),
]


@pytest.mark.parametrize("t", HELD, ids=str)
def test_types_cudf_holds(t: pa.DataType) -> None:
    assert cudf_unsupported(pa.schema([pa.field("x", t), pa.field("y", pa.int64())])) is None


@pytest.mark.parametrize(("t", "path"), NOT_HELD, ids=lambda v: str(v))
def test_types_cudf_cannot_hold_are_named_with_their_column(t: pa.DataType, path: str) -> None:
    why = cudf_unsupported(pa.schema([pa.field("ok", pa.int64()), pa.field("x", t)]))
    assert why is not None
    assert why.startswith(f"column {path!r} (Arrow ")
    assert "to_arrow()" in why

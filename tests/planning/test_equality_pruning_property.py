"""Soundness of the equality-delete pruning on tables written by the engine itself, for every type it
writes equality deletes on (not float/double, which the spec excludes): with random keys (nulls, strings
and binaries past the 16-character truncation of bounds, non-ASCII text), a scan that prunes returns
exactly the rows of a scan that attaches every equality delete by the spec rules alone."""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_engine.planning import equality_pruning

from ..commit._support import sql_catalog
from ..execute.oracles import assert_same_rows

_TEXT = st.text(alphabet=st.sampled_from("\x00ab\u00e9\u4e2d\U0001f600z"), max_size=20)
# few distinct bytes, NUL among them: bounds that end in NUL (NumPy's fixed-width scalars drop them)
_BYTES = st.lists(st.sampled_from([b"\x00", b"\x01", b"\xff"]), max_size=20).map(b"".join)
CASES: dict[str, tuple[pa.DataType, st.SearchStrategy[Any]]] = {
    "long": (pa.int64(), st.integers(-(2**40), 2**40)),
    "int": (pa.int32(), st.integers(-50, 50)),
    "string": (pa.string(), _TEXT),
    "binary": (pa.binary(), st.binary(max_size=20) | _BYTES),
    "fixed": (pa.binary(3), st.binary(min_size=3, max_size=3) | _BYTES.map(lambda b: (b + b"\x00" * 3)[:3])),
    "decimal": (pa.decimal128(9, 2), st.decimals(-100, 100, places=2, allow_nan=False)),
    "date": (pa.date32(), st.dates(dt.date(1960, 1, 1), dt.date(2060, 1, 1))),
    "timestamp": (pa.timestamp("us"), st.datetimes(dt.datetime(1960, 1, 1), dt.datetime(2060, 1, 1))),
    "boolean": (pa.bool_(), st.booleans()),
}
_COUNTER = itertools.count()


def _values(strategy: st.SearchStrategy[Any], max_size: int) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.one_of(st.none(), strategy), min_size=1, max_size=max_size)


@pytest.mark.parametrize("kind", sorted(CASES))
@settings(max_examples=25)
@given(data=st.data())
def test_pruned_scan_equals_unpruned(kind: str, data: st.DataObject) -> None:
    arrow_type, strategy = CASES[kind]
    files = data.draw(st.lists(_values(strategy, 6), min_size=1, max_size=3), label="files")
    pool = [v for f in files for v in f]
    keys = data.draw(
        st.lists(st.one_of(st.sampled_from(pool), st.none(), strategy), min_size=1, max_size=4), label="keys"
    )
    with tempfile.TemporaryDirectory() as tmp:
        tbl = sql_catalog(Path(tmp)).create_table(
            f"db.t{next(_COUNTER)}", pa.schema([("k", arrow_type), ("n", pa.int64())])
        )
        row = 0
        for values in files:
            n = pa.array(range(row, row + len(values)), pa.int64())
            tbl.append(pa.table({"k": pa.array(values, arrow_type), "n": n}))
            row += len(values)
        tbl.delete_rows(pa.table({"k": pa.array(keys, arrow_type)}), on=["k"])
        pruned = tbl.scan(backend="cpu").to_arrow()
        real = equality_pruning.prunable_types
        equality_pruning.prunable_types = lambda schema, ids: {}  # type: ignore[assignment]
        try:
            unpruned = tbl.scan(backend="cpu").to_arrow()
        finally:
            equality_pruning.prunable_types = real
        assert_same_rows(pruned, unpruned, context=f"{kind}: files {files}, keys {keys}")

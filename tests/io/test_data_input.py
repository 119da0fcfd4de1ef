"""The rows given to a write (gpu_engine.io.data_input): anything but Arrow tables, batches, readers and
iterables of batches is an InvalidData naming the argument and the kinds a write takes, raised through
every write method before anything is written or committed (these escaped as bare TypeError or
AttributeError from the writer, or were iterated as dict keys and Arrow scalars)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.errors import InvalidData
from gpu_engine.io.data_input import arrow_table, is_cudf_frame, record_batches
from gpu_engine.table import Table

from ..commit._support import keyed_rows, region_table, table_files

GOOD = keyed_rows(0, 3)
KEYS = GOOD.select(["id", "region"])

NOT_ROWS: list[tuple[str, Callable[[], Any], str]] = [
    ("None", lambda: None, r"(data|keys): expected .* not None"),
    ("dict", lambda: {"id": [1]}, r"not a dict \(make a table: pyarrow.table\(mapping\)\)"),
    ("str", lambda: "id", r"not a str"),
    ("bytes", lambda: b"id", r"not a bytes"),
    ("int", lambda: 5, r"not a int"),
    ("pandas", lambda: GOOD.to_pandas(), r"not a pandas DataFrame \(convert it first"),
    ("ChunkedArray", lambda: GOOD["id"], r"not a single Arrow column \(ChunkedArray\)"),
    ("Array", lambda: pa.array([1]), r"not a single Arrow column"),
]

STREAM_ONLY: list[tuple[str, Callable[[], Any], str]] = [
    ("list of Tables", lambda: [GOOD], r"item 0 of the list is a pyarrow.lib.Table: .*concat_tables"),
    ("list of ints", lambda: [1, 2], r"item 0 of the list is a int"),
]


def _table(tmp_path: Path) -> Table:
    tbl = region_table(tmp_path, 2)
    tbl.append(GOOD)
    return tbl


WRITES: dict[str, Callable[[Table, Any], object]] = {
    "append": lambda t, d: t.append(d),
    "overwrite": lambda t, d: t.overwrite(d),
    "dynamic_partition_overwrite": lambda t, d: t.dynamic_partition_overwrite(d),
    "upsert": lambda t, d: t.upsert(d, on=["id", "region"]),
    "delete_rows": lambda t, d: t.delete_rows(d, on=["id", "region"]),
}


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize(("label", "make", "message"), NOT_ROWS, ids=[c[0] for c in NOT_ROWS])
def test_every_write_refuses_what_is_not_rows(
    tmp_path: Path, write: str, label: str, make: Callable[[], Any], message: str
) -> None:
    """Each write method: InvalidData naming the argument, the table unchanged and no file left behind."""
    _assert_refused(tmp_path, write, make, message)


def _assert_refused(tmp_path: Path, write: str, make: Callable[[], Any], message: str) -> None:
    tbl = _table(tmp_path)
    before, files = tbl.metadata.current_snapshot_id, table_files(tbl)
    with pytest.raises(InvalidData, match=message):
        WRITES[write](tbl, make())
    assert tbl.refresh().metadata.current_snapshot_id == before
    assert table_files(tbl) == files


@pytest.mark.parametrize("write", ["append", "overwrite", "dynamic_partition_overwrite"])
@pytest.mark.parametrize(("label", "make", "message"), STREAM_ONLY, ids=[c[0] for c in STREAM_ONLY])
def test_an_iterable_must_yield_record_batches(
    tmp_path: Path, write: str, label: str, make: Callable[[], Any], message: str
) -> None:
    _assert_refused(tmp_path, write, make, message)


@pytest.mark.parametrize("write", ["upsert", "delete_rows"])
def test_upserts_and_equality_deletes_need_all_rows_at_once(tmp_path: Path, write: str) -> None:
    """A reader is refused with the way to read it (they need every key before writing), not an
    AttributeError ('RecordBatchReader' object has no attribute 'column_names')."""
    tbl = _table(tmp_path)
    reader = pa.RecordBatchReader.from_batches(KEYS.schema, KEYS.to_batches())
    what = "keys" if write == "delete_rows" else "data"
    with pytest.raises(
        InvalidData, match=rf"{what}: expected a pyarrow Table or RecordBatch, .*read_all\(\)"
    ):
        WRITES[write](tbl, reader)


def test_the_kinds_a_write_takes_give_the_same_batches() -> None:
    """Tables, batches, readers and iterables of batches all stream their batches, unchanged."""
    batches = GOOD.to_batches()
    reader = pa.RecordBatchReader.from_batches(GOOD.schema, batches)
    for data in (GOOD, batches[0], reader, batches, iter(batches), tuple(batches)):
        got = pa.Table.from_batches(list(record_batches(data)), GOOD.schema)
        assert got.equals(GOOD) or got.equals(pa.Table.from_batches(batches[:1]))
    assert arrow_table(batches[0]).equals(pa.Table.from_batches(batches[:1]))
    assert arrow_table(GOOD) is GOOD


def test_cudf_frames_are_told_apart_without_importing_cudf() -> None:
    frame_type = type("DataFrame", (), {"__module__": "cudf.core.dataframe"})
    other = type("DataFrame", (), {"__module__": "pandas.core.frame"})
    assert is_cudf_frame(frame_type())
    assert not is_cudf_frame(other()) and not is_cudf_frame(pa.table({"a": [1]}))

"""Appends of frames (cuDF DataFrames on a GPU; here the pyarrow twin): the same rows, files and metrics as
an Arrow append; columns matched by name, widened but never narrowed; missing columns filled; refusals
name the column and commit nothing."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine._deps import optional
from gpu_engine.catalog.sql import SqlCatalog
from gpu_engine.commit.append import append
from gpu_engine.errors import InvalidOption, SchemaMismatch
from gpu_engine.execute.frames import ArrowFrames
from gpu_engine.table import Table

from ..commit._compact_support import _canon, gen_rows
from ..commit._support import sql_catalog
from .test_frame_write import METRICS as FILE_METRICS

METRICS = (*FILE_METRICS, "partition", "spec_id")
TWIN = ArrowFrames()


def tables(tmp_path: Path, partition_spec: list[str], **props: str) -> tuple[Table, Table]:
    cat: SqlCatalog = sql_catalog(tmp_path)
    schema = pa.schema([
        pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("x", pa.float64()),
        ("a", pa.int32()), ("b", pa.int64()), ("region", pa.string()), ("day", pa.date32()),
        ("ts", pa.timestamp("us", "UTC")),
    ])  # fmt: skip
    made = [
        cat.create_table(f"db.{name}", schema=schema, partition_spec=partition_spec,
                         properties={"format-version": "2", **props})
        for name in ("arrow", "frames")
    ]  # fmt: skip
    return made[0], made[1]


def rows(n: int = 300, start: int = 0) -> pa.Table:
    base = gen_rows(start, n, seed=3)
    days = pa.array([dt.date(2026, 1, 1 + i % 20) for i in range(n)], pa.date32())
    stamps = pa.array([i * 3_600_000_000 for i in range(n)], pa.timestamp("us", "UTC"))
    return base.append_column("day", days).append_column("ts", stamps)


def canonical(tbl: Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(_canon(v) for v in r.values()) for r in tbl.scan().to_arrow().to_pylist())


def entries(result: Any) -> list[dict[str, Any]]:
    """The appended files' partitions, counts and metrics (not their names)."""
    return sorted(({m: getattr(f, m) for m in METRICS} for f in result.files), key=repr)


@pytest.mark.parametrize(
    "spec", [[], ["region"], ["bucket(4, id)", "day(ts)"], ["truncate(2, name)", "day"]], ids=str
)
def test_a_frame_append_writes_what_an_arrow_append_writes(tmp_path: Path, spec: list[str]) -> None:
    by_arrow, by_frames = tables(tmp_path, spec)
    data = rows()
    expected = by_arrow.append(data, backend="cpu")
    result = append(by_frames, data, backend="cpu", sink=TWIN)
    assert result.rows == data.num_rows
    assert canonical(by_frames) == canonical(by_arrow)
    assert entries(result) == entries(expected)
    assert len(result.files) == len(expected.files) == max(1, len({f.partition for f in expected.files}))


def test_files_are_cut_at_the_target_size_of_the_frames_bytes(tmp_path: Path) -> None:
    _, tbl = tables(tmp_path, [], **{"write.target-file-size-bytes": "20000"})
    data = rows(2000)
    result = append(tbl, data, backend="cpu", sink=TWIN)
    counts = [f.record_count for f in result.files]
    assert len(counts) > 3 and sum(counts) == 2000
    assert len(set(counts[:-1])) == 1 and 0 < counts[-1] <= counts[0]  # equal cuts, the rest last
    assert all(f.file_size_in_bytes <= 20000 for f in result.files)


def test_columns_are_widened_filled_and_reordered(tmp_path: Path) -> None:
    _, tbl = tables(tmp_path, ["region"])
    frame = pa.table({
        "region": ["eu", "us"],
        "id": pa.array([1, 2], pa.int16()),  # widened into long
        "x": pa.array([1.5, math.nan], pa.float32()),  # into double
        "name": pa.array(["a", None], pa.large_string()),
        "ts": pa.array([0, 1], pa.timestamp("us", "Europe/Paris")),  # an instant: into timestamptz
        "day": pa.array([0, 86_400], pa.timestamp("s")),  # days held as seconds, as cuDF holds them
    })  # fmt: skip
    append(tbl, frame, backend="cpu", sink=TWIN)
    got = tbl.scan().to_arrow().sort_by("id").to_pylist()
    assert [r["id"] for r in got] == [1, 2] and [r["a"] for r in got] == [None, None]
    assert got[0]["x"] == 1.5 and math.isnan(got[1]["x"])
    assert [r["day"] for r in got] == [dt.date(1970, 1, 1), dt.date(1970, 1, 2)]
    assert got[1]["ts"] == dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC)


ID = pa.array([1], pa.int64())
REFUSED = [
    ({"id": ID, "extra": [1]}, r"the rows have column\(s\) \['extra'\] that the table schema lacks"),
    ({"id": ID, "a": ID}, r"column 'a' is int64, the table's field is int32: cast it first"),
    (
        {"id": ID, "ts": pa.array([1], pa.timestamp("us"))},
        r"column 'ts' is timestamp\[us\], the table's field is",
    ),
    ({"id": ID, "x": ["1.5"]}, r"column 'x' is string"),
    ({"name": ["a"]}, r"'id'"),
    ({"id": pa.array([None], pa.int64())}, r"column 'id' is required but holds 1 null"),
]


@pytest.mark.parametrize(("frame", "message"), REFUSED)
def test_rows_that_do_not_fit_are_refused_naming_the_column(
    tmp_path: Path, frame: dict[str, Any], message: str
) -> None:
    _, tbl = tables(tmp_path, ["region"])
    head = tbl.metadata.current_snapshot_id
    with pytest.raises(SchemaMismatch, match=message):
        append(tbl, pa.table(frame), backend="cpu", sink=TWIN)
    assert tbl.refresh().metadata.current_snapshot_id == head
    assert not [p for p in Path(tbl.location.removeprefix("file://")).rglob("*.parquet")]


def test_merge_schema_takes_arrow_data_only(tmp_path: Path) -> None:
    _, tbl = tables(tmp_path, [])
    with pytest.raises(InvalidOption, match=r"merge_schema: evolve the schema from Arrow data"):
        append(tbl, rows(3), backend="cpu", merge_schema=True, sink=TWIN)


def test_an_empty_frame_appends_no_file(tmp_path: Path) -> None:
    _, tbl = tables(tmp_path, ["region"])
    result = append(tbl, rows(0), backend="cpu", sink=TWIN)
    assert result.files == () and result.rows == 0


@pytest.mark.gpu
@pytest.mark.parametrize("spec", [[], ["region"], ["bucket(4, id)", "day(ts)"]], ids=str)
def test_a_cudf_frame_append_writes_what_an_arrow_append_writes(tmp_path: Path, spec: list[str]) -> None:
    cudf = optional("cudf")
    if cudf is None:
        pytest.skip("cuDF is not installed")
    by_arrow, by_frames = tables(tmp_path, spec)
    data = rows()
    expected = by_arrow.append(data, backend="cpu")
    got = by_frames.append(cudf.DataFrame.from_arrow(data), backend="cuda")  # found to be a cuDF frame
    assert canonical(by_frames) == canonical(by_arrow)
    assert entries(got) == entries(expected)


# -- found by a differential hunt against the Arrow append ------------------------------------------------


def test_dates_held_as_timestamps_must_be_whole_days(tmp_path: Path) -> None:
    _, tbl = tables(tmp_path, [])
    for unit, ticks in [("s", 86_401), ("ms", -1), ("us", 1)]:
        frame = pa.table({"id": [1], "day": pa.array([ticks], pa.timestamp(unit))})
        with pytest.raises(
            SchemaMismatch, match=r"column 'day': a date column holds times that are not midnight"
        ):
            append(tbl, frame, backend="cpu", sink=TWIN)
    append(
        tbl,
        pa.table({"id": [1], "day": pa.array([-86_400_000], pa.timestamp("ms"))}),
        backend="cpu",
        sink=TWIN,
    )
    assert tbl.refresh().scan().to_arrow().column("day").to_pylist() == [dt.date(1969, 12, 31)]


def test_a_column_given_twice_is_refused(tmp_path: Path) -> None:
    _, tbl = tables(tmp_path, [])
    frame = pa.Table.from_arrays([pa.array([1]), pa.array([1]), pa.array([2])], names=["id", "a", "a"])
    with pytest.raises(SchemaMismatch, match=r"column 'a' appears twice"):
        append(tbl, frame, backend="cpu", sink=TWIN)


def test_every_nan_is_one_partition(tmp_path: Path) -> None:
    by_arrow, by_frames = tables(tmp_path, ["x"])
    quiet, computed = float("nan"), float("inf") - float("inf")  # two NaN bit patterns
    data = pa.table({"id": [1, 2, 3, 4], "x": [quiet, computed, 0.0, -0.0]})
    expected = by_arrow.append(data, backend="cpu")
    got = append(by_frames, data, backend="cpu", sink=TWIN)
    assert (
        sorted(f.record_count for f in got.files)
        == sorted(f.record_count for f in expected.files)
        == [1, 1, 2]
    )


def test_required_nested_fields_as_the_arrow_append_takes_them(tmp_path: Path) -> None:
    cat: SqlCatalog = sql_catalog(tmp_path)
    struct = pa.struct([pa.field("x", pa.int32(), nullable=False)])
    schema = pa.schema([
        pa.field("id", pa.int64(), nullable=False), pa.field("s", struct),
        pa.field("l", pa.list_(pa.field("element", pa.int32(), nullable=False))),
    ])  # fmt: skip
    tbl = cat.create_table("db.n", schema=schema, properties={"format-version": "2"})
    loose = pa.struct([pa.field("x", pa.int32())])
    # a null struct with a null beneath it in its required field: valid rows
    nulls_beneath = pa.StructArray.from_arrays(
        [pa.array([None, 3], pa.int32())], fields=list(loose), mask=pa.array([True, False])
    )
    append(tbl, pa.table({"id": [1, 2], "s": nulls_beneath}), backend="cpu", sink=TWIN)
    assert [r["s"] for r in tbl.refresh().scan().to_arrow().sort_by("id").to_pylist()] == [None, {"x": 3}]
    refused = [
        ("s.x", pa.table({"id": [1], "s": pa.array([{"x": None}], loose)})),
        ("l.element", pa.table({"id": [1], "l": pa.array([[1, None]], pa.list_(pa.int32()))})),
    ]
    for name, frame in refused:
        with pytest.raises(SchemaMismatch, match=name.replace(".", r"\.")):
            append(tbl, frame, backend="cpu", sink=TWIN)


def test_binary_of_any_offset_width(tmp_path: Path) -> None:
    cat: SqlCatalog = sql_catalog(tmp_path)
    tbl = cat.create_table("db.b", schema=pa.schema([("b", pa.binary())]), properties={"format-version": "2"})
    append(tbl, pa.table({"b": pa.array([b"\x00\xff", None], pa.binary())}), backend="cpu", sink=TWIN)
    assert tbl.refresh().scan().to_arrow().column("b").to_pylist() == [b"\x00\xff", None]

"""Which columns cuDF cannot hold: decided from the Arrow schema alone, so that ``to_cudf`` names the
column at fault before reading anything (the GPU tests check the list against cuDF itself); and how the
adapter calls cuDF's Parquet reader (checked with a recording stand-in: cuDF needs a GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.backend import cudf_frames
from gpu_engine.backend.cudf_frames import CudfFrames, cudf_unsupported
from gpu_engine.io.fileio import DefaultFileIO, LocalFileIO

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
    (pa.uuid(), "x"),  # written as arrow.uuid: its storage is fixed-size binary
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


class _FakeFrame:
    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.reset = False

    def reset_index(self, *, drop: bool) -> _FakeFrame:
        assert drop
        self.reset = True
        return self


class _FakeCudf:
    """Records read_parquet's arguments (cuDF itself needs a GPU)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, dict[str, Any]]] = []

    def read_parquet(self, sources: Any, **kwargs: Any) -> _FakeFrame:
        self.calls.append((sources, kwargs))
        return _FakeFrame(0)


def _frames(monkeypatch: pytest.MonkeyPatch) -> tuple[CudfFrames, _FakeCudf]:
    fake = _FakeCudf()
    monkeypatch.setattr(cudf_frames, "require", lambda name, what: fake)
    return CudfFrames(), fake


@pytest.mark.parametrize("io", [LocalFileIO(), DefaultFileIO()], ids=["local", "default"])
def test_local_files_are_read_by_path_without_hive_partitions_or_pandas_index(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, io: Any
) -> None:
    frames, fake = _frames(monkeypatch)
    paths = [f"file://{tmp_path}/data/cat=a/f1.parquet", f"{tmp_path}/data/cat=b/f2.parquet"]
    frame = frames.read(io, [(paths[0], [0, 2]), (paths[1], [1])], ["id", "cat"])
    [(sources, kwargs)] = fake.calls
    assert sources == [f"{tmp_path}/data/cat=a/f1.parquet", paths[1]]
    assert kwargs == {
        "columns": ["id", "cat"],
        "row_groups": [[0, 2], [1]],
        "dataset_kwargs": {"partitioning": None},  # else cuDF reads cat=a/ as a column and regroups files
        "use_pandas_metadata": False,
    }
    assert frame.reset  # masks apply by position


def test_other_file_systems_are_read_through_the_table_fileio(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    frames, fake = _frames(monkeypatch)
    (tmp_path / "f.parquet").write_bytes(b"data")
    opened: list[str] = []

    class _Remote(LocalFileIO):
        def open_input(self, path: str) -> Any:
            opened.append(path)
            return super().open_input(str(tmp_path / "f.parquet"))

    frames.read(_Remote(), [("s3://bucket/f.parquet", [0])], ["id"])
    [(sources, _)] = fake.calls
    assert opened == ["s3://bucket/f.parquet"] and len(sources) == 1 and not isinstance(sources[0], str)

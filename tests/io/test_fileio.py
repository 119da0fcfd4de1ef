"""FileIO: local paths and file: URIs, create-exclusive writes, path-map resolution, fsspec dispatch."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from gpu_engine.errors import UnsupportedFeature
from gpu_engine.io import fileio
from gpu_engine.io.fileio import DefaultFileIO, FileIO, FsspecFileIO, LocalFileIO, load_file_io, local_path
from gpu_engine.io.paths import PathMap


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("/tmp/x/a.json", "/tmp/x/a.json"),
        ("rel/a.json", "rel/a.json"),
        ("file:/tmp/x/a.json", "/tmp/x/a.json"),
        ("file:///tmp/x/a.json", "/tmp/x/a.json"),
        ("file://localhost/tmp/x/a.json", "/tmp/x/a.json"),
    ],
)
def test_local_path(raw: str, expected: str) -> None:
    assert local_path(raw) == expected


def test_local_path_rejects_remote_host_and_scheme() -> None:
    with pytest.raises(UnsupportedFeature, match="host 'data'"):
        local_path("file://data/persistent/t/metadata/v1.metadata.json")
    with pytest.raises(UnsupportedFeature, match="'s3'"):
        local_path("s3://bucket/t")


@pytest.mark.parametrize("spelling", ["plain", "file:", "file://"])
def test_roundtrip_in_every_spelling(tmp_path: Path, spelling: str) -> None:
    io = load_file_io()
    base = {"plain": str(tmp_path), "file:": f"file:{tmp_path}", "file://": f"file://{tmp_path}"}[spelling]
    path = base + "/sub/dir/a.bin"
    assert not io.exists(path)
    io.write_bytes(path, b"hello")
    assert io.exists(path) and io.read_bytes(path) == b"hello"
    with io.open_input(path) as f:
        assert f.read() == b"hello"
    assert io.is_dir(base + "/sub/dir") and not io.is_dir(path)
    assert io.list_dir(base + "/sub/dir") == [base + "/sub/dir/a.bin"]
    io.delete(path)
    assert not io.exists(path)
    io.delete(path, missing_ok=True)
    with pytest.raises(FileNotFoundError):
        io.delete(path)


def test_write_bytes_never_overwrites(tmp_path: Path) -> None:
    io = LocalFileIO()
    path = str(tmp_path / "v1.metadata.json")
    io.write_bytes(path, b"first")
    with pytest.raises(FileExistsError, match="never overwritten"):
        io.write_bytes(path, b"second")
    assert io.read_bytes(path) == b"first"
    assert [p.name for p in tmp_path.iterdir()] == ["v1.metadata.json"]  # no temporary file left behind


def test_write_bytes_exactly_one_of_racing_writers_wins(tmp_path: Path) -> None:
    io = LocalFileIO()
    path = str(tmp_path / "v2.metadata.json")
    won: list[int] = []
    barrier = threading.Barrier(8)

    def writer(i: int) -> None:
        barrier.wait()
        try:
            io.write_bytes(path, str(i).encode() * 1000)
            won.append(i)
        except FileExistsError:
            pass

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1
    assert io.read_bytes(path) == str(won[0]).encode() * 1000
    assert sorted(os.listdir(tmp_path)) == ["v2.metadata.json"]


def test_write_bytes_without_hard_links_falls_back_to_exclusive_create(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_link(src: str, dst: str) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_link)
    io = LocalFileIO()
    path = str(tmp_path / "a.json")
    io.write_bytes(path, b"x")
    assert io.read_bytes(path) == b"x"
    with pytest.raises(FileExistsError):
        io.write_bytes(path, b"y")
    assert sorted(os.listdir(tmp_path)) == ["a.json"]


def test_replace_bytes_overwrites_atomically(tmp_path: Path) -> None:
    io = LocalFileIO()
    hint = str(tmp_path / "metadata" / "version-hint.text")
    io.replace_bytes(hint, b"1")
    io.replace_bytes(hint, b"2")
    assert io.read_bytes(hint) == b"2"
    assert os.listdir(tmp_path / "metadata") == ["version-hint.text"]


def test_missing_file_error_names_the_path(tmp_path: Path) -> None:
    io = load_file_io()
    missing = str(tmp_path / "nope.json")
    with pytest.raises(FileNotFoundError, match=r"nope\.json"):
        io.read_bytes(missing)
    with pytest.raises(FileNotFoundError, match="nope"):
        io.list_dir(str(tmp_path / "nope"))


def test_resolve_applies_the_path_map_once() -> None:
    io = load_file_io(path_map={"hdfs://nn:8020/wh/t": "/data/t"})
    assert io.resolve("hdfs://nn:8020/wh/t/data/a.parquet") == "/data/t/data/a.parquet"
    assert io.resolve("file:/wh/t/metadata/v1.metadata.json") == "/data/t/metadata/v1.metadata.json"
    assert io.resolve("/elsewhere/a.parquet") == "/elsewhere/a.parquet"
    moved = io.with_path_map(PathMap.of({"/elsewhere": "/here"}))
    assert moved.resolve("/elsewhere/a.parquet") == "/here/a.parquet"
    assert io.resolve("/elsewhere/a.parquet") == "/elsewhere/a.parquet"  # the original is unchanged


def test_implementations_satisfy_the_protocol() -> None:
    for io in (LocalFileIO(), FsspecFileIO(), DefaultFileIO()):
        assert isinstance(io, FileIO)


def test_other_schemes_go_through_fsspec(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    io = load_file_io()
    path = f"memory://gpu-engine-test/{tmp_path.name}/a.json"
    io.write_bytes(path, b"{}")
    assert io.exists(path) and io.read_bytes(path) == b"{}"
    with pytest.raises(FileExistsError):
        io.write_bytes(path, b"[]")
    assert io.list_dir(f"memory://gpu-engine-test/{tmp_path.name}") == [path]
    io.delete(path)
    assert not io.exists(path)


def test_scheme_without_fsspec_names_scheme_and_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fileio, "optional", lambda name: None)
    with pytest.raises(UnsupportedFeature, match=r"scheme 's3' needs the fsspec package and s3fs"):
        load_file_io().read_bytes("s3://bucket/wh/t/metadata/v1.metadata.json")


def test_scheme_without_its_fsspec_implementation_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    fsspec = pytest.importorskip("fsspec")

    def missing_implementation(protocol: str, **options: Any) -> Any:
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec, "filesystem", missing_implementation)
    with pytest.raises(UnsupportedFeature, match=r"fsspec scheme 's3' is unavailable.*pip install s3fs"):
        load_file_io().exists("s3://bucket/wh/t")

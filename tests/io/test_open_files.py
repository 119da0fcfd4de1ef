"""At most ``limit`` files of a write open at once: the others are reopened for appending when written,
and their bytes come out exactly as if every file had stayed open."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from gpu_engine.io.open_files import OpenFiles, default_limit


def test_files_beyond_the_limit_are_closed_and_reopened_for_appending(tmp_path: Path) -> None:
    files = OpenFiles(limit=3)
    slots = [files.create(str(tmp_path / f"f{i}")) for i in range(10)]
    expected = [bytearray() for _ in slots]
    rng = random.Random(1)
    for _ in range(500):
        i = rng.randrange(len(slots))
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 20)))
        assert slots[i].write(data) == len(data)
        expected[i] += data
        assert len(files.open) <= 3 and sum(s.handle is not None for s in slots) <= 3
    for i, slot in enumerate(slots):
        slot.close_synced() if i % 2 else slot.close()
        assert (tmp_path / f"f{i}").read_bytes() == expected[i]
    assert not files.open
    with pytest.raises(ValueError, match="write to a closed file"):
        slots[0].write(b"x")


def test_an_existing_file_is_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "taken").write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        OpenFiles().create(str(tmp_path / "taken"))
    assert (tmp_path / "taken").read_bytes() == b"keep"


def test_threads_writing_never_lose_their_file(tmp_path: Path) -> None:
    """A file being written by one thread is never closed under it by another's write."""
    files = OpenFiles(limit=2)
    slots = [files.create(str(tmp_path / f"t{i}")) for i in range(8)]

    def run(i: int) -> None:
        for k in range(300):
            slots[i].write(f"{i}:{k};".encode())

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, slot in enumerate(slots):
        slot.close_synced()
        assert (tmp_path / f"t{i}").read_text() == "".join(f"{i}:{k};" for k in range(300))


def test_the_default_limit_leaves_most_descriptors_free() -> None:
    assert 16 <= default_limit() <= 256


_MANY_PARTITIONS = textwrap.dedent(
    """
    import resource, sys
    import pyarrow as pa
    from gpu_engine.iceberg import types as it
    from gpu_engine.iceberg.partitioning import PartitionField, PartitionSpec
    from gpu_engine.iceberg.schema import Schema
    from gpu_engine.io.fileio import LocalFileIO
    from gpu_engine.io.parquet_write import write_data_files

    resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    schema = Schema((it.NestedField(1, "id", it.LONG, False), it.NestedField(2, "p", it.LONG, False)))
    spec = PartitionSpec(0, (PartitionField((2,), 1000, "p", "identity"),))
    n = 3000
    ids = pa.array(range(n), pa.int64())
    data = pa.table({"id": ids, "p": pa.array([i % 600 for i in range(n)], pa.int64())})
    files = write_data_files(LocalFileIO(), sys.argv[1], schema, spec, data)
    print(len(files), sum(f.record_count for f in files))
    """
)


def test_a_write_into_more_partitions_than_file_descriptors(tmp_path: Path) -> None:
    """600 partitions written under a limit of 128 file descriptors (every file was held open to the
    end: "Too many open files")."""
    out = subprocess.run(
        [sys.executable, "-c", _MANY_PARTITIONS, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["600", "3000"]

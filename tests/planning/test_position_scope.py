"""A position delete file without a referenced data file is attached only to the data files of its
partition whose paths lie within its ``file_path`` bounds (:mod:`gpu_engine.planning.position_scope`)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_engine as ge
from gpu_engine.commit.update import SnapshotUpdate
from gpu_engine.iceberg.content_file import ContentFile
from gpu_engine.io.fileio import local_path
from gpu_engine.io.paths import PathMap
from gpu_engine.io.position_deletes import PATH_FIELD_ID
from gpu_engine.planning import scan as planning_scan
from gpu_engine.planning.position_scope import UNSCOPED, PathScope, path_head, path_scopes
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.tasks import EQUALITY_DELETES, POSITION_DELETES

from ..commit._support import sql_catalog


def _entries(rows: list[tuple[int, bytes | None, bytes | None]]) -> pa.Table:
    maps = pa.map_(pa.int32(), pa.binary())

    def bounds(values: list[bytes | None]) -> pa.Array:
        return pa.array([[] if v is None else [(PATH_FIELD_ID, v)] for v in values], maps)

    return pa.table(
        {
            "content": pa.array([c for c, _, _ in rows], pa.int32()),
            "lower_bounds": bounds([lo for _, lo, _ in rows]),
            "upper_bounds": bounds([hi for _, _, hi in rows]),
        }
    )


def test_scopes_from_file_path_bounds() -> None:
    entries = _entries(
        [
            (POSITION_DELETES, b"s3://b/t/data/a.parquet", b"s3://b/t/data/a.parquet"),  # one file
            (POSITION_DELETES, b"s3://b/t/data/b", b"s3://b/t/data/d"),  # a range
            (POSITION_DELETES, None, b"s3://b/t/data/d"),  # half known
            (POSITION_DELETES, b"s3://b/t/d\xff", b"s3://b/t/data/e"),  # a lower bound that is not UTF-8
            (EQUALITY_DELETES, b"x", b"y"),
        ]
    )
    scopes = path_scopes(entries, PathMap())
    assert scopes[0] == PathScope(target="s3://b/t/data/a.parquet")
    assert scopes[1] == PathScope(lower="s3://b/t/data/b", upper="s3://b/t/data/d")
    assert scopes[2] == PathScope(upper="s3://b/t/data/d")
    assert scopes[3] == PathScope(upper="s3://b/t/data/e")
    assert scopes[4] == UNSCOPED
    assert scopes[1].may_hold("s3://b/t/data/c.parquet") and not scopes[1].may_hold("s3://b/t/data/e.parquet")
    assert not scopes[1].may_hold("s3://b/t/data/a.parquet") and scopes[1].may_hold("s3://b/t/data/b")
    assert scopes[2].may_hold("s3://b/a") and UNSCOPED.may_hold("/anything")
    # one bound unknown: paths past the other may be other spellings of the data file's
    assert scopes[2].may_hold("s3://b/z")


def test_bounds_compare_as_written_and_only_rule_out_paths_spelled_alike() -> None:
    """Normalising does not keep the order of paths (``file://0`` -> ``/0``), and a delete file may spell
    a data file's path another way (reads match them): a file outside the bounds is ruled out only when
    both bounds share its scheme and authority."""
    a, b = "file:///wh/t/data/a.parquet", "file:///wh/t/data/b.parquet"
    truncated = PathScope(lower="file:///", upper="file://0")  # truncate(8) of a file:/// path
    assert truncated.may_hold(a) and truncated.may_hold(b)
    mixed = PathScope(lower="file:///wh/t/data/b.parquet", upper="file:/wh/t/data/a.parquet")
    assert mixed.may_hold(a)  # bounds of two spellings: nothing ruled out
    alike = PathScope(lower=b, upper=b + "x")
    assert not alike.may_hold(a) and not alike.may_hold("file:///wh/t/data/c.parquet")
    bare = PathScope(lower="/wh/t/data/b.parquet", upper="/wh/t/data/b.parquet0")
    assert bare.may_hold(a) and not bare.may_hold("/wh/t/data/a.parquet")  # a bare spelling of a may be there
    other_authority = PathScope(lower="file:/wh/t/data/b.parquet", upper="file:/wh/t/data/c.parquet")
    assert other_authority.may_hold(a)


@pytest.mark.parametrize(
    "path",
    ["file:///wh/t/data/a.parquet", "/wh/t/data/a.parquet", "file:/wh/t/data/z", "s3://b/t/x", "/x"],
)
def test_a_head_given_by_the_caller_decides_as_the_one_computed(path: str) -> None:
    """The index computes a data file's head once for all the delete files it checks."""
    scopes = [
        PathScope(lower="file:///wh/t/data/b.parquet", upper="file:///wh/t/data/c"),
        PathScope(lower="/wh/t/data/b.parquet", upper="/wh/t/data/b.parquet0"),
        PathScope(lower="file:/wh/t/data/b.parquet", upper="file:/wh/t/data/c.parquet"),
        PathScope(lower="s3://b/t/y", upper="s3://b/t/z"),
    ]
    for scope in scopes:
        assert scope.may_hold(path, path_head(path)) == scope.may_hold(path)


def test_bounds_outside_a_relocated_prefix_rule_nothing_out() -> None:
    relocated = PathMap.of({"s3://b/t": "/local/t"})
    scopes = path_scopes(
        _entries(
            [
                (POSITION_DELETES, b"s3://b/t/data/b", b"s3://b/t/data/d"),
                (POSITION_DELETES, b"s3://b/", b"s3://c"),
            ]
        ),
        relocated,
    )
    assert scopes[0] == PathScope(lower="/local/t/data/b", upper="/local/t/data/d")
    assert scopes[1] == UNSCOPED  # truncated inside the recorded prefix: not comparable


def test_a_partition_delete_file_skips_data_files_outside_its_path_range(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2"})
    for start in (0, 100, 200):
        tbl.append(pa.table({"id": pa.array(range(start, start + 100), pa.int64())}))
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    by_path = sorted(t.file.path for t in plan.tasks)
    low = {p: min(pq.read_table(local_path(p)).column("id").to_pylist()) for p in by_path}
    outer = by_path[-1]  # the greatest path: outside the range of the other two
    wanted = [low[p] + 1 for p in by_path[:2]]
    tbl.delete(f"id in ({wanted[0]}, {wanted[1]})")
    after = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    assert after.summary.delete_attachments_skipped == 1
    attached = {t.file.path: [d.kind for d in t.deletes] for t in after.tasks}
    assert attached[outer] == []
    assert all(attached[p] == ["position"] for p in by_path[:2])
    got = sorted(tbl.scan().to_arrow().column("id").to_pylist())
    assert got == [i for i in range(300) if i not in wanted]


@settings(max_examples=15)
@given(data=st.data())
def test_pruned_scan_equals_unpruned(data: st.DataObject) -> None:
    """Random deletes over random files of two partitions: the scan that skips files outside each delete
    file's path range returns the rows of the scan that attaches every position delete partition-wide."""
    files = data.draw(st.integers(2, 5), label="files")
    with tempfile.TemporaryDirectory() as tmp:
        schema = pa.schema([("id", pa.int64()), ("p", pa.int32())])
        tbl = sql_catalog(Path(tmp)).create_table("db.t", schema, partition_spec=["p"])
        for f in range(files):
            ids = pa.array(range(f * 10, f * 10 + 10), pa.int64())
            tbl.append(pa.table({"id": ids, "p": pa.array([i % 2 for i in range(10)], pa.int32())}))
        doomed = data.draw(st.lists(st.integers(0, files * 10 - 1), min_size=1, max_size=8), label="ids")
        tbl.delete(f"id in ({', '.join(map(str, doomed))})")
        pruned = tbl.scan(backend="cpu").to_arrow()
        real = getattr(planning_scan, "path_scopes")  # noqa: B009 (not re-exported: typed access fails)
        setattr(planning_scan, "path_scopes", lambda table, path_map: [UNSCOPED] * len(table))  # noqa: B010
        try:
            unpruned = tbl.scan(backend="cpu").to_arrow()
        finally:
            setattr(planning_scan, "path_scopes", real)  # noqa: B010
        assert sorted(pruned.column("id").to_pylist()) == sorted(unpruned.column("id").to_pylist())
        assert sorted(pruned.column("id").to_pylist()) == [i for i in range(files * 10) if i not in doomed]


def test_a_delete_file_with_truncated_or_mixed_spelling_bounds_applies(tmp_path: Path) -> None:
    """Bounds valid for their paths (truncated; two spellings of the paths) never hide their deletes."""
    cat = ge.load_catalog("c", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/wh")
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([("id", pa.int64())]))  # paths written as file:///...
    for start in (0, 10):
        tbl.append(pa.table({"id": pa.array(range(start, start + 10), pa.int64())}))
    rows = tbl.scan(columns=["id", "_file", "_pos"]).to_arrow().to_pylist()
    first, second = sorted({r["_file"] for r in rows})
    assert first.startswith("file:///")
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), False, {b"PARQUET:field_id": str(PATH_FIELD_ID).encode()}),
            pa.field("pos", pa.int64(), False, {b"PARQUET:field_id": b"2147483545"}),
        ]
    )
    doomed: set[int] = set()
    for i, (paths, lower, upper) in enumerate(
        [
            ([first, second], first[:8], first[:7] + chr(ord(first[7]) + 1)),  # truncate(8)
            (["file:" + first[7:], second], second, "file:" + first[7:]),  # file:/x and file:///y
        ]
    ):
        path = tmp_path / f"deletes-{i}.parquet"
        positions = [2 * i + 1, 2 * i + 2]
        pq.write_table(pa.table({"file_path": paths, "pos": positions}, schema=schema), path)
        doomed |= {
            r["id"]
            for r in rows
            if (r["_file"], r["_pos"]) in {(first, positions[0]), (second, positions[1])}
        }
        deletes = ContentFile(
            str(path), "PARQUET", 0, (), 2, path.stat().st_size, content=POSITION_DELETES,
            lower_bounds={PATH_FIELD_ID: lower.encode()}, upper_bounds={PATH_FIELD_ID: upper.encode()},
        )  # fmt: skip
        tbl.commit(SnapshotUpdate("delete", added=[deletes]))
    assert len(doomed) == 4
    assert sorted(tbl.scan().to_arrow().column("id").to_pylist()) == sorted(set(range(20)) - doomed)

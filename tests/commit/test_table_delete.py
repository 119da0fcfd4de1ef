"""Table.delete (merge-on-read: position delete files in v2, DVs in v3) and Table.delete_rows (equality
deletes), read back by our scan, PyIceberg's StaticTable (not for equality deletes) and DuckDB against
rows computed from the appended Arrow data with pyarrow; several DVs of one Puffin file committed and one
of them replaced; a concurrent delete between planning and commit."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gpu_engine as ge
from gpu_engine.commit import SnapshotUpdate
from gpu_engine.commit.delete import DeleteResult
from gpu_engine.commit.entries import live_entries, snapshot_manifests
from gpu_engine.commit.update import ValidationError as ReexportedValidationError
from gpu_engine.errors import DataFileError, ValidationError
from gpu_engine.io.dv_write import DeletionVector, write_deletion_vectors
from gpu_engine.table import Table
from tests.commit._support import (
    SCHEMA,
    assert_all_readers,
    once_at,
    ours,
    pyiceberg_static,
    referenced_files,
    rows,
    sql_catalog,
    table_files,
)
from tests.execute.oracles import assert_same_rows


def new_table(tmp_path: Path, version: int, *, partitioned: bool, name: str = "t") -> Table:
    cat = sql_catalog(tmp_path)
    return cat.create_table(
        f"db.{name}",
        schema=SCHEMA,
        partition_spec=["region"] if partitioned else [],
        properties={"format-version": str(version)},
    )


def without(data: pa.Table, filter: pc.Expression) -> pa.Table:
    """``data`` less the rows where ``filter`` is true (NULL keeps the row, as in SQL)."""
    return data.filter(~filter | filter.is_null())


def live_deletes(tbl: Table) -> list[tuple[str, str | None, int | None]]:
    """(format, referenced data file, content offset) of the live delete entries of the current snapshot."""
    snap = tbl.metadata.current_snapshot()
    assert snap is not None
    out = []
    for m in snapshot_manifests(tbl.io, snap):
        if m.content == 1:
            spec = tbl.metadata.spec_by_id(m.partition_spec_id or 0)
            out += [
                (e.file.file_format, e.file.referenced_data_file, e.file.content_offset)
                for e in live_entries(tbl.io, m, spec)
            ]
    return out


def test_validation_error_moved_and_reexported() -> None:
    assert ReexportedValidationError is ValidationError


# -- several DVs in one Puffin file ------------------------------------------------------------------------


def test_one_dv_of_a_shared_puffin_file_is_replaced(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, 3, partitioned=False)
    a, b = rows(0, 10), rows(100, 10)
    (fa,) = tbl.append(a).files
    (fb,) = tbl.append(b).files
    dvs = write_deletion_vectors(
        tbl.io, tbl.location, [DeletionVector(fa.path, [0, 1], (), 0), DeletionVector(fb.path, [2], (), 0)]
    )
    assert len({d.path for d in dvs}) == 1 and len(dvs) == 2  # one Puffin file, two DVs
    tbl.commit(SnapshotUpdate("delete", added=dvs))
    ids = pa.array([0, 1, 102], pa.int64())
    expected = without(pa.concat_tables([a, b]), pc.is_in(pc.field("id"), ids))
    assert_same_rows(ours(tbl), expected, context="ours, two DVs")
    assert_same_rows(pyiceberg_static(tbl), expected, context="pyiceberg, two DVs")

    old_a = next(d for d in dvs if d.referenced_data_file == fa.path)
    with pytest.raises(ValidationError, match="not live"):  # a bare Puffin path names no entry
        tbl.commit(SnapshotUpdate("delete", removed=[old_a.path]))
    (new_a,) = write_deletion_vectors(tbl.io, tbl.location, [DeletionVector(fa.path, [0, 1, 5], (), 0)])
    result = tbl.commit(SnapshotUpdate("delete", added=[new_a], removed=[(old_a.path, old_a.content_offset)]))
    assert result.summary["removed-dvs"] == "1" and result.summary["added-dvs"] == "1"
    expected = without(pa.concat_tables([a, b]), pc.is_in(pc.field("id"), pa.array([0, 1, 5, 102])))
    assert_same_rows(ours(tbl), expected, context="ours, one DV replaced")
    assert_same_rows(pyiceberg_static(tbl), expected, context="pyiceberg, one DV replaced")
    assert Counter(ref for _, ref, _ in live_deletes(tbl)) == {fa.path: 1, fb.path: 1}


# -- Table.delete -----------------------------------------------------------------------------------------

FILTERS: list[tuple[str, pc.Expression]] = [
    ("score > 0.5", pc.field("score") > 0.5),
    ("region = 'eu'", pc.field("region") == "eu"),
    ("id >= 100 and id < 130", (pc.field("id") >= 100) & (pc.field("id") < 130)),
    (
        "id >= 120 and id < 140 or s = 'a'",
        ((pc.field("id") >= 120) & (pc.field("id") < 140)) | (pc.field("s") == "a"),
    ),
    ("id < 60", pc.field("id") < 60),  # every remaining row of the first append: its files are removed
]


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
@pytest.mark.parametrize("version", [2, 3])
def test_delete_matches_pyarrow(tmp_path: Path, version: int, partitioned: bool) -> None:
    tbl = new_table(tmp_path, version, partitioned=partitioned)
    expected = pa.concat_tables([rows(0, 60), rows(100, 60, seed=1)])
    tbl.append(rows(0, 60))
    tbl.append(rows(100, 60, seed=1))
    first_files = {t.file.path for t in tbl.scan().plan().tasks}
    for sql, arrow in FILTERS:
        before = len(tbl.metadata.snapshots)
        want = expected.num_rows - without(expected, arrow).num_rows
        result = tbl.delete(sql, backend="cpu")
        expected = without(expected, arrow)
        assert result.deleted_rows == want, sql
        assert len(tbl.metadata.snapshots) == before + 1
        assert result.commit is not None and result.commit.summary["operation"] == "delete"
        assert_all_readers(tbl, expected)
        if version == 3:
            refs = Counter(ref for fmt, ref, _ in live_deletes(tbl) if fmt == "PUFFIN")
            assert refs and max(refs.values()) == 1, refs  # at most one live DV per data file
        else:
            assert all(fmt == "PARQUET" for fmt, _, _ in live_deletes(tbl))
    assert result.removed_data_files  # "id < 60" emptied the first append's files
    live = {t.file.path for t in tbl.scan().plan().tasks}
    assert live and len(live) < len(first_files)


def test_delete_nothing_matches(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, 2, partitioned=True)
    tbl.append(rows(0, 20))
    before = tbl.metadata_location
    result = tbl.delete("id > 1000")
    assert result.deleted_rows == 0 and result.commit is None and result.snapshot_id is None
    assert tbl.refresh().metadata_location == before


@pytest.mark.parametrize("version", [2, 3])
def test_a_concurrent_delete_on_the_same_file_stacks_on_v2_and_fails_on_v3(
    tmp_path: Path, version: int
) -> None:
    """v2 position delete files stack (both deletes apply, as Java's merge-on-read DELETE allows); on v3 the
    file would get two DVs: the later delete fails validation and removes what it wrote."""
    tbl = new_table(tmp_path, version, partitioned=False)
    data = rows(0, 40)
    tbl.append(data)
    other = sql_catalog(tmp_path).load_table("db.t")
    calls: list[DeleteResult] = []

    def hook(stage: str) -> None:
        if stage == "manifest-list" and not calls:
            calls.append(other.delete("id = 30", backend="cpu"))

    if version == 2:
        tbl.delete("id < 5", backend="cpu", faults=hook)
        assert_all_readers(tbl.refresh(), without(without(data, pc.field("id") == 30), pc.field("id") < 5))
        return
    with pytest.raises(ValidationError, match="added deletes"):
        tbl.delete("id < 5", backend="cpu", faults=hook)
    assert calls and calls[0].deleted_rows == 1
    tbl.refresh()
    assert_all_readers(tbl, without(data, pc.field("id") == 30))
    written = {p for p in table_files(tbl) if not p.endswith(".metadata.json")}
    assert written <= referenced_files(tbl), written - referenced_files(tbl)  # our delete files are gone


# -- Table.delete_rows -------------------------------------------------------------------------------------


def test_delete_rows_equality_deletes(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, 2, partitioned=False)
    data = rows(0, 80)
    tbl.append(data)
    result = tbl.delete_rows(pa.table({"s": pa.array(["a", None], pa.string())}), on=["s"])
    assert result.commit is not None and result.commit.summary["operation"] == "delete"
    assert result.commit.summary["added-equality-delete-files"] == "1"
    expected = data.filter(pc.field("s") != "a")  # NULL s deleted too
    assert_all_readers(tbl, expected, pyiceberg=False)

    keys = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "region": pa.array(["eu", "us", None])})
    pairs = set(zip(expected.column("id").to_pylist(), expected.column("region").to_pylist(), strict=True))
    tbl.delete_rows(keys, on=["id", "region"])
    gone = set(zip(keys.column("id").to_pylist(), keys.column("region").to_pylist(), strict=True)) & pairs
    mask = [
        (i, r) not in gone
        for i, r in zip(expected.column("id").to_pylist(), expected.column("region").to_pylist(), strict=True)
    ]
    expected = expected.filter(pa.array(mask))
    assert_all_readers(tbl, expected, pyiceberg=False)

    later = rows(0, 80, seed=3)  # the same keys again, appended after the deletes: they stay
    tbl.append(later)
    assert_all_readers(tbl, pa.concat_tables([expected, later]), pyiceberg=False)


def test_delete_on_an_empty_table_matches_nothing(tmp_path: Path) -> None:
    catalog = ge.load_catalog("empty", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    tbl = catalog.create_table(
        "db.t", schema=pa.schema([("id", pa.int64())]), properties={"format-version": "2"}
    )
    result = tbl.delete("id < 10")
    assert result.deleted_rows == 0 and result.commit is None
    assert tbl.metadata.current_snapshot() is None


def test_delete_rows_keys_default_to_the_identifier_fields(tmp_path: Path) -> None:
    tbl = new_table(tmp_path, 2, partitioned=False)
    data = rows(0, 20)
    tbl.append(data)
    keys = pa.table({"id": pa.array([1, 5], pa.int64())})
    with pytest.raises(ValueError, match="has no identifier fields; name the key columns"):
        tbl.delete_rows(keys)
    with tbl.update_schema() as u:
        u.set_identifier_fields("id")
    result = tbl.delete_rows(keys)
    assert [f.equality_ids for f in result.added] == [(tbl.metadata.schema.find_field("id").field_id,)]
    assert_all_readers(tbl, data.filter(~pc.field("id").isin([1, 5])), pyiceberg=False)


@pytest.mark.parametrize(
    ("version", "mode"), [(2, "merge-on-read"), (3, "merge-on-read"), (3, "copy-on-write")]
)
def test_deleting_whole_partitions_reads_no_data_file(tmp_path: Path, version: int, mode: str) -> None:
    """Files whose partition decides the filter are removed from metadata alone: the ``eu`` files are made
    unreadable and the delete still succeeds (a filter the partition does not decide must read them)."""
    tbl = new_table(tmp_path, version, partitioned=True)
    tbl.update_properties().set("write.delete.mode", mode).commit()
    data = pa.concat_tables([rows(0, 40), rows(40, 40, seed=1)])
    tbl.append(data.slice(0, 40))
    tbl.append(data.slice(40))
    tbl.delete("id < 6")  # a DV / position deletes in every partition: counted, not read
    eu = [t.file.path for t in tbl.scan().plan().tasks if t.file.partition == ("eu",)]
    assert len(eu) == 2
    for path in eu:
        Path(path).write_bytes(b"not parquet any more")
    with pytest.raises(DataFileError, match=r"region=eu/.*not a readable Parquet file"):
        tbl.delete("region = 'eu' and id > 45")  # the residual needs the rows
    result = tbl.delete("region = 'eu'")
    live = without(data, pc.field("id") < 6)
    assert result.deleted_rows == pc.sum(pc.equal(live["region"], "eu").cast(pa.int64())).as_py()
    assert sorted(result.removed_data_files) == sorted(eu) and result.added == ()
    assert_all_readers(tbl, without(live, pc.field("region") == "eu"))


@pytest.mark.parametrize("op", ["delete_rows", "upsert"])
def test_equality_deletes_fail_when_a_new_spec_gets_files_meanwhile(tmp_path: Path, op: str) -> None:
    """An equality delete is written in the specs of the live files; if another writer evolves the spec and
    commits files of the new spec before it lands, its keys would not reach their rows: refused. A
    concurrent append of the same spec is fine."""
    tbl = new_table(tmp_path, 2, partitioned=True)
    tbl.append(rows(0, 20))
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    keys = tbl.scan(filter="id in (3, 4)", columns=["id", "region"]).to_arrow()

    def meanwhile(evolve: bool) -> Callable[[str], None]:
        def other_writer() -> None:
            if evolve:
                with other.update_spec() as u:
                    u.add_field("bucket(2, id)")
            other.append(rows(100 + 10 * evolve, 5, seed=4))

        return once_at("manifest", other_writer)

    def run(evolve: bool) -> DeleteResult | object:
        if op == "delete_rows":
            return tbl.delete_rows(keys, on=["id", "region"], faults=meanwhile(evolve))
        return tbl.upsert(rows(500, 2, seed=6), on=["id", "region"], faults=meanwhile(evolve))

    assert run(False) is not None  # a concurrent append of the same spec: retried, lands
    files = table_files(tbl)
    with pytest.raises(ValidationError, match=r"partition spec\(s\) \[1\] were committed after"):
        run(True)
    new = {p for p in table_files(tbl.refresh()) - files if "/data/" in p}
    assert new and new <= referenced_files(tbl)  # only the other writer's files


@pytest.mark.parametrize("op", ["delete_rows", "upsert"])
def test_a_spec_change_meanwhile_without_data_is_no_conflict(tmp_path: Path, op: str) -> None:
    """Another writer makes a new spec the default but writes no data in it: every live data file is
    still of the spec the equality delete was written in, so it commits (it was refused as if data of
    the new spec had been committed; Java's RowDelta sees no conflict)."""
    tbl = new_table(tmp_path, 2, partitioned=True)
    data = rows(0, 20)
    tbl.append(data)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    keys = tbl.scan(filter="id in (3, 4)", columns=["id", "region"]).to_arrow()

    def evolve() -> None:
        with other.update_spec() as u:
            u.add_field("bucket(2, id)")

    if op == "delete_rows":
        tbl.delete_rows(keys, on=["id", "region"], faults=once_at("manifest", evolve))
        expected = data.filter(pc.invert(pc.is_in(data["id"], pa.array([3, 4], pa.int64()))))
    else:
        extra = rows(500, 2, seed=6)
        tbl.upsert(extra, on=["id", "region"], faults=once_at("manifest", evolve))
        expected = pa.concat_tables([data, extra])
    assert tbl.refresh().metadata.default_spec_id == 1
    assert_same_rows(tbl.scan().to_arrow(), expected, context=op)


def test_a_codec_without_levels_ignores_the_level_in_every_writer(tmp_path: Path) -> None:
    """write.parquet.compression-level kept from zstd after the codec became snappy: append, the position
    delete writer and compaction all failed ("Codec 'snappy' doesn't support setting a compression level");
    Java ignores the level for such codecs."""
    props = {
        "format-version": "2",
        "write.parquet.compression-codec": "snappy",
        "write.parquet.compression-level": "3",
    }
    tbl = sql_catalog(tmp_path).create_table("db.c", schema=SCHEMA, properties=props)
    data = rows(0, 40)
    tbl.append(data)
    tbl.append(rows(40, 40, seed=1))
    tbl.delete("id < 5")  # merge-on-read: a Parquet position delete file
    assert {f for f, _, _ in live_deletes(tbl)} == {"PARQUET"}
    tbl.compact(options={"rewrite-all": "true"})
    expected = pa.concat_tables([data, rows(40, 40, seed=1)]).filter(pc.field("id") >= 5)
    assert_same_rows(tbl.scan().to_arrow(), expected, context="snappy with a level")

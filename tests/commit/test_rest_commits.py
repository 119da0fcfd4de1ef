"""Snapshot commits through a REST catalog (the test server of tests/catalog, which applies
``add-snapshot`` and ``set-snapshot-ref`` as Iceberg Java does): appends, deletes and a compaction land
and read back by every reader; a lost race retries; a 503 after the server applied the commit is an
unknown state that deletes nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gpu_engine as ge
from gpu_engine.catalog.rest import RestCatalog
from gpu_engine.errors import CommitStateUnknown, ValidationError
from gpu_engine.table import Table

from ..catalog.rest_server import RestCatalogServer
from ._support import assert_all_readers, assert_same_rows, keyed_rows, referenced_files, rows

PROPS = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestCatalogServer]:
    srv = RestCatalogServer(tmp_path / "server").start()
    yield srv
    srv.stop()
    assert not srv.errors, srv.errors


def _catalog(server: RestCatalogServer, tmp_path: Path) -> RestCatalog:
    cat = ge.load_catalog("rest", uri=server.url, credential="client:secret", warehouse=str(tmp_path / "wh"))
    assert isinstance(cat, RestCatalog)
    return cat


def _partitioned_table(server: RestCatalogServer, tmp_path: Path, version: int) -> tuple[RestCatalog, Table]:
    """A REST catalog with namespace db and table db.t partitioned by region, of ``version``."""
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    properties = {"format-version": str(version), **PROPS}
    return cat, cat.create_table("db.t", rows(0, 0).schema, partition_spec=["region"], properties=properties)


@pytest.mark.parametrize("version", [2, 3])
def test_append_delete_compact_rewrite_manifests_through_rest(
    server: RestCatalogServer, tmp_path: Path, version: int
) -> None:
    cat, tbl = _partitioned_table(server, tmp_path, version)
    expected = pa.concat_tables([rows(0, 30), rows(30, 30, seed=1)])
    tbl.append(rows(0, 30))
    tbl.append(rows(30, 30, seed=1))
    tbl.delete("id < 5")
    expected = expected.filter(pa.compute.greater_equal(expected["id"], 5))
    result = tbl.compact(options={"rewrite-all": "true"}, backend="cpu")
    assert result.commits and not result.failures
    tbl.append(rows(60, 10, seed=2))
    expected = pa.concat_tables([expected, rows(60, 10, seed=2)])
    assert tbl.rewrite_manifests().commit is not None
    reloaded = cat.load_table("db.t")
    assert reloaded.metadata_location == tbl.metadata_location
    assert [s.summary["operation"] for s in reloaded.metadata.snapshots if s.summary] == [
        "append", "append", "delete", "replace", "append", "replace",
    ]  # fmt: skip
    if version == 3:  # the server moved next-row-id past each snapshot's rows, as we assigned them
        for before, after in zip(reloaded.metadata.snapshots, reloaded.metadata.snapshots[1:], strict=False):
            assert before.first_row_id is not None and before.added_rows is not None
            assert after.first_row_id == before.first_row_id + before.added_rows
        last = reloaded.metadata.snapshots[-1]
        assert last.first_row_id is not None and last.added_rows is not None
        assert reloaded.metadata.next_row_id == last.first_row_id + last.added_rows
    assert_all_readers(reloaded, expected)


def test_a_lost_race_retries(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    other = cat.load_table("db.t")
    raced: list[str] = []

    def race(stage: str) -> None:  # another writer lands after this attempt's base was read
        if stage == "swap" and not raced:
            raced.append(stage)
            tbl.append(rows(0, 10))

    result = other.append(rows(10, 10, seed=1), faults=race)  # the server refuses (409), it retries
    assert raced and result.commit.attempts == 2
    assert_all_readers(cat.load_table("db.t"), pa.concat_tables([rows(0, 10), rows(10, 10, seed=1)]))


@pytest.mark.parametrize("version", [2, 3])
def test_a_stale_handle_appends_after_a_commit_to_another_branch(
    server: RestCatalogServer, tmp_path: Path, version: int
) -> None:
    """Main's head did not move, so its assertion holds: the snapshot must still take the sequence number
    and first row id past the other branch's commit (the server refused a stale one: 400, files deleted)."""
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": str(version), **PROPS})
    tbl.append(rows(0, 10))
    stale = cat.load_table("db.t")
    tbl.append(rows(10, 5, seed=1), branch="audit")
    result = stale.append(rows(20, 5, seed=2))
    assert result.commit.attempts == 1
    md = cat.load_table("db.t").metadata
    head = md.snapshot_by_id(md.refs["main"].snapshot_id)
    assert head.sequence_number == md.last_sequence_number == 3
    assert_all_readers(cat.load_table("db.t"), pa.concat_tables([rows(0, 10), rows(20, 5, seed=2)]))


def test_expire_on_a_stale_handle_keeps_a_newer_tag(server: RestCatalogServer, tmp_path: Path) -> None:
    """The expiration is planned on the table as it is: a tag made after the handle was loaded keeps its
    snapshot (the server, as Java's, drops a ref whose snapshot a commit removes: the tag and its files
    were gone)."""
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    for i in range(3):
        tbl.append(rows(i * 10, 10, seed=i))
    first = tbl.metadata.snapshots[0].snapshot_id
    stale = cat.load_table("db.t")
    tbl.manage_snapshots().create_tag("keep", first).commit()
    result = stale.expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1)
    md = cat.load_table("db.t").metadata
    assert md.refs["keep"].snapshot_id == first and first not in result.expired_snapshot_ids
    assert all(Path(p.removeprefix("file://")).exists() for p in referenced_files(cat.load_table("db.t")))
    assert_same_rows(cat.load_table("db.t").scan(ref="keep").to_arrow(), rows(0, 10), context="the tag")


def test_503_after_apply_is_unknown_and_keeps_files(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    tbl.append(rows(0, 10))
    server.faults.append("commit-503")
    with pytest.raises(CommitStateUnknown, match="503"):
        tbl.append(rows(10, 10, seed=1))
    landed = cat.load_table("db.t")  # the server applied it: every file it references is still there
    assert all(Path(p.removeprefix("file://")).exists() for p in referenced_files(landed))
    assert_all_readers(landed, pa.concat_tables([rows(0, 10), rows(10, 10, seed=1)]))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_schema_and_spec_updates_through_rest(
    server: RestCatalogServer, tmp_path: Path, version: int
) -> None:
    """add-schema / set-current-schema and add-spec / set-default-spec with their requirements: the server's
    metadata is adopted, rows written before and after read back, and a stale update fails validation."""
    cat, tbl = _partitioned_table(server, tmp_path, version)
    stale = cat.load_table("db.t")
    tbl.append(rows(0, 20))
    with tbl.update_schema() as u:
        u.add_column("note", "string")
        u.rename_column("s", "label")
    with tbl.update_spec() as u:
        u.add_field("bucket(4, id)")
    reloaded = cat.load_table("db.t")
    assert reloaded.metadata_location == tbl.metadata_location
    md = reloaded.metadata
    assert [f.name for f in md.schema.fields][-1] == "note" and md.schema.find_field("label").field_id == 5
    assert md.last_column_id == 9 and md.current_schema_id == 1
    assert [f.name for f in md.spec.fields] == ["region", "id_bucket_4"] and md.default_spec_id == 1
    new = rows(20, 20, seed=1).rename_columns([c if c != "s" else "label" for c in rows(0, 0).column_names])
    new = new.append_column("note", pa.array(["n"] * 20))
    reloaded.append(new)
    first = rows(0, 20).rename_columns(new.column_names[:-1]).append_column("note", pa.nulls(20, pa.string()))
    assert_all_readers(cat.load_table("db.t"), pa.concat_tables([first, new]))
    with pytest.raises(ValidationError, match="schema changed"):
        stale.update_schema().add_column("other", "long").commit()  # 409, then the refreshed base differs
    with tbl.update_schema() as u:  # back to an equal earlier schema: set-current-schema with its id
        u.delete_column("note")
        u.rename_column("label", "s")
    assert cat.load_table("db.t").metadata.current_schema_id == 0
    with tbl.update_schema() as u:  # identifier fields and column order travel in add-schema
        u.set_identifier_fields("id")
        u.move_first("region")
    schema = cat.load_table("db.t").metadata.schema
    assert schema.identifier_field_ids == (1,) and schema.fields[0].name == "region"
    assert tbl.replace_sort_order("id DESC").order_id == 1  # add-sort-order / set-default-sort-order
    assert tbl.replace_sort_order([]).order_id == 0
    assert tbl.replace_sort_order("id DESC").order_id == 1
    md = cat.load_table("db.t").metadata
    assert md.default_sort_order_id == 1 and len(md.sort_orders) == 2


def test_column_properties_follow_renames_and_deletes_through_rest(
    server: RestCatalogServer, tmp_path: Path
) -> None:
    """As Iceberg Java's schema updates: a renamed column keeps its metrics mode and bloom filter setting
    under its new name; a deleted column's go (remove-properties)."""
    cat, tbl = _partitioned_table(server, tmp_path, 2)
    metrics, bloom = "write.metadata.metrics.column.", "write.parquet.bloom-filter-enabled.column."
    with tbl.update_properties() as p:
        p.set(metrics + "s", "none")
        p.set(bloom + "s", "true")
        p.set(metrics + "id", "full")
    with tbl.update_schema() as u:
        u.rename_column("s", "label")
        u.delete_column("id")
    props = cat.load_table("db.t").metadata.properties
    assert {k: v for k, v in props.items() if k.startswith((metrics, bloom))} == {
        metrics + "label": "none",
        bloom + "label": "true",
    }


def test_a_v1_table_without_a_uuid_commits_without_asserting_one(
    server: RestCatalogServer, tmp_path: Path
) -> None:
    """The spec's assert-table-uuid holds a string (servers refuse a null): a table without a uuid (v1
    tables may lack one) is committed without it."""
    cat, tbl = _partitioned_table(server, tmp_path, 1)
    raw = json.loads(Path(tbl.metadata_location).read_text())
    del raw["table-uuid"]
    bare = tmp_path / "bare.metadata.json"
    bare.write_text(json.dumps(raw))
    cat.register_table("db.bare", str(bare))
    cat.load_table("db.bare").append(rows(0, 5))
    with cat.load_table("db.bare").update_schema() as u:
        u.add_column("extra", "long")
    assert cat.load_table("db.bare").scan().to_arrow().num_rows == 5


def test_schema_update_503_is_unknown(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    server.faults.append("commit-503")
    with pytest.raises(CommitStateUnknown, match="503"):
        tbl.update_schema().add_column("x", "long").commit()
    assert [f.name for f in cat.load_table("db.t").metadata.schema.fields][-1] == "x"  # it had landed


def test_expire_snapshots_through_rest(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    for i in range(4):
        tbl.append(rows(i * 10, 10, seed=i))
    tbl.delete("id < 5")
    first = tbl.metadata.snapshots[0]
    stale = cat.load_table("db.t")
    tbl.append(rows(40, 10, seed=9))
    now = int(time.time() * 1000) + 1
    result = stale.expire_snapshots(older_than=now, retain_last=2)  # planned on the refreshed table
    landed = cat.load_table("db.t")
    assert len(landed.metadata.snapshots) == 2 and landed.metadata_location == stale.metadata_location
    assert (
        first.snapshot_id in result.expired_snapshot_ids
        and first.manifest_list in result.deleted_manifest_lists
    )
    assert not Path(str(first.manifest_list)).exists()
    assert all(Path(p.removeprefix("file://")).exists() for p in referenced_files(landed))
    expected = pa.concat_tables([rows(i * 10, 10, seed=i) for i in range(4)] + [rows(40, 10, seed=9)])
    assert_all_readers(landed, expected.filter(pa.compute.greater_equal(expected["id"], 5)))


def test_expire_removes_an_aged_tag_and_its_snapshot_through_rest(
    server: RestCatalogServer, tmp_path: Path
) -> None:
    """The ref goes before its snapshot in the updates, as Java sends them."""
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    tbl.append(rows(0, 10))
    old = tbl.metadata.current_snapshot_id
    tbl.manage_snapshots().create_tag("t1", max_ref_age_ms=1).commit()
    tbl.append(rows(10, 10, seed=1))
    time.sleep(0.01)
    tbl.expire_snapshots(older_than=int(time.time() * 1000) + 1, retain_last=1)
    md = cat.load_table("db.t").metadata
    assert "t1" not in md.refs and old not in md.snapshots_by_id and len(md.snapshots) == 1


def test_properties_and_format_upgrade_through_rest(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", "a": "1", **PROPS})
    tbl.append(rows(0, 20))
    with tbl.update_properties() as p:  # upgrade-format-version, set-properties, remove-properties
        p.set("format-version", "3").set("b", "2").remove("a")
    md = cat.load_table("db.t").metadata
    assert md.format_version == 3 and md.next_row_id == 0
    assert md.properties.get("b") == "2" and "a" not in md.properties
    tbl.delete("id < 5")  # a DV: the table is v3 now
    assert_all_readers(cat.load_table("db.t"), rows(0, 20).filter(pc.field("id") >= 5))


def test_properties_sent_as_asked_while_another_writer_sets_them(
    server: RestCatalogServer, tmp_path: Path
) -> None:
    """Every key set or removed goes to the server, also those the base already agreed with: another
    writer's values set between the base and the request do not stay (only the difference was sent)."""
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"k": "v", **PROPS})
    other = cat.load_table("db.t")

    def race(stage: str) -> None:
        if stage == "swap":
            with other.update_properties() as p:
                p.set("k", "w").set("z", "1")

    tbl.update_properties().set("k", "v").set("a", "1").remove("z").commit(faults=race)
    props = cat.load_table("db.t").properties
    assert props["k"] == "v" and props["a"] == "1" and "z" not in props


def test_branches_tags_and_rollback_through_rest(server: RestCatalogServer, tmp_path: Path) -> None:
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    assert first is not None
    with tbl.manage_snapshots() as m:  # set-snapshot-ref with retention, asserting the refs are absent
        m.create_branch("audit", min_snapshots_to_keep=2).create_tag("v1", max_ref_age_ms=86_400_000)
    tbl.append(rows(10, 5, seed=1), branch="audit")
    md = cat.load_table("db.t").metadata
    audit = md.refs["audit"]
    assert audit.snapshot_id != first and audit.min_snapshots_to_keep == 2  # the commit kept the retention
    assert md.refs["v1"].max_ref_age_ms == 86_400_000 and md.current_snapshot_id == first
    tbl.manage_snapshots().fast_forward("main", "audit").commit()
    assert cat.load_table("db.t").metadata.current_snapshot_id == audit.snapshot_id
    tbl.manage_snapshots().rollback_to(first).remove_branch("audit").commit()  # remove-snapshot-ref too
    md = cat.load_table("db.t").metadata
    assert md.current_snapshot_id == first and set(md.refs) == {"main", "v1"}
    assert_all_readers(cat.load_table("db.t"), rows(0, 10))
    stale = cat.load_table("db.t").manage_snapshots().set_current_snapshot(audit.snapshot_id)
    tbl.append(rows(20, 5, seed=2))
    with pytest.raises(ValidationError, match="ref 'main' moved"):
        stale.commit()  # 409 on assert-ref-snapshot-id, then the refreshed base fails the same check


def test_an_append_creates_its_branch_through_rest(server: RestCatalogServer, tmp_path: Path) -> None:
    """The new branch forks from main's head; the commit asserts the branch is still absent (null), as
    Java's AssertRefSnapshotId does for a ref a commit creates (asserting main's id failed every attempt)."""
    cat = _catalog(server, tmp_path)
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2", **PROPS})
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    tbl.append(rows(10, 5, seed=1), branch="audit")
    md = cat.load_table("db.t").metadata
    audit = md.snapshot_by_id(md.refs["audit"].snapshot_id)
    assert md.current_snapshot_id == first and audit.parent_snapshot_id == first
    assert_all_readers(cat.load_table("db.t"), rows(0, 10))
    both = pa.concat_tables([rows(0, 10), rows(10, 5, seed=1)])
    assert_same_rows(cat.load_table("db.t").scan(ref="audit").to_arrow(), both, context="the new branch")


def test_row_level_writes_through_rest(server: RestCatalogServer, tmp_path: Path) -> None:
    """Copy-on-write delete, overwrite, dynamic partition overwrite and upsert commit through the REST
    protocol like every snapshot; the server's metadata reads back the same rows."""
    cat, tbl = _partitioned_table(server, tmp_path, 3)
    data = keyed_rows(0, 40)
    tbl.append(data)
    tbl.update_properties().set("write.delete.mode", "copy-on-write").commit()
    tbl.delete("id < 5")
    new = keyed_rows(100, 10, seed=1)
    tbl.overwrite(new, "id >= 30 and id < 40")
    only_us = keyed_rows(200, 20, seed=2).filter(pc.equal(keyed_rows(200, 20, seed=2)["region"], "us"))
    replaced = tbl.dynamic_partition_overwrite(only_us)
    assert replaced is not None
    changed = new.slice(0, 3).set_column(6, "score", pa.array([7.0, 7.0, 7.0]))
    tbl.upsert(changed, on=["id", "region"])
    reloaded = cat.load_table("db.t")
    assert reloaded.metadata_location == tbl.metadata_location
    operations = [s.summary["operation"] for s in reloaded.metadata.snapshots if s.summary]
    assert operations == ["append", "overwrite", "overwrite", "overwrite", "overwrite"]
    kept = data.filter(pc.and_(pc.greater_equal(data["id"], 5), pc.less(data["id"], 30)))
    before = pa.concat_tables([kept, new])
    before = pa.concat_tables([before.filter(pc.not_equal(before["region"], "us")), only_us])
    keys = pc.is_in(before["id"], changed["id"])  # ids are unique: the key (id, region) is the id
    expected = pa.concat_tables([before.filter(pc.invert(keys)), changed])
    assert_all_readers(reloaded, expected, pyiceberg=False)  # equality deletes: not PyIceberg

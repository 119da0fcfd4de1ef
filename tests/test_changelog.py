"""``Table.incremental_changelog_scan``: for every snapshot of a history written by each operation this
engine has (appends, merge-on-read and copy-on-write deletes, equality deletes, overwrites, upserts,
partition overwrites, compactions), the changes it reports are exactly DuckDB's rows of the snapshot
minus its parent's (DELETEs) and the reverse (INSERTs); plus filters, columns, rows coming back when a
delete file is removed, and errors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gpu_engine.commit.update import SnapshotUpdate
from gpu_engine.errors import InvalidData, MetadataError, PlanningError, UnsupportedFeature
from gpu_engine.execute.carry_over import cancel_carry_overs
from gpu_engine.execute.changelog import CHANGE_FIELDS
from gpu_engine.planning.changelog import DELETE, INSERT
from gpu_engine.table import Table

from .commit._support import keyed_rows, region_table, rows, sql_catalog
from .execute.oracles import DUCKDB_CANNOT, KNOWN_WRONG, _duckdb, _rows, duckdb_rows
from .planning._support import MISSING, inventory, inventory_paths, load, missing_metadata_files, same_columns

CHANGE_NAMES = [f.name for f in CHANGE_FIELDS]


def duckdb_at(tbl: Table, snapshot_id: int | None) -> pa.Table:
    if snapshot_id is None:
        return tbl.scan().to_arrow().slice(0, 0)
    sql = f"SELECT * FROM iceberg_scan('{tbl.metadata_location}', snapshot_from_id={snapshot_id})"
    result = _duckdb().execute(sql).arrow()
    return result if isinstance(result, pa.Table) else result.read_all()


def _counter(table: pa.Table, names: list[str], other: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(_rows(table.select(names), names, other.select(names)))


def _as_plain(changes: pa.Table) -> pa.Table:
    """Update pairs checked (each UPDATE_BEFORE directly followed by its key's UPDATE_AFTER), then read as
    the DELETE and INSERT they stand for."""
    kinds, ids = changes["_change_type"].to_pylist(), changes["id"].to_pylist()
    for i, kind in enumerate(kinds):
        if kind == "UPDATE_BEFORE":
            assert kinds[i + 1] == "UPDATE_AFTER" and ids[i + 1] == ids[i], (i, kinds[i : i + 2])
    plain = [{"UPDATE_BEFORE": DELETE, "UPDATE_AFTER": INSERT}.get(k, k) for k in kinds]
    position = changes.schema.get_field_index("_change_type")
    return changes.set_column(position, changes.schema.field(position), pa.array(plain, pa.string()))


def assert_changes_match_duckdb(tbl: Table, first: int | None = None, *, updates: bool = False) -> int:
    """Every non-replace snapshot after ``first``: its changes are exactly DuckDB's rows before minus
    after (DELETE) and after minus before (INSERT), the rows a copy-on-write rewrite carried over
    removed; replace snapshots change no rows. Returns how many."""
    md = tbl.metadata
    if updates:
        paired = tbl.incremental_changelog_scan(first, compute_updates=True, identifier_columns=["id"])
        changes = _as_plain(paired.to_arrow())
    else:
        changes = tbl.incremental_changelog_scan(first).to_arrow()
    names = [f.name for f in md.schema.fields]
    assert changes.column_names == [*names, *CHANGE_NAMES]
    head = md.current_snapshot_id
    assert head is not None
    chain = list(reversed(md.ancestor_ids(head)))
    if first is not None:
        chain = chain[chain.index(first) + 1 :]
    ordinal = 0
    for snapshot_id in chain:
        snapshot = md.snapshot_by_id(snapshot_id)
        before, after = duckdb_at(tbl, snapshot.parent_snapshot_id), duckdb_at(tbl, snapshot_id)
        mine = changes.filter(pc.equal(changes["_commit_snapshot_id"], snapshot_id))
        if snapshot.operation == "replace":
            assert mine.num_rows == 0
            assert _counter(before, names, after) == _counter(after, names, before), f"{snapshot_id} replace"
            continue
        assert set(mine["_change_ordinal"].to_pylist()) <= {ordinal}
        kinds = mine["_change_type"].to_pylist()
        assert updates or kinds == sorted(kinds), "DELETEs before INSERTs within a snapshot"
        deleted = mine.filter(pc.equal(mine["_change_type"], DELETE))
        inserted = mine.filter(pc.equal(mine["_change_type"], INSERT))
        context = f"snapshot {snapshot_id} ({snapshot.operation})"
        b, a = _counter(before, names, after), _counter(after, names, before)
        d, i = _counter(deleted, names, before), _counter(inserted, names, after)
        assert d - i == b - a, f"{context}: DELETE rows"
        assert i - d == a - b, f"{context}: INSERT rows"
        assert not d & i, f"{context}: rows deleted and inserted unchanged (carry-overs) are left"
        ordinal += 1
    return ordinal


@pytest.mark.parametrize(
    ("version", "mode"), [(1, None), (2, "merge-on-read"), (2, "copy-on-write"), (3, "merge-on-read")]
)
def test_every_operation_changes_what_duckdb_sees_change(
    tmp_path: Path, version: int, mode: str | None
) -> None:
    props = {"write.delete.mode": mode, "write.update.mode": mode} if mode else {}
    tbl = region_table(tmp_path, version, **{k: v for k, v in props.items() if v})
    tbl.append(keyed_rows(0, 40))
    tbl.append(keyed_rows(40, 40, seed=1))
    tbl.delete("id < 5 or id = 50")
    tbl.delete("id = 6 or id = 51")  # v3: the DVs merge the earlier ones
    tbl.overwrite(keyed_rows(200, 10, seed=2), "region = 'us' and id < 30")
    if version >= 2:
        keys = tbl.scan(filter="id in (7, 8, 41)", columns=["id", "region"]).to_arrow()
        tbl.delete_rows(keys, on=["id", "region"])  # equality deletes
        changed = keyed_rows(60, 5, seed=3)
        live = tbl.scan(columns=["id", "region"]).to_arrow().to_pylist()
        updated = sum(
            {"id": i, "region": r} in live
            for i, r in zip(changed["id"].to_pylist(), changed["region"].to_pylist(), strict=True)
        )
        tbl.upsert(changed, on=["id", "region"])
    tbl.dynamic_partition_overwrite(
        keyed_rows(300, 6, seed=4).filter(pc.equal(keyed_rows(300, 6, seed=4)["region"], "eu"))
    )
    tbl.compact(options={"rewrite-all": "true"})  # replace: no change
    tbl.delete("id = 70")
    assert assert_changes_match_duckdb(tbl) >= 6
    assert assert_changes_match_duckdb(tbl, updates=True) >= 6
    net = tbl.incremental_changelog_scan(net_changes=True).to_arrow()  # from the empty table: its rows
    names = [f.name for f in tbl.schema().fields]
    head = duckdb_at(tbl, tbl.metadata.current_snapshot_id)
    assert set(net["_change_type"].to_pylist()) == {INSERT}
    assert _counter(net, names, head) == _counter(head, names, net)
    if version >= 2:  # the upsert's existing keys became update pairs
        paired = tbl.incremental_changelog_scan(compute_updates=True, identifier_columns=["id"]).to_arrow()
        assert paired["_change_type"].to_pylist().count("UPDATE_AFTER") == updated > 0


def test_copy_on_write_carry_overs_are_removed_unless_kept(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": "copy-on-write"})
    tbl.append(keyed_rows(0, 50))
    start = tbl.metadata.current_snapshot_id
    tbl.delete("id = 7")
    region = tbl.scan(filter="id = 7", snapshot_id=start, columns=["region"]).to_arrow()["region"][0].as_py()
    file_rows = tbl.scan(filter=f"region = '{region}'", snapshot_id=start).to_arrow().num_rows
    net = tbl.incremental_changelog_scan(start).to_arrow()
    assert net["id"].to_pylist() == [7] and net["_change_type"].to_pylist() == [DELETE]
    kept = tbl.incremental_changelog_scan(start, remove_carry_overs=False).to_arrow()
    counts = Counter(kept["_change_type"].to_pylist())
    assert counts == {DELETE: file_rows, INSERT: file_rows - 1} and file_rows > 1
    only_id = tbl.incremental_changelog_scan(start, columns=["region"]).to_arrow()  # compared on region only
    assert only_id.num_rows == 1 and only_id["_change_type"].to_pylist() == [DELETE]
    positions = tbl.incremental_changelog_scan(start, columns=["_pos"])  # compared on every column
    assert positions.to_arrow().num_rows == 1 and positions.last_run is not None
    assert positions.last_run.rows == {DELETE: 1, INSERT: 0}
    kept_positions = tbl.incremental_changelog_scan(start, columns=["_pos"], remove_carry_overs=False)
    assert kept_positions.to_arrow().num_rows == 2 * file_rows - 1


def test_carry_overs_of_rows_with_lists_and_maps_cancel(tmp_path: Path) -> None:
    schema = pa.schema(
        [("id", pa.int64()), ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.float64()))]
    )
    tbl = sql_catalog(tmp_path).create_table(
        "db.t", schema, properties={"format-version": "2", "write.delete.mode": "copy-on-write"}
    )
    tags = [None, [], ["a"], ["a", None], ["b", "a"]]
    attrs = [None, [], [("x", 1.0)], [("x", -0.0), ("y", None)]]
    tbl.append(pa.table({"id": range(20), "tags": [tags[i % 5] for i in range(20)],
                         "attrs": [attrs[i % 4] for i in range(20)]}, schema=schema))  # fmt: skip
    start = tbl.metadata.current_snapshot_id
    tbl.delete("id = 7")
    changes = tbl.incremental_changelog_scan(start).to_arrow()
    assert changes.select(["id", "_change_type"]).to_pylist() == [{"id": 7, "_change_type": DELETE}]
    assert changes["tags"].to_pylist() == [tags[2]] and changes["attrs"].to_pylist() == [attrs[3]]


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_net_changes_are_the_difference_of_the_range_ends(tmp_path: Path, mode: str) -> None:
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": mode})
    tbl.append(keyed_rows(0, 30))
    start = tbl.metadata.current_snapshot_id
    tbl.append(keyed_rows(30, 10, seed=1))
    tbl.delete("id >= 35")  # five of the rows just appended: no net change for them
    back = tbl.scan(filter="id < 3").to_arrow()
    tbl.delete("id < 3")
    tbl.append(back)  # deleted and inserted back: no net change
    tbl.delete("id = 10")
    net = tbl.incremental_changelog_scan(start, net_changes=True).to_arrow()
    assert sorted(_typed(net, "id")) == [("DELETE", 10), *(("INSERT", i) for i in range(30, 35))]
    names = [f.name for f in tbl.schema().fields]
    before, after = duckdb_at(tbl, start), duckdb_at(tbl, tbl.metadata.current_snapshot_id)
    deleted = net.filter(pc.equal(net["_change_type"], DELETE))
    inserted = net.filter(pc.equal(net["_change_type"], INSERT))
    assert _counter(deleted, names, before) == _counter(before, names, after) - _counter(after, names, before)
    assert _counter(inserted, names, after) == _counter(after, names, before) - _counter(before, names, after)
    ordinals = net["_change_ordinal"].to_pylist()
    assert ordinals == sorted(ordinals) and set(ordinals) == {0, 4}  # each keeps its own snapshot's ordinal
    with pytest.raises(UnsupportedFeature, match="net_changes cannot be combined with compute_updates"):
        tbl.incremental_changelog_scan(
            start, net_changes=True, compute_updates=True, identifier_columns=["id"]
        )


def test_rows_come_back_when_a_delete_file_is_removed(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 30))
    result = tbl.delete("id < 4")
    start = tbl.metadata.current_snapshot_id
    tbl.delete("id = 10")
    tbl.commit(SnapshotUpdate("overwrite", removed=[f.path for f in result.added]))  # undo the first delete
    changes = tbl.incremental_changelog_scan(start, columns=["id"]).to_arrow()
    got = sorted(
        zip(
            changes["_change_ordinal"].to_pylist(),
            changes["_change_type"].to_pylist(),
            changes["id"].to_pylist(),
            strict=True,
        )
    )
    restored = tbl.scan(filter="id < 4", columns=["id"]).to_arrow()["id"].to_pylist()
    assert restored  # (a file whose rows all matched was dropped, not given a delete file)
    back = sorted((1, INSERT, i) for i in restored)
    assert got == [(0, DELETE, 10), *back]
    assert assert_changes_match_duckdb(tbl) == 4


@pytest.mark.parametrize("columns", [["id", "_pos"], ["id", "_file"], ["_pos"], ["_file", "_pos", "id"]])
def test_rows_that_come_back_with_their_file_and_position(tmp_path: Path, columns: list[str]) -> None:
    """Rows alive again are located by their _file and _pos: asked for under hidden names next to the
    requested metadata columns of the same field ids, the read was refused as an invalid schema."""
    tbl = region_table(tmp_path, 2)
    tbl.append(rows(0, 30))
    result = tbl.delete("id < 4")
    start = tbl.metadata.current_snapshot_id
    tbl.commit(SnapshotUpdate("overwrite", removed=[f.path for f in result.added]))  # rows come back
    scan = tbl.incremental_changelog_scan(start, columns=columns)
    changes = scan.to_arrow()
    assert changes.schema == scan.schema() and changes.schema.names == [*columns, *CHANGE_NAMES]
    back = tbl.scan(filter="id < 4", columns=columns).to_arrow()
    assert back.num_rows and set(changes["_change_type"].to_pylist()) == {INSERT}
    assert sorted(map(str, changes.select(columns).to_pylist())) == sorted(map(str, back.to_pylist()))


def test_table_columns_named_file_and_pos_are_not_the_metadata_columns(tmp_path: Path) -> None:
    """A table column called _pos is the table's (as in a scan): the rows that come back are still
    located by the metadata columns, read under their hidden names."""
    schema = pa.schema([("id", pa.int64()), ("_pos", pa.int64()), ("_file", pa.string())])
    tbl = sql_catalog(tmp_path).create_table("db.t", schema, properties={"format-version": "2"})
    tbl.append(pa.table({"id": range(10), "_pos": range(100, 110), "_file": [f"f{i}" for i in range(10)]}))
    result = tbl.delete("id < 4")
    start = tbl.metadata.current_snapshot_id
    tbl.commit(SnapshotUpdate("overwrite", removed=[f.path for f in result.added]))
    for columns in (["id", "_pos", "_file"], ["_pos"], ["_file"]):
        changes = tbl.incremental_changelog_scan(start, columns=columns).to_arrow()
        want = [{"id": i, "_pos": 100 + i, "_file": f"f{i}"} for i in range(4)]
        got = sorted(changes.select(columns).to_pylist(), key=str)
        assert got == sorted(([{c: r[c] for c in columns} for r in want]), key=str), columns
        assert set(changes["_change_type"].to_pylist()) == {INSERT}


def _kinds(changes: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(zip(*(changes[n].to_pylist() for n in CHANGE_NAMES), strict=True))


@pytest.mark.parametrize("columns", [[], ["_file"], ["_pos"], ["_pos", "_file"]])
def test_without_data_columns_rows_compare_on_every_column(tmp_path: Path, columns: list[str]) -> None:
    """With no data column requested, carry-overs and net changes compare rows on every column (read for
    that, not returned), as Spark's changelog view compares on all its columns: the same changes as a
    changelog of every column; comparing on none disabled both (every rewritten row was listed)."""
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": "copy-on-write"})
    tbl.append(keyed_rows(0, 30))
    start = tbl.metadata.current_snapshot_id
    located = tbl.scan(filter="id = 7", columns=["_file", "_pos"]).to_arrow()
    tbl.delete("id = 7")  # rewrites a file: its other rows carried over
    tbl.append(keyed_rows(100, 3, seed=1))
    tbl.delete("id = 101")  # inserted then deleted: no net change
    for net in (False, True):
        every = tbl.incremental_changelog_scan(start, net_changes=net).to_arrow()
        scan = tbl.incremental_changelog_scan(start, columns=columns, net_changes=net)
        changes = scan.to_arrow()
        assert changes.schema == scan.schema() and changes.schema.names == [*columns, *CHANGE_NAMES]
        assert _kinds(changes) == _kinds(every), net
        assert scan.last_run is not None and scan.last_run.rows == dict(
            Counter(every["_change_type"].to_pylist())
        )
        deleted = changes.filter(pc.equal(changes["_change_ordinal"], 0)).select(columns)
        assert deleted.to_pylist() == located.select(columns).to_pylist()  # the row of id 7, as it was
    assert sorted(_typed(every, "id")) == [(DELETE, 7), (INSERT, 100), (INSERT, 102)]
    kept = tbl.incremental_changelog_scan(start, columns=columns, remove_carry_overs=False).to_arrow()
    assert _kinds(kept) == _kinds(tbl.incremental_changelog_scan(start, remove_carry_overs=False).to_arrow())
    with pytest.raises(UnsupportedFeature, match=r"identifier columns \['id'\] are not among .* \[\]"):
        tbl.incremental_changelog_scan(
            start, columns=columns, compute_updates=True, identifier_columns=["id"]
        )


def test_carry_overs_compared_on_no_columns_cancel_by_count() -> None:
    """Compared on no columns, every row equals every other: pairs cancel in order, leaving the last."""
    deleted, inserted = pa.table({"tag": ["d0", "d1", "d2"]}), pa.table({"tag": ["i0"]})
    kept_d, kept_i = cancel_carry_overs(deleted, inserted, [])
    assert kept_d["tag"].to_pylist() == ["d1", "d2"] and kept_i.num_rows == 0
    kept_i, kept_d = cancel_carry_overs(inserted, deleted, ())
    assert kept_d["tag"].to_pylist() == ["d1", "d2"] and kept_i.num_rows == 0


def test_filter_columns_branch_and_plan(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 3)
    tbl.append(keyed_rows(0, 30))
    start = tbl.metadata.current_snapshot_id
    assert start is not None
    tbl.delete("id < 10")
    tbl.manage_snapshots().create_branch("side", start).commit()
    tbl.append(keyed_rows(100, 5, seed=1), branch="side")
    scan = tbl.incremental_changelog_scan(start, filter="id >= 5", columns=["id", "_row_id"])
    changes = scan.to_arrow()
    assert changes.schema == scan.schema()
    assert sorted(changes["id"].to_pylist()) == list(range(5, 10))
    assert set(changes["_change_type"].to_pylist()) == {DELETE} and changes["_row_id"].null_count == 0
    assert scan.last_run is not None and scan.last_run.rows == {DELETE: 5, INSERT: 0}
    plan = scan.plan()
    assert plan.snapshot_ids == (tbl.metadata.current_snapshot_id,) and plan.skipped == ()
    assert all(t.changed for t in plan.tasks)
    side = tbl.incremental_changelog_scan(start, branch="side", columns=["id"]).to_arrow()
    assert sorted(side["id"].to_pylist()) == list(range(100, 105))
    assert tbl.incremental_changelog_scan(tbl.metadata.current_snapshot_id).to_arrow().num_rows == 0


def test_errors(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    with pytest.raises(PlanningError, match="has no snapshots"):
        tbl.incremental_changelog_scan(1).plan()
    assert tbl.incremental_changelog_scan().to_arrow().num_rows == 0
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    tbl.append(rows(10, 10))
    second = tbl.metadata.current_snapshot_id
    tbl.append(rows(20, 10))
    with pytest.raises(UnsupportedFeature, match="backend='gpu'"):
        tbl.incremental_changelog_scan(backend="gpu")
    with pytest.raises(PlanningError, match="from snapshot 12345 is not in the table"):
        tbl.incremental_changelog_scan(12345).plan()
    assert first is not None and second is not None
    tbl.expire_snapshots(snapshot_ids=[first])
    later = tbl.incremental_changelog_scan(second).to_arrow()
    assert sorted(later["id"].to_pylist()) == list(range(20, 30))
    # the oldest retained snapshot is an append: its own added files, without its expired parent
    everything = tbl.incremental_changelog_scan().to_arrow()
    assert set(everything["_change_type"].to_pylist()) == {INSERT}
    assert sorted(everything["id"].to_pylist()) == list(range(10, 30))


@pytest.mark.parametrize(("version", "ops"), [(1, ["append"]), (2, ["delete"])])
def test_an_expired_parent_is_an_error_unless_an_append_follows_it(
    tmp_path: Path, version: int, ops: list[str]
) -> None:
    tbl = region_table(tmp_path, version)
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    tbl.append(rows(10, 10)) if ops == ["append"] else tbl.delete("id < 3")
    tbl.append(rows(20, 10))
    assert first is not None
    tbl.expire_snapshots(snapshot_ids=[first])
    oldest = tbl.metadata.ancestor_ids(tbl.metadata.current_snapshot_id or 0)[-1]
    with pytest.raises(
        PlanningError,
        match=f"snapshot {oldest} \\({ops[0]}\\) are relative to its parent {first}, which has expired",
    ):
        tbl.incremental_changelog_scan().plan()
    assert sorted(tbl.incremental_changelog_scan(oldest).to_arrow()["id"].to_pylist()) == list(range(20, 30))


def _history_tables() -> list[str]:
    if MISSING in inventory_paths():
        return [MISSING]
    return sorted(rel for rel, entry in inventory().items() if entry.get("snapshots", 0) >= 2)


def _state_reader(rel: str, tbl: Table) -> Callable[[int], pa.Table]:
    """DuckDB's rows of a snapshot; for the few tables DuckDB cannot read, our own time travel (checked
    against the independent readers and shipped results in execute/test_fixture_scans.py)."""
    if rel in DUCKDB_CANNOT or ("duckdb", rel) in KNOWN_WRONG:
        return lambda snapshot_id: tbl.scan(snapshot_id=snapshot_id).to_arrow()
    return partial(duckdb_rows, rel)


@pytest.mark.parametrize("rel", _history_tables())
def test_each_fixture_snapshot_changes_what_duckdb_sees_change(rel: str) -> None:
    if rel == MISSING:
        pytest.fail("fixtures missing")
    tbl = load(rel)
    md = tbl.metadata
    reader = _state_reader(rel, tbl)
    checked = 0
    for snapshot in md.snapshots:
        parent, sid = snapshot.parent_snapshot_id, snapshot.snapshot_id
        if not -(2**63) <= sid < 2**63:  # a fixture's metadata holds one; no changelog row can name it
            with pytest.raises(MetadataError, match=f"snapshot id {sid} does not fit a long"):
                tbl.incremental_changelog_scan(parent, to_snapshot_id=sid).plan()
            checked += 1
            continue
        if parent is None or parent not in md.snapshots_by_id:
            continue
        if missing_metadata_files(tbl, snapshot) or missing_metadata_files(tbl, md.snapshot_by_id(parent)):
            continue
        names = same_columns(md, sid, parent)
        changes = tbl.incremental_changelog_scan(parent, to_snapshot_id=sid).to_arrow()
        before, after = reader(parent).select(names), reader(sid).select(names)
        b, a = _counter(before, names, after), _counter(after, names, before)
        context = f"{rel}@{sid} ({snapshot.operation})"
        if snapshot.operation == "replace":
            assert changes.num_rows == 0 and a == b, context
            checked += 1
            continue
        d = _counter(changes.filter(pc.equal(changes["_change_type"], DELETE)), names, before)
        i = _counter(changes.filter(pc.equal(changes["_change_type"], INSERT)), names, after)
        assert (d - i, i - d) == (b - a, a - b), f"{context}: changes differ from DuckDB's snapshots"
        checked += 1
    if not checked:
        pytest.skip(f"{rel}: no snapshot with a readable parent")


def _typed(changes: pa.Table, *value: str) -> list[tuple[Any, ...]]:
    return list(
        zip(changes["_change_type"].to_pylist(), *(changes[v].to_pylist() for v in value), strict=True)
    )


@pytest.mark.parametrize("mode", ["merge-on-read", "copy-on-write"])
def test_compute_updates_pairs_a_keys_delete_and_insert(tmp_path: Path, mode: str) -> None:
    tbl = region_table(tmp_path, 2, **{"write.delete.mode": mode})
    with tbl.update_schema() as u:
        u.set_identifier_fields("id")
    tbl.append(keyed_rows(0, 20))
    start = tbl.metadata.current_snapshot_id
    old = tbl.scan(filter="id in (3, 4)").to_arrow().sort_by("id")
    new = old.set_column(old.schema.get_field_index("score"), "score", pa.array([10.0, 11.0]))
    tbl.overwrite(pa.concat_tables([new, keyed_rows(100, 1).cast(new.schema)]), "id in (3, 4, 5)")
    changes = tbl.incremental_changelog_scan(start, compute_updates=True).to_arrow()
    assert _typed(changes, "id") == [
        ("DELETE", 5),
        ("UPDATE_BEFORE", 3),
        ("UPDATE_AFTER", 3),
        ("UPDATE_BEFORE", 4),
        ("UPDATE_AFTER", 4),
        ("INSERT", 100),
    ]
    scores = dict(zip(_typed(changes, "id"), changes["score"].to_pylist(), strict=True))
    assert scores[("UPDATE_AFTER", 3)] == 10.0 and scores[("UPDATE_BEFORE", 3)] == old["score"][0].as_py()
    plain = tbl.incremental_changelog_scan(start).to_arrow()
    assert sorted(_typed(plain, "id")) == [
        ("DELETE", 3),
        ("DELETE", 4),
        ("DELETE", 5),
        ("INSERT", 3),
        ("INSERT", 4),
        ("INSERT", 100),
    ]
    run = tbl.incremental_changelog_scan(
        start, compute_updates=True, identifier_columns=["id"], columns=["id", "score"]
    )
    assert (
        run.to_arrow().num_rows == 6 and run.last_run is not None and run.last_run.rows["UPDATE_AFTER"] == 2
    )
    blind = tbl.incremental_changelog_scan(
        start, compute_updates=True, identifier_columns=["ID"], columns=["Id", "SCORE"], case_sensitive=False
    )  # the keys resolve as the columns do
    assert _typed(blind.to_arrow(), "id") == _typed(changes, "id")


def test_compute_updates_errors(tmp_path: Path) -> None:
    tbl = region_table(tmp_path, 2)
    tbl.append(keyed_rows(0, 10))
    start = tbl.metadata.current_snapshot_id
    with pytest.raises(PlanningError, match="compute_updates needs identifier columns"):
        tbl.incremental_changelog_scan(start, compute_updates=True)
    with pytest.raises(UnsupportedFeature, match=r"identifier columns \['id'\] are not among"):
        tbl.incremental_changelog_scan(
            start, compute_updates=True, identifier_columns=["id"], columns=["score"]
        ).to_arrow()
    row = tbl.scan(filter="id = 3").to_arrow()
    other = row.set_column(row.schema.get_field_index("score"), "score", pa.array([99.0]))
    tbl.overwrite(pa.concat_tables([other, other]), "id = 3")  # one key deleted, inserted twice
    with pytest.raises(InvalidData, match=r"more than one row with identifier \{'id': 3\}"):
        tbl.incremental_changelog_scan(start, compute_updates=True, identifier_columns=["id"]).to_arrow()


def test_identifier_columns_are_checked_before_anything_is_read(tmp_path: Path) -> None:
    """Bad update keys fail when the changelog scan is made, not when its rows are read (spark.changes
    would only fail in its executors); ``identifier_columns`` without ``compute_updates`` is refused
    rather than ignored."""
    tbl = region_table(tmp_path, 2)
    tbl.append(keyed_rows(0, 10))
    start = tbl.metadata.current_snapshot_id
    with pytest.raises(UnsupportedFeature, match=r"identifier columns \['nope'\] are not among"):
        tbl.incremental_changelog_scan(start, compute_updates=True, identifier_columns=["nope"])
    with pytest.raises(UnsupportedFeature, match=r"identifier columns \['id'\] are not among"):
        tbl.incremental_changelog_scan(
            start, compute_updates=True, identifier_columns=["id"], columns=["score"]
        )
    with pytest.raises(PlanningError, match=r"identifier_columns=\['id'\]: only used with compute_updates"):
        tbl.incremental_changelog_scan(start, identifier_columns=["id"])
    with pytest.raises(PlanningError, match=r"identifier_columns='id': expected a list of names"):
        tbl.incremental_changelog_scan(start, compute_updates=True, identifier_columns="id")


def test_an_append_from_before_an_upgrade_to_v2_needs_its_parent(tmp_path: Path) -> None:
    """Files written while the table was v1 all carry sequence number 0: an append of that era cannot be
    told apart from what was there before it, so its expired parent is an error, as on v1."""
    tbl = region_table(tmp_path, 1)
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    tbl.append(rows(10, 10))
    tbl.update_properties().set("format-version", "2").commit()
    tbl.append(rows(20, 10))
    assert first is not None
    tbl.expire_snapshots(snapshot_ids=[first])
    with pytest.raises(PlanningError, match=f"relative to its parent {first}, which has expired"):
        tbl.incremental_changelog_scan().plan()


def test_row_lineage_of_files_from_before_an_upgrade_to_v3(tmp_path: Path) -> None:
    """The first v3 snapshot assigns row ids to the manifests listed before: a range starting before the
    upgrade reads a deleted row's ``_row_id`` as a time-travel scan does (the manifest read for the v2
    snapshots, without ``first_row_id``, was reused for the later ones: null row ids)."""
    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 6))  # one manifest, listed again by the v3 snapshots with a first_row_id
    tbl.update_properties().set("format-version", "3").commit()
    tbl.delete("id = 2")
    parent = tbl.metadata.current_snapshot_id
    tbl.delete("id = 3")
    last = tbl.metadata.current_snapshot_id
    columns = ["id", "_row_id", "_last_updated_sequence_number"]
    before = tbl.scan(snapshot_id=parent, columns=columns, filter="id = 3").to_arrow().to_pylist()
    assert before and before[0]["_row_id"] is not None
    for first in (None, parent):
        changes = tbl.incremental_changelog_scan(first, columns=columns).to_arrow()
        deleted = changes.filter(pc.equal(changes["_commit_snapshot_id"], last)).select(columns)
        assert deleted.to_pylist() == before, first


@pytest.mark.parametrize(
    "how", [{}, {"net_changes": True}, {"compute_updates": True, "identifier_columns": ["id"]}]
)
def test_a_v3_unknown_column_beside_repeated_rows(tmp_path: Path, how: dict[str, Any]) -> None:
    """A copy-on-write rewrite of a file holding two equal rows of a table with an ``unknown`` column: the
    carried-over rows cancel (their matching compared the null-typed column, which Arrow cannot)."""
    props = {"format-version": "3", "write.delete.mode": "copy-on-write"}
    tbl = sql_catalog(tmp_path).create_table("db.t", pa.schema([("id", pa.int64())]), properties=props)
    with tbl.update_schema() as u:
        u.add_column("u", "unknown")
    tbl.append(pa.table({"id": pa.array([1, 1, 2], pa.int64())}))
    start = tbl.metadata.current_snapshot_id
    assert start is not None
    tbl.delete("id = 2", backend="cpu")
    got = tbl.incremental_changelog_scan(start, **how).to_arrow()
    assert [(r["id"], r["u"], r["_change_type"]) for r in got.to_pylist()] == [(2, None, "DELETE")]


@pytest.mark.parametrize("flag", ["remove_carry_overs", "compute_updates", "net_changes", "from_inclusive"])
def test_flags_are_bools(tmp_path: Path, flag: str) -> None:
    """A string such as "no" was truthy: net changes on, carry-overs still removed, the start included."""
    tbl = sql_catalog(tmp_path).create_table("db.t", pa.schema([("id", pa.int64())]))
    tbl.append(pa.table({"id": pa.array([1], pa.int64())}))
    start = tbl.metadata.current_snapshot_id
    with pytest.raises(PlanningError, match=rf"{flag}='no': expected True or False"):
        tbl.incremental_changelog_scan(start, **{flag: cast(Any, "no")})
    if flag == "from_inclusive":
        with pytest.raises(PlanningError, match=r"from_inclusive='no': expected True or False"):
            tbl.incremental_append_scan(start, from_inclusive="no")  # type: ignore[arg-type]

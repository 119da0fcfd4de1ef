"""``tbl.manage_snapshots()``: branches and tags created, moved and removed (write-audit-publish, rollback,
retention), checked in the metadata JSON, through PyIceberg and DuckDB, and the changes refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.table import StaticTable

from gpu_engine.commit.refs_update import InvalidRefChange
from gpu_engine.errors import ValidationError
from gpu_engine.table import Table

from ._support import assert_all_readers, rows, sql_catalog

FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}


def make(tmp_path: Path) -> Table:
    props = {"format-version": "2", **FAST}
    return sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties=props)


def refs_json(tbl: Table) -> dict[str, Any]:
    return dict(json.loads(Path(tbl.metadata_location).read_text()).get("refs", {}))


def ids(tbl: Table, **scan: Any) -> list[int]:
    return sorted(tbl.scan(columns=["id"], **scan).to_arrow()["id"].to_pylist())


def test_write_audit_publish_through_a_branch(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    with tbl.manage_snapshots() as m:
        m.create_branch("audit", max_ref_age_ms=86_400_000)
    tbl.append(rows(10, 5), branch="audit")
    staged = tbl.metadata.refs["audit"].snapshot_id
    assert tbl.metadata.current_snapshot_id == first  # main untouched
    assert ids(tbl) == list(range(10)) and ids(tbl, ref="audit") == list(range(15))
    assert refs_json(tbl)["audit"] == {"snapshot-id": staged, "type": "branch", "max-ref-age-ms": 86_400_000}
    tbl.manage_snapshots().fast_forward("main", "audit").commit()
    assert tbl.metadata.current_snapshot_id == staged
    assert tbl.metadata.snapshot_log[-1].snapshot_id == staged
    assert_all_readers(tbl, pa.concat_tables([rows(0, 10), rows(10, 5)]))
    static = StaticTable.from_metadata(tbl.metadata_location)
    assert static.metadata.refs["audit"].snapshot_id == staged
    assert static.current_snapshot().snapshot_id == staged  # type: ignore[union-attr]


def test_tags_rollback_and_set_current_snapshot(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10))
    good = tbl.metadata.current_snapshot_id
    assert good is not None
    tbl.manage_snapshots().create_tag("good", max_ref_age_ms=7 * 86_400_000).commit()
    tbl.delete("id < 15")  # the bad write
    bad = tbl.metadata.current_snapshot_id
    assert bad is not None
    tbl.manage_snapshots().rollback_to(good).commit()
    assert tbl.metadata.current_snapshot_id == good and ids(tbl) == list(range(20))
    assert refs_json(tbl)["good"] == {"snapshot-id": good, "type": "tag", "max-ref-age-ms": 7 * 86_400_000}
    with pytest.raises(InvalidRefChange, match=f"snapshot {bad}: not an ancestor"):
        tbl.manage_snapshots().rollback_to(bad).commit()
    tbl.manage_snapshots().set_current_snapshot(bad).commit()  # any snapshot
    assert ids(tbl) == list(range(15, 20))
    assert [e.snapshot_id for e in tbl.metadata.snapshot_log][-3:] == [bad, good, bad]
    written = pa.concat_tables([rows(0, 10), rows(10, 10)])
    assert_all_readers(tbl, written.filter(pc.field("id") >= 15))
    assert ids(tbl, ref="good") == list(range(20))
    result = tbl.expire_snapshots(older_than=max(s.timestamp_ms for s in tbl.metadata.snapshots) + 1)
    assert good not in result.expired_snapshot_ids  # the tag keeps it
    assert ids(tbl, ref="good") == list(range(20))


def test_replace_remove_and_retention(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    tbl.append(rows(0, 5))
    one = tbl.metadata.current_snapshot_id
    tbl.append(rows(5, 5))
    two = tbl.metadata.current_snapshot_id
    assert one is not None and two is not None
    with tbl.manage_snapshots() as m:
        m.create_branch("dev", one).create_tag("t", one)
        m.set_retention("dev", min_snapshots_to_keep=3, max_snapshot_age_ms=3_600_000)
        m.replace_ref("t", two)
    assert refs_json(tbl)["dev"] == {
        "snapshot-id": one, "type": "branch", "min-snapshots-to-keep": 3, "max-snapshot-age-ms": 3_600_000,
    }  # fmt: skip
    assert refs_json(tbl)["t"]["snapshot-id"] == two
    tbl.append(rows(10, 5), branch="dev")  # a commit to the branch keeps its retention
    dev = refs_json(tbl)["dev"]
    assert dev["snapshot-id"] != one and dev["min-snapshots-to-keep"] == 3
    with tbl.manage_snapshots() as m:
        m.remove_branch("dev").remove_tag("t")
    assert set(refs_json(tbl)) == {"main"}
    assert tbl.metadata.current_snapshot_id == two


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m, s: m.create_branch("main"), "create branch 'main': a branch of that name exists"),
        (lambda m, s: m.create_tag("x", 12345), "no snapshot with id 12345"),
        (lambda m, s: m.create_branch("b", min_snapshots_to_keep=0), "must be a positive integer"),
        (lambda m, s: m.remove_branch("main"), "the main branch cannot be removed"),
        (lambda m, s: m.remove_tag("nope"), "no branch or tag 'nope'"),
        (lambda m, s: m.create_branch("b").remove_tag("b"), "remove tag 'b': 'b' is a branch, not a tag"),
        (lambda m, s: m.create_tag("t").remove_branch("t"), "'t' is a tag, not a branch"),
        (lambda m, s: m.create_tag("t").remove_tag("t").remove_tag("t"), "no branch or tag 't'"),
        (lambda m, s: m.rollback_to(s[1]), "not an ancestor"),
        (lambda m, s: m.set_retention("main", max_ref_age_ms=-5), "must be a positive integer"),
    ],
)
def test_refused_changes_name_the_ref_and_commit_nothing(tmp_path: Path, change: Any, message: str) -> None:
    tbl = make(tmp_path)
    tbl.append(rows(0, 5))
    tbl.append(rows(5, 5))
    snapshots = [s.snapshot_id for s in tbl.metadata.snapshots]
    tbl.manage_snapshots().rollback_to(snapshots[0]).commit()
    location = tbl.metadata_location
    with pytest.raises(InvalidRefChange, match=message), tbl.manage_snapshots() as m:
        change(m, snapshots)
    tbl.refresh()
    assert tbl.metadata_location == location


def test_tags_take_no_branch_retention_and_fast_forward_needs_a_descendant(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    tbl.append(rows(0, 5))
    tbl.manage_snapshots().create_tag("t").create_branch("side").commit()
    with pytest.raises(InvalidRefChange, match="a tag takes max_ref_age_ms only"):
        tbl.manage_snapshots().set_retention("t", min_snapshots_to_keep=2)
    tbl.append(rows(5, 5))  # main moves on
    tbl.append(rows(10, 5), branch="side")  # side moves elsewhere
    with pytest.raises(InvalidRefChange, match=r"'side' .* does not descend from 'main'"):
        tbl.manage_snapshots().fast_forward("main", "side").commit()
    with pytest.raises(InvalidRefChange, match="'t' is a tag, not a branch"):
        tbl.manage_snapshots().fast_forward("t", "main")


def test_a_lost_race_reapplies_unless_a_touched_ref_moved(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    tbl.append(rows(0, 5))
    first = tbl.metadata.current_snapshot_id
    other = sql_catalog(tmp_path).load_table("db.t")
    tag = tbl.manage_snapshots().create_tag("t", first)
    other.append(rows(5, 5))  # main moved; the tag does not touch it: re-applied
    tag.commit()
    assert tbl.metadata.refs["t"].snapshot_id == first and ids(tbl) == list(range(10))
    stale = other.manage_snapshots().rollback_to(first)  # touches main...
    tbl.append(rows(10, 5))  # ...which moves meanwhile
    with pytest.raises(ValidationError, match="ref 'main' moved"):
        stale.commit()
    assert ids(tbl.refresh()) == list(range(15))


def test_an_empty_table_needs_a_named_snapshot(tmp_path: Path) -> None:
    tbl = make(tmp_path)
    with pytest.raises(InvalidRefChange, match="no current snapshot; name one"):
        tbl.manage_snapshots().create_branch("b")
    assert tbl.metadata.refs == {}


def test_publishing_the_first_audited_write_creates_main(tmp_path: Path) -> None:
    """A new table written only to a branch: ``main`` reads empty, cannot become a tag, and a fast-forward
    creates it at the branch's head (Iceberg Java >= 1.5)."""
    tbl = make(tmp_path)
    tbl.append(rows(0, 5), branch="audit")
    staged = tbl.metadata.refs["audit"].snapshot_id
    assert tbl.metadata.current_snapshot_id is None and "main" not in refs_json(tbl)
    assert ids(tbl, ref="main") == [] and ids(tbl) == []
    with pytest.raises(InvalidRefChange, match="a tag cannot take its name"):
        tbl.manage_snapshots().create_tag("main", staged)
    tbl.manage_snapshots().fast_forward("main", "audit").commit()
    assert refs_json(tbl)["main"] == {"snapshot-id": staged, "type": "branch"}
    published = tbl.metadata
    assert published.current_snapshot_id == staged
    assert ids(tbl, ref="main") == list(range(5))
    assert_all_readers(tbl, rows(0, 5))


def test_metadata_whose_main_is_a_tag_is_never_written(tmp_path: Path) -> None:
    from dataclasses import replace

    from gpu_engine.commit.table_update import write_metadata
    from gpu_engine.errors import MetadataError

    tbl = make(tmp_path)
    tbl.append(rows(0, 5))
    md = tbl.metadata
    bad = replace(md, snapshot_refs={"main": replace(md.snapshot_refs["main"], type="tag")})
    target = tmp_path / "bad.metadata.json"
    with pytest.raises(MetadataError, match="'main' must be a branch"):
        write_metadata(tbl.io, str(target), bad)
    assert not target.exists()


@pytest.mark.parametrize("how", ["tag", "current"])
def test_a_snapshot_expired_since_the_update_started_is_refused(tmp_path: Path, how: str) -> None:
    """Else the metadata would name a snapshot it lacks and no reader could load the table."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    old = tbl.metadata.current_snapshot_id
    assert old is not None
    tbl.overwrite(rows(5, 5))
    stale = cat.load_table("db.t")
    update = stale.manage_snapshots()
    update = update.create_tag("keep-old", old) if how == "tag" else update.set_current_snapshot(old)
    cat.load_table("db.t").expire_snapshots(snapshot_ids=[old])
    with pytest.raises(ValidationError, match="no longer has"):
        update.commit()
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 5


def test_metadata_naming_a_missing_snapshot_is_never_written(tmp_path: Path) -> None:
    from dataclasses import replace

    from gpu_engine.commit.table_update import write_metadata
    from gpu_engine.errors import MetadataError

    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    md = tbl.metadata
    bad = replace(
        md, snapshot_refs={**md.snapshot_refs, "ghost": replace(md.snapshot_refs["main"], snapshot_id=42)}
    )
    target = tmp_path / "bad.metadata.json"
    with pytest.raises(MetadataError, match=r"reader would refuse: ref 'ghost' points at snapshot 42"):
        write_metadata(tbl.io, str(target), bad)
    assert not target.exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_ref_age_ms": True}, "max_ref_age_ms must be a positive integer"),
        ({"max_ref_age_ms": 2**63}, "up to 9223372036854775807"),
        ({"min_snapshots_to_keep": 2**31}, "up to 2147483647"),
        ({"max_snapshot_age_ms": 1.5}, "max_snapshot_age_ms must be"),
    ],
)
def test_retention_values_java_cannot_read_are_refused(
    tmp_path: Path, kwargs: dict[str, Any], match: str
) -> None:
    """A bool (written as JSON true) or a number beyond Java's int/long made the metadata unreadable."""
    tbl = make(tmp_path)
    tbl.append(rows(0, 3))
    with pytest.raises(InvalidRefChange, match=match):
        tbl.manage_snapshots().create_branch("b", **kwargs).commit()
    with pytest.raises(InvalidRefChange, match="non-empty string"):
        tbl.manage_snapshots().create_branch(5).commit()  # type: ignore[arg-type]
    assert set(tbl.refresh().metadata.refs) == {"main"}


@pytest.mark.parametrize("move", ["rollback_to", "set_current_snapshot", "replace_ref"])
def test_numpy_snapshot_ids_are_written_as_json_integers(tmp_path: Path, move: str) -> None:
    """A snapshot id taken from an Arrow or numpy column (``inspect().snapshots`` to numpy) moves the ref
    as the int would; it was stored as is and the metadata JSON could not be written ("Object of type
    int64 is not JSON serializable")."""
    import numpy as np

    tbl = make(tmp_path)
    tbl.append(rows(0, 10))
    first = tbl.metadata.current_snapshot_id
    assert first is not None
    tbl.append(rows(10, 10))
    target: Any = np.int64(first)
    update = tbl.manage_snapshots()
    if move == "replace_ref":
        update.create_tag("t", tbl.metadata.current_snapshot_id).commit()
        update = tbl.manage_snapshots().replace_ref("t", target)
    else:
        update = getattr(update, move)(target)
    update.commit()
    name = "t" if move == "replace_ref" else "main"
    assert refs_json(tbl)[name]["snapshot-id"] == first
    assert type(tbl.metadata.refs[name].snapshot_id) is int


def _without_refs(tbl: Table, *, only_main: bool = False) -> Table:
    """``tbl`` as older Java, Impala and Hive writers leave it: no ``refs`` (main is implied); with
    ``only_main``, its other refs kept (as PyIceberg reads such metadata: main implied)."""
    assert tbl.catalog is not None
    md = json.loads(Path(tbl.metadata_location).read_text())
    if only_main:
        del md["refs"]["main"]
    else:
        md.pop("refs")
    path = Path(tbl.metadata_location).with_name(f"00099-{'0' * 8}-refs-left-out.metadata.json")
    path.write_text(json.dumps(md))
    tbl.catalog.commit_metadata(tbl.identifier, tbl.metadata_location, str(path))
    return tbl.refresh()


def test_writing_another_ref_writes_the_implied_main_too(tmp_path: Path) -> None:
    """Where ``refs`` is written, Java takes it as written (main is implied only when ``refs`` is absent),
    so a branch write or an expiry that writes refs writes ``main`` beside them."""
    tbl = make(tmp_path)
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 5))
    first, current = (s.snapshot_id for s in tbl.metadata.snapshots)
    tbl = _without_refs(tbl)
    assert "refs" not in json.loads(Path(tbl.metadata_location).read_text())
    tbl.append(rows(20, 5), branch="audit")
    written = refs_json(tbl)
    assert written["main"] == {"snapshot-id": current, "type": "branch"} and "audit" in written
    assert StaticTable.from_metadata(tbl.metadata_location).metadata.refs["main"].snapshot_id == current
    tbl = _without_refs(tbl)
    with tbl.manage_snapshots() as m:  # through the refs update: main written as well
        m.create_tag("t", current)
    assert refs_json(tbl)["main"]["snapshot-id"] == current
    tbl = _without_refs(tbl, only_main=True)
    assert set(refs_json(tbl)) == {"t"}
    tbl.expire_snapshots(snapshot_ids=[first])
    assert refs_json(tbl)["main"]["snapshot-id"] == current  # refs written (the tag): main too
    assert ids(tbl) == list(range(15))
    tbl = _without_refs(tbl)
    before = tbl.metadata_location
    tbl.expire_snapshots(
        snapshot_ids=[s.snapshot_id for s in tbl.metadata.snapshots if s.snapshot_id != current]
    )
    assert tbl.metadata_location != before and [s.snapshot_id for s in tbl.metadata.snapshots] == [current]
    assert "refs" not in json.loads(Path(tbl.metadata_location).read_text())  # no ref written: still implied

"""``Table.rewrite_manifests`` (Iceberg's ``rewrite_manifests``): a ``replace`` snapshot that keeps every
row and every entry's snapshot id and sequence numbers (entries read with fastavro),
keeps v3 row lineage, writes target-sized manifests clustered by partition,
one spec and one content per manifest, and behaves under concurrent commits and failures like every commit.

Every fixture table is rewritten too (:func:`test_every_fixture_keeps_rows_and_entries`): small targets
split its manifests, and its rows and its files' sequence numbers stay the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gpu_engine.errors import CommitStateUnknown, InvalidOption, ValidationError
from gpu_engine.table import Table

from ..execute.test_fixture_scans import ENGINE_CANNOT
from ..planning._support import FIXTURES, MISSING, SHARED, inventory_paths
from ._fixture_copy import committable_copy, tree_state
from ._support import (
    FAST,
    assert_all_readers,
    assert_same_rows,
    avro_entries,
    keyed_rows,
    listed,
    once_at,
    raise_at,
    referenced_files,
    rows,
    sql_catalog,
    table_files,
)

NO_MERGE = {"commit.manifest-merge.enabled": "false", **FAST}
EXISTING = 0


def make(tmp_path: Path, version: int, **props: str) -> Table:
    cat = sql_catalog(tmp_path)
    properties = {"format-version": str(version), **NO_MERGE, **props}
    return cat.create_table("db.t", rows(0, 0).schema, partition_spec=["region"], properties=properties)


def live_entries(tbl: Table) -> set[tuple[Any, ...]]:
    """The live entries of the current snapshot, read with fastavro, inheritance applied by hand (spec
    "Sequence Number Inheritance"): (path, content, DV offset, snapshot id, sequence numbers)."""
    out = set()
    for m in listed(tbl):
        for e in avro_entries(m.manifest_path):
            if e["status"] == 2:
                continue
            f = e["data_file"]
            # v1 entries have no sequence numbers (all 0); a v2+ entry lacks them only when ADDED
            inherited = 0 if "sequence_number" not in e else m.sequence_number if e["status"] == 1 else None
            seq = e.get("sequence_number")
            file_seq = e.get("file_sequence_number")
            out.add(
                (
                    f["file_path"],
                    f.get("content", 0),
                    f.get("content_offset"),
                    e["snapshot_id"] if e["snapshot_id"] is not None else m.added_snapshot_id,
                    inherited if seq is None else seq,
                    inherited if file_seq is None else file_seq,
                )
            )
    return out


def lineage(tbl: Table) -> pa.Table:
    return tbl.scan(columns=["id", "_row_id", "_last_updated_sequence_number"]).to_arrow().sort_by("id")


def batch(i: int) -> pa.Table:
    return keyed_rows(i * 20, 20, seed=i)


def history(tbl: Table, appends: int = 8) -> pa.Table:
    """``appends`` appends (a manifest each; one file per region) and, on v2/v3, position deletes or DVs
    and an equality delete; the rows left."""
    for i in range(appends):
        tbl.append(batch(i))
    if tbl.format_version >= 2:
        tbl.delete("id < 5")
        tbl.delete("id = 47")
        keys = tbl.scan(filter="id in (60, 61)", columns=["id", "region"]).to_arrow()
        tbl.delete_rows(keys, on=["id", "region"])  # partition-scoped: the keys carry the partition
    return tbl.scan().to_arrow()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_rewrite_keeps_rows_entries_and_lineage(tmp_path: Path, version: int) -> None:
    tbl = make(tmp_path, version)
    expected = history(tbl)
    before = listed(tbl)
    entries = live_entries(tbl)
    ids = lineage(tbl) if version == 3 else None
    parent = tbl.metadata.current_snapshot()
    assert parent is not None and len(before) == 8 + (3 if version >= 2 else 0)

    result = tbl.rewrite_manifests()
    assert result.commit is not None
    after = listed(tbl)
    # one manifest per content: the groups are far below the 8 MiB target
    assert sorted(m.content or 0 for m in after) == ([0, 1] if version >= 2 else [0])
    assert {m.added_snapshot_id for m in after} == {result.commit.snapshot_id}
    assert set(result.rewritten_manifests) == {m.manifest_path for m in before}
    assert set(result.added_manifests) == {m.manifest_path for m in after}
    for m in after:
        assert m.added_files_count == 0 and m.deleted_files_count == 0
        assert {e["status"] for e in avro_entries(m.manifest_path)} == {EXISTING}
    s = result.commit.summary
    assert s["operation"] == "replace"
    assert (s["manifests-created"], s["manifests-kept"]) == (str(len(after)), "0")
    assert s["manifests-replaced"] == str(len(before))
    assert s["entries-processed"] == str(result.entries) == str(len(entries))
    totals = ("total-records", "total-data-files", "total-delete-files", "total-position-deletes")
    assert {k: s[k] for k in totals} == {k: (parent.summary or {})[k] for k in totals}

    assert live_entries(tbl) == entries  # snapshot ids and sequence numbers kept
    assert_all_readers(tbl, expected, pyiceberg=version == 1)  # PyIceberg cannot apply equality deletes
    if ids is not None:
        assert lineage(tbl).equals(ids)
        assert tbl.metadata.next_row_id is not None
    # the parent is still readable as it was, and nothing but metadata files is unreferenced
    assert_same_rows(tbl.scan(snapshot_id=parent.snapshot_id).to_arrow(), expected, context="time travel")
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }

    again = tbl.rewrite_manifests()  # one manifest per group, below the target: nothing to do
    assert again.commit is None and listed(tbl) == after


def test_entries_are_clustered_by_partition_into_target_sized_manifests(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    expected = history(tbl, appends=12)
    data = [m for m in listed(tbl) if (m.content or 0) == 0]
    total = sum(m.manifest_length or 0 for m in data)
    target = total // 3 + 1  # three data manifests
    pruned = tbl.scan(filter="region = 'apac'").plan().summary
    assert pruned.manifests_pruned == 0  # every append's manifest has every region
    result = tbl.rewrite_manifests(target_size_bytes=target)
    assert result.commit is not None
    new_data = [m for m in listed(tbl) if (m.content or 0) == 0]
    assert len(new_data) == 3
    regions: list[str] = []
    for m in new_data:
        in_manifest = [e["data_file"]["partition"]["region"] for e in avro_entries(m.manifest_path)]
        assert abs(len(in_manifest) - sum(m.existing_files_count or 0 for m in new_data) / 3) <= 1
        regions += in_manifest
    # in manifest-list order the entries' partitions are sorted: each manifest covers a range of them
    assert regions == sorted(regions) and len(set(regions)) == 3
    # so planning skips manifests by their partition summaries
    assert tbl.scan(filter="region = 'apac'").plan().summary.manifests_pruned >= 1
    assert_all_readers(tbl, expected, pyiceberg=False)


def test_spec_id_limits_the_rewrite_and_specs_never_mix(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    for i in range(3):
        tbl.append(rows(i * 20, 20, seed=i))
    with tbl.update_spec() as u:
        u.add_field("bucket(4, id)")
    for i in range(3, 6):
        tbl.append(rows(i * 20, 20, seed=i))
    expected = tbl.scan().to_arrow()
    newer = {m.manifest_path for m in listed(tbl) if m.partition_spec_id == 1}
    assert len(newer) == 3

    result = tbl.rewrite_manifests(spec_id=0)
    assert result.commit is not None and len(result.rewritten_manifests) == 3
    manifests = listed(tbl)
    assert {m.manifest_path for m in manifests if m.partition_spec_id == 1} == newer  # untouched
    assert [m.partition_spec_id for m in manifests] == [0, 1, 1, 1]  # new manifests first

    tbl.rewrite_manifests()
    assert sorted(m.partition_spec_id or 0 for m in listed(tbl)) == [0, 1]  # spec 0's single manifest kept
    for m in listed(tbl):
        assert {e["data_file"]["file_path"] for e in avro_entries(m.manifest_path)}  # not empty
    assert_all_readers(tbl, expected)


def test_branches_tags_and_empty_tables(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    assert tbl.rewrite_manifests().commit is None  # no snapshot: nothing to do
    for i in range(3):
        tbl.append(rows(i * 20, 20, seed=i))
    main_manifests = listed(tbl)
    tbl.manage_snapshots().create_branch("audit").create_tag("v1").commit()
    result = tbl.rewrite_manifests(branch="audit")
    assert result.commit is not None
    assert listed(tbl) == main_manifests  # main untouched
    audit = tbl.metadata.refs["audit"].snapshot_id
    assert audit == result.commit.snapshot_id
    assert_same_rows(
        tbl.scan(ref="audit").to_arrow(), tbl.scan().to_arrow(), context="the branch keeps main's rows"
    )
    with pytest.raises(ValidationError, match="'v1' is a tag"):
        tbl.rewrite_manifests(branch="v1")
    with pytest.raises(InvalidOption, match="target_size_bytes=0"):
        tbl.rewrite_manifests(target_size_bytes=0)
    with pytest.raises(Exception, match="partition spec"):
        tbl.rewrite_manifests(spec_id=5)
    assert len(tbl.refresh().metadata.snapshots) == 4  # the refused calls committed nothing


def test_a_concurrent_append_is_taken_into_the_retried_rewrite(tmp_path: Path) -> None:
    tbl = make(tmp_path, 3)
    expected = history(tbl, appends=4)
    other = tbl.catalog.load_table(tbl.identifier)  # type: ignore[union-attr]
    extra = batch(50)
    result = tbl.rewrite_manifests(faults=once_at("manifest-list", lambda: other.append(extra)))
    assert result.commit is not None and result.commit.attempts == 2
    appended = other.metadata.current_snapshot_id
    (data,) = [m for m in listed(tbl) if (m.content or 0) == 0]
    # the concurrent append's entries were rewritten with the others, keeping their snapshot id
    assert appended in {e["snapshot_id"] for e in avro_entries(data.manifest_path)}
    assert tbl.metadata.snapshot_by_id(result.commit.snapshot_id).parent_snapshot_id == appended
    assert_all_readers(tbl, pa.concat_tables([expected, extra.cast(expected.schema)]), pyiceberg=False)
    # the lost attempt's manifests were deleted
    assert table_files(tbl) - referenced_files(tbl) == {
        str(p) for p in Path(tbl.location, "metadata").glob("*.metadata.json")
    }


@pytest.mark.parametrize("stage", ["manifest", "manifest-list", "metadata", "swap"])
def test_a_failed_rewrite_commits_nothing_and_leaves_nothing(tmp_path: Path, stage: str) -> None:
    tbl = make(tmp_path, 2)
    history(tbl, appends=3)
    location, files = tbl.metadata_location, table_files(tbl)
    _, hook = raise_at(stage, OSError(f"injected at {stage}"))
    with pytest.raises(OSError, match=f"injected at {stage}"):
        tbl.rewrite_manifests(faults=hook)
    assert tbl.refresh().metadata_location == location
    assert table_files(tbl) == files


def test_an_unknown_commit_state_deletes_nothing(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2)
    expected = history(tbl, appends=3)
    _, hook = raise_at("swap", CommitStateUnknown("the catalog did not answer"))
    with pytest.raises(CommitStateUnknown):
        tbl.rewrite_manifests(faults=hook)
    written = table_files(tbl) - referenced_files(tbl)
    assert any(p.endswith(".avro") for p in written)  # the attempt's manifests stay: it may have landed
    assert_same_rows(tbl.refresh().scan().to_arrow(), expected, context="unchanged")


# -- every fixture table -----------------------------------------------------------------------------------


def _files(tbl: Table) -> set[tuple[Any, ...]]:
    """Every live data and delete file of the current snapshot with its sequence numbers and spec."""
    out: set[tuple[Any, ...]] = set()
    for t in tbl.scan().plan().tasks:
        out.add((t.file.path, t.file.data_sequence_number, t.file.spec_id))
        out.update((d.path, d.data_sequence_number, d.spec_id, d.content_offset) for d in t.deletes)
    return out


@pytest.mark.parametrize("rel", inventory_paths())
def test_every_fixture_keeps_rows_and_entries(rel: str, tmp_path: Path) -> None:
    if rel == MISSING:
        pytest.fail(f"fixtures not found at {FIXTURES}")
    if rel in ENGINE_CANNOT:
        pytest.skip(f"engine refuses this table: {ENGINE_CANNOT[rel][1]}")
    fixture_state = tree_state(SHARED / rel)
    tbl = committable_copy(rel, tmp_path / "table")
    if tbl.metadata.current_snapshot_id is None:
        pytest.skip("no current snapshot")
    before, files = tbl.scan().to_arrow(), _files(tbl)
    result = tbl.rewrite_manifests(target_size_bytes=4096)  # small: most manifests are split
    if result.commit is None:  # one manifest per group, each under the target
        assert all(m.manifest_length is None or m.manifest_length <= 4096 for m in listed(tbl))
    else:  # manifests rewritten (or, with none to split, those holding DELETED entries only dropped)
        assert result.rewritten_manifests
    tbl.refresh()
    assert_same_rows(tbl.scan().to_arrow(), before, context=f"{rel}: after rewrite_manifests")
    assert _files(tbl) == files
    assert tree_state(SHARED / rel) == fixture_state


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("100", r"target_size_bytes='100': expected an integer in 1\.\.9223372036854775807, not str"),
        (1.5, r"target_size_bytes=1.5: .* not float"),
        (float("inf"), r"target_size_bytes=inf: .* not float"),
        (True, r"target_size_bytes=True: .* not a bool"),
        (0, r"target_size_bytes=0: expected an integer in 1\.\."),
        (2**63, r"target_size_bytes=9223372036854775808: expected an integer in 1\.\.9223372036854775807"),
    ],
)
def test_a_bad_target_size_is_named(tmp_path: Path, target: object, message: str) -> None:
    """InvalidOption naming target_size_bytes (1.5, inf and True were taken as sizes, '100' a TypeError);
    nothing is committed."""
    tbl = make(tmp_path, 2)
    history(tbl, appends=2)
    location = tbl.metadata_location
    with pytest.raises(InvalidOption, match=message):
        tbl.rewrite_manifests(target_size_bytes=target)  # type: ignore[arg-type]
    assert tbl.refresh().metadata_location == location

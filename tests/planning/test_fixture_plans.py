"""Every fixture table plans: the current snapshot and every historical snapshot whose files exist.

Three independent checks of what the planner produces:
- the spec's "Scan Planning" delete rules, recomputed here from the raw manifest entries by a tiny
  pure-Python index (entries are trusted input; the planner's index is what is under test);
- PyIceberg 0.12's ``plan_files`` on the same metadata (a FileIO that applies our path map), wherever
  PyIceberg can plan (it refuses equality deletes and cannot parse v3 ``variant`` schemas);
- INVENTORY.json's count of unresolvable file references (missing manifest lists, manifests, data files).
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import StaticTable

from gpu_engine.errors import ManifestError
from gpu_engine.io.paths import PathMap, normalize
from gpu_engine.planning.scan import ScanOptions, plan_scan
from gpu_engine.table import Table
from gpu_engine.tasks import ScanPlan

from ._support import (
    FIXTURES,
    MISSING,
    Entry,
    RemappingFileIO,
    exists,
    inventory,
    inventory_paths,
    live_entries,
    load,
    missing_metadata_files,
    require_fixtures,
    spec_deletes,
    unpartitioned_specs,
)

TABLES = inventory_paths()

# Tables whose delete handling the spec-rule check must see exercised, with the delete kinds that must
# be applied to at least one data file of the current snapshot.
DELETE_HEAVY: dict[str, set[str]] = {
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality": {"eq"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_multi_eq_ids": {"eq"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_nulls": {"eq"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partitioned": {"eq"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partition_evolution": {"eq"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_equality_delete_schema_evolution": {"eq"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_both_eq_and_pos": {"eq", "pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_pos_and_multi_eq_ids": {"eq", "pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_positional": {"pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_partitioned_position_deletes": {"pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_positional_not_all_data_files_have_delete_files": {
        "pos"
    },
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_positional_update_all_rows": {"pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_positional_delete_all_rows": {"pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_null_delete_record": {"pos"},
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_lineitem_multiblock": {"pos"},
    # its one position delete file names (by equal file_path bounds) a data file compaction removed
    "impala/iceberg_test/hadoop_catalog/ice/iceberg_spark_compaction_with_dangling_delete": set(),
    "impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors": {"dv"},
    "pg_lake/sample_tables_v3/public/v3_pos_dv": {"dv"},
    "dremio-oss/iceberg/v2/products_with_eq_deletes": {"eq", "pos"},
    "dremio-oss/iceberg/v2/multi_rowgroup_orders_with_deletes": {"pos"},
    "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable": {"eq"},
    "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned": {"eq"},
}

# Measured 2026-11 with PyIceberg 0.12.0: tables / (table, snapshot) pairs cross-checked. The test fails
# if cross-checking silently stops (PyIceberg upgrade, a broken FileIO, a planner regression).
PYICEBERG_TABLES_FLOOR = 87
PYICEBERG_SNAPSHOTS_FLOOR = 173


def _short(rel: str) -> str:
    return rel.removeprefix("fixtures/")


def planned_deletes(plan: ScanPlan) -> dict[str, set[tuple[str, int | None]]]:
    out: dict[str, set[tuple[str, int | None]]] = {}
    for task in plan.tasks:
        keys = [(normalize(d.path), d.content_offset) for d in task.deletes]
        assert len(keys) == len(set(keys)), f"{task.file.path}: a delete file is listed twice: {keys}"
        path = normalize(task.file.path)
        if path in out:
            assert out[path] == set(keys), f"{path}: split tasks disagree on deletes"
        out[path] = set(keys)
    return out


def check_against_spec(
    tbl: Table, snapshot_id: int, plan: ScanPlan
) -> dict[str, set[tuple[str, int | None]]]:
    snapshot = tbl.metadata.snapshot_by_id(snapshot_id)
    entries = live_entries(tbl, snapshot)
    expected = spec_deletes(entries, unpartitioned_specs(tbl.metadata))
    got = planned_deletes(plan)
    assert set(got) == set(expected), (
        f"snapshot {snapshot_id}: planned data files differ from the live manifest entries: "
        f"missing {sorted(set(expected) - set(got))}, extra {sorted(set(got) - set(expected))}"
    )
    wrong = {p: (sorted(expected[p]), sorted(got[p])) for p in expected if not got[p] <= expected[p]}
    assert not wrong, f"snapshot {snapshot_id}: deletes beyond the spec rules (expected, got): {wrong}"
    by_key = {e.key: e for e in entries}
    skipped = sum(len(expected[p] - got[p]) for p in expected)
    assert plan.summary.delete_attachments_skipped == skipped, (
        f"snapshot {snapshot_id}: the summary counts {plan.summary.delete_attachments_skipped} skipped "
        f"delete attachments, the spec rules less the plan {skipped}"
    )
    for path in expected:
        for key in expected[path] - got[path]:
            left_out = by_key[key]
            assert left_out.content in (1, 2) and not left_out.is_dv, (
                f"snapshot {snapshot_id}: {path}: the spec's {key} is missing (only equality deletes and "
                "partition-scoped position deletes that cannot match may be left out)"
            )
            found = _matches(path, left_out) if left_out.content == 2 else _positions_for(tbl, path, left_out)
            assert found == 0, (
                f"snapshot {snapshot_id}: delete file {key} was left out of {path} but deletes rows of it"
            )
    return {p: set(keys) for p, keys in got.items()}


def _positions_for(tbl: Table, data_path: str, delete: Entry) -> int:
    """How many rows of the position delete file name the data file (read independently)."""
    assert delete.file_format.upper() == "PARQUET", f"{delete.path}: reading {delete.file_format} not wired"
    paths = pq.read_table(delete.path, columns=["file_path"]).column("file_path").to_pylist()
    return sum(normalize(tbl.io.path_map.apply(p)) == data_path for p in paths)


def _by_field_id(path: str, ids: Sequence[int]) -> list[tuple[object, ...]] | None:
    """The rows of the Parquet file's columns with ``ids`` (by Parquet field id), None where one is absent."""
    pf = pq.ParquetFile(path)  # entries' paths are remapped and normalised: local
    names = {}
    for f in pf.schema_arrow:
        if f.metadata and b"PARQUET:field_id" in f.metadata:
            names[int(f.metadata[b"PARQUET:field_id"])] = f.name
    if not set(ids) <= names.keys():
        return None
    table = pf.read(columns=[names[i] for i in ids])
    return list(zip(*(table.column(names[i]).to_pylist() for i in ids), strict=True))


def _matches(data_path: str, delete: Entry) -> int:
    """How many rows of the data file equal a key of the equality delete (null equal to null), read
    independently of the planner; a data file without one of the key columns cannot be ruled out (-1)."""
    ids = delete.equality_ids
    keys = _by_field_id(delete.path, ids)
    rows = _by_field_id(data_path, ids)
    assert keys is not None, f"{delete.path} lacks its own equality columns {ids}"
    if rows is None:
        return -1
    wanted = set(keys)
    return sum(row in wanted for row in rows)


# -- every table, every snapshot -------------------------------------------------------------------------


def test_inventory_lists_96_tables() -> None:
    require_fixtures()
    assert len(inventory()) == 96


def _missing_refs(tbl: Table) -> set[str]:
    """Distinct files a snapshot refers to that do not exist: manifest lists, manifests, data, deletes."""
    missing: set[str] = set()
    for snapshot in tbl.metadata.snapshots:
        gone = missing_metadata_files(tbl, snapshot)
        if gone:
            missing.update(normalize(p) for p in gone)
            continue
        plan = plan_scan(tbl.metadata, tbl.io, ScanOptions(snapshot_id=snapshot.snapshot_id))
        for task in plan.tasks:
            for path in (task.file.path, *(d.path for d in task.deletes)):
                if not exists(path):
                    missing.add(normalize(path))
    return missing


@pytest.mark.parametrize("rel", TABLES, ids=_short)
def test_every_resolvable_snapshot_plans(rel: str) -> None:
    tbl = load(rel)
    md = tbl.metadata
    current = plan_scan(md, tbl.io, ScanOptions())
    assert current.summary.snapshot_id == md.current_snapshot_id
    if md.current_snapshot_id is None:
        assert current.tasks == ()
    else:
        by_id = plan_scan(md, tbl.io, ScanOptions(snapshot_id=md.current_snapshot_id))
        assert by_id.tasks == current.tasks
    unresolvable = 0
    for snapshot in md.snapshots:
        sid = snapshot.snapshot_id
        gone = missing_metadata_files(tbl, snapshot)
        if gone:
            unresolvable += 1
            with pytest.raises(ManifestError) as err:
                plan_scan(md, tbl.io, ScanOptions(snapshot_id=sid))
            assert any(p in str(err.value) for p in gone), f"error does not name a missing file: {err.value}"
            continue
        plan = plan_scan(md, tbl.io, ScanOptions(snapshot_id=sid))
        s = plan.summary
        files = {t.file.path for t in plan.tasks}
        deletes = {(d.path, d.content_offset) for t in plan.tasks for d in t.deletes}
        assert s.snapshot_id == sid
        assert s.tasks == len(plan.tasks)
        assert s.data_files_pruned_by_partition == s.data_files_pruned_by_metrics == 0
        assert s.data_files_kept == s.data_files_total == len(files)
        assert s.delete_files_applied == len(deletes) <= s.delete_files_total
        sizes = {t.file.path: t.file.file_size_in_bytes for t in plan.tasks}
        assert s.bytes_kept == s.bytes_total == sum(sizes.values())
        for path in sorted(files | {p for p, _ in deletes}):
            assert exists(path), f"snapshot {sid}: planned file {path} does not exist (path not remapped?)"
        check_against_spec(tbl, sid, plan)
    # INVENTORY counts distinct unresolvable references with only the table location remapped
    expected_missing = inventory()[rel]["unresolvable_refs_in_any_snapshot"]
    relocated_only = load(rel, extra=False) if inventory()[rel].get("extra_remap") else tbl
    assert len(_missing_refs(relocated_only)) == expected_missing
    if relocated_only is not tbl:
        assert not _missing_refs(tbl), "extra_remap should resolve every reference"
    assert unresolvable <= expected_missing


def test_snapshots_without_manifest_lists_fail_cleanly() -> None:
    """SOURCES.md: spark_generated_iceberg_test_2 lacks 3 manifest lists; mytable 1 (misnamed)."""
    for rel, count in (
        ("pg_lake/sample_tables/public/spark_generated_iceberg_test_2", 3),
        ("duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable", 1),
    ):
        tbl = load(rel)
        failed = []
        for snapshot in tbl.metadata.snapshots:
            try:
                plan_scan(tbl.metadata, tbl.io, ScanOptions(snapshot_id=snapshot.snapshot_id))
            except ManifestError as exc:
                assert snapshot.manifest_list is not None
                assert Path(snapshot.manifest_list).name in str(exc)
                assert "not found" in str(exc)
                failed.append(snapshot.snapshot_id)
        assert len(failed) == count, rel
        assert tbl.metadata.current_snapshot_id not in failed


# -- the spec-rule check exercised on the delete-heavy tables ------------------------------------------


def _kinds(entries: list[Entry], applied: dict[str, set[tuple[str, int | None]]]) -> set[str]:
    by_key = {e.key: e for e in entries if e.content != 0}
    kinds = set()
    for keys in applied.values():
        for key in keys:
            e = by_key[key]
            kinds.add("dv" if e.is_dv else "pos" if e.content == 1 else "eq")
    return kinds


@pytest.mark.parametrize("rel", sorted(DELETE_HEAVY), ids=str)
def test_delete_heavy_tables_follow_the_spec_rules(rel: str) -> None:
    tbl = load(rel)
    snapshot = tbl.metadata.current_snapshot()
    assert snapshot is not None
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    expected = check_against_spec(tbl, snapshot.snapshot_id, plan)
    assert DELETE_HEAVY[rel] <= _kinds(live_entries(tbl, snapshot), expected)


FILTERED = [
    ("dremio-oss/iceberg/v2/products_with_eq_deletes", "category = 'widget'"),
    ("dremio-oss/iceberg/v2/products_with_eq_deletes", "product_id >= 500 and color != 'green'"),
    ("dremio-oss/iceberg/v2/products_with_eq_deletes", "color = 'green' or category = 'gizmo'"),
    ("impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partitioned", "d = '2023-12-24'"),
    ("impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partitioned", "i > 2"),
    (
        "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_equality_delete_schema_evolution",
        "d >= '2024-03-21'",
    ),
    ("impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_partitioned_position_deletes", "action = 'view'"),
    ("impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_both_eq_and_pos", "i < 3"),
    ("impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors", "i > 3"),
    ("pg_lake/sample_tables_v3/public/v3_pos_dv", "id = 1"),
    ("dremio-oss/iceberg/v2/multi_rowgroup_orders_with_deletes", "order_year = 2020"),
    (
        "duckdb-iceberg/data/persistent/equality_deletes/warehouse/mydb/mytable_partitioned",
        "name in ('a', 'b')",
    ),
    ("duckdb-iceberg/data/persistent/equality_delete_cross_partition/warehouse/ns/t", "part = 1"),
    ("duckdb-iceberg/data/persistent/equality_delete_extra_column/warehouse/ns/t", "val = 'x'"),
]


@pytest.mark.parametrize(("rel", "row_filter"), FILTERED)
def test_filters_keep_the_deletes_of_kept_files(rel: str, row_filter: str) -> None:
    """Delete files are pruned only by partition, and partition-scoped deletes share the data file's
    partition: a kept data file gets the same deletes with or without a filter, in every snapshot."""
    tbl = load(rel)
    for snapshot in tbl.metadata.snapshots:
        if missing_metadata_files(tbl, snapshot):
            continue
        sid = snapshot.snapshot_id
        full = planned_deletes(plan_scan(tbl.metadata, tbl.io, ScanOptions(snapshot_id=sid)))
        filtered = plan_scan(tbl.metadata, tbl.io, ScanOptions(snapshot_id=sid, filter=row_filter))
        got = planned_deletes(filtered)
        assert set(got) <= set(full)
        for path, deletes in got.items():
            assert deletes == full[path], f"snapshot {sid}, {path}: {sorted(deletes)} != {sorted(full[path])}"
        assert filtered.summary.delete_files_applied == len({k for ks in got.values() for k in ks})


def _by_name(plan: ScanPlan) -> dict[str, set[str]]:
    return {Path(t.file.path).name: {Path(d.path).name for d in t.deletes} for t in plan.tasks}


def test_products_with_eq_deletes_pinned() -> None:
    """Derived by hand from the manifests: identity(category) partitions; eq deletes at seq 2, 4, 6 and a
    position delete (no referenced file) at seq 7; data at seq 1, 3 and 5."""
    tbl = load("dremio-oss/iceberg/v2/products_with_eq_deletes")
    assert _by_name(plan_scan(tbl.metadata, tbl.io, ScanOptions())) == {
        "widget-00.parquet": {
            "eqdelete-widget-00.parquet",
            "eqdelete-widget-01.parquet",
            "eqdelete-widget-02.parquet",
            "delete-widget-00.parquet",
        },
        "widget-01.parquet": {"eqdelete-widget-02.parquet", "delete-widget-00.parquet"},
        "gadget-00.parquet": {"eqdelete-gadget-00.parquet"},
        "gizmo-00.parquet": {"eqdelete-gizmo-00.parquet", "eqdelete-gizmo-01.parquet"},
        "gizmo-01.parquet": {"eqdelete-gizmo-01.parquet"},
    }


def test_equality_deletes_skip_data_of_the_same_sequence_number() -> None:
    """Flink writes data and equality deletes in one commit: they share a sequence number, and the
    deletes of a commit apply only to older data (strictly smaller sequence number)."""
    tbl = load("impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_delete_equality_partition_evolution")
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    by_seq = {t.file.data_sequence_number: {d.data_sequence_number for d in t.deletes} for t in plan.tasks}
    assert by_seq == {1: {2}, 2: set()}


def test_position_delete_files_with_equal_file_path_bounds_apply_to_that_file_only() -> None:
    """Impala writes one position delete file per data file without ``referenced_data_file``; its
    ``file_path`` lower and upper bounds are equal. Such a file is planned for the data file it names
    (read from the delete file itself) and no other file of the partition."""
    tbl = load(
        "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_positional_not_all_data_files_have_delete_files"
    )
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    planned = [(t.file.path, d) for t in plan.tasks for d in t.deletes]
    assert len(plan.tasks) == 4 and len(planned) == 2
    for data_path, d in planned:
        named = pq.read_table(tbl.io.path_map.apply(d.path), columns=["file_path"]).column(0).unique()
        assert [normalize(tbl.io.path_map.apply(p)) for p in named.to_pylist()] == [normalize(data_path)]
        assert normalize(d.referenced_data_file or "") == normalize(data_path)


def test_deletion_vectors_apply_only_to_their_referenced_file() -> None:
    """One Puffin file, two DV blobs (one per data file) and five data files."""
    tbl = load("impala/iceberg_test/iceberg_v3/iceberg_v3_deletion_vectors")
    plan = plan_scan(tbl.metadata, tbl.io, ScanOptions())
    with_dv = {t.file.path: t.deletes for t in plan.tasks if t.deletes}
    assert len(plan.tasks) == 5 and len(with_dv) == 2
    for path, deletes in with_dv.items():
        assert len(deletes) == 1 and deletes[0].is_deletion_vector
        assert normalize(deletes[0].referenced_data_file or "") == normalize(path)
    assert len({d[0].content_offset for d in with_dv.values()}) == 2


# -- PyIceberg cross-check ----------------------------------------------------------------------------


@dataclass
class CrossCheck:
    compared: Counter[str] = field(default_factory=Counter)  # table -> snapshots compared
    skipped: dict[str, list[str]] = field(default_factory=dict)  # table -> reasons (snapshots not compared)
    notes: dict[str, set[str]] = field(default_factory=dict)
    mismatches: dict[str, list[str]] = field(default_factory=dict)

    def note(self, rel: str, what: str) -> None:
        self.notes.setdefault(rel, set()).add(what)


EQ_REFUSED = "PyIceberg 0.12 refuses equality deletes"
DV_NOTE = (
    "DVs left out of the PyIceberg comparison: PyIceberg 0.12 applies a DV to every data file of its "
    "partition, ignoring referenced_data_file; DVs are checked against the spec rules instead"
)
BOUNDS_NOTE = (
    "PyIceberg narrows position deletes by their file_path bounds; the extra position deletes planned "
    "here all have bounds that exclude the data file (harmless, and allowed by the spec's scope rules)"
)


def _bounds_exclude(entry: Entry, data_path: str, path_map: PathMap) -> bool:
    if entry.path_lower is None or entry.path_upper is None:
        return False
    lower = normalize(path_map.apply(entry.path_lower.decode()))
    upper = normalize(path_map.apply(entry.path_upper.decode()))
    return data_path < lower or data_path > upper


def _compare(rel: str, tbl: Table, static: StaticTable, snapshot_id: int, result: CrossCheck) -> None:
    path_map = tbl.io.path_map
    ours = plan_scan(tbl.metadata, tbl.io, ScanOptions(snapshot_id=snapshot_id))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = list(static.scan(snapshot_id=snapshot_id).plan_files())
    except ValueError as exc:
        if "equality deletes" not in str(exc):
            raise
        result.skipped.setdefault(rel, []).append(f"snapshot {snapshot_id}: {EQ_REFUSED}")
        return
    entries = {e.key: e for e in live_entries(tbl, tbl.metadata.snapshot_by_id(snapshot_id))}
    by_path = {e.path: e for e in entries.values() if e.content == 1 and not e.is_dv}
    got: dict[str, set[str]] = {}
    for task in ours.tasks:
        got[normalize(task.file.path)] = {normalize(d.path) for d in task.deletes if not d.is_deletion_vector}
        if any(d.is_deletion_vector for d in task.deletes):
            result.note(rel, DV_NOTE)
    want: dict[str, set[str]] = {}
    for scan_task in theirs:
        pos = set()
        for d in scan_task.delete_files:
            if d.file_format.name == "PUFFIN":
                result.note(rel, DV_NOTE)
            else:
                pos.add(normalize(path_map.apply(d.file_path)))
        want[normalize(path_map.apply(scan_task.file.file_path))] = pos
    problems = []
    if set(got) != set(want):
        problems.append(
            f"data files: only ours {set(got) - set(want)}, only PyIceberg {set(want) - set(got)}"
        )
    for path in set(got) & set(want):
        if not want[path] <= got[path]:
            problems.append(f"{path}: PyIceberg applies {want[path] - got[path]} that we do not")
        for extra in got[path] - want[path]:
            if _bounds_exclude(by_path[extra], path, path_map):
                result.note(rel, BOUNDS_NOTE)
            else:
                problems.append(
                    f"{path}: we apply {extra}, PyIceberg does not, and its bounds allow the file"
                )
    if problems:
        result.mismatches.setdefault(rel, []).extend(f"snapshot {snapshot_id}: {p}" for p in problems)
    result.compared[rel] += 1


@pytest.fixture(scope="module")
def pyiceberg_cross_check() -> CrossCheck:
    require_fixtures()
    result = CrossCheck()
    for rel in TABLES:
        tbl = load(rel)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                static = StaticTable.from_metadata(tbl.metadata_location)
        except Exception as exc:  # PyIceberg's own limits (pydantic errors on v3 variant types, ...)
            first = str(exc).splitlines()[0:3]
            result.skipped[rel] = [
                f"PyIceberg cannot load the metadata: {type(exc).__name__}: {' '.join(first)}"
            ]
            continue
        static.io = RemappingFileIO(tbl.io.path_map)
        for snapshot in tbl.metadata.snapshots:
            if missing_metadata_files(tbl, snapshot):
                continue  # unresolvable: checked to fail cleanly above
            _compare(rel, tbl, static, snapshot.snapshot_id, result)
    return result


@pytest.mark.parametrize("rel", TABLES, ids=_short)
def test_pyiceberg_plans_the_same_files(rel: str, pyiceberg_cross_check: CrossCheck) -> None:
    result = pyiceberg_cross_check
    assert not result.mismatches.get(rel), "\n".join(result.mismatches[rel])
    if not result.compared[rel]:
        reasons = result.skipped.get(rel) or ["no snapshot"]
        pytest.skip("; ".join(sorted(set(re.sub(r"snapshot \d+: ", "", r) for r in reasons))))


def test_pyiceberg_cross_check_floor(pyiceberg_cross_check: CrossCheck) -> None:
    result = pyiceberg_cross_check
    tables = sum(1 for n in result.compared.values() if n)
    snapshots = sum(result.compared.values())
    assert tables >= PYICEBERG_TABLES_FLOOR, (tables, result.skipped)
    assert snapshots >= PYICEBERG_SNAPSHOTS_FLOOR, (snapshots, result.skipped)
    # the known limits of PyIceberg, recorded so that a change is noticed
    eq_tables = {rel for rel, reasons in result.skipped.items() if any(EQ_REFUSED in r for r in reasons)}
    assert len(eq_tables) >= 10
    unloadable = {rel for rel, reasons in result.skipped.items() if "cannot load" in reasons[0]}
    assert unloadable <= {
        f"fixtures/impala/iceberg_test/iceberg_v3/{t}" for t in ("trino_variant", "trino_nested_variant")
    }
    assert str(FIXTURES)  # fixtures were found (require_fixtures ran)


def test_missing_marker_unused() -> None:
    assert MISSING not in TABLES, f"fixtures not found at {FIXTURES}"

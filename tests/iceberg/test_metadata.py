"""Table metadata: lossless round trip of every fixture metadata file, semantics on known tables, and
bad input that must fail naming the file."""

from __future__ import annotations

import copy
import dataclasses
import gzip
import itertools
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from gpu_engine.errors import MetadataError, SnapshotNotFound
from gpu_engine.iceberg.metadata import TableMetadata, metadata_from_json, metadata_to_json, parse_metadata
from gpu_engine.iceberg.schema import schema_to_json

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"
BRANCHES_TAGS = "pg_lake/sample_tables_v3/public/v3_branches_tags/metadata/v6.metadata.json"
V2_FILE = (
    "pg_lake/sample_tables/public/spark_generated_iceberg_test/metadata/"
    "00009-5c29aedb-463b-4b80-b0d5-c1d7fc957770.metadata.json"
)


def _metadata_files() -> list[Any]:
    files = sorted(p for p in FIXTURES.rglob("*.metadata.json*") if p.is_file()) if FIXTURES.is_dir() else []
    if not files:  # fixtures are part of CI: a missing checkout must fail, not skip
        return [pytest.param(None, id="fixtures-missing")]
    return [pytest.param(p, id=str(p.relative_to(FIXTURES))) for p in files]


METADATA_FILES = _metadata_files()


def _require_fixtures() -> None:
    if not FIXTURES.is_dir():
        pytest.fail(f"fixture directory {FIXTURES} is missing: check out shared/ beside the repository")


def _raw_json(path: Path) -> Any:
    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def _load(rel: str) -> TableMetadata:
    _require_fixtures()
    path = FIXTURES / rel
    return parse_metadata(path.read_bytes(), source=str(path))


def _latest(table_dir: str) -> str:
    """The newest ``vN.metadata.json`` of a Hadoop-catalog table, by N (``v10`` after ``v9``)."""
    _require_fixtures()
    files = (FIXTURES / table_dir).glob("v*.metadata.json")
    return str(max(files, key=lambda p: int(p.name[1:].split(".")[0])).relative_to(FIXTURES))


# -- round trip ------------------------------------------------------------------------------------------


def test_fixture_directory_is_there() -> None:
    _require_fixtures()
    assert len(METADATA_FILES) > 300, f"expected ~347 metadata files under {FIXTURES}"


@pytest.mark.parametrize("path", METADATA_FILES)
def test_round_trip_is_lossless(path: Path | None) -> None:
    _require_fixtures()
    assert path is not None
    md = parse_metadata(path.read_bytes(), source=str(path))
    original = _raw_json(path)
    assert metadata_to_json(md) == original
    assert metadata_to_json(metadata_from_json(original, source=str(path))) == original
    assert pickle.loads(pickle.dumps(md)) == md
    assert md.format_version == original["format-version"]
    assert md.schema.schema_id == md.current_schema_id
    assert md.spec.spec_id == md.default_spec_id
    assert md.sort_order.order_id == md.default_sort_order_id


def test_metadata_built_in_code_serializes_as_the_reference_implementation_writes() -> None:
    """Without the keys read (json_keys=None), the JSON written parses back to an equal model."""
    _require_fixtures()
    for param in METADATA_FILES:
        path = param.values[0]
        md = dataclasses.replace(
            parse_metadata(path.read_bytes(), source=str(path)), json_keys=None, extra=()
        )
        out = metadata_to_json(md)
        assert metadata_from_json(out, source=str(path)) == md, path
        if md.format_version >= 2:
            assert "schema" not in out and "partition-spec" not in out
            assert out["last-sequence-number"] == md.last_sequence_number
        else:
            assert "last-sequence-number" not in out and out["schema"] == schema_to_json(md.schema)
        if md.current_snapshot_id is None:
            assert out["current-snapshot-id"] == (None if md.format_version == 3 else -1)


# -- semantics on known tables -----------------------------------------------------------------------------


def test_branches_and_tags() -> None:
    md = _load(BRANCHES_TAGS)
    assert set(md.refs) == {"main", "audit", "v1"}
    assert md.snapshot_for_ref("main") == md.current_snapshot()
    assert md.snapshot_for_ref("main").snapshot_id == 4363037235887043187
    audit, tag = md.refs["audit"], md.refs["v1"]
    assert audit.is_branch and (audit.min_snapshots_to_keep, audit.max_snapshot_age_ms) == (5, 604800000)
    assert audit.max_ref_age_ms == 2592000000
    assert tag.is_tag and tag.max_ref_age_ms == 5184000000 and tag.min_snapshots_to_keep is None
    assert md.snapshot_for_ref("audit").snapshot_id == 7594869993017634045
    assert md.snapshot_for_ref("v1").snapshot_id == 5354682886017325803
    assert md.snapshot_for_ref("v1").sequence_number == 1
    with pytest.raises(SnapshotNotFound, match=r"no branch or tag named 'nope'.*audit"):
        md.snapshot_for_ref("nope")


def test_ancestor_ids_walk_parents_until_one_is_missing() -> None:
    md = _load(BRANCHES_TAGS)
    chain = md.ancestor_ids(4363037235887043187)
    assert chain[0] == 4363037235887043187 and len(chain) == len(set(chain))
    for child, parent in itertools.pairwise(chain):
        assert md.snapshot_by_id(child).parent_snapshot_id == parent
    oldest = md.snapshot_by_id(chain[-1])
    assert oldest.parent_snapshot_id is None or oldest.parent_snapshot_id not in md.snapshots_by_id
    trimmed = dataclasses.replace(md, snapshots=tuple(s for s in md.snapshots if s.snapshot_id != chain[1]))
    assert trimmed.ancestor_ids(chain[0]) == (chain[0],)  # an expired parent ends the walk
    assert md.ancestor_ids(12345) == ()


def test_snapshot_as_of_follows_the_snapshot_log() -> None:
    md = _load(BRANCHES_TAGS)
    log = [(e.timestamp_ms, e.snapshot_id) for e in md.snapshot_log]
    assert log == [
        (1779298838962, 5354682886017325803),
        (1779298839350, 7594869993017634045),
        (1779298839847, 4363037235887043187),
    ]
    assert md.snapshot_as_of(1779298838962).snapshot_id == 5354682886017325803  # at the entry: inclusive
    assert md.snapshot_as_of(1779298839349).snapshot_id == 5354682886017325803
    assert md.snapshot_as_of(1779298839350).snapshot_id == 7594869993017634045
    assert md.snapshot_as_of(2**62) == md.current_snapshot()
    with pytest.raises(SnapshotNotFound, match=r"no snapshot at or before timestamp 1779298838961"):
        md.snapshot_as_of(1779298838961)


def test_snapshot_as_of_uses_the_log_not_snapshot_timestamps() -> None:
    """A rollback: the log says snapshot A was current again after B, whatever the snapshots' timestamps."""
    raw = _raw_json(FIXTURES / BRANCHES_TAGS)
    first, second = raw["snapshot-log"][0]["snapshot-id"], raw["snapshot-log"][1]["snapshot-id"]
    raw["snapshot-log"].append({"timestamp-ms": 1779298900000, "snapshot-id": first})
    md = metadata_from_json(raw, source="rollback")
    assert md.snapshot_as_of(1779298899999).snapshot_id == raw["current-snapshot-id"]
    assert md.snapshot_as_of(1779298900000).snapshot_id == first != second


def test_snapshot_as_of_an_expired_snapshot_is_an_error() -> None:
    md = _load(
        "impala/iceberg_test/hadoop_catalog/ice/iceberg_v2_null_delete_record/metadata/v1.metadata.json"
    )
    assert md.snapshot_as_of(1712662161442).snapshot_id == md.current_snapshot_id
    with pytest.raises(SnapshotNotFound, match=r"snapshot 1905028041526857588.*expired"):
        md.snapshot_as_of(1712662151105)
    with pytest.raises(SnapshotNotFound, match="no snapshot with id 1905028041526857588"):
        md.snapshot_by_id(1905028041526857588)


def test_implied_main_branch_is_a_view() -> None:
    rel = "impala/iceberg_test/iceberg_partitioned/metadata/v2.metadata.json"
    md = _load(rel)
    assert md.format_version == 1 and md.snapshot_refs == {}
    assert set(md.refs) == {"main"} and md.refs["main"].is_branch
    assert md.snapshot_for_ref("main") == md.current_snapshot()
    assert "refs" not in metadata_to_json(md)


def test_v1_without_current_snapshot_and_legacy_schema_disagreeing() -> None:
    rel = "impala/iceberg_test/hadoop_catalog/ice/iceberg_uppercase_col/metadata/v1.metadata.json"
    md = _load(rel)
    assert md.current_snapshot_id is None and md.current_snapshot() is None and md.refs == {}
    assert md.schema.fields[0].name == "region"  # "schemas" wins over the deprecated "schema"
    out = metadata_to_json(md)
    assert out["current-snapshot-id"] == -1 and out["schema"]["fields"][0]["name"] == "Region"
    assert md.last_sequence_number == 0 and "last-sequence-number" not in out


def test_v3_without_current_snapshot_keeps_null() -> None:
    md = _load("pg_lake/sample_tables_v3/public/v3_minimal/metadata/v1.metadata.json")
    assert md.current_snapshot() is None and md.snapshots == () and md.refs == {}
    assert (
        "current-snapshot-id" in metadata_to_json(md) and metadata_to_json(md)["current-snapshot-id"] is None
    )


def test_v1_snapshots_read_sequence_number_zero() -> None:
    md = _load(_latest("duckdb-iceberg/data/iceberg/generated_spec1_0_001/pyspark_iceberg_table/metadata"))
    assert md.format_version == 1 and len(md.snapshots) == 7
    assert all(s.sequence_number == 0 and not s.sequence_number_written for s in md.snapshots)
    assert all("sequence-number" not in s for s in metadata_to_json(md)["snapshots"])
    assert [s.schema_id for s in md.snapshots if s.schema_id is not None]
    assert md.schema_by_id(md.current_schema_id) == md.schema and len(md.schemas) == 3


def test_v2_sequence_numbers_and_operations() -> None:
    md = _load(V2_FILE)
    assert [s.sequence_number for s in md.snapshots] == list(range(1, len(md.snapshots) + 1))
    assert md.last_sequence_number == max(s.sequence_number for s in md.snapshots)
    assert {s.operation for s in md.snapshots} <= {"append", "overwrite", "delete", "replace"}
    assert all(s.manifest_list and s.manifests is None for s in md.snapshots)


@pytest.mark.parametrize(
    ("table", "next_row_id", "lineage"),
    [
        (
            "impala/iceberg_test/iceberg_v3/iceberg_v3_row_lineage/metadata",
            6,
            [(0, 1), (1, 1), (2, 1), (3, 3)],
        ),
        (
            "pg_lake/sample_tables_v3/public/v3_row_lineage_appends/metadata",
            26,
            [(0, 2), (2, 3), (5, 1), (6, 20)],
        ),
    ],
)
def test_v3_row_lineage(table: str, next_row_id: int, lineage: list[tuple[int, int]]) -> None:
    md = _load(_latest(table))
    assert md.format_version == 3 and md.next_row_id == next_row_id
    assert [(s.first_row_id, s.added_rows) for s in md.snapshots] == lineage


def test_v3_next_row_id_is_above_every_assigned_row_id() -> None:
    _require_fixtures()
    checked = 0
    for param in METADATA_FILES:
        md = parse_metadata(param.values[0].read_bytes(), source=str(param.values[0]))
        if md.format_version == 3:
            assert md.next_row_id is not None
            for s in md.snapshots:
                assert s.first_row_id is not None and s.added_rows is not None
                assert s.first_row_id + s.added_rows <= md.next_row_id, param.id
            checked += 1
    assert checked > 50


def test_partition_spec_evolution_and_schemas() -> None:
    md = _load(_latest("pg_lake/sample_tables_v3/public/v3_partitioned_temporal/metadata"))
    assert sorted(md.specs) == [0, 1, 2, 3]
    assert [md.spec_by_id(i).fields[0].transform for i in range(4)] == ["year", "month", "day", "hour"]
    assert md.spec == md.spec_by_id(3) and md.last_partition_id == max(f.field_id for f in md.spec.fields)
    with pytest.raises(MetadataError, match=r"no partition spec with id 9"):
        md.spec_by_id(9)
    evo = _load(_latest("pg_lake/sample_tables_v3/public/v3_evolution_full/metadata"))
    assert len(evo.schemas) == 8 and evo.schema == evo.schema_by_id(evo.current_schema_id)
    with pytest.raises(MetadataError, match=r"no schema with id 99"):
        evo.schema_by_id(99)


def test_statistics_files() -> None:
    md = _load("impala/iceberg_test/iceberg_with_puffin_stats/metadata/v3.metadata.json")
    (stats,) = md.statistics
    assert stats.snapshot_id == md.current_snapshot_id and stats.file_size_in_bytes == 534
    assert stats.file_footer_size_in_bytes == 440 and stats.statistics_path.endswith(".stats")
    assert [(b.type, b.fields, dict(b.properties or {})) for b in stats.blob_metadata] == [
        ("apache-datasketches-theta-v1", (1,), {"ndv": "2"}),
        ("apache-datasketches-theta-v1", (2,), {"ndv": "2"}),
    ]


def test_gzip_metadata_by_magic_bytes(tmp_path: Path) -> None:
    gz = _load("duckdb-iceberg/data/persistent/iceberg/lineitem_iceberg_gz/metadata/v2.gz.metadata.json")
    assert gz.current_snapshot() is not None and gz.location == "./lineitem_iceberg_gz"
    plain_path = FIXTURES / BRANCHES_TAGS
    compressed = tmp_path / "00006-x.metadata.json.gz"
    compressed.write_bytes(gzip.compress(plain_path.read_bytes()))
    assert parse_metadata(compressed.read_bytes(), source=str(compressed)) == _load(BRANCHES_TAGS)


def test_v1_manifests_lists_and_sorted_orders_round_trip() -> None:
    """No fixture uses v1's embedded ``manifests`` list: rewrite one v1 table's snapshots to it."""
    raw = _raw_json(FIXTURES / "impala/iceberg_test/iceberg_partitioned/metadata/v2.metadata.json")
    for s in raw["snapshots"]:
        s["manifests"] = ["/wh/m1.avro", "/wh/m2.avro"]
        del s["manifest-list"]
    md = metadata_from_json(copy.deepcopy(raw), source="v1-manifests")
    current = md.current_snapshot()
    assert current is not None and current.manifests == ("/wh/m1.avro", "/wh/m2.avro")
    assert current.manifest_list is None and current.sequence_number == 0
    assert metadata_to_json(md) == raw


def test_unknown_keys_and_nulls_are_kept() -> None:
    raw = _raw_json(FIXTURES / BRANCHES_TAGS)
    raw["x-vendor"] = {"a": [1, 2]}
    raw["refs"]["audit"]["x-note"] = "kept"
    raw["snapshots"][0]["parent-snapshot-id"] = None
    raw["statistics"] = None
    md = metadata_from_json(copy.deepcopy(raw), source="extra")
    assert md.snapshots[0].parent_snapshot_id is None and md.statistics == ()
    assert metadata_to_json(md) == raw


def test_encryption_keys_and_partition_statistics() -> None:
    raw = _raw_json(FIXTURES / BRANCHES_TAGS)
    raw["encryption-keys"] = [
        {"key-id": "k1", "encrypted-key-metadata": "aWNlYmVyZw==", "encrypted-by-id": "kms", "properties": {}}
    ]
    raw["partition-statistics"] = [
        {"snapshot-id": raw["current-snapshot-id"], "statistics-path": "/s.parquet", "file-size-in-bytes": 9}
    ]
    raw["snapshots"][-1]["key-id"] = "k1"
    md = metadata_from_json(copy.deepcopy(raw), source="keys")
    (key,) = md.encryption_keys
    assert (key.key_id, key.encrypted_by_id, key.properties) == ("k1", "kms", {})
    assert md.partition_statistics[0].file_size_in_bytes == 9 and md.snapshots[-1].key_id == "k1"
    assert metadata_to_json(md) == raw


# -- bad input ---------------------------------------------------------------------------------------------

SOURCE = "/warehouse/db/t/metadata/00042-bad.metadata.json"


DROP = object()
BASES = {"v2": V2_FILE, "v3": BRANCHES_TAGS}
BAD_FIELD = {"name": "a", "transform": 1, "source-id": 1, "field-id": 1000}
V3_FIRST = 5354682886017325803
TWIN = {"id": 1, "name": "id", "required": False, "type": "long"}
# (id, base table, path to change, new value or DROP, expected message)
BAD_OBJECTS: list[tuple[str, str, tuple[Any, ...], Any, str]] = [
    ("version-4", "v2", ("format-version",), 4, r"unsupported format-version 4"),
    ("version-0", "v2", ("format-version",), 0, r"unsupported format-version 0"),
    ("version-string", "v2", ("format-version",), "2", r"'format-version' must be a JSON integer, got str"),
    ("version-bool", "v2", ("format-version",), True, r"'format-version' must be a JSON integer, got bool"),
    ("version-missing", "v2", ("format-version",), DROP, r"missing required field 'format-version'"),
    ("v2-no-last-seq", "v2", ("last-sequence-number",), DROP, r"'last-sequence-number' is missing"),
    ("v2-no-uuid", "v2", ("table-uuid",), DROP, r"'table-uuid' is missing \(required by format version 2"),
    ("v2-no-sort-orders", "v2", ("sort-orders",), DROP, r"'sort-orders' is missing"),
    ("v2-null-schemas", "v2", ("schemas",), None, r"'schemas' is null"),
    ("v3-no-next-row-id", "v3", ("next-row-id",), DROP, r"'next-row-id' is missing.*version 3"),
    ("no-location", "v2", ("location",), DROP, r"'location' is missing"),
    ("snapshots-object", "v2", ("snapshots",), {}, r"'snapshots' must be a JSON array, got object"),
    ("snapshot-not-object", "v2", ("snapshots",), [1], r"'snapshots\[0\]' must be a JSON object"),
    ("location-int", "v2", ("location",), 5, r"'location' must be a JSON string, got integer"),
    ("updated-string", "v2", ("last-updated-ms",), "1", r"'last-updated-ms' must be a JSON integer"),
    ("property-int", "v2", ("properties",), {"a": 1}, r"'properties.a' must be a JSON string"),
    ("current-string", "v2", ("current-snapshot-id",), "x", r"'current-snapshot-id' must be a JSON integer"),
    ("current-unknown", "v2", ("current-snapshot-id",), 7, r"current-snapshot-id 7 is not among the snap"),
    ("schema-unknown", "v2", ("current-schema-id",), 77, r"current-schema-id 77 is not among the schemas"),
    ("spec-unknown", "v2", ("default-spec-id",), 5, r"default-spec-id 5 is not among the partition-specs"),
    ("order-unknown", "v2", ("default-sort-order-id",), 3, r"default-sort-order-id 3 is not among"),
    ("schema-fields", "v2", ("schemas",), [{"type": "struct", "fields": 5}], r"'schemas\[0\]' is malformed"),
    ("spec-transform", "v2", ("partition-specs",), [{"spec-id": 0, "fields": [BAD_FIELD]}],
     r"'partition-specs\[0\].fields\[0\].transform' must be a JSON string"),
    ("snapshot-ts", "v2", ("snapshots", 0, "timestamp-ms"), "now", r"'snapshots\[0\].timestamp-ms' must"),
    ("snapshot-no-id", "v2", ("snapshots", 0, "snapshot-id"), DROP, r"missing required field 'snapshots\["),
    ("snapshot-no-list", "v2", ("snapshots", 0, "manifest-list"), DROP, r"manifest-list' \(required by"),
    ("snapshot-no-op", "v2", ("snapshots", 0, "summary"), {"a": "b"}, r"'snapshots\[0\].summary.operation'"),
    ("snapshot-lineage", "v3", ("snapshots", 0, "added-rows"), DROP, r"'snapshots\[0\].added-rows'"),
    ("duplicate-snapshot", "v3", ("snapshots", 1, "snapshot-id"), V3_FIRST, r"repeats snapshot-id \[5354"),
    ("ref-type", "v3", ("refs", "main", "type"), "banch", r"'refs.main.type' must be 'branch' or 'tag'"),
    ("ref-missing", "v3", ("refs", "v1", "snapshot-id"), 1, r"ref 'v1' points at snapshot 1, not among"),
    ("main-not-current", "v3", ("current-snapshot-id",), V3_FIRST, r"main branch is at snapshot 43630372358"),
    ("log-entry", "v2", ("snapshot-log", 0, "timestamp-ms"), DROP, r"'snapshot-log\[0\].timestamp-ms'"),
    # out of time order by more than Java's minute of clock skew: as_of picked the wrong snapshot
    ("log-order", "v3", ("snapshot-log", 2, "timestamp-ms"), 1779298839350 - 60_001,
     r"snapshot-log is out of time order: entry 2 \(1779298779349\) is more than a minute before entry 1"),
    ("metadata-log-order", "v2", ("metadata-log", 1, "timestamp-ms"), 1721808986363 - 3_600_000,
     r"metadata-log is out of time order: entry 1 \(1721805386363\) is more than a minute before entry 0"),
    ("seq-above-last", "v2", ("last-sequence-number",), 0, r"sequence-number 1, greater than last-seq"),
    ("duplicate-field-id", "v2", ("schemas", 0, "fields"), [TWIN, {**TWIN, "name": "x"}],
     r"'schemas\[0\]' is malformed: invalid schema: field id 1 is held by 'id' and 'x'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("base", "path", "value", "message"), [pytest.param(*c[1:], id=c[0]) for c in BAD_OBJECTS]
)
def test_bad_metadata_names_the_file_and_the_problem(
    base: str, path: tuple[Any, ...], value: Any, message: str
) -> None:
    _require_fixtures()
    obj = _raw_json(FIXTURES / BASES[base])
    parent = obj
    for step in path[:-1]:
        parent = parent[step]
    if value is DROP:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    with pytest.raises(MetadataError, match=message) as info:
        parse_metadata(json.dumps(obj).encode(), source=SOURCE)
    assert str(info.value).startswith(f"{SOURCE}: ")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(b'{"format-version": 2, "location": ', r"invalid JSON: Expecting value", id="truncated"),
        pytest.param(b"", r"empty metadata file", id="empty"),
        pytest.param(b"\x1f\x8b\x08\x00garbage", r"corrupt gzip", id="corrupt-gzip"),
        pytest.param(gzip.compress(b"{nope"), r"invalid JSON", id="gzip-of-bad-json"),
        pytest.param(b"\xff\xfe{}", r"not UTF-8", id="not-utf8"),
        pytest.param(b"[1, 2]", r"'table metadata' must be a JSON object, got array", id="array"),
        pytest.param(b'{"format-version": NaN}', r"NaN is not a JSON value", id="nan"),
    ],
)
def test_undecodable_input_names_the_file(data: bytes, message: str) -> None:
    with pytest.raises(MetadataError, match=message) as info:
        parse_metadata(data, source=SOURCE)
    assert SOURCE in str(info.value)


def test_v1_lists_are_written_once_they_hold_more_than_the_legacy_fields() -> None:
    """A v1 file with only ``schema`` and ``partition-spec`` round-trips as read; once a commit adds a
    schema, a spec or a sort order, the lists that hold it are written (Java always writes them), or the
    change would be lost and a manifest of the new spec would name a spec the table lacks."""
    from gpu_engine.iceberg.partitioning import PartitionField
    from gpu_engine.iceberg.sorting import SortField, SortOrder

    raw = {
        "format-version": 1, "location": "/t", "last-updated-ms": 1, "last-column-id": 2,
        "schema": {"type": "struct", "fields": [{"id": 1, "name": "id", "required": False, "type": "int"},
                                                {"id": 2, "name": "s", "required": False, "type": "string"}]},
        "partition-spec": [{"name": "s", "transform": "identity", "source-id": 2, "field-id": 1000}],
        "properties": {}, "current-snapshot-id": -1, "snapshots": [],
    }  # fmt: skip
    md = metadata_from_json(raw, source="v1.metadata.json")
    assert metadata_to_json(md) == raw
    schema = dataclasses.replace(md.schema, schema_id=1)
    spec = dataclasses.replace(
        md.spec, spec_id=1, fields=(*md.spec.fields, PartitionField((1,), 1001, "b", "bucket[4]"))
    )
    order = SortOrder(1, (SortField((1,), "identity", "desc", "nulls-last"),))
    changed = dataclasses.replace(
        md, schemas=(*md.schemas, schema), current_schema_id=1, partition_specs=(*md.partition_specs, spec),
        default_spec_id=1, last_partition_id=1001, sort_orders=(*md.sort_orders, order),
        default_sort_order_id=1,
    )  # fmt: skip
    out = metadata_to_json(changed)
    assert [s.get("schema-id", 0) for s in out["schemas"]] == [0, 1] and out["current-schema-id"] == 1
    assert [s["spec-id"] for s in out["partition-specs"]] == [0, 1] and out["last-partition-id"] == 1001
    assert [o["order-id"] for o in out["sort-orders"]] == [0, 1] and out["default-sort-order-id"] == 1
    again = metadata_from_json(out, source="v2.metadata.json")
    assert (again.schemas, again.partition_specs, again.sort_orders) == (
        changed.schemas, changed.partition_specs, changed.sort_orders,
    )  # fmt: skip


def test_v1_ids_of_absent_lists_are_ignored_as_java_does() -> None:
    """Without ``partition-specs`` the legacy ``partition-spec`` is spec 0 and without ``sort-orders``
    the table is unsorted (order 0), whatever ``default-spec-id``/``default-sort-order-id`` say (Java's
    TableMetadataParser; PyIceberg reads it too): such a table was refused."""
    raw = {
        "format-version": 1, "location": "/t", "last-updated-ms": 1, "last-column-id": 2,
        "schema": {"type": "struct", "fields": [{"id": 1, "name": "id", "required": False, "type": "int"},
                                                {"id": 2, "name": "s", "required": False, "type": "string"}]},
        "partition-spec": [{"name": "s", "transform": "identity", "source-id": 2, "field-id": 1000}],
        "default-spec-id": 2, "default-sort-order-id": 1,
        "properties": {}, "current-snapshot-id": -1, "snapshots": [],
    }  # fmt: skip
    md = metadata_from_json(raw, source="v1.metadata.json")
    assert md.default_spec_id == 0 and [s.spec_id for s in md.partition_specs] == [0]
    assert [f.name for f in md.spec.fields] == ["s"]
    assert md.default_sort_order_id == 0 and md.sort_order.is_unsorted

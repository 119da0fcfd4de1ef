"""Snapshots, refs, logs, statistics files and encryption keys: JSON both ways and their rules."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from gpu_engine.errors import MetadataError
from gpu_engine.iceberg import snapshots as sn
from gpu_engine.iceberg.snapshots import (
    BlobMetadata,
    EncryptionKey,
    MetadataLogEntry,
    PartitionStatisticsFile,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    StatisticsFile,
    record_from_json,
    record_to_json,
    ref_from_json,
    snapshot_from_json,
    snapshot_to_json,
    table_refs_from_json,
)

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures"

V2_SNAPSHOT: dict[str, Any] = {
    "sequence-number": 3,
    "snapshot-id": 7459451945897571250,
    "parent-snapshot-id": 2801806189136843147,
    "timestamp-ms": 1700000000000,
    "summary": {"operation": "overwrite", "added-data-files": "1", "spark.app.id": "local-1"},
    "manifest-list": "s3://b/t/metadata/snap-7459451945897571250-1-x.avro",
    "schema-id": 0,
}
V1_SNAPSHOT: dict[str, Any] = {
    "snapshot-id": 1,
    "timestamp-ms": 1515100955770,
    "manifests": ["/wh/t/metadata/m0.avro", "/wh/t/metadata/m1.avro"],
}


def test_v2_snapshot_round_trip() -> None:
    s = snapshot_from_json(copy.deepcopy(V2_SNAPSHOT), format_version=2)
    assert (s.snapshot_id, s.parent_snapshot_id, s.sequence_number) == (
        7459451945897571250,
        2801806189136843147,
        3,
    )
    assert s.operation == "overwrite" and s.summary is not None and s.summary["spark.app.id"] == "local-1"
    assert s.manifest_list is not None and s.manifests is None and s.schema_id == 0
    assert (s.first_row_id, s.added_rows, s.key_id) == (None, None, None)
    assert snapshot_to_json(s) == V2_SNAPSHOT


def test_v1_snapshot_with_manifests_list_and_no_sequence_number() -> None:
    s = snapshot_from_json(copy.deepcopy(V1_SNAPSHOT), format_version=1)
    assert s.manifests == ("/wh/t/metadata/m0.avro", "/wh/t/metadata/m1.avro") and s.manifest_list is None
    assert s.sequence_number == 0 and not s.sequence_number_written
    assert s.summary is None and s.operation is None and s.parent_snapshot_id is None
    assert snapshot_to_json(s) == V1_SNAPSHOT


def test_snapshot_built_in_code_writes_its_sequence_number() -> None:
    s = Snapshot(
        snapshot_id=5,
        timestamp_ms=10,
        sequence_number=4,
        manifest_list="/m.avro",
        summary={"operation": "append"},
    )
    out = snapshot_to_json(s)
    assert out == {
        "snapshot-id": 5,
        "timestamp-ms": 10,
        "sequence-number": 4,
        "manifest-list": "/m.avro",
        "summary": {"operation": "append"},
    }
    assert snapshot_from_json(out, format_version=2) == s


def test_v2_snapshot_of_an_upgraded_v1_table_keeps_missing_sequence_number() -> None:
    """Spec: tables upgraded from v1 keep their v1 snapshots; sequence-number reads as 0."""
    obj = {k: v for k, v in V2_SNAPSHOT.items() if k != "sequence-number"}
    s = snapshot_from_json(copy.deepcopy(obj), format_version=2)
    assert s.sequence_number == 0 and snapshot_to_json(s) == obj


def test_v3_row_lineage_fields() -> None:
    obj = {**V2_SNAPSHOT, "first-row-id": 1000, "added-rows": 375, "key-id": "k7"}
    s = snapshot_from_json(copy.deepcopy(obj), format_version=3)
    assert (s.first_row_id, s.added_rows, s.key_id) == (1000, 375, "k7")
    assert snapshot_to_json(s) == obj
    upgraded = snapshot_from_json({**V2_SNAPSHOT, "first-row-id": None}, format_version=3)
    assert upgraded.first_row_id is None and snapshot_to_json(upgraded)["first-row-id"] is None


def test_unknown_keys_and_nulls_round_trip() -> None:
    obj = {**V2_SNAPSHOT, "parent-snapshot-id": None, "x-engine": {"a": 1}}
    s = snapshot_from_json(copy.deepcopy(obj), format_version=2)
    assert s.parent_snapshot_id is None and dict(s.extra)["x-engine"] == {"a": 1}
    assert snapshot_to_json(s) == obj


@pytest.mark.parametrize(
    ("obj", "version", "message"),
    [
        (
            {k: v for k, v in V2_SNAPSHOT.items() if k != "manifest-list"},
            2,
            r"'s.manifest-list'.*format version 2",
        ),
        ({k: v for k, v in V2_SNAPSHOT.items() if k != "summary"}, 3, r"'s.summary'.*format version 3"),
        ({**V1_SNAPSHOT, "manifest-list": "/l.avro"}, 1, r"exactly one of 'manifest-list'"),
        ({"snapshot-id": 1, "timestamp-ms": 2}, 1, r"exactly one of 'manifest-list'"),
        (
            {**V2_SNAPSHOT, "summary": {"added-data-files": "1"}},
            2,
            r"missing required field 's.summary.operation'",
        ),
        (
            {**V2_SNAPSHOT, "summary": {"operation": "append", "n": 1}},
            2,
            r"'s.summary.n' must be a JSON string",
        ),
        ({**V2_SNAPSHOT, "summary": "append"}, 2, r"'s.summary' must be a JSON object, got string"),
        (
            {**V2_SNAPSHOT, "first-row-id": 5},
            3,
            r"missing required field 's.added-rows' \(first-row-id is set\)",
        ),
        ({**V2_SNAPSHOT, "snapshot-id": "1"}, 2, r"'s.snapshot-id' must be a JSON integer, got string"),
        ({**V2_SNAPSHOT, "timestamp-ms": 1.5}, 2, r"'s.timestamp-ms' must be a JSON integer, got number"),
        ({**V1_SNAPSHOT, "manifests": ["/a", 3]}, 1, r"'s.manifests\[1\]' must be a JSON string"),
        (
            {k: v for k, v in V2_SNAPSHOT.items() if k != "timestamp-ms"},
            2,
            r"missing required field 's.timestamp-ms'",
        ),
    ],
)
def test_bad_snapshots(obj: dict[str, Any], version: int, message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        snapshot_from_json(copy.deepcopy(obj), format_version=version, where="s")


# -- refs --


def test_refs_round_trip() -> None:
    branch = {
        "snapshot-id": 7,
        "type": "branch",
        "min-snapshots-to-keep": 5,
        "max-snapshot-age-ms": 60000,
        "max-ref-age-ms": 90000,
    }
    tag = {"snapshot-id": 3, "type": "tag", "max-ref-age-ms": 5}
    b, t = ref_from_json(dict(branch)), ref_from_json(dict(tag))
    assert b == SnapshotRef(7, "branch", 5, 60000, 90000) and b.is_branch and not b.is_tag
    assert t.is_tag and t.min_snapshots_to_keep is None and t.max_ref_age_ms == 5
    assert record_to_json(b) == branch and record_to_json(t) == tag


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"snapshot-id": 1, "type": "Branch"}, r"'r.type' must be 'branch' or 'tag', got 'Branch'"),
        ({"snapshot-id": 1}, r"missing required field 'r.type'"),
        ({"type": "tag"}, r"missing required field 'r.snapshot-id'"),
        ({"snapshot-id": 1, "type": "tag", "min-snapshots-to-keep": 2}, r"a tag cannot set min-snapshots"),
        (
            {"snapshot-id": 1, "type": "branch", "max-ref-age-ms": "1d"},
            r"'r.max-ref-age-ms' must be a JSON integer",
        ),
    ],
)
def test_bad_refs(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        ref_from_json(obj, where="r")


def test_table_refs() -> None:
    refs = {"main": {"snapshot-id": 1, "type": "branch"}, "t": {"snapshot-id": 2, "type": "tag"}}
    current, parsed, extra = table_refs_from_json({"current-snapshot-id": 1, "refs": refs}, {1, 2})
    assert (
        current == 1
        and parsed == {"main": SnapshotRef(1, "branch"), "t": SnapshotRef(2, "tag")}
        and not extra
    )
    assert table_refs_from_json({"current-snapshot-id": -1}, set()) == (
        None,
        {},
        (("current-snapshot-id", -1),),
    )
    assert table_refs_from_json({"current-snapshot-id": None, "refs": None}, set()) == (None, {}, ())


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"current-snapshot-id": 3}, r"current-snapshot-id 3 is not among the snapshots \(\[1, 2\]\)"),
        ({"refs": {"t": {"snapshot-id": 3, "type": "tag"}}}, r"ref 't' points at snapshot 3"),
        (
            {"refs": {"main": {"snapshot-id": 1, "type": "branch"}}},
            r"main branch is at snapshot 1 but .* is unset",
        ),
        (
            {"current-snapshot-id": 1, "refs": {"main": {"snapshot-id": 1, "type": "tag"}}},
            r"'main' must be a branch",
        ),
        (
            {"current-snapshot-id": 2, "refs": {"main": {"snapshot-id": 1, "type": "branch"}}},
            r"current-snapshot-id is 2",
        ),
        ({"refs": []}, r"field 'refs' must be a JSON object, got array"),
        ({"refs": {"b": 5}}, r"field 'refs.b' must be a JSON object, got integer"),
    ],
)
def test_bad_table_refs(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        table_refs_from_json(obj, {1, 2})


# -- logs, statistics, encryption keys --


@pytest.mark.parametrize(
    ("cls", "obj"),
    [
        (SnapshotLogEntry, {"timestamp-ms": 1, "snapshot-id": 2}),
        (MetadataLogEntry, {"timestamp-ms": 1, "metadata-file": "/t/metadata/v1.metadata.json"}),
        (
            PartitionStatisticsFile,
            {"snapshot-id": 1, "statistics-path": "/p.parquet", "file-size-in-bytes": 10},
        ),
        (
            EncryptionKey,
            {
                "key-id": "k",
                "encrypted-key-metadata": "aWNl",
                "encrypted-by-id": "kms",
                "properties": {"a": "b"},
            },
        ),
        (EncryptionKey, {"key-id": "k", "encrypted-key-metadata": "aWNl", "x-other": [1]}),
        (
            BlobMetadata,
            {
                "type": "apache-datasketches-theta-v1",
                "snapshot-id": 1,
                "sequence-number": 2,
                "fields": [1, 2],
            },
        ),
    ],
)
def test_records_round_trip(cls: Any, obj: dict[str, Any]) -> None:
    record = record_from_json(cls, copy.deepcopy(obj), "r")
    assert isinstance(record, cls) and record_to_json(record) == obj


def test_statistics_file() -> None:
    obj = {
        "snapshot-id": 8614787612208071008,
        "statistics-path": "/t/metadata/x.stats",
        "file-size-in-bytes": 534,
        "file-footer-size-in-bytes": 440,
        "key-metadata": "a2V5",
        "blob-metadata": [
            {
                "type": "apache-datasketches-theta-v1",
                "snapshot-id": 1,
                "sequence-number": 0,
                "fields": [1],
                "properties": {"ndv": "2"},
            },
        ],
    }
    stats = record_from_json(StatisticsFile, copy.deepcopy(obj), "statistics[0]")
    assert stats.key_metadata == "a2V5" and stats.file_footer_size_in_bytes == 440
    assert stats.blob_metadata == (BlobMetadata("apache-datasketches-theta-v1", 1, 0, (1,), {"ndv": "2"}),)
    assert record_to_json(stats) == obj


@pytest.mark.parametrize(
    ("cls", "obj", "message"),
    [
        (
            StatisticsFile,
            {"snapshot-id": 1, "statistics-path": "/s", "file-size-in-bytes": 1},
            r"missing required field 'r.file-footer-size-in-bytes'",
        ),
        (
            StatisticsFile,
            {
                "snapshot-id": 1,
                "statistics-path": "/s",
                "file-size-in-bytes": 1,
                "file-footer-size-in-bytes": 1,
                "blob-metadata": [{"type": "t"}],
            },
            r"missing required field 'r.blob-metadata\[0\].snapshot-id'",
        ),
        (
            BlobMetadata,
            {"type": "t", "snapshot-id": 1, "sequence-number": 0, "fields": ["a"]},
            r"'r.fields\[0\]' must be a JSON integer",
        ),
        (EncryptionKey, {"key-id": "k"}, r"missing required field 'r.encrypted-key-metadata'"),
        (EncryptionKey, {"key-id": "k", "encrypted-key-metadata": None}, r"'r.encrypted-key-metadata' must"),
        (
            EncryptionKey,
            {"key-id": "k", "encrypted-key-metadata": "a", "properties": {"p": 1}},
            r"'r.properties.p' must be a JSON string",
        ),
        (
            PartitionStatisticsFile,
            {"snapshot-id": 1, "statistics-path": 2, "file-size-in-bytes": 1},
            r"'r.statistics-path' must be a JSON string, got integer",
        ),
    ],
)
def test_bad_records(cls: Any, obj: dict[str, Any], message: str) -> None:
    with pytest.raises(MetadataError, match=message):
        record_from_json(cls, obj, "r")


def test_json_accessors_name_the_field() -> None:
    obj: dict[str, Any] = {"a": True, "b": [1, "x"], "c": None}
    with pytest.raises(MetadataError, match=r"field 'o.a' must be a JSON integer, got boolean"):
        sn.req_int(obj, "a", "o")
    with pytest.raises(MetadataError, match=r"field 'o.b\[1\]' must be a JSON integer, got string"):
        sn.int_list(obj["b"], "o.b")
    assert sn.opt_int(obj, "c", "o") is None and sn.opt_str(obj, "zz", "o") is None
    assert sn.extra_of(obj, frozenset({"a", "c"})) == (("b", [1, "x"]), ("c", None))


def test_fixture_statistics_parse() -> None:
    """A fixture's statistics entries parse through the records (fixtures must be present)."""
    path = FIXTURES / "impala/iceberg_test/iceberg_with_puffin_stats/metadata/v3.metadata.json"
    assert path.is_file(), f"fixture {path} missing: check out shared/ beside the repository"
    import json

    (obj,) = json.loads(path.read_text())["statistics"]
    stats = record_from_json(StatisticsFile, obj, "statistics[0]")
    assert [b.fields for b in stats.blob_metadata] == [(1,), (2,)] and record_to_json(stats) == obj

"""``tbl.update_properties()``: keys set and removed in one metadata commit (checked as JSON and through
PyIceberg), the keys refused, lost races, and format version upgrades v1 -> v2 -> v3 followed by every kind
of write, read back by our scan, PyIceberg and DuckDB."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.table import StaticTable

from gpu_engine.errors import InvalidProperty, UnsupportedFeature, ValidationError
from gpu_engine.table import Table

from ._support import (
    assert_all_readers,
    assert_same_rows,
    pyiceberg_static,
    rows,
    sql_catalog,
    table_files,
    with_raw_properties,
)

FAST = {"commit.retry.min-wait-ms": "1", "commit.retry.max-wait-ms": "5"}
FORMAT, MODE = "format-version", "write.delete.mode"


def make(tmp_path: Path, version: int, **props: str) -> Table:
    properties = {"format-version": str(version), **FAST, **props}
    return sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties=properties)


def metadata(tbl: Table) -> dict[str, Any]:
    return dict(json.loads(Path(tbl.metadata_location).read_text()))


def test_set_and_remove_commit_together_and_pyiceberg_reads_them(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, **{"owner": "data-eng", "comment": "old"})
    with tbl.update_properties() as p:
        p.set("write.target-file-size-bytes", str(64 << 20)).set("comment", "new").remove("owner")
    props = metadata(tbl)["properties"]
    assert props["write.target-file-size-bytes"] == str(64 << 20) and props["comment"] == "new"
    assert "owner" not in props
    assert StaticTable.from_metadata(tbl.metadata_location).properties == props
    location = tbl.metadata_location
    tbl.update_properties().set("comment", "new").remove("not-there").commit()  # nothing changes
    tbl.refresh()
    assert tbl.metadata_location == location


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (lambda p: p.set("uuid", "x"), InvalidProperty, "'uuid': reserved by Iceberg"),
        (lambda p: p.remove("current-snapshot-id"), InvalidProperty, "reserved by Iceberg"),
        (lambda p: p.set("a", "1").remove("a"), InvalidProperty, "'a': it is set in this update"),
        (lambda p: p.remove("a").set("a", "1"), InvalidProperty, "'a': it is removed in this update"),
        (lambda p: p.set("a", 1), InvalidProperty, "keys and values are non-empty strings"),
        (lambda p: p.remove("format-version"), InvalidProperty, "always has a format version"),
        (lambda p: p.set("format-version", "1"), ValidationError, "versions cannot go down"),
        (lambda p: p.set("format-version", "4"), UnsupportedFeature, "up to 3"),
        (lambda p: p.set("format-version", "two"), InvalidProperty, "expected an integer"),
        (
            lambda p: p.set("write.target-file-size-bytes", "big"),
            InvalidProperty,
            "target-file-size-bytes='big'",
        ),
        (lambda p: p.set("write.metadata.metrics.default", "most"), InvalidProperty, "metrics.default"),
        (lambda p: p.set("commit.retry.num-retries", "-1"), InvalidProperty, "num-retries='-1'"),
        (lambda p: p.set("commit.manifest-merge.enabled", "yes"), InvalidProperty, "merge.enabled='yes'"),
        (lambda p: p.set("write.parquet.compression-codec", "lz5"), InvalidProperty, "lz5"),
        (lambda p: p.set("write.delete.target-file-size-bytes", "x"), InvalidProperty, "delete.target-file"),
        (lambda p: p.set("write.delete.format.default", "avro"), UnsupportedFeature, "delete.format.default"),
        (lambda p: p.set("write.location-provider.impl", "a.B"), UnsupportedFeature, "location-provider"),
        (lambda p: p.set("write.folder-storage.path", "/x"), InvalidProperty, "folder-storage.path='/x'"),
        (lambda p: p.set("write.object-storage.enabled", "on"), InvalidProperty, "storage.enabled='on'"),
        (
            lambda p: p.set("write.metadata.delete-after-commit.enabled", "yes"),
            InvalidProperty,
            "delete-after-commit.enabled='yes'",
        ),
        (
            lambda p: p.set("write.parquet.compression-codec", "gzip").set(
                "write.parquet.compression-level", "99"
            ),
            InvalidProperty,
            "gzip levels are 1 to 9",
        ),
    ],
)
def test_refused_changes_name_the_key_and_commit_nothing(
    tmp_path: Path, change: Any, error: type[Exception], message: str
) -> None:
    tbl = make(tmp_path, 2)
    location, files = tbl.metadata_location, table_files(tbl)
    with pytest.raises(error, match=message), tbl.update_properties() as p:
        change(p)
    tbl.refresh()
    assert tbl.metadata_location == location and table_files(tbl) == files


def test_a_lost_race_reapplies_on_the_refreshed_properties(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, shared="0")
    other = sql_catalog(tmp_path).load_table("db.t")
    update = tbl.update_properties().set("mine", "1").remove("shared")
    other.update_properties().set("theirs", "2").commit()
    other.append(rows(0, 5))
    update.commit()
    props = metadata(tbl)["properties"]
    assert props["mine"] == "1" and props["theirs"] == "2" and "shared" not in props
    assert tbl.metadata.current_snapshot() is not None


def test_an_upgrade_and_the_settings_it_allows_in_one_update(tmp_path: Path) -> None:
    """Properties are checked at the version the update upgrades to (merge-on-read needs v2 delete
    files: refused on v1 alone, taken with the upgrade), whichever order they are set in."""
    for i, keys in enumerate(((FORMAT, MODE), (MODE, FORMAT))):
        (tmp_path / str(i)).mkdir()
        tbl = make(tmp_path / str(i), 1)
        with pytest.raises(UnsupportedFeature, match="format version 1 lacks"):
            tbl.update_properties().set(MODE, "merge-on-read").commit()
        update = tbl.update_properties()
        for key in keys:
            update.set(key, "2" if key == FORMAT else "merge-on-read")
        update.commit()
        assert tbl.metadata.format_version == 2 and tbl.properties[MODE] == "merge-on-read"
        tbl.append(rows(0, 20))
        tbl.delete("id < 5")
        assert len(tbl.scan().to_arrow()) == 15


def test_a_bad_value_set_earlier_does_not_block_other_keys(tmp_path: Path) -> None:
    tbl = with_raw_properties(make(tmp_path, 2), "db.t", {"write.target-file-size-bytes": "big"})
    tbl.update_properties().set("comment", "x").commit()
    with pytest.raises(InvalidProperty, match="target-file-size-bytes='big'"):
        tbl.append(rows(0, 5))  # the writer still names it
    tbl.update_properties().remove("write.target-file-size-bytes").commit()
    tbl.append(rows(0, 5))


def test_upgrade_v1_to_v2_to_v3_and_write_every_kind_of_change(tmp_path: Path) -> None:
    tbl = make(tmp_path, 1)
    first = rows(0, 40)
    tbl.append(first)
    tbl.append(rows(40, 40, seed=1))
    v1_snapshot = tbl.metadata.current_snapshot_id
    expected = pa.concat_tables([first, rows(40, 40, seed=1)])

    tbl.update_properties().set("format-version", "2").commit()
    raw = metadata(tbl)
    assert raw["format-version"] == 2 and raw["last-sequence-number"] == 0 and raw["table-uuid"]
    assert "format-version" not in raw.get("properties", {})
    assert_same_rows(tbl.scan().to_arrow(), expected, context="gpu_engine scan")
    assert_same_rows(pyiceberg_static(tbl), expected, context="pyiceberg")
    # (DuckDB 1.5.5 refuses a v2 table whose current snapshot has a v1 manifest list: "required field
    # 'sequence_number' is NULL"; the spec has readers default it to 0. Checked after the next commit.)
    tbl.delete("id < 10")  # position deletes against v1-written files
    expected = expected.filter(pc.field("id") >= 10)
    tbl.delete_rows(pa.table({"id": pa.array([20, 21], pa.int64())}), on=["id"])
    expected = expected.filter(~pc.field("id").isin([20, 21]))
    assert metadata(tbl)["last-sequence-number"] == 2
    assert_all_readers(tbl, expected, pyiceberg=False)  # PyIceberg reads no equality deletes

    tbl.update_properties().set("format-version", "3").commit()
    raw = metadata(tbl)
    assert raw["format-version"] == 3 and raw["next-row-id"] == 0
    with_ids = tbl.scan(columns=["id", "_row_id"]).to_arrow()
    assert with_ids["_row_id"].null_count == with_ids.num_rows  # no snapshot has row ids yet
    tbl.delete("id < 15")  # a DV that merges the v2 position deletes of the same file
    expected = expected.filter(pc.field("id") >= 15)
    assert_all_readers(tbl, expected, pyiceberg=False)
    row_ids = tbl.scan(columns=["id", "_row_id"]).to_arrow()
    assert row_ids["_row_id"].null_count == 0  # the first v3 snapshot assigned them
    assert len(set(row_ids["_row_id"].to_pylist())) == row_ids.num_rows
    assert metadata(tbl)["next-row-id"] >= 80

    result = tbl.compact(options={"rewrite-all": "true"})
    assert result.groups and not result.failures
    assert_all_readers(tbl, expected, pyiceberg=False)
    after = tbl.scan(columns=["id", "_row_id"]).to_arrow()
    assert sorted(zip(after["id"].to_pylist(), after["_row_id"].to_pylist(), strict=True)) == sorted(
        zip(row_ids["id"].to_pylist(), row_ids["_row_id"].to_pylist(), strict=True)
    )  # compaction keeps each row's id
    old = tbl.scan(snapshot_id=v1_snapshot).to_arrow()  # time travel to a v1 snapshot still works
    assert old.num_rows == 80


@pytest.mark.parametrize(
    ("props", "match"),
    [
        ({"write.metadata.previous-versions-max": "x"}, "previous-versions-max='x'"),
        ({"commit.retry.num-retries": "many"}, "num-retries='many'"),
        ({"commit.manifest-merge.enabled": "yes"}, "merge.enabled='yes'"),
        ({"write.summary.partition-limit": "-1"}, "partition-limit='-1'"),
    ],
)
def test_create_table_refuses_what_no_commit_could_read(
    tmp_path: Path, props: dict[str, str], match: str
) -> None:
    cat = sql_catalog(tmp_path)
    with pytest.raises(InvalidProperty, match=match):
        cat.create_table("db.bad", rows(0, 0).schema, properties=props)
    assert not cat.table_exists("db.bad")


@pytest.mark.parametrize(
    "props",
    [
        {"write.format.default": "orc", "write.location-provider.impl": "com.example.P"},
        {"write.parquet.compression-codec": "lzo"},  # Java's CompressionCodecName; no pyarrow writer
        {"write.delete.parquet.compression-codec": "LZO"},
    ],
)
def test_create_table_accepts_writer_settings_of_other_engines(tmp_path: Path, props: dict[str, str]) -> None:
    """A table may be created here for another engine (ORC files, a Java location provider, LZO): refused
    when gpu-engine writes, not at create."""
    tbl = sql_catalog(tmp_path).create_table("db.o", rows(0, 0).schema, properties=props)
    if "write.delete.parquet.compression-codec" in props:  # data files are written; delete files not
        tbl.append(rows(0, 5))
        with pytest.raises(UnsupportedFeature, match="LZO"):
            tbl.delete("id = 1")
        return
    with pytest.raises(UnsupportedFeature):
        tbl.append(rows(0, 5))


def test_a_deprecated_location_key_is_moot_beside_the_tables_data_path(tmp_path: Path) -> None:
    tbl = make(tmp_path, 2, **{"write.data.path": str(tmp_path / "data")})
    with tbl.update_properties() as p:
        p.set("write.folder-storage.path", "/elsewhere")  # Java's provider never reads it here
    tbl.append(rows(0, 5))
    assert all(f.startswith(str(tmp_path / "data")) for f in tbl.inspect.files()["file_path"].to_pylist())


@pytest.mark.parametrize("version", [2, 3])
@pytest.mark.parametrize("form", ["inline manifests", "no summary", "no manifest counts"])
def test_upgrading_a_table_with_v1_form_snapshots_keeps_it_usable(
    tmp_path: Path, form: str, version: int
) -> None:
    """v1 snapshots may list their manifests inline, have no summary and manifest lists without the file
    and row counts (optional in v1); after an upgrade they stay so (Java's SnapshotParser reads both
    forms in any version). The upgraded metadata could not be loaded again, and a manifest without its
    counts could not be listed in a v2 manifest list: every later use of the table failed."""
    import fastavro

    import gpu_engine as ge

    cat = ge.load_catalog("fs", type="filesystem", warehouse=(tmp_path / "wh").as_uri())
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", pa.schema([("id", pa.int64())]), properties={"format-version": "1"})
    tbl.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    path = Path(tbl.metadata_location.removeprefix("file://"))
    raw = json.loads(path.read_text())
    for snap in raw["snapshots"]:
        if form == "inline manifests":
            with open(snap.pop("manifest-list").removeprefix("file://"), "rb") as f:
                snap["manifests"] = [r["manifest_path"] for r in fastavro.reader(f) if isinstance(r, dict)]
        elif form == "no summary":
            del snap["summary"]
        else:
            _without_counts(Path(snap["manifest-list"].removeprefix("file://")))
    (path.parent / "v3.metadata.json").write_text(json.dumps(raw))
    (path.parent / "version-hint.text").write_text("3")
    table_dir = str(path.parent.parent)
    ge.load_table(table_dir).update_properties().set("format-version", str(version)).commit()
    upgraded = ge.load_table(table_dir)
    assert upgraded.format_version == version and upgraded.scan().to_arrow().num_rows == 2
    upgraded.append(pa.table({"id": pa.array([3], pa.int64())}))
    upgraded.delete("id = 1")
    upgraded.compact(options={"rewrite-all": "true"})
    assert sorted(ge.load_table(table_dir).scan().to_arrow()["id"].to_pylist()) == [2, 3]


def _without_counts(manifest_list: Path) -> None:
    """Write ``manifest_list`` again without the file and row counts, as a v1 writer may."""
    import fastavro

    with open(manifest_list, "rb") as src:
        reader = fastavro.reader(src)
        schema: dict[str, Any] = json.loads(reader.metadata["avro.schema"])
        records = [r for r in reader if isinstance(r, dict)]
        meta = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    counts = {
        f"{what}_{unit}_count" for what in ("added", "existing", "deleted") for unit in ("files", "rows")
    }
    schema["fields"] = [f for f in schema["fields"] if f["name"] not in counts]
    with open(manifest_list, "wb") as dst:
        fastavro.writer(
            dst, schema, [{k: v for k, v in r.items() if k not in counts} for r in records], metadata=meta
        )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("write.parquet.compression-codec", "zap"),
        ("write.target-file-size-bytes", "-1"),
        ("write.metadata.metrics.default", "bogus"),
        ("write.delete.mode", "bogus"),
        ("history.expire.min-snapshots-to-keep", "0"),
        ("schema.name-mapping.default", "notjson"),
        ("gc.enabled", "0"),
    ],
)
def test_malformed_values_are_refused_at_create_as_when_set(tmp_path: Path, key: str, value: str) -> None:
    """README: a bad value is refused when it is set, naming the property. create_table took them (and
    every later write, expire or scan failed); update_properties took the expiry settings and the name
    mapping. Other engines' settings (ORC) still pass at create."""
    cat = sql_catalog(tmp_path)
    with pytest.raises(InvalidProperty, match=re.escape(key)):
        cat.create_table("db.t", rows(0, 0).schema, properties={key: value})
    assert not cat.table_exists("db.t")
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    with pytest.raises(InvalidProperty, match=re.escape(key)):
        tbl.update_properties().set(key, value).commit()
    assert key not in tbl.refresh().properties


def test_a_malformed_delete_after_commit_set_elsewhere_never_fails_a_commit_that_landed(
    tmp_path: Path,
) -> None:
    """Set by another engine (or before it was checked): every later commit landed and then raised, so a
    caller retrying it wrote its rows twice. Old metadata files are kept, a warning says why."""
    tbl = make(tmp_path, 2)
    raw = json.loads(Path(tbl.metadata_location.removeprefix("file://")).read_text())
    raw["properties"]["write.metadata.delete-after-commit.enabled"] = "yes"
    raw["properties"]["write.metadata.previous-versions-max"] = "1"
    moved = Path(tbl.metadata_location.removeprefix("file://")).with_name("00099-x.metadata.json")
    moved.write_text(json.dumps(raw))
    catalog = tbl.catalog
    assert catalog is not None
    catalog.commit_metadata(tbl.identifier, tbl.metadata_location, str(moved))
    tbl = catalog.load_table(tbl.identifier)
    before = tbl.scan().to_arrow().num_rows
    for i in range(2):
        tbl.append(rows(100 + i, 1))
    assert catalog.load_table(tbl.identifier).scan().to_arrow().num_rows == before + 2
    assert moved.exists()  # kept: the setting is not read as true

"""Orphan file removal: old stray files go, young ones stay, dry runs delete nothing, referenced files are
never listed."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path

import pytest

import gpu_engine as ge
from gpu_engine.errors import InvalidOption, ManifestError, UnsupportedFeature, ValidationError

from ._support import referenced_files, rows, sql_catalog

DAY_S = 24 * 3600


def test_remove_orphan_files(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 10))
    tbl.append(rows(10, 10))
    tbl.delete("id < 3")
    referenced = referenced_files(tbl)
    old = time.time() - 10 * DAY_S
    for ref in referenced:  # referenced files are old too: age alone must not make them orphans
        os.utime(ref, (old, old))
    root = Path(tbl.location)
    stray_old = [root / "data" / "stray.parquet", root / "metadata" / "nested" / "x-m0.avro"]
    stray_young = root / "data" / "young.parquet"
    for p in [*stray_old, stray_young]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
    for p in stray_old:
        os.utime(p, (old, old))
    expected = sorted(str(p) for p in stray_old)

    listed = tbl.remove_orphan_files(dry_run=True)
    assert listed == expected
    assert all(p.exists() for p in stray_old)

    assert tbl.remove_orphan_files() == expected
    assert not any(p.exists() for p in stray_old)
    assert stray_young.exists()
    assert all(Path(ref).exists() for ref in referenced)
    assert Path(tbl.metadata_location).exists()
    assert all(Path(e.metadata_file).exists() for e in tbl.metadata.metadata_log)
    assert tbl.scan().to_arrow().num_rows == 17

    young = tbl.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000, dry_run=True)
    assert young == [str(stray_young)]


def test_a_stale_handle_sees_other_writers_commits_before_listing(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    cat.create_table("db.t", rows(0, 0).schema).append(rows(0, 5))
    stale = cat.load_table("db.t")
    cat.load_table("db.t").append(rows(5, 5))  # another writer
    old = time.time() - 4 * DAY_S
    for dirpath, _, names in os.walk(stale.location):
        for name in names:
            os.utime(os.path.join(dirpath, name), (old, old))
    assert stale.remove_orphan_files() == []
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 10


def test_gc_disabled_refuses_orphan_removal(tmp_path: Path) -> None:
    import pytest

    from gpu_engine.errors import ValidationError

    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema, properties={"gc.enabled": "false"})
    stray = Path(tbl.location) / "data" / "from-the-source-table.parquet"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"x")
    os.utime(stray, (time.time() - 10 * DAY_S,) * 2)
    with pytest.raises(ValidationError, match=r"gc\.enabled='false'"):
        tbl.remove_orphan_files()
    assert stray.exists()


def test_hidden_files_are_left_alone(tmp_path: Path) -> None:
    """As Java's hidden-path filter: _SUCCESS, .crc files and _temporary/ are not the table's; a partition
    directory starting with an underscore is."""
    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema)
    data = Path(tbl.location) / "data"
    hidden = [data / "_SUCCESS", data / ".part-0.parquet.crc", data / "_temporary" / "0" / "part.parquet"]
    visible = data / "_p=1" / "stray.parquet"
    for p in [*hidden, visible]:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"x")
        os.utime(p, (time.time() - 10 * DAY_S,) * 2)
    assert tbl.remove_orphan_files() == [str(visible)]
    assert all(p.exists() for p in hidden)


def test_staging_files_of_a_killed_writer_are_orphans(tmp_path: Path) -> None:
    """A writer stages each file as ``.<name>.<hex>.tmp`` beside its final name and links it there when
    done; killed before that (SIGKILL: a losing speculative Spark attempt), it leaves the staging file."""
    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    data, meta = Path(tbl.location) / "data", Path(tbl.location) / "metadata"
    old = [data / f".00000-x.parquet.{'a1' * 16}.tmp", meta / f".00003-y.metadata.json.{'0f' * 16}.tmp"]
    young = data / f".00001-z.parquet.{'b2' * 16}.tmp"
    other = [data / f".00000-x.parquet.{'a1' * 15}.tmp", data / ".x.parquet.crc"]  # not our staging names
    for p in [*old, young, *other]:
        p.write_bytes(b"partial")
        os.utime(p, (time.time() - (0 if p == young else 10 * DAY_S),) * 2)
    assert tbl.remove_orphan_files() == sorted(map(str, old))
    assert young.exists() and all(p.exists() for p in other) and not any(p.exists() for p in old)
    assert tbl.scan().to_arrow().num_rows == 5


def test_a_table_read_from_a_metadata_file_or_through_a_path_map_is_refused(tmp_path: Path) -> None:
    """Its metadata may not be the current one (an old vN.metadata.json would leave every newer file
    unreachable), nor its paths as written: nothing is deleted."""
    import pytest

    import gpu_engine as ge
    from gpu_engine.errors import UnsupportedFeature

    tbl = sql_catalog(tmp_path).create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    first = (
        tbl.metadata.metadata_log[-1].metadata_file if tbl.metadata.metadata_log else tbl.metadata_location
    )
    tbl.append(rows(5, 5))
    files = {p for p in Path(tbl.location).rglob("*") if p.is_file()}
    with pytest.raises(UnsupportedFeature, match="no catalog"):
        ge.load_table(first).remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    moved = tmp_path / "moved"
    os.rename(tbl.location, moved)
    with pytest.raises(UnsupportedFeature, match="path map"):
        ge.load_table(moved, relocate=True).remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    os.rename(moved, tbl.location)
    assert {p for p in Path(tbl.location).rglob("*") if p.is_file()} == files


def test_configured_locations_inside_the_table_are_listed_shared_ones_outside_are_not(tmp_path: Path) -> None:
    """write.data.path / write.metadata.path inside the table location are listed (only data/ and metadata/
    were); outside it nothing is, as Java's DeleteOrphanFiles lists the table location: a data path shared
    by two tables (object storage keeps them apart) holds the other's live files."""
    cat = sql_catalog(tmp_path)
    inside = cat.create_table("db.i", rows(0, 0).schema)
    with inside.update_properties() as p:
        p.set("write.data.path", f"{inside.location}/custom-data")
        p.set("write.metadata.path", f"{inside.location}/custom-meta")
    inside.append(rows(0, 10))
    strays = [
        Path(inside.location) / "custom-data" / "orphan.parquet",
        Path(inside.location) / "custom-meta" / "o.avro",
    ]
    for stray in strays:
        stray.write_bytes(b"x")
    future = int(time.time() * 1000) + 60_000
    assert inside.remove_orphan_files(older_than=future) == sorted(str(s) for s in strays)
    assert inside.scan().to_arrow().num_rows == 10

    shared = {"write.data.path": str(tmp_path / "shared"), "write.object-storage.enabled": "true"}
    a = cat.create_table("db.a", rows(0, 0).schema, properties=shared)
    b = cat.create_table("db.b", rows(0, 0).schema, properties=shared)
    a.append(rows(0, 5))
    b.append(rows(5, 5))
    assert a.remove_orphan_files(older_than=future) == []
    assert b.scan().to_arrow().num_rows == 5 and a.scan().to_arrow().num_rows == 5


def test_a_data_path_that_is_an_alias_of_the_default_deletes_nothing_live(tmp_path: Path) -> None:
    """write.data.path a symlink to <location>/data: the files recorded through the alias were listed
    under <location>/data, did not match, and were deleted (the next scan failed)."""
    tbl = sql_catalog(tmp_path).create_table("db.a", rows(0, 0).schema)
    (Path(tbl.location) / "data").mkdir(parents=True)
    alias = tmp_path / "fast-data"
    alias.symlink_to(Path(tbl.location) / "data", target_is_directory=True)
    with tbl.update_properties() as p:
        p.set("write.data.path", str(alias))
    tbl.append(rows(0, 10))
    assert tbl.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000) == []
    assert tbl.scan().to_arrow().num_rows == 10


def test_a_linked_metadata_directory_keeps_its_version_hint(tmp_path: Path) -> None:
    """The hint was compared by its unresolved path while the listing resolved the link: deleted."""
    cat = ge.load_catalog("fs", type="filesystem", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    tbl = cat.create_table("db.t", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    meta = Path(tbl.location) / "metadata"
    moved = tmp_path / "real-metadata"
    meta.rename(moved)
    meta.symlink_to(moved, target_is_directory=True)
    tbl = cat.load_table("db.t")
    assert tbl.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000) == []
    assert (moved / "version-hint.text").exists() and tbl.scan().to_arrow().num_rows == 5


def test_a_copied_table_directory_is_refused_and_the_original_kept(tmp_path: Path) -> None:
    """A copy still records the original's location: its orphan removal judged the original's newer files
    by the copy's older metadata and deleted them (the original would not load)."""
    cat = ge.load_catalog("fs", type="filesystem", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    tbl = cat.create_table("db.a", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    shutil.copytree(tbl.location, tmp_path / "copy")
    tbl.append(rows(5, 5))
    copy = ge.load_table(tmp_path / "copy")
    with pytest.raises(
        UnsupportedFeature, match=r"records the location .*: its writes would go to that location"
    ):
        copy.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    assert cat.load_table("db.a").scan().to_arrow().num_rows == 10


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"older_than": "3d"},
            r"older_than='3d': expected milliseconds since the epoch .*, not str",
        ),
        ({"older_than": dt.date(2020, 1, 1)}, r"older_than=datetime.date\(2020, 1, 1\): .* not date"),
        ({"older_than": float("nan")}, r"older_than=nan: .* not float"),
        ({"dry_run": "no"}, r"dry_run='no': expected True or False, not str"),
    ],
)
def test_bad_arguments_are_invalid_options_naming_them(
    tmp_path: Path, kwargs: dict[str, object], message: str
) -> None:
    """A gpu_engine error naming the argument, and no file deleted (``dry_run="no"`` was truthy: a dry
    run; a date a bare TypeError)."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 10))
    stray = Path(tbl.location) / "data" / "stray.parquet"
    stray.write_bytes(b"x")
    os.utime(stray, (time.time() - 10 * DAY_S,) * 2)
    with pytest.raises(InvalidOption, match=message):
        tbl.remove_orphan_files(**kwargs)  # type: ignore[arg-type]
    assert stray.exists()


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_location_shared_with_another_table_is_refused_naming_its_metadata(
    tmp_path: Path, dry_run: bool
) -> None:
    """Two catalogs of one database and warehouse each create ``db.t``: both tables get the same location,
    and the other table's every file looked orphaned (deleted: it could no longer be loaded)."""
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "wh")
    tables = []
    for name in ("team_a", "team_b"):
        cat = ge.load_catalog(name, uri=uri, warehouse=warehouse)
        cat.create_namespace("db")
        tbl = cat.create_table("db.t", rows(0, 0).schema)
        tbl.append(rows(0, 3))
        tables.append(tbl)
    mine, theirs = tables
    assert mine.location == theirs.location
    before = sorted(p for p in Path(mine.location).rglob("*") if p.is_file())
    with pytest.raises(ValidationError, match=r"metadata of another table \(uuid .*nothing was deleted"):
        mine.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000, dry_run=dry_run)
    assert sorted(p for p in Path(mine.location).rglob("*") if p.is_file()) == before
    assert (
        ge.load_catalog("team_b", uri=uri, warehouse=warehouse).load_table("db.t").scan().to_arrow().num_rows
        == 3
    )


def test_a_shared_location_is_refused_when_the_other_tables_metadata_is_young(tmp_path: Path) -> None:
    """Its data, manifests and manifest list were old enough to go, its metadata files (rewritten since,
    the older ones deleted after commit) too young to be looked at: its live files were deleted."""
    uri, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", str(tmp_path / "wh")
    props = {
        "write.metadata.delete-after-commit.enabled": "true",
        "write.metadata.previous-versions-max": "1",
    }
    tables = []
    for name in ("team_a", "team_b"):
        cat = ge.load_catalog(name, uri=uri, warehouse=warehouse)
        cat.create_namespace("db")
        tables.append(cat.create_table("db.t", rows(0, 0).schema, properties=props))
    mine, theirs = tables
    theirs.append(rows(0, 3))
    for f in Path(theirs.location).rglob("*"):  # four days ago
        if f.is_file():
            os.utime(f, (time.time() - 4 * DAY_S,) * 2)
    for i in range(2):  # metadata-only commits today: its metadata files are all new
        with theirs.update_properties() as u:
            u.set("k", str(i))
    before = sorted(p for p in Path(mine.location).rglob("*") if p.is_file())
    with pytest.raises(ValidationError, match=r"metadata of another table \(uuid .*nothing was deleted"):
        mine.remove_orphan_files()
    assert sorted(p for p in Path(mine.location).rglob("*") if p.is_file()) == before
    reloaded = ge.load_catalog("team_b", uri=uri, warehouse=warehouse).load_table("db.t")
    assert reloaded.scan().to_arrow().num_rows == 3


def test_old_metadata_files_of_the_table_itself_are_orphans(tmp_path: Path) -> None:
    """Metadata files that left the metadata log (``write.metadata.previous-versions-max``) are the
    table's own: removed as orphans."""
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table(
        "db.t", rows(0, 0).schema, properties={"write.metadata.previous-versions-max": "1"}
    )
    for i in range(3):
        tbl.append(rows(i, 1))
    listed = tbl.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    assert listed and all(p.endswith(".metadata.json") for p in listed)
    assert cat.load_table("db.t").scan().to_arrow().num_rows == 3


def test_a_current_manifest_list_read_as_empty_refuses_orphan_removal(tmp_path: Path) -> None:
    """Read as 'nothing reachable', the live data files and manifests were deleted as orphans."""
    from .test_expire import _empty_current_manifest_list

    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"format-version": "2"})
    tbl.append(rows(0, 5))
    tbl.append(rows(5, 5))
    _empty_current_manifest_list(tbl)
    before = sorted(p for p in Path(tbl.location).rglob("*") if p.is_file())
    with pytest.raises(ManifestError, match="the manifest list is truncated or inconsistent"):
        tbl.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
    assert sorted(p for p in Path(tbl.location).rglob("*") if p.is_file()) == before

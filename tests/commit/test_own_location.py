"""A copy of a table (its directory copied, then loaded by directory or registered in a catalog) still
records the original's location: writing to it or cleaning it up is refused, and the original keeps every
file (its expiry deleted the original's manifest list and data files; its orphan removal, through a
SQL catalog, the original's newer files)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import gpu_engine as ge
from gpu_engine.errors import UnsupportedFeature
from gpu_engine.table import Table

from ._support import rows, sql_catalog

LATER_MS = int(time.time() * 1000) + 86_400_000
ACTIONS: dict[str, Callable[[Table], object]] = {
    "append": lambda t: t.append(rows(100, 3)),
    "expire": lambda t: t.expire_snapshots(older_than=LATER_MS, retain_last=1),
    "orphans": lambda t: t.remove_orphan_files(older_than=LATER_MS),
    "properties": lambda t: t.update_properties().set("comment", "copy").commit(),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_copied_file_system_table_is_refused(tmp_path: Path, action: str) -> None:
    cat = ge.load_catalog("fs", type="filesystem", warehouse=str(tmp_path / "wh"))
    cat.create_namespace("db")
    tbl = cat.create_table("db.a", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    tbl.overwrite(rows(5, 5))
    shutil.copytree(tbl.location, tmp_path / "copy")
    tbl.append(rows(10, 5))
    copy = ge.load_table(tmp_path / "copy")
    assert copy.scan().to_arrow().num_rows == 5  # reading a copy is fine
    with pytest.raises(UnsupportedFeature, match=r"table directory .*copy records the location .*wh/db/a"):
        ACTIONS[action](copy)
    original = cat.load_table("db.a")
    assert len(original.metadata.snapshots) == 3 and original.scan().to_arrow().num_rows == 10


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_a_copy_registered_in_a_sql_catalog_is_refused(tmp_path: Path, action: str) -> None:
    cat = sql_catalog(tmp_path)
    tbl = cat.create_table("db.orig", rows(0, 0).schema)
    tbl.append(rows(0, 5))
    tbl.overwrite(rows(5, 5))
    shutil.copytree(tbl.location, tmp_path / "copy")
    tbl.append(rows(10, 5))
    copy = cat.register_table("db.copy", str(max((tmp_path / "copy" / "metadata").glob("*.metadata.json"))))
    with pytest.raises(
        UnsupportedFeature, match=r"current metadata file .*copy/metadata/.* records the location"
    ):
        ACTIONS[action](copy)
    original = cat.load_table("db.orig")
    assert len(original.metadata.snapshots) == 3 and original.scan().to_arrow().num_rows == 10


def test_metadata_in_write_metadata_path_is_the_tables_own(tmp_path: Path) -> None:
    cat = sql_catalog(tmp_path)
    elsewhere = (tmp_path / "meta").as_uri()
    tbl = cat.create_table("db.t", rows(0, 0).schema, properties={"write.metadata.path": elsewhere})
    tbl.append(rows(0, 5))
    assert tbl.metadata_location.startswith(elsewhere)
    tbl.append(rows(5, 5))
    tbl.expire_snapshots(older_than=LATER_MS, retain_last=1)
    assert tbl.scan().to_arrow().num_rows == 10

"""A committable copy of a fixture table: its metadata in a fresh file-system (Hadoop layout) table
directory, its data and delete files still read in place from the (read-only) fixture.

:func:`committable_copy` starts from :func:`tests.execute.oracles.remapped_copy` (every path made an
absolute local path: manifests, manifest lists and position-delete files copied to the oracles' scratch
space, data files left in the fixture), points the metadata's ``location`` at the new directory and drops
the properties that would send new files elsewhere, so a commit writes only under that directory:
``<dir>/data`` and ``<dir>/metadata``. The table is loaded without a path map, which a commit requires.

:func:`tree_state` is a snapshot of a directory's files (size, mtime) to check that a fixture was left
untouched: the tests run as a user the fixtures' read-only modes may not stop.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gpu_engine as ge
from gpu_engine.table import Table

from ..execute.oracles import remapped_copy

# Table properties that point new data or metadata files outside the table location.
REDIRECTING_PROPERTIES = ("write.data.path", "write.metadata.path", "write.folder-storage.path")
REDIRECTING_PREFIXES = ("write.object-storage.",)


def committable_metadata(rel: str, location: Path) -> dict[str, Any]:
    """The remapped metadata of fixture table ``rel`` with ``location`` as its table location."""
    md: dict[str, Any] = json.loads(remapped_copy(rel).read_text())
    md["location"] = str(location)
    props = dict(md.get("properties") or {})
    for key in list(props):
        if key in REDIRECTING_PROPERTIES or key.startswith(REDIRECTING_PREFIXES):
            del props[key]
    md["properties"] = props
    return md


def committable_copy(rel: str, location: Path) -> Table:
    """Fixture table ``rel`` as a committable file-system table at ``location`` (created: must not exist
    or be empty). Its current metadata is ``location/metadata/v1.metadata.json``."""
    meta = location / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    if any(meta.iterdir()):
        raise FileExistsError(f"{meta} is not empty")
    (meta / "v1.metadata.json").write_text(json.dumps(committable_metadata(rel, location), indent=1))
    (meta / "version-hint.text").write_text("1")
    tbl = ge.load_table(str(location))
    assert not tbl.io.path_map, tbl.io.path_map
    return tbl


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` -> (size, mtime in ns)."""
    out: dict[str, tuple[int, int]] = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(dirpath, name))
            out[os.path.join(dirpath, name)] = (st.st_size, st.st_mtime_ns)
    return out

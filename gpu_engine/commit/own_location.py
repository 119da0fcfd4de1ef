"""A table written or cleaned up only where it lives: a copy of a table directory (``cp -r``, a backup
registered in a catalog) still records the original's location, so its writes would put files into the
original's directories and its snapshot expiry and orphan removal would delete the original's files (the
original would no longer load). Iceberg Java has no such guard; its files are the same.

The check, for local tables (real paths compared, so symlinks and URI spellings agree):

* a file-system (Hadoop layout) table: the directory its metadata was found in is its recorded location;
* a SQL catalog's table: its current metadata file lies in ``<location>/metadata`` or the table's
  ``write.metadata.path``, where every commit writes it.

REST catalogs place metadata as their server chooses: not checked. Reading a copy needs none of this
(``relocate=True`` or a path map reads it where it is).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..errors import UnsupportedFeature
from ..io.fileio import local_path, scheme_of
from .table_update import METADATA_PATH

if TYPE_CHECKING:
    from ..table import Table

__all__ = ["check_own_location"]


def check_own_location(table: Table, *, file_system_table: bool) -> None:
    """:class:`UnsupportedFeature` when ``table`` is a copy (see the module doc), naming both places."""
    if any(scheme_of(p) not in ("", "file") for p in (table.metadata_location, table.location)):
        return
    found = os.path.dirname(os.path.abspath(local_path(table.io.resolve(table.metadata_location))))
    recorded = os.path.realpath(local_path(table.io.resolve(table.location)))
    if file_system_table:
        found_in = os.path.realpath(os.path.dirname(found))  # metadata/ itself may be a link
        if found_in == recorded:
            return
        where = f"table directory {found_in}"
    else:
        homes = {os.path.join(recorded, "metadata")}
        custom = table.metadata.properties.get(METADATA_PATH, "").strip()
        if custom and scheme_of(custom) in ("", "file"):
            homes.add(os.path.realpath(local_path(table.io.resolve(custom))))
        if os.path.realpath(found) in homes:
            return
        where = f"current metadata file {table.metadata_location}, outside its metadata directory,"
    raise UnsupportedFeature(
        f"{where} records the location {table.location} (a copy or a move): its writes would go to that "
        "location and its snapshot expiry or orphan removal would delete that table's files; write to and "
        "clean up the table where it lives (read a copy with relocate=True)"
    )

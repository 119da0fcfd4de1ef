"""Orphan file removal: files under a table's ``data/`` and ``metadata/`` directories (and its
``write.data.path`` / ``write.metadata.path`` where they lie inside the table location: a path outside it may
be shared with other tables) that nothing in the current metadata reaches and that are older than a cutoff
(default: three days ago, so the files of commits in flight survive).

Reachable: the current metadata file and those in ``metadata-log``, ``version-hint.text``, and for every
snapshot its manifest list, manifests and every entry's file (any status), plus statistics and partition
statistics files, as the catalog's current metadata has them; hidden names (``_SUCCESS``, ``.crc``) are
left alone, but for the staging files this engine's writers leave when killed (the table is refreshed
first, and again before deleting). Refused when the table's ``gc.enabled`` is false, and when an
unreachable metadata file, of any age, is another table's (another ``table-uuid``: two tables share the
location, as two catalogs of one warehouse, or a renamed table and a new one under its old name, place
them; Java's DeleteOrphanFiles would delete the other's files). Local tables only: file ages come from
``os.stat``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING

from .. import _args
from ..errors import InvalidOption, UnsupportedFeature, ValidationError
from ..iceberg.manifest_list import ManifestFile
from ..iceberg.manifests import read_manifest
from ..iceberg.metadata import parse_metadata
from ..io.fileio import FileIO, local_path, scheme_of
from ..io.locations import data_location
from .entries import snapshot_manifests
from .expire import check_gc_enabled, to_ms
from .producer import check_committable, delete_files, is_file_system_catalog
from .table_update import metadata_dir

if TYPE_CHECKING:
    from ..table import Table

DEFAULT_AGE_MS = 3 * 24 * 3600 * 1000
_STAGING = re.compile(r"\..+\.[0-9a-f]{32}\.tmp")  # as io.parquet_write and io.fileio name them
_HINTS = ("version-hint.text", "version-hint.txt")
_METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz")


def _key(io: FileIO, path: str) -> str:
    """A file's identity: its real path (a data path reached through a symlink or a URI spelling matches
    the listing's spelling)."""
    return os.path.realpath(local_path(io.resolve(path)))


def _listed_dirs(table: Table, root: str) -> list[str]:
    """Real paths of ``<location>/data``, ``<location>/metadata``, and ``write.data.path`` /
    ``write.metadata.path`` where they lie inside the table location. As Java's DeleteOrphanFiles, nothing
    outside the table location is listed: a data path shared by several tables (the object store layout
    keeps them apart) holds the others' live files."""
    base = os.path.realpath(local_path(root))
    file_system = table.catalog is not None and is_file_system_catalog(table.catalog)
    configured = [
        table.io.resolve(data_location(table.location, table.metadata.properties)),
        table.io.resolve(metadata_dir(table.metadata, file_system_table=file_system)),
    ]
    dirs = [os.path.join(base, "data"), os.path.join(base, "metadata")]
    for path in configured:
        if _is_local(path):
            real = os.path.realpath(local_path(path))
            if real == base or real.startswith(base + os.sep):
                dirs.append(real)
    return list(dict.fromkeys(dirs))


def _is_local(path: str) -> bool:
    return scheme_of(path) in ("", "file")


def _hidden(name: str) -> bool:
    """Names starting with ``_`` or ``.`` (``_SUCCESS``, ``.crc`` files, ``_temporary/``) are not the
    table's, as Java's hidden-path filter has it; a partition directory (``_p=1``) is, and so is a staging
    file of this engine's writers (``.<name>.<32 hex digits>.tmp``): a writer killed before publishing it
    (SIGKILL: a losing speculative Spark attempt, a lost executor) leaves it behind."""
    return name.startswith((".", "_")) and "=" not in name and _STAGING.fullmatch(name) is None


def reachable_files(table: Table) -> set[str]:
    """Normalised local paths of every file the current metadata of ``table`` reaches."""
    md, io = table.metadata, table.io
    recorded = {table.metadata_location, *(e.metadata_file for e in md.metadata_log)}
    recorded.update(f.statistics_path for f in md.statistics)
    recorded.update(f.statistics_path for f in md.partition_statistics)
    manifests: dict[str, ManifestFile] = {}
    for s in md.snapshots:
        if s.manifest_list is not None:
            recorded.add(s.manifest_list)
        manifests.update((m.manifest_path, m) for m in snapshot_manifests(io, s))
    for path, m in manifests.items():
        recorded.add(path)
        entries = read_manifest(replace(m, manifest_path=io.resolve(path)), open_input=io.open_input)
        recorded.update(entries.column("file_path").to_pylist())
    out = {_key(io, p) for p in recorded}
    metadata_dir = os.path.join(_key(io, md.location), "metadata")
    out.update(os.path.realpath(os.path.join(metadata_dir, h)) for h in _HINTS)  # metadata/ may be a link
    return out


def _check_own(table: Table, orphans: list[str]) -> None:
    """:class:`ValidationError` where an unreachable metadata file is another table's (another uuid): two
    tables share the location (two catalogs, or a table renamed and another created under the old name,
    both place tables by name), and every file of the other would look orphaned."""
    own = table.metadata.table_uuid
    for path in orphans:
        if not path.endswith(_METADATA_SUFFIXES):
            continue
        try:
            other = parse_metadata(table.io.read_bytes(path), source=path).table_uuid
        except (OSError, ValueError):  # not readable as metadata: nobody's table, an orphan
            continue
        if own and other and other != own:
            raise ValidationError(
                f"{path}: metadata of another table (uuid {other}) lies in the metadata directory of "
                f"table {table.location} (uuid {own}): the two tables share a location, and the other's "
                "files would be deleted as orphans; nothing was deleted"
            )


def remove_orphan_files(
    table: Table, *, older_than: int | dt.datetime | None = None, dry_run: bool = False
) -> list[str]:
    """The orphan files of ``table`` (sorted local paths), deleted unless ``dry_run``; files that could not
    be deleted raise :class:`OSError` after the others were deleted."""
    dry_run = _args.boolean(dry_run, "dry_run", InvalidOption)
    given = None if older_than is None else to_ms(older_than)
    io = table.io
    root = io.resolve(table.location)
    if not _is_local(root):
        raise UnsupportedFeature(
            f"table {table.location}: remove_orphan_files supports local tables only (file ages come "
            "from os.stat)"
        )
    # the catalog's current metadata, with paths as written: else all may look orphaned
    check_committable(table, writes_files=False)  # also refuses a copy of a table (.own_location)
    check_gc_enabled(table.metadata, "remove orphan files")
    cutoff = int(time.time() * 1000) - DEFAULT_AGE_MS if given is None else given
    if table.catalog is not None:
        table.refresh()  # what other writers committed since this handle was loaded is not orphaned
    reachable = reachable_files(table)
    orphans: list[str] = []
    metadata: list[str] = []  # unreachable metadata files of any age: another table's are looked for
    for top in _listed_dirs(table, root):
        for dirpath, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not _hidden(d)]
            for name in names:
                if _hidden(name):
                    continue
                path = os.path.join(dirpath, name)
                if os.path.islink(path) or os.path.realpath(path) in reachable:
                    continue
                if name.endswith(_METADATA_SUFFIXES):
                    metadata.append(path)
                if os.stat(path).st_mtime * 1000 < cutoff:
                    orphans.append(path)
    orphans = sorted(set(orphans))  # one location may lie inside the other
    if table.catalog is not None:  # a commit that landed while the files were listed
        seen = table.metadata_location
        if table.refresh().metadata_location != seen:
            reachable = reachable_files(table)
            orphans = [p for p in orphans if os.path.realpath(p) not in reachable]
            metadata = [p for p in metadata if os.path.realpath(p) not in reachable]
    # another table's files may be old and its metadata new (rewritten since, the older metadata deleted
    # after commit): its metadata files are looked at whatever their age
    _check_own(table, sorted(set(metadata)))
    if not dry_run:
        left = delete_files(io, orphans, fault=None)
        if left:
            raise OSError(f"remove_orphan_files: could not delete {len(left)} file(s): {list(left)[:5]}")
    return orphans

"""Loading a table from a path: its directory (the current metadata found there) or one metadata file,
optionally relocated onto where the table is now."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .errors import InvalidOption, NoSuchTable
from .io.fileio import load_file_io, local_path, scheme_of
from .io.paths import PathMap
from .table import Table, read_metadata

if TYPE_CHECKING:
    from .catalog.base import Catalog


def relocation_map(recorded_location: str, actual_location: str) -> PathMap:
    """Map a table's recorded ``location`` (and its ``./``-less spelling) onto where the table is now."""
    mapping = {recorded_location: actual_location}
    if recorded_location.startswith("./"):  # "./t" locations with "t/..." file paths (DuckDB test tables)
        mapping[recorded_location[2:]] = actual_location
    return PathMap.of(mapping)


def _parent(path: str) -> str:
    stripped = path.rstrip("/")
    return stripped.rsplit("/", 1)[0] if "/" in stripped else "."


def load_table(
    path_or_metadata_json: str | os.PathLike[str],
    *,
    relocate: bool = False,
    path_map: PathMap | Mapping[str, str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> Table:
    """Load a table from its directory (current metadata found there) or from one metadata JSON file.

    ``relocate=True`` maps the metadata's recorded ``location`` onto the table directory actually found
    (for a metadata file: the directory above ``metadata/``, else the file's directory); ``path_map``
    maps explicit prefixes and wins over ``relocate`` for the same prefix. ``properties`` configure the
    IO (``s3.*`` for fsspec). A directory-loaded table commits through a
    :class:`~gpu_engine.catalog.filesystem.FileSystemCatalog`; a metadata-file table is read-only.
    """
    from .catalog.filesystem import METADATA_DIR, FileSystemCatalog, basename, find_current_metadata

    if not isinstance(path_or_metadata_json, (str, os.PathLike)):
        raise InvalidOption(
            f"load_table path={path_or_metadata_json!r}: expected a table directory or metadata file "
            f"(a str or os.PathLike), not {type(path_or_metadata_json).__name__}"
        )
    path = os.fspath(path_or_metadata_json)
    if not isinstance(path, str):  # a PathLike of bytes
        raise InvalidOption(f"load_table path={path_or_metadata_json!r}: expected a str path, not bytes")
    if not scheme_of(path) or scheme_of(path) == "file":
        path = os.path.abspath(local_path(path))
    io = load_file_io(properties)
    catalog: Catalog | None
    if io.is_dir(path):
        table_dir = path.rstrip("/") or "/"
        location = find_current_metadata(io, table_dir)
        catalog = FileSystemCatalog(
            "filesystem", **{**dict(properties or {}), "warehouse": _parent(table_dir)}
        )
    elif io.exists(path):
        location, catalog = path, None
        parent = _parent(path)
        table_dir = _parent(parent) if basename(parent) == METADATA_DIR else parent
    else:
        raise NoSuchTable(f"{path}: no such table directory or metadata file")
    metadata = read_metadata(io, location)
    explicit = path_map if isinstance(path_map, PathMap) else PathMap.of(path_map or {})
    mapping = relocation_map(metadata.location, table_dir).merged(explicit) if relocate else explicit
    return Table(
        identifier=(basename(table_dir),),
        metadata=metadata,
        metadata_location=location,
        io=io.with_path_map(mapping),
        catalog=catalog,
    )

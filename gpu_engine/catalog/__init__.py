"""Catalogs: SQL (SQLite default, PostgreSQL; PyIceberg/JDBC layout), REST, and file-system tables.

``load_catalog(name, **properties)`` reads the catalog's configuration the PyIceberg way
(:mod:`gpu_engine.catalog.config`) and builds the catalog of its ``type``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ..errors import CatalogError, UnsupportedFeature
from ..io.paths import PathMap
from .base import Catalog, Identifier, IdentifierLike
from .config import CatalogConfig, resolve_catalog_config

__all__ = ["Catalog", "CatalogConfig", "Identifier", "IdentifierLike", "load_catalog"]

# type -> (module, class); modules are imported on first use (rest is optional until it lands)
_CATALOG_TYPES = {
    "sql": ("gpu_engine.catalog.sql", "SqlCatalog"),
    "rest": ("gpu_engine.catalog.rest", "RestCatalog"),
    "filesystem": ("gpu_engine.catalog.filesystem", "FileSystemCatalog"),
    "hadoop": ("gpu_engine.catalog.filesystem", "FileSystemCatalog"),
}


def load_catalog(
    name: str | None = None, *, path_map: PathMap | Mapping[str, str] | None = None, **properties: str | None
) -> Catalog:
    """The catalog ``name`` from ``~/.pyiceberg.yaml`` / ``PYICEBERG_CATALOG__*`` with ``properties`` on top.

    ``name=None`` picks the configured ``default-catalog`` (else ``"default"``). ``type`` is ``sql``,
    ``rest``, ``filesystem`` (alias ``hadoop``; needs ``warehouse``) or ``in-memory`` (SQLite in memory),
    or is inferred from ``uri``. ``path_map`` remaps the paths the catalog records (metadata locations
    and everything read through the tables it loads).
    """
    config = resolve_catalog_config(name, **properties)
    props = dict(config.properties)
    catalog_type = config.type
    if catalog_type == "in-memory":
        catalog_type = "sql"
        props.setdefault("uri", "sqlite:///:memory:")
    if catalog_type not in _CATALOG_TYPES:
        known = ", ".join(sorted([*_CATALOG_TYPES, "in-memory"]))
        raise UnsupportedFeature(
            f"catalog {config.name!r}: type {config.type!r} is not supported (supported: {known})"
        )
    module_name, class_name = _CATALOG_TYPES[catalog_type]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        raise CatalogError(
            f"catalog {config.name!r}: the {catalog_type} catalog is not available ({e})"
        ) from e
    cls = getattr(module, class_name)
    catalog: Catalog = cls(config.name, **props)
    if path_map:
        catalog.with_path_map(path_map)
    return catalog

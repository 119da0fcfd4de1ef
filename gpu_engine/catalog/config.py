"""Catalog configuration read exactly the way PyIceberg reads it, so a user's existing setup works.

Sources, lowest precedence first (PyIceberg 0.12 ``pyiceberg/utils/config.py``):

1. The first ``.pyiceberg.yaml`` found in ``$PYICEBERG_HOME``, then ``~``, then the working directory
   (an empty file counts as absent). Keys are lowercased at every level; scalar values stay strings.
2. Environment variables ``PYICEBERG_<A>__<B>__<C>`` (case-insensitive prefix): the rest is lowercased and
   split on ``__`` into at most three parts; inside a part ``_`` becomes ``-``, and in the third part a
   further ``__`` becomes ``.``. ``PYICEBERG_CATALOG__PROD__S3__ACCESS_KEY_ID`` sets
   ``catalog.prod."s3.access-key-id"``; ``PYICEBERG_DEFAULT_CATALOG`` sets ``default-catalog``.
   An environment value replaces the file's, an empty one too (PyIceberg writes them into the file's
   configuration in place).
3. Keyword properties passed to ``load_catalog`` (same rule: ``None`` or empty keeps the lower value).

The catalog ``type`` is taken as given (lowercased) or inferred from ``uri`` as PyIceberg does:
``http…`` → rest, ``sqlite…``/``postgresql…`` → sql, ``thrift…`` → hive (not supported here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import CatalogError

PYICEBERG_HOME = "PYICEBERG_HOME"
PYICEBERG_YML = ".pyiceberg.yaml"
_ENV_PREFIX = "pyiceberg_"
DEFAULT_CATALOG_KEY = "default-catalog"

Config = dict[str, Any]


@dataclass(frozen=True)
class CatalogConfig:
    """One catalog's resolved configuration."""

    name: str
    type: str
    properties: Mapping[str, str] = field(default_factory=dict)


def merge_config(lhs: Mapping[str, Any], rhs: Mapping[str, Any]) -> Config:
    """``rhs`` merged into ``lhs``: nested dicts merge, otherwise the non-empty value wins, ``rhs`` first."""
    out: Config = dict(lhs)
    for key, rv in rhs.items():
        if key in out:
            lv = out[key]
            out[key] = merge_config(lv, rv) if isinstance(lv, dict) and isinstance(rv, dict) else (rv or lv)
        else:
            out[key] = rv
    return out


def _lowercase_keys(d: Mapping[str, Any]) -> Config:
    return {str(k).lower(): _lowercase_keys(v) if isinstance(v, dict) else v for k, v in d.items()}


def _search_dirs() -> list[str | None]:
    return [os.environ.get(PYICEBERG_HOME), os.path.expanduser("~"), os.getcwd()]


def config_from_files() -> Config:
    """The first non-empty ``.pyiceberg.yaml`` in ``$PYICEBERG_HOME``, ``~``, the working directory."""
    for directory in _search_dirs():
        if not directory:
            continue
        path = os.path.join(directory, PYICEBERG_YML)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            data = yaml.load(text, Loader=yaml.BaseLoader)
        except yaml.YAMLError as e:
            raise CatalogError(f"cannot parse {path}: {e}") from e
        if not data:
            continue
        if not isinstance(data, dict):
            raise CatalogError(f"{path} must hold a mapping at the top level, not {type(data).__name__}")
        return _lowercase_keys(data)
    return {}


def config_from_env(config: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> Config:
    """``config`` amended with the ``PYICEBERG_*`` environment variables (PyIceberg's rules)."""
    out = _deep_copy(config)
    for var, value in (os.environ if environ is None else environ).items():
        lower = var.lower()
        if not lower.startswith(_ENV_PREFIX):
            continue
        parts = lower[len(_ENV_PREFIX) :].split("__", maxsplit=2)
        path = [p.replace("__", ".").replace("_", "-") for p in parts]
        node = out
        for element in path[:-1]:
            child = node.setdefault(element, {})
            if not isinstance(child, dict):
                raise CatalogError(
                    f"environment variable {var} nests under {element!r}, which is already a value: {child!r}"
                )
            node = child
        node[path[-1]] = value
    return out


def _deep_copy(d: Mapping[str, Any]) -> Config:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in d.items()}


def load_config() -> Config:
    """The merged configuration: the YAML file, then environment variables over it."""
    return config_from_env(config_from_files())


def default_catalog_name(config: Mapping[str, Any]) -> str:
    name = config.get(DEFAULT_CATALOG_KEY)
    if not name:
        return "default"
    if not isinstance(name, str):
        raise CatalogError(f"{DEFAULT_CATALOG_KEY} must be a string, not {name!r}")
    return name


def infer_catalog_type(name: str, properties: Mapping[str, Any]) -> str:
    """The catalog type from its ``uri``, as PyIceberg infers it."""
    uri = properties.get("uri")
    if uri is None:
        raise CatalogError(
            f"catalog {name!r}: URI missing and no type given; set uri in ~/.pyiceberg.yaml, the environment "
            f"variable PYICEBERG_CATALOG__{name.upper()}__URI, or load_catalog(..., uri=...)"
        )
    if not isinstance(uri, str):
        raise CatalogError(f"catalog {name!r}: uri must be a string, not {uri!r}")
    if uri.startswith("http"):
        return "rest"
    if uri.startswith("thrift"):
        return "hive"
    if uri.startswith(("sqlite", "postgresql")):
        return "sql"
    raise CatalogError(f"catalog {name!r}: cannot infer the catalog type from the uri {uri!r}; set type=")


def resolve_catalog_config(name: str | None = None, **properties: str | None) -> CatalogConfig:
    """Catalog ``name`` (None: ``default-catalog``, else ``"default"``) from files, env and ``properties``."""
    if name is not None and not isinstance(name, str):
        raise CatalogError(f"catalog name={name!r}: expected a string, not {type(name).__name__}")
    config = load_config()
    if name is None:
        name = default_catalog_name(config)
    catalogs = config.get("catalog", {})
    if not isinstance(catalogs, dict):
        raise CatalogError("the 'catalog' configuration must be a mapping of catalog names to properties")
    from_config = catalogs.get(name.lower(), {})
    if not isinstance(from_config, dict):
        raise CatalogError(f"configuration catalog.{name.lower()} must be a mapping, not {from_config!r}")
    merged = _flatten(merge_config(from_config, properties))
    props = {k: _as_str(k, v) for k, v in merged.items() if v is not None}
    provided = props.pop("type", None)
    catalog_type = provided.lower() if provided else infer_catalog_type(name, props)
    if catalog_type in ("rest", "sql", "hive") and "uri" not in props:
        raise CatalogError(
            f"catalog {name!r} of type {catalog_type!r} needs a uri: set it in ~/.pyiceberg.yaml, "
            f"PYICEBERG_CATALOG__{name.upper()}__URI, or load_catalog(..., uri=...)"
        )
    return CatalogConfig(name=name, type=catalog_type, properties=props)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> Config:
    """Nested YAML mappings as dotted keys (``s3: {endpoint: x}`` → ``s3.endpoint``)."""
    out: Config = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _as_str(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise CatalogError(f"catalog property {key!r} must be a string, not {value!r}")

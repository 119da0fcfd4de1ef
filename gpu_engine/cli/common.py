"""Options and table opening shared by the ``gpu-engine`` subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ..catalog import load_catalog
from ..errors import GpuEngineError
from ..table import Table
from ..table_load import load_table


def _path_map(pairs: Sequence[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise GpuEngineError(f"--path-map {pair!r}: expected OLD=NEW")
        out[old] = new
    return out


def open_table(args: argparse.Namespace) -> Table:
    """TABLE is a catalog identifier with --catalog, else a table directory or metadata JSON file."""
    path_map = _path_map(args.path_map)
    if args.catalog:
        if getattr(args, "relocate", False):
            raise GpuEngineError(
                "--relocate applies to a table directory, not to a --catalog table (use --path-map)"
            )
        catalog = load_catalog(args.catalog, path_map=path_map or None)
        return catalog.load_table(args.table)
    return load_table(args.table, relocate=args.relocate, path_map=path_map)


def key_values(
    pairs: Sequence[str],
    option: str,
    form: str = "KEY=VALUE",
    *,
    error: type[GpuEngineError] = GpuEngineError,
) -> dict[str, str]:
    """Repeated ``option`` values ``K=V`` as a dict (keys and values stripped; a later key wins); ``error``
    naming the option and the expected ``form`` for a pair without ``=`` or key."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise error(f"{option} {pair!r}: expected {form}")
        out[key.strip()] = value.strip()
    return out


def table_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="table directory, metadata JSON file, or identifier with --catalog")
    p.add_argument("--catalog", help="catalog name from ~/.pyiceberg.yaml / PYICEBERG_CATALOG__* variables")
    p.add_argument("--relocate", action="store_true", help="map the table's recorded location to where it is")
    p.add_argument("--path-map", action="append", default=[], metavar="OLD=NEW", help="remap a path prefix")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def snapshot_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--filter", default=None, help="row filter, e.g. \"ts >= '2024-01-01' and id in (1, 2)\"")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--snapshot", type=int, help="snapshot id")
    group.add_argument("--as-of", type=int, help="timestamp in ms since the epoch")
    group.add_argument("--ref", help="branch or tag name")


def column_list(text: str | None, option: str) -> list[str] | None:
    """The distinct comma-separated column names of ``option`` (None when not given); an empty name or a
    repeated one is an error naming the option."""
    if text is None:
        return None
    names = [c.strip() for c in text.split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise GpuEngineError(f"{option} {text!r}: expected distinct comma-separated column names")
    return names

"""``gpu-engine inspect TABLE partitions|files|data_files|delete_files|entries|manifests|snapshots|refs|
history|metadata_log_entries|all_manifests|all_files|all_data_files|all_delete_files|all_entries``: a
metadata table (see
:mod:`gpu_engine.inspect`) on the screen, as JSON rows (``--json``), or as a Parquet file (``-o``).

``--snapshot ID`` picks the snapshot of ``partitions``, the ``files`` tables, ``entries`` and
``manifests`` (default: current);
``--columns`` selects columns; the screen shows at most ``--limit`` rows (default 50)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table as RichTable

from ..errors import GpuEngineError
from .common import column_list, open_table, table_options
from .output import direct, staging_path

_BY_SNAPSHOT = ("partitions", "files", "data_files", "delete_files", "entries", "manifests")
TABLES = (
    *_BY_SNAPSHOT, "snapshots", "refs", "history", "metadata_log_entries",
    "all_manifests", "all_files", "all_data_files", "all_delete_files", "all_entries",
)  # fmt: skip


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "inspect", help="metadata tables: partitions, files, manifests, snapshots, refs, history, ..."
    )
    table_options(p)
    p.add_argument("what", choices=TABLES, help="the metadata table")
    p.add_argument("--snapshot", type=int, metavar="ID", help="for " + ", ".join(_BY_SNAPSHOT))
    p.add_argument("--columns", metavar="COLS", help="comma-separated columns")
    p.add_argument("--limit", type=int, default=50, metavar="N", help="rows on the screen (default 50)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the whole table as Parquet (- for stdout)")
    p.set_defaults(run=cmd_inspect)


def cmd_inspect(args: argparse.Namespace, console: Console) -> int:
    if args.snapshot is not None and args.what not in _BY_SNAPSHOT:
        raise GpuEngineError(
            f"--snapshot: {args.what} has no snapshot to choose (only {', '.join(_BY_SNAPSHOT)})"
        )
    table = open_table(args)
    inspect = table.inspect
    result: pa.Table = (
        getattr(inspect, args.what)(snapshot_id=args.snapshot)
        if args.what in _BY_SNAPSHOT
        else getattr(inspect, args.what)()
    )
    if args.columns:
        wanted = column_list(args.columns, "--columns") or []
        unknown = [c for c in wanted if c not in result.column_names]
        if unknown:
            raise GpuEngineError(
                f"--columns: {args.what} has no column(s) {unknown} (columns: {result.column_names})"
            )
        result = result.select(wanted)
    if args.output:
        staged = None if args.output == "-" else staging_path(args.output)
        target: Any = staged or sys.stdout.buffer
        try:
            if args.output != "-" and staged is None:  # not a regular file (/dev/null, a FIFO): written to
                target = direct(args.output)
            pq.write_table(_parquet_writable(result), target, compression="zstd")
            if staged is not None:
                os.replace(staged, os.path.realpath(args.output))  # the old file stays until the new is whole
        except BrokenPipeError:
            raise
        except OSError as e:
            raise GpuEngineError(f"-o {args.output}: cannot write there ({e})") from None
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            why = f"{args.what} cannot be written as Parquet ({e})"
            raise GpuEngineError(f"-o {args.output}: {why}") from None
        finally:
            if staged is not None:
                Path(staged).unlink(missing_ok=True)
            elif args.output != "-" and not isinstance(target, str):
                target.close()
        if args.output == "-":
            return 0  # stdout holds the Parquet stream
    if args.json:  # strict JSON: non-finite floats (bounds of a column with infinities) as strings
        print(json.dumps(_finite(result.to_pylist()), indent=2, default=_json_value, allow_nan=False))
        return 0
    if args.limit < 0:
        raise GpuEngineError(f"--limit {args.limit}: expected 0 or more")
    shown = result.slice(0, args.limit)
    out = RichTable(
        title=f"{args.what} ({result.num_rows} rows"
        + (f", first {shown.num_rows})" if shown.num_rows < result.num_rows else ")")
    )
    for name in shown.column_names:
        out.add_column(name)
    for row in shown.to_pylist():
        out.add_row(*(_cell(v) for v in row.values()))
    console.print(out)
    return 0


def _parquet_writable(result: pa.Table) -> pa.Table:
    """``result`` without the structs Parquet cannot hold: those without fields, at any depth (the
    ``partition`` of an unpartitioned table, also inside ``entries``' ``data_file``), and structs left
    without fields once theirs are gone."""
    names, columns = [], []
    for name, column in zip(result.column_names, result.columns, strict=True):
        kept = _without_empty_structs(column.combine_chunks())
        if kept is not None:
            names.append(name)
            columns.append(kept)
    return pa.table(columns, names=names)


def _without_empty_structs(values: pa.Array) -> pa.Array | None:
    t = values.type
    if not pa.types.is_struct(t):
        return values
    fields, children = [], []
    for i in range(t.num_fields):
        child = _without_empty_structs(values.field(i))
        if child is not None:
            fields.append(t.field(i).with_type(child.type))
            children.append(child)
    if not children:
        return None
    mask = values.is_null() if values.null_count else None
    return pa.StructArray.from_arrays(children, fields=fields, mask=mask)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "inf", "-inf", "nan"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items())
    if isinstance(value, list):  # lists, and maps as (key, value) pairs
        return ", ".join(f"{_cell(v[0])}={_cell(v[1])}" if isinstance(v, tuple) else _cell(v) for v in value)
    if isinstance(value, bytes):
        return value.hex()
    return str(value)

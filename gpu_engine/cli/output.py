"""Row output shared by ``scan`` and ``changes``: a Parquet sink (file or stdout) that leaves no partial
file behind, and a preview table of the first rows."""

from __future__ import annotations

import io
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table as RichTable

from ..errors import GpuEngineError

PREVIEW_ROWS = 20


class _Gate(io.RawIOBase):
    """stdout (or ``handle``: an output that is not a regular file, such as a FIFO) for a Parquet stream
    that can be cut: once cut, nothing more is written, so a failed scan leaves a stream without a footer
    (a reader refuses it) instead of a valid file missing rows. Written in order, never sought."""

    def __init__(self, handle: Any = None) -> None:
        super().__init__()
        self.cut = False
        self.handle = handle

    def _out(self) -> Any:
        return sys.stdout.buffer if self.handle is None else self.handle

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        size = len(memoryview(data))
        if not self.cut:
            self._out().write(data)
        return size

    def flush(self) -> None:
        if not self.cut:
            self._out().flush()

    def close(self) -> None:
        super().close()  # flushes first
        if self.handle is not None and not self.handle.closed:
            self.handle.close()


def direct(output: str) -> _Gate:
    """A stream writing to ``output`` (not a regular file: ``/dev/null``, a FIFO) in order."""
    return _Gate(open(output, "wb"))  # closed by finish/discard


_GATES: dict[int, _Gate] = {}
_STAGED: dict[int, str] = {}  # a file sink's temporary file, renamed onto the output once it is whole


def staging_path(output: str) -> str | None:
    """A hidden temporary file beside the file ``output`` names (through links): written whole, then
    renamed onto it (a failed write leaves a file there as it was, not emptied or removed); None where
    ``output`` is not a regular file (``/dev/null``, a FIFO): written to, never replaced."""
    path = Path(os.path.realpath(output))
    if path.exists() and not path.is_file():
        return None
    return str(path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp"))


def open_sink(output: str | None, schema: pa.Schema) -> pq.ParquetWriter | None:
    if output is None:
        return None
    try:  # a schema Parquet cannot hold fails here, before the output file is created or truncated
        pq.ParquetWriter(pa.BufferOutputStream(), schema, compression="zstd").close()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid) as e:
        raise GpuEngineError(f"-o {output}: the columns cannot be written as Parquet: {e}") from None
    if output != "-" and Path(output).is_dir():
        raise GpuEngineError(f"-o {output}: is a directory")
    staged = None if output == "-" else staging_path(output)
    try:
        target: Any = _Gate() if output == "-" else staged if staged is not None else direct(output)
        sink = pq.ParquetWriter(target, schema, compression="zstd")
    except BrokenPipeError:
        raise
    except OSError as e:
        raise GpuEngineError(f"-o {output}: cannot write there ({e})") from None
    if isinstance(target, _Gate):
        _GATES[id(sink)] = target
    else:
        _STAGED[id(sink)] = target
    return sink


def finish(sink: pq.ParquetWriter, output: str) -> None:
    """Close the writer of a finished scan; a file's rows replace what ``output`` held only now."""
    gate = _GATES.pop(id(sink), None)
    sink.close()
    if gate is not None:
        gate.close()
    staged = _STAGED.pop(id(sink), None)
    if staged is not None:
        os.replace(staged, os.path.realpath(output))  # a link to the file stays a link


def discard(sink: pq.ParquetWriter, output: str) -> None:
    """Close the writer of a failed scan and remove its unfinished temporary file (``output`` stays as it
    was); on stdout, cut the stream first so that it ends without a footer."""
    gate = _GATES.pop(id(sink), None)
    if gate is not None:
        gate.cut = True
    sink.close()
    if gate is not None:
        gate.close()
    staged = _STAGED.pop(id(sink), None)
    if staged is not None:
        Path(staged).unlink(missing_ok=True)


def print_preview(console: Console, batches: list[pa.RecordBatch], schema: pa.Schema) -> None:
    rows = pa.Table.from_batches(batches, schema=schema).slice(0, PREVIEW_ROWS).to_pylist()
    out = RichTable(title=f"first {len(rows)} rows")
    for name in schema.names:
        out.add_column(name)
    for row in rows:
        out.add_row(*(str(row[n]) for n in schema.names))
    console.print(out)


def report(
    shown: Console,
    summary: dict[str, Any],
    *,
    title: str,
    as_json: bool,
    to_stdout: bool,
    preview: list[pa.RecordBatch] | None,
    schema: pa.Schema,
) -> None:
    """The run's summary: JSON (to stderr when the rows went to stdout), else the preview of the first
    rows (when they went nowhere else) and a table."""
    if as_json:
        print(json.dumps(summary, indent=2), file=sys.stderr if to_stdout else sys.stdout)
        return
    if preview is not None:
        print_preview(shown, preview, schema)
    out = RichTable(title=title)
    out.add_column("what")
    out.add_column("value", justify="right")
    for key, value in summary.items():
        out.add_row(key.replace("_", " "), f"{value:,}" if isinstance(value, int) else str(value))
    shown.print(out)

"""Which path rewrites a file group: Parquet through a frame library (cuDF: decoded, masked and encoded on
the device; :mod:`.frame_rewrite`) or through pyarrow on the host (:mod:`.rewrite`).

``parquet_io``: ``"pyarrow"``; ``"cudf"`` (BackendUnavailable without cuDF); ``"arrow-frames"`` (the frame
path with the pyarrow twin: the same steps on the host, for tests and CPU checks); ``"auto"``: cuDF where
the group runs on the CUDA backend and cuDF is installed, else pyarrow. A group the frame path does not
take (a strategy that orders rows, several specs, a column or table property the library cannot write) is
rewritten by pyarrow and its result says why (``parquet_io_reason``): never silently.
"""

from __future__ import annotations

from dataclasses import replace

from .._deps import optional
from ..backend.select import choose
from ..errors import DataFileError, InvalidOption, UnsupportedFeature
from ..iceberg.metadata import TableMetadata
from ..io.arrow_conform import write_schema
from ..io.fileio import FileIO
from ..io.write_options import WriteOptions
from ..tasks import FileGroup, RewriteResult, RewriteStrategy
from .delete_cache import DeleteCache
from .frame_rewrite import frame_unsupported, rewrite_group_frames
from .frame_sink import FrameSink
from .frames import ArrowFrames
from .rewrite import group_read, rewrite_group

PARQUET_IO = ("auto", "pyarrow", "cudf", "arrow-frames")


def check_parquet_io(name: object) -> str:
    if name not in PARQUET_IO:
        raise InvalidOption(f"parquet_io={name!r}: expected one of {', '.join(PARQUET_IO)}")
    return str(name)


def resolve_parquet_io(name: str, backend: str) -> str:
    """``name`` with ``auto`` decided for a group run on ``backend`` (see the module doc)."""
    check_parquet_io(name)
    if name != "auto":
        return name
    return "cudf" if choose(backend).name == "cuda" and optional("cudf") is not None else "pyarrow"


def frame_sink(name: str) -> FrameSink:
    if name == "cudf":
        from ..backend.cudf_sink import CudfSink

        return CudfSink()
    if name == "arrow-frames":
        return ArrowFrames()
    raise InvalidOption(f"parquet_io={name!r} is not a frame library")


def rewrite_file_group(
    md: TableMetadata,
    io: FileIO,
    group: FileGroup,
    strategy: RewriteStrategy,
    *,
    parquet_io: str = "pyarrow",
    backend: str = "auto",
    workers: int | None = None,
    delete_cache: DeleteCache | None = None,
) -> RewriteResult:
    """Rewrite ``group`` by the path ``parquet_io`` names (see the module doc); its files are checked to
    hold every live row read (:func:`every_row_written`)."""
    result = _rewrite(md, io, group, strategy, parquet_io, backend, workers, delete_cache)
    return every_row_written(io, group, result)


def every_row_written(io: FileIO, group: FileGroup, result: RewriteResult) -> RewriteResult:
    """``result`` when its files' record counts add up to the live rows the rewrite read; otherwise its
    files are deleted and a :class:`DataFileError` says so: a commit would replace the group's files with
    fewer (or more) rows. (A struct column without fields lost every row of its batches this way.)"""
    stored = sum(f.record_count for f in result.added)
    if stored != result.rows_read:
        discard(io, result)
        raise DataFileError(
            f"rewrite of file group #{group.index}: the files written hold {stored:,} rows where "
            f"{result.rows_read:,} live rows were read; nothing of it is committed (its files are deleted)"
        )
    return result


def discard(io: FileIO, result: RewriteResult) -> None:
    """Delete the files a rewrite wrote (a result that will not be committed)."""
    for f in result.added:
        io.delete(io.resolve(f.path), missing_ok=True)


def _rewrite(
    md: TableMetadata,
    io: FileIO,
    group: FileGroup,
    strategy: RewriteStrategy,
    parquet_io: str,
    backend: str,
    workers: int | None,
    delete_cache: DeleteCache | None,
) -> RewriteResult:
    name = resolve_parquet_io(parquet_io, backend)
    if name == "pyarrow":
        return rewrite_group(
            md, io, group, strategy, backend=backend, workers=workers, delete_cache=delete_cache
        )
    sink = frame_sink(name)
    why = frame_unsupported(group, strategy) or _not_written(md, group, sink)
    if why is None:
        try:
            return rewrite_group_frames(
                md, io, group, strategy, sink, backend=backend, workers=workers, delete_cache=delete_cache
            )
        except (
            UnsupportedFeature
        ) as exc:  # a column the library cannot hold, found before anything is written
            why = str(exc)
    result = rewrite_group(
        md, io, group, strategy, backend=backend, workers=workers, delete_cache=delete_cache
    )
    return replace(result, parquet_io_reason=f"{sink.name}: {why}")


def _not_written(md: TableMetadata, group: FileGroup, sink: FrameSink) -> str | None:
    """Why ``sink`` cannot write the group's files as the table asks, before anything is read."""
    _, _, schema = group_read(md, group)
    props = {**md.properties, "write.target-file-size-bytes": str(group.max_output_file_size)}
    return sink.encode_unsupported(write_schema(schema), WriteOptions.from_properties(props))

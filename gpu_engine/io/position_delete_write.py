"""Position delete files (spec "Position Delete Files", v2 tables): one Parquet file of ``file_path``
(field id 2147483546) and ``pos`` (2147483545), both required, rows sorted by ``file_path`` then ``pos``.

``file_path`` is written exactly as the caller spells it: the data file's path as its manifest entry
records it (the spec: it "must match the ``file_path`` of the target data file in a manifest entry").
Paths sort by code point (= UTF-8 byte order, the order of Iceberg's string bounds), so the first and
last rows hold the file's bounds. Metrics are full for both columns: the planner narrows position delete
files to data files by the ``file_path`` bounds, which truncation would widen (Iceberg Java writes them
in full too). Every data file targeted must lie in the delete file's partition (spec id and values):
readers only apply a position delete file to data files of its partition.

The file is built in memory and published create-exclusively (:meth:`FileIO.write_bytes`). Delete file
settings come from the table properties as Iceberg names them: ``write.delete.format.default`` and
``write.delete.parquet.*`` / ``write.delete.target-file-size-bytes`` override their data-file
counterparts (:func:`delete_properties`, shared with the equality delete writer).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import InvalidProperty, PlanningError, UnsupportedFeature
from ..iceberg import serde
from ..iceberg import types as it
from ..iceberg.content_file import POSITION_DELETES, ContentFile
from ..iceberg.partitioning import PartitionSpec, partition_key
from ..iceberg.schema import Schema
from .arrow_schema import field_metadata
from .fileio import FileIO
from .locations import LocationProvider, location_provider
from .parquet_read import _starting_offset
from .partition_split import partition_path
from .position_deletes import PATH_FIELD_ID, POS_FIELD_ID
from .write_options import WriteOptions

__all__ = [
    "POSITION_DELETE_SCHEMA",
    "delete_properties",
    "positions_array",
    "write_position_deletes",
]

POSITION_DELETE_SCHEMA = Schema(
    (
        it.NestedField(PATH_FIELD_ID, "file_path", it.STRING, required=True),
        it.NestedField(POS_FIELD_ID, "pos", it.LONG, required=True),
    )
)
_ARROW_SCHEMA = pa.schema(
    [
        pa.field("file_path", pa.dictionary(pa.int32(), pa.string()), False, field_metadata(PATH_FIELD_ID)),
        pa.field("pos", pa.int64(), False, field_metadata(POS_FIELD_ID)),
    ]
)
_DELETE_PREFIX = "write.delete."
_OVERRIDES = ("format.default", "target-file-size-bytes")
_BLOOM_PREFIX = "write.parquet.bloom-filter-"


DELETE_TARGET_FILE_SIZE = 64 << 20  # write.delete.target-file-size-bytes (Java's default, not the data one)


def _delete_keys(properties: Mapping[str, str]) -> dict[str, str]:
    """The ``write.delete.*`` keys that replace a data file setting, by the data key they replace."""
    out = {}
    for key in properties:
        rest = key[len(_DELETE_PREFIX) :] if key.startswith(_DELETE_PREFIX) else None
        if rest is not None and (rest in _OVERRIDES or rest.startswith("parquet.")):
            out["write." + rest] = key
    return out


def delete_properties(properties: Mapping[str, str] | None) -> dict[str, str]:
    """The table ``properties`` as a delete file writer reads them: ``write.delete.format.default``,
    ``write.delete.target-file-size-bytes`` (default 64 MiB) and ``write.delete.parquet.*`` replace the
    data file settings. InvalidProperty names the ``write.delete.*`` key of a bad value."""
    # no bloom filters in delete files (Java's Parquet.deleteContext turns them off)
    props = {k: v for k, v in (properties or {}).items() if not k.startswith(_BLOOM_PREFIX)}
    props["write.target-file-size-bytes"] = str(DELETE_TARGET_FILE_SIZE)
    replaced = _delete_keys(props)
    for data_key, key in replaced.items():
        props[data_key] = props[key]
    try:
        WriteOptions.from_properties(props)
    except (InvalidProperty, UnsupportedFeature) as exc:
        message = str(exc)
        for data_key, key in replaced.items():  # the key the table has, not the one it stands for
            message = message.replace(f"property {data_key}=", f"property {key}=")
        raise type(exc)(message) from None
    return props


def positions_array(positions: npt.ArrayLike, *, data_file: str) -> npt.NDArray[np.int64]:
    """``positions`` as sorted unique int64 row positions; ValueError naming ``data_file`` when they are not
    integers or one is negative."""
    arr = np.asarray(positions)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(
            f"deleted positions of {data_file}: expected a 1-d array of integers, got {arr.dtype} "
            f"with shape {arr.shape}"
        )
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"deleted positions of {data_file}: {int(arr.max())} is beyond the largest long")
    out = arr.astype(np.int64, copy=False)
    if len(out) > 1 and not bool(np.all(out[1:] > out[:-1])):  # sort and drop repeats (np.unique hashes)
        out = np.sort(out)
        keep = np.empty(len(out), dtype=bool)
        keep[0] = True
        np.not_equal(out[1:], out[:-1], out=keep[1:])
        out = out[keep]
    if out.size and out[0] < 0:
        raise ValueError(f"deleted positions of {data_file}: negative position {int(out[0])}")
    return out


def write_position_deletes(
    io: FileIO,
    locations: str | LocationProvider,
    spec: PartitionSpec,
    spec_id: int,
    partition: tuple[Any, ...],
    deletes: Mapping[str, npt.ArrayLike],
    *,
    data_partitions: Mapping[str, tuple[int, tuple[Any, ...]]],
    schema: Schema | None = None,
    properties: Mapping[str, str] | None = None,
) -> ContentFile:
    """Write one position delete file deleting ``deletes`` (recorded data file path -> row positions, any
    order, duplicates allowed) and return its manifest entry (``content`` 1, PARQUET).

    ``spec``/``spec_id``/``partition``: the delete file's partition, which must be every targeted data
    file's: ``data_partitions`` maps each path of ``deletes`` to its data file's ``(spec_id, partition)``
    (a :class:`PlanningError` names the first data file that is missing there or lies elsewhere).
    ``locations``: the table location or a :class:`LocationProvider`; with ``schema`` (the table's) the file
    goes under the partition's directory. ``referenced_data_file`` is set when one data file is targeted.
    """
    props = delete_properties(properties)
    options = WriteOptions.from_properties(props)
    if len(partition) != len(spec.fields):
        raise PlanningError(
            f"position delete partition {partition!r} has {len(partition)} values, spec {spec_id} has "
            f"{len(spec.fields)} fields"
        )
    targets = _targets(deletes, data_partitions, spec_id, partition)
    if not targets:
        raise ValueError("no positions to delete: a position delete file must delete at least one row")
    paths = [p for p, _ in targets]
    counts = np.array([len(v) for _, v in targets], dtype=np.int64)
    pos = np.concatenate([v for _, v in targets])
    indices = np.repeat(np.arange(len(paths), dtype=np.int32), counts)
    table = pa.Table.from_arrays(
        [pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(paths, pa.string())), pa.array(pos)],
        schema=_ARROW_SCHEMA,
    )
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        version="2.6",
        compression=options.compression_codec,
        compression_level=options.compression_level,
        **options.page_options(),
        write_page_checksum=True,
        use_dictionary=["file_path"],  # positions of one file are distinct: a dictionary never pays
        store_schema=False,  # readers see file_path as a plain string column (dictionary-encoded pages)
    )
    data = sink.getvalue()
    md = pq.read_metadata(pa.BufferReader(data))
    ppath = partition_path(spec, schema, partition) if schema is not None and spec.fields else None
    path = location_provider(locations, props).new_data_location(f"{uuid.uuid4()}-deletes.parquet", ppath)
    io.write_bytes(io.resolve(path), data.to_pybytes())
    sizes = {PATH_FIELD_ID: 0, POS_FIELD_ID: 0}
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        sizes[PATH_FIELD_ID] += int(rg.column(0).total_compressed_size)
        sizes[POS_FIELD_ID] += int(rg.column(1).total_compressed_size)
    offsets = [o for g in range(md.num_row_groups) if (o := _starting_offset(md.row_group(g))) is not None]
    n = len(pos)
    return ContentFile(
        path=path,
        file_format="PARQUET",
        spec_id=spec_id,
        partition=tuple(partition),
        record_count=n,
        file_size_in_bytes=data.size,
        content=POSITION_DELETES,
        column_sizes=sizes,
        value_counts={PATH_FIELD_ID: n, POS_FIELD_ID: n},
        null_value_counts={PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        lower_bounds={
            PATH_FIELD_ID: serde.to_bytes(it.STRING, paths[0]),
            POS_FIELD_ID: serde.to_bytes(it.LONG, int(pos.min())),
        },
        upper_bounds={
            PATH_FIELD_ID: serde.to_bytes(it.STRING, paths[-1]),
            POS_FIELD_ID: serde.to_bytes(it.LONG, int(pos.max())),
        },
        split_offsets=tuple(sorted(offsets)),
        referenced_data_file=paths[0] if len(paths) == 1 else None,
    )


def _targets(
    deletes: Mapping[str, npt.ArrayLike],
    data_partitions: Mapping[str, tuple[int, tuple[Any, ...]]],
    spec_id: int,
    partition: tuple[Any, ...],
) -> list[tuple[str, npt.NDArray[np.int64]]]:
    """The data files with positions to delete, sorted by path (UTF-8 bytes), each checked to lie in the
    delete file's partition, with its sorted unique positions."""
    key = partition_key(spec_id, tuple(partition))
    out = []
    for path in sorted(deletes, key=lambda p: p.encode("utf-8")):
        if not isinstance(path, str) or not path:
            raise ValueError(f"position deletes: data file path {path!r} is not a non-empty string")
        positions = positions_array(deletes[path], data_file=path)
        if not len(positions):
            continue
        where = data_partitions.get(path)
        if where is None:
            raise PlanningError(
                f"position deletes of data file {path}: its partition is unknown (not in data_partitions)"
            )
        if partition_key(where[0], tuple(where[1])) != key:
            raise PlanningError(
                f"position deletes of data file {path}: the data file lies in spec {where[0]} partition "
                f"{tuple(where[1])!r}, the delete file in spec {spec_id} partition {tuple(partition)!r}; "
                "write one position delete file per partition"
            )
        out.append((path, positions))
    return out

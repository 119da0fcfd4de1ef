"""Deletion vectors (spec "Deletion Vectors", v3 tables): one Puffin file holding one
``deletion-vector-v1`` blob per data file, and one delete manifest entry per blob.

Each blob is written as Iceberg Java writes it: ``fields`` ``[2147483645]`` (the ``_pos`` metadata
column), ``snapshot-id`` and ``sequence-number`` -1 (unknown when the file is written, as the Puffin spec
requires), no compression (the blob type forbids it), and the properties ``referenced-data-file`` (the
data file's path as its manifest entry records it) and ``cardinality``. The returned entries carry the
blob's ``content_offset``/``content_size_in_bytes``, ``record_count`` = cardinality, the data file's
spec id and partition (a DV applies only within its data file's partition) and the Puffin file's size.

The spec allows at most one DV per data file in a snapshot: a data file named twice is an error here, and
merging a new DV with the old one (and with position delete files) is the caller's job (see
:mod:`gpu_engine.commit.delete_plan`). Files are published create-exclusively.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ..errors import PlanningError
from ..iceberg.content_file import POSITION_DELETES, ContentFile
from ..iceberg.deletion_vectors import BLOB_TYPE, encode_dv
from ..iceberg.metadata_columns import POS
from ..iceberg.puffin import Blob, parse_footer, write_puffin
from .fileio import FileIO
from .locations import LocationProvider, location_provider
from .position_delete_write import positions_array

__all__ = ["CARDINALITY", "REFERENCED_DATA_FILE", "DeletionVector", "write_deletion_vectors"]

REFERENCED_DATA_FILE = "referenced-data-file"
CARDINALITY = "cardinality"


class DeletionVector(NamedTuple):
    """The deletes of one data file: its recorded path, the deleted row positions (any order, repeats
    allowed), and its partition and spec id. Plain 4-tuples in this order are accepted too."""

    data_file: str
    positions: npt.ArrayLike
    partition: tuple[Any, ...]
    spec_id: int


def write_deletion_vectors(
    io: FileIO,
    locations: str | LocationProvider,
    dvs: Sequence[DeletionVector | tuple[str, npt.ArrayLike, tuple[Any, ...], int]],
    *,
    snapshot_id: int = -1,
    sequence_number: int = -1,
    properties: Mapping[str, str] | None = None,
) -> list[ContentFile]:
    """Write one Puffin file with a deletion vector per entry of ``dvs`` and return their delete manifest
    entries, in the order of ``dvs``. The file goes where ``locations`` puts unpartitioned data files (a
    Puffin file may hold DVs of several partitions). ValueError for an empty ``dvs``, a data file named
    twice or without positions; :class:`PlanningError` for a malformed partition."""
    if not dvs:
        raise ValueError("no deletion vectors to write")
    blobs: list[Blob] = []
    seen: set[str] = set()
    targets: list[tuple[str, tuple[Any, ...], int, int]] = []
    for item in dvs:
        dv = DeletionVector(*item)
        if not isinstance(dv.data_file, str) or not dv.data_file:
            raise ValueError(f"deletion vector: data file path {dv.data_file!r} is not a non-empty string")
        if dv.data_file in seen:
            raise ValueError(
                f"deletion vectors: data file {dv.data_file} appears twice (at most one DV per data file: "
                "merge its positions into one)"
            )
        seen.add(dv.data_file)
        if (
            not isinstance(dv.partition, tuple)
            or isinstance(dv.spec_id, bool)
            or not isinstance(dv.spec_id, int)
        ):
            raise PlanningError(
                f"deletion vector of {dv.data_file}: partition must be a tuple and spec_id an int, "
                f"got {dv.partition!r} and {dv.spec_id!r}"
            )
        positions = positions_array(dv.positions, data_file=dv.data_file)
        if not len(positions):
            raise ValueError(f"deletion vector of {dv.data_file}: no positions to delete")
        blobs.append(_blob(dv.data_file, positions, snapshot_id, sequence_number))
        targets.append((dv.data_file, dv.partition, dv.spec_id, len(positions)))
    data = write_puffin(blobs, {"created-by": _created_by()})
    path = location_provider(locations, dict(properties or {})).new_data_location(
        f"{uuid.uuid4()}-deletes.puffin", None
    )
    footer = parse_footer(data, source=path)  # the offsets exactly as readers will see them
    io.write_bytes(io.resolve(path), data)
    return [
        ContentFile(
            path=path,
            file_format="PUFFIN",
            spec_id=spec_id,
            partition=partition,
            record_count=cardinality,
            file_size_in_bytes=len(data),
            content=POSITION_DELETES,
            referenced_data_file=data_file,
            content_offset=meta.offset,
            content_size_in_bytes=meta.length,
        )
        for (data_file, partition, spec_id, cardinality), meta in zip(targets, footer.blobs, strict=True)
    ]


def _blob(data_file: str, positions: npt.NDArray[np.int64], snapshot_id: int, sequence_number: int) -> Blob:
    return Blob(
        type=BLOB_TYPE,
        data=encode_dv(positions),
        fields=(POS.field_id,),
        snapshot_id=snapshot_id,
        sequence_number=sequence_number,
        compression_codec=None,
        properties={REFERENCED_DATA_FILE: data_file, CARDINALITY: str(len(positions))},
    )


def _created_by() -> str:
    from .. import __version__  # the package is initialised by the time anything is written

    return f"gpu-engine {__version__}"

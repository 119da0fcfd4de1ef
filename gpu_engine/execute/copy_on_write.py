"""Copy-on-write execution: data files read again with every delete that applies to them, the rows at
given positions left out (the rows a copy-on-write delete matched), and the rest written as new data files
of the table's current spec, with full metrics (see :mod:`gpu_engine.commit.delete_cow`).

On v3 tables the rows keep their ``_row_id`` and ``_last_updated_sequence_number`` (inherited values are
materialised in the new files, as a compaction does): copying a row does not change it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from ..backend.select import choose
from ..expressions import TRUE
from ..iceberg import metadata_columns as mc
from ..iceberg.content_file import ContentFile
from ..iceberg.metadata import TableMetadata
from ..iceberg.schema import Schema
from ..io.fileio import FileIO
from ..io.parquet_write import write_data_files
from ..tasks import PlanSummary, ScanPlan, ScanTask
from .projection import project
from .rewrite import without_lineage_metrics
from .scan import execute

Positions = npt.NDArray[np.int64]
_LOCATORS = (mc.HIDDEN_FILE, mc.HIDDEN_POS)


def rewrite_without(
    md: TableMetadata,
    io: FileIO,
    tasks: Sequence[ScanTask],
    drop: Mapping[str, Positions],
    *,
    backend: str = "auto",
) -> tuple[ContentFile, ...]:
    """The data files holding the rows of ``tasks`` (whole files, deletes attached) less the positions in
    ``drop`` (by the tasks' file paths); nothing is committed. Files already written are deleted when it
    fails."""
    choice = choose(backend)
    schema = md.schema
    extra = mc.rewritten_lineage(md)
    columns = [f.name for f in schema.fields] + [f.name for f in extra] + list(_LOCATORS)
    plan = ScanPlan(schema, TRUE, tuple(tasks), PlanSummary(snapshot_id=None, tasks=len(tasks)))
    _, batches = execute(md, io, plan, project(md, schema, columns), backend=choice.name)
    written = write_data_files(
        io, md.location, Schema((*schema.fields, *extra), schema_id=schema.schema_id), md.spec,
        _kept(batches, drop), properties=md.properties, spec_id=md.default_spec_id, backend=choice.name,
        table_order=md.sort_order,
    )  # fmt: skip
    return tuple(without_lineage_metrics(f) for f in written)


def _kept(batches: Iterator[pa.RecordBatch], drop: Mapping[str, Positions]) -> Iterator[pa.RecordBatch]:
    """``batches`` without the rows at the dropped positions of their files, and without the locator
    columns (the hidden ``_file`` and ``_pos``)."""
    for batch in batches:
        files = batch.column(mc.HIDDEN_FILE)
        positions = batch.column(mc.HIDDEN_POS).to_numpy()
        keep = np.ones(batch.num_rows, dtype=bool)
        for path in pc.unique(files).to_pylist():
            gone = drop.get(path)
            if gone is None or not len(gone):
                continue
            rows = pc.equal(files, path).to_numpy(zero_copy_only=False)
            keep[rows] = ~np.isin(positions[rows], gone, assume_unique=False)
        kept = batch.filter(pa.array(keep)) if not keep.all() else batch
        yield kept.drop_columns(list(_LOCATORS))

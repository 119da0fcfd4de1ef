"""A data or delete file as a manifest entry records it (spec "Manifests": the ``data_file`` struct).

The write path produces these (Parquet writer, delete writers) and the manifest writer serializes them;
metrics maps are keyed by field id and bounds hold Appendix D single-value bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DATA = 0
POSITION_DELETES = 1
EQUALITY_DELETES = 2


@dataclass(frozen=True)
class ContentFile:
    path: str
    file_format: str  # "PARQUET", "PUFFIN" (deletion vectors), "AVRO", "ORC"
    spec_id: int
    partition: tuple[Any, ...]  # values in the spec's field order (transform results, Python values)
    record_count: int
    file_size_in_bytes: int
    content: int = DATA
    column_sizes: dict[int, int] = field(default_factory=dict)
    value_counts: dict[int, int] = field(default_factory=dict)
    null_value_counts: dict[int, int] = field(default_factory=dict)
    nan_value_counts: dict[int, int] = field(default_factory=dict)
    lower_bounds: dict[int, bytes] = field(default_factory=dict)
    upper_bounds: dict[int, bytes] = field(default_factory=dict)
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | None = None
    equality_ids: tuple[int, ...] | None = None
    sort_order_id: int | None = None
    first_row_id: int | None = None  # v3 data files; None: assigned by inheritance
    referenced_data_file: str | None = None  # position deletes / DVs that target one data file
    content_offset: int | None = None  # DVs: blob offset in the Puffin file
    content_size_in_bytes: int | None = None  # DVs: blob length

    def __repr__(self) -> str:
        kind = {DATA: "data", POSITION_DELETES: "position deletes", EQUALITY_DELETES: "equality deletes"}
        return f"ContentFile({kind.get(self.content, self.content)}, {self.path!r}, rows={self.record_count})"

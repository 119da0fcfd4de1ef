"""Update pairing: a snapshot that deleted and inserted rows with the same identifier values updated them.

As Spark's ``create_changelog_view`` with ``compute_updates``: for each identifier key both deleted and
inserted by one snapshot, the deleted row becomes an ``UPDATE_BEFORE`` directly followed by the inserted
row as its ``UPDATE_AFTER`` (pairs ordered by key); other rows stay DELETEs and INSERTs. A key deleted or
inserted more than once by one snapshot has no single before and after: an error names it. Keys compare
as :mod:`.row_matching` compares them (nulls equal).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..errors import InvalidData
from .row_matching import match_rows

UPDATE_BEFORE, UPDATE_AFTER = "UPDATE_BEFORE", "UPDATE_AFTER"
CHANGE_TYPE = "_change_type"


def pair_updates(
    deleted: pa.Table, inserted: pa.Table, keys: Sequence[str], *, snapshot_id: int
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """``(deleted, updates, inserted)``: the rows of one snapshot, those of keys both deleted and inserted
    moved into ``updates`` as before/after pairs (see the module doc)."""
    if not deleted.num_rows or not inserted.num_rows:
        return deleted, deleted.slice(0, 0), inserted
    m = match_rows(deleted, inserted, keys)
    paired = (m.left_count > 0) & (m.right_count > 0)
    ambiguous = paired & ((m.left_count > 1) | (m.right_count > 1))
    stacked = pa.concat_tables([deleted, inserted.cast(deleted.schema)])
    if ambiguous.any():
        first = int(m.order[np.argmax(ambiguous[m.group])])
        values = {k: stacked.column(k)[first].as_py() for k in keys}
        raise InvalidData(
            f"snapshot {snapshot_id} deleted or inserted more than one row with identifier {values}: its "
            "changes cannot be paired into updates (check the identifier columns, or do not compute updates)"
        )
    in_pair = paired[m.group]
    picked = m.order[in_pair]
    types = np.where(m.right[in_pair], UPDATE_AFTER, UPDATE_BEFORE)
    updates = stacked.take(pa.array(picked))
    position = updates.schema.get_field_index(CHANGE_TYPE)
    updates = updates.set_column(position, updates.schema.field(position), pa.array(types, pa.string()))
    drop = np.zeros(stacked.num_rows, bool)
    drop[picked] = True
    n = m.n_left
    return deleted.filter(pa.array(~drop[:n])), updates, inserted.filter(pa.array(~drop[n:]))

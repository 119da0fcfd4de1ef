"""Carry-over removal: rows one snapshot both deleted and inserted unchanged cancel out.

A copy-on-write rewrite (an ``overwrite`` or ``delete`` that rewrote data files) removes whole files and
adds new ones holding most of the same rows; the changelog then lists each untouched row as a DELETE and
an INSERT (so does an upsert that wrote a row unchanged). As Spark's ``create_changelog_view`` does,
equal rows are cancelled in pairs (a multiset difference: ``k`` equal DELETEs and ``m`` equal INSERTs
leave ``|k - m|`` of the more frequent kind). Rows compare on the given columns as :mod:`.row_matching`
compares them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from .row_matching import match_rows


def cancel_carry_overs(
    deleted: pa.Table, inserted: pa.Table, names: Sequence[str]
) -> tuple[pa.Table, pa.Table]:
    """``deleted`` and ``inserted`` without the pairs of rows equal on ``names`` (order kept)."""
    if not deleted.num_rows or not inserted.num_rows or not names:
        return deleted, inserted
    m = match_rows(deleted, inserted, names)
    cancelled = m.rank < np.minimum(m.left_count, m.right_count)[m.group]
    drop = np.zeros(len(m.order), bool)
    drop[m.order] = cancelled
    return deleted.filter(pa.array(~drop[: m.n_left])), inserted.filter(pa.array(~drop[m.n_left :]))

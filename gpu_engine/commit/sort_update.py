"""The table's sort order (spec "Sorting"), Iceberg's ``ReplaceSortOrder``: the order compaction's ``sort``
strategy uses when none is given, and the order writers are asked to keep.

.. code-block:: python

    tbl.replace_sort_order("id DESC NULLS LAST, bucket(16, name)")   # forms of commit.spec_parse
    tbl.replace_sort_order([])                                        # unsorted (order id 0)

An order equal to an earlier one keeps its id, others take the next id (0 is the unsorted order). Committed
as a metadata-only change (REST: ``add-sort-order`` / ``set-default-sort-order`` after an
``assert-default-sort-order-id``); a lost race re-applies it, numbered again, while the table's order is
still the one it replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import UnsupportedTransform, ValidationError
from ..iceberg.metadata import TableMetadata
from ..iceberg.sorting import UNSORTED, SortOrder, sort_order_to_json
from .metadata_commit import MetadataUpdate, RestForm, commit_metadata_change, require_unchanged
from .spec_parse import check_sort_fields, parse_sort_order
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table


class SortOrderUpdate(MetadataUpdate):
    """Replace ``table``'s default sort order with ``order`` (see the module doc)."""

    def __init__(self, table: Table, order: str | Sequence[str] | SortOrder) -> None:
        self._table = table
        self._base = table.metadata
        if isinstance(order, SortOrder):
            self._fields = check_sort_fields(order.fields, self._base.schema)
        elif not isinstance(order, str) and not order:
            self._fields = ()
        else:
            self._fields = parse_sort_order(order, self._base.schema).fields

    def apply(self) -> SortOrder:
        """The new order (not committed)."""
        return self._numbered(self._base)

    def _numbered(self, md: TableMetadata) -> SortOrder:
        """The order as ``md`` numbers it: an equal earlier order keeps its id, else the next id (Java's
        reuseOrCreateNewSortOrderId)."""
        if not self._fields:
            return UNSORTED
        for old in md.sort_orders:
            if old.fields == self._fields:
                return old
        return SortOrder(max(o.order_id for o in md.sort_orders) + 1, self._fields)

    def commit(self, *, faults: Faults | None = None) -> SortOrder:
        """Commit the order as the table's default sort order; the committed order."""
        started = self._base.default_sort_order_id

        def change(base: TableMetadata) -> TableMetadata | None:
            require_unchanged(base, "sort order", base.default_sort_order_id, started)
            try:  # another writer may have dropped a column it sorts by since it was built
                check_sort_fields(self._fields, base.schema)
            except UnsupportedTransform as exc:
                raise ValidationError(
                    f"replace_sort_order on {base.location}: the schema changed since the order was built: "
                    f"{exc}"
                ) from None
            order = self._numbered(base)  # numbered again: another writer may have added orders since
            if order.order_id == base.default_sort_order_id:
                return None
            known = order.order_id in base.sort_orders_by_id
            orders = base.sort_orders if known else (*base.sort_orders, order)
            return replace(base, sort_orders=orders, default_sort_order_id=order.order_id)

        def rest(base: TableMetadata, new: TableMetadata) -> RestForm:
            requirements = [  # the schema the fields were checked against stays too
                {"type": "assert-default-sort-order-id", "default-sort-order-id": started},
                {"type": "assert-current-schema-id", "current-schema-id": base.current_schema_id},
            ]
            order = new.sort_orders_by_id[new.default_sort_order_id]
            added = order.order_id not in base.sort_orders_by_id
            updates: list[dict[str, Any]] = []
            if added:
                updates.append({"action": "add-sort-order", "sort-order": sort_order_to_json(order)})
            updates.append(
                {"action": "set-default-sort-order", "sort-order-id": -1 if added else order.order_id}
            )
            return requirements, updates

        commit_metadata_change(self._table, change, action="replace_sort_order", faults=faults, rest=rest)
        return self._table.metadata.sort_order  # as committed (a REST server numbers it)

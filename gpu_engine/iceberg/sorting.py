"""Sort orders (spec "Sorting", Appendix C "Sort Orders"): fields with a transform over one or more
source columns, a direction and a null order; JSON both ways, unknown keys kept."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import MetadataError
from ..transforms.spec import Transform, parse_transform
from .snapshots import (
    Extra,
    JsonObject,
    check_unique,
    extra_of,
    int_list,
    objects,
    opt_int,
    opt_list,
    path,
    req_int,
    req_list,
    req_str,
    with_extra,
)

DIRECTIONS = ("asc", "desc")
NULL_ORDERS = ("nulls-first", "nulls-last")
UNSORTED_ORDER_ID = 0
_FIELD_KEYS = frozenset({"transform", "source-id", "source-ids", "direction", "null-order"})
_ORDER_KEYS = frozenset({"order-id", "fields"})

# How the sources were written: the spec's rule (one source → "source-id", several → "source-ids"),
# or a form that differs from it, kept so that serializing gives back what was read.
SourceForm = Literal["auto", "source-id", "source-ids", "both"]


@dataclass(frozen=True)
class SortField:
    """One sort key; ``transform`` keeps the metadata's string (unknown transforms included)."""

    source_ids: tuple[int, ...]
    transform: str
    direction: str  # "asc" or "desc"
    null_order: str  # "nulls-first" or "nulls-last"
    source_form: SourceForm = field(default="auto", compare=False)
    extra: Extra = field(default=(), compare=False)

    @property
    def source_id(self) -> int:
        return self.source_ids[0]

    @property
    def ascending(self) -> bool:
        return self.direction == "asc"

    @property
    def nulls_first(self) -> bool:
        return self.null_order == "nulls-first"

    @property
    def parsed(self) -> Transform:
        """The transform, an :class:`~gpu_engine.transforms.UnknownTransform` when not understood."""
        return parse_transform(self.transform, strict=False)


@dataclass(frozen=True)
class SortOrder:
    order_id: int
    fields: tuple[SortField, ...] = ()
    extra: Extra = field(default=(), compare=False)

    @property
    def is_unsorted(self) -> bool:
        return not self.fields


UNSORTED = SortOrder(UNSORTED_ORDER_ID)


def _choice(obj: JsonObject, key: str, allowed: tuple[str, ...], where: str) -> str:
    value = req_str(obj, key, where).lower()  # Java reads "ASC", "NULLS-FIRST" (writes lower case)
    if value not in allowed:
        raise MetadataError(f"field {path(where, key)!r} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def sort_field_from_json(obj: JsonObject, *, where: str = "sort field") -> SortField:
    single = opt_int(obj, "source-id", where)
    many = opt_list(obj, "source-ids", where)
    if many is not None:
        sources = int_list(many, path(where, "source-ids"))
        if not sources:
            raise MetadataError(f"field {path(where, 'source-ids')!r} must not be empty")
        if single is not None and single != sources[0]:
            raise MetadataError(f"{where}: source-id {single} disagrees with source-ids {list(sources)}")
    elif single is not None:
        sources = (single,)
    else:
        raise MetadataError(f"{where}: missing required field 'source-id' (or 'source-ids')")
    form: SourceForm = "auto"  # the spec's form; others are kept as written
    if many is not None and single is not None:
        form = "both"
    elif many is not None and len(sources) == 1:
        form = "source-ids"
    return SortField(
        source_ids=sources,
        transform=req_str(obj, "transform", where),
        direction=_choice(obj, "direction", DIRECTIONS, where),
        null_order=_choice(obj, "null-order", NULL_ORDERS, where),
        source_form=form,
        extra=extra_of(obj, _FIELD_KEYS),
    )


def sort_field_to_json(f: SortField) -> JsonObject:
    out: JsonObject = {"transform": f.transform}
    form = f.source_form
    if form == "auto":
        form = "source-id" if len(f.source_ids) == 1 else "source-ids"
    if form in ("source-id", "both"):
        out["source-id"] = f.source_ids[0]
    if form in ("source-ids", "both"):
        out["source-ids"] = list(f.source_ids)
    out["direction"] = f.direction
    out["null-order"] = f.null_order
    return with_extra(out, f.extra)


def sort_order_from_json(obj: JsonObject, *, where: str = "sort order") -> SortOrder:
    order_id = req_int(obj, "order-id", where)
    req_list(obj, "fields", where)
    fields = tuple(sort_field_from_json(f, where=w) for w, f in objects(obj, "fields", where))
    if order_id == UNSORTED_ORDER_ID and fields:
        raise MetadataError(f"{where}: order-id 0 is reserved for the unsorted order but has fields")
    return SortOrder(order_id, fields, extra_of(obj, _ORDER_KEYS))


def sort_order_to_json(order: SortOrder) -> dict[str, Any]:
    out: JsonObject = {"order-id": order.order_id, "fields": [sort_field_to_json(f) for f in order.fields]}
    return with_extra(out, order.extra)


def table_sort_orders_from_json(obj: JsonObject) -> tuple[tuple[SortOrder, ...], int]:
    """A table's ``sort-orders`` and ``default-sort-order-id``; v1 tables without them are unsorted."""
    if obj.get("sort-orders") is None:  # v1: unsorted, whatever default-sort-order-id says (as Java)
        orders: tuple[SortOrder, ...] = (UNSORTED,)
        opt_int(obj, "default-sort-order-id", "")
        default_id = UNSORTED_ORDER_ID
    else:
        orders = tuple(sort_order_from_json(o, where=w) for w, o in objects(obj, "sort-orders", ""))
        default_id = req_int(obj, "default-sort-order-id", "")
    ids = [o.order_id for o in orders]
    check_unique(ids, "sort-orders", "order-id")
    if default_id not in ids:
        raise MetadataError(
            f"default-sort-order-id {default_id} is not among the sort-orders ({sorted(ids)})"
        )
    return orders, default_id

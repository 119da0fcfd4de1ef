"""Reserved metadata columns a scan can return (spec "Reserved Field IDs" and "Row Lineage").

``_file``, ``_pos``, ``_spec_id`` and ``_partition`` are computed by the reader; ``_row_id`` and
``_last_updated_sequence_number`` may also be stored in data files (v3) and are then read by field id,
with nulls filled by inheritance (:func:`gpu_engine.execute.metadata.inherit_lineage`).
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import UnsupportedFeature
from . import types as it
from .metadata import TableMetadata
from .schema import ROW_LINEAGE_NAMES
from .snapshots import Snapshot

FILE = it.NestedField(2147483646, "_file", it.STRING, required=True)
POS = it.NestedField(2147483645, "_pos", it.LONG, required=True)
SPEC_ID = it.NestedField(2147483643, "_spec_id", it.INT, required=True)
PARTITION_ID = 2147483642
PARTITION_NAME = "_partition"
ROW_ID = it.NestedField(2147483540, ROW_LINEAGE_NAMES[0], it.LONG)
LAST_UPDATED_SEQUENCE_NUMBER = it.NestedField(2147483539, ROW_LINEAGE_NAMES[1], it.LONG)

LINEAGE = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
NAMES = (FILE.name, POS.name, SPEC_ID.name, PARTITION_NAME, ROW_ID.name, LAST_UPDATED_SEQUENCE_NUMBER.name)

# A table column may be called ``_file`` or ``_pos`` (the spec reserves the field ids, not the names): a
# scan's ``columns`` then mean the table's column, as in Spark. The engine's own operations that locate
# rows (copy-on-write, delete planning, changelogs) ask for the metadata columns under these names,
# which always mean the metadata column.
_HIDDEN_PREFIX = "__gpu_engine"
HIDDEN_FILE = _HIDDEN_PREFIX + FILE.name
HIDDEN_POS = _HIDDEN_PREFIX + POS.name


def has_lineage(md: TableMetadata, snapshot: Snapshot | None) -> bool:
    """The rows of ``snapshot`` have row ids: a v3 table's snapshot with a ``first-row-id`` (an upgraded
    table's rows get theirs from its first v3 snapshot; before it they read null)."""
    return md.format_version >= 3 and snapshot is not None and snapshot.first_row_id is not None


def rewritten_lineage(md: TableMetadata) -> tuple[it.NestedField, ...]:
    """The row-lineage columns a rewrite of ``md``'s rows writes into its files (v3 on: both; none
    before). UnsupportedFeature when a table column has one of their names (another engine's table):
    the file would hold two columns of one name."""
    if md.format_version < 3:
        return ()
    for f in md.schema.fields:
        if f.name in ROW_LINEAGE_NAMES:
            raise UnsupportedFeature(
                f"table {md.location}: its column {f.name!r} has the name of a row-lineage column, so its "
                "rows cannot be rewritten with their lineage (compaction, copy-on-write): rename the column"
            )
    return LINEAGE


def partition_field(md: TableMetadata) -> it.NestedField:
    """``_partition``: a struct of every partition field of every spec, by partition field id, so rows of
    files written under different specs share one type. As Java's ``Partitioning.partitionType``: only
    fields whose source column the current schema still has (``allActiveFieldIds``), each named as the
    newest spec names it, typed by the newest spec where it is not void (a v1 field removed later keeps
    its type); a name two fields share is the newer field's, the older one's gets its id appended."""
    active = md.schema.by_id
    names: dict[int, str] = {}
    typed: dict[int, it.NestedField] = {}
    from_void: set[int] = set()  # fields typed so far by a void field only
    for spec_id in sorted(md.specs, reverse=True):
        spec = md.specs[spec_id]
        void = {f.field_id for f in spec.fields if f.transform == "void"}
        sources = {f.field_id: f.source_id for f in spec.fields}
        for f in spec.partition_type(md.schema_for_spec(spec)).fields:
            if sources[f.field_id] not in active:
                continue
            names.setdefault(f.field_id, f.name)
            if f.field_id not in typed or (f.field_id in from_void and f.field_id not in void):
                typed[f.field_id] = f
                from_void.discard(f.field_id)
                if f.field_id in void:
                    from_void.add(f.field_id)
    fields = tuple(replace(typed[i], name=_unique(names, i)) for i in sorted(typed))
    return it.NestedField(PARTITION_ID, PARTITION_NAME, it.StructType(fields), required=True)


def _unique(names: dict[int, str], field_id: int) -> str:
    """``field_id``'s name; ``<name>_<id>`` when a newer field (higher id) has that name too (a field
    removed, and another added under its name), so the struct's names stay unique."""
    name = names[field_id]
    if any(other > field_id and n == name for other, n in names.items()):
        return f"{name}_{field_id}"
    return name


def is_hidden(name: str) -> bool:
    """Whether ``name`` is a metadata column's engine-internal name (``HIDDEN_FILE``, ...)."""
    return name.startswith(_HIDDEN_PREFIX) and name[len(_HIDDEN_PREFIX) :] in NAMES


def field(md: TableMetadata, name: str) -> it.NestedField:
    """The metadata column called ``name`` (one of :data:`NAMES`, or its hidden name: the column under
    that name)."""
    if is_hidden(name):
        return replace(field(md, name[len(_HIDDEN_PREFIX) :]), name=name)
    if name == PARTITION_NAME:
        return partition_field(md)
    by_name = {f.name: f for f in (FILE, POS, SPEC_ID, ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)}
    return by_name[name]

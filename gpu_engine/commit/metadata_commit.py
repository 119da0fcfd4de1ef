"""Metadata-only commits (no new snapshot): snapshot expiration, schema and partition spec updates.

:func:`commit_metadata_change` asks ``change`` for the new metadata on the table's current metadata, writes it
as the next metadata file (``last-updated-ms`` moved on, the base file appended to ``metadata-log``) and has
the catalog swap the table's pointer. A lost race refreshes the table and asks ``change`` again, with the
``commit.retry.*`` policy of :mod:`.retry`; ``change`` may raise (a :class:`ValidationError` when the
refreshed table no longer allows the change) or return None (nothing to commit).

Files: a metadata file that definitely did not land is deleted; after an unknown outcome (the swap failed
without the catalog saying why, or was interrupted) nothing is deleted. ``faults``: the producer's test
hook, called with ``metadata`` and ``swap``.

REST catalogs take table changes as updates, not as metadata files: a change that can say itself as REST
requirements and updates (``rest``) is sent so, after an ``assert-table-uuid``, and the server's metadata is
adopted; a lost race (409) refreshes and asks ``change`` again, a 5xx or a broken connection is an unknown
state. The first attempt starts from a refreshed table too, as Java's commits do: the requirements assert
only what the change reads (refs it moves, the schema it evolves), so a change made of a handle behind the
table would be accepted (an expiration unaware of a newer tag had the server drop the tag with its
snapshot, whose files were then deleted). Changes without a REST form are refused there with
:class:`UnsupportedFeature`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeAlias

from ..errors import (
    CommitConflict,
    CommitStateUnknown,
    GpuEngineError,
    ManifestError,
    UnsupportedFeature,
    ValidationError,
)
from ..iceberg.metadata import TableMetadata
from . import table_update
from .producer import (
    check_committable,
    delete_files,
    is_file_system_catalog,
    is_rest_catalog,
    moved_on,
    table_uuid_requirement,
)
from .retry import RetryPolicy
from .update import Faults

if TYPE_CHECKING:
    from ..table import Table

Change = Callable[[TableMetadata], TableMetadata | None]
"""The new metadata for a base (its log and timestamp are filled in), or None when there is nothing to do."""
RestForm: TypeAlias = tuple[list[dict[str, Any]], list[dict[str, Any]]]
"""REST requirements and updates (CommitTableRequest)."""
RestChange = Callable[[TableMetadata, TableMetadata], RestForm]
"""The REST form of the change that turns a base into the new metadata ``change`` made of it."""


def commit_metadata_change(
    table: Table,
    change: Change,
    *,
    action: str,
    faults: Faults | None = None,
    sleep: Callable[[float], None] = time.sleep,
    rest: RestChange | None = None,
) -> tuple[TableMetadata, str] | None:
    """Commit ``change`` (see the module doc); the committed metadata and its location, None when
    ``change`` found nothing to do. ``action`` names the change in errors ("expire_snapshots")."""
    catalog = check_committable(table, writes_files=False)
    rest_catalog = is_rest_catalog(catalog)
    if rest_catalog and rest is None:
        raise UnsupportedFeature(
            f"{action} on {table.location}: REST catalogs take table changes as updates; this commit writes "
            "a metadata file, which the REST protocol cannot swap in"
        )
    fault: Faults = faults or (lambda stage: None)
    policy = RetryPolicy.from_properties(table.properties)
    deadline = time.monotonic() + policy.total_timeout_ms / 1000.0
    attempt = 0

    def lost_race(exc: GpuEngineError) -> None:
        """Raise when the retries are spent, else wait and refresh the table for the next attempt."""
        if attempt > policy.num_retries or time.monotonic() >= deadline:
            raise CommitConflict(
                f"{action} on {table.location} failed after {attempt} attempt(s): {exc}"
            ) from exc
        sleep(min(policy.wait_s(attempt), max(deadline - time.monotonic(), 0.0)))
        table.refresh()

    while True:
        attempt += 1
        if attempt == 1 and rest_catalog:
            table.refresh()  # see _rest_commit
        base, base_location, io = table.metadata, table.metadata_location, table.io
        try:
            changed = change(base)
        except ManifestError as exc:  # read from a base another writer expired meanwhile: a lost race
            if not moved_on(catalog, table):
                raise
            lost_race(exc)
            continue
        if changed is None:
            return None
        if rest is not None and rest_catalog:
            try:
                return _rest_commit(table, base, rest(base, changed), action, fault)
            except CommitConflict as exc:
                lost_race(exc)
                continue
        now = table_update.now_ms(base)
        new_md = replace(
            changed,
            metadata_log=table_update.metadata_log(base, base_location, changed.properties),
            last_updated_ms=now,
        )
        path = table_update.metadata_path(
            new_md, base_location, file_system_table=is_file_system_catalog(catalog)
        )
        swapping = False
        try:
            fault("metadata")
            table_update.write_metadata(io, path, new_md)
            fault("swap")
            swapping = True
            location = catalog.commit_metadata(table.identifier, base_location, path)
        except CommitConflict as exc:
            delete_files(io, [path], fault=None)
            lost_race(exc)
            continue
        except CommitStateUnknown:
            raise
        except GpuEngineError:
            delete_files(io, [path], fault=None)
            raise
        except BaseException as exc:
            if not swapping:  # failed before the catalog was asked: definitely not committed
                delete_files(io, [path], fault=None)
                raise
            if not isinstance(exc, Exception):  # interrupted during the swap: unknown, nothing deleted
                raise
            raise CommitStateUnknown(
                f"{action} on {table.location}: the catalog swap to {path} failed with "
                f"{type(exc).__name__}: {exc}; whether it landed is unknown"
            ) from exc
        table._advance(new_md, location)
        table_update.delete_removed_metadata_files(io, base, new_md)
        return new_md, location


def _rest_commit(
    table: Table,
    base: TableMetadata,
    change: RestForm,
    action: str,
    fault: Faults,
) -> tuple[TableMetadata, str]:
    from ..catalog.rest import RestCatalog

    catalog = table.catalog
    assert isinstance(catalog, RestCatalog)
    requirements, updates = change
    fault("metadata")
    fault("swap")
    try:
        committed = catalog.commit_table(
            table.identifier,
            requirements=[*table_uuid_requirement(base), *requirements],
            updates=updates,
        )
    except (CommitConflict, CommitStateUnknown, GpuEngineError):
        raise
    except Exception as exc:
        raise CommitStateUnknown(
            f"{action} on {table.location}: the REST commit failed with {type(exc).__name__}: {exc}; "
            "whether it landed is unknown"
        ) from exc
    table._advance(committed.metadata, committed.metadata_location)
    return committed.metadata, committed.metadata_location


class MetadataUpdate(ABC):
    """A builder of a metadata-only change (schema, partition spec), committed by :meth:`commit` or when a
    ``with`` block over it ends without an error."""

    @abstractmethod
    def commit(self, *, faults: Faults | None = None) -> object:
        """Commit the change; what was committed."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.commit()


def require_unchanged(base: TableMetadata, what: str, now: int, started: int) -> None:
    """:class:`ValidationError` unless the table's ``what`` (its id ``now`` in ``base``) is still the one an
    update started from (``started``): the update is built on it and must be built again otherwise."""
    if now != started:
        raise ValidationError(
            f"table {base.location}: its {what} changed (now {what} {now}) since this update started from "
            f"{what} {started}: build it again"
        )

"""Typed errors. Every message names the option, type or file at fault."""


class GpuEngineError(Exception):
    """Base of every error raised by gpu_engine."""


class UnsupportedFeature(GpuEngineError, ValueError):
    """A valid request this engine does not (or the spec does not) support."""


class UnsupportedTransform(UnsupportedFeature):
    """A partition transform that cannot apply to a source type, or an unknown transform string."""


class InvalidType(GpuEngineError, ValueError):
    """An Iceberg type string that does not parse, or Arrow data that does not match the declared type."""


class BackendUnavailable(GpuEngineError, RuntimeError):
    """The requested backend cannot run here (for example ``backend="cuda"`` without a CUDA device)."""


class MetadataError(GpuEngineError, ValueError):
    """Malformed or inconsistent table metadata; the message names the file and the field at fault."""


class SnapshotNotFound(GpuEngineError, LookupError):
    """A snapshot id, ref name or timestamp that selects no snapshot of the table."""


class ManifestError(GpuEngineError, ValueError):
    """A manifest list or manifest that is missing, unreadable, corrupt or not shaped as the spec requires."""


class SingleValueError(GpuEngineError, ValueError):
    """A value that does not fit its Iceberg type's single-value serialization (spec Appendix D)."""


class CatalogError(GpuEngineError):
    """A catalog that cannot be configured, reached or used; the message names the catalog and what failed."""


class NoSuchTable(CatalogError, LookupError):
    """A table identifier, table directory or metadata file that names no table."""


class NoSuchNamespace(CatalogError, LookupError):
    """A namespace that does not exist in the catalog."""


class TableAlreadyExists(CatalogError):
    """Creating or registering a table whose identifier is already taken."""


class NamespaceAlreadyExists(CatalogError):
    """Creating a namespace that already exists."""


class NamespaceNotEmpty(CatalogError):
    """Dropping a namespace that still holds tables."""


class CommitConflict(GpuEngineError):
    """A commit lost a race: the table's current metadata is no longer the one it was based on. Retryable."""


class ValidationError(GpuEngineError, ValueError):
    """The change is no longer valid against the current table (a file it removes is gone, the table was
    replaced, a caller's validation failed, a concurrent delete touched the same data file). Not retried:
    nothing was committed."""


class CommitStateUnknown(GpuEngineError):
    """The commit may or may not have landed (e.g. the connection dropped after the swap was sent).

    Never clean up the files of such a commit: they may be the table's current state.
    """


class ExpressionError(GpuEngineError, ValueError):
    """A filter expression that does not parse, bind or convert (names the position, column or literal)."""


class NotAuthorized(CatalogError):
    """The catalog refused the credentials (HTTP 401/403/419), or its OAuth2 token endpoint did."""


class PlanningError(GpuEngineError, ValueError):
    """A scan or rewrite cannot be planned as asked (conflicting options, inconsistent table state)."""


class DataFileError(GpuEngineError, ValueError):
    """A data file, delete file or Puffin file that is missing, truncated, corrupt or inconsistent with its
    manifest entry (a deleted position beyond the file's rows, a NULL ``file_path``, a bad CRC)."""


class SchemaMismatch(GpuEngineError, ValueError):
    """A file column that cannot be read as the table's type for its field id (not an allowed promotion)."""


class InvalidProperty(GpuEngineError, ValueError):
    """A table property (or option) whose value does not parse or is out of range; names the property."""


class InvalidOption(GpuEngineError, ValueError):
    """An action option (e.g. a compaction's ``min-input-files``) is unknown or has a bad value."""


class InvalidData(GpuEngineError, ValueError):
    """Rows given to a write break its rules (an upsert's key repeated within the new rows)."""

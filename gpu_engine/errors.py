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

"""Backend selection and the buffers that move between host and device."""

from .columns import Column, from_arrow, to_arrow
from .select import BackendChoice, BackendName, choose, probe_cuda

__all__ = ["BackendChoice", "BackendName", "Column", "choose", "from_arrow", "probe_cuda", "to_arrow"]

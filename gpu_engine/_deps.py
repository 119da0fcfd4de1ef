"""The one place optional imports live, each with an actionable error."""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import BackendUnavailable

_INSTALL_HINT = {
    "cupy": "pip install 'gpu-engine[cuda13]' (or [cuda12]), or conda env create -f conda-env.yml",
    "cudf": "pip install 'gpu-engine[cuda13]' (or [cuda12]), or conda env create -f conda-env.yml",
    "pylibcudf": "pip install 'gpu-engine[cuda13]' (or [cuda12]), or conda env create -f conda-env.yml",
}


def optional(name: str) -> ModuleType | None:
    """The module if it imports, else None (for feature probes)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def require(name: str, purpose: str) -> ModuleType:
    """The module, or BackendUnavailable saying what needs it and how to install it."""
    module = optional(name)
    if module is None:
        hint = _INSTALL_HINT.get(name, f"pip install {name}")
        raise BackendUnavailable(f"{purpose} needs the '{name}' package, which is not installed: {hint}")
    return module

"""Checks of the arguments of public calls: a wrong type or an out-of-range value is a
:class:`~gpu_engine.errors.GpuEngineError` naming the argument and the value, not a bare ``TypeError`` or
``AttributeError`` from deep inside (or, worse, a value silently taken for something else: a string
iterated per character, ``True`` taken as 1, a float limit).

Each check takes the error class fitting its caller (``UnsupportedFeature`` for a scan's limit,
``InvalidOption`` for an action's option, ``CatalogError`` for a catalog's identifier) and returns the
value in its plain Python form (a numpy integer as an ``int``).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any

from .errors import GpuEngineError

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1


def integer(
    value: object,
    what: str,
    error: type[GpuEngineError],
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """``value`` as an ``int`` (Python or numpy integers; not ``bool``, not floats, not strings), within
    ``minimum``..``maximum``; ``error`` naming ``what`` and the value otherwise."""
    need = "an integer"
    if minimum is not None and maximum is not None:
        need = f"an integer in {minimum}..{maximum}"
    elif minimum is not None:
        need = f"an integer >= {minimum}"
    elif maximum is not None:
        need = f"an integer <= {maximum}"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise error(f"{what}={value!r}: expected {need}, not a bool")
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise error(f"{what}={value!r}: expected {need}, not {type(value).__name__}") from None
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise error(f"{what}={value!r}: expected {need}")
    return number


def boolean(value: object, what: str, error: type[GpuEngineError]) -> bool:
    """``value`` when it is a ``bool`` (or a numpy bool); ``error`` naming ``what`` otherwise (a string
    such as ``"no"`` would be truthy)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise error(f"{what}={value!r}: expected True or False, not {type(value).__name__}")


def text(value: object, what: str, error: type[GpuEngineError]) -> str:
    """``value`` when it is a ``str``; ``error`` naming ``what`` otherwise."""
    if isinstance(value, str):
        return value
    raise error(f"{what}={value!r}: expected a string, not {type(value).__name__}")


def mapping(value: object, what: str, error: type[GpuEngineError]) -> Mapping[Any, Any]:
    """``value`` when it is a mapping (None: an empty one); ``error`` naming ``what`` otherwise (a list
    or a string is not taken as no options, nor iterated per character)."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    raise error(f"{what}={value!r}: expected a mapping (a dict), not {type(value).__name__}")


def names(value: object, what: str, error: type[GpuEngineError]) -> tuple[str, ...]:
    """``value``, a list or tuple of strings, as a tuple; ``error`` naming ``what`` otherwise. A bare
    string is refused rather than iterated per character (``columns="id"`` would name ``i`` and ``d``)."""
    if isinstance(value, str):
        raise error(f"{what}={value!r}: expected a list of names, not a string (write [{value!r}])")
    if isinstance(value, (bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise error(f"{what}={value!r}: expected a list of names, not {type(value).__name__}")
    out = tuple(value)
    bad = [v for v in out if not isinstance(v, str)]
    if bad:
        raise error(f"{what}={list(out)!r}: names must be strings, not {bad[0]!r} ({type(bad[0]).__name__})")
    return out

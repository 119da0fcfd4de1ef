"""Typed reads of table properties (string to string maps, as Iceberg stores them)."""

from __future__ import annotations

from collections.abc import Mapping

from .errors import InvalidProperty


def int_property(props: Mapping[str, str], name: str, default: int, *, minimum: int | None = 1) -> int:
    """``props[name]`` as an integer (``default`` when absent); InvalidProperty naming the property when
    it is not an integer or is below ``minimum``."""
    raw = props.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or (minimum is not None and value < minimum):
        need = "an integer" if minimum is None else f"an integer >= {minimum}"
        raise InvalidProperty(f"table property {name}={raw!r}: expected {need}")
    return value


def bool_property(props: Mapping[str, str], name: str, default: bool) -> bool:
    """``props[name]`` as a boolean, ``true`` or ``false`` in any case (``default`` when absent);
    InvalidProperty naming the property for any other value (Java would read it as false)."""
    raw = props.get(name)
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidProperty(f"table property {name}={raw!r}: expected true or false")
    return text == "true"

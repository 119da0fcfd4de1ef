"""Where new data and delete files go: Iceberg Java's ``LocationProviders`` by the table's properties.

- Default: ``write.data.path`` (default ``<location>/data``), then the partition path, then the file name.
- ``write.object-storage.enabled=true`` (``ObjectStoreLocationProvider``): a hash of the file name (its
  partition path included when ``write.object-storage.partitioned-paths``, default true) spreads files
  over ``xxxx/xxxx/xxxx/xxxxxxxx`` directories (the low 20 bits of its murmur3_32, in binary) under the
  same data path; a data path outside the table location gets the table's last two path segments after
  the hash, so tables sharing it stay apart.
- Refused, naming the property: ``write.location-provider.impl`` (a Java class), and the deprecated
  ``write.folder-storage.path`` / ``write.object-storage.path`` where Java 1.11 throws on them (set them
  as ``write.data.path``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import mmh3

from ..errors import InvalidProperty, UnsupportedFeature
from ..properties import bool_property

DATA_PATH = "write.data.path"
OBJECT_STORAGE = "write.object-storage.enabled"
PARTITIONED_PATHS = "write.object-storage.partitioned-paths"
PROVIDER_IMPL = "write.location-provider.impl"
_DEPRECATED = ("write.object-storage.path", "write.folder-storage.path")


class LocationProvider(Protocol):
    def new_data_location(self, file_name: str, partition_path: str | None) -> str:
        """The recorded path of a new data file of a partition (``partition_path`` None: unpartitioned)."""
        ...


def location_provider(locations: str | LocationProvider, properties: Mapping[str, str]) -> LocationProvider:
    """The provider of a table at ``locations`` by its ``properties`` (see the module doc), or ``locations``
    when it is a provider already; InvalidProperty / UnsupportedFeature naming a property it cannot follow."""
    if not isinstance(locations, str):
        return locations
    table_location = _strip_trailing_slash(locations)  # as Java's locationsFor, before either provider
    if PROVIDER_IMPL in properties:
        raise UnsupportedFeature(
            f"table property {PROVIDER_IMPL}={properties[PROVIDER_IMPL]!r}: a Java location provider class "
            "cannot run here; remove it (or use write.object-storage.enabled / write.data.path)"
        )
    if bool_property(properties, OBJECT_STORAGE, False):
        return ObjectStoreLocations(table_location, properties)
    return DataLocations(table_location, properties)


def data_location(table_location: str, properties: Mapping[str, str]) -> str:
    """Where the table's data files go (Java's dataLocation): ``write.data.path``, else ``<location>/data``;
    the object store provider's hash directories lie under it."""
    return _data_path(_strip_trailing_slash(table_location), properties, ())


def _data_path(table_location: str, properties: Mapping[str, str], deprecated: tuple[str, ...]) -> str:
    path = properties.get(DATA_PATH)
    if path is None:
        for key in deprecated:
            if key in properties:
                raise InvalidProperty(
                    f"table property {key}={properties[key]!r} is deprecated (Iceberg Java refuses it since "
                    f"1.9): set {DATA_PATH} instead"
                )
        path = f"{table_location.rstrip('/')}/data"
    if not path.strip():
        raise InvalidProperty(f"table property {DATA_PATH}={path!r}: expected a path")
    return _strip_trailing_slash(path)


def _strip_trailing_slash(path: str) -> str:
    while path.endswith("/") and not path.endswith("://"):
        path = path[:-1]
    return path


@dataclass(frozen=True)
class DataLocations:
    """Java's DefaultLocationProvider: ``<data path>/<partition path>/<file>``."""

    table_location: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def new_data_location(self, file_name: str, partition_path: str | None) -> str:
        base = _data_path(self.table_location, self.properties, _DEPRECATED[1:])
        return "/".join(p for p in (base, partition_path, file_name) if p)


@dataclass(frozen=True)
class ObjectStoreLocations:
    """Java's ObjectStoreLocationProvider (see the module doc)."""

    table_location: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def new_data_location(self, file_name: str, partition_path: str | None) -> str:
        storage = _data_path(self.table_location, self.properties, _DEPRECATED)
        partitioned = bool_property(self.properties, PARTITIONED_PATHS, True)
        name = f"{partition_path}/{file_name}" if partition_path and partitioned else file_name
        hashed = entropy_dirs(name)
        if not storage.startswith(self.table_location):
            return f"{storage}/{hashed}/{_path_context(self.table_location)}/{name}"
        return f"{storage}/{hashed}/{name}" if partitioned else f"{storage}/{hashed}-{name}"


def entropy_dirs(name: str) -> str:
    """The low 20 bits of murmur3_32(``name``) in binary as ``xxxx/xxxx/xxxx/xxxxxxxx`` (Java's computeHash
    and dirsFromHash)."""
    bits = format(mmh3.hash(name.encode("utf-8"), 0, signed=False) & 0xFFFFF, "020b")
    return f"{bits[0:4]}/{bits[4:8]}/{bits[8:12]}/{bits[12:]}"


def _path_context(table_location: str) -> str:
    """Hadoop Path's ``parent.getName() + "/" + getName()`` of the table location: its last two segments,
    the parent's name empty one level below a root (``s3://bucket/t`` gives ``/t``, as Java)."""
    path = table_location.split("://", 1)[-1]
    rooted = "://" in table_location or path.startswith("/")
    if "://" in table_location:
        path = path.split("/", 1)[1] if "/" in path else ""  # drop the authority
    segments = [s for s in path.split("/") if s]
    if len(segments) == 1 and rooted:
        return f"/{segments[0]}"
    return "/".join(segments[-2:])

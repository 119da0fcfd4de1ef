"""File IO for table metadata and data: local paths and ``file:`` URIs, other schemes through fsspec.

Paths recorded in metadata are *recorded* paths: pass each through :meth:`FileIO.resolve` (or the
table's :class:`~gpu_engine.io.paths.PathMap` vectorised) exactly once, then hand the result to the
I/O methods, which never remap on their own (mapping twice is not idempotent for every map).

New files are written create-exclusive: :meth:`FileIO.write_bytes` never overwrites. Locally it writes a
temporary file in the target directory and hard-links it into place, which is atomic (readers see all
of the file or none) and fails if the target exists. Only pointer files that are meant to change
(``version-hint.text``) go through :meth:`FileIO.replace_bytes`.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from .._deps import optional
from ..errors import UnsupportedFeature
from .paths import PathMap

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_LOCAL_HOSTS = ("", "localhost")
# fsspec implementation package per scheme, for the error message when it is missing
_FSSPEC_PACKAGES = {
    "s3": "s3fs",
    "s3a": "s3fs",
    "s3n": "s3fs",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "abfss": "adlfs",
    "az": "adlfs",
    "hdfs": "pyarrow",
    "viewfs": "pyarrow",
    "http": "aiohttp",
    "https": "aiohttp",
}


@runtime_checkable
class FileIO(Protocol):
    """What catalogs, metadata readers and writers need from a file system."""

    @property
    def path_map(self) -> PathMap: ...

    def resolve(self, path: str) -> str:
        """A recorded path (from metadata, a manifest or a delete file) mapped to where the file is now."""
        ...

    def with_path_map(self, path_map: PathMap) -> FileIO:
        """The same IO with ``path_map`` as its table path map."""
        ...

    def open_input(self, path: str) -> BinaryIO: ...

    def read_bytes(self, path: str) -> bytes: ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def list_dir(self, path: str) -> list[str]:
        """Full paths of the entries of directory ``path`` (sorted); FileNotFoundError if it is missing."""
        ...

    def write_bytes(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data``; FileExistsError if it exists (never overwrites)."""
        ...

    def replace_bytes(self, path: str, data: bytes) -> None:
        """Create or atomically replace ``path`` (pointer files such as version-hint only)."""
        ...

    def make_dirs(self, path: str) -> None: ...

    def delete(self, path: str, *, missing_ok: bool = False) -> None: ...


def scheme_of(path: str) -> str:
    """The URI scheme of ``path`` lowercased, or ``""`` for a plain path."""
    m = _URI.match(path)
    # one-letter "schemes" are Windows drive letters, not URIs
    return m.group(1).lower() if m and len(m.group(1)) > 1 else ""


def local_path(path: str) -> str:
    """A plain local path for a plain path or a ``file:`` URI (``file:/x``, ``file:///x``, ``file://localhost/x``)."""
    scheme = scheme_of(path)
    if not scheme:
        return path
    if scheme != "file":
        raise UnsupportedFeature(f"{path!r} is not a local path (scheme {scheme!r})")
    rest = path[len("file:") :]
    if rest.startswith("//"):
        host, sep, tail = rest[2:].partition("/")
        if host.lower() not in _LOCAL_HOSTS:
            raise UnsupportedFeature(
                f"{path!r}: a file: URI with host {host!r} is not a local path; "
                "map it with path_map= or relocate=True"
            )
        rest = sep + tail
    return rest or "/"


@dataclass(frozen=True)
class LocalFileIO:
    """The local file system, for plain paths and ``file:`` URIs."""

    path_map: PathMap = field(default_factory=PathMap)

    def resolve(self, path: str) -> str:
        return self.path_map.apply(path)

    def with_path_map(self, path_map: PathMap) -> LocalFileIO:
        return replace(self, path_map=path_map)

    def open_input(self, path: str) -> BinaryIO:
        return open(local_path(path), "rb")

    def read_bytes(self, path: str) -> bytes:
        return Path(local_path(path)).read_bytes()

    def exists(self, path: str) -> bool:
        return os.path.exists(local_path(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(local_path(path))

    def list_dir(self, path: str) -> list[str]:
        base = path.rstrip("/") or "/"
        sep = "" if base.endswith("/") else "/"
        return [base + sep + name for name in sorted(os.listdir(local_path(path)))]

    def write_bytes(self, path: str, data: bytes) -> None:
        target = local_path(path)
        directory = os.path.dirname(target) or "."
        os.makedirs(directory, exist_ok=True)
        if os.path.lexists(target):
            raise FileExistsError(f"{path} already exists: new files are never overwritten")
        tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        try:
            _write_synced(tmp, data, path)
            try:
                os.link(tmp, target)  # atomic, and fails when target exists: rename without overwrite
            except FileExistsError:
                raise FileExistsError(f"{path} already exists: new files are never overwritten") from None
            except OSError:  # file systems without hard links: exclusive create (not atomic for readers)
                with open(target, "xb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        _fsync_dir(directory)

    def replace_bytes(self, path: str, data: bytes) -> None:
        target = local_path(path)
        directory = os.path.dirname(target) or "."
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        try:
            _write_synced(tmp, data, path)
            os.replace(tmp, target)
        finally:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        _fsync_dir(directory)

    def make_dirs(self, path: str) -> None:
        os.makedirs(local_path(path), exist_ok=True)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        try:
            os.remove(local_path(path))
        except FileNotFoundError:
            if not missing_ok:
                raise


@contextlib.contextmanager
def naming(shown: str) -> Iterator[None]:
    """An OSError without a file name raised inside (a full disk: ``[Errno 28] No space left on
    device``) names ``shown``, the file being written."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise type(exc)(exc.errno, f"{exc.strerror} (writing {shown})") from exc


def _write_synced(path: str, data: bytes, shown: str) -> None:
    with naming(shown), open(path, "xb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # some file systems cannot sync a directory: best effort
            os.fsync(fd)
    finally:
        os.close(fd)


def _s3_options(properties: Mapping[str, str]) -> dict[str, Any]:
    """PyIceberg's ``s3.*`` catalog properties as s3fs keyword arguments."""
    opts: dict[str, Any] = {}
    client: dict[str, Any] = {}
    if v := properties.get("s3.access-key-id"):
        opts["key"] = v
    if v := properties.get("s3.secret-access-key"):
        opts["secret"] = v
    if v := properties.get("s3.session-token"):
        opts["token"] = v
    if v := properties.get("s3.endpoint"):
        client["endpoint_url"] = v
    if v := properties.get("s3.region") or properties.get("client.region"):
        client["region_name"] = v
    if client:
        opts["client_kwargs"] = client
    return opts


@dataclass(frozen=True)
class FsspecFileIO:
    """Any scheme fsspec knows (s3, gs, abfs, hdfs, ...), through the scheme's fsspec implementation.

    Object stores have no rename-without-overwrite: :meth:`write_bytes` checks for the target and then
    writes it, which is exclusive only against writers that are not racing within that window.
    """

    properties: Mapping[str, str] = field(default_factory=dict, repr=False)  # credentials: never shown
    path_map: PathMap = field(default_factory=PathMap)
    _filesystems: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def resolve(self, path: str) -> str:
        return self.path_map.apply(path)

    def with_path_map(self, path_map: PathMap) -> FsspecFileIO:
        return replace(self, path_map=path_map)

    def _fs(self, path: str) -> Any:
        scheme = scheme_of(path) or "file"
        if scheme in self._filesystems:
            return self._filesystems[scheme]
        package = _FSSPEC_PACKAGES.get(scheme)
        fsspec = optional("fsspec")
        if fsspec is None:
            extra = f" and {package}" if package else ""
            raise UnsupportedFeature(
                f"cannot open {path!r}: scheme {scheme!r} needs the fsspec package{extra} "
                f"(pip install fsspec{' ' + package if package else ''})"
            )
        options = _s3_options(self.properties) if scheme in ("s3", "s3a", "s3n") else {}
        try:
            fs = fsspec.filesystem(scheme, **options)
        except (ImportError, ValueError) as e:
            hint = f" (pip install {package})" if package else ""
            raise UnsupportedFeature(
                f"cannot open {path!r}: fsspec scheme {scheme!r} is unavailable: {e}{hint}"
            ) from e
        self._filesystems[scheme] = fs
        return fs

    def open_input(self, path: str) -> BinaryIO:
        f: BinaryIO = self._fs(path).open(path, "rb")
        return f

    def read_bytes(self, path: str) -> bytes:
        return bytes(self._fs(path).cat_file(path))

    def exists(self, path: str) -> bool:
        return bool(self._fs(path).exists(path))

    def is_dir(self, path: str) -> bool:
        return bool(self._fs(path).isdir(path))

    def list_dir(self, path: str) -> list[str]:
        fs = self._fs(path)
        scheme = scheme_of(path)
        names = sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
        base = path.rstrip("/")
        return [f"{base}/{n}" for n in names] if scheme else [os.path.join(base, n) for n in names]

    def write_bytes(self, path: str, data: bytes) -> None:
        fs = self._fs(path)
        if fs.exists(path):
            raise FileExistsError(f"{path} already exists: new files are never overwritten")
        with fs.open(path, "wb") as f:
            f.write(data)

    def replace_bytes(self, path: str, data: bytes) -> None:
        with self._fs(path).open(path, "wb") as f:
            f.write(data)

    def make_dirs(self, path: str) -> None:
        self._fs(path).makedirs(path, exist_ok=True)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        fs = self._fs(path)
        if missing_ok and not fs.exists(path):
            return
        fs.rm_file(path)


@dataclass(frozen=True)
class DefaultFileIO:
    """Local paths and ``file:`` URIs on the local file system; every other scheme through fsspec."""

    properties: Mapping[str, str] = field(default_factory=dict, repr=False)  # credentials: never shown
    path_map: PathMap = field(default_factory=PathMap)
    _local: LocalFileIO = field(default_factory=LocalFileIO, compare=False, repr=False)
    _remote: FsspecFileIO | None = field(default=None, compare=False, repr=False)

    def resolve(self, path: str) -> str:
        return self.path_map.apply(path)

    def with_path_map(self, path_map: PathMap) -> DefaultFileIO:
        return replace(self, path_map=path_map)

    def _io(self, path: str) -> LocalFileIO | FsspecFileIO:
        if scheme_of(path) in ("", "file"):
            return self._local
        if self._remote is None:
            object.__setattr__(self, "_remote", FsspecFileIO(self.properties))
        assert self._remote is not None
        return self._remote

    def open_input(self, path: str) -> BinaryIO:
        return self._io(path).open_input(path)

    def read_bytes(self, path: str) -> bytes:
        return self._io(path).read_bytes(path)

    def exists(self, path: str) -> bool:
        return self._io(path).exists(path)

    def is_dir(self, path: str) -> bool:
        return self._io(path).is_dir(path)

    def list_dir(self, path: str) -> list[str]:
        return self._io(path).list_dir(path)

    def write_bytes(self, path: str, data: bytes) -> None:
        self._io(path).write_bytes(path, data)

    def replace_bytes(self, path: str, data: bytes) -> None:
        self._io(path).replace_bytes(path, data)

    def make_dirs(self, path: str) -> None:
        self._io(path).make_dirs(path)

    def delete(self, path: str, *, missing_ok: bool = False) -> None:
        self._io(path).delete(path, missing_ok=missing_ok)


def load_file_io(
    properties: Mapping[str, str] | None = None, *, path_map: PathMap | Mapping[str, str] | None = None
) -> DefaultFileIO:
    """The default FileIO (local + fsspec) with catalog ``properties`` (``s3.*``) and a path map."""
    pm = path_map if isinstance(path_map, PathMap) else PathMap.of(path_map or {})
    return DefaultFileIO(dict(properties or {}), pm)


def on_local_disk(io: FileIO, path: str) -> bool:
    """Whether ``io`` reads ``path`` from the local file system (a plain path or ``file:`` URI through
    :class:`LocalFileIO` or :class:`DefaultFileIO`): then other libraries may open it by path."""
    return isinstance(io, (LocalFileIO, DefaultFileIO)) and scheme_of(path) in ("", "file")


def file_identity(io: FileIO, path: str) -> str:
    """One name for every spelling of the file ``path`` names through ``io`` (``/x``, ``file:/x``,
    ``file:///x``, a path through a symbolic link): a local file's real path, any other file's resolved URI.
    Where paths written by several engines are compared to decide what to delete."""
    resolved = io.resolve(path)
    return os.path.realpath(local_path(resolved)) if on_local_disk(io, resolved) else resolved

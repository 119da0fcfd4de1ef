"""File-system (Hadoop-style) tables: the current metadata file is found in the table directory itself.

Finding the current metadata of ``<table>/metadata/``:

* ``version-hint.text`` (or ``version-hint.txt``) holding a number ``N`` → ``vN.metadata.json`` (also
  ``vN.gz.metadata.json`` / ``vN.metadata.json.gz``), then forward to ``vN+1``, ``vN+2``, ... while they
  exist (the hint is written after the metadata file, so it may lag one commit behind; Iceberg Java's
  HadoopTableOperations does the same). A number whose file is missing is an error, unless higher versions
  are listed (a slow writer's hint landed after later commits pruned its file): then the listing rule.
* a hint holding a file name (DuckDB writes ``00001-<uuid>``) → that file, with or without the
  ``.metadata.json`` suffix, then forward to ``v<its number + 1>``, ... while they exist (a commit through the
  directory killed before it replaced the hint).
  A hint that is neither a number nor a metadata file's name (``3x``) is ignored, as Java ignores a hint
  it cannot parse.
* no hint, or an empty one → list the directory: the highest version number wins, comparing numbers
  (``v16`` > ``v9``) of ``vN…`` and ``NNNNN-<uuid>…`` names; several files with that number, and files
  without a number (``vfinal.metadata.json``), are ranked by their ``last-updated-ms``. Files named
  ``<uuid>.metadata.json`` are a writer's uncommitted new metadata (spec step 3) and never current;
  ``v3.1.metadata.json`` counts as version 3, as in Java.

Committing (spec "File System Tables", deprecated in the spec for exactly the reasons below): the new
metadata, written as ``metadata/<uuid>.metadata.json`` or outside the metadata directory, is copied
create-exclusive to ``v<V+1>.metadata.json``, where ``V`` is the highest version listed *before*
checking that the current metadata is the expected one, and then deleted (the spec's rename). Locally
the copy is written to a temporary file and hard-linked into place, which is atomic and fails if another
writer created ``v<V+1>`` first: that failure is the :class:`CommitConflict`; so is finding ``v<V+1>``
under another codec's name beside one's own just linked (``v2.gz.metadata.json`` and ``v2.metadata.json``:
each name is exclusive on its own), the own file withdrawn. Then the hint is replaced
(atomic rename); a crash between the two leaves a stale hint, which readers walk past. Limits: on
object stores (fsspec) create-exclusive is check-then-write, so two writers racing within that window
can both "win"; on NFS hard links are atomic but caches may show a stale listing. Use a SQL or REST
catalog when more than one writer commits concurrently.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import re
from collections.abc import Mapping

from ..errors import (
    CatalogError,
    CommitConflict,
    MetadataError,
    NamespaceAlreadyExists,
    NoSuchNamespace,
    NoSuchTable,
    UnsupportedFeature,
)
from ..io.fileio import FileIO, local_path, scheme_of
from ..io.paths import normalize
from ..table import Table, read_table
from .base import (
    Catalog,
    Identifier,
    IdentifierLike,
    absolute_warehouse,
    table_identifier,
    to_identifier,
)

METADATA_DIR = "metadata"
HINT_FILES = ("version-hint.text", "version-hint.txt")
_SUFFIXES = (".gz.metadata.json", ".metadata.json.gz", ".metadata.json")
_HADOOP_VERSION = re.compile(r"^v(\d+)\.")  # as Java's HadoopTableOperations: v3.1.metadata.json is version 3
_UUID_NAME = re.compile(
    r"^[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(?:\.gz)?\.metadata\.json(?:\.gz)?$"
)
_METASTORE_VERSION = re.compile(r"^(\d+)-[^/]*?(?:\.gz)?\.metadata\.json(?:\.gz)?$")


def join(base: str, *parts: str) -> str:
    """``base`` and ``parts`` joined with ``/`` (works for plain paths and URIs)."""
    out = base.rstrip("/") or "/"
    for p in parts:
        out = out + ("" if out.endswith("/") else "/") + p.strip("/")
    return out


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def is_metadata_file(name: str) -> bool:
    return not name.startswith(".") and name.endswith((".metadata.json", ".metadata.json.gz"))


def is_uncommitted(name: str) -> bool:
    """A ``<uuid>.metadata.json`` file: new metadata a writer has not renamed to its version yet."""
    return _UUID_NAME.match(name) is not None


def metadata_version(name: str) -> int | None:
    """The version number in a metadata file name (``v12.metadata.json``, ``00012-<uuid>.metadata.json``)."""
    if not is_metadata_file(name):
        return None
    m = _HADOOP_VERSION.match(name) or _METASTORE_VERSION.match(name)
    return int(m.group(1)) if m else None


def _version_file(io: FileIO, metadata_dir: str, version: int) -> str | None:
    for suffix in (".metadata.json", ".gz.metadata.json", ".metadata.json.gz"):
        candidate = join(metadata_dir, f"v{version}{suffix}")
        if io.exists(candidate):
            return candidate
    return None


def _read_hint(io: FileIO, metadata_dir: str) -> tuple[str, str] | None:
    for name in HINT_FILES:
        hint = join(metadata_dir, name)
        if io.exists(hint) and not io.is_dir(hint):  # a directory so named is no hint (Java lists then)
            lines = io.read_bytes(hint).decode("utf-8", errors="replace").strip().splitlines()
            return hint, (lines[0].strip() if lines else "")
    return None


def last_updated_ms(io: FileIO, path: str) -> int:
    """``last-updated-ms`` of a (possibly gzip-compressed) metadata file."""
    data = io.read_bytes(path)
    try:
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        value = json.loads(data).get("last-updated-ms")
    except (OSError, ValueError, AttributeError) as e:
        raise MetadataError(f"{path}: not a readable metadata JSON file ({e})") from e
    if not isinstance(value, int):
        raise MetadataError(f"{path}: last-updated-ms is missing or not an integer")
    return value


def _pick_listed(io: FileIO, metadata_dir: str, names: list[str], ignore: str | None) -> str:
    files = [
        n
        for n in names
        if is_metadata_file(n)
        and not is_uncommitted(n)
        and not (ignore is not None and _same_file(join(metadata_dir, n), ignore))
    ]
    if not files:
        raise NoSuchTable(f"no metadata file (*.metadata.json) in {metadata_dir}")
    numbered = [(v, n) for n in files if (v := metadata_version(n)) is not None]
    top = max((v for v, _ in numbered), default=None)
    contenders = [n for v, n in numbered if v == top] + [n for n in files if metadata_version(n) is None]
    if len(contenders) == 1:
        return join(metadata_dir, contenders[0])
    ranked = sorted(
        contenders,
        key=lambda n: (last_updated_ms(io, join(metadata_dir, n)), metadata_version(n) or -1, n),
    )
    return join(metadata_dir, ranked[-1])


def _check_table_dir(io: FileIO, table_dir: str) -> str:
    if not io.is_dir(table_dir):
        raise NoSuchTable(f"table directory {table_dir} does not exist")
    metadata_dir = join(table_dir, METADATA_DIR)
    if not io.is_dir(metadata_dir):
        raise NoSuchTable(
            f"{table_dir} is not an Iceberg table directory: it has no {METADATA_DIR}/ directory"
        )
    return metadata_dir


def find_current_metadata(io: FileIO, table_dir: str, *, ignore: str | None = None) -> str:
    """The path of the current metadata file of the table in ``table_dir`` (rules in the module doc).

    ``ignore``: a file never taken as current by the listing rule (a commit's own new metadata file).
    """
    metadata_dir = _check_table_dir(io, table_dir)
    hint = _read_hint(io, metadata_dir)
    if hint is not None and hint[1]:
        hint_path, text = hint
        if text.isascii() and text.isdigit():  # ("²".isdigit() too, which int() refuses)
            version = int(text)
            current = _version_file(io, metadata_dir, version)
            if current is None:
                names = [basename(p) for p in io.list_dir(metadata_dir)]
                if any((v or 0) > version for v in map(metadata_version, names)):
                    # a slow writer's hint, written after later commits pruned its version
                    # (write.metadata.delete-after-commit.enabled): the listing knows the current one
                    return _pick_listed(io, metadata_dir, names, ignore)
                raise MetadataError(
                    f"{hint_path} names version {version}, but {metadata_dir} has no v{version}.metadata.json"
                )
            while (following := _version_file(io, metadata_dir, version + 1)) is not None:
                version, current = version + 1, following
            return current
        name = basename(text)
        for candidate in (name, *(name + s for s in _SUFFIXES)):
            if is_metadata_file(candidate) and io.exists(join(metadata_dir, candidate)):
                found, number = join(metadata_dir, candidate), metadata_version(candidate)
                # forward as from a number: a commit through the directory writes v<N+1> before the hint
                while number is not None and (following := _version_file(io, metadata_dir, number + 1)):
                    number, found = number + 1, following
                return found
        if any(metadata_version(c) is not None for c in (name, *(name + s for s in _SUFFIXES))):
            raise MetadataError(f"{hint_path} names {text!r}, which is not a metadata file in {metadata_dir}")
        # neither a version nor a metadata file's name (garbage): ignored, as Java's findVersion ignores a
        # hint it cannot parse, and the listing decides
    return _pick_listed(io, metadata_dir, [basename(p) for p in io.list_dir(metadata_dir)], ignore)


def _same_file(a: str, b: str) -> bool:
    def key(p: str) -> str:
        return normalize(local_path(p)) if scheme_of(p) in ("", "file") else normalize(p)

    return key(a) == key(b)


def commit_table_dir(io: FileIO, table_dir: str, expected: str | None, new_metadata_location: str) -> str:
    """Make ``new_metadata_location`` the table's ``v<V+1>`` if ``expected`` is still current; returns it.

    The new file is copied into place and then deleted (the spec's rename), and the version hint updated.
    """
    metadata_dir = join(table_dir, METADATA_DIR)
    listed = [basename(p) for p in io.list_dir(metadata_dir)] if io.is_dir(metadata_dir) else []
    names = [
        n
        for n in listed
        if is_metadata_file(n)
        and not is_uncommitted(n)
        and not _same_file(join(metadata_dir, n), new_metadata_location)
    ]
    top = max((v for n in names if (v := metadata_version(n)) is not None), default=0)
    if expected is None:
        if names:
            raise CommitConflict(f"cannot create a table in {table_dir}: it already has metadata files")
    else:
        if not names:
            raise NoSuchTable(f"no metadata file (*.metadata.json) in {metadata_dir}")
        current = find_current_metadata(io, table_dir, ignore=new_metadata_location)
        if not _same_file(current, expected):
            raise CommitConflict(
                f"table {table_dir} moved on: current metadata is {current}, expected {expected}"
            )
    suffix = (
        ".gz.metadata.json"
        if new_metadata_location.endswith((".gz.metadata.json", ".json.gz"))
        else ".metadata.json"
    )
    target = join(metadata_dir, f"v{top + 1}{suffix}")
    data = io.read_bytes(new_metadata_location)
    try:
        io.write_bytes(target, data)
    except FileExistsError as e:
        raise CommitConflict(f"another writer committed {target} first") from e
    # exclusive creation is per name, and the name follows the metadata codec: a writer whose codec differs
    # (write.metadata.compression-codec changed, or another engine's default) links v<V+1> under another
    # name without failing. Whoever finds the other name beside its own withdraws (both may: both retry),
    # so no two commits of one version both succeed and one stays unseen
    rivals = [r for s in _SUFFIXES if s != suffix and io.exists(r := join(metadata_dir, f"v{top + 1}{s}"))]
    if rivals:
        io.delete(target, missing_ok=True)
        raise CommitConflict(f"another writer committed {rivals[0]} (version {top + 1}) at the same time")
    if not _same_file(target, new_metadata_location):
        io.delete(new_metadata_location, missing_ok=True)
    hint = next((join(metadata_dir, h) for h in HINT_FILES if io.exists(join(metadata_dir, h))), None)
    with contextlib.suppress(OSError):  # the commit landed with v<V+1>; readers walk past a stale hint
        io.replace_bytes(hint or join(metadata_dir, HINT_FILES[0]), str(top + 1).encode())
    return target


class FileSystemCatalog(Catalog):
    """Tables as directories under ``warehouse``: ``db.events`` is ``<warehouse>/db/events`` (Hadoop layout).

    Namespaces are directories; they have no properties. Tables cannot be registered or dropped through
    this catalog (there is no pointer besides the files themselves).
    """

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        absolute_warehouse(self.properties)
        warehouse = self.properties.get("warehouse")
        if not warehouse:
            raise CatalogError(f"file-system catalog {name!r} needs a warehouse= directory")
        self.warehouse = warehouse

    def require_commits_to(self, table: Table) -> None:
        """Refused where the current metadata is named as a catalog names it (``NNNNN-<uuid>``) and no
        version hint points at it, or the hint is stale (a newer metadata file is listed: one written for
        DuckDB's sake, say): a SQL, REST, Hive or Glue catalog holds that table's pointer and would
        not see a ``v<N>`` committed here (the table would fork; Java's HadoopTableOperations does not even
        load such a directory)."""
        name = basename(table.metadata_location)
        metadata_dir = table.metadata_location[: -len(name)].rstrip("/")
        if not _METASTORE_VERSION.match(name):
            return
        newer = [
            n
            for p in table.io.list_dir(metadata_dir)
            if (v := metadata_version(n := basename(p))) is not None and v > (metadata_version(name) or 0)
        ]
        why = (
            "its directory has no version hint"
            if _read_hint(table.io, metadata_dir) is None
            else f"its version hint is stale ({newer[0]} is newer)"
            if newer
            else None
        )
        if why is not None:
            raise UnsupportedFeature(
                f"table {table.location}: its current metadata {name} is named as a catalog names it "
                f"(NNNNN-<uuid>.metadata.json) and {why}: the catalog that holds its pointer would not see "
                "a commit made through the directory; write through that catalog (CLI: --catalog NAME)"
            )

    def table_dir(self, identifier: IdentifierLike) -> str:
        namespace, table = table_identifier(identifier)
        return join(self.warehouse, *namespace, table)

    def _is_table(self, path: str) -> bool:
        """A directory whose ``metadata/`` holds a ``*.metadata.json`` (Java's HadoopCatalog.isTableDir):
        a namespace may hold a table, or a namespace, named ``metadata``."""
        metadata = join(path, METADATA_DIR)
        if not self.io.is_dir(metadata):
            return False
        return any(basename(p).endswith(".metadata.json") for p in self.io.list_dir(metadata))

    def load_table(self, identifier: IdentifierLike) -> Table:
        directory = self.table_dir(identifier)
        location = find_current_metadata(self.io, directory)
        return read_table(to_identifier(identifier), location, io=self.io, catalog=self)

    def current_metadata_location(self, identifier: IdentifierLike) -> str:
        return find_current_metadata(self.io, self.table_dir(identifier))

    def table_exists(self, identifier: IdentifierLike) -> bool:
        try:
            find_current_metadata(self.io, self.table_dir(identifier))
        except NoSuchTable:
            return False
        return True

    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        ns = to_identifier(namespace)
        directory = join(self.warehouse, *ns)
        if ns and not self.namespace_exists(ns):
            raise NoSuchNamespace(f"namespace {'.'.join(ns)} does not exist under {self.warehouse}")
        return [(*ns, basename(p)) for p in self._subdirs(directory) if self._is_table(p)]

    def _subdirs(self, directory: str) -> list[str]:
        if not self.io.is_dir(directory):
            return []
        return [
            p for p in self.io.list_dir(directory) if not basename(p).startswith(".") and self.io.is_dir(p)
        ]

    def list_namespaces(self, namespace: IdentifierLike = ()) -> list[Identifier]:
        ns = to_identifier(namespace)
        if ns and not self.namespace_exists(ns):
            raise NoSuchNamespace(f"namespace {'.'.join(ns)} does not exist under {self.warehouse}")
        return [(*ns, basename(p)) for p in self._subdirs(join(self.warehouse, *ns)) if not self._is_table(p)]

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        directory = join(self.warehouse, *to_identifier(namespace))
        return self.io.is_dir(directory) and not self._is_table(directory)

    def create_namespace(
        self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None
    ) -> None:
        if properties:
            raise UnsupportedFeature(f"file-system catalog {self.name!r}: namespaces have no properties")
        ns = to_identifier(namespace)
        if self.namespace_exists(ns):
            raise NamespaceAlreadyExists(f"namespace {'.'.join(ns)} already exists under {self.warehouse}")
        self.io.make_dirs(join(self.warehouse, *ns))

    def drop_table(self, identifier: IdentifierLike) -> None:
        raise UnsupportedFeature(
            f"file-system table {self.table_dir(identifier)} has no catalog entry to drop: "
            "delete its directory"
        )

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        raise UnsupportedFeature(
            f"file-system catalog {self.name!r} cannot register {metadata_location}: "
            "a file-system table is its directory; use gpu_engine.load_table(path) or a SQL catalog"
        )

    def commit_metadata(
        self, identifier: IdentifierLike, expected_metadata_location: str | None, new_metadata_location: str
    ) -> str:
        return commit_table_dir(
            self.io, self.table_dir(identifier), expected_metadata_location, new_metadata_location
        )

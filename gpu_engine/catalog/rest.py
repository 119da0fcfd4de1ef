"""REST catalog client per the Apache Iceberg REST catalog OpenAPI (``open-api/rest-catalog-open-api.yaml``).

Properties: ``uri`` (required), ``warehouse``, ``prefix``, ``token`` / ``credential`` / ``scope`` /
``oauth2-server-uri`` / ``audience`` / ``resource`` (:mod:`.rest_auth`), ``header.<Name>`` (extra request
headers), ``timeout`` (seconds per request, default 60), ``rest-page-size`` (list pagination).

On creation the client calls ``GET /v1/config?warehouse=...`` and configures itself from the server's
``defaults``, then the given properties, then the server's ``overrides`` (so ``prefix`` and ``uri`` may come
from the server), and learns the server's ``endpoints`` (the spec's default set when absent) and
``namespace-separator`` (url-encoded, default ``%1F``). A namespace in a path is its url-quoted levels
joined by that separator.

Commits: a REST server has no pointer swap. Changes are sent as ``POST .../tables/{table}`` with
``requirements`` (assertions on the current metadata) and ``updates``; the server applies them
atomically and writes the metadata file itself (:meth:`RestCatalog.commit_table`). 409 is a failed
requirement (:class:`CommitConflict`, retryable); 5xx other than 501, or a connection lost after the
request was sent, leaves the outcome unknown (:class:`CommitStateUnknown`). No request is ever retried,
except once after a 401/419 with a freshly fetched OAuth2 token (the request was refused, not applied).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from ..errors import (
    CatalogError,
    CommitConflict,
    CommitStateUnknown,
    GpuEngineError,
    NamespaceAlreadyExists,
    NamespaceNotEmpty,
    NoSuchNamespace,
    NoSuchTable,
    TableAlreadyExists,
    UnsupportedFeature,
)
from ..iceberg.metadata import TableMetadata, metadata_from_json
from ..iceberg.partitioning import spec_to_json
from ..iceberg.schema import schema_to_json
from ..iceberg.sorting import sort_order_to_json
from ..io.fileio import FileIO, load_file_io
from ..table import Table
from .base import (
    Catalog,
    Identifier,
    IdentifierLike,
    check_metadata_location,
    namespace_properties,
    table_identifier,
    to_identifier,
)
from .rest_auth import RestClient, check_no_userinfo, json_object, redacted_url, str_map

_NS = "/v1/{prefix}/namespaces/{namespace}"
_TABLE = _NS + "/tables/{table}"
DEFAULT_ENDPOINTS = frozenset(
    {
        "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces", f"GET {_NS}", f"DELETE {_NS}",
        f"POST {_NS}/properties", f"GET {_NS}/tables", f"POST {_NS}/tables", f"GET {_TABLE}",
        f"POST {_TABLE}", f"DELETE {_TABLE}", f"POST {_NS}/register", f"POST {_TABLE}/metrics",
        "POST /v1/{prefix}/tables/rename", "POST /v1/{prefix}/transactions/commit",
    }
)  # fmt: skip
DEFAULT_NAMESPACE_SEPARATOR = "%1F"
_AUTH_KEYS = ("uri", "token", "credential", "scope", "oauth2-server-uri", "audience", "resource")

# characters a path segment holds as they are (RFC 3986 pchar), with '/' and '%' (a prefix may span segments
# and arrive escaped)
_PREFIX_SAFE = "/%!$&'()*+,;=:@"


@dataclass(frozen=True)
class PropertiesUpdate:
    """What ``update_namespace_properties`` changed (``missing``: removals the server did not find)."""

    updated: tuple[str, ...]
    removed: tuple[str, ...]
    missing: tuple[str, ...] = ()


def _check_segments(catalog: str, what: str, names: Identifier) -> None:
    """A :class:`CatalogError` for ``.`` or ``..`` as a path segment: a server or proxy normalising the
    path (RFC 3986 5.2.4) would act on another resource (``DELETE .../tables/..`` drops the namespace)."""
    for name in names:
        if name in (".", ".."):
            raise CatalogError(f"REST catalog {catalog!r}: {what} {name!r} cannot be sent in a request path")


class RestCatalog(Catalog):
    """An Iceberg REST catalog: ``RestCatalog("prod", uri="https://host/api", credential="id:secret")``."""

    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        uri = self.properties.get("uri", "").rstrip("/")
        if urlsplit(uri).scheme not in ("http", "https"):
            raise CatalogError(
                f"REST catalog {name!r} needs uri=http(s)://host[:port][/path], got {redacted_url(uri)!r}"
            )
        check_no_userinfo("uri", uri)
        try:
            self._timeout = float(self.properties.get("timeout", "60"))
        except ValueError as e:
            raise CatalogError(f"REST catalog {name!r}: timeout must be a number of seconds: {e}") from e
        if self.properties.get("rest.sigv4-enabled", "false").lower() not in ("false", ""):
            raise UnsupportedFeature(
                f"REST catalog {name!r}: rest.sigv4-enabled (AWS SigV4) is not supported"
            )
        self.prefix = ""
        self.endpoints = DEFAULT_ENDPOINTS
        self._sep = DEFAULT_NAMESPACE_SEPARATOR
        self._table_tokens: dict[Identifier, str] = {}
        self._client = RestClient(name, uri, properties=self.properties, timeout=self._timeout)
        self._configure()

    @property
    def uri(self) -> str:
        """The catalog's base URL (the server's ``uri`` override applied)."""
        return self._client.uri

    def _configure(self) -> None:
        """``GET /v1/config``: server defaults < given properties < server overrides."""
        query = {"warehouse": self.properties["warehouse"]} if self.properties.get("warehouse") else None
        where = self._client.where("GET", "/v1/config")
        obj = json_object(self._client.request("GET", "/v1/config", query=query), where)
        before = {k: self.properties.get(k) for k in _AUTH_KEYS}
        merged = {**str_map(obj.get("defaults"), f"{where}: defaults"), **self.properties}
        self.properties = {**merged, **str_map(obj.get("overrides"), f"{where}: overrides")}
        same_auth = {k: self.properties.get(k) for k in _AUTH_KEYS} == before
        self._client = RestClient(
            self.name,
            self.properties.get("uri", self.uri),
            properties=self.properties,
            timeout=self._timeout,
            auth=self._client.auth if same_auth else None,
        )
        self.io = load_file_io(self.properties)
        self.prefix = self.properties.get("prefix", "").strip("/")
        endpoints = obj.get("endpoints")
        if endpoints is not None:
            self.endpoints = frozenset(str(e) for e in endpoints)
        self._sep = self.properties.get("namespace-separator") or DEFAULT_NAMESPACE_SEPARATOR

    # -- requests --------------------------------------------------------------------------------------

    def _json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        """The JSON object answered to a request (``options``: see :meth:`RestClient.request`)."""
        return json_object(self._client.request(method, path, **options), self._client.where(method, path))

    def _path(self, *segments: str) -> str:
        # the server's prefix as given, percent-encoded where a path cannot hold it (a space, non-ASCII),
        # its '/' and escapes kept: as PyIceberg's HTTP client sends it
        prefix = quote(self.prefix, safe=_PREFIX_SAFE) if self.prefix else ""
        return "/v1/" + "/".join(s for s in (prefix, *segments) if s)

    def _ns(self, namespace: IdentifierLike) -> str:
        """A namespace as one path segment: its quoted levels joined by the (url-encoded) separator."""
        parts = to_identifier(namespace)
        if not parts or any(not p for p in parts):
            raise CatalogError(f"REST catalog {self.name!r}: invalid namespace {namespace!r}")
        _check_segments(self.name, "namespace level", parts)
        if any(unquote(self._sep) in p for p in parts):
            raise CatalogError(f"namespace {parts!r} contains the namespace separator {self._sep!r}")
        return self._sep.join(quote(p, safe="") for p in parts)

    def _table_path(self, identifier: IdentifierLike) -> tuple[Identifier, str]:
        namespace, name = table_identifier(identifier)
        if not namespace:
            raise CatalogError(
                f"REST catalog {self.name!r}: table {identifier!r} has no namespace (name it NAMESPACE.TABLE)"
            )
        _check_segments(self.name, "table name", (name,))
        return (*namespace, name), self._path(
            "namespaces", self._ns(namespace), "tables", quote(name, safe="")
        )

    def _require(self, endpoint: str) -> None:
        if endpoint not in self.endpoints:
            raise UnsupportedFeature(f"REST catalog {self.name!r}: the server does not offer {endpoint}")

    def _get_pages(self, path: str, key: str, query: Mapping[str, str], **errors: Any) -> list[Any]:
        """All items of a paginated list response (``next-page-token``; ``rest-page-size`` sets pageSize)."""
        items: list[Any] = []
        query = dict(query)
        if page_size := self.properties.get("rest-page-size"):
            query.update(pageSize=page_size, pageToken="")
        seen: set[str] = set()
        while True:
            obj = self._json("GET", path, query=query, **errors)
            page = obj.get(key) or []
            if not isinstance(page, list):
                raise CatalogError(f"{self._client.where('GET', path)}: {key!r} is not a list")
            items.extend(page)
            token = obj.get("next-page-token")
            if not token:
                return items
            if token in seen:
                raise CatalogError(
                    f"{self._client.where('GET', path)}: the server repeated page token {token!r}"
                )
            seen.add(token)
            query["pageToken"] = str(token)

    # -- tables ----------------------------------------------------------------------------------------

    def _table(self, identifier: Identifier, obj: dict[str, Any], where: str) -> Table:
        """A :class:`Table` from a LoadTableResult / CommitTableResponse."""
        location, metadata = obj.get("metadata-location"), obj.get("metadata")
        if not isinstance(metadata, dict):
            raise CatalogError(f"{where}: the response has no metadata object")
        if not isinstance(location, str) or not location:
            raise CatalogError(f"{where}: the response has no metadata-location (a staged table?)")
        restrictions = obj.get("read-restrictions")
        trivial = (None, True, {"type": "true"})
        if restrictions and (
            not isinstance(restrictions, dict) or any(v not in trivial for v in restrictions.values())
        ):
            raise UnsupportedFeature(
                f"{where}: the server returned read-restrictions {restrictions!r}, which the spec "
                "requires a reader to enforce; this client cannot enforce them"
            )
        md = metadata_from_json(metadata, source=f"{where} (metadata of {location})")
        io = self._table_io(obj, md.location)
        token = str_map(obj.get("config"), "table config").get("token")
        if token:  # the spec: a table-scoped bearer token for the requests on this table
            self._table_tokens[identifier] = token
        return Table(identifier=identifier, metadata=md, metadata_location=location, io=io, catalog=self)

    def _token_of(self, ident: Identifier) -> dict[str, Any]:
        """The request options sending the table's own token, if it has one, forgotten once refused."""
        return {
            "token": self._table_tokens.get(ident),
            "token_refused": lambda: self._table_tokens.pop(ident, None),
        }

    def _table_io(self, obj: dict[str, Any], table_location: str) -> FileIO:
        """The catalog IO, configured with the table's ``config`` and best ``storage-credentials`` if any."""
        extra = str_map(obj.get("config"), "table config")
        credentials = [c for c in obj.get("storage-credentials") or [] if isinstance(c, dict)]
        matching = [c for c in credentials if table_location.startswith(str(c.get("prefix", "")))]
        if matching:
            best = max(matching, key=lambda c: len(str(c.get("prefix", ""))))
            extra.update(str_map(best.get("config"), "storage credential config"))
        if not extra:
            return self.io
        return load_file_io({**self.properties, **extra}).with_path_map(self.io.path_map)

    def load_table(self, identifier: IdentifierLike) -> Table:
        ident, path = self._table_path(identifier)
        obj = self._json("GET", path, not_found=NoSuchTable, **self._token_of(ident))
        return self._table(ident, obj, self._client.where("GET", path))

    def current_metadata_location(self, identifier: IdentifierLike) -> str:
        return self.load_table(identifier).metadata_location

    def require_commits(self) -> None:
        self._require(f"POST {_TABLE}")

    def reload(self, identifier: IdentifierLike) -> tuple[str, Table | None]:
        loaded = self.load_table(identifier)
        return loaded.metadata_location, loaded

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """``HEAD`` on the table when the server lists that endpoint, else ``GET``."""
        _, path = self._table_path(identifier)
        method = "HEAD" if f"HEAD {_TABLE}" in self.endpoints else "GET"
        try:
            self._client.request(method, path, not_found=NoSuchTable)
        except (NoSuchTable, NoSuchNamespace):
            return False
        return True

    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        path = self._path("namespaces", self._ns(namespace), "tables")
        found = self._get_pages(path, "identifiers", {}, not_found=NoSuchNamespace)
        try:
            return [(*(str(p) for p in t["namespace"]), str(t["name"])) for t in found]
        except (KeyError, TypeError) as e:
            raise CatalogError(f"{self._client.where('GET', path)}: malformed table identifier: {e}") from e

    def drop_table(self, identifier: IdentifierLike, *, purge_requested: bool = False) -> None:
        _, path = self._table_path(identifier)
        query = {"purgeRequested": "true"} if purge_requested else None
        self._client.request("DELETE", path, query=query, not_found=NoSuchTable)

    def create_from(self, identifier: IdentifierLike, md: TableMetadata, location: str | None) -> Table:
        """``POST .../namespaces/{ns}/tables`` (CreateTableRequest), as Iceberg Java and PyIceberg create
        REST tables: the server picks the location unless ``location`` is given, writes the first metadata
        file and answers with the table (its config and storage credentials). :class:`CommitStateUnknown`
        when the answer was lost (the table may exist)."""
        self._require(f"POST {_NS}/tables")
        ident, _ = self._table_path(identifier)
        payload: dict[str, Any] = {
            "name": ident[-1],
            "schema": schema_to_json(md.schema),
            "partition-spec": spec_to_json(md.spec),
            "write-order": sort_order_to_json(md.sort_order),
            "stage-create": False,
            "properties": {**md.properties, "format-version": str(md.format_version)},
        }
        if location is not None:
            payload["location"] = location
        path = self._path("namespaces", self._ns(ident[:-1]), "tables")
        obj = self._json(
            "POST", path, payload=payload, not_found=NoSuchNamespace, conflict=TableAlreadyExists, commit=True
        )
        return self._table(ident, obj, self._client.where("POST", path))

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        metadata_location = check_metadata_location(metadata_location)
        self._require(f"POST {_NS}/register")
        ident, _ = self._table_path(identifier)
        path = self._path("namespaces", self._ns(ident[:-1]), "register")
        payload = {"name": ident[-1], "metadata-location": metadata_location}
        obj = self._json(  # a lost answer: the table may be registered (commit_metadata keeps the file)
            "POST", path, payload=payload, not_found=NoSuchNamespace, conflict=TableAlreadyExists, commit=True
        )
        return self._table(ident, obj, self._client.where("POST", path))

    def rename_table(self, from_identifier: IdentifierLike, to_identifier: IdentifierLike) -> None:
        self._require("POST /v1/{prefix}/tables/rename")
        (src, _), (dst, _) = self._table_path(from_identifier), self._table_path(to_identifier)
        payload = {
            "source": {"namespace": list(src[:-1]), "name": src[-1]},
            "destination": {"namespace": list(dst[:-1]), "name": dst[-1]},
        }
        path = self._path("tables", "rename")
        self._client.request(
            "POST", path, payload=payload, not_found=NoSuchTable, conflict=TableAlreadyExists
        )

    def commit_table(
        self,
        identifier: IdentifierLike,
        *,
        requirements: Sequence[Mapping[str, Any]],
        updates: Sequence[Mapping[str, Any]],
    ) -> Table:
        """Apply ``updates`` if every requirement holds (CommitTableRequest); the table as committed.

        Raises:
            CommitConflict: a requirement failed (HTTP 409); nothing was applied; retry from fresh metadata.
            CommitStateUnknown: 5xx (not 501), or the connection failed after sending; never clean up.
            NoSuchTable: the table does not exist (HTTP 404).
        """
        ident, path = self._table_path(identifier)
        for kind, items, key in (("requirement", requirements, "type"), ("update", updates, "action")):
            for item in items:
                if not isinstance(item, Mapping) or not isinstance(item.get(key), str):
                    raise CatalogError(
                        f"{self._client.where('POST', path)}: each {kind} needs a {key!r}: {item!r}"
                    )
        payload = {
            "identifier": {"namespace": list(ident[:-1]), "name": ident[-1]},
            "requirements": [dict(r) for r in requirements],
            "updates": [dict(u) for u in updates],
        }
        response = self._client.request(
            "POST", path, payload=payload, not_found=NoSuchTable, conflict=CommitConflict, commit=True,
            **self._token_of(ident),
        )  # fmt: skip
        where = self._client.where("POST", path)
        try:
            return self._table(ident, json_object(response, where), where)
        except GpuEngineError as e:
            raise CommitStateUnknown(
                f"{where}: the server accepted the commit but its response is unusable: {e}"
            ) from e

    def commit_metadata(
        self, identifier: IdentifierLike, expected_metadata_location: str | None, new_metadata_location: str
    ) -> str:
        """Create a table at ``new_metadata_location`` (``expected=None``: the register endpoint).

        A REST catalog has no compare-and-swap of the metadata pointer: the server writes the metadata
        itself from ``updates`` checked against ``requirements``; use :meth:`commit_table`.
        """
        if expected_metadata_location is not None:
            raise UnsupportedFeature(
                f"REST catalog {self.name!r} cannot swap a table's metadata pointer (the REST protocol has "
                "no such operation): commit with commit_table(identifier, requirements=[...], updates=[...])"
            )
        try:
            return self.register_table(identifier, new_metadata_location).metadata_location
        except TableAlreadyExists as e:
            raise CommitConflict(f"cannot create {'.'.join(to_identifier(identifier))}: {e}") from e

    # -- namespaces ------------------------------------------------------------------------------------

    def create_namespace(
        self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None
    ) -> None:
        self._ns(namespace)  # validates
        payload = {
            "namespace": list(to_identifier(namespace)),
            "properties": namespace_properties(namespace, properties),
        }
        self._client.request(
            "POST", self._path("namespaces"), payload=payload, conflict=NamespaceAlreadyExists
        )

    def list_namespaces(self, namespace: IdentifierLike = ()) -> list[Identifier]:
        parent = to_identifier(namespace)
        query = {"parent": unquote(self._sep).join(parent)} if parent else {}
        if parent:
            self._ns(parent)  # validates
        path = self._path("namespaces")
        found = self._get_pages(path, "namespaces", query, not_found=NoSuchNamespace)
        if not all(isinstance(ns, list) for ns in found):
            raise CatalogError(f"{self._client.where('GET', path)}: malformed namespace list")
        return [tuple(str(p) for p in ns) for ns in found]

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """``HEAD`` on the namespace when the server lists that endpoint, else ``GET``."""
        path = self._path("namespaces", self._ns(namespace))
        method = "HEAD" if f"HEAD {_NS}" in self.endpoints else "GET"
        try:
            self._client.request(method, path, not_found=NoSuchNamespace)
        except NoSuchNamespace:
            return False
        return True

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        path = self._path("namespaces", self._ns(namespace))
        obj = self._json("GET", path, not_found=NoSuchNamespace)
        return str_map(obj.get("properties"), f"{self._client.where('GET', path)}: properties")

    def update_namespace_properties(
        self,
        namespace: IdentifierLike,
        *,
        removals: Sequence[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> PropertiesUpdate:
        path = self._path("namespaces", self._ns(namespace), "properties")
        payload = {"removals": list(removals), "updates": dict(updates or {})}
        obj = self._json("POST", path, payload=payload, not_found=NoSuchNamespace)
        return PropertiesUpdate(
            updated=tuple(obj.get("updated") or ()),
            removed=tuple(obj.get("removed") or ()),
            missing=tuple(obj.get("missing") or ()),
        )

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        path = self._path("namespaces", self._ns(namespace))
        self._client.request("DELETE", path, not_found=NoSuchNamespace, conflict=NamespaceNotEmpty)

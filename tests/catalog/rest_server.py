"""A minimal in-memory Iceberg REST catalog on 127.0.0.1 for the client tests (stdlib ``http.server``).

Routes (``/v1/config``, ``/v1/oauth/tokens``, namespaces, tables, create, register, rename, commit) follow the
REST OpenAPI; every route but the token endpoint needs a valid bearer token. Tables hold real metadata
JSON; a commit checks ``assert-create``, ``assert-table-uuid``, ``assert-ref-snapshot-id`` and
``assert-current-schema-id`` (409 naming the failed requirement), applies ``set-properties`` /
``remove-properties`` (400 for anything else) and writes the new metadata file under ``root``, so the
``metadata-location`` it answers is a real file.

Failure injection: ``server.faults`` is a queue of one-shot faults. ``"unauthorized"`` answers the next
authenticated request 401 whatever its token; ``"plain-500"`` answers it 500 with a text body;
``"commit-503"``, ``"commit-drop"`` (close the connection without an answer) and ``"commit-slow"``
(answer after ``slow_s``) act after the next commit was applied, ``"create-504"`` after the next table
was created or registered.
"""

from __future__ import annotations

import copy
import json
import re
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

Key = tuple[tuple[str, ...], str]
NS = "/v1/{prefix}/namespaces/{namespace}"
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces", f"GET {NS}", f"HEAD {NS}", f"DELETE {NS}",
    f"POST {NS}/properties", f"GET {NS}/tables", f"POST {NS}/tables", f"POST {NS}/register",
    f"GET {NS}/tables/{{table}}",
    f"HEAD {NS}/tables/{{table}}", f"POST {NS}/tables/{{table}}", f"DELETE {NS}/tables/{{table}}",
    "POST /v1/{prefix}/tables/rename",
]  # fmt: skip


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any = None
    text: str | None = None  # a non-JSON body
    drop: bool = False  # close the connection without answering
    delay_s: float = 0.0


@dataclass(frozen=True)
class Seen:
    method: str
    path: str  # raw (still percent-encoded)
    query: dict[str, list[str]]
    headers: dict[str, str] = field(default_factory=dict)


def error(code: int, kind: str, message: str) -> Reply:
    return Reply(code, {"error": {"message": message, "type": kind, "code": code}})


class RestCatalogServer:
    """The catalog state and its HTTP server; ``start()`` serves on a free port, ``stop()`` ends it."""

    def __init__(
        self,
        root: Path,
        *,
        static_tokens: tuple[str, ...] = (),
        token_ttl_s: int | None = 3600,
        endpoints: list[str] | None = ENDPOINTS,
        defaults: dict[str, str] | None = None,
        overrides: dict[str, str] | None = None,
        slow_s: float = 2.0,
        prefix: str = "ws1",
    ) -> None:
        self.root = root
        self.prefix = prefix  # one path segment, matched once unquoted
        self.clients = {"client": "secret"}
        self.token_ttl_s = token_ttl_s
        self.endpoints = endpoints
        self.defaults = dict(defaults or {})
        self.overrides = {"prefix": self.prefix, **(overrides or {})}
        self.separator = unquote(self.overrides.get("namespace-separator", "%1F"))
        self.slow_s = slow_s
        self.tokens: dict[str, float | None] = dict.fromkeys(static_tokens)
        self.token_forms: list[dict[str, str]] = []
        self.namespaces: dict[tuple[str, ...], dict[str, str]] = {}
        self.tables: dict[Key, dict[str, Any]] = {}
        self.table_config: dict[str, str] = {}
        self.read_restrictions: dict[str, Any] | None = None
        self.faults: list[str] = []
        self.seen: list[Seen] = []
        self.errors: list[BaseException] = []
        self.release = threading.Event()
        self.lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._httpd is not None
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> RestCatalogServer:
        app = self

        class Handler(_Handler):
            server_app = app

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                app.errors.append(sys.exc_info()[1] or RuntimeError("unknown server error"))

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._httpd = self._thread = None

    # -- requests --------------------------------------------------------------------------------------

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Reply:
        parts = urlsplit(target)
        query = parse_qs(parts.query, keep_blank_values=True)
        with self.lock:
            self.seen.append(Seen(method, parts.path, query, headers))
            if parts.path == "/v1/oauth/tokens" and method == "POST":
                return self._token(body)
            token = headers.get("authorization", "").removeprefix("Bearer ")
            expiry = self.tokens.get(token, -1.0)
            if expiry is not None and expiry < time.monotonic():
                return error(
                    401, "NotAuthorizedException", "Not authorized: missing, invalid or expired token"
                )
            if self.faults and self.faults[0] in ("unauthorized", "plain-500"):
                if self.faults.pop(0) == "unauthorized":
                    return error(401, "NotAuthorizedException", "Not authorized: token revoked")
                return Reply(500, text="upstream proxy exploded")
            if parts.path == "/v1/config" and method == "GET":
                config = {"defaults": self.defaults, "overrides": self.overrides}
                return Reply(
                    200, config if self.endpoints is None else {**config, "endpoints": self.endpoints}
                )
            return self._route(method, parts.path, query, json.loads(body) if body else None)

    def _token(self, body: bytes) -> Reply:
        form = {k: v[0] for k, v in parse_qs(body.decode(), keep_blank_values=True).items()}
        self.token_forms.append(form)
        if form.get("grant_type") != "client_credentials":
            return Reply(
                400, {"error": "unsupported_grant_type", "error_description": "only client_credentials"}
            )
        if self.clients.get(form.get("client_id", "")) != form.get("client_secret"):
            return Reply(
                401, {"error": "invalid_client", "error_description": "unknown client or bad secret"}
            )
        token, ttl = uuid.uuid4().hex, self.token_ttl_s
        self.tokens[token] = None if ttl is None else time.monotonic() + ttl
        out = {"access_token": token, "token_type": "bearer", "scope": form.get("scope"), "expires_in": ttl}
        return Reply(200, {k: v for k, v in out.items() if v is not None})

    def _namespace(self, segment: str) -> tuple[str, ...]:
        seps = {re.escape("%1F"), re.escape(self.overrides.get("namespace-separator", "%1F"))}
        return tuple(unquote(p) for p in re.split("|".join(seps), segment, flags=re.IGNORECASE))

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> Reply:
        seg = path.split("/")[2:]  # after "/v1/"
        if not seg or unquote(seg[0]) != self.prefix:
            return error(404, "NotFoundException", f"no route {path} (prefix is {self.prefix!r})")
        seg = seg[1:]
        if seg == ["namespaces"]:
            return self._list_namespaces(query) if method == "GET" else self._create_namespace(body)
        if seg == ["tables", "rename"] and method == "POST":
            return self._rename(body)
        if len(seg) < 2 or seg[0] != "namespaces":
            return error(404, "NotFoundException", f"no route {path}")
        ns = self._namespace(seg[1])
        if ns not in self.namespaces:
            return error(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(ns)}")
        rest = seg[2:]
        if not rest:
            return self._namespace_op(method, ns)
        if rest == ["properties"] and method == "POST":
            return self._update_namespace(ns, body)
        if rest == ["tables"] and method == "GET":
            names = sorted(n for (tns, n) in self.tables if tns == ns)
            found, token = self._page([{"namespace": list(ns), "name": n} for n in names], query)
            return Reply(200, {"identifiers": found, **token})
        if rest == ["register"] and method == "POST":
            return self._register((ns, body["name"]), body["metadata-location"])
        if rest == ["tables"] and method == "POST":
            return self._create((ns, body["name"]), body)
        if len(rest) == 2 and rest[0] == "tables":
            return self._table_op(method, (ns, unquote(rest[1])), body)
        return error(406, "UnsupportedOperationException", f"{method} {path} is not supported here")

    def _page(self, items: list[Any], query: dict[str, list[str]]) -> tuple[list[Any], dict[str, Any]]:
        if "pageToken" not in query:
            return items, {}
        start = int(query["pageToken"][0] or 0)
        size = int(query.get("pageSize", ["100"])[0])
        more = start + size < len(items)
        return items[start : start + size], {"next-page-token": str(start + size) if more else None}

    # -- namespaces ------------------------------------------------------------------------------------

    def _list_namespaces(self, query: dict[str, list[str]]) -> Reply:
        parent = tuple(query["parent"][0].split(self.separator)) if query.get("parent", [""])[0] else ()
        if parent and parent not in self.namespaces:
            return error(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(parent)}")
        level = len(parent) + 1
        found = sorted(
            {ns[:level] for ns in self.namespaces if len(ns) >= level and ns[: level - 1] == parent}
        )
        page, token = self._page([list(ns) for ns in found], query)
        return Reply(200, {"namespaces": page, **token})

    def _create_namespace(self, body: dict[str, Any]) -> Reply:
        ns = tuple(body["namespace"])
        if ns in self.namespaces:
            return error(409, "AlreadyExistsException", f"Namespace already exists: {'.'.join(ns)}")
        self.namespaces[ns] = dict(body.get("properties") or {})
        return Reply(200, {"namespace": list(ns), "properties": self.namespaces[ns]})

    def _namespace_op(self, method: str, ns: tuple[str, ...]) -> Reply:
        if method == "HEAD":
            return Reply(204)
        if method == "GET":
            return Reply(200, {"namespace": list(ns), "properties": self.namespaces[ns]})
        if method == "DELETE":
            if any(tns == ns for tns, _ in self.tables) or any(
                o[: len(ns)] == ns != o for o in self.namespaces
            ):
                return error(409, "NamespaceNotEmptyException", f"Namespace {'.'.join(ns)} is not empty")
            del self.namespaces[ns]
            return Reply(204)
        return error(406, "UnsupportedOperationException", f"{method} on a namespace")

    def _update_namespace(self, ns: tuple[str, ...], body: dict[str, Any]) -> Reply:
        props = self.namespaces[ns]
        removals, updates = body.get("removals") or [], body.get("updates") or {}
        missing = [k for k in removals if k not in props]
        removed = [k for k in removals if props.pop(k, None) is not None]
        props.update(updates)
        return Reply(200, {"updated": sorted(updates), "removed": removed, "missing": missing})

    # -- tables ----------------------------------------------------------------------------------------

    def _load_result(self, entry: dict[str, Any]) -> dict[str, Any]:
        out = {"metadata-location": entry["metadata-location"], "metadata": entry["metadata"]}
        out["config"] = self.table_config
        if self.read_restrictions is not None:
            out["read-restrictions"] = self.read_restrictions
        return out

    def _register(self, key: Key, location: str) -> Reply:
        if key in self.tables:
            return error(
                409, "AlreadyExistsException", f"Table already exists: {'.'.join((*key[0], key[1]))}"
            )
        metadata = json.loads(Path(location).read_text())
        self.tables[key] = {"metadata-location": location, "metadata": metadata}
        if self.faults and self.faults[0] == "create-504":
            self.faults.pop(0)
            return error(504, "GatewayTimeoutException", "Gateway timeout")
        return Reply(200, self._load_result(self.tables[key]))

    def _create(self, key: Key, body: dict[str, Any]) -> Reply:
        """CreateTableRequest, as Iceberg Java's CatalogHandlers create: the location defaults to the
        server's warehouse; the first metadata file is written under ``root``."""
        if key in self.tables:
            return error(
                409, "AlreadyExistsException", f"Table already exists: {'.'.join((*key[0], key[1]))}"
            )
        if body.get("stage-create"):
            return error(406, "UnsupportedOperationException", "staged creation is not supported here")
        props = dict(body.get("properties") or {})
        version = int(props.pop("format-version", "2"))
        name = ".".join((*key[0], key[1]))
        location = body.get("location") or str(self.root / "warehouse" / name)
        schema = {**body["schema"], "schema-id": 0}
        spec = {"fields": [], **(body.get("partition-spec") or {}), "spec-id": 0}
        order = body.get("write-order") or {"order-id": 0, "fields": []}
        order = {**order, "order-id": 1 if order["fields"] else 0}
        md: dict[str, Any] = {
            "format-version": version, "table-uuid": str(uuid.uuid4()), "location": location,
            "last-sequence-number": 0, "last-updated-ms": int(time.time() * 1000),
            "last-column-id": _highest_id(schema["fields"]), "schemas": [schema], "current-schema-id": 0,
            "partition-specs": [spec], "default-spec-id": 0,
            "last-partition-id": max((f["field-id"] for f in spec["fields"]), default=999),
            "properties": props, "current-snapshot-id": -1, "snapshots": [], "snapshot-log": [],
            "metadata-log": [], "sort-orders": [order], "default-sort-order-id": order["order-id"],
            "refs": {},
        }  # fmt: skip
        if version == 1:
            md["schema"], md["partition-spec"] = schema, spec["fields"]
        if version >= 3:
            md["next-row-id"] = 0
        directory = self.root / name / "metadata"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"00000-{uuid.uuid4()}.metadata.json"
        path.write_text(json.dumps(md))
        self.tables[key] = {"metadata-location": str(path), "metadata": md}
        if self.faults and self.faults[0] == "create-504":
            self.faults.pop(0)
            return error(504, "GatewayTimeoutException", "Gateway timeout")
        return Reply(200, self._load_result(self.tables[key]))

    def _rename(self, body: dict[str, Any]) -> Reply:
        src = (tuple(body["source"]["namespace"]), body["source"]["name"])
        dst = (tuple(body["destination"]["namespace"]), body["destination"]["name"])
        if src not in self.tables:
            return error(404, "NoSuchTableException", f"Table does not exist: {src}")
        if dst[0] not in self.namespaces:
            return error(404, "NoSuchNamespaceException", f"Namespace does not exist: {'.'.join(dst[0])}")
        if dst in self.tables:
            return error(409, "AlreadyExistsException", f"Table already exists: {dst}")
        self.tables[dst] = self.tables.pop(src)
        return Reply(204)

    def _table_op(self, method: str, key: Key, body: Any) -> Reply:
        entry = self.tables.get(key)
        if entry is None:
            return error(404, "NoSuchTableException", f"Table does not exist: {'.'.join((*key[0], key[1]))}")
        if method == "HEAD":
            return Reply(204)
        if method == "GET":
            return Reply(200, self._load_result(entry))
        if method == "DELETE":
            del self.tables[key]
            return Reply(204)
        return self._commit(key, entry, body)

    def _commit(self, key: Key, entry: dict[str, Any], body: dict[str, Any]) -> Reply:
        md = entry["metadata"]
        for req in body["requirements"]:
            kind = req.get("type")
            if kind not in CHECKED:
                return error(400, "BadRequestException", f"unknown requirement type {kind!r}")
            if failure := _check(req, md):
                if failure.startswith("bad request: "):
                    return error(400, "BadRequestException", failure)
                return error(409, "CommitFailedException", f"Requirement failed: {kind}: {failure}")
        new = copy.deepcopy(md)
        for upd in body["updates"]:
            action = upd.get("action")
            if action == "set-properties":
                new.setdefault("properties", {}).update(upd["updates"])
            elif action == "remove-properties":
                for k in upd["removals"]:
                    new.get("properties", {}).pop(k, None)
            elif action == "add-snapshot":
                if failure := _add_snapshot(new, upd["snapshot"]):
                    return error(400, "BadRequestException", failure)
            elif action == "set-snapshot-ref":
                if failure := _set_ref(new, upd):
                    return error(400, "BadRequestException", failure)
            elif action in _EVOLUTION:
                if failure := _EVOLUTION[action](new, upd):
                    return error(400, "BadRequestException", failure)
            else:
                return error(400, "BadRequestException", f"unsupported update action {action!r}")
        new.pop("_last_added_schema", None)
        new.pop("_last_added_spec", None)
        new.pop("_last_added_order", None)
        new["metadata-log"] = [
            *md.get("metadata-log", []),
            {"metadata-file": entry["metadata-location"], "timestamp-ms": md["last-updated-ms"]},
        ]
        new["last-updated-ms"] = max(int(time.time() * 1000), md["last-updated-ms"] + 1)
        directory = self.root / ".".join((*key[0], key[1])) / "metadata"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{len(new['metadata-log']):05d}-{uuid.uuid4()}.metadata.json"
        path.write_text(json.dumps(new))
        self.tables[key] = {"metadata-location": str(path), "metadata": new}
        result = {"metadata-location": str(path), "metadata": new}
        fault = self.faults.pop(0) if self.faults and self.faults[0].startswith("commit-") else None
        if fault == "commit-503":
            return error(503, "SlowDownException", "Slow down")
        if fault == "commit-drop":
            return Reply(0, drop=True)
        return Reply(200, result, delay_s=self.slow_s if fault == "commit-slow" else 0.0)


def _add_snapshot(md: dict[str, Any], snap: dict[str, Any]) -> str | None:
    """Add ``snap`` as Iceberg Java's TableMetadata.Builder does: a new id, a sequence number past the
    table's (v2+), and on v3 a first-row-id equal to the table's next-row-id, which then moves past it."""
    if any(s["snapshot-id"] == snap["snapshot-id"] for s in md.get("snapshots", [])):
        return f"snapshot {snap['snapshot-id']} already exists"
    version = md["format-version"]
    if version >= 2:
        if snap["sequence-number"] <= md.get("last-sequence-number", 0):
            return (
                f"sequence number {snap['sequence-number']} is not past {md.get('last-sequence-number', 0)}"
            )
        md["last-sequence-number"] = snap["sequence-number"]
    if version >= 3:
        if snap.get("first-row-id") != md.get("next-row-id", 0):
            return f"first-row-id {snap.get('first-row-id')} is not next-row-id {md.get('next-row-id', 0)}"
        md["next-row-id"] = snap["first-row-id"] + snap["added-rows"]
    md["snapshots"] = [*md.get("snapshots", []), snap]
    return None


def _set_ref(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    snap_id, name = upd["snapshot-id"], upd["ref-name"]
    snap = next((s for s in md.get("snapshots", []) if s["snapshot-id"] == snap_id), None)
    if snap is None:
        return f"no snapshot {snap_id} for ref {name}"
    refs = md.setdefault("refs", {})
    retention = ("min-snapshots-to-keep", "max-snapshot-age-ms", "max-ref-age-ms")
    refs[name] = {"snapshot-id": snap_id, "type": upd["type"], **{k: upd[k] for k in retention if k in upd}}
    if name == "main" and md.get("current-snapshot-id") != snap_id:
        md["current-snapshot-id"] = snap_id
        md["snapshot-log"] = [
            *md.get("snapshot-log", []),
            {"snapshot-id": snap_id, "timestamp-ms": snap["timestamp-ms"]},
        ]
    return None


def _ref_snapshot(md: dict[str, Any], ref: str) -> int | None:
    if md.get("refs") is None and ref == "main":  # no refs: main is the current snapshot
        current = md.get("current-snapshot-id")
        return None if current in (None, -1) else int(current)
    entry = (md.get("refs") or {}).get(ref)
    return None if entry is None else int(entry["snapshot-id"])


def _check(req: dict[str, Any], md: dict[str, Any]) -> str | None:
    """Why requirement ``req`` fails on metadata ``md`` (None: it holds)."""
    kind = req["type"]
    if kind == "assert-create":
        return "table already exists"
    if kind == "assert-table-uuid" and not isinstance(req.get("uuid"), str):
        return "bad request: assert-table-uuid needs a uuid string"  # Java's parser refuses a null
    if kind == "assert-table-uuid" and req["uuid"] != md.get("table-uuid"):
        return f"table UUID does not match: expected {req['uuid']} != {md.get('table-uuid')}"
    if kind == "assert-current-schema-id" and req["current-schema-id"] != md.get("current-schema-id"):
        return f"current schema changed: expected id {req['current-schema-id']} != {md['current-schema-id']}"
    for key, prop in (
        ("last-assigned-field-id", "last-column-id"),
        ("default-spec-id", "default-spec-id"),
        ("last-assigned-partition-id", "last-partition-id"),
        ("default-sort-order-id", "default-sort-order-id"),
    ):
        if kind == f"assert-{key}" and req[key] != md.get(prop):
            return f"{key} changed: expected {req[key]} != {md.get(prop)}"
    if kind == "assert-ref-snapshot-id":
        current, expected = _ref_snapshot(md, req["ref"]), req.get("snapshot-id")
        if current != expected and expected is None:
            return f"branch or tag {req['ref']} was created concurrently"
        if current != expected:
            return f"branch {req['ref']} has changed: expected id {expected} != {current}"
    return None


CHECKED = (
    "assert-create", "assert-table-uuid", "assert-ref-snapshot-id", "assert-current-schema-id",
    "assert-last-assigned-field-id", "assert-default-spec-id", "assert-last-assigned-partition-id",
    "assert-default-sort-order-id",
)  # fmt: skip


# -- schema and partition evolution, as Iceberg Java's TableMetadata.Builder applies them -------------------


def _highest_id(t: Any) -> int:
    """The highest field id inside a schema/type JSON value."""
    if isinstance(t, dict):
        ids = [v for k, v in t.items() if k in ("id", "element-id", "key-id", "value-id")]
        return max([*ids, *(_highest_id(v) for v in t.values())], default=0)
    if isinstance(t, list):
        return max((_highest_id(v) for v in t), default=0)
    return 0


def _add_schema(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    """A schema equal to a known one (fields and identifier fields) reuses its id, else takes the next.
    As AWS S3 Tables and older Nessie and Java servers: ``last-column-id`` is required and never lower
    than the table's."""
    last = upd.get("last-column-id")
    if not isinstance(last, int):
        return "add-schema needs last-column-id"
    if last < md["last-column-id"]:
        return f"Invalid last column ID: {last} < {md['last-column-id']} (previous last column ID)"
    schema = dict(upd["schema"])
    same = [s for s in md["schemas"] if _without_id(s) == _without_id(schema)]
    if same:
        md["_last_added_schema"] = same[0]["schema-id"]
        return None
    schema["schema-id"] = max(s["schema-id"] for s in md["schemas"]) + 1
    md["schemas"] = [*md["schemas"], schema]
    md["last-column-id"] = max(last, _highest_id(schema["fields"]))
    md["_last_added_schema"] = schema["schema-id"]
    return None


def _without_id(schema: dict[str, Any]) -> Any:
    return {k: v for k, v in schema.items() if k != "schema-id"}


def _set_current_schema(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    sid = md.get("_last_added_schema") if upd["schema-id"] == -1 else upd["schema-id"]
    found = [s for s in md["schemas"] if s["schema-id"] == sid]
    if not found:
        return f"no schema {upd['schema-id']} to make current"
    md["current-schema-id"] = sid
    if "schema" in md:  # v1 metadata also carries the current schema itself
        md["schema"] = found[0]
    return None


def _add_spec(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    spec = dict(upd["spec"])
    same = [s for s in md["partition-specs"] if s["fields"] == spec["fields"]]
    if same:
        md["_last_added_spec"] = same[0]["spec-id"]
        return None
    spec["spec-id"] = max(s["spec-id"] for s in md["partition-specs"]) + 1
    md["partition-specs"] = [*md["partition-specs"], spec]
    ids = [f["field-id"] for f in spec["fields"]]
    md["last-partition-id"] = max([md.get("last-partition-id", 999), *ids])
    md["_last_added_spec"] = spec["spec-id"]
    return None


def _set_default_spec(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    sid = md.get("_last_added_spec") if upd["spec-id"] == -1 else upd["spec-id"]
    found = [s for s in md["partition-specs"] if s["spec-id"] == sid]
    if not found:
        return f"no partition spec {upd['spec-id']} to make the default"
    md["default-spec-id"] = sid
    if "partition-spec" in md:  # v1 metadata also carries the default spec's fields
        md["partition-spec"] = found[0]["fields"]
    return None


def _add_sort_order(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    order = dict(upd["sort-order"])
    same = [o for o in md["sort-orders"] if o["fields"] == order["fields"]]
    if same:
        md["_last_added_order"] = same[0]["order-id"]
        return None
    order["order-id"] = max(o["order-id"] for o in md["sort-orders"]) + 1
    md["sort-orders"] = [*md["sort-orders"], order]
    md["_last_added_order"] = order["order-id"]
    return None


def _set_default_sort_order(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    oid = md.get("_last_added_order") if upd["sort-order-id"] == -1 else upd["sort-order-id"]
    if not any(o["order-id"] == oid for o in md["sort-orders"]):
        return f"no sort order {upd['sort-order-id']} to make the default"
    md["default-sort-order-id"] = oid
    return None


def _upgrade_format_version(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    """Java's upgradeFormatVersion: never down; v2 fields defaulted, v3 starts next-row-id at 0."""
    version = upd["format-version"]
    if version < md["format-version"]:
        return f"cannot downgrade v{md['format-version']} table to v{version}"
    if version > md["format-version"]:
        md["format-version"] = version
        md.setdefault("last-sequence-number", 0)
        if version >= 3:
            md.setdefault("next-row-id", 0)
    return None


def _remove_snapshots(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    """Drop the snapshots, their snapshot-log entries and statistics, and the refs pointing at one of them,
    as Java's TableMetadata.Builder does (removeSnapshots, then the dangling refs); the current snapshot is
    refused."""
    gone = set(upd["snapshot-ids"])
    if md.get("current-snapshot-id") in gone:
        return "cannot remove the current snapshot"
    refs = md.get("refs") or {}
    for name in [name for name, ref in refs.items() if ref["snapshot-id"] in gone]:
        del refs[name]
    md["snapshots"] = [s for s in md.get("snapshots", []) if s["snapshot-id"] not in gone]
    md["snapshot-log"] = [e for e in md.get("snapshot-log", []) if e["snapshot-id"] not in gone]
    for key in ("statistics", "partition-statistics"):
        if key in md:
            md[key] = [f for f in md[key] if f["snapshot-id"] not in gone]
    return None


def _remove_snapshot_ref(md: dict[str, Any], upd: dict[str, Any]) -> str | None:
    refs = md.get("refs") or {}
    if upd["ref-name"] not in refs:
        return f"no ref {upd['ref-name']}"
    del refs[upd["ref-name"]]
    return None


_EVOLUTION = {
    "add-schema": _add_schema, "set-current-schema": _set_current_schema,
    "add-spec": _add_spec, "set-default-spec": _set_default_spec,
    "remove-snapshots": _remove_snapshots, "remove-snapshot-ref": _remove_snapshot_ref,
    "add-sort-order": _add_sort_order, "set-default-sort-order": _set_default_sort_order,
    "upgrade-format-version": _upgrade_format_version,
}  # fmt: skip


class _Handler(BaseHTTPRequestHandler):
    server_app: RestCatalogServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            reply = self.server_app.handle(self.command, self.path, headers, body)
        except Exception as e:  # a server bug: recorded, the test fails at teardown
            self.server_app.errors.append(e)
            reply = error(500, "InternalServerError", f"test server bug: {e!r}")
        if reply.drop:
            self.close_connection = True
            return
        if reply.delay_s:
            self.server_app.release.wait(reply.delay_s)
        if reply.text is not None:
            data, ctype = reply.text.encode(), "text/plain"
        else:
            data, ctype = (b"" if reply.body is None else json.dumps(reply.body).encode()), "application/json"
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
        except OSError:  # the client gave up (timeout test)
            self.close_connection = True

    do_GET = do_POST = do_DELETE = do_HEAD = _serve  # noqa: N815

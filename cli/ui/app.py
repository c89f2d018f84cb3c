"""The web view's HTTP layer: a Starlette app over `MemoryService`, nothing more.

Every route reads its parameters, calls the service method the CLI command of the same purpose
calls, and returns its result as JSON; the page (`static/`) renders it. Reads go to the store on
every request, so what another process wrote shows on the next refresh.

Security: the server listens on 127.0.0.1 only (`server.py`) and every request, the page and its
assets included, must carry the token printed with the URL (`?token=` or an `X-Mem-Token`
header), compared in constant time; anything else gets 403. Two more walls stand behind the
token, should it ever leak: a request must name this machine as its `Host` (127.0.0.1, localhost
or [::1]: a foreign name is a DNS-rebinding page), and a write must send its body as
`application/json` (a type no other site's page can send without asking first: the browser's
CORS preflight, which this server never grants). Errors are JSON `{"error": ...}` with a 4xx
status (5xx only for a store failure), never a traceback.
"""

from __future__ import annotations

import re
import secrets
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from a2e_mem import jsontext
from a2e_mem.errors import InvalidInput, MemError, NotFound, os_failure
from a2e_mem.models import MAX_TTL

STATIC = Path(__file__).parent / "static"
NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")  # as JSON writes them, in ASCII
TOKEN_HEADER = "x-mem-token"
TIERS = ("episodic", "semantic")  # a page has no session, so no working tier
DOCUMENT_KINDS = ("json", "todo", "markdown")
MAX_LIMIT = 1000
MAX_BODY = 1 << 20  # a JSON body over 1 MiB is refused before it is parsed
# HTTP status of each exit code a store or CLI error carries (see cli/errors.py)
STATUS = {2: 400, 3: 404, 4: 400, 5: 507, 6: 403, 7: 503}
HEADERS = {
    # no inline script or style, nothing from another origin: the page works offline, and an
    # entry's content can never run as script
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",  # the token is in the URL: never send it on
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",  # every view is read anew from the store
}

# A MemoryService is not thread-safe (see cli/mcp_server.py); Starlette runs sync work on a
# thread pool, so calls into the service are made one at a time.
SERVICE_LOCK = threading.Lock()


def make_app(service: Any, token: str) -> Starlette:
    """The web view of `service`, answering only requests that carry `token`."""
    api = Api(service)
    routes = [
        Route("/", lambda request: page(token)),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        *[Route(f"/api/{path}", endpoint(fn), methods=[method]) for path, method, fn in api.routes()],
    ]
    handlers = {HTTPException: http_error}
    app = Starlette(routes=routes, exception_handlers=handlers)  # type: ignore[arg-type]
    app.add_middleware(TokenGuard, token=token)
    return app


def page(token: str) -> HTMLResponse:
    """The single page, with the token in its asset URLs (the script reads it from the URL)."""
    html = (STATIC / "index.html").read_text(encoding="utf-8")
    return HTMLResponse(html.replace("__TOKEN__", token))


class TokenGuard(BaseHTTPMiddleware):
    """403 for a request without the right token; the security headers on every response."""

    def __init__(self, app: Any, token: str) -> None:
        super().__init__(app)
        self.token = token.encode()

    async def dispatch(self, request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = request.headers.get(TOKEN_HEADER) or request.query_params.get("token") or ""
        if not secrets.compare_digest(given.encode(), self.token):
            response: Response = error(403, "forbidden: open the URL that `mem ui` printed (it carries the token)")
        elif not local_host(request.headers.get("host", "")):
            response = error(403, "forbidden: this server answers only requests to 127.0.0.1 or localhost")
        elif request.method == "POST" and not json_body(request.headers.get("content-type", "")):
            response = error(415, "a write sends its body as application/json")
        else:
            response = await call_next(request)
        response.headers.update(HEADERS)
        return response


# this machine's names, then a port if any (an SSH tunnel may move it): nothing else, so that
# "127.0.0.1:80@evil.example" or "127.0.0.1:x" is not read as this machine
LOCAL_HOST = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\])(?::[0-9]{1,5})?", re.IGNORECASE)


def local_host(host: str) -> bool:
    """Whether a Host header names this machine, with any port."""
    return LOCAL_HOST.fullmatch(host) is not None


def json_body(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (unknown path, wrong method) as JSON too."""
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, exc.detail)


def endpoint(fn: Callable[[Args], Any]) -> Callable[[Request], Awaitable[Response]]:
    """A route calling `fn(args)` on a worker thread, under the service lock; its result as
    JSON, a store or input error as a 4xx with its message, a storage failure as a 5xx with
    one line, anything else as a 500 naming only the exception's type (its message goes to
    the terminal running `mem ui`, with the traceback when MEM_DEBUG=1)."""
    from ..errors import CliError

    async def handle(request: Request) -> Response:
        try:
            args = Args(await values(request))
            return JSONResponse(await run_in_threadpool(locked, fn, args))
        except (MemError, CliError) as exc:
            return failed(STATUS.get(exc.exit_code, 500), exc.message)
        except OSError as exc:  # a full disk, a lost file: the message says whether to retry
            failure = os_failure(exc)
            return failed(503 if failure.retryable else 500, failure.message)
        except Exception as exc:  # noqa: BLE001 - one line for the page, the details for the log
            from ..errors import report

            report(exc)
            return error(500, f"internal error: {type(exc).__name__} (see the terminal running `mem ui`)")

    return handle


def failed(status: int, message: str) -> JSONResponse:
    """The refusal of a request; a failure of the store (5xx) is also told to the terminal
    running `mem ui`, whose user may never see the page's line."""
    if status >= 500:
        sys.stderr.write(f"mem ui: error: {message}\n")
    return error(status, message)


def locked(fn: Callable[[Args], Any], args: Args) -> Any:
    with SERVICE_LOCK:
        return fn(args)


async def values(request: Request) -> dict[str, Any]:
    """A GET's query parameters (each a list: they may repeat), or a POST's JSON object."""
    if request.method == "GET":
        params = request.query_params
        return {name: params.getlist(name) for name in params if name != "token"}
    body = b""
    async for chunk in request.stream():  # stop reading past the limit, whatever Content-Length says
        body += chunk
        if len(body) > MAX_BODY:
            raise InvalidInput(f"the request body is over {MAX_BODY} bytes")
    import orjson

    try:
        data = jsontext.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInput("the request body must be a JSON object")
    return data


class Args:
    """A request's parameters, read with their types checked: a wrong one is a 400 naming it."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def text(self, name: str, default: str = "") -> str:
        value = self.data.get(name, default)
        if isinstance(value, list):  # a query parameter: its last value counts
            value = value[-1] if value else default
        if not isinstance(value, str):
            raise InvalidInput(f"{name} must be a string")
        return value

    def required(self, name: str) -> str:
        value = self.text(name)
        if not value:
            raise InvalidInput(f"{name} is required")
        return value

    def strings(self, name: str) -> list[str]:
        """A list of non-empty strings: a repeated query parameter, or a JSON list."""
        value = self.data.get(name, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InvalidInput(f"{name} must be a list of strings")
        return [v.strip() for v in value if v.strip()]

    def number(self, name: str, default: float, low: float, high: float) -> float:
        raw = self.data.get(name, default)
        raw = (raw[-1] if raw else default) if isinstance(raw, list) else raw
        if raw == "":
            return default
        if isinstance(raw, bool):  # JSON true is not the number 1
            raise InvalidInput(f"{name} must be a number")
        if isinstance(raw, str) and not NUMBER.fullmatch(raw.strip()):  # float() takes "1_0", "２", "nan"
            raise InvalidInput(f"{name} must be a number")
        try:
            number = float(raw)
        except (TypeError, ValueError):
            raise InvalidInput(f"{name} must be a number") from None
        if not low <= number <= high:  # also refuses nan
            raise InvalidInput(f"{name} must be between {low:g} and {high:g}")
        return number

    def given(self, name: str) -> bool:
        """Whether the request gives `name` a value (an empty form field gives none)."""
        raw = self.data.get(name)
        raw = raw[-1] if isinstance(raw, list) and raw else raw
        return raw is not None and raw != [] and not (isinstance(raw, str) and not raw.strip())

    def integer(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.data.get(name, default)
        raw = (raw[-1] if raw else default) if isinstance(raw, list) else raw
        if isinstance(raw, str) and re.fullmatch(r"-?[0-9]+", raw.strip()):  # ASCII digits only
            raw = int(raw)
        if isinstance(raw, int) and not isinstance(raw, bool):  # exactly: a float loses digits past 2**53
            if not low <= raw <= high:
                raise InvalidInput(f"{name} must be between {low} and {high}")
            return raw
        number = self.number(name, default, low, high)
        if number != int(number):
            raise InvalidInput(f"{name} must be a whole number")
        return int(number)

    def flag(self, name: str) -> bool:
        value = self.data.get(name, False)
        return value if isinstance(value, bool) else self.text(name) in ("1", "true", "on")

    def json_object(self, name: str) -> dict[str, Any]:
        """A JSON object, given as one (POST) or as its text (GET)."""
        value = self.data.get(name)
        if isinstance(value, dict):
            return value
        texts = isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        if value is not None and not texts:  # (a list of texts: a query parameter's values)
            raise InvalidInput(f"{name} must be a JSON object, or its text")
        from ..options import parse_json_object

        return parse_json_object(self.required(name), name)

    def tier(self) -> str:
        tier = self.required("tier")
        if tier not in TIERS:
            raise InvalidInput(f"tier must be one of {', '.join(TIERS)} (the working tier belongs to a session)")
        return tier


class Api:
    """The routes, each one call (or two) into the service, as the matching CLI command makes."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def routes(self) -> list[tuple[str, str, Callable[[Args], Any]]]:
        return [
            ("overview", "GET", self.overview),
            ("search", "GET", self.search),
            ("entry", "GET", self.entry),
            ("entry/edit", "POST", self.edit),
            ("entry/delete", "POST", self.delete),
            ("episodic", "GET", self.episodic),
            ("episodic/events", "GET", self.events),
            ("graph", "GET", self.graph),
            ("documents", "GET", self.documents),
            ("persistent", "GET", self.persistent),
            ("persistent/retrieve", "POST", self.persistent_retrieve),
        ]

    def scope(self, args: Args) -> Any:
        return self.service.scope(args.text("namespace", "default"), args.text("agent", "default"))

    def overview(self, args: Args) -> dict[str, Any]:
        """`mem namespaces` and `mem stats`."""
        service = self.service
        where = {"home": str(service.home), "store": service.backend.url}  # a PostgreSQL store's URL is masked
        return where | {"namespaces": service.namespaces(), "stats": service.stats()}

    def search(self, args: Args) -> dict[str, Any]:
        """`mem retrieve --explain` with its filters."""
        from ..options import parse_key

        tier = args.text("tier")
        keys = args.strings("key")
        return self.service.retrieve(
            self.scope(args),
            query=args.text("query"),
            tier=args.tier() if tier else "",
            tags=args.strings("tag"),
            keys=[parse_key(keys)] if keys else [],
            min_score=args.number("min_score", 0.0, 0.0, 1.0),
            limit=args.integer("limit", 20, 0, MAX_LIMIT),
            explain=True,
        )

    def entry(self, args: Args) -> dict[str, Any]:
        """One entry, found by its exact key in its tier (a retrieve by key, as `mem retrieve -k`)."""
        found = self.service.retrieve(self.scope(args), keys=[args.json_object("key")], tier=args.tier(), limit=1)
        if not found["entries"]:
            raise NotFound("no such entry (deleted, expired, or in another namespace, agent or tier)")
        return found["entries"][0]

    def edit(self, args: Args) -> dict[str, Any]:
        """Store the entry again under its key with the new fields (a store is an upsert by key,
        as `mem store -k ...`); its source is kept."""
        from ..options import parse_value

        old = self.entry(args)
        content = args.data.get("content", old["content"])
        if "content" in args.data and isinstance(content, str):  # as `mem store`: JSON if it parses, else the text
            content = parse_value(content, "content")
        new = {
            "key": old["key"],
            "tier": old["tier"],
            "source": old.get("source", ""),
            "content": content,
            "tags": args.strings("tags") if "tags" in args.data else old["tags"],
            "score": args.number("score", old["score"], 0.0, 1.0),
            "ttl": args.integer("ttl", old["ttl"], 0, MAX_TTL),  # any ttl an entry may have
        }
        result = self.service.store(self.scope(args), [new])
        if result["errors"]:
            raise InvalidInput("; ".join(e.removeprefix("entries[0]: ") for e in result["errors"]))
        return self.entry(args)

    def delete(self, args: Args) -> dict[str, Any]:
        """`mem forget -k ... --tier ...`: the one entry with this key."""
        deleted = self.service.forget(self.scope(args), keys=[args.json_object("key")], tier=args.tier())
        if not deleted:
            raise NotFound("no such entry: nothing was deleted")
        return {"deleted": deleted}

    def episodic(self, args: Args) -> list[dict[str, Any]]:
        """`mem episodic list [--archived]`."""
        return self.service.episodic_memory_list(
            include_archived=args.flag("archived"), limit=MAX_LIMIT, namespace=args.text("namespace", "default")
        )

    def events(self, args: Args) -> dict[str, Any]:
        """`mem episodic get`, `event-types` and `query` with its filters: one timeline."""
        namespace, memory_id = args.text("namespace", "default"), args.required("memory_id")
        # not given (or left empty by the page's form): no such filter; given, at least 0, as the CLI takes them
        last_minutes = args.number("last_minutes", 0, 0, 10**9) if args.given("last_minutes") else None
        last_count = args.integer("last_count", 0, 0, 10**9) if args.given("last_count") else None
        return {
            "memory": self.service.episodic_memory_get(memory_id, namespace=namespace),
            "types": self.service.episodic_memory_get_event_types(memory_id=memory_id, namespace=namespace),
            "events": self.service.episodic_memory_query_events(
                memory_id=memory_id,
                event_type=args.text("event_type") or None,
                emitting_agent_id=args.text("agent") or None,
                tags=args.strings("tag") or None,
                since=args.text("since") or None,
                until=args.text("until") or None,
                last_minutes=last_minutes,
                last_count=last_count,
                namespace=namespace,
            ),
        }

    def graph(self, args: Args) -> dict[str, Any]:
        """`mem kg read`, or `mem kg search QUERY`: `limit` entities (the first by name, or the
        best found) and the relations among them, and `more`: whether the store holds more
        entities than shown (the page says so; it said nothing, outside audit 32b)."""
        namespace, query = args.text("namespace", "default"), args.text("query").strip()
        limit = args.integer("limit", 200, 0, MAX_LIMIT)
        if query:
            found = self.service.kg_search_nodes(query, limit=min(limit + 1, MAX_LIMIT), namespace=namespace)
        else:
            found = self.service.kg_read_graph(limit=limit + 1, namespace=namespace)
        if len(found["entities"]) <= limit:
            return {**found, "more": False}
        shown = found["entities"][:limit]
        names = {entity["name"] for entity in shown}
        relations = [r for r in found["relations"] if r["from"] in names and r["to"] in names]
        return {**found, "entities": shown, "relations": relations, "more": True}

    def documents(self, args: Args) -> list[dict[str, Any]]:
        """`mem json|todo|markdown list`."""
        kind = args.required("kind")
        if kind not in DOCUMENT_KINDS:
            raise InvalidInput(f"kind must be one of {', '.join(DOCUMENT_KINDS)}")
        method = getattr(self.service, f"memory_{kind}_list")
        return method(None, limit=MAX_LIMIT, namespace=args.text("namespace", "default"))

    def persistent(self, args: Args) -> list[dict[str, Any]]:
        """`mem persistent list`."""
        return self.service.persistent_memory_list(
            None, False, limit=MAX_LIMIT, namespace=args.text("namespace", "default")
        )

    def persistent_retrieve(self, args: Args) -> dict[str, Any]:
        """`mem persistent retrieve ID`: run it, with the rendered contribution."""
        context = args.json_object("context") if args.data.get("context") not in (None, "", {}) else None
        return self.service.persistent_memory_retrieve(
            args.required("id"),
            keywords=args.strings("keywords"),
            action=args.text("action") or None,
            context=context,
            query=args.text("query") or None,
            namespace=args.text("namespace", "default"),
        )

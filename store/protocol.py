"""The A2E wire: one request line in, exactly one response message out.

`Protocol.handle(line)` parses, validates and dispatches a request to `MemoryService`, and turns
every failure into an A2E `error` message: `parse_error` for a line that is not JSON (with an
empty `req_id`), `invalid_message` for a JSON value that is not a known request,
`version_mismatch` for another major version, `schema_violation` (field errors in `detail`) for
a request that fails validation, and the store's own codes (`memory_not_found`, `memory_full`,
`unauthorized`) for the rest. Nothing here reads or writes a stream: `cli/stdio.py` does.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from typing import Any

import orjson
from pydantic import ValidationError

from . import jsontext
from .errors import InvalidInput, MemError, Unauthorized, os_failure
from .log import logger
from .messages import (
    REQUESTS,
    ForgetRequest,
    HandshakeRequest,
    InitRequest,
    Message,
    RetrieveRequest,
    StoreRequest,
)
from .models import new_id
from .ndjson import without_bom
from .ops.a2e import SESSIONS_PER_CONNECTION, check_name
from .service import MemoryService

VERSION = "1.0"
ID_SCAN_BYTES = 4096  # how much of an unparsable line is read to find its `id`


def auth_token(secret: str, agent_id: str) -> str:
    """The `auth_token` an agent must present when the host has a secret: HMAC-SHA256(agent_id)."""
    return hmac.new(secret.encode(), agent_id.encode(), hashlib.sha256).hexdigest()


def token_matches(given: str, expected: str) -> bool:
    """Constant-time comparison of the tokens as UTF-8 bytes: `hmac.compare_digest` refuses
    `str` with non-ASCII characters (TypeError), and any token the client sends must be a plain
    mismatch, never an internal error. `surrogatepass` keeps even a lone surrogate comparable."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


# Only memory requests need the handshake: ping and shutdown reveal and change nothing, and a
# client must be able to stop the server it started even after a refused token (outside audit 32d).
UNGUARDED = ("handshake/req", "ping", "shutdown")


class Protocol:
    """One connection's state: its handshake, its sessions, whether it asked to shut down."""

    def __init__(self, service: MemoryService, auth_secret: str | None = None) -> None:
        self.service = service
        self.auth_secret = auth_secret or None
        self.agent_id = ""
        self.authenticated = self.auth_secret is None
        self.session_id = new_id()
        self.started = time.monotonic()
        self.shutdown_requested = False
        self.session_ids: list[str] = []

    def handle(self, line: bytes | str) -> dict[str, Any]:
        """The response to one request line. A leading UTF-8 byte order mark (which some Windows
        tools write) is not part of the message: without it the line is read as usual."""
        line = without_bom(line)
        try:
            data = jsontext.loads(line)
        except orjson.JSONDecodeError as exc:  # e.g. a lone surrogate (\ud800) in some string
            return error(request_id(line), "parse_error", f"not a JSON message: {exc}")
        if not isinstance(data, dict):
            return error("", "invalid_message", "a message must be a JSON object")
        req_id = data["id"] if isinstance(data.get("id"), str) else ""
        try:
            return self._dispatch(data, req_id)
        except MemError as exc:
            return error(req_id, exc.code, exc.message, exc.detail, exc.retryable)
        except OSError as exc:  # the disk, not the request: a full disk or quota can pass
            logger("protocol").warning("request %s failed: %s", req_id, exc)
            failure = os_failure(exc)
            return error(req_id, failure.code, failure.message, failure.detail, failure.retryable)
        except Exception as exc:  # a bug must cost one error reply, never the connection
            logger("protocol").exception("request %s failed", req_id)
            return error(req_id, "runtime_error", f"internal error: {type(exc).__name__}: {exc}")

    def _dispatch(self, data: dict[str, Any], req_id: str) -> dict[str, Any]:
        kind = data.get("type")
        model = REQUESTS.get(kind) if isinstance(kind, str) else None
        if model is None or not isinstance(kind, str):
            what = f"unknown message type {kind!r}" if isinstance(kind, str) else "`type` must be a string"
            return error(req_id, "invalid_message", what)
        for name in ("version", "ts"):  # null is absent, as a missing one is: both have defaults
            if name in data and data[name] is None:
                data = {k: v for k, v in data.items() if k != name}
        version = data.get("version", VERSION)
        if not isinstance(version, str) or version.split(".")[0] != VERSION.split(".")[0]:
            shown = repr(version) if isinstance(version, str) else "that is not a string"
            return error(req_id, "version_mismatch", f"version {shown} is not supported (this host speaks {VERSION})")
        try:
            msg = model.model_validate(data)
        except ValidationError as exc:
            fields = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
            return error(req_id, "schema_violation", f"invalid {kind}: {_culprit(fields[0])}", {"errors": fields})
        if kind not in UNGUARDED and not self.authenticated:
            raise Unauthorized("this host requires a handshake with a valid auth_token first")
        handler = getattr(self, "_" + kind.replace("/", "_"))
        return reply(kind.replace("/req", "/resp"), req_id, **handler(msg))

    # -- control ----------------------------------------------------------------------------

    def _handshake_req(self, msg: HandshakeRequest) -> dict[str, Any]:
        if msg.agent_id or self.auth_secret:  # an authenticated connection acts as its agent: a usable name
            try:
                check_name(msg.agent_id, "agent_id")
            except InvalidInput as exc:
                return self._handshake_refused(exc.message)
        if self.auth_secret and not token_matches(msg.auth_token, auth_token(self.auth_secret, msg.agent_id)):
            return self._handshake_refused(f"auth_token is not valid for agent {msg.agent_id!r}")
        self.agent_id, self.authenticated = msg.agent_id, True
        metadata = {
            "tiers": ["working", "episodic", "semantic"],
            "messages": sorted(k for k in REQUESTS if "memory" in k),
        }
        caps = [{"capability": "memory", "enabled": True, "metadata": metadata}]
        return {"session_id": self.session_id, "accepted_caps": caps, "max_parallel": 1, "ok": True, "reason": ""}

    def _handshake_refused(self, reason: str) -> dict[str, Any]:
        """A refused handshake is still a `handshake/resp`: the SDK client reads `ok` and `reason`
        from it to say why it could not connect. The connection is left
        unauthenticated, even if an earlier handshake had succeeded: later memory requests get
        `unauthorized` until a handshake with a valid token."""
        self.agent_id, self.authenticated = "", False
        return {"session_id": "", "accepted_caps": [], "max_parallel": 1, "ok": False, "reason": reason}

    def _ping(self, msg: Message) -> dict[str, Any]:
        return {"type": "pong", "uptime_seconds": round(time.monotonic() - self.started, 3)}

    def _shutdown(self, msg: Message) -> dict[str, Any]:
        self.shutdown_requested = True
        return {"type": "shutdown/resp", "ok": True}

    # -- memory -----------------------------------------------------------------------------

    def _memory_init_req(self, msg: InitRequest) -> dict[str, Any]:
        agent = msg.scope.get("agent", None)
        if agent is not None and (not isinstance(agent, str) or not agent):
            raise InvalidInput("scope.agent must be a non-empty string", {"field": "scope.agent"})
        if self.auth_secret and agent not in (None, self.agent_id):  # the token vouches for agent_id only
            raise Unauthorized(f"this connection is authenticated as {self.agent_id!r}, not {agent!r}")
        agent = agent or self.agent_id or "default"
        session = self.service.init(msg.namespace, agent)
        self.session_ids.append(session.memory_id)
        if len(self.session_ids) > SESSIONS_PER_CONNECTION:  # A2E has no close: bound what a connection holds
            with contextlib.suppress(MemError):
                self.service.close_session(self.session_ids.pop(0))
        return {"memory_id": session.memory_id, "namespace": msg.namespace, "success": True}

    def _session(self, memory_id: str) -> Any:
        """The session `memory_id`, if this connection may use it: with a secret, only sessions
        of the agent the token vouches for (a `mem init -a B` id is no key to B's tiers)."""
        session = self.service.session(memory_id)
        if memory_id in self.session_ids:  # most recently used last: eviction takes the first
            self.session_ids.remove(memory_id)
            self.session_ids.append(memory_id)
        if self.auth_secret and session.agent != (self.agent_id or "default"):  # as memory/init names it
            raise Unauthorized(
                f"memory_id {memory_id!r} belongs to another agent: this connection is authenticated as "
                f"{self.agent_id!r}"
            )
        return session

    def _memory_store_req(self, msg: StoreRequest) -> dict[str, Any]:
        session = self._session(msg.memory_id)
        return self.service.store(session, msg.entries)

    def _memory_retrieve_req(self, msg: RetrieveRequest) -> dict[str, Any]:
        session = self._session(msg.memory_id)
        fields = msg.model_dump(include={"keys", "query", "tags", "tier", "limit", "min_score", "since", "until"})
        return self.service.retrieve(session, **fields)

    def _memory_forget_req(self, msg: ForgetRequest) -> dict[str, Any]:
        session = self._session(msg.memory_id)
        fields = msg.model_dump(include={"keys", "tags", "tier"})
        return {"deleted": self.service.forget(session, **fields, everything=msg.all)}

    def close(self) -> None:
        """The connection ended: its sessions' working tiers go with it."""
        for memory_id in self.session_ids:
            with contextlib.suppress(MemError):
                self.service.close_session(memory_id)


def message_id(line: bytes | str) -> str:
    """The `id` of a request line, as `Protocol.handle` would answer it (for a line the server
    answers without handling it)."""
    line = without_bom(line)
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return request_id(line)
    return data["id"] if isinstance(data, dict) and isinstance(data.get("id"), str) else ""


def request_id(line: bytes | str) -> str:
    """The `id` of a request that cannot be parsed whole (not JSON, or too long to read), when the
    line starts like a message: `{`, then members whose values are plain JSON, `id` among them.
    Only the first ID_SCAN_BYTES are read; the client, which waits on `req_id`, then gets its
    error instead of a timeout. Without a string `id` in that prefix, the answer is ""."""
    head = without_bom(line)[:ID_SCAN_BYTES]
    text = head.decode("utf-8", "surrogateescape") if isinstance(head, bytes) else head
    decoder, at = json.JSONDecoder(), _skip_space(text, 0)
    if not text.startswith("{", at):
        return ""
    at += 1
    try:
        while True:
            name, at = decoder.raw_decode(text, _skip_space(text, at))
            at = _skip_space(text, at)
            if not isinstance(name, str) or not text.startswith(":", at):
                return ""
            value, at = decoder.raw_decode(text, _skip_space(text, at + 1))
            if name == "id":  # not one the client could have sent, nor one a reply can carry
                return value if isinstance(value, str) and not _has_surrogate(value) else ""
            at = _skip_space(text, at)
            if not text.startswith(",", at):
                return ""
            at += 1
    except (ValueError, RecursionError):  # truncated, malformed or deeply nested before `id`
        return ""


def _has_surrogate(text: str) -> bool:
    """Lone surrogates: a `\\udXXX` escape without its pair, or bytes that are not UTF-8."""
    return any("\ud800" <= char <= "\udfff" for char in text)


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def reply(kind: str, req_id: str, **fields: Any) -> dict[str, Any]:
    kind = fields.pop("type", kind)
    return {"type": kind, "id": new_id(), "version": VERSION, "ts": time.time(), "req_id": req_id, **fields}


def error(
    req_id: str, code: str, message: str, detail: dict[str, Any] | None = None, retryable: bool = False
) -> dict[str, Any]:
    return reply(
        "error", req_id, code=code, message=message, detail=detail or {}, retryable=retryable, capability_name="memory"
    )


def _culprit(field_error: dict[str, Any]) -> str:
    """A field error as one phrase naming its field (`min_score: Input should be ...`), as an
    entry's errors name theirs; a message-wide one (no field) is its text alone."""
    where = ".".join(str(part) for part in field_error["loc"])
    return f"{where}: {field_error['msg']}" if where else field_error["msg"]

"""Bad input on the wire never hurts `serve-stdio`.

A property test feeds `cli.stdio.serve` interleaved lines of random bytes, invalid UTF-8,
over-long lines, deeply nested JSON, JSON of the wrong types, unknown message types, bad
versions and valid memory messages. Whatever comes in, the server answers every non-blank line
with exactly one JSON object on stdout, with the right error code, and the valid messages do what
they should (checked against a model of the store, and again on disk afterwards).

CI runs a bounded number of examples; `MEM_STRESS=1` runs many more. A last test streams a
64 MiB line into the real `mem serve-stdio` and checks it is refused without being held in memory.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2e_mem.cli.stdio import serve
from a2e_mem.messages import REQUESTS
from a2e_mem.protocol import Protocol, request_id
from a2e_mem.service import MemoryService

ROOT = Path(__file__).resolve().parent.parent
STRESS = bool(os.environ.get("MEM_STRESS"))
LIMIT = 16384  # MEM_MAX_LINE_BYTES in the property test: room for 5000-deep JSON below it
TIERS = ("working", "episodic", "semantic")
LETTERS = "abcd"

# fields of known requests with values of the wrong type or out of range: schema_violation
WRONG_FIELDS = {
    "handshake/req": {"agent_id": [5, [], None], "agent_caps": ["x", [1], 5], "auth_token": [5, []]},
    "ping": {"id": [5, [], None], "ts": ["x", [], {}]},
    "shutdown": {"timeout": ["x", [], {}]},
    "memory/init/req": {"namespace": [5, "", "a" * 1025, "nul\x00", None], "scope": [[], "x", 5], "metadata": [[]]},
    "memory/store/req": {"memory_id": [5, "", None, "m" * 1025], "entries": ["x", 5, {}]},  # [1]: entry error
    "memory/retrieve/req": {
        "keys": ["x", 5, [5], [[1]]],
        "query": [5, []],
        "tags": ["x", [5], [""], ["\x00"]],
        "tier": ["cosmic", 5, None],
        "limit": ["10", 1.5, -1, True],  # over 1000 is clamped, not refused
        "min_score": ["0.5", -0.1, 1.5],
    },
    "memory/forget/req": {"keys": [5, "x"], "tags": [[5], "x"], "tier": ["", "cosmic", None]},
}
WRONG = [(kind, field, value) for kind, fields in WRONG_FIELDS.items() for field, vs in fields.items() for value in vs]
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80", b"\xf8\x88\x80\x80\x80"]

# -- generators of wire cases ----------------------------------------------------------------------

names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=30)
contents = st.one_of(
    st.text(max_size=40),
    st.integers(-(2**63), 2**64 - 1),
    st.booleans(),
    st.none(),
    st.dictionaries(st.text(max_size=5), st.text(max_size=10), max_size=3),
    st.lists(st.integers(-1000, 1000), max_size=4),
)
cells = st.tuples(st.sampled_from(TIERS), st.sampled_from(LETTERS))
not_json_types = st.one_of(
    st.lists(st.integers(-(2**63), 2**63), max_size=3),
    st.integers(-(2**63), 2**63),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.booleans(),
    st.none(),
)
cases = st.one_of(
    # valid messages
    st.tuples(st.just("ping")),
    st.tuples(st.just("handshake"), names),
    st.tuples(st.just("init"), names),
    st.tuples(
        st.just("store"),
        st.lists(st.tuples(cells, contents), min_size=1, max_size=4, unique_by=lambda c: c[0]),
    ),
    st.tuples(st.just("get"), cells),
    st.tuples(st.just("all"), st.sampled_from(("", *TIERS))),
    st.tuples(st.just("forget"), cells),
    st.tuples(st.just("forget_tier"), st.sampled_from(TIERS)),
    # everything else
    st.tuples(st.just("bytes"), st.binary(max_size=300).map(lambda b: b.replace(b"\n", b""))),
    st.tuples(st.just("blank"), st.sampled_from([b"", b" ", b"\t", b"\r", b"  \r"])),
    st.tuples(st.just("utf8"), st.sampled_from(BAD_UTF8), st.booleans()),
    st.tuples(st.just("long"), st.integers(1, 2 * LIMIT), st.sampled_from([b"x", b" ", b"[", b"\xff", b"ping"])),
    st.tuples(st.just("boundary"), st.integers(-2, 2)),
    st.tuples(st.just("deep"), st.integers(1, 6000), st.sampled_from(["open", "array", "object", "in_ping"])),
    st.tuples(st.just("not_object"), not_json_types),
    st.tuples(st.just("wrong"), st.sampled_from(WRONG)),
    st.tuples(
        st.just("unknown"),
        st.one_of(names, not_json_types).filter(lambda t: not (isinstance(t, str) and t in REQUESTS)),
    ),
    st.tuples(
        st.just("version"),
        st.sampled_from(sorted(REQUESTS)),
        not_json_types.filter(lambda v: v is not None and not (isinstance(v, str) and v.split(".")[0] == "1")),
    ),
    st.tuples(st.just("no_session"), st.sampled_from(["memory/store/req", "memory/retrieve/req", "memory/forget/req"])),
)


def request(kind: str, rid: str, **fields) -> dict:
    return {"type": kind, "id": rid, "version": "1.0", "ts": 0.0, **fields}


def error_of(code: str, req_id: str = "") -> dict:
    return {"type": "error", "code": code, "req_id": req_id}


def padded_ping(rid: str, size: int) -> bytes:
    """A valid ping exactly `size` bytes long."""
    base = orjson.dumps(request("ping", rid, pad=""))
    return orjson.dumps(request("ping", rid, pad="p" * (size - len(base))))


def classify(raw: bytes) -> dict | None:
    """What serve-stdio must answer to an arbitrary line (None: a blank line, no answer)."""
    if len(raw) > LIMIT:
        return error_of("invalid_message", request_id(raw))
    line = raw.rstrip(b"\r")
    if not line.strip():
        return None
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return error_of("parse_error", request_id(line))
    if not isinstance(data, dict):
        return error_of("invalid_message")
    return {}  # an object: some well-formed answer


class Wire:
    """Turns cases into lines and the answers they must get, keeping a model of the session's
    entries: {(tier, letter): content}."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        self.model: dict[tuple[str, str], object] = {}
        self.n = 0

    def line(self, case: tuple) -> tuple[bytes, dict | None]:
        self.n += 1
        rid = f"q{self.n}"
        return getattr(self, "_" + case[0])(rid, *case[1:])

    def _session(self, kind: str, rid: str, expect: dict, **fields) -> tuple[bytes, dict]:
        return orjson.dumps(request(kind, rid, memory_id=self.memory_id, **fields)), expect

    # valid messages: the answer the store must give

    def _ping(self, rid):
        return orjson.dumps(request("ping", rid)), {"type": "pong", "req_id": rid}

    def _handshake(self, rid, agent):
        msg = request("handshake/req", rid, agent_id=agent, agent_caps=["streaming"], auth_token="")
        return orjson.dumps(msg), {"type": "handshake/resp", "req_id": rid, "ok": True}

    def _init(self, rid, namespace):
        msg = request("memory/init/req", rid, namespace=namespace, scope={"agent": "fuzz"})
        return orjson.dumps(msg), {"type": "memory/init/resp", "req_id": rid, "success": True, "namespace": namespace}

    def _store(self, rid, items):
        entries = [{"key": {"f": letter}, "content": content, "tier": tier} for (tier, letter), content in items]
        for cell, content in items:
            self.model[cell] = content
        expect = {"type": "memory/store/resp", "req_id": rid, "stored": [e["key"] for e in entries], "errors": []}
        return self._session("memory/store/req", rid, expect, entries=entries)

    def _get(self, rid, cell):
        tier, letter = cell
        found = [{"key": {"f": letter}, "content": self.model[cell], "tier": tier}] if cell in self.model else []
        expect = {"type": "memory/retrieve/resp", "req_id": rid, "total": len(found), "found": found}
        return self._session("memory/retrieve/req", rid, expect, keys=[{"f": letter}], tier=tier)

    def _all(self, rid, tier):
        count = sum(1 for t, _ in self.model if not tier or t == tier)
        expect = {"type": "memory/retrieve/resp", "req_id": rid, "total": count}
        return self._session("memory/retrieve/req", rid, expect, tier=tier, limit=1000)

    def _forget(self, rid, cell):
        deleted = int(cell in self.model)
        self.model.pop(cell, None)
        expect = {"type": "memory/forget/resp", "req_id": rid, "deleted": deleted}
        return self._session("memory/forget/req", rid, expect, keys=[{"f": cell[1]}], tier=cell[0])

    def _forget_tier(self, rid, tier):
        doomed = [cell for cell in self.model if cell[0] == tier]
        for cell in doomed:
            del self.model[cell]
        expect = {"type": "memory/forget/resp", "req_id": rid, "deleted": len(doomed)}
        return self._session("memory/forget/req", rid, expect, tier=tier, all=True)

    # everything else: the error it must get

    def _bytes(self, rid, raw):
        return raw, classify(raw)

    def _blank(self, rid, raw):
        return raw, None

    def _utf8(self, rid, bad, inside):
        raw = b'{"type": "ping", "id": "' + bad + b'"}' if inside else bad + b'{"type": "ping"}'
        return raw, error_of("parse_error")

    def _long(self, rid, extra, filler):
        if filler == b"ping":  # a valid message, but too long: refused all the same
            return padded_ping(rid, LIMIT + extra), error_of("invalid_message", rid)  # its id is read
        return (filler * (LIMIT + extra))[: LIMIT + extra], error_of("invalid_message")

    def _boundary(self, rid, delta):
        if delta <= 0:
            return padded_ping(rid, LIMIT + delta), {"type": "pong", "req_id": rid}
        return padded_ping(rid, LIMIT + delta), error_of("invalid_message", rid)

    def _deep(self, rid, depth, shape):
        if shape == "open":
            raw = b"[" * depth
        elif shape == "array":
            raw = b"[" * depth + b"]" * depth
        elif shape == "object":
            depth = min(depth, 2500)
            raw = b'{"a":' * depth + b"1" + b"}" * depth
        else:  # a ping carrying a deep field it does not know: ignored, unless it cannot be parsed
            raw = b'{"type": "ping", "id": "' + rid.encode() + b'", "x": ' + b"[" * depth + b"]" * depth + b"}"
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError:  # the ping's id comes before the deep field: it is read
            return raw, error_of("parse_error", rid if shape == "in_ping" else "")
        return raw, {"type": "pong", "req_id": rid} if shape == "in_ping" else error_of("invalid_message")

    def _not_object(self, rid, value):
        return orjson.dumps(value), error_of("invalid_message")

    def _wrong(self, rid, wrong):
        kind, field, value = wrong
        msg = {**request(kind, rid, memory_id=self.memory_id), field: value}
        return orjson.dumps(msg), error_of("schema_violation", rid if field != "id" else "")

    def _unknown(self, rid, kind):
        return orjson.dumps(request("x", rid) | {"type": kind}), error_of("invalid_message", rid)

    def _version(self, rid, kind, version):
        msg = request(kind, rid, memory_id=self.memory_id) | {"version": version}
        return orjson.dumps(msg), error_of("version_mismatch", rid)

    def _no_session(self, rid, kind):
        return orjson.dumps(request(kind, rid, memory_id=uuid.uuid4().hex)), error_of("memory_not_found", rid)


def check(reply: dict, expect: dict, line: bytes) -> None:
    where = f"line {line[:80]!r}: reply {str(reply)[:300]}"
    assert isinstance(reply, dict) and isinstance(reply.get("type"), str), where
    assert isinstance(reply.get("req_id"), str) and {"id", "version", "ts"} <= reply.keys(), where
    if reply["type"] == "error":
        assert {"code", "message", "detail", "retryable"} <= reply.keys(), where
        # bad input is never an internal error (only a request after `shutdown` is expected to be one)
        assert reply["code"] != "runtime_error" or expect.get("code") == "runtime_error", where
    found = expect.get("found")
    for name, value in expect.items():
        if name != "found":
            assert reply.get(name) == value, f"{name}: {where}"
    if found is not None:
        assert [{k: e[k] for k in ("key", "content", "tier")} for e in reply["entries"]] == found, where


def run_serve(home: Path, lines: list[bytes]) -> list[bytes]:
    out = io.BytesIO()
    assert serve(MemoryService(home), io.BytesIO(b"".join(line + b"\n" for line in lines)), out) == 0
    data = out.getvalue()
    assert not data or data.endswith(b"\n"), "stdout ends in a partial line"
    return data.splitlines()


@pytest.mark.slow
@settings(
    max_examples=2000 if STRESS else 300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(cases, min_size=1, max_size=25), st.booleans())
def test_serve_answers_every_line_once_and_valid_messages_still_work(home, monkeypatch, batch, shutdown_at_end):
    monkeypatch.setenv("MEM_MAX_LINE_BYTES", str(LIMIT))
    setup = MemoryService(home)
    memory_id = setup.init(f"fuzz-{uuid.uuid4().hex}", "fuzz", persist=True).memory_id
    wire = Wire(memory_id)
    sent = [wire.line(case) for case in batch]
    if shutdown_at_end:  # lines after `shutdown` are answered, not processed
        sent += [(orjson.dumps(request("shutdown", "bye")), {"type": "shutdown/resp", "req_id": "bye"})]
        late = {"type": "error", "req_id": "late", "code": "runtime_error", "retryable": True}
        sent += [(orjson.dumps(request("ping", "late")), late)]
    replies = run_serve(home, [line for line, _ in sent])
    expected = [(line, expect) for line, expect in sent if expect is not None]
    assert len(replies) == len(expected), f"{len(replies)} replies to {len(expected)} non-blank lines"
    for raw, (line, expect) in zip(replies, expected, strict=True):
        check(orjson.loads(raw), expect, line)
    # the valid messages' effects are on disk
    session = setup.session(memory_id)
    for tier in TIERS:
        stored = setup.retrieve(session, tier=tier, limit=1000)["entries"]
        on_disk = {(tier, e["key"]["f"]): e["content"] for e in stored}
        assert on_disk == {cell: c for cell, c in wire.model.items() if cell[0] == tier}
    setup.close()


def test_the_checks_can_fail(home, monkeypatch):
    """The property's checks reject a wrong code, a missing answer and a wrong count."""
    monkeypatch.setenv("MEM_MAX_LINE_BYTES", str(LIMIT))
    replies = run_serve(home, [b"{oops", orjson.dumps(request("ping", "p"))])
    with pytest.raises(AssertionError):
        check(orjson.loads(replies[0]), error_of("invalid_message"), b"{oops")
    with pytest.raises(AssertionError):
        check(orjson.loads(replies[1]), {"type": "pong", "req_id": "other"}, b"ping")
    assert classify(b"   ") is None and classify(b"x" * (LIMIT + 1)) == error_of("invalid_message")


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "make, expect",
    [
        (
            lambda mid: request("memory/store/req", "s", memory_id=mid, entries=[
                {"key": "deep", "content": orjson.Fragment(deep(300)), "tier": "episodic"},
                {"key": "fine", "content": "ok", "tier": "episodic"},
            ]),
            {"type": "memory/store/resp", "stored": [{"key": "fine"}]},
        ),
        (
            lambda mid: request("memory/store/req", "s", memory_id=mid, entries=[
                {"key": {"k": orjson.Fragment(deep(300))}, "content": 1, "tier": "episodic"},
                {"key": "fine", "content": "ok", "tier": "episodic"},
            ]),
            {"type": "memory/store/resp", "stored": [{"key": "fine"}]},
        ),
        (
            lambda mid: request("memory/retrieve/req", "s", memory_id=mid, keys=[{"k": orjson.Fragment(deep(300))}]),
            {"type": "error", "code": "schema_violation"},
        ),
        (lambda mid: request("x", "s", type=orjson.Fragment(deep(1000))), {"type": "error", "code": "invalid_message"}),
        (
            lambda mid: request("ping", "s", version=orjson.Fragment(deep(1000))),
            {"type": "error", "code": "version_mismatch"},
        ),
    ],
    ids=["store-content", "store-key", "retrieve-key", "type", "version"],
)  # fmt: skip
def test_deep_json_inside_a_message_gets_the_fields_error(service, make, expect):
    proto = Protocol(service)
    mid = proto.handle(orjson.dumps(request("memory/init/req", "i", namespace="deep")))["memory_id"]
    reply = proto.handle(orjson.dumps(make(mid)))
    assert {name: reply.get(name) for name in expect} == expect, reply.get("message")
    if reply["type"] == "memory/store/resp":
        assert reply["errors"] and reply["errors"][0].startswith("entries[0]")


@pytest.mark.parametrize("agent", [0, False, [], {}], ids=["zero", "false", "list", "object"])
def test_a_scope_agent_of_the_wrong_type_is_a_schema_violation(service, agent):
    proto = Protocol(service)
    reply = proto.handle(orjson.dumps(request("memory/init/req", "i", namespace="n", scope={"agent": agent})))
    assert reply["type"] == "error" and reply["code"] == "schema_violation", reply


# -- a huge line through the real binary -----------------------------------------------------------


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))


def test_a_64_mib_line_is_refused_without_being_held_in_memory(home):
    size, chunk = 64 << 20, 1 << 20
    proc = subprocess.Popen(
        [sys.executable, "-m", "a2e_mem.cli.main", "serve-stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "MEM_HOME": str(home), "MEM_MAX_LINE_BYTES": str(1 << 20)},
        cwd=ROOT,
    )
    assert proc.stdin and proc.stdout

    def send(data: bytes) -> None:
        proc.stdin.write(data)
        proc.stdin.flush()

    def ask(data: bytes) -> dict:
        send(data)
        return orjson.loads(proc.stdout.readline())

    mid = ask(orjson.dumps(request("memory/init/req", "i", namespace="big")) + b"\n")["memory_id"]
    entry = {"key": "before", "content": "stored before the flood", "tier": "episodic"}
    assert ask(orjson.dumps(request("memory/store/req", "s", memory_id=mid, entries=[entry])) + b"\n")["stored"]
    baseline = peak_rss_kib(proc.pid)

    def flood() -> None:  # a valid-looking message, 64 MiB long, streamed 1 MiB at a time
        send(b'{"type": "ping", "id": "huge", "pad": "')
        block = b"a" * chunk
        for _ in range(size // chunk):
            send(block)
        send(b'"}\n')

    writer = threading.Thread(target=flood)
    writer.start()
    reply = orjson.loads(proc.stdout.readline())
    writer.join()
    assert reply["type"] == "error" and reply["code"] == "invalid_message" and reply["req_id"] == "huge"
    assert "longer than 1048576 bytes" in reply["message"]
    # still serving, with its session and data intact
    assert ask(orjson.dumps(request("ping", "after")) + b"\n")["type"] == "pong"
    got = ask(orjson.dumps(request("memory/retrieve/req", "r", memory_id=mid, keys=["before"])) + b"\n")
    assert got["total"] == 1 and got["entries"][0]["content"] == "stored before the flood"
    growth = peak_rss_kib(proc.pid) - baseline
    assert growth < 16 * 1024, f"peak RSS grew by {growth} KiB for a {size >> 20} MiB line"
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert proc.stdout.read() == b""

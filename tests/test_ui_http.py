"""`mem ui`'s HTTP layer: the token on every request, JSON 4xx for bad input (never a traceback),
each route answering what the service (and so the CLI) answers, live reads, and the real command
serving on 127.0.0.1."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed: pip install 'a2e-mem[ui]'")
pytest.importorskip("httpx2", reason="starlette.testclient needs httpx2 (in the test extra)")

from starlette.testclient import TestClient  # noqa: E402

from a2e_mem.cli.ui.app import STATIC, make_app  # noqa: E402
from tests.conftest import entry  # noqa: E402

TOKEN = "test-token-0123456789"
LOCAL = "http://127.0.0.1:8765"  # the Host a browser on this machine sends (the app refuses any other)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def client(service):
    with TestClient(make_app(service, TOKEN), base_url=LOCAL, raise_server_exceptions=False) as client:
        client.headers["X-Mem-Token"] = TOKEN
        yield client


@pytest.fixture
def anonymous(service):
    return TestClient(make_app(service, TOKEN), base_url=LOCAL, raise_server_exceptions=False)


def stored(service, *entries, namespace="default", agent="default"):
    result = service.store(service.scope(namespace, agent), list(entries))
    assert not result["errors"], result
    return result


def refused(response, status):
    """A refusal: the status, a JSON body with a message, nothing of a Python traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]
    assert "Traceback" not in response.text and 'File "' not in response.text
    return response.json()["error"]


# -- the token -----------------------------------------------------------------------------------

PATHS = ["/", "/static/app.js", "/static/style.css", "/api/overview", "/api/search?query=x", "/api/nope"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("token", [None, "", "wrong", TOKEN[:-1], TOKEN + "x", TOKEN.upper()])
def test_a_request_without_the_right_token_is_forbidden(anonymous, path, token):
    params = {} if token is None else {"token": token}
    assert "forbidden" in refused(anonymous.get(path, params=params), 403)
    headers = {} if token is None else {"X-Mem-Token": token}
    refused(anonymous.get(path, headers=headers), 403)


def test_writes_need_the_token_too(anonymous, service):
    stored(service, entry("a", "keep me"))
    refused(anonymous.post("/api/entry/delete", json={"tier": "episodic", "key": {"k": "a"}}), 403)
    assert service.retrieve(service.scope(), keys=[{"k": "a"}])["total"] == 1


@pytest.mark.parametrize(
    "host",
    ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "0.0.0.0:8765", "", "127.0.0.1:8765@evil.example"]
    + ["127.0.0.1:x", "localhost:"],  # found by an outside audit: the two first were served
)
def test_a_request_naming_another_host_is_forbidden_even_with_the_token(client, host):
    """Found by an outside audit: a DNS-rebinding page (a foreign Host) was answered; it still
    needs the token, but nothing else stood behind it."""
    assert "127.0.0.1" in refused(client.get("/api/overview", headers={"Host": host}), 403)


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost:9000", "LOCALHOST", "[::1]:8765", "[::1]"])
def test_this_machine_under_any_of_its_names_and_ports_is_served(client, host):
    assert client.get("/api/overview", headers={"Host": host}).status_code == 200


def test_a_write_whose_body_is_not_declared_json_is_refused(client, service):
    """A cross-site form or a `text/plain` fetch is sent without a CORS preflight: found by an
    outside audit to be parsed as JSON."""
    stored(service, entry("a", "keep me"))
    body = '{"tier": "episodic", "key": {"k": "a"}}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded", ""):
        refused(client.post("/api/entry/delete", content=body, headers={"Content-Type": content_type}), 415)
    assert service.retrieve(service.scope(), keys=[{"k": "a"}])["total"] == 1
    done = client.post("/api/entry/delete", content=body, headers={"Content-Type": "application/json; charset=utf-8"})
    assert done.status_code == 200 and service.retrieve(service.scope(), keys=[{"k": "a"}])["total"] == 0


@pytest.mark.parametrize("path", ["/", "/static/app.js", "/static/graph.js", "/static/style.css"])
def test_the_page_and_its_assets_are_served_with_the_token_in_the_url_or_a_header(anonymous, path):
    assert anonymous.get(path, params={"token": TOKEN}).status_code == 200
    assert anonymous.get(path, headers={"X-Mem-Token": TOKEN}).status_code == 200


def test_the_page_carries_the_token_to_its_assets_and_locks_down_the_browser(client):
    page = client.get("/")
    assert f"/static/app.js?token={TOKEN}" in page.text
    assert "__TOKEN__" not in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["referrer-policy"] == "no-referrer"
    assert page.headers["cache-control"] == "no-store"


def test_nothing_is_loaded_from_another_site():
    """Every asset ships in the package: no URL in the page but the SVG namespace (a name, never fetched)."""
    for path in STATIC.iterdir():
        urls = set(re.findall(r"https?://[^\s\"'`)]+", path.read_text(encoding="utf-8")))
        assert urls <= {"http://www.w3.org/2000/svg"}, (path.name, urls)


def test_the_static_files_are_package_data():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"a2e_mem.cli.ui" = ["static/*"]' in text and '"a2e_mem.cli.ui"' in text.split("packages =")[1]


# -- reads -----------------------------------------------------------------------------------------


def test_overview_has_the_namespaces_and_tiers_mem_stats_prints(client, service):
    stored(service, entry("a", "alpha"), entry("b", "beta", tier="semantic"), namespace="proj", agent="bot")
    data = client.get("/api/overview").json()
    assert data["store"] == service.backend.url  # a PostgreSQL store's URL, not a folder it does not use
    assert data["namespaces"] == service.namespaces()
    kinds = {(s["kind"], s["scope"]): s["entries"] for s in data["stats"] if s["namespace"] == "proj"}
    assert kinds == {("episodic", "bot"): 1, ("semantic", ""): 1}


def test_search_ranks_with_relevance_and_explanation(client, service):
    stored(service, entry("tea", "Alice drinks green tea", tags=["pref"]), entry("dog", "Bob walks his dog"))
    found = client.get("/api/search", params={"query": "green tea"}).json()
    assert found["total"] == 2
    best = found["entries"][0]
    assert best["key"] == {"k": "tea"} and 0 < best["relevance"] <= 1
    assert set(best["explain"]) >= {"vector", "lexical", "fusion", "filters", "path"}
    assert found == service.retrieve(service.scope(), query="green tea", limit=20, explain=True)


def test_search_filters_by_tier_tags_keys_and_min_score(client, service):
    stored(
        service,
        entry({"topic": "tea"}, "green tea", tags=["pref", "food"]),
        entry({"topic": "dog"}, "a dog", tags=["pref"]),
        entry({"topic": "tea"}, "semantic tea", tier="semantic"),
    )

    def keys(**params):
        return [(e["tier"], e["content"]) for e in client.get("/api/search", params=params).json()["entries"]]

    assert keys(tier="semantic") == [("semantic", "semantic tea")]
    assert keys(tag=["pref", "food"]) == [("episodic", "green tea")]
    assert sorted(keys(key="topic=tea")) == [("episodic", "green tea"), ("semantic", "semantic tea")]
    assert keys(query="green tea", min_score="0.99") == []
    assert keys(query="dog", agent="someone-else", tier="episodic") == []


def test_reads_are_live_another_process_writes_show_on_the_next_request(client):
    assert client.get("/api/search").json()["total"] == 0
    mem = [sys.executable, "-m", "a2e_mem.cli.main", "store", "written by another process", "--key", "topic=live"]
    subprocess.run(mem, check=True, cwd=ROOT, capture_output=True)
    found = client.get("/api/search").json()
    assert [e["content"] for e in found["entries"]] == ["written by another process"]
    assert client.get("/api/overview").json()["namespaces"][0]["entries"] == 1


def test_entry_is_found_by_its_exact_key_and_tier(client, service):
    stored(service, entry({"topic": "tea"}, "green tea", tags=["pref"], source="chat", ttl=3600))
    params = {"tier": "episodic", "key": '{"topic": "tea"}'}
    shown = client.get("/api/entry", params=params).json()
    assert (shown["content"], shown["tags"], shown["source"], shown["ttl"]) == ("green tea", ["pref"], "chat", 3600)
    refused(client.get("/api/entry", params={**params, "tier": "semantic"}), 404)
    refused(client.get("/api/entry", params={**params, "key": '{"topic": "te"}'}), 404)


def test_episodic_timeline_with_its_filters(client, service):
    memory = service.episodic_memory_create("Run 1")
    mid = memory["memoryId"]
    for event_type, agent, tags in [
        ("user_action", "ann", ["a"]),
        ("tool_call", "bot", []),
        ("user_action", "bot", ["b"]),
    ]:
        event = {"event_type": event_type, "emitting_agent_id": agent, "tags": tags, "payload": {"n": event_type}}
        service.episodic_memory_append_event(mid, event)
    assert [m["memoryId"] for m in client.get("/api/episodic").json()] == [mid]
    data = client.get("/api/episodic/events", params={"memory_id": mid}).json()
    assert data["memory"]["eventCount"] == 3 and data["types"] == ["user_action", "tool_call"]
    assert data["events"] == service.episodic_memory_query_events(memory_id=mid)

    def agents(**params):
        events = client.get("/api/episodic/events", params={"memory_id": mid, **params}).json()["events"]
        return [(e["event_type"], e["emitting_agent_id"]) for e in events]

    assert agents(event_type="user_action") == [("user_action", "ann"), ("user_action", "bot")]
    assert agents(agent="bot") == [("tool_call", "bot"), ("user_action", "bot")]
    assert agents(tag="b") == [("user_action", "bot")]
    assert agents(last_count="1") == [("user_action", "bot")]
    assert len(agents(last_count="")) == 3  # the page's empty field: no such filter
    assert agents(since="2099-01-01T00:00:00Z") == []


def test_graph_whole_or_searched(client, service):
    service.kg_create_entities(
        [
            {"name": "Alice", "entityType": "person", "observations": ["likes tea"]},
            {"name": "Acme", "entityType": "org", "observations": []},
        ]
    )
    service.kg_create_relations([{"from": "Alice", "to": "Acme", "relationType": "works_at"}])
    assert client.get("/api/graph").json() == {**service.kg_read_graph(limit=200), "more": False}
    searched = client.get("/api/graph", params={"query": "tea"}).json()
    assert [e["name"] for e in searched["entities"]][0] == "Alice" and searched["more"] is False
    # fewer entities shown than the store holds: said, and no relation to one not shown
    first = client.get("/api/graph", params={"limit": "1"}).json()
    assert [e["name"] for e in first["entities"]] == ["Acme"] and first["relations"] == [] and first["more"] is True


def test_documents_of_each_kind(client, service):
    service.memory_todo_save({"title": "write tests", "status": "pending"})
    service.memory_json_save({"a": 1}, {"source": "test"})
    service.memory_markdown_save("# Notes\n\n*hello*")
    for kind, field, value in [("todo", "todo", {"title": "write tests", "status": "pending"}),
                               ("json", "json", {"a": 1}), ("markdown", "markdown", "# Notes\n\n*hello*")]:  # fmt: skip
        records = client.get("/api/documents", params={"kind": kind}).json()
        assert [r[field] for r in records] == [value]


def test_persistent_memory_retrieve_shows_the_rendered_contribution(client, service):
    service.memory_set("city", "Lisbon")
    config = service.persistent_memory_create(
        label="facts", retrieval={"source_type": "kv", "source_id": "default"}, contribution={"format": "markdown"}
    )
    assert [c["id"] for c in client.get("/api/persistent").json()] == [config["id"]]
    result = client.post("/api/persistent/retrieve", json={"id": config["id"], "query": "city"}).json()
    assert "Lisbon" in json.dumps(result["contribution"])
    assert result == service.persistent_memory_retrieve(config["id"], query="city")


# -- writes ----------------------------------------------------------------------------------------


def test_edit_stores_the_entry_again_under_its_key(client, service):
    stored(service, entry({"topic": "tea"}, "green tea", tags=["pref"], source="chat"))
    locator = {"tier": "episodic", "key": {"topic": "tea"}}
    edited = client.post(
        "/api/entry/edit", json={**locator, "content": "black tea", "tags": ["pref", "drink"], "score": 0.4, "ttl": 60}
    )
    assert edited.status_code == 200, edited.text
    [found] = service.retrieve(service.scope(), keys=[{"topic": "tea"}])["entries"]
    assert (found["content"], found["tags"], found["score"], found["ttl"]) == ("black tea", ["pref", "drink"], 0.4, 60)
    assert found["source"] == "chat"  # kept
    client.post("/api/entry/edit", json={**locator, "content": '{"kind": "tea", "n": 2}'})
    assert service.retrieve(service.scope(), keys=[{"topic": "tea"}])["entries"][0]["content"] == {
        "kind": "tea",
        "n": 2,
    }


def test_an_edit_without_content_keeps_it_as_it_was(client, service):
    stored(service, entry({"topic": "n"}, "42"))  # text that would parse as JSON
    client.post("/api/entry/edit", json={"tier": "episodic", "key": {"topic": "n"}, "tags": ["x"]})
    [found] = service.retrieve(service.scope())["entries"]
    assert (found["content"], found["tags"]) == ("42", ["x"])


def test_an_entry_with_any_ttl_the_store_takes_can_be_edited(client, service):
    """An entry stored with a ttl over 1e10 s (`mem store --ttl 100000000000`) could not be
    edited, not even its tags: the page sends its ttl back, and the view took at most 1e10
    (outside audit U24); a ttl is taken exactly, up to the largest the store keeps."""
    stored(service, entry({"topic": "far"}, "far away", ttl=10**11))
    locator = {"tier": "episodic", "key": {"topic": "far"}}
    done = client.post("/api/entry/edit", json={**locator, "tags": ["x"], "ttl": 10**11})
    assert done.status_code == 200, done.text
    assert client.post("/api/entry/edit", json={**locator, "ttl": 2**63 - 1}).status_code == 200
    refused(client.post("/api/entry/edit", json={**locator, "ttl": 2**63}), 400)
    [found] = service.retrieve(service.scope())["entries"]
    assert (found["tags"], found["ttl"]) == (["x"], 2**63 - 1)


def test_delete_forgets_the_one_entry(client, service):
    stored(service, entry({"topic": "tea"}, "green tea"), entry({"topic": "dog"}, "a dog"))
    assert client.post("/api/entry/delete", json={"tier": "episodic", "key": {"topic": "tea"}}).json() == {"deleted": 1}
    assert [e["key"] for e in service.retrieve(service.scope())["entries"]] == [{"topic": "dog"}]
    refused(client.post("/api/entry/delete", json={"tier": "episodic", "key": {"topic": "tea"}}), 404)


# -- bad input: a 4xx with a message, never a 500 --------------------------------------------------

BAD_GETS = [
    ("/api/search", {"min_score": "high"}, 400, "min_score must be a number"),
    ("/api/search", {"min_score": "2"}, 400, "between 0 and 1"),
    ("/api/search", {"min_score": "nan"}, 400, "min_score"),
    ("/api/search", {"limit": "-1"}, 400, "limit"),
    ("/api/search", {"limit": "2.5"}, 400, "whole number"),
    ("/api/search", {"tier": "working"}, 400, "session"),
    ("/api/search", {"tier": "attic"}, 400, "tier"),
    ("/api/search", {"namespace": "n" * 2000}, 400, "namespace"),
    ("/api/search", {"agent": "x" * 2000}, 400, "agent"),
    ("/api/entry", {"tier": "episodic"}, 400, "key is required"),
    ("/api/entry", {"tier": "episodic", "key": "{not json"}, 400, "key is not valid JSON"),
    ("/api/entry", {"tier": "episodic", "key": "[1, 2]"}, 400, "JSON object"),
    ("/api/entry", {"key": '{"k": 1}'}, 400, "tier is required"),
    ("/api/episodic/events", {}, 400, "memory_id is required"),
    ("/api/episodic/events", {"memory_id": "ep_nope"}, 404, "ep_nope"),
    ("/api/episodic/events", {"memory_id": "x", "since": "not a date"}, 400, "since"),
    ("/api/episodic/events", {"memory_id": "x", "last_count": "many"}, 400, "last_count"),
    ("/api/episodic/events", {"memory_id": "x", "last_count": "-1"}, 400, "last_count"),  # audit 30b: all events
    ("/api/episodic/events", {"memory_id": "x", "last_minutes": "-5"}, 400, "last_minutes"),
    ("/api/episodic/events", {"memory_id": "x", "last_count": "NaN"}, 400, "last_count must be a number"),
    ("/api/episodic/events", {"memory_id": "x", "last_count": "1_0"}, 400, "last_count must be a number"),
    ("/api/episodic/events", {"memory_id": "x", "last_count": "\uff12"}, 400, "last_count must be a number"),
    ("/api/graph", {"limit": "100000"}, 400, "limit"),
    ("/api/documents", {}, 400, "kind is required"),
    ("/api/documents", {"kind": "pdf"}, 400, "kind must be one of"),
]


@pytest.mark.parametrize("path, params, status, message", BAD_GETS)
def test_bad_query_parameters_get_a_4xx_with_a_message(client, service, path, params, status, message):
    if path == "/api/episodic/events" and params.get("memory_id") == "x":  # a memory that exists
        params = {**params, "memory_id": service.episodic_memory_create("t")["memoryId"]}
    assert message in refused(client.get(path, params=params), status)


BAD_POSTS = [
    ("/api/entry/edit", b"not json", 400, "not valid JSON"),
    ("/api/entry/edit", b"[1, 2]", 400, "must be a JSON object"),
    ("/api/entry/edit", {"tier": "episodic"}, 400, "key is required"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "nope"}}, 404, "no such entry"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "score": 7}, 400, "score"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "score": "x"}, 400, "score"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "ttl": -1}, 400, "ttl"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "tags": "a"}, 200, ""),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "tags": [1]}, 400, "tags"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "content": "x" * 2_000_000}, 400, "1048576"),
    ("/api/entry/delete", {"tier": 5, "key": {"topic": "tea"}}, 400, "tier must be a string"),
    ("/api/entry/delete", {"tier": "episodic", "key": "topic"}, 400, "key is not valid JSON"),
    ("/api/entry/delete", {"tier": "episodic", "key": [1]}, 400, "key must be a JSON object"),
    ("/api/persistent/retrieve", {}, 400, "id is required"),
    ("/api/persistent/retrieve", {"id": "pm_nope"}, 404, "pm_nope"),
    ("/api/persistent/retrieve", {"id": "pm_x", "keywords": {"a": 1}}, 400, "keywords"),
    ("/api/persistent/retrieve", {"id": "pm_x", "context": "[1]"}, 400, "context"),
    ("/api/persistent/retrieve", {"id": "pm_x", "context": [1]}, 400, "context must be a JSON object"),
    ("/api/entry/edit", {"tier": "episodic", "key": {"topic": "tea"}, "score": True}, 400, "score must be a number"),
]


@pytest.mark.parametrize("path, body, status, message", BAD_POSTS)
def test_bad_bodies_get_a_4xx_with_a_message(client, service, path, body, status, message):
    stored(service, entry({"topic": "tea"}, "green tea"))
    declared = {"Content-Type": "application/json"}  # what the page sends (others are refused: 415)
    response = (
        client.post(path, content=body, headers=declared) if isinstance(body, bytes) else client.post(path, json=body)
    )
    if status == 200:
        assert response.status_code == 200, response.text
    else:
        assert message in refused(response, status)
    assert service.retrieve(service.scope(), keys=[{"topic": "tea"}])["total"] == 1


def test_a_refused_store_is_a_4xx_naming_the_reason(home):
    """The store's own refusal (here: an entry over the configured size) comes back as its message."""
    from a2e_mem.service import MemoryService

    home.mkdir(parents=True, exist_ok=True)
    (home / "config.json").write_text(json.dumps({"max_entry_bytes": 100}))
    service = MemoryService(home)
    try:
        stored(service, entry({"topic": "tea"}, "green tea"))
        client = TestClient(make_app(service, TOKEN), base_url=LOCAL, headers={"X-Mem-Token": TOKEN})
        edit = {"tier": "episodic", "key": {"topic": "tea"}, "content": "t" * 200}
        assert "100-byte limit" in refused(client.post("/api/entry/edit", json=edit), 400)
        assert service.retrieve(service.scope())["entries"][0]["content"] == "green tea"
    finally:
        service.close()


@pytest.mark.parametrize(
    "method, path", [("GET", "/api/nowhere"), ("POST", "/api/search"), ("GET", "/api/entry/delete")]
)
def test_unknown_routes_and_methods_are_json_refusals(client, method, path):
    declared = {"Content-Type": "application/json"}
    refused(client.request(method, path, headers=declared), 404 if "nowhere" in path else 405)


def test_an_unexpected_failure_is_a_500_without_a_traceback(client, service, monkeypatch, capfd):
    def broken(*args, **kwargs):
        raise RuntimeError("secret internals /home/someone/.mem")

    monkeypatch.setattr(service, "stats", broken)
    message = refused(client.get("/api/overview"), 500)
    assert message.startswith("internal error: RuntimeError") and "secret internals" not in message
    assert "RuntimeError" in capfd.readouterr().err  # the details go to the terminal running mem ui


def test_a_store_failure_is_told_to_the_terminal_running_mem_ui_too(client, service, monkeypatch, capfd):
    """Found by an outside audit: an unreachable PostgreSQL server was a 503 on the page and
    nothing on the terminal."""
    from a2e_mem.errors import StoreUnavailable

    def unreachable(*args, **kwargs):
        raise StoreUnavailable("PostgreSQL store postgresql://u:***@db/x: cannot reach the server")

    monkeypatch.setattr(service, "stats", unreachable)
    message = refused(client.get("/api/overview"), 503)
    assert "cannot reach the server" in message
    assert "mem ui: error: PostgreSQL store postgresql://u:***@db/x: cannot reach" in capfd.readouterr().err


def test_a_storage_failure_is_a_5xx_with_one_line(client, service, monkeypatch):
    import errno

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(service, "stats", full)
    message = refused(client.get("/api/overview"), 503)
    assert message.startswith("storage error: No space left on device") and "retryable" in message


# -- the command -----------------------------------------------------------------------------------


def test_mem_ui_serves_on_localhost_with_a_fresh_token():
    command = [sys.executable, "-m", "a2e_mem.cli.main", "ui", "--port", "0"]
    server = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = server.stdout.readline().strip()
        match = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{32})", url)
        assert match, url
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200 and b"mem" in page.read()
        with pytest.raises(urllib.error.HTTPError) as refusal:
            urllib.request.urlopen(url.split("?")[0] + "api/overview", timeout=10)
        assert refusal.value.code == 403
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_mem_ui_on_a_port_in_use_says_so():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        done = subprocess.run(
            [sys.executable, "-m", "a2e_mem.cli.main", "ui", "--port", port],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert done.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in done.stderr and done.stdout == ""

"""`mem ui` end to end in a real headless browser: Debian's chromium driven by Selenium through
Debian's chromedriver (installed by `tests/browser.py` when missing; nothing is downloaded from a
browser vendor). Memories are stored with the CLI, the page searches, opens, edits and deletes
them, and the CLI sees the result; the episodic timeline and the graph are drawn and clicked; a
todo shows and a persistent memory renders its contribution; the console stays clean.
Screenshots are saved under the test's tmp dir (their paths are printed: `pytest -s` shows them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette", reason="the ui extra is not installed: pip install 'a2e-mem[ui]'")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (it is in the test extra)")

from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from tests import browser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WAIT = 20  # seconds a view may take to appear (a slow, shared machine), never asserted on


@pytest.fixture(scope="module")
def chrome():
    """A headless chromium, installed from Debian's mirror if missing; skipped only where it cannot be."""
    reason = browser.install()
    if reason:
        pytest.skip(f"no browser for the UI tests: {reason}")
    binary, driver_path = browser.find()
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(argument)
    options.binary_location = binary
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # to check the console stays clean
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager, should it run, must not download
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.implicitly_wait(0)
    yield driver
    driver.quit()


def mem(*args: str, input: str | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "a2e_mem.cli.main", *args], cwd=ROOT, input=input, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def ui_url(tmp_path):
    """`mem ui` running as a subprocess on a free port of 127.0.0.1; its printed URL."""
    log = tmp_path / "mem-ui.log"
    with log.open("w") as stderr:
        server = subprocess.Popen(
            [sys.executable, "-m", "a2e_mem.cli.main", "ui", "--port", "0"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    try:
        url = server.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=\S+", url), (url, log.read_text())
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert "error" not in log.read_text().lower(), log.read_text()


def seed() -> str:
    """Memories, an episodic log and a small graph, all stored through the CLI; the log's id."""
    entries = [
        {"key": {"topic": "pet"}, "content": "Has a greyhound called Pixel who loves cheese.", "tags": ["personal"]},
        {"key": {"topic": "travel"}, "content": "Flying to Lisbon in June for a conference.", "tags": ["work"]},
        {"key": {"topic": "editor"}, "content": "Uses Neovim with a dark colour scheme.", "tags": ["preferences"]},
    ]
    mem("store", "-", input="\n".join(json.dumps({**e, "tier": "episodic"}) for e in entries))
    memory_id = json.loads(mem("episodic", "create", "Support session", "--format", "json"))["memoryId"]
    for event_type, payload, tag in [("user_message", "my order is late", "late"),
                                     ("tool_call", "orders.lookup(42)", "lookup"),
                                     ("user_message", "thanks!", "thanked")]:  # fmt: skip
        mem("episodic", "append", memory_id, "-e", event_type, "-a", "support-bot", "-p", json.dumps({"text": payload}),
            "--tag", tag)  # fmt: skip
    mem("kg", "create", "Alice", "-t", "person", "-o", "owns Pixel", "-o", "works remotely")
    mem("kg", "create", "Pixel", "-t", "dog", "-o", "a greyhound")
    mem("kg", "create", "Acme", "-t", "company")
    mem("kg", "relate", "Alice", "owns", "Pixel")
    mem("kg", "relate", "Alice", "works_at", "Acme")
    mem("todo", "save", json.dumps({"title": "book the vet for Pixel", "status": "pending"}))
    mem("set", "city", "Lisbon")
    retrieval, contribution = {"source_type": "kv", "source_id": "default"}, {"format": "markdown"}
    mem("persistent", "create", "--label", "facts", "--retrieval", json.dumps(retrieval),
        "--contribution", json.dumps(contribution))  # fmt: skip
    return memory_id


class Page:
    """The browser on the web view: waits for what a view draws, fails with the page's message."""

    def __init__(self, driver, url: str, shots: Path) -> None:
        self.driver, self.url, self.shots = driver, url, shots
        shots.mkdir()

    def open(self, hash_: str, ready: str) -> None:
        self.driver.get(f"{self.url}#{hash_}")
        self.wait_for(ready)

    def wait_for(self, css: str, count: int = 1):
        def drawn(driver):
            found = driver.find_elements(By.CSS_SELECTOR, css)
            return found if len(found) >= count else False

        try:
            return WebDriverWait(self.driver, WAIT).until(drawn)
        except Exception:
            message = self.driver.find_element(By.ID, "message").text
            raise AssertionError(f"{css} not drawn; the page says: {message!r}") from None

    def find(self, css: str):
        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str):
        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def screenshot(self, name: str) -> None:
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        print(f"screenshot: {path}")


def test_search_open_edit_delete_timeline_and_graph_in_a_real_browser(chrome, ui_url, tmp_path):
    memory_id = seed()  # after the server started: what another process writes shows up
    page = Page(chrome, ui_url, tmp_path / "screenshots")
    search_and_delete(page)
    edit(page)
    timeline(page, memory_id)
    graph(page)
    documents_and_persistent(page)
    problems = [e["message"] for e in chrome.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert not problems  # no failed request, no script error, nothing the Content-Security-Policy blocked


def search_and_delete(page: Page) -> None:
    page.open("search", "#search-form")
    assert "default" in page.find("#namespaces").text
    page.find("#q").send_keys("greyhound cheese")
    page.find("#search-button").click()
    page.wait_for(".result")
    best = page.all(".result")[0]
    assert "Pixel" in best.find_element(By.CSS_SELECTOR, ".content").text
    assert 0 < float(best.find_element(By.CSS_SELECTOR, ".relevance").text) <= 1
    assert "fusion" in best.find_element(By.CSS_SELECTOR, ".explain").text
    page.screenshot("1-search")
    best.find_element(By.CSS_SELECTOR, "a.open").click()
    page.wait_for("#entry")
    assert "Pixel" in page.find("#entry-content").text
    fields = page.find("#entry-fields").text
    assert all(shown in fields for shown in ('{"topic":"pet"}', "personal", "episodic", "never expires")), fields
    page.screenshot("2-entry")
    page.find("#delete").click()
    page.wait_for("#confirm:not([hidden])")
    page.find("#confirm-delete").click()
    page.wait_for("#deleted")
    assert json.loads(mem("retrieve", "--key", "topic=pet", "--format", "json")) == []
    assert len(json.loads(mem("retrieve", "--format", "json"))) == 2  # only that one


def edit(page: Page) -> None:
    open_editor(page, "travel")
    retype(page, "#edit-content", "Flying to Porto in July.")
    retype(page, "#edit-tags", "work, travel")
    page.find("#save").click()
    WebDriverWait(page.driver, WAIT).until(lambda d: "Porto" in d.find_element(By.ID, "entry-content").text)
    entry = stored("travel")
    assert (entry["content"], entry["tags"]) == ("Flying to Porto in July.", ["work", "travel"])
    # found by an outside audit: saving a score rewrote tags the comma-separated box cannot show
    odd = ["a,b", " spaced ", "x"]
    mem("store", "-k", "topic=odd", *[f"--tag={t}" for t in odd], "odd tags")
    open_editor(page, "odd")
    retype(page, "#edit-score", "0.5")
    page.find("#save").click()
    WebDriverWait(page.driver, WAIT).until(lambda d: "0.5" in d.find_element(By.ID, "entry-fields").text)
    entry = stored("odd")
    assert (entry["score"], entry["tags"]) == (0.5, odd)


def open_editor(page: Page, topic: str) -> None:
    page.open(f"search?run=1&keys=topic%3D{topic}", ".result")
    page.find(".result a.open").click()
    page.wait_for("#edit-form")


def retype(page: Page, css: str, text: str) -> None:
    box = page.find(css)
    box.clear()
    box.send_keys(text)


def stored(topic: str) -> dict:
    [entry] = json.loads(mem("retrieve", "--key", f"topic={topic}", "--format", "json"))
    return entry


def timeline(page: Page, memory_id: str) -> None:
    page.open("episodic", "#episodic tr.clickable")
    page.find("#episodic tr.clickable").click()
    page.wait_for("#timeline li.event", count=3)
    assert "my order is late" in page.all("#timeline li.event")[0].text  # oldest first
    page.screenshot("3-timeline")
    Select(page.find("#event-type")).select_by_value("tool_call")
    page.find("#timeline-form button").click()
    WebDriverWait(page.driver, WAIT).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "li.event")) == 1)
    assert "orders.lookup" in page.find("li.event").text
    Select(page.find("#event-type")).select_by_value("")
    page.find("#event-tags").send_keys("late, thanked")  # any of two tags (an audit: only one worked)
    page.find("#timeline-form button").click()
    WebDriverWait(page.driver, WAIT).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "li.event")) == 2)


def graph(page: Page) -> None:
    page.open("graph", "#graph .node")
    assert sorted(n.get_attribute("data-name") for n in page.all("#graph .node")) == ["Acme", "Alice", "Pixel"]
    relations = sorted(line.get_attribute("data-relation") for line in page.all("#graph line"))
    assert relations == ["Alice owns Pixel", "Alice works_at Acme"]
    page.find('#graph .node[data-name="Alice"]').click()
    page.wait_for("#observations")
    assert page.find("#entity-name").text == "Alice"
    assert "owns Pixel" in page.find("#observations").text
    page.screenshot("4-graph")
    mem("kg", "create", "Bob", "-t", "person")  # another process writes: the next refresh shows it
    page.find("#refresh").click()
    page.wait_for("#graph .node", count=4)


def documents_and_persistent(page: Page) -> None:
    page.open("documents", "#documents-todo")
    assert "book the vet for Pixel" in page.find("#documents-todo").text
    page.open("persistent", "#persistent form")
    page.find("#persistent input[name=query]").send_keys("city")
    page.find("#persistent form button").click()
    assert "Lisbon" in page.wait_for(".contribution")[0].text
    page.screenshot("5-persistent")

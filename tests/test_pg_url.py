"""Store URLs read as libpq reads them (`connection.read_url`): what a message shows of a URL,
and which texts are scrubbed from every message. No server needed."""

from __future__ import annotations

import logging

import pytest

pytest.importorskip("psycopg")

from a2e_mem.backends.postgres.connection import Database, read_url  # noqa: E402
from a2e_mem.errors import InvalidInput  # noqa: E402


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:Hun?ter2pw@h:5/db", "postgresql://u:***@h:5/db"),
        ("postgresql://u:Hun#ter2pw@h/db", "postgresql://u:***@h/db"),
        ("postgresql://u:Hun%40ter2pw@h/db", "postgresql://u:***@h/db"),
        ("postgres://u@h/db?sslmode=disable&password=Hunter2pw", "postgres://u@h/db?sslmode=disable&password=***"),
        # the passphrase of the client's SSL key is a secret too (outside audit 32a: shown as given)
        (
            "postgresql://u@h/db?sslpassword=Hunter2pw&sslmode=require",
            "postgresql://u@h/db?sslpassword=***&sslmode=require",
        ),
        ("postgresql:///db?host=/tmp/s", "postgresql:///db?host=/tmp/s"),
    ],
)
def test_a_url_libpq_reads_is_shown_with_its_password_masked(url, shown):
    target = read_url(url)
    assert target.malformed is None
    assert target.shown == shown


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u:Hun@ter2pw@127.0.0.1:1/db",  # libpq: password 'Hun', host 'ter2pw@127.0.0.1'
        "postgresql://u:Hun/ter2pw@127.0.0.1:1/db",  # libpq: host 'u', port 'Hun'
        "postgresql://u:Hun ter2pw@h/db",  # libpq cannot parse it
        "postgresql://u:Hunter2pw@h/db?bogus=ter2pw",
        "postgresql://u:Hun\udcffter2pw@h/db",  # a byte that is not UTF-8, as a shell passes it (audit 31b)
    ],
)
def test_a_malformed_url_shows_nothing_but_its_scheme_and_is_never_connected(url):
    target = read_url(url)
    assert target.shown == "postgresql://…" and target.malformed
    assert "ter2pw" not in target.malformed
    with pytest.raises(InvalidInput) as caught:  # a bad setting (exit 4), refused before any connection
        Database(url, False, lambda conn: None)
    assert "malformed" in caught.value.message and "ter2pw" not in caught.value.message


def test_every_text_of_the_password_is_scrubbed_from_messages_and_driver_logs(caplog):
    db = Database("postgresql://u:Hun?ter%2Fpw@h/db", False, lambda conn: None)
    for text in ("Hun?ter/pw", "Hun?ter%2Fpw", "Hun%3Fter%2Fpw"):
        assert "ter" not in db.scrub(f"said {text}!").replace("said", "")
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        logging.getLogger("psycopg.pool").warning("failed: %s", "Hun?ter/pw")
    db.close()
    assert "Hun?ter/pw" not in caplog.text and "failed: ***" in caplog.text


def test_a_driver_log_record_is_one_line(caplog):
    """libpq's connection errors go on ('\\n\\tIs the server running locally ...'): a pool's
    record of one was two lines on stderr (outside audit X24)."""
    db = Database("postgresql://u:pw@h/db", False, lambda conn: None)
    with caplog.at_level(logging.WARNING, logger="psycopg.pool"):
        logging.getLogger("psycopg.pool").warning("error connecting: %s", "connection failed\n\tIs the server running?")
    db.close()
    (record,) = [r for r in caplog.records if r.name == "psycopg.pool"]
    assert record.getMessage() == "error connecting: connection failed Is the server running?"


@pytest.mark.parametrize(
    "query",
    ["?host={nowhere}&connect_timeout=abc", "?host={nowhere}&sslmode=bogus", "?host={nowhere}&port=99999"],
)
def test_a_setting_no_server_can_take_is_a_bad_setting_not_an_unavailable_store(tmp_path, query):
    """An outside audit: these exited 7 (store unavailable: a script retries it forever), where a
    bad setting is invalid input (exit 4). A server that is not there stays exit 7."""
    import subprocess
    import sys

    def run(url: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "a2e_mem.cli.main", "--home", str(tmp_path), "--store", url, "stats"]
        return subprocess.run(command, capture_output=True, timeout=60)

    nowhere = tmp_path / "no-server"
    bad = run("postgresql://u:Hunter2pw@/db" + query.format(nowhere=nowhere))
    said = bad.stderr.decode()
    assert bad.returncode == 4 and "a setting of the store URL is invalid" in said and "Hunter2pw" not in said, said
    assert len(said.splitlines()) == 1 and bad.stdout == b""
    assert run(f"postgresql://u:Hunter2pw@/db?host={nowhere}").returncode == 7


def test_the_ssl_key_passphrase_is_scrubbed_from_messages():
    db = Database("postgresql://u@h/db?sslpassword=S3cret%2Fkey&sslmode=disable", False, lambda conn: None)
    for text in ("S3cret/key", "S3cret%2Fkey"):
        assert "S3cret" not in db.scrub(f"said {text}!")
    db.close()


def test_vectors_of_two_sizes_are_an_embedder_changed_meanwhile_and_retryable():
    """A request that waited out another process's `mem reindex` to another embedder meets
    vectors of two sizes: the client is told to send it again (outside audit 32c: a raw SQL
    error, not retryable)."""
    import psycopg

    from a2e_mem.errors import StoreUnavailable

    db = Database("postgresql://u:Hunter2pw@h/db", False, lambda conn: None)
    with pytest.raises(StoreUnavailable) as caught, db.errors():
        raise psycopg.errors.DataException("different vector dimensions 256 and 64")
    assert caught.value.retryable and "mem reindex" in caught.value.message
    assert "Hunter2pw" not in caught.value.message
    db.close()

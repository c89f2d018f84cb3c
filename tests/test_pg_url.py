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

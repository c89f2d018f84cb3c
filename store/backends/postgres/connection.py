"""Connections to the database: a pool or one connection, the thread's write transaction, and
errors turned into one line without the password.

A long-lived server (`serve-stdio`, `serve-mcp`) shares a small pool; a one-shot command opens one
connection, lazily, on first use. Outside a write section each statement runs in autocommit on
whichever connection is free; inside `Database.transaction()` the connection is the thread's
*current* one, so every read and write of the block joins the transaction.

Every psycopg error met while serving a request becomes a `StoreUnavailable` (exit 7) naming the
store by its URL with the password masked; `retryable` when the server may come back (down,
restarting, the connection lost, the pool exhausted).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from ...errors import InvalidInput, RoleRefused, StoreUnavailable

EXTRA = "pip install 'a2e-mem[postgres]'"
CONNECT_TIMEOUT = 10  # seconds, unless the URL sets connect_timeout (libpq waits forever by default)
POOL_MIN, POOL_MAX = 1, 4
# psycopg prepares a statement run this many times on a connection: never, in effect. The write
# path's statements, always the same text, ask for it (`execute(..., prepare=True)`): parsing and
# planning them was most of a write's server time. Other statements (searches, whose best plan
# depends on their values) are planned afresh each time.
PREPARE_ASKED_ONLY = 1 << 30
# Seconds a request of a server waits for a free connection of the pool. Statements take
# milliseconds: a longer wait means the database is down or restarting, and a client told so
# (retryable) soon can back off or tell its user, rather than hanging on each request.
POOL_WAIT = 3.0
# A prepared statement of lookups by key whose plan PostgreSQL would otherwise make again on every
# call: a plan made for any value of a time cannot know how few rows have expired, so it looked
# dearer than each custom plan, and the custom one was kept (planned each time: most of the
# statement's server time). These settings make it keep the generic plan, and keep that plan off
# whole-table scans (a bulk import's statistics do not count the partial indexes yet).
GENERIC_PLAN = {"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off"}
# `read_generic` also keeps it off parallel plans: a generic plan cannot know that a scope is
# empty, and starting two workers to count its rows took 10 ms
GENERIC_READ = {**GENERIC_PLAN, "max_parallel_workers_per_gather": "0"}
SET_GENERIC_READ = "SELECT " + ", ".join(f"set_config('{key}', '{value}', true)" for key, value in GENERIC_READ.items())
MASK = "***"
DRIVER_LOGGERS = ("psycopg", "psycopg.pool")

# libpq's words for a server that may come back (the request can be sent again)
_RETRYABLE = re.compile(
    r"connection refused|could not connect|timeout expired|timed out|server closed the connection|"
    r"terminating connection|the database system is (starting up|shutting down|in recovery mode)|"
    r"no such file or directory|connection is lost|consuming input failed|sending query failed|"
    r"connection (is )?closed|ssl syscall|broken pipe|connection reset",
    re.IGNORECASE,
)
# libpq's and psycopg's words for a setting of the URL that no server can take ("invalid sslmode
# value", "invalid port number", "bad value for connect_timeout"): `group(1)` names the setting
# and the server's, at the start of a session, for a parameter the URL sets ("client_encoding=bogus",
# "options=-c bogus=1"): a name from the URL, or none
_BAD_SETTING = re.compile(
    r"\binvalid (?:integer )?(\w+) (?:value|number)\b|\bbad value for (\w+)|"
    r"invalid value for parameter \"(\w+)\"|unrecognized configuration parameter \"(\w+)\"",
    re.IGNORECASE,
)
PARAMETER_STATES = ("22023", "42704")  # invalid_parameter_value, undefined_object (a parameter's name)
# query_canceled (statement_timeout, pg_cancel_backend), lock_not_available (lock_timeout)
_CANCELLED_STATES = {"57014", "55P03"}
_RETRYABLE_STATES = {"57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004", "53300", "40001", "40P01"}


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreUnavailable(f"a postgresql:// store needs psycopg: {EXTRA}") from None
    return psycopg


def check_pgvector() -> None:
    """pgvector's adapter, which every connection registers: missing, a one-line error naming the
    extra before any connection (not an import error after the migrations)."""
    try:
        import pgvector.psycopg  # noqa: F401
    except ImportError:
        raise StoreUnavailable(f"a postgresql:// store needs pgvector: {EXTRA}") from None


# the options of a URL whose value is a secret: the password, and the passphrase of the client's
# SSL key (outside audit 32a: `sslpassword` was shown in messages and `mem mcp-config`)
SECRET_OPTIONS = ("password", "sslpassword")


@dataclass(frozen=True)
class StoreUrl:
    """A store URL as libpq reads it: what a message may show of it, the texts of its password
    (to scrub from every message), and why it is malformed (None when it is not)."""

    shown: str
    database: str
    secrets: tuple[str, ...]
    malformed: str | None


def read_url(url: str) -> StoreUrl:
    """Read `url` as libpq does (`conninfo_to_dict`), not as `urllib` does: they disagree about
    an unencoded '/', '?', '#' or '@' in the password, and only libpq's reading says which text
    is the password. A URL libpq cannot parse, or whose host or database holds an '@' (a
    password with an unencoded '@' or '/': libpq would take a piece of the password for the
    host and echo it in "failed to resolve host"), is malformed: nothing of it but its scheme is
    ever shown, and no connection is tried."""
    from psycopg.conninfo import conninfo_to_dict

    scheme = url.split("://", 1)[0] if "://" in url else "postgresql"
    try:
        url.encode()
    except UnicodeEncodeError:  # a byte that is not UTF-8, as a shell passes it (a surrogate escape)
        return StoreUrl(f"{scheme.encode(errors='replace').decode()}://…", "?", (), "it is not UTF-8 text")
    secrets = password_texts(url)
    try:
        libpq = conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError: libpq's own reason, quoted parts removed
        reason = re.sub(r'"[^"]*"', '"…"', first_line(str(exc)))
        return StoreUrl(f"{scheme}://…", "?", secrets, f"libpq cannot parse it ({reason})")
    given = (text for option in SECRET_OPTIONS for text in encoded(str(libpq.get(option) or "")))
    secrets = tuple(dict.fromkeys((*secrets, *given)))
    userinfo, rest = split_userinfo(url)
    if "@" in rest.split("?", 1)[0]:
        return StoreUrl(
            f"{scheme}://…",
            "?",
            secrets,
            "its host or database holds an '@' (a password's '@' or '/' not percent-encoded?)",
        )
    if userinfo is not None and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":" + MASK
    shown = f"{scheme}://" + (f"{userinfo}@" if userinfo is not None else "") + mask_query_password(rest)
    return StoreUrl(shown, str(libpq.get("dbname") or libpq.get("user") or "?"), secrets, None)


def split_userinfo(url: str) -> tuple[str | None, str]:
    """libpq's split of a URL's `user[:password]@` from the rest: the first '@' met before any
    '/' ends it (fe-connect.c, conninfo_uri_parse_options)."""
    rest = url.split("://", 1)[1] if "://" in url else url
    end = re.search(r"[@/]", rest)
    if end is None or end.group() != "@":
        return None, rest
    return rest[: end.start()], rest[end.end() :]


def mask_query_password(rest: str) -> str:
    """`rest` with the value of a secret query parameter (`SECRET_OPTIONS`) replaced by ***."""
    if "?" not in rest:
        return rest
    head, query = rest.split("?", 1)
    pairs = [pair.partition("=") for pair in query.split("&")]
    masked = [
        f"{key}={MASK}" if sep and unquote(key) in SECRET_OPTIONS else key + sep + value for key, sep, value in pairs
    ]
    return head + "?" + "&".join(masked)


def password_texts(url: str) -> tuple[str, ...]:
    """Every text `url` may hold its password as, whichever parser is right: libpq's userinfo,
    `urllib`'s (the last '@'), a `password=` or `sslpassword=` parameter; each raw, decoded and
    encoded."""
    found: list[str] = []
    userinfo, rest = split_userinfo(url)
    if userinfo is not None and ":" in userinfo:
        found.append(userinfo.split(":", 1)[1])
    authority = (url.split("://", 1)[1] if "://" in url else url).rpartition("@")[0]
    if ":" in authority:
        found.append(authority.split(":", 1)[1])
    for key, value in re.findall(r"[?&]([^=&]*)=([^&]*)", url):
        if unquote(key) in SECRET_OPTIONS:
            found.append(value)
    return tuple(dict.fromkeys(text for raw in found for text in (*encoded(raw), *encoded(unquote(raw)))))


def encoded(password: str | None) -> tuple[str, ...]:
    """A password as written and percent-encoded (the two ways a message could carry it)."""
    return (password, quote(password, safe="")) if password else ()


def _abandon(conn: Any, pipeline: Any, tx: Any | None, exc: BaseException) -> bool:
    """End a transaction that failed: its pipeline, psycopg's transaction object, and the
    server's transaction. A statement that fails in a pipeline makes the server skip what
    follows it up to the pipeline's Sync, a ROLLBACK (or COMMIT) queued behind it too: so the
    pipeline is synced first, and the ROLLBACK sent after it. A connection left in an aborted
    transaction refuses every later statement (25P02): one `Memory` was unusable after one lock
    timeout. Returns whether the transaction had committed (the failure came after its COMMIT):
    its COMMIT was queued and the server is idle after the Sync. A failed statement before the
    COMMIT leaves it in the aborted transaction instead; a COMMIT of ours cannot fail and leave it
    idle (read committed, no deferred constraints): it fails with the connection."""
    with contextlib.suppress(Exception):
        pipeline.__exit__(type(exc), exc, exc.__traceback__)
    from psycopg.pq import TransactionStatus  # a failure's path only

    committed = tx is None and conn.info.transaction_status == TransactionStatus.IDLE
    if tx is not None:  # not ended yet (ended, its COMMIT was queued: once only)
        with contextlib.suppress(Exception):
            tx.__exit__(type(exc), exc, exc.__traceback__)
    with contextlib.suppress(Exception):
        conn.rollback()  # what is left (a COMMIT skipped after a failed write); no-op when idle
    return committed


class Database:
    """Connections to one database (see the module docstring)."""

    def __init__(self, url: str, pooled: bool, on_connect: Callable[[Any], None]) -> None:
        self.psycopg = import_psycopg()
        self.url = url
        self.target = read_url(url)
        self.shown = self.target.shown
        if self.target.malformed:  # bad input, like any other bad setting (exit 4), before any connection
            raise InvalidInput(
                f"PostgreSQL store {self.shown}: the store URL is malformed: {self.target.malformed}; "
                "write it as postgresql://user:password@host:port/dbname, percent-encoding the password's "
                "'@', '/', '?', '#' and spaces (%40, %2F, %3F, %23, %20)",
                {"field": "store"},
            )
        self.pooled = pooled
        self._on_connect = on_connect  # once per process, on the first connection (migrations)
        self._ready = False
        self._setup = threading.Lock()
        self._pool: Any = None
        self._single: Any = None
        self._single_lock = threading.RLock()
        self._local = threading.local()
        self.early_release = False  # see backend.EARLY_RELEASE (set on the first connection)
        # only the statements run with `prepare=True` are prepared (see PREPARE_ASKED_ONLY)
        self._kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": PREPARE_ASKED_ONLY}
        for name in DRIVER_LOGGERS:  # the pool logs each failed reconnection, with libpq's message
            logging.getLogger(name).addFilter(self._scrub_record)
        if "connect_timeout" not in url:
            self._kwargs["connect_timeout"] = CONNECT_TIMEOUT

    # -- opening -----------------------------------------------------------------------------

    def _connect(self) -> Any:
        with self.errors():
            conn = self.psycopg.connect(self.url, **self._kwargs)
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _prepare(self, conn: Any) -> None:
        """Migrations on the process's first connection, then pgvector's types on each."""
        if not self._ready:
            with self._setup:
                if not self._ready:
                    with self.errors():
                        self._on_connect(conn)
                    self._ready = True
        from pgvector.psycopg import register_vector

        with self.errors():
            register_vector(conn)

    def _open_pool(self) -> Any:
        with self._setup:
            if self._pool is not None:
                return self._pool
        first = self._connect()  # fails fast, with the server's own reason, and migrates
        first.close()
        try:
            from psycopg_pool import ConnectionPool
        except ImportError:
            raise StoreUnavailable(f"a postgresql:// store needs psycopg_pool: {EXTRA}") from None
        with self._setup:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.url,
                    min_size=POOL_MIN,
                    max_size=POOL_MAX,
                    kwargs=self._kwargs,
                    configure=self._prepare,
                    check=check_idle_connection,  # a restarted server's dead connections are replaced
                    timeout=POOL_WAIT,
                    name="mem",
                    open=True,
                )
        return self._pool

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """The thread's current (transaction) connection, else a free one in autocommit."""
        current = getattr(self._local, "conn", None)
        if current is not None:
            self.settle()
            yield current
            return
        if self.pooled:
            pool = self._pool or self._open_pool()
            with self.errors(), pool.connection() as conn:
                yield conn
            return
        with self._single_lock:
            if self._single is None or self._single.closed or self._single.broken:
                self._single = self._connect()
            with self.errors():
                yield self._single

    def current(self) -> Any:
        """The thread's transaction connection (None outside one), without settling the
        transaction's deferred read: for a read queued before it (see `settle`)."""
        return getattr(self._local, "conn", None)

    def defer(self, settle: Callable[[], None] | None) -> None:
        """`settle()` takes what the transaction's prelude read; it runs before the block's next
        use of the connection (`connection`, `settle`), so that a read the block queues first
        (`current`) travels in the prelude's round trip."""
        self._local.settle = settle

    def settle(self) -> None:
        settle = getattr(self._local, "settle", None)
        if settle is not None:
            self._local.settle = None
            settle()

    @property
    def ready(self) -> bool:
        """Whether this process has connected (and migrated) already."""
        return self._ready

    @property
    def in_transaction(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    @contextlib.contextmanager
    def transaction(
        self, prelude: Callable[[Any], Any] | None = None, after_commit: Callable[[Any], Any] | None = None
    ) -> Iterator[Any]:
        """A transaction made the thread's current one: committed when the block exits normally,
        rolled back when it raises. A nested call joins the outer transaction. `prelude(conn)`
        runs first, sent with the BEGIN in one round trip; the block gets (conn, what prelude
        returned).

        The whole transaction runs in pipeline mode: a statement whose result nobody fetches (the
        writes of `scope.append`) is queued and travels with the next read, or with the COMMIT,
        so a write section costs a round trip per read, not per statement. A queued statement
        that fails raises at that next read or at the commit: the block then writes nothing.
        `after_commit(conn)` queues statements that run after the COMMIT, in the same round trip
        (outside the transaction: in autocommit); the block exits when they are done."""
        if self.in_transaction:
            yield self._local.conn, None
            return
        with self.connection() as conn:
            pipeline = conn.pipeline()
            # psycopg's `conn.transaction()` in a pipeline syncs right after its BEGIN (a round
            # trip of its own, 0.5 ms a write); a Transaction entered in a pipeline that has sent
            # nothing yet needs no sync: the connection is known to be idle
            tx = self.psycopg.Transaction(conn)
            first = None
            with self.errors():
                pipeline.__enter__()
                try:
                    tx.__enter__()
                    first = prelude(conn) if prelude is not None else None
                except BaseException as exc:
                    _abandon(conn, pipeline, tx, exc)
                    raise
            self._local.conn = conn
            try:
                yield conn, first
            except BaseException as exc:
                self._local.conn = None
                _abandon(conn, pipeline, tx, exc)
                raise
            self._local.conn = None
            with self.errors():
                ended = False
                try:
                    tx.__exit__(None, None, None)  # COMMIT, queued after the writes
                    ended = True
                    if after_commit is not None:
                        after_commit(conn)
                    pipeline.__exit__(None, None, None)  # the round trip: writes, COMMIT, after_commit
                except BaseException as exc:
                    committed = _abandon(conn, pipeline, None if ended else tx, exc)
                    if not (committed and after_commit is not None and isinstance(exc, Exception)):
                        raise
                    # the COMMIT was done and what followed it failed (a cancel of the flush that
                    # makes the write durable): the write stands, so it is flushed again rather
                    # than reported failed (a client would send it again: a second event)
                    after_commit(conn)

    def read_generic(
        self, statement: Any, params: dict[str, Any], settings: dict[str, str] | None = None
    ) -> list[tuple]:
        """The rows of a prepared read of lookups by key, run under its generic plan (see
        GENERIC_READ) with `settings` too: BEGIN, the settings (local to the transaction, so that
        no other statement of the connection has them), the read and COMMIT travel in one round
        trip. In a transaction already (a write section's), it runs as that transaction's
        statements do, with `settings` (local to that transaction)."""
        return self.read_generic_many(statement, [params], settings)[0]

    def read_generic_many(
        self, statement: Any, many: list[dict[str, Any]], settings: dict[str, str] | None = None
    ) -> list[list[tuple]]:
        """`read_generic` of `statement` with each of `many` parameters, in one round trip."""

        def setup(conn: Any) -> None:
            for key, value in (settings or {}).items():
                conn.execute("SELECT set_config(%s, %s, true)", [key, value], prepare=True)

        if self.in_transaction:
            with self.connection() as conn:
                setup(conn)
                return [conn.execute(statement, params, prepare=True).fetchall() for params in many]

        def read(conn: Any) -> Any:
            conn.execute(SET_GENERIC_READ, prepare=True)
            setup(conn)
            return [conn.execute(statement, params, prepare=True) for params in many]

        with self.transaction(read) as (_, cursors):  # a failure is rolled back as a write's is
            pass
        with self.errors():
            return [cursor.fetchall() for cursor in cursors]  # taken at the pipeline's end, with the COMMIT's answer

    def close(self) -> None:
        for name in DRIVER_LOGGERS:
            logging.getLogger(name).removeFilter(self._scrub_record)
        if self._pool is not None:
            with contextlib.suppress(Exception):
                self._pool.close()
            self._pool = None
        with self._single_lock:
            if self._single is not None:
                with contextlib.suppress(Exception):
                    self._single.close()
                self._single = None

    # -- errors ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """psycopg's errors (and the pool's) as `StoreUnavailable`, one line, password masked."""
        try:
            yield
        except StoreUnavailable:
            raise
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg_pool"):  # PoolTimeout (an OperationalError), PoolClosed
                raise self.pool_failure() from None
            if not isinstance(exc, self.psycopg.Error):
                raise
            if str(getattr(exc, "sqlstate", None) or "").startswith("54"):  # program_limit_exceeded: a value too big
                text = self.scrub(first_line(str(exc)))
                raise InvalidInput(f"too big for the PostgreSQL store: {text}", {"sqlstate": exc.sqlstate}) from None
            if getattr(exc, "sqlstate", None) == "42501":  # insufficient_privilege: the role may not (a reindex)
                text = self.scrub(first_line(str(exc)))
                raise RoleRefused(
                    f"PostgreSQL store {self.shown}: this role may not do that ({text}); run it as the store's owner",
                    {"sqlstate": exc.sqlstate},
                ) from None
            if getattr(exc, "sqlstate", None) in _CANCELLED_STATES:
                raise self.cancelled(exc) from None
            if "different vector dimensions" in str(exc):  # pgvector: a vector of the old embedder's size
                raise self.embedder_changed() from None
            if self.bad_setting(exc):  # a bad setting (exit 4), not a server to wait for (exit 7)
                text = self.scrub(first_line(str(exc)))
                message = f"PostgreSQL store {self.shown}: a setting of the store URL is invalid ({text})"
                raise InvalidInput(message) from None
            if isinstance(exc, self.psycopg.OperationalError) or getattr(exc, "sqlstate", None) in _RETRYABLE_STATES:
                raise self.unavailable(exc) from None
            raise self.failure(exc) from None

    def bad_setting(self, exc: Exception) -> bool:
        """Whether the driver, or the server starting a session, refused a setting the URL gives."""
        found = _BAD_SETTING.search(str(exc)) if getattr(exc, "sqlstate", None) in (None, *PARAMETER_STATES) else None
        if found is None:
            return False
        name = next(group for group in found.groups() if group).lower()
        return name in ("integer", "port") or name in self.url.lower()

    def pool_failure(self) -> StoreUnavailable:
        """No connection of the pool became free or could be made in POOL_WAIT: the server is
        down or restarting (the pool keeps reconnecting behind), or every connection is busy.
        Both pass: the request can be sent again."""
        return retryable(
            StoreUnavailable(
                f"PostgreSQL store {self.shown}: no connection became free or could be made in {POOL_WAIT:g} s"
            )
        )

    def embedder_changed(self) -> StoreUnavailable:
        """A statement met vectors of two sizes: another process's `mem reindex` changed the
        embedder while this request waited for it (its lock holds the table). The next request
        embeds with the new one (outside audit 32c: a raw SQL error, not retryable)."""
        failure = StoreUnavailable(
            f"PostgreSQL store {self.shown}: the store's embedder changed (mem reindex) while this request ran: "
            "send it again"
        )
        failure.retryable = True
        return failure

    def cancelled(self, exc: Exception) -> StoreUnavailable:
        """The server cancelled a statement (a lock_timeout or statement_timeout of the role or
        the database, a cancel from an administrator): the request can be sent again (a write
        section rolled back; one whose COMMIT was done is flushed again, see `transaction`). It
        was "cannot reach the server", not retryable."""
        text = self.scrub(first_line(str(exc)))
        return retryable(
            StoreUnavailable(
                f"PostgreSQL store {self.shown}: the server cancelled a statement ({text})",
                {"sqlstate": getattr(exc, "sqlstate", None)},
            )
        )

    def unavailable(self, exc: Exception) -> StoreUnavailable:
        """The one-line error for a server that cannot be used."""
        text = self.scrub(first_line(str(exc)))
        low = text.lower()
        if "password authentication failed" in low or "authentication failed" in low or "no password supplied" in low:
            why = f"the server refused the credentials ({text}); check the user and password of the store URL"
            retry = False
        elif "does not exist" in low and "database" in low:
            name = self.target.database
            why = f"{text}; create it first (CREATE DATABASE {quote_ident(name)};)"
            retry = False
        elif "permission denied" in low or "not permitted" in low or "pg_hba.conf" in low:
            why = text
            retry = False
        elif getattr(exc, "sqlstate", None) in ("40P01", "40001"):  # it was "cannot reach the server" (audit 33a)
            why = f"the server ended this request to resolve a conflict with another one ({text}): send it again"
            retry = True
        else:
            why = f"cannot reach the server: {text}"
            retry = bool(_RETRYABLE.search(low)) or getattr(exc, "sqlstate", None) in _RETRYABLE_STATES
        failure = StoreUnavailable(
            f"PostgreSQL store {self.shown}: {why}", {"sqlstate": getattr(exc, "sqlstate", None)}
        )
        return retryable(failure) if retry else failure

    def failure(self, exc: Exception) -> StoreUnavailable:
        """A statement the server refused for another reason (a bug, a schema changed by hand)."""
        text = self.scrub(first_line(str(exc)))
        state = getattr(exc, "sqlstate", None)
        if state is None:  # the driver's refusal, not the server's
            return StoreUnavailable(f"PostgreSQL store {self.shown}: the driver refused the request ({text})")
        return StoreUnavailable(
            f"PostgreSQL store {self.shown}: the server refused a statement ({state}: {text})", {"sqlstate": state}
        )

    def scrub(self, text: str) -> str:
        """Belt and braces: libpq never echoes a password, but no message of ours shows one, in
        any of the texts the URL may hold it as (a password of one or two characters is left:
        masking every 'a' of a message would hide it, and such a password protects nothing)."""
        text = text.replace(self.url, self.shown)
        for secret in sorted(self.target.secrets, key=len, reverse=True):
            if len(secret) >= 3:
                text = text.replace(secret, MASK)
        return text

    def _scrub_record(self, record: logging.LogRecord) -> bool:
        """A log record of the driver, scrubbed as our messages are (a logging filter). The
        driver's note that an aborted pipeline was closed is dropped: the error that aborted it
        is the one reported, on its one line."""
        with contextlib.suppress(Exception):  # a record whose arguments do not format is left as it is
            # one line, as our own errors: libpq's messages go on ("\n\tIs the server running ...")
            record.msg, record.args = " ".join(self.scrub(record.getMessage()).split()), None
        text = str(record.msg)
        return not ("error ignored terminating" in text and "Pipeline" in text)


def check_idle_connection(conn: Any) -> None:
    """The pool's check of a connection it hands out, without a round trip when it can tell: an
    idle connection has nothing to read, so a socket with something to read is one the server
    ended (a restart, `pg_terminate_backend`: its last message and the end of the stream are
    waiting) or sent a notice; only then is the server asked (an empty statement, which raises
    for a dead connection: the pool replaces it). The round trip psycopg_pool's own check makes
    on every checkout was a third of a retrieve's round trips."""
    import select

    from psycopg import OperationalError, pq

    if conn.closed or conn.broken:
        raise OperationalError("the connection is closed")
    if conn.info.transaction_status != pq.TransactionStatus.IDLE:
        raise OperationalError("the connection was returned inside a transaction")
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    if readable:
        conn.execute("")


def retryable(failure: StoreUnavailable) -> StoreUnavailable:
    """`failure` marked retryable, and saying so for front doors without the flag (MCP)."""
    failure.retryable = True
    failure.message += " (retryable: the request can be sent again)"
    return failure


def first_line(text: str) -> str:
    """libpq's message without its hint lines and its 'connection failed:' prefix."""
    line = text.strip().splitlines()[0] if text.strip() else "unknown error"
    for prefix in ("connection failed: ",):
        if line.startswith(prefix):
            line = line[len(prefix) :]
    return re.sub(r"\s+", " ", line).strip()


def quote_ident(name: str) -> str:
    """An identifier as SQL writes it (for the text of a message, never for a statement)."""
    return name if re.fullmatch(r"[a-z_][a-z0-9_]*", name) else '"' + name.replace('"', '""') + '"'

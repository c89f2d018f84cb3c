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
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

from ...errors import StoreUnavailable

EXTRA = "pip install 'a2e-mem[postgres]'"
CONNECT_TIMEOUT = 10  # seconds, unless the URL sets connect_timeout (libpq waits forever by default)
POOL_MIN, POOL_MAX = 1, 4
POOL_WAIT = 15.0  # seconds a request waits for a free connection of the pool
MASK = "***"

# libpq's words for a server that may come back (the request can be sent again)
_RETRYABLE = re.compile(
    r"connection refused|could not connect|timeout expired|timed out|server closed the connection|"
    r"terminating connection|the database system is (starting up|shutting down|in recovery mode)|"
    r"no such file or directory|connection is lost|consuming input failed|sending query failed|"
    r"connection (is )?closed|ssl syscall|broken pipe|connection reset",
    re.IGNORECASE,
)
_RETRYABLE_STATES = {"57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004", "53300", "40001", "40P01"}


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreUnavailable(f"a postgresql:// store needs psycopg: {EXTRA}") from None
    return psycopg


def redact_url(url: str) -> str:
    """`url` with its password (in the authority or a `password=` parameter) replaced by ***."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            if ":" in userinfo:
                user, _, password = userinfo.partition(":")
                netloc = f"{user}:{MASK}@{hostport}" if password else f"{user}@{hostport}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(k == "password" for k, _ in pairs):
                query = urlencode([(k, MASK if k == "password" else v) for k, v in pairs], safe="/*")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return f"{url.split(':', 1)[0]}://{MASK}"  # not parseable: show nothing of it


def url_password(url: str) -> str | None:
    """The password written in `url`, if any (so that messages can be checked never to hold it)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.password:
        return unquote(parts.password)
    for key, value in parse_qsl(parts.query):
        if key == "password":
            return value
    return None


def database_name(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "?"
    for key, value in parse_qsl(parts.query):
        if key == "dbname":
            return value
    return unquote(parts.path.lstrip("/")) or "?"


class Database:
    """Connections to one database (see the module docstring)."""

    def __init__(self, url: str, pooled: bool, on_connect: Callable[[Any], None]) -> None:
        self.psycopg = import_psycopg()
        self.url = url
        self.shown = redact_url(url)
        self.password = url_password(url)
        self.pooled = pooled
        self._on_connect = on_connect  # once per process, on the first connection (migrations)
        self._ready = False
        self._setup = threading.Lock()
        self._pool: Any = None
        self._single: Any = None
        self._single_lock = threading.RLock()
        self._local = threading.local()
        self._kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": None}
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
                    check=ConnectionPool.check_connection,  # a restarted server's dead connections are replaced
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

    @property
    def ready(self) -> bool:
        """Whether this process has connected (and migrated) already."""
        return self._ready

    @property
    def in_transaction(self) -> bool:
        return getattr(self._local, "conn", None) is not None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A transaction made the thread's current one: committed when the block exits normally,
        rolled back when it raises. A nested call joins the outer transaction."""
        if self.in_transaction:
            yield self._local.conn
            return
        with self.connection() as conn:
            with self.errors():
                tx = conn.transaction()
                tx.__enter__()
            self._local.conn = conn
            try:
                yield conn
            except BaseException as exc:
                self._local.conn = None
                with contextlib.suppress(Exception):
                    tx.__exit__(type(exc), exc, exc.__traceback__)
                raise
            self._local.conn = None
            with self.errors():
                tx.__exit__(None, None, None)

    def close(self) -> None:
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
        except self.psycopg.Error as exc:
            if isinstance(exc, self.psycopg.OperationalError) or getattr(exc, "sqlstate", None) in _RETRYABLE_STATES:
                raise self.unavailable(exc) from None
            raise self.failure(exc) from None
        except Exception as exc:
            if type(exc).__module__.startswith("psycopg_pool"):  # PoolTimeout, PoolClosed
                failure = StoreUnavailable(
                    f"PostgreSQL store {self.shown}: no connection became free or could be made in "
                    f"{POOL_WAIT:.0f} s (retryable)"
                )
                failure.retryable = True
                raise failure from None
            raise

    def unavailable(self, exc: Exception) -> StoreUnavailable:
        """The one-line error for a server that cannot be used."""
        text = self.scrub(first_line(str(exc)))
        low = text.lower()
        if "password authentication failed" in low or "authentication failed" in low or "no password supplied" in low:
            why = f"the server refused the credentials ({text}); check the user and password of the store URL"
            retry = False
        elif "does not exist" in low and "database" in low:
            name = database_name(self.url)
            why = f"{text}; create it first (CREATE DATABASE {quote_ident(name)};)"
            retry = False
        elif "permission denied" in low or "not permitted" in low or "pg_hba.conf" in low:
            why = text
            retry = False
        else:
            why = f"cannot reach the server: {text}"
            retry = bool(_RETRYABLE.search(low)) or getattr(exc, "sqlstate", None) in _RETRYABLE_STATES
        failure = StoreUnavailable(
            f"PostgreSQL store {self.shown}: {why}" + (" (retryable)" if retry else ""),
            {"sqlstate": getattr(exc, "sqlstate", None)},
        )
        failure.retryable = retry
        return failure

    def failure(self, exc: Exception) -> StoreUnavailable:
        """A statement the server refused for another reason (a bug, a schema changed by hand)."""
        text = self.scrub(first_line(str(exc)))
        state = getattr(exc, "sqlstate", None)
        return StoreUnavailable(
            f"PostgreSQL store {self.shown}: the server refused a statement ({state}: {text})", {"sqlstate": state}
        )

    def scrub(self, text: str) -> str:
        """Belt and braces: libpq never echoes a password, but a message never shows one."""
        for secret in (self.password, quote(self.password or "", safe="")):
            if secret and len(secret) >= 3:
                text = text.replace(secret, MASK)
        return text.replace(self.url, self.shown)


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

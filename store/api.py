"""The Python API: `Memory`, one object for everything `mem` does.

    >>> import tempfile
    >>> from a2e_mem import Memory
    >>> with Memory(home=tempfile.mkdtemp()) as m:
    ...     m.store("The user prefers dark mode", key="theme", tier="semantic")
    ...     m.store("Flying to Lisbon in June for a conference", key="trip")
    ...     best = m.retrieve("when is the conference in Lisbon?")["entries"][0]
    ...     print(best["content"])
    {'key': 'theme'}
    {'key': 'trip'}
    Flying to Lisbon in June for a conference

What is where:

- `Memory(home, store, namespace, agent, embedder)` opens the store (files under `home`, or a
  `postgresql://` URL in `store`, as `--home` and `--store` do for the CLI). `store`, `retrieve`
  and `forget` are A2E memory in (namespace, agent): its episodic and semantic tiers. A session
  (`m.session()`, a context manager) adds a working tier of its own.
- The codebolt tool groups are attributes: `m.kv`, `m.json`, `m.todos`, `m.markdown`,
  `m.episodes`, `m.persistent`, and the knowledge graph `m.graph`. Each works in the namespace of
  its `Memory`; `m.using(namespace=...)` gives a view on another one (same store, nothing reopened).
- Upkeep: `stats`, `namespaces`, `delete_namespace`, `export` / `export_to`, `import_records` /
  `import_from`, `gc`, `doctor`, `reindex`.
- `with Memory(...) as m:` closes the store at the end (a PostgreSQL store: its connections);
  else call `m.close()`. Any call after that, on it or on its views, groups and sessions,
  raises `Closed`; closing again does nothing.
- Threads: one `Memory` may be shared by several threads. Its calls are serialised: the open
  store has one (re-entrant) lock, which every public method of the `Memory`, of its views
  (`using`), groups and sessions holds while it runs, so a call waits for the one running in
  another thread. For work in parallel, use processes, each with its own `Memory`: the store
  (its file locks, or the database) keeps them apart. `m.service` itself is not guarded.
- A lone string (or dict) where a list is expected is one item: `tags="urgent"` is the tag
  "urgent", never its characters; the same for keys, entity names, keywords and input scopes.

Every method delegates to one `MemoryService` method (`m.service`): the CLI, `serve-stdio` and
`serve-mcp` run the same code. The servers themselves are processes: start them with
`mem serve-stdio`, `mem serve-mcp`, `mem ui`.

Return values are the plain dicts and lists the service returns, typed here (`Entry`,
`Retrieved`, `StoreResult`; `Record` for a codebolt record) rather than converted into classes:
they are the very objects the MCP tools and the A2E wire carry, with the same field names
(`memoryId`, `created_at`, ...), so the README, the spec and `mem ... --format json` describe
them too, and they go to `json.dumps` as they are.

Failures raise the store's own exceptions, re-exported here. Each has a `code` (the A2E wire's
error code), an `exit_code` (what `mem` exits with), a `message` and a `detail` dict:

=================  ==================  =========  ===============================================
exception          code                exit_code  raised when
=================  ==================  =========  ===============================================
MemError           runtime_error       1          base class of all of them; an I/O failure
NotFound           memory_not_found    3          an unknown key, ID, session or entity
InvalidInput       schema_violation    4          arguments that fail validation
Conflict           conflict            4          an archived log, a disabled configuration
MemoryFull         memory_full         5          a namespace or entry size limit was hit
Unauthorized       unauthorized        6          the policy forbids it (semantic writers)
StoreMismatch      runtime_error       1          vectors made by another embedder: `reindex`
StoreUnavailable   runtime_error       7          the database is down or refuses us
RoleRefused        unauthorized        6          a PostgreSQL role may not (`reindex` as an agent)
Damaged            runtime_error       1          a file failed its checksum: `doctor(repair)`
Closed             runtime_error       1          a call on a `Memory` closed already (or its views)
=================  ==================  =========  ===============================================

    >>> from a2e_mem import Memory, NotFound
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> try:
    ...     m.kv.get("nothing here")
    ... except NotFound as exc:
    ...     print(exc.code, exc.exit_code)
    memory_not_found 3
    >>> m.close()
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from . import __all__ as __all__  # the public names, listed once in store/__init__.py
from .errors import (
    Closed,
    Conflict,
    Damaged,
    InvalidInput,
    MemError,
    MemoryFull,
    NotFound,
    RoleRefused,
    StoreMismatch,
    StoreUnavailable,
    Unauthorized,
)
from .ops import a2e
from .ops.graph import SEARCH_LIMIT
from .service import MemoryService

Key = str | dict[str, Any]  # an A2E key: an object, or a string s standing for {"key": s}
Record = dict[str, Any]  # a codebolt record, as its tool returns it
Records = list[Record]  # (named here: the groups' `list` methods hide the builtin in their class)
Strings = list[str]
Progress = Callable[[int, int], None]  # progress(done, total)
_MISSING: Any = object()


class Entry(TypedDict, total=False):
    """An A2E memory entry as `retrieve` returns it (`relevance` in [0, 1]; `explain` on demand)."""

    key: dict[str, Any]
    content: Any
    tier: str
    tags: list[str]
    source: str
    score: float
    ttl: int
    created_at: float
    updated_at: float
    relevance: float
    explain: dict[str, Any]


class Retrieved(TypedDict, total=False):
    """`entries` best first; `total` counts the matches before `limit`; `warnings` if any."""

    entries: list[Entry]
    total: int
    warnings: list[str]


class StoreResult(TypedDict, total=False):
    """The keys stored, and one `entries[i]: reason` line per entry refused (the others are stored)."""

    stored: list[dict[str, Any]]
    errors: list[str]
    warnings: list[str]


def _key_list(keys: Key | Sequence[Key]) -> list[Key]:
    """One key or several: a lone string is one key (never its characters)."""
    return _items(keys, "keys")


def _flag(value: Any, name: str) -> bool:
    """A yes-or-no argument, which must be a bool: `everything="false"` is a truthy string, and
    taken as given it would empty a tier."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be True or False, not {type(value).__name__}")
    return value


def _text(value: Any, name: str, optional: bool = False) -> Any:
    """A text argument (or None where `optional`)."""
    if (value is None and optional) or isinstance(value, str):
        return value
    raise InvalidInput(f"{name} must be a string, not {type(value).__name__}")


def _instant(value: Any, name: str) -> str | None:
    """A time bound (`since`, `until`) as the store reads it: text as given, a `datetime` or a
    `date` as ISO 8601 (a datetime without a zone is UTC, as such a text is), None as none.
    Unix seconds are refused: a number is no date, and text says which one is meant."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dt.datetime):
        return value.isoformat() if value.tzinfo else value.replace(tzinfo=dt.timezone.utc).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    raise InvalidInput(f"{name} must be a datetime, a date or an ISO 8601 text, not {type(value).__name__}")


def _path(value: Any, name: str = "path") -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidInput(f"{name} must be a path (str or Path), not {type(value).__name__}")
    return Path(value)


def _count(value: Any, name: str, optional: bool = True) -> Any:
    """A whole number argument (limit, offset; None where `optional`)."""
    if (value is None and optional) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise InvalidInput(f"{name} must be a whole number, not {type(value).__name__}")


def _items(given: Any, what: str = "tags") -> list[Any]:
    """One item or several: a lone string or dict is one item (never its characters or keys),
    None is none; `InvalidInput` for anything else that is not a collection (a number)."""
    if given is None:
        return []
    if isinstance(given, (str, dict)):
        return [given]
    try:
        return list(given)
    except TypeError:
        raise InvalidInput(f"{what} must be a string or a list, not {type(given).__name__}") from None


def _lines(given: Any, what: str = "lines") -> list[str | bytes]:
    """Lines of text: a list of strings or bytes, or one text (its lines); `InvalidInput` for
    anything else (a number, a list of numbers)."""
    if isinstance(given, (str, bytes)):
        return list(given.splitlines())
    lines = _items(given, what)
    if not all(isinstance(line, (str, bytes)) for line in lines):
        raise InvalidInput(f"{what} must be strings or bytes, one line each")
    return lines


def _callback(value: Any, name: str) -> Any:
    if value is not None and not callable(value):
        raise InvalidInput(f"{name} must be a function or None, not {type(value).__name__}")
    return value


class _Guard:
    """The lock and the open or closed state of one open store, shared by its `Memory`, the
    views, groups and sessions made from it: the store's engine is not thread-safe (the shard
    mirrors, journal offsets and temporary files of one process), so its calls go one at a time."""

    def __init__(self, lock: threading.RLock) -> None:
        self.lock = lock  # the service's: see `MemoryService.lock`
        self.closed = False


def _serialised(method: Callable[..., Any]) -> Callable[..., Any]:
    """`method`, run under its object's guard: one call at a time per open store, `Closed` once
    the store was closed."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        guard: _Guard = self._guard
        with guard.lock:
            if guard.closed:
                raise Closed(f"this Memory is closed; {method.__qualname__} needs an open one (open a new Memory)")
            return method(self, *args, **kwargs)

    return call


def _serialise_public_methods(cls: type) -> type:
    """Class decorator: every public method the class defines runs `_serialised` (a method added
    later is covered without anyone remembering to; `close` methods guard themselves)."""
    for name, member in list(vars(cls).items()):
        if callable(member) and not name.startswith("_") and not getattr(member, "_guards_itself", False):
            setattr(cls, name, _serialised(member))
    return cls


def _guards_itself(method: Callable[..., Any]) -> Callable[..., Any]:
    method._guards_itself = True  # type: ignore[attr-defined]
    return method


def _locked_lines(guard: _Guard, lines: Iterator[bytes]) -> Iterator[bytes]:
    """`lines`, each one read under the guard: an export read slowly by its caller does not hold
    the store for the other threads between two lines."""
    while True:
        with guard.lock:
            if guard.closed:
                raise Closed("this Memory was closed during an export")
            line = next(lines, None)
        if line is None:
            return
        yield line


def _read_file(path: str | Path) -> bytes:
    """A file's bytes; `NotFound` naming it if it does not exist."""
    try:
        return Path(path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise NotFound(f"no such file: {path}", {"path": str(path)}) from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a folder, not a file", {"path": str(path)}) from None


@_serialise_public_methods
class _Tiers:
    """`store`, `retrieve` and `forget` over one A2E scope: a `Memory`'s (namespace, agent), or a
    `Session`'s, which adds its working tier."""

    service: MemoryService
    _guard: _Guard

    def _scope(self) -> a2e.Session:
        raise NotImplementedError

    def store(
        self,
        content: Any,
        key: Key | None = None,
        *,
        tier: str = "episodic",
        tags: Sequence[str] = (),
        source: str = "",
        score: float = 1.0,
        ttl: int = 0,
    ) -> dict[str, Any]:
        """Store one entry and return its key. `content` is any JSON value; without a `key` the
        key is a hash of the content (as `mem store`), so the same content is stored once.
        Storing a key again in the same tier replaces its entry. `ttl`: seconds to live (0: ever).
        Raises `InvalidInput`, `MemoryFull` or `Unauthorized` if the entry is refused."""
        scope = self._scope()
        if key is None:
            key = a2e.content_key(content, self.service.config.for_namespace(scope.namespace).redact)
        entry = {"key": key, "content": content, "tier": tier, "tags": _items(tags), "source": source,
                 "score": score, "ttl": ttl}  # fmt: skip
        result = self.service.store(scope, [entry])
        if result["errors"]:  # refused for lack of room or permission, the service raised already
            raise InvalidInput(result["errors"][0].removeprefix("entries[0]: "), {"errors": result["errors"]})
        return cast(dict[str, Any], result["stored"][0])

    def store_many(self, entries: Iterable[dict[str, Any]], progress: Progress | None = None) -> StoreResult:
        """Store A2E `MemoryEntry` dicts (key, content, tier, tags, source, score, ttl) in one go:
        the valid ones are stored, each other one is named in `errors` by its index (the request
        is refused as a whole only when none could be stored for lack of room or permission).
        An entry without a `tier` goes to the episodic tier, as with `store`."""
        given = [{"tier": "episodic", **e} if isinstance(e, dict) else e for e in _items(entries, "entries")]
        return cast(StoreResult, self.service.store(self._scope(), given, _callback(progress, "progress")))

    def retrieve(
        self,
        query: str | None = "",
        *,
        keys: Key | Sequence[Key] = (),
        tags: Sequence[str] = (),
        tier: str = "",
        limit: int = 10,
        min_score: float = 0.0,
        explain: bool = False,
        since: str | dt.date | None = None,
        until: str | dt.date | None = None,
    ) -> Retrieved:
        """Entries matching every filter given, best first: `query` ranks by meaning and words,
        `keys` are exact, an entry must carry every tag, `tier` is one tier (default: all),
        `since` / `until` keep the entries whose own time is in [since, until) (a `datetime`, a
        `date`, an ISO-8601 text or a date phrase such as "last week", as `mem retrieve --since`;
        a datetime without a zone is UTC). No `query`
        (None or ""): every entry that passes the filters, with relevance 1.0."""
        text = _text(query, "query", optional=True) or ""
        return cast(
            Retrieved,
            self.service.retrieve(
                self._scope(), keys=_key_list(keys), query=text, tags=_items(tags), tier=tier,
                limit=_count(limit, "limit", optional=False), min_score=min_score,
                explain=_flag(explain, "explain"), since=_instant(since, "since"), until=_instant(until, "until"),
            ),
        )  # fmt: skip

    def forget(
        self,
        keys: Key | Sequence[Key] | None = (),
        *,
        tags: Sequence[str] = (),
        tier: str = "episodic",
        everything: bool = False,
    ) -> int:
        """Delete the entries of `tier` with these keys and/or tags; returns how many. Emptying the
        whole tier takes `everything=True` (never implied: without keys or tags, `InvalidInput`)."""
        scope, keys = self._scope(), _key_list(keys or ())  # None: no keys (with everything=True)
        everything = _flag(everything, "everything")
        return self.service.forget(scope, keys=keys, tags=_items(tags), tier=tier, everything=everything)


@_serialise_public_methods
class Memory(_Tiers):
    """A store, opened in one namespace as one agent.

    `home`: where the configuration (and, without a store URL, the store) lives; default
    `MEM_HOME`, else the user data directory. `store`: a `postgresql://` URL (default
    `MEM_STORE`, else `config.json`'s "store", else files under `home`). `embedder`: `static`
    (the default), `minilm` or `hash`. `pooled`: keep a connection pool to a database store, for
    a long-lived, multi-threaded program.

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp(), namespace="app", agent="planner")
    >>> m.store({"language": "python"}, key={"topic": "prefs"}, tags=["preferences"])
    {'topic': 'prefs'}
    >>> [e["content"] for e in m.retrieve(tags=["preferences"])["entries"]]
    [{'language': 'python'}]
    >>> m.forget({"topic": "prefs"})
    1
    >>> m.retrieve(tags=["preferences"])["total"]
    0
    >>> with m.session() as s:  # a working tier that lives as long as the session
    ...     s.store("draft: step 2 failed, retry with smaller batches", key="note", tier="working")
    ...     s.retrieve("why did step 2 fail?")["entries"][0]["tier"]
    {'key': 'note'}
    'working'
    >>> other = m.using(namespace="elsewhere")  # the same store, another namespace
    >>> other.kv.set("greeting", "hello")["value"]
    'hello'
    >>> [(n["namespace"], n["entries"]) for n in m.namespaces()]
    [('app', 0), ('elsewhere', 1)]
    >>> m.close()
    """

    def __init__(
        self,
        home: str | Path | None = None,
        store: str | None = None,
        namespace: str = "default",
        agent: str = "default",
        embedder: str | None = None,
        pooled: bool = False,
    ) -> None:
        home = None if home is None else _path(home, "home")
        store, embedder = _text(store, "store", optional=True), _text(embedder, "embedder", optional=True)
        self.service = MemoryService(home, embedder=embedder, store=store, pooled=_flag(pooled, "pooled"))
        self._owner, self._guard = True, _Guard(self.service.lock)
        try:
            self._set_scope(namespace, agent)
        except BaseException:  # a refused name: nobody else can close what was opened
            self.close()
            raise

    def _set_scope(self, namespace: str, agent: str) -> None:
        namespace, agent = _text(namespace, "namespace"), _text(agent, "agent")
        self._a2e_scope = self.service.scope(namespace, agent)  # checks both names
        self.kv = KeyValues(self)
        self.json = Documents(self, "json")
        self.todos = Documents(self, "todo")
        self.markdown = Markdown(self)
        self.episodes = Episodes(self)
        self.persistent = Persistent(self)
        self.graph = Graph(self)

    @property
    def namespace(self) -> str:
        return self._a2e_scope.namespace

    @property
    def agent(self) -> str:
        return self._a2e_scope.agent

    @property
    def home(self) -> Path:
        return self.service.home

    @property
    def url(self) -> str:
        """Where the store is, as shown to users (a database URL never shows its password)."""
        return self.service.backend.url

    def _scope(self) -> a2e.Session:
        return self._a2e_scope

    def using(self, namespace: str | None = None, agent: str | None = None) -> Memory:
        """A view of the same open store in another namespace and/or as another agent. Closing
        the view closes nothing: the store stays open until this `Memory` is closed."""
        view = object.__new__(Memory)
        view.service, view._owner, view._guard = self.service, False, self._guard
        view._set_scope(self.namespace if namespace is None else namespace, self.agent if agent is None else agent)
        return view

    # -- sessions ---------------------------------------------------------------------------

    def session(self, memory_id: str | None = None, *, persist: bool = False) -> Session:
        """A new session in this namespace as this agent (`memory/init`), or the open session
        `memory_id` (one made by `mem init`). `persist=True` keeps it across processes until it
        is closed, as `mem init` does; else it lives in this process only. Leaving a `with`
        block closes it and deletes its working tier."""
        if memory_id is not None:
            return Session(self.service, self.service.session(memory_id), self._guard)
        persisted = self.service.init(self.namespace, self.agent, _flag(persist, "persist"))
        return Session(self.service, persisted, self._guard)

    def sessions(self) -> Records:
        """The persisted sessions (`mem session list`): memory_id, namespace, agent, created_at."""
        return [
            {"memory_id": d["id"], **{k: d[k] for k in ("namespace", "agent", "created_at")}}
            for d in self.service.sessions()
        ]

    def close_session(self, memory_id: str) -> None:
        """Close a session and delete its working tier (`mem session close`)."""
        self.service.close_session(memory_id)

    # -- upkeep -----------------------------------------------------------------------------

    def stats(self, namespace: str | None = None) -> Records:
        """Entries, bytes, expired entries and index state per namespace and kind (`mem stats`)."""
        return self.service.stats(namespace)

    def namespaces(self) -> Records:
        """Every namespace holding anything, with its entries and bytes, by name."""
        return self.service.namespaces()

    def delete_namespace(self, namespace: str) -> Record:
        """Delete a namespace and everything in it. No confirmation is asked."""
        return self.service.delete_namespace(_text(namespace, "namespace"))

    def export(self, namespace: str | None = None) -> Iterator[bytes]:
        """The store (or one namespace) as sorted NDJSON lines, without line ends (`mem export`):
        lossless, diffable, and what `import_records` reads back. Each line is read under the
        store's lock (see Threads above)."""
        return _locked_lines(self._guard, iter(self.service.export(namespace)))

    def export_to(self, path: str | Path, namespace: str | None = None) -> int:
        """Write `export` to a file readable by its owner only; returns the number of lines. The
        file is replaced only once the export is whole: one that fails leaves the old file."""
        from .errors import Damaged
        from .paths import private_output

        count = 0
        path = _path(path)
        try:
            with private_output(path, keep_on=(Damaged,)) as out:  # a failed export keeps the old file
                for line in self.export(namespace):
                    out.write(line + b"\n")
                    count += 1
        except (FileNotFoundError, NotADirectoryError):  # as `import_from` says of its file
            raise NotFound(f"no such folder for {path}", {"path": str(path)}) from None
        except IsADirectoryError:
            raise InvalidInput(f"{path} is a folder, not a file", {"path": str(path)}) from None
        return count

    def import_records(self, lines: Iterable[bytes | str], dry_run: bool = False) -> dict[str, int]:
        """Upsert the lines of an export; counts what is new, changed and unchanged (`dry_run`:
        only counts)."""
        return self.service.import_records(_lines(lines), _flag(dry_run, "dry_run"))

    def import_from(self, path: str | Path, dry_run: bool = False) -> dict[str, int]:
        """`import_records` of an export file (`mem import FILE`)."""
        return self.import_records(_read_file(_path(path)).splitlines(), dry_run)

    def gc(self) -> int:
        """Checkpoint every scope now and purge deleted and expired records (`mem gc`); returns
        how many scopes were rewritten."""
        return self.service.checkpoint(force=True)

    def doctor(self, repair: bool = False) -> Records:
        """What is damaged in the store (nothing when healthy); `repair` salvages what it can."""
        return self.service.doctor(_flag(repair, "repair"))

    def reindex(self, embedder: str | None = None, progress: Progress | None = None) -> Record:
        """Re-embed everything with `embedder` (default: the configured one), rebuild the indexes."""
        return self.service.reindex(_text(embedder, "embedder", optional=True), progress)

    # -- lifetime ---------------------------------------------------------------------------

    @_guards_itself
    def close(self) -> None:
        """Close the store (files, a database's connections); closing again does nothing. A view
        from `using` closes nothing. Waits for a call running in another thread to end."""
        with self._guard.lock:
            if self._owner and not self._guard.closed:
                self._guard.closed = True
                self.service.close()

    def __enter__(self) -> Memory:
        if self._guard.closed:  # as every call after `close()`
            raise Closed("this Memory is closed; a `with` block needs an open one (open a new Memory)")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Memory(store={self.url!r}, namespace={self.namespace!r}, agent={self.agent!r})"


@_serialise_public_methods
class Session(_Tiers):
    """An A2E session: the tiers of its (namespace, agent), plus a working tier of its own.
    Made by `Memory.session()`; a context manager that closes it.

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> s = m.session(persist=True)  # as `mem init`: other processes can use s.memory_id
    >>> s.store("half-written plan", key="plan", tier="working")
    {'key': 'plan'}
    >>> [x["memory_id"] for x in m.sessions()] == [s.memory_id]
    True
    >>> s.close()
    >>> m.sessions()
    []
    >>> m.close()
    """

    def __init__(self, service: MemoryService, session: a2e.Session, guard: _Guard) -> None:
        self.service = service
        self._session = session
        self._guard = guard

    @property
    def memory_id(self) -> str:
        return self._session.memory_id

    @property
    def namespace(self) -> str:
        return self._session.namespace

    @property
    def agent(self) -> str:
        return self._session.agent

    def _scope(self) -> a2e.Session:
        """Looked up at every use, as the CLI's `--session`: a closed session is refused
        (`NotFound`), not written into."""
        return self.service.session(self.memory_id)

    def close(self) -> None:
        """End the session and delete its working tier; closing it again changes nothing (after
        its `Memory` was closed: `Closed`, the session stays open in a persisted store)."""
        with contextlib.suppress(NotFound):  # closed already (here, or by another process)
            self.service.close_session(self.memory_id)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({self.memory_id!r}, namespace={self.namespace!r}, agent={self.agent!r})"


class _Group:
    """A codebolt tool group, working in the namespace of its `Memory`."""

    def __init__(self, memory: Memory) -> None:
        self._memory = memory

    @property
    def _service(self) -> MemoryService:
        return self._memory.service

    @property
    def _guard(self) -> _Guard:
        return self._memory._guard

    @property
    def _ns(self) -> str:
        return self._memory.namespace


@_serialise_public_methods
class KeyValues(_Group):
    """`m.kv`: values (any JSON) under string keys (`memory_set`, `memory_get`, ...).

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> m.kv.set("user", {"name": "Ada", "likes": ["tea"]})["key"]
    'user'
    >>> m.kv.get("user")
    {'name': 'Ada', 'likes': ['tea']}
    >>> m.kv.get("nobody", None) is None
    True
    >>> [r["key"] for r in m.kv.list()]
    ['user']
    >>> m.kv.delete("user")
    {'key': 'user', 'deleted': True}
    >>> m.close()
    """

    def set(self, key: str, value: Any) -> Record:
        """Store `value` under `key`, replacing what was there; returns the record."""
        return self._service.memory_set(key, value, namespace=self._ns)

    def get(self, key: str, default: Any = _MISSING) -> Any:
        """The value under `key`: `default` if given and there is none, else `NotFound`."""
        try:
            return self.record(key)["value"]
        except NotFound:
            if default is _MISSING:
                raise
            return default

    def record(self, key: str) -> Record:
        """The whole record under `key`: key, value, created_at, updated_at."""
        return self._service.memory_get(key, namespace=self._ns)

    def delete(self, key: str) -> Record:
        """Delete the pair under `key`; `NotFound` if there is none."""
        return self._service.memory_delete(key, namespace=self._ns)

    def list(self, limit: int | None = None, offset: int = 0) -> Records:
        """The records, newest first (`mem keys`), 100 at a time unless `limit` says (<= 1000)."""
        limit, offset = _count(limit, "limit"), _count(offset, "offset", optional=False)
        return self._service.memory_list_keys(namespace=self._ns, limit=limit, offset=offset)


@_serialise_public_methods
class Documents(_Group):
    """`m.json` and `m.todos`: JSON objects under generated memory IDs (`memory_json_*`,
    `memory_todo_*`). A todo's `status` defaults to "pending".

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> todo = m.todos.save({"title": "write the report"}, metadata={"owner": "ada"})
    >>> todo["todo"]
    {'status': 'pending', 'title': 'write the report'}
    >>> m.todos.update(todo["memoryId"], {"title": "write the report", "status": "done"})["todo"]["status"]
    'done'
    >>> [t["todo"]["title"] for t in m.todos.list({"status": "done"})]
    ['write the report']
    >>> m.todos.delete(todo["memoryId"])["deleted"]
    True
    >>> m.close()
    """

    def __init__(self, memory: Memory, kind: str) -> None:
        super().__init__(memory)
        self._kind = kind

    def _tool(self, action: str) -> Callable[..., Any]:
        return cast(Callable[..., Any], getattr(self._service, f"memory_{self._kind}_{action}"))

    def save(self, body: dict[str, Any], metadata: dict[str, Any] | None = None) -> Record:
        """Save an object; returns the record with its new `memoryId`."""
        return cast(Record, self._tool("save")(body, metadata, namespace=self._ns))

    def update(self, memory_id: str, body: dict[str, Any]) -> Record:
        """Replace the object (the metadata is kept); `NotFound` for an unknown ID."""
        return cast(Record, self._tool("update")(memory_id, body, namespace=self._ns))

    def delete(self, memory_id: str) -> Record:
        return cast(Record, self._tool("delete")(memory_id, namespace=self._ns))

    def list(self, filters: dict[str, Any] | None = None, limit: int | None = None, offset: int = 0) -> Records:
        """The records, newest first, 100 at a time unless `limit` says (<= 1000); `filters` match
        fields of the object, then of its metadata (`{"status": "done"}`, `{"priority": {"$gte": 2}}`:
        see the README's Filters)."""
        limit, offset = _count(limit, "limit"), _count(offset, "offset", optional=False)
        return cast(Records, self._tool("list")(filters, limit, offset, namespace=self._ns))


@_serialise_public_methods
class Markdown(Documents):
    """`m.markdown`: markdown texts under generated memory IDs (`memory_markdown_*`).

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> note = m.markdown.save("# Notes\\n\\nShip on Friday.", metadata={"topic": "release"})
    >>> m.markdown.update(note["memoryId"], "# Notes\\n\\nShip on Monday.")["metadata"]
    {'topic': 'release'}
    >>> [n["markdown"] for n in m.markdown.list({"topic": "release"})]
    ['# Notes\\n\\nShip on Monday.']
    >>> m.close()
    """

    def __init__(self, memory: Memory) -> None:
        super().__init__(memory, "markdown")

    def save(self, markdown: str, metadata: dict[str, Any] | None = None) -> Record:  # type: ignore[override]
        return self._service.memory_markdown_save(markdown, metadata, namespace=self._ns)

    def update(self, memory_id: str, markdown: str, metadata: dict[str, Any] | None = None) -> Record:  # type: ignore[override]
        """Replace the text, and the metadata when it is given."""
        return self._service.memory_markdown_update(memory_id, markdown, metadata, namespace=self._ns)


@_serialise_public_methods
class Episodes(_Group):
    """`m.episodes`: titled logs of events (`episodic_memory_*`). Events are appended, never
    changed; an archived log is read-only.

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp(), agent="tester")
    >>> log = m.episodes.create("release 1.2")
    >>> m.episodes.append(log["memoryId"], "test_run", {"passed": 41, "failed": 1}, tags=["ci"])["event_type"]
    'test_run'
    >>> m.episodes.append(log["memoryId"], "deploy", "shipped to staging")["emitting_agent_id"]
    'tester'
    >>> [e["payload"] for e in m.episodes.query(log["memoryId"], event_type="test_run")]
    [{'passed': 41, 'failed': 1}]
    >>> m.episodes.event_types(log["memoryId"])
    ['test_run', 'deploy']
    >>> m.episodes.archive(log["memoryId"])["archived"]
    True
    >>> m.close()
    """

    def create(self, title: str, swarm_id: str | None = None) -> Record:
        """A new, empty log; returns it with its `memoryId`."""
        return self._service.episodic_memory_create(title, swarm_id=swarm_id, namespace=self._ns)

    def list(
        self, filters: dict[str, Any] | None = None, include_archived: bool = False, limit: int | None = None,
        offset: int = 0,
    ) -> Records:  # fmt: skip
        """The logs with their event counts, newest first (archived ones only if asked), 100 at a
        time unless `limit` says (<= 1000)."""
        limit, offset = _count(limit, "limit"), _count(offset, "offset", optional=False)
        archived = _flag(include_archived, "include_archived")
        return self._service.episodic_memory_list(filters, archived, limit, offset, namespace=self._ns)

    def get(self, memory_id: str) -> Record:
        return self._service.episodic_memory_get(memory_id, namespace=self._ns)

    def append(
        self,
        memory_id: str,
        event_type: str,
        payload: str | dict[str, Any],
        *,
        agent: str | None = None,
        team_id: str | None = None,
        tags: Sequence[str] = (),
    ) -> Record:
        """Append an event; `agent` (its `emitting_agent_id`) defaults to the `Memory`'s agent.
        `Conflict` if the log is archived."""
        emitter = self._memory.agent if agent is None else agent
        event = {"event_type": event_type, "emitting_agent_id": emitter, "team_id": team_id, "tags": _items(tags),
                 "payload": payload}  # fmt: skip
        return self._service.episodic_memory_append_event(memory_id, event, namespace=self._ns)

    def query(
        self,
        memory_id: str | None = None,
        *,
        swarm_id: str | None = None,
        event_type: str | None = None,
        agent: str | None = None,
        team_id: str | None = None,
        tags: Sequence[str] | None = None,
        last_minutes: float | None = None,
        last_count: int | None = None,
        since: str | dt.date | None = None,
        until: str | dt.date | None = None,
    ) -> Records:
        """Events of one log (or of every log of `swarm_id`) passing every filter, oldest first:
        `tags` match any, `since` / `until` are ISO 8601 times (or a `datetime`, UTC without a
        zone)."""
        return self._service.episodic_memory_query_events(
            memory_id=memory_id, swarm_id=swarm_id, last_minutes=last_minutes, last_count=last_count,
            tags=_items(tags) if tags is not None else None, event_type=event_type, emitting_agent_id=agent,
            team_id=team_id, since=_instant(since, "since"), until=_instant(until, "until"), namespace=self._ns,
        )  # fmt: skip

    def event_types(self, memory_id: str | None = None, swarm_id: str | None = None) -> Strings:
        """The distinct event types of a log (or of a swarm's logs), in order of appearance."""
        return self._service.episodic_memory_get_event_types(memory_id, swarm_id, namespace=self._ns)

    def archive(self, memory_id: str) -> Record:
        """Make a log read-only and hide it from `list` (archiving again changes nothing)."""
        return self._service.episodic_memory_archive(memory_id, namespace=self._ns)

    def unarchive(self, memory_id: str) -> Record:
        return self._service.episodic_memory_unarchive(memory_id, namespace=self._ns)

    def rename(self, memory_id: str, title: str) -> Record:
        return self._service.episodic_memory_update_title(memory_id, title, namespace=self._ns)

    def delete(self, memory_id: str) -> Record:
        """Delete a log and all its events."""
        return self._service.episodic_memory_delete(memory_id, namespace=self._ns)


@_serialise_public_methods
class Persistent(_Group):
    """`m.persistent`: stored retrieval configurations (`persistent_memory_*`): where to look
    (`retrieval`: a `vectordb`, `kv`, `eventlog` or `kg` source) and how to render what is found
    (`contribution`: `text`, `json` or `markdown`, a template, `max_tokens`).

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> _ = m.kv.set("deadline", "the report is due Friday")
    >>> config = m.persistent.create(
    ...     "deadlines", retrieval={"source_type": "kv", "source_id": "default"},
    ...     contribution={"format": "text"}, id="deadlines")
    >>> m.persistent.retrieve("deadlines", query="deadline")["contribution"]
    'deadline: the report is due Friday'
    >>> m.persistent.update("deadlines", status="disabled")["status"]
    'disabled'
    >>> m.close()
    """

    def create(
        self,
        label: str,
        retrieval: dict[str, Any],
        contribution: dict[str, Any],
        *,
        id: str | None = None,
        description: str = "",
        inputs_scope: Sequence[str] | None = None,
        additional_variables: dict[str, Any] | None = None,
        status: str = "active",
    ) -> Record:
        """A new configuration (its ID generated unless given); `InvalidInput` names bad fields."""
        return self._service.persistent_memory_create(
            label=label, retrieval=retrieval, contribution=contribution, id=id, description=description,
            inputs_scope=_items(inputs_scope, "inputs_scope") if inputs_scope is not None else None,
            additional_variables=additional_variables, status=status, namespace=self._ns,
        )  # fmt: skip

    def get(self, memory_id: str) -> Record:
        return self._service.persistent_memory_get(memory_id, namespace=self._ns)

    def list(
        self, input_scope: str | None = None, active_only: bool = False, limit: int | None = None, offset: int = 0
    ) -> Records:
        """The configurations, newest first, optionally only those of an input scope or active,
        100 at a time unless `limit` says (<= 1000)."""
        limit, offset = _count(limit, "limit"), _count(offset, "offset", optional=False)
        active = _flag(active_only, "active_only")
        return self._service.persistent_memory_list(input_scope, active, limit, offset, namespace=self._ns)

    def update(self, memory_id: str, **changes: Any) -> Record:
        """Change the given fields (label, description, inputs_scope, additional_variables,
        retrieval, contribution, status)."""
        if "agent" in changes:  # the store's `agent` is the caller's identity, not a field
            raise InvalidInput("cannot update agent")
        return self._service.persistent_memory_update(memory_id, namespace=self._ns, **changes)

    def delete(self, memory_id: str) -> Record:
        """Delete a configuration (not the data it reads)."""
        return self._service.persistent_memory_delete(memory_id, namespace=self._ns)

    def retrieve(
        self,
        memory_id: str,
        *,
        query: str | None = None,
        keywords: Sequence[str] | None = None,
        action: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> Record:
        """Run the retrieval: `items` found and the rendered `contribution` (`Conflict` if the
        configuration is disabled)."""
        words = _items(keywords, "keywords") if keywords is not None else None
        return self._service.persistent_memory_retrieve(memory_id, words, action, context, query, namespace=self._ns)


@_serialise_public_methods
class Graph(_Group):
    """`m.graph`: a knowledge graph of entities, relations and observations, shaped as the MCP
    memory server's (`create_entities`, `create_relations`, ...).

    >>> import tempfile
    >>> m = Memory(home=tempfile.mkdtemp())
    >>> made = m.graph.create_entities([
    ...     {"name": "Ada", "entityType": "person", "observations": ["writes Python"]},
    ...     {"name": "Acme", "entityType": "company"}])
    >>> made[1]
    {'name': 'Acme', 'entityType': 'company', 'observations': []}
    >>> m.graph.create_relations([{"from": "Ada", "to": "Acme", "relationType": "works_at"}])
    [{'from': 'Ada', 'to': 'Acme', 'relationType': 'works_at'}]
    >>> found = m.graph.search("python")
    >>> [e["name"] for e in found["entities"]]
    ['Ada']
    >>> m.graph.open(["Ada", "Acme"])["relations"]
    [{'from': 'Ada', 'to': 'Acme', 'relationType': 'works_at'}]
    >>> m.graph.delete_entities(["Acme"])
    {'deletedEntities': 1, 'deletedRelations': 1}
    >>> m.close()
    """

    def create_entities(self, entities: Sequence[dict[str, Any]]) -> Records:
        """Create entities ({name, entityType, observations}); names that exist are left alone.
        Returns those created."""
        return self._service.kg_create_entities(_items(entities, "entities"), namespace=self._ns)

    def create_relations(self, relations: Sequence[dict[str, Any]]) -> Records:
        """Create relations ({from, to, relationType}) between existing entities."""
        return self._service.kg_create_relations(_items(relations, "relations"), namespace=self._ns)

    def add_observations(self, observations: Sequence[dict[str, Any]]) -> Records:
        """Add observations ({entityName, contents}) to existing entities."""
        return self._service.kg_add_observations(_items(observations, "observations"), namespace=self._ns)

    def delete_entities(self, names: Sequence[str]) -> dict[str, int]:
        """Delete entities and every relation touching them."""
        return self._service.kg_delete_entities(_items(names, "names"), namespace=self._ns)

    def delete_observations(self, deletions: Sequence[dict[str, Any]]) -> Records:
        """Remove observations ({entityName, observations}) from entities."""
        return self._service.kg_delete_observations(_items(deletions, "deletions"), namespace=self._ns)

    def delete_relations(self, relations: Sequence[dict[str, Any]]) -> dict[str, int]:
        return self._service.kg_delete_relations(_items(relations, "relations"), namespace=self._ns)

    def read(self, limit: int | None = None, offset: int = 0) -> Record:
        """A page of entities (by name) and the relations among them: {entities, relations}."""
        return self._service.kg_read_graph(_count(limit, "limit"), _count(offset, "offset", False), namespace=self._ns)

    def open(self, names: Sequence[str]) -> Record:
        """The named entities and the relations among them."""
        return self._service.kg_open_nodes(_items(names, "names"), namespace=self._ns)

    def search(self, query: str, limit: int = SEARCH_LIMIT) -> Record:
        """Entities matching `query` (names, types, observations; by words and meaning) and the
        relations among them."""
        return self._service.kg_search_nodes(_text(query, "query"), _count(limit, "limit", False), namespace=self._ns)

    def import_jsonl(self, source: str | Path | Iterable[str]) -> dict[str, int]:
        """Import the MCP memory server's JSONL (a file path, or its lines): entities and relations."""
        text = _read_file(source) if isinstance(source, (str, Path)) else source
        return self._service.kg_import(
            _lines(text.decode("utf-8") if isinstance(text, bytes) else text), namespace=self._ns
        )


ERRORS: tuple[type[MemError], ...] = (  # the exceptions of the table above, in its order
    MemError, NotFound, InvalidInput, Conflict, MemoryFull, Unauthorized, StoreMismatch, StoreUnavailable,
    RoleRefused, Damaged, Closed,
)  # fmt: skip

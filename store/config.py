"""Limits and policies, from `HOME/config.json` with `MEM_*` environment overrides.

    {
      "max_entry_bytes": 262144,          # one entry, serialised key + content
      "max_entries": 1000000,             # live records per namespace: A2E entries and codebolt records
      "max_bytes": 1073741824,            # their serialised bytes per namespace
      "max_line_bytes": 4194304,          # one serve-stdio request line
      "redact": false,                    # mask secret-shaped strings before storing
      "store": "postgresql://mem@db/mem", # where the store is (MEM_STORE, --store override it)
      "namespaces": {"team": {"max_entries": 5000, "semantic_writers": ["lead"]}}
    }

A namespace entry overrides the store-wide values for that namespace; `semantic_writers`, when
set, lists the agents allowed to store into and forget from the namespace's semantic tier. One
exception: redaction asked for by the environment (`MEM_REDACT=1`, or `--redact`, which sets it)
holds in every namespace. It is a privacy control of the person running the command, and a
namespace's `"redact": false` written in the file must not turn it off in silence.

With a store URL (a database shared by several machines), each machine reads its own
`config.json`: the limits are enforced by every client with the values it has, so machines of
one fleet should share one configuration (the README's "shared store" section says so).

The file and the variables are checked when the store opens: a file that is not a JSON object,
an unknown key (a typo would otherwise be ignored in silence), a value of the wrong type or a
negative limit is an `InvalidInput` naming the file and the key (or the variable), never a
default quietly used in its place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import orjson

from .errors import InvalidInput, did_you_mean

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True)
class Limits:
    max_entry_bytes: int = 256 * 1024
    max_entries: int = 1_000_000
    max_bytes: int = 1 << 30
    max_line_bytes: int = 4 << 20
    redact: bool = False
    semantic_writers: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Config:
    base: Limits
    namespaces: dict[str, dict[str, Any]]
    store: str | None = None  # the store URL; None: files under the home folder
    redact_forced: bool = False  # MEM_REDACT=1 (or --redact): no namespace turns redaction off

    def for_namespace(self, namespace: str) -> Limits:
        override = self.namespaces.get(namespace)
        if not override:
            return self.base
        if self.redact_forced:
            override = {**override, "redact": True}
        return replace(self.base, **override)


LIMIT_NAMES = {f.name for f in fields(Limits)}


def load_config(home: Path) -> Config:
    """The store's configuration: the file's values, then the environment's over them."""
    path = home / "config.json"
    raw = read_config_file(path)
    values = {name: check_value(name, raw[name], f"{path}: {name}") for name in LIMIT_NAMES if name in raw}
    from_env = env_limits()
    values.update(from_env)
    check_other_variables()
    namespaces = check_namespaces(raw.get("namespaces", {}), path)
    return Config(Limits(**values), namespaces, store_url(raw, path), redact_forced=from_env.get("redact") is True)


def store_url(raw: dict[str, Any], path: Path) -> str | None:
    """The store URL: `MEM_STORE`, else the file's "store", else None (files under the home)."""
    if os.environ.get("MEM_STORE") is not None:
        return os.environ["MEM_STORE"] or None
    value = raw.get("store")
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"{path}: store must be a store URL (a string), not {json_type(value)}")
    return value or None


def read_config_file(path: Path) -> dict[str, Any]:
    """`config.json` as a dict ({} when there is none), its keys checked."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot be read: {exc.strerror or exc}") from None
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise InvalidInput(f"{path}: must be a JSON object, not {json_type(raw)}")
    unknown = sorted(set(raw) - LIMIT_NAMES - {"namespaces", "store"})
    if unknown:
        known = sorted(LIMIT_NAMES | {"namespaces", "store"})
        hint = did_you_mean(unknown[0], known)
        raise InvalidInput(f"{path}: unknown key {unknown[0]!r}{hint} (known: {', '.join(known)})")
    return raw


def check_namespaces(namespaces: Any, path: Path) -> dict[str, dict[str, Any]]:
    """The per-namespace overrides, each value checked as the store-wide one is."""
    if not isinstance(namespaces, dict):
        raise InvalidInput(f"{path}: namespaces must be an object of namespace name -> limits")
    checked: dict[str, dict[str, Any]] = {}
    for namespace, override in namespaces.items():
        where = f"{path}: namespaces.{namespace}"
        if not isinstance(override, dict):
            raise InvalidInput(f"{where} must be an object of limits, not {json_type(override)}")
        unknown = sorted(set(override) - LIMIT_NAMES)
        if unknown:
            raise InvalidInput(f"{where}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], sorted(LIMIT_NAMES))}")
        checked[namespace] = {name: check_value(name, value, f"{where}.{name}") for name, value in override.items()}
    return checked


def check_value(name: str, value: Any, where: str) -> Any:
    """`value` for the limit `name` if it has the right type, else an error naming `where`."""
    if name == "redact":
        if not isinstance(value, bool):
            raise InvalidInput(f"{where} must be true or false, not {json_type(value)}")
        return value
    if name == "semantic_writers":
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise InvalidInput(f"{where} must be a list of agent names (or null)")
        return tuple(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInput(f"{where} must be a whole number >= 0, not {orjson.dumps(value).decode()}")
    return value


def env_limits() -> dict[str, Any]:
    """The limits set by `MEM_<NAME>` variables (all but `semantic_writers`)."""
    values: dict[str, Any] = {}
    for name in LIMIT_NAMES - {"semantic_writers"}:
        variable = f"MEM_{name.upper()}"
        if os.environ.get(variable) is not None:
            values[name] = env_flag(variable) if name == "redact" else env_number(variable, 0)
    return values


def check_other_variables() -> None:
    """Check now the variables that modules read only when they first need them (a checkpoint
    after a write, a log line), so that a bad one is refused before anything is written."""
    env_choice("MEM_LOG", LOG_LEVELS, "warning", ignore_case=True)
    env_number("MEM_CHECKPOINT_BYTES", 0)
    env_number("MEM_CHECKPOINT_BACKOFF", 0)


def env_number(variable: str, default: int) -> int:
    """The whole number >= 0 in `variable`, `default` when it is unset or empty."""
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidInput(f"{variable} must be a whole number >= 0, not {text!r}") from None
    if value < 0:
        raise InvalidInput(f"{variable} must be a whole number >= 0, not {text!r}")
    return value


def env_flag(variable: str) -> bool:
    """A yes/no variable: 1, true, yes, on or 0, false, no, off (any case), unset is no."""
    text = os.environ.get(variable, "").strip().lower()
    if text not in TRUE_WORDS + FALSE_WORDS:
        raise InvalidInput(f"{variable} must be 1, true, yes, on or 0, false, no, off, not {text!r}")
    return text in TRUE_WORDS


def env_choice(variable: str, choices: tuple[str, ...], default: str, ignore_case: bool = False) -> str:
    """One of `choices` from `variable`, `default` when it is unset or empty."""
    text = os.environ.get(variable, "").strip() or default
    text = text.lower() if ignore_case else text
    if text not in choices:
        raise InvalidInput(f"{variable} must be one of {', '.join(choices)}, not {text!r}")
    return text


def json_type(value: Any) -> str:
    """How JSON calls the type of `value`: object, array, string, number, true/false or null."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return str(value).lower()
    return "null" if value is None else "a number"

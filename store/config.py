"""Limits and policies, from `HOME/config.json` with `MEM_*` environment overrides.

    {
      "max_entry_bytes": 262144,          # one entry, serialised key + content
      "max_entries": 1000000,             # live records per namespace: A2E entries and codebolt records
      "max_bytes": 1073741824,            # their serialised bytes per namespace
      "max_line_bytes": 4194304,          # one serve-stdio request line
      "redact": false,                    # mask secret-shaped strings before storing
      "namespaces": {"team": {"max_entries": 5000, "semantic_writers": ["lead"]}}
    }

A namespace entry overrides the store-wide values for that namespace; `semantic_writers`, when
set, lists the agents allowed to store into and forget from the namespace's semantic tier.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import orjson


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

    def for_namespace(self, namespace: str) -> Limits:
        override = self.namespaces.get(namespace)
        if not override:
            return self.base
        known = {f.name for f in fields(Limits)}
        values = {k: (tuple(v) if isinstance(v, list) else v) for k, v in override.items() if k in known}
        return replace(self.base, **values)  # type: ignore[arg-type]


def load_config(home: Path) -> Config:
    try:
        raw: dict[str, Any] = orjson.loads((home / "config.json").read_bytes())
    except FileNotFoundError:
        raw = {}
    values: dict[str, Any] = {}
    for f in fields(Limits):
        env = os.environ.get(f"MEM_{f.name.upper()}")
        if env is not None and f.name != "semantic_writers":
            values[f.name] = env.lower() in ("1", "true", "yes") if f.type == "bool" else int(env)
        elif f.name in raw:
            values[f.name] = raw[f.name]
    return Config(Limits(**values), raw.get("namespaces", {}))

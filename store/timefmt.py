"""Timestamps as the codebolt tools show them: ISO 8601 in UTC, millisecond precision."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")

"""The A2E `MemoryEntry` and the names it carries, as pydantic models.

Validation lives here so that every front door refuses the same inputs with the same messages;
the wire messages are in `messages.py`, which only `serve-stdio` loads.
Names (namespace, agent, tags) may be any text but NUL, and are bounded in length; they never
become file names (see `paths.py`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

Tier = Literal["working", "episodic", "semantic"]
TIERS: tuple[Tier, ...] = ("working", "episodic", "semantic")
MAX_NAME = 1024
MAX_TAGS = 64


def _clean_name(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL")
    return value


def _key_dict(value: Any) -> Any:
    """A lenient host accepts a plain string key as {"key": "<string>"}."""
    return {"key": value} if isinstance(value, str) else value


Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME), AfterValidator(_clean_name)]
Tag = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_clean_name)]
Key = Annotated[dict[str, Any], BeforeValidator(_key_dict)]


MAX_TTL = (1 << 63) - 1  # seconds: what a signed 64-bit integer holds (10**30 failed deep in the write)


class MemoryEntry(BaseModel):
    """A memory as a client sends it; timestamps are the host's (import keeps its own)."""

    model_config = ConfigDict(extra="ignore")

    key: Key
    content: Any = Field(...)
    tier: Tier
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    source: str = Field("", max_length=MAX_NAME)
    score: float = Field(1.0, ge=0.0, le=1.0, strict=True)
    ttl: int = Field(0, ge=0, le=MAX_TTL, strict=True)  # a signed 64-bit count, as the CLI and the wire keep it
    created_at: float | None = None
    updated_at: float | None = None


def new_id() -> str:
    import uuid

    return uuid.uuid4().hex

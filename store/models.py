"""Pydantic models of the A2E memory capability: entries and the wire messages.

Validation lives here so that every front door refuses the same inputs with the same messages.
Names (namespace, agent, tags) may be any text but NUL, and are bounded in length; they never
become file names (see `paths.py`).
"""

from __future__ import annotations

import time
import uuid
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


class MemoryEntry(BaseModel):
    """A memory as a client sends it; timestamps are the host's (import keeps its own)."""

    model_config = ConfigDict(extra="ignore")

    key: Key
    content: Any = Field(...)
    tier: Tier
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    source: str = Field("", max_length=MAX_NAME)
    score: float = Field(1.0, ge=0.0, le=1.0, strict=True)
    ttl: int = Field(0, ge=0, strict=True)
    created_at: float | None = None
    updated_at: float | None = None


def new_id() -> str:
    return uuid.uuid4().hex


class Message(BaseModel):
    """Fields every A2E message carries."""

    model_config = ConfigDict(extra="ignore")

    type: str
    id: str = Field(default_factory=new_id)
    version: str = "1.0"
    ts: float = Field(default_factory=time.time)


class HandshakeRequest(Message):
    agent_id: str = ""
    agent_caps: list[str] = Field(default_factory=list)
    auth_token: str = ""


class ShutdownRequest(Message):
    timeout: float = 0.0


class InitRequest(Message):
    namespace: Name = "default"
    scope: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class SessionRequest(Message):
    memory_id: str = Field(min_length=1, max_length=MAX_NAME)


class StoreRequest(SessionRequest):
    entries: list[dict[str, Any]] = Field(default_factory=list)


class RetrieveRequest(SessionRequest):
    keys: list[Key] = Field(default_factory=list)
    query: str = ""
    tags: list[Tag] = Field(default_factory=list)
    tier: Tier | Literal[""] = ""
    limit: int = Field(10, ge=0, le=1000, strict=True)
    min_score: float = Field(0.0, ge=0.0, le=1.0, strict=True)


class ForgetRequest(SessionRequest):
    keys: list[Key] = Field(default_factory=list)
    tags: list[Tag] = Field(default_factory=list)
    tier: Tier = "episodic"


REQUESTS: dict[str, type[Message]] = {
    "handshake/req": HandshakeRequest,
    "ping": Message,
    "shutdown": ShutdownRequest,
    "memory/init/req": InitRequest,
    "memory/store/req": StoreRequest,
    "memory/retrieve/req": RetrieveRequest,
    "memory/forget/req": ForgetRequest,
}

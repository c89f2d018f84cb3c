"""The A2E wire messages (requests), as pydantic models: only `serve-stdio` needs them."""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .models import MAX_NAME, Key, Name, Tag, Tier, new_id


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
    entries: list[Any] = Field(default_factory=list)  # each one is checked on its own: see A2E.store


class RetrieveRequest(SessionRequest):
    keys: list[Key] = Field(default_factory=list)
    query: str = ""
    tags: list[Tag] = Field(default_factory=list)
    tier: Literal["", "working", "episodic", "semantic"] = ""  # one literal: one error naming every choice
    limit: int = Field(10, ge=0, strict=True)  # over 1000: clamped, with a warning (A2E.retrieve)
    min_score: float = Field(0.0, ge=0.0, le=1.0, strict=True)
    # extension (issue 12): keep entries whose own time is in [since, until); ISO-8601 (see store/timeaware.py)
    since: str | None = Field(None, max_length=100, strict=True)
    until: str | None = Field(None, max_length=100, strict=True)


class ForgetRequest(SessionRequest):
    keys: list[Key] = Field(default_factory=list)
    tags: list[Tag] = Field(default_factory=list)
    tier: Tier = "episodic"
    all: bool = Field(False, strict=True)  # extension: empty the whole tier (never implied)


REQUESTS: dict[str, type[Message]] = {
    "handshake/req": HandshakeRequest,
    "ping": Message,
    "shutdown": ShutdownRequest,
    "memory/init/req": InitRequest,
    "memory/store/req": StoreRequest,
    "memory/retrieve/req": RetrieveRequest,
    "memory/forget/req": ForgetRequest,
}

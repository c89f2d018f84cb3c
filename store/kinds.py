"""The kinds of shard a namespace holds, and the schema of each."""

from __future__ import annotations

A2E_TIERS = ("working", "episodic", "semantic")
SCHEMA_OF = {
    "working": "entries",
    "episodic": "entries",
    "semantic": "entries",
    "kg_entities": "entities",
    "langgraph": "langgraph",  # LangGraph items (`langgraph.py`): found by the text their put indexed
}


def schema_of(kind: str) -> str:
    return SCHEMA_OF.get(kind, "records")

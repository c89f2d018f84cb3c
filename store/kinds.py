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


# The kinds of shard an export holds (all but the working tier), and how many names follow the kind
# in their scope (None: one or more, a LangGraph namespace): the agent of an episodic shard, the
# episodic memory of an events shard. `mem import` refuses a record of any other kind or scope,
# which no command would ever read (or, for an A2E tier, which it would write somewhere else).
SCOPE_NAMES: dict[str, int | None] = {
    "episodic": 1,
    "semantic": 0,
    "kv": 0,
    "json": 0,
    "todo": 0,
    "markdown": 0,
    "persistent": 0,
    "episodes": 0,
    "events": 1,
    "kg_entities": 0,
    "kg_relations": 0,
    "langgraph": None,
}

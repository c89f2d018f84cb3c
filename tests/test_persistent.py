"""Persistent memories: configurations, and retrieval really run against each source."""

from __future__ import annotations

import orjson
import pytest

from a2e_mem import clock
from a2e_mem.errors import Conflict, InvalidInput, NotFound, Unauthorized
from a2e_mem.ops.render import count_tokens, fill


def create(service, source_type, source_id, fmt="json", **extra):
    retrieval = {"source_type": source_type, "source_id": source_id, **extra.pop("retrieval", {})}
    contribution = {"format": fmt, **extra.pop("contribution", {})}
    return service.persistent_memory_create(
        label=extra.pop("label", "L"), retrieval=retrieval, contribution=contribution, **extra
    )


def test_create_get_list_update(service):
    made = create(service, "kv", "prefs", id="user-prefs", inputs_scope=["user_settings"], description="d")
    assert made["id"] == "user-prefs" and made["status"] == "active"
    assert service.persistent_memory_get("user-prefs")["retrieval"]["limit"] == 10
    other = create(service, "kg", "graph", status="draft")
    assert [m["id"] for m in service.persistent_memory_list(input_scope="user_settings")] == ["user-prefs"]
    assert [m["id"] for m in service.persistent_memory_list(active_only=True)] == ["user-prefs"]
    assert len(service.persistent_memory_list()) == 2
    updated = service.persistent_memory_update(other["id"], label="Updated", status="active")
    assert updated["label"] == "Updated" and updated["retrieval"]["source_type"] == "kg"
    assert updated["created_at"] == other["created_at"]
    with pytest.raises(Conflict):
        create(service, "kv", "x", id="user-prefs")
    with pytest.raises(NotFound):
        service.persistent_memory_update("nope", label="x")
    with pytest.raises(InvalidInput):
        service.persistent_memory_update(other["id"], status="sleeping")
    with pytest.raises(InvalidInput):
        create(service, "sql", "x")
    with pytest.raises(InvalidInput):
        create(service, "kv", "x", fmt="html")


def test_kv_source_matches_keys_and_values(service):
    service.memory_set("theme", "dark", namespace="prefs")
    service.memory_set("language", "python", namespace="prefs")
    service.memory_set("editor", {"name": "neovim", "theme": "gruvbox"}, namespace="prefs")
    pm = create(service, "kv", "prefs", fmt="json")
    result = service.persistent_memory_retrieve(pm["id"], keywords=["theme", "preferences"], action="find")
    assert {i["key"] for i in result["items"]} == {"theme", "editor"}
    assert orjson.loads(result["contribution"]) == result["items"] and result["truncated"] is False
    everything = service.persistent_memory_retrieve(pm["id"])
    assert len(everything["items"]) == 3


def test_vectordb_source_searches_a2e_entries(service):
    scope = service.scope("docs", "writer")
    service.store(scope, [
        {"key": "py", "content": "python type hints make refactoring safer", "tier": "semantic"},
        {"key": "cook", "content": "slow cooked beans need salt late", "tier": "semantic"},
        {"key": "mine", "content": "python packaging notes", "tier": "episodic"},
    ])  # fmt: skip
    pm = create(
        service, "vectordb", "docs", fmt="text", retrieval={"limit": 2}, contribution={"template": "* {content}"}
    )
    result = service.persistent_memory_retrieve(pm["id"], query="python")
    assert len(result["items"]) == 2 and {i["key"]["key"] for i in result["items"]} == {"py", "mine"}
    assert result["contribution"].startswith("* ") and "python" in result["contribution"]
    semantic = create(service, "vectordb", "docs", retrieval={"filters": {"tier": "semantic"}})
    assert {i["tier"] for i in service.persistent_memory_retrieve(semantic["id"], query="python")["items"]} == {
        "semantic"
    }


def test_eventlog_source_applies_configured_filters(service):
    mid = service.episodic_memory_create("log")["memoryId"]
    for kind, payload in (("deploy", "deployed api v2"), ("alert", "disk almost full"), ("deploy", "rolled back api")):
        service.episodic_memory_append_event(mid, {"event_type": kind, "emitting_agent_id": "ops", "payload": payload})
    pm = create(
        service, "eventlog", mid, fmt="markdown", label="Deploys", retrieval={"filters": {"event_type": "deploy"}}
    )
    result = service.persistent_memory_retrieve(pm["id"])
    assert [e["payload"] for e in result["items"]] == ["deployed api v2", "rolled back api"]
    assert result["contribution"].startswith("## Deploys\n\n- [")
    assert [e["payload"] for e in service.persistent_memory_retrieve(pm["id"], query="rollback rolled")["items"]] == [
        "rolled back api"
    ]


def test_kg_source_returns_entities_and_their_relations(service):
    service.kg_create_entities([
        {"name": "Alice", "entityType": "person", "observations": ["drinks green tea"]},
        {"name": "Acme", "entityType": "company", "observations": ["builds rockets"]},
        {"name": "Bob", "entityType": "person", "observations": ["plays chess"]},
    ], namespace="g")  # fmt: skip
    service.kg_create_relations([{"from": "Alice", "to": "Acme", "relationType": "works_at"}], namespace="g")
    pm = create(service, "kg", "g", fmt="text")
    result = service.persistent_memory_retrieve(pm["id"], keywords=["tea"])
    names = [i.get("name") for i in result["items"] if i["type"] == "entity"]
    assert names[0] == "Alice" and "Bob" not in names
    assert {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"} in result["items"]
    assert "Alice works_at Acme" in result["contribution"]


def test_query_template_is_filled_safely(service):
    service.memory_set("dark-mode", "on", namespace="p")
    template = "{action} {keywords} {context.topic} {mode} {additional_variables.mode}"
    pm = create(service, "kv", "p", retrieval={"query_template": template}, additional_variables={"mode": "dark"})
    result = service.persistent_memory_retrieve(pm["id"], keywords=["x"], action="find", context={"topic": "ui"})
    assert result["query"] == "find x ui dark dark"
    with pytest.raises(InvalidInput, match="__class__"):
        create(service, "kv", "p", retrieval={"query_template": "{keywords} {__class__}"})
    assert fill("{{literal}} {a.b}", {"a": {"b": [1, 2]}}) == "{literal} [1,2]"
    assert fill("{x.__class__}", {"x": "s"}) == ""


def test_max_tokens_cuts_and_flags(service):
    for i in range(30):
        service.memory_set(f"key{i}", f"value number {i} with a few more words", namespace="big")
    pm = create(service, "kv", "big", fmt="text", retrieval={"limit": 30}, contribution={"max_tokens": 25})
    result = service.persistent_memory_retrieve(pm["id"])
    assert result["truncated"] is True
    assert result["tokens"] == count_tokens(result["contribution"]) <= 25
    assert result["contribution"].startswith("key")
    as_json = create(service, "kv", "big", fmt="json", retrieval={"limit": 30}, contribution={"max_tokens": 60})
    cut = service.persistent_memory_retrieve(as_json["id"])
    assert cut["truncated"] and len(orjson.loads(cut["contribution"])) < 30 and cut["tokens"] <= 60


def test_disabled_memory_refuses_to_retrieve(service):
    pm = create(service, "kv", "p", status="disabled")
    with pytest.raises(Conflict, match="disabled"):
        service.persistent_memory_retrieve(pm["id"])
    with pytest.raises(NotFound):
        service.persistent_memory_retrieve("missing")


# -- audit items 16, 17, 19, 20 ------------------------------------------------------------


def test_spec_sample_retrieve_uses_query_and_keywords_together(service):
    """The spec's own sample call (kv source, keywords + action + query) finds the theme."""
    service.memory_set("theme", "dark", namespace="user-preferences-store")
    service.memory_set("font", "mono", namespace="user-preferences-store")
    pm = service.persistent_memory_create(
        label="User Preferences", description="Stores user preferences across sessions",
        inputs_scope=["user_settings", "preferences"],
        retrieval={"source_type": "kv", "source_id": "user-preferences-store", "limit": 10},
        contribution={"format": "json", "max_tokens": 500},
    )  # fmt: skip
    result = service.persistent_memory_retrieve(
        pm["id"], keywords=["theme", "preferences"], action="find", query="user display settings"
    )
    assert [i["key"] for i in result["items"]] == ["theme"]
    assert result["query"] == "user display settings theme preferences find"
    assert orjson.loads(result["contribution"]) == result["items"]


def test_action_and_context_reach_the_query_without_a_template(service):
    service.memory_set("layout", "compact sidebar", namespace="p")
    service.memory_set("colour", "blue", namespace="p")
    pm = create(service, "kv", "p")
    by_context = service.persistent_memory_retrieve(pm["id"], context={"area": "sidebar", "depth": 2})
    assert [i["key"] for i in by_context["items"]] == ["layout"] and by_context["query"] == "sidebar 2"
    by_action = service.persistent_memory_retrieve(pm["id"], action="colour")
    assert [i["key"] for i in by_action["items"]] == ["colour"]
    with pytest.raises(InvalidInput, match="context"):
        service.persistent_memory_retrieve(pm["id"], context=["not", "an", "object"])


def test_a_template_places_hints_but_never_drops_query_or_keywords(service):
    service.memory_set("theme", "dark", namespace="p")
    service.memory_set("font", "mono", namespace="p")
    pm = create(service, "kv", "p", retrieval={"query_template": "{context.topic}"})
    result = service.persistent_memory_retrieve(
        pm["id"], query="font", keywords=["theme"], action="summarize", context={"topic": "ui"}
    )
    assert result["query"] == "ui font theme"  # the action is left out: the template did not place it
    assert {i["key"] for i in result["items"]} == {"theme", "font"}


@pytest.mark.parametrize(
    ("retrieval", "contribution", "fragments"),
    [
        ({"query_template": "{keyword}"}, {}, ["retrieval.query_template", "{keyword}", "allowed", "{keywords}"]),
        ({"query_template": "{mode.x}"}, {}, ["{mode.x}", "{mode}"]),
        ({"query_template": "find {keywords"}, {}, ["retrieval.query_template", "unmatched"]),
        ({"query_template": "a } b"}, {}, ["unmatched '}'"]),
        ({"query_template": "{key words}"}, {}, ["malformed placeholder"]),
        ({}, {"template": "{key}: {payload}"}, ["contribution.template", "{payload}", "{value}", "{index}"]),
        ({}, {"template": "{value"}, ["contribution.template", "unmatched"]),
    ],
)
def test_templates_are_checked_at_create(service, retrieval, contribution, fragments):
    with pytest.raises(InvalidInput) as refused:
        create(service, "kv", "p", retrieval=retrieval, contribution=contribution, additional_variables={"mode": "m"})
    for fragment in fragments:
        assert fragment in str(refused.value)
    assert service.persistent_memory_list() == []


def test_templates_are_checked_at_update(service):
    pm = create(service, "kv", "p", contribution={"template": "{key} = {value}"})
    with pytest.raises(InvalidInput, match="unknown placeholder"):
        service.persistent_memory_update(
            pm["id"], retrieval={"source_type": "kv", "source_id": "p", "query_template": "{q}"}
        )
    with pytest.raises(InvalidInput, match=r"contribution.template: unknown placeholder \{key\}"):
        service.persistent_memory_update(pm["id"], retrieval={"source_type": "kg", "source_id": "p"})
    assert service.persistent_memory_get(pm["id"])["retrieval"]["source_type"] == "kv"


def test_additional_variables_placeholder_renders(service):
    service.memory_set("theme", "dark", namespace="p")
    pm = create(
        service, "kv", "p", retrieval={"query_template": "{additional_variables}"},
        additional_variables={"topic": "theme"},
    )  # fmt: skip
    result = service.persistent_memory_retrieve(pm["id"])
    assert result["query"] == '{"topic":"theme"}'
    assert [i["key"] for i in result["items"]] == ["theme"]


def test_a_query_without_words_returns_nothing_but_no_input_browses(service):
    for second, key in enumerate(("a", "b", "c")):
        clock.set_offset(second)  # distinct times: newest first is then c, b, a
        service.memory_set(key, f"value {key}", namespace="p")
    pm = create(service, "kv", "p", retrieval={"query_template": "{context.topic}"})
    for inputs in ({"keywords": ["  "]}, {"query": "the"}, {"action": "find"}, {"context": {"other": "x"}}):
        result = service.persistent_memory_retrieve(pm["id"], **inputs)
        assert result["items"] == [], inputs
    browse = service.persistent_memory_retrieve(pm["id"])
    assert [i["key"] for i in browse["items"]] == ["c", "b", "a"] and browse["query"] == ""
    plain = create(service, "kv", "p")
    assert service.persistent_memory_retrieve(plain["id"], query="   ")["items"] == []  # blank: given, no words
    assert service.persistent_memory_retrieve(plain["id"], query="of the")["items"] == []


def test_eventlog_source_resolves_other_namespaces(service):
    mid = service.episodic_memory_create("ops log", namespace="ops")["memoryId"]
    service.episodic_memory_append_event(
        mid, {"event_type": "deploy", "emitting_agent_id": "ci", "payload": "deployed api"}, namespace="ops"
    )
    for source_id in (mid, f"ops/{mid}"):
        pm = create(service, "eventlog", source_id, namespace="default")
        result = service.persistent_memory_retrieve(pm["id"], query="api")
        assert [e["payload"] for e in result["items"]] == ["deployed api"], source_id
    other = service.episodic_memory_create("same id elsewhere", namespace="ops")["memoryId"]
    with pytest.raises(InvalidInput, match="retrieval.source_id"):
        create(service, "eventlog", f"default/{other}")


@pytest.mark.parametrize(
    ("source_type", "source_id", "filters", "fragment"),
    [
        ("eventlog", "ep_missing", {}, "retrieval.source_id: no episodic memory 'ep_missing'"),
        ("eventlog", None, {"kind": "deploy"}, "unknown eventlog filter kind"),
        ("eventlog", None, {"since": "yesterday"}, "retrieval.filters.since"),
        ("eventlog", None, {"tags": "ui"}, "retrieval.filters.tags"),
        ("eventlog", None, {"lastCount": -1}, "retrieval.filters.lastCount"),
        ("eventlog", None, {"lastMinutes": "ten"}, "retrieval.filters.lastMinutes"),
        ("eventlog", None, {"event_type": 5}, "retrieval.filters.event_type"),
        ("vectordb", "docs", {"teir": "semantic"}, "unknown vectordb filter teir"),
        ("vectordb", "docs", {"tier": "working"}, "retrieval.filters.tier"),
        ("vectordb", "docs", {"tier": "semantic", "agent": "a"}, "retrieval.filters.agent"),
        ("vectordb", "docs", {"min_score": 2}, "retrieval.filters.min_score"),
        ("vectordb", "docs", {"tags": "x"}, "retrieval.filters.tags"),
        ("kv", "p", {"key": "theme"}, "a kv source takes no filters"),
        ("kg", "g", {"entityType": "person"}, "a kg source takes no filters"),
    ],
)
def test_sources_and_filters_are_checked_at_create(service, source_type, source_id, filters, fragment):
    mid = service.episodic_memory_create("log")["memoryId"]
    with pytest.raises(InvalidInput) as refused:
        create(service, source_type, source_id or mid, retrieval={"filters": filters})
    assert fragment in str(refused.value)
    assert service.persistent_memory_list() == []


def test_sources_and_filters_are_checked_at_update(service):
    mid = service.episodic_memory_create("log")["memoryId"]
    pm = create(service, "eventlog", mid, retrieval={"filters": {"event_type": "deploy"}})
    with pytest.raises(InvalidInput, match="retrieval.filters.since"):
        service.persistent_memory_update(pm["id"], retrieval={"source_type": "eventlog", "source_id": mid,
                                                             "filters": {"since": "soon"}})  # fmt: skip
    with pytest.raises(InvalidInput, match="retrieval.source_id"):
        service.persistent_memory_update(pm["id"], retrieval={"source_type": "eventlog", "source_id": "ep_gone"})
    assert service.persistent_memory_get(pm["id"])["retrieval"]["filters"] == {"event_type": "deploy"}


def test_max_tokens_bounds_items_too(service):
    for i in range(6):
        service.memory_set(f"key{i}", f"value number {i} with a few more words", namespace="big")
    for fmt in ("text", "markdown", "json"):
        pm = create(service, "kv", "big", fmt=fmt, contribution={"max_tokens": 40})
        result = service.persistent_memory_retrieve(pm["id"])
        assert result["truncated"] and 0 < len(result["items"]) < 6, fmt
        assert result["tokens"] == count_tokens(result["contribution"]) <= 40
        for item in result["items"]:
            assert item["key"] in result["contribution"]
        if fmt == "json":
            assert orjson.loads(result["contribution"]) == result["items"]
        else:
            assert result["contribution"].count("value number") == len(result["items"])


def test_max_tokens_json_keeps_the_one_item_that_fits_and_says_when_none_does(service):
    service.memory_set("short", "tiny", namespace="p")
    service.memory_set("long", "a very long value " * 40, namespace="p")  # newer: ranked first on a tie
    for fmt in ("json", "text", "markdown"):
        pm = create(service, "kv", "p", fmt=fmt, label="Prefs", contribution={"max_tokens": 30})
        result = service.persistent_memory_retrieve(pm["id"], keywords=["tiny", "long"])
        assert [i["key"] for i in result["items"]] == ["short"] and result["truncated"], fmt
        assert "tiny" in result["contribution"] and "very long" not in result["contribution"]
        if fmt == "json":
            assert orjson.loads(result["contribution"]) == result["items"]
        none_fits = service.persistent_memory_retrieve(pm["id"], keywords=["long"])
        empty = "[]" if fmt == "json" else ""
        assert none_fits == {**none_fits, "items": [], "contribution": empty, "truncated": True}, fmt


def test_vectordb_never_fills_limit_with_irrelevant_entries(service):
    scope = service.scope("docs", "writer")
    service.store(scope, [
        {"key": "py", "content": "python type hints", "tier": "semantic"},
        {"key": "cook", "content": "beans salt", "tier": "semantic"},
    ])  # fmt: skip
    pm = create(service, "vectordb", "docs", retrieval={"limit": 5})
    found = service.persistent_memory_retrieve(pm["id"], query="python")["items"]
    assert [i["key"] for i in found] == [{"key": "py"}] and all(i["relevance"] > 0 for i in found)


@pytest.mark.parametrize(
    ("source_type", "filters"),
    [("vectordb", {"tiers": "semantic"}), ("kv", {"tags": ["a"]}), ("kg", {"type": "person"}),
     ("eventlog", {"eventType": "x"})],
)  # fmt: skip
def test_filters_a_source_does_not_read_are_refused(service, source_type, filters):
    source_id = service.episodic_memory_create("log")["memoryId"] if source_type == "eventlog" else "x"
    retrieval = {"source_type": source_type, "source_id": source_id, "filters": filters}
    with pytest.raises(InvalidInput, match=r"unknown \w+ filter|takes no filters"):
        service.persistent_memory_create("x", retrieval, {"format": "text"})
    made = service.persistent_memory_create(
        "x", {"source_type": source_type, "source_id": source_id}, {"format": "text"}
    )
    with pytest.raises(InvalidInput, match=r"unknown \w+ filter|takes no filters"):
        service.persistent_memory_update(made["id"], retrieval=retrieval)


def test_delete(service):
    made = service.persistent_memory_create("x", {"source_type": "kv", "source_id": "x"}, {"format": "text"})
    assert service.persistent_memory_delete(made["id"]) == {"id": made["id"], "deleted": True}
    assert service.persistent_memory_list() == []
    with pytest.raises(NotFound):
        service.persistent_memory_delete(made["id"])


TEMPLATE_ESCAPES = [
    ({"query_template": "{query.__class__}"}, {}, "'__'"),
    ({"query_template": "{context.__class__.__init__.__globals__}"}, {}, "'__'"),
    ({"query_template": "{__class__}"}, {}, "'__'"),
    ({"query_template": "{additional_variables.__class__}"}, {}, "'__'"),
    ({"query_template": "{keywords.x}"}, {}, "{keywords} takes no field"),
    ({"query_template": "{query.upper}"}, {}, "{query} takes no field"),
    ({"query_template": "{context[0]}"}, {}, "malformed placeholder"),
    ({}, {"template": "{value.__class__}"}, "'__'"),
    ({}, {"template": "{value.x}"}, "{value} takes no field"),
    ({}, {"template": "{index.real}"}, "{index} takes no field"),
    ({}, {"template": "{value[0]}"}, "malformed placeholder"),
]


@pytest.mark.parametrize(("retrieval", "contribution", "fragment"), TEMPLATE_ESCAPES)
def test_templates_take_no_attribute_access_nor_fields_of_plain_values(service, retrieval, contribution, fragment):
    """Audit F16: `{query.__class__}` and `{context.__class__.__init__.__globals__}` were accepted
    as query templates (and `{value.__class__}` as a contribution template) while `{value.__class__}`
    was refused in a query template: every template is now checked the same way, at create and update."""
    with pytest.raises(InvalidInput) as at_create:
        create(service, "kv", "p", retrieval=retrieval, contribution=contribution)
    assert fragment in str(at_create.value)
    assert service.persistent_memory_list() == []
    pm = create(service, "kv", "p")
    with pytest.raises(InvalidInput) as at_update:
        service.persistent_memory_update(
            pm["id"], retrieval={"source_type": "kv", "source_id": "p", **retrieval},
            contribution={"format": "json", **contribution},
        )  # fmt: skip
    assert fragment in str(at_update.value)
    assert service.persistent_memory_get(pm["id"])["retrieval"] == pm["retrieval"]


def test_the_documented_fields_are_still_accepted(service):
    service.memory_set("theme", "dark", namespace="p")
    template = "{context.topic.name} {opts.kind} {additional_variables.opts}"
    pm = create(
        service, "kv", "p", retrieval={"query_template": template},
        contribution={"template": "{index}. {key}: {value}"}, additional_variables={"opts": {"kind": "theme"}},
    )  # fmt: skip
    result = service.persistent_memory_retrieve(pm["id"], context={"topic": {"name": "ui"}})
    assert result["query"] == 'ui theme {"kind":"theme"}'
    assert result["contribution"] == '["1. theme: dark"]'


def test_an_authenticated_caller_cannot_save_a_config_reading_another_agent(service):
    """Audit F6, in the store: the same refusal as at retrieve, at create and at update."""
    vectordb = {"source_type": "vectordb", "source_id": "ns"}
    named_b = {**vectordb, "filters": {"agent": "bob"}}
    with pytest.raises(Unauthorized, match="'bob'"):
        service.persistent_memory_create("L", named_b, {"format": "text"}, namespace="ns", agent="alice")
    assert service.persistent_memory_list(namespace="ns") == []
    pm = service.persistent_memory_create("L", vectordb, {"format": "text"}, namespace="ns", agent="alice")
    with pytest.raises(Unauthorized, match="'bob'"):
        service.persistent_memory_update(pm["id"], namespace="ns", agent="alice", retrieval=named_b)
    assert service.persistent_memory_get(pm["id"], namespace="ns")["retrieval"]["filters"] == {}
    own = service.persistent_memory_update(pm["id"], namespace="ns", agent="alice", retrieval={
        **vectordb, "filters": {"agent": "alice"}})  # fmt: skip
    assert own["retrieval"]["filters"] == {"agent": "alice"}
    unauthenticated = service.persistent_memory_create("L", named_b, {"format": "text"}, namespace="ns")
    assert unauthenticated["retrieval"]["filters"] == {"agent": "bob"}


@pytest.mark.parametrize(
    ("retrieval", "contribution", "field"),
    [({"limit": True}, {}, "retrieval.limit"), ({"limit": "5"}, {}, "retrieval.limit"),
     ({}, {"max_tokens": "100"}, "contribution.max_tokens"), ({"source_id": 7}, {}, "retrieval.source_id")],
)  # fmt: skip
def test_settings_of_another_json_type_are_refused_not_converted(service, retrieval, contribution, field):
    """A retrieval limit of true was stored as 1 and "5" as 5, where a filter beside it of the
    wrong type was refused (outside audit D25)."""
    with pytest.raises(InvalidInput, match=field.replace(".", r"\.")):
        service.persistent_memory_create(
            "x", {"source_type": "kv", "source_id": "default", **retrieval}, {"format": "text", **contribution}
        )

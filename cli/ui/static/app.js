/* mem web view: one page, one view per URL hash (#search, #entry?..., #episodic, #timeline?...,
   #graph, #documents, #persistent). Every view asks the server (which asks the store) when it is
   shown: nothing is cached, so another process's writes show on the next refresh. Text from the
   store is only ever set as textContent, never parsed as HTML. */
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token") || "";
const main = document.getElementById("main");
const nsSelect = document.getElementById("namespace");

// -- talking to the server -------------------------------------------------------------------

async function api(path, params, body) {
  const url = new URL(`/api/${path}`, location.origin);
  for (const [name, value] of Object.entries(params || {})) {
    for (const item of [].concat(value)) if (item !== undefined && item !== null && item !== "") url.searchParams.append(name, item);
  }
  const options = { headers: { "X-Mem-Token": TOKEN } };
  if (body !== undefined) {
    options.method = "POST";
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(url, options);
  const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

// -- small DOM helpers -----------------------------------------------------------------------

function h(tag, attributes, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (value !== false && value !== undefined && value !== null) el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function say(text, kind = "info") {
  const box = document.getElementById("message");
  box.textContent = text;
  box.className = kind;
  box.hidden = !text;
}

const shown = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
const when = (value) => {
  if (value === null || value === undefined || value === "") return "";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return isNaN(date) ? String(value) : date.toLocaleString();
};
const tags = (list) => (list || []).map((t) => h("span", { class: "tag" }, t));
const namespace = () => nsSelect.value || "default";
const csv = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);

function table(columns, rows, onClick) {
  if (!rows.length) return h("p", { class: "empty" }, "nothing here yet");
  return h("table", {},
    h("thead", {}, h("tr", {}, columns.map(([label, , cls]) => h("th", { class: cls }, label)))),
    h("tbody", {}, rows.map((row) => h("tr", onClick ? { class: "clickable", onclick: () => onClick(row) } : {},
      columns.map(([, value, cls]) => h("td", { class: cls }, value(row)))))));
}

function hashParams() {
  const [page, query] = location.hash.slice(1).split("?");
  return { page: page || "search", params: new URLSearchParams(query || "") };
}

function go(page, params) {
  location.hash = `${page}?${new URLSearchParams(params)}`;
}

// -- search: namespaces, tiers, retrieve with explanations ------------------------------------

let overview = { namespaces: [], stats: [] };

async function loadOverview() {
  overview = await api("overview");
  document.getElementById("home").textContent = `store: ${overview.store}`;
  const chosen = nsSelect.value || hashParams().params.get("namespace") || "default";
  const names = new Set(["default", ...overview.namespaces.map((n) => n.namespace)]);
  nsSelect.replaceChildren(...[...names].sort().map((name) => h("option", { value: name }, name)));
  nsSelect.value = names.has(chosen) ? chosen : "default";
}

function agentsOf(ns) {
  const agents = overview.stats.filter((s) => s.namespace === ns && s.kind === "episodic").map((s) => s.scope);
  return [...new Set(["default", ...agents])].sort();
}

async function searchPage(params) {
  const ns = namespace();
  const tiers = overview.stats.filter((s) => s.namespace === ns);
  const form = h("form", { class: "filters", id: "search-form" },
    h("label", { class: "wide" }, "query", h("input", { id: "q", name: "query", type: "search", placeholder: "what are you looking for?", value: params.get("query") || "" })),
    h("label", {}, "agent (episodic tier)", h("select", { id: "agent", name: "agent" },
      agentsOf(ns).map((a) => h("option", { value: a, selected: a === (params.get("agent") || "default") }, a)))),
    h("label", {}, "tier", h("select", { id: "tier", name: "tier" },
      ["", "episodic", "semantic"].map((t) => h("option", { value: t, selected: t === (params.get("tier") || "") }, t || "any")))),
    h("label", {}, "tags (all must match)", h("input", { id: "tags", name: "tags", placeholder: "work, travel", value: params.get("tags") || "" })),
    h("label", {}, "key parts NAME=VALUE", h("input", { id: "keys", name: "keys", placeholder: "topic=pet", value: params.get("keys") || "" })),
    h("label", {}, "min score", h("input", { id: "min-score", name: "min_score", type: "number", min: 0, max: 1, step: 0.05, value: params.get("min_score") || "0" })),
    h("label", {}, "limit", h("input", { id: "limit", name: "limit", type: "number", min: 1, max: 1000, value: params.get("limit") || "20" })),
    h("button", { id: "search-button", type: "submit" }, "Search"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    go("search", { ...Object.fromEntries(new FormData(form)), namespace: ns, run: 1 });
  });
  const results = h("div", { id: "results" });
  main.replaceChildren(
    h("div", { class: "row" },
      h("section", { class: "panel", id: "namespaces" }, h("h2", {}, "Namespaces"),
        table([["namespace", (r) => r.namespace], ["entries", (r) => r.entries, "num"], ["bytes", (r) => r.bytes, "num"]],
          overview.namespaces, (r) => { nsSelect.value = r.namespace; go("search", { namespace: r.namespace }); })),
      h("section", { class: "panel", id: "tiers" }, h("h2", {}, `Tiers and collections of “${ns}”`),
        table([["kind", (r) => r.kind], ["scope", (r) => r.scope], ["entries", (r) => r.entries, "num"],
          ["bytes", (r) => r.bytes, "num"], ["expired", (r) => r.expired, "num"]], tiers))),
    h("section", { class: "panel" }, h("h2", {}, "Search memories"), form, results));
  if (params.get("run")) await runSearch(params, results);
}

async function runSearch(params, results) {
  const query = {
    namespace: namespace(), agent: params.get("agent") || "default", query: params.get("query") || "",
    tier: params.get("tier") || "", tag: csv(params.get("tags") || ""), key: csv(params.get("keys") || ""),
    min_score: params.get("min_score") || "0", limit: params.get("limit") || "20",
  };
  const found = await api("search", query);
  results.replaceChildren(
    h("p", { class: "meta", id: "result-count" }, `${found.entries.length} shown of ${found.total} matching`),
    ...found.entries.map((entry) => resultCard(entry, query)),
    ...(found.warnings || []).map((w) => h("p", { class: "meta" }, `warning: ${w}`)));
}

function resultCard(entry, query) {
  const locator = { namespace: query.namespace, agent: query.agent, tier: entry.tier, key: JSON.stringify(entry.key) };
  const bar = h("span");
  bar.style.width = `${Math.round(entry.relevance * 100)}%`;
  return h("article", { class: "result" },
    h("div", { class: "content" }, shown(entry.content)),
    h("div", { class: "meta" },
      h("span", {}, "relevance ", h("span", { class: "bar" }, bar), " ", h("b", { class: "relevance" }, entry.relevance.toFixed(3))),
      h("span", {}, `tier ${entry.tier}`), h("span", {}, "key ", h("code", {}, JSON.stringify(entry.key))),
      h("span", {}, tags(entry.tags)), h("span", {}, `score ${entry.score}`), h("span", {}, when(entry.updated_at)),
      h("a", { class: "open", href: `#entry?${new URLSearchParams(locator)}` }, "open")),
    explanation(entry.explain));
}

function explanation(explain) {
  if (!explain) return null;
  const parts = [];
  if (explain.vector !== undefined) parts.push(h("span", {}, `vector ${explain.vector} · lexical ${explain.lexical} · `));
  parts.push(h("span", {}, "fusion ", h("code", {}, explain.fusion)), ` · search path ${explain.path} · filters `,
    h("code", {}, JSON.stringify(explain.filters)));
  return h("div", { class: "explain" }, h("b", {}, "why: "), parts);
}

// -- one entry: fields, edit, delete ----------------------------------------------------------

async function entryPage(params) {
  const locator = Object.fromEntries(["namespace", "agent", "tier", "key"].map((n) => [n, params.get(n) || ""]));
  const entry = await api("entry", locator);
  const fields = h("dl", { class: "fields", id: "entry-fields" },
    [["namespace", locator.namespace], ["agent", entry.tier === "episodic" ? locator.agent : "(semantic: whole namespace)"],
      ["tier", entry.tier], ["key", JSON.stringify(entry.key)], ["tags", (entry.tags || []).join(", ")],
      ["source", entry.source], ["score", entry.score], ["ttl", entry.ttl ? `${entry.ttl} s` : "never expires"],
      ["created", when(entry.created_at)], ["updated", when(entry.updated_at)]]
      .flatMap(([name, value]) => [h("dt", {}, name), h("dd", {}, value)]));
  // a tag holding a comma, or spaces at its ends, cannot make the round trip through this box:
  // tags left as shown are not sent, so the entry keeps them exactly as they are
  const shownTags = (entry.tags || []).join(", ");
  const editor = h("form", { id: "edit-form", class: "stacked" },
    h("label", {}, "content (JSON if it parses, as with mem store)", h("textarea", { id: "edit-content" })),
    h("div", { class: "filters" },
      h("label", {}, "tags (comma-separated; kept exactly unless changed)", h("input", { id: "edit-tags", value: shownTags })),
      h("label", {}, "score", h("input", { id: "edit-score", type: "number", min: 0, max: 1, step: 0.05, value: entry.score })),
      h("label", {}, "ttl (seconds from the save, 0: never)", h("input", { id: "edit-ttl", type: "number", min: 0, step: 1, value: entry.ttl })),
      h("button", { id: "save", type: "submit" }, "Save")));
  editor.querySelector("textarea").value = shown(entry.content);
  editor.addEventListener("submit", async (event) => {
    event.preventDefault();
    await guarded(async () => {
      const text = editor.querySelector("textarea").value;
      const editedTags = document.getElementById("edit-tags").value;
      // content left as shown is not sent: a text that happens to parse as JSON stays text
      await api("entry/edit", undefined, { ...locator, key: entry.key, content: text === shown(entry.content) ? undefined : text,
        tags: editedTags === shownTags ? undefined : csv(editedTags), score: document.getElementById("edit-score").value,
        ttl: document.getElementById("edit-ttl").value });
      await entryPage(params);
      say("saved");
    });
  });
  const confirmBox = h("div", { class: "confirm", id: "confirm", hidden: true },
    h("p", {}, "Delete this entry for good? Agents will no longer retrieve it."),
    h("button", { class: "danger", id: "confirm-delete", type: "button", onclick: () => guarded(async () => {
      const result = await api("entry/delete", undefined, { ...locator, key: entry.key });
      main.replaceChildren(h("section", { class: "panel", id: "deleted" }, h("h2", {}, "Entry deleted"),
        h("p", {}, `${result.deleted} entry deleted: `, h("code", {}, JSON.stringify(entry.key))),
        h("a", { href: "#search" }, "back to search")));
      say("deleted");
    }) }, "Yes, delete"), " ",
    h("button", { class: "secondary", type: "button", onclick: () => { confirmBox.hidden = true; } }, "Cancel"));
  main.replaceChildren(h("section", { class: "panel", id: "entry" },
    h("h2", {}, "Entry"), fields,
    h("h3", {}, "Content"), h("pre", { id: "entry-content" }, shown(entry.content)),
    h("h3", {}, "Edit"), editor,
    h("h3", {}, "Delete"),
    h("button", { class: "danger", id: "delete", type: "button", onclick: () => { confirmBox.hidden = false; } }, "Delete…"),
    confirmBox));
}

// -- episodic memories as timelines -----------------------------------------------------------

async function episodicPage(params) {
  const archived = params.get("archived") === "1";
  const memories = await api("episodic", { namespace: namespace(), archived: archived ? "1" : "" });
  const toggle = h("input", { type: "checkbox", id: "archived", checked: archived,
    onchange: (e) => go("episodic", { archived: e.target.checked ? "1" : "" }) });
  main.replaceChildren(h("section", { class: "panel", id: "episodic" }, h("h2", {}, "Episodic memories"),
    h("label", {}, toggle, " include archived"),
    table([["title", (m) => m.title], ["events", (m) => m.eventCount, "num"], ["swarm", (m) => m.swarmId || ""],
      ["archived", (m) => (m.archived ? "yes" : "")], ["created", (m) => when(m.created_at)], ["id", (m) => m.memoryId]],
      memories, (m) => go("timeline", { memory_id: m.memoryId }))));
}

async function timelinePage(params) {
  const filters = Object.fromEntries(["memory_id", "event_type", "agent", "tag", "since", "until", "last_count"].map((n) => [n, params.get(n) || ""]));
  const since = filters.since ? new Date(filters.since).toISOString() : "";
  const until = filters.until ? new Date(filters.until).toISOString() : "";
  const data = await api("episodic/events", { ...filters, tag: csv(filters.tag), since, until, namespace: namespace() });
  const form = h("form", { class: "filters", id: "timeline-form" },
    h("input", { type: "hidden", name: "memory_id", value: filters.memory_id }),
    h("label", {}, "event type", h("select", { name: "event_type", id: "event-type" },
      ["", ...data.types].map((t) => h("option", { value: t, selected: t === filters.event_type }, t || "any")))),
    h("label", {}, "agent", h("input", { name: "agent", value: filters.agent })),
    h("label", {}, "tags (any of, comma-separated)", h("input", { name: "tag", id: "event-tags", value: filters.tag })),
    h("label", {}, "since", h("input", { name: "since", type: "datetime-local", value: filters.since })),
    h("label", {}, "until", h("input", { name: "until", type: "datetime-local", value: filters.until })),
    h("label", {}, "newest N", h("input", { name: "last_count", type: "number", min: 0, value: filters.last_count })),
    h("button", { type: "submit" }, "Filter"));
  form.addEventListener("submit", (event) => { event.preventDefault(); go("timeline", Object.fromEntries(new FormData(form))); });
  const memory = data.memory;
  data.types.forEach(MemGraph.colour); // colours in order of first appearance
  main.replaceChildren(h("section", { class: "panel", id: "timeline" },
    h("h2", {}, `Timeline: ${memory.title}`),
    h("p", { class: "meta" }, `${memory.eventCount} events · created ${when(memory.created_at)} · ${memory.memoryId}`,
      memory.archived ? " · archived" : "", " · ", h("a", { href: "#episodic" }, "all episodic memories")),
    form, strip(data.events),
    data.events.length ? h("ol", { class: "timeline" }, data.events.map(eventItem)) : h("p", { class: "empty" }, "no events pass these filters")));
}

function strip(events) {
  // every event as a dot on a time axis: bursts and gaps at a glance
  const SVG = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "strip");
  if (!events.length) return svg;
  const times = events.map((e) => Date.parse(e.timestamp));
  const first = Math.min(...times), span = Math.max(Math.max(...times) - first, 1);
  const axis = document.createElementNS(SVG, "line");
  Object.entries({ x1: "1%", x2: "99%", y1: 23, y2: 23, stroke: "#dde1e8" }).forEach(([k, v]) => axis.setAttribute(k, v));
  svg.appendChild(axis);
  events.forEach((event, i) => {
    const dot = document.createElementNS(SVG, "circle");
    Object.entries({ cx: `${1 + (98 * (times[i] - first)) / span}%`, cy: 23, r: 6, fill: MemGraph.colour(event.event_type) })
      .forEach(([k, v]) => dot.setAttribute(k, v));
    const title = document.createElementNS(SVG, "title");
    title.textContent = `${when(event.timestamp)} ${event.event_type}`;
    dot.appendChild(title);
    svg.appendChild(dot);
  });
  return svg;
}

function eventItem(event) {
  const item = h("li", { class: "event" },
    h("div", { class: "meta" }, h("span", { class: "type" }, event.event_type), h("span", {}, when(event.timestamp)),
      h("span", {}, `agent ${event.emitting_agent_id}`), event.team_id ? h("span", {}, `team ${event.team_id}`) : null,
      h("span", {}, tags(event.tags))),
    h("pre", {}, shown(event.payload)));
  item.style.setProperty("--dot", MemGraph.colour(event.event_type));
  return item;
}

// -- the knowledge graph -----------------------------------------------------------------------

async function graphPage(params) {
  const query = params.get("query") || "";
  const graph = await api("graph", { namespace: namespace(), query });
  const side = h("aside", { class: "panel graph-side", id: "entity" }, h("p", { class: "empty" }, "click an entity to see its observations and relations"));
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "graph");
  svg.setAttribute("id", "graph");
  const form = h("form", { class: "filters" },
    h("label", { class: "wide" }, "search entities (empty: the whole graph)", h("input", { name: "query", id: "graph-query", value: query })),
    h("button", { type: "submit" }, "Show"));
  form.addEventListener("submit", (event) => { event.preventDefault(); go("graph", Object.fromEntries(new FormData(form))); });
  const types = [...new Set(graph.entities.map((e) => e.entityType))].sort();
  main.replaceChildren(h("section", { class: "panel" },
    h("h2", {}, "Knowledge graph"),
    h("p", { class: "meta", id: "graph-count" }, graph.more
      ? `the first ${graph.entities.length} entities (the store holds more: search to find others) · ${graph.relations.length} relations among them`
      : `${graph.entities.length} entities · ${graph.relations.length} relations`),
    form,
    h("p", { class: "legend" }, types.map((t) => {
      const swatch = h("i", { class: "swatch" });
      swatch.style.background = MemGraph.colour(t);
      return h("span", {}, swatch, t);
    })),
    graph.entities.length ? h("div", { class: "graph-wrap" }, svg, side) : h("p", { class: "empty" }, "no entities: add some with `mem kg create`")));
  if (graph.entities.length) MemGraph.draw(svg, graph, (entity) => showEntity(side, entity, graph));
}

function showEntity(side, entity, graph) {
  const related = graph.relations.filter((r) => r.from === entity.name || r.to === entity.name);
  side.replaceChildren(h("h3", { id: "entity-name" }, entity.name), h("p", { class: "meta" }, `type ${entity.entityType}`),
    h("h3", {}, "Observations"),
    entity.observations.length ? h("ul", { id: "observations" }, entity.observations.map((o) => h("li", {}, o))) : h("p", { class: "empty" }, "none"),
    h("h3", {}, graph.more ? "Relations (with the entities shown)" : "Relations"),
    related.length ? h("ul", {}, related.map((r) => h("li", {}, `${r.from} `, h("b", {}, r.relationType), ` ${r.to}`))) : h("p", { class: "empty" }, "none"));
}

// -- todos, JSON and markdown memories ---------------------------------------------------------

async function documentsPage() {
  const ns = namespace();
  const [todo, json, markdown] = await Promise.all(["todo", "json", "markdown"].map((kind) => api("documents", { kind, namespace: ns })));
  const list = (kind, records) => h("section", { class: "panel", id: `documents-${kind}` },
    h("h2", {}, { todo: "Todos", json: "JSON memories", markdown: "Markdown memories" }[kind]),
    records.length ? records.map((r) => h("article", { class: "result" },
      kind === "todo" && r.todo && (r.todo.title || r.todo.status)
        ? h("div", { class: "todo" }, h("b", {}, String(r.todo.title || "")), " ", r.todo.status ? h("span", { class: "tag" }, String(r.todo.status)) : null)
        : null,
      h("div", { class: "meta" }, h("code", {}, r.memoryId), h("span", {}, `updated ${when(r.updated_at)}`),
        r.metadata && Object.keys(r.metadata).length ? h("span", {}, `metadata ${JSON.stringify(r.metadata)}`) : null),
      h("pre", {}, shown(r[kind])))) : h("p", { class: "empty" }, `no ${kind} memories in “${ns}”`));
  main.replaceChildren(list("todo", todo), list("json", json), list("markdown", markdown));
}

// -- persistent memories: configurations, run one ----------------------------------------------

async function persistentPage() {
  const ns = namespace();
  const configs = await api("persistent", { namespace: ns });
  main.replaceChildren(h("section", { class: "panel", id: "persistent" }, h("h2", {}, "Persistent memories"),
    configs.length ? configs.map((c) => persistentCard(c, ns)) : h("p", { class: "empty" }, `no persistent memories in “${ns}”`)));
}

function persistentCard(config, ns) {
  const output = h("div", { class: "output" });
  const form = h("form", { class: "filters" },
    h("label", { class: "wide" }, "query", h("input", { name: "query" })),
    h("label", {}, "keywords (comma-separated)", h("input", { name: "keywords" })),
    h("label", {}, "action", h("input", { name: "action", placeholder: "find" })),
    h("button", { type: "submit" }, "Run retrieve"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const values = Object.fromEntries(new FormData(form));
    guarded(async () => {
      const result = await api("persistent/retrieve", undefined, { id: config.id, namespace: ns, query: values.query,
        keywords: csv(values.keywords), action: values.action });
      output.replaceChildren(h("h3", {}, "Rendered contribution"), h("pre", { class: "contribution" }, shown(result.contribution)),
        h("details", {}, h("summary", {}, "whole result"), h("pre", {}, shown(result))));
    });
  });
  return h("article", { class: "result" },
    h("div", { class: "meta" }, h("b", {}, config.label), h("code", {}, config.id), h("span", {}, `status ${config.status}`),
      h("span", {}, `source ${config.retrieval.source_type}:${config.retrieval.source_id || ""}`),
      h("span", {}, `format ${config.contribution.format}`)),
    config.description ? h("p", {}, config.description) : null,
    h("details", {}, h("summary", {}, "configuration"), h("pre", {}, shown(config))),
    form, output);
}

// -- routing -----------------------------------------------------------------------------------

const PAGES = { search: searchPage, entry: entryPage, episodic: episodicPage, timeline: timelinePage,
  graph: graphPage, documents: documentsPage, persistent: persistentPage };
const NAV = { entry: "search", timeline: "episodic" };

async function guarded(work) {
  try {
    await work();
  } catch (error) {
    say(error.message, "error");
  }
}

async function render() {
  const { page, params } = hashParams();
  say("");
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.page === (NAV[page] || page)));
  await guarded(async () => {
    await loadOverview();
    await (PAGES[page] || searchPage)(params);
  });
  document.body.dataset.ready = page; // for the browser tests: the view is drawn
}

window.addEventListener("hashchange", () => { document.body.dataset.ready = ""; render(); });
nsSelect.addEventListener("change", () => go(NAV[hashParams().page] || hashParams().page, { namespace: nsSelect.value }));
document.getElementById("refresh").addEventListener("click", () => { document.body.dataset.ready = ""; render(); });
render();

/* The knowledge graph as SVG: a small force-directed layout (Fruchterman-Reingold), no library.
   MemGraph.draw(svg, graph, onSelect) lays out graph.entities and graph.relations and draws them;
   clicking an entity calls onSelect(entity). The layout is deterministic (nodes start on a
   circle, in name order), so the same graph is drawn the same way on every refresh. */
"use strict";

const MemGraph = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 900, HEIGHT = 600, ROUNDS = 400;

  // distinct colours, given to types in order (a hash of the name made near-twins)
  const PALETTE = ["#2f6fde", "#e0622e", "#23a36b", "#a445d8", "#d6a41c", "#1fa8b8", "#d8457f", "#6b7a33",
    "#7d5a3c", "#5b6bd6"];
  const assigned = new Map();

  function colour(type) {
    const name = String(type);
    if (!assigned.has(name)) assigned.set(name, PALETTE[assigned.size % PALETTE.length]);
    return assigned.get(name);
  }

  function layout(nodes, edges) {
    const n = nodes.length;
    nodes.forEach((node, i) => {
      const angle = (2 * Math.PI * i) / Math.max(n, 1);
      node.x = WIDTH / 2 + (WIDTH / 3) * Math.cos(angle);
      node.y = HEIGHT / 2 + (HEIGHT / 3) * Math.sin(angle);
    });
    const k = Math.sqrt((WIDTH * HEIGHT) / Math.max(n, 1)); // ideal edge length
    for (let round = 0; round < ROUNDS; round++) {
      const step = (WIDTH / 8) * (1 - round / ROUNDS) + 0.5; // cooling: big moves first, then settle
      nodes.forEach((node) => { node.dx = 0; node.dy = 0; });
      for (let i = 0; i < n; i++) { // every pair repels
        for (let j = i + 1; j < n; j++) {
          const a = nodes[i], b = nodes[j];
          let dx = a.x - b.x, dy = a.y - b.y;
          const dist = Math.max(Math.hypot(dx, dy), 0.5);
          const force = (k * k) / dist;
          dx /= dist; dy /= dist;
          a.dx += dx * force; a.dy += dy * force; b.dx -= dx * force; b.dy -= dy * force;
        }
      }
      for (const edge of edges) { // related entities attract
        const a = edge.source, b = edge.target;
        if (a === b) continue;
        const dx = a.x - b.x, dy = a.y - b.y;
        const dist = Math.max(Math.hypot(dx, dy), 0.5);
        const force = (dist * dist) / k;
        a.dx -= (dx / dist) * force; a.dy -= (dy / dist) * force;
        b.dx += (dx / dist) * force; b.dy += (dy / dist) * force;
      }
      for (const node of nodes) { // a pull to the centre keeps loose parts in view
        node.dx += (WIDTH / 2 - node.x) * 0.05;
        node.dy += (HEIGHT / 2 - node.y) * 0.05;
        const length = Math.max(Math.hypot(node.dx, node.dy), 0.01);
        node.x += (node.dx / length) * Math.min(length, step);
        node.y += (node.dy / length) * Math.min(length, step);
      }
    }
    fit(nodes);
  }

  function fit(nodes) {
    // stretch the drawing to fill the view: each axis on its own, so a long chain of entities
    // does not leave the rest of the graph crowded in the middle
    const MARGIN = 50;
    const xs = nodes.map((node) => node.x), ys = nodes.map((node) => node.y);
    const [left, top] = [Math.min(...xs), Math.min(...ys)];
    const width = Math.max(...xs) - left, height = Math.max(...ys) - top;
    const sx = width > 1 ? (WIDTH - 2 * MARGIN) / width : 0, sy = height > 1 ? (HEIGHT - 2 * MARGIN) / height : 0;
    for (const node of nodes) {
      node.x = sx ? MARGIN + (node.x - left) * sx : WIDTH / 2;
      node.y = sy ? MARGIN + (node.y - top) * sy : HEIGHT / 2;
    }
  }

  function element(name, attributes, text) {
    const el = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes || {})) el.setAttribute(key, value);
    if (text !== undefined) el.textContent = text;
    return el;
  }

  function arrowhead(svg) {
    const defs = element("defs");
    const marker = element("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "24", refY: "5",
      markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" });
    marker.appendChild(element("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#9aa3b5" }));
    defs.appendChild(marker);
    svg.appendChild(defs);
  }

  function draw(svg, graph, onSelect) {
    svg.replaceChildren();
    svg.setAttribute("viewBox", `0 0 ${WIDTH} ${HEIGHT}`);
    arrowhead(svg);
    const nodes = graph.entities.map((entity) => ({ entity }));
    const byName = new Map(nodes.map((node) => [node.entity.name, node]));
    const edges = graph.relations
      .filter((r) => byName.has(r.from) && byName.has(r.to))
      .map((relation) => ({ relation, source: byName.get(relation.from), target: byName.get(relation.to) }));
    layout(nodes, edges);
    for (const edge of edges) {
      const { source: a, target: b } = edge;
      svg.appendChild(element("line", { x1: a.x, y1: a.y, x2: b.x, y2: b.y, "marker-end": "url(#arrow)",
        "data-relation": `${edge.relation.from} ${edge.relation.relationType} ${edge.relation.to}` }));
      svg.appendChild(element("text", { class: "edge-label", x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 - 4,
        "text-anchor": "middle" }, edge.relation.relationType));
    }
    for (const node of nodes) {
      const group = element("g", { class: "node", transform: `translate(${node.x},${node.y})`,
        "data-name": node.entity.name, tabindex: "0" });
      group.appendChild(element("circle", { r: 13, fill: colour(node.entity.entityType) }));
      group.appendChild(element("title", {}, `${node.entity.name} (${node.entity.entityType})`));
      group.appendChild(element("text", { y: 28, "text-anchor": "middle" }, node.entity.name));
      const select = () => {
        svg.querySelectorAll(".node.selected").forEach((g) => g.classList.remove("selected"));
        group.classList.add("selected");
        onSelect(node.entity);
      };
      group.addEventListener("click", select);
      group.addEventListener("keydown", (event) => { if (event.key === "Enter") select(); });
      svg.appendChild(group);
    }
  }

  return { draw, colour };
})();

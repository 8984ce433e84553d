"""One search of a store as one self-contained HTML page (`kir report DB --out report.html`).

The page needs no network: its CSS and JavaScript are inline, the drawing is inline SVG made by
the page's own script. It shows

- the search tree, a layer per depth: each node a circle coloured by where its evaluation got
  (scored, failed after the static checks, stopped statically at parse, verify, cost or lower, not
  evaluated yet), a scored node shaded and sized by its speed against the seed's, the path to
  the best node drawn thick; a click on a node shows its move, score, predicted time, stage,
  diagnostics and program text;
- the best score so far against the number of evaluations (the measured nodes in id order).

The data is one JSON object (`payload`) in a `<script type="application/json">` element, with
`<`, `>` and `&` written as `\\u003c`, `\\u003e` and `\\u0026` so that no program text or message
(`</script>` included) can end the element early; the script reads it back with `JSON.parse` and
puts strings in the page as text, never as markup. Once it has drawn, the script sets
`document.body.dataset.drawn` to the number of nodes drawn (what the browser test reads).
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

from agent.pipeline import STAGES
from agent.search.tree import Node, Tree

SCHEMA = "kir.report.page/1"  # the page's JSON payload
STATIC_STAGES = ("parse", "verify", "cost", "lower")  # what the proposer checks before anything is measured
MEASURED_UNTIL = STAGES[-1]  # a measured node's Record was asked to go through `run`


class ReportError(Exception):
    """The store or the search asked for cannot be reported on: a message and a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def render(store_url: str, name: str | None = None) -> str:
    """The page of search `name` of the store at `store_url` (default: its last search)."""
    return page(payload(store_url, name))


def payload(store_url: str, name: str | None = None) -> dict[str, Any]:
    """What the page shows, as plain JSON data (`ReportError` where there is no such search)."""
    from agent.store import StoreError, open_store

    if not store_url.startswith(("postgresql://", "postgres://")) and not Path(store_url).is_file():
        raise ReportError(f"no store at {store_url}")  # open_store would create one
    try:
        store = open_store(store_url)
    except StoreError as err:
        raise ReportError(str(err)) from None
    with store:
        searches = store.searches()
        if not searches:
            raise ReportError(f"{store_url} holds no search")
        chosen = next((s for s in searches if s["name"] == name), None) if name else searches[-1]
        if chosen is None:
            raise ReportError(
                f"{store_url} has no search named {name}", f"its searches: {', '.join(s['name'] for s in searches)}"
            )
        tree = Tree.of(store.nodes(chosen["id"]))
    return tree_payload(tree, chosen["name"], chosen["task"], chosen["config"])


def tree_payload(tree: Tree, name: str, task: str, config: dict[str, Any]) -> dict[str, Any]:
    nodes = sorted(tree, key=lambda n: n.id)
    seed = _finite(tree.root.score) if nodes else None
    best = tree.best() if nodes else None
    path = [n.id for n in tree.chain(best.id)] if best is not None else []
    on_path = set(path)
    progress: list[dict[str, Any]] = []
    best_so_far: float | None = None
    best_id: int | None = None
    for n in nodes:
        if n.record is None or n.record.until != MEASURED_UNTIL:
            continue
        score = _finite(n.score)
        if score is not None and (best_so_far is None or score < best_so_far):
            best_so_far, best_id = score, n.id
        progress.append(
            {"evaluation": len(progress) + 1, "id": n.id, "score": score, "best": best_so_far, "best_id": best_id}
        )
    return {
        "schema": SCHEMA,
        "name": name,
        "task": task,
        "config": config,
        "unit": _unit(tree, config),
        "seed_score": seed,
        "best": None if best is None else best.id,
        "path": path,
        "nodes": [_node(n, seed, n.id in on_path) for n in nodes],
        "progress": progress,
    }


def _node(n: Node, seed: float | None, on_path: bool) -> dict[str, Any]:
    score = _finite(n.score)
    record = n.record
    return {
        "id": n.id,
        "parent": n.parent,
        "depth": n.depth,
        "round": n.round,
        "move": n.move.describe(),
        "proposer": n.move.proposer,
        "params": dict(n.params),
        "status": n.status,
        "stage": n.stage,
        "kind": _kind(n),
        "ok": None if record is None else record.ok,
        "score": score,
        "speedup": seed / score if seed is not None and score else None,
        "predicted_s": _finite(n.predicted),
        "on_path": on_path,
        "diagnostics": [] if record is None else [_diagnostic(d.to_json()) for d in record.diagnostics],
        "text": n.text,
    }


def _kind(n: Node) -> str:
    """What the node's colour says: scored, failed (measured, no score), static (stopped at
    parse, verify or cost), pending (no Record yet)."""
    if n.score is not None:
        return "scored"
    if n.record is None:
        return "pending"
    return "static" if n.record.stage in STATIC_STAGES else "failed"


def _diagnostic(d: dict[str, Any]) -> dict[str, Any]:
    keys = ("rule", "severity", "message", "hint", "line", "col")
    return {k: d.get(k) for k in keys}


def _unit(tree: Tree, config: dict[str, Any]) -> str:
    """What a score counts: the harness's milliseconds where it timed, else simulator cycles
    (`score_of`'s order)."""
    for n in tree.scored():
        metrics = ((n.record.verdict if n.record else None) or {}).get("metrics") or {}
        return "ms" if metrics.get("ms") else "cycles"
    return "cycles" if config.get("backend") == "mtia-sim" else "ms"


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None  # JSON has no inf or NaN


def embed(data: dict[str, Any]) -> str:
    """`data` as JSON that can sit inside a <script> element: no `<`, `>` or `&` left (each is
    a \\u escape, which JSON.parse reads back as the character), so no `</script>` or `<!--`."""
    text = json.dumps(data, allow_nan=False, sort_keys=True)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def page(data: dict[str, Any]) -> str:
    parts = {
        "TITLE": html.escape(f"KIR search {data['name']} ({data['task']})"),
        "STYLE": _STYLE,
        "SCRIPT": _SCRIPT,
        "DATA": embed(data),
    }
    # one pass, so that a marker inside a search's name or data is left as it is
    return re.sub(r"@(TITLE|STYLE|SCRIPT|DATA)@", lambda m: parts[m.group(1)], _PAGE)


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>@TITLE@</title>
<style>@STYLE@</style>
</head>
<body>
<header><h1>@TITLE@</h1><p id="summary"></p></header>
<main>
<section id="tree-section"><h2>Search tree</h2><div id="legend"></div><div id="tree"></div></section>
<aside id="panel"><h2>Node</h2><p class="muted">Click a node.</p></aside>
<section id="chart-section"><h2>Best so far against evaluations</h2><div id="chart"></div></section>
</main>
<script type="application/json" id="search-data">@DATA@</script>
<script>@SCRIPT@</script>
</body>
</html>
"""

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { padding: 8px 16px; border-bottom: 1px solid #ddd; }
h1 { font-size: 18px; margin: 4px 0; } h2 { font-size: 15px; margin: 6px 0; }
main { display: grid; grid-template-columns: minmax(0, 1fr) 420px; gap: 12px; padding: 8px 16px; }
#tree-section { grid-column: 1; } #chart-section { grid-column: 1; }
#panel { grid-column: 2; grid-row: 1 / span 2; border-left: 1px solid #ddd; padding-left: 12px;
  max-height: 95vh; overflow: auto; position: sticky; top: 0; }
#tree { overflow: auto; max-height: 70vh; border: 1px solid #eee; }
#legend span { display: inline-block; margin-right: 12px; }
#legend i { display: inline-block; width: 11px; height: 11px; border-radius: 50%; margin-right: 4px;
  vertical-align: -1px; border: 1px solid #555; }
.muted { color: #777; }
.edge { stroke: #bbb; stroke-width: 1.2; fill: none; }
.edge.best { stroke: #1f5fbf; stroke-width: 3.5; }
.node circle { stroke: #444; stroke-width: 1; cursor: pointer; }
.node.best circle { stroke: #1f5fbf; stroke-width: 3; }
.node.selected circle { stroke: #000; stroke-width: 3.5; }
.node:focus { outline: none; } .node:focus circle { stroke-dasharray: 3 2; }
.node text { font-size: 10px; fill: #333; pointer-events: none; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 6px 0; }
dt { color: #666; } dd { margin: 0; word-break: break-word; }
.diag { margin: 4px 0; padding: 4px 6px; background: #fff4f4; border-left: 3px solid #d62728; }
.diag.warning { background: #fffbea; border-left-color: #e6a700; }
.diag .rule { font-family: monospace; font-weight: bold; }
pre { font: 12px/1.35 ui-monospace, monospace; background: #f7f7f7; padding: 6px; overflow: auto; }
pre .ln { color: #999; display: inline-block; width: 3.5em; user-select: none; }
pre .hit { background: #ffe0e0; display: inline-block; min-width: 100%; }
.axis { stroke: #888; } .grid { stroke: #eee; } .tick { font-size: 10px; fill: #555; }
.bestline { stroke: #1f5fbf; stroke-width: 2; fill: none; }
.seedline { stroke: #999; stroke-dasharray: 4 3; }
.point { fill: #9ecae1; stroke: #3182bd; cursor: pointer; } .point.failed { fill: #d62728; stroke: #d62728; }
"""

_SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("search-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var STATIC_COLOURS = { parse: "#9e9e9e", verify: "#9467bd", cost: "#f0b400" };
  var FAILED_COLOURS = { lower: "#ff7f0e", compile: "#ff7f0e", run: "#d62728" };

  function el(name, attrs, parent, ns) {
    var e = ns === false ? document.createElement(name) : document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(e);
    return e;
  }
  function html(name, text, parent, cls) {
    var e = document.createElement(name);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    if (parent) parent.appendChild(e);
    return e;
  }
  function num(x) {
    if (x === null || x === undefined) return "-";
    return Math.abs(x) >= 1000 ? x.toFixed(0) : Number(x.toPrecision(4)).toString();
  }
  function score(x) { return x === null || x === undefined ? "-" : num(x) + " " + data.unit; }
  function seconds(s) {
    if (s === null || s === undefined) return "-";
    var units = [[1, "s"], [1e-3, "ms"], [1e-6, "\u00b5s"], [1e-9, "ns"]];
    for (var i = 0; i < units.length; i++) {
      if (Math.abs(s) >= units[i][0] || i === units.length - 1) return num(s / units[i][0]) + " " + units[i][1];
    }
  }

  // ---- colours ----
  var spread = 1.05;  // the widest speed ratio among scored nodes, either way
  data.nodes.forEach(function (n) {
    if (n.speedup) spread = Math.max(spread, n.speedup, 1 / n.speedup);
  });
  function mix(a, b, t) {
    var pa = [1, 3, 5].map(function (i) { return parseInt(a.substr(i, 2), 16); });
    var pb = [1, 3, 5].map(function (i) { return parseInt(b.substr(i, 2), 16); });
    return "rgb(" + pa.map(function (v, i) { return Math.round(v + (pb[i] - v) * t); }).join(",") + ")";
  }
  function colour(n) {
    if (n.kind === "scored") {
      if (!n.speedup) return "#74c476";
      var t = 0.5 + 0.5 * Math.log(n.speedup) / Math.log(spread);  // 0 slowest, 0.5 the seed, 1 fastest
      return t < 0.5 ? mix("#f7fcb9", "#74c476", t * 2) : mix("#74c476", "#00441b", (t - 0.5) * 2);
    }
    if (n.kind === "static") return STATIC_COLOURS[n.stage] || "#bbbbbb";
    if (n.kind === "failed") return FAILED_COLOURS[n.stage] || "#d62728";
    return "#ffffff";
  }
  function radius(n) {
    if (n.kind !== "scored") return 5.5;
    return Math.max(5, Math.min(16, 8 * Math.sqrt(n.speedup || 1)));
  }

  // ---- the summary and the legend ----
  var evaluations = data.progress.length;
  var bestNode = null;
  var byId = {};
  data.nodes.forEach(function (n) { byId[n.id] = n; n.children = []; });
  if (data.best !== null) bestNode = byId[data.best];
  var summary = data.nodes.length + " nodes, " + evaluations + " evaluations; seed " + score(data.seed_score);
  if (bestNode) summary += "; best " + score(bestNode.score) + " (node " + bestNode.id + ", " +
    (bestNode.speedup ? num(bestNode.speedup) + "x the seed" : "") + ")";
  document.getElementById("summary").textContent = summary;
  var legend = document.getElementById("legend");
  [["#00441b", "scored, faster than the seed"], ["#74c476", "scored, as the seed"],
   ["#f7fcb9", "scored, slower"], ["#d62728", "failed at run"], ["#ff7f0e", "failed to lower or compile"],
   [STATIC_COLOURS.cost, "stopped at cost"], [STATIC_COLOURS.verify, "stopped at verify"],
   [STATIC_COLOURS.parse, "stopped at parse"], ["#ffffff", "not evaluated"]].forEach(function (entry) {
    var s = html("span", null, legend);
    var dot = html("i", null, s);
    dot.style.background = entry[0];
    s.appendChild(document.createTextNode(entry[1]));
  });
  html("span", "thick blue: the path to the best node; size: speed against the seed", legend, "muted");

  // ---- the tree: leaves left to right in id order, a parent above the middle of its children ----
  var roots = [];
  data.nodes.forEach(function (n) {
    if (n.parent !== null && byId[n.parent]) byId[n.parent].children.push(n); else roots.push(n);
  });
  var DX = 44, DY = 72, MARGIN = 28;
  var leaves = 0, maxDepth = 0;
  function place(root) {  // iterative: a deep chain must not overflow the stack
    var stack = [[root, 0, false]];
    while (stack.length) {
      var top = stack.pop(), n = top[0];
      if (!top[2]) {
        n.level = top[1];
        maxDepth = Math.max(maxDepth, n.level);
        stack.push([n, top[1], true]);
        for (var i = n.children.length - 1; i >= 0; i--) stack.push([n.children[i], top[1] + 1, false]);
      } else if (!n.children.length) {
        n.x = leaves++;
      } else {
        n.x = (n.children[0].x + n.children[n.children.length - 1].x) / 2;
      }
    }
  }
  roots.forEach(place);
  var width = Math.max(2 * MARGIN + (leaves - 1) * DX, 200), height = 2 * MARGIN + maxDepth * DY + 14;
  var svg = el("svg", { id: "tree-svg", width: width, height: height, viewBox: "0 0 " + width + " " + height },
    document.getElementById("tree"));
  function px(n) { return MARGIN + n.x * DX; }
  function py(n) { return MARGIN + n.level * DY; }
  var edges = el("g", {}, svg), dots = el("g", {}, svg);
  data.nodes.forEach(function (n) {
    if (n.parent === null || !byId[n.parent]) return;
    var p = byId[n.parent], my = (py(p) + py(n)) / 2;
    el("path", {
      "class": "edge" + (n.on_path && p.on_path ? " best" : ""),
      d: "M" + px(p) + "," + py(p) + " C" + px(p) + "," + my + " " + px(n) + "," + my + " " + px(n) + "," + py(n),
    }, edges);
  });
  var label = data.nodes.length <= 200;
  var drawn = 0, groups = {};
  data.nodes.forEach(function (n) {
    var g = el("g", { "class": "node" + (n.on_path ? " best" : ""), tabindex: "0", "data-id": n.id,
                      transform: "translate(" + px(n) + "," + py(n) + ")" }, dots);
    var c = el("circle", { r: radius(n), fill: colour(n) }, g);
    if (n.kind === "pending") c.setAttribute("stroke-dasharray", "2 2");
    el("title", {}, g).textContent = "#" + n.id + " " + n.move + " \u2014 " + (n.stage || n.status) +
      (n.score !== null ? ", " + score(n.score) : "");
    if (label && n.speedup) {
      el("text", { y: radius(n) + 11, "text-anchor": "middle" }, g).textContent = n.speedup.toFixed(2) + "x";
    }
    g.addEventListener("click", function () { select(n.id); });
    g.addEventListener("keydown", function (e) { if (e.key === "Enter" || e.key === " ") select(n.id); });
    groups[n.id] = g;
    drawn++;
  });

  // ---- the panel ----
  var selected = null;
  function select(id) {
    if (selected !== null && groups[selected]) groups[selected].classList.remove("selected");
    selected = id;
    if (groups[id]) groups[id].classList.add("selected");
    var n = byId[id], panel = document.getElementById("panel");
    panel.textContent = "";
    html("h2", "Node " + n.id + ": " + n.move, panel);
    var dl = html("dl", null, panel);
    function row(k, v) { html("dt", k, dl); html("dd", v, dl); }
    row("move", n.move);
    row("proposer", n.proposer);
    row("parent", n.parent === null ? "-" : n.parent);
    row("round, depth", n.round + ", " + n.depth);
    row("stage", (n.stage || "-") + (n.ok === false ? " (stopped)" : "") + "; " + n.kind);
    row("score", score(n.score));
    row("speed", n.speedup ? num(n.speedup) + "x the seed" : "-");
    row("predicted", seconds(n.predicted_s));
    var params = Object.keys(n.params);
    row("parameters", params.length ? params.map(function (k) { return k + "=" + n.params[k]; }).join(", ") : "-");
    row("best path", n.on_path ? "yes" : "no");
    html("h3", "Diagnostics (" + n.diagnostics.length + ")", panel);
    if (!n.diagnostics.length) html("p", "none", panel, "muted");
    var lines = {};
    n.diagnostics.forEach(function (d) {
      var box = html("div", null, panel, "diag " + (d.severity || ""));
      html("span", d.rule, box, "rule");
      box.appendChild(document.createTextNode(
        " " + (d.severity || "") + (d.line !== null ? " at line " + d.line + (d.col !== null ? ":" + d.col : "") : "") +
        ": " + d.message));
      if (d.hint) html("div", "hint: " + d.hint, box, "muted");
      if (d.line !== null) lines[d.line] = true;
    });
    html("h3", "Program", panel);
    var pre = html("pre", null, panel);
    n.text.split("\n").forEach(function (line, i) {
      var span = html("span", null, pre, lines[i + 1] ? "hit" : "");
      html("span", String(i + 1), span, "ln");
      span.appendChild(document.createTextNode(line));
      pre.appendChild(document.createTextNode("\n"));
    });
  }

  // ---- the chart: each evaluation's score, the best so far as a step line, the seed dashed ----
  (function chart() {
    var box = document.getElementById("chart");
    if (!data.progress.length) { html("p", "No measured node.", box, "muted"); return; }
    var W = 640, H = 260, L = 70, R = 16, T = 12, B = 40;
    var s = el("svg", { id: "chart-svg", width: W, height: H, viewBox: "0 0 " + W + " " + H }, box);
    var scores = data.progress.map(function (p) { return p.score; }).filter(function (v) { return v !== null; });
    if (data.seed_score !== null) scores.push(data.seed_score);
    var lo = scores.length ? Math.min.apply(null, scores) : 0, hi = scores.length ? Math.max.apply(null, scores) : 1;
    if (hi === lo) { hi = hi * 1.05 + 1e-12; lo = lo * 0.95; }
    var pad = (hi - lo) * 0.08; lo -= pad; hi += pad;
    var n = data.progress.length;
    function x(i) { return L + (n === 1 ? (W - L - R) / 2 : (i - 1) * (W - L - R) / (n - 1)); }
    function y(v) { return T + (hi - v) * (H - T - B) / (hi - lo); }
    for (var k = 0; k <= 4; k++) {
      var v = lo + (hi - lo) * k / 4;
      el("line", { "class": "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }, s);
      el("text", { "class": "tick", x: L - 6, y: y(v) + 3, "text-anchor": "end" }, s).textContent = num(v);
    }
    var step = Math.max(1, Math.ceil(n / 10));
    for (var i = 1; i <= n; i += step) {
      el("text", { "class": "tick", x: x(i), y: H - B + 14, "text-anchor": "middle" }, s).textContent = i;
    }
    el("line", { "class": "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }, s);
    el("line", { "class": "axis", x1: L, x2: L, y1: T, y2: H - B }, s);
    el("text", { "class": "tick", x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, s).textContent =
      "evaluations";
    el("text", { "class": "tick", x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
                 transform: "rotate(-90 12 " + (T + H - B) / 2 + ")" }, s).textContent = data.unit;
    if (data.seed_score !== null) {
      el("line", { "class": "seedline", x1: L, x2: W - R, y1: y(data.seed_score), y2: y(data.seed_score) }, s);
    }
    var d = "", last = null;
    data.progress.forEach(function (p) {
      if (p.best === null) return;
      if (last === null) d += "M" + x(p.evaluation) + "," + y(p.best);
      else d += " L" + x(p.evaluation) + "," + y(last) + " L" + x(p.evaluation) + "," + y(p.best);
      last = p.best;
    });
    if (d) el("path", { "class": "bestline", d: d }, s);
    data.progress.forEach(function (p) {
      var failed = p.score === null;
      var c = el("circle", { "class": "point" + (failed ? " failed" : ""), r: 3.5, cx: x(p.evaluation),
                             cy: failed ? T + 4 : y(p.score) }, s);
      el("title", {}, c).textContent = "evaluation " + p.evaluation + ": node " + p.id + ", " +
        (failed ? "failed" : score(p.score)) + "; best so far " + score(p.best);
      c.addEventListener("click", function () { select(p.id); });
    });
    document.body.dataset.chart = String(n);
  })();

  var linked = /^#node-(\d+)$/.exec(location.hash);  // report.html#node-7 opens on node 7
  if (linked && byId[linked[1]]) select(Number(linked[1])); else if (bestNode) select(bestNode.id);
  document.body.dataset.drawn = String(drawn);
})();
"""

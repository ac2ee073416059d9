/* Renderers of game positions: SVG and plain elements built from the JSON the API gives.
   Every text goes in through textContent or createTextNode: nothing from a league is parsed as HTML. */
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";

  function svg(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (parent) parent.appendChild(e);
    return e;
  }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }

  // opts.playable: {cell index -> move value}; opts.onCell(value)
  function grid(board, opts) {
    const style = board.style, rows = board.rows, cols = board.cols;
    const size = style === "go" ? 26 : style === "connect4" ? 52 : 80;
    const pad = style === "go" ? 24 : 4;
    const w = cols * size + 2 * pad, h = rows * size + 2 * pad;
    const root = svg("svg", {width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: `grid ${style}`, role: "img"});
    const playable = (opts && opts.playable) || {};
    if (style === "go") {
      svg("rect", {x: 0, y: 0, width: w, height: h, fill: "#e3c07a"}, root);
      for (let i = 0; i < rows; i++) {
        const y = pad + i * size + size / 2, x0 = pad + size / 2, x1 = pad + (cols - 0.5) * size;
        svg("line", {x1: x0, y1: y, x2: x1, y2: y, stroke: "#553", "stroke-width": 1}, root);
        svg("line", {x1: y, y1: x0, x2: y, y2: x1, stroke: "#553", "stroke-width": 1}, root);
        if (board.row_labels) { const t = svg("text", {x: 6, y: y + 4, "font-size": 10}, root); t.textContent = board.row_labels[i] || ""; }
        if (board.col_labels) { const t = svg("text", {x: y - 3, y: h - 6, "font-size": 10}, root); t.textContent = board.col_labels[i] || ""; }
      }
    } else if (style === "connect4") {
      svg("rect", {x: 0, y: 0, width: w, height: h, rx: 8, fill: "#2f5fa7"}, root);
    } else {
      svg("rect", {x: 0, y: 0, width: w, height: h, fill: "#fff"}, root);
      for (let i = 1; i < 3; i++) {
        svg("line", {x1: pad + i * size, y1: pad, x2: pad + i * size, y2: h - pad, stroke: "#333", "stroke-width": 3}, root);
        svg("line", {x1: pad, y1: pad + i * size, x2: w - pad, y2: pad + i * size, stroke: "#333", "stroke-width": 3}, root);
      }
    }
    board.cells.forEach((mark, i) => {
      const r = Math.floor(i / cols), c = i % cols;
      const x = pad + c * size, y = pad + r * size, cx = x + size / 2, cy = y + size / 2;
      const key = style === "connect4" ? c : i;
      const canPlay = Object.prototype.hasOwnProperty.call(playable, key) && !mark;
      const cell = svg("rect", {x: x + 1, y: y + 1, width: size - 2, height: size - 2, class: "cell" + (canPlay ? " playable" : ""),
        fill: style === "connect4" ? "transparent" : style === "go" ? "transparent" : "#fff", "data-cell": i}, root);
      if (style === "ttt") cell.setAttribute("stroke", "none");
      if (canPlay && opts && opts.onCell) {
        cell.addEventListener("click", () => opts.onCell(playable[key]));
        cell.setAttribute("aria-label", `play ${i}`);
      }
      if (style === "connect4") {
        const hole = svg("circle", {cx, cy, r: size * 0.38, fill: mark === "x" ? "#e74c3c" : mark === "o" ? "#f1c40f" : "#fff",
          "pointer-events": "none"}, root);
        hole.setAttribute("data-mark", mark || "");
      } else if (style === "go") {
        if (mark) svg("circle", {cx, cy, r: size * 0.45, fill: mark === "x" ? "#111" : "#fafafa", stroke: "#222", "data-mark": mark}, root);
      } else if (mark === "x") {
        const g = svg("g", {stroke: "#c0392b", "stroke-width": 6, "stroke-linecap": "round", "data-mark": "x", "pointer-events": "none"}, root);
        const d = size * 0.28;
        svg("line", {x1: cx - d, y1: cy - d, x2: cx + d, y2: cy + d}, g);
        svg("line", {x1: cx + d, y1: cy - d, x2: cx - d, y2: cy + d}, g);
      } else if (mark === "o") {
        svg("circle", {cx, cy, r: size * 0.3, fill: "none", stroke: "#2f5fa7", "stroke-width": 6, "data-mark": "o",
          "pointer-events": "none"}, root);
      }
    });
    return root;
  }

  const GLYPHS = {K: "\u2654", Q: "\u2655", R: "\u2656", B: "\u2657", N: "\u2658", P: "\u2659",
                  k: "\u265A", q: "\u265B", r: "\u265C", b: "\u265D", n: "\u265E", p: "\u265F"};
  function chess(board) {
    const s = 44, root = svg("svg", {width: 8 * s + 20, height: 8 * s + 20, class: "chess", role: "img"});
    board.squares.forEach((row, r) => row.forEach((piece, c) => {
      svg("rect", {x: 20 + c * s, y: r * s, width: s, height: s, fill: (r + c) % 2 ? "#b58863" : "#f0d9b5"}, root);
      if (piece) {
        const t = svg("text", {x: 20 + c * s + s / 2, y: r * s + s * 0.78, "font-size": s * 0.8, "text-anchor": "middle",
          "data-piece": piece}, root);
        t.textContent = GLYPHS[piece] || piece;
      }
    }));
    for (let i = 0; i < 8; i++) {
      const t = svg("text", {x: 6, y: i * s + s * 0.6, "font-size": 11}, root); t.textContent = String(8 - i);
      const u = svg("text", {x: 20 + i * s + s / 2 - 3, y: 8 * s + 14, "font-size": 11}, root); u.textContent = "abcdefgh"[i];
    }
    return root;
  }

  // opts.names: the seats' names (the person's is "you"); opts.viewer: whose cards these are;
  // opts.end: {boards, returns} at the end of the hand: every seat's cards and what each won.
  function cards(board, opts) {
    opts = opts || {};
    const names = opts.names || [];
    const who = q => (names[q] !== undefined && names[q] !== null) ? String(names[q]) : `player ${q}`;
    const box = el("div", "cardtable");
    const row = el("div", "cards");
    row.appendChild(el("span", "muted", opts.viewer === undefined ? "hand" : (who(opts.viewer) === "you" ? "your card" : `${who(opts.viewer)}'s card`)));
    (board.hand || []).forEach(c => row.appendChild(el("div", "card", c)));
    if ((board.public || []).length) {
      row.appendChild(el("span", "muted", "board card"));
      board.public.forEach(c => row.appendChild(el("div", "card public", c)));
    }
    box.appendChild(row);
    const facts = [];
    if (board.pot !== null && board.pot !== undefined) facts.push(`pot ${board.pot} chips`);
    if (board.money) facts.push(`chips ${board.money.map((m, q) => `${who(q)} ${m}`).join(", ")}`);
    if (board.round) facts.push(`round ${board.round}`);
    if (board.scores) facts.push(`scores: ${board.scores}`);
    box.appendChild(el("p", "pot", facts.join(" \u00b7 ")));
    if (board.moves) {
      const rounds = Math.max(1, ...board.moves.map(m => m.round || 1));
      const ol = el("ol", "betting");
      if (!board.moves.length) ol.appendChild(el("li", "muted", "no bets yet"));
      let shown = 0;
      board.moves.forEach(m => {
        if ((rounds > 1 || (board.public || []).length) && (m.round || 1) !== shown) {
          shown = m.round || 1;
          ol.appendChild(el("li", "round", shown === 1 ? "Round 1" : `Round ${shown} (after the board card)`));
        }
        const li = el("li", "bet");
        li.appendChild(el("strong", null, who(m.player)));
        li.appendChild(document.createTextNode(" " + m.text));
        ol.appendChild(li);
      });
      box.appendChild(ol);
    } else if ((board.history || []).length) box.appendChild(el("p", "muted", "actions: " + board.history.join(", ")));
    if (opts.end) box.appendChild(handEnd(board, opts.end, who));
    return box;
  }

  function handEnd(board, end, who) {
    const div = el("div", "hand-end");
    const folded = new Set((board.moves || []).filter(m => m.text === "folded").map(m => m.player));
    div.appendChild(el("h4", null, `End of the hand \u00b7 pot ${board.pot} chips` +
      (folded.size ? ` \u00b7 ${[...folded].map(who).join(", ")} folded (no showdown)` : " \u00b7 showdown")));
    const t = el("table", "data showdown");
    const head = el("tr");
    ["player", "card", "chips won"].forEach(h => head.appendChild(el("th", null, h)));
    t.appendChild(head);
    (end.boards || []).forEach((b, q) => {
      const tr = el("tr"); tr.dataset.seat = q;
      tr.appendChild(el("td", null, who(q)));
      tr.appendChild(el("td", "card-name", b && b.hand ? b.hand.join(" ") : "?"));
      const r = end.returns ? end.returns[q] : null;
      tr.appendChild(el("td", "num " + (r > 0 ? "delta-up" : r < 0 ? "delta-down" : ""),
        r === null || r === undefined ? "\u2014" : (r > 0 ? "+" : "") + Number(r).toString()));
      t.appendChild(tr);
    });
    div.appendChild(t);
    return div;
  }

  function negotiation(board) {
    const box = el("div", "negotiation");
    const t = el("table", "data");
    const head = el("tr");
    ["resource", "quantity", "value each"].forEach(h => head.appendChild(el("th", null, h)));
    t.appendChild(head);
    board.resources.forEach(([name, q, v]) => {
      const tr = el("tr");
      tr.appendChild(el("td", null, name)); tr.appendChild(el("td", "num", q)); tr.appendChild(el("td", "num", v));
      t.appendChild(tr);
    });
    box.appendChild(t);
    if (board.total !== null) box.appendChild(el("p", null, `total value ${board.total}`));
    if (board.offer) box.appendChild(el("p", "offer", board.offer));
    return box;
  }

  // The prosthetics figure as the GIFs draw it (arena/envs/stickfigure.py): the right (prosthetic) leg
  // red and behind, the left leg blue and in front, the trunk dark, and a head on the neck along the trunk.
  const SIDE_COLOURS = {l: "#285ac8", r: "#c83228", c: "#1e1e1e"};
  const HEAD_SIZE = 0.22;  // metres across
  function side(name) { return name.endsWith("_l") ? "l" : name.endsWith("_r") ? "r" : "c"; }

  function skeleton(sk) {
    const w = 320, h = 320, root = svg("svg", {width: w, height: h, class: "skeleton", role: "img"});
    const pts = Object.assign({}, sk.joints, sk.ends);
    const pelvis = sk.joints.ground_pelvis || Object.values(sk.joints)[0] || [0, 0];
    const scale = 130, ox = w / 2 - pelvis[0] * scale, oy = h - 20;
    const P = p => [ox + p[0] * scale, oy - p[1] * scale];
    svg("line", {x1: 0, y1: oy, x2: w, y2: oy, stroke: "#999"}, root);
    const order = {r: 0, c: 1, l: 2};
    const segs = sk.segments.slice().sort((a, b) => order[side(a[1])] - order[side(b[1])]);
    for (const [a, b] of segs) {
      if (!pts[a] || !pts[b]) continue;
      const [x1, y1] = P(pts[a]), [x2, y2] = P(pts[b]);
      svg("line", {x1, y1, x2, y2, stroke: SIDE_COLOURS[side(b)], "stroke-width": 4, "stroke-linecap": "round",
                   "data-side": side(b)}, root);
    }
    for (const [name, p] of Object.entries(sk.joints)) {
      const [x, y] = P(p);
      svg("circle", {cx: x, cy: y, r: 3, fill: SIDE_COLOURS[side(name)]}, root);
    }
    if (pts.head) {  // on the neck, along the trunk (from the joint below it), as in the GIFs
      const [u, v] = P(pts.head), r = HEAD_SIZE / 2 * scale;
      let base = (sk.segments.find(s => s[1] === "head") || [])[0];
      if (base && pts[base]) { const [bu, bv] = P(pts[base]); if (Math.hypot(bu - u, bv - v) < 1) base = (sk.segments.find(s => s[1] === base) || [])[0]; }
      let du = 0, dv = -1;
      if (base && pts[base]) {
        const [bu, bv] = P(pts[base]), n = Math.hypot(u - bu, v - bv);
        if (n > 1e-6) { du = (u - bu) / n; dv = (v - bv) / n; }
      }
      svg("circle", {cx: u + du * r, cy: v + dv * r, r, fill: "#fafaf7", stroke: SIDE_COLOURS.c, "stroke-width": 3,
                     class: "head"}, root);
    }
    const t = svg("text", {x: 8, y: 16, "font-size": 12}, root); t.textContent = `t = ${sk.time.toFixed(2)} s`;
    return root;
  }

  // A skirmish from above as the GIFs draw it (arena/envs/skirmish_draw.py): the map and its grid, a line
  // from each unit that fired in the last step to its target, living units as discs of their side's colour
  // with their type letter, health (and shield) bars above them, and the step in a caption. The numbers
  // are clamped and the units capped: a replay is data.
  const BATTLE_SIDES = ["#c83228", "#285ac8"], BATTLE_SHOTS = ["#f08c78", "#78a0f0"];
  const MAX_BATTLE_UNITS = 64, MAX_MAP = 1000;
  function num(x, lo, hi) { const v = Number(x); return Number.isFinite(v) ? Math.min(hi, Math.max(lo, v)) : lo; }

  function battle(b) {
    const W = num(b.width, 1, MAX_MAP), H = num(b.height, 1, MAX_MAP);
    const size = 480, pad = 10, head = 22, s = size / Math.max(W, H);
    const w = W * s + 2 * pad, h = H * s + 2 * pad + head, top = head + pad;
    const root = svg("svg", {width: w, height: h, viewBox: `0 0 ${w} ${h}`, class: "battle", role: "img"});
    svg("rect", {x: pad, y: top, width: W * s, height: H * s, fill: "#eeece4", stroke: "#786e64", "stroke-width": 2,
                 class: "map"}, root);
    const n = Math.floor(num(b.grid, 0, 64));
    for (let k = 1; k < n; k++) {
      svg("line", {x1: pad + k * W * s / n, y1: top, x2: pad + k * W * s / n, y2: top + H * s, stroke: "#e1ded4"}, root);
      svg("line", {x1: pad, y1: top + k * H * s / n, x2: pad + W * s, y2: top + k * H * s / n, stroke: "#e1ded4"}, root);
    }
    const units = (Array.isArray(b.units) ? b.units : []).slice(0, MAX_BATTLE_UNITS).map(u => ({
      side: u.side === 1 ? 1 : 0, slot: Math.floor(num(u.slot, 0, MAX_BATTLE_UNITS)), type: String(u.type || "").slice(0, 1),
      x: pad + num(u.x, 0, W) * s, y: top + num(u.y, 0, H) * s, r: Math.max(num(u.radius, 0, 10) * s, 3),
      health: num(u.health, 0, 1), shield: u.shield === null || u.shield === undefined ? null : num(u.shield, 0, 1),
      alive: u.alive === true, shot: u.shot === null || u.shot === undefined ? null : Math.floor(num(u.shot, 0, MAX_BATTLE_UNITS))}));
    const at = new Map(units.map(u => [`${u.side}:${u.slot}`, u]));
    for (const u of units) {
      const t = u.shot === null ? null : at.get(`${1 - u.side}:${u.shot}`);
      if (t) svg("line", {x1: u.x, y1: u.y, x2: t.x, y2: t.y, stroke: BATTLE_SHOTS[u.side], "stroke-width": 2,
                          class: "shot", "data-side": u.side}, root);
    }
    const living = units.filter(u => u.alive);
    for (const u of living) {
      svg("circle", {cx: u.x, cy: u.y, r: u.r, fill: BATTLE_SIDES[u.side], class: "unit", "data-side": u.side,
                     "data-slot": u.slot}, root);
      if (u.r >= 5) {
        const t = svg("text", {x: u.x, y: u.y, "font-size": Math.max(8, 1.3 * u.r), fill: "#fff", "text-anchor": "middle",
                               "dominant-baseline": "central"}, root);
        t.textContent = u.type;
      }
    }
    for (const u of living) {  // after every disc, so that a neighbour's disc never hides a bar
      const half = Math.max(u.r, 6), bars = [[u.health, "#3caa46", "health"]];
      if (u.shield !== null) bars.push([u.shield, "#46c8e6", "shield"]);
      bars.forEach(([f, colour, kind], i) => {
        const y = u.y - u.r - 6 - 4 * i;
        svg("rect", {x: u.x - half, y, width: 2 * half, height: 3, fill: "#464646"}, root);
        svg("rect", {x: u.x - half, y, width: 2 * half * f, height: 3, fill: colour, class: kind}, root);
      });
    }
    let text = `step ${Math.floor(num(b.step, 0, 1e6))}/${Math.floor(num(b.max_steps, 0, 1e6))}`;
    (Array.isArray(b.sides) ? b.sides.slice(0, 2) : []).forEach(sd => {
      text += ` \u00b7 ${String(sd.name).slice(0, 40)} ${Math.floor(num(sd.alive, 0, 1e3))}/${Math.floor(num(sd.units, 0, 1e3))} ` +
              `${Math.round(100 * num(sd.fraction, 0, 1))}%`;
    });
    if (b.winner) text += b.winner === "draw" ? " \u00b7 draw" : ` \u00b7 ${String(b.winner).slice(0, 40)} wins`;
    const cap = svg("text", {x: pad, y: 16, "font-size": 13, class: "caption"}, root);
    cap.textContent = text;
    return root;
  }

  function render(board, opts) {
    if (!board) return null;
    if (board.kind === "grid") return grid(board, opts);
    if (board.kind === "chess") return chess(board);
    if (board.kind === "cards") return cards(board, opts);
    if (board.kind === "negotiation") return negotiation(board);
    return null;
  }

  window.ArenaRender = {render, skeleton, battle, svg, el};
})();

/* The pages: leaderboard (live), matches (filters, keyset paging), replay viewer, play.
   Data comes from the JSON API of the same server; every text from it is set with textContent. */
"use strict";
(function () {
  const R = window.ArenaRender;
  const el = R.el, svg = R.svg;
  const $ = id => document.getElementById(id);
  const page = document.body.dataset.page;
  const fmt = (x, d = 1) => (x === null || x === undefined || Number.isNaN(x)) ? "\u2014" : Number(x).toFixed(d);
  const pct = x => (x === null || x === undefined) ? "\u2014" : (100 * x).toFixed(1) + "%";

  function token() { return sessionStorage.getItem("arena-token") || ""; }
  async function api(path, opts) {
    opts = Object.assign({headers: {}}, opts || {});
    if (token()) opts.headers["Authorization"] = "Bearer " + token();
    if (opts.json !== undefined) {
      opts.method = opts.method || "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(opts.json);
    }
    const res = await fetch(path, opts);
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok) {
      const err = new Error((body && body.error) || `HTTP ${res.status}`);
      err.status = res.status; err.body = body;
      throw err;
    }
    return body;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function option(value, label, selected) {
    const o = el("option", null, label); o.value = value; if (selected) o.selected = true; return o;
  }
  function link(href, text) { const a = el("a", null, text); a.href = href; return a; }
  function gameLabel(g) { return g === "*" ? "all games" : g; }

  // -- live status (every page) -------------------------------------------------------------
  let lastVersion = null;
  // The table shown is of an older version than the league's (the server answers with the previous
  // table while it computes the next): ask again at the next poll even if the league stays still.
  let behind = false;
  const onChange = [];
  async function pollLeague() {
    try {
      const s = await api("/api/league");
      const v = JSON.stringify(s.version);
      $("live").textContent = `${s.last_commit} results \u00b7 ${s.running} running \u00b7 ${new Date().toLocaleTimeString()}`;
      if (lastVersion !== null && (v !== lastVersion || behind)) { behind = false; onChange.forEach(f => f(s)); }
      lastVersion = v;
    } catch (e) { $("live").textContent = "offline: " + e.message; }
  }
  pollLeague();
  setInterval(pollLeague, 2000);

  // -- leaderboard --------------------------------------------------------------------------
  function leaderboard() {
    const sel = $("game");
    const params = new URLSearchParams(location.search);
    let game = params.get("game"), sort = params.get("sort") || "rating";
    sel.addEventListener("change", () => { game = sel.value; history.replaceState(null, "", `?game=${encodeURIComponent(game)}`); load(); });
    const baseCols = [["#", null], ["player", "name"], ["kind", null], ["rating", "rating"], ["95% CI", null], ["rank", null],
      ["Elo", "elo"], ["mu", "mu"], ["sigma", null], ["mu \u2212 3\u03c3", "conservative"], ["alpha-rank", null], ["games", "games"],
      ["W", null], ["D", null], ["L", null], ["win rate", "win_rate"], ["forfeits", null], ["invalid/g", null]];
    let cols = baseCols;
    // shown with "all columns" only: the table then is 18-22 columns wide
    const DETAIL = new Set(["kind", "payoff", "payoff CI", "rank", "mu", "sigma", "mu \u2212 3\u03c3", "alpha-rank", "W", "D", "L",
      "win rate", "forfeits", "invalid/g"]);
    let wide = params.get("columns") === "all";
    const toggle = $("board-columns");
    const label = () => { toggle.textContent = wide ? "fewer columns" : "all columns"; };
    label();
    toggle.addEventListener("click", () => {
      wide = !wide; label(); $("board").classList.toggle("compact", !wide);
      const q = new URLSearchParams(location.search); if (wide) q.set("columns", "all"); else q.delete("columns");
      history.replaceState(null, "", "?" + q.toString());
    });
    const tips = {"rating": "fitted to every result (Bradley-Terry with draws), on the Elo scale; the anchor player is pinned",
      "95% CI": "95% bootstrap interval of the fitted rating", "rank": "95% interval of the rank (bootstrap)",
      "payoff": "mean payoff a match against the field (chips, points): the game is scored by its payoffs", "payoff CI": "95% interval of the mean payoff",
      "vs Nash": "payoff a match against the Nash mixture of the payoff matrix (Nash averaging): 0 for the players nothing beats on average; the table's order",
      "Nash CI": "95% bootstrap interval of the payoff against the Nash mixture",
      "forfeits": "matches lost by forfeiting (invalid moves, errors, time)", "invalid/g": "invalid moves a game",
      "Elo": "Elo rating, live (everyone starts at 1500)", "mu": "OpenSkill skill estimate",
      "sigma": "OpenSkill uncertainty: it shrinks as the player plays", "mu \u2212 3\u03c3": "a cautious skill estimate: the leaderboard of players who played enough",
      "alpha-rank": "share of the alpha-rank stationary distribution (who survives in the long run)",
      "W": "wins", "D": "draws", "L": "losses"};
    async function load() {
      const [b, p, h] = await Promise.all([api(`/api/players?game=${encodeURIComponent(game)}&sort=${sort}`),
        api(`/api/payoff?game=${encodeURIComponent(game)}`).catch(() => null),
        api(`/api/history?game=${encodeURIComponent(game)}`).catch(() => null)]);
      // any of the three served a computation behind: ask again at the next poll
      if (lastVersion !== null && [b, p, h].some(x => x && x.version && JSON.stringify(x.version) !== lastVersion)) behind = true;
      $("board-title").textContent = `Leaderboard: ${b.label}`;
      $("summary").textContent = `${b.rows.length} players`;
      const t = clear($("board"));
      const head = el("tr");
      if (b.kind === "returns") {
        $("board-note").textContent = "A one-player game: there is no opponent, so no Elo. Players are ranked by their mean " +
          "return on the common seeds (the episodes every active player has played, on the same seeds); std over those " +
          "episodes. A player with a forfeited episode ranks after those without.";
        ["#", "player", "mean return", "std", "episodes", "common seeds", "forfeits"].forEach(c => head.appendChild(el("th", null, c)));
        t.appendChild(head);
        b.rows.forEach((r, i) => {
          const tr = el("tr");
          const name = el("td", "name"); name.appendChild(link(`/matches?player=${encodeURIComponent(r.player)}&game=${encodeURIComponent(game)}`, r.player));
          tr.appendChild(el("td", "num", r.mean === null ? "\u2014" : i + 1));
          tr.appendChild(name);
          [fmt(r.mean, 2), fmt(r.std, 2), r.episodes, r.common_seeds, r.forfeits].forEach(v => tr.appendChild(el("td", "num", v)));
          t.appendChild(tr);
        });
        if (!b.rows.length) $("summary").textContent = "no episodes yet";
        $("plots").classList.add("hidden");
        $("board-help").classList.add("hidden");
        return;
      }
      $("plots").classList.remove("hidden");
      $("board-help").classList.remove("hidden");
      $("board-note").textContent = [b.fit ? b.fit.note : "", b.alpharank_error ? "alpha-rank: " + b.alpharank_error : (b.alpharank_note || "")]
        .filter(x => x).join(" ");
      cols = b.scoring === "payoff" ? baseCols.slice(0, 3).concat([["vs Nash", "rating"], ["Nash CI", null], ["payoff", null], ["payoff CI", null]], baseCols.slice(3)) : baseCols;
      for (const [label, key] of cols) {
        const th = el("th", key ? "sortable" + (key === sort ? " sorted" : "") : null, label + (key === sort ? " \u25be" : ""));
        if (tips[label]) th.title = tips[label];
        if (key) th.addEventListener("click", () => { sort = key; load(); });
        head.appendChild(th);
      }
      t.appendChild(head);
      if (!b.rows.length) {
        const tr = el("tr"); const td = el("td", "muted", "no rated results yet: the table fills as matches are committed");
        td.colSpan = cols.length; tr.appendChild(td); t.appendChild(tr);
      }
      const ci = (lo, hi, d) => lo === null || hi === null ? "\u2014" : `[${fmt(lo, d)}, ${fmt(hi, d)}]`;
      b.rows.forEach((r, i) => {
        const tr = el("tr", r.provisional ? "provisional" : null);
        tr.appendChild(el("td", "num", (i + 1) + (r.provisional ? "?" : "")));
        const name = el("td", "name"); name.appendChild(link(`/matches?player=${encodeURIComponent(r.player)}`, r.player));
        if (r.provisional) { const tag = el("span", "tag", "provisional"); tag.title = "too few games or too wide an interval: ranked after the rest"; name.appendChild(tag); }
        tr.appendChild(name);
        tr.appendChild(el("td", null, r.kind + (r.role ? ` (${r.role})` : "")));
        const signed = v => v === null || v === undefined ? "\u2014" : (v >= 0 ? "+" : "") + v.toFixed(3);
        const pay = b.scoring === "payoff" ? [signed(r.nash), ci(r.nash_lo ?? null, r.nash_hi ?? null, 3), signed(r.payoff), ci(r.payoff_lo, r.payoff_hi, 3)] : [];
        pay.concat([fmt(r.rating), ci(r.rating_lo, r.rating_hi, 0), r.rank === null ? "\u2014" : (r.rank_lo === r.rank_hi ? `${r.rank_lo}` : `${r.rank_lo}\u2013${r.rank_hi}`),
          fmt(r.elo), fmt(r.mu, 2), fmt(r.sigma, 2), fmt(r.conservative, 2), r.alpharank === null ? "\u2014" : r.alpharank.toFixed(3),
          r.games, r.wins, r.draws, r.losses, pct(r.win_rate), r.forfeits, fmt(r.invalid_per_game, 2)]).forEach(v => tr.appendChild(el("td", "num", v)));
        t.appendChild(tr);
      });
      // compact by default: the columns a person reads first; the rest ("all columns") on demand
      for (const tr of t.rows) [...tr.cells].forEach((c, k) => { if (k < cols.length && DETAIL.has(cols[k][0])) c.classList.add("detail"); });
      t.classList.toggle("compact", !wide);
      if (h) drawCurves(clear($("curves")), h);
      if (p) {
        drawHeatmap(clear($("heatmap")), p); $("payoff-note").textContent = p.note || "";
        $("heatmap-caption").textContent = p.kind === "payoff"
          ? "Payoff: the row player's mean payoff a match against the column player (chips, points; red loses, green wins; a cell's tooltip gives the matches)"
          : "Payoff: how often the row player beat the column player (%, draws count half; a cell's tooltip gives the games)";
      }
    }
    api("/api/games").then(g => {
      clear(sel);
      const known = g.rated.concat(g.solo);
      if (game === null || !known.includes(game)) game = g["default"];
      for (const x of g.rated) sel.appendChild(option(x, gameLabel(x), x === game));
      for (const x of g.solo) sel.appendChild(option(x, x + " (one player: returns)", x === game));
      onChange.push(() => load());
      load();
    });
  }

  // Round steps for an axis: the largest of 1, 2 or 5 times a power of ten that gives at least `count`
  // ticks from [lo, hi] widened to whole steps (so the axis starts and ends on a tick).
  function niceTicks(lo, hi, count) {
    if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
    let step = null;
    for (let e = Math.ceil(Math.log10(hi - lo)); step === null; e--) {
      for (const m of [5, 2, 1]) {
        const s = m * Math.pow(10, e);
        if (Math.round((Math.ceil(hi / s - 1e-9) - Math.floor(lo / s + 1e-9))) + 1 >= count) { step = s; break; }
      }
    }
    const out = [];
    for (let k = Math.floor(lo / step + 1e-9); k <= Math.ceil(hi / step - 1e-9); k++) out.push(Number((k * step).toFixed(10)));
    return out;
  }

  const COLORS = ["#2f5fa7", "#c0392b", "#27ae60", "#8e44ad", "#e67e22", "#16a085", "#7f8c8d", "#d35400"];
  function drawCurves(box, h) {
    const W = 620, H = 320, L = 52, B = 40, T = 12, Rt = 140;
    const root = svg("svg", {width: W, height: H, class: "curves", role: "img"}, box);
    const readout = el("p", "readout muted small", "Point at the chart to read every player's Elo after that result.");
    readout.id = "curves-readout";
    box.appendChild(readout);
    const all = h.players.flatMap(p => h.series[p].map(pt => pt));
    if (!all.length) { const t = svg("text", {x: 20, y: 40}, root); t.textContent = "no rated results yet"; readout.textContent = ""; return; }
    const xs = all.map(p => p[0]), ys = all.map(p => p[1]).filter(y => y !== null);
    const x0 = Math.min(...xs), x1 = Math.max(...xs, x0 + 1);
    const yt = niceTicks(Math.min(...ys), Math.max(...ys), 5);
    const y0 = yt[0], y1 = yt[yt.length - 1];
    const X = x => L + (x - x0) / (x1 - x0) * (W - L - Rt), Y = y => T + (1 - (y - y0) / ((y1 - y0) || 1)) * (H - T - B);
    yt.forEach(v => {
      svg("line", {x1: L, y1: Y(v), x2: W - Rt, y2: Y(v), stroke: v === 1500 ? "#bbb" : "#eceff1", class: "grid"}, root);
      const t = svg("text", {x: L - 6, y: Y(v) + 4, "font-size": 10, "text-anchor": "end", class: "ytick"}, root); t.textContent = String(v);
    });
    niceTicks(x0, x1, 5).filter(v => v >= x0 && v <= x1 && Number.isInteger(v)).forEach(v => {
      svg("line", {x1: X(v), y1: H - B, x2: X(v), y2: H - B + 4, stroke: "#999"}, root);
      const t = svg("text", {x: X(v), y: H - B + 15, "font-size": 10, "text-anchor": "middle", class: "xtick"}, root); t.textContent = String(v);
    });
    svg("line", {x1: L, y1: H - B, x2: W - Rt, y2: H - B, stroke: "#999"}, root);
    svg("line", {x1: L, y1: T, x2: L, y2: H - B, stroke: "#999"}, root);
    const xl = svg("text", {x: (L + W - Rt) / 2, y: H - 6, "font-size": 11, "text-anchor": "middle", fill: "#66707a"}, root);
    xl.textContent = "results committed";
    const yl = svg("text", {x: 0, y: 0, "font-size": 11, "text-anchor": "middle", fill: "#66707a",
      transform: `translate(12,${(T + H - B) / 2}) rotate(-90)`}, root);
    yl.textContent = "Elo";
    h.players.forEach((p, i) => {
      const pts = h.series[p].filter(q => q[1] !== null).map(q => `${X(q[0]).toFixed(1)},${Y(q[1]).toFixed(1)}`);
      svg("polyline", {points: pts.join(" "), fill: "none", stroke: COLORS[i % COLORS.length], "stroke-width": 1.6}, root);
      svg("rect", {x: W - Rt + 8, y: T + i * 16, width: 10, height: 10, fill: COLORS[i % COLORS.length]}, root);
      const t = svg("text", {x: W - Rt + 22, y: T + i * 16 + 9, "font-size": 11}, root);
      t.textContent = p.length > 18 ? p.slice(0, 17) + "\u2026" : p;
      svg("title", {}, t).textContent = p;  // a long name, cut in the legend, whole under the pointer
    });
    // hover: a vertical rule at the nearest commit and each player's Elo there (their last value at or before it)
    const rule = svg("line", {x1: 0, y1: T, x2: 0, y2: H - B, stroke: "#555", "stroke-dasharray": "3,3", visibility: "hidden"}, root);
    const dots = h.players.map((p, i) => svg("circle", {r: 3.5, fill: COLORS[i % COLORS.length], visibility: "hidden"}, root));
    const commits = [...new Set(xs)].sort((a, b) => a - b);
    const hit = svg("rect", {x: L, y: T, width: W - L - Rt, height: H - T - B, fill: "transparent", class: "hover-area"}, root);
    function at(p, c) { let v = null; for (const q of h.series[p]) { if (q[0] > c) break; if (q[1] !== null) v = q[1]; } return v; }
    function show(c) {
      rule.setAttribute("x1", X(c)); rule.setAttribute("x2", X(c)); rule.setAttribute("visibility", "visible");
      const vals = h.players.map((p, i) => [p, at(p, c), i]);
      vals.forEach(([p, v, i]) => {
        if (v === null) { dots[i].setAttribute("visibility", "hidden"); return; }
        dots[i].setAttribute("cx", X(c)); dots[i].setAttribute("cy", Y(v)); dots[i].setAttribute("visibility", "visible");
      });
      readout.textContent = `after result ${c}: ` + vals.filter(q => q[1] !== null).sort((a, b) => b[1] - a[1])
        .map(([p, v]) => `${p} ${v.toFixed(1)}`).join(" \u00b7 ");
    }
    hit.addEventListener("mousemove", ev => {
      const r = root.getBoundingClientRect(), x = x0 + (ev.clientX - r.left - L) / (W - L - Rt) * (x1 - x0);
      let best = commits[0];
      for (const c of commits) if (Math.abs(c - x) < Math.abs(best - x)) best = c;
      show(best);
    });
    hit.addEventListener("mouseleave", () => { rule.setAttribute("visibility", "hidden"); dots.forEach(d => d.setAttribute("visibility", "hidden")); });
  }

  function winColor(x) {
    if (x === null) return "#eceff1";
    const r = x < 0.5 ? 220 : Math.round(220 - (x - 0.5) * 2 * 170), g = x > 0.5 ? 200 : Math.round(80 + x * 2 * 120);
    return `rgb(${r},${g},${x < 0.5 ? 90 : 110})`;
  }
  function drawHeatmap(box, p) {
    const n = Math.min(p.players.length, 20), c = Math.max(18, Math.min(44, Math.floor(440 / Math.max(n, 1))));
    const L = 120, T = 10, labels = Math.max(36, ...p.players.slice(0, n).map(x => Math.min(16, x.length) * 5.2));
    const legendY = T + n * c + labels + 22;
    const root = svg("svg", {width: Math.max(L + n * c + 10, L + 350), height: legendY + 32, class: "heatmap", role: "img"}, box);
    if (!n) { const t = svg("text", {x: 20, y: 30}, root); t.textContent = "no head-to-head results yet"; return; }
    const span = p.kind === "payoff" && p.mean_payoff ? Math.max(0, ...p.mean_payoff.flat().filter(x => x !== null).map(Math.abs)) : 1;
    for (let i = 0; i < n; i++) {
      const t = svg("text", {x: L - 4, y: T + i * c + c * 0.62, "font-size": 10, "text-anchor": "end"}, root);
      const cut = (name, k) => name.length > k ? name.slice(0, k - 1) + "\u2026" : name;
      t.textContent = cut(p.players[i], 18);
      svg("title", {}, t).textContent = p.players[i];
      const u = svg("text", {x: 0, y: 0, "font-size": 10, transform: `translate(${L + i * c + c * 0.4},${T + n * c + 6}) rotate(60)`}, root);
      u.textContent = cut(p.players[i], 16);
      svg("title", {}, u).textContent = p.players[i];
      for (let j = 0; j < n; j++) {
        const payoff = p.kind === "payoff" && p.mean_payoff;
        const m = payoff ? p.mean_payoff[i][j] : null;
        // a payoff game: the colour from the mean payoff (red loses, green wins), scaled by the largest
        const v = payoff ? (m === null ? null : 0.5 + 0.5 * m / (span || 1)) : p.win_rate[i][j], games = p.games ? p.games[i][j] : null;
        const r = svg("rect", {x: L + j * c, y: T + i * c, width: c - 1, height: c - 1, fill: winColor(v), class: "cell",
          "data-row": i, "data-col": j}, root);
        const tip = svg("title", {}, r);
        tip.textContent = i === j ? `${p.players[i]}: itself` : v === null ? `${p.players[i]} vs ${p.players[j]}: never met` :
          payoff ? `${p.players[i]} vs ${p.players[j]}: ${fmt(m, 3)} a match to ${p.players[i]} over ${fmt(games, 0)} matches` :
          `${p.players[i]} vs ${p.players[j]}: ${pct(v)} won by ${p.players[i]} over ${fmt(games, 1)} games (decayed; draws count half)`;
        if (v !== null && c >= 22) {
          const lab = svg("text", {x: L + j * c + (c - 1) / 2, y: T + i * c + c * 0.62, "font-size": c >= 32 ? 11 : 9,
            "text-anchor": "middle", class: "value", "pointer-events": "none", fill: v > 0.8 || v < 0.2 ? "#fff" : "#1d232a"}, root);
          lab.textContent = payoff ? m.toFixed(Math.abs(m) >= 10 ? 0 : 1) : Math.round(100 * v);
        }
      }
    }
    // the colour scale, 0% to 100%, and the grey of pairs that never met
    const lw = 240, lx = L;
    for (let k = 0; k < 40; k++) svg("rect", {x: lx + k * lw / 40, y: legendY, width: lw / 40 + 0.5, height: 12, fill: winColor(k / 39)}, root);
    const marks = p.kind === "payoff" ? [[0, (-span).toFixed(2)], [0.5, "0"], [1, "+" + span.toFixed(2)]] : [[0, "0%"], [0.5, "50%"], [1, "100%"]];
    marks.forEach(([v, s]) => {
      const t = svg("text", {x: lx + v * lw, y: legendY + 25, "font-size": 10, "text-anchor": "middle", class: "legend"}, root); t.textContent = s;
    });
    const ll = svg("text", {x: lx - 6, y: legendY + 10, "font-size": 10, "text-anchor": "end", fill: "#66707a"}, root);
    ll.textContent = p.kind === "payoff" ? "row's payoff" : "row's win rate";
    svg("rect", {x: lx + lw + 16, y: legendY, width: 12, height: 12, fill: winColor(null), stroke: "#ccc"}, root);
    const nm = svg("text", {x: lx + lw + 32, y: legendY + 10, "font-size": 10}, root); nm.textContent = "never met";
  }

  // -- matches ------------------------------------------------------------------------------
  function matches() {
    const form = $("filters"), params = new URLSearchParams(location.search);
    for (const k of ["player", "outcome", "since", "until"]) if (params.get(k)) $("f-" + k).value = params.get(k);
    api("/api/games").then(g => {
      const cfgGames = new Set(g.rated.filter(x => x !== "*").concat(g.solo));
      for (const x of cfgGames) $("f-game").appendChild(option(x, x, params.get("game") === x));
    });
    api("/api/roster").then(ps => ps.forEach(p => $("player-names").appendChild(option(p.name, p.name))));
    let cursor = {before: params.get("before"), after: params.get("after")};
    let last = null;
    function query() {
      const q = new URLSearchParams();
      for (const k of ["game", "player", "outcome", "since", "until"]) { const v = $("f-" + k).value.trim(); if (v) q.set(k, v); }
      if (cursor.before) q.set("before", cursor.before);
      if (cursor.after) q.set("after", cursor.after);
      return q;
    }
    async function load() {
      const q = query();
      history.replaceState(null, "", "?" + q.toString());
      let d;
      try { d = await api("/api/matches?" + q.toString()); }
      catch (e) { $("page-info").textContent = e.message; return; }
      last = d;
      const t = clear($("matches"));
      const head = el("tr");
      [["result #", "the result's place in the league's log (the match id numbers the schedule)"], ["date (UTC)"],
       ["game"], ["players"], ["result"], ["moves"], ["match id", "its replay, where one is kept"]].forEach(([c, tip]) => {
        const th = el("th", null, c); if (tip) th.title = tip; head.appendChild(th);
      });
      t.appendChild(head);
      for (const m of d.matches) {
        const tr = el("tr");
        tr.appendChild(el("td", "num", m.commit_seq));
        tr.appendChild(el("td", null, m.date.replace("T", " ").replace("+00:00", "")));
        tr.appendChild(el("td", null, m.game));
        tr.appendChild(el("td", "players", m.players.join(" vs ")));
        tr.appendChild(el("td", null, m.text));
        tr.appendChild(el("td", "num", m.moves));
        const td = el("td"); if (m.replay) td.appendChild(link(`/replay/${encodeURIComponent(m.match_id)}`, m.match_id)); else td.textContent = m.match_id;
        tr.appendChild(td);
        t.appendChild(tr);
      }
      $("page-info").textContent = d.matches.length ? `${d.matches[0].commit_seq} \u2013 ${d.matches[d.matches.length - 1].commit_seq} of ${d.last_commit}` : "no matches";
      $("older").disabled = d.older === null;
      $("newer").disabled = d.newer === null;
    }
    form.addEventListener("submit", ev => { ev.preventDefault(); cursor = {}; load(); });
    $("f-clear").addEventListener("click", () => { form.reset(); cursor = {}; load(); });
    $("older").addEventListener("click", () => { if (last && last.older !== null) { cursor = {before: last.older}; load(); } });
    $("newer").addEventListener("click", () => { if (last && last.newer !== null) { cursor = {after: last.newer}; load(); } });
    onChange.push(() => { if (!cursor.before && !cursor.after) load(); });
    load();
  }

  // -- replay viewer ------------------------------------------------------------------------
  function replay() {
    const id = $("replay").dataset.match;
    let rep = null, k = 0, timer = null;
    $("r-download").href = `/api/replays/${encodeURIComponent(id)}/download`;
    $("r-download-gz").href = `/api/replays/${encodeURIComponent(id)}/download?gzip=1`;
    function stepsAt(f) { return rep.steps.filter(s => s.t === f); }
    function mover(f) { const s = stepsAt(f); return s.length ? s[0].player : null; }
    function show() {
      const nf = rep.frames.length, f = rep.frames[k];
      $("r-scrub").value = k;
      $("r-pos").textContent = `move ${f.moves} of ${rep.frames[nf - 1].moves}`;
      const choice = $("r-view").value;
      let p = choice === "auto" ? mover(f.moves) : Number(choice);
      if (p === null || p === undefined) p = f.views.findIndex(v => v !== null);
      if (p < 0) p = 0;
      const who = rep.players[p] !== undefined ? `${rep.players[p]} (player ${p})` : `player ${p}`;
      const acting = stepsAt(f.moves);
      $("r-step-title").textContent = k === nf - 1 ? `Final position, as ${who} sees it` :
        `Before move ${f.moves + 1}: ${who}'s view`;
      const readable = f.readable ? f.readable[p] : null;
      // a card game's engine text ("1pb"): under the board's words, folded away unless the game wrote it in words
      const fold = !readable && f.views[p] !== null && f.boards[p] && f.boards[p].kind === "cards" && !rep.transcript;
      $("r-text").textContent = f.views[p] === null ? "(no view recorded for this player here)" : (readable || f.views[p]);
      $("r-text").classList.toggle("hidden", fold);
      $("r-raw").classList.toggle("hidden", !readable && !fold);
      $("r-raw-text").textContent = readable || fold ? f.views[p] : "";
      const board = clear($("r-board"));
      if (rep.transcript) board.appendChild(transcript(f.moves));
      else if (f.skeleton) board.appendChild(R.skeleton(f.skeleton));
      else if (f.battle) board.appendChild(R.battle(f.battle));
      else {
        const last = k === nf - 1, cardsEnd = last && f.boards.every(b => b && b.kind === "cards");
        const b = R.render(f.boards[p], {names: rep.players, viewer: p,
          end: cardsEnd ? {boards: f.boards, returns: rep.result.returns} : null});
        if (b) board.appendChild(b);
      }
      document.querySelectorAll("#r-steps li").forEach(li => li.classList.toggle("current", Number(li.dataset.t) === f.moves));
      const cur = document.querySelector("#r-steps li.current");
      if (cur && cur.scrollIntoView) cur.scrollIntoView({block: "nearest"});
      $("r-result").textContent = k === nf - 1 ? resultText() : (acting.length ? "" : "");
    }
    function transcript(upto) {
      const ol = el("ol", "transcript");
      for (const s of rep.steps) {
        if (s.t > upto) break;
        const li = el("li", "p" + s.player + (s.t === upto ? " current" : ""));
        li.appendChild(el("strong", null, (rep.players[s.player] || `player ${s.player}`) + ": "));
        const text = String(s.action_text !== null && s.action_text !== undefined ? s.action_text : (s.action === null ? "" : s.action));
        const re = /\[(Offer:[^\]]*|Accept|Deny)\]/gi;
        let at = 0, m;
        while ((m = re.exec(text)) !== null) {
          if (m.index > at) li.appendChild(document.createTextNode(text.slice(at, m.index)));
          li.appendChild(el("span", "offer", m[0]));
          at = m.index + m[0].length;
        }
        if (at < text.length) li.appendChild(document.createTextNode(text.slice(at)));
        if (s.event !== "ok") li.appendChild(el("em", "note", ` (${s.event}${s.reason ? ": " + s.reason : ""})`));
        ol.appendChild(li);
      }
      return ol;
    }
    function resultText() {
      const r = rep.result;
      let who = r.draw ? "draw" : (r.winner !== null && r.winner !== undefined ? `${rep.players[r.winner]} wins` : "no winner");
      const returns = (r.returns || []).map((x, q) => `${rep.players[q] !== undefined ? rep.players[q] : "player " + q} ${x}`).join(", ");
      const how = r.outcome === "normal" ? "" : ` \u00b7 ended by ${r.outcome === "max_moves" ? "the move limit" : r.outcome}` +
        (r.reason ? ` (${r.reason})` : "");
      return `Result: ${who} \u00b7 returns: ${returns}${how}`;
    }
    function go(n) { k = Math.max(0, Math.min(rep.frames.length - 1, n)); show(); }
    function stop() { if (timer) { clearInterval(timer); timer = null; $("r-play").textContent = "play"; } }
    function play() {
      if (timer) return stop();
      if (k >= rep.frames.length - 1) go(0);
      $("r-play").textContent = "pause";
      timer = setInterval(() => { if (k >= rep.frames.length - 1) stop(); else go(k + 1); }, Number($("r-speed").value));
    }
    api(`/api/replays/${encodeURIComponent(id)}`).then(r => {
      rep = r;
      $("replay-title").textContent = `Replay ${r.match_id}: ${r.game}`;
      $("replay-meta").textContent = r.players.map((p, i) => `${p} (${i === r.first ? "moves first, " : ""}agent ${r.agents[i] || "?"})`).join(" vs ") +
        ` \u00b7 seed ${r.seed} \u00b7 recorded: ${r.record}`;
      $("r-note").textContent = r.note || "";
      const v = $("r-view");
      v.appendChild(option("auto", "the player to move", true));
      r.players.forEach((p, i) => v.appendChild(option(String(i), `${p} (player ${i})`)));
      $("r-scrub").max = r.frames.length - 1;
      const ol = $("r-steps");
      // card games: the moves in words ("bet 1", "folded") where the final board has them, one a move
      const end = r.frames.length ? (r.frames[r.frames.length - 1].boards || []).find(b => b && b.moves) : null;
      const played = r.steps.filter(s => s.event === "ok");
      const words = end && end.moves.length === played.length ? new Map(played.map((s, i) => [s, end.moves[i].text])) : null;
      r.steps.forEach(s => {
        const said = words && words.has(s) ? words.get(s) :
          (s.action_text !== null && s.action_text !== undefined ? s.action_text : JSON.stringify(s.action));
        const li = el("li", s.event, `${r.players[s.player] || s.player}: ${said}` +
          (s.event !== "ok" ? ` \u2014 ${s.event}${s.reason ? ": " + s.reason : ""}` : ""));
        li.dataset.t = s.t;
        li.addEventListener("click", () => { stop(); go(r.frames.findIndex(f => f.moves >= s.t)); });
        ol.appendChild(li);
      });
      go(0);
    }).catch(e => { $("r-note").textContent = e.message; });
    $("r-first").addEventListener("click", () => { stop(); go(0); });
    $("r-prev").addEventListener("click", () => { stop(); go(k - 1); });
    $("r-next").addEventListener("click", () => { stop(); go(k + 1); });
    $("r-last").addEventListener("click", () => { stop(); go(rep.frames.length - 1); });
    $("r-play").addEventListener("click", play);
    $("r-scrub").addEventListener("input", () => { stop(); go(Number($("r-scrub").value)); });
    $("r-view").addEventListener("change", () => show());
    document.addEventListener("keydown", ev => {
      if (!rep || ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
      if (ev.key === "ArrowRight") { stop(); go(k + 1); } else if (ev.key === "ArrowLeft") { stop(); go(k - 1); }
      else if (ev.key === " ") { ev.preventDefault(); play(); }
    });
  }

  // -- play -----------------------------------------------------------------------------------
  function play() {
    const root = $("play");
    if (root.dataset.tokenRequired === "1") { $("p-token-label").classList.remove("hidden"); $("p-token").value = token(); }
    let options = [], sid = null, poller = null, shownTurn = null;
    function fillPlayers() {
      const g = options.find(o => o.game === $("p-game").value);
      const sel = clear($("p-player"));
      (g ? g.players : []).forEach(p => sel.appendChild(option(p, p)));
      // the seats, and which one moves first by the game's own rules (not always seat 0)
      const seat = $("p-seat"), was = seat.value, first = g ? g.first : null;
      clear(seat);
      [0, 1].forEach(q => seat.appendChild(option(String(q), `seat ${q}` + (first === q ? " (moves first)" : ""),
                                                   String(q) === was)));
    }
    api("/api/play/options").then(o => {
      options = o.games;
      const solo = o.solo || [];
      if (solo.length) {
        $("p-solo").textContent = options.length ?
          `One-player games (${solo.join(", ")}) are not played here: there is no league player to play against in them.` :
          `This league's games are one-player games (${solo.join(", ")}): there is no league player to play against, ` +
          "so there is nothing to play here. The leaderboard ranks its players by mean return.";
        $("p-solo").classList.remove("hidden");
        if (!options.length) $("play-form").classList.add("hidden");
      }
      const params = new URLSearchParams(location.search);
      options.forEach(g => $("p-game").appendChild(option(g.game, g.game, params.get("game") === g.game)));
      fillPlayers();
      if (params.get("player")) $("p-player").value = params.get("player");
      if (o.name && !$("p-name").value) $("p-name").value = o.name;  // the name this browser played under (its cookie)
    });
    $("p-game").addEventListener("change", fillPlayers);
    $("play-form").addEventListener("submit", async ev => {
      ev.preventDefault();
      if (root.dataset.tokenRequired === "1") sessionStorage.setItem("arena-token", $("p-token").value);
      $("p-message").textContent = "";
      try {
        const s = await api("/api/play", {json: {game: $("p-game").value, player: $("p-player").value,
          seat: Number($("p-seat").value), name: $("p-name").value}});
        sid = s.session;
        $("p-name").value = s.name;
        const theirs = (s.elo_before || {})[s.opponent];
        $("p-you").textContent = `You play as ${s.name} (rated as the player ${s.you}), seat ${s.seat}` +
          (s.mark ? `: you are ${s.mark}` : "") + `; against ${s.opponent}` +
          (theirs === null || theirs === undefined ? " (not rated yet)." : ` (Elo ${Math.round(theirs)}).`);
        $("p-game-area").classList.remove("hidden");
        $("play-form").classList.add("hidden");
        clear($("p-result"));
        draw(s);
        poller = setInterval(poll, 500);
      } catch (e) { $("p-message").textContent = e.message; }
    });
    async function poll() {
      if (!sid) return;
      try { draw(await api(`/api/play/${sid}`)); }
      catch (e) { $("p-message").textContent = e.message; }
    }
    async function send(move) {
      $("p-feedback").textContent = "";
      try { draw(await api(`/api/play/${sid}/move`, {json: {move: String(move)}})); }
      catch (e) {
        $("p-feedback").textContent = `${e.message}: try again`;
        if (e.body && e.body.state) draw(e.body.state, true);
      }
    }
    $("p-text-form").addEventListener("submit", ev => { ev.preventDefault(); const v = $("p-text").value; $("p-text").value = ""; send(v); });
    $("p-resign").addEventListener("click", async () => { try { draw(await api(`/api/play/${sid}/resign`, {json: {}})); } catch (e) { $("p-message").textContent = e.message; } });
    function seatNames(s) { return s.players.map((n, q) => q === s.seat ? "you" : n); }
    function draw(s, keepFeedback) {
      $("p-title").textContent = `${s.players.join(" vs ")} \u2014 ${s.game} (match ${s.match_id})`;
      const t = s.turn;
      const statusText = {starting: "starting\u2026", opponent: `${s.opponent} is thinking\u2026`,
        your_turn: t && t.board && t.board.kind === "grid" && (t.legal || []).some(m => m.cell !== null && m.cell !== undefined) ?
          "your move: click the board, or a move below" : "your move", over: "game over",
        error: "error: " + (s.error || "")}[s.status] || s.status;
      $("p-status").textContent = statusText + (t ? ` (${Math.ceil(t.seconds_left)} s left)` : "");
      $("p-status").dataset.status = s.status;
      if (t && t.feedback && !keepFeedback) $("p-feedback").textContent = `Your last move was refused: ${t.feedback}. Try again.`;
      const turnKey = t ? `${t.step}:${t.feedback}` : `none:${s.status}`;
      if (turnKey === shownTurn && s.status !== "over") return;
      shownTurn = turnKey;
      const board = clear($("p-board")), moves = clear($("p-moves"));
      $("p-text-form").classList.add("hidden");
      // a card game's engine text ("1pb") says less than the board: folded away unless the game wrote it in words
      const plainView = (text, board, readable) => {
        const fold = !readable && board && board.kind === "cards";
        $("p-view").textContent = fold ? "" : text;
        $("p-view").classList.toggle("hidden", fold);
        $("p-raw").classList.toggle("hidden", !fold);
        $("p-raw-text").textContent = fold ? text : "";
      };
      if (t && t.rules) { $("p-rules-text").textContent = t.rules; $("p-rules").classList.remove("hidden"); }
      if (t) {
        plainView(t.view, t.board, t.readable);
        const playable = {};
        for (const m of t.legal || []) {
          if (m.cell !== null && m.cell !== undefined) playable[m.cell] = t.action_kind === "discrete" ? m.value : m.label;
          const b = el("button", "move", m.label); b.type = "button";
          b.addEventListener("click", () => send(t.action_kind === "discrete" ? m.value : m.label));
          moves.appendChild(b);
        }
        const drawn = R.render(t.board, {playable, onCell: v => send(v), names: seatNames(s), viewer: s.seat});
        if (drawn) board.appendChild(drawn);
        if (t.action_kind !== "discrete") $("p-text-form").classList.remove("hidden");
      } else if (s.status === "over" || s.status === "error") {
        plainView(s.final_view || "", s.final_board, s.final_readable);
        const end = s.status === "over" && s.result && s.final_boards && s.final_boards.every(b => b && b.kind === "cards") ?
          {boards: s.final_boards, returns: s.result.returns} : null;
        const drawn = R.render(s.final_board, {names: seatNames(s), viewer: s.seat, end});
        if (drawn) board.appendChild(drawn);
      }
      if (s.status === "over" && s.result) {
        clearInterval(poller);
        const res = clear($("p-result"));
        res.appendChild(el("p", "result", `${s.result.text}${s.result.reason ? " \u2014 " + s.result.reason : ""}`));
        const tbl = el("table", "data ratings");
        const head = el("tr"); ["player", "Elo before", "Elo after", "change"].forEach(h => head.appendChild(el("th", null, h)));
        tbl.appendChild(head);
        for (const n of s.players) {
          if (tbl.querySelector(`tr[data-player="${CSS.escape(n)}"]`)) continue;
          const tr = el("tr"); tr.dataset.player = n;
          // the change this match's own commit made (another match committed meanwhile is not in it)
          const a = s.elo_before[n], b = s.elo_after[n], c = (s.elo_change || {})[n];
          const d = (c !== null && c !== undefined) ? c : null;
          tr.appendChild(el("td", null, n === s.you ? `${n} (you)` : n)); tr.appendChild(el("td", "num", a === null || a === undefined ? "new" : fmt(a)));
          tr.appendChild(el("td", "num elo-after", fmt(b))); tr.appendChild(el("td", "num elo-change " + (d > 0 ? "delta-up" : "delta-down"), d === null ? "\u2014" : (d > 0 ? "+" : "") + d.toFixed(1)));
          tbl.appendChild(tr);
        }
        res.appendChild(tbl);
        const p = el("p"); p.appendChild(link(`/replay/${encodeURIComponent(s.match_id)}`, "see the replay"));
        p.appendChild(document.createTextNode(" \u00b7 "));
        p.appendChild(link("/play", "play again"));
        res.appendChild(p);
        $("p-resign").classList.add("hidden");
      }
      if (s.status === "error") clearInterval(poller);
    }
  }

  if (page === "leaderboard") leaderboard();
  else if (page === "matches") matches();
  else if (page === "replay") replay();
  else if (page === "play") play();
})();

"""The web pages in a real browser (Debian's chromium driven by Playwright): the dashboard, a replay
stepped through, a whole tic-tac-toe game played by clicks and rated, a closed tab's forfeit recorded
once, and names and moves that are HTML shown as text (no dialog ever opens)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from arena.league.config import load_league_config  # noqa: E402
from arena.league.manager import League, open_league  # noqa: E402
from arena.league.protocols import Pairing  # noqa: E402
from arena.match.runner import run_match_job  # noqa: E402
from arena.ui.web import PlaySettings, start_in_background  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
EVIL = "<script>alert(1)</script>"
HTML_MOVE = "<img src=x onerror=alert(2)>"
TTT = "openspiel/tic_tac_toe-v0"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="browser tests need /usr/bin/chromium "
                                "(Debian: apt-get install -y chromium)")


class HtmlAgent:
    spec = "html"
    observe = match_over = None

    def reset(self, seed=None):
        pass

    def act(self, observation):
        return HTML_MOVE


@pytest.fixture(scope="module")
def league_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("webui")
    League(load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=30), d, backend="inline").run()
    league = League.open(d)
    league.store.add_player(EVIL, "fixed", "random", [TTT])
    m = league.begin(Pairing(TTT, [EVIL, "random"], ["random", "random"], "test"), status="running")
    league.commit(m.match_id, run_match_job(league.job(m)))
    m = league.begin(Pairing("arena/TicTacToe-v0", ["random", "first"], ["random", "first"], "html"), status="running")
    league.commit(m.match_id, run_match_job(league.job(m, record="text"), agents=[HtmlAgent(), None]))
    league.store.close()
    return d


@pytest.fixture(scope="module")
def server(league_dir):
    srv = start_in_background(league_dir, port=0, play=PlaySettings(idle_timeout=2.0, move_time_limit=60))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    # bypass_csp: the tests' own probes (wait_for_function) are evaluated strings, which the pages' CSP
    # forbids; escaping is checked without the CSP's help.
    ctx = browser.new_context(viewport={"width": 1280, "height": 800}, bypass_csp=True)
    pg = ctx.new_page()
    pg.dialogs = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    ctx.close()


@pytest.fixture(scope="module")
def store(league_dir):
    s = open_league(league_dir)
    yield s
    s.close()


def test_dashboard_shows_the_leaderboard_and_escapes_names(server, page, store):
    page.goto(server.url + "/")
    page.wait_for_selector("#board tr:nth-child(3)")
    names = page.locator("#board td.name a").all_inner_texts()
    assert set(names) == set(store.elo("*"))
    # the fitted table's provisional players (too few games or too wide an interval) carry the tag
    from arena.league.leaderboard import leaderboard

    tags = page.locator("#board tr.provisional td.name a").all_inner_texts()
    assert tags and set(tags) == {r.player for r in leaderboard(store, "*").rows if r.provisional}
    assert EVIL in names  # shown as text, not run
    # compact by default: the columns read first fit a 1280-pixel window; "all columns" shows the rest
    shown = lambda: page.locator("#board th").evaluate_all(  # noqa: E731
        "ths => ths.filter(t => t.offsetParent !== null).map(t => t.textContent)")
    assert [h.rstrip(" \u25be") for h in shown()] == ["#", "player", "rating", "95% CI", "Elo", "games"]
    width = page.evaluate("document.querySelector('#board').getBoundingClientRect().width")
    assert width <= 1280 - 40, width
    page.click("#board-columns")
    assert "alpha-rank" in shown() and len(shown()) == 18 and "columns=all" in page.url
    assert page.inner_text("#board-columns") == "fewer columns"
    page.click("#board-columns")
    page.wait_for_selector("#curves polyline")
    page.wait_for_selector("#heatmap rect")
    assert page.locator("#board script").count() == 0
    page.select_option("#game", TTT)
    page.wait_for_function("document.querySelector('#board-title').textContent.includes('tic_tac_toe')")
    assert page.dialogs == [] and page.errors == []


def test_matches_page_filters_and_pages(server, page, store):
    page.goto(server.url + "/matches")
    page.wait_for_selector("#matches tr:nth-child(2)")
    assert page.locator("#matches tr").count() == 1 + min(50, store.result_count())
    page.fill("#f-player", "mcts")
    page.click("#filters button[type=submit]")
    page.wait_for_function("[...document.querySelectorAll('#matches td.players')].every(td => td.textContent.includes('mcts'))")
    want = sum(1 for r in store.results() if "mcts" in r.players)
    assert page.locator("#matches tr").count() == 1 + want
    assert page.dialogs == [] and page.errors == []


def test_replay_steps_through_and_shows_html_moves_as_text(server, page, store):
    row = next(r for r in store.results() if r.game == TTT and r.outcome == "normal")
    page.goto(server.url + f"/replay/{row.match_id}")
    page.wait_for_selector("#r-board svg")
    assert page.locator("#r-board [data-mark]").count() == 0
    for k in range(1, row.moves + 1):
        page.click("#r-next")
        assert page.locator("#r-board [data-mark]").count() == k
    assert "Result:" in page.inner_text("#r-result")
    page.click("#r-first")
    assert page.locator("#r-board [data-mark]").count() == 0
    page.fill("#r-scrub", str(row.moves))
    page.dispatch_event("#r-scrub", "input")
    assert page.locator("#r-board [data-mark]").count() == row.moves
    # a move that is raw HTML, shown as the text it is
    bad = next(r for r in store.results() if r.outcome == "forfeit")
    page.goto(server.url + f"/replay/{bad.match_id}")
    page.wait_for_selector("#r-steps li")
    assert HTML_MOVE in page.inner_text("#r-steps")
    assert page.locator("#r-steps img").count() == 0 and page.dialogs == [] and page.errors == []


def start_game(server, page, player: str, name: str) -> None:
    page.goto(server.url + "/play")
    page.wait_for_selector(f"#p-game option[value='{TTT}']", state="attached")
    page.select_option("#p-game", TTT)
    page.select_option("#p-player", player)
    # the seat menu says which seat moves first by the game's rules (tic-tac-toe: seat 0)
    assert page.locator("#p-seat option").all_inner_texts() == ["seat 0 (moves first)", "seat 1"]
    page.select_option("#p-seat", "0")
    page.fill("#p-name", name)
    page.click("#p-start")
    page.wait_for_selector("#p-status[data-status='your_turn']")


def test_play_a_whole_game_by_clicks_and_see_the_rating(server, page, store):
    before = store.result_count("external")
    start_game(server, page, "first", "clicker")
    while True:
        page.wait_for_selector("#p-status[data-status='your_turn'], #p-status[data-status='over']")
        if page.get_attribute("#p-status", "data-status") == "over":
            break
        cells = page.locator("#p-board rect.cell.playable")
        assert cells.count() > 0
        marks = page.locator("#p-board [data-mark]").count()
        cells.last.click()
        # the opponent answered (two more marks) or the game is over
        page.wait_for_function(f"document.querySelector('#p-status').dataset.status === 'over' || "
                               f"document.querySelectorAll('#p-board [data-mark]').length >= {marks + 2}")
    page.wait_for_selector("#p-result table")
    assert page.locator("#p-result tr[data-player='human:clicker'] td.elo-after").inner_text() != "\u2014"
    assert store.result_count("external") == before + 1
    row = store.results()[-1]
    assert row.players == ["human:clicker", "first"]
    shown = float(page.locator("#p-result tr[data-player='human:clicker'] td.elo-after").inner_text())
    assert shown == pytest.approx(store.elo(TTT)["human:clicker"], abs=0.05)
    # the change shown is this match's own commit's: its Elo row minus the one before
    hist = [e for seq, p, e, *_ in store.rating_history(TTT) if p == "human:clicker" and seq <= row.commit_seq]
    change = float(page.locator("#p-result tr[data-player='human:clicker'] td.elo-change").inner_text())
    assert change == pytest.approx(hist[-1] - (hist[-2] if len(hist) > 1 else 1500.0), abs=0.05)
    you = page.inner_text("#p-you")
    assert "You play as clicker" in you and "seat 0: you are x" in you and "against first (Elo " in you, you
    page.goto(server.url + "/play")  # the browser keeps its name (a cookie)
    page.wait_for_function("document.querySelector('#p-name').value === 'clicker'")
    assert page.dialogs == [] and page.errors == []


def test_closing_the_tab_mid_game_forfeits_once(server, browser, store):
    ctx = browser.new_context(bypass_csp=True)
    pg = ctx.new_page()
    before = store.result_count("external")
    start_game(server, pg, "random", "quitter")
    match_id = pg.inner_text("#p-title").rsplit("(match ", 1)[1].rstrip(")")
    pg.locator("#p-board rect.cell.playable").first.click()
    pg.wait_for_selector("#p-status[data-status='your_turn']")  # mid-game: one mark each at most
    ctx.close()  # the tab is gone: no more polls
    deadline = time.monotonic() + 30
    while store.result_for(match_id) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    row = store.result_for(match_id)
    assert row.players[0] == "human:quitter" and row.outcome == "forfeit" and "left the page" in row.reason
    assert store.result_count("external") == before + 1
    assert store.conn.execute("SELECT COUNT(*) FROM results WHERE match_id=?", (match_id,)).fetchone()[0] == 1


# -- what a newcomer reads: the plots' numbers, poker in words, a one-player league ------------------
def test_heatmap_cells_carry_their_values_and_a_colour_scale(server, page):
    page.goto(server.url + "/")
    page.wait_for_selector("#heatmap rect.cell")
    # the page may first show the table a computation behind (the server answers with the previous
    # table while it computes the next) and asks again at its next poll: compare once it has caught up
    deadline = time.monotonic() + 20
    while True:
        pay = page.request.get(server.url + "/api/payoff").json()
        want = sorted(str(round(100 * v)) for row in pay["win_rate"] for v in row if v is not None)
        shown = sorted(page.locator("#heatmap text.value").all_text_contents())
        if shown == want or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert shown == want
    assert page.locator("#heatmap text.legend").all_text_contents() == ["0%", "50%", "100%"]
    assert page.inner_text("#heatmap-caption").startswith("Payoff: how often the row player beat")  # win rates here
    tip = page.locator("#heatmap rect.cell[data-row='0'][data-col='1'] title").text_content()
    a, b = pay["players"][0], pay["players"][1]
    v = pay["win_rate"][0][1]
    assert tip == (f"{a} vs {b}: never met" if v is None else
                   f"{a} vs {b}: {100 * v:.1f}% won by {a} over {pay['games'][0][1]:.1f} games (decayed; draws count half)")
    assert page.dialogs == [] and page.errors == []


def test_rating_chart_has_round_ticks_and_a_hover_readout(server, page, store):
    page.goto(server.url + "/")
    page.wait_for_selector("#curves polyline")
    ticks = [int(t) for t in page.locator("#curves text.ytick").all_text_contents()]
    assert len(ticks) >= 5 and len({b - a for a, b in zip(ticks, ticks[1:])}) == 1  # evenly spaced round numbers
    hist = page.request.get(server.url + "/api/history").json()
    last = max(pt[0] for p in hist["players"] for pt in hist["series"][p])
    hit = page.locator("#curves .hover-area")
    box = hit.bounding_box()
    hit.hover(position={"x": box["width"] - 1, "y": box["height"] / 2})  # scrolled into view first, as a person would
    elo = store.elo("*")
    ranked = sorted(hist["players"], key=lambda p: -elo[p])
    want = f"after result {last}: " + " \u00b7 ".join(f"{p} {elo[p]:.1f}" for p in ranked)
    assert page.inner_text("#curves-readout") == want
    assert page.dialogs == [] and page.errors == []


def test_kuhn_on_the_play_page_in_words_then_both_cards(server, page):
    page.goto(server.url + "/play")
    page.wait_for_selector("#p-game option[value='openspiel/kuhn_poker-v0']", state="attached")
    page.select_option("#p-game", "openspiel/kuhn_poker-v0")
    page.select_option("#p-player", "first")
    page.select_option("#p-seat", "0")
    page.fill("#p-name", "cardplayer")
    page.click("#p-start")
    page.wait_for_selector("#p-status[data-status='your_turn']")
    assert page.locator("#p-moves button").all_inner_texts() == ["check", "bet 1"]
    mine = page.inner_text("#p-board .card")
    page.click("#p-moves button:has-text('bet 1')")
    page.wait_for_selector("#p-result table")
    # "first" answers a bet with its first legal move: a fold
    assert page.locator("#p-board .betting li.bet").all_inner_texts() == ["you bet 1", "first folded"]
    assert "pot 3 chips" in page.inner_text("#p-board .hand-end h4")
    rows = [r.split("\t") for r in page.locator("#p-board table.showdown tr[data-seat]").all_inner_texts()]
    assert rows[0] == ["you", mine, "+1"] and rows[1][0] == "first" and rows[1][2] == "-1"
    assert rows[1][1] in "JQK" and rows[1][1] != mine
    # the engine's own text ("0bp") is never what the page shows for the hand: words, or folded away
    assert not (page.is_visible("#p-view") and re.fullmatch(r"\s*[012][pb]*\s*", page.inner_text("#p-view")))
    assert page.dialogs == [] and page.errors == []


@pytest.fixture(scope="module")
def solo_server(tmp_path_factory):
    from arena.config import from_dict
    from arena.league.config import LeagueConfig

    d = tmp_path_factory.mktemp("solo")
    cfg = from_dict(LeagueConfig, {"name": "solo", "seed": 5, "games": [{"id": "CartPole-v1"}], "matches": 8,
                                   "seeds": 4, "in_flight": 2, "players": [{"name": "random", "agent": "random"},
                                                                          {"name": "first", "agent": "first"}]})
    League(cfg, d, backend="inline").run()
    srv = start_in_background(d, port=0)
    yield srv
    srv.stop()


def test_a_one_player_league_shows_its_returns_and_no_play_form(solo_server, page):
    page.goto(solo_server.url + "/")
    page.wait_for_selector("#board tr:nth-child(2)")
    assert page.input_value("#game") == "CartPole-v1"
    assert page.locator("#game option").all_inner_texts() == ["CartPole-v1 (one player: returns)"]
    assert page.locator("#board th").all_inner_texts() == ["#", "player", "mean return", "std", "episodes",
                                                           "common seeds", "forfeits"]
    rows = page.request.get(solo_server.url + "/api/players?game=CartPole-v1").json()["rows"]
    assert page.locator("#board td.name").all_inner_texts() == [r["player"] for r in rows]
    assert not page.is_visible("#plots") and "no Elo" in page.inner_text("#board-note")
    page.goto(solo_server.url + "/play")
    page.wait_for_selector("#p-solo:not(.hidden)")
    assert page.inner_text("#p-solo").startswith("This league's games are one-player games (CartPole-v1): there is "
                                                 "no league player to play against")
    assert not page.is_visible("#play-form")
    assert page.dialogs == [] and page.errors == []


def test_the_prosthetics_figure_has_a_head_and_two_leg_colours(server, page):
    """The web replay's stick figure as the GIFs draw it: the prosthetic (right) leg red, the left leg
    blue, and a head on the neck inside the picture (a standing skeleton, as the model's is at t=0)."""
    page.goto(server.url + "/")
    sk = {"joints": {"ground_pelvis": [0, 0.94], "hip_r": [0, 0.9], "knee_r": [0, 0.5], "ankle_r": [0, 0.1],
                     "hip_l": [0, 0.9], "knee_l": [0.02, 0.5], "ankle_l": [0.02, 0.1], "back": [-0.1, 1.0]},
          "ends": {"head": [-0.05, 1.57], "pros_foot_r": [0.05, 0.02], "toes_l": [0.1, 0.02]},
          "segments": [["hip_r", "knee_r"], ["knee_r", "ankle_r"], ["ankle_r", "pros_foot_r"], ["hip_l", "knee_l"],
                       ["knee_l", "ankle_l"], ["ankle_l", "toes_l"], ["back", "head"], ["hip_l", "hip_r"]],
          "time": 0.0}
    out = page.evaluate("""sk => {
        const s = ArenaRender.skeleton(sk);
        document.body.appendChild(s);
        const head = s.querySelector("circle.head");
        const box = s.getBoundingClientRect(), hb = head.getBoundingClientRect();
        const colours = [...s.querySelectorAll("line[data-side]")].map(l => [l.dataset.side, l.getAttribute("stroke")]);
        return {inside: hb.top >= box.top && hb.bottom <= box.bottom && hb.left >= box.left && hb.right <= box.right,
                r: Number(head.getAttribute("r")), colours};
    }""", sk)
    assert out["inside"] and out["r"] > 10
    colours = dict(out["colours"])
    assert colours["r"] != colours["l"] and colours["c"] not in (colours["r"], colours["l"])


def test_the_skirmish_board_draws_living_units_their_bars_and_shots(server, page):
    """The web replay's battle as the GIFs draw it: each side's living units in its colour (a dead one not
    at all), a shield bar only for a type with shields, a line from the unit that fired to its target,
    and the step in the caption; out-of-range numbers are clamped into the picture."""
    page.goto(server.url + "/")
    unit = lambda side, slot, x, y, **kw: {"side": side, "slot": slot, "type": "m", "radius": 0.375, "x": x,  # noqa: E731
                                           "y": y, "health": 1.0, "shield": None, "alive": True, "shot": None, **kw}
    battle = {"step": 7, "max_steps": 60, "width": 32, "height": 32, "grid": 8, "winner": None,
              "sides": [{"name": "red", "alive": 2, "units": 3, "fraction": 0.6},
                        {"name": "blue", "alive": 1, "units": 1, "fraction": 0.5}],
              "units": [unit(0, 0, 8, 8), unit(0, 1, 8, 16, health=0.5), unit(0, 2, 8, 24, alive=False),
                        unit(1, 0, 1e9, 16, type="s", radius=0.625, shield=0.25, shot=1, health="<b>")]}
    out = page.evaluate("""b => {
        const s = ArenaRender.battle(b);
        document.body.appendChild(s);
        const box = s.getBoundingClientRect();
        const units = [...s.querySelectorAll("circle.unit")];
        const inside = units.every(c => { const r = c.getBoundingClientRect();
          return r.left >= box.left && r.right <= box.right && r.top >= box.top && r.bottom <= box.bottom; });
        const shots = [...s.querySelectorAll("line.shot")].map(l => [l.dataset.side, +l.getAttribute("y2")]);
        return {sides: units.map(c => [c.dataset.side, c.getAttribute("fill")]), inside, shots, cy: units.map(c => +c.getAttribute("cy")),
                shields: s.querySelectorAll("rect.shield").length, health: [...s.querySelectorAll("rect.health")].map(r => +r.getAttribute("width")),
                caption: s.querySelector("text.caption").textContent};
    }""", battle)
    assert [side for side, _ in out["sides"]] == ["0", "0", "1"] and out["inside"]
    fills = dict(out["sides"])
    assert fills["0"] != fills["1"]
    assert out["shots"] == [["1", out["cy"][1]]]  # from blue, to red's unit 1
    assert out["shields"] == 1 and out["health"][0] == 2 * out["health"][1] and out["health"][2] == 0
    assert out["caption"].startswith("step 7/60") and "red 2/3 60%" in out["caption"]
    assert page.dialogs == [] and page.errors == []


def test_the_report_fits_a_narrow_screen(browser, store, tmp_path):
    """At 640 pixels the report's rating tables keep the columns read first and fit the window (they were
    993 pixels wide); at 1280 every column shows."""
    from arena.ui.report import write_report

    path = write_report(store, tmp_path / "report.html")
    widths = "Array.from(document.querySelectorAll('table.fitted')).map(t => t.getBoundingClientRect().width)"
    for width, narrow in ((640, True), (1280, False)):
        ctx = browser.new_context(viewport={"width": width, "height": 900})
        pg = ctx.new_page()
        pg.goto(path.as_uri())
        tables = pg.evaluate(widths)
        heads = pg.locator("table.fitted").first.locator("th").evaluate_all(
            "ths => ths.filter(t => t.offsetParent !== null).map(t => t.textContent)")
        ctx.close()
        assert tables and (max(tables) <= width - 20 if narrow else "Rank CI" in heads), (width, tables, heads)
        assert ("Rank CI" in heads) is not narrow and "Rating" in heads

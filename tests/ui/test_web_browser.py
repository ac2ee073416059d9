"""The web pages in a real browser (Debian's chromium driven by Playwright): the dashboard, a replay
stepped through, a whole tic-tac-toe game played by clicks and rated, a closed tab's forfeit recorded
once, and names and moves that are HTML shown as text (no dialog ever opens)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
sync_api = pytest.importorskip("playwright.sync_api")

from arena.league.config import load_league_config  # noqa: E402
from arena.league.manager import League, Pairing, open_league  # noqa: E402
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
    names = page.locator("#board td.name").all_inner_texts()
    assert set(names) == set(store.elo("*"))
    assert EVIL in names  # shown as text, not run
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
    assert page.locator("#p-result tr[data-player='clicker'] td.elo-after").inner_text() != "\u2014"
    assert store.result_count("external") == before + 1
    row = store.results()[-1]
    assert row.players == ["clicker", "first"]
    shown = float(page.locator("#p-result tr[data-player='clicker'] td.elo-after").inner_text())
    assert shown == pytest.approx(store.elo(TTT)["clicker"], abs=0.05)
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
    assert row.players[0] == "quitter" and row.outcome == "forfeit" and "left the page" in row.reason
    assert store.result_count("external") == before + 1
    assert store.conn.execute("SELECT COUNT(*) FROM results WHERE match_id=?", (match_id,)).fetchone()[0] == 1

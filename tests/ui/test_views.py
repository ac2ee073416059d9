"""League views, plots and the HTML report, checked against the store's own numbers."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image as mpimg
import numpy as np
import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from arena.league.config import GameEntry, LeagueConfig, LearnerEntry, PlayerEntry, RolesConfig, load_league_config
from arena.league.manager import League, open_league
from arena.ui.plots import plot_all, plot_payoff, plot_ratings
from arena.league.ratings import alpharank, scores_from_returns
from arena.ui.report import SERVE_URL, write_report
from arena.league.storage import OVERALL, LeagueStore
from arena.league.queries import rating_rows, recent_results
from arena.ui.views import (
    payoff_view,
    ratings_per_game_views,
    ratings_view,
    recompute_view,
    status_view,
    top_table,
)

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def league_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("league")
    # replays as files: the report links to them (a league keeping them in its database: below)
    cfg = load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=30, replays="files")
    out = League(cfg, d, backend="inline").run()
    assert out["results"] == 30 and out["failures"] == 0
    return d


@pytest.fixture(scope="module")
def store(league_dir) -> LeagueStore:
    s = open_league(league_dir)
    yield s
    s.close()


@pytest.fixture(scope="module")
def learner_store(tmp_path_factory) -> LeagueStore:
    """A tiny league with learning players, so there are snapshots, resets and historical players."""
    d = tmp_path_factory.mktemp("learners")
    cfg = LeagueConfig(games=[GameEntry("openspiel/tic_tac_toe-v0")], name="learners", matches=40,
                       players=[PlayerEntry("random", "random"), PlayerEntry("first", "first")],
                       learners=[LearnerEntry("main0", "main"), LearnerEntry("expl", "main_exploiter")],
                       update_every=4, roles=RolesConfig(snapshot_steps=10, snapshot_min_steps=5))
    League(cfg, d, backend="inline").run()
    s = open_league(d)
    yield s
    s.close()


@pytest.fixture(scope="module")
def report(store) -> Path:
    return write_report(store)


def cells(table: Table) -> list[list[str]]:
    """A rich table's body as rows of plain strings."""
    cols = [[c.plain if isinstance(c, Text) else str(c) for c in col._cells] for col in table.columns]
    return [list(r) for r in zip(*cols)] if cols else []


def header(table: Table) -> list[str]:
    return [str(c.header) for c in table.columns]


def render(renderable) -> str:
    console = Console(record=True, width=240, color_system=None)
    console.print(renderable)
    return console.export_text()


# -- ratings ---------------------------------------------------------------------------------


def test_rating_rows_equal_store_and_results(store):
    games = store.rated_games()
    assert OVERALL in games and len(games) >= 3
    for game in games:
        rows = rating_rows(store, game)
        elo, skill = store.elo(game), store.openskill(game)
        assert [r.player for r in rows] == sorted(elo, key=lambda p: (-elo[p], p))
        for r in rows:
            assert r.elo == elo[r.player]
            assert (r.mu, r.sigma) == skill[r.player]
            assert r.conservative == skill[r.player][0] - 3 * skill[r.player][1]
        # Records recounted independently from the result log.
        expected: dict[str, list[int]] = {p: [0, 0, 0] for p in elo}
        results = [x for x in store.results(None if game == OVERALL else game) if len(set(x.players)) == 2]
        for x in results:
            for p, s in zip(x.players, scores_from_returns(x.returns)):
                expected[p][{1.0: 0, 0.5: 1, 0.0: 2}[s]] += 1
        assert {r.player: [r.wins, r.draws, r.losses] for r in rows} == expected
        assert sum(r.games for r in rows) == 2 * len(results)


def test_ratings_view_rows_sorted_and_equal_to_store(store):
    t = ratings_view(store)
    assert "all games" in str(t.title)
    h = header(t)
    body = cells(t)
    elo, skill = store.elo(), store.openskill()
    assert {r[h.index("Player")] for r in body} == set(elo)
    elos = [float(r[h.index("Elo")]) for r in body]
    assert elos == sorted(elos, reverse=True)
    for r in body:
        p = r[h.index("Player")]
        assert r[h.index("Elo")] == f"{elo[p]:.1f}"
        assert r[h.index("mu")] == f"{skill[p][0]:.2f}"
        assert r[h.index("sigma")] == f"{skill[p][1]:.2f}"
        w, d, l, g = (int(r[h.index(k)]) for k in ("W", "D", "L", "Games"))
        assert w + d + l == g
        assert r[h.index("Win rate")] == f"{100 * (w + 0.5 * d) / g:.1f}%"


def test_ratings_per_game_and_sort(store):
    per_game = ratings_per_game_views(store)
    games = [g for g in store.rated_games() if g != OVERALL]
    assert [str(t.title) for t in per_game] == [f"Ratings: {g}" for g in games]
    for g, t in zip(games, per_game):
        assert {r[1] for r in cells(t)} == set(store.elo(g))
    by_name = cells(ratings_view(store, sort="name"))
    assert [r[1] for r in by_name] == sorted(store.elo())
    with pytest.raises(ValueError, match="unknown sort"):
        ratings_view(store, sort="luck")


def test_top_table(store):
    """By Elo, a player with under 20 games (provisional) after the rest, marked; the run's last word:
    the fitted table's top."""
    from arena.league.leaderboard import leaderboard

    elo = store.elo()
    games = {p: sum(v) for p, v in store.records(OVERALL).items()}
    rows = cells(top_table(store, n=3))
    best = sorted(elo, key=lambda p: (games[p] < 20, -elo[p]))[:3]
    assert [r[1].replace(" (provisional)", "") for r in rows] == best
    assert [r[2] for r in rows] == [f"{elo[p]:.1f}" for p in best]
    assert [r[0].endswith("?") for r in rows] == [games[p] < 20 for p in best]
    assert any(games[p] < 20 for p in elo) and any(games[p] >= 20 for p in elo)  # both kinds are in the test
    fitted = cells(top_table(store, n=3, fitted=True))
    board = leaderboard(store, OVERALL, resamples=200)
    assert [r[1].replace(" (provisional)", "") for r in fitted] == [r.player for r in board.rows[:3]]
    assert [r[2] for r in fitted] == [f"{r.rating:.0f}" for r in board.rows[:3]]


# -- payoff ----------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["overall", "first_game"])
def test_payoff_view_cells_equal_store_payoff(store, which):
    from arena.league.leaderboard import game_scorings

    # the decayed win-rate matrix (a game scored by its payoffs shows mean payoffs: test_leaderboard.py)
    scoring = game_scorings(store)
    game = OVERALL if which == "overall" else [g for g in store.rated_games() if scoring.get(g) == "win"][0]
    payoff = store.payoff(game)
    t = payoff_view(store, game)
    h = header(t)
    body = cells(t)
    players = [r[0] for r in body]
    assert h[1:-1] == players and sorted(players) == payoff.players()
    seen = 0
    for r in body:
        a = r[0]
        for b, cell in zip(players, r[1:-1]):
            if payoff.games(a, b) > 0:
                wr, n = cell.split()
                assert wr == f"{payoff.win_rate(a, b):.2f}"
                assert n == f"({payoff.games(a, b):.1f})"
                seen += 1
            else:
                assert cell == "-"
    assert seen > 0
    # alpha-rank over the established players (20 games or more); the provisional ones are "prov."
    from arena.league.leaderboard import PROVISIONAL_GAMES

    established = [p for p in players if sum(store.records(game)[p]) >= PROVISIONAL_GAMES] or players  # none: all
    masses = dict(zip(established, alpharank(payoff.matrix(established))))
    assert [r[-1] for r in body] == [f"{masses[p]:.3f}" if p in masses else "prov." for p in players]
    assert abs(sum(float(r[-1]) for r in body if r[-1] != "prov.") - 1.0) < 0.01


# -- recompute and status --------------------------------------------------------------------


def test_recompute_view_all_equal(store):
    view, ok = recompute_view(store)
    assert ok is True
    text = render(view)
    assert "MISMATCH" not in text
    assert "match the result log exactly" in text


def test_recompute_view_detects_drift(league_dir, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(league_dir, copy)
    s = LeagueStore(copy, create=False)
    try:
        p = sorted(s.elo())[0]
        with s.tx() as c:
            c.execute("UPDATE ratings SET value=? WHERE system='elo' AND game=? AND player=?",
                      (repr(s.elo()[p] + 1e-9), OVERALL, p))
        view, ok = recompute_view(s)
        assert ok is False
        assert "MISMATCH" in render(view)
    finally:
        s.close()


def test_status_view(store):
    text = render(status_view(store))
    for p in store.players():
        assert p.name in text
    counts = store.status_counts()
    assert counts == {"done": 30}
    last = store.results()[-1]
    assert last.match_id in text
    assert re.search(r"│\s+0\s+│\s+0\s+│\s+30\s+│\s+0\s+│\s+30\s+│", text)  # queued running done failed total
    assert "no snapshots or resets yet" in text


def test_status_view_shows_snapshots_and_roles(learner_store):
    text = render(status_view(learner_store))
    snaps = learner_store.events("snapshot")
    assert snaps, "the tiny learner league should have snapshotted"
    assert "snapshot" in text and snaps[-1]["snapshot"] in text
    assert "main_exploiter" in text and "historical" in text


# -- plots -----------------------------------------------------------------------------------


def _check_png(path: Path) -> None:
    assert path.exists()
    assert path.read_bytes()[:8] == PNG_MAGIC
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert float(np.var(img)) > 1e-3  # not blank


def test_plots(store, tmp_path):
    paths = plot_all(store, tmp_path)
    names = sorted(p.name for p in paths)
    games = [g for g in store.rated_games() if g != OVERALL]
    expected = {"ratings_all.png", "payoff_all.png"} | {
        f"{kind}_{g.replace('/', '_')}.png" for g in games for kind in ("ratings", "payoff")}
    assert set(names) == expected and len(names) == len(expected)
    assert "ratings_openspiel_tic_tac_toe-v0.png" in names
    for p in paths:
        _check_png(p)
    assert plot_ratings(store, tmp_path / "one") == tmp_path / "one" / "ratings_all.png"
    assert plot_payoff(store, tmp_path / "one", games[0]).name == f"payoff_{games[0].replace('/', '_')}.png"


def test_plots_of_an_empty_league(tmp_path):
    s = LeagueStore(tmp_path / "empty")
    try:
        _check_png(plot_ratings(s, tmp_path))
        _check_png(plot_payoff(s, tmp_path))
        assert "no rated results yet" in render(ratings_view(s))
        assert recompute_view(s)[1] is True
        assert write_report(s).exists()
    finally:
        s.close()


# -- report ----------------------------------------------------------------------------------


def test_report_contents(store, report):
    assert report == store.dir / "report.html"
    text = report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    for p in store.players():
        assert html.escape(p.name) in text
    assert text.count("data:image/png;base64,") >= 2 * len(store.rated_games())
    assert not re.search(r"""src\s*=\s*["']?\s*(?:https?:)?//""", text, re.I)  # nothing loaded from anywhere
    # the only absolute links: each replay's page on the local `arena serve` (opened by a click, never fetched)
    pages = re.findall(r"""href\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]*)""", text, re.I)
    assert pages and all(re.fullmatch(re.escape(SERVE_URL) + r"/replay/m\d{8}", p) for p in pages)
    assert "http://" not in text.replace(SERVE_URL, "") and "https://" not in text
    assert "<script" not in text.lower()
    assert "quickstart" in text  # league name from the stored config
    for g in store.rated_games():
        if g != OVERALL:
            assert html.escape(g) in text
    links = re.findall(r'href="(replays/[^"]+)"', text)
    assert links and all(re.fullmatch(r"replays/m\d{8}\.jsonl\.gz", link) for link in links)
    assert all((report.parent / link).exists() for link in links)
    assert f'href="replays/{store.results()[-1].match_id}.jsonl.gz"' in text
    # Every rating in the overall table appears as shown in the terminal view.
    for p, e in store.elo().items():
        assert f"{e:.1f}" in text


def test_report_elsewhere_links_relative_and_escapes(league_dir, tmp_path):
    copy = tmp_path / "league"
    shutil.copytree(league_dir, copy)
    s = LeagueStore(copy, create=False)
    try:
        s.add_player("<b>x&y", "fixed", "random", ["openspiel/tic_tac_toe-v0"])
        out = write_report(s, tmp_path / "site" / "index.html")
        text = out.read_text(encoding="utf-8")
        assert "&lt;b&gt;x&amp;y" in text and "<b>x&y" not in text
        links = [x for x in re.findall(r'href="([^"#][^"]*)"', text) if not x.startswith(SERVE_URL)]
        assert links and all(link.startswith("../league/replays/") for link in links)
        # The copied league's replays, not the original's absolute paths.
        assert all((out.parent / link).resolve().exists() for link in links)
    finally:
        s.close()


def test_report_of_a_league_keeping_replays_in_its_database_names_them(tmp_path):
    cfg = load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=6)
    assert cfg.replays == "database"
    League(cfg, tmp_path / "L", backend="inline").run()
    s = open_league(tmp_path / "L")
    try:
        text = write_report(s).read_text(encoding="utf-8")
        # no file to link to: each replay links to arena serve's replay page, with the terminal's command
        links = re.findall(r'href="([^"#][^"]*)"', text)
        assert sorted(links) == sorted(f"{SERVE_URL}/replay/{r.match_id}" for r in recent_results(s, 6))
        for r in recent_results(s, 6):
            assert (f'<a href="{SERVE_URL}/replay/{r.match_id}" title="open it in the replay viewer of arena serve '
                    f'(start arena serve first)">view</a> <span class="muted">(in league.db)</span>') in text
            assert f'<code class="cmd">arena replay show {s.dir} {r.match_id}</code>' in text
    finally:
        s.close()


def test_report_with_learners(learner_store):
    text = write_report(learner_store).read_text(encoding="utf-8")
    for p in learner_store.players():
        assert html.escape(p.name) in text
    assert "snapshot" in text and "main_exploiter" in text


@pytest.mark.skipif(not CHROMIUM.exists(), reason="headless screenshot needs /usr/bin/chromium "
                    "(Debian: apt-get install -y chromium)")
def test_report_screenshot_in_headless_chromium(report, tmp_path):
    shot = tmp_path / "report.png"
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2000",
           report.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    assert shot.exists(), f"chromium wrote no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    assert shot.read_bytes()[:8] == PNG_MAGIC
    img = mpimg.imread(shot)[..., :3]
    assert img.shape[:2] == (2000, 1280)
    assert float(np.var(img)) > 0.01, "screenshot is blank"
    # The inline CSS applied: the page header is a dark band, the body below it light.
    assert img[5:40, 5:600].mean() < 0.3
    assert img[1900:1990].mean() > 0.5


def test_payoff_is_capped_to_the_top_players_and_says_so(league_dir):
    from arena.league.queries import payoff_data

    store = open_league(league_dir)
    full = payoff_data(store, OVERALL, top=None)
    assert full.capped_note is None and len(full.players) == full.total_players >= 3
    capped = payoff_data(store, OVERALL, top=2)
    assert capped.players == full.players[:2] and capped.total_players == full.total_players
    assert capped.win_rate.shape == (2, 2) and len(capped.alpharank) == 2
    assert capped.capped_note.startswith(f"showing the top 2 of {full.total_players} players by Elo")


def test_records_kept_with_each_commit_equal_a_count_of_the_results_and_backfill(league_dir, tmp_path):
    import shutil
    import sqlite3

    from arena.league.storage import LeagueStore, record_kinds

    def counted(store, game):
        out = {}
        for r in store.results(None if game == OVERALL else game):
            if len(r.players) >= 2 and len(set(r.players)) == len(r.players):
                for p, k in zip(r.players, record_kinds(r.returns)):
                    out.setdefault(p, [0, 0, 0])["wdl".index(k)] += 1
        return {p: tuple(v) for p, v in out.items()}

    store = open_league(league_dir)
    games = [OVERALL] + [g for g in store.rated_games() if g != OVERALL]
    assert all(store.records(g) == counted(store, g) for g in games)
    assert sum(sum(v) for v in store.records(OVERALL).values()) > 0
    # a league written before the records table existed: counted once when it is opened
    copy = tmp_path / "old"
    shutil.copytree(league_dir, copy)
    with sqlite3.connect(copy / "league.db") as c:
        c.execute("DROP TABLE records")
        c.execute("DELETE FROM meta WHERE key='records_complete'")
    old = LeagueStore(copy)
    assert all(old.records(g) == counted(old, g) for g in games)

"""Tables a person reads: never cut at 80 columns when written to a file or a pipe, and in a narrow
terminal shown in parts rather than with numbers, names or headers cut short."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.league.config import load_league_config
from arena.league.manager import League, open_league
from arena.league.storage import OVERALL

ROOT = Path(__file__).resolve().parents[2]
LONG = ["learner-with-a-long-name-000120", "historical-snapshot-of-main-000090"]


def _arena(*args, columns: str | None):
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


@pytest.fixture(scope="module")
def league(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("tables")
    cfg = d / "l.yaml"
    cfg.write_text(f"name: t\nseed: 0\ngames: [{{id: openspiel/tic_tac_toe-v0}}]\nplayers:\n"
                   f"  - {{name: {LONG[0]}, agent: random}}\n  - {{name: {LONG[1]}, agent: first}}\n"
                   "  - {name: mcts, agent: 'mcts:simulations=5'}\nmatches: 40\nworkers: 1\n")
    League(load_league_config(cfg), d / "lg", backend="inline").run()
    return d / "lg"


def test_a_table_written_to_a_pipe_is_whole(league):
    r = _arena("ratings", league, columns=None)
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout and "..." not in r.stdout
    for name in LONG:
        assert name in r.stdout
    header = next(line for line in r.stdout.splitlines() if "Player" in line)
    for col in ("Rating", "95% CI", "Rank CI", "Games", "W", "D", "L", "Forfeits", "Invalid/g", "Elo"):
        assert col in header, header
    assert max(len(line) for line in r.stdout.splitlines()) > 80  # not squeezed into rich's default 80
    live = _arena("ratings", league, "--method", "elo", columns=None)
    header = next(line for line in live.stdout.splitlines() if "Player" in line)
    for col in ("Elo", "mu", "sigma", "mu-3σ", "Games", "W", "D", "L", "Win rate"):
        assert col in header, header


def test_a_narrow_terminal_gets_the_table_in_parts_with_every_number_whole(league):
    store = open_league(league)
    elo = store.elo(OVERALL)
    store.close()
    r = _arena("ratings", league, "--method", "elo", columns="50")
    assert r.returncode == 0, r.stderr
    assert "…" not in r.stdout
    assert all(len(line) <= 50 for line in r.stdout.splitlines()), r.stdout
    for value in elo.values():
        assert f"{value:.1f}" in r.stdout
    text = r.stdout.replace("\n", "")
    for name in LONG:  # a long name wraps inside its column, in every part
        assert r.stdout.count(name[:8]) >= 2, r.stdout
    for col in ("sigma", "mu-3σ", "Games", "Win rate"):
        assert col in text
    # the fitted table too: in parts, every rating and interval whole
    from arena.league.leaderboard import leaderboard

    store = open_league(league)
    board = leaderboard(store, OVERALL)
    store.close()
    r = _arena("ratings", league, columns="50")
    assert r.returncode == 0 and all(len(line) <= 50 for line in r.stdout.splitlines()), r.stdout
    for row in board.rows:
        assert f"[{row.lo:.0f}, {row.hi:.0f}]" in r.stdout


def test_a_narrow_terminal_gets_the_compact_table_and_wide_gets_every_column_with_one_caption(league):
    """At 80 columns the fitted table shows the columns a person reads first (rank, player, rating with its
    interval, games) and says how to see the rest; --wide shows every column in parts; either way the
    table's own figures are under it once and what the fit is, once after the tables."""
    compact = _arena("ratings", league, columns="80")
    wide = _arena("ratings", league, "--wide", columns="80")
    pipe = _arena("ratings", league, columns=None)
    for r in (compact, wide):
        assert r.returncode == 0 and all(len(line) <= 80 for line in r.stdout.splitlines()), r.stdout
    header = next(line for line in compact.stdout.splitlines() if "Player" in line).split()
    assert header == ["#", "Player", "Rating", "95%", "CI", "Games"]
    assert "(--wide: 7 more columns" in compact.stdout
    text = " ".join(wide.stdout.split())
    for col in ("Rank CI", "Forfeits", "Invalid/g", "Elo"):
        assert col in text
    for r in (compact, wide, pipe):
        flat = " ".join(r.stdout.split())
        assert flat.count(" results; the mean pinned at 1000") == 1 and flat.count("Bradley-Terry with draws") == 1
    assert len(compact.stdout.splitlines()) < len(wide.stdout.splitlines())


def test_an_agent_spec_wraps_between_its_options(tmp_path):
    r = _arena("play", "openspiel/tic_tac_toe-v0", "-p", "mcts:simulations=5,rollouts=1,uct_c=2.0", "-p", "random",
               "-n", "2", columns="70")
    assert r.returncode == 0, r.stderr
    assert "mcts:simulations=5," in r.stdout and "rollouts=1," in r.stdout and "uct_c=2.0" in r.stdout
    r = _arena("play", "openspiel/tic_tac_toe-v0", "-p", "mcts:simulations=5,rollouts=1,uct_c=2.0", "-p", "random",
               "-n", "2", columns=None)
    assert "mcts:simulations=5, rollouts=1, uct_c=2.0" in r.stdout


def test_help_texts_are_whole_sentences_and_name_every_argument():
    r = _arena("--help", columns="100")
    commands = r.stdout.split("Commands", 1)[1]
    assert "games, mean\n" not in commands and "rllib_ppo). An" not in commands
    assert "Ratings fitted to every result, with 95% intervals, provisional players and payoffs." in commands
    r = _arena("play", "--help", columns="100")
    assert "[AGENT]..." in r.stdout and "more_players" not in r.stdout
    assert "More agent specs after the game or after one --players" in " ".join(r.stdout.split())


def test_hints_name_commands_not_functions(tmp_path):
    r = _arena("play", "openspiel/tic_tac_toe-v0", "-p", f"llm:{tmp_path / 'nope'}", "-p", "random", columns="300")
    assert r.returncode == 2 and "make_tiny_model_folder" not in r.stderr
    assert "arena train configs/train/spiral_tictactoe_tiny.yaml --dir runs/ttt" in r.stderr
    run = tmp_path / "pros"
    (run / "latest").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("{}\n")
    r = _arena("ratings", run, columns="300")
    assert r.returncode == 2 and "is a training run with no league of its own" in r.stderr
    assert f"policy:{run / 'best'}" in r.stderr and "arena league run CONFIG --dir DIR" in r.stderr


def test_a_long_table_is_measured_by_the_rows_that_set_its_width():
    """`fit_width` measures a long table by its widest rows (`_widest_rows`): the same narrowest width
    as every row measured, for words, markup and unbreakable numbers alike."""
    import random

    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    from arena.ui.views import _widest_rows

    rng = random.Random(4)
    words = ["a", "snapshot", "main-000120", "[bold]x[/]", "historical-snapshot-of-main-000090", "learner"]
    t = Table(title="t", caption="c")
    t.add_column("#", no_wrap=True)
    t.add_column("Player", overflow="fold", min_width=8)
    t.add_column("Rating", no_wrap=True, justify="right")
    t.add_column("Note")
    for k in range(300):
        t.add_row(str(k), " ".join(rng.choice(words) for _ in range(rng.randint(1, 3))),
                  f"{rng.uniform(-5000, 5000):.{rng.randint(0, 4)}f}",
                  Text(" ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))))
    m = Console(width=10**5)
    proxy = _widest_rows(t)
    assert proxy.row_count < 10
    assert Measurement.get(m, m.options, proxy) == Measurement.get(m, m.options, t)

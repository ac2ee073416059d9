import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from arena.cli import app

runner = CliRunner()
ARENA = str(Path(sys.executable).with_name("arena"))


def test_envs_list_shows_builtin_games():
    r = runner.invoke(app, ["envs", "list"], terminal_width=200)
    assert r.exit_code == 0, r.output
    for gid in ("arena/TicTacToe-v0", "arena/KuhnPoker-v1", "arena/SimpleNegotiation-v1",
                "openspiel/connect_four-v0", "openspiel/liars_dice-v0", "arena/Prosthetics-v0",
                "arena/ProstheticsRound2-v0"):
        assert gid in r.output
    assert "needs arena[opensim]" in r.output  # an extra's name printed as it is, not read as markup


def test_envs_list_without_opensim_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "opensim", None)
    r = runner.invoke(app, ["envs", "list"], terminal_width=250)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    start = next(i for i, line in enumerate(lines) if "arena/Prosthetics-v0" in line)
    row = [lines[start]] + list(itertools.takewhile(lambda line: line.startswith("│ ") and line[2] == " ",
                                                    lines[start + 1:]))  # the row's wrapped lines
    cells = " ".join(" ".join(line.split("│")[5].split()) for line in row)
    assert 'pip install "arena[opensim]"' in cells


def test_agents_list_shows_every_kind_and_a_plugins_own():
    r = runner.invoke(app, ["agents", "list"], terminal_width=200)
    assert r.exit_code == 0, r.output
    rows = {line.split("│")[1].strip(): line for line in r.output.splitlines() if line.startswith("│")}
    from arena.agents.specs import agent_kinds

    assert set(agent_kinds()) <= set(rows)
    assert "simulations" in rows["mcts"] and "explore" in rows["policy_mcts"] and "focus_fire" in rows["skirmish"]
    r = runner.invoke(app, ["agents", "list", "--plugin", "plugins.squad_games"], terminal_width=200)
    assert r.exit_code == 0 and any(line.startswith("│ focus ") for line in r.output.splitlines()), r.output


def test_small_mistakes_are_one_line_that_names_the_fix(tmp_path):
    """A mistyped module in module:Class, --workers 0 on a command whose config it overrides, an empty folder
    of replays."""
    from arena.errors import ArenaError

    env = dict(os.environ, COLUMNS="200")
    p = subprocess.run([ARENA, "play", "openspiel/tic_tac_toe-v0", "-p", "my_agentz:MyAgent", "-p", "random"],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.startswith("error: no module 'my_agentz'") and "--plugin" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    r = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "-p", "mcst:simulations=4", "-p", "random"])
    assert "unknown agent kind 'mcst'" in str(r.exception) and "did you mean 'mcts'" in str(r.exception)
    quickstart = str(Path(__file__).parents[2] / "configs" / "leagues" / "quickstart.yaml")
    for args in (["demo", "--workers", "0", "--dir", str(tmp_path / "d")],
                 ["league", "run", quickstart, "--dir", str(tmp_path / "q"), "--workers", "0"]):
        r = runner.invoke(app, args)
        assert isinstance(r.exception, ArenaError) and str(r.exception).startswith("--workers must be a whole number")
        assert not (tmp_path / "d").exists() and not (tmp_path / "q").exists()
    (tmp_path / "none").mkdir()
    r = runner.invoke(app, ["replay", "list", str(tmp_path / "none")], terminal_width=200)
    assert r.exit_code == 0 and r.output.startswith("no replays in ") and "--replays" in r.output


def test_envs_list_with_plugin():
    r = runner.invoke(app, ["envs", "list", "--plugin", "plugins.sample_games"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "plugin/Pendulum-v1" in r.output and "continuous" in r.output


def test_play_many_then_list_show_verify(tmp_path):
    rdir = tmp_path / "kuhn"
    r = runner.invoke(app, ["play", "openspiel/kuhn_poker-v0", "--players", "cfr random", "-n", "20",
                            "--replays", str(rdir), "--seed", "3"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "cfr" in r.output and "20 matches" in r.output
    files = sorted(rdir.glob("*.jsonl.gz"))
    assert len(files) == 20
    r = runner.invoke(app, ["replay", "list", str(rdir)], terminal_width=200)
    assert r.exit_code == 0 and "20 replays" in r.output
    r = runner.invoke(app, ["replay", "show", str(files[0]), "--all"], terminal_width=200)
    assert r.exit_code == 0 and "plays:" in r.output and "step 1/" in r.output
    r = runner.invoke(app, ["replay", "show", str(files[0])], input="n\np\nl\nq\n", terminal_width=200)
    assert r.exit_code == 0 and r.output.count("step ") >= 4
    r = runner.invoke(app, ["replay", "verify", str(rdir)], terminal_width=200)
    assert r.exit_code == 0 and r.output.splitlines() == [
        "20 replays: 20 verified, 0 mismatched, 0 unreadable, 0 refused, 0 not checked"]
    r = runner.invoke(app, ["replay", "verify", str(rdir), "--each"], terminal_width=200)
    assert r.exit_code == 0 and r.output.count("OK") == 20


def test_play_human_through_stdin(tmp_path):
    r = runner.invoke(app, ["play", "arena/TicTacToe-v0", "--players", "human", "--players", "first",
                            "--seed", "3", "--replays", str(tmp_path)],
                      input="4\n8\n6\n2\n1\n3\n5\n7\n0\n", terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "your move>" in r.output and "Current Board" in r.output
    assert len(list(tmp_path.glob("*.jsonl.gz"))) == 1


def test_human_eof_is_a_recorded_forfeit(tmp_path):
    r = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "--players", "human random",
                            "--replays", str(tmp_path)], input="", terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "forfeit" in r.output
    from arena.replays import list_replays, read_replay

    (p,) = list_replays(tmp_path)
    assert read_replay(p).result["outcome"] == "forfeit"


def test_errors_are_clear_and_exit_2():
    env = dict(os.environ, COLUMNS="200")
    p = subprocess.run([ARENA, "play", "arena/TicTacToe-v9", "--players", "random random"], capture_output=True,
                       text=True, env=env)
    assert p.returncode == 2 and "unknown game id" in p.stderr and "arena/TicTacToe-v0" in p.stderr
    assert "Traceback" not in p.stderr
    p = subprocess.run([ARENA, "play", "openspiel/tic_tac_toe-v0", "--players", "random wizard"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "unknown agent kind" in p.stderr


def test_train_prints_the_confirmed_best_checkpoint(tmp_path):
    pytest.importorskip("torch")
    cfg = yaml.safe_load((Path(__file__).parents[2] / "configs" / "train" / "spiral_tictactoe_tiny.yaml").read_text())
    cfg.update(iterations=2, games_per_iter=8, concurrency=8, il=None, threads=1)
    cfg["learner"]["minibatch"] = 64
    cfg["eval"] = {"every": 1, "games": 8, "opponents": ["random"], "concurrency": 8,
                   "confirm_top": 2, "confirm_games": 10}
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(cfg))
    r = runner.invoke(app, ["train", str(tmp_path / "t.yaml"), "--dir", str(tmp_path / "run")], terminal_width=200)
    assert r.exit_code == 0, r.output
    best = json.loads((tmp_path / "run" / "best.json").read_text())
    assert len(best["confirm"]["candidates"]) == 2
    line = next(x for x in r.output.splitlines() if x.startswith("best: iteration"))
    assert line.startswith(f"best: iteration {best['iteration']} (eval/win_rate/random {best['value']:.3f} in the run; "
                           f"{best['confirm']['win_rate']:.3f} on 10 fresh games)")


def test_version_and_every_option_has_help():
    import typer.main

    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith("arena ")
    missing, flags_with_type, seen = [], [], []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):  # a group (typer ships its own click, so no isinstance check)
            for name, sub in cmd.commands.items():
                walk(sub, path + [name])
            return
        seen.append(" ".join(path))
        for p in cmd.params:
            if not getattr(p, "hidden", False) and not getattr(p, "help", None):
                missing.append(f"{' '.join(path)} {p.name}")
        out = runner.invoke(app, path[1:] + ["--help"], terminal_width=200).output
        for p in cmd.params:
            if getattr(p, "is_flag", False) and any(re.search(rf"{re.escape(o)}\s+<bool>", out) for o in p.opts):
                flags_with_type.append(f"{' '.join(path)} {p.opts[0]}")

    walk(typer.main.get_command(app), ["arena"])
    assert {"arena play", "arena train", "arena ratings", "arena league run", "arena replay show"} <= set(seen), seen
    assert not missing, missing
    assert not flags_with_type, flags_with_type


def test_players_space_separated_after_one_flag_as_the_readme_says(tmp_path):
    r = runner.invoke(app, ["play", "arena/TicTacToe-v0", "--players", "human", "random", "--seed", "3"],
                      input="4\n0\n1\n2\n3\n5\n6\n7\n8\n", terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "human" in r.output and "random" in r.output and "game over" in r.output
    r2 = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "-p", "random", "-p", "first", "-n", "4"],
                       terminal_width=200)
    assert r2.exit_code == 0 and "4 matches" in r2.output, r2.output


def test_plugin_from_the_working_directory_and_by_file_path(tmp_path, monkeypatch):
    (tmp_path / "my_games_q.py").write_text(
        'import gymnasium\ngymnasium.register(id="mine/RPSq-v2", entry_point="pettingzoo.classic.rps_v2:parallel_env")\n')
    monkeypatch.chdir(tmp_path)
    env = dict(os.environ, COLUMNS="200", PYTHONPATH="")
    for arg in ("my_games_q", "./my_games_q.py", str(tmp_path / "my_games_q.py")):
        p = subprocess.run([ARENA, "envs", "list", "--plugin", arg], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert p.returncode == 0 and "mine/RPSq-v2" in p.stdout, (arg, p.stdout, p.stderr)
    p = subprocess.run([ARENA, "envs", "list", "--plugin", "./nope.py"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr


def test_a_human_who_quits_ends_the_run_with_one_forfeit_and_a_summary(tmp_path):
    r = runner.invoke(app, ["play", "openspiel/tic_tac_toe-v0", "-p", "human", "-p", "random", "-n", "3",
                            "--replays", str(tmp_path / "r")], input="4\nquit\n", terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "stopped after 1 of 3 matches" in r.output and "game over" in r.output, r.output
    assert len(list((tmp_path / "r").glob("*.jsonl*"))) == 1
    row = next(line for line in r.output.splitlines() if line.strip().startswith("│ human") or line.startswith("human"))
    assert " 1 " in row  # one game, lost by forfeit


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_during_many_matches_prints_the_summary_of_the_finished_ones(tmp_path, workers):
    import signal
    import time

    env = dict(os.environ, COLUMNS="200")
    # started with SIGINT ignored, as a background job of a script (or a test worker) is: Python keeps an
    # inherited SIG_IGN, and Ctrl-C must stop the command all the same
    p = subprocess.Popen([ARENA, "play", "openspiel/tic_tac_toe-v0", "-p", "mcts:simulations=100", "-p", "random",
                          "-n", "5000", "--workers", workers, "--replays", str(tmp_path / "r")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.time() + 120
    while len(list((tmp_path / "r").glob("*.jsonl*"))) < 60 and time.time() < deadline:
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGINT)  # as a terminal does: the whole foreground group
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    m = re.search(r"stopped after (\d+) of 5000 matches", out)
    assert m and 10 <= int(m.group(1)) < 5000, out
    k = int(m.group(1))
    assert f"{k} matches" in out and f"Replays in {tmp_path / 'r'}" in out, out
    assert len(list((tmp_path / "r").glob("*.jsonl*"))) >= k  # every counted match has its replay


def test_ratings_payoff_per_game_when_the_league_has_several(tmp_path):
    cfg = tmp_path / "l.yaml"
    cfg.write_text("name: two\ngames: [{id: openspiel/tic_tac_toe-v0}, {id: openspiel/kuhn_poker-v0}]\n"
                   "players: [{name: random, agent: random}, {name: first, agent: first}]\nmatches: 12\nworkers: 1\n")
    r = runner.invoke(app, ["league", "run", str(cfg), "--dir", str(tmp_path / "l")], terminal_width=200)
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["ratings", str(tmp_path / "l"), "--payoff"], terminal_width=200)
    assert r.exit_code == 0, r.output
    titles = [line for line in r.output.splitlines() if "ayoff" in line or "win rate" in line.lower()]
    assert any("all games" in t for t in titles) and any("tic_tac_toe" in t for t in titles) \
        and any("kuhn_poker" in t for t in titles), r.output


def test_a_league_of_one_payoff_game_opens_on_that_games_table(tmp_path):
    """A league of one poker game shows that game's table first (ordered by payoff against the Nash
    mixture, its vs-Nash column filled), in `arena ratings`, its end-of-run top table, the web page and
    the report: not the all-games table, whose vs-Nash column a payoff game's cannot fill."""
    cfg = tmp_path / "k.yaml"
    cfg.write_text("name: k\ngames: [{id: openspiel/kuhn_poker-v0}]\n"
                   "players: [{name: cfr, agent: 'cfr:iterations=200'}, {name: weak, agent: 'cfr:iterations=1'},"
                   " {name: random, agent: random}]\nmatches: 300\nworkers: 1\nseed: 1\n")
    r = runner.invoke(app, ["league", "run", str(cfg), "--dir", str(tmp_path / "k")], terminal_width=200)
    assert r.exit_code == 0, r.output
    top = r.output[r.output.index("Top 5"):]
    assert "kuhn_poker" in " ".join(top.splitlines()[:2]) and "vs Nash" in top, r.output
    r = runner.invoke(app, ["ratings", str(tmp_path / "k")], terminal_width=200)
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    title = next(line for line in lines if line.startswith("Ratings"))
    assert "openspiel/kuhn_poker-v0" in title and "all games" not in r.output, r.output
    header = next(line for line in lines if "vs Nash" in line)
    rows = [line.split() for line in lines[lines.index(header) + 1:] if line.split()[:1] and line.split()[0].isdigit()]
    assert [row[1] for row in rows][:1] == ["cfr"], r.output  # the equilibrium first, by payoff against Nash
    from arena.ui.web.data import LeagueData

    data = LeagueData(tmp_path / "k")
    try:
        assert data.games()["default"] == "openspiel/kuhn_poker-v0"  # the web page opens on it too
    finally:
        data.close()
    r = runner.invoke(app, ["league", "report", str(tmp_path / "k")], terminal_width=200)
    assert r.exit_code == 0, r.output
    html = (tmp_path / "k" / "report.html").read_text()
    first = html[html.index('<section id="overall">'):html.index("</section>")]
    assert "openspiel/kuhn_poker-v0 (the league&#x27;s only game)" in first and "All games" not in html


def test_an_agent_module_next_to_you_plays_by_its_spec(tmp_path):
    (tmp_path / "my_agents_q.py").write_text("class LastMove:\n    def act(self, observation):\n"
                                            "        return observation.legal_actions[-1]\n")
    env = dict(os.environ, COLUMNS="200", PYTHONPATH="")
    p = subprocess.run([ARENA, "play", "openspiel/tic_tac_toe-v0", "-p", "my_agents_q:LastMove", "-p", "random",
                        "-n", "20", "--workers", "2"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 0 and "my_agents_q:LastMove" in p.stdout, p.stdout + p.stderr

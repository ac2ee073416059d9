"""The pages as a newcomer meets them: the game menu, one-player leagues, poker in words, and the
HTML report's replay links. Each test states the value the page or the API should give."""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from arena.config import from_dict  # noqa: E402
from arena.league.config import LeagueConfig, load_league_config  # noqa: E402
from arena.league.manager import League, open_league  # noqa: E402
from arena.league.queries import recent_results, return_rows  # noqa: E402
from arena.league.storage import OVERALL  # noqa: E402
from arena.match import play_match  # noqa: E402
from arena.ui.report import SERVE_URL, write_report  # noqa: E402
from arena.ui.web import PlaySettings, start_in_background  # noqa: E402
from arena.ui.web.boards import board_of, move_label, openspiel_kuhn, openspiel_leduc  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KUHN, LEDUC, TTT, CARTPOLE = ("openspiel/kuhn_poker-v0", "openspiel/leduc_poker-v0", "openspiel/tic_tac_toe-v0",
                              "CartPole-v1")
SOLO_PLAYERS = [{"name": "random", "agent": "random"}, {"name": "first", "agent": "first"}]


def cfg(**data) -> LeagueConfig:
    return from_dict(LeagueConfig, json.loads(json.dumps(data)))


@pytest.fixture(scope="module")
def quick_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("quick")
    League(load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=45), d, backend="inline").run()
    return d


@pytest.fixture(scope="module")
def solo_dir(tmp_path_factory) -> Path:
    """A league of one one-player game (a cheap Gymnasium task), two players on 4 common seeds."""
    d = tmp_path_factory.mktemp("solo")
    League(cfg(name="solo", seed=5, games=[{"id": CARTPOLE}], players=SOLO_PLAYERS, matches=8, seeds=4,
               in_flight=2), d, backend="inline").run()
    return d


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory) -> Path:
    """A league with a two-player game and a one-player game."""
    d = tmp_path_factory.mktemp("mixed")
    League(cfg(name="mixed", seed=3, games=[{"id": TTT}, {"id": CARTPOLE}], players=SOLO_PLAYERS, matches=12,
               seeds=2, in_flight=2), d, backend="inline").run()
    return d


@pytest.fixture(scope="module")
def servers(quick_dir, solo_dir, mixed_dir):
    play = PlaySettings(idle_timeout=30.0, move_time_limit=60)
    srvs = {name: start_in_background(d, port=0, play=play)
            for name, d in (("quick", quick_dir), ("solo", solo_dir), ("mixed", mixed_dir))}
    yield srvs
    for s in srvs.values():
        s.stop()


def get(server, path: str):
    try:
        with urllib.request.urlopen(server.url + path, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post(server, path: str, payload: dict):
    req = urllib.request.Request(server.url + path, data=json.dumps(payload).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# -- 1. the game menu --------------------------------------------------------------------------------
def test_all_games_is_listed_once(servers, quick_dir):
    status, g = get(servers["quick"], "/api/games")
    assert status == 200
    assert g["rated"] == [OVERALL, "arena/KuhnPoker-v1", "arena/KuhnPoker-v2", "arena/SimpleNegotiation-v2",
                          "arena/TicTacToe-v0", KUHN, "openspiel/leduc_poker-v0", TTT]  # was ["*", "*", ...]
    assert g["solo"] == [] and g["default"] == OVERALL


def test_the_play_page_says_which_seat_moves_first_by_the_games_rules(servers):
    # seat 0 is not "first to move" in every game: TextArena's Kuhn poker opens with seat 1
    status, opts = get(servers["quick"], "/api/play/options")
    first = {g["game"]: g["first"] for g in opts["games"]}
    assert status == 200 and first["arena/KuhnPoker-v1"] == 1 and first[KUHN] == 0 and first[TTT] == 0


# -- 2. one-player leagues ---------------------------------------------------------------------------
def test_a_one_player_league_opens_on_its_returns_table(servers, solo_dir):
    status, g = get(servers["solo"], "/api/games")
    # no empty "all games" Elo scope: the page opens on the game's returns
    assert g == {"rated": [], "solo": [CARTPOLE], "default": CARTPOLE, "labels": {OVERALL: "all games"}}
    status, board = get(servers["solo"], f"/api/players?game={CARTPOLE}")
    assert status == 200 and board["kind"] == "returns"
    store = open_league(solo_dir)
    try:
        want = return_rows(store, CARTPOLE)
    finally:
        store.close()
    assert [r["player"] for r in board["rows"]] == [r.player for r in want]
    assert [(r["mean"], r["std"], r["episodes"], r["common_seeds"]) for r in board["rows"]] == \
        [(pytest.approx(r.mean), pytest.approx(r.std), 4, 4) for r in want]


def test_a_one_player_league_offers_nothing_to_play_and_says_why(servers):
    status, opts = get(servers["solo"], "/api/play/options")
    assert status == 200 and opts["games"] == [] and opts["solo"] == [CARTPOLE]
    status, err = post(servers["solo"], "/api/play", {"player": "first", "name": "me"})
    assert status == 400 and err["error"] == ("first plays only one-player games (CartPole-v1): there is nothing "
                                              "to play against it")
    status, err = post(servers["solo"], "/api/play", {"game": CARTPOLE, "player": "first", "name": "me"})
    assert status == 400 and err["error"].startswith("CartPole-v1 is a one-player game: there is no seat")
    status, league = get(servers["solo"], "/api/league")
    assert league["last_commit"] == 8  # nothing was played


def test_a_mixed_league_rates_its_two_player_game_and_plays_only_it(servers):
    status, g = get(servers["mixed"], "/api/games")
    # its one rated game is what the page opens on (the all-games scope stays listed)
    assert g["rated"] == [OVERALL, TTT] and g["solo"] == [CARTPOLE] and g["default"] == TTT
    status, opts = get(servers["mixed"], "/api/play/options")
    assert opts["games"] == [{"game": TTT, "players": ["random", "first"], "first": 0}] and opts["solo"] == [CARTPOLE]


# -- 4. poker in words ---------------------------------------------------------------------------------
def words(board: dict) -> list[tuple[int, str]]:
    return [(m["player"], m["text"]) for m in board["moves"]]


@pytest.mark.parametrize("view,moves,pot", [
    ("1", [], 2),
    ("1pb", [(0, "checked"), (1, "bet 1")], 3),
    ("2pbp", [(0, "checked"), (1, "bet 1"), (0, "folded")], 3),
    ("0pbb", [(0, "checked"), (1, "bet 1"), (0, "called")], 4),
    ("2bb", [(0, "bet 1"), (1, "called")], 4),
    ("1bp", [(0, "bet 1"), (1, "folded")], 3),
    ("0pp", [(0, "checked"), (1, "checked")], 2),
])
def test_kuhn_moves_in_words(view, moves, pot):
    b = openspiel_kuhn(view)
    assert words(b) == moves and b["pot"] == pot


def test_leduc_moves_in_words_and_the_pot_at_the_end():
    # p0 bets 2, p1 calls; board card; p0 checks, p1 bets 4, p0 calls: 1 + 2 + 4 each, 14 in the pot
    # (the engine shows Pot: 0 once it has paid out; returns -7 / +7)
    b = openspiel_leduc("[Observer: 0][Private: 0][Round 2][Player: 0][Pot: 0][Money: 93 107][Public: 5]"
                        "[Round1: 2 1][Round2: 1 2 1]")
    assert words(b) == [(0, "bet 2"), (1, "called"), (0, "checked"), (1, "bet 4"), (0, "called")]
    assert [m["round"] for m in b["moves"]] == [1, 1, 2, 2, 2]
    assert b["pot"] == 14 and b["hand"] == ["J"] and b["public"] == ["K"]
    b = openspiel_leduc("[Observer: 1][Private: 3][Round 1][Player: 0][Pot: 0][Money: 97 103][Public: ]"
                        "[Round1: 2 2 0][Round2: ]")
    assert words(b) == [(0, "bet 2"), (1, "raised 2"), (0, "folded")] and b["pot"] == 2 + 2 + 4


@pytest.mark.parametrize("seed", range(6))
def test_leduc_pot_is_the_engines_until_it_pays_out(seed):
    res = play_match(LEDUC, ["random", "random"], seed=seed, record="text")
    seen = 0
    for s in res.replay.steps:
        b = board_of(LEDUC, s["obs"])
        engine = int(re.search(r"\[Pot: (\d+)\]", s["obs"]).group(1))
        assert b["pot"] == engine and len(b["moves"]) == s["t"]
        seen += 1
    assert seen == res.moves


@pytest.mark.parametrize("game,view,labels", [
    (KUHN, "1", {0: "check", 1: "bet 1"}),
    (KUHN, "1pb", {0: "fold", 1: "call"}),
    (LEDUC, "[Observer: 0][Private: 0][Round 1][Player: 0][Pot: 2][Money: 99 99][Public: ][Round1: ][Round2: ]",
     {1: "check", 2: "bet 2"}),
    (LEDUC, "[Observer: 1][Private: 2][Round 1][Player: 1][Pot: 4][Money: 97 99][Public: ][Round1: 2][Round2: ]",
     {0: "fold", 1: "call", 2: "raise 2"}),
    (LEDUC, "[Observer: 0][Private: 2][Round 2][Player: 0][Pot: 6][Money: 97 97][Public: 4][Round1: 2 1][Round2: ]",
     {1: "check", 2: "bet 4"}),
    (TTT, "x..\n...\n...", {4: "o(1,1)"}),
])
def test_poker_buttons_say_what_the_move_is_now(game, view, labels):
    board = board_of(game, view)
    assert {a: move_label(game, board, a, "o(1,1)" if game == TTT else "Pass") for a in labels} == labels


def test_kuhn_replay_names_each_move_and_ends_with_both_cards(servers, quick_dir):
    store = open_league(quick_dir)
    try:
        ids = [r.match_id for r in store.results() if r.game == KUHN]
    finally:
        store.close()
    bet = None
    for match_id in ids:  # a hand with a bet in it, answered: [bet, fold|call] or [check, bet, fold|call]
        status, rep = get(servers["quick"], f"/api/replays/{match_id}")
        texts = [m["text"] for m in rep["frames"][-1]["boards"][0]["moves"]]
        if "bet 1" in texts:
            bet = rep
            break
    assert bet is not None, f"no Kuhn hand with a bet among {len(ids)}"
    rep = bet
    last = rep["frames"][-1]["boards"]
    n = len(last[0]["moves"])
    assert n in (2, 3) and [len(b["moves"]) for b in last] == [n, n] and last[0]["moves"] == last[1]["moves"]
    assert [m["player"] for m in last[0]["moves"]] == [0, 1, 0][:n]
    assert last[0]["moves"][n - 2]["text"] == "bet 1" and last[0]["moves"][n - 1]["text"] in ("folded", "called")
    # every player's card at the end, and the pot the returns split
    assert {b["hand"][0] for b in last} <= set("JQK") and last[0]["hand"] != last[1]["hand"]
    pot = last[0]["pot"]
    assert pot == (3 if last[0]["moves"][n - 1]["text"] == "folded" else 4)
    assert max(rep["result"]["returns"]) == pot - 2  # the winner's gain: the pot less the 2 it put in


def wait_status(server, sid: str, statuses: tuple[str, ...], timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, s = get(server, f"/api/play/{sid}")
        if s["status"] in statuses or time.monotonic() > deadline:
            return s
        time.sleep(0.05)


def test_a_kuhn_hand_played_on_the_page_shows_the_words_then_the_other_card(servers):
    srv = servers["quick"]
    status, s = post(srv, "/api/play", {"game": KUHN, "player": "first", "seat": 0, "name": "newcomer", "seed": 11})
    assert status == 200
    s = wait_status(srv, s["session"], ("your_turn",))
    t = s["turn"]
    assert [m["label"] for m in t["legal"]] == ["check", "bet 1"]  # the engine's "Pass" / "Bet"
    assert t["board"]["moves"] == [] and t["board"]["pot"] == 2
    mine = t["board"]["hand"][0]
    status, s = post(srv, f"/api/play/{s['session']}/move", {"move": 1})  # bet 1
    s = wait_status(srv, s["session"], ("over",))
    # "first" plays the first legal move: after a bet that is a fold
    assert s["result"]["returns"] == [1.0, -1.0]
    assert words(s["final_board"]) == [(0, "bet 1"), (1, "folded")] and s["final_board"]["pot"] == 3
    boards = s["final_boards"]
    assert len(boards) == 2 and boards[0]["hand"] == [mine]
    status, rep = get(srv, f"/api/replays/{s['match_id']}")
    assert boards[1]["hand"] == rep["frames"][-1]["boards"][1]["hand"] and boards[1]["hand"][0] != mine


# -- 5. the report links every replay --------------------------------------------------------------
def test_the_report_links_every_replay_and_prints_its_command(quick_dir):
    store = open_league(quick_dir)
    try:
        text = write_report(store).read_text(encoding="utf-8")
        rows = recent_results(store, 20)
        assert store.get_meta("config")["replays"] == "database"
        pages = re.findall(r'href="(http[^"]*)"', text)
        assert pages == [f"{SERVE_URL}/replay/{r.match_id}" for r in reversed(rows)]
        for r in rows:
            assert f'<code class="cmd">arena replay show {store.dir} {r.match_id}</code>' in text
        assert f"<code>arena serve {store.dir}</code>, which listens on {SERVE_URL}" in text
    finally:
        store.close()


def test_the_report_links_replay_files_and_their_pages(tmp_path):
    c = load_league_config(ROOT / "configs/leagues/quickstart.yaml", matches=4, replays="files")
    League(c, tmp_path / "L", backend="inline").run()
    store = open_league(tmp_path / "L")
    try:
        text = write_report(store).read_text(encoding="utf-8")
        for r in recent_results(store, 4):
            assert (f'<a href="{SERVE_URL}/replay/{r.match_id}" title="open it in the replay viewer of arena serve '
                    f'(start arena serve first)">view</a> &middot; <a href="replays/{r.match_id}.jsonl.gz">'
                    f'{r.match_id}.jsonl.gz</a><br><code class="cmd">arena replay show {store.dir} {r.match_id}'
                    "</code>") in text
    finally:
        store.close()

"""Simple Negotiation v2: the view (current inventory, open offer, messages, turns left) and its rules."""

import re

import pytest

from arena.envs import make_core
from arena.match import play_match


class Script:
    """Plays the given moves in order (then the message "pass"), keeping every view and feedback it was shown."""

    spec = "script"

    def __init__(self, moves):
        self.moves = list(moves)
        self.seen: list[tuple[str, str | None]] = []

    def act(self, obs):
        self.seen.append((obs.text, obs.feedback))
        return self.moves.pop(0) if self.moves else "pass"


def quantities(view: str) -> dict[str, int]:
    return {r: int(q) for r, q in re.findall(r"^  (\w+) +(\d+) x", view, re.MULTILINE)}


def turns_left(view: str) -> int:
    return int(re.search(r"(\d+) turns? left", view).group(1))


def test_scripted_match_shows_inventory_offer_messages_and_turns():
    p0 = Script(["Want some wheat? [Offer: 1 Wheat -> 1 Ore]", "[Accept]", "[Offer: 2 Wood -> 1 Brick] last one"])
    p1 = Script(["[Accept] deal", "no thanks"])
    res = play_match("arena/SimpleNegotiation-v2", [p0, p1], seed=4, match_id="n")
    assert res.outcome == "normal" and res.moves == 10  # exactly max_turns turns

    # the other player's message text and the open offer reach player 1
    first_view_p1 = p1.seen[0][0]
    assert 'Player 0 wrote: "Want some wheat?"' in first_view_p1
    assert "Offer for you from Player 0: you get 1 Wheat, you give 1 Ore" in first_view_p1

    # after the accepted trade player 0 sees its current inventory, not the starting one
    before, after = quantities(p0.seen[0][0]), quantities(p0.seen[1][0])
    assert after["Wheat"] == before["Wheat"] - 1 and after["Ore"] == before["Ore"] + 1
    assert "accepted the offer of 1 Wheat for 1 Ore" in p0.seen[1][0]
    assert 'Player 1 wrote: "deal"' in p0.seen[1][0]

    # [Accept] with no offer open for player 0 is an invalid move with the reason, then re-asked
    refused = [s for s in res.replay.steps if s["event"] == "invalid"]
    assert len(refused) == 1 and refused[0]["player"] == 0 and refused[0]["action"] == "[Accept]"
    assert refused[0]["reason"].startswith("there is no offer for you to accept")
    assert p0.seen[2][1] == refused[0]["reason"]  # the feedback of the retry
    assert res.invalid == [1, 0]

    # the turn counter counts down, one a turn
    assert [turns_left(v) for v, _ in p0.seen] == [10, 8, 8, 6, 4, 2]
    assert [turns_left(v) for v, _ in p1.seen] == [9, 7, 5, 3, 1]
    assert "Turn 10 of 10" in p1.seen[-1][0] and "This is the last turn" in p1.seen[-1][0]
    # "no thanks" is a message and denies the offer
    assert 'Player 1 wrote: "no thanks"' in p0.seen[3][0]
    assert "denied the offer of 2 Wood for 1 Brick" in p0.seen[3][0] and "No offer is open." in p0.seen[3][0]


def test_accept_or_deny_without_open_offer_and_expired_offers_are_refused():
    core = make_core("arena/SimpleNegotiation-v2")
    core.reset(1)
    assert core.apply(0, "[Deny]").startswith("there is no offer for you to deny")
    assert core.apply(0, "accept").startswith("there is no offer for you to accept")  # TextArena reads "[accept]"
    assert core.current_player() == 0 and core.base.state.turn == 0  # nothing happened
    assert core.apply(0, "[Offer: 1 Wheat -> 1 Ore]") is None
    assert core.apply(1, "[Deny]") is None
    # a denied offer is closed: neither its maker nor the other side can take it later
    assert core.apply(0, "[Accept]").startswith("there is no offer for you to accept")
    assert core.apply(0, "hello") is None
    assert core.apply(1, "[Accept]").startswith("there is no offer for you to accept")
    assert "No offer is open." in core.text(1)


def test_bad_offers_are_refused_before_textarena_plays_them():
    core = make_core("arena/SimpleNegotiation-v2")
    core.reset(2)
    have = core.base.state.game_state["player_resources"][0]["Ore"]
    assert "you offer" in core.apply(0, f"[Offer: {have + 1} Ore -> 1 Wheat]")
    assert "could not read the offer" in core.apply(0, "[Offer: 1 Gold -> 1 Wheat]")
    assert core.apply(0, "[Offer: 1 Wheat -> 100 Ore]") is None
    assert core.apply(1, "[Accept]").startswith("you cannot accept: the offer asks for 100 Ore")
    assert core.base.state.turn == 1


def test_v1_keeps_textarenas_rules_and_view():
    """v1 is SPIRAL's setting as TextArena plays it: the open offer survives its denial."""
    core = make_core("arena/SimpleNegotiation-v1")
    core.reset(1)
    for p, move in [(0, "[Offer: 1 Wheat -> 1 Ore]"), (1, "[Deny]"), (0, "[Accept]")]:
        assert core.apply(p, move) is None
    assert "Player 0 accepted the trade offer from Player 0." in core.text(1)
    assert "Turn" not in core.text(1)


@pytest.mark.parametrize("seed", range(6))
def test_random_play_follows_v2_rules(seed):
    res = play_match("arena/SimpleNegotiation-v2", ["random", "random"], seed=seed, match_id="r")
    assert res.outcome == "normal" and res.invalid == [0, 0] and res.moves == 10

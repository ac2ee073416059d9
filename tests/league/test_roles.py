from collections import Counter

import numpy as np
import pytest

from arena.league.config import RolesConfig
from arena.league.roles import (
    Member,
    branch_source,
    choose_opponent,
    ready_to_snapshot,
    remove_monotonic_suffix,
    reset_after_snapshot,
    verification_opponent,
)

CFG = RolesConfig()
MAIN = Member("main", "learner", "main")
MX = Member("mx", "learner", "main_exploiter")
LX = Member("lx", "learner", "league_exploiter")
RANDOM = Member("random", "fixed")
MAIN_1 = Member("main@1", "historical", "main", parent="main")
MX_1 = Member("mx@1", "historical", "main_exploiter", parent="mx")


def wr_table(table, default=0.5):
    return lambda a, b: table.get((a, b), default)


MAIN_2 = Member("main@2", "historical", "main", parent="main")


def test_main_agent_mode_shares_match_alphastar():
    members = [MAIN, MX, LX, RANDOM, MAIN_1, MAIN_2]
    rng = np.random.default_rng(0)
    # own past: 0.5 against main@1, then 0.9 against main@2 (a rise: not a monotonic suffix) -> forgetting
    wr = wr_table({("main", "main@2"): 0.9})
    modes = Counter(choose_opponent(MAIN, members, wr, CFG, rng)[1] for _ in range(20_000))
    n = sum(modes.values())
    assert abs(modes["selfplay"] / n - 0.35) < 0.015
    assert abs(modes["pfsp_squared"] / n - 0.50) < 0.015
    assert abs(modes["verification"] / n - 0.15) < 0.015


def test_verification_that_finds_no_one_falls_through_to_selfplay():
    # the pseudocode's order: when verification returns nothing, the match is self-play (not PFSP)
    members = [MAIN, RANDOM, MAIN_1, MAIN_2]
    cfg = RolesConfig(main_selfplay=0.0, main_pfsp=0.0, main_verification=1.0)
    rng = np.random.default_rng(0)
    # 0.5 then 0.3: the win rate only falls, a monotonic suffix: removed, nobody to verify against
    wr = wr_table({("main", "main@1"): 0.5, ("main", "main@2"): 0.3})
    assert {choose_opponent(MAIN, members, wr, cfg, rng) for _ in range(50)} == {("main", "selfplay")}
    # a rise (0.3 then 0.5): both snapshots stay, the worst (0.3) is under 0.7 -> verification
    wr = wr_table({("main", "main@1"): 0.3, ("main", "main@2"): 0.5})
    picks = Counter(choose_opponent(MAIN, members, wr, cfg, rng) for _ in range(400))
    assert set(picks) == {("main@1", "verification"), ("main@2", "verification")}
    assert picks[("main@1", "verification")] > picks[("main@2", "verification")]  # PFSP-squared: the harder one


def test_remove_monotonic_suffix_by_hand():
    p = [Member(f"m@{i}", "historical", parent="m") for i in range(4)]
    assert remove_monotonic_suffix([0.9, 0.8, 0.6], p[:3]) == ([], [])  # only falls: progress
    assert remove_monotonic_suffix([0.5, 0.9, 0.8], p[:3]) == ([0.5, 0.9], p[:2])  # ends at the last rise
    assert remove_monotonic_suffix([0.2, 0.4, 0.3, 0.6], p) == ([0.2, 0.4, 0.3, 0.6], p)
    assert remove_monotonic_suffix([0.7, 0.7], p[:2]) == ([], [])  # equal is not a rise
    assert remove_monotonic_suffix([0.4], p[:1]) == ([], []) and remove_monotonic_suffix([], []) == ([], [])


def test_forgetting_check_uses_the_drawn_opponents_history():
    other = Member("main2", "learner", "main")
    o1, o2 = Member("main2@1", "historical", "main", parent="main2"), Member("main2@2", "historical", "main",
                                                                              parent="main2")
    members = [MAIN, other, MAIN_1, o1, o2]
    cfg = RolesConfig(main_selfplay=0.0, main_pfsp=0.0, main_verification=1.0)
    # main forgets how to beat main2@1 (0.2, then 0.6 against main2@2); its own past it beats (0.9)
    wr = wr_table({("main", "main2@1"): 0.2, ("main", "main2@2"): 0.6, ("main", "main2"): 0.5}, default=0.9)
    rng = np.random.default_rng(3)
    picks = Counter(choose_opponent(MAIN, members, wr, cfg, rng) for _ in range(400))
    # drawn main2 (half the time): its history is verified; drawn itself: its own past is fine -> self-play
    assert set(picks) == {("main2@1", "verification"), ("main2@2", "verification"), ("main", "selfplay")}
    assert 150 < picks[("main", "selfplay")] < 250


def test_selfplay_win_rate_of_exactly_0_3_takes_the_history_branch():
    other = Member("main2", "learner", "main")
    past = Member("main2@1", "historical", "main", parent="main2")
    members = [other, past]  # `me` is not among the mains drawn from: main2 is always the opponent
    cfg = RolesConfig(main_selfplay=1.0, main_pfsp=0.0, main_verification=0.0)
    rng = np.random.default_rng(0)
    assert choose_opponent(MAIN, members, wr_table({("main", "main2"): 0.3}), cfg, rng) == \
        ("main2@1", "selfplay_fallback_pfsp_variance")
    assert choose_opponent(MAIN, members, wr_table({("main", "main2"): 0.31}), cfg, rng) == ("main2", "selfplay")


def test_main_selfplay_falls_back_to_opponents_history_when_losing():
    other = Member("main2", "learner", "main")
    past = Member("main2@1", "historical", "main", parent="main2")
    members = [MAIN, other, past, RANDOM]
    wr = wr_table({("main", "main2"): 0.1})
    cfg = RolesConfig(main_selfplay=1.0, main_pfsp=0.0, main_verification=0.0)
    rng = np.random.default_rng(1)
    picks = Counter(choose_opponent(MAIN, members, wr, cfg, rng) for _ in range(400))
    assert picks[("main2@1", "selfplay_fallback_pfsp_variance")] > 0
    assert ("main2", "selfplay") not in picks  # never the opponent it loses to
    assert picks[("main", "selfplay")] > 0     # self-play against itself still happens


def test_verification_prefers_past_exploiters_it_loses_to():
    members = [MAIN, MX, MX_1, MAIN_1, RANDOM]
    rng = np.random.default_rng(0)
    assert verification_opponent(MAIN, members, wr_table({("main", "mx@1"): 0.2}), CFG, rng) == "mx@1"
    # beats the exploiters (>= 0.3): own past while < 0.7 (after a rise: main@1 at 0.6, main@2 at 0.8)
    members.append(MAIN_2)
    assert verification_opponent(MAIN, members, wr_table({("main", "mx@1"): 0.5, ("main", "main@1"): 0.6,
                                                          ("main", "main@2"): 0.8}), CFG, rng) in ("main@1", "main@2")
    # beats everything: no verification opponent
    assert verification_opponent(MAIN, members, wr_table({}, default=0.9), CFG, rng) is None


def test_main_exploiter_targets_mains_while_it_wins_over_10_percent():
    members = [MAIN, MX, MAIN_1, RANDOM]
    rng = np.random.default_rng(0)
    assert choose_opponent(MX, members, wr_table({("mx", "main"): 0.2}), CFG, rng) == ("main", "exploit_main")
    opp, why = choose_opponent(MX, members, wr_table({("mx", "main"): 0.05}), CFG, rng)
    assert (opp, why) == ("main@1", "pfsp_variance_main_history")


def test_league_exploiter_pfsp_linear_capped_over_historicals():
    members = [MAIN, LX, RANDOM, MAIN_1]
    rng = np.random.default_rng(0)
    # linear capped: min(0.5, 1 - x): random (x=0.9) weight 0.1, main@1 (x=0.2) weight 0.5
    wr = wr_table({("lx", "random"): 0.9, ("lx", "main@1"): 0.2})
    picks = Counter(choose_opponent(LX, members, wr, CFG, rng)[0] for _ in range(12_000))
    assert set(picks) == {"random", "main@1"}
    assert abs(picks["main@1"] / 12_000 - 0.5 / 0.6) < 0.02


def test_snapshot_rules():
    members = [MAIN, RANDOM, MAIN_1]
    cfg = RolesConfig(snapshot_steps=100, snapshot_min_steps=10, snapshot_win_rate=0.7)
    beats_all = wr_table({}, default=0.8)
    assert ready_to_snapshot(MAIN, 100, members, wr_table({}), cfg)          # step budget
    assert not ready_to_snapshot(MAIN, 5, members, beats_all, cfg)            # too early
    assert ready_to_snapshot(MAIN, 20, members, beats_all, cfg)               # beats every historical > 0.7
    assert not ready_to_snapshot(MAIN, 20, members, wr_table({("main", "random"): 0.6}, 0.8), cfg)


def test_reset_rules_and_scc_branching():
    rng = np.random.default_rng(0)
    assert reset_after_snapshot(MX, CFG, rng) is True
    assert reset_after_snapshot(MAIN, CFG, rng) is False
    resets = sum(reset_after_snapshot(LX, CFG, rng) for _ in range(10_000))
    assert abs(resets / 10_000 - 0.25) < 0.015
    assert branch_source(MX, [MAIN, MX, LX]) == "main"
    assert branch_source(MAIN, [MAIN]) is None


def test_unknown_role_is_an_error():
    with pytest.raises(ValueError, match="unknown role"):
        choose_opponent(Member("x", "learner", "coach"), [RANDOM], wr_table({}), CFG, np.random.default_rng(0))


def test_after_update_is_the_one_role_lifecycle():
    """Snapshot when due or ready; then a main exploiter always resets (branching from the main), a
    league exploiter with its probability, a main never; the generator is drawn only on a snapshot."""
    from arena.league.roles import RoleStep, after_update

    members = [MAIN, MX, LX, RANDOM, MAIN_1]
    never = RolesConfig(snapshot_steps=10_000, snapshot_min_steps=10_000)
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    assert after_update(LX, 0, members, wr_table({}), never, rng) == RoleStep()
    assert rng.bit_generator.state == before  # nothing drawn without a snapshot
    assert after_update(MAIN, 0, members, wr_table({}), never, rng, due=True) == RoleStep(snapshot=True)
    assert after_update(MX, 0, members, wr_table({}), never, rng, due=True) == RoleStep(True, True, "main")
    assert after_update(MX, 10_000, members, wr_table({}), never, rng) == RoleStep(True, True, "main")
    always = RolesConfig(snapshot_steps=10_000, snapshot_min_steps=10_000, league_exploiter_reset_p=1.0)
    assert after_update(LX, 0, members, wr_table({}), always, rng, due=True) == RoleStep(True, True, "main")

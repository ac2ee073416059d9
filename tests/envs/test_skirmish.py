"""Skirmish (`arena.envs.skirmish`): PettingZoo's checkers, the rules worked by hand, one batch stepping
exactly as many single games, seeded reproducibility, replays that verify, and the scripted bots'
ladder."""

import math

import numpy as np
import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from arena.agents.specs import make_agent
from arena.envs import make, make_core
from arena.envs.registry import SKIRMISH_GAMES
from arena.envs.skirmish import (
    ATTACK,
    ATTACK_MOVE,
    DT,
    MOVE,
    NO_OP,
    STOP,
    SUBSTEPS,
    UNITS,
    SkirmishBatch,
    SkirmishConfig,
    SkirmishCore,
)
from arena.errors import AgentSpecError, ConfigError, IncompatibleAgent, NotASetting
from arena.match.loop import play_match
from arena.match.verify import verify_replay
from arena.replays import read_replay, write_replay

MARINE, ZEALOT = UNITS[0], UNITS[3]
NEVER = 1e9  # a cooldown that never runs out: the unit never fires


@pytest.mark.parametrize("game", sorted(SKIRMISH_GAMES))
def test_every_scenario_passes_pettingzoos_parallel_checkers(game):
    parallel_api_test(make(game), num_cycles=20)
    parallel_seed_test(lambda: make(game), num_cycles=20)


def duel(red: str, blue: str, red_xy, blue_xy) -> SkirmishCore:
    """A 1 against 1 skirmish with the units placed by hand (a wide map: nothing else near)."""
    core = SkirmishCore("arena/Skirmish-test", red, blue, width=64, height=32, max_steps=200)
    b = core.batch
    b.pos[0, 0, 0], b.pos[0, 1, 0] = red_xy, blue_xy
    core._obs = None
    return core


NOOP = {"type": NO_OP}


def steps_until(core, done, limit=200) -> int:
    for k in range(1, limit + 1):
        core.apply_joint({0: NOOP, 1: NOOP})
        if done(core.batch):
            return k
    raise AssertionError("never happened")


def test_a_marine_kills_a_marine_in_the_shots_its_damage_and_cooldown_say():
    core = duel("1m", "1m", (20.0, 16.0), (24.0, 16.0))  # 4 apart: within reach (5 + 2 x 0.375)
    b = core.batch
    b.cooldown[0, 1, 0] = NEVER
    shots = math.ceil(MARINE.health / MARINE.damage)  # 8
    period = math.ceil(MARINE.cooldown / DT)  # 0.61 s rounds up to 5 sub-steps of 0.125 s
    core.apply_joint({0: NOOP, 1: NOOP})  # the first shot at once, the next 5 sub-steps later
    assert b.health[0, 1, 0] == MARINE.health - MARINE.damage
    assert core.shaped_rewards() == [MARINE.damage / MARINE.health, -MARINE.damage / MARINE.health]
    assert core.step_rewards() == [0.0, 0.0] and core.returns() == [0.0, 0.0]
    core.apply_joint({0: NOOP, 1: NOOP})
    assert b.health[0, 1, 0] == MARINE.health - 2 * MARINE.damage
    last_shot = (shots - 1) * period  # the sub-step of the killing shot
    k = 2 + steps_until(core, lambda b: not b.alive[0, 1, 0])
    assert k == last_shot // SUBSTEPS + 1 == 9
    assert core.is_terminal() and core.returns() == [1.0, -1.0] and core.step_rewards() == [1.0, -1.0]


def test_range_is_weapon_range_plus_both_radii():
    reach = MARINE.range + 2 * MARINE.radius
    out = duel("1m", "1m", (20.0, 16.0), (20.0 + reach + 0.01, 16.0))
    inside = duel("1m", "1m", (20.0, 16.0), (20.0 + reach - 0.01, 16.0))
    for core in (out, inside):
        core.batch.cooldown[0, 1, 0] = NEVER
        core.apply_joint({0: NOOP, 1: NOOP})  # stop: hold and fire at whatever is within reach
    assert out.batch.health[0, 1, 0] == MARINE.health and out.batch.pos[0, 0, 0, 0] == 20.0
    assert inside.batch.health[0, 1, 0] == MARINE.health - MARINE.damage


def test_shields_absorb_damage_before_health_and_armour_reduces_what_passes():
    core = duel("1m", "1z", (20.0, 16.0), (24.0, 16.0))
    b = core.batch
    b.cooldown[0, 1, 0] = NEVER
    core.apply_joint({0: NOOP, 1: NOOP})
    assert (b.shield[0, 1, 0], b.health[0, 1, 0]) == (ZEALOT.shield - 6, ZEALOT.health)
    steps_until(core, lambda b: b.shield[0, 1, 0] < 6)  # 8 shots: 48 of the 50 shields gone
    assert b.shield[0, 1, 0] == 2 and b.health[0, 1, 0] == ZEALOT.health
    steps_until(core, lambda b: b.shield[0, 1, 0] == 0)
    # the breaking shot: 2 on shields, the 4 that pass reach health as 4/6 of (6 - 1 armour)
    assert b.health[0, 1, 0] == pytest.approx(ZEALOT.health - 5 * 4 / 6)
    steps_until(core, lambda b: b.health[0, 1, 0] < 95)
    assert b.health[0, 1, 0] == pytest.approx(ZEALOT.health - 5 * 4 / 6 - 5)  # then 6 - 1 a shot


def test_a_zealot_must_walk_into_melee_range_before_it_hits():
    core = duel("1z", "1m", (20.0, 16.0), (24.0, 16.0))
    b = core.batch
    b.cooldown[0, 1, 0] = NEVER
    core.apply_joint({0: NOOP, 1: NOOP})
    assert b.health[0, 1, 0] == MARINE.health and b.pos[0, 0, 0, 0] == 20.0  # stop: it holds, out of reach
    core.apply_joint({0: {"type": ATTACK, "units": [0], "target": 1}, 1: NOOP})
    assert b.pos[0, 0, 0, 0] == pytest.approx(20.0 + ZEALOT.speed * 0.5) and b.health[0, 1, 0] == MARINE.health
    reach = ZEALOT.range + ZEALOT.radius + MARINE.radius
    k = 1 + steps_until(core, lambda b: b.health[0, 1, 0] < MARINE.health)
    walk = math.ceil((4.0 - reach) / (ZEALOT.speed * DT))  # sub-steps of walking, then it strikes
    assert k == walk // SUBSTEPS + 1
    assert b.health[0, 1, 0] == MARINE.health - 2 * ZEALOT.damage  # two blows of 8, no armour


def test_masks_dead_units_and_unseen_enemies():
    core = SkirmishCore("arena/Skirmish-test", "2m", "2m", width=64, height=32)
    b = core.batch
    b.pos[0, 0] = [(5.0, 10.0), (5.0, 20.0)]
    b.pos[0, 1] = [(40.0, 10.0), (12.0, 20.0)]  # enemy 0 far out of sight, enemy 1 within 9 of our unit 1
    b.alive[0, 0, 0] = False
    b.health[0, 0, 0] = 0.0
    core._obs = None
    o = core.observation(0)
    assert o["entity_mask"].tolist() == [0, 1, 0, 1]
    assert o["unit_mask"][ATTACK].tolist() == [0, 1, 0, 0] and o["target_mask"][ATTACK].tolist() == [0, 0, 0, 1]
    assert not o["entities"][0].any() and not o["entities"][2].any()
    assert core.validate(0, {"type": ATTACK, "units": [0], "target": 3})[1] == "units: slot 0 may not be chosen here"
    assert core.validate(0, {"type": ATTACK, "units": [1], "target": 2})[1] == "target: 2 is not legal here"
    assert core.validate(0, {"type": STOP, "units": [1]}) == ({"type": STOP, "units": [1]}, None)
    b.pos[0, 1, 1] = (40.0, 20.0)  # now nothing is in sight: attack is not a legal type at all
    core._obs = None
    assert core.observation(0)["type_mask"].tolist() == [1, 1, 0, 1, 1]
    assert "attack is not legal" in core.validate(0, {"type": ATTACK, "units": [1], "target": 3})[1]
    # blue sees the map mirrored: its units start on the left too
    assert core.observation(1)["entities"][1, 8] == pytest.approx(1 - 40.0 / 64)


def test_orders_persist_until_they_end():
    core = duel("1m", "1m", (4.0, 16.0), (60.0, 16.0))
    b = core.batch
    core.apply_joint({0: {"type": MOVE, "units": [0], "location": [4, 3]}, 1: NOOP})  # cell centre (28, 18)
    x0 = b.pos[0, 0, 0, 0]
    for _ in range(3):
        core.apply_joint({0: NOOP, 1: NOOP})
    assert b.order[0, 0, 0] == MOVE and b.pos[0, 0, 0, 0] == pytest.approx(x0 + 3 * MARINE.speed * 0.5, abs=0.3)
    steps_until(core, lambda b: b.order[0, 0, 0] == STOP)  # arrived: the order ends
    assert np.hypot(*(b.pos[0, 0, 0] - (28.0, 18.0))) <= 1.0
    core.apply_joint({0: {"type": ATTACK_MOVE, "units": [0], "location": [4, 7]}, 1: NOOP})
    steps_until(core, lambda b: b.health[0, 1, 0] < MARINE.health)  # it walks on and engages what it meets
    assert b.order[0, 0, 0] == ATTACK_MOVE


def _random_orders(core, rng):
    return {p: core.action_model(p).sample(core.observation(p), rng) for p in core.acting_players()}


def test_one_batch_steps_exactly_as_many_games_one_at_a_time():
    cfg = SkirmishConfig("2s3z", "1s4z", max_steps=40)
    seeds = [3, 11, 12, 40, 99]
    batch = SkirmishBatch(len(seeds), cfg)
    batch.reset(seeds)
    cores = [SkirmishCore("arena/Skirmish-test", **cfg.settings()) for _ in seeds]
    rng = np.random.default_rng(0)
    for core, s in zip(cores, seeds):
        core.reset(s)
    for _ in range(cfg.max_steps):
        obs = batch.observe()
        for g, core in enumerate(cores):
            for p in (0, 1):
                for k, v in core.observation(p).items():
                    assert np.array_equal(v, obs[k][g, p]), k
            if core.is_terminal():
                continue
            moves = _random_orders(core, rng)
            for p, m in moves.items():
                batch.give(g, p, m)
            core.apply_joint(moves)
        batch.step()
        for g, core in enumerate(cores):
            for name in ("pos", "health", "shield", "cooldown", "alive", "order", "goal", "target", "t", "dealt"):
                assert np.array_equal(getattr(batch, name)[g], getattr(core.batch, name)[0]), name
    assert batch.over().all() and [float(z) for z in batch.outcome()] == [c.returns()[0] for c in cores]


def test_same_seed_same_game_and_seeds_differ():
    def run(seed):
        core = make_core("arena/Skirmish-2s3z-v0")
        core.reset(seed)
        rng = np.random.default_rng(5)
        texts = []
        while not core.is_terminal():
            core.apply_joint(_random_orders(core, rng))
            texts.append(core.text(0) + core.text(1))
        return texts, core.batch.pos.tobytes(), core.returns()

    assert run(7) == run(7)
    assert run(7)[1] != run(8)[1]
    a = play_match("arena/Skirmish-3m-v0", ["skirmish:kite", "random"], seed=4, match_id="m").replay
    b = play_match("arena/Skirmish-3m-v0", ["skirmish:kite", "random"], seed=4, match_id="m").replay
    assert a.without_timing().to_text() == b.without_timing().to_text()


@pytest.mark.parametrize("record", ["text", "actions"])
def test_bot_matches_are_stored_compactly_and_verify(tmp_path, record):
    core = make_core("arena/Skirmish-2s3z-v0")
    r = play_match(core, ["skirmish:focus_fire", "skirmish:attack_nearest"], seed=2, record=record)
    back = read_replay(write_replay(r.replay, tmp_path / "m.jsonl.gz"))
    moves = [s["action"] for s in back.steps]
    assert len(moves) == 2 * r.moves and all(isinstance(m, dict) and "type" in m for m in moves)
    attack = next(m for m in moves if m["type"] == ATTACK)
    assert set(attack) == {"type", "units", "target"}
    assert verify_replay(back).ok
    assert back.header["game_settings"] == {"red": "2s3z", "blue": "2s3z", "width": 32, "height": 32,
                                            "max_steps": 120}


def test_a_changed_setting_replays_too(tmp_path):
    r = play_match("arena/Skirmish-5m_vs_6m-v0", ["skirmish:kite", "random"], seed=1, record="actions",
                   game_kwargs={"blue": "5m", "max_steps": 20})
    back = read_replay(write_replay(r.replay, tmp_path / "m.jsonl.gz"))
    assert verify_replay(back).ok and r.moves <= 20


def test_the_core_is_the_codec_and_writes_moves_as_text():
    core = make_core("arena/Skirmish-3m-v0")
    core.reset(0)
    move = {"type": MOVE, "units": [2, 0], "target": 4, "location": [3, 5]}
    assert core.encode_action(move) == {"type": MOVE, "units": [2, 0], "location": [3, 5]}
    assert core.validate(0, core.encode_action(move)) == ({"type": MOVE, "units": [2, 0], "location": [3, 5]}, None)
    assert core.action_to_text(0, move) == "move units=[2, 0] location=[3, 5]"
    text = core.text(0)
    assert "step 0/60" in text and "you: 3 alive of 3, 100% health" in text and "marine" in text


def score(game, a, b, games):
    total = 0.0
    for seed in range(games // 2):
        for seat in (0, 1):
            z = play_match(game, [a, b] if seat == 0 else [b, a], seed=seed, record=False).returns[seat]
            total += (z + 1) / 2
    return total / games


def test_the_bots_rise_in_strength():
    # the games are seeded, so these scores are fixed: attack_nearest and focus_fire 1.0 against idle,
    # focus_fire 0.75 against attack_nearest on 3m, kite 0.625 against focus_fire on 2s3z (the
    # thresholds leave room for a small change of rules; docs/skirmish.md has the 100-game table)
    game = "arena/Skirmish-3m-v0"
    assert score(game, "skirmish:attack_nearest", "skirmish:idle", 20) >= 0.9
    assert score(game, "skirmish:focus_fire", "skirmish:idle", 40) >= 0.9
    assert score(game, "skirmish:focus_fire", "skirmish:attack_nearest", 40) >= 0.65
    assert score("arena/Skirmish-2s3z-v0", "skirmish:kite", "skirmish:focus_fire", 40) >= 0.55
    # pull_back 0.625 against focus_fire and 0.825 against attack_nearest here (the seeds' fixed scores)
    assert score(game, "skirmish:pull_back", "skirmish:focus_fire", 40) >= 0.6
    assert score(game, "skirmish:pull_back", "skirmish:attack_nearest", 40) >= 0.8


def test_pull_back_takes_its_focused_unit_out_and_sends_it_back():
    """Against focus_fire (which shoots one marine at a time): pull_back moves one unit alone, its weakest
    at half health or less and just hit, away from the enemy, and later orders that unit to attack again."""
    from arena.envs.observation import Observation
    from arena.envs.skirmish import ATTACK, MOVE

    core = make_core("arena/Skirmish-3m-v0")
    core.reset(3)
    bots = [make_agent("skirmish:pull_back", core, 0), make_agent("skirmish:focus_fire", core, 1)]
    pulled, returned = [], []
    while not core.batch.over()[0]:
        b = core.batch
        before = {u: (float(b.health[0, 0, u]), tuple(b.pos[0, 0, u])) for u in range(3)}
        moves = {p: bots[p].act(Observation(core, p, int(b.t[0]))) for p in (0, 1)}
        m = moves[0]
        if m["type"] == MOVE:
            (u,) = m["units"]
            living = [h for h, _ in before.values() if h > 0]
            assert before[u][0] == min(living) and before[u][0] <= 0.5 * 45 and len(living) > 1
            goal = core.batch.cell_point(0, m["location"])
            enemy = b.pos[0, 1][b.alive[0, 1]].mean(0)
            assert np.linalg.norm(goal - enemy) > np.linalg.norm(np.array(before[u][1]) - enemy)
            pulled.append(u)
        elif m["type"] == ATTACK and any(u in pulled for u in m["units"]):
            returned += [u for u in m["units"] if u in pulled]
        core.apply_joint(moves)
    assert pulled and returned


@pytest.mark.parametrize("kwargs, words", [
    ({"max_steps": 0}, "max_steps must be a whole number in [1, 1000]"),
    ({"max_steps": 2.5}, "max_steps must be a whole number"),
    ({"red": "3x"}, "red must be 1 to 16 units as counts and letters, each letter once"),
    ({"blue": "20m"}, "blue must be 1 to 16 units"),
    ({"blue": "2m3m"}, "each letter once (m marine, r marauder, s stalker, z zealot), e.g. 2s3z, got '2m3m'"),
    ({"width": 10}, "width must be a whole number in [24, 128]"),
    ({"height": 11}, "height must be a whole number in [12, 128]"),
])
def test_bad_settings_are_one_line_errors(kwargs, words):
    with pytest.raises(ConfigError) as e:
        make("arena/Skirmish-3m-v0", **kwargs)
    assert words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match=".") as e:
        SkirmishConfig(**kwargs)
    assert "\n" not in str(e.value)
    with pytest.raises(NotASetting, match="its settings: blue, height"):
        make("arena/Skirmish-3m-v0", units=4)


def test_bot_specs():
    core = make_core("arena/Skirmish-3m-v0")
    assert make_agent("skirmish:kite", core).spec == "skirmish:kite"
    with pytest.raises(AgentSpecError, match="skirmish:idle, skirmish:attack_nearest"):
        make_agent("skirmish:rush", core)
    with pytest.raises(IncompatibleAgent, match="arena/Skirmish"):
        make_agent("skirmish:idle", make_core("openspiel/tic_tac_toe-v0"))

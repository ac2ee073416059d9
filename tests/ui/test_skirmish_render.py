"""Skirmish drawn: the top-down picture of a battle (`arena.envs.skirmish_draw`), the GIF of a replay
through the arena's video path (``render_mode="rgb_array"``, `render_replay`, ``arena replay show
--render``), and the web replay's battle board (each frame's ``battle``)."""

import numpy as np
import pytest
from typer.testing import CliRunner

from arena.cli import app
from arena.envs import skirmish_draw
from arena.envs.registry import make_core
from arena.envs.skirmish import SkirmishCore
from arena.envs.skirmish_draw import MAP, SHOT_COLOURS, SIDE_COLOURS, draw_frame, unit_circle
from arena.match import play_match
from arena.replays import write_replay

GAME = "arena/Skirmish-3m-v0"
NO_OP = {"type": 0, "units": [], "target": None, "location": None}
RED, BLUE = np.array(SIDE_COLOURS[0], np.uint8), np.array(SIDE_COLOURS[1], np.uint8)


def _placed(core: SkirmishCore, red, blue) -> SkirmishCore:
    """`core` with its units moved to the given points (absolute map coordinates)."""
    b = core.batch
    for side, points in ((0, red), (1, blue)):
        for u, xy in enumerate(points):
            b.pos[0, side, u] = xy
    b.goal[:] = b.pos
    core._obs = None
    return core


def _ring(frame, u, v, r, k=24):
    """The pixels on a ring at 0.8 r around (u, v): inside the disc, clear of the type letter."""
    a = np.linspace(0, 2 * np.pi, k, endpoint=False)
    cols = np.round(u + 0.8 * r * np.cos(a)).astype(int)
    rows = np.round(v + 0.8 * r * np.sin(a)).astype(int)
    return frame[rows, cols]


def _is(pixels, colour):
    return (pixels == np.asarray(colour, np.uint8)).all(-1)


def _match(seed=0):
    res = play_match(GAME, ["skirmish:focus_fire", "skirmish:attack_nearest"], seed=seed, record="actions",
                     match_id=f"sk{seed}")
    assert res.moves >= 2
    return res


@pytest.fixture(scope="module")
def match():
    return _match(0)


def test_each_side_is_drawn_in_its_colour_where_its_units_stand():
    core = _placed(SkirmishCore(), red=[(8, 8), (8, 16), (8, 24)], blue=[(24, 8), (24, 16), (24, 24)])
    battle = core.battle()
    frame = draw_frame(battle)
    assert frame.dtype == np.uint8 and frame.shape[2] == 3
    assert RED[0] > 150 > max(RED[1:]) and BLUE[2] > 150 > max(BLUE[:2])  # red is red, blue is blue
    for unit in battle["units"]:
        ring = _ring(frame, *unit_circle(battle, unit))
        assert _is(ring, SIDE_COLOURS[unit["side"]]).all(), unit
    # no red on the right half of the map, no blue on the left
    mid = int(unit_circle(battle, {"x": 16, "y": 0, "radius": 0})[0])
    assert not _is(frame[:, mid:], RED).any() and not _is(frame[:, :mid], BLUE).any()
    assert _is(frame, RED).sum() > 3 * 60 and _is(frame, BLUE).sum() > 3 * 60


def test_a_dead_unit_is_not_drawn():
    core = _placed(SkirmishCore(), red=[(8, 8), (8, 16), (8, 24)], blue=[(24, 8), (24, 16), (24, 24)])
    core.batch.alive[0, 1, 1] = False
    core.batch.health[0, 1, 1] = 0.0
    battle = core.battle()
    assert [u["alive"] for u in battle["units"]] == [True] * 4 + [False, True]
    frame = draw_frame(battle)
    u, v, r = unit_circle(battle, battle["units"][4])
    patch = frame[int(v - r - 12):int(v + r + 2), int(u - r - 2):int(u + r + 2)]
    assert not _is(patch, BLUE).any()  # neither its disc nor its health bar
    assert _is(frame, BLUE).sum() > 2 * 60  # the two living blue units are
    assert "blue 2/3" in skirmish_draw.caption(battle)


def test_an_attack_line_joins_a_unit_that_fired_to_its_target():
    # a marine within reach of a zealot, which cannot reach back: only the marine fires
    core = _placed(SkirmishCore(red="1m", blue="1z"), red=[(12, 15)], blue=[(16.5, 15)])
    before = core.battle()
    assert all(u["shot"] is None for u in before["units"])
    (u0, v0, _), (u1, _, _) = (unit_circle(before, u) for u in before["units"])
    mid = (round((u0 + u1) / 2), round(v0))
    frame = draw_frame(before)
    assert _is(frame[mid[1], mid[0]], MAP)

    core.apply_joint({0: NO_OP, 1: NO_OP})
    after = core.battle()
    marine, zealot = after["units"]
    assert marine["shot"] == 0 and zealot["shot"] is None and zealot["shield"] < 1.0
    frame = draw_frame(after)
    assert _is(frame[mid[1] - 1:mid[1] + 2, mid[0]], SHOT_COLOURS[0]).any()
    # the line runs under the discs: both are still whole
    for unit in (marine, zealot):
        assert _is(_ring(frame, *unit_circle(after, unit)), SIDE_COLOURS[unit["side"]]).all()
    # a marine fires every 5 sub-steps, so within 5 steps comes one where it does not: no line then
    for _ in range(5):
        core.apply_joint({0: NO_OP, 1: NO_OP})
        if core.battle()["units"][0]["shot"] is None:
            break
    assert core.battle()["units"][0]["shot"] is None
    assert _is(draw_frame(core.battle())[mid[1] - 1:mid[1] + 2, mid[0]], MAP).all()


def test_the_env_draws_in_rgb_array_mode_and_only_then_the_core_links_to_it():
    drawn = make_core(GAME, render_mode="rgb_array")
    plain = make_core(GAME)
    assert drawn.env.metadata["render_fps"] == 2 and "rgb_array" in drawn.env.metadata["render_modes"]
    assert plain.env is None  # a match's core is played as before
    drawn.reset(0)
    _, width, height = skirmish_draw.layout(drawn.battle())
    assert drawn.env.render().shape == (height, width, 3)
    with pytest.raises(Exception, match="render_mode"):
        make_core(GAME, render_mode="video")


def test_a_replay_renders_to_a_gif_of_a_frame_a_step(match, tmp_path):
    from PIL import Image

    from arena.ui.video import render_replay

    pytest.importorskip("imageio_ffmpeg")
    info, resim = render_replay(match.replay, tmp_path / "m.gif")
    assert resim.matches() and info.frames == match.moves + 1 and info.fps == 2.0
    with Image.open(tmp_path / "m.gif") as gif:
        assert gif.n_frames == match.moves + 1
        gif.seek(0)
        first = np.asarray(gif.convert("RGB"))
        gif.seek(gif.n_frames - 1)
        last = np.asarray(gif.convert("RGB"))
    assert _is(first, RED).sum() > 3 * 60 and _is(first, BLUE).sum() > 3 * 60  # exact colours: a palette a frame
    loser = RED if match.returns[0] < 0 else BLUE
    assert not _is(last, loser).any()  # the beaten side is gone


def test_replay_show_render_draws_a_skirmish(match, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    path = write_replay(match.replay, tmp_path / "m.jsonl")
    out = tmp_path / "show.gif"
    r = CliRunner().invoke(app, ["replay", "show", str(path), "--render", str(out)], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert f"{match.moves + 1} frames at 2 fps" in " ".join(r.output.split()) and out.exists()


def test_the_web_replay_frames_carry_the_battle(match):
    pytest.importorskip("fastapi")
    from arena.ui.web.replays import replay_json

    out = replay_json(match.replay, match.match_id)
    assert out["note"] == "" and len(out["frames"]) == match.moves + 1
    battles = [f["battle"] for f in out["frames"]]
    assert [b["step"] for b in battles] == list(range(match.moves + 1))
    assert all(len(b["units"]) == 6 and {u["side"] for u in b["units"]} == {0, 1} for b in battles)
    assert all(u["shot"] is None for u in battles[0]["units"]) and battles[0]["winner"] is None
    assert any(u["shot"] is not None for b in battles for u in b["units"])  # someone fired
    assert battles[1]["units"] != battles[0]["units"]  # the units moved
    end = battles[-1]
    winner = {1.0: "red", -1.0: "blue"}[match.returns[0]]
    assert end["winner"] == winner
    loser = 1 if winner == "red" else 0
    assert end["sides"][loser]["alive"] == 0 and not any(u["alive"] for u in end["units"] if u["side"] == loser)
    # other games' frames have none
    ttt = play_match("openspiel/tic_tac_toe-v0", ["random", "random"], seed=1, record="actions")
    assert all(f["battle"] is None for f in replay_json(ttt.replay, "t")["frames"])


def test_a_batch_records_the_same_shots_as_its_games_one_by_one():
    from arena.envs.skirmish import ATTACK_MOVE, SkirmishBatch

    seeds = [0, 1, 2]
    batch, cores = SkirmishBatch(len(seeds)), [SkirmishCore() for _ in seeds]
    batch.reset(seeds)
    for core, seed in zip(cores, seeds):
        core.reset(seed)
    order = {"type": ATTACK_MOVE, "units": [0, 1, 2], "target": None, "location": [4, 4]}
    fired = 0
    for _ in range(12):
        for g, core in enumerate(cores):
            for p in (0, 1):
                batch.give(g, p, order)
            core.apply_joint({0: order, 1: order})
        batch.step()
        for g, core in enumerate(cores):
            assert np.array_equal(batch.shot[g], core.batch.shot[0])
        fired += int((batch.shot >= 0).sum())
    assert fired > 0


def test_a_video_names_the_sides_and_zooms_to_the_fight(match, tmp_path):
    """The frames of a video say who plays red and who blue, and show the square the match's units ever
    stood in (a margin round it), not the whole map: the same units cover more of the frame."""
    from PIL import Image

    from arena.ui.video import render_replay, short_spec

    pytest.importorskip("imageio_ffmpeg")
    core = make_core(GAME, render_mode="rgb_array")
    core.reset(0)
    whole = core.env.render()
    core.env.label_sides(["skirmish:focus_fire", "skirmish:attack_nearest"])
    text = skirmish_draw.caption({**core.battle(), **core.env.frame})
    assert "red skirmish:focus_fire 3/3" in text and "blue skirmish:attack_nearest 3/3" in text
    render_replay(match.replay, tmp_path / "z.gif")
    with Image.open(tmp_path / "z.gif") as gif:
        first = np.asarray(gif.convert("RGB"))
    assert first.shape == whole.shape  # a square view of a square map: the frame's size is the same
    assert _is(first, RED).sum() > 1.5 * _is(whole, RED).sum()  # zoomed in: the discs are larger
    view = skirmish_draw.fight_view([(10.0, 12.0, 0.5), (20.0, 18.0, 0.5)], 32, 32)
    assert view == (6.5, 6.5, 23.5, 23.5)
    assert skirmish_draw.fight_view([(1.0, 1.0, 0.5)], 32, 32)[:2] == (0.0, 0.0)  # kept inside the map
    assert short_spec("policy:/runs/sk/best,greedy=true") == "policy:sk/best"
    assert short_spec("skirmish:kite") == "skirmish:kite" and short_spec("mcts:simulations=5") == "mcts"


def test_units_standing_together_show_every_health_bar():
    """Two marines a side on one spot: each keeps its own bar (lifted above its neighbour's), so four bars
    of health show where one would cover the others."""
    from arena.envs.skirmish_draw import HEALTH

    core = _placed(SkirmishCore(), red=[(8, 16), (8, 16.2), (8, 30)], blue=[(24, 16), (24, 16.2), (24, 30)])
    frame = draw_frame(core.battle())
    u, v, r = unit_circle(core.battle(), core.battle()["units"][0])
    column = _is(frame[:int(v - r), int(u)], HEALTH)  # above the first red marine
    runs = int(column[0]) + int(np.count_nonzero(column[1:] & ~column[:-1]))  # separate green bars
    assert runs == 2, runs

"""Videos of matches: frames (``[H, W, 3]`` uint8 arrays) to a GIF or an MP4, chosen by the file's suffix.

Both go through imageio-ffmpeg's bundled ffmpeg, fed one frame at a time, so a long episode is
never held in memory: MP4 is H.264 (``yuv420p``, what browsers and players take; an odd width or
height is padded by a pixel); GIF gets a palette of its own for each frame (ffmpeg's
``palettegen=stats_mode=single`` and ``paletteuse=new=1``), so it streams as well and the colours
stay exact for drawings with few of them (the stick figure of `arena.envs.stickfigure`).
(imageio's own GIF writer, Pillow's, keeps every frame until the file is closed: 300 frames of
480x360 are 150 MB.)

Frame rate (`frame_plan`): by default a video plays at real time, the env's
``metadata["render_fps"]`` (a step a frame), at most `MAX_FPS` = 50 frames a second: above
that every k-th frame is kept, k = ceil(render_fps / 50), and the video runs at render_fps / k.
The prosthetics task renders 100 frames a second of simulated time (a step is 0.01 s): its
videos keep every second frame and play at 50 fps. The cap is for GIF, whose frame delays are
whole hundredths of a second and which browsers slow down below 2 of them (above 50 fps); MP4
keeps it too, so that both formats hold the same frames. Give `fps` to choose another rate:
k = round(render_fps / fps) (at least 1), so the video still plays at about real time (faster
where `fps` is above render_fps: every frame is kept).

Files are written atomically (`arena.fsio.atomic_path`): ffmpeg writes a hidden temporary file
in the same folder, renamed into place once it is complete; a failure leaves nothing behind.

`render_replay` re-simulates a replay on its game made with ``render_mode="rgb_array"``
(`arena.match.verify.resimulate_steps`) and writes the frame after the reset and after every
move; `render_modes` / `check_drawable` say beforehand whether a game can be drawn at all.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from arena.errors import ArenaError

#: What each suffix writes.
FORMATS = {".gif": "GIF", ".mp4": "MP4 (H.264)"}
#: Frames a second a video plays at most, by default (see the module docstring).
MAX_FPS = 50.0


class VideoError(ArenaError):
    pass


def check_video_path(path: str | os.PathLike) -> Path:
    """`path`, or a one-line `VideoError` when its suffix is not a video format this writes."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise VideoError(f"cannot write a video to {path}: the file name must end in "
                         f"{' or '.join(FORMATS)} ({', '.join(f'{k}: {v}' for k, v in FORMATS.items())})")
    return path


def frame_plan(render_fps: float | None, fps: float | None = None) -> tuple[float, int]:
    """``(video fps, k)``: keep every k-th frame of an env that renders `render_fps` frames a second
    of its time, and play them at the video fps (module docstring). No `render_fps` (the env does
    not say): `fps`, or 30, and every frame."""
    if fps is not None and not (fps > 0 and math.isfinite(fps)):
        raise VideoError(f"the frame rate must be a positive number of frames a second, got {fps}")
    if not render_fps or render_fps <= 0:
        return float(fps or 30.0), 1
    render_fps = float(render_fps)
    k = max(1, math.ceil(render_fps / MAX_FPS - 1e-9)) if fps is None else max(1, round(render_fps / fps))
    return (render_fps / k if fps is None else float(fps)), k


@dataclass
class VideoInfo:
    """A written video: where, how many frames, at what rate, and which frames (every k-th)."""

    path: Path
    frames: int
    fps: float
    every: int = 1

    @property
    def seconds(self) -> float:
        return self.frames / self.fps if self.fps else 0.0

    def describe(self) -> str:
        """``runs/pros/random.gif: 50 frames at 50 fps, 1.0 s (every 2nd frame of the match)``."""
        nth = {2: "2nd", 3: "3rd"}.get(self.every, f"{self.every}th")
        return (f"{self.path}: {self.frames} frames at {self.fps:g} fps, {self.seconds:.1f} s"
                + (f" (every {nth} frame of the match)" if self.every > 1 else ""))


class VideoWriter:
    """Write frames one at a time: ``add(frame)`` keeps every `every`-th frame (the first always);
    ``close()`` finishes the file and returns its `VideoInfo`. A context manager: leaving the block
    with an exception removes what was written."""

    def __init__(self, path: str | os.PathLike, fps: float = 30.0, every: int = 1, durable: bool = True):
        self.path = check_video_path(path)
        if every < 1:
            raise VideoError(f"every must be at least 1, got {every}")
        self.fps, self.every, self.durable = float(fps), int(every), durable
        self.frames = 0  # frames written
        self._seen = 0  # frames given to add
        self._size: tuple[int, int] | None = None
        self._gen = None
        self._stack = contextlib.ExitStack()
        self._closed = False

    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def _open(self, width: int, height: int) -> None:
        from arena.errors import require
        from arena.fsio import atomic_path

        imageio_ffmpeg = require("imageio_ffmpeg", "writing videos (imageio-ffmpeg's bundled ffmpeg)", "opensim")

        tmp = self._stack.enter_context(atomic_path(self.path, durable=self.durable))
        self._size = (width, height)
        gif = self.path.suffix.lower() == ".gif"
        if gif:
            codec, pix_out, quality = "gif", "pal8", None
            params = ["-vf", ("split[a][b];[a]palettegen=stats_mode=single:reserve_transparent=0[p];"
                              "[b][p]paletteuse=new=1"), "-f", "gif"]
        else:
            codec, pix_out, quality = "libx264", "yuv420p", 7
            params = ["-f", "mp4"]
            if width % 2 or height % 2:  # yuv420p needs an even width and height
                params = ["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"] + params
        self._gen = imageio_ffmpeg.write_frames(str(tmp), (width, height), fps=self.fps, codec=codec,
                                                pix_fmt_out=pix_out, quality=quality, macro_block_size=1,
                                                ffmpeg_log_level="error", output_params=params)
        self._gen.send(None)

    def add(self, frame: Any) -> None:
        if self._closed:
            raise VideoError(f"{self.path}: the video is closed")
        keep = self._seen % self.every == 0
        self._seen += 1
        if not keep:
            return
        a = np.asarray(frame)
        if a.ndim == 3 and a.shape[2] == 4:
            a = a[:, :, :3]  # RGBA: the alpha channel has no place in a video
        if a.ndim != 3 or a.shape[2] != 3:
            raise VideoError(f"a frame must be an RGB image [height, width, 3], got shape {a.shape}")
        if a.dtype != np.uint8:
            raise VideoError(f"a frame must be uint8 (0-255), got {a.dtype}")
        h, w = a.shape[:2]
        if self._gen is None:
            self._open(w, h)
        elif (w, h) != self._size:
            raise VideoError(f"frame {self._seen} is {w}x{h}, the video's first was {self._size[0]}x{self._size[1]}")
        try:
            self._gen.send(np.ascontiguousarray(a))
        except (OSError, RuntimeError) as e:
            self.abort()
            raise VideoError(f"ffmpeg could not write {self.path}: {e}") from e
        self.frames += 1

    def close(self) -> VideoInfo:
        """Finish the file (renamed into place); a video with no frame is an error and leaves no file."""
        if self._closed:
            return self.info()
        if self._gen is None:
            self.abort()
            raise VideoError(f"no frames to write to {self.path}")
        self._closed = True
        try:
            self._gen.close()  # ffmpeg finishes the file
        except BaseException as e:
            self._stack.__exit__(type(e), e, e.__traceback__)
            raise VideoError(f"ffmpeg could not write {self.path}: {e}") from e
        self._stack.close()  # rename into place
        return self.info()

    def abort(self) -> None:
        """Stop and remove the temporary file; the path is left as it was."""
        self._closed = True
        if self._gen is not None:
            with contextlib.suppress(Exception):
                self._gen.close()
        err = VideoError("aborted")
        with contextlib.suppress(VideoError):
            self._stack.__exit__(VideoError, err, None)

    def info(self) -> VideoInfo:
        return VideoInfo(self.path, self.frames, self.fps, self.every)


def write_video(path: str | os.PathLike, frames: Iterable[Any], fps: float = 30.0, every: int = 1) -> VideoInfo:
    """Write `frames` (an iterable: a generator streams) to `path`, a .gif or .mp4 (module docstring)."""
    with VideoWriter(path, fps, every) as w:
        for f in frames:
            w.add(f)
    return w.info()


# -- drawing games -------------------------------------------------------------------------------
def render_modes(game_id: str, game_kwargs: dict | None = None) -> list[str]:
    """The render modes a game's env has (``metadata["render_modes"]``): read off the registered
    class without making it where the entry point is a class, else from the env made once."""
    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    from arena.envs.registry import ensure_registered, make

    ensure_registered()
    spec = gymnasium.envs.registry.get(game_id)
    if spec is not None:
        ep = spec.entry_point
        try:
            creator = load_env_creator(ep) if isinstance(ep, str) else ep
        except Exception:
            creator = None
        if isinstance(creator, type):
            return list((getattr(creator, "metadata", None) or {}).get("render_modes") or ())
    env = make(game_id, **(game_kwargs or {}))
    try:
        base = getattr(env, "unwrapped", env)
        return list((getattr(base, "metadata", None) or {}).get("render_modes") or ())
    finally:
        with contextlib.suppress(Exception):
            env.close()


def check_drawable(game_id: str, game_kwargs: dict | None = None) -> None:
    """Nothing if the game's env draws frames (``render_mode="rgb_array"``), else a one-line `VideoError`."""
    modes = render_modes(game_id, game_kwargs)
    if "rgb_array" not in modes:
        raise VideoError(f"game {game_id} cannot be drawn: its env has no rgb_array render mode "
                         f"(render modes: {', '.join(modes) or 'none'}); drop --render")


def can_draw(game_id: str, game_kwargs: dict | None = None) -> bool:
    """Whether `game_id` is loaded and its env draws frames; False for a game that is not (a plug-in
    not loaded) or that fails to make (nothing to draw there, and not this question's to report)."""
    from arena.envs.registry import is_registered

    try:
        return is_registered(game_id) and "rgb_array" in render_modes(game_id, game_kwargs)
    except Exception:
        return False


def frame_of(core: Any) -> np.ndarray:
    """The frame of a game's env made with ``render_mode="rgb_array"``."""
    env = core.env
    if env is None:
        raise VideoError(f"game {core.game_id} cannot be drawn: it is not played through an env with frames")
    frame = env.render()
    if frame is None:
        raise VideoError(f"game {core.game_id} cannot be drawn: its env gave no frame (render_mode rgb_array)")
    return frame


def render_fps_of(core: Any) -> float | None:
    env = core.env
    base = getattr(env, "unwrapped", env)
    fps = (getattr(base, "metadata", None) or {}).get("render_fps")
    return float(fps) if fps else None


def render_replay(replay, path: str | os.PathLike, fps: float | None = None, on_step=None, on_reset=None):
    """Re-simulate `replay` with its game drawing frames and write them to `path` (.gif or .mp4):
    the frame after the reset and after every move, every k-th kept (`frame_plan`).

    `on_step(core, moves, rewards)` / `on_reset(core)`: called as well, after the frame is taken (a
    caller that prints a table of the steps). Returns ``(VideoInfo, Resimulation)``; the video
    is not written when the re-simulation fails.
    """
    from arena.envs.registry import is_registered
    from arena.match.verify import core_for_replay, replay_game_kwargs, resimulate_steps

    path = check_video_path(path)
    frame_plan(None, fps)  # a bad rate is refused before the game is made
    kwargs = replay_game_kwargs(replay)  # only the settings the game declares (a replay is data)
    if is_registered(replay.game_id):  # (else core_for_replay names the --plugin to pass)
        check_drawable(replay.game_id, kwargs)
    core = core_for_replay(replay, "rgb_array")
    _frame_the_match(replay, core)
    video_fps, every = frame_plan(render_fps_of(core), fps)
    with VideoWriter(path, video_fps, every) as writer:

        def reset(c) -> None:
            writer.add(frame_of(c))
            if on_reset is not None:
                on_reset(c)

        def step(c, moves, rewards) -> None:
            writer.add(frame_of(c))
            if on_step is not None:
                on_step(c, moves, rewards)

        resim = resimulate_steps(replay, step, on_reset=reset, core=core)
    return writer.info(), resim


def short_spec(spec: Any) -> str:
    """An agent spec as a frame's caption names it: its kind and its positional argument's last two
    parts, without options (``policy:/runs/sk/best,greedy=true`` -> ``policy:sk/best``)."""
    text = str(spec)
    kind, _, rest = text.partition(":")
    if not rest:
        return text
    first = rest.split(",", 1)[0]
    if "=" in first:  # options only: the kind says it
        return kind
    return f"{kind}:{'/'.join(Path(first).parts[-2:]) if '/' in first else first}"


def _frame_the_match(replay, core: Any) -> None:
    """Where the env draws a battle (`arena.envs.skirmish.SkirmishEnv`): the frames name who plays each
    side, and zoom to the square the match's units ever stood in, found by a first pass over the
    match (a re-simulation: a few milliseconds a step)."""
    env = core.env
    if not (callable(getattr(env, "zoom_to", None)) and callable(getattr(env, "label_sides", None))):
        return
    from arena.match.verify import core_for_replay, resimulate_steps

    env.label_sides([short_spec(a) for a in replay.header.get("agents") or []])
    first = core_for_replay(replay, "rgb_array")
    points: list = []
    try:
        resimulate_steps(replay, lambda c, moves, rewards: points.extend(c.env.positions()),
                         on_reset=lambda c: points.extend(c.env.positions()), core=first)
    finally:
        first.close()
    env.zoom_to(points)


def ansi_line(core: Any) -> str | None:
    """The env's ``ansi`` rendering now (one line for the prosthetics task), whatever render mode it
    was made with; None if it has none."""
    env = core.env
    base = getattr(env, "unwrapped", env)
    if "ansi" not in ((getattr(base, "metadata", None) or {}).get("render_modes") or ()):
        return None
    saved = base.render_mode
    try:
        base.render_mode = "ansi"
        out = base.render()
    except Exception:
        return None
    finally:
        base.render_mode = saved
    return out if isinstance(out, str) else None

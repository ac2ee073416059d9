"""`arena.ui.video`: frames to GIF or MP4 by the suffix, streamed, written atomically; the frame plan."""

import numpy as np
import pytest

from arena.ui.video import VideoError, VideoWriter, check_video_path, frame_plan, write_video

pytest.importorskip("imageio_ffmpeg")
iio = pytest.importorskip("imageio.v3")


def _frames(n, h=36, w=50):
    for i in range(n):
        f = np.full((h, w, 3), 250, np.uint8)
        f[:, (3 * i) % w, :] = (200, 50, 40)  # a red bar that moves
        yield f


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_a_video_has_every_kth_frame_and_nothing_else_is_left(tmp_path, suffix):
    out = tmp_path / f"v{suffix}"
    info = write_video(out, _frames(9), fps=20, every=2)
    assert (info.frames, info.fps, info.every) == (5, 20.0, 2)
    frames = iio.imread(out, index=None)
    assert frames.shape[:3] == (5, 36, 50)
    if suffix == ".gif":  # a palette of its own for each frame: the colours come back exactly
        assert np.array_equal(frames[1][..., :3], list(_frames(3))[2])
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_odd_sizes_make_an_mp4_too(tmp_path):
    info = write_video(tmp_path / "odd.mp4", _frames(3, h=35, w=49))
    assert iio.imread(info.path, index=None).shape[0] == 3


@pytest.mark.parametrize("name", ["v.avi", "v", "v.gif.tmp"])
def test_other_suffixes_are_one_line_errors(tmp_path, name):
    with pytest.raises(VideoError) as e:
        check_video_path(tmp_path / name)
    assert ".gif" in str(e.value) and ".mp4" in str(e.value) and "\n" not in str(e.value)


def test_a_failure_leaves_no_file(tmp_path):
    out = tmp_path / "v.gif"
    with pytest.raises(VideoError, match="the video's first was 50x36"), VideoWriter(out, fps=10) as w:
        for f in _frames(2):
            w.add(f)
        w.add(np.zeros((20, 20, 3), np.uint8))
    with pytest.raises(VideoError, match="no frames"):
        write_video(out, [])
    with pytest.raises(VideoError, match=r"\[height, width, 3\]"):
        write_video(out, [np.zeros((4, 4), np.uint8)])
    assert list(tmp_path.iterdir()) == []


def test_an_existing_file_is_replaced_whole(tmp_path):
    out = tmp_path / "v.gif"
    out.write_bytes(b"old")
    write_video(out, _frames(4), fps=10)
    assert iio.imread(out, index=None).shape[0] == 4


def test_the_frame_plan_plays_at_real_time_and_at_most_50_fps():
    assert frame_plan(100) == (50.0, 2)  # the prosthetics task: a step is 0.01 s
    assert frame_plan(30) == (30.0, 1)
    assert frame_plan(120) == (40.0, 3)
    assert frame_plan(50) == (50.0, 1)
    assert frame_plan(100, fps=25) == (25.0, 4)
    assert frame_plan(30, fps=60) == (60.0, 1)  # faster than real time: every frame is kept
    assert frame_plan(None) == (30.0, 1)
    with pytest.raises(VideoError):
        frame_plan(100, fps=0)

"""A side view of a musculoskeletal model as a stick figure, drawn with Pillow.

`draw_frame(skeleton)` turns the `skeleton()` of `arena.envs.prosthetics.ProstheticsEnv` (joint
centres and body ends in ground coordinates) into an RGB frame ``[H, W, 3]`` uint8: x (forward)
to the right, y up, the camera following the pelvis, the ground with a tick every half metre so
that walking shows, the left leg blue, the right leg and prosthesis red, and the time and
forward speed written in a corner. A frame takes about a millisecond, so videos of whole
episodes are cheap (`arena.ui.video` assembles them).
"""

from __future__ import annotations

import numpy as np

WIDTH, HEIGHT = 480, 360
#: Pixels per metre; the view spans WIDTH / SCALE = 2.4 m of ground.
SCALE = 200.0
GROUND_Y = 320  # the ground's row in pixels
COLORS = {"l": (40, 90, 200), "r": (200, 50, 40), "c": (30, 30, 30)}


def _side(name: str) -> str:
    if name.endswith("_l"):
        return "l"
    if name.endswith("_r"):
        return "r"
    return "c"


def draw_frame(skeleton: dict, width: int = WIDTH, height: int = HEIGHT, caption: str | None = None) -> np.ndarray:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), (250, 250, 247))
    draw = ImageDraw.Draw(img)
    cx = float(skeleton["pelvis"][0])
    scale = SCALE * width / WIDTH
    ground = GROUND_Y * height / HEIGHT

    def px(p) -> tuple[float, float]:
        return (width / 2 + (p[0] - cx) * scale, ground - p[1] * scale)

    draw.line([(0, ground), (width, ground)], fill=(120, 110, 100), width=2)
    first = np.floor((cx - width / (2 * scale)) * 2) / 2
    for k in range(int(width / scale * 2) + 2):
        x = first + 0.5 * k
        u = width / 2 + (x - cx) * scale
        draw.line([(u, ground), (u, ground + 8)], fill=(120, 110, 100), width=1)
        if abs(x - round(x)) < 1e-9:
            draw.text((u + 2, ground + 10), f"{x:.0f} m", fill=(120, 110, 100))
    points = dict(skeleton["joints"])
    points.update(skeleton.get("ends", {}))
    # the far side first: right (prosthetic) leg behind, trunk, then the left leg in front
    order = sorted(skeleton["segments"], key=lambda s: {"r": 0, "c": 1, "l": 2}[_side(s[1])])
    for a, b in order:
        if a in points and b in points:
            draw.line([px(points[a]), px(points[b])], fill=COLORS[_side(b)], width=5)
    for name, p in skeleton["joints"].items():
        u, v = px(p)
        draw.ellipse([u - 4, v - 4, u + 4, v + 4], fill=COLORS[_side(name)])
    if "head" in points:
        u, v = px(points["head"])
        draw.ellipse([u - 12, v - 24, u + 12, v], outline=COLORS["c"], width=3)
    text = f"t = {skeleton.get('time', 0.0):.2f} s"
    if "pelvis_vel" in skeleton:
        text += f"   vx = {skeleton['pelvis_vel'][0]:.2f} m/s"
    draw.text((10, 10), text, fill=(20, 20, 20))
    if caption:
        draw.text((10, 26), caption, fill=(20, 20, 20))
    return np.asarray(img, dtype=np.uint8)

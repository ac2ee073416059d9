"""A side view of a musculoskeletal model as a stick figure, drawn with Pillow.

`draw_frame(skeleton)` turns the `skeleton()` of `arena.envs.prosthetics.ProstheticsEnv` (joint
centres and body ends in ground coordinates) into an RGB frame ``[H, W, 3]`` uint8: x (forward)
to the right, y up, the camera following the pelvis, the ground with a tick every half metre so
that walking shows, the left leg blue, the right leg and prosthesis red, and the time and
forward speed written in a corner. A frame takes about a millisecond, so videos of whole
episodes are cheap (`arena.ui.video` assembles them).

Framing: the scale is fixed (`SCALE` pixels per metre, the same in every frame) and leaves
`HEADROOM` metres above the ground in view, so a standing body (the neck is at about 1.57 m in
the 2018 model) and its head (`HEAD_SIZE` across, drawn above the neck along the trunk) are
whole in every frame, with room for the caption above.

Arms: drawn where the skeleton has them (a joint or body whose name names a shoulder, arm, elbow
or hand). The NeurIPS 2018 prosthetics model (``gait14dof22musc_pros``) has none: its bodies are
the pelvis, the two legs, the torso and the head (the torso's mass includes the arms), so its
figure has no arms.
"""

from __future__ import annotations

import numpy as np

WIDTH, HEIGHT = 480, 360
GROUND_Y = 320  # the ground's row in pixels
#: Metres above the ground in view (to the top row): a standing body with its head, and the caption.
HEADROOM = 2.1
#: Pixels per metre (about 152): the view spans WIDTH / SCALE = 3.2 m of ground.
SCALE = GROUND_Y / HEADROOM
#: The head's diameter, in metres.
HEAD_SIZE = 0.22
COLORS = {"l": (40, 90, 200), "r": (200, 50, 40), "c": (30, 30, 30)}
BACKGROUND = (250, 250, 247)
_ARM_WORDS = ("shoulder", "humerus", "arm", "elbow", "ulna", "radius", "wrist", "hand")


def has_arms(skeleton: dict) -> bool:
    """Whether the skeleton has any arm joints or bodies (the 2018 prosthetics model has none)."""
    names = list(skeleton.get("joints", {})) + list(skeleton.get("ends", {}))
    return any(w in n.lower() for n in names for w in _ARM_WORDS)


def head_circle(skeleton: dict, width: int = WIDTH, height: int = HEIGHT) -> tuple[float, float, float] | None:
    """The head as drawn: ``(u, v, r)`` in pixels (centre column, row and radius), None without one.
    The circle sits on the neck (the head body's end), along the trunk (from the back joint)."""
    points = dict(skeleton.get("joints", {}))
    points.update(skeleton.get("ends", {}))
    if "head" not in points:
        return None
    px = _projection(skeleton, width, height)
    u, v = px(points["head"])
    r = HEAD_SIZE / 2 * SCALE * width / WIDTH
    below = next((b for a, b in skeleton.get("segments", []) if a == "head"), None)
    base = next((a for a, b in skeleton.get("segments", []) if b == "head"), None)
    du, dv = 0.0, -1.0  # straight up
    if base is not None and base in points and _dist(px(points[base]), (u, v)) < 1.0:  # its end is its joint
        base = next((a for a, b in skeleton.get("segments", []) if b == base), None)
    if base is not None and base in points and below is None:
        bu, bv = px(points[base])
        n = _dist((u, v), (bu, bv))
        if n > 1e-6:
            du, dv = (u - bu) / n, (v - bv) / n
    return (u + du * r, v + dv * r, r)


def _dist(a, b) -> float:
    return ((a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2) ** 0.5


def _projection(skeleton: dict, width: int, height: int):
    cx = float(skeleton["pelvis"][0])
    scale = SCALE * width / WIDTH
    ground = GROUND_Y * height / HEIGHT

    def px(p) -> tuple[float, float]:
        return (width / 2 + (p[0] - cx) * scale, ground - p[1] * scale)

    return px


def _side(name: str) -> str:
    if name.endswith("_l"):
        return "l"
    if name.endswith("_r"):
        return "r"
    return "c"


def draw_frame(skeleton: dict, width: int = WIDTH, height: int = HEIGHT, caption: str | None = None) -> np.ndarray:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    cx = float(skeleton["pelvis"][0])
    scale = SCALE * width / WIDTH
    ground = GROUND_Y * height / HEIGHT
    px = _projection(skeleton, width, height)

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
    head = head_circle(skeleton, width, height)
    if head is not None:
        u, v, r = head
        draw.ellipse([u - r, v - r, u + r, v + r], fill=BACKGROUND, outline=COLORS["c"], width=3)
    text = f"t = {skeleton.get('time', 0.0):.2f} s"
    if "pelvis_vel" in skeleton:
        text += f"   vx = {skeleton['pelvis_vel'][0]:.2f} m/s"
    draw.text((10, 10), text, fill=(20, 20, 20))
    if caption:
        draw.text((10, 26), caption, fill=(20, 20, 20))
    return np.asarray(img, dtype=np.uint8)

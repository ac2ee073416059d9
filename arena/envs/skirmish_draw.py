"""A skirmish from above, drawn with Pillow: the picture of `SkirmishCore.battle` (plain data).

`draw_frame(battle)` gives an RGB frame ``[H, W, 3]`` uint8 with, from the back to the front:

* the map, its bounds and the faint 8 x 8 grid that move orders name cells of;
* a line from each unit that fired in the last step to its target, in a light shade of the
  shooter's colour (drawn under the units, so it runs from disc edge to disc edge);
* each living unit as a disc of its side's colour (red as the prosthetics figure's right leg, blue
  as its left, `arena.envs.stickfigure`), of its radius at the map's scale (at least
  `MIN_RADIUS` pixels, so a marine on a large map still shows), with its type letter (m, r, s, z)
  in white; dead units are not drawn;
* above each unit its health bar (green) and, for a type with shields, its shield bar (cyan),
  drawn after all the discs so that a neighbour never hides them, and lifted above a close
  neighbour's bars so that two units standing together show both;
* a caption: the step, each side's player where a video knows it (``battle["labels"]``), its living
  units and remaining health and shields, and the winner once the battle is over.

The scale is fixed by the view (the map, or ``battle["view"]``: a video zooms to the square its
units ever stood in, `fight_view`; the longer side is `SIZE` pixels), so every frame of a match has
the same size, as a video needs. One frame takes about a millisecond. Both this and the web
replay's board (`arena/ui/web/static/render.js`, ``battle``) draw the same data (the page does not lift
close units' bars).
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Pixels of the map's longer side.
SIZE = 512
#: Pixels around the map (a unit at the edge shows whole) and of the caption above it.
MARGIN, CAPTION = 10, 22
#: The smallest disc radius in pixels.
MIN_RADIUS = 3.0
BACKGROUND = (250, 250, 247)
MAP = (238, 236, 228)
GRID_LINE = (225, 222, 212)
BOUNDS = (120, 110, 100)
SIDE_COLOURS = ((200, 50, 40), (40, 90, 200))
SHOT_COLOURS = ((240, 140, 120), (120, 160, 240))
HEALTH, SHIELD, BAR_BACK = (60, 170, 70), (70, 200, 230), (70, 70, 70)
TEXT = (20, 20, 20)


def view_of(battle: dict) -> tuple[float, float, float, float]:
    """The part of the map drawn, ``(x0, y0, x1, y1)`` in map units: ``battle["view"]`` where a video
    zooms to where a match's units went (`fight_view`), else the whole map."""
    v = battle.get("view")
    return tuple(map(float, v)) if v else (0.0, 0.0, float(battle["width"]), float(battle["height"]))


def fight_view(points: list[tuple[float, float, float]], width: float, height: float,
               pad: float = 3.0) -> tuple[float, float, float, float]:
    """The square around every ``(x, y, radius)`` a match's units ever stood on, `pad` map units more
    on each side, kept inside the map: a video of the match zoomed to its fight (the same view in
    every frame, as a video needs)."""
    if not points:
        return 0.0, 0.0, float(width), float(height)
    xs0 = min(x - r for x, _, r in points) - pad
    xs1 = max(x + r for x, _, r in points) + pad
    ys0 = min(y - r for _, y, r in points) - pad
    ys1 = max(y + r for _, y, r in points) + pad
    side = min(max(xs1 - xs0, ys1 - ys0), float(max(width, height)))
    cx, cy = (xs0 + xs1) / 2, (ys0 + ys1) / 2
    x0 = min(max(cx - side / 2, 0.0), max(float(width) - side, 0.0))
    y0 = min(max(cy - side / 2, 0.0), max(float(height) - side, 0.0))
    return x0, y0, x0 + side, y0 + side


def layout(battle: dict, size: int = SIZE) -> tuple[float, int, int]:
    """``(scale, width, height)``: pixels per map unit and the frame's size in pixels (of the view)."""
    x0, y0, x1, y1 = view_of(battle)
    w, h = x1 - x0, y1 - y0
    scale = size / max(w, h)
    return scale, round(w * scale) + 2 * MARGIN, round(h * scale) + 2 * MARGIN + CAPTION


def _to_px(battle: dict, x: float, y: float, size: int) -> tuple[float, float]:
    scale = layout(battle, size)[0]
    x0, y0 = view_of(battle)[:2]
    return MARGIN + (x - x0) * scale, CAPTION + MARGIN + (y - y0) * scale


def unit_circle(battle: dict, unit: dict, size: int = SIZE) -> tuple[float, float, float]:
    """A unit's disc as drawn: ``(u, v, r)`` in pixels (centre column, row and radius)."""
    scale = layout(battle, size)[0]
    return (*_to_px(battle, unit["x"], unit["y"], size), max(unit["radius"] * scale, MIN_RADIUS))


#: The longest side label a caption shows (an agent's spec, cut with "...").
MAX_LABEL = 24


def caption(battle: dict) -> str:
    """``step 12/60   red 3/3 85%   blue 1/3 12%`` (and ``red wins`` once over); with ``battle["labels"]``
    (who plays each side: a video's players) ``red attack_nearest 3/3 85%``."""
    text = f"step {battle['step']}/{battle['max_steps']}"
    labels = battle.get("labels") or []
    for k, s in enumerate(battle["sides"]):
        who = str(labels[k]) if k < len(labels) else ""
        who = who if len(who) <= MAX_LABEL else who[:MAX_LABEL - 3] + "..."
        text += f"   {s['name']}{' ' + who if who else ''} {s['alive']}/{s['units']} {100 * s['fraction']:.0f}%"
    w = battle.get("winner")
    if w:
        text += "   draw" if w == "draw" else f"   {w} wins"
    return text


def _font(px: int):
    from PIL import ImageFont

    try:
        return ImageFont.load_default(size=px)
    except (TypeError, OSError, ImportError):  # an old Pillow or one without FreeType: the bitmap font
        return ImageFont.load_default()


def draw_frame(battle: dict[str, Any], size: int = SIZE) -> np.ndarray:
    from PIL import Image, ImageDraw

    scale, width, height = layout(battle, size)
    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    (mx0, my0), (mx1, my1) = _to_px(battle, 0, 0, size), _to_px(battle, battle["width"], battle["height"], size)
    draw.rectangle([mx0, my0, mx1, my1], fill=MAP)  # the map (beyond the frame where a view zooms in)
    n = int(battle.get("grid") or 0)
    for k in range(1, n):
        gx, gy = mx0 + k * (mx1 - mx0) / n, my0 + k * (my1 - my0) / n
        draw.line([(gx, my0), (gx, my1)], fill=GRID_LINE, width=1)
        draw.line([(mx0, gy), (mx1, gy)], fill=GRID_LINE, width=1)
    draw.rectangle([mx0, my0, mx1, my1], outline=BOUNDS, width=2)

    units = battle["units"]
    by_slot = {(u["side"], u["slot"]): u for u in units}
    for u in units:
        target = by_slot.get((1 - u["side"], u["shot"])) if u.get("shot") is not None else None
        if target is not None:
            a, b = unit_circle(battle, u, size), unit_circle(battle, target, size)
            draw.line([a[:2], b[:2]], fill=SHOT_COLOURS[u["side"]], width=2)

    font = None
    living = [u for u in units if u["alive"]]
    for u in living:
        cu, cv, r = unit_circle(battle, u, size)
        draw.ellipse([cu - r, cv - r, cu + r, cv + r], fill=SIDE_COLOURS[u["side"]])
        if r >= 5:
            font = font or _font(max(8, int(1.3 * r)))
            box = draw.textbbox((0, 0), u["type"], font=font)
            draw.text((cu - (box[0] + box[2]) / 2, cv - (box[1] + box[3]) / 2), u["type"], fill=(255, 255, 255),
                      font=font)
    placed: list[tuple[float, float, float, float]] = []  # the bar blocks drawn so far (x0, y0, x1, y1)
    for u in living:  # after every disc, so that a neighbour's disc never hides a bar
        cu, cv, r = unit_circle(battle, u, size)
        bars = [(u["health"], HEALTH)] + ([(u["shield"], SHIELD)] if u.get("shield") is not None else [])
        half = max(r, 6.0)
        lift = 0.0  # units standing close: a bar block goes up until it covers no other's
        for _ in range(8):
            block = (cu - half, cv - r - 6 - 4 * (len(bars) - 1) - lift, cu + half, cv - r - 4 - lift)
            # (a pixel and a half of room above and below, so that two bars never touch)
            if not any(block[0] < b[2] and b[0] < block[2] and block[1] < b[3] + 1.5 and b[1] - 1.5 < block[3]
                       for b in placed):
                break
            lift += 4 * len(bars) + 1
        placed.append(block)
        for i, (frac, colour) in enumerate(bars):
            v = cv - r - 5 - 4 * i - lift
            draw.rectangle([cu - half, v - 1, cu + half, v + 1], fill=BAR_BACK)
            if frac > 0:
                draw.rectangle([cu - half, v - 1, cu - half + 2 * half * min(max(frac, 0.0), 1.0), v + 1], fill=colour)
    draw.rectangle([0, 0, width, CAPTION + MARGIN - 1], fill=BACKGROUND)  # the caption's band stays clear
    draw.text((MARGIN, 5), caption(battle), fill=TEXT, font=_font(13))
    return np.asarray(img, dtype=np.uint8)

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
  drawn after all the discs so that a neighbour never hides them;
* a caption: the step, each side's living units and remaining health and shields, and the
  winner once the battle is over.

The scale is fixed by the map (the longer side is `SIZE` pixels), so every frame of a match has
the same size, as a video needs. One frame takes about a millisecond. Both this and the web
replay's board (`arena/ui/web/static/render.js`, ``battle``) draw the same data the same way.
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


def layout(battle: dict, size: int = SIZE) -> tuple[float, int, int]:
    """``(scale, width, height)``: pixels per map unit and the frame's size in pixels."""
    w, h = float(battle["width"]), float(battle["height"])
    scale = size / max(w, h)
    return scale, round(w * scale) + 2 * MARGIN, round(h * scale) + 2 * MARGIN + CAPTION


def unit_circle(battle: dict, unit: dict, size: int = SIZE) -> tuple[float, float, float]:
    """A unit's disc as drawn: ``(u, v, r)`` in pixels (centre column, row and radius)."""
    scale = layout(battle, size)[0]
    return (MARGIN + unit["x"] * scale, CAPTION + MARGIN + unit["y"] * scale,
            max(unit["radius"] * scale, MIN_RADIUS))


def caption(battle: dict) -> str:
    """``step 12/60   red 3/3 85%   blue 1/3 12%`` (and ``red wins`` once over)."""
    text = f"step {battle['step']}/{battle['max_steps']}"
    for s in battle["sides"]:
        text += f"   {s['name']} {s['alive']}/{s['units']} {100 * s['fraction']:.0f}%"
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
    top = CAPTION + MARGIN
    x1, y1 = MARGIN + battle["width"] * scale, top + battle["height"] * scale
    draw.rectangle([MARGIN, top, x1, y1], fill=MAP)
    n = int(battle.get("grid") or 0)
    for k in range(1, n):
        gx, gy = MARGIN + k * battle["width"] * scale / n, top + k * battle["height"] * scale / n
        draw.line([(gx, top), (gx, y1)], fill=GRID_LINE, width=1)
        draw.line([(MARGIN, gy), (x1, gy)], fill=GRID_LINE, width=1)
    draw.rectangle([MARGIN, top, x1, y1], outline=BOUNDS, width=2)

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
    for u in living:  # after every disc, so that a neighbour's disc never hides a bar
        cu, cv, r = unit_circle(battle, u, size)
        bars = [(u["health"], HEALTH)] + ([(u["shield"], SHIELD)] if u.get("shield") is not None else [])
        half = max(r, 6.0)
        for i, (frac, colour) in enumerate(bars):
            v = cv - r - 5 - 4 * i
            draw.rectangle([cu - half, v - 1, cu + half, v + 1], fill=BAR_BACK)
            if frac > 0:
                draw.rectangle([cu - half, v - 1, cu - half + 2 * half * min(max(frac, 0.0), 1.0), v + 1], fill=colour)
    draw.text((MARGIN, 5), caption(battle), fill=TEXT, font=_font(13))
    return np.asarray(img, dtype=np.uint8)

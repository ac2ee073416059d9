"""League plots (PNG): rating curves and payoff heatmaps.

Figures are built on matplotlib's object API with the Agg canvas directly
(no pyplot, no global backend switch, no display), so they can be drawn from
any thread or process, headless. The `*_figure` functions return a Figure and
`figure_png` turns one into PNG bytes, which is how `arena.ui.report`
embeds plots without touching the disk.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure

from arena.league.storage import OVERALL, LeagueStore
from arena.league.queries import game_label, payoff_data
from arena.ui.views import win_rate_rgb

__all__ = [
    "figure_png",
    "fitted_figure",
    "game_slug",
    "payoff_figure",
    "plot_all",
    "plot_payoff",
    "plot_ratings",
    "ratings_figure",
]

_DPI = 100


def game_slug(game: str) -> str:
    """File-name part for a rating scope: 'all' for OVERALL, else the game id with '/' etc. as '_'."""
    return "all" if game == OVERALL else re.sub(r"[^A-Za-z0-9._-]+", "_", game).strip("_") or "game"


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _colours(n: int):
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def ratings_figure(store: LeagueStore, game: str = OVERALL) -> Figure:
    """Elo (top) and OpenSkill mu - 3 sigma (bottom) of every player over the commit sequence."""
    history = store.rating_history(game)
    series: dict[str, list[tuple[int, float, float]]] = {}
    for seq, player, elo, mu, sigma in history:
        series.setdefault(player, []).append((int(seq), float(elo), float(mu) - 3.0 * float(sigma)))
    final_elo = store.elo(game)
    players = sorted(series, key=lambda p: (-final_elo.get(p, series[p][-1][1]), p))
    fig = _figure(11, 7.5)
    ax_elo, ax_os = fig.subplots(2, 1, sharex=True)
    fig.suptitle(f"Ratings: {game_label(game)}", fontsize=13, fontweight="bold")
    if not players:
        for ax in (ax_elo, ax_os):
            ax.text(0.5, 0.5, "no rated results yet", ha="center", va="center", transform=ax.transAxes,
                    color="grey")
    last = max((s[-1][0] for s in series.values()), default=0)
    many_points = len(history) > 400
    for player, colour in zip(players, _colours(len(players))):
        pts = series[player]
        # A rating only changes when its player plays: hold it flat up to the last commit.
        xs = [p[0] for p in pts] + [last]
        for ax, k in ((ax_elo, 1), (ax_os, 2)):
            ys = [p[k] for p in pts] + [pts[-1][k]]
            ax.plot(xs, ys, drawstyle="steps-post", color=colour, linewidth=1.4,
                    marker=None if many_points else ".", markersize=3, markevery=slice(0, len(pts)),
                    label=f"{player} ({final_elo.get(player, pts[-1][1]):.0f})" if k == 1 else player)
    ax_elo.set_ylabel("Elo")
    ax_elo.axhline(1500.0, color="grey", linewidth=0.6, linestyle=":")
    ax_os.set_ylabel("OpenSkill mu - 3 sigma")
    ax_os.set_xlabel("commit sequence")
    for ax in (ax_elo, ax_os):
        ax.grid(True, alpha=0.3)
    if players:
        ax_elo.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
                      ncol=1 + len(players) // 24, title="player (Elo)", title_fontsize=8)
    return fig


def payoff_figure(store: LeagueStore, game: str = OVERALL) -> Figure:
    """Heatmap of the decayed row-vs-column win rates, values annotated, '-' where never met."""
    data = payoff_data(store, game, with_alpharank=False)
    n = len(data.players)
    side = max(5.0, min(22.0, 1.5 + 0.62 * n))
    fig = _figure(side + 1.6, side)
    ax = fig.subplots()
    payoff = data.kind == "payoff"
    by = "mean payoff" if payoff else "Elo"
    top = f", top {n} of {data.total_players} by {by}" if data.capped_note else ""
    what = "mean payoff a match" if payoff else "decayed win rate"
    ax.set_title(f"Payoff: {game_label(game)}{top}\n(row player's {what} vs column player)", fontsize=11)
    if not n:
        ax.text(0.5, 0.5, "no rated results yet", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_axis_off()
        return fig
    cmap = LinearSegmentedColormap.from_list(
        "winrate", [tuple(c / 255 for c in win_rate_rgb(x)) for x in (0.0, 0.5, 1.0)]).with_extremes(bad="#e6e6e6")
    values = data.mean_payoff if payoff else data.win_rate
    if payoff:  # centred on 0: red loses chips, green wins them
        m = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0
        im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-(m or 1.0), vmax=m or 1.0)
    else:
        im = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=0.0, vmax=1.0)
    ax.set_xticks(range(n), labels=data.players, rotation=45, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(n), labels=data.players)
    ax.set_xlabel("column player")
    ax.set_ylabel("row player")
    if n <= 30:
        size = 10 if n <= 8 else 8 if n <= 16 else 6
        for i in range(n):
            for j in range(n):
                x = values[i, j]
                ax.text(j, i, "-" if np.isnan(x) else f"{x:+.2f}" if payoff else f"{x:.2f}", ha="center",
                        va="center", fontsize=size, color="#777777" if np.isnan(x) else "black")
    fig.colorbar(im, ax=ax, shrink=0.8, label="mean payoff a match" if payoff else "win rate")
    return fig


def fitted_figure(board) -> Figure:
    """The fitted table (`arena.league.leaderboard.Leaderboard`) as points with their 95% intervals as
    error bars, best at the top; provisional players in grey."""
    rows = board.rows
    fig = _figure(9, max(2.5, 0.8 + 0.32 * len(rows)))
    ax = fig.subplots()
    ax.set_title(f"Fitted ratings: {game_label(board.scope)} (95% bootstrap intervals, "
                 f"{board.resamples:,} resamples)", fontsize=11)
    if not rows:
        ax.text(0.5, 0.5, "no rated results yet", ha="center", va="center", transform=ax.transAxes, color="grey")
        ax.set_axis_off()
        return fig
    y = np.arange(len(rows))[::-1]
    for k, r in enumerate(rows):
        colour = "#999999" if r.provisional else "#1f5f9f"
        ax.errorbar([r.rating], [y[k]], xerr=[[r.rating - r.lo], [r.hi - r.rating]], fmt="o", color=colour,
                    capsize=3, markersize=5)
    ax.set_yticks(y, labels=[r.player + (" (provisional)" if r.provisional else "") for r in rows])
    if board.anchor:
        ax.axvline(board.anchor_value, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xlabel("rating (Elo scale" + (f", {board.anchor} = {board.anchor_value:g})" if board.anchor else ")"))
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def figure_png(fig: Figure, dpi: int = _DPI) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white")
    return buf.getvalue()


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(figure_png(fig))
    tmp.replace(path)
    return path


def plot_ratings(store: LeagueStore, out_dir: str | Path, game: str = OVERALL) -> Path:
    """Write `ratings_<game>.png` (Elo and OpenSkill conservative over commits); returns its path."""
    return _save(ratings_figure(store, game), Path(out_dir) / f"ratings_{game_slug(game)}.png")


def plot_payoff(store: LeagueStore, out_dir: str | Path, game: str = OVERALL) -> Path:
    """Write `payoff_<game>.png` (win-rate heatmap); returns its path."""
    return _save(payoff_figure(store, game), Path(out_dir) / f"payoff_{game_slug(game)}.png")


def plot_all(store: LeagueStore, out_dir: str | Path) -> list[Path]:
    """Ratings and payoff plots for all games together and for each rated game."""
    games = [OVERALL] + [g for g in store.rated_games() if g != OVERALL]
    out: list[Path] = []
    for g in games:
        out.append(plot_ratings(store, out_dir, g))
        out.append(plot_payoff(store, out_dir, g))
    return out

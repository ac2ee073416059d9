"""A fitted Bradley-Terry rating table with bootstrap intervals.

Elo and OpenSkill (:mod:`arena.league.ratings`) are *online* ratings: they
depend on the order in which results arrived, and they say little about how
sure we are.  This module fits one static model to a whole result log and
says how far to trust each number.

The model
---------
Two-player results ``(a, b, score_a)`` with ``score_a`` 1 (a won), 0.5 (draw)
or 0 (a lost), grouped in *scopes* (a game id).  Each player has a strength
``theta`` and ``p = exp(theta)``; each scope ``s`` a draw propensity
``nu_s >= 0``.  Davidson's (1970) extension of Bradley-Terry to draws:

    P(a beats b) = pa / (pa + pb + nu sqrt(pa pb))
    P(draw)      = nu sqrt(pa pb) / (pa + pb + nu sqrt(pa pb))

Dividing through by ``sqrt(pa pb)`` shows that only ``d = theta_a - theta_b``
matters: with ``Z = 2 cosh(d / 2) + nu`` the three probabilities are
``e^(d/2) / Z``, ``nu / Z`` and ``e^(-d/2) / Z``.  A scope without a single
draw has ``nu = 0`` exactly (plain Bradley-Terry).

A game scored by its payoffs (poker's chips) gives fractional scores: the
margin of a match mapped into ``(0, 1)`` by the caller
(`arena.league.leaderboard`). A score ``s`` other than 0.5 counts as that
share of a win and the rest a loss, ``s log P(a beats b) + (1 - s) log
P(b beats a)``, the way Elo scores a fractional result; the sufficient
statistics are the same sums, so the fit and the bootstrap below are
unchanged (the cells count results per score level instead of per outcome).  For two players the
maximum-likelihood fit reproduces the observed frequencies, so
``d = log(wins / losses)`` and ``nu = draws / sqrt(wins * losses)``.

The fit maximises the (weighted) log-likelihood in ``(theta, log nu)``::

    sum over results  w * log P(observed outcome)  -  prior/8 * sum_i theta_i^2

The last term is a Gaussian prior ``theta ~ N(0, 4 / prior)``.  Why that
scale: a draw scored as half a win and half a loss against a player at 0
contributes ``0.5 log s(t) + 0.5 log s(-t) = -log 2 - t^2 / 8 + O(t^4)``
(``s`` the logistic), so ``prior`` is the number of virtual draws each player
has played against an average opponent.  The default, 2, is weak (a player
with 100 games barely moves) but keeps a player with only wins finite.  The
likelihood does not change when every theta moves by the same constant; the
prior pins the mean of theta at 0.  With ``prior=0`` the term
``(sum theta)^2 / (2 n)`` (zero at the optimum) pins the mean instead, and the
fit is the plain MLE -- infinite for a player with only wins, and undefined
between disconnected groups of players, so use ``prior=0`` for checks only.
Every ``log nu`` carries a vanishing ridge ``1e-6 * (log nu)^2 / 2`` so a
scope (or a bootstrap replicate) made only of draws stays finite (its ``nu``,
infinite in theory, then comes out very large).

Seen as a function of ``(theta, log nu)`` the negative log-likelihood of each
result is ``log(e^(d/2) + e^(-d/2) + e^(log nu))`` (a log-sum-exp of linear
functions, hence convex) minus a linear term, so the objective is convex and,
with the prior, strictly convex: Newton's method with a backtracking line
search reaches the unique optimum from anywhere.

Ratings are reported on the Elo scale: ``rating = anchor_value + (theta -
theta_anchor) * 400 / ln 10``, so a 400-point gap is 10:1 odds between
decisive results.  The anchor is a named player (``"random"`` by default, when
present) whose rating is exactly ``anchor_value``; with ``anchor=None``, or an
anchor absent from the data, the *mean* rating is pinned at ``anchor_value``
instead (:attr:`BTTable.anchor` is then ``None``).

The overall table (scope ``"*"``) fits one theta per player across every
scope and one ``nu`` per scope (games draw at very different rates, so a
shared ``nu`` would misfit all of them; :attr:`BTTable.draw_nu` reports the
mean over scopes).  Each scope weighs the same whatever its number of
results: a result of scope ``s`` has weight ``N / (S * n_s)`` (``N`` results
in all, ``S`` scopes, ``n_s`` in this one), so the weights sum to ``N``.

How it is computed, and why
---------------------------
Results are first aggregated into *cells* ``(scope, i, j)`` holding the
counts of i-wins, draws and j-wins; a league of a million results between a
thousand players has only tens of thousands of cells, and everything below
costs per cell, not per result.

* The point fit is Newton's method on the dense Hessian (a weighted graph
  Laplacian plus the prior, bordered by the ``log nu`` block) with a
  backtracking (Armijo) line search; a few iterations from zero.  Newton
  rather than the minorise-maximise (MM) iterations of Hunter (2004), because
  MM converges linearly and slowly when the comparison graph is thin (players
  who meet only their neighbours in strength), and rather than a black-box
  ``scipy.optimize.minimize`` because the exact Hessian is cheap here and is
  reused below.  Above a few thousand parameters the dense Hessian is
  replaced by conjugate gradients (Jacobi-preconditioned).
* The bootstrap resamples *results* with replacement (within each scope for
  the overall table): per scope, a multinomial redraw of the cell counts --
  drawn exactly, as Poisson counts then topped up or thinned to the scope's
  size (conditionally on its total, a Poisson draw *is* a multinomial).  The
  Poisson counts are drawn by inversion from a guide table per distinct count
  (`_Poisson`: tens of thousands of cells share a few dozen counts).  Each
  replicate is refit from the full fit, all replicates of a batch at once
  (vectorised over cells x replicates; `_refit`): a first step with the full
  fit's inverse Hessian, which costs no evaluation (at the full fit the
  gradient is linear in the counts) and lands a few Elo from the replicate's
  optimum; one Newton step with the replicate's own Hessian (conjugate
  gradients preconditioned by that inverse: a few hundredths of an Elo off);
  then steps with the fixed inverse Hessian, a gradient each, until one is
  below 1e-4 in theta (what is left: about 1e-3 Elo against refits converged
  to 1e-12, measured on the benchmark league below).  A replicate whose step
  does not lower its gradient norm goes on by full Newton steps with a line
  search on the gradient norm.  The next two batches are redrawn by two
  background threads while this one is fitted (numpy releases the GIL), each
  batch with its own generator spawned from the seed, so the draws do not
  depend on timing.  ``benchmarks/bench_bt.py``: 1,000 players, a million
  results, 1,000 resamples and 200 stability replicates in about 4 s on 2
  cores (``benchmarks/bench_ratings_scale.py``: the same from a league's
  database, the read included).
* 95% intervals are bootstrap percentiles (2.5% and 97.5%), on the rating and
  on the rank; an interval is widened to contain the point estimate when it
  does not (it can, for a player at the edge of the data).  The anchor's
  interval is a point: ratings are differences to it.
* Ranks: 1 is the best rating, ties (to 1e-9 points) broken by name, among
  the established players; the provisional ones (fewer than
  ``provisional_games`` results, or a rating interval wider than
  ``provisional_width``) are ranked among themselves after them, in the point
  fit and in every resample, so a newcomer's wild resamples never widen an
  established player's rank interval.  A provisional player's rank interval
  says where it would stand among the established (1 + those above it).
* Stability: ``stability_replicates`` times, drop a random ``drop_fraction``
  of all results (drawn over all scopes, at least one, without replacement;
  the other results keep their weights), refit, and count how often the
  top-``k`` of the established players' fitted order is unchanged (same
  players, same order).  A small figure says the top of the table is decided by a handful
  of games.

``choix`` (a Bradley-Terry / Luce fitting library) exists but is not used: it
has no Davidson draws, no per-result weights, no bootstrap, and fits one
problem at a time, where the bootstrap here fits hundreds of replicates in
one vectorised pass.

Everything is deterministic for a given ``seed``: the same results (in any
order) give an identical table.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.special
import scipy.sparse as sp

__all__ = [
    "ELO_PER_NAT",
    "BTRow",
    "BTTable",
    "Results",
    "bt_probabilities",
    "fit_bt",
]

#: Elo points per unit of theta (natural log odds): 400 / ln 10.
ELO_PER_NAT = 400.0 / math.log(10.0)

_ETA_RIDGE = 1e-6  # on log nu, see the module docstring
_DENSE_MAX = 3000  # parameters above which Newton systems are solved by Jacobi-preconditioned CG
_BATCH = 128  # bootstrap replicates fitted together
_TOL_FIT = 1e-9  # the point fit stops once no parameter moves by more (theta units)
_TOL_BOOT = 1e-4  # a replicate stops once its step is below this (`_refit`; what is left: ~1e-3 Elo)
_MAX_NEWTON = 100
_QUASI_STEPS = 4  # steps with the full fit's Hessian after a replicate's Newton step (`_refit`)


# --------------------------------------------------------------------------
# Inputs and outputs
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Results:
    """Two-player results as arrays (the fast input of :func:`fit_bt`).

    ``scope[k]``, ``a[k]`` and ``b[k]`` are integer codes into ``scopes`` and
    ``players``; ``score_a[k]`` is 1 (a won), 0.5 (draw) or 0 (a lost), or a
    fraction in between: a payoff game's margin, fitted as that share of a
    win and the rest a loss (the result's log-likelihood is
    ``s log P(a wins) + (1 - s) log P(b wins)``, as Elo scores a fractional
    result); 0.5 is always a draw.
    """

    scope: np.ndarray
    a: np.ndarray
    b: np.ndarray
    score_a: np.ndarray
    scopes: list[str]
    players: list[str]
    #: Resampling units: results with the same code >= 0 (a duplicate pair's two matches, seats and
    #: deals swapped) are redrawn together by the bootstrap; -1 (or None: every result) alone.
    unit: np.ndarray | None = None
    #: Results a row stands for (alike: the same scope, players and score); None: one each. A row of a
    #: unit (``unit >= 0``) is one result.
    count: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("scope", "a", "b"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64).ravel())
        if self.unit is not None:
            object.__setattr__(self, "unit", np.asarray(self.unit, dtype=np.int64).ravel())
            if len(self.unit) != len(self.scope):
                raise ValueError("unit must have one code a result")
        if self.count is not None:
            object.__setattr__(self, "count", np.asarray(self.count, dtype=np.int64).ravel())
            if len(self.count) != len(self.scope) or (len(self.count) and self.count.min() < 1):
                raise ValueError("count must have one count >= 1 a row")
            if self.unit is not None and (self.count[self.unit >= 0] != 1).any():
                raise ValueError("a row of a unit (unit >= 0) is one result: count 1")
        object.__setattr__(self, "score_a", np.asarray(self.score_a, dtype=np.float64).ravel())
        object.__setattr__(self, "scopes", [str(s) for s in self.scopes])
        object.__setattr__(self, "players", [str(p) for p in self.players])
        n = len(self.scope)
        if not (len(self.a) == len(self.b) == len(self.score_a) == n):
            raise ValueError("scope, a, b and score_a must have the same length")
        if n:
            if self.scope.min() < 0 or self.scope.max() >= len(self.scopes):
                raise ValueError("scope codes out of range")
            lo, hi = min(self.a.min(), self.b.min()), max(self.a.max(), self.b.max())
            if lo < 0 or hi >= len(self.players):
                raise ValueError("player codes out of range")
            same = self.a == self.b
            if same.any():
                k = int(np.flatnonzero(same)[0])
                raise ValueError(f"a player cannot be rated against itself: {self.players[self.a[k]]!r}")
            s = self.score_a
            bad = ~((s >= 0.0) & (s <= 1.0))
            if bad.any():
                raise ValueError(f"score_a must be in [0, 1] (1 a win, 0.5 a draw, 0 a loss), got "
                                 f"{s[np.flatnonzero(bad)[0]]}")

    def __len__(self) -> int:
        return len(self.scope)

    @property
    def weights(self) -> np.ndarray:
        """Results per row."""
        return self.count if self.count is not None else np.ones(len(self.scope), dtype=np.int64)

    @classmethod
    def from_tuples(cls, rows: Sequence[tuple[str, str, str, float]]) -> Results:
        """Build from ``(scope, a, b, score_a)`` tuples (names are coded in sorted order)."""
        rows = list(rows)
        if not rows:
            return cls(np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), [], [])
        columns = list(zip(*rows))
        scope_names, a_names, b_names = (list(map(str, col)) for col in columns[:3])
        scores = columns[3]
        scopes = sorted(set(scope_names))
        players = sorted(set(a_names).union(b_names))
        scope_code = {name: k for k, name in enumerate(scopes)}
        player_code = {name: k for k, name in enumerate(players)}
        n = len(rows)

        def codes(names: list[str], table: dict[str, int]) -> np.ndarray:
            return np.fromiter(map(table.__getitem__, names), dtype=np.int64, count=n)

        return cls(codes(scope_names, scope_code), codes(a_names, player_code), codes(b_names, player_code),
                   np.asarray(scores, dtype=np.float64), scopes, players)


@dataclass(frozen=True)
class BTRow:
    """One player's line in a :class:`BTTable`."""

    player: str
    rating: float  # Elo scale, anchored
    lo: float  # 95% bootstrap interval on the rating
    hi: float
    rank: int  # 1 = best, in the fitted order among all players
    rank_lo: int  # 95% interval on the rank (best, worst)
    rank_hi: int
    games: int  # results the player took part in (unweighted count)
    provisional: bool


@dataclass(frozen=True)
class BTTable:
    """A fitted Bradley-Terry table for one scope (or ``"*"``, all of them)."""

    scope: str  # a game id, or "*" for the overall table
    rows: list[BTRow]  # established first (rating desc), then provisional
    anchor: str | None  # the pinned player (None: the mean is pinned)
    anchor_value: float  # 1000.0 by default
    draw_nu: float  # Davidson's nu (the overall table: mean over scopes)
    resamples: int
    stability: float | None  # fraction of drop-1% replicates with the top-k order unchanged (None if < 2 players)
    top_k: int
    results: int  # results fitted


def bt_probabilities(theta_a: float, theta_b: float, nu: float) -> tuple[float, float, float]:
    """``(P(a wins), P(draw), P(a loses))`` under Davidson's model (natural-log strengths)."""
    if nu < 0:
        raise ValueError(f"nu must be >= 0, got {nu}")
    h = 0.5 * (float(theta_a) - float(theta_b))
    m = abs(h)
    u, v, t = math.exp(h - m), math.exp(-h - m), float(nu) * math.exp(-m)
    z = u + v + t
    return u / z, t / z, v / z


# --------------------------------------------------------------------------
# The aggregated problem
# --------------------------------------------------------------------------


@dataclass
class _Cells:
    """Results aggregated per ``(scope, i, j)``, ``i < j`` local player indices."""

    names: list[str]  # local players, sorted by name
    games: np.ndarray  # (n,) unweighted results per player
    counts: np.ndarray  # (C, L) int: results of each score level for i (`levels`: 1 i wins, 0.5 a draw, 0 j wins)
    levels: np.ndarray  # (L,) the score levels for i, best first; fractional ones (a payoff's margin) count
    #                     as that share of a win and the rest a loss
    weight: np.ndarray  # (C,) per-result weight of the cell's scope
    cell_scope: np.ndarray  # (C,) local scope index
    scope_sizes: np.ndarray  # (S,) results per local scope
    draw_scope: np.ndarray  # (C,) index into the fitted nus, Sd for a scope without draws
    n_draw: int  # Sd: scopes with at least one draw (a fitted nu each)
    n_scopes: int
    E: sp.csr_matrix  # (C, n): +1 at i, -1 at j
    ET: sp.csr_matrix  # (n, C)
    P: sp.csr_matrix | None  # (Sd, C) scope membership of draw cells
    PT: sp.csr_matrix | None  # (C, Sd)
    prior: float
    Eh: sp.csr_matrix  # E / 2: theta -> h, half the strength difference per cell
    ETh: sp.csr_matrix  # its transpose
    blocks: list[tuple[int, int, int]]  # (first cell, end, fitted nu index) per scope with draws
    ci: np.ndarray  # (C,) the cell's first player (i < j)
    cj: np.ndarray  # (C,) and second
    #: Results resampled together (`Results.unit`): each such result's (cell * L + level) and unit code;
    #: None where every result is a unit of its own
    paired: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def n(self) -> int:
        return len(self.names)

    @property
    def dim(self) -> int:
        return self.n + self.n_draw


def _aggregate(res: Results, scope: str, prior: float) -> _Cells | None:
    if scope == "*":
        mask = np.ones(len(res), dtype=bool)
    else:
        if scope not in res.scopes:
            return None
        mask = res.scope == res.scopes.index(scope)
    if not mask.any():
        return None
    s_codes, a, b, score, w = res.scope[mask], res.a[mask], res.b[mask], res.score_a[mask], res.weights[mask]
    # local players, in name order (so the fit does not depend on the coding)
    present = np.unique(np.concatenate([a, b]))
    present = present[np.argsort(np.asarray([res.players[k] for k in present]), kind="stable")]
    local = np.full(len(res.players), -1, dtype=np.int64)
    local[present] = np.arange(len(present))
    la, lb = local[a], local[b]
    n = len(present)
    games = (np.bincount(la, w, n) + np.bincount(lb, w, n)).astype(np.int64)
    scope_present = np.unique(s_codes)
    scope_present = scope_present[np.argsort(np.asarray([res.scopes[k] for k in scope_present]), kind="stable")]
    slocal = np.full(len(res.scopes), -1, dtype=np.int64)
    slocal[scope_present] = np.arange(len(scope_present))
    ls = slocal[s_codes]
    S = len(scope_present)
    i, j = np.minimum(la, lb), np.maximum(la, lb)
    score_i = np.round(np.where(la < lb, score, 1.0 - score), 9)
    # the score levels present, best first (1, 0.5, 0 in a win/draw/loss scope: i wins, draws, j wins)
    levels, outcome = np.unique(-score_i, return_inverse=True)
    levels = -levels
    L = len(levels)
    key = (ls * n + i) * n + j
    ukey, cell = np.unique(key, return_inverse=True)
    C = len(ukey)
    counts = np.bincount(cell * L + outcome, w, L * C).astype(np.int64).reshape(C, L)
    ci, cj = (ukey % (n * n)) // n, ukey % n
    cs = ukey // (n * n)
    scope_sizes = np.bincount(ls, w, S).astype(np.int64)
    total = int(w.sum())
    weight = (total / (S * scope_sizes))[cs].astype(np.float64)
    draws_per_scope = np.bincount(cs, weights=counts[:, levels == 0.5].sum(1), minlength=S)
    draw_scopes = np.flatnonzero(draws_per_scope > 0)
    Sd = len(draw_scopes)
    dmap = np.full(S, Sd, dtype=np.int64)
    dmap[draw_scopes] = np.arange(Sd)
    draw_scope = dmap[cs]
    rows = np.repeat(np.arange(C), 2)
    cols = np.stack([ci, cj], axis=1).ravel()
    vals = np.tile([1.0, -1.0], C)
    E = sp.csr_matrix((vals, (rows, cols)), shape=(C, n))
    P = PT = None
    if Sd:
        dc = np.flatnonzero(draw_scope < Sd)
        P = sp.csr_matrix((np.ones(len(dc)), (draw_scope[dc], dc)), shape=(Sd, C))
        PT = P.T.tocsr()
    # cells are sorted by scope (the scope leads the key), so each scope is one block of cells
    bounds = np.searchsorted(cs, np.arange(S + 1))
    blocks = [(int(bounds[s]), int(bounds[s + 1]), int(dmap[s])) for s in draw_scopes]
    ET = E.T.tocsr()
    paired = None
    if res.unit is not None:
        u = res.unit[mask]
        together = u >= 0
        if together.any():
            paired = ((cell * L + outcome)[together], u[together])
    return _Cells(names=[res.players[k] for k in present], games=games, counts=counts, levels=levels, weight=weight,
                  cell_scope=cs, scope_sizes=scope_sizes, draw_scope=draw_scope, n_draw=Sd, n_scopes=S,
                  E=E, ET=ET, P=P, PT=PT, prior=float(prior), Eh=(0.5 * E).tocsr(), ETh=(0.5 * ET).tocsr(),
                  blocks=blocks, ci=ci, cj=cj, paired=paired)


# --------------------------------------------------------------------------
# Objective, gradient, Hessian (vectorised over replicates: columns)
# --------------------------------------------------------------------------


class _Data:
    """One batch of replicates (columns), in the forms the objective needs.

    ``N`` (C, R): weighted results per cell; ``b`` (n, R): half the weighted
    wins minus losses per player (the linear term in theta); ``Dtot`` (Sd, R):
    weighted draws per fitted scope (the linear term in log nu).
    """

    def __init__(self, N: np.ndarray, b: np.ndarray, Dtot: np.ndarray | None) -> None:
        self.N, self.b, self.Dtot = N, b, Dtot

    def take(self, keep: np.ndarray) -> _Data:
        return _Data(self.N[:, keep], self.b[:, keep], self.Dtot[:, keep] if self.Dtot is not None else None)


def _win_share(cells: _Cells, tau: np.ndarray, eta: np.ndarray) -> np.ndarray:
    """``q = P(i wins) + P(j wins)`` per cell (C, R) from ``tau = tanh h`` and the log nus ``eta``."""
    half_nu = 0.5 * np.exp(eta)
    a = tau * tau
    np.subtract(1.0, a, out=a)
    np.sqrt(a, out=a)  # 1 / cosh h
    drawless = np.ones(len(a), dtype=bool)
    for lo, hi, d in cells.blocks:
        a[lo:hi] *= half_nu[d]
        drawless[lo:hi] = False
    a[drawless] = 0.0
    a += 1.0
    return np.reciprocal(a, out=a)


def _linear_start(cells: _Cells, x_hat: np.ndarray, minv: np.ndarray, data: _Data) -> np.ndarray:
    """Each replicate's first Newton step from the full fit ``x_hat`` (dim, 1), taken with the full
    fit's inverse Hessian ``minv``: ``x_hat - minv g`` (dim, R).  At ``x_hat`` the gradient is linear
    in the replicate's counts, so this costs a few sparse products, not an evaluation; it lands
    within a few Elo of the replicate's optimum, which Newton's method then reaches in two steps."""
    n = cells.n
    th = x_hat[:n]
    tau = np.tanh(cells.Eh @ th)
    g = np.empty((cells.dim, data.N.shape[1]))
    rest = (cells.prior / 4.0) * th + th.sum(0) / n
    if cells.n_draw:
        eta = x_hat[n:]
        q = _win_share(cells, tau, eta)
        g[:n] = cells.ETh @ (data.N * (tau * q)) - data.b + rest
        g[n:] = cells.P @ (data.N * (1.0 - q)) + _ETA_RIDGE * eta - data.Dtot
    else:
        g[:n] = cells.ETh @ (data.N * tau) - data.b + rest
    return x_hat - minv @ g


class _Eval:
    """Objective (optionally) and derivatives at ``x`` (dim, R), one column per replicate.

    In terms of ``h = (theta_i - theta_j) / 2`` and ``tau = tanh(h)``, a cell's
    ``P(i wins) - P(j wins) = tau q`` and ``P(i wins) + P(j wins) = q`` with
    ``q = 1 / (1 + nu / (2 cosh h))`` (``q = 1`` without draws), and
    ``P(draw) = 1 - q``; ``1 / cosh h = sqrt(1 - tau^2)``.  Derivatives are
    taken in ``h`` and ``log nu``: per cell, ``d/dh = N tau q - (W - L)``,
    ``d2/dh2 = N (q - (tau q)^2)``, ``d2/dh dlognu = -N tau q (1 - q)``,
    ``d2/dlognu2 = N q (1 - q)``.  A scope's ``nu`` is one number, so the
    draw terms are handled per block of cells (a broadcast, not a gather).
    The log (the objective itself) is only needed by the point fit's line
    search; ``hessian=False`` leaves the second derivatives out (the
    gradient alone, for a step with a fixed Hessian).
    """

    def __init__(self, cells: _Cells, x: np.ndarray, data: _Data, objective: bool = True,
                 hessian: bool = True) -> None:
        n, Sd = cells.n, cells.n_draw
        self.cells = cells
        th = x[:n]
        h = cells.Eh @ th
        N = data.N
        sth = th.sum(0)
        if objective:
            f = (cells.prior / 8.0) * (th * th).sum(0) + sth * sth / (2.0 * n) - (data.b * th).sum(0)
            m = np.abs(h)
            e = np.exp(-m)
            z = 1.0 + e * e
            if Sd:
                eta = x[n:]
                f += 0.5 * _ETA_RIDGE * (eta * eta).sum(0) - (data.Dtot * eta).sum(0)
                for lo, hi, d in cells.blocks:
                    z[lo:hi] += np.exp(eta[d]) * e[lo:hi]
            m += np.log(z)
            f += (N * m).sum(0)
            self.f = f
        tau = np.tanh(h)
        g = np.empty_like(x)
        if Sd:
            eta = x[n:]
            q = _win_share(cells, tau, eta)
            dw = tau * q  # P(i wins) - P(j wins)
            if hessian:
                hh = q - dw * dw
                hh *= N
            Npd = np.subtract(1.0, q)
            Npd *= N  # N P(draw)
            g[:n] = cells.ETh @ (N * dw) - data.b + (cells.prior / 4.0) * th + sth / n
            for lo, hi, d in cells.blocks:
                g[n + d] = Npd[lo:hi].sum(0)
            g[n:] += _ETA_RIDGE * eta - data.Dtot
            if hessian:
                dw *= Npd
                dw *= -1.0
                self.h_he = dw
                Npd *= q
                self.h_ee = Npd
        else:
            if hessian:
                hh = tau * tau
                np.subtract(1.0, hh, out=hh)
                hh *= N
            tau *= N
            g[:n] = cells.ETh @ tau - data.b + (cells.prior / 4.0) * th + sth / n
        if hessian:
            self.h_hh = hh
        self.g = g
        self.gg = (g * g).sum(0)

    def take(self, keep: np.ndarray) -> _Eval:
        out = object.__new__(_Eval)
        out.cells = self.cells
        out.g, out.gg, out.h_hh = self.g[:, keep], self.gg[keep], self.h_hh[:, keep]
        if hasattr(self, "f"):
            out.f = self.f[keep]
        if self.cells.n_draw:
            out.h_he, out.h_ee = self.h_he[:, keep], self.h_ee[:, keep]
        return out

    def hv(self, v: np.ndarray) -> np.ndarray:
        """Hessian times ``v`` (dim, R), column by column."""
        c = self.cells
        n = c.n
        vt = v[:n]
        dv = c.Eh @ vt
        out = np.empty_like(v)
        if c.n_draw:
            t = self.h_hh * dv
            for lo, hi, d in c.blocks:
                ve = v[n + d]
                t[lo:hi] += self.h_he[lo:hi] * ve
                out[n + d] = (self.h_he[lo:hi] * dv[lo:hi]).sum(0) + (self.h_ee[lo:hi].sum(0) + _ETA_RIDGE) * ve
            out[:n] = c.ETh @ t
        else:
            dv *= self.h_hh
            out[:n] = c.ETh @ dv
        out[:n] += (c.prior / 4.0) * vt + vt.sum(0) / n
        return out

    def diag(self) -> np.ndarray:
        c = self.cells
        n = c.n
        d = np.empty((c.dim, self.h_hh.shape[1]))
        d[:n] = 0.25 * (abs(c.ET) @ self.h_hh) + c.prior / 4.0 + 1.0 / n
        for lo, hi, k in c.blocks:
            d[n + k] = self.h_ee[lo:hi].sum(0) + _ETA_RIDGE
        return d

    def dense(self) -> np.ndarray:
        """The Hessian for a single column (dim, dim), for Newton steps and the preconditioner."""
        c = self.cells
        n = c.n
        H = np.empty((c.dim, c.dim))
        H[:n, :n] = (c.ETh @ sp.diags(self.h_hh[:, 0]) @ c.Eh).toarray()
        # (+1e-10: with prior=0 a runaway theta leaves the Hessian singular; the step, not the
        # objective, carries this ridge, so the optimum is unchanged)
        H[:n, :n] += np.eye(n) * (c.prior / 4.0 + 1e-10) + 1.0 / n
        if c.n_draw:
            B = (c.ETh @ sp.diags(self.h_he[:, 0]) @ c.PT).toarray()
            H[:n, n:] = B
            H[n:, :n] = B.T
            H[n:, n:] = np.diag(c.P @ self.h_ee[:, 0] + _ETA_RIDGE)
        return H


def _pcg(ev: _Eval, b: np.ndarray, precond: Callable[[np.ndarray], np.ndarray], rtol: float,
         maxiter: int) -> np.ndarray:
    """Solve ``H x = b`` per column by preconditioned conjugate gradients.

    A column that has converged is frozen: iterating on a residual at
    rounding level would divide noise by noise and spoil it.
    """
    x = np.zeros_like(b)
    r = b.copy()
    goal = rtol * np.sqrt((b * b).sum(0))
    live = np.sqrt((r * r).sum(0)) > goal
    z = precond(r)
    p = z.copy()
    rz = (r * z).sum(0)
    for _ in range(maxiter):
        if not live.any():
            break
        Ap = ev.hv(p)
        pAp = (p * Ap).sum(0)
        alpha = np.divide(rz, pAp, out=np.zeros_like(rz), where=live & (pAp > 0))
        x += alpha * p
        r -= alpha * Ap
        live &= np.sqrt((r * r).sum(0)) > goal
        z = precond(r)
        rz_new = (r * z).sum(0)
        beta = np.divide(rz_new, rz, out=np.zeros_like(rz), where=live & (rz > 0))
        p = z + beta * p
        rz = rz_new
    return x


def _newton(cells: _Cells, x0: np.ndarray, data: _Data, minv: np.ndarray | None, dense: bool,
            tol: float, cold: bool) -> np.ndarray:
    """Minimise the objective for every column of ``x0`` (dim, R), the start.

    ``dense``: solve each Newton system exactly (one column only).  Otherwise
    conjugate gradients, preconditioned by ``minv`` (an approximate inverse
    Hessian) or, without it, by the Hessian's diagonal.  A column stops once
    its Newton step moves no parameter by more than ``tol`` (the step is
    taken; Newton converges quadratically, so what is left is far smaller).
    """
    x = np.array(x0, dtype=np.float64, copy=True)
    active = np.arange(x.shape[1])
    xa = x
    ev = _Eval(cells, xa, data, objective=cold)
    for _ in range(_MAX_NEWTON):
        if dense:
            with warnings.catch_warnings():  # ill-conditioned only when prior=0 lets a theta run off
                warnings.simplefilter("ignore", scipy.linalg.LinAlgWarning)
                step = scipy.linalg.solve(ev.dense(), -ev.g, assume_a="pos")
        else:
            # (a plain function: ``array.__mul__`` as the preconditioner would let numpy's
            # temporary elision write the product over the array itself)
            if minv is not None:
                def precond(r: np.ndarray, m: np.ndarray = minv) -> np.ndarray:
                    return m @ r
            else:
                dinv = np.reciprocal(ev.diag())

                def precond(r: np.ndarray, d: np.ndarray = dinv) -> np.ndarray:
                    return r * d

            step = _pcg(ev, -ev.g, precond, rtol=1e-4, maxiter=200)
        size = np.abs(step).max(0)
        small = size < tol
        if small.all():  # every column's last step: taken as it is (no line search, no evaluation)
            x[:, active] = xa + step
            break
        # Backtracking line search, evaluating derivatives at the trial point so that an
        # accepted step (the usual case) costs one evaluation in all.  From a cold start the
        # merit is the objective (Armijo); a warm-started refit uses the squared gradient norm,
        # for which the Newton direction is a descent direction too (slope -|g|^2), and which
        # spares computing logs.
        t = np.ones(len(active))
        slope = (ev.g * step).sum(0)
        for _ls in range(40):
            xn = xa + t * step
            evn = _Eval(cells, xn, data, objective=cold)
            if cold:
                ok = evn.f <= ev.f + 1e-4 * t * slope + 1e-12 * np.abs(ev.f)
            else:
                ok = evn.gg <= (1.0 - 1e-4 * t) * ev.gg
            ok |= small
            if ok.all():
                break
            t = np.where(ok, t, 0.5 * t)
        x[:, active] = xn
        if small.any():
            keep = ~small
            active, data, evn = active[keep], data.take(keep), evn.take(keep)
            xn = xn[:, keep]
        xa, ev = xn, evn
    return x


@functools.cache
def _threadpools():
    """threadpoolctl's controller (its scan of the loaded libraries made once)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _one_blas_thread():
    """A context in which BLAS runs one thread."""
    return _threadpools().limit(limits=1, user_api="blas")


def _refit(cells: _Cells, x_hat: np.ndarray, minv: np.ndarray, data: _Data, tol: float) -> np.ndarray:
    """Every replicate of a batch (the columns of ``data``) fitted from the full fit ``x_hat`` with the
    full fit's inverse Hessian ``minv``: the linear start (`_linear_start`, a few Elo off), one Newton
    step (the replicate's own Hessian, by conjugate gradients: a few hundredths of an Elo off), then
    steps with ``minv`` fixed, a gradient each, until one is below ``tol`` (taken: what is left is a
    fraction of it).  A replicate whose step does not lower its gradient norm, or that has not stopped
    after ``_QUASI_STEPS``, goes on by `_newton` (exact Hessian, line search) from where it is."""
    x = _linear_start(cells, x_hat, minv, data)
    ev = _Eval(cells, x, data, objective=False)

    def precond(r: np.ndarray, m: np.ndarray = minv) -> np.ndarray:
        return m @ r

    x = x + _pcg(ev, -ev.g, precond, rtol=1e-4, maxiter=200)
    gg = ev.gg
    out = np.empty_like(x)
    active = np.arange(x.shape[1])
    handed: list[tuple[np.ndarray, np.ndarray, _Data]] = []
    for _ in range(_QUASI_STEPS):
        evg = _Eval(cells, x, data, objective=False, hessian=False)
        worse = evg.gg > gg
        if worse.any():
            handed.append((active[worse], x[:, worse], data.take(worse)))
        step = -(minv @ evg.g)
        done = (np.abs(step).max(0) < tol) & ~worse
        out[:, active[done]] = x[:, done] + step[:, done]
        going = ~done & ~worse
        active, x, gg, data = active[going], x[:, going] + step[:, going], evg.gg[going], data.take(going)
        if not active.size:
            break
    if active.size:
        handed.append((active, x, data))
    for cols, start, part in handed:
        out[:, cols] = _newton(cells, start, part, minv, dense=False, tol=tol, cold=False)
    return out


# --------------------------------------------------------------------------
# Resampling
# --------------------------------------------------------------------------


#: Poisson means up to this are drawn by inversion from a table (`_Poisson`); larger ones by numpy
_TABLE_MAX = 10_000
#: Draws handled at once by `_Poisson.draw` (a block of 64k: 512 KiB a float array, in a core's cache)
_CHUNK = 65_536


class _Poisson:
    """Poisson draws with a fixed vector of whole-number means ``counts`` (times ``scale``), by inversion.

    The counts of a bootstrap are the cell counts: tens of thousands of them but few distinct values.
    Each distinct mean gets its CDF and a guide table (Chen and Asau's indexed search: the first value
    whose CDF passes ``j / M``, and that value's CDF), so a draw is a uniform, two table lookups and
    a comparison, then a check that steps the rare draw the guide left short; exact to the CDF's
    rounding (scipy's ``pdtr``), and several times faster than numpy's Poisson on small means (whose
    multiplication method spends ``mean + 1`` uniforms a draw).  Means above ``_TABLE_MAX`` go to
    numpy's (its PTRS method is fast there).
    """

    def __init__(self, counts: np.ndarray, scale: float = 1.0) -> None:
        counts = np.asarray(counts, dtype=np.int64)
        self.size = len(counts)
        order = np.argsort(counts, kind="stable")
        # counts sorted already (a scope's categories are, `_Flat`): no permutation to undo
        self.order = None if (order == np.arange(self.size)).all() else order
        values, starts = np.unique(counts[order], return_index=True)
        ends = np.r_[starts[1:], self.size]
        self.groups: list[tuple[float, int, int, tuple[np.ndarray, np.ndarray, np.ndarray] | None]] = []
        for c, lo, hi in zip(values.tolist(), starts.tolist(), ends.tolist()):
            mean, table = c * scale, None
            if 0 < mean <= _TABLE_MAX:
                top = int(mean + 12.0 * math.sqrt(mean) + 30.0)  # P(X >= top) < 1e-25
                cdf = scipy.special.pdtr(np.arange(top), mean)
                cdf[-1] = 1.0
                m = 4 * top
                guide = np.searchsorted(cdf, np.arange(m) / m, side="right")
                table = (cdf, guide, cdf[guide])
            self.groups.append((mean, lo, hi, table))

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``(len(counts), size)`` draws (whole numbers, as floats: what the fit multiplies), one column
        per replicate."""
        out = np.zeros((self.size, size))
        u = rng.random((self.size, size))
        for mean, lo, hi, table in self.groups:
            if table is None:
                if mean > 0:
                    out[lo:hi] = rng.poisson(mean, size=(hi - lo, size))
                continue
            cdf, guide, passed = table
            rows = max(1, _CHUNK // size)  # a block of draws small enough to stay in the core's cache
            for a in range(lo, hi, rows):
                v = u[a:min(hi, a + rows)]
                j = (v * len(guide)).astype(np.intp)
                k = guide[j]
                k += v >= passed[j]  # the guide's value or the next: most draws are settled here
                while True:  # the rest (where a guide cell holds several CDF values: the tails)
                    step = v >= cdf[k]
                    if not step.any():
                        break
                    k += step
                out[a:a + len(v)] = k
        if self.order is not None:
            unsorted = np.empty_like(out)
            unsorted[self.order] = out
            out = unsorted
        return out


def _multinomial(rng: np.random.Generator, counts: np.ndarray, size: int,
                 poisson: _Poisson | None = None) -> np.ndarray:
    """``size`` multinomial redraws (K, size), one column each, of ``counts.sum()`` items with
    frequencies ``counts`` (``poisson``: a `_Poisson` of ``counts``, kept between calls); whole
    numbers, as floats.

    Poisson counts, then topped up with i.i.d. draws or thinned uniformly to the exact total:
    conditionally on its total a Poisson vector is a multinomial sample, and adding i.i.d. items to
    (or removing random items from) an i.i.d. sample leaves an i.i.d. sample, so this is exact.
    """
    n = int(counts.sum())
    out = (poisson or _Poisson(counts)).draw(rng, size)
    diff = (n - out.sum(0)).round().astype(np.int64)
    up = np.flatnonzero(diff > 0)
    if up.size:  # every column's top-up at once
        cols = np.repeat(up, diff[up])
        np.add.at(out, (np.searchsorted(np.cumsum(counts), rng.integers(0, n, size=cols.size), side="right"),
                        cols), 1)
    for r in np.flatnonzero(diff < 0):
        col = out[:, r]
        pos = rng.choice(n - int(diff[r]), size=-int(diff[r]), replace=False)
        np.subtract.at(col, np.searchsorted(np.cumsum(col), pos, side="right"), 1)
    return out


class _Flat:
    """The nonzero (cell, outcome) counts ("categories"), grouped by scope, for resampling.

    Categories are ordered by scope, then count (so a scope's are one run of rows, and its Poisson
    means come sorted).  Redrawn category counts (K, R) become a batch of :class:`_Data` through
    three sparse maps (results per cell, the linear term per player, draws per fitted scope), each
    carrying the scope weights.
    """

    def __init__(self, cells: _Cells) -> None:
        flat = cells.counts.ravel()
        nz = np.flatnonzero(flat)
        L = cells.counts.shape[1]
        nz = nz[np.lexsort((flat[nz], cells.cell_scope[nz // L]))]
        self.values = flat[nz]
        cell, level = nz // L, cells.levels[nz % L]
        scope_of = cells.cell_scope[cell]
        bounds = np.searchsorted(scope_of, np.arange(cells.n_scopes + 1))
        self.spans = [(int(bounds[s]), int(bounds[s + 1])) for s in range(cells.n_scopes)]
        K, C = len(nz), len(cells.counts)
        w = cells.weight[cell]
        k = np.arange(K)
        self.to_N = sp.csr_matrix((w, (cell, k)), shape=(C, K))
        sign = (level - 0.5) * w  # i's share of a win less its share of a loss, halved (0 for a draw)
        i, j = cells.ci[cell], cells.cj[cell]
        self.to_b = sp.csr_matrix((np.concatenate([sign, -sign]), (np.concatenate([i, j]), np.concatenate([k, k]))),
                                  shape=(cells.n, K))
        self.to_D = None
        if cells.n_draw:
            ds = cells.draw_scope[cell]
            keep = (level == 0.5) & (ds < cells.n_draw)
            self.to_D = sp.csr_matrix((w[keep], (ds[keep], k[keep])), shape=(cells.n_draw, K))
        # Units of several results (duplicate pairs): the bootstrap draws units, not results. Units of
        # the same make-up (the same categories) are one "type": per scope, a multinomial over the
        # single results' categories and the unit types, each type then adding its categories.
        self.units = None
        if cells.paired is not None:
            pos, unit = cells.paired
            where = np.full(flat.size, -1, dtype=np.int64)
            where[nz] = k
            cat = where[pos]  # the result's category (a nonzero count: it is there)
            singles = self.values - np.bincount(cat, minlength=K)
            order = np.lexsort((cat, unit))
            u_sorted, c_sorted = unit[order], cat[order]
            starts = np.flatnonzero(np.r_[True, u_sorted[1:] != u_sorted[:-1]])
            sizes = np.diff(np.r_[starts, len(u_sorted)])
            # each unit's categories, sorted, as one row padded with -1: equal rows are one type
            make_up = np.full((len(starts), int(sizes.max())), -1, dtype=np.int64)
            col = np.arange(len(u_sorted)) - np.repeat(starts, sizes)
            make_up[np.repeat(np.arange(len(starts)), sizes), col] = c_sorted
            types, n_of = np.unique(make_up, axis=0, return_counts=True)
            t_rows, t_cols = np.nonzero(types >= 0)
            T = sp.csr_matrix((np.ones(len(t_rows)), (t_rows, types[t_rows, t_cols])), shape=(len(types), K))
            t_scope = scope_of[types[:, 0]]  # a unit's results are of one game: its first one's scope
            t_groups = [np.flatnonzero(t_scope == sc) for sc in range(cells.n_scopes)]
            self.units = (singles, n_of, T.T.tocsc(), t_groups)
            draws_of = [np.concatenate([singles[lo:hi], n_of[tg]]) for (lo, hi), tg in zip(self.spans, t_groups)]
        else:
            draws_of = [self.values[lo:hi] for lo, hi in self.spans]
        self.poisson = [_Poisson(c) for c in draws_of]  # each scope's redraw tables, made once

    def data(self, draws: np.ndarray) -> _Data:
        """``draws``: (K, R) category counts, a column per replicate, or (K,) for one column."""
        X = np.asarray(draws, dtype=np.float64)
        if X.ndim == 1:
            X = X[:, None]
        return _Data(self.to_N @ X, self.to_b @ X, self.to_D @ X if self.to_D is not None else None)


def _boot_counts(rng: np.random.Generator, flat: _Flat, size: int) -> np.ndarray:
    """``size`` bootstrap redraws (K, size) of the category counts, each scope keeping its size (its
    number of units: a duplicate pair is redrawn whole, `_Flat.units`)."""
    out = np.zeros((len(flat.values), size))
    if flat.units is None:
        for (lo, hi), pois in zip(flat.spans, flat.poisson):
            out[lo:hi] = _multinomial(rng, flat.values[lo:hi], size, pois)
        return out
    singles, n_of, TT, t_groups = flat.units
    for (lo, hi), tg, pois in zip(flat.spans, t_groups, flat.poisson):
        drawn = _multinomial(rng, np.concatenate([singles[lo:hi], n_of[tg]]), size, pois)
        out[lo:hi] += drawn[:hi - lo]
        if len(tg):
            out += TT[:, tg] @ drawn[hi - lo:]
    return out


def _drop_counts(rng: np.random.Generator, flat: _Flat, size: int, fraction: float) -> np.ndarray:
    """``size`` copies (K, size) of the category counts, each less a random ``fraction`` of all results."""
    n = int(flat.values.sum())
    m = min(n, max(1, round(fraction * n)))
    cum = np.cumsum(flat.values)
    out = np.repeat(flat.values[:, None].astype(np.float64), size, axis=1)
    for r in range(size):
        pos = rng.choice(n, size=m, replace=False)
        np.subtract.at(out[:, r], np.searchsorted(cum, pos, side="right"), 1)
    return out


def _batches(make: Callable[[np.random.Generator, int], _Data], total: int,
             seed: np.random.SeedSequence) -> Iterator[tuple[int, int, _Data]]:
    """``(first, size, data)`` for batches of ``_BATCH`` replicates, in order.

    Batch ``k`` is drawn with its own generator (the ``k``-th child of
    ``seed``), so the draws, hence the table, do not depend on timing: two
    background threads draw the next batches while the caller fits this one
    (numpy releases the GIL in both).
    """
    spans = [(lo, min(_BATCH, total - lo)) for lo in range(0, total, _BATCH)]
    seeds = seed.spawn(len(spans))
    with ThreadPoolExecutor(max_workers=2) as pool:
        pending = [pool.submit(make, np.random.default_rng(seeds[k]), spans[k][1]) for k in range(min(2, len(spans)))]
        for k, (lo, size) in enumerate(spans):
            data = pending.pop(0).result()
            if k + 2 < len(spans):
                pending.append(pool.submit(make, np.random.default_rng(seeds[k + 2]), spans[k + 2][1]))
            yield lo, size, data


# --------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------


def _order(rating: np.ndarray) -> np.ndarray:
    """Indices best first per column; ties (to 1e-9 Elo) by name (local indices are in name order)."""
    return np.argsort(-np.round(rating, 9), axis=0, kind="stable")


def _grouped_ranks(values: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """``[n, R]`` ranks of each column's values, best first (ties by name, `_order`): the first group's
    players among themselves (1, 2, ...), then the next group's after every one of them, and so on."""
    ranks = np.empty(values.shape, dtype=np.int64)
    first = 1
    for idx in groups:
        if idx.size:
            o = _order(values[idx])
            local = np.empty_like(o)
            np.put_along_axis(local, o, np.arange(first, first + idx.size)[:, None], axis=0)
            ranks[idx] = local
            first += idx.size
    return ranks


def _standing(values: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """``[len(groups[1]), R]``: where each of the second group's players would rank among the first
    group's in each column (1 + those strictly above it, to 1e-9)."""
    est = np.sort(np.round(values[groups[0]], 9), axis=0)
    prov = np.round(values[groups[1]], 9)
    out = np.empty(prov.shape, dtype=np.int64)
    for r in range(values.shape[1]):  # above = the established minus those at or below it
        out[:, r] = 1 + est.shape[0] - np.searchsorted(est[:, r], prov[:, r], side="right")
    return out


def _to_results(results: Results | Sequence[tuple[str, str, str, float]]) -> Results:
    if isinstance(results, Results):
        return results
    return Results.from_tuples(results)


def fit_bt(
    results: Results | Sequence[tuple[str, str, str, float]],
    *,
    scope: str = "*",
    anchor: str | None = "random",
    anchor_value: float = 1000.0,
    prior: float = 2.0,
    resamples: int = 1000,
    seed: int = 0,
    provisional_games: int = 20,
    provisional_width: float = 400.0,
    top_k: int = 3,
    drop_fraction: float = 0.01,
    stability_replicates: int = 200,
) -> BTTable:
    """Fit Davidson-Bradley-Terry ratings with bootstrap intervals (see the module docstring).

    ``results``: ``(scope, a, b, score_a)`` tuples or a :class:`Results`.
    ``scope``: a scope name (only its results), or ``"*"`` (every scope,
    weighted equally).  ``anchor``: the player pinned at ``anchor_value``
    (``None``, or a name absent from the fitted results, pins the mean).
    ``prior``: strength of the Gaussian prior on theta, in virtual draws
    against an average player.  ``resamples``: bootstrap replicates (0: the
    intervals are the point estimates).  A player is provisional with fewer
    than ``provisional_games`` results or a rating interval wider than
    ``provisional_width``.  ``seed`` makes the bootstrap and the stability
    replicates reproducible (two independent streams, so changing one count
    leaves the other figure alone).  ``stability`` is the fraction of
    ``stability_replicates`` refits, each without a random ``drop_fraction``
    of the results, whose top ``top_k`` (fewer with fewer players; the table
    reports the ``k`` used) is the fitted one in the same order; ``None`` with
    fewer than two players or ``stability_replicates=0``.  An empty selection
    (no results, or a scope nobody played) gives a table without rows.
    """
    if prior < 0:
        raise ValueError(f"prior must be >= 0, got {prior}")
    if resamples < 0 or stability_replicates < 0:
        raise ValueError("resamples and stability_replicates must be >= 0")
    if not 0.0 <= drop_fraction < 1.0:
        raise ValueError(f"drop_fraction must be in [0, 1), got {drop_fraction}")
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    res = _to_results(results)
    cells = _aggregate(res, scope, prior)
    if cells is None:
        return BTTable(scope=scope, rows=[], anchor=None, anchor_value=float(anchor_value), draw_nu=0.0,
                       resamples=int(resamples), stability=None, top_k=int(top_k), results=0)
    n, dim = cells.n, cells.dim
    k_top = min(int(top_k), n)
    flat = _Flat(cells)
    data0 = flat.data(flat.values)
    dense = dim <= _DENSE_MAX
    x_hat = _newton(cells, np.zeros((dim, 1)), data0, None, dense=dense, tol=_TOL_FIT, cold=True)
    minv = None
    if dense and (resamples or stability_replicates):
        H = _Eval(cells, x_hat, data0).dense()
        minv = scipy.linalg.cho_solve(scipy.linalg.cho_factor(H), np.eye(dim))
    theta = x_hat[:n, 0]

    anchor_idx = cells.names.index(anchor) if anchor is not None and anchor in cells.names else None

    def ratings(th: np.ndarray) -> np.ndarray:
        ref = th[anchor_idx] if anchor_idx is not None else th.mean(0)
        return anchor_value + ELO_PER_NAT * (th - ref)

    rating = ratings(theta)
    if anchor_idx is not None:
        rating[anchor_idx] = float(anchor_value)  # exactly, not up to rounding

    ss_boot, ss_stab = np.random.SeedSequence(seed).spawn(2)

    def refit(data: _Data) -> np.ndarray:
        if minv is not None:
            # one BLAS thread: the products with the inverse Hessian are small, and BLAS threads would
            # spin on the cores the drawing threads need (a quarter longer on 2 cores)
            with _one_blas_thread():
                return _refit(cells, x_hat, minv, data, _TOL_BOOT)
        start = np.repeat(x_hat, data.N.shape[1], axis=1)
        return _newton(cells, start, data, minv, dense=False, tol=_TOL_BOOT, cold=False)

    if resamples:
        boot_ratings = np.empty((n, resamples))

        def resampled(rng: np.random.Generator, k: int) -> _Data:
            return flat.data(_boot_counts(rng, flat, k))

        for lo, size, data in _batches(resampled, resamples, ss_boot):
            boot_ratings[:, lo:lo + size] = ratings(refit(data)[:n])
        r_lo = np.minimum(np.percentile(boot_ratings, 2.5, axis=1), rating)
        r_hi = np.maximum(np.percentile(boot_ratings, 97.5, axis=1), rating)
        if anchor_idx is not None:
            r_lo[anchor_idx] = r_hi[anchor_idx] = float(anchor_value)
    else:
        r_lo, r_hi = rating.copy(), rating.copy()
    # Provisional players are ranked apart, after the established: a newcomer's wild resamples never
    # move an established player's rank interval (nor the stability of the top)
    provisional = (cells.games < provisional_games) | (r_hi - r_lo > provisional_width)
    groups = [np.flatnonzero(~provisional), np.flatnonzero(provisional)]
    rank = _grouped_ranks(rating[:, None], groups)[:, 0]
    # a provisional player's interval says where it would stand among the established (its own
    # uncertainty, which theirs never sees): 1 + the established above it, point and resamples
    standing = rank.copy()
    standing[groups[1]] = _standing(rating[:, None], groups)[:, 0]
    if resamples:
        boot_ranks = _grouped_ranks(boot_ratings, groups)
        boot_ranks[groups[1]] = _standing(boot_ratings, groups)
        k_lo = np.minimum(np.percentile(boot_ranks, 2.5, axis=1, method="lower"), standing).astype(np.int64)
        k_hi = np.maximum(np.percentile(boot_ranks, 97.5, axis=1, method="higher"), standing).astype(np.int64)
    else:
        k_lo, k_hi = standing.copy(), standing.copy()

    stability: float | None = None
    if n >= 2 and stability_replicates:
        core = groups[0] if groups[0].size else np.arange(n)
        k_top = min(int(top_k), core.size)
        top = core[_order(rating[core, None])[:k_top, 0]]
        same = 0

        def dropped(rng: np.random.Generator, k: int) -> _Data:
            return flat.data(_drop_counts(rng, flat, k, drop_fraction))

        for _lo, _size, data in _batches(dropped, stability_replicates, ss_stab):
            o = core[_order(ratings(refit(data)[:n])[core])[:k_top]]
            same += int((o == top[:, None]).all(0).sum())
        stability = same / stability_replicates

    nus = np.zeros(cells.n_scopes)
    if cells.n_draw:
        has = np.unique(cells.cell_scope[cells.draw_scope < cells.n_draw])
        nus[has] = np.exp(x_hat[n:, 0])
    rows = []
    for k in range(n):
        width = float(r_hi[k] - r_lo[k])
        rows.append(BTRow(player=cells.names[k], rating=float(rating[k]), lo=float(r_lo[k]), hi=float(r_hi[k]),
                          rank=int(rank[k]), rank_lo=int(k_lo[k]), rank_hi=int(k_hi[k]),
                          games=int(cells.games[k]), provisional=bool(provisional[k])))
    rows.sort(key=lambda r: (r.provisional, r.rank))  # rank: rating desc, ties by name
    return BTTable(scope=scope, rows=rows, anchor=cells.names[anchor_idx] if anchor_idx is not None else None,
                   anchor_value=float(anchor_value), draw_nu=float(nus.mean()), resamples=int(resamples),
                   stability=stability, top_k=k_top, results=int(cells.counts.sum()))

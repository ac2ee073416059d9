"""Tests for the fitted Bradley-Terry table (arena.league.bt), with hand-worked values."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import scipy.optimize

from arena.league import bt as btmod
from arena.league.bt import ELO_PER_NAT, BTTable, Results, bt_probabilities, fit_bt


def _games(scope: str, a: str, b: str, wins: int, draws: int = 0, losses: int = 0) -> list[tuple[str, str, str, float]]:
    return [(scope, a, b, 1.0)] * wins + [(scope, a, b, 0.5)] * draws + [(scope, a, b, 0.0)] * losses


def _row(table: BTTable, player: str):
    return next(r for r in table.rows if r.player == player)


def _league(strengths: dict[str, float], n: int, seed: int, scope: str = "g", nu: float = 0.0):
    """n results between random pairs drawn from Davidson's model with the given thetas."""
    rng = np.random.default_rng(seed)
    names = sorted(strengths)
    out = []
    for _ in range(n):
        a, b = rng.choice(len(names), size=2, replace=False)
        pw, pd, _pl = bt_probabilities(strengths[names[a]], strengths[names[b]], nu)
        u = rng.random()
        out.append((scope, names[a], names[b], 1.0 if u < pw else (0.5 if u < pw + pd else 0.0)))
    return out


QUICK = {"resamples": 50, "stability_replicates": 20}

# ---------------------------------------------------------------- the model


def test_bt_probabilities_by_hand() -> None:
    # pa = 4, pb = 1, nu = 1: Z = 4 + 1 + 1 * sqrt(4) = 7
    pw, pd, pl = bt_probabilities(math.log(4.0), 0.0, 1.0)
    assert (pw, pd, pl) == pytest.approx((4 / 7, 2 / 7, 1 / 7), abs=1e-15)
    # nu = 0 is plain Bradley-Terry: the logistic of the difference
    pw, pd, pl = bt_probabilities(1.3, 0.2, 0.0)
    assert pd == 0.0 and pw == pytest.approx(1 / (1 + math.exp(-1.1))) and pw + pl == pytest.approx(1.0)
    # symmetric, and no overflow far apart
    assert bt_probabilities(0.3, -0.4, 0.5) == pytest.approx(bt_probabilities(-0.4, 0.3, 0.5)[::-1])
    assert bt_probabilities(2000.0, 0.0, 1.0) == pytest.approx((1.0, 0.0, 0.0))
    with pytest.raises(ValueError):
        bt_probabilities(0.0, 0.0, -1.0)


def test_two_players_closed_form_mle() -> None:
    # 7 wins out of 10, no prior: theta_A - theta_B = log(7 / 3)
    t = fit_bt(_games("g", "A", "B", 7, losses=3), prior=0.0, anchor=None, **QUICK)
    a, b = _row(t, "A"), _row(t, "B")
    assert (a.rating - b.rating) / ELO_PER_NAT == pytest.approx(math.log(7 / 3), abs=1e-9)
    assert (a.rating + b.rating) / 2 == pytest.approx(1000.0, abs=1e-9)  # the mean is pinned
    assert t.draw_nu == 0.0  # no draws: plain Bradley-Terry, nu exactly 0
    assert (a.rank, b.rank) == (1, 2) and t.results == 10 and a.games == b.games == 10


def test_three_player_cycle_gives_equal_ratings() -> None:
    rows = _games("g", "A", "B", 6, losses=3) + _games("g", "B", "C", 6, losses=3) + _games("g", "C", "A", 6, losses=3)
    t = fit_bt(rows, anchor=None, **QUICK)
    for r in t.rows:
        assert r.rating == pytest.approx(1000.0, abs=1e-7)
    t0 = fit_bt(rows, anchor=None, prior=0.0, resamples=0, stability_replicates=0)
    assert [r.rating for r in t0.rows] == pytest.approx([1000.0] * 3, abs=1e-7)


def test_davidson_nu_two_players() -> None:
    # w = 6, d = 4, l = 3: at the MLE nu = d / sqrt(w l) and theta_A - theta_B = log(w / l)
    t = fit_bt(_games("g", "A", "B", 6, draws=4, losses=3), prior=0.0, anchor=None, **QUICK)
    assert t.draw_nu == pytest.approx(4 / math.sqrt(18), rel=1e-6)
    assert (_row(t, "A").rating - _row(t, "B").rating) / ELO_PER_NAT == pytest.approx(math.log(2.0), abs=1e-7)


def test_only_wins_is_finite_with_the_prior() -> None:
    rows = _games("g", "A", "B", 30) + _games("g", "B", "C", 10, losses=10)
    t = fit_bt(rows, anchor="C", **QUICK)
    a = _row(t, "A")
    assert math.isfinite(a.rating) and math.isfinite(a.lo) and math.isfinite(a.hi)
    assert a.rating > _row(t, "B").rating + 200  # clearly stronger, but not infinitely
    assert a.rank == 1

    # two players, A wins all n: with theta_A = -theta_B = x the optimum solves
    # 2 n sigmoid(-2x) = prior x / 2 (the derivative of n log(1 + e^(-2x)) + prior 2 x^2 / 8)
    n, prior = 30, 2.0
    x = scipy.optimize.brentq(lambda x: 2 * n / (1 + math.exp(2 * x)) - prior * x / 2, 0.0, 50.0)
    t2 = fit_bt(_games("g", "A", "B", n), prior=prior, anchor=None, resamples=0, stability_replicates=0)
    assert (_row(t2, "A").rating - _row(t2, "B").rating) / ELO_PER_NAT == pytest.approx(2 * x, abs=1e-9)


def test_anchor_is_exact_and_falls_back_to_the_mean() -> None:
    rows = _league({"random": -1.0, "A": 0.3, "B": 0.5, "C": 1.0}, 400, seed=1)
    t = fit_bt(rows, anchor_value=1500.0, **QUICK)
    r = _row(t, "random")
    assert t.anchor == "random" and t.anchor_value == 1500.0
    assert r.rating == 1500.0 and r.lo == 1500.0 and r.hi == 1500.0
    assert all(x.rating > 1500.0 for x in t.rows if x.player != "random")
    # an anchor absent from the data pins the mean instead
    t2 = fit_bt(rows, anchor="nobody", **QUICK)
    assert t2.anchor is None
    assert np.mean([x.rating for x in t2.rows]) == pytest.approx(1000.0, abs=1e-9)
    # the gaps do not depend on the anchor
    t3 = fit_bt(rows, anchor=None, **QUICK)
    assert _row(t3, "C").rating - _row(t3, "A").rating == pytest.approx(_row(t, "C").rating - _row(t, "A").rating)


def test_provisional_rule_both_ways() -> None:
    rows = _league({"A": 0.0, "B": 0.4, "C": 0.8}, 600, seed=2) + _games("g", "D", "A", 3, losses=2)
    t = fit_bt(rows, anchor=None, **QUICK)
    assert _row(t, "D").games == 5 and _row(t, "D").provisional  # too few games
    assert not any(_row(t, p).provisional for p in "ABC")
    assert t.rows[-1].player == "D"  # established rows first, whatever D's rating
    ratings = [r.rating for r in t.rows if not r.provisional]
    assert ratings == sorted(ratings, reverse=True)
    # the width rule: every interval is wider than 1 point, none wider than 10,000
    wide = fit_bt(rows, anchor=None, provisional_games=0, provisional_width=1.0, **QUICK)
    assert all(r.provisional for r in wide.rows)
    narrow = fit_bt(rows, anchor=None, provisional_games=0, provisional_width=10_000.0, **QUICK)
    assert not any(r.provisional for r in narrow.rows)
    # ...and the anchor's interval is a point, so it is never provisional by width
    anchored = fit_bt(rows, anchor="A", provisional_games=0, provisional_width=1.0, **QUICK)
    assert not _row(anchored, "A").provisional and _row(anchored, "B").provisional


def test_scopes_weigh_equally() -> None:
    # A beats B 3:1 in a small scope, B beats A 3:1 in a scope with 100x the results
    small = _games("small", "A", "B", 75, losses=25)
    big = _games("big", "A", "B", 2500, losses=7500)
    t = fit_bt(small + big, anchor=None, **QUICK)
    assert t.scope == "*" and t.results == 10_100
    assert _row(t, "A").rating == pytest.approx(_row(t, "B").rating, abs=1e-6)
    assert _row(t, "A").games == 10_100
    # each scope on its own
    gap = ELO_PER_NAT * math.log(3.0)
    ts = fit_bt(small + big, scope="small", anchor=None, prior=0.0, **QUICK)
    assert ts.results == 100 and _row(ts, "A").rating - _row(ts, "B").rating == pytest.approx(gap, abs=1e-6)
    tb = fit_bt(small + big, scope="big", anchor=None, prior=0.0, **QUICK)
    assert tb.results == 10_000 and _row(tb, "B").rating - _row(tb, "A").rating == pytest.approx(gap, abs=1e-6)
    # a scope nobody played gives an empty table
    empty = fit_bt(small, scope="nope")
    assert empty.rows == [] and empty.results == 0 and empty.stability is None


def test_draw_nu_per_scope_and_overall_mean() -> None:
    rows = _games("chess", "A", "B", 6, draws=4, losses=3) + _games("go", "A", "B", 5, losses=5)
    t = fit_bt(rows, anchor=None, prior=0.0, **QUICK)
    # one nu per scope (go has none: 0); the table reports their mean
    chess = fit_bt(rows, scope="chess", anchor=None, prior=0.0, **QUICK)
    go = fit_bt(rows, scope="go", anchor=None, prior=0.0, **QUICK)
    assert go.draw_nu == 0.0 and chess.draw_nu == pytest.approx(4 / math.sqrt(18), rel=1e-6)
    assert 0.0 < t.draw_nu < chess.draw_nu


def test_seeded_reproducibility() -> None:
    rows = _league({"A": 0.0, "B": 0.2, "C": 0.4, "D": 0.6, "E": 0.8}, 300, seed=3, nu=0.5)
    t1 = fit_bt(rows, seed=7, **QUICK)
    t2 = fit_bt(rows, seed=7, **QUICK)
    assert t1 == t2
    # the same results in another order, or as arrays, give the very same table
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    assert fit_bt(shuffled, seed=7, **QUICK) == t1
    assert fit_bt(Results.from_tuples(rows), seed=7, **QUICK) == t1
    t3 = fit_bt(rows, seed=8, **QUICK)
    assert [r.rating for r in t3.rows] == [r.rating for r in t1.rows]  # the fit is not random
    assert [(r.lo, r.hi) for r in t3.rows] != [(r.lo, r.hi) for r in t1.rows]


def test_intervals_contain_the_estimate_and_shrink_with_data() -> None:
    strengths = {"A": -0.5, "B": 0.0, "C": 0.3, "D": 0.7, "E": 1.2}
    small = fit_bt(_league(strengths, 400, seed=4), anchor=None, resamples=200, stability_replicates=0)
    large = fit_bt(_league(strengths, 4000, seed=5), anchor=None, resamples=200, stability_replicates=0)
    for t in (small, large):
        for r in t.rows:
            assert r.lo <= r.rating <= r.hi
            assert r.lo < r.hi
    w_small = np.median([r.hi - r.lo for r in small.rows])
    w_large = np.median([r.hi - r.lo for r in large.rows])
    assert w_large < 0.5 * w_small  # ~ 1 / sqrt(10)
    # 4000 results recover the true order
    assert [r.player for r in large.rows] == ["E", "D", "C", "B", "A"]


def test_rank_intervals_are_sane() -> None:
    strengths = {"A": 3.0, "B": 0.1, "C": 0.0, "D": -0.1, "E": -0.2}
    t = fit_bt(_league(strengths, 1000, seed=6), anchor=None, resamples=200, stability_replicates=0)
    n = len(t.rows)
    assert sorted(r.rank for r in t.rows) == list(range(1, n + 1))
    for r in t.rows:
        assert 1 <= r.rank_lo <= r.rank <= r.rank_hi <= n
    a = _row(t, "A")
    assert (a.rank, a.rank_lo, a.rank_hi) == (1, 1, 1)  # far ahead of the pack
    # the four near-equal players have overlapping, wide rank intervals
    assert all(_row(t, p).rank_hi - _row(t, p).rank_lo >= 1 for p in "BCDE")
    # rank follows rating
    by_rating = sorted(t.rows, key=lambda r: -r.rating)
    assert [r.rank for r in by_rating] == list(range(1, n + 1))


def test_stability() -> None:
    clear = _league({"A": 3.0, "B": 1.5, "C": 0.0, "D": -1.5}, 2000, seed=7)
    t = fit_bt(clear, resamples=0, stability_replicates=50)
    assert t.stability == 1.0 and t.top_k == 3
    # a near tie at the top: dropping 1% of results flips it sometimes
    tie = _games("g", "A", "B", 50, losses=49) + _league({"A": 0.0, "B": 0.0, "C": -2.0}, 300, seed=8)
    t2 = fit_bt(tie, resamples=0, stability_replicates=100, drop_fraction=0.05)
    assert 0.0 < t2.stability < 1.0
    # two players: top-k shrinks to 2; no replicates: no figure
    t3 = fit_bt(_games("g", "A", "B", 7, losses=3), resamples=0, stability_replicates=10)
    assert t3.top_k == 2 and t3.stability is not None
    assert fit_bt(clear, resamples=0, stability_replicates=0).stability is None


def _reference_fit(rows, prior):
    """Plain maximum a posteriori fit: the negative log-posterior written out per result.

    Parameters: theta per player and log nu per scope that has draws.  Scopes weigh equally.
    Minimised by BFGS with complex-step derivatives (exact to rounding).
    """
    players = sorted({p for _, a, b, _ in rows for p in (a, b)})
    scopes = sorted({s for s, *_ in rows})
    draw_scopes = sorted({s for s, _, _, x in rows if x == 0.5})
    pi = {p: k for k, p in enumerate(players)}
    si = {s: len(players) + k for k, s in enumerate(draw_scopes)}
    size = {s: sum(1 for r in rows if r[0] == s) for s in scopes}
    N, S = len(rows), len(scopes)
    A = np.array([pi[a] for _, a, _, _ in rows])
    B = np.array([pi[b] for _, _, b, _ in rows])
    score = np.array([x for *_, x in rows])
    w = np.array([N / (S * size[s]) for s, *_ in rows])
    nu_index = np.array([si.get(s, -1) for s, *_ in rows])

    def nll(x):
        pa, pb = np.exp(x[A]), np.exp(x[B])
        nu = np.where(nu_index >= 0, np.exp(x[np.maximum(nu_index, 0)]), 0.0)
        z = pa + pb + nu * np.sqrt(pa * pb)
        # a fractional score s (a payoff game's margin): that share of a win, the rest a loss
        logp = np.where(score == 0.5, np.log(np.where(score == 0.5, nu, 1.0) * np.sqrt(pa * pb) / z),
                        score * np.log(pa / z) + (1.0 - score) * np.log(pb / z))
        theta = x[: len(players)]
        return -(w * logp).sum() + prior / 8.0 * (theta * theta).sum()

    def grad(x):
        g = np.empty(len(x))
        for k in range(len(x)):
            xc = x.astype(complex)
            xc[k] += 1e-30j
            g[k] = nll(xc).imag / 1e-30
        return g

    x0 = np.zeros(len(players) + len(draw_scopes))
    out = scipy.optimize.minimize(nll, x0, jac=grad, method="BFGS", options={"gtol": 1e-11, "maxiter": 10_000})
    theta = out.x[: len(players)]
    return dict(zip(players, theta - theta.mean())), [math.exp(v) for v in out.x[len(players):]]


def test_matches_an_independent_reference_fit() -> None:
    rng = random.Random(11)
    strengths = {p: rng.gauss(0, 1) for p in "ABCDEF"}
    rows = _league(strengths, 150, seed=9, scope="chess", nu=0.8) + _league(strengths, 40, seed=10, scope="go")
    rows += _games("go", "A", "F", 3)  # and a lopsided pair
    t = fit_bt(rows, anchor=None, prior=2.0, resamples=0, stability_replicates=0)
    ref_theta, ref_nu = _reference_fit(rows, prior=2.0)
    for p, theta in ref_theta.items():
        assert (_row(t, p).rating - 1000.0) / ELO_PER_NAT == pytest.approx(theta, abs=1e-6)
    assert t.draw_nu == pytest.approx((ref_nu[0] + 0.0) / 2, abs=1e-6)  # chess's nu, go's 0, averaged


def test_fractional_scores_match_the_reference_fit() -> None:
    """A payoff game's margins as fractional scores (0.25: a quarter of a win and three quarters of a
    loss), mixed with draws and whole results: the same optimum as the per-result reference."""
    rng = random.Random(5)
    rows = []
    for _ in range(400):
        a, b = rng.sample("ABCD", 2)
        rows.append(("poker", a, b, rng.choice([0.0, 0.25, 0.375, 0.5, 0.625, 0.75, 1.0])))
    rows += [("poker", "A", "B", 0.75)] * 30  # A wins small pots from B, often
    t = fit_bt(rows, anchor=None, prior=2.0, resamples=50, stability_replicates=0)
    ref_theta, ref_nu = _reference_fit(rows, prior=2.0)
    for p, theta in ref_theta.items():
        assert (_row(t, p).rating - 1000.0) / ELO_PER_NAT == pytest.approx(theta, abs=1e-6)
    assert t.draw_nu == pytest.approx(ref_nu[0], abs=1e-6)
    assert _row(t, "A").rating > _row(t, "B").rating
    # a player who wins 3/4 of the stakes in every match rates as one scoring 0.75: log(3) apart
    two = fit_bt([("g", "X", "Y", 0.75)] * 200, anchor="Y", prior=0.0, resamples=0, stability_replicates=0)
    assert (_row(two, "X").rating - 1000.0) / ELO_PER_NAT == pytest.approx(math.log(3.0), abs=1e-6)


def test_input_validation() -> None:
    with pytest.raises(ValueError, match="itself"):
        fit_bt([("g", "A", "A", 1.0)])
    with pytest.raises(ValueError, match="score_a"):
        fit_bt([("g", "A", "B", 1.5)])
    with pytest.raises(ValueError, match="score_a"):
        fit_bt([("g", "A", "B", -0.25)])
    with pytest.raises(ValueError):
        fit_bt([("g", "A", "B", 1.0)], prior=-1.0)
    assert fit_bt([]).rows == []


def test_results_from_tuples_codes_names() -> None:
    res = Results.from_tuples([("go", "b", "a", 1.0), ("chess", "a", "c", 0.5)])
    assert res.scopes == ["chess", "go"] and res.players == ["a", "b", "c"]
    assert res.scope.tolist() == [1, 0] and res.a.tolist() == [1, 0] and res.b.tolist() == [0, 2]
    assert res.score_a.tolist() == [1.0, 0.5] and len(res) == 2


def test_bootstrap_redraw_is_an_exact_size_multinomial() -> None:
    rng = np.random.default_rng(0)
    counts = np.array([5, 1, 30, 2, 12])
    draws = btmod._multinomial(rng, counts, 4000)
    assert draws.shape == (5, 4000)  # a column per replicate
    assert (draws.sum(0) == counts.sum()).all() and (draws >= 0).all()
    assert draws.mean(1) == pytest.approx(counts, rel=0.05)
    # the multinomial variance n p (1 - p), not Poisson's n p
    p = counts / counts.sum()
    assert draws.var(1) == pytest.approx(counts.sum() * p * (1 - p), rel=0.1)


def test_every_solver_path_reaches_the_same_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dense Newton (the point fit), the warm-started batched refits (conjugate gradients with
    the full fit's inverse Hessian, or with the diagonal) and the large-problem path all agree."""
    rng = random.Random(12)
    strengths = {f"p{k}": rng.gauss(0, 1) for k in range(12)}
    rows = _league(strengths, 500, seed=13, scope="a", nu=0.5) + _league(strengths, 200, seed=14, scope="b")
    cells = btmod._aggregate(Results.from_tuples(rows), "*", 2.0)
    flat = btmod._Flat(cells)
    draws = btmod._boot_counts(np.random.default_rng(0), flat, 6)
    data = flat.data(draws)
    dim = cells.dim
    # reference: each replicate fitted alone, cold, by dense Newton
    ref = np.hstack([
        btmod._newton(cells, np.zeros((dim, 1)), data.take(np.array([k])), None, dense=True,
                      tol=btmod._TOL_FIT, cold=True)
        for k in range(6)
    ])
    data0 = flat.data(flat.values)
    x_hat = btmod._newton(cells, np.zeros((dim, 1)), data0, None, dense=True, tol=btmod._TOL_FIT, cold=True)
    minv = np.linalg.inv(btmod._Eval(cells, x_hat, data0).dense())
    start = np.repeat(x_hat, 6, axis=1)
    solves = _count_solves(monkeypatch)
    for m in (minv, None):
        solves.clear()
        got = btmod._newton(cells, start, data, m, dense=False, tol=btmod._TOL_BOOT, cold=False)
        assert np.abs(got - ref).max() < 1e-7
        # every Newton system is solved to the tolerance asked, so Newton converges in a few steps
        assert max(solves) < 1e-4 and len(solves) <= 5
    monkeypatch.undo()
    # the point fit by conjugate gradients, as for problems too large for a dense Hessian
    monkeypatch.setattr(btmod, "_DENSE_MAX", 0)
    t_cg = fit_bt(rows, anchor=None, resamples=20, stability_replicates=10)
    monkeypatch.undo()
    t_dense = fit_bt(rows, anchor=None, resamples=20, stability_replicates=10)
    assert [r.rating for r in t_cg.rows] == pytest.approx([r.rating for r in t_dense.rows], abs=1e-6)
    # (each replicate stops once its step is below `_TOL_BOOT`: a few thousandths of an Elo from its optimum)
    assert [x for r in t_cg.rows for x in (r.lo, r.hi)] == pytest.approx(
        [x for r in t_dense.rows for x in (r.lo, r.hi)], abs=0.01)


def test_jacobi_path_on_a_batch_large_enough_for_numpy_temporary_elision(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a preconditioner written as ``array.__mul__`` let numpy reuse the array's own
    buffer for the product (temporary elision, only above 256 KiB), spoiling every later solve."""
    rng = np.random.default_rng(15)
    n, results = 300, 6000
    a = rng.integers(0, n, results)
    b = (a + rng.integers(1, n, results)) % n
    res = Results(np.zeros(results, dtype=int), a, b, rng.choice([0.0, 1.0], results), ["g"],
                  [f"p{k:03d}" for k in range(n)])
    cells = btmod._aggregate(res, "*", 2.0)
    flat = btmod._Flat(cells)
    R = 120  # (n + 0) x R doubles > 256 KiB
    assert cells.dim * R * 8 > 256 * 1024
    data = flat.data(btmod._boot_counts(np.random.default_rng(0), flat, R))
    data0 = flat.data(flat.values)
    x_hat = btmod._newton(cells, np.zeros((cells.dim, 1)), data0, None, dense=True, tol=btmod._TOL_FIT, cold=True)
    start = np.repeat(x_hat, R, axis=1)
    solves = _count_solves(monkeypatch)
    got = btmod._newton(cells, start, data, None, dense=False, tol=btmod._TOL_BOOT, cold=False)
    assert max(solves) < 1e-4 and len(solves) <= 5
    minv = np.linalg.inv(btmod._Eval(cells, x_hat, data0).dense())
    ref = btmod._newton(cells, start, data, minv, dense=False, tol=btmod._TOL_BOOT, cold=False)
    assert np.abs(got - ref).max() < 1e-7


def _count_solves(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Patch the conjugate-gradient solver to note each solve's worst relative residual (the list)."""
    solves: list[float] = []
    real_pcg = btmod._pcg

    def counting_pcg(ev, b, precond, rtol, maxiter):
        x = real_pcg(ev, b, precond, rtol, maxiter)
        r = b - ev.hv(x)
        solves.append(float(np.sqrt((r * r).sum(0) / (b * b).sum(0)).max()))
        return x

    monkeypatch.setattr(btmod, "_pcg", counting_pcg)
    return solves


def test_a_provisional_newcomer_moves_no_established_rank() -> None:
    """Two wins over the leader put a newcomer above it in many resamples: it is listed after the
    established, its own rank interval says where it might stand among them (the top included), and the
    established players' rank intervals and the top's stability never count it."""
    strengths = {"A": 1.5, "B": 0.5, "C": 0.0, "D": -0.5}
    base = _league(strengths, 800, seed=2)
    before = fit_bt(base, anchor=None, resamples=200, stability_replicates=50)
    after = fit_bt(base + _games("g", "N", "A", 2), anchor=None, resamples=200, stability_replicates=50)
    n = _row(after, "N")
    assert n.provisional and n.rank == 5 and after.rows[-1].player == "N"
    assert n.rank_lo == 1 and n.rank_hi >= 2  # it might be the best or not: its own uncertainty
    for p in "ABCD":
        r, b = _row(after, p), _row(before, p)
        assert not r.provisional and (r.rank, r.rank_lo, r.rank_hi) == (b.rank, b.rank_lo, b.rank_hi), p
        assert r.rank_hi <= 4
    assert (_row(after, "A").rank, _row(after, "A").rank_lo, _row(after, "A").rank_hi) == (1, 1, 1)
    assert after.stability == pytest.approx(before.stability, abs=0.1)


def test_duplicate_pairs_are_resampled_whole() -> None:
    """Two matches of a duplicate pair share their deals, so their scores move against each other (the
    luck of the deal cancels in the pair): resampled as units, the rating interval is narrower than
    resampled match by match, and the point fit is the same; results with no unit keep the old draws."""
    rng = np.random.default_rng(0)
    scopes, players = ["g"], ["A", "B"]
    a, b, score, unit = [], [], [], []
    for k in range(300):
        luck = rng.uniform(-0.4, 0.4)  # the deal: good for whoever holds seat 0's cards
        for seat in (0, 1):  # the same deal, seats swapped: A gets the luck, then B does
            a.append(0)
            b.append(1)
            score.append(float(np.clip(0.55 + (luck if seat == 0 else -luck), 0.0, 1.0)))
            unit.append(k)
    plain = Results(np.zeros(len(a)), a, b, score, scopes, players)
    units = Results(np.zeros(len(a)), a, b, score, scopes, players, unit=unit)
    p, u = (fit_bt(r, anchor="B", resamples=400, stability_replicates=0) for r in (plain, units))
    assert _row(p, "A").rating == pytest.approx(_row(u, "A").rating)
    wp, wu = (_row(t, "A").hi - _row(t, "A").lo for t in (p, u))
    assert wu < 0.5 * wp, (wu, wp)
    # unit codes of -1 everywhere: the same table as no units at all
    none = fit_bt(Results(np.zeros(len(a)), a, b, score, scopes, players, unit=[-1] * len(a)), anchor="B",
                  resamples=400, stability_replicates=0)
    assert (_row(none, "A").lo, _row(none, "A").hi) == (_row(p, "A").lo, _row(p, "A").hi)


def test_poisson_draws_by_inversion_follow_the_poisson_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap's Poisson draws (guide-table inversion, `_Poisson`): each row's law is Poisson with
    its mean, in any order of the means, and means above the table's limit go to numpy's."""
    from scipy.stats import poisson

    monkeypatch.setattr(btmod, "_TABLE_MAX", 100)
    means = np.array([57, 0, 3, 1, 300, 12, 3])  # unsorted, repeated, one above the limit
    draws = btmod._Poisson(means).draw(np.random.default_rng(5), 40_000)
    assert draws.shape == (7, 40_000) and (draws == np.round(draws)).all()
    assert (draws[1] == 0).all()
    for row, mu in zip(draws, means):
        if mu == 0:
            continue
        support = np.arange(int(mu + 8 * np.sqrt(mu) + 10))
        seen = np.bincount(row.astype(np.int64), minlength=len(support))[:len(support)] / row.size
        assert 0.5 * np.abs(seen - poisson.pmf(support, mu)).sum() < 0.02  # total variation
        assert row.mean() == pytest.approx(mu, rel=0.02) and row.var() == pytest.approx(mu, rel=0.05)

"""The detector's and the rows' faster paths give the values of their plain formulas.

The speed-ups of the per-event path keep every value bit for bit: here each fast
function is compared with the plain formula it replaces (the reference, written out in
this file as the straightforward code), bit for bit, on seeded and adversarial inputs,
and the mathematics itself against an independent oracle (SciPy's root finder for the
likelihood interval, SciPy's ``stdtrit`` for the t critical value).
"""

from __future__ import annotations

import contextlib
import math
import statistics

import numpy as np
import pytest
import mpmath
from hypothesis import example, given, settings, strategies as st

from streameval import sequential as S
from streameval.metrics import base as B

scipy_optimize = pytest.importorskip("scipy.optimize")
scipy_special = pytest.importorskip("scipy.special")


# -- references: the plain formulas ---------------------------------------------------
def _ll_ref(p, s, f):
    out = 0.0
    if s > 0.0:
        out += s * math.log(p) if p > 0.0 else -math.inf
    if f > 0.0:
        out += f * math.log1p(-p) if p < 1.0 else -math.inf
    return out


def _end_mp(s, f, K, side):
    """One end of the plausible interval by bisection in 60-digit arithmetic (mpmath):
    the root of ``s log p + f log(1 - p) = K`` between the history's rate and the
    edge on ``side``, to far below a float's precision; 0 or 1 when the level is not
    reached before the edge (or the count on that side is 0)."""
    mp = mpmath.mp
    with mpmath.workdps(60):
        s_, f_, K_ = mp.mpf(s), mp.mpf(f), mp.mpf(K)

        def g(p):
            return (s_ * mp.log(p) if s else 0) + (f_ * mp.log(1 - p) if f else 0) - K_

        ph = s_ / (s_ + f_)
        edge = mp.mpf(1 if side > 0 else 0)
        if (f if side > 0 else s) == 0:
            return float(edge)
        a, b = ph, edge
        for _ in range(230):   # (2^-230: far below 1e-60 relative to any end)
            mid = (a + b) / 2
            if mid in (a, b):
                break
            if g(mid) >= 0:
                a = mid
            else:
                b = mid
        return float((a + b) / 2)


def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.int64).tolist()


def _histories(rng, m):
    """``m`` histories (successes, trials, level K) as the detector makes them: the
    log KT likelihood plus log C, with the counts of every kind of stretch (all
    successes, none, a handful, millions, fractional effective counts)."""
    n = np.concatenate((rng.integers(1, 50, m // 4), rng.integers(50, 10**7, m - m // 4)))
    n = n.astype(np.float64)
    rate = rng.choice([0.0, 1.0, 0.5, 0.3, 0.01, 0.999], m)
    s = np.round(n * np.where(rng.random(m) < 0.5, rate, rng.random(m)))
    s[::7] = np.round(s[::7] * 0.37, 2)      # Kish's effective counts are fractional
    n[::11] = n[::11] / 3.0
    s = np.minimum(s, n)
    K = np.array([S._log_kt(a, b) + S.LOG_C for a, b in zip(s.tolist(), n.tolist())])
    return s, n, K


# -- lgamma of a short list -------------------------------------------------------------
def test_lgamma_of_a_list_equals_math_lgamma():
    x = np.concatenate((np.linspace(1e-3, 40, 4001), np.logspace(-3, 12, 4001),
                        [14.999, 15.0])).tolist()
    want = [math.lgamma(v) for v in x]
    np.testing.assert_allclose(S._lg_list(x), want, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(S._lg_list(x), S._lg(np.array(x)), rtol=1e-15, atol=1e-14)


# -- _region_one ----------------------------------------------------------------------
def _close_to_oracle(got, s, n, K):
    """Both ends of one history against 60-digit bisection, to Newton's tolerance
    plus what a few ulps of error in the float log likelihood move an end by (that
    error over the slope at the end)."""
    f = n - s
    for end, side in zip(got, (-1.0, 1.0)):
        want = _end_mp(s, f, K, side)
        slope = abs(s / want - f / (1.0 - want)) if 0.0 < want < 1.0 else 0.0
        cond = 8.0 * np.finfo(float).eps * abs(K) / slope if slope else 0.0
        tol = 1e-11 * max(min(want, 1.0 - want), 1e-300) + cond
        assert abs(end - want) <= tol, (s, n, K, side, end, want)


def test_region_one_matches_a_high_precision_oracle():
    rng = np.random.default_rng(20260601)
    s, n, K = _histories(rng, 120)
    for a, b, k in zip(s.tolist(), n.tolist(), K.tolist()):
        _close_to_oracle(S._region_one(a, b, k), a, b, k)
    # edges: nothing yet (the whole of [0, 1]), all successes, all failures, a level
    # above the maximum (none: lo > hi), half counts, a large history
    assert S._region_one(0.0, 0.0, -1.0) == [0.0, 1.0]
    assert S._region_one(3.0, 10.0, 5.0) == [1.0, 0.0]
    lo, hi = S._region_one(5.0, 5.0, -3.0)
    assert hi == 1.0 and abs(lo - math.exp(-0.6)) <= 1e-15
    lo, hi = S._region_one(0.0, 9.0, -3.0)
    assert lo == 0.0 and abs(hi - -math.expm1(-1.0 / 3.0)) <= 1e-15
    for a, b, k in [(0.5, 1.0, -1.0), (1e9, 2e9, -2e9 * math.log(2.0) - 30.0),
                    (1.0, 1.0, -31.0)]:
        _close_to_oracle(S._region_one(a, b, k), a, b, k)


@given(st.integers(1, 10**8), st.floats(0.0, 1.0), st.floats(-40.0, 0.0))
@example(1, 0.0, -35.25)  # (the end 1 - exp(K) within 5e-16 of 1: brentq's own tolerance)
def test_region_one_ends_are_the_level_crossings(n, rate, drop):
    """The ends are where the log likelihood falls to ``K`` (SciPy's brentq as the
    oracle), bit for bit those of the plain formula."""
    n = float(n)
    s = float(round(n * rate))
    f = n - s
    top = _ll_ref(s / n, s, f)
    K = top + drop - 1e-6
    lo, hi = S._region_one(s, n, K)
    ph = s / n
    for end, count, bracket in ((lo, s, (0.0, ph)), (hi, f, (ph, 1.0))):
        if count == 0.0 or end in (0.0, 1.0):
            continue
        g = lambda p: _ll_ref(p, s, f) - K   # noqa: E731
        a, b = bracket
        a, b = max(a, S._TINY), min(b, S._ONE)
        if g(a) * g(b) > 0.0:
            continue
        xtol, rtol = 1e-15, 4 * np.finfo(float).eps
        want = scipy_optimize.brentq(g, a, b, xtol=xtol, rtol=rtol)
        # (the log likelihood in floats is off by a few ulps of K: where its slope at
        # the end is small, as for a level a hair below the maximum, that moves the
        # end by that much over the slope, for any solver)
        slope = abs(s / want - f / (1.0 - want))
        cond = 8.0 * np.finfo(float).eps * abs(K) / slope if slope else 0.0
        # (brentq's root is itself within xtol + rtol * |root| of the true one)
        assert abs(end - want) <= (1e-9 * max(min(want, 1.0 - want), 1e-300) + xtol
                                   + rtol * abs(want) + cond)


# -- _region --------------------------------------------------------------------------
def test_region_matches_a_high_precision_oracle_and_each_end_is_its_own():
    """Each end of each history's interval equals 60-digit bisection to Newton's
    tolerance (relative to the distance from the nearer edge), undeflated and deflated
    by a variance factor; and each element's result is the one it gets alone, bit for
    bit (an end stops when it has converged, whatever the others do)."""
    rng = np.random.default_rng(7)
    for m in (1, 3, 40):
        s, n, K = _histories(rng, m)
        for V in (1.0, 1.3, 2.7):   # the counts the check deflates by the variance factor
            sv, nv = np.minimum(s / V, n / V), n / V
            kv = K / V
            lo, hi = S._region(sv, nv, kv)
            for i in range(m):
                a, b, k = float(sv[i]), float(nv[i]), float(kv[i])
                one = S._region(sv[i:i + 1], nv[i:i + 1], kv[i:i + 1])
                assert _bits([lo[i], hi[i]]) == _bits([one[0][0], one[1][0]])
                for got, side in ((lo[i], -1.0), (hi[i], 1.0)):
                    want = _end_mp(a, b - a, k, side)
                    tol = 1e-11 * max(min(want, 1.0 - want), 1e-300)
                    assert abs(got - want) <= tol, (a, b, k, side, got, want)
    # empty histories and levels above the maximum (no interval: lo > hi)
    s = np.array([0.0, 0.0, 4.0, 4.0])
    n = np.array([0.0, 5.0, 4.0, 9.0])
    K = np.array([-1.0, -2.0, -2.0, 1.0])
    lo, hi = S._region(s, n, K)
    np.testing.assert_allclose(lo[:3], [0.0, 0.0, _end_mp(4.0, 0.0, -2.0, -1.0)], rtol=1e-13)
    np.testing.assert_allclose(hi[:3], [1.0, _end_mp(0.0, 5.0, -2.0, 1.0), 1.0], rtol=1e-13)
    assert lo[3] > hi[3]


def test_region_ends_do_not_depend_on_histories_without_an_end_beside_them():
    """Histories with no successes, no failures or no observations have ends that are
    not solved (they sit at their edge, their steps out of the side every time): a
    history solved beside them gets the ends it gets alone, bit for bit, both ends and
    at any level (including the stalls at 1 of a few observations)."""
    rng = np.random.default_rng(12)
    s, n, K = _histories(rng, 40)
    extra = [(0.0, 0.0, -43.28341434600577), (0.0, 2.0, -43.28341434600577),
             (7249618.691588785, 7256875.700934579, -57392.667116601886)]
    s = np.concatenate((s, [e[0] for e in extra]))
    n = np.concatenate((n, [e[1] for e in extra]))
    K = np.concatenate((K, [e[2] for e in extra]))
    for shift in (0.0, -3.0, -40.0):
        for i in range(len(s)):
            one = S._region(s[i:i + 1], n[i:i + 1], K[i:i + 1] + shift)
            for a, b in ((0.0, 10.0), (10.0, 10.0), (0.0, 0.0)):
                pair = S._region(np.array([a, s[i]]), np.array([b, n[i]]),
                                 np.array([-5.0, K[i] + shift]))
                assert _bits([pair[0][1], pair[1][1]]) == _bits([one[0][0], one[1][0]]), \
                    (s[i], n[i], K[i] + shift, a, b)
    # the upper end of 0 successes in 2 at a level 43 nats down: the edge, alone or not
    assert S._region(np.array([0.0, 5.0]), np.array([2.0, 10.0]),
                     np.array([-43.28341434600577, -20.0]))[1][0] == 1.0


def test_region_agrees_with_the_single_history_solver():
    """The vectorised and the scalar solver start apart and meet at the same ends (to
    Newton's tolerance): two computations of one interval."""
    rng = np.random.default_rng(11)
    s, n, K = _histories(rng, 60)
    lo, hi = S._region(s, n, K)
    for i, (a, b, k) in enumerate(zip(s.tolist(), n.tolist(), K.tolist())):
        l1, h1 = S._region_one(a, b, k)
        assert abs(lo[i] - l1) <= 1e-11 and abs(hi[i] - h1) <= 1e-11, (a, b, k)


# -- the t critical value of row intervals ----------------------------------------------
def test_t_critical_is_stdtrit_and_its_memo_stays_bounded(monkeypatch):
    z = 1.959963984540054
    p = statistics.NormalDist().cdf(-z)
    dfs = [1.0, 2.5, 11.0, 3009.0, 3010.0, 3009.0, 1e7]
    for df in dfs + dfs:   # (the second time from the memo)
        assert B._t_critical(z, df) == float(-scipy_special.stdtrit(df, p))
    assert B._t_critical(1.0, 11.0) == float(
        -scipy_special.stdtrit(11.0, statistics.NormalDist().cdf(-1.0)))
    monkeypatch.setattr(B, "_T_MEMO_SIZE", 8)
    monkeypatch.setattr(B, "_T_MEMO", {})
    for df in range(1, 30):
        assert B._t_critical(z, float(df)) == float(-scipy_special.stdtrit(float(df), p))
        assert len(B._T_MEMO) <= 8


# -- the thinning of the candidates ------------------------------------------------------
@pytest.mark.parametrize("block,keep", [(1, 1), (1, 2), (3, 3), (7, 5), (100, 8)])
def test_thinning_keeps_what_the_rule_keeps_block_after_block(block, keep):
    """The candidates left after every batch are those a brute-force simulation of the
    rule keeps (a candidate opened at each block; at each block, those whose block is
    a multiple of the largest power of two at most their age ``(now - b) // keep``
    stay), over thousands of blocks and batches of every size."""
    rng = np.random.default_rng(block * 31 + keep)
    d = S.SequentialDrift("accuracy", block=block, keep=keep, alpha=1e-9)
    alive, opened = [], 0
    n_obs = 0
    for size in rng.integers(1, 5 * block + 2, 400).tolist():
        y = rng.random(size) < 0.5
        d.update_many(y, np.where(rng.random(size) < 0.8, y, ~y).astype(float))
        n_obs += size
        assert not d.changes  # (no restart: the history's blocks count from 1)
        while opened < n_obs // block:
            opened += 1
            now = opened
            alive = [b for b in alive + [now]
                     if b % (1 << max(((now - b) // keep).bit_length() - 1, 0)) == 0]
        assert d._cands.blocks == alive == d._cands.b.tolist()
    assert opened > 100


# -- a new candidate's row ----------------------------------------------------------
@given(st.integers(0, 10**7), st.floats(0.0, 1.2), st.sampled_from([None, 0.3, 1.0, 2.5]),
       st.integers(1, 10**6), st.sampled_from([math.nan, 0.0, 1.7e9]))
def test_candidate_row_equals_row_and_history_bit_for_bit(W, share, weight, gap, t):
    """The fused row of a new candidate is ``[W, X, Q] + _row + [t] + _history``,
    bit for bit, with unit weights (``Q == W``) and effective counts (``Q != W``)."""
    W = float(W)
    X = math.floor(W * share) if weight is None else W * share
    Q = W if weight is None else W * weight
    log_pi = math.log(gap / 1e6)
    ref = [W, X, Q] + S._row(W, X, Q, log_pi) + [t] + S._history(W, X, Q, log_pi)
    got = S._candidate_row(W, X, Q, log_pi, t)
    assert np.array(got).tobytes() == np.array(ref).tobytes()
    assert len(got) == S._Candidates._WIDTH


# -- checks known far from the alarm level --------------------------------------------
def _stream(seed, n, drop_at=None, ties=False):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    hit = np.full(n, 0.85)
    if drop_at is not None:
        hit[drop_at:] = 0.6
    s = np.where(y, np.where(rng.random(n) < hit, 0.8, 0.2), np.where(rng.random(n) < 0.1, 0.7, 0.3))
    s = s + (0.0 if ties else rng.normal(0.0, 0.01, n))
    return y, np.clip(s, 0.0, 1.0)


@pytest.mark.parametrize("metric", ["recall", "fpr", "accuracy", "roc_auc"])
@pytest.mark.parametrize("drop_at", [None, 12_000])
def test_skipping_far_checks_changes_nothing(metric, drop_at):
    """A detector that skips the checks its upper bound finds far from the alarm level
    reports, detects and saves exactly what one that makes every check does (the
    reference: the same detector with the skipping turned off), batch after batch,
    through a change and its alarm."""
    y, s = _stream(3, 30_000, drop_at, ties=metric == "roc_auc")
    fast = S.SequentialDrift(metric, alpha=0.01)
    plain = S.SequentialDrift(metric, alpha=0.01)
    plain._far_checks = lambda *a: 0
    skipped = []
    orig = fast._far_checks
    fast._far_checks = lambda *a: skipped.append(orig(*a)) or skipped[-1]
    for i in range(0, len(y), 1000):
        fast.update_trusted(y[i:i + 1000], s[i:i + 1000])
        plain.update_trusted(y[i:i + 1000], s[i:i + 1000])
        assert repr(fast.report()) == repr(plain.report())
    assert sum(skipped) > 0   # (the path ran)
    assert fast.changes == plain.changes
    assert (len(fast.changes) > 0) == (drop_at is not None and metric != "fpr")
    assert repr(fast.to_state()) == repr(plain.to_state())


def _batched_against_loop(metric, seed, sizes, drop, times):
    """Batches (sizes cycled; validated columns, as a Monitor gives them) against a loop
    of ``update``, event by event, on one stream: asserts the report, the changes and
    the state equal bit for bit; returns the far checks' counts of the batches."""
    n = 12_000
    y, s = _stream(seed % 1000, n, 6_000 if drop else None, ties=metric == "roc_auc")
    rng = np.random.default_rng(seed)
    t = None
    if times != "none":
        t = np.arange(n, dtype=np.float64) + 1.7e9
        if times == "late":
            t[rng.random(n) < 0.05] -= 500.0
    loop = S.SequentialDrift(metric, alpha=0.01)
    for i in range(n):
        loop.update(bool(y[i]), float(s[i]), t=None if t is None else float(t[i]))
    batched = S.SequentialDrift(metric, alpha=0.01)
    far = []
    orig = batched._far_checks
    batched._far_checks = lambda *a: far.append(orig(*a)) or far[-1]
    i = k = 0
    while i < n:
        m = sizes[k % len(sizes)]
        batched.update_trusted(y[i:i + m], s[i:i + m], None, None if t is None else t[i:i + m])
        i, k = i + m, k + 1
    assert repr(batched.report()) == repr(loop.report())
    assert batched.changes == loop.changes
    assert repr(batched.to_state()) == repr(loop.to_state())
    return far


@pytest.mark.parametrize("metric", ["recall", "precision", "fpr", "roc_auc"])
@given(seed=st.integers(0, 2**32 - 1),
       sizes=st.lists(st.sampled_from([1, 7, 333, 1000, 2500]), min_size=1, max_size=3),
       drop=st.booleans(), times=st.sampled_from(["none", "ascending", "late"]))
@settings(max_examples=5, deadline=None)
def test_batches_equal_a_loop_of_update_through_far_stretches(metric, seed, sizes, drop, times):
    """Batches leave exactly the detector that a loop of ``update`` leaves, event by
    event: the report, the changes and the state, bit for bit, with event times (in
    order, some late) or none. The loop is the plain path: it checks every block
    boundary it reaches, computes every bound and reads the newest time event by event;
    batches of a few hundred events and more take the far stretches' shortcuts (checks
    skipped, the last one's bound skipped, the blocks between candidates only closed)
    and read the times' running maximum once per batch."""
    _batched_against_loop(metric, seed, sizes, drop, times)


@pytest.mark.parametrize("metric", ["recall", "fpr", "roc_auc"])
@pytest.mark.parametrize("times", ["none", "late"])
def test_batches_take_the_far_shortcuts_and_equal_the_loop(metric, times):
    """On healthy streams in batches of 1 000 and 2 500 the far shortcuts run (so the
    equality above covers them), and the detector still equals the loop's."""
    far = sum(sum(_batched_against_loop(metric, seed, [1000, 2500], False, times))
              for seed in range(3))
    assert far > 0


def test_far_bound_is_above_every_skipped_bound():
    """At every batch whose checks the upper bound declares far, the plain path's cheap
    bound (:func:`_bound`) at each of them is below the level that keeps ``_near``
    False and the statistic waiting: the skipping is the decision each check makes."""
    y, s = _stream(5, 40_000, 20_000)
    ref = S.SequentialDrift("recall", alpha=0.01)
    ref._far_checks = lambda *a: 0   # the plain path: every check computes its bound
    seen = []
    bound = S._bound
    far = 0
    try:
        S._bound = lambda *a: seen.append(bound(*a)) or seen[-1]
        for i in range(0, len(y), 1000):
            yy, ss = y[i:i + 1000], s[i:i + 1000]
            ev = np.flatnonzero(yy)
            xs = (ss[ev] >= 0.5).astype(np.float64)
            k = 0
            if not ref._near and len(ref._cands):
                k = S.SequentialDrift._far_checks(
                    ref, np.cumsum(xs), ev, (-ref._n - 1) % ref.block, ref.n, ref._W, ref._X)
            seen.clear()
            ref.update_trusted(yy, ss)
            if k:
                far += 1
                assert len(seen) == k + 1
                assert max(seen) < ref._log_alarm - S.NEAR
    finally:
        S._bound = bound
    assert far > 10
    assert ref.changes   # (the drop was found: checks near the level were made too)


def test_a_batch_of_many_checks_checks_each():
    """Past :data:`_FAR_MAX` checks in one batch the skipping stands aside (its pass
    would grow with candidates times checks), and a big batch gives what batches of
    1 000 give: the same report and state."""
    y, s = _stream(11, 60_000, 40_000)
    big = S.SequentialDrift("accuracy", alpha=0.01)
    big.update_trusted(y[:20_000], s[:20_000])   # (candidates open: the next is eligible)
    assert big._far_checks(np.zeros(20_000), np.arange(20_000), 0, big.n, big._W, big._X) == 0
    big.update_trusted(y[20_000:], s[20_000:])
    small = S.SequentialDrift("accuracy", alpha=0.01)
    for i in range(0, len(y), 1000):
        small.update_trusted(y[i:i + 1000], s[i:i + 1000])
    assert big.changes == small.changes and big.changes
    assert repr(big.report()) == repr(small.report())
    assert repr(big.to_state()) == repr(small.to_state())


@pytest.mark.parametrize("s, n", [(0.5, 1.0), (1.0, 1.0), (0.5, 50.0), (5.0, 10.0),
                                  (1.0, 1e6), (999_999.0, 1e6)])
def test_region_ends_are_never_inside_the_interval_however_wide_the_gap(s, n):
    """Gaps of the level below the history's maximum up to 60 nats (beyond what the
    detector's level reaches, where the steps toward an end near 0 or 1 run out):
    every end that :func:`_region` and :func:`_region_one` return is at the level
    crossing or beyond it (the log likelihood there at most the level, to rounding),
    never inside the interval: a wider interval, never a narrower one."""
    f = n - s
    top = S._ll(s / n, s, f)
    for gap in np.arange(1.0, 60.5, 0.5):
        K = top - gap
        lo, hi = S._region(np.array([s]), np.array([n]), np.array([K]))
        for ends in ((float(lo[0]), float(hi[0])), tuple(S._region_one(s, n, K))):
            for e in ends:
                if 0.0 < e < 1.0:
                    assert S._ll(e, s, f) - K <= 1e-6 * max(1.0, abs(K)), (gap, ends)


# -- the Newton solvers' cycles: the ends the 60 steps would leave ------------------------
@contextlib.contextmanager
def _no_cycle_checks():
    """The solvers as they are without their cycle checks: every end takes up to all
    :data:`S._NEWTON_STEPS` steps (the reference the cycle checks must not change)."""
    saved = S._CYCLE_FROM, S._CYCLE_CHECKS
    S._CYCLE_FROM, S._CYCLE_CHECKS = S._NEWTON_STEPS, frozenset()
    try:
        yield
    finally:
        S._CYCLE_FROM, S._CYCLE_CHECKS = saved


def _region_one_ref(s, n, K):
    """The single-history solver, up to 60 Newton steps per end, no cycle detection
    (the reference of :func:`S._region_one`)."""
    with _no_cycle_checks():
        return S._region_one(s, n, K)


def _region_ref(s, n, K):
    """The vectorised solver, up to 60 Newton steps, no cycle detection (the reference
    of :func:`S._region`)."""
    with _no_cycle_checks():
        return S._region(s, n, K)


def _long_histories(rng, m):
    """Histories of 1e6 to 1e8 observations: where the log likelihood's rounding is above
    Newton's tolerance and about one end in ten cycles between two or three floats."""
    n = np.round(10.0 ** rng.uniform(6.0, 8.0, m))
    s = np.round(n * rng.choice([0.3, 0.05, 0.9, 0.5, 0.7, 0.001], m)) + rng.integers(-999, 999, m)
    s = np.clip(s, 0.0, n)
    K = np.array([S._log_kt(a, b) + S.LOG_C for a, b in zip(s.tolist(), n.tolist())])
    return s, n, K


def test_region_one_stops_at_a_cycle_with_the_end_all_the_steps_leave():
    """An end whose Newton steps cycle stops early with the value the 60 steps give (bit
    for bit), on long histories (cycles are common there) and the detector's usual ones."""
    rng = np.random.default_rng(31)
    for s, n, K in (_long_histories(rng, 1500), _histories(rng, 400)):
        for a, b, k in zip(s.tolist(), n.tolist(), K.tolist()):
            assert _bits(S._region_one(a, b, k)) == _bits(_region_one_ref(a, b, k)), (a, b, k)
            assert _bits(S._region_one(a, b, k - 3.0)) == _bits(_region_one_ref(a, b, k - 3.0))


def test_region_stops_at_cycles_with_the_ends_all_the_steps_leave():
    """The vectorised solver with cycle detection gives the 60-step ends bit for bit,
    undeflated and deflated, for arrays mixing cycling, converging and empty ends."""
    rng = np.random.default_rng(32)
    for m in (1, 7, 80, 400):
        s, n, K = _long_histories(rng, m)
        if m > 1:
            s2, n2, K2 = _histories(rng, m)
            s, n, K = np.concatenate((s, s2)), np.concatenate((n, n2)), np.concatenate((K, K2))
        for V in (1.0, 1.07, 2.7):
            sv, nv, kv = np.minimum(s / V, n / V), n / V, K / V
            assert _bits(np.concatenate(S._region(sv, nv, kv))) == \
                _bits(np.concatenate(_region_ref(sv, nv, kv)))


@given(st.floats(1.0, 2e8), st.floats(0.0, 1.0), st.floats(-40.0, 5.0))
def test_newton_solvers_equal_their_full_step_references(n, rate, shift):
    """Any history and level: both solvers give what the full 60 steps give."""
    s = min(n, round(n * rate))
    K = S._log_kt(s, n) + S.LOG_C + shift
    assert _bits(S._region_one(s, n, K)) == _bits(_region_one_ref(s, n, K))
    args = (np.array([s, n / 2]), np.array([n, n]), np.array([K, K]))
    assert _bits(np.concatenate(S._region(*args))) == _bits(np.concatenate(_region_ref(*args)))

"""SequentialDrift: the e-detector against a brute-force recomputation of its
e-values from the definition (scipy's special functions), its false-alarm guarantee
measured over many seeded stationary streams, detection of planted changes, the AUC
pairing, weights, state and bad parameters. The protocol invariants (update_many equals
a loop, state round trips, merge refusals) are in test_common.py."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special, stats

import streameval as se
from streameval.alerts import Alarm, parse_rule
from streameval.drift import PrecisionRecallDrift
from streameval import sequential
from streameval.sequential import CONCENTRATIONS, SequentialDrift

SETTINGS = settings(max_examples=40, deadline=None)


# ------------------------------------------------------------------ the oracle

def _indicators(metric, y, s, w, threshold=0.5):
    """The observations (event index, value, weight) of a metric, from the definition."""
    out = []
    pending = {True: None, False: None}
    for i, (yy, ss, ww) in enumerate(zip(y, s, w)):
        if ww == 0:
            continue
        pred = ss >= threshold
        if metric == "recall" and yy:
            out.append((i, float(pred), ww))
        elif metric == "precision" and pred:
            out.append((i, float(yy), ww))
        elif metric == "accuracy":
            out.append((i, float(yy == pred), ww))
        elif metric == "error_rate":
            out.append((i, float(yy != pred), ww))
        elif metric == "fpr" and not yy:
            out.append((i, float(pred), ww))
        elif metric == "roc_auc":
            other = pending[not yy]
            if other is None:
                pending[yy] = (ss, ww)
                continue
            pending[not yy] = None
            pos, neg = (ss, other[0]) if yy else (other[0], ss)
            out.append((i, 1.0 if pos > neg else 0.5 if pos == neg else 0.0, ww * other[1]))
    return out


def _eff(ws, xs):
    """Effective (successes, trials): the counts for unit weights, Kish otherwise."""
    ws, xs = np.asarray(ws, float), np.asarray(xs, float)
    if len(ws) == 0:
        return 0.0, 0.0
    W, Q = ws.sum(), (ws * ws).sum()
    if np.all(ws == 1.0):
        return float((ws * xs).sum()), float(W)
    n = W * W / Q
    return float((ws * xs).sum() / W * n), float(n)


def _variance_factor(xs, block, share=1.0):
    """The long-run variance factor of the observations ``xs`` (all of them, in
    order), from the definition: the larger of the lag-1 bound
    ``(1 + rho) / (1 - rho)`` (``rho`` the lag-1 autocorrelation less Z / sqrt(n))
    and, per batch size ``B`` (the first at least DEPENDENCE_BATCH in whole blocks,
    then doubling), ``B`` x half the mean squared successive difference of the
    complete batches' means (each clipped at CLIP x the mean of the earlier ones from
    the 10th on) / the variance, times ``1 - Z sqrt(3 / differences)``; at least 1."""
    x = np.asarray(xs, dtype=float)
    n, Z = len(x), sequential.DEPENDENCE_Z
    if n < 3:
        return 1.0
    m = x.mean()
    var = (x * x).mean() - m * m
    if var <= 1e-12:
        return 1.0
    out = 1.0
    rho = ((x[1:] * x[:-1]).sum() / (n - 1) - m * m) / var - Z / math.sqrt(n)
    if rho > 0:
        rho = min(rho, 0.999)
        out = (1 + rho) / (1 - rho)
    size = block * max(1, -(-sequential.DEPENDENCE_BATCH // block))
    for k in range(sequential.DEPENDENCE_LEVELS):
        B = size << k
        means = x[:n // B * B].reshape(-1, B).mean(axis=1)
        d2s = []
        for d2 in np.diff(means) ** 2:
            if len(d2s) >= 10:
                d2 = min(d2, sequential.DEPENDENCE_CLIP * sum(d2s) / len(d2s))
            d2s.append(d2)
        nd = len(d2s)
        if k == 0 and sequential.DEPENDENCE_PRIOR_DIFFS:
            # the smallest batches: their estimate (PRIOR_Z standard errors below the
            # point estimate, at least 0) and the prior factor, weighted by differences
            low = max(0.0, 1 - sequential.DEPENDENCE_PRIOR_Z * math.sqrt(3 / nd)) if nd else 1.0
            m0 = sequential.DEPENDENCE_PRIOR_DIFFS
            # the prior: a chain of mean run RUN events, seen at a random share of them
            rho = 1 - 2 / sequential.DEPENDENCE_RUN
            r = share * rho / (1 - (1 - share) * rho)
            prior = min(sequential.DEPENDENCE_PRIOR, (1 + r) / (1 - r))
            out = max(out, (B * sum(d2s) / 2 / var * low + m0 * prior) / (m0 + nd))
        if nd >= sequential.DEPENDENCE_MIN_DIFFS:
            out = max(out, B * sum(d2s) / (2 * nd) / var * (1 - Z * math.sqrt(3 / nd)))
    return out


def _log_e(pre, post, log_pi, V=1.0):
    """log E of one candidate from its history before and after, by the definition:
    KT mixture of the history x mixture of Beta-binomials (flat, and Beta priors
    around the history's rate) of what follows / best single rate of all of it,
    every count divided by the variance factor ``V`` (the priors' centre is the
    history's rate, undeflated)."""
    s0, n0 = _eff([w for _, w in pre], [x for x, _ in pre])
    p0 = (s0 + 0.5) / (n0 + 1.0)
    s0, n0 = s0 / V, n0 / V
    s1, n1 = (v / V for v in _eff([w for _, w in post], [x for x, _ in post]))
    sa, na = (v / V for v in _eff([w for _, w in pre + post], [x for x, _ in pre + post]))
    kt = special.betaln(s0 + 0.5, n0 - s0 + 0.5) - special.betaln(0.5, 0.5)
    priors = [(0.5, 0.5)] + [(k * p0, k * (1 - p0)) for k in CONCENTRATIONS]
    mix = special.logsumexp([special.betaln(a + s1, b + n1 - s1) - special.betaln(a, b)
                             for a, b in priors], b=sequential.PRIOR_WEIGHTS)
    best = special.xlogy(sa, sa / na) + special.xlogy(na - sa, (na - sa) / na)
    universal = kt + mix - best
    local = mix - math.log1p(sequential.C) - _best_local(s1, n1 - s1, s0, n0 - s0,
                                                         kt + math.log(sequential.C))
    w = n0 * V / (n0 * V + sequential.HISTORY_SCALE)   # (the history's own count)
    with np.errstate(divide="ignore"):
        return log_pi + np.logaddexp(universal + np.log1p(-w), local + np.log(w))


def _ll(p, s, f):
    return special.xlogy(s, p) + special.xlog1py(f, -p)


def _best_local(s1, f1, s0, f0, K):
    """max over p of ``l_after(p) + min(0, l_history(p) - K)``: the function is concave,
    so its maximum is at a stationary point of one of its two pieces (the stretch's
    rate, the rate of all of it) or where they meet (the ends of the interval where
    l_history reaches K, found by brentq): the largest value over those points."""
    n0, n1 = s0 + f0, s1 + f1
    ph = s0 / n0 if n0 else 0.5
    points = [ph]
    if n1:
        points.append(s1 / n1)
    if n0 + n1:
        points.append((s0 + s1) / (n0 + n1))
    if _ll(ph, s0, f0) >= K:
        for edge, count in ((0.0, s0), (1.0, f0)):
            points.append(_root(s0, f0, K, ph, edge) if count > 0 else edge)
    return max(_ll(p, s1, f1) + min(0.0, _ll(p, s0, f0) - K) for p in points)


def _root(s0, f0, K, ph, edge):
    """Where the history's log likelihood falls to K between its maximum and ``edge``."""
    end = 5e-324 if edge == 0.0 else 1.0 - 2.0 ** -53
    if _ll(end, s0, f0) - K >= 0.0:
        return end
    lo, hi = sorted((ph, end))
    return optimize.brentq(lambda p: _ll(p, s0, f0) - K, lo, hi, xtol=1e-300, rtol=8.9e-16)


def _brute(metric, y, s, w, alpha, horizon, block, keep, every=1):
    """Replay the detector's definition: candidates every `every` blocks of `block`
    observations, each with its budget share, checked at every boundary; thinning by
    age; restart at the best candidate on an alarm. Returns the p-value at each
    boundary and the changes."""
    obs = _indicators(metric, y, s, w)
    seen = []            # every observation's value, for the variance factor
    hist = []            # (x, w) since the restart
    cands = []           # (position in hist, block number, log pi, event count at opening)
    last_e = 0
    ps, changes = [], []
    for i, x, ww in obs:
        hist.append((x, ww))
        seen.append(x)
        if len(hist) % block:
            continue
        if cands:
            V = _variance_factor(seen, block, len(seen) / (i + 1))
            les = [_log_e(hist[:pos], hist[pos:], lp, V) for pos, _, lp, _ in cands]
            k = int(np.argmax(les))
            total = special.logsumexp(les)     # the budget-weighted sum of e-values
            ps.append(min(1.0, math.exp(-total)))
            if total >= -math.log(alpha):
                pos = cands[k][0]
                s0, n0 = _eff([w_ for _, w_ in hist[:pos]], [x_ for x_, _ in hist[:pos]])
                s1, n1 = _eff([w_ for _, w_ in hist[pos:]], [x_ for x_, _ in hist[pos:]])
                changes.append((i, cands[k][3], "drop" if s1 / n1 < s0 / n0 else "rise"))
                b0 = cands[k][1]
                hist = hist[pos:]
                cands = [(p - pos, b - b0, lp, e) for p, b, lp, e in cands[k + 1:]]
        now = len(hist) // block
        if now % every:
            continue
        cands.append((len(hist), now, math.log((i + 1 - last_e) / horizon), i + 1))
        last_e = i + 1
        # keep per doubling of age: every block younger than 2 keep, then every 2nd...
        cands = [c for c in cands
                 if c[1] % (1 << max(((now - c[1]) // keep).bit_length() - 1, 0)) == 0]
    return ps, changes


def _stream(seed, n, rate=0.4, recall=(0.8, 0.8), cut=None, weights=False, decimals=None):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < rate
    r = np.full(n, recall[0])
    if cut is not None:
        r[cut:] = recall[1]
    hit = rng.random(n) < r
    s = np.where(y, np.where(hit, rng.uniform(0.5, 1, n), rng.uniform(0, 0.5, n)),
                 rng.uniform(0, 0.7, n))
    if decimals is not None:
        s = np.round(s, decimals)
    w = rng.choice([0.0, 0.5, 1.0, 2.0, 3.5], n) if weights else np.ones(n)
    return y, s, w


# ----------------------------------------------------- the e-values, exactly

@pytest.mark.parametrize("metric", ["recall", "precision", "accuracy", "error_rate", "fpr", "roc_auc"])
@pytest.mark.parametrize("weights", [False, True])
def test_p_values_and_alarms_equal_the_definition(metric, weights):
    """At every block boundary the reported anytime p-value is 1 / sum_j pi_j E_j over
    the open candidates, E_j recomputed from scratch from the raw events (the test's
    own indicator streams, KT by Beta functions, the mixture by logsumexp); alarms,
    their estimated starts (the best candidate) and directions are the same."""
    n = 6000
    y, s, w = _stream(3, n, cut=3000, recall=(0.85, 0.55), weights=weights, decimals=2)
    d = SequentialDrift(metric, alpha=0.05, horizon=5000, block=40, keep=3)
    ps = []
    for i in range(n):
        before = d.n_indicator
        d.update(bool(y[i]), float(s[i]), float(w[i]))
        if d.n_indicator != before and d._n % 40 == 0 and d._stat is not None:
            ps.append(d.report()["p_value"])
    want_ps, want_changes = _brute(metric, y, s, w, 0.05, 5000, 40, 3)
    assert len(ps) == len(want_ps) > 10
    np.testing.assert_allclose(ps, want_ps, rtol=1e-9, atol=1e-300)
    assert [(c.index, c.start, c.direction) for c in d.changes] == want_changes
    if metric in ("recall", "accuracy", "roc_auc") and not weights:
        assert d.changes and d.changes[0].direction == "drop"
        # (AUC: 700 pairs before the drop, so the prior variance factor still weighs)
        assert 3000 <= d.changes[0].index < (5500 if metric == "roc_auc" else 4500)


@pytest.mark.parametrize("metric,weights", [("recall", False), ("accuracy", True),
                                            ("roc_auc", False)])
def test_checks_between_candidates_equal_the_definition(monkeypatch, metric, weights):
    """Candidates every 2 blocks, every block checked (NEAR unbounded): the p-value at
    every block boundary and the alarms (event, estimated start, direction) are those
    of the definition recomputed from the raw events."""
    monkeypatch.setattr(sequential, "NEAR", math.inf)
    n = 6000
    y, s, w = _stream(5, n, cut=3000, recall=(0.85, 0.55), weights=weights, decimals=2)
    d = SequentialDrift(metric, alpha=0.05, horizon=5000, block=20, keep=3, every=2)
    ps = []
    for i in range(n):
        before = d.n_indicator
        d.update(bool(y[i]), float(s[i]), float(w[i]))
        if d.n_indicator != before and d._n % 20 == 0 and d._stat is not None:
            ps.append(d.report()["p_value"])
    want_ps, want_changes = _brute(metric, y, s, w, 0.05, 5000, 20, 3, every=2)
    assert len(ps) == len(want_ps) > 20
    np.testing.assert_allclose(ps, want_ps, rtol=1e-9, atol=1e-300)
    assert [(c.index, c.start, c.direction) for c in d.changes] == want_changes
    assert want_changes


@pytest.mark.parametrize("seed", range(6))
def test_checks_skipped_far_from_the_level_only_delay_an_alarm(seed):
    """With the default NEAR, the blocks between candidates are checked only near the
    alarm level: every p-value the detector reports at a candidate's block is the
    definition's, and its first alarm is the definition's (every block checked), or
    at most one block later (recall 0.85 -> 0.65, 1 000 positives in)."""
    n = 8000
    y, s, w = _stream(seed, n, rate=0.5, cut=2000, recall=(0.85, 0.65))
    d = SequentialDrift("recall", alpha=0.01, horizon=10_000, block=20, keep=3, every=2)
    at = {}
    for i in range(n):
        before = d.n_indicator
        d.update(bool(y[i]), float(s[i]))
        if d.n_indicator != before and d._n % 40 == 0 and d._stat is not None and not d.changes:
            at[d.n_indicator] = d.report()["p_value"]
    want_ps, want_changes = _brute("recall", y, s, w, 0.01, 10_000, 20, 3, every=2)
    # (before the first alarm, the definition's p-value at the k-th block is at
    # observation 20 (k + 2): candidates open from block 2 on, checks start at block 3)
    first = want_changes[0][0]
    got = {k: p for k, p in at.items() if k % 40 == 0}
    assert len(got) > 10
    for k, p in got.items():
        assert p == pytest.approx(want_ps[k // 20 - 3], rel=1e-9), k
    pos = np.flatnonzero(y)
    block_after = pos[np.searchsorted(pos, first) + 20]
    assert d.changes and first <= d.changes[0].index <= block_after, (
        first, d.changes[0].index)


def test_default_checks_every_50_observations_with_a_candidate_every_100():
    """The default detector checks every 50 observations and opens a candidate every
    second check; given a block, a candidate opens at every check (the layout of a
    detector built with an explicit block, and of a state that does not name ``every``,
    is unchanged)."""
    d = SequentialDrift("recall")
    assert (d.block, d.every, d.keep) == (50, 2, 8)
    assert SequentialDrift("recall", block=100).every == 1
    y = np.ones(1000, dtype=bool)
    s = np.where(np.random.default_rng(0).random(1000) < 0.8, 0.9, 0.1)
    d.update_many(y, s)
    assert d._cands.b.tolist() == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20]
    old = SequentialDrift("recall", block=100).update_many(y[:550], s[:550]).to_state()
    del old["params"]["every"]
    resumed = se.from_state(json.loads(json.dumps(old)))
    assert resumed.every == 1
    resumed.update_many(y[550:], s[550:])
    whole = SequentialDrift("recall", block=100).update_many(y, s)
    assert resumed.to_state() == whole.to_state()


@SETTINGS
@given(seed=st.integers(0, 2**31), cut=st.integers(0, 3000), weights=st.booleans())
def test_a_state_saved_between_candidates_resumes_identically(seed, cut, weights):
    """Candidates every 2 blocks, the blocks between them checked only near the level:
    a state saved anywhere (the check rule's memory included) resumes identically."""
    y, s, w = _stream(seed, 3000, cut=1500, recall=(0.9, 0.5), weights=weights, decimals=1)
    ww = w if weights else None
    whole = SequentialDrift("recall", alpha=0.3, block=7, keep=2, every=2).update_many(y, s, ww)
    first = SequentialDrift("recall", alpha=0.3, block=7, keep=2, every=2)
    first.update_many(y[:cut], s[:cut], None if ww is None else ww[:cut])
    resumed = se.from_state(json.loads(json.dumps(first.to_state())))
    resumed.update_many(y[cut:], s[cut:], None if ww is None else ww[cut:])
    assert resumed.to_state() == whole.to_state()
    resumed._check()


@pytest.mark.parametrize("metric,weights,bursty", [
    ("recall", False, False), ("accuracy", True, False), ("roc_auc", False, False),
    ("precision", False, True), ("precision", True, True)])
def test_the_check_bound_is_above_the_statistic(monkeypatch, metric, weights, bursty):
    """At every check the cheap bound (share-weighted two-sample likelihood ratios)
    is at least the exact log statistic (itself checked against the definition
    above), on streams with a drop, weights, AUC ties and a variance factor above 1;
    near an alarm it is within about ten nats of it (what the mixtures and the unknown
    rate before the change cost), so checks far from the alarm level skip the exact
    statistic."""
    if bursty:
        y, s = _bursty(8, 8000, run=20)
        w = np.random.default_rng(9).choice([0.0, 0.5, 1.0, 2.0], 8000) if weights else np.ones(8000)
    else:
        y, s, w = _stream(5, 8000, cut=4000, recall=(0.85, 0.6), weights=weights, decimals=2)
    d = SequentialDrift(metric, alpha=0.01, horizon=5000, block=40, keep=3)
    seen = []
    bound = sequential._bound

    def spy(c, n1, s1, W, X, Q, V):
        b = bound(c, n1, s1, W, X, Q, V)
        seen.append((b, d._evaluate(c, n1, s1, W, X, Q, V)[0], V))
        return b

    monkeypatch.setattr(sequential, "_bound", spy)
    d.update_many(y, s, w)
    got = np.array([(b, t) for b, t, _ in seen])
    assert len(got) > 50
    assert np.all(got[:, 0] >= got[:, 1] - 1e-9), got[got[:, 0] < got[:, 1]]
    if bursty:
        assert max(v for _, _, v in seen) > 2.0
    else:
        near = got[got[:, 1] > 0.0]
        assert len(near) and np.median(near[:, 0] - near[:, 1]) < 10.0


@pytest.mark.parametrize("metric,weights", [("recall", False), ("accuracy", True),
                                            ("roc_auc", False)])
def test_a_check_left_unread_gives_the_same_detector(monkeypatch, metric, weights):
    """A detector whose checks are computed only when read (the default) has the same
    changes, p-values and state as one that computes every check at once (the bound
    disabled), whether it is read at every event or only at the end."""
    y, s, w = _stream(11, 12000, cut=5000, recall=(0.85, 0.5), weights=weights, decimals=3)
    kw = dict(alpha=0.05, horizon=4000, block=30, keep=3)
    lazy = SequentialDrift(metric, **kw).update_many(y, s, w)
    read = SequentialDrift(metric, **kw)
    ps = []
    for i in range(0, 12000, 7):
        read.update_many(y[i:i + 7], s[i:i + 7], w[i:i + 7])
        ps.append(read.report()["p_value"])
    monkeypatch.setattr(sequential, "BOUND_MARGIN", math.inf)
    eager = SequentialDrift(metric, **kw)
    want = []
    for i in range(0, 12000, 7):
        eager.update_many(y[i:i + 7], s[i:i + 7], w[i:i + 7])
        want.append(eager.report()["p_value"])
    assert eager._lazy is None and eager.changes
    assert ps == want
    for d in (lazy, read):
        assert d.changes == eager.changes
        assert d.to_state() == eager.to_state()
        assert d.report() == eager.report()


def _markov_labels(rng, n, rate, run):
    """Labels in bursts: a two-state Markov chain with ``rate`` positives whose runs
    (of either label, alternating) average ``run`` events: positive runs ``2 run
    rate``, negative runs ``2 run (1 - rate)`` on average."""
    leave = np.array([1 / (2 * run * (1 - rate)), 1 / (2 * run * rate)])  # from 0, from 1
    u = rng.random(n)
    y = np.empty(n, dtype=bool)
    cur = bool(rng.random() < rate)
    for i in range(n):
        y[i] = cur
        if u[i] < leave[int(cur)]:
            cur = not cur
    return y


def _bursty(seed, n, rate=0.3, run=20):
    """Bursty labels, scores independent given the label (the binormal model of
    bench_alerts.py: recall 0.85, precision 0.60 at 30% positives)."""
    rng = np.random.default_rng(seed)
    y = _markov_labels(rng, n, rate, run)
    s = 1 / (1 + np.exp(-(np.where(y, 1.036, -0.697) + rng.standard_normal(n))))
    return y, s


@pytest.mark.parametrize("metric,weights,run", [("precision", False, 20), ("precision", True, 20),
                                                ("roc_auc", False, 3)])
def test_deflated_p_values_on_bursty_labels_equal_the_definition(metric, weights, run):
    """Bursty labels (variance factor well above 1): at every boundary the p-value is
    1 / sum_j pi_j E_j with every count divided by the variance factor recomputed from
    all observations so far (lag-1 and batch means, by the definition), and the same
    changes."""
    n = 8000
    y, s = _bursty(4, n, run=run)
    w = np.random.default_rng(5).choice([0.0, 0.5, 1.0, 2.0], n) if weights else np.ones(n)
    d = SequentialDrift(metric, alpha=0.05, horizon=5000, block=40, keep=3)
    ps = []
    for i in range(n):
        before = d.n_indicator
        d.update(bool(y[i]), float(s[i]), float(w[i]))
        if d.n_indicator != before and d._n % 40 == 0 and d._stat is not None:
            ps.append(d.report()["p_value"])
    if metric == "precision":   # (the precision indicator is the bursty label)
        assert d.report()["variance_factor"] > 2.0
    want_ps, want_changes = _brute(metric, y, s, w, 0.05, 5000, 40, 3)
    assert len(ps) == len(want_ps) > 10
    np.testing.assert_allclose(ps, want_ps, rtol=1e-9, atol=1e-300)
    assert [(c.index, c.start, c.direction) for c in d.changes] == want_changes
    # the batch path gives the same state
    assert SequentialDrift(metric, alpha=0.05, horizon=5000, block=40, keep=3).update_many(
        y, s, w).to_state() == d.to_state()


@pytest.mark.parametrize("weights", [False, True])
def test_reports_read_together_equal_reports_read_alone(weights):
    """report_many (what a Monitor's scope reads its detectors with) gives each
    detector's report bit for bit, at every boundary of bursty and independent streams
    (deflated histories solved together: variance factors above 1, different
    candidates, some detectors with nothing left to read) and its next checks go on
    alike; the capability a scope finds is the same function."""
    from streameval.metrics.base import capabilities
    import copy

    assert capabilities(SequentialDrift()).report_many is sequential.report_many
    n = 6000
    y1, s1 = _bursty(8, n, run=20)
    rng = np.random.default_rng(9)
    y2, s2 = rng.random(n) < 0.3, rng.random(n)
    w = rng.choice([0.5, 1.0, 2.0], n) if weights else None
    made = [(m, y, s) for m in ("recall", "precision", "fpr") for y, s in ((y1, s1), (y2, s2))]
    together = [SequentialDrift(m, block=40, keep=3) for m, _, _ in made]
    alone = [SequentialDrift(m, block=40, keep=3) for m, _, _ in made]
    settled = 0
    for a in range(0, n, 250):
        for d, e, (_, y, s) in zip(together, alone, made):
            for x in (d, e):
                x.update_many(y[a:a + 250], s[a:a + 250],
                              None if w is None else w[a:a + 250])
        # (a detector read at some steps only: some have their statistic waiting)
        read = [i for i in range(len(made)) if (a // 250 + i) % 3]
        lazy = [together[i] for i in read if together[i]._lazy is not None
                and together[i]._lazy[6] != 1.0]
        settled += len(lazy) >= 2
        got = sequential.report_many([together[i] for i in read])
        want = [alone[i].report() for i in read]
        assert json.dumps(got) == json.dumps(want)
    assert settled > 5   # (many reads solved several deflated histories together)
    assert [d.to_state() for d in together] == [e.to_state() for e in alone]
    assert copy.deepcopy(together[0]).report() == alone[0].report()


@pytest.mark.parametrize("block,run", [(100, 20), (7, 5), (40, 50)])
def test_variance_factor_equals_the_definition(block, run):
    """The online variance factor (lag-1 bound, batch means with clipped successive
    differences, over several batch sizes) equals its definition recomputed from all
    observations at every boundary, fed event by event or in uneven batches; it is
    about the chain's (1 + lambda) / (1 - lambda) on a long bursty stream; on an
    independent one a little above 1 while the prior still weighs, then 1."""
    y, s = _bursty(6, 60_000, run=run)
    d = SequentialDrift("precision", alpha=1e-300, block=block)
    xs = y[s >= 0.5].astype(float)
    k = 0
    for a, b in zip(range(0, 60_000, 3_331), range(3_331, 63_331, 3_331)):
        d.update_many(y[a:b], s[a:b])
        k = d.n_indicator
        want = _variance_factor(xs[:k], block, k / min(b, 60_000))
        assert d.report()["variance_factor"] == pytest.approx(want, rel=1e-9)
    # the label chain's second eigenvalue, seen at the predicted positives (the
    # precision indicator is the label there): (1 + lambda) / (1 - lambda)
    leave0, leave1 = 1 / (2 * run * 0.7), 1 / (2 * run * 0.3)
    P = np.array([[1 - leave0, leave0], [leave1, 1 - leave1]])
    sel = np.diag([np.mean(s[~y] >= 0.5), np.mean(s[y] >= 0.5)])
    T = np.linalg.solve(np.eye(2) - P @ (np.eye(2) - sel), P @ sel)
    lam = np.trace(T) - 1
    V = d.report()["variance_factor"]
    assert 0.6 * (1 + lam) / (1 - lam) <= V <= 1.2 * (1 + lam) / (1 - lam)
    rng = np.random.default_rng(7)
    # independent: the prior's share fades as differences arrive, then exactly 1
    yi, si = rng.random(300_000) < 0.3, rng.random(300_000)
    d = SequentialDrift("precision")
    assert 1.2 < d.update_many(yi[:6_000], si[:6_000]).report()["variance_factor"] < 2.5
    assert d.update_many(yi[6_000:], si[6_000:]).report()["variance_factor"] == 1.0


def test_bursty_labels_do_not_raise_false_alarms(monkeypatch):
    """Labels in bursts (mean run length 20 and 50, scores independent given the
    label: the model is healthy): the precision detector at the default monitor's
    alpha stays silent on every seeded stream; with the variance factor pinned at 1
    (independence assumed, the detector without the deflation) it fires on most."""
    streams, n = 4, 60_000
    quiet = fired_undeflated = 0
    for run in (20, 50):
        for k in range(streams):
            y, s = _bursty(100 + k, n, run=run)
            quiet += not SequentialDrift("precision", alpha=0.005).update_many(y, s).changes
            with monkeypatch.context() as mp:
                mp.setattr(sequential._Dependence, "factor", lambda self, block, share=1.0: 1.0)
                d = SequentialDrift("precision", alpha=0.005)
                fired_undeflated += bool(d.update_many(y, s).changes)
    assert quiet == 2 * streams
    assert fired_undeflated >= 2 * streams - 2


def _bursty_errors(seed, n, run=50, cut=None, drop=0.0):
    """Errors in bursts (the errors-in-bursts stream of bench_alerts.py): labels
    independent at 30% positives, the model in hard and easy stretches (a two-state
    Markov chain, half the time each, runs averaging ``run`` events) that shift every
    logit by -0.6 or +0.6: the correctness indicators are autocorrelated, their
    long-run rates constant. ``drop``: the positives' logit mean falls by that much
    from event ``cut`` on (a real drop of recall)."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.3
    hard = _markov_labels(rng, n, 0.5, run)
    mu1 = np.full(n, 1.036)
    if cut is not None:
        mu1[cut:] -= drop
    logit = np.where(y, mu1, -0.697) + np.where(hard, -0.6, 0.6) + rng.standard_normal(n)
    return y, 1 / (1 + np.exp(-logit))


@pytest.mark.parametrize("seed", [96, 117, 131])
def test_errors_in_bursts_do_not_raise_an_early_false_alarm(monkeypatch, seed):
    """Errors in bursts at mean run 50 (healthy by construction: the rates never
    change): without the prior (the smallest batches' estimate counted only once it
    has DEPENDENCE_MIN_DIFFS differences, and at a lower bound) the recall detector
    at the default monitor's alpha fires within the first 12 000 events on these
    seeded streams, while the variance factor is still unknown; with it, neither the
    recall nor the precision detector fires within 30 000 events."""
    y, s = _bursty_errors(seed, 30_000)
    with monkeypatch.context() as mp:
        mp.setattr(sequential, "DEPENDENCE_PRIOR_DIFFS", 0)
        early = SequentialDrift("recall", alpha=0.005).update_many(y, s).changes
    assert early and early[0].index < 12_000 and early[0].direction in ("drop", "rise")
    for metric in ("recall", "precision"):
        d = SequentialDrift(metric, alpha=0.005).update_many(y, s)
        assert d.changes == [], (metric, d.changes)
        assert d.report()["p_value"] > 0.005


def test_errors_in_bursts_still_show_a_real_drop():
    """Errors in bursts at mean run 50 with a real drop of recall at event 20 000
    (the positives' logits fall by 0.5: recall about 0.80 -> 0.65): the recall
    detector finds it on every seeded stream, a drop, within 8 000 events, and
    nothing before it."""
    cut = 20_000
    for seed in range(4):
        y, s = _bursty_errors(seed, 40_000, cut=cut, drop=0.5)
        before = float(np.mean(s[:cut][y[:cut]] >= 0.5))
        after = float(np.mean(s[cut:][y[cut:]] >= 0.5))
        assert before - after > 0.1
        d = SequentialDrift("recall", alpha=0.005).update_many(y, s)
        assert d.changes, seed
        first = d.changes[0]
        assert first.direction == "drop" and cut <= first.index < cut + 8_000, (seed, first)
        assert first.before == pytest.approx(before, abs=0.04)


def test_a_state_without_the_dependence_estimate_resumes_with_a_fresh_one():
    """A state written without the variance factor's sums (an older layout) loads:
    the detector goes on with everything else as saved and measures dependence from
    the events that follow (the same as a detector whose estimate was just reset)."""
    y, s = _bursty(9, 30_000, run=20)
    d = SequentialDrift("precision", alpha=0.005).update_many(y[:10_000], s[:10_000])
    state = json.loads(json.dumps(d.to_state()))
    del state["data"]["dependence"]
    old = se.from_state(state)
    assert old.report()["variance_factor"] == 1.0
    assert {k: v for k, v in old.to_state()["data"].items() if k != "dependence"} == \
        {k: v for k, v in d.to_state()["data"].items() if k != "dependence"}
    twin = SequentialDrift._from_state(json.loads(json.dumps(d.to_state())))
    twin._dep = sequential._Dependence(twin.block)
    old.update_many(y[10_000:], s[10_000:])
    twin.update_many(y[10_000:], s[10_000:])
    assert old.to_state() == twin.to_state()
    assert old.report()["variance_factor"] > 2.0


def test_thinning_keeps_few_candidates_and_only_spends_less():
    """An exponential histogram: about keep candidates per doubling of age; the
    thinned detector's p-values are never below the unthinned one's (fewer terms in
    the sum of e-values)."""
    y, s, w = _stream(8, 40_000)
    thin = SequentialDrift("recall", alpha=1e-9, block=10, keep=2)
    full = SequentialDrift("recall", alpha=1e-9, block=10, keep=10**9)
    for a in range(0, 40_000, 2000):
        thin.update_many(y[a:a + 2000], s[a:a + 2000])
        full.update_many(y[a:a + 2000], s[a:a + 2000])
        assert thin.report()["p_value"] >= full.report()["p_value"] * (1 - 1e-12)
    blocks = thin._n // 10
    assert len(thin._cands) <= 2 * (blocks.bit_length() + 2)
    assert len(full._cands) == blocks


def _histograms(blocks, keep):
    """The candidates' block numbers after each of ``blocks`` boundaries without an
    alarm, by the rule (the oracle): each boundary opens one, then a candidate of block
    ``b`` stays while ``b`` is a multiple of the largest power of two at most its age
    ``(now - b) // keep`` (or its age is 0)."""
    kept, out = [], [[]]
    for now in range(1, blocks + 1):
        steps = {b: 1 << max(((now - b) // keep).bit_length() - 1, 0) for b in kept + [now]}
        kept = [b for b, step in steps.items() if b % step == 0]
        out.append(kept)
    return out


@pytest.mark.parametrize("keep,block,batch", [(1, 1, 7), (2, 3, 1000), (3, 10, 37), (8, 5, 400)])
def test_thinning_follows_the_rule_at_every_boundary(keep, block, batch):
    """The candidates left after each batch are those of the rule (no alarm: alpha
    tiny), also for a detector resumed from its state or a pickled copy mid-stream."""
    import pickle

    y, s, _ = _stream(11, 12_000)
    want = _histograms(int(y.sum()) // block, keep)
    d = SequentialDrift("recall", alpha=1e-300, block=block, keep=keep)
    for k, a in enumerate(range(0, 12_000, batch)):
        d.update_many(y[a:a + batch], s[a:a + batch])
        assert not d.changes
        assert d._cands.b.tolist() == want[d._n // block]
        if k % 5 == 2:
            d = SequentialDrift._from_state(json.loads(json.dumps(d.to_state())))
        elif k % 5 == 4:
            d = pickle.loads(pickle.dumps(d))


@pytest.mark.parametrize("weights", [False, True])
def test_a_copy_mid_stream_goes_on_as_the_original(weights):
    """A pickled or deep-copied detector (its candidates' buffers included) then fed
    the rest of a stream with changes (alarms, restarts) ends in the state of the
    uninterrupted one."""
    import copy
    import pickle

    y, s, w = _stream(5, 30_000, recall=(0.9, 0.5), cut=12_000, weights=weights)
    whole = SequentialDrift("recall", alpha=0.05).update_many(y, s, w)
    assert whole.changes
    for cut in (3_000, 12_500, 20_000):
        part = SequentialDrift("recall", alpha=0.05).update_many(y[:cut], s[:cut], w[:cut])
        for twin in (pickle.loads(pickle.dumps(part)), copy.deepcopy(part)):
            twin.update_many(y[cut:], s[cut:], w[cut:])
            assert twin.to_state() == whole.to_state()
            assert twin.changes == whole.changes


# ----------------------------------------------------------- the guarantee

def _false_alarm_share(metric, rate, streams, n, alpha, block, every=None):
    fired = 0
    for k in range(streams):
        rng = np.random.default_rng(1000 + k)
        y = rng.random(n) < rate
        s = np.where(y, rng.normal(1.0, 1.0, n), rng.normal(-1.0, 1.0, n))
        d = SequentialDrift(metric, alpha=alpha, horizon=n, block=block, threshold=0.0,
                            every=every)
        d.update_many(y, s)
        fired += bool(d.changes)
    return fired


@pytest.mark.parametrize("metric,rate", [("recall", 0.3), ("precision", 0.05), ("roc_auc", 0.3)])
def test_false_alarm_share_is_at_most_alpha_over_the_horizon(metric, rate):
    """300 stationary streams, alpha = 0.2 over the whole stream (horizon = its
    length): the share of streams with any alarm is not significantly above 0.2 (the
    one-sided 99% Clopper-Pearson lower bound stays below alpha; the bound is loose, so
    the share is in fact far below)."""
    streams, alpha = 300, 0.2
    fired = _false_alarm_share(metric, rate, streams, 4000, alpha, block=10)
    low = stats.beta.ppf(0.01, fired, streams - fired + 1) if fired else 0.0
    assert low < alpha, (fired, streams)
    assert fired / streams <= alpha


def test_false_alarm_share_with_checks_between_candidates():
    """The same with a candidate every 2 blocks and the blocks between checked near the
    level (the default layout): 300 stationary streams, alpha = 0.2 over each."""
    streams, alpha = 300, 0.2
    fired = _false_alarm_share("recall", 0.3, streams, 4000, alpha, block=5, every=2)
    low = stats.beta.ppf(0.01, fired, streams - fired + 1) if fired else 0.0
    assert low < alpha, (fired, streams)
    assert fired / streams <= alpha


def test_an_unlucky_start_does_not_fire_for_ever():
    """The first 2 000 positives are an unlucky sample (recall 0.88 where the model's
    is 0.85); the window drift test (last 2 000 against the first 2 000) calls it a
    drop again and again; the detector, whose reference is the whole history with its
    uncertainty, never alarms."""
    rng = np.random.default_rng(2)
    first = np.r_[np.ones(1760, bool), np.zeros(240, bool)]
    rng.shuffle(first)
    later = rng.random(40_000) < 0.85
    hit = np.r_[first, later]
    y = np.ones(len(hit), bool)
    s = np.where(hit, 0.9, 0.1)
    d = SequentialDrift("recall", alpha=0.01)
    old = se.Monitor({"recall": se.Recall()}, drift={"recall": PrecisionRecallDrift(
        "recall", size=2000, alpha=0.01)}, rules=["recall drift p < 0.01"], every=1000)
    fired = []
    old.on_alert.append(fired.append)
    for a in range(0, len(y), 1000):
        d.update_many(y[a:a + 1000], s[a:a + 1000])
        old.update_many(y[a:a + 1000], s[a:a + 1000])
    assert d.changes == [] and d.report()["p_value"] > 0.01
    assert sum(a["state"] == "firing" for a in fired) >= 1


# ------------------------------------------------------------- detection

def test_a_drop_then_a_recovery():
    y, s, _ = _stream(4, 60_000, rate=0.5, recall=(0.85, 0.7), cut=20_000)
    s2 = s.copy()
    back = np.random.default_rng(1).random(20_000) < 0.85
    s2[40_000:] = np.where(y[40_000:], np.where(back, 0.8, 0.2), s[40_000:])
    d = SequentialDrift("recall", alpha=0.01).update_many(y, s2)
    assert [c.direction for c in d.changes] == ["drop", "rise"]
    first, second = d.changes
    assert 20_000 <= first.index < 24_000 and abs(first.start - 20_000) < 1500
    assert 40_000 <= second.index < 44_000 and abs(second.start - 40_000) < 1500
    assert first.before == pytest.approx(0.85, abs=0.02) and first.after < 0.76
    assert d.get() == pytest.approx(0.85, abs=0.03)   # the rate since the last change


def _alarm_monitor(y, s, alpha, every):
    """A Monitor with a sequential recall detector and the rule ``recall alarm``, fed
    ``(y, s)``; returns it and the alert transitions it emitted."""
    mon = se.Monitor({"recall": se.Recall()},
                     drift={"recall": SequentialDrift("recall", alpha=alpha)},
                     rules=["recall alarm"], every=every)
    alerts = []
    mon.on_alert.append(alerts.append)
    mon.update_many(y, s)
    return mon, alerts


def test_alarm_rule_fires_on_the_drop_and_resolves_on_the_recovery():
    y, s, _ = _stream(5, 60_000, rate=0.5, recall=(0.85, 0.6), cut=20_000)
    back = np.random.default_rng(3).random(20_000) < 0.85
    s[40_000:] = np.where(y[40_000:], np.where(back, 0.8, 0.2), s[40_000:])
    _, alerts = _alarm_monitor(y, s, alpha=0.01, every=500)
    assert [a["state"] for a in alerts] == ["firing", "resolved"]
    assert 20_000 < alerts[0]["n"] <= 24_500 and 40_000 < alerts[1]["n"] <= 44_500
    assert alerts[0]["value"] < 0.7 and alerts[1]["value"] > 0.8
    with pytest.raises(ValueError, match="not a sequential detector"):
        se.Monitor({"recall": se.Recall()}, drift={"recall": PrecisionRecallDrift(
            "recall", size=100)}, rules=["recall alarm"])


# ------------------------------------------------------------ protocol

@SETTINGS
@given(seed=st.integers(0, 2**31), cut=st.integers(0, 3000), weights=st.booleans(),
       metric=st.sampled_from(["recall", "roc_auc", "specificity"]))
def test_a_state_saved_anywhere_resumes_identically(seed, cut, weights, metric):
    y, s, w = _stream(seed, 3000, cut=1500, recall=(0.9, 0.5), weights=weights, decimals=1)
    ww = w if weights else None
    whole = SequentialDrift(metric, alpha=0.3, block=7, keep=2).update_many(y, s, ww)
    first = SequentialDrift(metric, alpha=0.3, block=7, keep=2)
    first.update_many(y[:cut], s[:cut], None if ww is None else ww[:cut])
    resumed = se.from_state(json.loads(json.dumps(first.to_state())))
    resumed.update_many(y[cut:], s[cut:], None if ww is None else ww[cut:])
    assert resumed.to_state() == whole.to_state()
    resumed._check()


def test_merge_only_with_an_empty_detector():
    y, s, _ = _stream(1, 500)
    a = SequentialDrift("recall").update_many(y, s)
    assert SequentialDrift("recall").merge(a).to_state() == a.to_state()
    assert a.merge(SequentialDrift("recall")) is a
    with pytest.raises(ValueError, match="order of the events"):
        a.merge(SequentialDrift("recall").update_many(y, s))
    with pytest.raises(ValueError, match="different parameters"):
        a.merge(SequentialDrift("recall", alpha=0.1))
    with pytest.raises(NotImplementedError):
        a.revert(True, 0.9)


@pytest.mark.parametrize("kwargs,name", [
    ({"alpha": 0}, "alpha"), ({"alpha": 1}, "alpha"), ({"alpha": 1.5}, "alpha"),
    ({"alpha": float("nan")}, "alpha"), ({"horizon": 0}, "horizon"),
    ({"horizon": 0.5}, "horizon"), ({"block": 0}, "block"), ({"keep": -1}, "keep"),
    ({"metric": "f1"}, "metric"), ({"threshold": float("inf")}, "threshold"),
])
def test_bad_parameters_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name} = "):
        SequentialDrift(**kwargs)


def test_config_and_grammar_build_detectors_and_alarm_rules():
    mon = se.Monitor.from_config({
        "metrics": {"recall": "recall"},
        "drift": {"recall": {"test": "sequential", "alpha": 0.02, "horizon": 50_000},
                  "auc": {"test": "sequential", "metric": "roc_auc"}},
        "rules": ["recall alarm", {"alarm": "auc", "direction": "drop", "name": "auc_down"},
                  {"metric": "recall", "op": "<", "value": 0.7, "confidence": 0.99}],
    })
    d = mon.drift["recall"]
    assert (type(d), d.alpha, d.horizon, d.metric) == (SequentialDrift, 0.02, 50_000, "recall")
    assert mon.drift["auc"].metric == "roc_auc"
    assert [r.name for r in mon.rules] == ["recall alarm", "auc_down",
                                           "recall < 0.7 with confidence 0.99"]
    assert isinstance(parse_rule("error_rate alarm on rise"), Alarm)
    with pytest.raises(ValueError, match=r"monitor.drift.recall: unknown key 'size'"):
        se.Monitor.from_config({"drift": {"recall": {"test": "sequential", "size": 10}}})
    with pytest.raises(ValueError, match=r"monitor.drift.recall: alpha = 2"):
        se.Monitor.from_config({"drift": {"recall": {"test": "sequential", "alpha": 2}}})
    with pytest.raises(ValueError, match=r"test = 'cusum'"):
        se.Monitor.from_config({"drift": {"recall": {"test": "cusum"}}})


def test_vectorised_lgamma_equals_math_lgamma():
    from streameval.sequential import _lg

    x = np.concatenate((np.linspace(1e-3, 40, 4001), np.logspace(-3, 12, 4001), [14.999, 15.0]))
    want = np.array([math.lgamma(v) for v in x])
    np.testing.assert_allclose(_lg(x), want, rtol=1e-13, atol=1e-13)


def test_a_drop_and_its_recovery_between_two_evaluations_still_page():
    """Recall collapses for 600 events only: the detector sees the drop and the
    recovery before the next evaluation at the cadence; the Monitor evaluates the rule
    at the drop's detection, so it opens there, and it resolves at the first evaluation
    (the rise's detection, or the cadence) where the rate since the rise is back at
    the reference."""
    rng = np.random.default_rng(0)
    n = 40_000
    p = np.full(n, 0.95)
    p[20_100:20_700] = 0.2
    y = np.ones(n, bool)
    s = np.where(rng.random(n) < p, 0.9, 0.1)
    alone = SequentialDrift("recall", alpha=0.005).update_many(y, s)
    assert [c.direction for c in alone.changes] == ["drop", "rise"]
    drop, rise = alone.changes
    assert rise.index // 1000 == drop.index // 1000  # same interval of the cadence
    mon, alerts = _alarm_monitor(y, s, alpha=0.005, every=1000)
    mon.flush()
    assert [a["state"] for a in alerts] == ["firing", "resolved"]
    assert alerts[0]["n"] == drop.index + 1 and alerts[0]["value"] == pytest.approx(drop.after)
    back = alerts[1]["n"]
    assert back > rise.index and (back == rise.index + 1 or back % 1000 == 0)
    # by then the rate since the rise (every event is a positive here) is back near
    # the first stretch's 0.95
    assert (s >= 0.5)[rise.index + 1:back].mean() >= 0.92
    # the rule's count of detections is part of its state
    st = mon.to_state()
    back = se.Monitor.from_state(st)
    assert back.segment_metrics() is not None and st == back.to_state()


def test_the_e_process_has_mean_at_most_one():
    """What the guarantee rests on: on stationary streams, sum_j pi_j E_j (the
    reported e_value, with the horizon the stream's length so the shares sum to at
    most 1) has expectation at most 1 at any fixed time. Its sample mean over 300 seeded
    streams stays below 1 (a budget off by a factor would show here long before any
    false alarm does)."""
    vals = []
    for k in range(300):
        rng = np.random.default_rng(5000 + k)
        y = rng.random(3000) < 0.4
        s = np.where(y, rng.normal(1.0, 1.0, 3000), rng.normal(-1.0, 1.0, 3000))
        d = SequentialDrift("recall", alpha=1e-300, horizon=3000, block=10, threshold=0.0)
        d.update_many(y, s)
        vals.append(d.report()["e_value"])
    assert np.mean(vals) < 1.0
    assert max(vals) < 1.0 / 0.01  # no stream near an alarm at alpha = 0.01


def test_a_change_keeps_its_start_time_counts_and_the_evidence_found():
    """``start_t`` is the event time of the last event before the changed stretch (the
    events are in time order here), ``n_before``/``n_after`` count the observations
    behind the two rates, and ``change_p_value`` keeps the detection's p-value while
    the running ``p_value`` starts again from 1."""
    rng = np.random.default_rng(4)
    n = 12_000
    y = rng.random(n) < 0.5
    hit = rng.random(n) < np.where(np.arange(n) < 6_000, 0.9, 0.6)
    s = np.where(y, np.where(hit, 0.9, 0.1), 0.2)
    t = 1_700_000_000.0 + 3.0 * np.arange(n)
    d = SequentialDrift("recall", alpha=0.005)
    d.update_many(y, s, t=t)
    c = d.changes[0]
    assert c.start_t == t[c.start - 1]
    assert c.n_before == y[:c.start].sum() and c.n_after == y[c.start:c.index + 1].sum()
    assert c.before == pytest.approx((s[:c.start][y[:c.start]] >= 0.5).mean(), abs=1e-12)
    rep = d.report()
    assert rep["change_p_value"] == c.p_value < 0.005
    assert rep["last_change"]["start_t"] == c.start_t
    # the same events one at a time: the same change
    e = SequentialDrift("recall", alpha=0.005)
    for yy, ss, tt in zip(y.tolist(), s.tolist(), t.tolist()):
        e.update(yy, ss, t=tt)
    assert e.changes[0] == c
    # a state written before the candidates kept their times still loads (no times)
    state = json.loads(json.dumps(d.to_state()))
    for cand in state["data"]["candidates"]:
        cand.pop()
    for ch in state["data"]["changes"]:
        for key in ("start_t", "n_before", "n_after"):
            ch.pop(key)
    old = se.from_state(state)
    assert old.changes[0].start_t is None and old.changes[0].start == c.start
    assert np.isnan(old._cands.t).all()
    before = se.from_state(json.loads(json.dumps(d.to_state())))
    assert before._cands.t.tolist() == d._cands.t.tolist()
    assert before.report() == d.report()
    # no times: no start time
    f = SequentialDrift("recall", alpha=0.005)
    f.update_many(y, s)
    assert f.changes[0].start_t is None and f.changes[0].start == c.start


# ------------------------------------- the plausible rates of a history, and speed

@pytest.mark.parametrize("s0,n0", [(850.0, 1000.0), (3.0, 10.0), (0.0, 40.0), (40.0, 40.0),
                                   (0.0, 0.0), (127_512.0, 150_000.0), (2.5, 7.25)])
@pytest.mark.parametrize("c", [0.5, 1.0, 20.0])
def test_the_plausible_rates_are_where_the_history_likelihood_reaches_the_level(s0, n0, c):
    """[lo, hi] of a history: where its log likelihood is at least log KT + log C,
    against brentq's roots (the vectorised and the one-at-a-time versions alike);
    a level above the best likelihood leaves none (lo > hi)."""
    K = sequential._log_kt(s0, n0) + math.log(c)
    ph = s0 / n0 if n0 else 0.5
    if _ll(ph, s0, n0 - s0) < K:
        want = None
    else:
        want = [_root(s0, n0 - s0, K, ph, 0.0) if s0 > 0 else 0.0,
                _root(s0, n0 - s0, K, ph, 1.0) if n0 - s0 > 0 else 1.0]
    lo, hi = sequential._region(np.array([s0]), np.array([n0]), np.array([K]))
    one = sequential._region_one(s0, n0, K)
    if want is None:
        assert lo[0] > hi[0] and one[0] > one[1]
        return
    np.testing.assert_allclose([lo[0], hi[0]], want, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(one, want, rtol=1e-12, atol=1e-300)
    if n0:
        assert lo[0] <= ph <= hi[0]


def test_the_plausible_rates_of_many_histories_match_brentq():
    """300 seeded small histories (where the ends lie near 0 or 1), both versions."""
    rng = np.random.default_rng(11)
    n = rng.integers(1, 200, 300).astype(float)
    s = np.floor(rng.random(300) * (n + 1))
    K = np.array([sequential._log_kt(a, b) for a, b in zip(s, n)])
    lo, hi = sequential._region(s, n, K)
    for i, (a, b, k) in enumerate(zip(s.tolist(), n.tolist(), K.tolist())):
        ph = a / b
        want = [_root(a, b - a, k, ph, 0.0) if a > 0 else 0.0,
                _root(a, b - a, k, ph, 1.0) if b - a > 0 else 1.0]
        np.testing.assert_allclose(sequential._region_one(a, b, k), want, rtol=1e-10)
        np.testing.assert_allclose([lo[i], hi[i]], want, rtol=1e-10)


def test_a_long_history_finds_a_small_drop_sooner_than_universal_inference_alone(
        monkeypatch):
    """The second e-value (the history's plausible rates) is what makes a long history
    cheap: on 10 seeded streams with 100 000 positives of history and recall 0.85 ->
    0.80, no detection comes later than with the universal-inference term alone, at its
    weight (the mixture is at least that term), and the median delay is shorter by a
    tenth or more."""
    def run(seed):
        rng = np.random.default_rng(700 + seed)
        n = 130_000
        y = np.ones(n, dtype=bool)
        hit = rng.random(n) < np.where(np.arange(n) < 100_000, 0.85, 0.80)
        d = SequentialDrift("recall", alpha=0.005).update_many(y, np.where(hit, 0.9, 0.1))
        return d.changes[0].index - 100_000 if d.changes else math.inf

    ours = [run(k) for k in range(10)]
    monkeypatch.setattr(sequential, "_log_e_local", lambda mix, *a: np.full(len(mix), -np.inf))
    alone = [run(k) for k in range(10)]
    assert all(0 < a <= b < math.inf for a, b in zip(ours, alone)), (ours, alone)
    assert np.median(ours) <= 0.9 * np.median(alone), (ours, alone)


def test_unknown_times_in_a_batch_are_passed_over_as_a_loop_passes_over_none():
    """A batch whose times are partly unknown (NaN, as a Monitor's buffers hold a missing
    time) leaves the detector where a loop of ``update`` with None for them leaves it:
    its newest time the largest known one (not NaN), the same report and state; and a
    Monitor fed such a batch reports what one fed event by event does."""
    from streameval.monitor import Monitor

    rng = np.random.default_rng(4)
    n = 3000
    y = rng.random(n) < 0.3
    s = rng.random(n)
    known = rng.random(n) < 0.8
    known[-5:] = False  # (the last times unknown: the newest stays the last known)
    t = np.where(known, 1000.0 + np.arange(n) + rng.integers(-3, 3, n), np.nan)
    batch = SequentialDrift(metric="recall")
    batch.update_trusted(y, s, None, t)
    loop = SequentialDrift(metric="recall")
    for i in range(n):
        loop.update(bool(y[i]), float(s[i]), t=float(t[i]) if known[i] else None)
    want = float(np.max(t[known]))
    assert batch.report()["t"] == loop.report()["t"] == want
    assert json.dumps(batch.to_state()) == json.dumps(loop.to_state())
    # every time unknown: no newest time, as in the loop
    none = SequentialDrift(metric="recall")
    none.update_trusted(y[:50], s[:50], None, np.full(50, np.nan))
    assert none.report()["t"] is None
    # through a Monitor: a batch with None times against a loop of update
    ts = [float(v) if k else None for v, k in zip(t.tolist(), known.tolist())]
    a, b = Monitor.default(), Monitor.default()
    a.update_many(y, s, t=ts)
    for i in range(n):
        b.update(bool(y[i]), float(s[i]), t=ts[i])
    got = {k: r["t"] for k, r in a.scopes()[0].reports().items()}
    assert got == {k: r["t"] for k, r in b.scopes()[0].reports().items()}
    assert set(got.values()) == {want}

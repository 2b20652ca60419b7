"""The AP error bound of a coarsened score order, written out from its bins: the
oracle the score-order tests compare ``AveragePrecision.error_bound()`` with."""

from __future__ import annotations

import numpy as np


def ap_bound_of_bins(p, n):
    """The AP bound of bins with positive weights ``p`` and negative weights ``n``,
    high to low (numpy arrays): with ``T`` and ``F`` the weights of the bins above, the
    larger gap between the binned value and its best and worst orders within each bin
    (the formula of the bound's docstring), over the positive weight."""
    tps, fps = np.cumsum(p), np.cumsum(n)
    t, f = tps - p, fps - n
    has = p > 0.0
    p, n, t, f, tps, fps = p[has], n[has], t[has], f[has], tps[has], fps[has]
    binned = float((p * tps / (tps + fps)).sum())
    upper = float((p * tps / (tps + f)).sum())
    base = t + f + n
    safe = np.where(base > 0.0, base, 1.0)
    lower = float(np.where(base > 0.0, p - (f + n) * np.log1p(p / safe), p).sum())
    return max(upper - binned, binned - lower, 0.0) / float(tps[-1])

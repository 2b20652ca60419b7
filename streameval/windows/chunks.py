"""The storage of a count window: :class:`Chunk` (a batch's columns) and
:class:`EventRun` (events added one at a time).

A count window keeps a deque of these, oldest first. Both have the same small
interface: ``len(chunk)`` (live events), ``front(m, skip=0)`` (the columns of live
events ``skip .. skip + m``) and ``pop_front(m)`` (forget the ``m`` oldest).

It may import numpy and the standard library only.
"""

from __future__ import annotations

import collections
import itertools
from operator import itemgetter

import numpy as np

__all__ = ["Chunk", "EventRun"]


class Chunk:
    """One batch of a count window, as columns ``y``, ``s``, ``w`` (``w`` None: every
    weight 1); its live events are those from ``lo`` on.

    For metrics with numpy validated columns (binary, regression) the columns are
    the validated ones (``metric.validate``: bool labels, float64 scores, float64
    weights), copied; for other metrics they are lists of the values as given.
    ``memo``: what the window's metric computed from the whole batch when it came in
    (a :class:`~streameval.metrics.base.shared_batch` memo), to revert all of it
    with, or None.

    >>> ch = Chunk(np.array([True, False, True]), np.array([0.9, 0.2, 0.4]), None)
    >>> ch.pop_front(1)
    >>> len(ch), ch.front(1)
    (2, (array([False]), array([0.2]), None))
    """

    __slots__ = ("y", "s", "w", "lo", "lists", "memo")

    def __init__(self, y, s, w, lo=0, memo=None):
        self.y, self.s, self.w, self.lo = y, s, w, lo
        self.memo = memo
        # the columns as Python lists, made once by a count window whose events expire
        # one at a time (list reads, not numpy scalars); None until then
        self.lists = None

    def __len__(self):
        return len(self.y) - self.lo

    def front(self, m, skip=0):
        """The columns of live events ``skip .. skip + m``. Runtime complexity: `O(m)`
        (numpy slices are views)."""
        lo = self.lo + skip
        hi = lo + m
        w = self.w
        return self.y[lo:hi], self.s[lo:hi], None if w is None else w[lo:hi]

    def pop_front(self, m):
        """Forget the ``m`` oldest live events (fewer than ``len(self)``). `O(1)`."""
        self.lo += m

    def check(self):
        """Assert the invariants of the chunk."""
        assert 0 <= self.lo < len(self.y) == len(self.s), (self.lo, len(self.y), len(self.s))
        assert self.w is None or len(self.w) == len(self.y)
        for col in (self.y, self.s, self.w):
            assert col is None or isinstance(col, (np.ndarray, list)), type(col)


class EventRun(collections.deque):
    """Events added one at a time, as ``(y_true, y_pred, w)`` tuples as given (the
    per-event path appends and pops them at C speed)."""

    __slots__ = ()

    def front(self, m, skip=0):
        """``(y_true, y_pred, w)`` lists of live events ``skip .. skip + m``. `O(m)`."""
        items = list(itertools.islice(self, skip, skip + m))
        return tuple(list(map(itemgetter(j), items)) for j in range(3))

    def pop_front(self, m):
        """Forget the ``m`` oldest events. `O(m)`."""
        popleft = self.popleft
        for _ in range(m):
            popleft()

    def check(self):
        """Assert the invariants of the chunk."""
        assert self and all(type(e) is tuple and len(e) == 3 for e in self)

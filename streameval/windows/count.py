"""Count sliding windows: the last ``size`` events (``Sliding(metric, size=N)``).

The window keeps a deque of :class:`~streameval.windows.chunks.Chunk` (batches, as
validated columns) and :class:`~streameval.windows.chunks.EventRun` (events added
one at a time), oldest first, and reverts expired events a chunk slice at a time (in
one call over a metric that declares ``revert_joined``, where that gives the same
bits: exact ROC AUC and AP with weights of 1; or handed over to a metric that declares
``revert_later`` and defers their removal to its next read, to the same bits: the same
metrics, on a window small enough for their flat layout), a whole batch with what the
metric computed from it when it came in (the chunk's memo, see
:class:`~streameval.metrics.base.shared_batch`).
Once full, a window over a metric that declares ``swap`` (the binary ranking metrics)
hands it each new event and the one it expires in one call: the per-event path of a
sliding AUC. The fast paths are the metric's declared
:class:`~streameval.metrics.base.Capabilities`, bound when the window binds the metric.

It may import numpy, the standard library, :mod:`streameval.windows.sliding` (the
front it implements), :mod:`streameval.windows.chunks` and
:mod:`streameval.windows.common`.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from streameval.windows.chunks import Chunk, EventRun
from streameval.windows.common import (
    MetricOps,
    as_items,
    decoded_columns,
    decoded_events,
    encode,
    encode_column,
    fresh,
    shared_batch,
    slice_columns,
    update_keeping_memo,
    weights_or_none,
)
from streameval.windows.sliding import Sliding

__all__ = ["RunPacker", "packing_together", "restoring_runs", "check_groups",
           "RUN_GROUP_LIVE"]


def _copy(col):
    return col.copy() if isinstance(col, np.ndarray) else list(col)


class _CountSliding(Sliding, case="count"):
    """``Sliding(metric, size=N)``: see :class:`~streameval.windows.sliding.Sliding`."""

    def _init_store(self):
        # a deque of Chunk / EventRun, oldest first; `_tail` is the newest chunk while
        # it is an EventRun (single events are appended to it)
        self._chunks = collections.deque()
        self._tail = None
        self._n = 0

    # -- per event ---------------------------------------------------------------
    def update(self, y_true, y_pred, w=1.0, t=None):
        """Add one event; the oldest one expires once the window is full.

        The wrapped metric validates the event before the window stores it: a bad
        event raises ``ValueError`` and changes nothing.
        """
        if self._n == self.size:
            first = self._chunks[0]
            old = first[0] if type(first) is EventRun else self._oldest_of(first)
            if self._replace is not None:  # the new event in, the oldest out: one call
                self._replace(y_true, y_pred, w, old[0], old[1], old[2])
            else:
                self._update(y_true, y_pred, w=w)
                self._revert(old[0], old[1], w=old[2])
            if type(first) is EventRun:
                first.popleft()
                if not first:
                    self._chunks.popleft()
                    if first is self._tail:
                        self._tail = None
            else:
                self._drop_oldest_of(first)
        else:
            self._update(y_true, y_pred, w=w)
            self._n += 1
        tail = self._tail
        if tail is None:
            tail = self._tail = EventRun()
            self._chunks.append(tail)
        tail.append((y_true, y_pred, w))

    def _oldest_of(self, first):
        """The oldest live event of a Chunk as Python values ``(y, s, w)`` (labels as
        configured)."""
        i = first.lo
        if first.lists is None:  # made once: O(n), then each expiry reads Python values
            first.lists = (as_items(first.y), as_items(first.s),
                           None if first.w is None else as_items(first.w))
        ys, ss, ws = first.lists
        y = ys[i]
        labels = self._labels
        if labels is not None and self._typed:
            y = labels[1] if y else labels[0]
        return y, ss[i], 1.0 if ws is None else ws[i]

    def _drop_oldest_of(self, first):
        """Forget the oldest live event of a Chunk (the chunk goes with its last)."""
        i = first.lo + 1
        if i == len(first.y):
            self._chunks.popleft()
        else:
            first.lo = i

    def __len__(self):
        return self._n

    def events(self):
        """The events in the window, oldest first: ``(y_true, y_pred, w)`` tuples
        (batch events as validated: labels as configured, scores and weights as
        floats, for binary and regression metrics).

        Runtime complexity: `O(n)`.
        """
        out = []
        for ch in self._chunks:
            if type(ch) is EventRun:
                out.extend(ch)
            else:
                out.extend(zip(*self._values(ch)))
        return out

    def _values(self, ch):
        """Python ``(y_true, y_pred, w)`` lists of a Chunk's live events."""
        y, s, w = ch.front(len(ch))
        if self._typed:
            y, s, w = decoded_columns(self.metric, (y, s, w))
        ys = as_items(y)
        return ys, as_items(s), [1.0] * len(ys) if w is None else as_items(w)

    # -- batches -----------------------------------------------------------------
    def _add(self, cols, ts, raw):
        n = len(cols[0])
        if not n:
            return
        size = self.size
        if n >= size:
            # only the last `size` events stay: build a fresh metric from them
            tail = slice(n - size, n)
            cols = slice_columns(cols, tail)
            raw = None if raw is None else slice_columns(raw, tail)
            other = fresh(self.metric)
            MetricOps(other).update_trusted(*cols)
            self._chunks.clear()
            self._tail = None
            self._n = 0
            self.metric = other
            self._bind()
            self._store(cols, raw)
            return
        expired = self._n + n - size
        if expired > self._rebuild_fraction * size:
            # rebuild from the surviving events, then the batch
            other = fresh(self.metric)
            self._feed(MetricOps(other), max(expired, 0))
            MetricOps(other).update_trusted(*cols)
            self._drop(expired)
            self.metric = other
            self._bind()
            self._store(cols, raw)
            return
        if self._typed:  # (what the metric computes from the batch: kept, to revert it)
            memo = update_keeping_memo(self._ops.update_trusted, cols)
        else:
            self._ops.update_trusted(*cols)
            memo = None
        if expired > 0:
            self._expire(expired)
        self._store(cols, raw, memo)

    def _store(self, cols, raw, memo=None):
        """Keep a batch as a Chunk: validated numpy columns (copied) for binary and
        regression metrics, else Python values as given; ``memo``: what the metric
        computed from the whole batch (see :class:`Chunk`)."""
        if self._typed:
            y, s, w = cols
            chunk = Chunk(_copy(y), _copy(s), None if w is None else _copy(w), memo=memo)
        else:
            y, s, w = cols if raw is None else raw
            ys = as_items(y)
            chunk = Chunk(ys, as_items(s), [1.0] * len(ys) if w is None else as_items(w))
        self._chunks.append(chunk)
        self._tail = None
        self._n += len(chunk)

    def _pieces(self, skip=0):
        """``(chunk, m, skip)`` for the live events after the first ``skip``."""
        for ch in self._chunks:
            k = len(ch)
            if skip >= k:
                skip -= k
                continue
            yield ch, k - skip, skip
            skip = 0

    def _feed(self, ops, skip=0):
        """Add the window's events after the first ``skip`` to a metric (its ops)."""
        for ch, m, lo in self._pieces(skip):
            y, s, w = ch.front(m, lo)
            if self._typed and type(ch) is Chunk:
                ops.update_trusted(y, s, w)
            else:
                ops.add_raw(y, s, weights_or_none(w))

    def _refill(self, ops):
        self._feed(ops)

    def _expire(self, k):
        """Revert the ``k`` oldest events, a chunk slice at a time; over a metric that
        defers their removal to its next read to the same bits (its declared
        ``revert_later``), in one call; over one that reverts several slices at once to
        the same bits (its declared ``revert_joined``), in one call when they span
        several chunks."""
        joined = self._joined is not None and k > len(self._chunks[0])
        if self._typed and (self._later is not None or joined):
            slices, left = [], k
            for ch in self._chunks:
                if type(ch) is not Chunk:
                    slices = None
                    break
                m = min(left, len(ch))
                slices.append(ch.front(m))
                left -= m
                if not left:
                    break
            if slices is not None and (
                    (self._later is not None and self._later(slices))
                    or (joined and self._joined(slices))):
                self._drop(k)
                return
        self._n -= k
        while k:
            ch = self._chunks[0]
            m = min(k, len(ch))
            y, s, w = ch.front(m)
            if self._typed and type(ch) is Chunk:
                if ch.memo is not None and not ch.lo and m == len(ch.y):
                    # the whole batch: what the metric computed from it when it came in
                    with shared_batch(y, s, w, ch.memo):
                        self._ops.revert_trusted(y, s, w)
                else:
                    self._ops.revert_trusted(y, s, w)
            else:
                self._ops.remove_raw(y, s, weights_or_none(w))
            self._pop_front(ch, m)
            k -= m

    def _pop_front(self, ch, m):
        """Forget the ``m`` oldest events of the oldest chunk ``ch``."""
        if len(ch) == m:
            self._chunks.popleft()
            if ch is self._tail:
                self._tail = None
        else:
            ch.pop_front(m)

    def _drop(self, k):
        """Forget the ``k`` oldest events (no revert)."""
        k = max(k, 0)
        self._n -= k
        while k:
            ch = self._chunks[0]
            m = min(k, len(ch))
            self._pop_front(ch, m)
            k -= m

    def _merge_window(self, other):
        for ch, m, lo in other._pieces():
            y, s, w = ch.front(m, lo)
            if self._typed and type(ch) is Chunk:
                self.update_trusted(y, s, w)
            else:
                self.update_many(y, s, weights_or_none(w))

    # -- state -------------------------------------------------------------------
    def _stored_state(self):
        rows = []
        for ch in self._chunks:
            if type(ch) is EventRun:
                rows.extend([encode(x) for x in e] for e in ch)
                continue
            y, s, w = ch.front(len(ch))
            if self._typed:
                y, s, w = decoded_columns(self.metric, (y, s, w))
            cols = [encode_column(y), encode_column(s),
                    [1.0] * len(ch) if w is None else encode_column(w)]
            rows.extend(map(list, zip(*cols)))
        # the live length of each chunk (and whether events are appended to it), so
        # that a restored window expires its events in the same slices, hence to the
        # same bits, as the original
        return {"events": rows,
                "chunks": [[len(c), type(c) is EventRun] for c in self._chunks]}

    def _restore(self, data):
        events = decoded_events(data["events"])
        # states written before the chunk layout was recorded hold the events only
        layout = data.get("chunks") or ([[len(events), True]] if events else [])
        if sum(k for k, _ in layout) != len(events):
            raise ValueError(f"state of a Sliding window: chunks {layout!r:.100} do not "
                             f"hold its {len(events)} events")
        i = 0
        for k, appendable in layout:
            if k < 1:
                raise ValueError(f"state of a Sliding window: a chunk of {k!r} events")
            part = events[i:i + k]
            if appendable:
                self._chunks.append(EventRun(part))
            else:
                y, s, w = ([e[j] for e in part] for j in range(3))
                w = weights_or_none(w)
                if self._typed:
                    self._store(self._ops.validate(y, s, w), None)
                else:
                    self._store((y, s, w), None)
            i += k
        self._n = len(events)
        last = self._chunks[-1] if self._chunks else None
        self._tail = last if type(last) is EventRun else None

    def _check(self):
        """Assert the invariants: the chunks hold at most ``size`` live events, and the
        wrapped metric equals a fresh one fed with exactly the window's events."""
        events = self.events()
        assert len(events) <= self.size, (len(events), self.size)
        assert len(events) == self._n, (len(events), self._n)
        chunks = list(self._chunks)
        for ch in chunks:
            assert type(ch) in (Chunk, EventRun), type(ch)
            assert len(ch) >= 1
            ch.check()
            if type(ch) is Chunk and self._typed:
                assert all(isinstance(c, np.ndarray) for c in (ch.y, ch.s))
        assert self._tail is None or (chunks and self._tail is chunks[-1])
        self._check_metric([(e[0], e[1], e[2]) for e in events])

    def _stored_arrays(self):
        """The stored batches for a binary checkpoint, as runs of consecutive batches
        packed into one array per column (a run packed once is kept and given again
        while its batches live: a batch never changes, and the oldest only loses live
        events from its front), with each batch's length, the first live batch of the
        run and its first live event (a run of one batch: the batch's own columns,
        read-only views, and a sizes array shared by every such run of its length); an
        event run's events as JSON rows. None when
        batches are kept as Python values (the JSON state then).

        The batches new since the last call form a new run, and a run is merged with
        the one before it (packed again as one) while it holds at least half as many
        events (:data:`RUN_MERGE`; only a run packed by this call, so runs packed
        before, restored ones included, are not packed again without new batches), as
        the levels of a log-structured merge tree are: a
        window checkpointed after every few batches gives `O(log)` runs, not one per
        checkpoint (each run is a few references a checkpoint writer meets), and each
        event is packed again `O(log)` times.

        Inside :func:`packing_together` (a Monitor's capture), the runs to pack are given
        to its :class:`RunPacker`, which packs them with those of the other windows
        captured then into shared columns (a run's state names its group and its part
        of it, see :func:`_shared_form`), and a run of a group the packer names stale
        is packed again with them. Runtime complexity: `O(chunks)` plus packing the
        batches new since the last call and the runs merged."""
        if not self._typed:
            return None
        memo = self.__dict__.get("_packs") or []  # (set by the last call or a restore)
        packer = _PACKER.value
        chunks = list(self._chunks)
        # the store as parts, oldest first: [packed, k] (a run packed before, from its
        # batch k on), [None, batches] (a run to pack), or [False, event run]
        parts = []
        pos, size = 0, len(chunks)
        # the runs packed before that are still here: a prefix of the batches (they only
        # expire at the front and come in at the back), checked by their ends
        start = None
        if memo and size:
            first = chunks[0]
            for r, packed in enumerate(memo):
                j = packed[5].get(id(first))
                if j is not None and packed[0][j] is first and packed[1] is not None:
                    start = (r, j)
                    break
        if start is not None:
            r, k = start
            for packed in memo[r:]:
                members = packed[0]
                rest = len(members) - k
                if (pos + rest > size or chunks[pos] is not members[k]
                        or chunks[pos + rest - 1] is not members[-1]):
                    break
                if packed[6] is not None and (packer is None
                                              or packed[6][5] in packer.stale):
                    # (its shared columns are mostly dead: its batches join the new ones;
                    # or captured alone, where no monitor holds the group's columns)
                    parts.append([None, members[k:]])
                else:
                    parts.append([packed, k])
                pos += rest
                k = 0
        run: list = []
        for ch in chunks[pos:]:
            if type(ch) is EventRun:
                if run:
                    parts.append([None, run])
                    run = []
                parts.append([False, ch])
                continue
            if run and (run[0].w is None) != (ch.w is None):
                parts.append([None, run])
                run = []
            run.append(ch)
        if run:
            parts.append([None, run])
        # (merged from the newest back: a run at least half the one before joins it)
        # (only a run packed now joins the one before it, so a capture with no new
        # batch, such as the first after a restore, packs nothing again)
        while len(parts) >= 2:
            older, newer = parts[-2], parts[-1]
            if older[0] is False or newer[0] is not None:
                break
            a, b = _run_batches(older), _run_batches(newer)
            if (a[0].w is None) != (b[0].w is None) or \
                    RUN_MERGE * _run_events(older, a) > _run_events(newer, b):
                break
            parts[-2:] = [[None, a + b]]
        out, used = [], []
        for packed, x in parts:
            if packed is False:
                out.append({"events": [[encode(v) for v in e] for e in x]})
                continue
            if packed is None:
                if packer is not None:  # (packed with the capture's other new runs)
                    packed, d = packer.add(x)
                    used.append(packed)
                    out.append(d)
                    continue
                packed = _pack_run(x)
                x = 0
            used.append(packed)
            shared = packed[6]
            if shared is None:
                out.append({"y": packed[1], "s": packed[2], "w": packed[3],
                            "sizes": packed[4], "first": x, "lo": int(packed[0][x].lo)})
            else:
                out.append(_shared_form(shared, x, int(packed[0][x].lo)))
            if packer is not None:
                packer.met(packed)
        self._packs = used
        return out

    def _restore_arrays(self, store):
        """Restore :meth:`_stored_arrays`, checked (``ValueError``): each batch a view of
        its run's packed columns (no copy), and the runs remembered so that the next
        checkpoint references them."""
        if not isinstance(store, list):
            raise ValueError("bad Sliding state: store must be a list of chunks")
        n = 0
        packs = []
        # (a regression metric's targets are float64 columns, a binary metric's bools)
        label_dtype = np.float64 if self.columns == "regression" else np.bool_
        for i, d in enumerate(store):
            where = f"Sliding state: chunk run {i}"
            if isinstance(d, dict) and set(d) == {"events"}:
                if not isinstance(d["events"], list) or not d["events"] or not all(
                        isinstance(e, list) and len(e) == 3 for e in d["events"]):
                    raise ValueError(f"bad {where}: events must be [y, score, w] rows")
                ch = EventRun(decoded_events(d["events"]))
                self._chunks.append(ch)
                n += len(ch)
                continue
            keys = set(d) if isinstance(d, dict) else None
            shared = None
            if keys == {"g", "at", "first", "lo"}:  # (a part of a group's columns)
                shared = _shared_part(d, label_dtype, where)
                y, s, w, sizes = _shared_views(shared)
                first, lo = d["first"], d["lo"]
            elif keys == {"y", "s", "w", "sizes", "first", "lo"}:
                y, s, w, sizes, first, lo = (d[k] for k in ("y", "s", "w", "sizes", "first",
                                                            "lo"))
            else:
                raise ValueError(f"bad {where}: expected packed columns or events")
            if not (isinstance(y, np.ndarray) and y.dtype == label_dtype and y.ndim == 1
                    and isinstance(s, np.ndarray) and s.dtype == np.float64
                    and s.shape == y.shape and (w is None or (
                        isinstance(w, np.ndarray) and w.dtype == np.float64
                        and w.shape == y.shape))
                    and isinstance(sizes, np.ndarray) and sizes.dtype == np.int64
                    and sizes.ndim == 1 and len(sizes) and (sizes >= 1).all()
                    and int(sizes.sum()) == len(y)):
                raise ValueError(f"bad {where}: columns must be {label_dtype.__name__} "
                                 "labels and float64 scores (and weights) of one length, "
                                 "split by sizes")
            if type(first) is not int or not 0 <= first < len(sizes) or type(lo) is not int \
                    or not 0 <= lo < int(sizes[first]):
                raise ValueError(f"bad {where}: first = {first!r:.20}, lo = {lo!r:.20} "
                                 "outside its batches")
            ends = np.cumsum(sizes)
            run = []
            for j, (a, z) in enumerate(zip((ends - sizes).tolist(), ends.tolist())):
                ch = Chunk(y[a:z], s[a:z], None if w is None else w[a:z])
                run.append(ch)
                if j >= first:
                    self._chunks.append(ch)
            run[first].lo = lo
            n += int(sizes[first:].sum()) - lo
            # (read-only views, as packed: a checkpoint writer that loaded them
            # references them while they live instead of writing them again)
            packs.append([run, _frozen(y), _frozen(s), _frozen(w), _frozen(sizes),
                          {id(c): j for j, c in enumerate(run)}, shared])
        if n > self.size:
            raise ValueError(f"bad Sliding state: {n} events in a window of {self.size}")
        self._n = n
        self._packs = packs
        last = self._chunks[-1] if self._chunks else None
        self._tail = last if type(last) is EventRun else None

#: a run of batches is packed again with the run before it, as one, while it holds at
#: least this share of that run's events (see :meth:`Sliding._stored_arrays`): the runs
#: of a window then hold geometrically fewer events from the oldest to the newest
RUN_MERGE = 0.5


def _run_batches(part):
    """The batches of a part of :meth:`Sliding._stored_arrays` (a packed run from its
    batch ``k`` on, or a run to pack)."""
    return part[1] if part[0] is None else part[0][0][part[1]:]


def _run_events(part, batches):
    """Events (expired ones of the first batch included) of a part's ``batches``
    (:func:`_run_batches`): a packed run's whole length when it is whole."""
    if part[0] is not None and part[1] == 0:
        return len(part[0][1])
    return sum(len(c.y) for c in batches)


def _pack_run(run):
    """A run of batches packed: ``(batches, y, s, w, sizes, {id(batch): index})``, the
    columns read-only (one batch: its own columns, and a sizes array shared by every
    such run of its length)."""
    if len(run) == 1:  # (one batch: its own columns, which never change)
        c = run[0]
        y, s, w = c.y, c.s, c.w
        sizes = _ONE.get(len(y))
        if sizes is None:
            if len(_ONE) > 1024:
                _ONE.clear()
            sizes = _ONE[len(y)] = _frozen(np.array([len(y)], dtype=np.int64))
    else:
        y = _frozen(np.concatenate([c.y for c in run]))
        s = _frozen(np.concatenate([c.s for c in run]))
        w = None if run[0].w is None else _frozen(np.concatenate([c.w for c in run]))
        sizes = np.array([len(c.y) for c in run], dtype=np.int64)
        # (each batch's columns become views of the packed ones, as a restore makes
        # them: the same values, and the window's events held once, not twice)
        a = 0
        for c, k in zip(run, sizes.tolist()):
            c.y, c.s = y[a:a + k], s[a:a + k]
            if w is not None:
                c.w = w[a:a + k]
            a += k
    return [list(run), _frozen(y), _frozen(s), _frozen(w), _frozen(sizes),
            {id(c): j for j, c in enumerate(run)}, None]


def _shared_form(shared, first, lo):
    """A run's state as a part of a group of columns shared with other runs: the
    group's number ``g`` (its columns are in the Monitor's state, see
    :meth:`RunPacker.groups`) and ``at = [first event, end event, first size, end
    size]``."""
    return {"g": shared[5], "at": shared[4], "first": first, "lo": lo}


def _shared_views(shared):
    """A shared run's own columns: views of its part of the shared ones."""
    Y, S, W, SZ, (e0, e1, b0, b1) = shared[:5]
    return Y[e0:e1], S[e0:e1], None if W is None else W[e0:e1], SZ[b0:b1]


def _shared_part(d, label_dtype, where):
    """``(Y, S, W, SZ, at, g)`` of a stored run in the shared form
    (:func:`_shared_form`), its group's columns those given to :func:`restoring_runs`,
    checked (``ValueError``): a known group of the right label type, ``at`` within its
    columns and its sizes at least 1, adding up to its events."""
    g, at = d["g"], d["at"]
    groups = _GROUPS.value
    group = groups.get(g) if type(g) is int and groups is not None else None
    if group is None:
        raise ValueError(f"bad {where}: g = {g!r:.40} is no group of shared columns "
                         "of the monitor's state")
    Y, S, W, SZ = group
    if Y.dtype != label_dtype:
        raise ValueError(f"bad {where}: group {g} holds {Y.dtype} labels, not "
                         f"{label_dtype.__name__}")
    if not (isinstance(at, list) and len(at) == 4 and all(type(v) is int for v in at)
            and 0 <= at[0] < at[1] <= len(Y) and 0 <= at[2] < at[3] <= len(SZ)):
        raise ValueError(f"bad {where}: at = {at!r:.60} is not [first, end event, first, "
                         f"end size] within its group's columns ({len(Y)} events, "
                         f"{len(SZ)} sizes)")
    part = SZ[at[2]:at[3]]
    if not ((part >= 1).all() and int(part.sum()) == at[1] - at[0]):
        raise ValueError(f"bad {where}: its sizes do not split its {at[1] - at[0]} events")
    return Y, S, W, SZ, list(at), g


def check_groups(table):
    """The groups of shared columns of a Monitor's state (``{"<g>": {"y", "s", "w",
    "sizes"}}``, see :meth:`RunPacker.groups`) as ``{g: (Y, S, W, SZ)}``, checked
    (``ValueError``): typed columns of one length (labels bool or float64, scores and
    weights float64, sizes int64), read-only (as loaded, or views)."""
    if not isinstance(table, dict):
        raise ValueError("bad Monitor state: data.window_groups is not an object")
    out = {}
    for key, cols in table.items():
        where = f"bad Monitor state: data.window_groups[{key!r:.20}]"
        if not (isinstance(key, str) and key.isdigit() and isinstance(cols, dict)
                and set(cols) == {"y", "s", "w", "sizes"}):
            raise ValueError(f"{where}: expected a group number and y, s, w, sizes")
        Y, S, W, SZ = (cols[k] for k in ("y", "s", "w", "sizes"))
        if not (isinstance(Y, np.ndarray) and Y.dtype in (np.bool_, np.float64)
                and Y.ndim == 1
                and isinstance(S, np.ndarray) and S.dtype == np.float64 and S.shape == Y.shape
                and (W is None or (isinstance(W, np.ndarray) and W.dtype == np.float64
                                   and W.shape == Y.shape))
                and isinstance(SZ, np.ndarray) and SZ.dtype == np.int64 and SZ.ndim == 1):
            raise ValueError(f"{where}: columns must be bool or float64 labels, float64 "
                             "scores (and weights) of one length, and int64 sizes")
        out[int(key)] = tuple(a if a is None or not a.flags.writeable else _frozen(a)
                              for a in (Y, S, W, SZ))
    return out


class _Slot(threading.local):
    """A module's setting for the windows captured or restored inside a context
    (:class:`_Setting`), per thread: two monitors captured or restored in two threads
    never see each other's."""

    value = None


#: the groups of shared columns of the Monitor's state being restored (see
#: :func:`restoring_runs`): ``{g: (Y, S, W, SZ)}``, or None
_GROUPS = _Slot()


def restoring_runs(groups):
    """``with restoring_runs(groups):`` count windows restored inside read their shared
    runs' columns from ``groups`` (what :func:`check_groups` gives)."""
    return _Setting(_GROUPS, groups)


class _Setting:
    """A context that holds ``value`` in ``slot`` (a :class:`_Slot`) for this thread,
    and what it held before after."""

    def __init__(self, slot, value):
        self.slot, self.value = slot, value

    def __enter__(self):
        self.prev, self.slot.value = self.slot.value, self.value
        return self.value

    def __exit__(self, *exc):
        self.slot.value = self.prev
        return False


class RunPacker:
    """The count windows' new runs of one capture (a Monitor's
    :meth:`~streameval.monitor.Monitor.to_array_state`) packed into columns they share:
    per label type and weighting, one labels, one scores (one weights) and one sizes
    array, each run stored as its part ``at`` of them (:func:`_shared_form`). A
    checkpoint writer then meets three or four new arrays per capture, whatever the
    number of windows and segments, instead of three or four per window, and the runs
    of one scope's windows that hold the same batches (each window keeps its own copy
    of a batch) are stored once, their batches becoming views of the same memory.

    Liveness: a group of shared columns stays in memory and on disk while one run
    references it. :meth:`groups` names the groups whose referenced events are
    fewer than :data:`RUN_GROUP_LIVE` of theirs; a window given a packer whose
    ``stale`` holds one of its runs' groups packs that run again with the new ones (a
    Monitor captures again the scopes holding such runs), so idle windows do not keep
    old columns alive forever.

    Use: ``with packing_together(packer):`` around the windows' captures, then
    :meth:`finish` (which fills the runs' states given during them); :meth:`begin` and
    :meth:`end` around each scope's windows: the runs they reference."""

    def __init__(self, stale=frozenset(), serial=0):
        self.stale = stale  # the numbers of the groups to pack again
        self.serial = serial  # the number of the next group
        self._pending = []  # [packed, state] of the runs to pack
        self._refs = None  # the packed runs met since begin()
        self._twins = None  # (label type, weighting, sizes) -> runs of this scope

    def begin(self):
        """Start a scope: :meth:`end` gives the runs its windows referenced, and runs of
        its windows that hold the same batches are stored once."""
        self._refs = []
        self._twins = {}

    def end(self):
        """The runs (packed lists) the windows captured since :meth:`begin` reference."""
        refs, self._refs, self._twins = self._refs, None, None
        return refs

    def met(self, packed):
        if self._refs is not None:
            self._refs.append(packed)

    def add(self, run):
        """A run of batches to pack: its packed list (columns filled by :meth:`finish`)
        and its state (likewise)."""
        packed = [list(run), None, None, None, None, {id(c): j for j, c in enumerate(run)},
                  None]
        d = {"first": 0, "lo": int(run[0].lo)}
        twins = self._twins
        twin = None
        if twins is not None:
            key = (run[0].y.dtype.str, run[0].w is None, tuple(len(c.y) for c in run))
            for other in twins.get(key, ()):
                if all(_same(a, b) for a, b in zip(run, other[0])):
                    twin = other
                    break
            else:
                twins.setdefault(key, []).append(packed)
        self._pending.append((packed, d, twin))
        self.met(packed)
        return packed, d

    def finish(self):
        """Pack the runs given by :meth:`add` (grouped by label type and weighting),
        make their batches views of the packed columns, and fill their states."""
        groups = {}
        for packed, _, twin in self._pending:
            if twin is None:
                c = packed[0][0]
                groups.setdefault((c.y.dtype.str, c.w is None), []).append(packed)
        for (_, unweighted), runs in groups.items():
            chunks = [c for p in runs for c in p[0]]
            Y = _frozen(np.concatenate([c.y for c in chunks]))
            S = _frozen(np.concatenate([c.s for c in chunks]))
            W = None if unweighted else _frozen(np.concatenate([c.w for c in chunks]))
            SZ = _frozen(np.array([len(c.y) for c in chunks], dtype=np.int64))
            g = self.serial
            self.serial += 1
            e = b = 0
            for p in runs:
                n = sum(len(c.y) for c in p[0])
                p[6] = (Y, S, W, SZ, [e, e + n, b, b + len(p[0])], g)
                p[1], p[2], p[3], p[4] = _shared_views(p[6])
                e, b = e + n, b + len(p[0])
        for packed, d, twin in self._pending:
            if twin is not None:
                packed[1:5], packed[6] = twin[1:5], twin[6]
            # (each batch a view of the packed columns: the events held once)
            y, s, w, _ = packed[1:5]
            a = 0
            for c in packed[0]:
                k = len(c.y)
                c.y, c.s = y[a:a + k], s[a:a + k]
                if w is not None:
                    c.w = w[a:a + k]
                a += k
            d.update(_shared_form(packed[6], 0, d["lo"]))
        self._pending = []

    @staticmethod
    def groups(refs):
        """``(table, stale)`` of the groups the runs in ``refs`` (lists of packed runs,
        each list what a scope references) reference: ``table``, their columns for the
        Monitor's state, ``{"<g>": {"y", "s", "w", "sizes"}}`` (what
        :func:`check_groups` reads), and ``stale``, the numbers of those whose events
        the runs reference are fewer than :data:`RUN_GROUP_LIVE` of theirs. Runtime
        complexity: `O(runs referenced)`."""
        live, cols = {}, {}
        for scope in refs:
            for p in scope:
                sh = p[6]
                if sh is None:
                    continue
                g, at = sh[5], sh[4]
                parts = live.get(g)
                if parts is None:
                    parts = live[g] = {}
                    cols[g] = sh
                parts[at[0]] = at[1] - at[0]
        table = {str(g): {"y": sh[0], "s": sh[1], "w": sh[2], "sizes": sh[3]}
                 for g, sh in sorted(cols.items())}
        stale = frozenset(g for g, r in live.items()
                          if sum(r.values()) < RUN_GROUP_LIVE * len(cols[g][0]))
        return table, stale


#: a group of windows' runs packed together (:class:`RunPacker`) is packed again when
#: the runs that still reference it hold fewer than this share of its events: the
#: columns kept (in memory and on disk) stay within about the inverse of it times the
#: live ones
RUN_GROUP_LIVE = 0.25

#: the packer the count windows captured now give their new runs to (None: each packs
#: its own, see :func:`packing_together`)
_PACKER = _Slot()


def packing_together(packer):
    """``with packing_together(packer):`` the count windows' binary states captured
    inside give their new runs to ``packer`` (:class:`RunPacker`), which packs them
    together at its :meth:`~RunPacker.finish`."""
    return _Setting(_PACKER, packer)


def _same(a, b):
    """Whether two batches hold the same bits (labels, scores, weights, live front)."""
    if len(a.y) != len(b.y) or a.lo != b.lo or (a.w is None) != (b.w is None):
        return False
    # (bytes: -0.0 and 0.0 differ; a few hundred events cost less than array_equal's
    # own calls)
    return (a.s.tobytes() == b.s.tobytes() and a.y.tobytes() == b.y.tobytes()
            and (a.w is None or a.w.tobytes() == b.w.tobytes()))


#: a run of one batch's sizes, ``[n]`` read-only, by ``n``: shared by the windows that
#: give one (a checkpoint writes each once)
_ONE: dict = {}


def _frozen(a):
    """A read-only view of ``a`` (None stays None)."""
    if a is None:
        return None
    v = a.view()
    v.flags.writeable = False
    return v

"""Scenarios: runnable, self-describing streams with a monitor config and expected alerts.

A scenario is a TOML file with four parts::

    [scenario]                 # what it shows
    name = "sea-drift"
    description = "..."
    strict = true              # (default) a firing no [[expect]] covers is a failure

    [stream]                   # how the events are made (deterministic by seed)
    kind = "river_generator"   # or "river_dataset", "stationary", "log"
    ...

    [monitor]                  # the monitor config, exactly as in a --config file
    ...                        # (any other top-level table is config too)

    [[expect]]                 # the alerts that must happen
    rule = "recall_low"
    state = "firing"           # default "firing"
    n_min = 10_000             # the transition's n (events counted) in [n_min, n_max]
    n_max = 12_000
    segment = "eu"             # optional

    # or, for a stream where nothing may fire:
    [[expect]]
    none = true

Stream kinds (every one seeded; the same file always gives the same rows):

* ``river_dataset``: a dataset that ships inside river (``dataset = "Phishing"``),
  scored *prequentially* by a river model (``model = "linear_model.LogisticRegression"``,
  optional ``model_params``, ``preprocessing = ["preprocessing.StandardScaler"]``):
  each event is scored by ``predict_proba_one`` before ``learn_one`` sees its label.
* ``river_generator``: a synthetic river generator (``generator = "SEA"``,
  ``params = {variant = 3, seed = 1}``, ``n = 20000``), optionally with a planted
  concept drift ``[stream.drift]`` (``generator``, ``params``, ``position``, ``width``,
  ``seed``: river's ``ConceptDriftStream``), scored prequentially by a river model.
  ``learn_until = N`` freezes the model after N events (a model trained, then
  deployed: it does not adapt to the drift).
* ``stationary``: labels ``Bernoulli(prevalence)``, scores
  ``sigmoid(separation * (2y - 1) / 2 + N(0, 1))`` rounded to ``decimals``
  (ties, as logged scores have), optional ``segments`` drawn uniformly. Nothing
  changes over time.
* ``log``: a bundled event log (``path``, relative to the scenario file, e.g.
  ``"data/checkout.jsonl.gz"``), replayed as is.

Common stream keys: ``seed``, ``start`` (epoch seconds of the first event, default
1 700 000 000), ``interval`` (seconds between events, default 1), ``decimals``
(round scores; default: not rounded). Delayed labels: a ``[stream.delay]`` table
(``min``, ``max`` seconds, ``missing`` share of predictions never labelled) makes the
stream a prediction row ``{"ts", "id", "score"}`` per event and a label row
``{"ts", "id", "label"}`` later, in time order; the monitor config must then join them
(its delayed-label settings).

Generated streams are written as JSONL event logs with the default field names
(``ts``, ``id``, ``label``, ``score``, ``segment``) and replayed like any log:
``streameval run`` is ``replay`` of the materialised log with the scenario's config.

Imports: numpy, the standard library, :mod:`streameval.runconfig` (the keys of each
table) and river (its generators and datasets, on first use: an optional dependency
of the river kinds); nothing from streameval's monitor or pipeline
(:func:`streameval.replay.run_scenario` joins a scenario's stream and its config).

>>> import tempfile, os
>>> d = tempfile.mkdtemp(); p = os.path.join(d, "s.toml")
>>> _ = open(p, "w").write('''
... [scenario]
... name = "tiny"
... [stream]
... kind = "stationary"
... n = 4
... seed = 1
... decimals = 2
... [[expect]]
... none = true
... ''')
>>> sc = load(p)
>>> rows = list(iter_rows(sc))
>>> len(rows), sorted(rows[0])
(4, ['id', 'label', 'score', 'ts'])
>>> check(sc, [{"rule": "r", "state": "firing", "n": 3}])
['expected no alert to fire, but r fired at n=3']
"""

from __future__ import annotations

import dataclasses
import gzip
import importlib
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from streameval import runconfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Scenario", "load", "generate", "iter_rows", "write_log", "materialize", "check", "KINDS"]

KINDS = ("river_dataset", "river_generator", "stationary", "log")

DEFAULT_START = 1_700_000_000.0

# the keys of each table, from the schema of scenario files (streameval.runconfig)
_SCENARIO_KEYS = set(runconfig.keys("scenario"))
_STREAM_KEYS = {kind: set(runconfig.stream_keys(kind)) for kind in KINDS}
_DRIFT_KEYS = set(runconfig.keys("stream.drift"))
_DELAY_KEYS = set(runconfig.keys("stream.delay"))
_EXPECT_KEYS = set(runconfig.keys("expect"))
_STATES = ("pending", "firing", "resolved")


@dataclasses.dataclass
class Scenario:
    """A parsed scenario file.

    ``config`` holds every top-level table other than ``scenario``, ``stream`` and
    ``expect`` (the ``[monitor]`` table and its siblings): the same content a
    ``--config`` file has.
    """

    path: Path
    name: str
    description: str
    stream: dict
    config: dict
    expect: list
    strict: bool = True

    @property
    def kind(self):
        return self.stream["kind"]

    @property
    def delayed(self):
        """True when the stream has delayed labels (prediction rows, then label rows)."""
        return "delay" in self.stream


# -------------------------------------------------------------------------- parsing


def _err(path, msg):
    return ValueError(f"{path}: {msg}")


def load(path):
    """Read and validate a scenario TOML file; return a :class:`Scenario`.

    Raises ``ValueError`` naming the file and the offending key for a bad file.
    """
    path = Path(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such scenario file") from None
    except tomllib.TOMLDecodeError as e:
        raise _err(path, f"not valid TOML ({e})") from None

    meta = doc.get("scenario", {})
    if not isinstance(meta, dict):
        raise _err(path, "[scenario] must be a table")
    _unknown(path, "[scenario]", meta, _SCENARIO_KEYS)
    stream = doc.get("stream")
    if not isinstance(stream, dict):
        raise _err(path, "missing the [stream] table")
    kind = stream.get("kind")
    if kind not in KINDS:
        raise _err(path, f"[stream] kind = {kind!r}: expected one of {', '.join(KINDS)}")
    _unknown(path, "[stream]", stream, _STREAM_KEYS[kind])
    _check_stream(path, stream)

    expect = doc.get("expect", [])
    if not isinstance(expect, list) or not expect:
        raise _err(path, "needs at least one [[expect]] table (or one with none = true)")
    for i, e in enumerate(expect):
        _check_expect(path, i, e)
    if any(e.get("none") for e in expect) and len(expect) > 1:
        raise _err(path, "[[expect]] none = true cannot be combined with other expectations")

    config = {k: v for k, v in doc.items() if k not in ("scenario", "stream", "expect")}
    return Scenario(
        path=path,
        name=str(meta.get("name", path.stem)),
        description=str(meta.get("description", "")).strip(),
        stream=stream,
        config=config,
        expect=expect,
        strict=bool(meta.get("strict", True)),
    )


def _unknown(path, table, d, allowed):
    extra = sorted(set(d) - allowed)
    if extra:
        raise _err(path, f"{table} has unknown key(s) {', '.join(extra)}; "
                         f"allowed: {', '.join(sorted(allowed))}")


def _num(path, where, v, lo=None, hi=None, integer=False):
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if integer:
        ok = ok and isinstance(v, int)
    if ok and lo is not None and v < lo:
        ok = False
    if ok and hi is not None and v > hi:
        ok = False
    if not ok:
        rng = "" if lo is None else f" in [{lo}, {'inf' if hi is None else hi}]"
        raise _err(path, f"{where} = {v!r}: must be {'an integer' if integer else 'a number'}{rng}")
    return v


def _check_stream(path, s):
    kind = s["kind"]
    if "seed" in s:
        _num(path, "[stream] seed", s["seed"], 0, integer=True)
    if "interval" in s:
        _num(path, "[stream] interval", s["interval"], 0)
    if "start" in s:
        _num(path, "[stream] start", s["start"])
    if "decimals" in s:
        _num(path, "[stream] decimals", s["decimals"], 0, 15, integer=True)
    if "n" in s:
        _num(path, "[stream] n", s["n"], 1, integer=True)
    if "learn_until" in s:
        _num(path, "[stream] learn_until", s["learn_until"], 0, integer=True)
    if kind == "log":
        if not isinstance(s.get("path"), str):
            raise _err(path, "[stream] kind = 'log' needs path = \"data/<file>\"")
        if "delay" in s:
            raise _err(path, "[stream] delay applies to generated streams; a log has its own rows")
    if kind == "river_dataset" and not isinstance(s.get("dataset"), str):
        raise _err(path, "[stream] kind = 'river_dataset' needs dataset = \"<river.datasets name>\"")
    if kind == "river_generator":
        if not isinstance(s.get("generator"), str):
            raise _err(path, "[stream] kind = 'river_generator' needs generator = \"<river.datasets.synth name>\"")
        if not isinstance(s.get("n"), int):
            raise _err(path, "[stream] kind = 'river_generator' needs n = <number of events>")
        drift = s.get("drift")
        if drift is not None:
            if not isinstance(drift, dict):
                raise _err(path, "[stream.drift] must be a table")
            _unknown(path, "[stream.drift]", drift, _DRIFT_KEYS)
            pos = _num(path, "[stream.drift] position", drift.get("position"), 0, integer=True)
            width = _num(path, "[stream.drift] width", drift.get("width", 1000), 1, integer=True)
            # river's ConceptDriftStream computes exp(4 * position / width): keep it finite
            if 4.0 * pos / width > 700:
                raise _err(path, f"[stream.drift] width = {width} is too small for position = {pos}: "
                                 f"river's ConceptDriftStream needs width >= {math.ceil(4 * pos / 700)}")
    if kind in ("river_dataset", "river_generator") and not isinstance(s.get("model"), str):
        raise _err(path, f"[stream] kind = {kind!r} needs model = \"<river module>.<Class>\"")
    if kind == "stationary":
        if not isinstance(s.get("n"), int):
            raise _err(path, "[stream] kind = 'stationary' needs n = <number of events>")
        if "prevalence" in s:
            _num(path, "[stream] prevalence", s["prevalence"], 0, 1)
        if "separation" in s:
            _num(path, "[stream] separation", s["separation"])
        segs = s.get("segments")
        if segs is not None and (not isinstance(segs, list) or not segs
                                 or not all(isinstance(x, str) for x in segs)):
            raise _err(path, "[stream] segments must be a non-empty list of strings")
    delay = s.get("delay")
    if delay is not None:
        if not isinstance(delay, dict):
            raise _err(path, "[stream.delay] must be a table")
        _unknown(path, "[stream.delay]", delay, _DELAY_KEYS)
        lo = _num(path, "[stream.delay] min", delay.get("min", 0.0), 0)
        _num(path, "[stream.delay] max", delay.get("max", lo), lo)
        _num(path, "[stream.delay] missing", delay.get("missing", 0.0), 0, 1)


def _check_expect(path, i, e):
    where = f"[[expect]] #{i + 1}"
    if not isinstance(e, dict):
        raise _err(path, f"{where} must be a table")
    _unknown(path, where, e, _EXPECT_KEYS)
    if e.get("none"):
        if set(e) != {"none"}:
            raise _err(path, f"{where}: none = true takes no other keys")
        return
    if not isinstance(e.get("rule"), str):
        raise _err(path, f"{where} needs rule = \"<rule name>\" (or none = true)")
    state = e.get("state", "firing")
    if state not in _STATES:
        raise _err(path, f"{where} state = {state!r}: expected one of {', '.join(_STATES)}")
    lo = _num(path, f"{where} n_min", e.get("n_min", 0), 0, integer=True)
    hi = e.get("n_max")
    if hi is not None:
        _num(path, f"{where} n_max", hi, lo, integer=True)


# ------------------------------------------------------------------------ streams


def _river_obj(spec, params, path, what):
    """Instantiate ``river.<spec>`` (e.g. ``"linear_model.LogisticRegression"``)."""
    mod_name, _, cls_name = spec.rpartition(".")
    try:
        module = importlib.import_module(f"river.{mod_name}" if mod_name else "river")
        cls = getattr(module, cls_name)
    except (ImportError, AttributeError):
        raise _err(path, f"{what} = {spec!r}: no such class in river") from None
    try:
        return cls(**(params or {}))
    except TypeError as e:
        raise _err(path, f"{what} = {spec!r}: {e}") from None


def _model(s, path):
    model = _river_obj(s["model"], s.get("model_params"), path, "[stream] model")
    pre = s.get("preprocessing", [])
    if isinstance(pre, str):
        pre = [pre]
    for step in reversed(pre):
        model = _river_obj(step, None, path, "[stream] preprocessing") | model
    return model


def _prequential(pairs, model, learn_until, n):
    """Score each event before learning from it; return (labels, scores) arrays."""
    labels = []
    scores = []
    append_y, append_s = labels.append, scores.append
    predict, learn = model.predict_proba_one, model.learn_one
    stop = math.inf if learn_until is None else learn_until
    for i, (x, y) in enumerate(pairs):
        if i >= n:
            break
        p = predict(x)
        append_s(float(p.get(True, 0.0)))
        append_y(bool(y))
        if i < stop:
            learn(x, y)
    return np.array(labels, dtype=bool), np.array(scores, dtype=np.float64)


def _river_dataset(s, path):
    from river import datasets

    cls = getattr(datasets, s["dataset"], None)
    if cls is None or not isinstance(cls, type):
        raise _err(path, f"[stream] dataset = {s['dataset']!r}: no such dataset in river.datasets")
    if not issubclass(cls, datasets.base.FileDataset) or issubclass(cls, datasets.base.RemoteDataset):
        raise _err(path, f"[stream] dataset = {s['dataset']!r} is downloaded at run time; "
                         "use one that ships inside river (e.g. Phishing, Bananas)")
    ds = cls()
    if ds.task != datasets.base.BINARY_CLF:
        raise _err(path, f"[stream] dataset = {s['dataset']!r} is not a binary classification dataset")
    n = s.get("n", ds.n_samples)
    return _prequential(iter(ds), _model(s, path), s.get("learn_until"), n)


def _river_generator(s, path):
    from river.datasets import synth

    def make(name, params):
        gen = getattr(synth, name, None)
        if gen is None or not isinstance(gen, type):
            raise _err(path, f"generator = {name!r}: no such generator in river.datasets.synth")
        try:
            return gen(**(params or {}))
        except TypeError as e:
            raise _err(path, f"generator = {name!r}: {e}") from None

    stream = make(s["generator"], s.get("params"))
    drift = s.get("drift")
    if drift is not None:
        after = make(drift.get("generator", s["generator"]), drift.get("params"))
        stream = synth.ConceptDriftStream(
            stream=stream, drift_stream=after, position=drift["position"],
            width=drift.get("width", 1000), seed=drift.get("seed", s.get("seed")),
        )
    return _prequential(iter(stream), _model(s, path), s.get("learn_until"), s["n"])


def _stationary(s, rng):
    n = s["n"]
    labels = rng.random(n) < s.get("prevalence", 0.3)
    margin = s.get("separation", 2.0) * (labels - 0.5)
    scores = 1.0 / (1.0 + np.exp(-(margin + rng.standard_normal(n))))
    return labels, scores


def generate(scenario):
    """The scenario's events as columns: ``{"ts", "id", "label", "score"[, "segment"]}``.

    Time order, one entry per event (before any delayed-label split). Not for ``log``
    scenarios, which are replayed from their file.

    Runtime complexity: `O(n)` numpy work, plus one model prediction and update per
    event for the river kinds.
    """
    s = scenario.stream
    kind = s["kind"]
    if kind == "log":
        raise ValueError(f"{scenario.path}: a 'log' scenario is replayed from {s['path']}, not generated")
    rng = np.random.default_rng(s.get("seed", 0))
    if kind == "stationary":
        labels, scores = _stationary(s, rng)
    elif kind == "river_dataset":
        labels, scores = _river_dataset(s, scenario.path)
    else:
        labels, scores = _river_generator(s, scenario.path)
    n = len(labels)
    if "decimals" in s:
        scores = np.round(scores, s["decimals"])
    cols = {
        "ts": s.get("start", DEFAULT_START) + s.get("interval", 1.0) * np.arange(n),
        "id": np.arange(1, n + 1),
        "label": labels,
        "score": scores,
    }
    segs = s.get("segments")
    if segs:
        cols["segment"] = np.asarray(segs, dtype=object)[rng.integers(0, len(segs), n)]
    return cols


def iter_rows(scenario):
    """The scenario's log rows (dicts with the default field names), in log order.

    Without delay: one row per event. With ``[stream.delay]``: a prediction row
    ``{"ts", "id", "score"}`` per event and, ``delay`` seconds later (uniform in
    ``[min, max]``), a label row ``{"ts", "id", "label"}``, merged by time
    (a prediction before a label at the same time); a share ``missing`` of the
    predictions never gets its label.
    """
    cols = generate(scenario)
    ts = cols["ts"].tolist()
    ids = cols["id"].tolist()
    labels = cols["label"].tolist()
    scores = cols["score"].tolist()
    segs = cols["segment"].tolist() if "segment" in cols else None
    delay = scenario.stream.get("delay")
    if delay is None:
        for i in range(len(ts)):
            row = {"ts": ts[i], "id": ids[i], "label": labels[i], "score": scores[i]}
            if segs is not None:
                row["segment"] = segs[i]
            yield row
        return

    n = len(ts)
    # a separate generator: the delays do not change the events themselves
    rng = np.random.default_rng([scenario.stream.get("seed", 0), 1])
    lo = float(delay.get("min", 0.0))
    hi = float(delay.get("max", lo))
    label_ts = cols["ts"] + rng.uniform(lo, hi, n)
    has_label = rng.random(n) >= float(delay.get("missing", 0.0))
    times = np.concatenate([cols["ts"], label_ts[has_label]])
    # predictions (0) sort before labels (1) at the same time
    which = np.concatenate([np.zeros(n, dtype=np.int8), np.ones(int(has_label.sum()), dtype=np.int8)])
    src = np.concatenate([np.arange(n), np.flatnonzero(has_label)])
    order = np.lexsort((which, times))
    label_ts_list = label_ts.tolist()
    for k in order.tolist():
        i = int(src[k])
        if which[k] == 0:
            row = {"ts": ts[i], "id": ids[i], "score": scores[i]}
            if segs is not None:
                row["segment"] = segs[i]
        else:
            row = {"ts": label_ts_list[i], "id": ids[i], "label": labels[i]}
        yield row


def write_log(scenario, path):
    """Write the scenario's rows as a JSONL log (gzip if the name ends in ``.gz``).

    Written to a temporary file and renamed, so a log is complete or absent.
    Returns the number of rows.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    opener = gzip.open if path.suffix == ".gz" else open
    count = 0
    dumps = json.dumps
    with opener(tmp, "wt", encoding="utf-8") as f:
        write = f.write
        for row in iter_rows(scenario):
            write(dumps(row, separators=(",", ":")))
            write("\n")
            count += 1
    os.replace(tmp, path)
    return count


def materialize(scenario, out_dir):
    """The event log to replay for ``scenario``: its bundled file, or a generated one.

    Generated streams are written to ``out_dir/stream.jsonl``.
    """
    if scenario.kind == "log":
        p = Path(scenario.stream["path"])
        if not p.is_absolute():
            p = scenario.path.parent / p
        if not p.exists():
            raise ValueError(f"{scenario.path}: [stream] path = {scenario.stream['path']!r}: no such file ({p})")
        return p
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    p = out_dir / "stream.jsonl"
    write_log(scenario, p)
    return p


# ------------------------------------------------------------------------- checks


def check(scenario, alert_rows):
    """Compare the alert transitions of a run with the scenario's ``[[expect]]``.

    Returns the list of failures (empty: the scenario passed). Each expectation needs
    a transition of its rule (and segment, if given) in its state with ``n`` in
    ``[n_min, n_max]``; ``none = true`` means no alert may fire at all; with
    ``strict`` (the default) a firing that no expectation covers is a failure too.

    >>> sc = Scenario(Path("x.toml"), "x", "", {"kind": "stationary"}, {},
    ...               [{"rule": "recall_low", "n_min": 100, "n_max": 200}])
    >>> check(sc, [{"rule": "recall_low", "state": "firing", "n": 150}])
    []
    >>> for failure in check(sc, [{"rule": "recall_low", "state": "firing", "n": 250}]):
    ...     print(failure)
    expected recall_low to be firing with n in [100, 200]; it was firing at n=250
    unexpected alert: recall_low fired at n=250 (no [[expect]] covers it)
    """
    failures = []
    alert_rows = list(alert_rows)
    firing = [a for a in alert_rows if a.get("state") == "firing"]
    if any(e.get("none") for e in scenario.expect):
        for a in firing:
            seg = "" if a.get("segment") is None else f" (segment {a.get('segment')})"
            failures.append(f"expected no alert to fire, but {a.get('rule')}{seg} fired at n={a.get('n')}")
        return failures

    covered = set()
    for e in scenario.expect:
        state = e.get("state", "firing")
        lo, hi = e.get("n_min", 0), e.get("n_max", math.inf)
        same = [
            (i, a) for i, a in enumerate(alert_rows)
            if a.get("rule") == e["rule"] and a.get("state") == state
            and ("segment" not in e or a.get("segment") == e["segment"])
        ]
        hits = [i for i, a in same if isinstance(a.get("n"), (int, float)) and lo <= a["n"] <= hi]
        covered.update(hits)
        if not hits:
            seg = f" in segment {e['segment']!r}" if "segment" in e else ""
            rng = f"[{lo}, {'end' if hi == math.inf else hi}]"
            seen = ", ".join(f"n={a.get('n')}" for _, a in same) or "never"
            what = f"it was {state} at {seen}" if same else f"it was never {state}"
            failures.append(f"expected {e['rule']}{seg} to be {state} with n in {rng}; {what}")
    if scenario.strict:
        for i, a in enumerate(alert_rows):
            if a.get("state") == "firing" and i not in covered:
                seg = "" if a.get("segment") is None else f" (segment {a.get('segment')})"
                failures.append(f"unexpected alert: {a.get('rule')}{seg} fired at n={a.get('n')} "
                                "(no [[expect]] covers it)")
    return failures

"""Binary states: a metric's or window's state with numpy arrays for its big parts.

A binary checkpoint (:mod:`streameval.io.statefile`) stores a state tree whose big
leaves are numpy arrays, as raw bytes in packs beside a JSON manifest, and whose
``{SUBTREE: ...}`` parts (a Monitor's scopes) apart, referenced again while unchanged. Objects that hold big data offer
it as arrays, zero-copy and without changing anything (``to_state()`` may merge deferred
work first, which would make the sums after a restore group differently):

* ``obj.to_array_state()``: the state with numpy arrays in it, marked ``"arrays": 1``
  (score-order metrics, count and time windows, tumbling windows; the label join's
  :meth:`~streameval.io.delayed.LabelJoiner.to_array_state` has the same shape); a read-only array in it never changes while the
  object lives (a checkpoint writer may reference the file it wrote for it before);
* ``cls._from_array_state(state)`` (windows) or ``obj._set_array_data(data)`` (metrics
  built from their ``params``): the inverse, checked, ``ValueError`` if bad.

Everything else keeps its JSON ``to_state()``: :func:`array_state` falls back to it, and
:func:`from_array_state` to :func:`~streameval.metrics.base.from_state`, so any state type
without these hooks is stored and loaded as before.

Imports: :mod:`streameval._registry` and :mod:`streameval.metrics.base` only.
"""

from __future__ import annotations

from streameval import _registry
from streameval.metrics.base import Metric, from_state

__all__ = ["array_state", "from_array_state", "MARK", "SUBTREE"]

#: the key (and version) that marks a state holding numpy arrays
MARK = "arrays"
#: ``{SUBTREE: tree}`` in a state tree: a part a checkpoint writer stores apart and,
#: while the same dict object is given again, references instead of writing it again
#: (:mod:`streameval.io.statefile`); whoever gives it must then not change it
SUBTREE = "$b"


def array_state(obj):
    """``obj.to_array_state()`` where the object offers it, else ``obj.to_state()``.

    Runtime complexity: what the object's hook costs (`O(1)` per stored array for a
    score order's levels; the JSON state's cost otherwise)."""
    hook = getattr(obj, "to_array_state", None)
    if hook is not None:
        state = hook()
        if state is not None:
            return state
    if type(obj).to_state is Metric.to_state and hasattr(obj, "__dict__"):
        # Metric.to_state with the constructor parameters read once (they never change;
        # reading them inspects the signature, the dearest part of a small state)
        params = obj.__dict__.get("_array_params")
        if params is None:
            params = obj.__dict__["_array_params"] = obj._params()
        return {"type": obj._public_name, "version": obj._state_version,
                "params": dict(params), "data": obj._get_data()}
    return obj.to_state()


def from_array_state(state):
    """Rebuild an object from :func:`array_state`'s result (or any JSON state).

    ``ValueError`` naming what is wrong for anything malformed (wrong types, missing or
    extra arrays, inconsistent lengths), never another exception.
    """
    if not isinstance(state, dict) or state.get(MARK) is None:
        return _plain(state)
    if state[MARK] != 1:
        raise ValueError(f"binary state of {state.get('type')!r:.40}: {MARK} = "
                         f"{state[MARK]!r:.40}; this streameval reads 1")
    name = state.get("type")
    cls = _registry.state_class(name)
    if cls is None:
        raise ValueError(f"unknown state type {name!r:.60}")
    if state.get("version") != cls._state_version:
        raise ValueError(f"state of {name} has version {state.get('version')!r:.40}; this "
                         f"streameval reads version {cls._state_version}")
    params, data = state.get("params"), state.get("data")
    if not isinstance(params, dict) or not isinstance(data, dict):
        raise ValueError(f"state of {name}: params and data must be objects")
    try:
        loader = getattr(cls, "_from_array_state", None)
        if loader is not None:
            return loader(state)
        obj = cls(**params)
        setter = getattr(obj, "_set_array_data", None)
        if setter is None:
            raise ValueError(f"state of {name} holds arrays, which {name} does not read")
        setter(data)
        return obj
    except ValueError:
        raise
    except (TypeError, KeyError, AttributeError, IndexError, OverflowError) as e:
        raise ValueError(f"bad state of {name}: {type(e).__name__}: {e}") from None


def _plain(state):
    try:
        return from_state(state)
    except ValueError:
        raise
    except (TypeError, KeyError, AttributeError, IndexError, OverflowError,
            RecursionError) as e:
        name = state.get("type") if isinstance(state, dict) else None
        raise ValueError(f"bad state of {name!r:.40}: {type(e).__name__}: {e!s:.200}") from None

"""A pause of Python's cyclic garbage collector for bulk state work.

Capturing, writing or restoring the state of a monitor makes tens of thousands of
short-lived containers and no cycle; every collection they would trigger walks the whole
heap (a monitor of a thousand segments holds millions of objects) and costs more than
the work itself. The metrics' binary states, the checkpoint files and the Monitor's
state capture all pause it with :class:`gc_paused`.

Imports: the standard library only (a ground-floor module, like
:mod:`streameval._registry`).
"""

from __future__ import annotations

import gc

__all__ = ["gc_paused"]


class gc_paused:
    """A context in which Python's cyclic garbage collector does not run (enabled again
    afterwards if it was, also when the body raises).

    >>> import gc
    >>> with gc_paused():
    ...     gc.isenabled()
    False
    >>> gc.isenabled()
    True
    """

    __slots__ = ("was",)

    def __enter__(self):
        self.was = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            gc.enable()
        return False

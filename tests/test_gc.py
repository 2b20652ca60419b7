"""The garbage-collector pause used around bulk state work."""

import gc

import pytest

from streameval._gc import gc_paused


def test_pause_restores_the_collector_even_when_the_body_raises():
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"):
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_pause_leaves_a_disabled_collector_disabled():
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_pauses_enable_once_at_the_outermost():
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()

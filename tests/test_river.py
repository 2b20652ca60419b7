"""streameval._river: river's metric bases without the eager ``scipy.stats`` import.

Each check runs in a fresh interpreter, since whether SciPy was imported is a property
of the whole process. The oracles are SciPy and river themselves, run in the same
process after streameval was imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run(code):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_importing_streameval_does_not_execute_scipy_stats():
    out = run("""
        import json, sys
        import streameval.monitor, streameval.cli
        from streameval import ROCAUC
        from river.metrics.base import BinaryMetric
        print(json.dumps({
            "stats_run": "scipy.stats._stats_py" in sys.modules,
            "integrate_run": "scipy.integrate._quadrature" in sys.modules,
            "river_instance": isinstance(ROCAUC(), BinaryMetric),
        }))
    """)
    assert out["stats_run"] is False and out["integrate_run"] is False
    assert out["river_instance"] is True


def test_scipy_and_river_work_as_before_after_the_deferred_import():
    out = run("""
        import json, math
        import streameval.monitor
        from river import metrics
        gm = metrics.GeometricMean()
        for y, p in [(1, 1), (0, 1), (0, 0), (1, 0), (1, 1), (2, 2), (2, 0)]:
            gm.update(y, p)
        auc = metrics.ROCAUC()
        for y, p in [(1, 0.9), (0, 0.2), (1, 0.4), (0, 0.6)]:
            auc.update(y, p)
        import scipy.stats
        from scipy import integrate
        print(json.dumps({
            "gmean": gm.get(),
            "norm_cdf": float(scipy.stats.norm.cdf(1.0)),
            "trapezoid": float(integrate.trapezoid([1.0, 2.0, 3.0])),
            "same_module": scipy.stats is __import__("sys").modules["scipy.stats"],
            "river_auc": auc.get(),
        }))
    """)
    # per-class recalls 2/3, 1/2, 1/2 -> geometric mean (1/6) ** (1/3)
    assert abs(out["gmean"] - (1 / 6) ** (1 / 3)) < 1e-12
    assert abs(out["norm_cdf"] - 0.8413447460685429) < 1e-15
    assert out["trapezoid"] == 4.0
    assert out["same_module"] is True
    assert 0.0 <= out["river_auc"] <= 1.0


def test_scipy_stats_imported_first_is_left_alone():
    out = run("""
        import json, sys
        import scipy.stats
        before = sys.modules["scipy.stats"]
        import streameval.monitor
        print(json.dumps({"same": sys.modules["scipy.stats"] is before,
                          "kind": type(sys.modules["scipy.stats"]).__name__}))
    """)
    assert out == {"same": True, "kind": "module"}

"""Each explorer's ``compute`` at its largest settings: the slowest of every setting that
:func:`distlearn.widgets.base.extreme_settings` tries (defaults, each control at each end, all at min, all at max).

Explorers are found generically: every module of :mod:`distlearn.widgets` except ``base``. Goal: < 50 ms, so a
slider feels immediate (the plot's drawing comes on top of this).
"""
from __future__ import annotations

import importlib
import pkgutil
import statistics
import time

GOAL = 0.050  # seconds, for compute rows
GOALS: dict[str, float | None] = {}  # render rows: measured, no goal (filled by main)


def explorer_modules() -> list[str]:
    import distlearn.widgets as pkg

    return [m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name != "base" and not m.name.startswith("_")]


def time_call(fn, repeats: int) -> float:
    """Median wall time in seconds of ``repeats`` calls of ``fn()`` (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(quick: bool = False) -> dict[str, float]:
    from distlearn.widgets.base import extreme_settings

    repeats = 1 if quick else 5
    out = {}
    for name in explorer_modules():
        mod = importlib.import_module(f"distlearn.widgets.{name}")
        settings = extreme_settings(mod.controls())
        if quick:  # the defaults and every control at its maximum
            settings = [settings[0], settings[-1]]
        worst = max(time_call(lambda v=values: mod.compute(**v), repeats) for values in settings)
        out[f"explorer `{name}`: compute, slowest extreme setting"] = worst
        row = f"explorer `{name}`: compute + render + draw (Agg), all controls at max"
        out[row] = time_call(lambda v=settings[-1], m=mod: _render_quietly(m, v), 1 if quick else 3)
        GOALS[row] = None
    return out


def _render_quietly(mod, values) -> None:
    """``render(compute(**values))`` with the Agg backend, figures drawn (not encoded as PNG), printing nowhere."""
    import contextlib
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with contextlib.redirect_stdout(io.StringIO()):
        mod.render(mod.compute(**values))
    for n in plt.get_fignums():  # Agg's show() draws nothing: draw as the notebook would
        plt.figure(n).canvas.draw()
    plt.close("all")

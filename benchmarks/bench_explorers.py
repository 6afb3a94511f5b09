"""Every explorer's ``compute`` at the slowest of its extreme settings: goal < 50 ms, so a slider feels immediate
(the figure's drawing comes on top). Explorers are found generically: every module of :mod:`distlearn.core.explorer`
except ``base``; settings are :func:`distlearn.core.explorer.extreme_settings` (defaults, each control at each end,
all at min, all at max). Drawing a figure (compute + render + Agg draw, every control at its maximum) is measured
for information, without a goal.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import pkgutil
import time

import pytest

GOAL_S = 0.050
pytestmark = pytest.mark.benchmark(timer=time.process_time, group="explorers")


def explorer_modules() -> list[str]:
    from distlearn.core.explorer import explorer_modules as found

    return list(found())


MODULES = __import__("distlearn.core.explorer", fromlist=["explorer_modules"]).explorer_modules()


def slowest_setting(mod) -> dict:
    """The extreme setting whose ``compute`` takes the most CPU time (best of two calls each)."""
    from distlearn.core.explorer import extreme_settings

    def cost(values):
        best = float("inf")
        for _ in range(2):
            t0 = time.process_time()
            mod.compute(**values)
            best = min(best, time.process_time() - t0)
        return best

    return max(extreme_settings(mod.controls()), key=cost)


@pytest.mark.parametrize("name", explorer_modules())
def test_explorer_compute_slowest_extreme_setting(measure, name):
    mod = importlib.import_module(MODULES[name])
    values = slowest_setting(mod)
    result = measure(lambda: mod.compute(**values), goal_s=GOAL_S,
                     what=f"explorer `{name}`: compute at its slowest extreme setting")
    assert isinstance(result, dict)


def _render_quietly(mod, values) -> None:
    """``render(compute(**values))`` with the Agg backend, figures drawn (not encoded as PNG), printing nowhere."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with contextlib.redirect_stdout(io.StringIO()):
        mod.render(mod.compute(**values))
    for n in plt.get_fignums():  # Agg's show() draws nothing: draw as the notebook would
        plt.figure(n).canvas.draw()
    plt.close("all")


@pytest.mark.parametrize("name", explorer_modules())
def test_explorer_render_all_controls_at_max(measure, name):
    from distlearn.core.explorer import extreme_settings

    mod = importlib.import_module(MODULES[name])
    values = extreme_settings(mod.controls())[-1]
    measure(lambda: _render_quietly(mod, values), goal_s=None, rounds=3,
            what=f"explorer `{name}`: compute + render + draw (Agg), all controls at max")

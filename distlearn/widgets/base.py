"""The common shape of every explorer: controls → pure ``compute`` → ``render`` into an output area.

Controls are non-continuous (a drag updates once, on release), so slow renders never queue up. Tests call
``compute`` at every control's extremes through :func:`extreme_settings`.
"""
from __future__ import annotations

from typing import Callable

import ipywidgets as W
from IPython.display import clear_output

from ..i18n import Text

STYLE = {"description_width": "initial"}  # the bilingual label takes the width it needs ...
LAYOUT = W.Layout(width="700px")           # ... and the control gets the rest: wide enough for "English / 中文"


def int_slider(label: Text | str, value: int, min: int, max: int, step: int = 1) -> W.IntSlider:
    """An integer slider that updates on release."""
    return W.IntSlider(value=value, min=min, max=max, step=step, description=str(label),
                       continuous_update=False, style=STYLE, layout=LAYOUT)


def float_slider(label: Text | str, value: float, min: float, max: float, step: float) -> W.FloatSlider:
    """A float slider that updates on release."""
    return W.FloatSlider(value=value, min=min, max=max, step=step, description=str(label),
                         continuous_update=False, style=STYLE, layout=LAYOUT)


def log2_slider(label: Text | str, value: int, min: int, max: int) -> W.SelectionSlider:
    """A slider over powers of two from ``min`` to ``max`` (1, 2, 4, …)."""
    options, v = [], min
    while v <= max:
        options.append(v)
        v *= 2
    return W.SelectionSlider(options=options, value=value, description=str(label), continuous_update=False,
                             style=STYLE, layout=LAYOUT)


def dropdown(label: Text | str, options, value) -> W.Dropdown:
    """A drop-down; ``options`` is a list of values or of (label, value) pairs."""
    return W.Dropdown(options=options, value=value, description=str(label), style=STYLE, layout=LAYOUT)


def checkbox(label: Text | str, value: bool) -> W.Checkbox:
    return W.Checkbox(value=value, description=str(label), style=STYLE, indent=False, layout=LAYOUT)


def build(controls: dict[str, W.Widget], compute: Callable[..., dict], render: Callable[[dict], None],
          title: Text | str | None = None) -> W.VBox:
    """Lay out ``controls`` above an output area that shows ``render(compute(**values))`` after every change."""
    out = W.Output()

    def update(_change=None):
        values = {name: c.value for name, c in controls.items()}
        with out:
            clear_output(wait=True)
            render(compute(**values))

    for c in controls.values():
        c.observe(update, names="value")
    update()
    header = [W.HTML(f"<b>{title}</b>")] if title else []
    return W.VBox(header + [W.VBox(list(controls.values())), out])


def _extremes(control) -> list:
    if isinstance(control, (W.IntSlider, W.FloatSlider)):
        return [control.min, control.max]
    if isinstance(control, (W.SelectionSlider, W.Dropdown, W.ToggleButtons, W.RadioButtons)):
        opts = [o[1] if isinstance(o, tuple) else o for o in control.options]
        return list(dict.fromkeys(opts))  # every option: there are few
    if isinstance(control, W.Checkbox):
        return [False, True]
    return [control.value]


def extreme_settings(controls: dict[str, W.Widget]) -> list[dict]:
    """Value sets for testing: the defaults, then each control at each extreme (or option) with the others at
    their defaults, then every control at its minimum and every control at its maximum together."""
    defaults = {n: c.value for n, c in controls.items()}
    settings = [dict(defaults)]
    for name, control in controls.items():
        for v in _extremes(control):
            settings.append({**defaults, name: v})
    settings.append({n: _extremes(c)[0] for n, c in controls.items()})
    settings.append({n: _extremes(c)[-1] for n, c in controls.items()})
    return settings

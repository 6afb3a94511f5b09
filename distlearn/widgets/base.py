"""The common shape of every explorer: controls → pure ``compute`` → ``render`` into an output area.

Controls are non-continuous (a drag updates once, on release), so slow renders never queue up. Tests call
``compute`` at every control's extremes through :func:`extreme_settings`.

Labels (a control's description, a drop-down's option labels, the title) may be a :class:`~distlearn.i18n.Text`,
an ``(en, zh)`` pair or a plain string; the first two follow the language switch live: after
:func:`distlearn.set_language` every explorer on screen relabels its controls and renders again.
"""
from __future__ import annotations

from typing import Callable, Union

import ipywidgets as W
from IPython.display import clear_output

from .. import i18n
from ..i18n import Text

Label = Union[Text, tuple, str]

STYLE = {"description_width": "initial"}  # the bilingual label takes the width it needs ...
LAYOUT = W.Layout(width="700px")           # ... and the control gets the rest: wide enough for "English / 中文"


def render_label(label: Label) -> str:
    """``label`` in the current language: a Text, an ``(en, zh)`` pair (joined like :func:`~distlearn.i18n.bi`),
    or a string as it is."""
    if isinstance(label, Text):
        return label.render()
    if isinstance(label, tuple):
        return i18n.bi(*label)
    return str(label)


def _labelled(control: W.Widget, label: Label) -> W.Widget:
    control._distlearn_label = label  # relabelled by build() when the language changes
    return control


def _options(options) -> list:
    return [(render_label(o[0]), o[1]) if isinstance(o, tuple) else o for o in options]


def int_slider(label: Label, value: int, min: int, max: int, step: int = 1) -> W.IntSlider:
    """An integer slider that updates on release."""
    return _labelled(W.IntSlider(value=value, min=min, max=max, step=step, description=render_label(label),
                                 continuous_update=False, style=STYLE, layout=LAYOUT), label)


def float_slider(label: Label, value: float, min: float, max: float, step: float) -> W.FloatSlider:
    """A float slider that updates on release."""
    return _labelled(W.FloatSlider(value=value, min=min, max=max, step=step, description=render_label(label),
                                   continuous_update=False, style=STYLE, layout=LAYOUT), label)


def log2_slider(label: Label, value: int, min: int, max: int) -> W.SelectionSlider:
    """A slider over powers of two from ``min`` to ``max`` (1, 2, 4, …)."""
    options, v = [], min
    while v <= max:
        options.append(v)
        v *= 2
    return _labelled(W.SelectionSlider(options=options, value=value, description=render_label(label),
                                       continuous_update=False, style=STYLE, layout=LAYOUT), label)


def dropdown(label: Label, options, value) -> W.Dropdown:
    """A drop-down; ``options`` is a list of values or of ``(label, value)`` pairs, where a label may be a Text or
    an ``(en, zh)`` pair that follows the language."""
    control = W.Dropdown(options=_options(options), value=value, description=render_label(label), style=STYLE,
                         layout=LAYOUT)
    control._distlearn_options = list(options)
    return _labelled(control, label)


def checkbox(label: Label, value: bool) -> W.Checkbox:
    return _labelled(W.Checkbox(value=value, description=render_label(label), style=STYLE, indent=False,
                                layout=LAYOUT), label)


def relabel(controls: dict[str, W.Widget]) -> None:
    """Render every control's label and option labels again in the current language, keeping its value."""
    for c in controls.values():
        if hasattr(c, "_distlearn_label"):
            c.description = render_label(c._distlearn_label)
        if hasattr(c, "_distlearn_options"):
            value = c.value
            c.options = _options(c._distlearn_options)
            c.value = value


def build(controls: dict[str, W.Widget], compute: Callable[..., dict], render: Callable[[dict], None],
          title: Label | None = None) -> W.VBox:
    """Lay out ``controls`` above an output area that shows ``render(compute(**values))`` after every change, and
    again, relabelled, after every language change (:func:`distlearn.set_language`)."""
    out = W.Output()
    header = W.HTML(f"<b>{render_label(title)}</b>") if title else None
    quiet = [False]

    def update(_change=None):
        if quiet[0]:
            return
        values = {name: c.value for name, c in controls.items()}
        with out:
            clear_output(wait=True)
            render(compute(**values))

    def follow_language(_lang):
        quiet[0] = True
        try:
            relabel(controls)
            if header is not None:
                header.value = f"<b>{render_label(title)}</b>"
        finally:
            quiet[0] = False
        update()

    for c in controls.values():
        c.observe(update, names="value")
    update()
    box = W.VBox(([header] if header is not None else []) + [W.VBox(list(controls.values())), out])
    box._distlearn_forget = i18n.on_change(follow_language)
    return box


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

"""Every explorer: compute() never crashes at its controls' extremes, controls are non-continuous and labelled in
both languages, and the widget builds and re-renders when a control changes."""
import importlib
import pkgutil

import ipywidgets as W
import pytest

import distlearn.widgets as widgets_pkg
from distlearn.widgets.base import extreme_settings

MODULES = [m.name for m in pkgutil.iter_modules(widgets_pkg.__path__) if m.name != "base"]


@pytest.mark.parametrize("name", MODULES)
def test_compute_at_every_extreme(name):
    mod = importlib.import_module(f"distlearn.widgets.{name}")
    for values in extreme_settings(mod.controls()):
        result = mod.compute(**values)
        assert isinstance(result, dict), values


@pytest.mark.parametrize("name", MODULES)
def test_controls_are_bilingual_and_not_continuous(name):
    mod = importlib.import_module(f"distlearn.widgets.{name}")
    for key, c in mod.controls().items():
        if hasattr(c, "continuous_update"):
            assert c.continuous_update is False, key
        assert " / " in c.description and any("\u4e00" <= ch <= "\u9fff" for ch in c.description), (key, c.description)


@pytest.mark.parametrize("name", MODULES)
def test_explorer_builds_and_updates(name, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    mod = importlib.import_module(f"distlearn.widgets.{name}")
    calls = []
    real = mod.compute
    monkeypatch.setattr(mod, "compute", lambda **kw: calls.append(kw) or real(**kw))
    box = mod.explorer()
    assert isinstance(box, W.Widget)
    assert calls, "explorer did not compute on start"

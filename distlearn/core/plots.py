"""Shared matplotlib set-up: a CJK font so Chinese labels render, and small helpers used by every chapter's plots.

Importing this module registers Noto Sans CJK SC (shipped by the ``mplfonts`` package) with matplotlib, so a
title like "Memory per GPU / 每块 GPU 的显存" renders the same on every machine and Binder, with no missing-glyph
warnings. Chapter plots live in their own modules (``distlearn/plots_*.py`` or the widget module) and call
:func:`new_figure` and :func:`title`.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import matplotlib
from matplotlib import font_manager
import matplotlib.pyplot as plt

from distlearn.core.i18n import Text, bi
from distlearn.core.guard import read_only

CJK_FONT = "Noto Sans CJK SC"
# One colour per model-state / timeline category, used consistently across chapters.
COLORS = read_only({
    "params": "#4C72B0", "grads": "#DD8452", "optimizer": "#55A868", "activations": "#C44E52",
    "logits": "#8172B3", "compute": "#4C72B0", "comm": "#DD8452", "idle": "#DDDDDD",
    "forward": "#4C72B0", "backward": "#55A868",
})


def _register_cjk_font() -> bool:
    spec = importlib.util.find_spec("mplfonts")
    if spec is None or not spec.submodule_search_locations:
        return False
    path = Path(list(spec.submodule_search_locations)[0]) / "fonts" / "NotoSansCJKsc-Regular.otf"
    if not path.exists():
        return False
    font_manager.fontManager.addfont(str(path))
    # Fallback order: Latin glyphs from DejaVu Sans, Chinese from Noto Sans CJK SC (matplotlib ≥ 3.6).
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", CJK_FONT]
    matplotlib.rcParams["axes.unicode_minus"] = False
    return True


HAS_CJK_FONT = _register_cjk_font()


def label(t: Text | str) -> str:
    """A plot label in the current language (``Text``), or the string unchanged."""
    return t.render() if isinstance(t, Text) else t


def new_figure(width: float = 8.0, height: float = 4.0, **kwargs):
    """``plt.subplots`` with the course's defaults (constrained layout). Returns ``(fig, ax)``."""
    return plt.subplots(figsize=(width, height), layout="constrained", **kwargs)


def title(ax, en: str, zh: str) -> None:
    """Set a bilingual title (two lines when both languages are shown)."""
    ax.set_title(bi(en, zh, sep="\n"))

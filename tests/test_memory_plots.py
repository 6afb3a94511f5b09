"""Chapter 01's diagram (what one parameter costs, recipe by recipe): it draws without error in English and in
Chinese, every label is in the reader's language, and its bars are the memory formulas' bytes per parameter."""
from __future__ import annotations

import re

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.memory import plots as mp
from distlearn.memory.formulas import OPTIMIZERS, PRECISIONS, bytes_per_param

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(ax):
    legend = ax.get_legend()
    return [ax.get_title()] + [t.get_text() for t in ax.texts] + ([t.get_text() for t in legend.get_texts()]
                                                                   if legend else [])


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bytes_per_parameter_draws_in_the_readers_language(lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = mp.bytes_per_parameter()
        ax.figure.canvas.draw()
        texts = [t for t in _texts(ax) if t]
    plt.close(ax.figure)
    assert texts
    for t in texts:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert "fp32 master weights" in texts and "= 18 bytes" in texts
    else:
        assert CJK.search(texts[0])                                   # the title is Chinese
        assert "fp32 主权重" in texts and "= 18 字节" in texts
        assert sum(bool(CJK.search(t)) for t in texts) >= 8           # and so are the labels


@pytest.mark.parametrize("precision", list(PRECISIONS))
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_segments_add_up_to_the_memory_formula(precision, optimizer):
    parts = dict(mp.segments(precision, optimizer))
    per = bytes_per_param(precision, optimizer)
    assert sum(parts.values()) == per["total"]
    assert (parts["weights"], parts["grads"]) == (per["params"], per["grads"])


def test_the_drawn_totals_are_16_16_18():
    import matplotlib.pyplot as plt

    with language("en"):
        ax = mp.bytes_per_parameter()
        totals = [t.get_text() for t in ax.texts if t.get_text().startswith("= ")]
    plt.close(ax.figure)
    assert totals == ["= 16 bytes", "= 16 bytes", "= 18 bytes"]      # fp32 Adam, ZeRO's mixed, Megatron's bf16

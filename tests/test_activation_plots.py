"""Chapter 08's picture of what each layer keeps for backward under no, selective and full recomputation: it draws
without error in English, in Chinese and in both, every label is in the reader's language, and the bytes it prints
are the contract function's (GPT-3 175B: 2736, 816 and 48 MiB per layer)."""
from __future__ import annotations

import re

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.activation_memory import plots as P
from distlearn.memory.formulas import activation_bytes_per_layer

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(ax):
    legend = ax.get_legend()
    return [ax.get_title()] + [t.get_text() for t in ax.texts] + [t.get_text() for t in legend.get_texts()]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_recompute_picture_draws_in_the_readers_language(lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = P.recompute_picture()
        ax.figure.canvas.draw()
        texts = [t for t in _texts(ax) if t]
    plt.close(ax.figure)
    assert len(texts) >= 20                                            # title, 12 layer labels, 3 rows, totals, legend
    for t in texts:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
    else:
        assert CJK.search(texts[0])                                    # the title is Chinese
        assert sum(bool(CJK.search(t)) for t in texts) >= 20           # and so is every label that has words


def test_recompute_picture_draws_both_languages():
    import matplotlib.pyplot as plt

    with language("both"):
        ax = P.recompute_picture(num_layers=3)
        ax.figure.canvas.draw()
        texts = _texts(ax)
    plt.close(ax.figure)
    assert any("layer 1" in t and "第 1 层" in t for t in texts)


def test_recompute_picture_prints_the_contract_functions_bytes():
    import matplotlib.pyplot as plt

    shape = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
    with language("en"):
        ax = P.recompute_picture(num_layers=4, **shape)
        per_layer = [t.get_text().split(" MiB")[0] for t in ax.texts if " MiB per layer" in t.get_text()]
    plt.close(ax.figure)
    expected = [f"{activation_bytes_per_layer(**shape, recompute=m) / 2**20:,.0f}" for m, _, _ in P.RECOMPUTE_ROWS]
    assert per_layer == expected == ["2,736", "816", "48"]

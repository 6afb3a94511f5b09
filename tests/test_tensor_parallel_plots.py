"""Chapter 04's picture of its core idea (the Megatron MLP: A split by columns, B by rows, one all-reduce): it draws
without error in English and in Chinese, every label is in the reader's language, and it draws one box, one block of
A and one block of B per rank."""
from __future__ import annotations

import re

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.tensor_parallel import plots as tpp

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(ax):
    return [ax.get_title()] + [t.get_text() for t in ax.texts]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_mlp_split_draws_in_the_readers_language(tp, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = tpp.mlp_split(tp)
        ax.figure.canvas.draw()
        texts = [t for t in _texts(ax) if t]
    plt.close(ax.figure)
    for t in texts:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert "all-reduce" in texts[0]
    else:
        assert CJK.search(texts[0])                                   # the title is Chinese
        assert sum(bool(CJK.search(t)) for t in texts) >= 3 + tp      # and so are the labels
    assert sum(t.startswith("rank ") for t in texts) == tp            # one box per rank
    assert [t for t in texts if t.startswith("$A_")] == [f"$A_{r}$" for r in range(tp)]
    assert [t for t in texts if t.startswith("$B_")] == [f"$B_{r}$" for r in range(tp)]


def test_mlp_split_refuses_a_degree_it_cannot_colour():
    with pytest.raises(ValueError, match="tp"):
        tpp.mlp_split(0)

"""Chapter 11's picture of its core idea (an MoE layer on ep ranks: route, dispatch all-to-all, experts, combine
all-to-all): it draws without error in English and in Chinese, every label is in the reader's language, it draws one
lane per rank and one box per expert, and its red arrows (rows that leave the GPU) are exactly the off-diagonal
rows of the dispatch all-to-all's split sizes."""
from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

from authoring import lang_audit as A
from distlearn.experts import plots as ep_plots
from distlearn.experts import simulation as X

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _arrows(ax, gid):
    return [a for a in ax.texts if a.get_gid() == gid]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("ep, num_experts, k", [(2, 4, 2), (4, 8, 2), (2, 2, 1)])
def test_dispatch_picture_draws_in_the_readers_language(ep, num_experts, k, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = ep_plots.dispatch_picture(ep, num_experts, tokens_per_rank=3, k=k)
        ax.figure.canvas.draw()
        texts = [ax.get_title()] + [t.get_text() for t in ax.texts if t.get_text()]
    for t in texts:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert "all-to-all" in " ".join(texts)
        assert sum(t.startswith("expert ") for t in texts) == num_experts
    else:
        assert CJK.search(texts[0])                                   # the title is Chinese
        assert sum(t.startswith("专家 ") for t in texts) == num_experts
        assert any(t.startswith("分发") for t in texts) and any(t.startswith("合并") for t in texts)
    assert sum(t.startswith("rank ") for t in texts) == ep            # one lane per rank
    routings = [X.route(X.router_logits(3, num_experts, seed=3 + r), k) for r in range(ep)]
    send = X.split_sizes(routings, num_experts, ep).send
    off_diagonal = int(send.sum() - np.trace(send))
    assert len(_arrows(ax, "dispatch-cross")) == len(_arrows(ax, "combine-cross")) == off_diagonal
    assert len(_arrows(ax, "dispatch-local")) == int(np.trace(send))
    plt.close(ax.figure)


def test_dispatch_picture_refuses_experts_it_cannot_split():
    with pytest.raises(ValueError):
        ep_plots.dispatch_picture(ep=3, num_experts=4)

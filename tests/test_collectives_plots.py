"""Chapter 02's picture of its core idea (ring all-reduce: reduce-scatter, then all-gather): it draws without error
in English and in Chinese, every label is in the reader's language, one box per rank in each panel, and the arrows
are the messages VirtualCluster records for those steps."""
from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

from authoring import lang_audit as A
from distlearn.collectives import plots as cp
from distlearn.core.comm import VirtualCluster

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("n", [2, 4, 6])
def test_ring_all_reduce_draws_in_the_readers_language(n, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        axes = cp.ring_all_reduce(n)
        fig = axes[0].figure
        fig.canvas.draw()
        titles = [ax.get_title() for ax in axes]
        labels = [[t.get_text() for t in ax.texts] for ax in axes]
        fig_texts = [fig._suptitle.get_text(), fig._supxlabel.get_text()]
    plt.close(fig)
    assert len(axes) == 4
    for t in titles + fig_texts + [t for ts in labels for t in ts]:
        assert A.readable(t, lang), t
    if lang == "en":
        assert not any(CJK.search(t) for t in titles + fig_texts + [t for ts in labels for t in ts])
        assert "all-reduce" in fig_texts[0] and "reduce-scatter" in titles[0]
    else:
        assert all(CJK.search(t) for t in titles + fig_texts)
        assert "ReduceScatter" in titles[0] and "AllGather" in titles[2]
    cluster = VirtualCluster(n)
    cluster.all_reduce([np.arange(float(n)) for _ in range(n)])
    chunk_word = "chunk " if lang == "en" else "数据块 "
    for ts, (step, _, _) in zip(labels, cp.ring_panels(n)):
        assert sum(t.startswith("rank ") for t in ts) == n                    # one box per rank
        arrows = sorted(int(t.split()[-1]) for t in ts if t.startswith(chunk_word))
        assert arrows == sorted(t.chunk for t in cluster.steps[step].transfers)  # one arrow per message
        assert len(arrows) == n


def test_ring_panels_follow_the_two_phases():
    cluster = VirtualCluster(4)
    cluster.all_reduce([np.arange(4.0) for _ in range(4)])
    phases = [cluster.steps[i].phase for i, _, _ in cp.ring_panels(4)]
    assert phases == ["reduce-scatter", "reduce-scatter", "all-gather", "all-gather"]
    done = cluster.steps[cp.ring_panels(4)[1][0]].holdings
    assert all(done[r, r] == 4 for r in range(4))                            # rank r holds chunk r complete


def test_ring_all_reduce_refuses_a_ring_it_cannot_draw():
    with pytest.raises(ValueError, match="n"):
        cp.ring_all_reduce(1)

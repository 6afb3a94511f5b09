"""Chapter 07's picture of its core idea (the same units' forward pass without and with prefetch, on a communication
and a compute stream, with the unsharded units below): it draws without error in English and in Chinese, every label
is in the reader's language, and its bars, arrows and printed totals are the event simulation's."""
from __future__ import annotations

import re

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.overlap_prefetch import plots as ov_plots
from distlearn.overlap_prefetch import timeline as T

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _gid(ax, gid):
    return [a for a in list(ax.patches) + list(ax.texts) if a.get_gid() == gid]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("n, compute, comm", [(4, 1.0, 0.6), (3, 1.0, 1.5), (6, 0.5, 0.2)])
def test_prefetch_picture_draws_in_the_readers_language(n, compute, comm, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = ov_plots.prefetch_picture(n, compute, comm)
        ax.figure.canvas.draw()
        texts = [ax.get_title()] + [t.get_text() for t in ax.texts if t.get_text()]
    for t in texts:
        assert A.readable(t, lang), t
    joined = " ".join(texts)
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert "compute stream" in joined and "comm stream" in joined and "Without prefetch" in joined
    else:
        assert CJK.search(texts[0])                                      # the title is Chinese
        assert "计算流" in joined and "通信流" in joined and "不预取" in joined
        assert "stream" not in joined and "prefetch" not in joined
    runs = [T.uniform(n, compute, comm, include_backward=False, forward_prefetch=k) for k in (0, 1)]
    assert len(_gid(ax, "all_gather")) == len(_gid(ax, "forward")) == 2 * n   # one bar per unit and panel
    assert len(_gid(ax, "issue")) == 2 * (n - 1)                              # unit 0's all-gather is not issued by a unit
    for r in runs:                                                            # the totals and peaks are the simulation's
        assert f"{r.total_time:g}" in joined
        assert any(t.startswith(("peak: ", "峰值：")) and str(r.peak_units) in t for t in texts)
    issues = sorted(round(a.xy[0], 9) for a in _gid(ax, "issue"))
    expected = sorted(round(o.issue, 9) for r in runs for o in r.ops if o.kind == "all_gather" and o.unit > 0)
    assert issues == expected
    plt.close(ax.figure)


def test_prefetch_picture_shows_the_memory_price_and_the_speed_up():
    """The default picture's numbers, the ones the chapter's text quotes: 6.4 → 4.6, one unit → two."""
    without, with_ = (T.uniform(4, 1.0, 0.6, include_backward=False, forward_prefetch=k) for k in (0, 1))
    assert (round(without.total_time, 9), round(with_.total_time, 9)) == (6.4, 4.6)
    assert (without.peak_units, with_.peak_units) == (1, 2)


def test_prefetch_picture_refuses_a_single_unit():
    with pytest.raises(ValueError):
        ov_plots.prefetch_picture(1)

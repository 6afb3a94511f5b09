"""Chapter 05's picture of zero-bubble scheduling (1F1B above ZB-H1, F/B/I/W boxes per stage over time, the bubble
hatched): it draws in English and in Chinese with every label in the reader's language, the boxes it draws are
exactly the events of the course's simulation (nothing drawn by hand), the hatched bubble of each stage is that
stage's idle time within the step, and no two labels overprint each other."""
from __future__ import annotations

import re
from collections import defaultdict

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.core.validate import DistlearnValueError
from distlearn.pipeline_parallel import plots as PP
from distlearn.pipeline_parallel.schedules import simulate

from i18n_helpers import language, overlapping_labels

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(fig):
    """Every label of the figure outside the boxes (titles, side notes, legend, axis labels), as drawn."""
    out = [fig._suptitle]
    for ax in fig.axes:
        out += [ax.title, ax._left_title, ax.xaxis.label, ax.yaxis.label]
        out += [t for t in ax.texts if not t.get_text().isdigit()]
    out += list(fig.legends[0].get_texts())
    return [t for t in out if t.get_text()]


def _boxes(ax):
    """{(kind, stage, micro-batch): (start, end)} of the operation boxes, and {stage: bubble width} of the hatch."""
    ops, bubble = {}, defaultdict(float)
    for patch in ax.patches:
        gid = patch.get_gid() or ""
        if gid.startswith("bubble:"):
            bubble[int(gid.split(":")[1])] += patch.get_width()
        elif gid:
            kind, s, j = gid.split(":")
            ops[(kind, int(s), int(j))] = (patch.get_x(), patch.get_x() + patch.get_width())
    return ops, bubble


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_zero_bubble_picture_draws_in_the_readers_language(lang):
    import matplotlib.pyplot as plt

    with language(lang):
        fig = PP.zero_bubble_picture()
        fig.canvas.draw()
        texts = _texts(fig)
        words = [t.get_text() for t in texts]
    try:
        for w in words:
            for line in w.split("\n"):
                assert A.readable(line, lang), line
        joined = " ".join(words)
        if lang == "en":
            assert not any(CJK.search(w) for w in words)
            assert "Zero bubble" in joined and "idle per stage 9" in joined and "idle per stage 3" in joined
            assert "6 saved" in joined and "weight gradient W" in joined
        else:
            assert CJK.search(fig._suptitle.get_text())
            assert "零气泡" in joined and "每个阶段空闲 9" in joined and "每个阶段空闲 3" in joined
            assert "省下 6" in joined and "权重梯度 W" in joined and "saved" not in joined and "idle" not in joined
        # no label overprints another / 标签互不重叠
        assert overlapping_labels(texts, tol=0) == []
    finally:
        plt.close(fig)


@pytest.mark.parametrize("p, m, costs", [(4, 8, (1.0, 2.0, 1.0)), (3, 5, (1.0, 3.0, 1.0)), (2, 1, (2.0, 3.0, 1.0))])
def test_zero_bubble_picture_draws_the_simulated_schedules(p, m, costs):
    """Each box sits where the simulation puts that operation; each stage's hatched bubble adds up to its idle
    time, total step time − busy time (1F1B at p = 4, m = 8, t_f = 1, t_b = 2: 9 per stage; ZB-H1 with t_W = 1:
    3, the closed form (p − 1)(t_f + t_I − t_W) of Qi et al. 2023, Table 2)."""
    import matplotlib.pyplot as plt

    f, b, w = costs
    fig = PP.zero_bubble_picture(p, m, fwd_time=f, bwd_time=b, wgrad_time=w)
    sims = (simulate("1f1b", p, m, fwd_time=f, bwd_time=b),
            simulate("zb-h1", p, m, fwd_time=f, bwd_time=b, wgrad_time=w))
    try:
        assert len(fig.axes) == 2
        for ax, sim, kinds in zip(fig.axes, sims, ({"F", "B"}, {"F", "I", "W"})):
            ops, bubble = _boxes(ax)
            want = {(e.kind, e.stage, e.microbatch): (e.start, e.end) for e in sim.events}
            assert ops.keys() == want.keys() and {k for k, _, _ in ops} == kinds
            for key, (x0, x1) in ops.items():
                assert x0 == pytest.approx(want[key][0]) and x1 == pytest.approx(want[key][1]), key
            for s in range(p):
                assert bubble[s] == pytest.approx(sim.total_time - sim.busy[s]), s
        if (p, m, costs) == (4, 8, (1.0, 2.0, 1.0)):       # the chapter's case, against the paper's closed forms
            ops1, bub1 = _boxes(fig.axes[0])
            ops2, bub2 = _boxes(fig.axes[1])
            assert max(x1 for _, x1 in ops1.values()) == 33.0 and max(x1 for _, x1 in ops2.values()) == 27.0
            assert all(bub1[s] == 3 * (1 + 2) for s in range(p)) and all(bub2[s] == 3 * (1 + 1 - 1) for s in range(p))
            # the prose: stage 0 waits p·t_f + (p − 1)·t_b − p·t_f = 6 for its first backward, (p − 1)·t_I = 3 for
            # its first I; every stage is busy m·(t_f + t_b) = 24 in both / 正文中的数字
            first_b = min(x0 for (k, s, _), (x0, _) in ops1.items() if k == "B" and s == 0)
            first_i = min(x0 for (k, s, _), (x0, _) in ops2.items() if k == "I" and s == 0)
            assert (first_b - 4, first_i - 4) == (3 * 2, 3 * 1)
            for ops in (ops1, ops2):
                assert all(sum(x1 - x0 for (_, s, _), (x0, x1) in ops.items() if s == st) == 8 * 3 for st in range(p))
    finally:
        plt.close(fig)


@pytest.mark.parametrize("kw", [dict(num_stages=1), dict(num_stages=9), dict(num_microbatches=0),
                                dict(num_microbatches=17), dict(wgrad_time=2.0), dict(fwd_time=-1.0)])
def test_zero_bubble_picture_refuses_what_it_cannot_draw(kw):
    with pytest.raises(DistlearnValueError):
        PP.zero_bubble_picture(**kw)


def test_chapter_draws_the_picture_before_the_formulas():
    """Issue 34: the idea in one picture, before any formula. Chapter 05 draws zero_bubble_picture after saying
    what I and W are and before the schedules' bubble formulas, in both languages."""
    from authoring.paths import ROOT

    md = (ROOT / "notebooks" / "05_pipeline_parallel.md").read_text(encoding="utf-8")
    section = md.index("## Splitting the backward: zero-bubble schedules")
    picture = md.index("PP.zero_bubble_picture(")
    assert section < md.index("## 拆分反向：零气泡调度") < picture
    assert picture < md.index("- **ZB-H1**: 1F1B with I in place of B") and picture < md.index("- **ZB-H1**：把 1F1B")

"""Chapter 03's picture of its core idea (gradients all-reduced in buckets while backward runs): it draws without
error in English and in Chinese, every label is in the reader's language, and it draws one box per rank, one
backward block per layer and one all-reduce bar per bucket on every rank, with the last bucket finishing after
backward ends (the exposed tail)."""
from __future__ import annotations

import re

import matplotlib
import pytest

from authoring import lang_audit as A
from distlearn.data_parallel import plots as dpp

from i18n_helpers import boxes_overlap, language, overlapping_labels

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


def _texts(ax):
    return [ax.get_title()] + [t.get_text() for t in ax.texts]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("world_size", [1, 2, 4, 8])
def test_ddp_overlap_draws_in_the_readers_language(world_size, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = dpp.ddp_overlap(world_size)
        ax.figure.canvas.draw()
        texts = [t for t in _texts(ax) if t]
    plt.close(ax.figure)
    for t in texts:
        assert A.readable(t, lang), t
    bucket = "bucket " if lang == "en" else "桶 "
    layer = re.compile(r"^∇ layer \d$" if lang == "en" else r"^第 \d 层梯度$")
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert "bucket" in texts[0] and "backward" in texts[0]
    else:
        assert CJK.search(texts[0])                                          # the title is Chinese
        assert sum(bool(CJK.search(t)) for t in texts) >= 6 + 6 * world_size  # and so are the labels
    assert sum(t.startswith("rank ") for t in texts) == world_size           # one box per rank
    assert sum(t.startswith(bucket) for t in texts) == len(dpp.BUCKETS) * world_size
    assert sum(bool(layer.match(t)) for t in texts) == len(dpp.LAYERS) * world_size


def test_the_last_bucket_is_exposed_and_the_first_overlaps():
    compute, comm = dpp._timeline()
    backward_end = max(e for _, e in compute.values())
    assert comm[0][1] < backward_end          # the first bucket's all-reduce hides behind backward
    assert comm[-1][0] >= backward_end        # the last one starts only after backward ends
    assert all(b[0] >= a[1] for a, b in zip(comm, comm[1:]))   # one link: all-reduces do not overlap each other


def test_ddp_overlap_refuses_a_world_size_it_cannot_colour():
    with pytest.raises(ValueError, match="world_size"):
        dpp.ddp_overlap(0)


def _inside(a, b, tol=0.5):
    return a.x0 >= b.x0 - tol and a.x1 <= b.x1 + tol and a.y0 >= b.y0 - tol and a.y1 <= b.y1 + tol


def layout_problems(ax):
    """Labels that collide in a drawn figure: two texts whose boxes overlap, a text crossing a drawn line (the
    'backward ends' mark), or a text cut by the outline of a block, a batch bar or a rank box (a label must lie
    wholly inside or wholly outside each). [] if none."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    renderer = ax.figure.canvas.get_renderer()
    texts = [t for t in [ax.title, *ax.texts] if t.get_text().strip()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    problems = [f"{a!r} overlaps {b!r}" for a, b in overlapping_labels(texts)]
    outlines = [p.get_window_extent(renderer) for p in ax.patches
                if isinstance(p, (Rectangle, FancyBboxPatch)) and p.get_linewidth() > 0 and p.get_edgecolor()[3] > 0]
    lines = [ln.get_window_extent(renderer) for ln in ax.lines]
    problems += [f"{a!r} crosses a line" for a, ba in boxes for bl in lines if boxes_overlap(ba, bl)]
    problems += [f"{a!r} is cut by an outline" for a, ba in boxes for bo in outlines
                 if boxes_overlap(ba, bo) and not _inside(ba, bo)]
    return problems


@pytest.mark.parametrize("lang", ["en", "zh", "both"])
@pytest.mark.parametrize("world_size", [1, 2, 4, 8])
def test_ddp_overlap_labels_do_not_collide(world_size, lang):
    """The fourth audit saw the bilingual figure's layer labels run into each other, 'same weights' into the first
    block and the row names into 'backward ends': every label must have room in every language."""
    import matplotlib.pyplot as plt

    with language(lang):
        ax = dpp.ddp_overlap(world_size)
        ax.figure.canvas.draw()
        problems = layout_problems(ax)
    plt.close(ax.figure)
    assert problems == []


def test_layout_problems_sees_a_collision():
    import matplotlib.pyplot as plt

    with language("en"):
        ax = dpp.ddp_overlap(2)
        ax.text(dpp.STEP * 1.5 + 3.3, 0.32, "a label on the border of two blocks", ha="center", va="center")
        ax.figure.canvas.draw()
        problems = layout_problems(ax)
    plt.close(ax.figure)
    assert any("overlaps" in p for p in problems) and any("cut by an outline" in p for p in problems)

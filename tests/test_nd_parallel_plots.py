"""Chapter 12's picture of its core idea (a device mesh: ranks as boxes, one row per node, the ranks of every tp, cp,
dp and pp group linked): it draws without error in English and in Chinese, every label is in the reader's language,
it draws one box per rank, and a group of n ranks draws n − 1 links, so tp links stay inside a node."""
from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

from authoring import lang_audit as A
from distlearn.nd_parallel import plots as nd_plots
from distlearn.nd_parallel import simulation as N

from i18n_helpers import language

matplotlib.use("Agg")
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("shape, gpus_per_node", [((2, 2, 1, 2), 4), ((1, 2, 2, 2), 4), ((2, 1, 1, 4), 4)])
def test_mesh_picture_draws_in_the_readers_language(shape, gpus_per_node, lang):
    import matplotlib.pyplot as plt

    with language(lang):
        ax = nd_plots.mesh_picture(shape, gpus_per_node)
        ax.figure.canvas.draw()
        texts = [ax.get_title()] + [t.get_text() for t in ax.texts if t.get_text()]
        texts += [t.get_text() for t in ax.get_legend().get_texts()]
    for t in texts:
        assert A.readable(t, lang), t
    world = int(np.prod(shape))
    nodes = -(-world // gpus_per_node)
    if lang == "en":
        assert not any(CJK.search(t) for t in texts)
        assert sum(t.startswith("node ") for t in texts) == nodes
        assert any(t.startswith("tp group") for t in texts)
    else:
        assert CJK.search(texts[0])                                   # the title is Chinese
        assert sum(t.startswith("节点 ") for t in texts) == nodes
        assert any(t.startswith("tp 组") for t in texts)
    assert sum(t.startswith("rank ") for t in texts) == world         # one box per rank
    assert sum(p.get_gid() == "rank" for p in ax.patches) == world
    for dim in N.DIMS:
        links = [t for t in ax.texts if t.get_gid() == f"link-{dim}"]
        expected = sum(len(g) - 1 for g in N.groups(shape, dim)) if shape[N.DIMS.index(dim)] > 1 else 0
        assert len(links) == expected, dim
    plt.close(ax.figure)


def test_mesh_picture_keeps_tp_links_inside_a_node():
    import matplotlib.pyplot as plt

    ax = nd_plots.mesh_picture((2, 2, 1, 2), 4)
    ax.figure.canvas.draw()
    for t in ax.texts:
        if t.get_gid() == "link-tp":
            assert t.xy[1] == t.xyann[1]                              # same row: the same node
        if t.get_gid() == "link-pp":
            assert t.xy[1] > t.xyann[1]                               # to the next node down
    plt.close(ax.figure)


def test_mesh_picture_refuses_meshes_it_cannot_name():
    with pytest.raises(ValueError):
        nd_plots.mesh_picture((4, 4, 1, 8), 8)

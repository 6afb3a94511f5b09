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


# ---------------------------------------------------------------- where the bytes travel (cluster_topology)
@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("nodes, domain", [(2, 8), (3, 4)])
def test_cluster_topology_draws_nodes_rails_and_the_datasheet_bandwidths(nodes, domain, lang):
    """One box per GPU and per NIC, every NIC wired to the leaf switch of its rail (GPU i of every node on leaf i, the
    rail-optimized layout of NVIDIA's DGX SuperPOD), and bars equal to the datasheets' figures per direction (H100
    900 GB/s of NVLink in both directions → 450; 400 Gb/s NICs → 50; H800 400 → 200; B200 and GB200 1.8 TB/s → 900;
    MI300X 7 × 128 GB/s → 448), every text in the reader's language."""
    import matplotlib.pyplot as plt

    from distlearn.core.topology import make_topology

    topo = make_topology("h100-80gb", gpus_per_domain=domain)
    with language(lang):
        left, right = cp.cluster_topology(topo, nodes)
        fig = left.figure
        fig.canvas.draw()
        texts = [t.get_text() for ax in (left, right) for t in ax.texts] + [left.get_title(), right.get_title(),
                 right.get_xlabel(), fig._supxlabel.get_text()] + [t.get_text() for t in right.get_legend().get_texts()]
        ticks = [t.get_text() for t in right.get_yticklabels()]
    for t in texts:
        assert A.readable(t, lang), t
        assert lang == "zh" or not CJK.search(t), t
    gpu_boxes = [t for t in texts if re.fullmatch(r"GPU \d+", t)]
    assert len(gpu_boxes) == nodes * domain
    assert texts.count("NIC" if lang == "en" else "网卡") == nodes * domain
    leaf = "leaf" if lang == "en" else "叶"
    assert sorted(t for t in texts if t.startswith(leaf + " ")) == sorted(f"{leaf} {j}" for j in range(domain))
    # the NIC-to-leaf wires: one per GPU, coloured by its rail, ending at that rail's leaf box
    leaf_x = {int(t.get_text().split()[-1]): t.get_position()[0] for t in left.texts
              if t.get_text().startswith(leaf + " ")}
    wires = [ln for ln in left.lines if list(ln.get_ydata()) == [2.45, 1.2]]
    assert len(wires) == nodes * domain
    for n in range(nodes):
        for i in range(domain):
            wire = wires[n * domain + i]
            assert wire.get_color() == cp.RAILS[i] and wire.get_xdata()[1] == pytest.approx(leaf_x[i])
    assert ticks == ["H100", "H800", "H200", "B200", "GB200 NVL72", "MI300X"]
    assert "DeepSeek-V3" in fig._supxlabel.get_text() and "SuperPOD" in fig._supxlabel.get_text()
    widths = [round(p.get_width()) for p in right.patches]
    assert widths == [450, 200, 450, 900, 900, 448] + [50] * 6
    plt.close(fig)


def test_cluster_topology_refuses_what_it_cannot_draw():
    with pytest.raises(ValueError, match="nodes"):
        cp.cluster_topology(nodes=5)
    with pytest.raises(ValueError, match="topo"):
        cp.cluster_topology("h100-80gb")

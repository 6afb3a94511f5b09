"""Figures of chapter 02: ring all-reduce in one picture, and where the bytes travel in a cluster.

The ranks sit on a ring, each a box holding its copy of the message as a bar cut into ``n`` chunks. A chunk's shade
and number say how many ranks' data it already contains (``n`` = complete). Arrows are the messages of one step: every
rank sends one chunk to its right neighbour. Four panels follow the algorithm: the first reduce-scatter step, the end
of reduce-scatter (rank r holds the whole sum of one chunk), the first all-gather step, and the end (every rank holds
every complete chunk). The panels are read off :class:`distlearn.core.comm.VirtualCluster`'s recorded steps, so the
picture is the algorithm the chapter runs. Every label goes through :mod:`distlearn.core.i18n`, so the figure is
drawn in the reader's language.

:func:`cluster_topology` draws two nodes of a :class:`distlearn.core.topology.Topology` (8 GPUs each for an HGX /
DGX H100): the GPUs of a node on one NVSwitch (the NVLink domain), one NIC under each GPU, NIC i of every node on
leaf switch i (its rail, read from :meth:`~distlearn.core.topology.Topology.rail_of`), the leaf switches joined by
spine switches; beside it, bars of the two bandwidths per GPU and per direction for each preset of
:mod:`distlearn.core.hardware` (NVLink or Infinity Fabric inside the domain, the NIC between domains). The figures
and their sources are the presets' (``GPU.source``): NVIDIA's H100, H200, H800, DGX B200 and GB200 NVL72 datasheets,
DeepSeek-V3's report for the H800's network, AMD's MI300X datasheet and Azure's ND MI300X v5 for its network; the
rail layout is NVIDIA's DGX SuperPOD reference architecture (H100), "compute fabric".
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyBboxPatch, Rectangle

from distlearn.core import plots
from distlearn.core.comm import VirtualCluster
from distlearn.core.hardware import get_gpu
from distlearn.core.i18n import bi
from distlearn.core.topology import Topology, make_topology

__all__ = ["ring_all_reduce", "ring_panels", "cluster_topology", "TOPOLOGY_PRESETS"]

FULL = "#2F5D8C"   # a complete chunk / 完整的数据块
ARROW = "#C44E52"  # a message / 一条消息


def ring_panels(n: int) -> list[tuple[int, str, str]]:
    """The steps the figure draws for ``n`` ranks, as ``(step, English title, Chinese title)``: the first and last
    reduce-scatter steps, the first and last all-gather steps (steps count from 1; step 0 is the start)."""
    last = n - 1
    return [
        (1, "reduce-scatter, step 1", "ReduceScatter 第 1 步"),
        (last, f"after reduce-scatter (step {last})", f"ReduceScatter 结束（第 {last} 步）"),
        (last + 1, f"all-gather, step 1 (step {last + 1})", f"AllGather 第 1 步（第 {last + 1} 步）"),
        (2 * last, f"after all-gather (step {2 * last})", f"AllGather 结束（第 {2 * last} 步）"),
    ]


def _rank_box(ax, x, y, r, hold, n):
    """Rank ``r`` at (x, y): a box with its label and a bar of ``n`` chunks shaded by ``hold`` (counts 0 … n)."""
    w, h = 2.4, 1.05
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                facecolor="#F6F6F6", edgecolor="#555555", lw=1))
    ax.text(x, y + h / 2 - 0.08, f"rank {r}", ha="center", va="top", fontsize=8)
    cw, ch, x0, y0 = 2.0 / n, 0.42, x - 1.0, y - 0.42
    for c in range(n):
        k = int(hold[c])
        face = FULL if k == n else (_shade(k / n))
        ax.add_patch(Rectangle((x0 + c * cw, y0), cw, ch, facecolor=face, edgecolor="#333333", lw=0.6))
        ax.text(x0 + (c + 0.5) * cw, y0 + ch / 2, str(k), ha="center", va="center", fontsize=7,
                color="white" if k == n else "#222222")


def _shade(f: float) -> str:
    """A light-to-mid blue for a chunk holding a share ``f`` (0 ≤ f < 1) of the ranks' data; white when empty."""
    if f <= 0:
        return "white"
    r, g, b = (int(255 - f * (255 - c)) for c in (0x9E, 0xC3, 0xE6))
    return f"#{r:02X}{g:02X}{b:02X}"


def _positions(n, radius=2.3):
    """Rank r's centre on a circle, rank 0 at the top, the ring running clockwise."""
    angles = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    return [(radius * 1.25 * np.cos(a), radius * np.sin(a)) for a in angles]


def _radius(n):
    """The ring's radius: wide enough that ``n`` boxes do not overlap."""
    return 2.3 if n <= 4 else 2.3 * n / 4.2


def _panel(ax, step, n, title_en, title_zh):
    radius = _radius(n)
    pos = _positions(n, radius)
    for r, (x, y) in enumerate(pos):
        _rank_box(ax, x, y, r, step.holdings[r], n)
    for t in step.transfers:
        (x0, y0), (x1, y1) = pos[t.src], pos[t.dst]
        # shorten the arrow so it runs between the boxes / 缩短箭头，让它画在两个框之间
        dx, dy = x1 - x0, y1 - y0
        d = float(np.hypot(dx, dy))
        s = min(0.45, 1.0 / max(d, 1e-9) * 1.15)
        xa, ya, xb, yb = x0 + dx * s, y0 + dy * s, x1 - dx * s, y1 - dy * s
        ax.annotate("", xy=(xb, yb), xytext=(xa, ya),
                    arrowprops=dict(arrowstyle="->", color=ARROW, lw=1.3, shrinkA=0, shrinkB=0,
                                    connectionstyle="arc3,rad=-0.25"))
        mx, my = (xa + xb) / 2, (ya + yb) / 2
        # the label sits outside the ring / 标签放在环的外侧
        ax.text(mx * 1.42, my * 1.42, bi(f"chunk {t.chunk}", f"数据块 {t.chunk}"), ha="center", va="center",
                fontsize=7, color=ARROW)
    ax.set_xlim(-1.25 * radius - 1.7, 1.25 * radius + 1.7)
    ax.set_ylim(-radius - 0.8, radius + 0.8)
    ax.set_aspect("equal")
    ax.set_axis_off()
    ax.set_title(bi(title_en, title_zh, sep="\n"), fontsize=9)


def ring_all_reduce(n: int = 4, axes=None):
    """Ring all-reduce on ``n`` ranks (2 … 6) in four panels: the first and last reduce-scatter steps, the first and
    last all-gather steps. Boxes are ranks, bars their copies of the message in ``n`` chunks (the number: how many
    ranks' data the chunk holds), arrows the messages of that step. Returns the four axes."""
    if n < 2 or n > 6:
        raise ValueError(bi(f"n must be between 2 and 6, got {n}", f"n 必须在 2 到 6 之间，收到 {n}"))
    cluster = VirtualCluster(n)
    cluster.all_reduce([np.arange(float(n)) for _ in range(n)])
    if axes is None:
        fig, axes = plots.new_figure(15.0, 4.4, ncols=4)
    else:
        fig = axes[0].figure
    for ax, (i, en, zh) in zip(axes, ring_panels(n)):
        _panel(ax, cluster.steps[i], n, en, zh)
    fig.suptitle(bi(f"Ring all-reduce on {n} ranks: every step, every rank sends one chunk (M/{n} bytes) "
                    f"to its right neighbour",
                    f"{n} 个 rank 上的环形 AllReduce：每一步，每个 rank 都把一个数据块（M/{n} 字节）发给右边的邻居",
                    sep="\n"), fontsize=10)
    fig.supxlabel(bi("Number in a chunk: how many ranks' data it holds (dark = all of them).",
                     "数据块里的数字：已经加进了几个 rank 的数据（深色 = 全部）。"), fontsize=8)
    return list(axes)


# ---------------------------------------------------------------------------------------------- the cluster
#: Presets drawn in the bandwidth panel, with their labels / 带宽图中的预设及其标签
TOPOLOGY_PRESETS = (("h100-80gb", "H100"), ("h800", "H800"), ("h200", "H200"), ("b200", "B200"),
                    ("gb200-nvl72", "GB200 NVL72"), ("mi300x", "MI300X"))
NVLINK = "#55A868"   # NVLink inside the domain / 域内的 NVLink
NET = "#DD8452"      # the network between domains / 域间的网络
RAILS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def _box(ax, x, y, w, h, label, face, fontsize=7, color="#222222"):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor="#555555", lw=0.8, zorder=3))
    ax.text(x, y, label, ha="center", va="center", fontsize=fontsize, color=color, zorder=4)


def _draw_nodes(ax, topo: Topology, nodes: int):
    """Two (or ``nodes``) hosts of ``topo.gpus_per_host`` GPUs, their NVSwitch, NICs, leaf switches and a spine."""
    k = topo.gpus_per_host
    gap = 1.2
    width = k + gap
    leaves = topo.nics_per_host
    for n in range(nodes):
        x0 = n * width
        ax.add_patch(FancyBboxPatch((x0 - 0.55, 2.35), k + 0.1, 2.5, boxstyle="round,pad=0.02,rounding_size=0.15",
                                    facecolor="#F6F6F6", edgecolor="#555555", lw=1))
        ax.text(x0 + (k - 1) / 2, 4.68, bi(f"node {n}", f"节点 {n}"), ha="center", va="center", fontsize=8)
        _box(ax, x0 + (k - 1) / 2, 4.15, k - 0.2, 0.42, "NVSwitch", NVLINK, fontsize=7, color="white")
        for i in range(k):
            r = n * topo.gpus_per_domain + i if topo.gpus_per_domain == k else n * k + i
            ax.plot([x0 + i, x0 + i], [3.94, 3.55], color=NVLINK, lw=2.2, solid_capstyle="butt")
            _box(ax, x0 + i, 3.3, 0.8, 0.5, f"GPU {i}", "white")
            rail = topo.rail_of(r)
            _box(ax, x0 + i, 2.65, 0.8, 0.4, bi("NIC", "网卡"), "#FBE3D2", fontsize=6)
            leaf_x = (nodes * width - gap) / 2 - leaves / 2 * 1.25 + (rail + 0.5) * 1.25 - 0.5
            ax.plot([x0 + i, leaf_x], [2.45, 1.2], color=RAILS[rail % len(RAILS)], lw=1.0)
    centre = (nodes * width - gap) / 2 - 0.5
    for j in range(leaves):
        lx = centre - leaves / 2 * 1.25 + (j + 0.5) * 1.25
        ax.plot([lx, centre], [0.95, -0.35], color="#999999", lw=0.7)
        _box(ax, lx, 1.0, 1.05, 0.42, bi(f"leaf {j}", f"叶 {j}"), "white", fontsize=6,
             color=RAILS[j % len(RAILS)])
    _box(ax, centre, -0.45, 3.2, 0.42, bi("spine switches", "骨干交换机"), "#EEEEEE", fontsize=7)
    ax.set_xlim(-0.9, nodes * width - gap - 0.1)
    ax.set_ylim(-0.9, 5.0)
    ax.set_axis_off()


def cluster_topology(topo: Topology | None = None, nodes: int = 2, axes=None):
    """Where the bytes travel: ``nodes`` (2 … 4) hosts of ``topo`` (default ``make_topology("h100-80gb")``: 8 GPUs
    on one NVSwitch, one 400 Gb/s NIC each) on the left, with NIC i of every host wired to leaf switch i (rail i,
    :meth:`Topology.rail_of`) and the leaves to the spine; on the right, for each preset of
    :data:`TOPOLOGY_PRESETS`, the GPU's bandwidth inside its NVLink domain and through its NIC, GB/s per direction
    (``GPU.nvlink_bw``, ``GPU.network_bw``). Returns the two axes. Raises ValueError for another ``nodes`` or a
    ``topo`` that is not a Topology."""
    topo = make_topology("h100-80gb") if topo is None else topo
    if not isinstance(topo, Topology):
        raise ValueError(bi("topo must be a Topology (make_topology(...))",
                            "topo 必须是 Topology 对象（用 make_topology(...) 构造）"))
    if not isinstance(nodes, int) or not 2 <= nodes <= 4:
        raise ValueError(bi(f"nodes must be 2, 3 or 4, got {nodes!r}", f"nodes 必须是 2、3 或 4，收到 {nodes!r}"))
    if axes is None:
        fig, axes = plots.new_figure(15.0, 4.6, ncols=2, gridspec_kw={"width_ratios": [2.4, 1]})
    else:
        fig = axes[0].figure
    left, right = axes
    _draw_nodes(left, topo, nodes)
    left.set_title(bi(f"{nodes} nodes of {topo.gpus_per_host} GPUs: NVLink inside a node, "
                      f"one NIC per GPU between nodes; NIC i on leaf switch i (rail i)",
                      f"{nodes} 个节点、每个 {topo.gpus_per_host} 块 GPU：节点内走 NVLink，"
                      f"节点间每块 GPU 一块网卡；第 i 块网卡接第 i 台叶交换机（轨道 i）", sep="\n"), fontsize=9)
    labels = [label for _, label in TOPOLOGY_PRESETS]
    gpus = [get_gpu(name) for name, _ in TOPOLOGY_PRESETS]
    y = np.arange(len(gpus))
    inside = [g.nvlink_bw / 1e9 for g in gpus]
    network = [g.network_bw / 1e9 for g in gpus]
    right.barh(y - 0.2, inside, height=0.38, color=NVLINK, label=bi("inside the domain (NVLink; MI300X: Infinity Fabric)",
                                                                     "域内（NVLink；MI300X 为 Infinity Fabric）"))
    right.barh(y + 0.2, network, height=0.38, color=NET, label=bi("network (NIC)", "网络（网卡）"))
    for yi, a, b in zip(y, inside, network):
        right.text(a + 10, yi - 0.2, f"{a:.0f}", va="center", fontsize=7)
        right.text(b + 10, yi + 0.2, f"{b:.0f}", va="center", fontsize=7)
    right.set_yticks(y, labels, fontsize=8)
    right.invert_yaxis()
    right.set_xlim(0, max(inside) * 1.18)
    right.set_xlabel(bi("GB/s per GPU, per direction", "每块 GPU 每个方向的 GB/s"), fontsize=8)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=1, frameon=False)
    right.set_title(bi("Bandwidth per GPU (datasheets)", "每块 GPU 的带宽（数据手册）", sep="\n"), fontsize=9)
    fig.supxlabel(bi("Sources: NVIDIA H100, H200, H800, DGX B200 and GB200 NVL72 datasheets, AMD MI300X datasheet; "
                     "networks: DGX user guides, DeepSeek-V3 report (H800), Azure ND MI300X v5; rails: NVIDIA DGX "
                     "SuperPOD reference architecture (H100).",
                     "出处：NVIDIA H100、H200、H800、DGX B200、GB200 NVL72 数据手册，AMD MI300X 数据手册；网络：DGX "
                     "用户指南、DeepSeek-V3 技术报告 (H800)、Azure ND MI300X v5；轨道：NVIDIA DGX SuperPOD 参考架构 (H100)。",
                     sep="\n"), fontsize=7)
    return [left, right]

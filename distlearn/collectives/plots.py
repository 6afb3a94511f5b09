"""Figure of chapter 02: ring all-reduce in one picture.

The ranks sit on a ring, each a box holding its copy of the message as a bar cut into ``n`` chunks. A chunk's shade
and number say how many ranks' data it already contains (``n`` = complete). Arrows are the messages of one step: every
rank sends one chunk to its right neighbour. Four panels follow the algorithm: the first reduce-scatter step, the end
of reduce-scatter (rank r holds the whole sum of one chunk), the first all-gather step, and the end (every rank holds
every complete chunk). The panels are read off :class:`distlearn.core.comm.VirtualCluster`'s recorded steps, so the
picture is the algorithm the chapter runs. Every label goes through :mod:`distlearn.core.i18n`, so the figure is
drawn in the reader's language.
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyBboxPatch, Rectangle

from distlearn.core import plots
from distlearn.core.comm import VirtualCluster
from distlearn.core.i18n import bi

__all__ = ["ring_all_reduce", "ring_panels"]

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

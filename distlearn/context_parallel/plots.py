"""Figures of chapter 10: the idea of ring attention (ranks, blocks, messages), attention work per rank under each
sequence layout, and a ring schedule in time."""
from __future__ import annotations

import re

import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi

LAYOUT_COLORS = {"contiguous": "#C44E52", "zigzag": "#4C72B0", "striped": "#55A868"}
LAYOUT_NAMES = {"contiguous": ("contiguous", "连续切分"), "zigzag": ("zig-zag", "之字形切分"),
                "striped": ("striped", "条带切分"), "all-to-all": ("all-to-all (Ulysses)", "AllToAll（Ulysses）")}


def layout_label(layout: str) -> str:
    en, zh = LAYOUT_NAMES[layout]
    return bi(en, zh)


def _setup(setup) -> tuple[str, str]:
    """``setup`` = ``(en, zh)`` describing what a figure shows (model, sizes, hardware), appended to its title."""
    return ("", "") if setup is None else (f"\n{setup[0]}", f"\n{setup[1]}")


def _fit_title(ax, text: str, share: float = 0.92) -> None:
    """Set ``text`` as the title of ``ax``, each line broken (at spaces, commas and semicolons) so that no line is
    wider than ``share`` of the axes. Side-by-side subplots with long titles (the setup of each case) otherwise
    print their titles over each other."""
    renderer = ax.figure.canvas.get_renderer()
    limit = share * ax.get_window_extent(renderer).width

    def width(line: str) -> float:
        ax.set_title(line)
        return ax.title.get_window_extent(renderer).width

    out = []
    for line in text.split("\n"):
        tokens = re.findall(r"[^\s,，;；]+[,，;；]?\s*|[,，;；]\s*|\s+", line)
        current = ""
        for tok in tokens:
            if current.strip() and width((current + tok).rstrip()) > limit:
                out.append(current.rstrip())
                current = tok.lstrip()
            else:
                current += tok
        out.append(current.rstrip())
    ax.set_title("\n".join(out))


def work_bars(work_by_layout: dict, ax=None, *, unit: float = 1.0, ylabel: str | None = None, setup=None):
    """Grouped bars: for each layout (``{"contiguous": per-rank array, ...}``) the work of every rank, with the
    average as a dashed line. ``unit`` divides the values (e.g. the average of one layout); ``setup`` ``(en, zh)``
    states the case in the title (sequence length, source of the numbers)."""
    if ax is None:
        _, ax = plots.new_figure(7.5, 3.2)
    layouts = list(work_by_layout)
    cp = len(next(iter(work_by_layout.values())))
    width = 0.8 / len(layouts)
    for i, layout in enumerate(layouts):
        w = np.asarray(work_by_layout[layout], dtype=float) / unit
        ax.bar(np.arange(cp) + (i - (len(layouts) - 1) / 2) * width, w, width,
               color=LAYOUT_COLORS.get(layout, "#8172B3"), label=layout_label(layout))
    mean = np.mean(np.asarray(next(iter(work_by_layout.values())), dtype=float)) / unit
    ax.axhline(mean, ls="--", lw=1, color="#333333", label=bi("average", "平均"))
    ax.set_xticks(range(cp), [f"rank {r}" for r in range(cp)])
    ax.set_ylabel(ylabel or bi("work / average", "工作量 / 平均"))
    ax.legend(fontsize=8, ncols=2)
    en, zh = _setup(setup)
    plots.title(ax, f"Causal attention work per rank (cp = {cp}){en}", f"因果注意力下每个 rank 的工作量（cp = {cp}）{zh}")
    return ax


def ring_gantt(timeline, ax=None, *, unit: float = 1e-3, label: str = "ms", setup=None):
    """One bar per (rank, step) of a :class:`distlearn.context_parallel.simulation.Timeline`: compute in colour; in grey the
    time a rank waits — for the next block, or at the end for the slowest rank. ``setup`` ``(en, zh)`` states the
    case in the title (model, sequence, GPU, link)."""
    if ax is None:
        _, ax = plots.new_figure(7.5, 0.5 + 0.45 * timeline.start.shape[0])
    cp = timeline.start.shape[0]
    for r in range(cp):
        prev_end = 0.0
        for t in range(cp):
            s, e = timeline.start[r, t] / unit, timeline.end[r, t] / unit
            if s > prev_end:
                ax.barh(r, s - prev_end, left=prev_end, color=plots.COLORS["idle"], edgecolor="white")
            ax.barh(r, e - s, left=s, color=plots.COLORS["compute"], edgecolor="white")
            if e - s > 0:
                ax.text((s + e) / 2, r, str(t), ha="center", va="center", fontsize=7, color="white")
            prev_end = e
        if timeline.makespan / unit > prev_end:         # done early: idle until the slowest rank finishes
            ax.barh(r, timeline.makespan / unit - prev_end, left=prev_end, color=plots.COLORS["idle"],
                    edgecolor="white")
    ax.set_yticks(range(cp), [f"rank {r}" for r in range(cp)])
    ax.invert_yaxis()
    ax.set_xlabel(label)
    en, zh = _setup(setup)
    _fit_title(ax, bi(f"Ring steps in time (number = step; grey = idle){en}",
                      f"环形各步的时间线（数字为步序；灰色为空闲）{zh}", sep="\n"))
    return ax


RANK_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def ring_diagram(cp: int = 4, steps: int | None = None):
    """The idea of ring attention in one picture: one panel per step; in each, the ``cp`` ranks as boxes, each
    holding its own queries (a bar that never moves) and one K/V block (a bar coloured by the rank it came from),
    with arrows for the messages of that step, rank r → rank r+1. Every label follows the course language.
    Returns the figure."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    steps = cp if steps is None else steps
    fig, axes = plots.plt.subplots(1, steps, figsize=(2.35 * steps, 0.62 * cp + 1.3), layout="constrained")
    axes = np.atleast_1d(axes)
    for t, ax in enumerate(axes):
        ax.set_xlim(0, 10)
        ax.set_ylim(-0.8, cp - 0.2)
        ax.invert_yaxis()
        ax.axis("off")
        for r in range(cp):
            src = (r - t) % cp
            ax.add_patch(FancyBboxPatch((0.2, r - 0.38), 7.3, 0.76, boxstyle="round,pad=0.02,rounding_size=0.12",
                                        facecolor="#F4F4F4", edgecolor="#555555", lw=1))
            ax.text(0.45, r, f"rank {r}", va="center", ha="left", fontsize=8)
            ax.add_patch(Rectangle((3.0, r - 0.22), 1.9, 0.44, color=RANK_COLORS[r % len(RANK_COLORS)], alpha=0.45))
            ax.text(3.95, r, f"Q{r}", va="center", ha="center", fontsize=8)
            ax.add_patch(Rectangle((5.2, r - 0.22), 2.0, 0.44, color=RANK_COLORS[src % len(RANK_COLORS)]))
            ax.text(6.2, r, f"K/V{src}", va="center", ha="center", fontsize=8, color="white")
            if t < cp - 1:   # this step's message: the held block goes on to rank r+1 / 这一步的消息：把持有的块传给 rank r+1
                dst = (r + 1) % cp
                ax.annotate("", xy=(7.6, dst), xytext=(7.6, r),
                            arrowprops=dict(arrowstyle="->", color="#333333", lw=1.1, shrinkA=1, shrinkB=1,
                                            connectionstyle=f"arc3,rad={0.45 if dst > r else 0.22}"))
        plots.title(ax, f"step {t}", f"第 {t} 步")
    fig.supxlabel(bi("Q: the rank's own queries, never sent. K/V j: the block of rank j. "
                     "Arrow: a message of that step, rank r → rank r+1.",
                     "Q：本 rank 自己的查询，从不发送。K/V j：rank j 的 K/V 块。箭头：这一步的消息，rank r → rank r+1。"),
                  fontsize=8)
    fig.suptitle(bi("Ring attention: the queries stay, the K/V blocks rotate (cp = {})".format(cp),
                    "环形注意力：查询留在本地，K/V 块沿环轮转（cp = {}）".format(cp), sep="\n"))
    return fig

"""Figures of chapter 10: attention work per rank under each sequence layout, and a ring schedule in time."""
from __future__ import annotations

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
    plots.title(ax, f"Ring steps in time (number = step; grey = idle){en}", f"环形各步的时间线（数字为步序；灰色为空闲）{zh}")
    return ax

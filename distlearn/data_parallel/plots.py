"""Figure of chapter 03: the idea of data parallelism in one picture, gradients all-reduced in buckets while the
backward pass runs (DDP's overlap).

Each rank is a box. On its left, the batch as a bar with the rank's own slice filled in. Inside it, time runs left
to right in two rows: the backward pass (layer 4 down to layer 1, each block producing its gradients) and the
all-reduce of each bucket, which starts as soon as every gradient of the bucket is ready. A translucent band spans
all ranks for each bucket's all-reduce, and arrows between the boxes are its messages. After backward ends, the
last bucket's all-reduce is the exposed communication. The times are schematic, not measured. Every label goes
through :mod:`distlearn.core.i18n`, so the figure is drawn in the reader's language.
"""
from __future__ import annotations

from matplotlib.patches import FancyBboxPatch, Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.core.guard import read_only

__all__ = ["ddp_overlap", "RANK_COLORS", "BUCKET_COLORS", "LAYERS", "BUCKETS"]

RANK_COLORS = read_only(["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"])
BUCKET_COLORS = read_only(["#8172B3", "#55A868", "#C44E52"])
# Backward runs from the last layer to the first; each layer takes one time unit of 1.4.
LAYERS = read_only([4, 3, 2, 1])
# Buckets in the order their gradients become ready: (layers in the bucket) / 各桶按梯度就绪的顺序排列
BUCKETS = read_only([(4,), (3, 2), (1,)])
STEP, COMM = 1.4, 1.8


def _arrow(ax, x0, y0, x1, y1, color="#333333", style="<->"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops=dict(arrowstyle=style, color=color, lw=1.0, shrinkA=0, shrinkB=0))


def _timeline():
    """(start, end) of each layer's backward and of each bucket's all-reduce, in schematic time units. A bucket's
    all-reduce starts when its last gradient is ready and the link is free."""
    compute = {layer: (k * STEP, (k + 1) * STEP) for k, layer in enumerate(LAYERS)}
    comm, link_free = [], 0.0
    for layers in BUCKETS:
        ready = max(compute[layer][1] for layer in layers)
        start = max(ready, link_free)
        comm.append((start, start + COMM))
        link_free = start + COMM
    return compute, comm


def ddp_overlap(world_size: int = 2, ax=None):
    """Data parallelism in one picture: one box per rank, each with its own slice of the batch and the same model;
    the backward pass of 4 layers in the top row, the all-reduce of 3 buckets in the bottom row, starting while
    backward still runs; arrows between ranks for the all-reduce's messages and the exposed tail after backward
    ends. Returns the axes."""
    if world_size < 1 or world_size > len(RANK_COLORS):
        raise ValueError(bi(f"world_size must be between 1 and {len(RANK_COLORS)}, got {world_size}",
                            f"world_size 必须在 1 到 {len(RANK_COLORS)} 之间，收到 {world_size}"))
    if ax is None:
        _, ax = plots.new_figure(10.0, 1.15 * world_size + 2.2)
    compute, comm = _timeline()
    x0, lane_h, gap, row_h = 3.3, 1.3, 0.45, 0.4
    backward_end = x0 + len(LAYERS) * STEP
    step_end = x0 + comm[-1][1]
    bucket_of = {layer: b for b, layers in enumerate(BUCKETS) for layer in layers}
    top, bottom = -0.35, world_size * (lane_h + gap) - gap + 0.1
    # one band per bucket's all-reduce, across all ranks / 每个桶的 AllReduce 一条色带，贯穿所有 rank
    for b, (s, e) in enumerate(comm):
        ax.add_patch(Rectangle((x0 + s, top + 0.3), e - s, bottom - top - 0.3, facecolor=BUCKET_COLORS[b],
                               alpha=0.10, edgecolor="none"))
    # the exposed tail after backward ends / 反向结束之后未被隐藏的通信
    ax.add_patch(Rectangle((backward_end, top + 0.3), step_end - backward_end, bottom - top - 0.3, fill=False,
                           hatch="///", edgecolor="#AAAAAA", lw=0))
    for r in range(world_size):
        y = r * (lane_h + gap)
        color = RANK_COLORS[r]
        ax.add_patch(FancyBboxPatch((0.0, y), step_end + 0.25, lane_h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                    facecolor="none", edgecolor="#555555", lw=1))
        ax.text(0.15, y + 0.32, f"rank {r}", ha="left", va="center", fontsize=9)
        # the batch, with this rank's slice filled / 整个批次，本 rank 的那一份涂色
        w = 1.6 / world_size
        for k in range(world_size):
            ax.add_patch(Rectangle((0.15 + k * w, y + 0.68), w, 0.26, facecolor=color if k == r else "white",
                                   edgecolor="#777777", lw=0.6))
        ax.text(0.15, y + 1.12, bi("its slice of the batch", "自己那一份批次"), ha="left", va="center", fontsize=7)
        # one language per line, so that both fit left of the first block / 每行一种语言，两种都放得进第一块的左边
        ax.text(2.05, y + 0.32, bi("same weights", "相同权重", sep="\n"), ha="left", va="center", fontsize=7,
                color="#555555", linespacing=1.1)
        # backward: one block per layer, coloured by the bucket its gradients join / 反向：每层一块，颜色表示梯度进入哪个桶
        yb = y + 0.12
        for layer in LAYERS:
            s, e = compute[layer]
            ax.add_patch(Rectangle((x0 + s, yb), e - s, row_h, facecolor=BUCKET_COLORS[bucket_of[layer]], alpha=0.45,
                                   edgecolor="#333333", lw=0.6))
            ax.text(x0 + (s + e) / 2, yb + row_h / 2, bi(f"∇ layer {layer}", f"第 {layer} 层梯度", sep="\n"),
                    ha="center", va="center", fontsize=7, linespacing=1.0)
        # all-reduce: one bar per bucket / AllReduce：每个桶一条
        yc = y + 0.72
        for b, (s, e) in enumerate(comm):
            ax.add_patch(Rectangle((x0 + s, yc), e - s, row_h, facecolor=BUCKET_COLORS[b], edgecolor="#333333",
                                   lw=0.6))
            ax.text(x0 + (s + e) / 2, yc + row_h / 2, bi(f"bucket {b + 1}", f"桶 {b + 1}", sep="\n"), ha="center",
                    va="center", fontsize=7, color="white", linespacing=1.0)
    # the all-reduce's messages between neighbouring ranks / 相邻 rank 之间 AllReduce 的消息
    for r in range(world_size - 1):
        y_from, y_to = r * (lane_h + gap) + lane_h, (r + 1) * (lane_h + gap)
        for b, (s, e) in enumerate(comm):
            _arrow(ax, x0 + (s + e) / 2, y_from, x0 + (s + e) / 2, y_to, color=BUCKET_COLORS[b])
    # row names and the time axis / 行名和时间轴
    ax.text(x0 - 0.08, -0.07, bi("top: backward · bottom: all-reduce", "上：反向传播；下：AllReduce", sep="\n"),
            ha="left", va="bottom", fontsize=7, color="#555555", linespacing=1.1)
    ax.plot([backward_end, backward_end], [top + 0.3, bottom], color="#333333", lw=1.0, ls="--")
    ax.text(backward_end, top + 0.25, bi("backward ends", "反向结束"), ha="center", va="bottom", fontsize=8)
    ax.text((backward_end + step_end) / 2, bottom + 0.05, bi("exposed", "未被隐藏的通信"), ha="center", va="top",
            fontsize=8, color="#C44E52")
    _arrow(ax, x0, bottom + 0.5, step_end, bottom + 0.5, style="->")
    ax.text(step_end, bottom + 0.58, bi("time", "时间"), ha="right", va="top", fontsize=8)
    footer = bi("Every rank runs the same model on its own slice of the batch.\n"
                "A bucket's all-reduce starts as soon as its last gradient is ready, while backward goes on.\n"
                "Only the all-reduce still running after backward ends costs time (hatched).",
                "每个 rank 用同一个模型处理自己那一份批次。\n"
                "一个桶的梯度全部就绪，它的 AllReduce 就立即开始，反向传播同时继续。\n"
                "只有反向结束后还在进行的 AllReduce 才真正花时间（斜线部分）。", sep="\n")
    ax.text(0.0, bottom + 0.8, footer, ha="left", va="top", fontsize=8, color="#333333", linespacing=1.4)
    ax.set_xlim(-0.1, step_end + 0.4)
    ax.set_ylim(bottom + 0.95 + 0.25 * (footer.count("\n") + 1), top - 0.2)
    ax.set_aspect("equal")
    ax.set_axis_off()
    plots.title(ax, f"Data parallelism on {world_size} ranks: gradients all-reduced in buckets while backward runs",
                f"{world_size} 个 rank 上的数据并行：反向传播进行时，梯度按桶做 AllReduce")
    return ax

"""Figure of chapter 04: the idea of tensor parallelism in one picture, the Megatron MLP ``Y = GeLU(X A) B`` split
over ``tp`` ranks.

Each rank is a box. Inside it, tensors are bars and weights are small matrices: the whole input X, the rank's block of
columns of A, the GeLU applied locally, the rank's block of rows of B, and the partial Y it produces. Arrows on the
right are the messages of the one all-reduce (g) that sums the partial outputs. Every label goes through
:mod:`distlearn.core.i18n`, so the figure is drawn in the reader's language.
"""
from __future__ import annotations

from matplotlib.patches import FancyBboxPatch, Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.core.guard import read_only

__all__ = ["mlp_split", "RANK_COLORS"]

RANK_COLORS = read_only(["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"])
GREY = "#BBBBBB"


def _matrix(ax, x0, y0, w, h, tp, rank, how, color):
    """A weight matrix drawn as a ``w`` × ``h`` box cut into ``tp`` strips (``how``: ``"col"`` or ``"row"``); only
    the strip this ``rank`` holds is filled."""
    for k in range(tp):
        if how == "col":
            box = (x0 + k * w / tp, y0, w / tp, h)
        else:
            box = (x0, y0 + k * h / tp, w, h / tp)
        ax.add_patch(Rectangle(box[:2], box[2], box[3], facecolor=color if k == rank else "white",
                               edgecolor="#777777", lw=0.6))
    ax.add_patch(Rectangle((x0, y0), w, h, fill=False, edgecolor="#333333", lw=1.0))


def _arrow(ax, x0, y0, x1, y1, color="#333333"):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops=dict(arrowstyle="->", color=color, lw=1.0, shrinkA=0, shrinkB=0))


def mlp_split(tp: int = 2, ax=None):
    """The Megatron MLP on ``tp`` ranks in one picture: one box per rank holding the whole X, its columns of A (a
    column split), the GeLU run locally, its rows of B (a row split) and a partial Y; arrows from every partial Y
    into one all-reduce (g), which leaves the whole Y on every rank. Returns the axes."""
    if tp < 1 or tp > len(RANK_COLORS):
        raise ValueError(bi(f"tp must be between 1 and {len(RANK_COLORS)}, got {tp}",
                            f"tp 必须在 1 到 {len(RANK_COLORS)} 之间，收到 {tp}"))
    if ax is None:
        _, ax = plots.new_figure(10.0, 0.8 * tp + 2.0)
    lane_h, bar_h = 1.0, 0.32
    for r in range(tp):
        color = RANK_COLORS[r]
        y = r * 1.15
        mid = y + lane_h / 2
        ax.add_patch(FancyBboxPatch((0.0, y), 11.2, lane_h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                    facecolor="#F6F6F6", edgecolor="#555555", lw=1))
        ax.text(0.15, mid, f"rank {r}", ha="left", va="center", fontsize=9)
        # the whole input X / 完整的输入 X
        ax.add_patch(Rectangle((1.25, mid - bar_h / 2), 1.5, bar_h, facecolor=GREY, edgecolor="#333333", lw=0.8))
        ax.text(2.0, mid, "X", ha="center", va="center", fontsize=9)
        ax.text(2.95, mid, "·", ha="center", va="center", fontsize=14)
        # the rank's columns of A / 本 rank 持有的 A 的列
        _matrix(ax, 3.15, y + 0.15, 1.6, 0.7, tp, r, "col", color)
        ax.text(3.15 + (r + 0.5) * 1.6 / tp, y + 0.5, f"$A_{r}$", ha="center", va="center", fontsize=8,
                color="white" if tp <= 4 else "#222222")
        _arrow(ax, 4.85, mid, 5.25, mid)
        # GeLU on the rank's own columns, no communication / 在本 rank 自己的列上做 GeLU，不需要通信
        ax.add_patch(Rectangle((5.3, mid - bar_h / 2), 1.6 / tp, bar_h, facecolor=color, edgecolor="#333333", lw=0.8))
        ax.text(5.3 + 0.8 / tp, mid - bar_h / 2 - 0.03, "GeLU", ha="center", va="bottom", fontsize=7)
        ax.text(5.3 + 1.6 / tp + 0.2, mid, "·", ha="center", va="center", fontsize=14)
        # the rank's rows of B / 本 rank 持有的 B 的行
        bx = 5.3 + 1.6 / tp + 0.4
        _matrix(ax, bx, y + 0.1, 0.55, 0.8, tp, r, "row", color)
        ax.text(bx + 0.275, y + 0.1 + (r + 0.5) * 0.8 / tp, f"$B_{r}$", ha="center", va="center", fontsize=7,
                color="white" if tp <= 4 else "#222222")
        _arrow(ax, bx + 0.65, mid, bx + 1.05, mid)
        # a partial sum with the full shape of Y / 形状与 Y 相同的部分和
        px = bx + 1.1
        ax.add_patch(Rectangle((px, mid - bar_h / 2), 1.5, bar_h, facecolor=color, alpha=0.35, hatch="///",
                               edgecolor="#333333", lw=0.8))
        ax.text(px + 0.75, mid - bar_h / 2 - 0.03, bi("partial Y", "部分和"), ha="center", va="bottom",
                fontsize=7)
        # a message into the all-reduce / 进入 AllReduce 的消息
        _arrow(ax, px + 1.55, mid, 11.75, mid, color="#C44E52")
        # the whole Y, on every rank after g / g 之后每个 rank 都有完整的 Y
        ax.add_patch(Rectangle((13.0, mid - bar_h / 2), 1.5, bar_h, facecolor=GREY, edgecolor="#333333", lw=0.8))
        ax.text(13.75, mid, "Y", ha="center", va="center", fontsize=9)
        _arrow(ax, 12.55, mid, 12.95, mid, color="#C44E52")
    top, bottom = -0.1, (tp - 1) * 1.15 + lane_h + 0.1
    ax.add_patch(FancyBboxPatch((11.8, top), 0.7, bottom - top, boxstyle="round,pad=0.02,rounding_size=0.1",
                                facecolor="#F8D9D9", edgecolor="#C44E52", lw=1.2))
    ax.text(12.15, (top + bottom) / 2, bi("g: all-reduce (sum)", "g：AllReduce（求和）", sep="\n"), rotation=90, ha="center",
            va="center", fontsize=8)
    ax.text(1.1, top - 0.05, "f", ha="center", va="bottom", fontsize=11)
    ax.plot([1.1, 1.1], [top, bottom], color="#333333", lw=1.0, ls="--")
    footer = bi("f: identity in forward, all-reduce of ∂L/∂X in backward.\n"
                "g: all-reduce of the partial Y in forward, identity in backward.\n"
                "Filled strip: the block of the weight this rank holds. Between A and B nothing is sent.",
                "f：前向原样传递，反向对 ∂L/∂X 做 AllReduce。\n"
                "g：前向对 Y 的部分和做 AllReduce，反向原样传递。\n"
                "实心条：本 rank 持有的那部分权重。A 和 B 之间没有任何通信。", sep="\n")
    ax.text(0.0, bottom + 0.2, footer, ha="left", va="top", fontsize=8, color="#333333", linespacing=1.4)
    ax.set_xlim(-0.1, 14.7)
    ax.set_ylim(bottom + 0.45 + 0.3 * (footer.count("\n") + 1), top - 0.35)
    ax.set_aspect("equal")
    ax.set_axis_off()
    plots.title(ax, f"The MLP on {tp} ranks: A split by columns, B by rows, one all-reduce",
                f"{tp} 个 rank 上的 MLP：A 按列切分，B 按行切分，只需一次 AllReduce")
    return ax

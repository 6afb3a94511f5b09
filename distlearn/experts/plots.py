"""Figures of chapter 11: the idea of expert parallelism in one picture (dispatch and combine), load per expert with
its capacity, and auxiliary-loss-free balancing over steps."""
from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyBboxPatch, Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.core.validate import check_divisible
from distlearn.core.guard import read_only

EXPERT_COLORS = read_only(["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C"])
CROSS = "#C44E52"
LOCAL = "#888888"


def dispatch_picture(ep: int = 2, num_experts: int = 4, tokens_per_rank: int = 3, k: int = 2, seed: int = 3,
                     ax=None):
    """Expert parallelism in one picture. One lane per rank (a box): its tokens (bars), the router that picks ``k``
    experts per token, the rank's own ``num_experts / ep`` experts (boxes), and the tokens' outputs back home.
    Solid arrows are the dispatch all-to-all, dashed arrows the combine all-to-all; red arrows change lanes, so they
    leave the GPU, grey ones stay on it. The routing is a real top-k of random logits (``route``), so the number of
    red dispatch arrows equals the off-diagonal sum of ``split_sizes``. Returns the axes."""
    from distlearn.experts.simulation import route, router_logits

    check_divisible("num_experts", num_experts, "ep", ep)
    if not 1 <= num_experts <= len(EXPERT_COLORS):
        raise ValueError(bi(f"num_experts must be between 1 and {len(EXPERT_COLORS)}, got {num_experts}",
                            f"num_experts 必须在 1 到 {len(EXPERT_COLORS)} 之间，收到 {num_experts}"))
    per_rank = num_experts // ep
    routings = [route(router_logits(tokens_per_rank, num_experts, seed=seed + r), k) for r in range(ep)]
    lane_h = max(tokens_per_rank, per_rank) * 0.62 + 0.5
    gap = 0.45
    if ax is None:
        _, ax = plots.new_figure(10.5, ep * (lane_h + gap) * 0.62 + 1.6)

    def lane_y(r):
        return r * (lane_h + gap)

    def token_y(r, t):
        return lane_y(r) + 0.45 + (t + 0.5) * (lane_h - 0.5) / tokens_per_rank

    def expert_y(e):
        r, j = divmod(e, per_rank)
        return lane_y(r) + 0.45 + (j + 0.5) * (lane_h - 0.5) / per_rank

    x_tok, x_router, x_exp, x_out = 1.3, 3.0, 8.3, 13.2
    bar_w, bar_h, exp_w = 1.0, 0.3, 1.3
    for r in range(ep):
        y = lane_y(r)
        ax.add_patch(FancyBboxPatch((0.0, y), 14.6, lane_h, boxstyle="round,pad=0.02,rounding_size=0.12",
                                    facecolor="#F6F6F6", edgecolor="#555555", lw=1))
        ax.text(0.15, y + 0.22, f"rank {r}", ha="left", va="center", fontsize=9)
        ax.add_patch(Rectangle((x_router, y + 0.4), 0.9, lane_h - 0.5, facecolor="#E8E8E8", edgecolor="#333333",
                               lw=0.8))
        ax.text(x_router + 0.45, y + 0.4 + (lane_h - 0.5) / 2, bi("router", "路由器", sep="\n") + f"\ntop-{k}",
                ha="center", va="center", fontsize=7)
        for t in range(tokens_per_rank):
            ty = token_y(r, t)
            for x0, name in ((x_tok, f"x{t}"), (x_out, f"y{t}")):
                ax.add_patch(Rectangle((x0, ty - bar_h / 2), bar_w, bar_h, facecolor="#BBBBBB", edgecolor="#333333",
                                       lw=0.8))
                ax.text(x0 + bar_w / 2, ty, name, ha="center", va="center", fontsize=7)
            ax.annotate("", xy=(x_router, ty), xytext=(x_tok + bar_w, ty),
                        arrowprops=dict(arrowstyle="->", color="#333333", lw=0.8, shrinkA=0, shrinkB=0))
        for j in range(per_rank):
            e = r * per_rank + j
            ey = expert_y(e)
            ax.add_patch(Rectangle((x_exp, ey - 0.25), exp_w, 0.5, facecolor=EXPERT_COLORS[e], edgecolor="#333333",
                                   lw=0.8))
            ax.text(x_exp + exp_w / 2, ey, bi(f"expert {e}", f"专家 {e}", sep="\n"), ha="center", va="center", fontsize=7,
                    color="white")
    for r, routing in enumerate(routings):
        for t in range(tokens_per_rank):
            ty = token_y(r, t)
            for c, e in enumerate(routing.index[t]):
                e = int(e)
                cross = e // per_rank != r
                color = CROSS if cross else LOCAL
                ey = expert_y(e) + (c - (k - 1) / 2) * 0.12
                off = (c - (k - 1) / 2) * 0.06
                ax.annotate("", xy=(x_exp, ey), xytext=(x_router + 0.9, ty + off),
                            arrowprops=dict(arrowstyle="->", color=color, lw=1.0, shrinkA=0, shrinkB=0),
                            gid="dispatch-cross" if cross else "dispatch-local")
                ax.annotate("", xy=(x_out, ty + off), xytext=(x_exp + exp_w, ey),
                            arrowprops=dict(arrowstyle="->", color=color, lw=1.0, ls="--", shrinkA=0, shrinkB=0),
                            gid="combine-cross" if cross else "combine-local")
    top = -0.15
    bottom = lane_y(ep - 1) + lane_h
    ax.text((x_router + 0.9 + x_exp) / 2, top, bi("dispatch: all-to-all", "分发：AllToAll", sep="\n"), ha="center",
            va="bottom", fontsize=8)
    ax.text((x_exp + exp_w + x_out) / 2, top, bi("combine: all-to-all back", "合并：反方向的 AllToAll", sep="\n"),
            ha="center", va="bottom", fontsize=8)
    ax.text(x_out + bar_w / 2, top, "y = Σ g·E(x)", ha="center", va="bottom", fontsize=8)
    ax.text(0.0, bottom + 0.3, bi(
        "Red arrows change lanes: those rows leave the GPU. Grey arrows stay on it. "
        "Solid: dispatch. Dashed: combine.",
        "红色箭头跨越 rank：这些行要离开本 GPU；灰色箭头留在本 GPU 上。实线是分发，虚线是合并。", sep="\n"),
        ha="left", va="top", fontsize=8, color="#444444")
    ax.set_xlim(-0.1, 14.7)
    ax.set_ylim(bottom + 0.9, top - 0.55)
    ax.set_axis_off()
    plots.title(ax, f"An MoE layer on {ep} ranks: route, dispatch to the experts' ranks, compute, combine",
                f"{ep} 个 rank 上的 MoE 层：路由、分发到专家所在的 rank、计算、合并")
    return ax


def loads(routings: dict, capacity: int | None = None, ax=None):
    """Bars of the assignments per expert for each ``{label: Routing}`` side by side, kept part dark, dropped
    part light, and the capacity as a dashed line."""
    if ax is None:
        _, ax = plots.new_figure(9, 3.0)
    n = len(routings)
    width = 0.8 / n
    colors = [plots.COLORS["compute"], plots.COLORS["comm"], plots.COLORS["backward"], plots.COLORS["logits"]]
    for i, (name, r) in enumerate(routings.items()):
        x = np.arange(r.num_experts) + (i - (n - 1) / 2) * width
        ax.bar(x, r.load, width, color=colors[i % len(colors)], alpha=0.3)
        ax.bar(x, r.kept_load, width, color=colors[i % len(colors)], label=name)
    if capacity is not None:
        ax.axhline(capacity, color=plots.COLORS["activations"], ls="--", lw=1, label=bi("capacity", "容量"))
    ax.set_xlabel(bi("expert", "专家"))
    ax.set_ylabel(bi("assignments (light: dropped)", "分配次数（浅色：被丢弃）"))
    ax.legend(fontsize=8)
    plots.title(ax, "Load per expert", "每个专家的负载")
    return ax


def balance(histories: dict, ax=None):
    """The busiest expert's load / the mean over training steps, one line per ``{label: BalanceHistory}``."""
    if ax is None:
        _, ax = plots.new_figure(8, 3.0)
    for name, h in histories.items():
        ax.plot(np.arange(len(h.max_over_mean)), h.max_over_mean, label=name)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xlabel(bi("training step", "训练步"))
    ax.set_ylabel(bi("max load / mean", "最大负载 / 平均"))
    ax.legend(fontsize=8)
    plots.title(ax, "Auxiliary-loss-free balancing: the selection bias evens out the load",
                "无辅助损失的负载均衡：选择偏置让负载趋于均匀")
    return ax

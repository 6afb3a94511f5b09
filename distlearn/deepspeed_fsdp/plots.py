"""Figure of chapter 09: three ways to shard a model over 2 nodes of 2 GPUs, and on which ranks each collective runs.

The rows are ZeRO-3 (FSDP's full sharding), ZeRO++ hpZ (FSDP2's integer ``reshard_after_forward``) and HSDP (FSDP1's
``HYBRID_SHARD``, FSDP2 on a 2-D mesh; DeepSpeed's removed MiCS). The collectives drawn for each row are
:data:`PATTERNS`, the same (operation, group size) pairs that ``tests/test_zero_comm.py`` measures on the real
engines with four processes. Every label goes through :mod:`distlearn.core.i18n`, so the figure is drawn in the
reader's language.
"""
from __future__ import annotations

from matplotlib.patches import FancyBboxPatch, Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language
from distlearn.core.guard import read_only

__all__ = ["hierarchy_diagram", "PATTERNS", "SCHEMES", "group_sizes"]

#: scheme -> (what the row is called, what a rank keeps between steps as a fraction of the parameters,
#: whether it also keeps a secondary shard over its node from forward to backward)
SCHEMES = read_only({
    "zero3": (("ZeRO-3 = FSDP full sharding (FULL_SHARD, fully_shard)",
               "ZeRO-3 = FSDP 完全分片（FULL_SHARD、fully_shard）"), "all", False),
    "hpz": (("ZeRO++ hpZ ≈ FSDP2 reshard_after_forward=2",
             "ZeRO++ hpZ ≈ FSDP2 的 reshard_after_forward=2"), "all", True),
    "hsdp": (("HSDP: FSDP1 HYBRID_SHARD, FSDP2 on a 2-D mesh (DeepSpeed's MiCS, removed)",
              "HSDP：FSDP1 的 HYBRID_SHARD、二维网格上的 FSDP2（DeepSpeed 的 MiCS，已移除）"), "node", False),
})

#: scheme -> the collectives of one step: (operation, when, group), group "all" = the 4 ranks, "node" = the 2 ranks
#: of a node, "across" = the 2 ranks at the same place in each node.
PATTERNS = read_only({
    "zero3": [("all_gather", "forward", "all"), ("all_gather", "backward", "all"),
              ("reduce_scatter", "backward", "all")],
    "hpz": [("all_gather", "forward", "all"), ("all_gather", "backward", "node"),
            ("reduce_scatter", "backward", "all")],
    "hsdp": [("all_gather", "forward", "node"), ("all_gather", "backward", "node"),
             ("reduce_scatter", "backward", "node"), ("all_reduce", "backward", "across")],
})

OP_NAMES = read_only({"all_gather": ("all-gather of the parameters", "参数的 AllGather"),
            "reduce_scatter": ("reduce-scatter of the gradients", "梯度的 ReduceScatter"),
            "all_reduce": ("all-reduce of the gradient shards", "梯度分片的 AllReduce")})
WHEN_NAMES = read_only({"forward": ("forward", "前向"), "backward": ("backward", "反向")})
OP_COLORS = read_only({"all_gather": plots.COLORS["comm"], "reduce_scatter": "#C44E52", "all_reduce": "#8172B3"})
NODES, PER_NODE = 2, 2


def group_sizes(scheme: str) -> set[tuple[str, int]]:
    """The (operation, number of ranks in its process group) pairs drawn for a scheme."""
    size = {"all": NODES * PER_NODE, "node": PER_NODE, "across": NODES}
    return {(op, size[group]) for op, _, group in PATTERNS[scheme]}


def _x(rank: int, box_w: float = 1.0, gap: float = 0.2, node_gap: float = 0.7) -> float:
    node, local = divmod(rank, PER_NODE)
    return node * (PER_NODE * (box_w + gap) - gap + node_gap) + local * (box_w + gap)


def _bi(en: str, zh: str) -> str:
    """Both languages on two lines (the labels sit in a narrow column), one language as is."""
    return bi(en, zh, sep="\n")


def _line_label(op: str, when: str) -> str:
    if op == "all_reduce":
        return _bi("across nodes: " + OP_NAMES[op][0], "跨节点：" + OP_NAMES[op][1])
    return _bi(f"{WHEN_NAMES[when][0]}: {OP_NAMES[op][0]}", f"{WHEN_NAMES[when][1]}：{OP_NAMES[op][1]}")


def hierarchy_diagram(ax=None):
    """One row per scheme. Each row: 2 nodes (dashed frames) of 2 ranks (boxes). In each box a bar as long as the
    parameters: the dashed outline is the whole model, the filled part what the rank keeps between steps; hpZ's
    row adds a thinner bar, the secondary shard over the node kept from forward to backward. Under the boxes one line
    per collective, spanning the ranks of its process group. Returns the axes."""
    if ax is None:
        _, ax = plots.new_figure(9.5, 10.5 if get_language() == "both" else 8.2)
    ranks = NODES * PER_NODE
    both = get_language() == "both"
    box_w, box_h, line_h = 1.0, 0.62, (0.45 if both else 0.3)
    right = _x(ranks - 1) + box_w
    y = 0.0
    for scheme, (name, kept, secondary) in SCHEMES.items():
        ax.text(-3.1, y, _bi(*name), ha="left", va="bottom", fontsize=9.5)
        top = y - (0.1 if both else 0.12)
        for node in range(NODES):
            x0 = _x(node * PER_NODE) - 0.1
            x1 = _x(node * PER_NODE + PER_NODE - 1) + box_w + 0.1
            ax.add_patch(FancyBboxPatch((x0, top - box_h - 0.28), x1 - x0, box_h + 0.24, boxstyle="round,pad=0.02",
                                        fill=False, ec="#999999", lw=0.8, ls="--"))
            ax.text((x0 + x1) / 2, top - box_h - 0.36, bi(f"node {node}", f"节点 {node}", sep=" · "), ha="center", va="top",
                    fontsize=7.5, color="#666666")
        for r in range(ranks):
            x0 = _x(r)
            y0 = top - box_h - 0.08
            ax.add_patch(Rectangle((x0, y0), box_w, box_h, fill=False, ec="#555555", lw=1))
            ax.text(x0 + box_w / 2, y0 + box_h - 0.04, f"rank {r}", ha="center", va="top", fontsize=7.5)
            bx, bl = x0 + 0.08, box_w - 0.16
            ax.add_patch(Rectangle((bx, y0 + 0.2), bl, 0.16, fill=False, ec=plots.COLORS["params"], lw=0.8, ls="--"))
            parts = ranks if kept == "all" else PER_NODE
            index = r if kept == "all" else r % PER_NODE
            ax.add_patch(Rectangle((bx + index * bl / parts, y0 + 0.2), bl / parts, 0.16, color=plots.COLORS["params"]))
            if secondary:
                ax.add_patch(Rectangle((bx + (r % PER_NODE) * bl / PER_NODE, y0 + 0.07), bl / PER_NODE, 0.08,
                                       color="#9DB6DB"))
        ly = top - box_h - 0.62
        for op, when, group in PATTERNS[scheme]:
            color = OP_COLORS[op]
            ax.text(-3.1, ly, _line_label(op, when), ha="left", va="center", fontsize=8, color=color)
            if group == "all":
                spans = [(0, ranks - 1)]
            elif group == "node":
                spans = [(n * PER_NODE, n * PER_NODE + PER_NODE - 1) for n in range(NODES)]
            else:
                spans = []
                for local in range(PER_NODE):
                    a, b = _x(local) + box_w / 2, _x(local + PER_NODE) + box_w / 2
                    yy = ly + (local - (PER_NODE - 1) / 2) * 0.1
                    ax.annotate("", xy=(b, yy), xytext=(a, yy),
                                arrowprops=dict(arrowstyle="<->", color=color, lw=1.2, shrinkA=0, shrinkB=0))
            for a, b in spans:
                ax.plot([_x(a) + 0.1, _x(b) + box_w - 0.1], [ly, ly], color=color, lw=2.2, solid_capstyle="butt")
            ly -= line_h
        y = ly - 0.2
    ax.bar(0, 0, color=plots.COLORS["params"],
           label=bi("parameters a rank keeps between steps (dashed: the whole model)",
                    "每个 rank 在两步之间保留的参数（虚线框：整个模型）"))
    ax.bar(0, 0, color="#9DB6DB", label=bi("hpZ: secondary shard over the node, kept from forward to backward",
                                           "hpZ：本节点内的次级分片，从前向保留到反向"))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.0), ncols=1, fontsize=8, frameon=False)
    for t in ax.texts:
        t.set_in_layout(False)       # the axes keep their size; the label column lies inside the x-limits
    ax.set_xlim(-3.2, right + 0.2)
    ax.set_ylim(y + 0.1, 0.45)
    ax.set_axis_off()
    plots.title(ax, "4 ranks on 2 nodes: what each rank keeps, and over which ranks each collective runs",
                "2 个节点上的 4 个 rank：每个 rank 保留什么，每次集合通信在哪些 rank 之间进行")
    return ax

"""Figures of chapter 12: the ranks of a device mesh, node by node, coloured by the group each belongs to along
every mesh dimension, with one rank's groups outlined."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from distlearn.core import plots  # noqa: F401  (registers the course's CJK font)
from distlearn.core.i18n import bi
from distlearn.nd_parallel.simulation import DIMS, coords, group_of, groups
from distlearn.core.guard import read_only

DIM_NAMES = read_only({"tp": ("tensor parallel", "张量并行"), "cp": ("context parallel", "上下文并行"),
             "dp": ("data parallel (FSDP)", "数据并行（FSDP）"), "pp": ("pipeline parallel", "流水线并行")})
MAX_DRAWN = 128   # ranks; larger meshes are described in text only


def mesh_figure(shape: tuple, rank: int, gpus_per_node: int):
    """One panel per mesh dimension of size > 1 (tp, cp, dp, pp order): every rank a square, one row per node
    (``rank // gpus_per_node``), coloured by its group along that dimension; ``rank``'s group outlined in black
    and ``rank`` itself marked. Returns the figure. Shapes with more than :data:`MAX_DRAWN` ranks raise
    ValueError (draw a smaller mesh)."""
    world = int(np.prod(shape))
    if world > MAX_DRAWN:
        raise ValueError(f"{world} ranks: too many to draw (≤ {MAX_DRAWN})")
    dims = [d for d in ("tp", "cp", "dp", "pp") if shape[DIMS.index(d)] > 1] or ["tp"]
    nodes = -(-world // gpus_per_node)
    fig, axes = plt.subplots(1, len(dims), figsize=(min(2.6 * len(dims) + 0.6, 11), 0.9 + 0.42 * nodes),
                             layout="constrained", squeeze=False)
    cmap = plt.get_cmap("tab20")
    for ax, dim in zip(axes[0], dims):
        gid = {r: i for i, g in enumerate(groups(shape, dim)) for r in g}
        mine = set(group_of(rank, shape, dim))
        for r in range(world):
            x, y = r % gpus_per_node, r // gpus_per_node
            ax.add_patch(Rectangle((x, y), 0.92, 0.92, facecolor=cmap(gid[r] % 20),
                                   edgecolor="black" if r in mine else "white", lw=2.2 if r in mine else 0.5))
            if world <= 64:
                ax.text(x + 0.46, y + 0.46, str(r) if r != rank else f"[{r}]", ha="center", va="center",
                        fontsize=7)   # the course's CJK font has no bold weight: brackets mark the rank
        ax.set_xlim(-0.1, gpus_per_node)
        ax.set_ylim(nodes, -0.1)
        ax.set_xticks([])
        ax.set_yticks(np.arange(nodes) + 0.46, [bi(f"node {n}", f"节点 {n}") for n in range(nodes)], fontsize=7)
        ax.set_aspect("equal")
        en, zh = DIM_NAMES[dim]
        ax.set_title(bi(f"{dim}: {en}", f"{dim}：{zh}", sep="\n"), fontsize=9)
    c = coords(rank, shape)
    fig.suptitle(bi(f"rank {rank} = (pp {c['pp']}, dp {c['dp']}, cp {c['cp']}, tp {c['tp']}); its groups outlined",
                    f"rank {rank} = (pp {c['pp']}，dp {c['dp']}，cp {c['cp']}，tp {c['tp']})；黑框为它所在的组"),
                 fontsize=9)
    return fig


LINK_STYLE = read_only({   # dim → colour, arc of the link (0 = straight), arrow head
    "tp": ("#2ca02c", 0.0, "-"), "cp": ("#9467bd", 0.3, "-"), "dp": ("#1f77b4", 0.45, "-"),
    "pp": ("#ff7f0e", 0.0, "-|>")})
LINK_LABEL = read_only({
    "tp": ("tp group: talks in every layer, inside a node", "tp 组：每一层都通信，留在节点内"),
    "cp": ("cp group: gathers K and V in every layer", "cp 组：每一层收集 K 和 V"),
    "dp": ("dp group: FSDP gathers weights, reduces gradients", "dp 组：FSDP 收集权重、规约梯度"),
    "pp": ("pp group: activations to the next stage", "pp 组：把激活值传给下一个阶段")})
MAX_PICTURED = 32   # ranks; the picture names every rank


def mesh_picture(shape: tuple = (2, 2, 1, 2), gpus_per_node: int = 4, ax=None):
    """A device mesh in one picture. Every rank is a box (its number and its coordinates), one row of boxes per node
    (``rank // gpus_per_node``), filled by pipeline stage. The ranks of each group are linked: tp in green, cp in
    purple, dp in blue, pp in orange with arrows from one stage to the next. Each link is an annotation whose gid is
    ``link-<dim>``, so a group of n ranks draws n − 1 links. Every label goes through :func:`bi`. Returns the axes;
    more than :data:`MAX_PICTURED` ranks raise ValueError."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import FancyBboxPatch

    world = int(np.prod(shape))
    if world > MAX_PICTURED:
        raise ValueError(bi(f"{world} ranks: too many to picture (≤ {MAX_PICTURED})",
                            f"{world} 个 rank：太多，画不下（至多 {MAX_PICTURED} 个）"))
    nodes = -(-world // gpus_per_node)
    w, h, dx, dy = 1.25, 0.8, 1.75, 2.1          # box size and pitch
    if ax is None:
        _, ax = plt.subplots(figsize=(1.2 + 1.45 * gpus_per_node, 1.4 + 1.55 * nodes), layout="constrained")
    stage_colour = plt.get_cmap("Pastel1")
    centre = {}
    for r in range(world):
        c = coords(r, shape)
        x, y = (r % gpus_per_node) * dx, (r // gpus_per_node) * dy
        centre[r] = (x + w / 2, y + h / 2)
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.04", facecolor=stage_colour(c["pp"] % 9),
                                    edgecolor="#444444", lw=1.0, gid="rank"))
        where = " ".join(f"{d}{c[d]}" for d in DIMS if shape[DIMS.index(d)] > 1)
        ax.text(x + w / 2, y + 0.28, f"rank {r}", ha="center", va="center", fontsize=9)
        ax.text(x + w / 2, y + 0.58, where, ha="center", va="center", fontsize=7, color="#333333")
    for n in range(nodes):
        y = n * dy
        ax.add_patch(FancyBboxPatch((-0.25, y - 0.35), (gpus_per_node - 1) * dx + w + 0.5, h + 0.7,
                                    boxstyle="round,pad=0.02", facecolor="none", edgecolor="#999999", ls="--",
                                    lw=1.0))
        ax.text(-0.45, y + h / 2, bi(f"node {n}", f"节点 {n}"), ha="right", va="center", fontsize=9)
    handles = []
    for dim in ("tp", "cp", "dp", "pp"):
        if shape[DIMS.index(dim)] == 1:
            continue
        colour, rad, head = LINK_STYLE[dim]
        for g in groups(shape, dim):
            for a, b in zip(g, g[1:]):
                (xa, ya), (xb, yb) = centre[a], centre[b]
                same_row = abs(ya - yb) < 1e-9
                start = (xa + (w / 2 if xb > xa else -w / 2), ya) if same_row and not rad else (xa, ya + h / 2)
                end = (xb - (w / 2 if xb > xa else -w / 2), yb) if same_row and not rad else (xb, yb - h / 2)
                if same_row and rad:   # arcs bulge away from the pp arrows: up, but down on the last of several nodes
                    down = nodes > 1 and ya > (nodes - 1) * dy
                    off, rad_dir = (h / 2, abs(rad)) if down else (-h / 2, -abs(rad))
                    start, end = (xa, ya + off), (xb, yb + off)
                ax.annotate("", xy=end, xytext=start, gid=f"link-{dim}",
                            arrowprops=dict(arrowstyle=head, color=colour, lw=2.2, shrinkA=0, shrinkB=0,
                                            connectionstyle=f"arc3,rad={rad_dir if same_row and rad else 0.0}"))
        handles.append(Line2D([], [], color=colour, lw=2.2, label=bi(*LINK_LABEL[dim])))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=1, fontsize=8, frameon=False)
    ax.set_xlim(-1.6, (gpus_per_node - 1) * dx + w + 0.4)
    ax.set_ylim((nodes - 1) * dy + h + (0.9 if nodes > 1 else 0.6), -0.9)
    ax.set_aspect("equal")
    ax.axis("off")
    desc = " × ".join(f"{d} {shape[DIMS.index(d)]}" for d in DIMS if shape[DIMS.index(d)] > 1) or "1 rank"
    ax.set_title(bi(f"{desc} on {nodes} node(s) of {gpus_per_node} GPUs: tp varies fastest",
                    f"{nodes} 个节点、每节点 {gpus_per_node} 块 GPU 上的 {desc}：tp 变化最快"), fontsize=10)
    return ax

"""Figures of chapter 12: the ranks of a device mesh, node by node, coloured by the group each belongs to along
every mesh dimension, with one rank's groups outlined."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Rectangle

from distlearn.core import plots  # noqa: F401  (registers the course's CJK font)
from distlearn.core.i18n import bi
from distlearn.nd_parallel.simulation import DIMS, coords, group_of, groups

DIM_NAMES = {"tp": ("tensor parallel", "张量并行"), "cp": ("context parallel", "上下文并行"),
             "dp": ("data parallel (FSDP)", "数据并行（FSDP）"), "pp": ("pipeline parallel", "流水线并行")}
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

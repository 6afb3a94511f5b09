"""Figures for chapter 08: the seed's memory grid beside the real one, stacked by part."""
from __future__ import annotations

import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.memory.formulas import GB


def seed_grid_figure(rows: list[dict], gpu_gb: float = 80.0):
    """Bars for :func:`distlearn.seeds.activations.seed_grid` rows: the seed's single number (hatched) and the real
    per-GPU bytes stacked as model states, activations and the gathered block, with the GPU size as a line.
    Returns ``(fig, ax)``; values in GB (1e9 bytes) like the seed."""
    fig, ax = plots.new_figure(10, 4)
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["seed_gb"] for r in rows], 0.38, color="#BBBBBB", hatch="//",
           label=bi("seed estimate_memory", "原始示例代码的 estimate_memory"))
    bottom = np.zeros(len(rows))
    for key, color, en, zh in [("states", plots.COLORS["optimizer"], "model states", "模型状态"),
                               ("activations", plots.COLORS["activations"], "activations", "激活值"),
                               ("gathered", plots.COLORS["params"], "gathered block (ZeRO-3)", "AllGather 的块（ZeRO-3）")]:
        if key == "states":
            vals = np.array([(r["real"]["params"] + r["real"]["grads"] + r["real"]["optimizer"]) / GB for r in rows])
        else:
            vals = np.array([r["real"][key] / GB for r in rows])
        ax.bar(x + 0.2, vals, 0.38, bottom=bottom, color=color, label=bi(en, zh))
        bottom += vals
    ax.axhline(gpu_gb, color="black", ls="--", label=bi(f"{gpu_gb:.0f} GB GPU", f"{gpu_gb:.0f} GB GPU"))
    ax.set_xticks(x, [f"bf16={int(r['bf16'])}\noffload={int(r['offload'])}\nckpt={int(r['ckpt'])}" for r in rows],
                  fontsize=8)
    ax.set_ylabel(bi("GB per GPU", "每块 GPU 的 GB"))
    ax.legend(fontsize=8, loc="upper right")
    plots.title(ax, "Seed grid vs real formulas (Llama-2-70B, ZeRO-3 over 8 GPUs, s = 2048, b = 1)",
                "原始示例代码的表格与真实公式（Llama-2-70B，8 块 GPU 上 ZeRO-3，s = 2048，b = 1）")
    return fig, ax

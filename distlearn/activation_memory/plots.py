"""Figures for chapter 08: what each layer keeps for backward under each recomputation mode (the chapter's one
picture), and the seed's memory grid beside the real one, stacked by part.

Both are drawn from the package's own numbers: the bytes per layer come from
:func:`distlearn.memory.formulas.activation_bytes_per_layer`, the grid from :func:`distlearn.seeds.activations.seed_grid`.
Every label goes through :mod:`distlearn.core.i18n`, so the figures are drawn in the reader's language.
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyArrowPatch, Patch, Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language
from distlearn.memory.formulas import GB, activation_bytes_per_layer

__all__ = ["recompute_picture", "RECOMPUTE_ROWS", "seed_grid_figure"]

# The three rows of the picture: mode, English name, Chinese name.
RECOMPUTE_ROWS = (("none", "no recomputation", "不重计算"), ("selective", "selective recomputation", "选择性重计算"),
                  ("full", "full recomputation", "完全重计算"))


def recompute_picture(num_layers: int = 4, *, seq_len: int = 2048, micro_batch_size: int = 1,
                      hidden_size: int = 12288, num_heads: int = 96, ax=None):
    """The chapter's idea in one picture: one row per recomputation mode (none, selective, full), one box per
    layer. In each box a bar as tall as the bytes that layer keeps for backward, split into the linear-layer,
    norm and mask inputs (34·sbh) and the attention scores (5·as²b); what a mode recomputes instead of keeping is a
    dashed outline. Right of each row: the bytes per layer and for ``num_layers`` layers, from
    :func:`activation_bytes_per_layer` (GPT-3 175B's shape by default). Arrows: forward keeps, backward uses and
    frees, last layer first. Returns the axes."""
    if ax is None:
        _, ax = plots.new_figure(9.5, 6.6 if get_language() == "both" else 5.6)
    shape = dict(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size, num_heads=num_heads)
    kept = {mode: activation_bytes_per_layer(**shape, recompute=mode) for mode, _, _ in RECOMPUTE_ROWS}
    scores = kept["none"] - kept["selective"]          # 5·a·s²·b: what selective recomputation drops
    rest = kept["selective"]                           # 34·s·b·h
    box_w, gap, box_h = 1.0, 0.25, 1.0
    scale = 0.8 * box_h / kept["none"]
    colors = {"rest": plots.COLORS["params"], "scores": plots.COLORS["activations"], "input": "#777777"}
    for row, (mode, en, zh) in enumerate(RECOMPUTE_ROWS):
        y0 = (len(RECOMPUTE_ROWS) - 1 - row) * 1.55
        ax.text(-0.15, y0 + box_h / 2, bi(en, zh), ha="right", va="center", fontsize=10)
        for layer in range(num_layers):
            x0 = layer * (box_w + gap)
            ax.add_patch(Rectangle((x0, y0), box_w, box_h, fill=False, ec="#555555", lw=1))
            ax.text(x0 + box_w / 2, y0 + box_h + 0.04, bi(f"layer {layer + 1}", f"第 {layer + 1} 层", sep="\n"),
                    ha="center", va="bottom", fontsize=8)
            bx, bw, by = x0 + 0.3 * box_w, 0.4 * box_w, y0 + 0.1 * box_h
            if mode == "full":
                # at least a visible sliver: 2sbh is under 2 % of the first row's bar
                ax.add_patch(Rectangle((bx, by), bw, max(kept["full"] * scale, 0.03), color=colors["input"]))
                ax.add_patch(Rectangle((bx, by), bw, kept["none"] * scale, fill=False, ec="#555555", ls="--", lw=0.8))
                continue
            ax.add_patch(Rectangle((bx, by), bw, rest * scale, color=colors["rest"]))
            if mode == "none":
                ax.add_patch(Rectangle((bx, by + rest * scale), bw, scores * scale, color=colors["scores"]))
            else:
                ax.add_patch(Rectangle((bx, by + rest * scale), bw, scores * scale, fill=False,
                                       ec=colors["scores"], ls="--", lw=0.8))
        right = num_layers * (box_w + gap) - gap + 0.15
        per, total = kept[mode] / 2**20, num_layers * kept[mode] / 2**30
        ax.text(right, y0 + box_h / 2, bi(f"{per:,.0f} MiB per layer\n{total:.1f} GiB for {num_layers} layers",
                                          f"每层 {per:,.0f} MiB\n{num_layers} 层共 {total:.1f} GiB", sep="\n"),
                ha="left", va="center", fontsize=9)
    both = get_language() == "both"                    # two-line labels need more room
    top = (len(RECOMPUTE_ROWS) - 1) * 1.55 + box_h + (0.62 if both else 0.42)
    width = num_layers * (box_w + gap) - gap
    for y, start, end, en, zh, color in [
            (top, 0.0, width, "forward: each layer keeps its tensors", "前向：每一层存下自己的张量", plots.COLORS["forward"]),
            (-0.32, width, 0.0, "backward, last layer first: use the tensors, then free them (recompute first, if dropped)",
             "反向从最后一层开始：用完这些张量就释放（被丢掉的先重计算）", plots.COLORS["backward"])]:
        ax.add_patch(FancyArrowPatch((start, y), (end, y), arrowstyle="-|>", mutation_scale=14, color=color, lw=1.5))
        ax.text(width / 2, y + (0.08 if y > 0 else -0.08), bi(en, zh, sep="\n"), ha="center", va="bottom" if y > 0 else "top",
                fontsize=8.5, color=color)
    handles = [Patch(color=colors[key], label=bi(en, zh)) for key, en, zh in [
        ("rest", "inputs of linear layers and norms, dropout masks (34 sbh)", "线性层和归一化层的输入、dropout 掩码（34 sbh）"),
        ("scores", "attention scores (5 as²b)", "注意力分数（5 as²b）"),
        ("input", "layer input only (2 sbh)", "只有该层的输入（2 sbh）")]]
    handles.append(Patch(fill=False, ec="#555555", ls="--", label=bi("dropped: recomputed in backward", "丢掉，反向时重计算")))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncols=1 if both else 2, fontsize=8, frameon=False)
    ax.set_xlim(-2.6, width + 2.3)
    ax.set_ylim(-0.95 if both else -0.75, top + (0.75 if both else 0.35))
    ax.set_axis_off()
    plots.title(ax, f"What each layer keeps for backward\n(GPT-3 175B shape: s = {seq_len}, b = {micro_batch_size}, "
                    f"h = {hidden_size}, a = {num_heads}; one GPU)",
                f"每一层为反向传播存下什么\n（GPT-3 175B 的形状：s = {seq_len}，b = {micro_batch_size}，"
                f"h = {hidden_size}，a = {num_heads}；一块 GPU）")
    return ax


def seed_grid_figure(rows: list[dict], gpu_gb: float = 80.0):
    """Bars for :func:`distlearn.seeds.activations.seed_grid` rows: the seed's single number (hatched) and the real
    per-GPU bytes stacked as model states, activations and the gathered block, with the GPU size as a line.
    Returns ``(fig, ax)``; values in GB (1e9 bytes) like the seed."""
    fig, ax = plots.new_figure(10, 4)
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["seed_gb"] for r in rows], 0.38, color="#BBBBBB", hatch="//",
           label=bi("seed estimate_memory", "原始示例代码的 estimate_memory", sep="\n"))
    bottom = np.zeros(len(rows))
    for key, color, en, zh in [("states", plots.COLORS["optimizer"], "model states", "模型状态"),
                               ("activations", plots.COLORS["activations"], "activations", "激活值"),
                               ("gathered", plots.COLORS["params"], "gathered block (ZeRO-3)", "AllGather 收集的层（ZeRO-3）")]:
        if key == "states":
            vals = np.array([(r["real"]["params"] + r["real"]["grads"] + r["real"]["optimizer"]) / GB for r in rows])
        else:
            vals = np.array([r["real"][key] / GB for r in rows])
        ax.bar(x + 0.2, vals, 0.38, bottom=bottom, color=color, label=bi(en, zh, sep="\n"))
        bottom += vals
    ax.axhline(gpu_gb, color="black", ls="--", label=bi(f"{gpu_gb:.0f} GB GPU", f"{gpu_gb:.0f} GB GPU"))
    ax.set_xticks(x, [f"bf16={int(r['bf16'])}\noffload={int(r['offload'])}\nckpt={int(r['ckpt'])}" for r in rows],
                  fontsize=8)
    ax.set_ylabel(bi("GB per GPU", "每块 GPU 的 GB"))
    # the legend beside the axes, never over a tall bar; both languages one line each / 图例放在坐标区右侧，不会压住高的柱子；双语时各占一行
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    plots.title(ax, "Seed grid vs real formulas (Llama-2-70B, ZeRO-3 over 8 GPUs, s = 2048, b = 1)",
                "原始示例代码的表格与真实公式（Llama-2-70B，8 块 GPU 上 ZeRO-3，s = 2048，b = 1）")
    return fig, ax

"""The figures of chapter 15, every text in the course language (:mod:`distlearn.core.i18n`).

- :func:`two_layouts`: the idea in one picture, one model in two layouts: a column-parallel and a row-parallel
  weight as the trainer's FSDP shards hold them (rows over N ranks) and as the generator's TP shards need them,
  each block coloured by the rank that holds it (:mod:`distlearn.post_training.resharding`).
- :func:`kv_per_token`: KV-cache bytes per token of the model presets, multi-head, grouped-query and latent
  attention side by side (:func:`distlearn.post_training.generation.kv_bytes_per_token`; shapes from each model's
  published config, :mod:`distlearn.core.models`).
- :func:`decode_roofline`: arithmetic intensity of a decode step against the batch, for several context lengths,
  with the GPU's ridge point (:func:`~distlearn.post_training.generation.decode_step`; GPU figures from
  :mod:`distlearn.core.hardware`).
- :func:`reshard_bars`: bytes one rank receives to reshard, direct versus all-gather, as measured by the lab.
"""
from __future__ import annotations

from distlearn.core import plots
from distlearn.core.hardware import get_gpu
from distlearn.core.i18n import bi, get_language
from distlearn.core.models import MOE_PRESETS, PRESETS
from distlearn.post_training import generation, resharding

RANK_COLOURS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def _draw_matrix(ax, x0, y0, w: resharding.Weight, owners, size=2.4, label=""):
    """Draw weight ``w`` as a ``size``-wide square at (x0, y0); ``owners``: ``[(rows, cols, colour index, text)]``."""
    from matplotlib.patches import Rectangle

    for rows, cols, colour, name in owners:
        x = x0 + size * cols[0] / w.cols
        y = y0 + size * (1 - rows[1] / w.rows)
        dx, dy = size * (cols[1] - cols[0]) / w.cols, size * (rows[1] - rows[0]) / w.rows
        ax.add_patch(Rectangle((x, y), dx, dy, facecolor=RANK_COLOURS[colour % len(RANK_COLOURS)],
                               edgecolor="white", lw=1.5, gid=f"block{colour}"))
        ax.text(x + dx / 2, y + dy / 2, name, ha="center", va="center", fontsize=7, color="white")
    ax.text(x0 + size / 2, y0 - 0.2, label, ha="center", va="top", fontsize=8)


def two_layouts(world_size: int = 4, tp: int = 2):
    """The same two weights, a column-parallel W_q and a row-parallel W_o, in the trainer's layout (FSDP: rows
    chunk r on rank r) and in the generator's (a TP group of ``tp``, replicated ``world_size / tp`` times). Each
    block is coloured by its TP index and names the ranks that hold it. Returns the figure."""
    from distlearn.core.validate import check_int

    n = check_int("world_size", world_size, minimum=2, maximum=8)
    tp = check_int("tp", tp, minimum=1, maximum=n)
    q, o = resharding.Weight("q", 8, 8, "column"), resharding.Weight("o", 8, 8, "row")
    fig, ax = plots.new_figure(9, 3.9 if get_language() == "both" else 3.6)
    for k, w in enumerate((q, o)):
        x = 3.0 * k
        fsdp = [(resharding.chunk(w.rows, n, r), (0, w.cols), r, f"rank {r}") for r in range(n)]
        _draw_matrix(ax, x, 0, w, fsdp, label=bi(f"W_{w.name}: rows on {n} ranks", f"W_{w.name}：按行分到 {n} 个 rank"))
        tp_blocks = [(*resharding.needed(w, n, tp, j), j, "rank " + ", ".join(str(i) for i in range(j, n, tp)))
                     for j in range(tp)]
        split_en, split_zh = ("rows", "行") if w.kind == "column" else ("columns", "列")
        _draw_matrix(ax, x + 7.0, 0, w, tp_blocks, label=bi(f"W_{w.name}: {split_en} on {tp} TP ranks",
                                                            f"W_{w.name}：按{split_zh}分到 {tp} 个张量并行 rank"))
    ax.annotate("", xy=(6.8, 1.2), xytext=(5.6, 1.2), arrowprops=dict(arrowstyle="-|>", lw=2, color="#444444"))
    ax.text(6.2, 1.5, bi("reshard", "重新分片"), ha="center", fontsize=9)
    ax.text(2.7, 2.7, bi("training (FSDP)", "训练（FSDP）"), ha="center", fontsize=10)
    ax.text(9.7, 2.7, bi(f"generation (TP = {tp})", f"生成（张量并行 = {tp}）"), ha="center", fontsize=10)
    ax.set_xlim(-0.2, 12.6)
    ax.set_ylim(-0.9, 3.1)
    ax.set_aspect("equal")
    ax.axis("off")
    plots.title(ax, "One model, two layouts: FSDP cuts every weight by rows; TP cuts q by rows and o by columns",
                "同一个模型，两种布局：FSDP 把每个权重按行切，张量并行把 q 按行切、把 o 按列切")
    return fig


def kv_per_token(kv_bytes: int = 2):
    """Horizontal bars: KV-cache KiB per token of every model preset (bf16 cache by default), coloured by the kind
    of attention (multi-head, grouped-query, latent). Returns the figure."""
    kinds = {"mha": ("#C44E52", "multi-head attention", "多头注意力"),
             "gqa": ("#4C72B0", "grouped-query attention", "分组查询注意力"),
             "mla": ("#55A868", "multi-head latent attention", "多头潜在注意力")}
    models = [m for m in (*PRESETS.values(), *MOE_PRESETS.values()) if m.name not in ("gpt2-small", "gpt2-xl")]
    fig, ax = plots.new_figure(8, 4.2)
    for y, m in enumerate(models):
        kind = "mla" if m.mla is not None else ("gqa" if m.kv_heads < m.num_heads else "mha")
        kib = generation.kv_bytes_per_token(m, kv_bytes) / 2**10
        ax.barh(y, kib, color=kinds[kind][0], gid=m.name)
        ax.text(kib, y, f" {kib:,.0f}", va="center", fontsize=8)
    ax.set_yticks(range(len(models)), [m.name for m in models], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel(bi("KV cache per token (KiB, bf16, all layers)", "每个词元的 KV 缓存（KiB，bf16，全部层）"))
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(facecolor=c, label=bi(en, zh)) for c, en, zh in kinds.values()], fontsize=8,
              loc="lower right", bbox_to_anchor=(1, 0.08))
    ax.text(0.99, 0.01, bi("Sources: published configs; DeepSeek-V2, Table 1", "出处：公开的模型配置；DeepSeek-V2 表 1"),
            transform=ax.transAxes, ha="right", va="bottom", fontsize=6, color="0.4")
    plots.title(ax, "KV cache per token: GQA and MLA shrink what every token leaves behind",
                "每个词元的 KV 缓存：GQA 和 MLA 让每个词元留下的更少")
    return fig


def decode_roofline(model: str = "llama3-8b", gpu: str = "h100-80gb", contexts=(0, 4096, 32768)):
    """Arithmetic intensity (FLOPs per byte) of one decode step against the batch (log-log) for each context
    length in ``contexts``, the GPU's ridge point (peak / HBM bandwidth) as a dashed line. Returns the figure."""
    import numpy as np

    m = PRESETS.get(model) or MOE_PRESETS[model]
    g = get_gpu(gpu)
    batches = np.unique(np.logspace(0, 12, 49, base=2).astype(int))
    fig, ax = plots.new_figure(8, 4.2)
    for t, colour in zip(contexts, ("#4C72B0", "#DD8452", "#C44E52", "#55A868")):
        ys = [generation.decode_step(m, g, int(b), t).intensity for b in batches]
        ax.plot(batches, ys, color=colour, lw=2, gid=f"context{t}",
                label=bi(f"{t:,} tokens cached per sequence", f"每条序列缓存 {t:,} 个词元"))
    ridge = g.peak_flops / g.hbm_bw
    ax.axhline(ridge, ls="--", color="#444444", lw=1)
    ax.text(batches[0], ridge * 1.1, bi(f"{g.name}: compute-bound above {ridge:.0f} FLOPs/byte",
                                        f"{g.name}：高于 {ridge:.0f} FLOPs/字节 时受算力限制"), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(bi("batch (sequences decoded together)", "批大小（一起解码的序列数）"))
    ax.set_ylabel(bi("FLOPs per byte read", "每读一个字节的 FLOPs"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, 0.9))
    ax.text(0.99, 0.01, bi("Roofline: Austin et al. 2025; Pope et al. 2022", "屋顶线：Austin 等 2025；Pope 等 2022"),
            transform=ax.transAxes, ha="right", va="bottom", fontsize=6, color="0.4")
    plots.title(ax, f"Decode of {m.name}: intensity grows with the batch, until the KV cache dominates",
                f"{m.name} 的解码：算术强度随批大小增长，直到 KV 缓存占了大头")
    return fig


def reshard_bars(results: dict):
    """Bars of the elements one rank received, direct versus all-gather, for each (world_size, tp) in
    ``results`` (→ the list the lab returned, one dict per rank); the most over ranks. Returns the figure."""
    fig, ax = plots.new_figure(8, 3.6)
    keys = list(results)
    width = 0.38
    for k, (n, tp) in enumerate(keys):
        for d, (method, colour, en, zh) in enumerate((("all_gather", "#C44E52", "all-gather, then slice",
                                                        "先全收集再切片"),
                                                       ("direct", "#4C72B0", "direct resharding", "直接重新分片"))):
            top = max(r["received"][method] for r in results[(n, tp)]) * results[(n, tp)][0]["bytes_per_element"]
            ax.bar(k + (d - 0.5) * width, top, width, color=colour, gid=f"{method}-{n}-{tp}",
                   label=bi(en, zh) if k == 0 else None)
            ax.text(k + (d - 0.5) * width, top, f"{top:,}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(keys)), [f"N = {n}, tp = {tp}" for n, tp in keys])
    ax.set_ylabel(bi("bytes received by one rank (most)", "一个 rank 收到的字节数（最多者）"))
    ax.legend(fontsize=8)
    plots.title(ax, "Measured on gloo: what the busiest rank receives, direct resharding against all-gather",
                "在 gloo 上实测：收到最多的 rank 收到的字节，直接重新分片与全收集对比")
    return fig

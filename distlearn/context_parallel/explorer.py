"""Explorer for chapter 10: sequence length, cp degree, layout and variant → attention work per rank, bytes sent
per rank, exposed communication and activation memory per GPU, for one layer of a real model."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from distlearn.context_parallel import simulation as C
from distlearn.core import plots
from distlearn.core.hardware import GPUS
from distlearn.core.i18n import bi, text
from distlearn.core.models import PRESETS
from distlearn.context_parallel.plots import work_bars
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base

MODELS = ("llama3-8b", "llama3-70b", "llama3.1-405b")
L_MODEL = text("cp_widget.model", "model", "模型")
L_SEQ = text("cp_widget.seq", "sequence length s", "序列长度 s")
L_CP = text("cp_widget.cp", "context-parallel degree cp", "上下文并行度 cp")
L_LAYOUT = text("cp_widget.layout", "layout (causal mask)", "切分方式（因果掩码）")
L_VARIANT = text("cp_widget.variant", "variant", "实现方式")
L_TP = text("cp_widget.tp", "tensor-parallel degree tp (+ SP)", "张量并行度 tp（+ 序列并行）")
L_GPU = text("cp_widget.gpu", "GPU type", "GPU 型号")
L_LINK = text("cp_widget.link", "cp ranks connected by", "cp 组内各 rank 之间的连接")
TITLE = text("cp_widget.title", "Context parallelism: one layer's attention per GPU",
             "上下文并行：每块 GPU 上一层的注意力")


@base.within_controls(lambda: controls())
def compute(model: str = "llama3-8b", seq_len: int = 131072, cp: int = 8, layout: str = "zigzag",
            variant: str = "ring", tp: int = 1, gpu: str = "h100-80gb", link: str = "network") -> dict:
    """One layer of ``model`` with ``cp``-way context parallelism (and ``tp``-way tensor + sequence parallelism),
    bf16, micro-batch 1, causal attention, at the GPU's datasheet peak and per-direction bandwidth
    (:mod:`distlearn.core.hardware`). ``link="nvlink"`` needs the tp × cp GPUs in one node (``GPU.gpus_per_node``).

    Returns per-rank ``work`` (pairs per head, per rank), ``forward`` / ``backward``
    (:class:`distlearn.context_parallel.simulation.CPAttentionCost`), ``kept`` (bytes kept for backward per layer per GPU,
    :func:`~distlearn.context_parallel.simulation.cp_layer_activation_bytes`, + Ulysses' extra copies), ``buffers``
    (transient attention buffers), ``max_ulysses_cp`` — or ``{"error": message}`` for an impossible setting.
    """
    cfg = PRESETS[model]
    g = GPUS[gpu]
    bw = g.nvlink_bw if link == "nvlink" else g.network_bw
    a, kv, d = cfg.num_heads, cfg.kv_heads, cfg.head_dim
    lay = "contiguous" if variant == "all-to-all" else layout
    try:
        if link == "nvlink" and tp * cp > g.gpus_per_node:
            raise DistlearnValueError(
                "link", f"tp × cp = {tp * cp} GPUs do not fit in one NVLink node of {g.gpus_per_node} {gpu} GPUs: "
                        "choose the network, or a smaller tp or cp.",
                f"tp × cp = {tp * cp} 块 GPU 放不进一个 {g.gpus_per_node} 块 {gpu} 的 NVLink 节点：请选择网络，"
                "或减小 tp 或 cp。")
        if (seq_len // cp) % (2 if lay == "zigzag" else 1) or seq_len % cp:
            raise DistlearnValueError("seq_len", f"seq_len = {seq_len} is not divisible by cp (2·cp for zig-zag).",
                                      f"seq_len = {seq_len} 不能被 cp 整除（之字形切分需被 2·cp 整除）。")
        kw = dict(seq_len=seq_len, num_heads=a, num_kv_heads=kv, head_dim=d, cp=cp, tp=tp)
        fwd = C.attention_cost(variant, **kw, flops=g.peak_flops, bandwidth=bw, layout=lay)
        bwd = C.attention_cost(variant, **kw, flops=g.peak_flops, bandwidth=bw, layout=lay, pass_="backward")
        kept = C.cp_layer_activation_bytes(cfg, seq_len=seq_len, cp=cp, tp=tp, sequence_parallel=tp > 1)
        if variant == "all-to-all":
            kept += C.ulysses_extra_bytes(**kw)["total"]
        buffers = C.attention_buffer_bytes(variant, **kw)
        no_cp = C.cp_layer_activation_bytes(cfg, seq_len=seq_len, cp=1, tp=tp, sequence_parallel=tp > 1)
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    work = np.asarray(fwd.work, dtype=float)
    return {"model": model, "seq_len": seq_len, "cp": cp, "layout": lay, "variant": variant, "tp": tp,
            "gpu": gpu, "link": link, "bandwidth": bw, "work": work, "imbalance": float(work.max() / work.mean()),
            "forward": fwd, "backward": bwd, "kept": kept, "kept_no_cp": no_cp, "buffers": buffers,
            "num_layers": cfg.num_layers, "max_ulysses_cp": C.max_ulysses_cp(a, kv, tp),
            "tokens_per_rank": seq_len // cp}


def controls() -> dict:
    return {
        "model": base.dropdown(L_MODEL, list(MODELS), "llama3-8b"),
        "seq_len": base.log2_slider(L_SEQ, 131072, 8192, 1048576),
        "cp": base.log2_slider(L_CP, 8, 1, 64),
        "layout": base.dropdown(L_LAYOUT, [(("contiguous", "连续切分"), "contiguous"),
                                           (("zig-zag", "之字形切分"), "zigzag"),
                                           (("striped", "条带切分"), "striped")], "zigzag"),
        "variant": base.dropdown(L_VARIANT, [(("ring (point-to-point)", "环形（点对点通信）"), "ring"),
                                             (("all-gather K/V (Llama 3)", "AllGather K/V（Llama 3）"), "all-gather"),
                                             (("all-to-all (Ulysses)", "AllToAll（Ulysses）"), "all-to-all")],
                                 "ring"),
        "tp": base.log2_slider(L_TP, 1, 1, 8),
        "gpu": base.dropdown(L_GPU, list(GPUS), "h100-80gb"),
        "link": base.dropdown(L_LINK, [(("NVLink (one node)", "NVLink（同一节点）"), "nvlink"),
                                       (("network (across nodes)", "网络（跨节点）"), "network")], "network"),
    }


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    ms, gb, r = 1e-3, 1e9, result
    print(bi(f"{r['model']}, s = {r['seq_len']:,}, cp = {r['cp']} ({r['tokens_per_rank']:,} tokens per rank), "
             f"tp = {r['tp']}, {r['gpu']}, {r['bandwidth'] / 1e9:.0f} GB/s per direction, bf16, causal, one layer",
             f"{r['model']}，s = {r['seq_len']:,}，cp = {r['cp']}（每个 rank {r['tokens_per_rank']:,} 个词元），"
             f"tp = {r['tp']}，{r['gpu']}，单向 {r['bandwidth'] / 1e9:.0f} GB/s，bf16，因果，一层", sep="\n"))
    print(bi(f"work: slowest rank / average = {r['imbalance']:.2f}",
             f"工作量：最慢的 rank / 平均 = {r['imbalance']:.2f}"))
    for name_en, name_zh, c in (("forward", "前向", r["forward"]), ("backward", "反向", r["backward"])):
        nums = (c.compute_s / ms, c.comm_bytes / gb, c.comm_s / ms, c.exposed_s / ms, c.total_s / ms)
        print(bi("{:8s}: attention compute {:8.2f} ms, sent per rank {:6.3f} GB ({:7.2f} ms on the link), "
                 "exposed {:7.2f} ms, total {:8.2f} ms".format(name_en, *nums),
                 "{}：注意力计算 {:8.2f} ms，每个 rank 发送 {:6.3f} GB（链路上 {:7.2f} ms），未被隐藏的通信 "
                 "{:7.2f} ms，合计 {:8.2f} ms".format(name_zh, *nums), sep="\n"))
    kept, layers = r["kept"] / gb, r["num_layers"]
    print(bi(f"activations kept per layer per GPU: {kept:.3f} GB (cp = 1: {r['kept_no_cp'] / gb:.3f} GB); "
             f"× {layers} layers = {kept * layers:.1f} GB; transient attention buffers {r['buffers'] / gb:.3f} GB",
             f"每层每块 GPU 保存的激活值：{kept:.3f} GB（cp = 1 时 {r['kept_no_cp'] / gb:.3f} GB）；× {layers} 层 = "
             f"{kept * layers:.1f} GB；注意力的临时缓冲区 {r['buffers'] / gb:.3f} GB", sep="\n"))
    print(bi(f"Ulysses allows cp ≤ {r['max_ulysses_cp']} here (query heads per tensor-parallel rank)",
             f"此处 Ulysses 允许 cp ≤ {r['max_ulysses_cp']}（每个张量并行 rank 上的查询头数）"))
    if r["cp"] <= 32:
        label = r["layout"] if r["variant"] != "all-to-all" else "all-to-all"
        work_bars({label: r["work"]}, unit=float(np.mean(r["work"])),
                  setup=(f"{r['model']}, s = {r['seq_len']:,}, causal", f"{r['model']}，s = {r['seq_len']:,}，因果"))
        plt.show()


def explorer():
    """The chapter-10 explorer widget."""
    return base.build(controls(), compute, render, title=TITLE)

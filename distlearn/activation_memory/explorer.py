"""Explorer for chapter 08: per-GPU memory (params, grads, optimizer, activations, logits) against the GPU size, and
what recomputation costs in compute.

``compute(**values)`` is pure and fast; it returns ``{"error": msg}`` for settings that cannot run (a ``tp`` that
does not divide the heads, parameter offload without ZeRO-3). Model states: Ψ/tp per GPU (tensor parallelism
splits the matrices; embeddings too, as Megatron does), then ZeRO ``zero_stage`` over ``dp``; mixed precision
(2 + 2 + 12 B/param). Activations: :func:`distlearn.activation_memory.formulas.model_activation_bytes` (one micro-batch, no
pipeline; each layer counted for the model's architecture and the chosen attention kernel). Recompute time: extra FLOPs divided by an assumed achieved throughput :data:`ACHIEVED_FLOPS`.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import plots
from distlearn.activation_memory.formulas import model_activation_bytes, recompute_flops
from distlearn.core.hardware import GPUS
from distlearn.core.i18n import bi, text
from distlearn.memory.formulas import GB, model_state_bytes
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

ACHIEVED_FLOPS = 400e12   # FLOP/s one GPU sustains (≈ 40 % of an H100's 989 TFLOP/s dense bf16): an assumption
REFERENCE_GPU = GPUS["h100-80gb"]   # whose datasheet peak (distlearn/core/hardware.py) the assumption is compared with

L_MODEL = text("act.model", "Model", "模型")
L_SEQ = text("act.seq", "Sequence length", "序列长度")
L_MBS = text("act.mbs", "Micro-batch size", "微批次大小")
L_TP = text("act.tp", "Tensor parallel (tp)", "张量并行 (tp)")
L_SP = text("act.sp", "Sequence parallel", "序列并行")
L_RC = text("act.recompute", "Recomputation", "重计算")
L_ATT = text("act.attention", "Attention kernel", "注意力实现")
L_DP = text("act.dp", "Data parallel (dp)", "数据并行 (dp)")
L_ZERO = text("act.zero", "ZeRO stage", "ZeRO 级别")
L_OFF = text("act.offload", "Offload", "卸载")
L_GPU = text("act.gpu", "GPU memory (GB)", "GPU 显存 (GB)")
PARTS = read_only({
    "params": text("act.params", "parameters", "参数"),
    "grads": text("act.grads", "gradients", "梯度"),
    "optimizer": text("act.optimizer", "optimizer states", "优化器状态"),
    "activations": text("act.activations", "activations", "激活值"),
    "logits": text("act.logits", "logits (fp32)", "logits 输出（fp32）"),
})
OFFLOAD = ("none", "optimizer", "optimizer+params")


def controls() -> dict:
    return {
        "model": base.dropdown(L_MODEL, list(PRESETS), "llama2-7b"),
        "seq_len": base.log2_slider(L_SEQ, 4096, 512, 32768),
        "micro_batch_size": base.log2_slider(L_MBS, 1, 1, 16),
        "tp": base.log2_slider(L_TP, 1, 1, 8),
        "sequence_parallel": base.checkbox(L_SP, False),
        "recompute": base.dropdown(L_RC, [(("none", "无"), "none"), (("selective", "选择性"), "selective"),
                                          (("full", "完全"), "full")], "none"),
        "attention": base.dropdown(L_ATT, [(("as trained (GPT: materialised, Llama: flash)", "按实际训练（GPT：显式分数，Llama：flash）"), "default"),
                                              (("flash (log-sum-exp only)", "flash（只存 log-sum-exp）"), "flash"),
                                              (("materialised s×s scores", "显式存储 s×s 分数"), "materialised")],
                                   "default"),
        "dp": base.log2_slider(L_DP, 8, 1, 64),
        "zero_stage": base.int_slider(L_ZERO, 3, 0, 3, exact=True),
        "offload": base.dropdown(L_OFF, [(("none", "不卸载"), "none"), (("optimizer → CPU", "优化器 → CPU"),
                                                                         "optimizer"),
                                         (("optimizer + params → CPU", "优化器 + 参数 → CPU"), "optimizer+params")],
                                 "none"),
        "gpu_gb": base.selection_slider(L_GPU, [24, 40, 80, 141], 80),
    }


@base.within_controls(lambda: controls())
def compute(model="llama2-7b", seq_len=4096, micro_batch_size=1, tp=1, sequence_parallel=False, recompute="none",
            dp=8, zero_stage=3, offload="none", gpu_gb=80, attention="default") -> dict:
    """Per-GPU bytes by part, the total against ``gpu_gb`` (datasheet GB = 1e9 bytes, the planner's convention)
    and recomputation's extra FLOPs/time. ``attention``: ``"default"`` (the model's own,
    :func:`distlearn.activation_memory.formulas.default_attention`), ``"flash"`` or ``"materialised"``."""
    cfg = PRESETS[model]
    if cfg.arch == "gpt" and seq_len > cfg.max_seq_len:   # learned position embeddings: no longer sequence exists
        return {"error": bi(f"{model} has learned position embeddings for {cfg.max_seq_len} tokens: seq_len = "
                            f"{seq_len} cannot run (choose ≤ {cfg.max_seq_len}, or a Llama model).",
                            f"{model} 的位置嵌入是学出来的，只有 {cfg.max_seq_len} 个位置：seq_len = {seq_len} 无法运行"
                            f"（请选 ≤ {cfg.max_seq_len}，或换一个 Llama 模型）。")}
    try:
        n = cfg.num_parameters()
        if n % tp:
            n = n + tp - n % tp   # pad so that the tensor-parallel share is whole (only affects the last digit)
        states = model_state_bytes(n // tp, dp=dp, zero_stage=zero_stage, offload_optimizer=offload != "none",
                                   offload_params=offload == "optimizer+params")
        act = model_activation_bytes(cfg, seq_len=seq_len, micro_batch_size=micro_batch_size, tp=tp,
                                     sequence_parallel=sequence_parallel, recompute=recompute,
                                     attention=None if attention == "default" else attention)
        flops = recompute_flops(cfg, seq_len=seq_len, micro_batch_size=micro_batch_size, recompute=recompute, tp=tp)
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    parts = {"params": states.params, "grads": states.grads, "optimizer": states.optimizer,
             "activations": act.layers + act.embedding + act.head + act.working, "logits": act.logits}
    total = sum(parts.values())
    return {"model": model, "parts": parts, "total": total, "gpu_bytes": gpu_gb * GB, "fits": total <= gpu_gb * GB,
            "cpu_bytes": states.cpu_total, "extra_flops": flops["extra"], "overhead": flops["overhead"],
            "recompute_seconds": flops["extra"] / ACHIEVED_FLOPS}


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    fig, ax = plots.new_figure(9, 2.8)
    left = 0.0
    for key, value in result["parts"].items():
        ax.barh([0], [value / GB], left=left, color=plots.COLORS[key], label=PARTS[key].render())
        left += value / GB
    ax.axvline(result["gpu_bytes"] / GB, color="black", ls="--", label=bi("GPU size", "GPU 容量"))
    # the total at the bar's end: a small model stays readable next to the GPU size / 条形末端标出合计：小模型在 GPU 容量旁也看得清
    ax.annotate(f"{left:,.0f} GB" if left >= 1000 else f"{left:.3g} GB", (left, 0), xytext=(4, 0),
                textcoords="offset points", va="center", fontsize=9)
    # room on the right for that total, so it never runs under the legend / 右侧留出合计的位置，免得它压在图例下面
    ax.set_xlim(0, max(left, result["gpu_bytes"] / GB) * 1.16)
    ax.set_yticks([])
    ax.set_xlabel(bi("GB per GPU (1 GB = 1e9 bytes)", "每块 GPU 的 GB（1 GB = 1e9 字节）"))
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    plots.title(ax, f"{result['model']}: {result['total'] / GB:.1f} GB per GPU",
                f"{result['model']}：每块 GPU {result['total'] / GB:.1f} GB")
    plt.show()
    fits_en, fits_zh = ("fits", "放得下") if result["fits"] else ("does NOT fit", "放不下")
    print(bi(f"Total {result['total'] / GB:.1f} GB of {result['gpu_bytes'] / GB:.0f} GB: {fits_en}; "
             f"host memory for offload {result['cpu_bytes'] / GB:.1f} GB.",
             f"合计 {result['total'] / GB:.1f} GB / {result['gpu_bytes'] / GB:.0f} GB：{fits_zh}；"
             f"卸载到主机内存 {result['cpu_bytes'] / GB:.1f} GB。", sep="\n"))
    print(bi(f"Recomputation adds {result['overhead']:.1%} FLOPs per step "
             f"(≈ {result['recompute_seconds'] * 1e3:.0f} ms per micro-batch at {ACHIEVED_FLOPS / 1e12:.0f} TFLOP/s).",
             f"重计算使每步 FLOPs 增加 {result['overhead']:.1%}"
             f"（按 {ACHIEVED_FLOPS / 1e12:.0f} TFLOP/s 计，每个微批次约 {result['recompute_seconds'] * 1e3:.0f} ms）。",
             sep="\n"))
    print(throughput_note())


def throughput_note() -> str:
    """Where the explorer's achieved FLOP/s comes from: an assumption, as a share of the H100's datasheet peak."""
    peak = REFERENCE_GPU.peak_flops
    return bi(f"{ACHIEVED_FLOPS / 1e12:.0f} TFLOP/s is an assumed achieved throughput: ≈ {ACHIEVED_FLOPS / peak:.0%} "
              f"of an H100's {peak / 1e12:.0f} TFLOP/s dense bf16 peak (distlearn/core/hardware.py).",
              f"{ACHIEVED_FLOPS / 1e12:.0f} TFLOP/s 是假设的实际吞吐：约为 H100 稠密 bf16 峰值 {peak / 1e12:.0f} TFLOP/s"
              f"（distlearn/core/hardware.py）的 {ACHIEVED_FLOPS / peak:.0%}。", sep="\n")


def active(values: dict) -> dict:
    """Sequence parallelism splits across tensor-parallel ranks: it matters only for tp > 1."""
    return {"sequence_parallel": values["tp"] > 1}


def explorer():
    return base.build(controls(), compute, render, title=bi("Activation memory explorer", "激活显存探索器"),
                      active=active)

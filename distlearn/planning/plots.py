"""Plot of the rooflines of parallelism (chapter 14): each kind's threshold per GPU preset, and where two published
runs stand (compute in :mod:`distlearn.planning.rooflines`)."""
from __future__ import annotations

import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language
from distlearn.planning import kernels, measured as H, rooflines as R
from distlearn.planning.calibration import TOLERANCE, WIDE, validation_report
from distlearn.planning.evaluation import evaluate
from distlearn.planning.step_time import TIME_PARTS
from distlearn.core.guard import read_only

KIND_LABELS = read_only({"dp": ("DP", "数据并行"), "fsdp": ("FSDP", "FSDP"), "tp": ("TP", "张量并行"), "cp": ("CP", "上下文并行"),
               "ep": ("EP", "专家并行")})


def plot_rooflines(points: dict[str, tuple[float, str]], gpus=("a100-80gb", "h100-80gb"), model=None):
    """Bars: the threshold of each kind of parallelism (log scale, its own unit) per GPU; ``points``: {kind: (value,
    label)} of a setting, drawn as markers (above the bar: hidden). Returns the figure."""
    fig, ax = plots.new_figure(9, 3.6)
    kinds = list(R.KINDS)
    x = np.arange(len(kinds))
    width = 0.8 / len(gpus)
    for i, g in enumerate(gpus):
        values = [R.roofline(k, g, model=model).threshold for k in kinds]
        ax.bar(x + (i - (len(gpus) - 1) / 2) * width, values, width, label=g, alpha=0.7)
    for k, (value, label) in points.items():
        ax.plot(kinds.index(k), value, "k*", ms=12)
        ax.annotate(label, (kinds.index(k), value), textcoords="offset points", xytext=(6, 4), fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(x, [bi(*KIND_LABELS[k]) if KIND_LABELS[k][0] != KIND_LABELS[k][1] else KIND_LABELS[k][0]
                      for k in kinds])
    ax.set_ylabel(bi("threshold", "阈值"))
    ax.legend(fontsize=8)
    plots.title(ax, "Rooflines of parallelism: communication hidden above the bar (C = 55 % of peak)",
                "各种并行的屋顶线：高于柱子时通信可被隐藏（C = 峰值的 55 %）")
    return fig


STAGE_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
MEMORY_PARTS = read_only({"params": ("weights", "权重"), "grads": ("gradients", "梯度"), "optimizer": ("optimizer states", "优化器状态"),
                "activations": ("activations", "激活值"), "logits": ("logits", "logits（输出层）"),
                "zero3_buffer": ("ZeRO-3 buffer", "ZeRO-3 缓冲区"), "reserve": ("reserve", "预留")})


def plan_diagram(model, plan, *, global_batch: int, seq_len: int, gpu: str = "h100-80gb"):
    """What a plan is, in one picture (chapter 14). Left: the GPUs as boxes, one row per data-parallel replica and
    one block per pipeline stage, each block a tensor-parallel group of ``plan.tp`` GPUs; arrows for the messages
    of each kind (TP inside a block, PP between stages, DP between replicas). Middle: the memory the busiest GPU
    holds, stacked against the capacity. Right: the step time by part. Numbers from
    :func:`distlearn.planning.evaluate`; every label in the course language. Returns the figure."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    est = evaluate(model, plan, global_batch=global_batch, seq_len=seq_len, gpu=gpu)
    dp, tp, pp = plan.dp, plan.tp, plan.pp
    both = get_language() == "both"
    fig, axes = plots.plt.subplots(1, 3, figsize=(14 if both else 11, 0.55 * dp + (3.6 if both else 2.9)),
                                   layout="constrained",
                                   gridspec_kw={"width_ratios": [3.2, 1, 1]})
    ax = axes[0]
    cell, gap = 1.0, 1.6                                     # one GPU box, the gap between stages / GPU 框宽、阶段间距
    width = pp * tp * cell + (pp - 1) * gap
    ax.set_xlim(-1.6, width + 0.6)
    ax.set_ylim(-1.2 if both else -0.9, dp * 1.5 - 0.3)
    ax.invert_yaxis()
    ax.axis("off")
    for r in range(dp):
        y = r * 1.5
        ax.text(-0.2, y + 0.45, bi(f"replica {r}", f"副本 {r}"), ha="right", va="center", fontsize=8)
        for s in range(pp):
            x0 = s * (tp * cell + gap)
            ax.add_patch(FancyBboxPatch((x0 - 0.08, y - 0.08), tp * cell + 0.16, 1.06,
                                        boxstyle="round,pad=0.02,rounding_size=0.1", facecolor="none",
                                        edgecolor="#555555", lw=1))
            for t in range(tp):
                ax.add_patch(Rectangle((x0 + t * cell + 0.06, y + 0.06), cell - 0.12, 0.78,
                                       color=STAGE_COLORS[s % len(STAGE_COLORS)], alpha=0.55))
            if s < pp - 1:   # activations to the next stage / 激活值送往下一个阶段
                ax.annotate("", xy=(x0 + tp * cell + gap - 0.12, y + 0.45), xytext=(x0 + tp * cell + 0.12, y + 0.45),
                            arrowprops=dict(arrowstyle="->", color="#333333", lw=1.2))
        if r < dp - 1:       # gradients between replicas / 副本之间同步梯度
            ax.annotate("", xy=(width + 0.3, y + 1.55), xytext=(width + 0.3, y + 0.4),
                        arrowprops=dict(arrowstyle="<->", color="#333333", lw=1.0))
    for s in range(pp):
        x0 = s * (tp * cell + gap)
        ax.text(x0 + tp * cell / 2, -0.35, bi(f"stage {s}: {tp} GPUs (TP)", f"阶段 {s}：{tp} 块 GPU（张量并行）", sep="\n"),
                ha="center", va="bottom", fontsize=8)
    fig.supxlabel(bi("Inside a block: TP all-reduces every layer (NVLink).  →: PP sends activations.  "
                     "↕: DP syncs gradients once a step.",
                     "框内：张量并行每层做 AllReduce（NVLink）。→：流水线传激活值。↕：数据并行每步同步一次梯度。", sep="\n"),
                  fontsize=8)
    plots.title(ax, f"{dp} × {pp} × {tp} = {dp * pp * tp} GPUs: DP × PP × TP",
                f"{dp} × {pp} × {tp} = {dp * pp * tp} 块 GPU：数据并行 × 流水线并行 × 张量并行")

    def stack(ax, parts, names, scale, unit, limit=None, limit_label=None):
        bottom = 0.0
        for i, (key, value) in enumerate((k, v) for k, v in parts.items() if k in names and v > 0):
            ax.bar(0, value / scale, bottom=bottom, width=0.6, color=STAGE_COLORS[i % len(STAGE_COLORS)], alpha=0.75,
                   label=bi(*names[key]))
            bottom += value / scale
        if limit is not None:
            ax.axhline(limit / scale, color="k", ls="--", lw=1)
            ax.text(-0.45, limit / scale, limit_label, va="bottom", ha="left", fontsize=8)
        ax.set_xlim(-0.5, 0.5)
        ax.set_xticks([])
        ax.set_ylabel(unit)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.02), frameon=False)

    stack(axes[1], est.memory, MEMORY_PARTS, 1e9, "GB", est.capacity, bi("capacity", "容量"))
    plots.title(axes[1], "Memory of the busiest GPU", "最吃紧的 GPU 的显存")
    stack(axes[2], est.time, TIME_PARTS, 1.0, bi("seconds", "秒"))
    plots.title(axes[2], "Time of one step", "每步时间")
    return fig


MODEL_COLORS = read_only({"llama3-8b": "#4C72B0", "llama3-70b": "#DD8452", "llama3.1-405b": "#55A868"})
MODEL_LABELS = read_only({"llama3-8b": "Llama 3 8B", "llama3-70b": "Llama 3 70B", "llama3.1-405b": "Llama 3.1 405B"})


def plot_measured_gemms(kinds=("bf16", "fp8_tensorwise")):
    """Measured against planned: TFLOP/s of one layer's four linear GEMMs (tensor parallelism 8) over the tokens m
    per GPU, one panel per kind of :data:`distlearn.planning.measured.GEMM_KINDS`: the stored H200 run (solid, dots)
    and the planner's roofline (dashed) per model, the datasheet peak as a grey line. Data:
    :func:`distlearn.planning.measured.layer_curve`. Returns the figure."""
    from matplotlib.lines import Line2D


    names = {"bf16": ("bf16", "bf16"), "fp8_tensorwise": ("FP8, one scale per tensor", "FP8，每个张量一个缩放因子"),
             "fp8_tensorwise_fast": ("FP8, one scale per tensor, fast accumulation", "FP8，每个张量一个缩放因子，快速累加"),
             "fp8_rowwise_fast": ("FP8, one scale per row", "FP8，每行一个缩放因子"),
             "fp8_blockwise": ("FP8, 1×128 and 128×128 blocks", "FP8，1×128 与 128×128 分块")}
    fig, axes = plots.plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 3.9), layout="constrained",
                                   squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        peak = H.peak(kind) / 1e12
        ax.axhline(peak, color="0.6", lw=1)
        ax.annotate(bi(f"datasheet peak {peak:,.0f}", f"数据手册峰值 {peak:,.0f}"), (256, peak),
                    textcoords="offset points", xytext=(2, -11), fontsize=8, color="0.4")
        for model in H.MODELS:
            curve = H.layer_curve(model, kind)
            if not curve:
                continue
            m = [p.m for p in curve]
            ax.plot(m, [p.measured_tflops for p in curve], "o-", color=MODEL_COLORS[model], label=MODEL_LABELS[model])
            ax.plot(m, [p.predicted_tflops for p in curve], "--", color=MODEL_COLORS[model], lw=1)
        ax.set_xscale("log", base=2)
        ticks = [p.m for p in H.layer_curve(H.MODELS[0], kind)] or [256, 16384]
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks], fontsize=8)
        ax.minorticks_off()
        ax.set_ylim(0, peak * 1.08)
        ax.set_xlabel(bi("tokens per GPU (m)", "每块 GPU 的词元数 (m)"))
        ax.set_ylabel("TFLOP/s")
        en, zh = names[kind]
        if en == zh:
            ax.set_title(en)
        else:
            plots.title(ax, en, zh)
        ax.grid(alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    handles += [Line2D([], [], color="k", marker="o"), Line2D([], [], color="k", ls="--", lw=1)]
    labels += [bi("measured (H200)", "实测（H200）"), bi("planner", "规划器")]
    axes[0][0].legend(handles, labels, fontsize=7, loc="lower right")
    return fig


def plot_validation():
    """Calibration apart from validation, in one picture: predicted / published of every evaluated published run
    (:func:`distlearn.planning.calibration.validation_report`), one row per run, in three groups from the top: the
    calibration runs that fix END_TO_END (black squares), the out-of-sample runs that are scored (blue dots; orange
    when outside ±10 %, each with its stated reason in ``KNOWN_MISSES``) and the runs the planner cannot express
    (grey crosses, not scored). Shaded bands at ±10 % and ±20 %; the sources, per run, are
    :func:`distlearn.planning.published.run_source`, named under the figure. Returns the figure."""

    report = validation_report()
    groups = ((bi(f"calibration (fits END_TO_END = {kernels.END_TO_END:.2f})",
                  f"校准（确定 END_TO_END = {kernels.END_TO_END:.2f}）"), report.calibration, "s", "k"),
              (bi("out of sample, scored", "样本外，计分"), report.ratios, "o", "tab:blue"),
              (bi("not modelled, not scored", "无法建模，不计分"),
               {n: v[0] for n, v in report.excluded.items()}, "x", "0.45"))
    rows = sum(len(g[1]) for g in groups) + 2 * (len(groups) - 1)
    height = 0.16 * rows + 2.2
    fig, ax = plots.plt.subplots(figsize=(7.4, height))
    fig.subplots_adjust(left=0.3, right=0.97, top=1 - 0.75 / height, bottom=1.25 / height)
    ax.axvspan(1 - WIDE, 1 + WIDE, color="0.93", zorder=0)
    ax.axvspan(1 - TOLERANCE, 1 + TOLERANCE, color="0.84", zorder=0)
    ax.axvline(1, color="0.3", lw=0.8)
    y, ticks, labels = 0, [], []
    for title, ratios, marker, color in groups:
        ax.text(0.52, y - 1.1, title, fontsize=8, ha="left", va="center")
        for name, ratio in ratios.items():
            miss = marker == "o" and abs(ratio - 1) > TOLERANCE
            ax.plot(min(ratio, 1.7), y, marker, color="tab:orange" if miss else color, ms=5)
            ticks.append(y)
            labels.append(name)
            y += 1
        y += 2
    ax.set_yticks(ticks, labels, fontsize=6.5)
    ax.set_ylim(y - 1.5, -2)
    ax.set_xlim(0.5, 1.7)
    ax.set_xlabel(bi("predicted / published", "预测值 / 公布值"))
    for band in (TOLERANCE, WIDE):
        ax.text(1 + band, y - 1.7, f"+{band:.0%}", fontsize=7, ha="right", va="bottom", color="0.3")
        ax.text(1 - band, y - 1.7, f"−{band:.0%}", fontsize=7, ha="left", va="bottom", color="0.3")
    ax.grid(axis="x", alpha=0.3)
    plots.title(ax, "The planner against published runs", "规划器与已发表的训练")
    fig.text(0.01, 0.01, bi("Sources: Narayanan et al. 2021, Table 1; Megatron-LM README; BLOOM; Llama 3, Table 4;\n"
                            "MegaScale, Table 2; Megatron-Core README; Nemotron-4; torchtitan; DeepSeek-V3; MT-NLG §2.4",
                            "出处：Narayanan 等 2021 表 1；Megatron-LM README；BLOOM；Llama 3 表 4；\n"
                            "MegaScale 表 2；Megatron-Core README；Nemotron-4；torchtitan；DeepSeek-V3；MT-NLG §2.4",
                            sep="\n"), fontsize=6.5, color="0.35", va="bottom")
    return fig

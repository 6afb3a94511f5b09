"""Published training runs the planner is checked against, each on its source's own layout, with the source of
every figure (the data and every source: :mod:`distlearn.planning.published_runs`; calibration against validation:
:mod:`distlearn.planning.calibration`; chapter 14 shows the table).

What is published and what is our reading is kept apart: ``source`` names where the layout and the throughput
come from, ``reading`` says what the source does not give and we chose (micro-batch size, interleaving, ...);
``source_zh`` and ``reading_zh`` say the same in Chinese (:func:`run_source`, :func:`run_reading`).

Notes on single rows, kept here because chapter 14 reads them:

- Llama 3 405B (Table 4, §3.3.2): FSDP sharding the optimizer state and gradients without resharding the weights
  after forward is our ``zero_stage=2``; FP32 gradient accumulation and FP32 reduce-scatter (§3.3.2) is
  ``precision="mixed-fp32-grads"`` (4-byte gradients in the reduce-scatter). Compared as MFU (model FLOPs without
  recomputation / (time × GPUs × 989 TFLOP/s)). The paper does not say how it counts the attention FLOPs: at 8K
  tokens attention is 8 % of the FLOPs (non-causal count), at 128K 57 %, so the CP 16 row depends on the
  convention. All three rows of Table 4 (one table, one convention) time the causal kernel (FlashAttention skips
  the masked blocks) and count the FLOPs the same way (``count="model-causal"``), a named reading; the CP 16 row
  with a causal kernel beside a non-causal count would read 1.36 (tests/test_published_runs.py). The pipeline
  warm-up depth N = p is Megatron's; §3.3.2 makes N tunable ("between DFS and BFS"): a reading, named in the row. The paper
  says pre-training at 8K ran "without activation checkpointing" (§3.3.2); with every tensor stored the layout
  fits the course's 80 GB and reserve only with no allowance for fragmentation (16K GPUs, fused SwiGLU) or not at
  all (8K), see :func:`memory_readings` and chapter 14, which says why the reading differs from the sentence.
- Megatron-Turing NLG 530B (Smith et al. 2022 §2.4): the iteration times (60.1 / 50.2 / 44.4 s) are the figure
  compared; the printed 126 / 121 / 113 TFLOP/s are eq. 3 of them. The model is Narayanan et al.'s 529.6B row,
  run with DeepSpeed's pipeline engine (1F1B, no interleaving) at batch 1920; all three rows miss by 20–25 %
  (too fast), by as much as the published runs are slower per micro-batch than Megatron-LM's own run of the same
  model (:data:`~distlearn.planning.calibration.KNOWN_MISSES`).
- DeepSeek-V3: 1,543 tokens/s per GPU = 10^12 / (180,000 × 3600 s), a whole-run average (§1, Table 1; the batch
  ramp of §4.2 included). DualPipe is not a plan schedule, so the row is shown but not scored;
  :func:`~distlearn.planning.calibration.deepseek_steps` explains its ratio step by step.

The ZeRO paper's Table 2 (model-state limits) is reproduced by
:func:`~distlearn.planning.memory.zero_max_params`.
"""
from __future__ import annotations

import textwrap
from dataclasses import replace

from distlearn.core.hardware import Cluster, make_cluster
from distlearn.core.i18n import bi, get_language
from distlearn.core.validate import check_choice, checks, mapping
from distlearn.planning.calibration import (CALIBRATION_RUNS, KNOWN_MISSES, TOLERANCE, WIDE, compare_run, run_options,
                                            median_error, run_model,
                                            validation_report)
from distlearn.planning.command_line import display_width
from distlearn.planning import kernels
from distlearn.planning.memory import plan_memory, stage_peak_layers
from distlearn.planning.published_runs import (BLOOM_176B, GPT3_175B_MEGATRON, GPT_1_7B_MEGATRON, GPT_146B_MEGATRON,
                                               GPT_18B_MEGATRON, GPT_1T_MEGATRON, H800, JEAN_ZAY_A100,
                                               LLAMA3_405B_STAGES, PUBLISHED_RUNS, UNEVALUATED_RUNS)
from distlearn.planning.setting import make_setting

__all__ = ["BLOOM_176B", "GPT3_175B_MEGATRON", "GPT_1_7B_MEGATRON", "GPT_146B_MEGATRON", "GPT_18B_MEGATRON",
           "GPT_1T_MEGATRON", "H800", "JEAN_ZAY_A100", "LLAMA3_405B_STAGES", "PUBLISHED_RUNS", "UNEVALUATED_RUNS",
           "KNOWN_MISSES", "TOLERANCE", "CALIBRATION_RUNS", "run_cluster", "compare_published", "run_source",
           "run_reading", "published_table", "LLAMA3_RUNS", "MEMORY_READINGS", "memory_readings"]


@checks(run=mapping(("gpu", "num_gpus"), numbers=False))
def run_cluster(run) -> Cluster:
    """The cluster a published run used: ``run["num_gpus"]`` GPUs of ``run["gpu"]`` (a preset name or a :class:`GPU`)."""
    return make_cluster(run["gpu"], run["num_gpus"])


def compare_published(name: str) -> dict:
    """The planner's estimate of the published run ``name``'s own plan beside its published throughput:
    :func:`~distlearn.planning.calibration.compare_run` of ``PUBLISHED_RUNS[name]`` (its keys: ``estimate``,
    ``fits``, ``published_flops``, ``predicted_flops``, ``ratio``, ``published_tokens_per_s``,
    ``predicted_tokens_per_s``, ``source``, ``reading``, ``source_zh``, ``reading_zh``, ``count``,
    ``not_modelled``, ``not_modelled_zh``, ``tolerance``, ``within``). Raises DistlearnValueError for an unknown
    name."""
    return compare_run(PUBLISHED_RUNS[check_choice("name", name, tuple(PUBLISHED_RUNS))])


def run_source(name: str) -> str:
    """Where run ``name``'s layout and throughput come from, in the current language (:func:`distlearn.core.i18n.bi`).
    Raises DistlearnValueError for an unknown name."""
    run = PUBLISHED_RUNS[check_choice("name", name, tuple(PUBLISHED_RUNS))]
    return bi(run["source"], run["source_zh"])


def run_reading(name: str) -> str:
    """What run ``name``'s source does not give and we chose, in the current language. Raises DistlearnValueError
    for an unknown name."""
    run = PUBLISHED_RUNS[check_choice("name", name, tuple(PUBLISHED_RUNS))]
    return bi(run["reading"], run["reading_zh"])


def published_table() -> str:
    """The published runs in three blocks — calibration (the runs that fix END_TO_END), validation (out of sample,
    scored) and not modelled (shown with the planner's ratio, not scored: the reason is in the row's
    ``not_modelled``) — one line per run: GPUs, layout, published and predicted TFLOP/s per GPU (counted the source's
    way, :func:`compare_published`), their ratio, whether it is within :data:`TOLERANCE`, whether the plan fits.
    Then the error distribution of the validation block (median and worst |ratio − 1|, share within ±10 %, runs
    outside ±20 %, the score per source, and what leaving out the runs not modelled hides: how many of them miss
    ±10 % and the score with them counted) and the published figures with no layout to evaluate (:data:`UNEVALUATED_RUNS`). A header line and block titles in the current language (English above Chinese when both are
    shown), columns right-aligned by display width, at most 100 columns; a published value marked ``*`` was
    published as tokens/s per GPU or seconds per step and is converted (a footnote says so)."""
    widths = (28, 6, 19, 9, 9, 6, 6, 6)

    def row(cells):
        out = []
        for i, (cell, w) in enumerate(zip(cells, widths)):
            pad = " " * max(0, w - display_width(cell))
            out.append(cell + pad if i in (0, 2) else pad + cell)
        return " ".join(out)

    langs = ("en", "zh") if get_language() == "both" else (get_language(),)
    heads = {"en": ["run", "GPUs", "layout", "published", "predicted", "ratio", "±10 %", "fits"],
             "zh": ["运行", "GPU 数", "并行布局", "公布值", "预测值", "比值", "±10%内", "放得下"]}
    lines = [row(heads[lang]) for lang in langs]
    yes, no = bi("yes", "是", sep="/"), bi("no", "否", sep="/")
    report = validation_report()
    blocks = (
        (f"calibration: these {len(CALIBRATION_RUNS)} runs fix END_TO_END = {kernels.END_TO_END:.2f}",
         f"校准：这 {len(CALIBRATION_RUNS)} 次运行确定 END_TO_END = {kernels.END_TO_END:.2f}", list(report.calibration)),
        ("out-of-sample validation: scored", "样本外验证：计分", list(report.ratios)),
        ("not modelled: shown, not scored (reason in the row's not_modelled)",
         "无法建模：只展示，不计分（原因见该行的 not_modelled）", list(report.excluded)))
    for title, title_zh, names in blocks:
        lines.extend(f"-- {t}" for t in bi(title, title_zh, sep="\n").splitlines())
        for name in names:
            run, r = PUBLISHED_RUNS[name], compare_published(name)
            p = run["plan"]
            layout = f"tp{p.tp} cp{p.cp} pp{p.pp} dp{p.dp}" if p.cp > 1 else f"tp{p.tp} pp{p.pp} dp{p.dp}"
            layout += f" ep{p.ep}" if p.ep > 1 else ""
            layout += f" v{p.num_chunks}" if p.num_chunks > 1 and display_width(layout) <= 15 else ""
            derived = "" if "published_flops" in run else "*"
            lines.append(row([name, str(run["num_gpus"]), layout, f"{r['published_flops'] / 1e12:.0f}{derived}",
                              f"{r['predicted_flops'] / 1e12:.0f}", f"{r['ratio']:.2f}",
                              yes if r["within"] else no, yes if r["fits"] else no]))
    wide, wide_zh = ", ".join(report.outside_wide) or "none", ", ".join(report.outside_wide) or "无"
    lines.extend(bi(f"out-of-sample validation: {len(report.ratios)} runs, median |ratio - 1| = "
                    f"{report.median_error:.1%}, worst {report.worst_error:.1%}",
                    f"样本外验证：{len(report.ratios)} 次运行，|比值 - 1| 的中位数 {report.median_error:.1%}，最差 "
                    f"{report.worst_error:.1%}", sep="\n").splitlines())
    # the runs outside ±WIDE, wrapped at 100 columns (names are ASCII: one column a character)
    wide, wide_zh = (textwrap.fill(w, 100, initial_indent="    ", subsequent_indent="    ") for w in (wide, wide_zh))
    lines.extend(bi(f"  {report.share_within:.0%} within ±{TOLERANCE:.0%}, outside ±{WIDE:.0%}:\n{wide}",
                    f"  {report.share_within:.0%} 在 ±{TOLERANCE:.0%} 内，超出 ±{WIDE:.0%}：\n{wide_zh}",
                    sep="\n").splitlines())
    fams = list(report.families.items())
    lines.extend(bi(f"  by source (runs: within ±{TOLERANCE:.0%}, median):",
                    f"  按来源（运行数：±{TOLERANCE:.0%} 内的比例，中位数）：", sep="\n").splitlines())
    for i in range(0, len(fams), 3):  # three families a line (100 columns)
        part = fams[i:i + 3]
        lines.extend(bi("    " + "; ".join(f"{f} {n}: {share:.0%}, {med:.1%}" for f, (n, share, med) in part),
                        "    " + "；".join(f"{f} {n} 次：{share:.0%}，{med:.1%}" for f, (n, share, med) in part),
                        sep="\n").splitlines())
    every = [*report.ratios.values(), *(r for r, _, _ in report.excluded.values())]
    n_all, n_out = len(every), sum(abs(r - 1) > TOLERANCE for r, _, _ in report.excluded.values())
    in_all, med_all = sum(abs(r - 1) <= TOLERANCE for r in every), median_error(every)
    lines.extend(bi(f"  leaving out the runs not modelled flatters the score: {n_out} of {len(report.excluded)} miss "
                    f"±{TOLERANCE:.0%};\n  with them, {in_all} of {n_all} runs are within ±{TOLERANCE:.0%}, median "
                    f"|ratio - 1| = {med_all:.1%}",
                    f"  不计无法建模的运行，分数会显得更好：这 {len(report.excluded)} 次中有 {n_out} 次超出 "
                    f"±{TOLERANCE:.0%}；\n  算上它们，{n_all} 次中有 {in_all} 次在 ±{TOLERANCE:.0%} 内，中位数 {med_all:.1%}",
                    sep="\n").splitlines())
    lines.extend(bi(f"not evaluated (no layout published): {', '.join(UNEVALUATED_RUNS)}",
                    f"未评估（没有公布布局）：{', '.join(UNEVALUATED_RUNS)}", sep="\n").splitlines())
    lines.extend(bi("* published as tokens/s per GPU or seconds per step, converted to FLOP/s with the run's count",
                    "* 公布的是每块 GPU 每秒词元数或每步秒数，按该行的 FLOPs 口径换算为 FLOP/s", sep="\n").splitlines())
    return "\n".join(lines)


# ---------------------------------------------------------------- why Llama 3 405B's layout does not fit (issue 22)
LLAMA3_RUNS = ("llama3-405b-8k-gpus", "llama3-405b-16k-gpus", "llama3-405b-16k-gpus-cp16")
MEMORY_READINGS = ("none", "none-fused-swiglu", "none-fused-swiglu-no-fragmentation", "norm-act")


def memory_readings(name: str) -> dict[str, dict]:
    """Bytes per GPU of a Llama 3 run's own layout under three readings of what the paper leaves open:
    ``"none"`` (every tensor stored, as "without activation checkpointing" reads literally; the eager SwiGLU
    module keeps 4·f values per token), ``"none-fused-swiglu"`` (also every tensor, with Megatron-Core's fused
    SwiGLU keeping 3·f, chapter 08), ``"none-fused-swiglu-no-fragmentation"`` (the same without the allowance for
    the allocator's fragmentation, only the 2 GB reserve) and ``"norm-act"`` (the published table's reading: the
    norms' and the activation's outputs recomputed, not stored). All but the third with the reserve of
    :data:`~distlearn.planning.setting.RESERVE_BYTES` + :data:`~distlearn.planning.setting.FRAGMENTATION` of the
    device. Each value: ``{"memory"`` (the :func:`~distlearn.planning.memory.plan_memory` dict), ``"fits"``,
    ``"layer_bytes"`` (one layer's activations of one micro-batch), ``"peak_layers"`` (the most
    layer-micro-batches alive on the worst stage, :func:`~distlearn.planning.memory.stage_peak_layers`) and
    ``"layer_bytes_to_fit"`` (the per-layer activations at which the worst stage would just fit)``}``.
    Raises DistlearnValueError for a name that is not a Llama 3 run."""
    run = PUBLISHED_RUNS[check_choice("name", name, LLAMA3_RUNS)]
    variants = {"none": ("none", "unfused", {}), "none-fused-swiglu": ("none", "fused", {}),
                "none-fused-swiglu-no-fragmentation": ("none", "fused", dict(fragmentation=0.0)),
                "norm-act": ("norm-act", "unfused", {})}
    out = {}
    for key, (recompute, swiglu, extra) in variants.items():
        p = replace(run["plan"], recompute=recompute)
        peaks = stage_peak_layers(p.pp, p.num_microbatches, p.num_chunks, p.stage_layers)
        st = make_setting(run["model"], run_cluster(run), run["global_batch"], run["seq_len"], run["precision"],
                          swiglu=swiglu, **{**run_options(run), **extra})
        mem = plan_memory(st, p)
        per_layer = st.act(p.micro_batch_size, p.tp, p.sequence_parallel, p.recompute, p.cp)
        other = mem["total"] - mem["activations"]
        cp_kv = mem["activations"] - per_layer * max(peaks)  # the all-gathered K, V of one layer (cp > 1)
        out[key] = {"memory": mem, "fits": mem["total"] <= st.capacity, "layer_bytes": per_layer,
                    "peak_layers": max(peaks), "layer_bytes_to_fit": (st.capacity - other - cp_kv) / max(peaks)}
    return out

"""Explorer for chapter 06: model, data-parallel degree, ZeRO stage and unit size → bytes per GPU over one step.

The bytes per GPU are the sharded model states (:func:`distlearn.memory.formulas.model_state_bytes`, mixed precision
2 + 2 + 12 bytes/param) plus what one step materializes on top, from :func:`distlearn.overlap_prefetch.timeline.simulate`:

- ZeRO-3 / FULL_SHARD: the root unit (embeddings, final norm, LM head) stays unsharded for the step (FSDP1; FSDP2
  with the root's default ``reshard_after_forward``); each block unit
  is all-gathered (bf16, 2 bytes/param) before its forward and again before its backward, and its bf16 gradient
  exists until reduce-scattered;
- ZeRO-2 / SHARD_GRAD_OP: parameters are whole already; each unit's full gradient exists until reduce-scattered;
- ZeRO-0/1: full gradients are part of the model states; nothing transient is modelled.

Units: ``blocks_per_unit`` consecutive transformer blocks form one unit (1 = ``ModuleWrapPolicy({Block})``).
Compute time ∝ parameters (backward 2×), all-gather time = 0.5 × forward time (relative units); the curve shows
one micro-batch.

Bytes each rank sends per optimizer step of ``num_microbatches`` micro-batches: from
:func:`distlearn.zero_fsdp.traffic.step_collectives` for the chosen ``engine`` (the ZeRO design, DeepSpeed 0.19.8, FSDP2),
bf16 (2 bytes per element), ring collectives.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import plots
from distlearn.zero_fsdp.simulation import zero_stage_table
from distlearn.core.i18n import bi, text
from distlearn.memory.formulas import model_state_bytes
from distlearn.core.models import PRESETS, get_preset
from distlearn.overlap_prefetch.timeline import simulate
from distlearn.zero_fsdp.traffic import ENGINES, step_collectives
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

L_MODEL = text("zero.model", "model", "模型")
L_DP = text("zero.dp", "data-parallel degree dp", "数据并行度 dp")
L_STAGE = text("zero.stage", "ZeRO stage", "ZeRO 级别")
L_BPU = text("zero.bpu", "blocks per FSDP unit", "每个 FSDP 单元的层数")
L_PREFETCH = text("zero.prefetch", "prefetch depth", "预取深度")
L_MB = text("zero.microbatches", "micro-batches per step m", "每步微批次数 m")
L_ENGINE = text("zero.engine", "engine", "实现")
ENGINE_LABELS = read_only({"zero": ("ZeRO paper (reduce-scatter)", "ZeRO 论文（ReduceScatter）"),
                 "deepspeed": ("DeepSpeed 0.19.8 defaults", "DeepSpeed 0.19.8 默认配置"),
                 "fsdp2": ("FSDP2 (fully_shard)", "FSDP2（fully_shard）")})
L_TITLE = text("zero.title", "Bytes per GPU over one training step", "一次训练迭代中每块 GPU 的显存")


def block_units(model: str, blocks_per_unit: int) -> tuple[int, list[int]]:
    """(root numel, [numel of each block unit]) when ``blocks_per_unit`` consecutive blocks form a unit; the last
    unit takes the remainder. With 1 it equals :func:`distlearn.zero_fsdp.simulation.wrap_units` with the module policy (tested)."""
    cfg = get_preset(model)
    layer, n = cfg.layer_parameters(), cfg.num_layers
    sizes = [min(blocks_per_unit, n - i) * layer for i in range(0, n, blocks_per_unit)]
    return cfg.num_parameters() - n * layer, sizes


@base.within_controls(lambda: controls())
def compute(model: str = "llama2-7b", dp: int = 8, zero_stage: int = 3, blocks_per_unit: int = 1,
            prefetch: int = 1, num_microbatches: int = 1, engine: str = "zero") -> dict:
    """Bytes per GPU over one step. Returns ``{"times", "bytes", "states", "transient_peak", "peak",
    "comm_bytes", "comm", ...}`` (bytes; ``comm`` is the :class:`~distlearn.zero_fsdp.traffic.StepComm`), or
    ``{"error": message}``."""
    try:
        cfg = get_preset(model)
        psi = cfg.num_parameters()
        states = model_state_bytes(psi, dp=dp, zero_stage=zero_stage)
        root, sizes = block_units(model, blocks_per_unit)
        comm = step_collectives(zero_stage, num_microbatches, engine=engine)
    except Exception as exc:  # noqa: BLE001 - explorer must not crash
        return {"error": str(exc)}
    biggest = max(sizes)
    fwd = [s / biggest for s in sizes]
    base_bytes = states.total
    if zero_stage >= 2:
        r = simulate(fwd, [0.5 * f for f in fwd], unit_bytes=[2.0 * s for s in sizes],
                     forward_prefetch=prefetch, backward_prefetch=prefetch, reshard_after_forward=zero_stage == 3)
        times, parts = r.memory_curve(parts=True)
        if zero_stage == 3:
            base_bytes += 2.0 * root                       # the root unit, unsharded for the step
            transient = [p + g for p, g in parts]
        else:
            transient = [g for _, g in parts]            # parameters are whole already: only gradients
    else:
        times, transient = [0.0, 1.0], [0.0, 0.0]
    curve = [base_bytes + x for x in transient]
    row = zero_stage_table(psi, dp)[zero_stage]
    return {"model": model, "psi": psi, "dp": dp, "zero_stage": zero_stage, "times": times, "bytes": curve,
            "states": states, "sharded": states.total, "root_bytes": 2.0 * root if zero_stage == 3 else 0.0,
            "transient_peak": max(curve) - states.total, "peak": max(curve), "num_units": len(sizes) + 1,
            "comm": comm, "comm_bytes": comm.bytes_per_rank(psi, dp, 2), "engine": engine,
            "fsdp": row["fsdp"], "fsdp_zh": row["fsdp_zh"]}


def render(res: dict) -> None:
    if "error" in res:
        print(res["error"])
        return
    gb = 1e9
    print(bi(f"{res['model']}: Ψ = {res['psi'] / 1e9:.2f} B parameters, {res['num_units']} units, FSDP: {res['fsdp']}",
             f"{res['model']}：Ψ = {res['psi'] / 1e9:.2f} B 个参数，{res['num_units']} 个单元，FSDP：{res['fsdp_zh']}"))
    print(bi(f"sharded model states {res['sharded'] / gb:.2f} GB + transient up to {res['transient_peak'] / gb:.2f} GB"
             f" = peak {res['peak'] / gb:.2f} GB per GPU; each rank sends {res['comm_bytes'] / gb:.2f} GB per step",
             f"分片后的模型状态 {res['sharded'] / gb:.2f} GB + 临时最多 {res['transient_peak'] / gb:.2f} GB = "
             f"每块 GPU 峰值 {res['peak'] / gb:.2f} GB；每个 rank 每步发送 {res['comm_bytes'] / gb:.2f} GB", sep="\n"))
    comm = res["comm"]
    en, zh = ENGINE_LABELS[res["engine"]]
    print(bi(f"{en}, m = {comm.num_microbatches}: volume {comm.formula()} = {comm.volume_psi} Ψ per step",
             f"{zh}，m = {comm.num_microbatches}：每步通信量 {comm.formula()} = {comm.volume_psi} Ψ"))
    for c in comm.collectives:
        print("  " + c.describe())
    fig, ax = plots.new_figure(8, 3.2)
    ax.step(res["times"], [b / gb for b in res["bytes"]], where="post", color=plots.COLORS["params"])
    ax.axhline(res["sharded"] / gb, color=plots.COLORS["optimizer"], ls="--",
               label=bi("sharded model states", "分片后的模型状态"))
    ax.set_ylim(0, max(res["bytes"]) / gb * 1.1)
    ax.set_xlabel(bi("time in the step (relative)", "迭代内时间（相对）"))
    ax.set_ylabel("GB")
    ax.legend(fontsize=8, loc="lower right")
    plots.title(ax, L_TITLE.en, L_TITLE.zh)
    plt.show()


def controls() -> dict:
    return {"model": base.dropdown(L_MODEL, list(PRESETS), "llama2-7b"),
            "dp": base.log2_slider(L_DP, 8, 1, 1024),
            "zero_stage": base.int_slider(L_STAGE, 3, 0, 3, exact=True),
            "blocks_per_unit": base.log2_slider(L_BPU, 1, 1, 16),
            "prefetch": base.int_slider(L_PREFETCH, 1, 0, 3),
            "num_microbatches": base.int_slider(L_MB, 1, 1, 16),
            "engine": base.dropdown(L_ENGINE, [(ENGINE_LABELS[e], e) for e in ENGINES], "zero")}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=L_TITLE)

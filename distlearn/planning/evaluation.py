"""One plan's estimate (:class:`Estimate`): the public entry point :func:`evaluate`, which validates a plan once
(:func:`validate_plan`) and puts its memory (:mod:`~distlearn.planning.memory`) and time
(:mod:`~distlearn.planning.step_time`) together.

Reported: bytes per GPU against the device's memory, seconds per step, tokens/s, MFU = model FLOPs (without
recomputation) / (time × GPUs × peak) (Chowdhery et al. 2022, App. B) with the GPU's dense 16-bit peak whatever
the precision (an fp32 run shows how much of the GPU it leaves unused), the achieved FLOP/s per GPU counted
Megatron's way (recomputation included; Narayanan et al. 2021 eq. 3), to compare with published numbers, and the
pipeline bubble both as chapter 05's idle share and as Megatron's ratio.
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core.hardware import GPU, Cluster
from distlearn.core.models import ModelConfig
from distlearn.core.records import CLUSTER, MODEL
from distlearn.core.validate import DistlearnValueError, check_divisible, check_int, checks
from distlearn.planning.memory import plan_memory
from distlearn.planning.setting import (FRAGMENTATION, PLAN, RESERVE_BYTES, Plan, Setting, check_plan_fields,
                                        check_setting_plan, make_setting, resolve)
from distlearn.planning.step_time import plan_bubble, plan_time, schedule_bubble_ratio


@dataclass
class Estimate:
    """Memory (bytes per GPU), time (seconds per step) and throughput of one plan.

    ``mfu`` is measured against the GPU's dense 16-bit peak; ``compute_peak`` is the FLOP/s the plan's matrix
    multiplies run at (:func:`~distlearn.planning.flops.compute_peak`); ``bubble_fraction`` is the idle share
    (:func:`~distlearn.planning.step_time.bubble_fraction`), ``bubble_ratio`` Megatron's ratio."""

    plan: Plan
    memory: dict[str, float]
    capacity: float
    time: dict[str, float]
    tokens_per_s: float
    mfu: float
    achieved_flops: float   # FLOP/s per GPU counted with recomputation (Megatron's convention)
    bubble_fraction: float
    bubble_ratio: float
    compute_peak: float

    @property
    def fits(self) -> bool:
        return self.memory["total"] <= self.capacity

    @property
    def comm_fraction(self) -> float:
        """Share of the step spent in exposed communication (TP + PP + DP)."""
        t = self.time
        return (t["tp_comm"] + t.get("cp_comm", 0.0) + t["pp_comm"] + t["dp_comm"]) / t["total"]


def estimate(st: Setting, p: Plan, memory: dict | None = None) -> Estimate:
    """The :class:`Estimate` of plan ``p`` (``memory``: its :func:`~distlearn.planning.memory.plan_memory` if
    already computed). ``p`` must be valid for ``st`` (:func:`validate_plan`, or built by the search)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    mem = memory or plan_memory(st, p)
    t = plan_time(st, p)
    n = st.cluster.world_size
    if p.schedule == "1f1b":
        fraction, ratio = plan_bubble(p)
    else:
        ratio = schedule_bubble_ratio(st, p)
        fraction = ratio / (1 + ratio)
    return Estimate(plan=p, memory=mem, capacity=st.capacity, time=t,
                    tokens_per_s=st.B * st.s / t["total"],
                    mfu=st.counts.model_flops_step / (t["total"] * n * st.cluster.gpu.peak_flops),
                    achieved_flops=st.hardware_flops(p.recompute) / (t["total"] * n),
                    bubble_fraction=fraction, bubble_ratio=ratio,
                    compute_peak=st.gemm_peak)


def evaluate(model, plan: Plan, *, global_batch: int, seq_len: int, gpu: str | GPU = "a100-80gb",
             cluster: Cluster | None = None, precision: str = "mixed", optimizer: str = "adam",
             efficiency: float | None = None, reserve_bytes: float = RESERVE_BYTES,
             fragmentation: float = FRAGMENTATION, swiglu: str = "unfused", attention: str | None = None,
             grad_sync: str = "per_step", causal: bool = True, overlap: Overlap | None = None) -> Estimate:
    """Memory, time and throughput of one given ``plan`` (whether or not it fits: see ``Estimate.fits``).

    ``model``: a preset name or :class:`~distlearn.core.models.ModelConfig`; the cluster is ``cluster`` or
    ``dp·tp·cp·pp`` GPUs of type ``gpu``; ``global_batch`` sequences of ``seq_len`` tokens per step; the recipe and
    the reserve, the SwiGLU and the attention kernel, ``grad_sync``, ``causal`` and ``overlap`` as in
    :func:`~distlearn.planning.setting.make_setting`. Raises DistlearnValueError (bilingual, naming the parameter)
    when the plan is invalid (:func:`validate_plan`) or the setting is (:func:`~distlearn.planning.setting.make_setting`).
    Everything is checked here, once; the formulas it calls are arithmetic only. ZeRO 1–3 combine with pipeline
    parallelism (FSDP + PP as in torchtitan and Llama 3).
    """
    validate_plan_fields(plan)  # first: the GPU count dp·tp·cp·pp needs whole degrees
    model, cluster = resolve(model, gpu, plan.world_size, cluster)
    st = make_setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                      fragmentation, swiglu, attention=attention, grad_sync=grad_sync,
                      causal=causal, overlap=overlap)  # checks global_batch and seq_len (once)
    _check_layout(model, cluster, plan, global_batch, seq_len)
    return estimate(st, plan)


@checks(model=MODEL, cluster=CLUSTER)
def validate_plan(model: ModelConfig, cluster: Cluster, p: Plan, global_batch: int, seq_len: int | None = None
                  ) -> None:
    """Raise DistlearnValueError (bilingual, naming the field) unless ``p`` is a plan the search could produce:
    :func:`validate_plan_fields`, then :func:`validate_plan_layout`."""
    validate_plan_fields(p)
    validate_plan_layout(model, cluster, p, global_batch, seq_len)


def validate_plan_fields(p: Plan) -> None:
    """Check what a plan says by itself, as :class:`~distlearn.planning.setting.Plan` did when it was built (again
    here: a plan of the search, or one changed with ``object.__setattr__``): whole degrees dp, tp, pp, cp, ep,
    micro-batch size and chunk count in :data:`~distlearn.planning.setting.PLAN_RANGES`, a ZeRO stage in 0–3, a
    recomputation mode of :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES` and a schedule of
    :data:`~distlearn.planning.setting.PLAN_SCHEDULES`. Raises DistlearnValueError naming the field (``plan`` when
    ``p`` is not a :class:`~distlearn.planning.setting.Plan` at all, e.g. the string ``"dp=8"``)."""
    check_plan_fields(p)


@checks(model=MODEL, cluster=CLUSTER, p=PLAN)
def validate_plan_layout(model: ModelConfig, cluster: Cluster, p: Plan, global_batch: int,
                         seq_len: int | None = None) -> None:
    """Check a plan (whose fields :func:`validate_plan_fields` accepted) against the model, the cluster and the
    batch: tp inside a node and dividing it and the (kv) heads, dp·tp·cp·pp GPUs, cp dividing ``seq_len``, ep on an
    MoE model dividing its experts and dp·cp, pp ≤ layers, ``stage_layers``, the micro-batches, the schedule's and
    interleaving's conditions. ``global_batch`` and ``seq_len`` (unless None) must be integers ≥ 1. Raises
    DistlearnValueError naming the field."""
    check_int("global_batch", global_batch, minimum=1)
    if seq_len is not None:
        check_int("seq_len", seq_len, minimum=1)
    _check_layout(model, cluster, p, global_batch, seq_len)


def _check_layout(model: ModelConfig, cluster: Cluster, p: Plan, global_batch: int, seq_len: int | None) -> None:
    """:func:`validate_plan_layout` once ``global_batch`` and ``seq_len`` are known to be whole numbers ≥ 1
    (:func:`evaluate` has :func:`~distlearn.planning.setting.make_setting` check them: each input once)."""
    node = cluster.gpus_per_node
    if p.tp > node:
        raise DistlearnValueError("tp", f"tp = {p.tp} is larger than a node ({node} GPUs): tensor parallelism needs "
                                        f"NVLink and must stay inside one node (tp ≤ {node}).",
                                  f"tp = {p.tp} 大于一个节点（{node} 块 GPU）：张量并行依赖 NVLink，"
                                  f"必须在节点内（tp ≤ {node}）。")
    check_divisible("gpus_per_node", node, "tp", p.tp)
    check_divisible("num_heads", model.num_heads, "tp", p.tp)
    check_divisible("num_kv_heads", model.kv_heads, "tp", p.tp)
    if p.world_size != cluster.world_size:
        cp = f"×{p.cp}" if p.cp > 1 else ""
        names = "dp × tp × cp × pp" if p.cp > 1 else "dp × tp × pp"
        raise DistlearnValueError("dp", f"{names} = {p.dp}×{p.tp}{cp}×{p.pp} = {p.world_size} must equal the "
                                        f"number of GPUs, {cluster.world_size}.",
                                  f"{names} = {p.world_size} 必须等于 GPU 数 {cluster.world_size}。")
    if seq_len is not None and p.cp > 1:
        check_divisible("seq_len", seq_len, "cp", p.cp)
    if p.ep > 1:
        _check_expert_parallel(model, p)
    if p.pp > model.num_layers:  # pp ≥ 1 is a field check: the message names the whole range
        check_int("pp", p.pp, minimum=1, maximum=model.num_layers)
    if p.stage_layers is not None:
        _check_stage_layers(model, p)
    check_divisible("global_batch", global_batch, "dp × micro_batch_size", p.dp * p.micro_batch_size)
    m = global_batch // (p.dp * p.micro_batch_size)
    if p.num_microbatches != m:
        raise DistlearnValueError(
            "num_microbatches", f"num_microbatches must be global_batch / (dp × micro_batch_size) = {m}; "
                                f"got {p.num_microbatches}.",
            f"num_microbatches 必须等于 global_batch / (dp × micro_batch_size) = {m}；收到 {p.num_microbatches}。")
    if p.schedule != "1f1b" and (p.pp == 1 or p.num_chunks > 1):
        raise DistlearnValueError(
            "schedule", f"schedule {p.schedule!r} needs pp > 1 and num_chunks = 1 (one model chunk per stage); "
                        f"got pp = {p.pp}, num_chunks = {p.num_chunks}.",
            f"调度 {p.schedule!r} 需要 pp > 1 且 num_chunks = 1（每个阶段一个模型分块）；"
            f"收到 pp = {p.pp}，num_chunks = {p.num_chunks}。")
    if p.num_chunks > 1:
        _check_interleaving(model, p, m)


def _check_expert_parallel(model: ModelConfig, p: Plan) -> None:
    """ep > 1 needs an MoE model whose experts and dp·cp it divides."""
    if not model.is_moe:
        raise DistlearnValueError("ep", f"ep = {p.ep} needs a mixture-of-experts model; {model.name} is dense "
                                        f"(use ep = 1).",
                                  f"ep = {p.ep} 需要混合专家 (MoE) 模型；{model.name} 是稠密模型（请用 ep = 1）。")
    check_divisible("num_experts", model.num_experts, "ep", p.ep)
    check_divisible("dp × cp", p.dp * p.cp, "ep", p.ep)


def _check_stage_layers(model: ModelConfig, p: Plan) -> None:
    """``stage_layers``: pp whole numbers summing to the layers, each ≥ num_chunks (the ends ≥ num_chunks − 1)."""
    sizes = p.stage_layers
    if (not isinstance(sizes, tuple) or len(sizes) != p.pp or sum(sizes) != model.num_layers
            or any(not isinstance(n, int) or n < p.num_chunks - (1 if i in (0, p.pp - 1) else 0)
                   for i, n in enumerate(sizes))):
        raise DistlearnValueError(
            "stage_layers", f"stage_layers must be a tuple of pp = {p.pp} whole numbers, each ≥ num_chunks = "
                            f"{p.num_chunks} (the first and the last ≥ num_chunks − 1: a chunk holding only the "
                            f"embedding or the output layer), summing to the {model.num_layers} layers; got "
                            f"{sizes!r}.",
            f"stage_layers 必须是 pp = {p.pp} 个整数组成的元组，每个 ≥ num_chunks = {p.num_chunks}"
            f"（第一个和最后一个可以 ≥ num_chunks − 1：一个分块只放嵌入层或输出层），"
            f"总和等于层数 {model.num_layers}；收到 {sizes!r}。")


def _check_interleaving(model: ModelConfig, p: Plan, num_microbatches: int) -> None:
    """num_chunks > 1 needs pp > 1, layers divisible by pp·v (unless ``stage_layers`` are given: uneven chunks, as
    Llama 3's schedule) and micro-batches divisible by pp."""
    if p.pp == 1:
        raise DistlearnValueError("num_chunks", "interleaving (num_chunks > 1) needs pp > 1.",
                                  "交错调度（num_chunks > 1）需要 pp > 1。")
    if p.stage_layers is None:
        check_divisible("num_layers", model.num_layers, "pp × num_chunks", p.pp * p.num_chunks)
    check_divisible("num_microbatches", num_microbatches, "pp", p.pp)

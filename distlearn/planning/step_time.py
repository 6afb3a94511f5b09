"""Time per step of one plan on its slowest pipeline stage (:func:`plan_time`): compute, tensor-, context-,
expert- and pipeline-parallel communication, the pipeline bubble of its schedule, and the exposed part of the
data-parallel / ZeRO collectives.

Units: seconds; bytes; bandwidths in bytes/s.

- compute: the kernel model of :mod:`distlearn.planning.kernels` (:func:`microbatch_compute_seconds`): each GEMM
  of a layer as a roofline of its own shape at a measured matmul ceiling, the attention core (materialised batched
  GEMMs, or a FlashAttention kernel at its published share of peak), the memory-bound elementwise work at the HBM
  bandwidth, the output layer and its loss, all divided by one end-to-end constant
  (:data:`~distlearn.planning.kernels.END_TO_END`); :func:`kernel_stage_parts` gives the breakdown. With
  ``efficiency=`` given (or a GPU without ``hbm_bw``), the flat model of before: hardware FLOPs
  (:mod:`distlearn.planning.flops`) / (peak × efficiency), the peak of the precision the matrix multiplies run in
  (:func:`~distlearn.planning.flops.compute_peak`), divided by ``cp``.
- tensor-parallel all-reduces: 2 in forward and 2 in backward per layer (+2 when the forward is recomputed), of
  b·s·h activation values each (16-bit, fp32 with ``precision="fp32"``; Shoeybi et al. 2019, Fig. 4), on
  consecutive ranks; on the critical path, or under ``Overlap.tp_comm`` each all-gather / reduce-scatter behind
  the one GEMM it feeds or follows (:func:`tp_exposed_seconds`).
- pipeline p2p: each micro-batch sends its activation forward and its gradient back, b·s·h/t values (scatter /
  gather optimisation, Narayanan et al. 2021 §4.1), once per chunk; counted as not overlapped; on NVLink when the
  whole pipeline sits in one NVLink domain, else at the network's speed.
- context parallelism: per layer, all-gathers of K and V and a reduce-scatter of their gradients, exposed
  (:func:`cp_seconds`); expert parallelism: per MoE layer, dispatch and combine all-to-alls in forward and backward,
  exposed (:func:`ep_seconds`: node-limited routing and the recipe's FP8 / BF16 bytes; DeepSeek's DualPipe overlap
  is not modelled).
- pipeline bubble: (p − 1)/v micro-batch times, i.e. the Megatron ratio (p − 1)/(v·m) of the ideal time
  (Narayanan §2.2), see :func:`bubble_ratio`; as an idle share of the pipeline's time, :func:`bubble_fraction`;
  with uneven chunks the largest chunk sets it (:func:`bubble_share`). ``schedule="zb-h1"`` (chapter 05's
  zero-bubble ZB-H1, Qi et al. 2023) takes its bubble and its micro-batches in flight from
  :mod:`distlearn.pipeline_parallel.zero_bubble` (:func:`zero_bubble_terms`); ZB-V and DualPipe (which move the
  loss to another rank, DualPipe with two copies of the weights) are not plan options yet.
- data-parallel gradient synchronization, exposed part only (:func:`dp_seconds`): ZeRO 0 all-reduces the gradients
  once per step, hidden behind the last micro-batch's backward when ``pp = 1`` (DDP buckets) and fully exposed
  with ``pp > 1`` (the all-reduce follows the pipeline flush, as in Megatron-LM) or under
  ``Overlap.grad_reduce_exposed`` (Megatron-LM 2021's ``--DDP-impl local``: after the whole backward). Without pipelining (``pp = 1``)
  ZeRO 1 reduce-scatters the same way and all-gathers the updated parameters after the step (exposed); ZeRO 2
  reduce-scatters every micro-batch's gradients (hidden behind that micro-batch's backward); ZeRO 3 also
  all-gathers parameters in forward and backward of every micro-batch (hidden behind compute when prefetched): the
  collectives and their phases of :func:`distlearn.zero_fsdp.traffic.step_collectives` (engine ``"zero"``:
  DeepSpeed's default all-reduce of the gradient buckets would double stages 1–2's gradient traffic). With
  pipelining, ZeRO 1–3 follow the setting's ``grad_sync``: ``"per_step"`` (the default) as torch 2.13's
  pipelining runs FSDP2 (``stage.py``, ``backward_maybe_with_nosync``: gradient sync and resharding off for every
  micro-batch, one reduce-scatter per step after the flush, exposed; the parameters all-gathered once per step,
  or, for ZeRO 3, once per forward that freed them: :func:`distlearn.nd_parallel.simulation.fsdp_all_gathers`,
  chapter 12's count; the stage's gradients held whole until then, :func:`distlearn.planning.memory.held_zero_stage`),
  ``"per_microbatch"`` as without pipelining (ZeRO 2's reduce-scatter behind every backward, sharded gradients;
  DeepSpeed's pipeline engine itself refuses ZeRO 2–3). Every collective is issued **per layer** (an FSDP unit, a
  gradient bucket), so the latency of its algorithm is paid once per layer.
- collectives: α-β times of :mod:`distlearn.core.topology` (chapter 02) with
  α = :data:`~distlearn.planning.setting.ALPHA` per message (:meth:`~distlearn.planning.setting.Setting.group_seconds`). Ranks are ordered tp (innermost), cp,
  dp (ep folded into dp·cp, spaced tp apart), pp as in Megatron-LM; a group spaced ``stride`` ranks apart has
  :func:`~distlearn.core.topology.per_domain` of its members in each NVLink domain of ``gpus_per_node`` GPUs (8 for
  DGX nodes, 72 for GB200 NVL72): inside one domain the ring at NVLink speed; across domains the faster of one
  ring per NIC of the domain and the hierarchical algorithm (:func:`~distlearn.core.topology.best_collective`:
  NCCL runs a ring per NIC, its channels, and its tree algorithm is the hierarchical one); an expert all-to-all
  the direct one, or DeepSeek-V3's node-limited dispatch (:func:`~distlearn.core.topology.dispatch_cost`).

A run option that changes none of these terms for a plan (``--overlap tp_comm`` with tp = 1, ``grad_sync`` without
pipelining, ...) is named with its reason by :func:`ineffective_options`, next to the code above that reads it.

The optimizer step, the embedding's gradient all-reduce and kernel launch gaps are not modelled (the kernel
model's END_TO_END stands for them).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from distlearn.activation_memory.formulas import RECOMPUTE_MODES, default_attention
from distlearn.core.guard import read_only
from distlearn.context_parallel.simulation import cp_comm_bytes
from distlearn.core.validate import check_choice, check_int, check_number, checks, each, mapping, record, whole
from distlearn.pipeline_parallel import schedules as pipeline, zero_bubble
from distlearn.planning import kernels
from distlearn.precision.fp8_recipes import COMMUNICATION
from distlearn.planning.setting import (PLAN, PLAN_RANGES, SETTING, Plan, Setting, check_plan_fields, check_setting_plan,
                                       stage_starts)


# the terms of plan_time, in the order plots and printouts stack them, with their (English, Chinese) names
TIME_PARTS = read_only({"compute": ("compute", "计算"), "tp_comm": ("TP comm.", "张量并行通信"),
                        "cp_comm": ("CP comm.", "上下文并行通信"), "ep_comm": ("EP comm.", "专家并行通信"),
                        "pp_comm": ("PP comm.", "流水线通信"), "bubble": ("bubble", "气泡"),
                        "dp_comm": ("DP comm. (exposed)", "数据并行通信（未被隐藏）")})


# ---------------------------------------------------------------- pipeline bubble (chapter 05's two definitions)
def bubble_ratio(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Megatron's bubble ratio t_bubble / t_ideal = (p − 1)/(v·m); 0 when pp = 1.

    Narayanan et al. 2021 §2.2.1 (1F1B and GPipe have the same bubble, (p−1)/m) and §2.2.2 (interleaving with v
    chunks per GPU divides it by v). It exceeds 1 when m < p − 1: it is not a share of anything. ``pp``,
    ``num_microbatches``, ``num_chunks``: integers in the ranges of
    :data:`~distlearn.planning.setting.PLAN_RANGES` (≥ 1), else DistlearnValueError.
    """
    return _bubble_ratio(*_bubble_args(pp, num_microbatches, num_chunks))


def bubble_fraction(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Bubble fraction as chapter 05 and :mod:`distlearn.pipeline_parallel.schedules` define it: the idle share of all stage-time,
    1 − busy / (p·T) = (p − 1)/(v·m + p − 1) for equal stages (0 when pp = 1, always below 1).

    Equal to ``distlearn.pipeline_parallel.schedules.simulate(...).bubble_fraction`` for 1F1B, and for interleaved 1F1B when m is a
    multiple of p (tests check both); ratio r = :func:`bubble_ratio` gives it as r / (1 + r). The arguments are
    checked as :func:`bubble_ratio`'s (DistlearnValueError).
    """
    return _bubble_fraction(*_bubble_args(pp, num_microbatches, num_chunks))


def _bubble_args(pp, num_microbatches, num_chunks) -> tuple[int, int, int]:
    """The three arguments of the bubble functions, each an integer in its :data:`PLAN_RANGES` range."""
    return tuple(check_int(name, value, minimum=PLAN_RANGES[name][0], maximum=PLAN_RANGES[name][1])
                 for name, value in (("pp", pp), ("num_microbatches", num_microbatches), ("num_chunks", num_chunks)))


def _bubble_ratio(pp: int, num_microbatches: int, num_chunks: int) -> float:
    """:func:`bubble_ratio` of checked arguments."""
    return (pp - 1) / (num_chunks * num_microbatches)


def _bubble_fraction(pp: int, num_microbatches: int, num_chunks: int) -> float:
    """:func:`bubble_fraction` of checked arguments."""
    return (pp - 1) / (num_chunks * num_microbatches + pp - 1)


def plan_bubble(p: Plan) -> tuple[float, float]:
    """``(bubble_fraction, bubble_ratio)`` of plan ``p``'s pipeline under 1F1B (interleaved with v chunks): the
    formulas of :func:`bubble_fraction` and :func:`bubble_ratio` on the plan's pp, m and v, which :class:`Plan`
    checked when it was built (the planner's evaluation calls this for every plan: no second check). Raises
    DistlearnValueError when ``p`` is not a :class:`Plan`."""
    if type(p) is not Plan:
        check_plan_fields(p)
    return (_bubble_fraction(p.pp, p.num_microbatches, p.num_chunks),
            _bubble_ratio(p.pp, p.num_microbatches, p.num_chunks))


def bubble_share(st: Setting, p: Plan) -> float:
    """The share of a micro-batch's stage time that each of the p − 1 warm-up / cool-down slots of the pipeline
    costs: 1/v for 1F1B (v = 1) and interleaved 1F1B with equal chunks (Narayanan et al. 2021 §2.2.2: bubble
    (p − 1)/v micro-batch times); with uneven chunks (``stage_layers``) the largest chunk sets the pace:
    ⌈L_max/v⌉ / L_max of the most loaded stage's L_max layers."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    if p.stage_layers is None or p.num_chunks == 1:
        return 1 / p.num_chunks
    most = max(p.stage_layers)
    return -(-most // p.num_chunks) / most


# ---------------------------------------------------------------- zero-bubble schedules (chapter 05)
class ScheduleCosts(NamedTuple):
    """Durations of one micro-batch's passes through a stage, in units of its forward."""

    forward: float        # t_f = 1
    backward: float       # t_b: input and weight gradients together (t_I = t_b − t_W)
    weight_grad: float    # t_W: the weight-gradient part of the backward


class ZeroBubbleTerms(NamedTuple):
    """What a zero-bubble schedule costs (:func:`zero_bubble_terms`)."""

    bubble_ratio: float            # t_bubble / t_ideal
    inflight: tuple[float, ...]    # micro-batches whose activations each stage holds at its peak


def schedule_costs(st: Setting, recompute: str) -> ScheduleCosts:
    """:class:`ScheduleCosts` of one micro-batch: the backward is twice the forward (three times with full
    recomputation: the forward runs again), and its weight-gradient part is the linear layers' share of the
    forward FLOPs (the attention core has no weights; Qi et al. 2023 §2). Raises DistlearnValueError for a
    ``recompute`` not in :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES`."""
    if type(st) is not Setting:
        check_setting_plan(st)
    return _schedule_costs(st, check_choice("recompute", recompute, RECOMPUTE_MODES))


def _schedule_costs(st: Setting, recompute: str) -> ScheduleCosts:
    """:func:`schedule_costs` of a plan's recomputation mode (checked by :func:`validate_plan_fields`)."""
    c = st.counts
    w = c.gemm_flops / (c.gemm_flops + c.attention_flops)
    return ScheduleCosts(1.0, (3.0 if recompute == "full" else 2.0), w)


def schedule_simulation(st: Setting, p: Plan):
    """:func:`distlearn.pipeline_parallel.schedules.simulate` (split-backward schedules:
    :mod:`distlearn.pipeline_parallel.zero_bubble`) of the plan's schedule with :func:`schedule_costs`, memoized;
    its ``bubble_ratio`` and ``peak_inflight`` are what the planner charges for a zero-bubble schedule (W passes
    keep their activations, ``w_memory = 1``, as torch does)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    def make():
        c = _schedule_costs(st, p.recompute)
        return pipeline.simulate(p.schedule, p.pp, p.num_microbatches, fwd_time=c.forward, bwd_time=c.backward,
                                 wgrad_time=c.weight_grad)
    return st.cached(("schedule_sim", p.schedule, p.pp, p.num_microbatches, p.recompute), make)


def zero_bubble_terms(st: Setting, p: Plan) -> ZeroBubbleTerms:
    """:class:`ZeroBubbleTerms` of a zero-bubble plan: chapter 05's
    :func:`distlearn.pipeline_parallel.zero_bubble.closed_form` where that module's tests establish it is exact
    (ZB-H1: t_W ≤ t_f, t_W ≤ t_I and m ≥ p, always true of :func:`schedule_costs` when m ≥ p; bubble
    (p − 1)(t_f + t_I − t_W), p micro-batches on every stage), else :func:`schedule_simulation`.
    tests/test_planner.py checks that both agree wherever the closed form is used."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    c = _schedule_costs(st, p.recompute)
    # the closed form at m = p: exact there and for every larger m (its condition is m ≥ p), its bubble time
    # (p − 1)(t_f + t_I − t_W) does not depend on m, its peak is min(p, m) = p
    closed = st.cached(("zb_closed", p.schedule, p.pp, p.recompute), lambda: zero_bubble.closed_form(
        p.schedule, p.pp, p.pp, fwd_time=c.forward, bwd_time=c.backward, wgrad_time=c.weight_grad))
    if closed["exact"] and p.num_microbatches >= p.pp:
        return ZeroBubbleTerms(closed["bubble_time"] / (p.num_microbatches * (c.forward + c.backward)),
                               (closed["peak_inflight"],) * p.pp)

    def simulated():
        sim = schedule_simulation(st, p)
        return ZeroBubbleTerms(float(sim.bubble_ratio), tuple(float(x) for x in sim.peak_inflight))
    return st.cached(("zb_sim_terms", p.schedule, p.pp, p.num_microbatches, p.recompute), simulated)


def schedule_bubble_ratio(st: Setting, p: Plan) -> float:
    """t_bubble / t_ideal of the plan's pipeline schedule: (p − 1)/(v·m) for 1F1B and interleaved 1F1B
    (:func:`bubble_ratio`, with uneven chunks :func:`bubble_share`), :func:`zero_bubble_terms` for a
    zero-bubble schedule."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    if p.schedule == "1f1b":
        return (p.pp - 1) * bubble_share(st, p) / p.num_microbatches
    return zero_bubble_terms(st, p).bubble_ratio


# ---------------------------------------------------------------- compute
def microbatch_compute_seconds(st: Setting, p: Plan) -> float:
    """Seconds of one micro-batch's forward and backward (recomputation included) on the slowest stage.

    Kernel model (the default, :mod:`distlearn.planning.kernels`): per layer its GEMMs as rooflines, its attention
    core and its memory-bound elementwise work (:func:`~distlearn.planning.kernels.layer_seconds`), the output
    layer on the last stage (:func:`~distlearn.planning.kernels.logits_seconds`), all divided by
    :data:`~distlearn.planning.kernels.END_TO_END`. Flat model (``Setting(efficiency=...)`` given, or a GPU
    without ``hbm_bw``): hardware FLOPs / (peak × efficiency), the linear layers' GEMMs at the recipe's GEMM peak
    (FP8 for the FP8 recipes), the attention core and the logits at the 16-bit peak, divided by ``cp``. Depends on
    b, tp, cp, ep, sequence parallelism, the stages and the recomputation only."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    key = ("compute", p.micro_batch_size, p.tp, p.pp, p.recompute, p.cp, p.stage_layers, p.sequence_parallel,
           p.ep)
    hit = st.memo.get(key)
    if hit is not None:
        return hit
    if st.kernel_model:
        return st.cached(key, lambda: sum(kernel_stage_parts(st, p).values()))
    return st.cached(key, lambda: flat_compute_seconds(st, p))


class StageKind(NamedTuple):
    """What sets a pipeline stage's compute time in the kernel model (:func:`stage_kinds`)."""

    layers: int       # transformer layers on the stage
    moe_layers: int   # how many of them are MoE layers
    is_last: bool     # whether it is the last stage (it also runs the output layer and the loss)


@checks(st=SETTING, sizes=each(whole()))
def stage_kinds(st: Setting, sizes: list[int]) -> list[StageKind]:
    """The :class:`StageKind` of the pipeline stages of ``sizes``, each distinct one once, in the order of the
    stages (stages alike cost the same: the first of them is the slowest whenever one is)."""
    kinds = []
    for i, (start, n) in enumerate(zip(stage_starts.unchecked(sizes), sizes)):
        kind = StageKind(n, st.stage_sums(start, n).moe_layers, i == len(sizes) - 1)
        if kind not in kinds:
            kinds.append(kind)
    return kinds


@checks(ls=record(kernels.LayerSeconds, "KernelModel(...).layer(...)"))
def layer_parts(ls: kernels.LayerSeconds, n: int, recompute: str) -> dict[str, float]:
    """Seconds of ``n`` layers of :class:`~distlearn.planning.kernels.LayerSeconds` ``ls`` by part (``"gemm"``,
    ``"attention"``, ``"elementwise"``): forward, backward and what ``recompute`` runs again. Raises
    DistlearnValueError unless ``n`` is an integer ≥ 0 and ``recompute`` one of
    :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES`."""
    return _layer_parts(ls, check_int("n", n, minimum=0), check_choice("recompute", recompute, RECOMPUTE_MODES))


def _layer_parts(ls: kernels.LayerSeconds, n: int, recompute: str) -> dict[str, float]:
    """:func:`layer_parts` of checked numbers (:func:`layer_units`: one layer, every mode)."""
    f = 2.0 if recompute == "full" else 1.0  # forward passes of the linear layers
    attn_extra = ls.attention_forward if recompute == "selective" else 0.0
    elem_extra = {"selective": ls.attention_elementwise_forward, "norm-act": ls.norm_act_forward}.get(recompute, 0.0)
    return {"gemm": n * (f * ls.gemm_forward + ls.gemm_backward),
            "attention": n * (f * ls.attention_forward + ls.attention_backward + attn_extra),
            "elementwise": n * (f * ls.elementwise_forward + ls.elementwise_backward + elem_extra)}


def kernel_model(st: Setting) -> kernels.KernelModel:
    """The :class:`~distlearn.planning.kernels.KernelModel` of setting ``st`` (its peaks, bytes per value, SwiGLU,
    causal kernel and fine-grained FP8 ceiling), memoized."""
    if type(st) is not Setting:
        SETTING.check("st", st, {})
    return st.cached(("kernel_model",), lambda: kernels.KernelModel(
        st.model, st.cluster.gpu, gemm_peak=st.gemm_peak, peak=st.peak, gemm_bytes=1 if st.fp8 else st.act_bytes,
        act_bytes=st.act_bytes, swiglu=st.swiglu, causal=st.causal,
        fp8_block_scaled=st.overlap.fp8_block_ceiling and st.precision in kernels.FINE_GRAINED_FP8_RECIPES))


def layer_units(st: Setting, p: Plan):
    """One layer's parts per recomputation mode, ``{mode: (parts, their sum)}`` (:func:`layer_parts`), for a dense
    and for an MoE layer (``None`` for a kind the model lacks), memoized: the same for every pp."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    m = st.model
    b, tp = p.micro_batch_size, p.tp

    def layer(index):  # LayerSeconds of layer ``index`` (all layers of one kind cost the same)
        return st.cached(("layer_s", b, tp, p.cp, p.sequence_parallel, p.ep, index), lambda: kernel_model(st).layer(
            micro_batch=b, seq_len=st.s, tp=tp, cp=p.cp, sequence_parallel=p.sequence_parallel,
            attention=st.attention if p.cp == 1 else "flash", layer=index, ep=p.ep))

    def every_mode(ls):
        out = {}
        for rc in RECOMPUTE_MODES:
            parts = _layer_parts(ls, 1, rc)
            out[rc] = parts, sum(parts.values())
        return out

    def make():
        if not m.is_moe:
            return every_mode(layer(None)), None
        kinds = st.counts.moe_layer  # one layer of each kind stands for all
        moe_layer = kinds.index(True) if True in kinds else None
        dense_layer = kinds.index(False) if False in kinds else None
        return (every_mode(layer(dense_layer)) if dense_layer is not None else None,
                every_mode(layer(moe_layer)) if moe_layer is not None else None)
    return st.cached(("unit_parts", b, tp, p.cp, p.sequence_parallel, p.ep), make)


@checks(parts=mapping())
def with_unmodelled(parts: dict[str, float]) -> dict[str, float]:
    """``parts`` with ``"unmodelled"`` added: what :data:`~distlearn.planning.kernels.END_TO_END` adds,
    sum / END_TO_END − sum."""
    modelled = sum(parts.values())
    parts["unmodelled"] = modelled / kernels.END_TO_END - modelled
    return parts


def kernel_stage_parts(st: Setting, p: Plan) -> dict[str, float]:
    """Seconds of one micro-batch on the slowest stage by part, in the kernel model: ``{"gemm", "attention",
    "elementwise", "logits", "unmodelled"}`` (forward + backward + recomputation; ``unmodelled`` is what
    :data:`~distlearn.planning.kernels.END_TO_END` adds: the parts / END_TO_END − the parts). Their sum is
    :func:`microbatch_compute_seconds`. Computed for every recomputation mode at once (the search asks for them
    all), each mode's numbers with the same operations as alone."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    key = ("kernel_parts", p.micro_batch_size, p.tp, p.pp, p.cp, p.stage_layers, p.sequence_parallel, p.ep)
    hit = st.memo.get(key)
    if hit is not None:
        return hit[p.recompute]
    return st.cached(key, lambda: (dense_stage_parts if not st.model.is_moe else moe_stage_parts)(st, p))[p.recompute]


def logit_seconds(st: Setting, p: Plan) -> float:
    """Forward + backward seconds of the output layer and its loss for one micro-batch
    (:func:`~distlearn.planning.kernels.logits_seconds`), memoized."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    b, tp = p.micro_batch_size, p.tp
    return st.cached(("logit_s", b, tp, p.cp), lambda: kernels.KernelModel(
        st.model, st.cluster.gpu, gemm_peak=st.gemm_peak, peak=st.peak, act_bytes=st.act_bytes).logits(
        tokens=b * st.s / p.cp, tp=tp))


def dense_stage_parts(st: Setting, p: Plan) -> dict[str, dict[str, float]]:
    """:func:`kernel_stage_parts` of a dense model for every recomputation mode: every layer costs the same, so
    the slowest stage is the largest one, or the last with the logits."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    sizes = st.stages(p.pp, p.stage_layers)
    dense_units, _ = layer_units(st, p)
    logit = logit_seconds(st, p)
    last = sizes[-1]
    biggest = max(sizes[:-1]) if p.pp > 1 else 0
    out = {}
    for rc in RECOMPUTE_MODES:
        one, one_total = dense_units[rc]
        if p.pp > 1 and biggest * one_total > last * one_total + logit:
            best = {k: biggest * v for k, v in one.items()}
            best["logits"] = 0.0
        else:
            best = {k: last * v for k, v in one.items()}
            best["logits"] = logit
        out[rc] = with_unmodelled.unchecked(best)
    return out


def moe_stage_parts(st: Setting, p: Plan) -> dict[str, dict[str, float]]:
    """:func:`kernel_stage_parts` of a mixture-of-experts model for every recomputation mode: the slowest of the
    distinct :func:`stage_kinds` (its layer counts, then its parts)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    sizes = st.stages(p.pp, p.stage_layers)
    dense_units, moe_units = layer_units(st, p)
    logit = logit_seconds(st, p)
    zero = ({"gemm": 0.0, "attention": 0.0, "elementwise": 0.0}, 0.0)
    kinds = st.cached(("stage_kinds", p.pp, p.stage_layers), lambda: stage_kinds.unchecked(st, sizes))
    out = {}
    for rc in RECOMPUTE_MODES:
        dense_unit, dense_total = dense_units[rc] if dense_units is not None else zero
        moe_unit, moe_total = moe_units[rc] if moe_units is not None else zero
        worst, worst_total = None, -1.0
        for kind in kinds:
            total = ((kind.layers - kind.moe_layers) * dense_total + kind.moe_layers * moe_total
                     + (logit if kind.is_last else 0.0))
            if total > worst_total:
                worst, worst_total = kind, total
        n_dense = worst.layers - worst.moe_layers
        best = {k: n_dense * dense_unit[k] + worst.moe_layers * moe_unit[k] for k in zero[0]}
        best["logits"] = logit if worst.is_last else 0.0
        out[rc] = with_unmodelled.unchecked(best)
    return out


def flat_compute_seconds(st: Setting, p: Plan) -> float:
    """The flat model of :func:`microbatch_compute_seconds`: every FLOP at peak × ``st.eff``."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    b, tp, pp, c = p.micro_batch_size, p.tp, p.pp, st.counts
    factor = 4.0 if p.recompute == "full" else 3.0  # "norm-act" recomputes only element-wise work
    attn_factor = factor + (1.0 if p.recompute == "selective" else 0.0)
    logit_seconds = 3 * b * c.logits_flops / tp / st.peak
    sizes = st.stages(pp, p.stage_layers)

    def seconds(start, n):
        sums = st.stage_sums(start, n)
        return b * (factor * sums.gemm_flops / st.gemm_peak + attn_factor * sums.attention_flops / st.peak) / tp

    if not st.model.is_moe:  # every layer costs the same: the largest stage is the slowest
        layer_seconds = seconds(0, 1)
        if pp == 1:
            stage_seconds = sizes[0] * layer_seconds + logit_seconds
        else:
            stage_seconds = max(max(sizes[:-1]) * layer_seconds, sizes[-1] * layer_seconds + logit_seconds)
    else:  # per sequence and tensor-parallel rank (everything scales with b / tp): memoized per stage split
        def per_sequence():
            starts = stage_starts.unchecked(sizes)
            unit = lambda a, n: (factor * st.stage_sums(a, n).gemm_flops / st.gemm_peak
                                 + attn_factor * st.stage_sums(a, n).attention_flops / st.peak)
            return max(unit(a, n) + (3 * c.logits_flops / st.peak if i == pp - 1 else 0.0)
                       for i, (a, n) in enumerate(zip(starts, sizes)))
        stage_seconds = b * st.cached(("moe_stage_unit", pp, p.stage_layers, p.recompute), per_sequence) / tp
    return stage_seconds / (st.eff * p.cp)


# ---------------------------------------------------------------- communication of one micro-batch
def ep_seconds(st: Setting, p: Plan) -> float:
    """Exposed seconds of one micro-batch's expert-parallel all-to-alls on the stage with the most MoE layers:
    per MoE layer, forward dispatch and combine, and in backward the same two the other way (the dispatch again
    when the forward is recomputed), each of the b·(s/cp)/tp tokens a rank holds × h values, sent to the k routed
    experts. Bytes per value (:func:`all_to_all_bytes`): the recipe's
    :data:`distlearn.precision.fp8_recipes.COMMUNICATION` (DeepSeek-V3 §3.3.3: dispatch in FP8 with one fp32 scale
    per 128 values, the backward's activation gradient before the down-projection too, both combines in BF16),
    else the activation dtype. Each all-to-all: :meth:`~distlearn.planning.setting.Setting.dispatch_seconds`, the
    ep ranks spaced tp apart placed on the NVLink domains (:func:`distlearn.core.topology.per_domain`: EP 64 with
    tp 1 on 8-GPU nodes is 8 per node, 7 of 63 peers on NVLink) and the model's node-limited routing
    (``max_nodes_per_token``: DeepSeek-V3's token crosses InfiniBand once per target node, at most 4, then NVLink,
    §3.2.2; :func:`distlearn.core.topology.dispatch_cost`). Not overlapped: DeepSeek-V3 hides it behind compute
    with DualPipe (§3.2.1), a schedule this planner does not model yet."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    m = st.model
    if p.ep == 1 or not m.is_moe:
        return 0.0
    sizes = st.stages(p.pp, p.stage_layers)
    moe_layers = max(st.stage_sums(a, n).moe_layers for a, n in zip(stage_starts.unchecked(sizes), sizes))
    tokens = p.micro_batch_size * (st.s // p.cp) / p.tp * m.hidden_size  # values of one copy of the rank's tokens
    per = all_to_all_bytes(st)
    a2a = lambda nbytes: st.dispatch_seconds(nbytes, m.experts_per_token, p.ep, p.tp)
    forward = a2a(tokens * per["dispatch"]) + a2a(tokens * per["combine"])
    backward = a2a(tokens * per["backward_dispatch"]) + a2a(tokens * per["backward_combine"])
    return moe_layers * (forward * (2 if p.recompute == "full" else 1) + backward)


def all_to_all_bytes(st: Setting) -> dict[str, float]:
    """Bytes per value of the four expert all-to-alls of an MoE layer, ``{"dispatch", "combine",
    "backward_dispatch", "backward_combine"}`` (the backward ones: the gradient of the combine travels the
    dispatch's way, the gradient of the dispatch the combine's way): the recipe's rows of
    :data:`distlearn.precision.fp8_recipes.COMMUNICATION` (DeepSeek-V3: 1 + 4/128, 2, 1 + 4/128, 2), else
    the activation dtype for all four."""
    if type(st) is not Setting:
        check_setting_plan(st)

    def make():
        out = dict.fromkeys(("dispatch", "combine", "backward_dispatch", "backward_combine"), float(st.act_bytes))
        for item in COMMUNICATION:
            if not st.overlap.fp8_dispatch or item.recipe != st.precision or item.collective != "all_to_all":
                continue
            if "combine" in item.what_en:
                out["combine"] = out["backward_combine"] = item.fp8_bytes
            elif "backward" in item.what_en:
                out["backward_dispatch"] = item.fp8_bytes
            else:
                out["dispatch"] = item.fp8_bytes
        return out
    return st.cached(("a2a_bytes",), make)


def cp_seconds(st: Setting, p: Plan) -> float:
    """Exposed seconds of one micro-batch's context-parallel communication on the slowest stage: per layer, the
    forward all-gather of K and V, and in backward the all-gather again plus the reduce-scatter of dK and dV
    (fp32), as :func:`distlearn.context_parallel.simulation.cp_comm_bytes` counts them (``"all-gather"``, Llama 3 §3.3.2:
    exposed, not overlapped); a recomputed forward gathers once more. The cp ranks, spaced tp apart, placed on the
    NVLink domains (:meth:`~distlearn.planning.setting.Setting.group_seconds`)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    if p.cp == 1:
        return 0.0
    layers = max(st.stages(p.pp, p.stage_layers))
    # the recomputation enters only as full or not (a recomputed forward gathers once more)
    return layers * st.cached(("cp_layer_s", p.micro_batch_size, p.tp, p.cp, p.recompute == "full"),
                              lambda: cp_layer_seconds(st, p))


def cp_layer_seconds(st: Setting, p: Plan) -> float:
    """:func:`cp_seconds` of one layer (it depends on b, tp, cp and the recomputation only)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    m = st.model
    kw = dict(seq_len=st.s, num_heads=m.num_heads, num_kv_heads=m.kv_heads, head_dim=m.head_dim, cp=p.cp,
              micro_batch_size=p.micro_batch_size, tp=p.tp, dtype_bytes=st.act_bytes)
    fwd = cp_comm_bytes("all-gather", pass_="forward", **kw).bytes_per_rank      # (cp−1)·B_kv sent by each rank
    bwd = cp_comm_bytes("all-gather", pass_="backward", **kw).bytes_per_rank     # (cp−1)·B_kv·(p + 4)/p
    full = p.cp / (p.cp - 1)  # collective_cost takes the whole gathered buffer: (cp−1)/cp of it is sent
    gathers = 3 if p.recompute == "full" else 2
    t_gather = st.group_seconds("all_gather", fwd * full, p.cp, p.tp)
    t_scatter = st.group_seconds("reduce_scatter", (bwd - fwd) * full, p.cp, p.tp)
    return gathers * t_gather + t_scatter


class MicrobatchTerms(NamedTuple):
    """Seconds of one micro-batch on the slowest stage that depend neither on interleaving nor on the number of
    micro-batches (:func:`microbatch_terms`)."""

    compute: float   # forward + backward (+ recomputation): :func:`microbatch_compute_seconds`
    tp_comm: float   # tensor-parallel all-reduces on the critical path
    cp_comm: float   # context-parallel K/V gathers and gradient reduce-scatters (:func:`cp_seconds`)
    ep_comm: float   # expert-parallel all-to-alls (:func:`ep_seconds`)


def microbatch_terms(st: Setting, p: Plan) -> MicrobatchTerms:
    """:class:`MicrobatchTerms` of plan ``p``: the parts of :func:`pipeline_terms` that depend neither on
    interleaving nor on the number of micro-batches, memoized."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    key = ("mb_terms", p.micro_batch_size, p.tp, p.pp, p.cp, p.recompute, p.stage_layers, p.sequence_parallel,
           p.ep)
    hit = st.memo.get(key)  # the search asks for it thousands of times: the memo first, without a closure
    if hit is not None:
        return hit

    def make():
        most_layers = max(st.stages(p.pp, p.stage_layers))
        # tensor parallel: all-reduces of b·s·h activations, consecutive ranks (inside the NVLink domain when tp
        # fits it; all-gather + reduce-scatter with SP: the same time)
        n_ar = 6 if p.recompute == "full" else 4
        t_ar = st.group_seconds("all_reduce", st.act_bytes * p.micro_batch_size * (st.s // p.cp)
                                * st.model.hidden_size, p.tp, 1)
        t_tp = most_layers * n_ar * t_ar
        if st.overlap.tp_comm and p.tp > 1:  # Overlap.tp_comm: each collective behind the GEMM it feeds or follows
            t_tp = _tp_exposed_seconds(st, p, t_ar, most_layers)
        return MicrobatchTerms(microbatch_compute_seconds(st, p), t_tp, cp_seconds(st, p), ep_seconds(st, p))
    return st.cached(key, make)


def tp_exposed_seconds(st: Setting, p: Plan, t_ar: float, layers: int) -> float:
    """Seconds of one micro-batch's tensor-parallel collectives left exposed under ``Overlap.tp_comm`` on a stage of
    ``layers`` layers, each all-reduce of b·s·h taking ``t_ar`` seconds (an all-gather or a reduce-scatter: half).

    Transformer Engine's userbuffers (Megatron-Core ``--tp-comm-overlap``; Wang et al. 2023) pipeline each
    sequence-parallel collective with the one GEMM it feeds or follows: the all-gather with the column-parallel
    GEMM that consumes it (QKV, MLP up), the reduce-scatter with the row-parallel GEMM that produces it (attention
    output, MLP down); in backward each linear layer's collective with that layer's two GEMMs (data and weight
    gradients). A collective longer than its GEMM shows the difference: per dense layer
    Σ max(0, t_ar/2 − g) over the four forward GEMMs g (twice with full recomputation) + Σ max(0, t_ar/2 − 2g) in
    backward, the GEMMs at the end-to-end speed (/ END_TO_END) as the compute they hide behind. A layer whose GEMMs
    are not the four of a dense block (MLA's fused projections, an MoE layer) and the flat model: the pooled bound
    of :func:`tp_overlap_seconds` (all the stage's TP time against all its linear GEMM time). Raises
    DistlearnValueError for a bad setting or plan, ``t_ar`` not a finite number ≥ 0 or ``layers`` not an integer
    ≥ 1."""
    check_setting_plan(st, p)
    return _tp_exposed_seconds(st, p, check_number("t_ar", t_ar, minimum=0), check_int("layers", layers, minimum=1))


def _tp_exposed_seconds(st: Setting, p: Plan, t_ar: float, layers: int) -> float:
    """:func:`tp_exposed_seconds` of checked arguments."""
    m = st.model
    if not st.kernel_model or m.is_moe or m.mla is not None:
        return max(0.0, layers * (6 if p.recompute == "full" else 4) * t_ar - tp_overlap_seconds(st, p))
    gemms = kernel_model(st).linear_seconds(tokens=p.micro_batch_size * st.s / p.cp, tp=p.tp)
    c, e2e = t_ar / 2, kernels.END_TO_END
    forward = sum(max(0.0, c - g / e2e) for g in gemms)
    backward = sum(max(0.0, c - 2 * g / e2e) for g in gemms)
    return layers * ((2 if p.recompute == "full" else 1) * forward + backward)


def tp_overlap_seconds(st: Setting, p: Plan) -> float:
    """Seconds of one micro-batch's linear-layer GEMMs on the slowest stage (forward, backward and recomputed), the
    work the tensor-parallel all-gathers / reduce-scatters hide behind under ``Overlap.tp_comm`` (Transformer
    Engine userbuffers pipeline each chunk of the collective with the GEMM that consumes or produces it): the kernel
    model's ``"gemm"`` part at the end-to-end speed (/ END_TO_END); the flat model has no GEMM part and uses the
    whole micro-batch compute."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    if st.kernel_model:
        return kernel_stage_parts(st, p)["gemm"] / kernels.END_TO_END
    return microbatch_compute_seconds(st, p)


def microbatch_lower_bound(st: Setting, p: Plan) -> float:
    """A lower bound on :func:`step_seconds_lower_bound` for every interleaving and schedule of the plan's
    micro-batches: the compute, tp, cp and ep terms of :func:`pipeline_terms`, the same products added in the
    same order (the pp_comm and bubble terms it leaves out are ≥ 0, and adding a number ≥ 0 never lowers a
    floating-point sum)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    mb = p.num_microbatches
    t = microbatch_terms(st, p)
    return mb * t.compute + mb * t.tp_comm + mb * t.cp_comm + mb * t.ep_comm


# ---------------------------------------------------------------- the step
class PipelineTerms(NamedTuple):
    """:func:`pipeline_terms` of a plan and the seconds of one micro-batch through its slowest stage."""

    terms: dict[str, float]      # compute, tp_comm, cp_comm, ep_comm, pp_comm, bubble: seconds per step
    microbatch_seconds: float    # one micro-batch: compute + tp + cp + ep + p2p seconds


def _terms_key(p: Plan) -> tuple:
    """The memo key of a plan's :func:`one_f_one_b_terms` (what they depend on), shared by :func:`pipeline_terms`
    and :func:`microbatch_seconds`."""
    return ("terms", p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.num_microbatches, p.cp, p.recompute,
            p.stage_layers, p.sequence_parallel, p.ep)


def pipeline_terms(st: Setting, p: Plan) -> dict[str, float]:
    """compute, tp_comm, cp_comm, ep_comm, pp_comm and bubble seconds of :func:`plan_time` (everything but the
    data-parallel collectives; they do not depend on the ZeRO stage nor on dp), memoized."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    key = _terms_key(p)
    if p.schedule == "1f1b":
        hit = st.memo.get(key)
        if hit is not None:
            return hit.terms
        return st.cached(key, lambda: one_f_one_b_terms(st, p)).terms

    def zero_bubble():  # the same micro-batch, another bubble
        terms, t_mb = st.cached(key, lambda: one_f_one_b_terms(st, p))
        return {**terms, "bubble": schedule_bubble_ratio(st, p) * p.num_microbatches * t_mb}
    return st.cached(key + (p.schedule,), zero_bubble)


def microbatch_seconds(st: Setting, p: Plan) -> float:
    """Seconds of one micro-batch through the plan's slowest stage under (interleaved) 1F1B with its chunk count:
    compute + tp + cp + ep + p2p (:func:`one_f_one_b_terms`' ``microbatch_seconds``, the time the bubble of
    :func:`pipeline_terms` is counted in, for either schedule), memoized with :func:`pipeline_terms`."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    key = _terms_key(p)
    hit = st.memo.get(key)
    if hit is None:
        hit = st.cached(key, lambda: one_f_one_b_terms(st, p))
    return hit.microbatch_seconds


def one_f_one_b_terms(st: Setting, p: Plan) -> PipelineTerms:
    """:class:`PipelineTerms` of plan ``p`` under (interleaved) 1F1B: m micro-batches of
    :func:`microbatch_terms` and p2p sends, and (p − 1)·:func:`bubble_share` micro-batch times of bubble."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    topo = st.topology
    b, tp, pp, v, mb, cp = p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.num_microbatches, p.cp
    t = microbatch_terms(st, p)
    # pipeline p2p: activation forward + gradient back, per chunk; the stages are tp·cp·dp ranks apart: on NVLink
    # when the whole pipeline of rank 0 sits in one domain, else some hop crosses the network (the slowest sets it)
    pp_bw = topo.intra_bw if p.world_size <= topo.gpus_per_domain else topo.network_bw
    t_p2p = (2 * v * (st.act_bytes * b * (st.s // cp) * st.model.hidden_size / tp / pp_bw + st.alpha)
             if pp > 1 else 0.0)
    t_mb = t.compute + t.tp_comm + t.cp_comm + t.ep_comm + t_p2p
    return PipelineTerms({"compute": mb * t.compute, "tp_comm": mb * t.tp_comm, "cp_comm": mb * t.cp_comm,
                          "ep_comm": mb * t.ep_comm, "pp_comm": mb * t_p2p,
                          "bubble": (pp - 1) * bubble_share(st, p) * t_mb}, t_mb)


@checks(terms=mapping())
def partial_sum(terms: dict[str, float]) -> float:
    """The values of ``terms`` added one by one in their order (the order every total of this module uses)."""
    total = 0.0
    for value in terms.values():
        total += value
    return total


def step_seconds_lower_bound(st: Setting, p: Plan) -> float:
    """A lower bound on ``plan_time(st, p)["total"]``: all its terms but the data-parallel one (which is ≥ 0),
    added in the same order from the same numbers, so the bound holds exactly in floating point too. It does not
    depend on the ZeRO stage."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    return partial_sum.unchecked(pipeline_terms(st, p))


def plan_time(st: Setting, p: Plan) -> dict[str, float]:
    """Seconds per step of the plan's slowest stage: compute, tp_comm, cp_comm, ep_comm, pp_comm, bubble, dp_comm
    (exposed parts) and their total (formulas in the module docstring)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    time = dict(pipeline_terms(st, p))
    time["dp_comm"] = dp_term(st, p)
    time["total"] = partial_sum.unchecked(time)
    return time


def plan_seconds(st: Setting, p: Plan) -> float:
    """``plan_time(st, p)["total"]``, the same number (the same additions in the same order), without building the
    breakdown: the search asks for it thousands of times."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    return step_seconds_lower_bound(st, p) + dp_term(st, p)


def dp_term(st: Setting, p: Plan) -> float:
    """:func:`dp_seconds`, memoized per ZeRO stage, batching, layout and recomputation."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    key = ("dp_s", p.zero_stage, p.num_microbatches, p.micro_batch_size, p.tp, p.pp, p.dp, p.cp, p.ep, p.recompute,
           p.stage_layers)
    dp = st.memo.get(key)
    return dp if dp is not None else st.cached(key, lambda: dp_seconds(st, p))


def dp_seconds(st: Setting, p: Plan) -> float:
    """Exposed seconds per step of the data-parallel / ZeRO collectives (they do not depend on interleaving)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    counts = st.counts
    tp, pp, dp, mb, cp = p.tp, p.pp, p.dp, p.num_microbatches, p.cp
    sizes = st.stages(pp, p.stage_layers)
    t_compute = microbatch_compute_seconds(st, p)
    # data parallel / ZeRO over dp·cp ranks (the cp ranks of a replica hold the same weights): gradient bytes of
    # this GPU's shard of the model (the first stage's)
    first = st.stage_sums(0, sizes[0])
    first_params = (first.dense_params + counts.embedding_params + (counts.last_stage_params if pp == 1 else 0)) / tp
    dp_n = dp * cp
    # (shard params, group size, stride): the dense part over the dp·cp ranks spaced tp apart; routed experts over
    # the dp·cp/ep ranks holding the same experts, spaced tp·ep apart (ep folded into dp·cp, innermost)
    groups = [(first_params, dp_n, tp)]
    if first.expert_params:
        groups.append((first.expert_params / (tp * p.ep), dp_n // p.ep, tp * p.ep))
    t_bwd = t_compute * (3 / 4 if p.recompute == "full" else 2 / 3)  # backward (+ recomputed forward) share
    t_fwd = t_compute - t_bwd
    # the reduce-scatter after the last backward hides behind it when pp = 1, or under Overlap.grad_reduce
    # (Megatron-Core: during the last micro-batch's backward); the after-step all-gather behind the next forward
    # under Overlap.param_gather
    # (Megatron-LM 2021's --DDP-impl local, Overlap.grad_reduce_exposed: after the whole backward, no window)
    window = 0.0 if st.overlap.grad_reduce_exposed else t_bwd if pp == 1 or st.overlap.grad_reduce else 0.0
    after = t_fwd if st.overlap.param_gather else 0.0
    # one optimizer step's collectives from distlearn.zero_fsdp.traffic (the ZeRO design, reduce-scatter for stages
    # 1–2); each phase's collectives hide behind that phase's compute, the rest is exposed
    # per-unit counts: one collective per layer of the stage (an FSDP unit, a gradient bucket), so the latency of
    # the dp_n-way ring, α·(steps), is paid once per layer
    units = sizes[0]
    t_dp = 0.0
    if dp_n > 1:
        hide = {"forward": t_fwd, "backward": t_bwd, "last_backward": window, "after_step": after}
        for phase, colls in st.dp_collectives(p.zero_stage, mb, pp):
            reps = mb if phase in ("forward", "backward") else 1
            busy = sum(c.times / reps * units * st.group_seconds(
                c.op, params * st.per["grads" if c.what == "gradients" else "params"] / units, n, stride)
                for c in colls for params, n, stride in groups if n > 1)
            t_dp += reps * max(0.0, busy - hide[phase])
    return t_dp


# ---------------------------------------------------------------- options that change nothing (issue 38 audit)
@dataclass(frozen=True)
class IneffectiveOption:
    """A run option of the setting that changes neither the plan's predicted step time nor its memory
    (:func:`ineffective_options`): ``option`` names a field of :class:`~distlearn.planning.setting.Overlap`,
    ``"grad_sync"``, ``"swiglu"``, ``"attention"``, ``"causal"`` or the model's ``"max_nodes_per_token"``,
    ``value`` is the setting's (not the default), ``why_en`` / ``why_zh`` say why in one clause."""

    option: str
    value: object
    why_en: str
    why_zh: str


def ineffective_options(st: Setting, p: Plan) -> list[IneffectiveOption]:
    """The options of setting ``st`` set away from :func:`~distlearn.planning.setting.make_setting`'s default
    (``grad_sync`` other than ``"per_step"``, a field of ``st.overlap`` other than
    :data:`~distlearn.planning.setting.NO_OVERLAP`'s, ``swiglu`` other than ``"unfused"``, ``attention`` other than
    the model's :func:`~distlearn.activation_memory.formulas.default_attention`, ``causal`` off, the model's
    ``max_nodes_per_token`` set) that leave :func:`plan_time` and
    :func:`distlearn.planning.memory.plan_memory` of plan ``p`` exactly as they are without them, each with the
    reason, read off the code that uses the option:

    - ``grad_sync`` (:meth:`~distlearn.planning.setting.Setting.per_step_sync`): only with pp > 1 and ZeRO 2–3
      (ZeRO 0 and 1 reduce the gradients once per step either way, the same collectives and shards); ZeRO 2 with
      dp·cp = 1 has nothing to reduce or shard (ZeRO 3 still holds its gathered-layer buffer or not);
    - ``tp_comm`` (:func:`microbatch_terms`): only with tp > 1;
    - ``grad_reduce`` (:func:`dp_seconds`' ``window``): no effect when ``grad_reduce_exposed`` overrides it, when
      dp·cp = 1, when pp = 1 (the reduction is hidden behind the last backward already) or when the step has no
      gradient reduction after the last backward (ZeRO 2–3 without ``per_step`` sync reduce during every
      micro-batch's backward);
    - ``param_gather`` (``after``): no effect when dp·cp = 1 or the step has no parameter all-gather after the
      optimizer step (ZeRO 0; ZeRO 3 gathers in forward and backward);
    - ``grad_reduce_exposed``: no effect when dp·cp = 1, when there is no reduction after the last backward, or when
      pp > 1 without ``grad_reduce`` (exposed already);
    - ``fp8_dispatch`` (:func:`all_to_all_bytes`): no effect without expert parallelism (a dense model, ep = 1) or
      when the recipe sends no FP8 all-to-all (:data:`distlearn.precision.fp8_recipes.COMMUNICATION`);
    - ``swiglu`` (``"fused"``): no effect on a model without SwiGLU (GPT's GELU MLP), or on the flat time model
      with norm-act recomputation (both kernels keep the activation's input then; with full recomputation the
      recomputed layer's working set still differs);
    - ``attention`` (the model's non-default kernel): no effect with cp > 1 (flash everywhere), or on the flat time
      model with selective recomputation (neither kernel's internals are stored);
    - ``causal`` (``False``): no effect on the flat time model, with a materialised attention core at cp = 1, or
      when the whole sequence is one :data:`~distlearn.planning.kernels.FLASH_TILE`;
    - ``max_nodes_per_token`` (the model's node-limited routing, :func:`ep_seconds`): no effect without expert
      parallelism (a dense model, ep = 1) or when the ep group sits in one NVLink domain (the direct all-to-all,
      :meth:`~distlearn.planning.setting.Setting.dispatch_seconds`);
    - ``fp8_block_ceiling`` (:func:`kernel_model`): no effect with the flat time model, a recipe outside
      :data:`~distlearn.planning.kernels.FINE_GRAINED_FP8_RECIPES` or a GPU without a
      :data:`~distlearn.planning.kernels.FP8_BLOCK_CEILING`.

    An option not listed may still change nothing for some plan (the list errs that way, never the other):
    tests/test_ineffective_options.py checks over small layouts that every option listed leaves the time and the
    memory identical, and that each kind of option does change them on some layout where it is not listed.
    Raises DistlearnValueError when ``st`` is not a Setting or ``p`` not a Plan."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    out = []
    o, z, dp_n = st.overlap, p.zero_stage, p.dp * p.cp
    # the phases of the step's data-parallel collectives, as dp_seconds reads them (none when dp·cp = 1)
    phases = {phase for phase, _ in st.dp_collectives(z, p.num_microbatches, p.pp)} if dp_n > 1 else set()
    no_dp = ("there is no data-parallel communication (dp × cp = 1)", "没有数据并行通信（dp × cp = 1）")
    zero = (f"ZeRO-{z}", f"ZeRO-{z}") if z else ("DDP (ZeRO 0)", "DDP（不用 ZeRO）")
    every_mb = (f"{zero[0]} reduces the gradients during every micro-batch's backward",
                f"{zero[1]} 在每个微批次的反向传播中规约梯度")

    def add(option, value, why):
        out.append(IneffectiveOption(option, value, *why))

    if st.grad_sync != "per_step":
        if p.pp == 1:
            add("grad_sync", st.grad_sync, ("it matters only with pp > 1 and ZeRO-2 or ZeRO-3",
                                            "它只在流水线并行（pp > 1）且用 ZeRO-2 或 ZeRO-3 时起作用"))
        elif z <= 1:
            add("grad_sync", st.grad_sync, (f"{zero[0]} reduces the gradients once per step either way",
                                            f"{zero[1]} 无论如何都是每步规约一次梯度"))
        elif z == 2 and dp_n == 1:
            add("grad_sync", st.grad_sync, ("with dp × cp = 1 ZeRO-2 has no gradients to reduce or shard",
                                            "dp × cp = 1 时 ZeRO-2 没有要规约或分片的梯度"))
    if o.tp_comm and p.tp == 1:
        add("tp_comm", True, ("there is no tensor parallelism (tp = 1)", "没有张量并行（tp = 1）"))
    last = "last_backward" in phases
    if o.grad_reduce:
        if o.grad_reduce_exposed:
            add("grad_reduce", True, ("Megatron-LM's --DDP-impl local (ddp_impl_local) overrides it",
                                      "Megatron-LM 的 --DDP-impl local（ddp_impl_local）会覆盖它"))
        elif dp_n == 1:
            add("grad_reduce", True, no_dp)
        elif p.pp == 1:
            add("grad_reduce", True, ("with pp = 1 the gradient reduction is hidden behind the last backward already",
                                      "pp = 1 时梯度规约本来就与最后一次反向传播重叠"))
        elif not last:
            add("grad_reduce", True, every_mb)
    if o.param_gather:
        if dp_n == 1:
            add("param_gather", True, no_dp)
        elif "after_step" not in phases:
            add("param_gather", True, (f"{zero[0]} gathers no parameters after the optimizer step",
                                       f"{zero[1]} 在优化器更新之后不 AllGather 参数"))
    if o.grad_reduce_exposed:
        if dp_n == 1:
            add("grad_reduce_exposed", True, no_dp)
        elif not last:
            add("grad_reduce_exposed", True, every_mb)
        elif p.pp > 1 and not o.grad_reduce:
            add("grad_reduce_exposed", True, ("with pp > 1 the gradient reduction is exposed already",
                                              "pp > 1 时梯度规约本来就是未被隐藏的通信"))
    if not o.fp8_dispatch:
        if not st.model.is_moe or p.ep == 1:
            add("fp8_dispatch", False, ("there is no expert parallelism (a dense model or ep = 1)",
                                        "没有专家并行（稠密模型，或 ep = 1）"))
        elif not any(c.recipe == st.precision and c.collective == "all_to_all" for c in COMMUNICATION):
            add("fp8_dispatch", False, (f"the recipe {st.precision} sends no FP8 all-to-all",
                                        f"精度方案 {st.precision} 没有 FP8 的 AllToAll"))
    limit = st.model.max_nodes_per_token  # a model field (DeepSeek-V3's node-limited routing), read by ep_seconds
    if limit is not None:
        if not st.model.is_moe or p.ep == 1:
            add("max_nodes_per_token", limit, ("there is no expert parallelism (a dense model or ep = 1)",
                                               "没有专家并行（稠密模型，或 ep = 1）"))
        elif st.topology_per_domain(p.ep, p.tp) == p.ep:
            add("max_nodes_per_token", limit, ("the expert-parallel group sits in one NVLink domain, so no token "
                                               "crosses the network", "专家并行组都在一个 NVLink 域内，没有词元经过网络"))
    # the kernel options of make_setting: the SwiGLU kernel, the attention kernel, the causal flash kernel
    if st.swiglu != "unfused":
        if st.model.arch != "llama":
            add("swiglu", st.swiglu, ("the model's MLP has no SwiGLU (it uses GELU)", "模型的 MLP 没有 SwiGLU（用的是 GELU）"))
        elif not st.kernel_model and p.recompute == "norm-act":
            add("swiglu", st.swiglu, ("the flat time model has no elementwise kernels, and with norm-act "
                                      "recomputation both SwiGLU kernels keep the same bytes (the activation's input)",
                                      "平坦时间模型不计逐元素算子，而 norm-act 重计算时两种 SwiGLU 算子保存的字节数相同"
                                      "（都只存激活函数的输入）"))
    if st.attention != default_attention(st.model):
        if p.cp > 1:
            add("attention", st.attention, ("with context parallelism (cp > 1) every layer runs a flash kernel",
                                            "上下文并行（cp > 1）时每一层都用 flash 算子"))
        elif not st.kernel_model and p.recompute == "selective":
            add("attention", st.attention, ("the flat time model counts the same FLOPs for both kernels, and selective "
                                            "recomputation stores neither kernel's internals",
                                            "平坦时间模型对两种算子计相同的 FLOPs，而选择性重计算不保存任何一种算子的中间结果"))
    if not st.causal:
        if not st.kernel_model:
            add("causal", False, ("the flat time model does not time the attention kernel",
                                  "平坦时间模型不单独计注意力算子的时间"))
        elif st.attention != "flash" and p.cp == 1:
            add("causal", False, ("a materialised attention core computes every score anyway",
                                  "显式计算注意力分数时，每个分数本来都要算"))
        elif st.s <= kernels.FLASH_TILE:
            add("causal", False, (f"the sequence fits in one {kernels.FLASH_TILE}-token tile, which the kernel "
                                  f"computes whole", f"整个序列只占一个 {kernels.FLASH_TILE} 词元的分块，算子总是整块计算"))
    if not o.fp8_block_ceiling:
        if not st.kernel_model:
            add("fp8_block_ceiling", False, ("the flat time model (efficiency given) has no GEMM ceiling",
                                             "平坦时间模型（给定了 efficiency）没有 GEMM 上限"))
        elif st.precision not in kernels.FINE_GRAINED_FP8_RECIPES:
            add("fp8_block_ceiling", False, (f"it applies only to {', '.join(kernels.FINE_GRAINED_FP8_RECIPES)}",
                                             f"它只用于 {'、'.join(kernels.FINE_GRAINED_FP8_RECIPES)}"))
        elif kernels.gpu_family(st.cluster.gpu) not in kernels.FP8_BLOCK_CEILING:
            add("fp8_block_ceiling", False, (f"no fine-grained FP8 ceiling is known for the {st.cluster.gpu.name}",
                                             f"{st.cluster.gpu.name} 没有已知的细粒度 FP8 上限"))
    return out

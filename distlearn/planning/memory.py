"""Memory per GPU of one plan, stage by stage: model states, activations of the micro-batches in flight, logits,
ZeRO-3's buffer and the reserve (:func:`plan_memory`); and the ZeRO paper's largest model (:func:`zero_max_params`).

Units: bytes (GB = 1e9, GiB = 2**30). The worst pipeline stage is reported (the first or the last; with uneven
``stage_layers`` every stage that can be the worst, :func:`candidate_stages`):

- model states: :func:`distlearn.memory.formulas.model_state_bytes` of the stage's parameters divided by ``tp``,
  sharded over ``dp·cp`` by ZeRO (Rajbhandari et al. 2020) — ZeRO divides by the *data-parallel* degree, not the
  GPU count; an MoE layer's routed experts are divided by ``ep`` and sharded over the ``dp·cp/ep`` ranks holding
  the same experts; FP8 recipes use :func:`distlearn.precision.fp8_recipes.recipe_state_bytes` (their FP8 weight
  copies are counted with the params);
- activations: :func:`distlearn.activation_memory.formulas.config_layer_bytes` (the model's own architecture:
  Korthikanti et al. 2022, Table 2 for GPT blocks with materialised attention; Llama blocks with flash attention,
  grouped-query K/V and the SwiGLU MLP, derived and measured in :mod:`distlearn.activation_memory.measure`; with
  ``cp`` the layer of s/cp tokens with flash-style attention, plus the all-gathered K and V of one layer; an MoE
  layer as a dense layer whose MLP is as wide as the k routed + shared experts a token uses), in the activation
  dtype of the recipe (2 bytes, 4 for ``precision="fp32"``; dropout masks 1 byte) × layers of the stage ×
  micro-batches in flight. With 1F1B stage i holds ``min(p − i, m)`` micro-batches (the first p, the last one);
  interleaving multiplies the first stage's by ``1 + (p−1)/(p·v)`` (Korthikanti §4.2.3) and gives stage i
  Megatron's warm-up of (2(p − i − 1) + (v − 1)p + 1)/v (:func:`interleaved_inflight`); with uneven chunks
  (``stage_layers``, e.g. Llama 3's first chunk holding only the embedding) the layers alive are counted along the
  schedule's real order (:func:`stage_peak_layers`,
  :func:`distlearn.pipeline_parallel.schedules.peak_inflight_weighted`); ZB-H1 holds what its simulation says
  (:func:`distlearn.planning.step_time.zero_bubble_terms`). Full recomputation keeps each layer's input (s·b·h
  values) and one layer's full activations while it recomputes;
- logits and the final norm on the last stage: 4·s·b·h/t·(1 + V/h) bytes (fp32 logits for the loss;
  Korthikanti §4.3), the embedding dropout mask s·b·h/t per micro-batch in flight on the first stage (GPT only:
  Llama has no dropout);
- ZeRO-3 working buffer: two layers' gathered parameters (the one computing and the one prefetched);
- ZeRO 1–3 under pipeline parallelism with ``grad_sync="per_step"`` (torch's pipelining, the default): the
  stage's gradients held whole until the last micro-batch and its parameters gathered, :func:`held_zero_stage`;
- a stated reserve: :data:`~distlearn.planning.setting.RESERVE_BYTES` for the CUDA context, cuBLAS workspaces
  and NCCL buffers, plus :data:`~distlearn.planning.setting.FRAGMENTATION` of the device memory for the caching
  allocator's fragmentation and temporaries.

Attention follows :func:`distlearn.activation_memory.formulas.default_attention`: GPT presets keep the a·s² scores
(the Megatron-LM runs they reproduce), Llama presets use a flash kernel (only a log-sum-exp per row).
"""
from __future__ import annotations

from typing import NamedTuple

from distlearn.core.validate import check_int, check_number, checks, each, function, record, whole
from distlearn.memory.formulas import ModelStateBytes, bytes_per_param
from distlearn.pipeline_parallel.schedules import peak_inflight_weighted
from distlearn.planning.flops import StageSums
from distlearn.planning.setting import PLAN, SETTING, Plan, Setting, check_setting_plan, stage_starts
from distlearn.planning.step_time import zero_bubble_terms


# ---------------------------------------------------------------- ZeRO paper, Table 2
def zero_max_params(memory_bytes: float, *, dp: int, zero_stage: int, mp: int = 1, precision: str = "mixed",
                    optimizer: str = "adam") -> float:
    """Largest Ψ whose model states fit in ``memory_bytes`` per GPU, with model parallelism ``mp`` and ZeRO stage
    ``zero_stage`` over ``dp`` — the ZeRO paper's "max theoretical model size" (Rajbhandari et al. 2020, Table 2):
    model states only (16 bytes per parameter with mixed-precision Adam), no activations, no buffers, no
    fragmentation, 32 GB = 32e9 bytes. 32 GB V100s at dp = 64, mp = 1: 2B, 7.6B, 14.4B, 128B for stages 0–3.
    """
    per = bytes_per_param(precision, optimizer)
    dp = check_int("dp", dp, minimum=1)
    zero_stage = check_int("zero_stage", zero_stage, minimum=0, maximum=3)
    mp = check_int("mp", mp, minimum=1)
    w = per["params"] / (dp if zero_stage >= 3 else 1)
    g = per["grads"] / (dp if zero_stage >= 2 else 1)
    o = per["optimizer"] / (dp if zero_stage >= 1 else 1)
    return check_number("memory_bytes", memory_bytes, minimum=0, strict_min=True) * mp / (w + g + o)


# ---------------------------------------------------------------- micro-batches in flight
def interleaved_inflight(pp: int, stage: int, num_chunks: int, num_microbatches: int) -> float:
    """Micro-batches' worth of a stage's activations held at the peak of 1F1B (``num_chunks = 1``: min(p − i, m),
    Narayanan et al. 2021 §2.2.1) or of interleaved 1F1B: Megatron-LM's warm-up of (p − i − 1)·2 + (v − 1)·p
    chunk-micro-batches plus the one in flight, each 1/v of the stage, i.e. (2(p − i − 1) + (v − 1)p + 1)/v; on
    the first stage this is Korthikanti et al. 2022 §4.2.3's p·(1 + (p − 1)/(p·v)). At most m."""
    if num_chunks == 1:
        return float(min(pp - stage, num_microbatches))
    return min(num_microbatches, (2 * (pp - stage - 1) + (num_chunks - 1) * pp + 1) / num_chunks)


@checks(stage_layers=each(whole()))
def chunk_layers(stage_layers, num_chunks: int) -> tuple[tuple[int, ...], ...]:
    """Layers of each chunk of each stage when stage i's ``stage_layers[i]`` layers are cut into ``num_chunks``
    chunks that differ by at most one layer. The smaller chunks sit at the model's ends: first on the first stage
    (its chunk 0 also holds the embedding), last on the last stage (its last chunk also holds the output layer),
    and last on the middle stages. Llama 3 405B (§3.3.2): 7 layers in 8 chunks on the first stage give
    (0, 1, …, 1), "the first model chunk on the first stage has only the embedding"; the last stage's last chunk
    "only output projection and loss". Raises DistlearnValueError unless ``num_chunks`` is an integer in [1,
    1024]."""
    return _chunk_layers(stage_layers, check_int("num_chunks", num_chunks, maximum=MAX_CHUNKS))


MAX_CHUNKS = 1024  # model chunks per pipeline stage (interleaving): far more than any stage has layers


def _chunk_layers(stage_layers, num_chunks: int) -> tuple[tuple[int, ...], ...]:
    """:func:`chunk_layers` of a checked chunk count."""
    out = []
    pp = len(stage_layers)
    for i, n in enumerate(stage_layers):
        base, extra = divmod(n, num_chunks)
        big_first = tuple(base + (1 if c < extra else 0) for c in range(num_chunks))
        out.append(big_first[::-1] if i == 0 and pp > 1 else big_first)
    return tuple(out)


@checks(stage_layers=each(whole()))
def stage_peak_layers(pp: int, num_microbatches: int, num_chunks: int, stage_layers,
                      stages=None) -> tuple[float, ...]:
    """Per stage, the most layer-micro-batches of activations alive at once:
    :func:`distlearn.pipeline_parallel.schedules.peak_inflight_weighted` of the schedule's real order (1F1B, or Megatron's
    interleaved 1F1B with ``num_chunks`` chunks) with each chunk weighted by its layers (:func:`chunk_layers`).
    With equal chunks this is :func:`interleaved_inflight` × layers (tests check it); with uneven chunks it counts
    which chunks the warm-up forwards went through. ``stages``: only these stages (in their order).

    Exact shortcut: in the steady phase the layers alive after forward q, F(q) − B(q − w − 1), repeat with the
    period P = p·v of the chunk order (both sums grow by the same g·Σ layers per period), and the cool-down only
    frees; so the peak is reached within the warm-up and one period, and ``num_microbatches`` beyond
    :func:`peak_microbatches` gives the same peak (tests check it). Raises DistlearnValueError unless ``pp``,
    ``num_microbatches`` and ``num_chunks`` are integers ≥ 1 (``num_chunks`` ≤ 1024)."""
    pp = check_int("pp", pp)
    num_microbatches = check_int("num_microbatches", num_microbatches)
    num_chunks = check_int("num_chunks", num_chunks, maximum=MAX_CHUNKS)
    return _stage_peak_layers(pp, num_microbatches, num_chunks, stage_layers, stages)


def _stage_peak_layers(pp: int, num_microbatches: int, num_chunks: int, stage_layers,
                       stages=None) -> tuple[float, ...]:
    """:func:`stage_peak_layers` of a plan's checked numbers (:func:`plan_memory`)."""
    schedule = "interleaved-1f1b" if num_chunks > 1 else "1f1b"
    m = min(num_microbatches, peak_microbatches(pp, num_chunks))
    return tuple(float(x) for x in peak_inflight_weighted(schedule, pp, m, _chunk_layers(stage_layers, num_chunks),
                                                          stages))


def peak_microbatches(pp: int, num_chunks: int) -> int:
    """Micro-batches enough for the activation peak of (interleaved) 1F1B: a multiple of p whose m·v chunk-forwards
    cover the longest warm-up 2(p − 1) + (v − 1)p and two periods p·v of the chunk order (see
    :func:`stage_peak_layers`)."""
    p, v = pp, num_chunks
    return p * -(-(2 * (p - 1) + (v - 1) * p + 2 * p * v + 1) // (v * p))


# ---------------------------------------------------------------- the stages that can be the worst
class CandidateStage(NamedTuple):
    """A pipeline stage that :func:`plan_memory` looks at (:func:`candidate_stages`)."""

    stage: int            # its index, 0 … pp − 1
    layers: int           # transformer layers on it
    extra_params: float   # parameters beyond its layers: the embedding (first), the final norm and output (last)
    is_first: bool
    is_last: bool
    sums: StageSums       # its layers' parameters and FLOPs


CANDIDATE = record(CandidateStage, "candidate_rows(st, p)[0]")


class StageStates(NamedTuple):
    """Bytes per GPU of one stage's model states."""

    params: float
    grads: float
    optimizer: float
    total: float          # params + grads + optimizer, added in that order


class StageActivations(NamedTuple):
    """Bytes per GPU that one stage's micro-batches in flight keep."""

    activations: float    # the layers' saved tensors (and the embedding's dropout mask, K/V gathered by CP)
    logits: float         # fp32 logits and the final norm's output (last stage only, else 0)


class MemoryParts(NamedTuple):
    """:func:`plan_memory`'s terms, one entry per candidate stage (:func:`candidate_stages`)."""

    states: list[StageStates]
    activations: list[StageActivations]
    zero3_buffer: float   # bytes of two gathered layers under ZeRO-3 (0 otherwise), the same on every stage


@checks(sizes=each(whole()), moe_layers=each(whole()))
def candidate_stages(sizes: list[int], moe_layers: list[int] | None = None) -> list[int]:
    """The stages that can hold the most memory: the first, the last, and each middle stage that no earlier middle
    stage dominates. A later middle stage with no more layers than an earlier one holds no more: the same bytes
    per layer, no more micro-batches in flight (:func:`interleaved_inflight` and the schedule's order both fall
    with the stage), no embedding or logits. In a mixture-of-experts model (``moe_layers`` per stage) layers come
    in two sizes, dense and MoE: an earlier middle stage dominates when it has at least as many of each."""
    pp = len(sizes)
    moe = moe_layers or [0] * pp
    out, seen = [0], []
    for i in range(1, pp - 1):
        dense_i, moe_i = sizes[i] - moe[i], moe[i]
        if not any(d >= dense_i and e >= moe_i for d, e in seen):
            out.append(i)
            seen.append((dense_i, moe_i))
    return out + [pp - 1]


def candidate_rows(st: Setting, p: Plan) -> list[CandidateStage]:
    """The :class:`CandidateStage` of each stage that can be the worst of :func:`plan_memory` for the plan's pp and
    stage split."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    m, pp, counts = st.model, p.pp, st.counts
    sizes = st.stages(pp, p.stage_layers)
    starts = stage_starts.unchecked(sizes) if m.is_moe else [0] * pp  # only MoE layers differ from one another
    if pp == 1:
        rows = [(0, sizes[0], counts.embedding_params + counts.last_stage_params, True, True)]
    elif p.stage_layers is None:
        rows = [(0, sizes[0], counts.embedding_params, True, False),
                (pp - 1, sizes[-1], counts.last_stage_params, False, True)]
    else:
        moe = [st.stage_sums(a, n).moe_layers for a, n in zip(starts, sizes)] if m.is_moe else None
        rows = [(i, sizes[i], (counts.embedding_params if i == 0 else 0) + (counts.last_stage_params if i == pp - 1
                                                                             else 0), i == 0, i == pp - 1)
                for i in candidate_stages(sizes, moe)]
    return [CandidateStage(*row, st.stage_sums(starts[row[0]], row[1])) for row in rows]


# ---------------------------------------------------------------- the terms
@checks(st=SETTING, p=PLAN, stages=each(CANDIDATE))
def stage_states(st: Setting, p: Plan, stages: list[CandidateStage]) -> list[StageStates]:
    """:class:`StageStates` of each of ``stages`` for the plan's tp, dp·cp, ep and ZeRO stage (as held:
    :func:`held_zero_stage`)."""
    tp, cp = p.tp, p.cp
    stage = held_zero_stage(st, p)
    out = []
    for row in stages:
        states: ModelStateBytes = st.states(max(1, round((row.sums.dense_params + row.extra_params) / tp)),
                                            p.dp * cp, stage)
        params, grads, optimizer = states.params, states.grads, states.optimizer
        if row.sums.expert_params:  # routed experts: 1/ep of them here, data-parallel over dp·cp/ep ranks
            ex = st.states(max(1, round(row.sums.expert_params / (tp * p.ep))), p.dp * cp // p.ep, stage)
            params, grads, optimizer = params + ex.params, grads + ex.grads, optimizer + ex.optimizer
        out.append(StageStates(params, grads, optimizer, params + grads + optimizer))
    return out


def held_zero_stage(st: Setting, p: Plan) -> int:
    """The ZeRO stage whose sharding a GPU holds at its peak: the plan's, except under pipeline parallelism with
    ``grad_sync="per_step"`` (:meth:`~distlearn.planning.setting.Setting.per_step_sync`), where torch's pipelining
    keeps the stage's gradients unsharded until the last micro-batch (``set_requires_gradient_sync(False)``) and
    its parameters gathered after each backward (``set_reshard_after_backward(False)``): ZeRO-1's count, whole
    parameters and gradients of the stage, sharded optimizer states, for ZeRO 1, 2 and 3 alike (the sharded
    gradients the last reduce-scatter writes are not added)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    return 1 if st.per_step_sync(p.pp, p.zero_stage) else p.zero_stage


def stage_inflight(st: Setting, p: Plan, row: CandidateStage, peaks) -> float:
    """Micro-batches' worth of ``row``'s activations alive at the schedule's peak (module docstring); ``peaks()``
    gives :func:`stage_peak_layers` of the candidate stages (needed with uneven chunks only)."""
    if type(st) is not Setting or type(p) is not Plan or type(row) is not CandidateStage or not callable(peaks):
        _check_stage_inflight(st, p, row, peaks)  # inline: the search calls this per stage of every plan
    pp, v = p.pp, p.num_chunks
    inflight = 1.0
    if row.is_first and pp > 1 and p.stage_layers is None:
        inflight = min(pp, p.num_microbatches) * ((1 + (pp - 1) / (pp * v)) if v > 1 else 1.0)
    elif pp > 1:
        inflight = interleaved_inflight(pp, row.stage, v, p.num_microbatches)
    if p.schedule != "1f1b":  # the simulated schedule's own peak (ZB-H1: at most p on every stage)
        inflight = zero_bubble_terms(st, p).inflight[row.stage]
    elif p.stage_layers is not None and v > 1 and not row.sums.moe_layers:
        # uneven chunks: the real schedule's order, chunk by chunk (Llama 3's embedding-only first chunk)
        inflight = peaks()[row.stage] / row.layers
    return inflight


@checks(st=SETTING, p=PLAN, row=CANDIDATE, peaks=function())
def _check_stage_inflight(st, p, row, peaks) -> None:
    """:func:`stage_inflight`'s arguments, when its inline test found one that is not what the search passes."""


@checks(st=SETTING, p=PLAN, stages=each(CANDIDATE))
def stage_activations(st: Setting, p: Plan, stages: list[CandidateStage]) -> list[StageActivations]:
    """:class:`StageActivations` of each of ``stages``: what the micro-batches in flight keep (formulas in the
    module docstring); the ZeRO stage and dp play no part."""
    m, s, b, tp, pp, v, cp = st.model, st.s, p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.cp
    h, V = m.hidden_size, m.vocab_size
    per_layer = st.act(b, tp, p.sequence_parallel, p.recompute, cp)
    per_moe_layer = st.act_moe(b, tp, p.sequence_parallel, p.recompute, cp) if m.is_moe else 0.0
    tokens = s // cp
    rows = tuple(row.stage for row in stages)
    # the layer-micro-batches of every candidate stage in one schedule walk
    peaks = lambda: st.cached(("peak_layers", pp, min(p.num_microbatches, peak_microbatches(pp, v)), v,
                               p.stage_layers, rows),
                              lambda: dict(zip(rows, _stage_peak_layers(pp, p.num_microbatches, v, p.stage_layers,
                                                                       list(rows)))))
    out = []
    for row in stages:
        inflight = stage_inflight(st, p, row, peaks)
        moe_layers = row.sums.moe_layers
        acts = (per_layer * (row.layers - moe_layers) + per_moe_layer * moe_layers) * inflight
        if p.recompute == "full":  # one layer's full activations while its forward is recomputed
            acts += (st.act_moe if moe_layers else st.act)(b, tp, p.sequence_parallel, "none", cp)
        if row.is_first and m.arch == "gpt":
            acts += tokens * b * h / tp * inflight  # embedding dropout mask (Llama has no dropout)
        if cp > 1:  # the all-gathered K and V of the layer computing (Llama 3 §3.3.2's all-gather CP)
            acts += 2 * s * b * m.kv_heads * m.head_dim / tp * st.act_bytes
        logits = 4 * tokens * b * h / tp * (1 + V / h) if row.is_last else 0.0
        out.append(StageActivations(acts, logits))
    return out


def memory_parts(st: Setting, p: Plan) -> MemoryParts:
    """:class:`MemoryParts` of :func:`plan_memory`'s candidate stages, memoized per layout and batching."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    b, tp, pp, v, cp = p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.cp
    memo = st.memo  # looked at before building any closure
    stages = memo.get(("candidate_stages", pp, p.stage_layers))
    if stages is None:
        stages = st.cached(("candidate_stages", pp, p.stage_layers), lambda: candidate_rows(st, p))
    # activations and logits do not depend on the ZeRO stage nor on dp: one computation for all of them
    # with 1F1B they depend on the micro-batch count only up to peak_microbatches (stage_peak_layers), so plans
    # with more micro-batches share one entry
    mb = min(p.num_microbatches, peak_microbatches(pp, v)) if p.schedule == "1f1b" else p.num_microbatches
    key = ("stage_acts", b, tp, pp, v, mb, cp, p.sequence_parallel, p.recompute, p.stage_layers, p.schedule)
    held = memo.get(key)
    if held is None:
        held = st.cached(key, lambda: stage_activations.unchecked(st, p, stages))
    stage = held_zero_stage(st, p)
    buffer = 2 * st.per["params"] * st.counts.largest_layer_params / tp if stage == 3 else 0.0
    # the model states do not depend on the micro-batches: one computation for every batching of the layout
    key = ("stage_states", tp, pp, p.dp * cp, p.ep, stage, p.stage_layers)
    held_states = memo.get(key)
    if held_states is None:
        held_states = st.cached(key, lambda: stage_states.unchecked(st, p, stages))
    return MemoryParts(held_states, held, buffer)


def plan_memory(st: Setting, p: Plan) -> dict[str, float]:
    """Bytes per GPU of the plan's worst stage: params, grads, optimizer, activations, logits, zero3_buffer,
    reserve, and their total (formulas in the module docstring). Without ``stage_layers`` only the first and the
    last stage can be the worst (the first holds the most micro-batches, the last the logits); with them every
    stage that :func:`candidate_stages` keeps is looked at."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    parts = memory_parts(st, p)
    buffer, reserve = parts.zero3_buffer, st.reserve
    worst, worst_total = None, 0.0
    for states, held in zip(parts.states, parts.activations):
        # sum((params, grads, optimizer, acts, logits, buffer, reserve)), added in that order
        total = states.total + held.activations + held.logits + buffer + reserve
        if worst is None or total > worst_total:
            worst, worst_total = (states, held), total
    states, held = worst
    return {"params": states.params, "grads": states.grads, "optimizer": states.optimizer,
            "activations": held.activations, "logits": held.logits, "zero3_buffer": buffer, "reserve": reserve,
            "total": worst_total}


def memory_total(st: Setting, p: Plan) -> float:
    """``plan_memory(st, p)["total"]``, the same number, without building the breakdown (the search asks for
    it thousands of times)."""
    if type(st) is not Setting or type(p) is not Plan:
        check_setting_plan(st, p)
    parts = memory_parts(st, p)
    buffer, reserve = parts.zero3_buffer, st.reserve
    return max(states.total + held.activations + held.logits + buffer + reserve
               for states, held in zip(parts.states, parts.activations))

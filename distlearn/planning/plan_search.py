"""Search: enumerate every valid plan, keep those that fit, rank them; when none fits, say why and what would.

Speed (the chapter's explorer re-runs a search at every slider move; its goal is 50 ms in every setting, checked
by ``make bench``) comes from five exact shortcuts, none of which changes a result:

- **memory-minimal plans.** For fixed (tp, pp, ZeRO stage, recomputation), memory never decreases with the
  micro-batch size b nor with interleaving: every activation term is proportional to b, the first stage holds
  b·min(p, m) = min(b·p, B/dp) sequences' activations, interleaving multiplies them by 1 + (p−1)/(p·v) ≥ 1, and
  the model states do not depend on either. So if the plan with b = 1, v = 1 (always valid) does not fit, no plan
  of its group does (:func:`candidate_groups`); a group is only skipped when that plan is over the capacity by
  more than a rounding margin (:data:`ROUNDING_MARGIN`).
- **the k best only.** With ``top = k`` a plan is skipped when its tokens/s computed from a lower bound on its
  step time is already below the k-th best found so far: its real tokens/s is lower still, so it cannot be among
  the k best. Three bounds, cheapest first, each checked before the memory: per micro-batch size, the compute
  and tp/cp/ep terms (:func:`~distlearn.planning.step_time.microbatch_lower_bound`, for every chunk count and
  schedule); per schedule, everything but the data-parallel term; per ZeRO stage, the step time itself. The
  plans of one (group, micro-batch size) unit are searched together, units in the order of an upper bound on
  their tokens/s (the "microbatch" bound without recomputation, refined when it comes first to
  :func:`_batch_floor`, which also counts the least pipeline bubble), so that the k best fill with fast plans
  early; the search stops at the first unit whose bound the k-th best beats. Ties between equally fast plans
  of equal memory still go to the one earlier in the search order of :func:`candidate_groups`.
- **memory orderings.** A higher ZeRO stage up to 2 never needs more memory, nor does selective or norm-act
  recomputation compared with none, and of two modes other than full the one keeping fewer bytes per layer never
  needs more (checked by tests/test_planner.py on every group): lower stages are only tried when a higher one
  fits, no recomputation only when selective and norm-act do, and "does any plan fit" looks at ZeRO 2–3 with
  full recomputation and whichever of selective and norm-act keeps less.
- **memo tables** in :class:`~distlearn.planning.setting.Setting` for what many plans share.
- **monotone suggestion searches**: memory grows with the sequence length for every plan, so the longest sequence
  that fits is found by bisection instead of trying every halving; the larger GPUs are tried in one pass over
  the memory-minimal plans, whose bytes do not depend on the GPU (:func:`_first_fitting_gpu`).
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from distlearn.core.hardware import GPU, GPUS, Cluster, make_cluster
from distlearn.core.i18n import bi
from distlearn.activation_memory.formulas import RECOMPUTE_MODES as RECOMPUTE
from distlearn.core.models import ModelConfig, get_preset
from distlearn.core.validate import check_bool, DistlearnValueError, check_choice, check_divisible, check_int
from distlearn.planning.evaluation import Estimate, estimate
from distlearn.planning.memory import memory_total, plan_memory
from distlearn.planning.setting import (COMPUTE_EFFICIENCY, FRAGMENTATION, RESERVE_BYTES, Overlap, Plan, Setting,
                                        make_setting, resolve)
from distlearn.planning.step_time import (bubble_share, dp_term, microbatch_lower_bound, microbatch_seconds, partial_sum,
                                          pipeline_terms, plan_seconds, schedule_bubble_ratio,
                                          step_seconds_lower_bound)

MAX_MICRO_BATCH = 16       # micro-batch sizes searched: divisors of global_batch/dp up to this
MAX_CHUNKS = 8             # interleaving: chunks per GPU searched up to this
MAX_CP = 32                # context parallelism: cp searched over powers of two up to this ...
MIN_CP_TOKENS = 8192       # ... keeping at least this many tokens per rank (Llama 3: 131,072 / 16 = 8,192)
MAX_GLOBAL_BATCH = 262_144  # sequences per step searched: 64 × the explorer's largest batch (Llama 3 405B used 2,048)
ROUNDING_MARGIN = 1e-9     # a group is skipped only if its smallest plan exceeds the capacity by this share


@dataclass
class SearchResult:
    """Ranked plans that fit (fastest first), how many were tried, and, when none fits, ``message`` saying why and
    ``suggestion`` (from :func:`suggest_fix`; ``None`` when no plan can even be formed, see ``message``)."""

    plans: list[Estimate]
    num_evaluated: int
    suggestion: dict | None = None
    message: str = ""

    @property
    def best(self) -> Estimate | None:
        return self.plans[0] if self.plans else None


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass
class Group:
    """The candidate plans sharing (tp, cp, pp, dp) and the layers per stage: ``batching`` lists (b, m, chunk
    counts) in search order; every one of them is combined with each ZeRO stage of ``zero_stages`` and each
    recomputation mode. ``stage_layers`` is ``None`` for :func:`distlearn.pipeline_parallel.schedules.partition_layers`'s split."""

    tp: int
    pp: int
    dp: int
    batching: list[tuple[int, int, list[int]]] = field(default_factory=list)
    zero_stages: tuple[int, ...] = (0,)
    cp: int = 1
    stage_layers: tuple[int, ...] | None = None
    ep: int = 1

    @property
    def size(self) -> int:
        return sum(len(self.schedules(v, m)) for _, m, chunks in self.batching for v in chunks) \
            * len(self.zero_stages) * len(RECOMPUTE)

    def schedules(self, num_chunks: int, num_microbatches: int) -> tuple[str, ...]:
        """1F1B (interleaved with v > 1); with a pipeline, v = 1 and m ≥ p also chapter 05's ZB-H1 (where its
        closed form is exact, :func:`~distlearn.planning.step_time.zero_bubble_terms`; with fewer micro-batches
        than stages :func:`~distlearn.planning.evaluation.evaluate` still simulates it)."""
        if self.pp > 1 and num_chunks == 1 and num_microbatches >= self.pp:
            return ("1f1b", "zb-h1")
        return ("1f1b",)

    def _plan(self, z, r, b, m, v, schedule="1f1b") -> Plan:
        return Plan.unchecked(self.dp, self.tp, self.pp, z, r, b, m, v, self.tp > 1, self.cp, self.stage_layers,
                              self.ep, schedule)  # the search's own values: no per-plan checks

    def smallest(self, zero_stage: int, recompute: str) -> Plan:
        """The memory-minimal plan of this group for ``zero_stage`` and ``recompute``: b = 1, v = 1."""
        b, m, _ = self.batching[0]
        return self._plan(zero_stage, recompute, b, m, 1)

    def plans(self, keep=lambda z, r: True):
        """Every plan of the group in search order, those with (zero_stage, recompute) not kept left out."""
        for b, m, chunks in self.batching:
            for v in chunks:
                for sched in self.schedules(v, m):
                    for z in self.zero_stages:
                        for r in RECOMPUTE:
                            if keep(z, r):
                                yield self._plan(z, r, b, m, v, sched)


def balanced_stages(num_layers: int, pp: int) -> tuple[int, ...] | None:
    """Layers per stage when ``pp`` does not divide ``num_layers``: the ``num_layers % pp`` extra layers go to
    stages 1, 2, …, never to the first stage (embedding, most micro-batches in flight) nor the last (logits) —
    Llama 3 §3.3.2's balancing (126 layers on 16 stages: 7, 8 × 14, 7). ``None`` when pp divides the layers, or
    when the extra layers outnumber the pp − 2 middle stages (then :func:`distlearn.pipeline_parallel.schedules.partition_layers`'s
    split is used)."""
    base, extra = divmod(num_layers, pp)
    if pp == 1 or extra == 0 or extra > pp - 2:
        return None
    return tuple(base + (1 if 1 <= i <= extra else 0) for i in range(pp))


def candidate_groups(model: ModelConfig, cluster: Cluster, global_batch: int, seq_len: int | None = None,
                     cp: int | None = None, ep: int = 1, smallest_only: bool = False):
    """Yield a :class:`Group` for every (tp, cp, pp) that can run: tp dividing the node size, the number of (query
    and kv) heads and the GPU count; cp = 1, and with ``seq_len`` also the powers of two up to :data:`MAX_CP` that
    divide it and leave each rank at least :data:`MIN_CP_TOKENS` tokens; pp ≤ layers; dp = GPUs / (tp·cp·pp)
    dividing the global batch. Layers per stage: :func:`distlearn.pipeline_parallel.schedules.partition_layers`, or
    :func:`balanced_stages` when pp does not divide the layers. Micro-batch sizes are the divisors of B/dp up to
    :data:`MAX_MICRO_BATCH` (b = 1 first); interleaving uses v chunks when the layers divide by p·v (or, with
    balanced stages, when every stage has at least v layers: uneven chunks) and the micro-batches by p; ZeRO 0–3
    (also with pipeline parallelism: FSDP + PP), only 0 when dp·cp = 1. A given ``cp`` keeps only that degree (any
    that divides ``seq_len`` and the GPUs per tp group, whatever the tokens per rank: the reader chose it); a given
    ``ep`` (a mixture-of-experts model's expert-parallel degree, dividing its experts) keeps the layouts whose
    dp·cp it divides. ``smallest_only``: each group's batching holds b = 1 only, for :meth:`Group.smallest` alone
    (its ``size`` and ``plans`` then leave the other micro-batch sizes out)."""
    smallest_only = check_bool("smallest_only", smallest_only)
    n, node, l = cluster.world_size, cluster.gpus_per_node, model.num_layers
    for tp in _divisors(node):
        if model.num_heads % tp or model.kv_heads % tp or n % tp:
            continue
        cps = [1]
        if cp is not None:
            cps = [cp] if (seq_len is None or seq_len % cp == 0) and (n // tp) % cp == 0 else []
        elif seq_len is not None:
            c = 2
            while c <= MAX_CP and seq_len % c == 0 and seq_len // c >= MIN_CP_TOKENS and (n // tp) % c == 0:
                cps.append(c)
                c *= 2
        for c in cps:
            for pp in _divisors(n // (tp * c)):
                if pp > l:
                    continue
                dp = n // (tp * c * pp)
                if global_batch % dp or (dp * c) % ep:
                    continue
                per_replica = global_batch // dp
                stages = balanced_stages(l, pp)
                if pp == 1:
                    chunks = [1]
                elif stages is None:
                    chunks = [1] + [v for v in range(2, MAX_CHUNKS + 1) if l % (pp * v) == 0]
                else:  # uneven chunks; the first and the last stage may keep a chunk for the embedding / output only
                    chunks = [1] + [v for v in range(2, MAX_CHUNKS + 1)
                                    if v <= min(stages[1:-1]) and v <= min(stages[0], stages[-1]) + 1]
                group = Group(tp, pp, dp, zero_stages=tuple(range(4)) if dp * c > 1 else (0,), cp=c,
                              stage_layers=stages, ep=ep)
                for b in _divisors(per_replica):
                    if b > MAX_MICRO_BATCH:
                        break
                    m = per_replica // b
                    group.batching.append((b, m, [v for v in chunks if v == 1 or m % pp == 0]))
                    if smallest_only:
                        break
                yield group


def candidate_plans(model: ModelConfig, cluster: Cluster, global_batch: int, seq_len: int | None = None):
    """Yield every valid :class:`~distlearn.planning.setting.Plan` (see :func:`candidate_groups`). Sequence
    parallelism is always on with tp > 1: it saves activation memory for the same communication time, so it never
    loses in this model."""
    for group in candidate_groups(model, cluster, global_batch, seq_len):
        yield from group.plans()


def _may_fit(st: Setting, group: Group, zero_stage: int, recompute: str) -> bool:
    """False only if no plan of ``group`` with this stage and recomputation fits (its smallest plan is over the
    capacity by more than the rounding margin)."""
    return memory_total(st, group.smallest(zero_stage, recompute)) <= st.capacity * (1 + ROUNDING_MARGIN)


def _smallest_may_fit(st: Setting, group: Group) -> bool:
    """Whether one of the group's memory-minimal plans :func:`_may_fit` (those :func:`any_plan_fits` looks at:
    ZeRO 2 or 3, or 0 when dp·cp = 1, with the modes of :func:`_least_memory_modes`): when none does, no plan of
    the group fits (the orderings of :func:`_kept`) and :func:`_kept` finds no pair."""
    stages = [z for z in group.zero_stages if z >= 2] or list(group.zero_stages)
    return any(_may_fit(st, group, z, r) for z in stages for r in _least_memory_modes(st, group))


def _kept(st: Setting, group: Group) -> set:
    """The (zero_stage, recompute) pairs of ``group`` that :func:`_may_fit`, computed with two exact orderings of
    the memory: a higher ZeRO stage up to 2 never needs more (stage 1 shards the optimizer state, stage 2 also the
    gradients; stage 3 may not, its gathered-layer buffer can outweigh what it saves), and selective or norm-act
    recomputation never keeps more than none (each keeps a subset of its tensors). So stages 0–1 are only tried
    when stage 2 (or the next one up) fits, and no recomputation only when both selective and norm-act do."""
    kept = set()
    for r in ("selective", "norm-act", "full", "none"):
        chain = sorted(group.zero_stages, reverse=True)  # e.g. 3, 2, 1, 0
        for z in chain:
            if r == "none" and ((z, "selective") not in kept or (z, "norm-act") not in kept):
                continue
            if _may_fit(st, group, z, r):
                kept.add((z, r))
            elif z <= 2:  # every lower stage needs at least as much
                break
    return kept


def _keeps_no_more(a: tuple, b: tuple) -> bool:
    """Whether per-layer bytes ``a`` are ≤ ``b`` in every kind of layer (dense, MoE)."""
    return all(x <= y for x, y in zip(a, b))


def _per_layer_bytes(st: Setting, group: Group) -> dict[str, tuple]:
    """Bytes one layer keeps (dense, and MoE for a mixture-of-experts model) under each recomputation mode but
    full, for the smallest plans of ``group`` (its smallest micro-batch)."""
    b, tp, cp = group.batching[0][0], group.tp, group.cp

    def make():
        def one(r):
            dense = st.act(b, tp, tp > 1, r, cp)
            return (dense, st.act_moe(b, tp, tp > 1, r, cp)) if st.model.is_moe else (dense,)
        return {r: one(r) for r in ("none", "selective", "norm-act")}
    return st.cached(("per_layer_bytes", b, tp, cp), make)


def _kept_modes(st: Setting, group: Group, modes: tuple[str, ...]) -> set:
    """The (zero_stage, recompute) pairs of :func:`_kept` with a recomputation mode among ``modes``."""
    return {(z, r) for z, r in _kept(st, group) if r in modes}


def _fitting_plans(st: Setting, group: Group, modes: tuple[str, ...] = RECOMPUTE):
    """Yield (plan, memory) for the plans of ``group`` with a recomputation mode among ``modes`` that fit, in
    search order."""
    kept = _kept_modes(st, group, modes)
    if not kept:
        return
    for b, m, chunks in group.batching:  # group.plans' order
        for p, mem, _ in _fitting_batch(st, group, kept, b, m, chunks):
            yield p, mem


def _batch_floor(st: Setting, group: Group, kept: set | None, b: int, m: int, chunks: list[int]) -> float:
    """A lower bound on :func:`~distlearn.planning.step_time.step_seconds_lower_bound` of every plan of ``group``
    with micro-batch size ``b`` (``m`` micro-batches), every chunk count of ``chunks``, every schedule and every
    (zero_stage, recompute) of ``kept`` (``None``: every pair). The terms of the plan with one chunk under 1F1B without recomputation (its
    compute, tp, cp and ep terms add up to no more than any mode's, as :func:`_fitting_batch` uses; its p2p term is
    every one-chunk plan's, and each chunk adds sends), its bubble replaced by the least one: each schedule's own
    factor ((p − 1) × bubble share for 1F1B with v chunks; the zero-bubble ratio × m for ZB-H1, of no
    recomputation, which selective and norm-act share, and of full recomputation when it is kept), computed as
    :func:`~distlearn.planning.step_time.pipeline_terms` does, times that plan's micro-batch time, no more than any
    other's. Added in the same order as the plans' own terms: rounding is monotone, so the bound holds in floating
    point too."""
    z0 = group.zero_stages[0]
    one = group._plan(z0, "none", b, m, 1, "1f1b")
    terms = pipeline_terms(st, one)
    if group.pp == 1:  # one chunk, one schedule, no bubble
        return partial_sum.unchecked(terms)
    factors = [(group.pp - 1) * bubble_share(st, one if v == 1 else group._plan(z0, "none", b, m, v, "1f1b"))
               for v in chunks]
    for sched in group.schedules(1, m):
        if sched != "1f1b":
            for r in (("none", "full") if kept is None else sorted({"full" if r == "full" else "none"
                                                                       for _, r in kept})):
                factors.append(schedule_bubble_ratio(st, group._plan(z0, r, b, m, 1, sched)) * m)
    return partial_sum.unchecked({**terms, "bubble": min(factors) * microbatch_seconds(st, one)})


def _fitting_batch(st: Setting, group: Group, kept: set, b: int, m: int, chunks: list[int], too_slow=None,
                   none_checked: bool = False):
    """Yield (plan, memory, step seconds or ``None``) for the plans of ``group`` with micro-batch size ``b`` (``m``
    micro-batches, ``chunks`` the chunk counts) and (zero_stage, recompute) in ``kept`` that fit, in search order,
    leaving out those for which ``too_slow(plan or seconds, bound)`` is true (``bound`` "microbatch" or "seconds",
    see :func:`search`; it must be true only of plans that cannot be among the results): then the step seconds are
    :func:`~distlearn.planning.step_time.plan_seconds`'s (the "pipeline" bound, which does not depend on the ZeRO
    stage, plus the data-parallel term: the same two numbers added), else ``None``. ``none_checked``: the caller
    already found that the "microbatch" bound without recomputation is not too slow."""
    # the bounds: "microbatch" depends on neither the chunk count, the schedule nor the ZeRO stage; "pipeline"
    # not on the ZeRO stage
    slow_b = {}
    if too_slow is not None:  # no recomputation has the lowest "microbatch" bound (every other mode adds work
        # to its terms): when even it is too slow, so is every plan of this b
        if none_checked:
            slow_b["none"] = False
        else:
            z0 = group.zero_stages[0]
            slow_b["none"] = too_slow(group._plan(z0, "none", b, m, chunks[0], "1f1b"), "microbatch")
            if slow_b["none"]:
                return
    for v in chunks:
        too_big = set()  # ZB-H1 holds p micro-batches on every stage, 1F1B min(p − i, m): never less memory
        for sched in group.schedules(v, m):
            pipe = {}  # recomputation mode → its "pipeline" bound in seconds, None when too slow
            for z in group.zero_stages:
                for r in RECOMPUTE:
                    if (z, r) not in kept or (sched != "1f1b" and (z, r) in too_big):
                        continue
                    p = None  # built when first needed, and then used for the bounds and the plan itself
                    seconds = None
                    if too_slow is not None:  # the bounds do not depend on z: one plan per r decides
                        if r not in slow_b:  # all chunk counts and schedules of this b at once
                            p = group._plan(z, r, b, m, v, sched)
                            slow_b[r] = too_slow(p, "microbatch")
                        if r not in pipe:
                            pipe[r] = None
                            if not slow_b[r]:
                                p = p or group._plan(z, r, b, m, v, sched)
                                lower = step_seconds_lower_bound(st, p)
                                if not too_slow(lower, "seconds"):
                                    pipe[r] = lower
                        if pipe[r] is None:
                            continue
                        p = p or group._plan(z, r, b, m, v, sched)
                        seconds = pipe[r] + dp_term(st, p)  # plan_seconds(st, p)
                        if too_slow(seconds, "seconds"):
                            continue
                    else:
                        p = group._plan(z, r, b, m, v, sched)
                    mem = plan_memory(st, p)
                    if mem["total"] <= st.capacity:
                        yield p, mem, seconds
                    elif sched == "1f1b":
                        too_big.add((z, r))


class _Best:
    """The ``k`` highest tokens/s seen so far (a min-heap). A plan whose tokens/s cannot reach the k-th of them
    ranks below ``k`` plans already found, so it cannot be among the ``k`` best."""

    def __init__(self, k: int):
        self.k, self.heap = k, []

    def add(self, tokens_per_s: float) -> None:
        (heapq.heappush if len(self.heap) < self.k else heapq.heappushpop)(self.heap, tokens_per_s)

    def beats(self, tokens_per_s_bound: float) -> bool:
        return len(self.heap) == self.k and tokens_per_s_bound < self.heap[0]


def search(model, *, global_batch: int, seq_len: int, gpu: str | GPU = "a100-80gb", num_gpus: int = 8,
           cluster: Cluster | None = None, precision: str = "mixed", optimizer: str = "adam",
           efficiency: float | None = None, reserve_bytes: float = RESERVE_BYTES,
           fragmentation: float = FRAGMENTATION, top: int | None = None, suggest: bool = True,
           swiglu: str = "unfused", cp: int | None = None, ep: int = 1,
           recompute: tuple[str, ...] | None = None, attention: str | None = None, grad_sync: str = "per_step",
           causal: bool = True, overlap: Overlap | None = None, memo: dict | None = None) -> SearchResult:
    """Every valid plan for ``model`` on ``num_gpus`` GPUs of type ``gpu`` (or on ``cluster``): those that fit,
    ranked by tokens/s (fastest first; ties: less memory, then search order).

    Parameters: ``model`` a preset name or ModelConfig; ``global_batch`` sequences per step; ``seq_len`` tokens per
    sequence; ``precision``/``optimizer`` recipes of :mod:`distlearn.memory.formulas`; ``efficiency`` share of peak FLOP/s
    the kernels reach; ``reserve_bytes`` + ``fragmentation`` × memory held back per GPU; ``swiglu`` the Llama
    MLP's kernel (``"unfused"`` or ``"fused"``, :func:`~distlearn.planning.setting.make_setting`); ``cp`` fixes the
    context-parallel degree (``None``: searched), ``ep`` the expert-parallel degree of a mixture-of-experts model
    (:func:`candidate_groups`); ``recompute`` limits the recomputation modes searched (``None``: all of
    :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES`; e.g. ``("none", "selective", "full")`` for a framework without
    norm-act; a single mode may be given by name); ``attention``, ``grad_sync``, ``causal`` and ``overlap`` as in
    :func:`~distlearn.planning.evaluation.evaluate` (the attention kernel, when ZeRO reduces gradients under
    pipeline parallelism, the causal flash kernel, a framework's communication overlaps: a run's own options of
    :mod:`distlearn.planning.published_runs` searched around its own layout); ``top`` (≥ 1) keeps the best ``top`` plans. When nothing fits, ``message`` says so and ``suggestion`` gives the smallest change that
    would (see :func:`suggest_fix`); when no plan can even be formed (no layout gives every data-parallel replica a
    whole share of the batch), ``message`` says why and ``suggestion`` is ``None``. ``memo``: a dict that
    searches may share (``None``: none shared, the suggestion's settings share a new one): the entries that depend on the model, sequence and recipe only
    (:data:`~distlearn.planning.setting.SHAREABLE`, keyed by their values), so that a search of the same model
    and recipe on another cluster or batch, and the suggestion's searches, do not compute them again.

    Raises DistlearnValueError for an unknown model or GPU, GPUs that are not a whole number of nodes, a
    ``global_batch`` above :data:`MAX_GLOBAL_BATCH`,
    non-positive sizes or a ``top`` below 1.
    """
    suggest = check_bool("suggest", suggest)
    check_int("global_batch", global_batch, minimum=1, maximum=MAX_GLOBAL_BATCH)  # the search loops over its divisors
    if top is not None:
        top = check_int("top", top, minimum=1)
    model, cluster = resolve(model, gpu, num_gpus, cluster)
    if cp is not None:
        cp = check_int("cp", cp, minimum=1)
    ep = check_int("ep", ep, minimum=1)
    if isinstance(recompute, str):  # one mode by name
        recompute = (recompute,)
    if recompute is not None and not isinstance(recompute, (tuple, list, set, frozenset)):
        raise DistlearnValueError("recompute", f"recompute must be a tuple of modes from {', '.join(RECOMPUTE)}; got "
                                               f"{recompute!r}.",
                                  f"recompute 必须是由 {'、'.join(RECOMPUTE)} 中的方式组成的元组；收到 {recompute!r}。")
    modes = RECOMPUTE if recompute is None else tuple(check_choice("recompute", r, RECOMPUTE) for r in recompute)
    if not modes:
        raise DistlearnValueError("recompute", f"recompute must name at least one of {', '.join(RECOMPUTE)}.",
                                  f"recompute 至少要包含以下之一：{'、'.join(RECOMPUTE)}。")
    if ep > 1:
        if not model.is_moe:
            raise DistlearnValueError("ep", f"ep = {ep} needs a mixture-of-experts model; {model.name} is dense "
                                            f"(use ep = 1).",
                                      f"ep = {ep} 需要混合专家 (MoE) 模型；{model.name} 是稠密模型（请用 ep = 1）。")
        check_divisible("num_experts", model.num_experts, "ep", ep)
    if memo is not None and not isinstance(memo, dict):
        raise DistlearnValueError("memo", f"memo must be a dict (or None); got {type(memo).__name__}.",
                                  f"memo 必须是 dict（或 None）；收到 {type(memo).__name__}。")
    # with a memo the search's own setting shares it with the suggestion's; without one it keeps its entries to
    # itself (a shared entry costs a longer key: a single search that fits is a few % faster without)
    st = make_setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                      fragmentation, swiglu, shared=memo, attention=attention, grad_sync=grad_sync, causal=causal,
                      overlap=overlap)
    fits, count = [], 0
    best = _Best(top) if top is not None else None
    # with ``top``, skip plans whose step time, or a lower bound on it, already ranks below ``top`` plans found
    tokens = st.B * st.s  # per step

    def too_slow(p, bound):
        """Whether plan ``p`` cannot be among the ``top`` best, judged by ``bound``: "microbatch"
        (:func:`~distlearn.planning.step_time.microbatch_lower_bound`, for every chunk count and schedule); with
        ``bound`` "seconds", ``p`` is a lower bound on a plan's step time in seconds (the "pipeline" bound of
        :func:`~distlearn.planning.step_time.step_seconds_lower_bound`, or the step time itself)."""
        seconds = p if bound == "seconds" else microbatch_lower_bound(st, p)
        return best.beats(tokens / seconds)
    too_slow = None if best is None else too_slow
    # the plans of one (group, micro-batch size) form a unit. With ``top`` the units are searched best bound first,
    # so that the k best fill early, and the search stops at the first unit whose bound is already too slow (every
    # later one's is lower). A unit's bound, in tokens/s, is first its "microbatch" bound without recomputation
    # (the lowest of its modes); when it comes first it is refined to :func:`_batch_floor` (its bubble counted)
    # and goes back in the queue, and the unit is searched when it comes first again. A plan's place in the search
    # order, (group, micro-batch size, place in the unit), breaks ties
    # The (zero_stage, recompute) pairs that may fit (:func:`_kept`) are found when a group's unit is first
    # searched; before, a group whose memory-minimal plans do not fit is left out (nothing of it fits)
    units, queue, kept_of = {}, [], {}
    for gi, group in enumerate(candidate_groups(model, cluster, global_batch, seq_len, cp, ep)):
        count += group.size // len(RECOMPUTE) * len(set(modes))
        if best is None:
            kept_of[gi] = _kept_modes(st, group, modes)
            if not kept_of[gi]:
                continue
        elif not _smallest_may_fit(st, group):
            continue
        for bk, (b, m, chunks) in enumerate(group.batching):
            units[gi, bk] = (group, b, m, chunks)
            if best is not None:
                bound = tokens / microbatch_lower_bound(st, group._plan(group.zero_stages[0], "none", b, m,
                                                                        chunks[0], "1f1b"))
                queue.append((-bound, gi, bk, False))
    if best is None:  # every unit in search order
        for (gi, bk), (group, b, m, chunks) in units.items():
            for j, (p, mem, _) in enumerate(_fitting_batch(st, group, kept_of[gi], b, m, chunks)):
                # tokens/s as estimate() computes it; the Estimate itself is built only for the plans returned
                fits.append((tokens / plan_seconds(st, p), mem["total"], (gi, bk, j), p, mem))
    heapq.heapify(queue)
    while queue:
        neg_bound, gi, bk, refined = heapq.heappop(queue)
        if best.beats(-neg_bound):
            break  # no plan of this unit nor of any later one reaches the k-th best
        group, b, m, chunks = units[gi, bk]
        if not refined:
            heapq.heappush(queue, (-(tokens / _batch_floor(st, group, None, b, m, chunks)), gi, bk, True))
            continue
        if gi not in kept_of:
            kept_of[gi] = _kept_modes(st, group, modes)
        kept = kept_of[gi]
        if not kept:
            continue
        for j, (p, mem, seconds) in enumerate(_fitting_batch(st, group, kept, b, m, chunks, too_slow,
                                                             none_checked=True)):
            fits.append((tokens / seconds, mem["total"], (gi, bk, j), p, mem))
            best.add(fits[-1][0])
    fits.sort(key=lambda f: (-f[0], f[1], f[2]))  # fastest first; ties: less memory, then search order
    if top is not None:
        fits = fits[:top]
    result = SearchResult([estimate(st, p, mem) for _, _, _, p, mem in fits], count)
    if count == 0 and (cp is not None or ep > 1):
        result.message = bi(f"no layout has cp = {cp or 1} and ep = {ep} for {cluster.world_size} GPUs, sequence "
                            f"{seq_len} and a global batch of {global_batch}: cp must divide the sequence and the "
                            f"GPUs of a tensor-parallel group, ep must divide dp × cp. Try a smaller cp or ep.",
                            f"在 {cluster.world_size} 块 GPU、序列长度 {seq_len}、全局批量 {global_batch} 下，没有 "
                            f"cp = {cp or 1}、ep = {ep} 的布局：cp 必须整除序列长度和一个张量并行组之外的 GPU 数，"
                            f"ep 必须整除 dp × cp。请减小 cp 或 ep。", sep="\n")
    elif count == 0:
        result.message = no_layout_message(model, cluster, global_batch)
    elif not fits:
        result.message = bi(f"no plan fits: {model.name} with seq_len {seq_len} on {cluster.world_size} × "
                            f"{cluster.gpu.name}", f"没有可行方案：{model.name}（序列长度 {seq_len}）放不进 "
                            f"{cluster.world_size} 块 {cluster.gpu.name}", sep="\n")
        if suggest:
            result.suggestion = suggest_fix(model, cluster=cluster, global_batch=global_batch, seq_len=seq_len,
                                            precision=precision, optimizer=optimizer, reserve_bytes=reserve_bytes,
                                            fragmentation=fragmentation, swiglu=swiglu, attention=attention,
                                            grad_sync=grad_sync, shared=memo)
    return result


def no_layout_message(model: ModelConfig, cluster: Cluster, global_batch: int) -> str:
    """Why no plan can be formed at all (in the reader's language): every layout's data-parallel degree dp = GPUs / (tp·pp) is
    larger than the global batch, or none of them divides it (each replica must get the same whole number of
    sequences). Names the possible dp values and the smallest global batch that would work."""
    n, node, l = cluster.world_size, cluster.gpus_per_node, model.num_layers
    tps = [tp for tp in _divisors(node) if model.num_heads % tp == 0 and model.kv_heads % tp == 0 and n % tp == 0]
    dps = sorted({n // (tp * pp) for tp in tps for pp in _divisors(n // tp) if pp <= l})
    shown = ", ".join(str(d) for d in dps[:5]) + (", …" if len(dps) > 5 else "")
    head_en = (f"no plan can be formed for {n} GPUs: the data-parallel degree dp = GPUs / (tp × pp), with tp ≤ "
               f"{max(tps)} inside a node and pp ≤ {l} layers, is at least {dps[0]}")
    head_zh = (f"{n} 块 GPU 无法组成任何方案：数据并行度 dp = GPU 数 / (tp × pp)（tp 在节点内、至多 {max(tps)}，"
               f"pp 至多为层数 {l}）至少是 {dps[0]}")
    if global_batch < dps[0]:
        return bi(f"{head_en}, more than the global batch of {global_batch} sequences: every data-parallel replica "
                  f"needs at least one sequence. Use fewer GPUs or a global batch of at least {dps[0]}.",
                  f"{head_zh}，比全局批量的 {global_batch} 条序列还多：每个数据并行副本至少要分到一条序列。"
                  f"请减少 GPU 数，或把全局批量增大到至少 {dps[0]}。", sep="\n")
    better = min(-(-global_batch // d) * d for d in dps)
    return bi(f"{head_en}, and none of the possible dp ({shown}) divides the global batch of {global_batch} sequences: "
              f"every data-parallel replica must get the same whole number of sequences. Use a global batch that a "
              f"possible dp divides (e.g. {better}) or another number of GPUs.",
              f"{head_zh}，而可能的 dp（{shown}）都不能整除全局批量的 {global_batch} 条序列：每个数据并行副本必须分到"
              f"相同的整数条序列。请改用能被某个 dp 整除的全局批量（例如 {better}），或改用别的 GPU 数。", sep="\n")


def any_plan_fits(model: ModelConfig, cluster: Cluster, global_batch: int, seq_len: int, precision: str = "mixed",
                  optimizer: str = "adam", reserve_bytes: float = RESERVE_BYTES,
                  fragmentation: float = FRAGMENTATION, shared: dict | None = None, *, swiglu: str = "unfused",
                  attention: str | None = None, grad_sync: str = "per_step") -> bool:
    """Whether some valid plan fits in memory — the same answer as ``bool(search(...).plans)``, found by looking
    at each group's memory-minimal plans only (module docstring). ``shared``: a memo that calls for the same
    model and recipe may share (:class:`~distlearn.planning.setting.Setting`); ``swiglu``, ``attention`` and
    ``grad_sync``: the options of :func:`search` that change a plan's memory."""
    st = make_setting(model, cluster, global_batch, seq_len, precision, optimizer, COMPUTE_EFFICIENCY,
                      reserve_bytes, fragmentation, swiglu, shared=shared, attention=attention, grad_sync=grad_sync)
    for group, plan in _memory_minimal_plans(st):
        mem = memory_total(st, plan)
        if mem <= st.capacity:
            return True
        if mem <= st.capacity * (1 + ROUNDING_MARGIN):  # within rounding: look at the whole group
            whole = next(g for g in candidate_groups(model, cluster, global_batch, seq_len)
                         if (g.tp, g.cp, g.pp) == (group.tp, group.cp, group.pp))
            if next(_fitting_plans(st, whole), None) is not None:
                return True
    return False


def _memory_minimal_plans(st: Setting):
    """Yield ``(group, plan)`` for the plans :func:`any_plan_fits` looks at, in its order: each group's smallest
    plan at ZeRO 2 or 3 (or 0 when dp·cp = 1) with selective, norm-act or full recomputation (the orderings of
    _kept): the other pairs cannot fit where these do not."""
    for group in candidate_groups(st.model, st.cluster, st.B, st.s, smallest_only=True):
        stages = [z for z in group.zero_stages if z >= 2] or list(group.zero_stages)
        modes = _least_memory_modes(st, group)
        for z in stages:
            for r in modes:
                yield group, group.smallest(z, r)


def _first_fitting_gpu(model: ModelConfig, cluster: Cluster, gpus: list[GPU], args: tuple,
                       memory_options: dict) -> str | None:
    """The name of the first of ``gpus`` on which :func:`any_plan_fits` holds for ``cluster``'s node size and node
    count (``args``: its arguments after the cluster, the shared memo last; ``memory_options``: its keyword
    options), or None: the same answer as asking
    GPU by GPU, with the plans' memory computed once. The plans depend on the GPU count and node size only and
    their bytes on the model, sequence and recipe, not on the GPU: a GPU adds its own reserve and has its own
    capacity. Adding the same reserve to every stage keeps their order (rounding is monotone), so the worst
    stage's bytes plus the reserve are exactly the total :func:`~distlearn.planning.memory.memory_total` gives."""
    global_batch, seq_len, precision, optimizer, reserve_bytes, fragmentation, shared = args
    bytes_without_reserve = None
    for g in gpus:
        c = Cluster(g.with_(gpus_per_node=cluster.gpus_per_node), cluster.num_nodes)
        # the GPU's own setting: its reserve and capacity, and the error any_plan_fits would raise for this GPU
        st = make_setting(model, c, global_batch, seq_len, precision, optimizer, COMPUTE_EFFICIENCY, reserve_bytes,
                          fragmentation, shared=shared, **memory_options)
        if bytes_without_reserve is None:
            bare = make_setting(model, c, global_batch, seq_len, precision, optimizer, COMPUTE_EFFICIENCY, 0.0, 0.0,
                                shared=shared, **memory_options)
            bytes_without_reserve = [memory_total(bare, plan) for _, plan in _memory_minimal_plans(bare)]
        totals = [b + st.reserve for b in bytes_without_reserve]
        if any(t <= st.capacity for t in totals):
            return g.name
        if any(t <= st.capacity * (1 + ROUNDING_MARGIN) for t in totals) and any_plan_fits(model, c, *args,
                                                                                          **memory_options):
            return g.name  # within rounding of the capacity: any_plan_fits looks at the whole group
    return None


def _least_memory_modes(st: Setting, group: Group) -> tuple[str, ...]:
    """The recomputation modes among which a memory-minimal plan of ``group`` is: "full" (it keeps the least per
    layer but adds one layer's full set), and of "selective" and "norm-act" the one whose layers keep fewer
    bytes (both when neither keeps fewer in every kind of layer). A plan's memory grows with the bytes per layer
    alone when the mode is not "full" (everything else is the same), so the mode left out never fits where the
    one kept does not. Selective keeps less with the scores stored, norm-act with flash attention."""
    def make():
        per = _per_layer_bytes(st, group)
        if _keeps_no_more(per["selective"], per["norm-act"]):
            return ("selective", "full")
        if _keeps_no_more(per["norm-act"], per["selective"]):
            return ("norm-act", "full")
        return ("selective", "norm-act", "full")
    return st.cached(("least_modes", group.batching[0][0], group.tp, group.cp), make)


def _longest_fitting(lengths: list[int], fits) -> int | None:
    """The first (longest) of ``lengths`` (descending) for which ``fits`` holds, given that ``fits`` holds for every
    length after the first one that fits (memory grows with the sequence length); bisection."""
    if not lengths or not fits(lengths[-1]):
        return None
    lo, hi = -1, len(lengths) - 1  # lengths[lo] does not fit (lo = -1: none known), lengths[hi] fits
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(lengths[mid]):
            hi = mid
        else:
            lo = mid
    return lengths[hi]


def suggest_fix(model, *, cluster: Cluster, global_batch: int, seq_len: int, precision: str = "mixed",
                optimizer: str = "adam", reserve_bytes: float = RESERVE_BYTES, fragmentation: float = FRAGMENTATION,
                max_factor: int = 64, swiglu: str = "unfused", attention: str | None = None,
                grad_sync: str = "per_step", shared: dict | None = None) -> dict:
    """The smallest single change that makes some plan fit, for each kind of change:

    ``num_gpus`` (on part of a node: 2×, 4×, … GPUs up to a whole node; then the fewest whole nodes, up to
    ``max_factor`` × today's, found by doubling then bisecting), ``seq_len`` (the longest of today's halvings
    seq_len // 2, seq_len // 4, … down to 1 that fits), ``gpu`` (the first preset with more memory that fits). A
    key is ``None`` when no such change fits. ``message`` says it in the reader's language. ``swiglu``,
    ``attention`` and ``grad_sync``: as in :func:`search` (they change a plan's memory). ``shared``: a memo
    shared with the caller's settings of the same model and recipe (:class:`~distlearn.planning.setting.Setting`;
    :func:`search` passes its own), ``None`` for a new one.
    """
    model = get_preset(model) if isinstance(model, str) else model
    args = (global_batch, seq_len, precision, optimizer, reserve_bytes, fragmentation,
            {} if shared is None else shared)  # + a shared memo
    memory_options = dict(swiglu=swiglu, attention=attention, grad_sync=grad_sync)
    out = {"num_gpus": None, "seq_len": None, "gpu": None}
    node = cluster.gpus_per_node
    full = GPUS.get(cluster.gpu.name)
    node_size = full.gpus_per_node if full is not None else node
    if cluster.num_nodes == 1 and node < node_size:  # part of a node: try 2×, 4×, … GPUs up to a whole node
        k = node * 2
        while k <= node_size and out["num_gpus"] is None:
            bigger = make_cluster(cluster.gpu.with_(gpus_per_node=node_size), k)
            if any_plan_fits(model, bigger, *args, **memory_options):
                out["num_gpus"] = k
            k *= 2
        grow = Cluster(cluster.gpu.with_(gpus_per_node=node_size), 1)
        node = node_size
    else:
        grow = cluster
    # lo: known not to fit; double the nodes, then bisect (whether some plan fits grows with the GPU count)
    lo, hi = grow.num_nodes, None
    nodes = grow.num_nodes * 2
    while out["num_gpus"] is None and nodes <= grow.num_nodes * max_factor:
        if any_plan_fits(model, Cluster(grow.gpu, nodes), *args, **memory_options):
            hi = nodes
            break
        lo, nodes = nodes, nodes * 2
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if any_plan_fits(model, Cluster(grow.gpu, mid), *args, **memory_options):
            hi = mid
        else:
            lo = mid
    if hi is not None:
        out["num_gpus"] = hi * node
    lengths, s = [], seq_len // 2
    while s >= 1:
        lengths.append(s)
        s //= 2
    out["seq_len"] = _longest_fitting(lengths, lambda s: any_plan_fits(model, cluster, global_batch, s, *args[2:],
                                                                       **memory_options))
    larger = [g for g in sorted(GPUS.values(), key=lambda g: g.memory_bytes)
              if g.memory_bytes > cluster.gpu.memory_bytes]
    out["gpu"] = _first_fitting_gpu(model, cluster, larger, args, memory_options)
    en, zh = [], []
    if out["num_gpus"]:
        en.append(f"use {out['num_gpus']} GPUs")
        zh.append(f"使用 {out['num_gpus']} 块 GPU")
    if out["seq_len"]:
        en.append(f"shorten seq_len to {out['seq_len']}")
        zh.append(f"把序列长度缩短到 {out['seq_len']}")
    if out["gpu"]:
        en.append(f"use {out['gpu']} GPUs")
        zh.append(f"改用 {out['gpu']}")
    out["message"] = bi(("Smallest changes that fit: " + "; or ".join(en) + ".") if en else
                        "No single change tried (more GPUs, shorter sequences, a larger GPU) fits.",
                        ("能放下的最小改动：" + "；或".join(zh) + "。") if zh else
                        "尝试的单项改动（更多 GPU、更短序列、更大显存）都放不下。", sep="\n")
    return out

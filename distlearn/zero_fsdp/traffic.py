"""Data-parallel communication per optimizer step of DDP, ZeRO 1/2/3 and FSDP2, as a function of the ZeRO stage and
the number ``m`` of gradient-accumulation micro-batches: which collectives run, when, and how many bytes each rank
sends. Chapter 06's table and prose, its explorer (:mod:`distlearn.zero_fsdp.explorer`) and the planner
(:mod:`distlearn.planning`) all take their volumes from :func:`step_collectives`.

Every collective below moves the whole model's Ψ elements (parameters or gradients); with a ring, an all-gather or
a reduce-scatter of Ψ elements makes each rank send (n−1)/n·Ψ elements, an all-reduce 2(n−1)/n·Ψ (chapter 02).
So a step's *volume* is counted in units of Ψ: 1 per all-gather or reduce-scatter, 2 per all-reduce.

Three engines (``engine``):

``"zero"`` — the ZeRO design (Rajbhandari et al. 2020, §7.2): gradients are **reduce-scattered** (each slice
    summed onto the rank that owns it), updated parameters all-gathered.

    ========  ===================================================  ==================
    stage     collectives in one step of m micro-batches            volume (Ψ)
    ========  ===================================================  ==================
    0 (DDP)   all-reduce(grads) once, at the last micro-batch       2       (no_sync on the others)
    1         reduce-scatter(grads) once + all-gather(params)       2
    2         reduce-scatter(grads) every micro-batch + all-gather  m + 1
    3         all-gather fwd + all-gather bwd + reduce-scatter,     3m
              every micro-batch
    ========  ===================================================  ==================

    Stage 1 keeps full gradients, so it can sum the micro-batches locally and reduce once; stage 2 keeps only its
    own slice of the gradients, so each micro-batch's gradients must be reduced before they are freed; stage 3
    gathers the parameters for each micro-batch's forward and again for its backward. Without gradient
    accumulation (m = 1) this is ZeRO §7's 2Ψ, 2Ψ, 2Ψ, 3Ψ.

``"deepspeed"`` — what DeepSpeed 0.19.8 issues (``deepspeed/runtime/zero/stage_1_and_2.py``, ``stage3.py``,
    ``engine.py``; counted on the real engine in ``tests/test_zero_comm.py``):

    - stage 0: the engine all-reduces the gradients only at the accumulation boundary (``allreduce_gradients``);
    - stages 1 and 2 reduce in buckets of ``reduce_bucket_size`` elements and never call a reduce-scatter. With
      the default ``use_multi_rank_bucket_allreduce: true`` each bucket is **all-reduced** and each rank keeps
      the slices it owns (``average_tensor`` → ``allreduce_and_scatter``): volume 2 per reduction. With
      ``false`` each owner's slice is ``dist.reduce``-d to it, one Reduce per owner: the same bytes as a
      reduce-scatter, volume 1. Stage 1 reduces only at the boundary (``reduce_ready_partitions_and_remove_grads``
      returns early otherwise), stage 2 on every micro-batch; both all-gather the updated 16-bit parameters after
      the step (``all_gather_dp_groups``);
    - stage 3: a real reduce-scatter (``reduce_scatter_coalesced``) every micro-batch, parameters all-gathered per
      module for forward and backward. The count assumes ``stage3_param_persistence_threshold: 0`` and
      ``stage3_max_reuse_distance: 0``: with the defaults (1e5 elements, 1e9) small parameters stay whole and a
      parameter reused soon is not released, so DeepSpeed gathers less than 2m·Ψ.

``"fsdp2"`` — ``torch.distributed.fsdp.fully_shard`` (torch 2.13, ``_fully_shard/``): stage 2 is
    ``reshard_after_forward=False`` (one all-gather per micro-batch: the parameters are still resharded after
    backward), stage 3 ``reshard_after_forward=True`` (all-gather in forward and again in backward). Gradients are
    reduce-scattered on every micro-batch unless ``set_requires_gradient_sync(False)`` is used on all but the last
    (``grad_sync_every_microbatch=False``; the gradients then accumulate unsharded). Stage 0 is DDP, which
    all-reduces on every backward unless ``no_sync()`` is used. The count assumes the root module is resharded
    too: FSDP2's default ``reshard_after_forward=None`` keeps the root unsharded from forward to backward, so its
    parameters are not gathered a second time. Stage 1 has no FSDP counterpart.

Units: elements and bytes; GB = 1e9 bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core.i18n import bi
from distlearn.core.validate import check_bool, DistlearnValueError, check_choice, check_int, check_number
from distlearn.core.guard import read_only

ENGINES = ("zero", "deepspeed", "fsdp2")
OPS = ("all_reduce", "reduce_scatter", "all_gather")
PHASES = ("forward", "backward", "last_backward", "after_step")
VOLUME = read_only({"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1})   # Ψ-units per collective of Ψ elements (ring)

_ZH_OP = {"all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter", "all_gather": "AllGather"}
_ZH_PHASE = {"forward": "每个微批次的前向", "backward": "每个微批次的反向", "last_backward": "最后一个微批次的反向",
             "after_step": "优化器更新之后"}
_EN_PHASE = {"forward": "every micro-batch's forward", "backward": "every micro-batch's backward",
             "last_backward": "the last micro-batch's backward", "after_step": "after the optimizer step"}


@dataclass(frozen=True)
class Collective:
    """One kind of collective in a step: ``op`` (all_reduce, reduce_scatter or all_gather) of ``what``
    ("gradients" or "parameters"), each over all Ψ elements, issued ``times`` times per optimizer step in
    ``phase`` (forward / backward of every micro-batch, the last micro-batch's backward, or after the step)."""

    op: str
    what: str
    phase: str
    times: int

    @property
    def volume(self) -> int:
        """Ψ-units this kind of collective moves per step: times × (2 for an all-reduce, else 1)."""
        return self.times * VOLUME[self.op]

    def describe(self) -> str:
        """``"3 × reduce-scatter(gradients), every micro-batch's backward"`` in the current language."""
        zh_what = "梯度" if self.what == "gradients" else "参数"
        return bi(f"{self.times} × {self.op.replace('_', '-')}({self.what}), {_EN_PHASE[self.phase]}",
                  f"{self.times} × {_ZH_OP[self.op]}（{zh_what}），{_ZH_PHASE[self.phase]}")


@dataclass(frozen=True)
class StepComm:
    """The data-parallel collectives of one optimizer step (``zero_stage``, ``num_microbatches`` = m, ``engine``)."""

    zero_stage: int
    num_microbatches: int
    engine: str
    collectives: tuple[Collective, ...]

    @property
    def volume_psi(self) -> int:
        """The step's volume in units of Ψ (ZeRO §7's 2, 2, 2, 3 for m = 1 and the ``"zero"`` engine)."""
        return sum(c.volume for c in self.collectives)

    def count(self, op: str) -> int:
        """How many collectives of Ψ elements of ``op`` the step issues."""
        check_choice("op", op, OPS)
        return sum(c.times for c in self.collectives if c.op == op)

    def elements(self, num_params: int) -> dict[str, int]:
        """Total message elements per op (all-reduce buffer, all-gather output, reduce-scatter input), the number
        a collective counter on the real engine reads: ``{op: count(op) · Ψ}`` for the ops that occur."""
        num_params = check_int("num_params", num_params, minimum=1)
        return {op: self.count(op) * num_params for op in OPS if self.count(op)}

    def bytes_per_rank(self, num_params: float, dp: int, bytes_per_elem: float = 2) -> float:
        """Bytes each of ``dp`` ranks sends in the step with ring collectives: volume · (dp−1)/dp · Ψ · bytes."""
        num_params = check_number("num_params", num_params, minimum=0)
        dp = check_int("dp", dp, minimum=1)
        bytes_per_elem = check_number("bytes_per_elem", bytes_per_elem, minimum=0, strict_min=True)
        return self.volume_psi * (dp - 1) / dp * num_params * bytes_per_elem

    def by_phase(self) -> dict[str, list[Collective]]:
        """The collectives grouped by phase (only phases that have some), in :data:`PHASES` order."""
        out: dict[str, list[Collective]] = {}
        for phase in PHASES:
            cs = [c for c in self.collectives if c.phase == phase]
            if cs:
                out[phase] = cs
        return out

    def formula(self) -> str:
        """The volume as a formula in m: ``"2"``, ``"m + 1"``, ``"3m"``, ``"2m + 1"``… (engine-independent text)."""
        per_mb = sum(VOLUME[c.op] for c in self.collectives if c.phase in ("forward", "backward"))
        once = self.volume_psi - per_mb * self.num_microbatches
        parts = ([("m" if per_mb == 1 else f"{per_mb}m")] if per_mb else []) + ([str(once)] if once else [])
        return " + ".join(parts) or "0"


def _default_sync(zero_stage: int, engine: str) -> bool:
    if zero_stage == 0:
        return engine == "fsdp2"        # DDP syncs every backward unless no_sync(); DeepSpeed's engine defers
    return zero_stage >= 2             # stage 1 reduces at the boundary; 2 and 3 on every micro-batch


def step_collectives(zero_stage: int, num_microbatches: int = 1, *, engine: str = "zero",
                     grad_sync_every_microbatch: bool | None = None,
                     multi_rank_bucket_allreduce: bool = True) -> StepComm:
    """The collectives of one optimizer step of ``num_microbatches`` micro-batches (module docstring's tables).

    - ``zero_stage``: 0 (DDP) to 3; ``engine``: ``"zero"`` (the paper's design), ``"deepspeed"`` (DeepSpeed
      0.19.8) or ``"fsdp2"``;
    - ``grad_sync_every_microbatch``: ``None`` = the engine's default; ``False`` = reduce only in the last
      micro-batch (DDP ``no_sync``, FSDP2 ``set_requires_gradient_sync(False)``), allowed for stage 0 and for
      FSDP2's stages 2–3; ``True`` for stage 0 = sync on every backward;
    - ``multi_rank_bucket_allreduce``: DeepSpeed stages 1–2 only (``use_multi_rank_bucket_allreduce``).

    Raises DistlearnValueError for stage 1 under FSDP2 (no counterpart) and for a gradient-sync setting the engine
    does not have (ZeRO-1 always reduces once, at the boundary; ZeRO-2/3 in DeepSpeed on every micro-batch).
    """
    multi_rank_bucket_allreduce = check_bool("multi_rank_bucket_allreduce", multi_rank_bucket_allreduce)
    zero_stage = check_int("zero_stage", zero_stage, minimum=0, maximum=3)
    m = check_int("num_microbatches", num_microbatches, minimum=1)
    check_choice("engine", engine, ENGINES)
    if engine == "fsdp2" and zero_stage == 1:
        raise DistlearnValueError("zero_stage", "FSDP has no ZeRO-1 mode (it always shards gradients with the "
                                                "optimizer states); use 0, 2 or 3 with engine='fsdp2'.",
                                  "FSDP 没有 ZeRO-1 模式（梯度总是与优化器状态一起分片）；engine='fsdp2' 时请用 0、2 或 3。")
    default = _default_sync(zero_stage, engine)
    sync = default if grad_sync_every_microbatch is None else bool(grad_sync_every_microbatch)
    if sync != default and zero_stage > 0 and not (engine == "fsdp2" and not sync):
        raise DistlearnValueError(
            "grad_sync_every_microbatch",
            f"ZeRO-{zero_stage} under engine={engine!r} reduces gradients "
            f"{'on every micro-batch' if default else 'once, at the accumulation boundary'}; only DDP (stage 0) "
            "and FSDP2 (set_requires_gradient_sync) let you choose.",
            f"engine={engine!r} 下的 ZeRO-{zero_stage} {'每个微批次都规约梯度' if default else '只在梯度累积边界规约一次'}；"
            "只有 DDP（阶段 0）和 FSDP2（set_requires_gradient_sync）可以选择。")
    grad_phase, grad_times = ("backward", m) if sync else ("last_backward", 1)
    if zero_stage == 0:
        return StepComm(0, m, engine, (Collective("all_reduce", "gradients", grad_phase, grad_times),))
    if zero_stage in (1, 2):
        reduce_op = "all_reduce" if engine == "deepspeed" and multi_rank_bucket_allreduce else "reduce_scatter"
        grad = Collective(reduce_op, "gradients", grad_phase, grad_times)
        if engine == "fsdp2":        # stage 2 = reshard_after_forward=False: gather in every forward
            return StepComm(2, m, engine, (Collective("all_gather", "parameters", "forward", m), grad))
        return StepComm(zero_stage, m, engine, (grad, Collective("all_gather", "parameters", "after_step", 1)))
    return StepComm(3, m, engine, (Collective("all_gather", "parameters", "forward", m),
                                   Collective("all_gather", "parameters", "backward", m),
                                   Collective("reduce_scatter", "gradients", grad_phase, grad_times)))


def element_differences(measured: dict, predicted: dict) -> dict[str, tuple[int, int]]:
    """Where a real engine's count differs from a prediction: ``{op: (measured, predicted)}`` for every op whose
    total message elements differ, an op missing on one side counting 0. ``measured`` is what a collective counter
    read (``distlearn.zero_fsdp.lab_traffic``: ``{"all_gather": 3 * Ψ, ...}``), ``predicted`` typically
    ``step_collectives(...).elements(Ψ)``. Empty when they agree exactly; the counts are whole numbers of elements,
    so there is no tolerance. Raises DistlearnValueError for a count that is not a whole number ≥ 0."""
    counts = []
    for name, side in (("measured", measured), ("predicted", predicted)):
        if not isinstance(side, dict):
            raise DistlearnValueError(name, f"{name} must be a dict {{op: elements}}, got {type(side).__name__}.",
                                      f"{name} 必须是字典 {{op: 元素数}}，收到的是 {type(side).__name__}。")
        counts.append({op: check_int(f"{name}[{op!r}]", n, minimum=0) for op, n in side.items()})
    got, want = counts
    return {op: (got.get(op, 0), want.get(op, 0)) for op in sorted(set(got) | set(want))
            if got.get(op, 0) != want.get(op, 0)}


def verdict(measured: dict, predicted: dict) -> str:
    """"✓" when the engine moved exactly the predicted elements in every kind of collective
    (:func:`element_differences` is empty), else "✗": the verdict column of chapter 06's FSDP2 table."""
    return "✗" if element_differences(measured, predicted) else "✓"


__all__ = ["ENGINES", "OPS", "PHASES", "VOLUME", "Collective", "StepComm", "step_collectives",
           "element_differences", "verdict"]

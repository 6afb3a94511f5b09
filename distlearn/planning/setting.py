"""What a plan is (:class:`Plan`), what does not depend on it (:class:`Setting`: model, cluster, batch, sequence,
recipe, with memo tables for what many plans share), and the planner's stated constants.

A *plan* fixes the tensor-parallel degree ``tp`` (inside one node), the context-parallel degree ``cp``, the
pipeline degree ``pp`` (and, optionally, uneven ``stage_layers``), the data-parallel degree
``dp = world_size / (tp·cp·pp)``, the expert-parallel degree ``ep`` of a mixture-of-experts model (inside dp·cp),
the ZeRO stage, the recomputation mode, the micro-batch size ``b`` and number ``m = global_batch / (dp·b)``, the
number of interleaved chunks ``v`` and the pipeline schedule. Ranks are ordered tp (innermost), dp, pp as in
Megatron-LM.

The constants are assumptions, each stated once: :data:`RESERVE_BYTES` and :data:`FRAGMENTATION` (memory held
back per GPU), :data:`ALPHA` (latency per message of the α-β model of :mod:`distlearn.core.topology`, Thakur et al.
2005) and :data:`COMPUTE_EFFICIENCY` (the flat time model's share of peak). :func:`make_setting` validates a
setting's inputs once; the formulas that read a :class:`Setting` (:mod:`~distlearn.planning.memory`,
:mod:`~distlearn.planning.step_time`) are arithmetic only.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from distlearn.activation_memory.formulas import (ATTENTION, RECOMPUTE_MODES, SWIGLU, config_layer_bytes,
                                                  default_attention)
from distlearn.core.hardware import GPU, Cluster, make_cluster
from distlearn.core.topology import Topology, best_collective, dispatch_cost, per_domain as group_per_domain
from distlearn.core.models import PRESETS, ModelConfig, get_preset
from distlearn.core.validate import (MAX_WORLD_SIZE, DistlearnValueError, check_bool, check_choice, check_record, check_int,
                                     check_number, checks, each, record, whole)
from distlearn.memory.formulas import ModelStateBytes, bytes_per_param, model_state_bytes
from distlearn.pipeline_parallel.schedules import partition_layers
from distlearn.planning.flops import (FP8_PRECISIONS, PLANNER_PRECISIONS, ModelCounts, Peaks, StageSums,
                                      model_counts)
from distlearn.precision.fp8_recipes import (bytes_per_param as recipe_bytes_per_param, config_layer_fp8_bytes,
                                            fp8_transpose_kept,
                                            recipe_state_bytes)
from distlearn.zero_fsdp.traffic import Collective, step_collectives
from distlearn.core.guard import read_only

COMPUTE_EFFICIENCY = 0.55  # the FLAT model's share of peak (efficiency= given, GPUs without hbm_bw, the rooflines'
#                            C): an assumption; the default time model is distlearn.planning.kernels
RESERVE_BYTES = 2e9        # bytes per GPU: CUDA context (~0.5-1 GB), cuBLAS workspaces, NCCL buffers (GB = 1e9)
FRAGMENTATION = 0.10       # share of device memory lost to allocator fragmentation and temporary buffers
ALPHA = 5e-6               # latency per ring step, seconds (order of magnitude of NCCL's per-hop latency)
# pipeline schedules of a plan: 1F1B (interleaved with num_chunks > 1), and chapter 05's ZB-H1 (Qi et al. 2023),
# simulated by distlearn.pipeline_parallel.zero_bubble; the V-shaped and DualPipe schedules move the logits to
# another rank and are not plan options yet
PLAN_SCHEDULES = ("1f1b", "zb-h1")
# when ZeRO 1-3 reduce the gradients under pipeline parallelism (a Setting option, make_setting(grad_sync=...)):
# "per_step" as torch.distributed.pipelining does with FSDP2 (torch 2.13, stage.py backward_maybe_with_nosync:
# set_requires_gradient_sync(False) and set_reshard_after_backward(False) for every micro-batch, one
# reduce-scatter per step in perform_reduce_grad; torchtitan; chapter 12), the stage's gradients held unsharded
# until the last micro-batch; "per_microbatch": reduce-scattered after every micro-batch's backward and kept
# sharded (DeepSpeed's ZeRO-2, and a reading of Llama 3 §3.3.2)
GRAD_SYNCS = ("per_step", "per_microbatch")


@dataclass(frozen=True)
class Overlap:
    """A run's communication overlaps and DeepSeek-V3's FP8 switches (make_setting(overlap=...)); every field off
    is the planner's plain model (each collective exposed except as the module docstring of
    :mod:`distlearn.planning.step_time` says).

    - ``tp_comm``: Megatron-Core ``--tp-comm-overlap`` (Transformer Engine userbuffers: the sequence-parallel
      all-gather split into chunks and pipelined with the column-parallel GEMM that consumes it, the reduce-scatter
      with the row-parallel GEMM that produces it; Wang et al. 2023, "Overlap communication with dependent
      computation", and torchtitan's async TP do the same): each collective is exposed only beyond the GEMM it
      feeds or follows (in backward: that linear layer's two GEMMs),
      :func:`~distlearn.planning.step_time.tp_exposed_seconds`.
    - ``grad_reduce``: Megatron-Core ``--overlap-grad-reduce`` (distributed/param_and_grad_buffer.py: a bucket's
      reduce-scatter starts once its gradients are ready; with pp > 1 only during the last micro-batch's backward,
      ``is_last_microbatch``): the step's gradient reduce-scatter hides behind one micro-batch's backward (the
      planner already hides it so when pp = 1).
    - ``param_gather``: Megatron-Core ``--overlap-param-gather`` (distributed optimizer: the all-gather of the
      updated parameters, bucket by bucket, is dispatched with the next step's forward, ``forward_pre_hook``): the
      after-step all-gather hides behind one micro-batch's forward.
    - ``fp8_dispatch``: the FP8 recipe's all-to-all bytes of :data:`distlearn.precision.fp8_recipes.COMMUNICATION`
      (``False``: every all-to-all in the activation dtype, for DeepSeek-V3's step-by-step account).
    - ``fp8_block_ceiling``: the fine-grained FP8 GEMM ceiling of :data:`distlearn.planning.kernels.FP8_BLOCK_CEILING`
      for the recipes of :data:`~distlearn.planning.kernels.FINE_GRAINED_FP8_RECIPES` (``False``: the per-tensor FP8
      ceiling, :data:`~distlearn.planning.kernels.FP8_GEMM_CEILING`).
    - ``grad_reduce_exposed``: Megatron-LM 2021's default ``--DDP-impl local`` (``megatron/training.py``,
      ``train_step``: ``model.allreduce_gradients()`` runs after ``forward_backward_func`` has finished the whole
      backward): the step's gradient all-reduce is exposed even when ``pp = 1`` (off: hidden behind the last
      micro-batch's backward, as torch DDP's buckets do). It overrides the window ``grad_reduce`` would give."""

    tp_comm: bool = False
    grad_reduce: bool = False
    param_gather: bool = False
    fp8_dispatch: bool = True
    fp8_block_ceiling: bool = True
    grad_reduce_exposed: bool = False

    def __post_init__(self):
        for name in ("tp_comm", "grad_reduce", "param_gather", "fp8_dispatch", "fp8_block_ceiling",
                     "grad_reduce_exposed"):
            check_bool(f"overlap.{name}", getattr(self, name))


NO_OVERLAP = Overlap()
# the range of each integer field of a Plan (Plan.__post_init__ refuses others; the bubble functions of
# distlearn.planning.step_time take the same pp, num_microbatches and num_chunks): far beyond any real run (a degree
# up to 2**20 GPUs, 2**20 micro-batches, 1024 interleaved chunks), small enough to refuse a typo such as 10**12
PLAN_RANGES = read_only({
    "dp": (1, MAX_WORLD_SIZE), "tp": (1, MAX_WORLD_SIZE), "pp": (1, MAX_WORLD_SIZE), "cp": (1, MAX_WORLD_SIZE),
    "ep": (1, MAX_WORLD_SIZE), "zero_stage": (0, 3), "micro_batch_size": (1, 2 ** 20),
    "num_microbatches": (1, 2 ** 20), "num_chunks": (1, 1024)})
# Setting memo keys whose values depend on the model, sequence length and recipe only (never on the GPU or the
# cluster; "model_counts" names the batch in its key), which settings built for one search's suggestions share.
# A shared memo names the model by its value (dataclasses.astuple), so an equal model built anew shares the
# entries and a different one (even at the same address) never reads them
SHAREABLE = frozenset({"act", "act_moe", "moe_as_dense", "stage", "states", "candidate_stages", "peak_layers",
                       "zb_closed", "model_counts", "stage_acts", "stage_states", "per_layer_bytes", "least_modes"})


@dataclass(frozen=True)
class Plan:
    """One way to run: degrees, ZeRO stage, recomputation, micro-batching and interleaving.

    ``cp``: context-parallel degree (chapter 10; each rank keeps ``seq_len / cp`` tokens of every sequence, K and V
    all-gathered per layer as in Llama 3 §3.3.2). ``stage_layers``: layers per pipeline stage when they are not
    :func:`distlearn.pipeline_parallel.schedules.partition_layers`'s split, e.g. Llama 3 405B's 126 layers on 16
    stages with one layer fewer on the first and the last (``(7,) + (8,) * 14 + (7,)``, Llama 3 §3.3.2); with
    interleaving each stage's layers are cut into ``num_chunks`` chunks that may differ by one layer.
    ``schedule``: one of :data:`PLAN_SCHEDULES`. GPUs = dp·tp·cp·pp.

    Each field is checked on construction (:meth:`__post_init__`, as torchtitan's ``ParallelDims``): the integer
    fields whole numbers in their :data:`PLAN_RANGES` range (``zero_stage`` 0–3), ``recompute`` one of
    :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES`, ``sequence_parallel`` a bool, ``stage_layers``
    None or a sequence of whole numbers ≥ 0 (kept as a tuple), ``schedule`` one of :data:`PLAN_SCHEDULES`; else
    DistlearnValueError naming the field and its allowed range. What depends on the model and the cluster (dp·tp·cp·pp
    GPUs, tp inside a node …) is :func:`distlearn.planning.evaluation.validate_plan`'s. The search builds its
    candidates from values it chose with :meth:`unchecked` (thousands per search)."""

    dp: int
    tp: int
    pp: int
    zero_stage: int = 0
    recompute: str = "full"
    micro_batch_size: int = 1
    num_microbatches: int = 1
    num_chunks: int = 1
    sequence_parallel: bool = True
    cp: int = 1
    stage_layers: tuple[int, ...] | None = None
    ep: int = 1
    schedule: str = "1f1b"

    def __post_init__(self):
        check_plan_fields(self)

    @classmethod
    def unchecked(cls, *values) -> "Plan":
        """A plan of the field values ``values`` (all thirteen, in field order) built without :meth:`__post_init__`'s
        checks: for the search, whose values come from the model, the cluster and its own loops (thousands per
        search; issue 31: validate once at the boundary, keep inner loops arithmetic). Not for a student's plan."""
        plan = object.__new__(cls)
        plan.__dict__.update(zip(_PLAN_FIELDS, values))
        return plan

    @property
    def world_size(self) -> int:
        return self.dp * self.tp * self.cp * self.pp

    def describe(self) -> str:
        v = f" v={self.num_chunks}" if self.num_chunks > 1 else ""
        cp = f" cp={self.cp}" if self.cp > 1 else ""
        layers = f" stages={list(self.stage_layers)}" if self.stage_layers else ""
        cp += f" ep={self.ep}" if self.ep > 1 else ""
        v += f" {self.schedule}" if self.schedule != "1f1b" else ""
        return (f"dp={self.dp} tp={self.tp}{cp} pp={self.pp}{v} zero={self.zero_stage} recompute={self.recompute} "
                f"b={self.micro_batch_size} m={self.num_microbatches}{layers}")


_PLAN_FIELDS = tuple(f.name for f in dataclasses.fields(Plan))


def check_plan_fields(p: Plan) -> None:
    """Check what a plan says by itself (see :class:`Plan`); ``stage_layers`` given as a list is stored as a tuple.
    Raises DistlearnValueError naming the field (``plan`` when ``p`` is not a :class:`Plan`, e.g. ``"dp=8"``)."""
    if not isinstance(p, Plan):
        raise DistlearnValueError("plan", f"plan must be a Plan, e.g. Plan(dp=8, tp=1, pp=1); got {p!r} "
                                          f"({type(p).__name__}).",
                                  f"plan 必须是 Plan 对象，例如 Plan(dp=8, tp=1, pp=1)；收到 {p!r}"
                                  f"（{type(p).__name__}）。")
    for name, (low, high) in PLAN_RANGES.items():
        check_int(name, getattr(p, name), minimum=low, maximum=high)
    check_choice("recompute", p.recompute, RECOMPUTE_MODES)
    check_bool("sequence_parallel", p.sequence_parallel)
    check_choice("schedule", p.schedule, PLAN_SCHEDULES)
    layers = p.stage_layers
    if layers is None:
        return
    if isinstance(layers, list):
        layers = tuple(layers)
    if (not isinstance(layers, tuple) or not 1 <= len(layers) <= PLAN_RANGES["pp"][1]
            or not all(type(n) is int and 0 <= n <= MAX_WORLD_SIZE for n in layers)):
        raise DistlearnValueError(
            "stage_layers", f"stage_layers must be None or a tuple of whole numbers in [0, {MAX_WORLD_SIZE}] (layers "
                            f"per pipeline stage, one per stage), e.g. (7, 8, 8, 7); got {p.stage_layers!r}.",
            f"stage_layers 必须是 None，或由 [0, {MAX_WORLD_SIZE}] 范围内的整数组成的元组（每个流水线阶段的层数，"
            f"每个阶段一个），例如 (7, 8, 8, 7)；收到 {p.stage_layers!r}。")
    if layers is not p.stage_layers:
        object.__setattr__(p, "stage_layers", layers)


class Setting:
    """Everything about (model, cluster, batch, sequence, recipe) that does not depend on the plan, computed once,
    and memo tables for the parts that many plans share (activations per layer, model states, collective times).

    Build it with :func:`make_setting`, which validates the arguments. ``memo`` maps a key (a tuple whose first
    item names the quantity) to its value; :meth:`cached` fills it. ``shared``: a dict that settings of the same
    model, sequence and recipe (a search's suggestions) share for the keys of :data:`SHAREABLE`."""

    def __init__(self, model: ModelConfig, cluster: Cluster, global_batch: int, seq_len: int, precision: str,
                 optimizer: str, efficiency: float, reserve_bytes: float, fragmentation: float,
                 swiglu: str = "unfused", shared: dict | None = None, attention: str | None = None,
                 grad_sync: str = "per_step", causal: bool = True, overlap: "Overlap | None" = None):
        self.model, self.cluster = model, cluster
        # the attention kernel: the model's default (GPT presets materialise the scores, Llama runs flash) unless
        # the run says otherwise (a 2024 Megatron-Core GPT runs fused flash attention)
        self.attention = default_attention(model) if attention is None else attention
        # memo entries that depend on the model, sequence and recipe only, not on the GPU or the cluster: settings
        # built for the same model and recipe (the suggestions of a search) may share them, keyed by their values
        self._shared = shared
        self._shared_key = None if shared is None else (
            type(model), dataclasses.astuple(model), seq_len, precision, optimizer, swiglu, self.attention, grad_sync,
            causal, None if overlap is None else dataclasses.astuple(overlap))
        self.swiglu = swiglu  # Llama MLP kernel: "unfused" (the eager module) or "fused" (Megatron-Core's)
        self.grad_sync = grad_sync  # GRAD_SYNCS: when ZeRO 1-3 reduce gradients under pipeline parallelism
        self.causal = causal  # a flash kernel skips the blocks the causal mask hides (kernels.causal_fraction)
        self.overlap = NO_OVERLAP if overlap is None else overlap  # the run's communication overlaps (Overlap)
        self.B, self.s = global_batch, seq_len
        self.precision, self.optimizer = precision, optimizer
        # FLOP/s of the linear layers' GEMMs, and of the attention core, logits and everything else: 16-bit (fp32
        # for the fp32 recipe); FP8 recipes keep them in bf16 (DeepSeek-V3 §3.3.1, Transformer Engine: only Linear
        # layers run in FP8)
        self.gemm_peak, self.peak = Peaks.of(cluster.gpu, precision)
        self.fp8 = precision in FP8_PRECISIONS
        # TE keeps a transposed FP8 weight copy on Hopper, none on Blackwell (fp8_recipes.fp8_transpose_kept)
        self.fp8_transpose = fp8_transpose_kept(cluster.gpu.name)
        if self.fp8:  # the recipe's own bytes per parameter (its optimizer is part of the recipe)
            self.per = recipe_bytes_per_param(precision, fp8_transpose=self.fp8_transpose)
        else:
            self.per = bytes_per_param(precision, optimizer)
        self.act_bytes = 4 if precision == "fp32" else 2  # activations in the dtype the layers compute in
        # time model: the kernel model of distlearn.planning.kernels unless a flat efficiency is given (or the GPU's
        # HBM bandwidth is unknown: then the flat COMPUTE_EFFICIENCY)
        self.kernel_model = efficiency is None and cluster.gpu.hbm_bw is not None
        self.eff = COMPUTE_EFFICIENCY if efficiency is None else efficiency
        self.alpha = ALPHA  # seconds per ring step of every collective and p2p message
        # where the groups sit (distlearn.core.topology, chapter 02): NVLink domains of gpus_per_node GPUs (8 for
        # DGX, 72 for GB200 NVL72), one NIC per GPU between them, α = ALPHA per message on both
        g = cluster.gpu
        host = 8 if cluster.gpus_per_node % 8 == 0 else cluster.gpus_per_node
        self.topology = Topology(g.name, cluster.gpus_per_node, g.nvlink_bw, g.network_bw, gpus_per_host=host,
                                 nics_per_host=host, alpha_intra=ALPHA, alpha_network=ALPHA, source=g.source)
        g = cluster.gpu
        self.capacity = g.memory_bytes
        self.reserve = reserve_bytes + fragmentation * g.memory_bytes
        self.memo: dict = {}
        # the model's parameter and FLOP counts (the same for every setting of one model, sequence and batch)
        self.counts: ModelCounts = self.cached(("model_counts", global_batch),
                                               lambda: model_counts(model, global_batch, seq_len))

    def cached(self, key: tuple, make):
        """``memo[key]``, computed by ``make()`` the first time (taken from the shared memo when ``key[0]`` is in
        :data:`SHAREABLE` and another setting of the same model, sequence and recipe computed it)."""
        try:
            return self.memo[key]
        except KeyError:
            pass
        if self._shared is not None and key[0] in SHAREABLE:
            full = (key, self._shared_key)
            try:
                value = self._shared[full]
            except KeyError:
                value = self._shared[full] = make()
        else:
            value = make()
        self.memo[key] = value
        return value

    def act(self, b: int, tp: int, sp: bool, recompute: str, cp: int = 1) -> float:
        """Bytes of one layer's activations per GPU: :func:`~distlearn.activation_memory.formulas.config_layer_bytes`
        for this model, sequence and recipe (under an FP8 recipe the linear layers' inputs cached in FP8,
        :func:`~distlearn.precision.fp8_recipes.config_layer_fp8_bytes`); with context parallelism the layer of ``seq_len / cp`` tokens with
        flash-style attention (:func:`distlearn.context_parallel.simulation.cp_layer_activation_table` is the same
        table)."""
        hit = self.memo.get(("act", b, tp, sp, recompute, cp))
        if hit is not None:
            return hit
        return self.cached(("act", b, tp, sp, recompute, cp), lambda: self._layer_bytes(
            self.model, b, tp, sp, recompute, cp))

    def _layer_bytes(self, model: ModelConfig, b: int, tp: int, sp: bool, recompute: str, cp: int) -> float:
        """One layer of ``model`` per GPU, bytes: :func:`~distlearn.activation_memory.formulas.config_layer_bytes`,
        or under an FP8 recipe :func:`~distlearn.precision.fp8_recipes.config_layer_fp8_bytes` (the linear inputs
        cached in FP8, as Transformer Engine and DeepSeek-V3 do)."""
        kw = dict(seq_len=self.s // cp, micro_batch_size=b, tp=tp, sequence_parallel=sp, recompute=recompute,
                  activation_bytes=self.act_bytes, attention="flash" if cp > 1 else self.attention, swiglu=self.swiglu)
        if self.fp8:
            return config_layer_fp8_bytes(model, self.precision, **kw)
        return config_layer_bytes(model, **kw)

    def act_moe(self, b: int, tp: int, sp: bool, recompute: str, cp: int = 1) -> float:
        """Activation bytes of one MoE layer per GPU: :meth:`act` of the same layer with a dense MLP as wide as the
        experts a token uses, (k + shared) × expert width (each token's k routed and the shared experts keep
        their SwiGLU tensors for its copy); the dispatch buffers and MLA's latent shapes are not modelled."""
        hit = self.memo.get(("act_moe", b, tp, sp, recompute, cp))
        if hit is not None:
            return hit
        m = self.model
        dense = lambda: self.cached(("moe_as_dense",), lambda: m.with_(
            num_experts=0, experts_per_token=0, num_shared_experts=0, expert_ffn_hidden_size=None,
            first_dense_layers=0, num_mtp_modules=0,
            ffn_hidden_size=(m.experts_per_token + m.num_shared_experts) * m.expert_ffn))
        return self.cached(("act_moe", b, tp, sp, recompute, cp), lambda: self._layer_bytes(
            dense(), b, tp, sp, recompute, cp))

    def stage_sums(self, start: int, n: int) -> StageSums:
        """:meth:`~distlearn.planning.flops.ModelCounts.stage_sums` of the ``n`` layers from layer ``start``,
        memoized."""
        return self.cached(("stage", start, n), lambda: self.counts.stage_sums(start, n))

    def states(self, psi: int, dp: int, zero_stage: int) -> ModelStateBytes:
        """Per-GPU bytes of ``psi`` parameters' model states with this recipe:
        :func:`~distlearn.memory.formulas.model_state_bytes` (FP8 recipes:
        :func:`~distlearn.precision.fp8_recipes.recipe_state_bytes`, whose FP8 weight copies are counted with the
        params)."""
        def make():
            if not self.fp8:
                return model_state_bytes(psi, dp=dp, zero_stage=zero_stage, precision=self.precision,
                                         optimizer=self.optimizer)
            r = recipe_state_bytes(self.precision, psi, dp=dp, zero_stage=zero_stage, fp8_transpose=self.fp8_transpose)
            return ModelStateBytes(r.params + r.fp8_weights, r.grads, r.optimizer)
        return self.cached(("states", psi, dp, zero_stage), make)

    def stages(self, pp: int, stage_layers: tuple[int, ...] | None = None) -> list[int]:
        """Layers on each pipeline stage: ``stage_layers`` when given, else
        :func:`distlearn.pipeline_parallel.schedules.partition_layers`."""
        if stage_layers is not None:
            return list(stage_layers)
        return self.cached(("stages", pp), lambda: partition_layers(self.model.num_layers, pp))

    def group_seconds(self, operation: str, nbytes: float, group: int, stride: int) -> float:
        """Seconds of ``operation`` (``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"``) on ``nbytes``
        bytes over a group of ``group`` ranks spaced ``stride`` apart: :func:`distlearn.core.topology.best_collective`
        on :attr:`topology` with the group placed as :func:`distlearn.core.topology.per_domain` says (inside one
        NVLink domain when it fits; across domains the better of the ring on one NIC per GPU of the domain and the
        hierarchical algorithm), memoized."""
        key = ("gcoll", operation, nbytes, group, stride)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        topo = self.topology
        return self.cached(key, lambda: best_collective.unchecked(
            topo, operation, nbytes, group, self.topology_per_domain(group, stride)).seconds)

    def topology_per_domain(self, group: int, stride: int) -> int:
        """Members of a group of ``group`` ranks spaced ``stride`` apart in each NVLink domain
        (:func:`distlearn.core.topology.per_domain` on this setting's topology)."""
        return group_per_domain.unchecked(self.topology, group, stride)

    def dispatch_seconds(self, nbytes: float, copies: int, group: int, stride: int) -> float:
        """Seconds of one expert-parallel all-to-all of a GPU's ``nbytes`` bytes of tokens, each to ``copies``
        experts, over ``group`` ranks spaced ``stride`` apart: :func:`distlearn.core.topology.dispatch_cost` with the
        model's ``max_nodes_per_token`` (node-limited routing) as ``max_domains`` when the group spans more than one
        NVLink domain; inside one domain no token crosses the network and the all-to-all is the direct one, memoized."""
        key = ("dispatch", nbytes, copies, group, stride)
        hit = self.memo.get(key)
        if hit is not None:
            return hit
        topo = self.topology

        def make():
            k = self.topology_per_domain(group, stride)
            limit = self.model.max_nodes_per_token if k < group else None
            return dispatch_cost.unchecked(topo, nbytes, copies, group, k, limit).seconds
        return self.cached(key, make)

    def per_step_sync(self, pp: int, zero_stage: int) -> bool:
        """Whether ZeRO ``zero_stage`` under ``pp`` stages reduces the gradients once per step and holds them
        unsharded until then (``grad_sync="per_step"``, pp > 1, stage ≥ 1: torch's pipelining with FSDP2)."""
        return pp > 1 and zero_stage >= 1 and self.grad_sync == "per_step"

    def dp_collectives(self, zero_stage: int, num_microbatches: int, pp: int = 1) -> list:
        """``(phase, collectives)`` of one optimizer step: :func:`distlearn.zero_fsdp.traffic.step_collectives` by
        phase; under :meth:`per_step_sync` what torch's pipelining runs on the first stage (torch 2.13,
        ``PipelineStage.backward_maybe_with_nosync`` and ``perform_reduce_grad``): one reduce-scatter of the
        gradients after the last backward, and the parameter all-gathers of
        :func:`distlearn.nd_parallel.simulation.fsdp_all_gathers` (chapter 12's count: once per step for ZeRO 1–2,
        whose weights stay gathered; ZeRO-3 re-gathers after each forward frees them: the first stage's 1F1B order
        gathers before each of its m forwards and once more before its first backward after the last forward,
        m + 1), counted with the forward."""
        if not self.per_step_sync(pp, zero_stage):
            return self.cached(("zero_comm", zero_stage, num_microbatches), lambda: list(
                step_collectives(zero_stage, num_microbatches).by_phase().items()))

        def make():
            if zero_stage == 3:  # m + 1 on the first stage (tests/test_planner.py checks chapter 12's count)
                gathers = [("forward", [Collective("all_gather", "parameters", "forward", num_microbatches + 1)])]
            else:  # ZeRO 1-2: gathered once, after the optimizer step (FSDP2: before the next step's forward)
                gathers = [("after_step", [Collective("all_gather", "parameters", "after_step", 1)])]
            return [("last_backward", [Collective("reduce_scatter", "gradients", "last_backward", 1)])] + gathers
        return self.cached(("zero_comm_per_step", zero_stage, num_microbatches, pp), make)

    def hardware_flops(self, recompute: str) -> float:
        """FLOPs of one step with ``recompute``'s extra forward work (:func:`~distlearn.planning.flops.step_flops`)."""
        return self.cached(("hw", recompute), lambda: self.counts.hardware_flops(recompute))


@checks(sizes=each(whole()))
def stage_starts(sizes: list[int]) -> list[int]:
    """First layer of each stage of ``sizes`` layers."""
    out, k = [], 0
    for n in sizes:
        out.append(k)
        k += n
    return out


def resolve(model, gpu, num_gpus, cluster) -> tuple[ModelConfig, Cluster]:
    """``model`` as a :class:`~distlearn.core.models.ModelConfig` (a preset name or one) and the cluster (``cluster``, or
    ``num_gpus`` GPUs of type ``gpu``). Raises DistlearnValueError (bilingual) for anything else."""
    if isinstance(model, str):
        model = get_preset(model)
    if not isinstance(model, ModelConfig):
        raise DistlearnValueError("model", f"model must be a preset name ({', '.join(PRESETS)}) or a ModelConfig; "
                                           f"got {type(model).__name__}.",
                                  f"model 必须是预设名称（{', '.join(PRESETS)}）或 ModelConfig；收到 {type(model).__name__}。")
    if cluster is None:
        cluster = make_cluster(gpu, num_gpus)
    return model, cluster


def make_setting(model: ModelConfig, cluster: Cluster, global_batch, seq_len, precision="mixed", optimizer="adam",
                 efficiency=None, reserve_bytes=RESERVE_BYTES,
                 fragmentation=FRAGMENTATION, swiglu="unfused", shared: dict | None = None,
                 attention: str | None = None, grad_sync="per_step", causal=True,
                 overlap: Overlap | None = None) -> Setting:
    """A validated :class:`Setting`. ``global_batch`` sequences of ``seq_len`` tokens per step; ``efficiency``:
    ``None`` for the kernel model of :mod:`distlearn.planning.kernels`, or a share of the peak for the flat model
    (every FLOP at peak × efficiency, the planner before issue 22; :data:`COMPUTE_EFFICIENCY` was its default);
    ``reserve_bytes`` (bytes) + ``fragmentation`` × the device's memory are held back per GPU. ``swiglu``: the Llama
    MLP's kernel, ``"unfused"`` (the eager module keeps 4·f values per token) or ``"fused"`` (Megatron-Core's fused
    SwiGLU keeps 3·f; chapter 08). ``attention``: the attention kernel, ``None`` for the model's default
    (:func:`~distlearn.activation_memory.formulas.default_attention`), ``"materialised"`` or ``"flash"`` (e.g. a
    2024 Megatron-Core GPT, which runs fused flash attention).
    ``grad_sync``: one of :data:`GRAD_SYNCS`, when ZeRO 1–3 reduce the gradients under pipeline parallelism
    (``"per_step"``: torch's pipelining, the default; ``"per_microbatch"``). ``causal``: the flash attention kernel
    skips the tiles the causal mask hides (:func:`~distlearn.planning.kernels.causal_fraction`; materialised
    attention computes all scores either way). ``overlap``: an :class:`Overlap` (``None``: none of them).
    Raises DistlearnValueError for non-positive sizes,
    an efficiency outside (0, 1], a negative reserve, a fragmentation outside [0, 0.9], an unknown recipe,
    SwiGLU or attention kernel, fp32 on a GPU without an fp32 peak, or FP8 on a GPU without FP8 tensor cores."""
    check_int("global_batch", global_batch, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    if efficiency is not None:
        check_number("efficiency", efficiency, minimum=0, maximum=1, strict_min=True)
    check_number("reserve_bytes", reserve_bytes, minimum=0)
    check_number("fragmentation", fragmentation, minimum=0, maximum=0.9)
    check_choice("swiglu", swiglu, SWIGLU)
    if attention is not None:
        check_choice("attention", attention, ATTENTION)
    check_choice("precision", precision, PLANNER_PRECISIONS)
    check_choice("grad_sync", grad_sync, GRAD_SYNCS)
    check_bool("causal", causal)
    if overlap is not None:
        check_record("overlap", overlap, Overlap, "Overlap(tp_comm=True)")
    return Setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                   fragmentation, swiglu, shared, attention, grad_sync, causal, overlap)


# ---------------------------------------------------------------- the formulas' entry test (issue 33)
SETTING_EXAMPLE = "make_setting(get_preset('llama3-8b'), make_cluster('h100-80gb', 8), global_batch=512, seq_len=4096)"
PLAN_EXAMPLE = "Plan(dp=8, tp=1, pp=1)"
_NO_PLAN = object()
PLAN = record(Plan, PLAN_EXAMPLE)            # for @checks (distlearn.core.validate)
SETTING = record(Setting, SETTING_EXAMPLE)


def check_setting_plan(st, p=_NO_PLAN) -> None:
    """The slow path of the test every public formula of :mod:`~distlearn.planning.memory`,
    :mod:`~distlearn.planning.step_time` and :mod:`~distlearn.planning.evaluation` makes at its entry::

        if type(st) is not Setting or type(p) is not Plan:
            check_setting_plan(st, p)

    The two ``type(...) is`` tests cost about 50 ns, so the search, which calls these formulas thousands of times
    with the Setting it built and plans of :meth:`Plan.unchecked`, keeps its speed; a student who passes anything
    else gets DistlearnValueError naming ``st`` or ``p`` and a call that makes one (:func:`make_setting`,
    :class:`Plan`), instead of an AttributeError from inside the formula. A subclass of Plan has its fields
    checked (:func:`check_plan_fields`)."""
    from distlearn.core.validate import check_record

    check_record("st", st, Setting, SETTING_EXAMPLE)
    if p is not _NO_PLAN:
        check_record("p", p, Plan, PLAN_EXAMPLE)
        check_plan_fields(p)

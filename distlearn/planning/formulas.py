"""Closed forms of the planner: FLOPs, memory and time of one plan, each formula with its source.

A *plan* (:class:`Plan`) fixes the tensor-parallel degree ``tp`` (inside one node), the context-parallel degree
``cp``, the pipeline degree ``pp`` (and, optionally, uneven ``stage_layers``), the data-parallel degree
``dp = world_size / (tp·cp·pp)``, the expert-parallel degree ``ep`` of a mixture-of-experts model (inside dp·cp),
the ZeRO stage, the recomputation mode, the micro-batch size ``b`` and number ``m = global_batch / (dp·b)``, and the
number of interleaved chunks ``v``. For each plan we estimate

**Memory per GPU** (bytes; the worst pipeline stage, first or last):

- model states: :func:`distlearn.memory.formulas.model_state_bytes` of the stage's parameters divided by ``tp``, sharded
  over ``dp·cp`` by ZeRO (Rajbhandari et al. 2020) — ZeRO divides by the *data-parallel* degree, not the GPU count;
  an MoE layer's routed experts are divided by ``ep`` and sharded over the ``dp·cp/ep`` ranks holding the same
  experts; FP8 recipes use :func:`distlearn.precision.fp8_recipes.recipe_state_bytes` (their FP8 weight copies are counted
  with the params);
- activations: :func:`distlearn.activation_memory.formulas.config_layer_bytes` (the model's own architecture: Korthikanti et al.
  2022, Table 2 for GPT blocks with materialised attention; Llama blocks with flash attention, grouped-query
  K/V and the SwiGLU MLP, derived and measured in :mod:`distlearn.activation_memory.measure`; with ``cp`` the layer of
  s/cp tokens with flash-style attention, plus the all-gathered K and V of one layer; an MoE layer as a dense layer
  whose MLP is as wide as the k routed + shared experts a token uses), in the activation dtype of
  the recipe (2 bytes, 4 for ``precision="fp32"``; dropout masks 1 byte) × layers of the stage × micro-batches in
  flight. With 1F1B stage i holds ``min(p − i, m)`` micro-batches (the first p, the last one); interleaving
  multiplies the first stage's by ``1 + (p−1)/(p·v)`` (Korthikanti §4.2.3) and gives stage i Megatron's warm-up
  of (2(p − i − 1) + (v − 1)p + 1)/v (:func:`interleaved_inflight`); with uneven chunks (``stage_layers``, e.g.
  Llama 3's first chunk holding only the embedding) the layers alive are counted along the schedule's real order
  (:func:`stage_peak_layers`, :func:`distlearn.pipeline_parallel.schedules.peak_inflight_weighted`). Full recomputation keeps
  each layer's input (s·b·h values) and one layer's full activations while it recomputes;
- logits and the final norm on the last stage: 4·s·b·h/t·(1 + V/h) bytes (fp32 logits for the loss;
  Korthikanti §4.3), the embedding dropout mask s·b·h/t per micro-batch in flight on the first stage (GPT only:
  Llama has no dropout);
- ZeRO-3 working buffer: two layers' gathered parameters (the one computing and the one prefetched);
- a stated reserve: :data:`RESERVE_BYTES` for the CUDA context, cuBLAS workspaces and NCCL buffers, plus
  :data:`FRAGMENTATION` of the device memory for the caching allocator's fragmentation and temporaries.

Attention follows :func:`distlearn.activation_memory.formulas.default_attention`: GPT presets keep the a·s² scores (the
Megatron-LM runs they reproduce), Llama presets use a flash kernel (only a log-sum-exp per row).

**Time per step** (seconds), for the slowest pipeline stage:

- compute: the kernel model of :mod:`distlearn.planning.kernels` (:func:`microbatch_compute_seconds`): each GEMM
  of a layer as a roofline of its own shape at a measured matmul ceiling, the attention core (materialised batched
  GEMMs, or a FlashAttention kernel at its published share of peak), the memory-bound elementwise work at the HBM
  bandwidth, the output layer and its loss, all divided by one end-to-end constant
  (:data:`~distlearn.planning.kernels.END_TO_END`); :func:`kernel_stage_parts` gives the breakdown. With
  ``efficiency=`` given (or a GPU without ``hbm_bw``), the flat model of before: hardware FLOPs / (peak ×
  efficiency, :data:`COMPUTE_EFFICIENCY` by default), the peak of the precision the matrix multiplies
  run in (:func:`compute_peak`: 16-bit for the mixed recipes, fp32 / TF32 for ``"fp32"``, FP8 for the linear
  layers of the FP8 recipes, whose attention and logits stay 16-bit), divided by ``cp``. MoE layers count the
  experts a token uses; MLA's attention core its own head sizes (:func:`attention_core_flops`). Forward FLOPs per
  micro-batch F = 2·b·s·(l·P_matmul + V·h) + 4·b·s²·h·l (matrix multiplies, the attention scores and the logits;
  Narayanan et al. 2021 §5.1). Without recomputation a step costs 3F (backward = 2 × forward); full recomputation
  runs the layers' forward again, 4F on the layers — for a GPT block this is exactly Narayanan et al.'s eq. 3,
  96·B·s·l·h²·(1 + s/6h + V/16lh); selective recomputation adds only the attention core 4·b·s²·h per layer.
- tensor-parallel all-reduces: 2 in forward and 2 in backward per layer (+2 when the forward is recomputed), of
  b·s·h activation values each (16-bit, fp32 with ``precision="fp32"``), over NVLink (Shoeybi et al. 2019,
  Fig. 4); on the critical path.
- pipeline p2p: each micro-batch sends its activation forward and its gradient back, b·s·h/t values (scatter /
  gather optimisation, Narayanan §4.1), once per chunk; counted as not overlapped.
- context parallelism: per layer, all-gathers of K and V and a reduce-scatter of their gradients, exposed
  (:func:`cp_seconds`); expert parallelism: per MoE layer, dispatch and combine all-to-alls in forward and backward,
  exposed (:func:`ep_seconds`: DeepSeek's DualPipe overlap is not modelled).
- pipeline bubble: (p − 1)/v micro-batch times, i.e. the Megatron ratio (p − 1)/(v·m) of the ideal time
  (Narayanan §2.2), see :func:`bubble_ratio`; as an idle share of the pipeline's time, :func:`bubble_fraction`;
  with uneven chunks the largest chunk sets it (:func:`bubble_share`). ``schedule="zb-h1"`` (chapter 05's
  zero-bubble ZB-H1) takes its bubble and its micro-batches in flight from :mod:`distlearn.pipeline_parallel.zero_bubble`
  (:func:`zero_bubble_terms`); ZB-V and DualPipe (which move the loss to another rank, DualPipe with two copies of
  the weights) are not plan options yet.
- data-parallel gradient synchronization, exposed part only: ZeRO 0 all-reduces the gradients once per step, hidden
  behind the last micro-batch's backward when ``pp = 1`` (DDP buckets) and fully exposed with ``pp > 1`` (the
  all-reduce follows the pipeline flush, as in Megatron-LM); ZeRO 1 reduce-scatters the same way and all-gathers
  the updated parameters after the step (exposed); ZeRO 2 reduce-scatters every micro-batch's gradients (hidden
  behind that micro-batch's backward); ZeRO 3 also all-gathers parameters in forward and backward of every
  micro-batch (3m·Ψ traffic, hidden behind compute when prefetched). The collectives and their phases come from
  :func:`distlearn.zero_fsdp.traffic.step_collectives` (engine ``"zero"``: DeepSpeed's default all-reduce of the gradient
  buckets would double stages 1–2's gradient traffic). ZeRO 1–3 combine with pipeline parallelism (FSDP + PP, as
  torchtitan and Llama 3; DeepSpeed's own pipeline engine refuses 2–3). Every collective is issued **per layer** (an
  FSDP unit, a gradient bucket), so the ring's latency (n − 1)·α is paid once per layer.
- collectives: ring algorithms in the α-β model of :mod:`distlearn.core.cost` (Thakur et al. 2005; Patarasuk & Yuan
  2009) with α = :data:`ALPHA` per ring step. Ranks are ordered tp (innermost), dp, pp as in Megatron-LM, so a dp
  or pp group that leaves a node runs at the network bandwidth (tp, cp, then dp: a cp or dp group leaves the node
  once tp·cp·dp exceeds it).

Reported: tokens/s, MFU = model FLOPs (without recomputation) / (time × GPUs × peak) (Chowdhery et al. 2022,
App. B) with the GPU's dense 16-bit peak whatever the precision (an fp32 run shows how much of the GPU it leaves
unused), and the achieved FLOP/s per GPU counted Megatron's way (recomputation included), to compare with
published numbers. The optimizer step, the embedding's gradient all-reduce and kernel launch gaps are not modelled
(the kernel model's END_TO_END stands for them).
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.activation_memory.formulas import RECOMPUTE_MODES, SWIGLU, config_layer_bytes, default_attention
from distlearn.context_parallel.simulation import cp_comm_bytes
from distlearn.core.cost import collective_time
from distlearn.precision.fp8_recipes import (RECIPES as FP8_RECIPES, bytes_per_param as recipe_bytes_per_param, recipe_state_bytes)
from distlearn.core.hardware import GPU, Cluster, make_cluster, peak_flops
from distlearn.memory.formulas import PRECISIONS, bytes_per_param, model_state_bytes
from distlearn.core.models import PRESETS, ModelConfig, get_preset
from distlearn.pipeline_parallel.schedules import partition_layers, peak_inflight_weighted
from distlearn.core.validate import DistlearnValueError, check_choice, check_divisible, check_int, check_number
from distlearn.zero_fsdp.traffic import step_collectives

COMPUTE_EFFICIENCY = 0.55  # the FLAT model's share of peak (efficiency= given, GPUs without hbm_bw, the rooflines'
#                            C): an assumption; the default time model is distlearn.planning.kernels
RESERVE_BYTES = 2e9        # CUDA context (~0.5-1 GB), cuBLAS workspaces, NCCL buffers
FRAGMENTATION = 0.10       # share of device memory lost to allocator fragmentation and temporary buffers
ALPHA = 5e-6               # latency per ring step, seconds (order of magnitude of NCCL's per-hop latency)
RING = {"all_reduce": "ring_all_reduce", "reduce_scatter": "ring_reduce_scatter", "all_gather": "ring_all_gather"}
FP8_PRECISIONS = tuple(k for k, r in FP8_RECIPES.items() if r.gemm == "fp8")  # distlearn.precision.fp8_recipes, FP8 GEMMs
PLANNER_PRECISIONS = tuple(PRECISIONS) + FP8_PRECISIONS
# pipeline schedules of a plan: 1F1B (interleaved with num_chunks > 1), and chapter 05's ZB-H1 (Qi et al. 2023),
# simulated by distlearn.pipeline_parallel.zero_bubble; the V-shaped and DualPipe schedules move the logits to another rank and are
# not plan options yet
PLAN_SCHEDULES = ("1f1b", "zb-h1")


# ---------------------------------------------------------------- pipeline bubble (chapter 05's two definitions)
def bubble_ratio(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Megatron's bubble ratio t_bubble / t_ideal = (p − 1)/(v·m); 0 when pp = 1.

    Narayanan et al. 2021 §2.2.1 (1F1B and GPipe have the same bubble, (p−1)/m) and §2.2.2 (interleaving with v
    chunks per GPU divides it by v). It exceeds 1 when m < p − 1: it is not a share of anything.
    """
    return (pp - 1) / (num_chunks * num_microbatches)


def bubble_fraction(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Bubble fraction as chapter 05 and :mod:`distlearn.pipeline_parallel.schedules` define it: the idle share of all stage-time,
    1 − busy / (p·T) = (p − 1)/(v·m + p − 1) for equal stages (0 when pp = 1, always below 1).

    Equal to ``distlearn.pipeline_parallel.schedules.simulate(...).bubble_fraction`` for 1F1B, and for interleaved 1F1B when m is a
    multiple of p (tests check both); ratio r = :func:`bubble_ratio` gives it as r / (1 + r).
    """
    return (pp - 1) / (num_chunks * num_microbatches + pp - 1)


# ---------------------------------------------------------------- FLOPs
def matmul_params_per_layer(model: ModelConfig, layer: int | None = None) -> int:
    """Weights of one layer that enter a token's matrix multiplies (biases and norms excluded): attention
    projections (MLA's, :meth:`distlearn.core.models.MLA.parameters`, for DeepSeek) and the MLP — for an MoE layer
    (``layer`` needed when a model mixes dense and MoE layers) the router and the k routed + shared experts a
    token uses (:meth:`~distlearn.core.models.ModelConfig.moe_active_parameters`)."""
    h, kv = model.hidden_size, model.kv_heads * model.head_dim
    if model.mla is not None:
        attention = model.attention_parameters() - model.mla.kv_lora_rank - (model.mla.q_lora_rank or 0)
    else:
        attention = 2 * h * h + 2 * h * kv
    if model.is_moe and model.is_moe_layer(model.first_dense_layers if layer is None else layer):
        return attention + model.moe_active_parameters()
    mlp = 2 * h * model.ffn_hidden_size if model.arch == "gpt" else 3 * h * model.ffn_hidden_size
    return attention + mlp


def attention_core_flops(model: ModelConfig, seq_len: int) -> float:
    """Forward FLOPs of one layer's QKᵀ and scores·V for one sequence, causal mask not exploited: 4·s²·h
    (2·s²·a·d each), with MLA 2·s²·a·(d_qk + d_v) (DeepSeek-V3: d_qk = 192, d_v = 128)."""
    s = seq_len
    if model.mla is not None:
        return 2 * s * s * model.num_heads * (model.mla.qk_head_dim + model.mla.v_head_dim)
    return 4 * s * s * model.hidden_size


def forward_flops(model: ModelConfig, num_sequences: int, seq_len: int) -> dict[str, float]:
    """Forward FLOPs of ``num_sequences`` sequences of ``seq_len`` tokens: ``{"layers", "attention", "logits"}``.

    layers: 2·B·s·Σ P_matmul (:func:`matmul_params_per_layer`, l·P_matmul for a dense model); attention
    (QKᵀ and scores·V, causal mask not exploited): :func:`attention_core_flops`, 4·B·s²·h·l for standard
    attention; logits: 2·B·s·h·V. For a GPT block P_matmul = 12h², giving Narayanan et al.'s 24·B·s·h² +
    4·B·s²·h per layer.
    """
    B, s, h, l = num_sequences, seq_len, model.hidden_size, model.num_layers
    if model.is_moe:
        matmul = sum(matmul_params_per_layer(model, i) for i in range(l))
    else:
        matmul = l * matmul_params_per_layer(model)
    return {"layers": 2 * B * s * matmul, "attention": B * l * attention_core_flops(model, s),
            "logits": 2 * B * s * h * model.vocab_size}


def step_flops(model: ModelConfig, num_sequences: int, seq_len: int, recompute: str = "none") -> dict[str, float]:
    """FLOPs of one training step: ``{"model", "hardware"}``.

    model = 3 × forward (what MFU counts); hardware adds what recomputation runs again: the layers' forward for
    ``"full"`` (→ Narayanan et al. 2021 eq. 3 for GPT), the attention core for ``"selective"``, no matrix
    FLOPs for ``"norm-act"`` (it recomputes element-wise work only).
    """
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    f = forward_flops(model, num_sequences, seq_len)
    model_flops = 3 * (f["layers"] + f["attention"] + f["logits"])
    extra = {"none": 0.0, "norm-act": 0.0, "selective": f["attention"],
             "full": f["layers"] + f["attention"]}[recompute]
    return {"model": model_flops, "hardware": model_flops + extra}


def measured_flops(model: ModelConfig, num_sequences: int, seq_len: int, seed: int = 0) -> dict[str, int]:
    """FLOPs that PyTorch itself counts (``torch.utils.flop_counter.FlopCounterMode``) for one forward and one
    backward of ``model`` built for real on the CPU (keep it small): ``{"forward", "backward"}``.

    Attention runs on SDPA's math backend so its matrix multiplies are visible to the counter (the fused CPU kernel
    is not counted). Compare with :func:`forward_flops` (equal) and with backward = 2 × forward.
    """
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from distlearn.core.models import build_model

    torch.manual_seed(seed)
    net = build_model(model, device="cpu")
    tokens = torch.randint(0, model.vocab_size, (num_sequences, seq_len))
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as fwd:
            out = net(tokens)
        with FlopCounterMode(display=False) as bwd:
            out.float().sum().backward()
    return {"forward": fwd.get_total_flops(), "backward": bwd.get_total_flops()}


def megatron_flops(model: ModelConfig, batch: int, seq_len: int) -> float:
    """Narayanan et al. 2021 eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per step (with recomputation).

    Valid for GPT blocks (4h MLP, multi-head attention); used to convert published TFLOP/s into tokens/s.
    """
    s, l, h, V = seq_len, model.num_layers, model.hidden_size, model.vocab_size
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def compute_peak(gpu: GPU, precision: str) -> float:
    """Dense FLOP/s the matrix multiplies of ``precision`` run at on ``gpu``: ``gpu.peak_flops`` (16-bit tensor
    cores) for the mixed-precision recipes, ``gpu.peak_flops_fp32`` (TF32 tensor cores, FP32 on a V100) for
    ``"fp32"``, the FP8 peak (:func:`distlearn.core.hardware.peak_flops` ``(gpu, "fp8")``) for the FP8 recipes of
    :mod:`distlearn.precision.fp8_recipes` (:data:`FP8_PRECISIONS`: only their linear layers' GEMMs run in FP8). Raises
    DistlearnValueError for an unknown precision, for fp32 on a GPU whose fp32 peak is unknown, or for FP8 on a
    GPU without FP8 tensor cores."""
    check_choice("precision", precision, PLANNER_PRECISIONS)
    if precision in FP8_PRECISIONS:
        return peak_flops(gpu, "fp8")
    if precision != "fp32":
        return gpu.peak_flops
    if gpu.peak_flops_fp32 is None:
        raise DistlearnValueError(
            "precision", f"precision 'fp32' needs the fp32 peak of GPU {gpu.name!r}: give GPU(..., "
                         f"peak_flops_fp32=...) in FLOP/s (the datasheet's TF32 or FP32 figure, dense).",
            f"precision 'fp32' 需要 GPU {gpu.name!r} 的 fp32 峰值算力：请在 GPU(..., peak_flops_fp32=...) 中给出，"
            f"单位 FLOP/s（数据手册中不含稀疏的 TF32 或 FP32 数值）。")
    return gpu.peak_flops_fp32


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


# ---------------------------------------------------------------- plans and their estimates
@dataclass(frozen=True)
class Plan:
    """One way to run: degrees, ZeRO stage, recomputation, micro-batching and interleaving.

    ``cp``: context-parallel degree (chapter 10; each rank keeps ``seq_len / cp`` tokens of every sequence, K and V
    all-gathered per layer as in Llama 3 §3.3.2). ``stage_layers``: layers per pipeline stage when they are not
    :func:`distlearn.pipeline_parallel.schedules.partition_layers`'s split, e.g. Llama 3 405B's 126 layers on 16 stages with one
    layer fewer on the first and the last (``(7,) + (8,) * 14 + (7,)``, Llama 3 §3.3.2); with interleaving each
    stage's layers are cut into ``num_chunks`` chunks that may differ by one layer. GPUs = dp·tp·cp·pp."""

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


@dataclass
class Estimate:
    """Memory (bytes per GPU), time (seconds per step) and throughput of one plan.

    ``mfu`` is measured against the GPU's dense 16-bit peak; ``compute_peak`` is the FLOP/s the plan's matrix
    multiplies run at (:func:`compute_peak`); ``bubble_fraction`` is the idle share (:func:`bubble_fraction`),
    ``bubble_ratio`` Megatron's ratio."""

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


class Setting:
    """Everything about (model, cluster, batch, sequence, recipe) that does not depend on the plan, computed once,
    and memo tables for the parts that many plans share (activations per layer, model states, collective times).

    Build it with :func:`make_setting`, which validates the arguments."""

    def __init__(self, model: ModelConfig, cluster: Cluster, global_batch: int, seq_len: int, precision: str,
                 optimizer: str, efficiency: float, reserve_bytes: float, fragmentation: float,
                 swiglu: str = "unfused", shared: dict | None = None):
        self.model, self.cluster = model, cluster
        # memo entries that depend on the model, sequence and recipe only, not on the GPU or the cluster: settings
        # built for the same model and recipe (the suggestions of a search) may share them
        self._shared = shared
        self.swiglu = swiglu  # Llama MLP kernel: "unfused" (the eager module) or "fused" (Megatron-Core's)
        self.B, self.s = global_batch, seq_len
        self.precision, self.optimizer = precision, optimizer
        self.gemm_peak = compute_peak(cluster.gpu, precision)  # the linear layers' GEMMs (checks the name)
        self.fp8 = precision in FP8_PRECISIONS
        if self.fp8:  # the recipe's own bytes per parameter (its optimizer is part of the recipe)
            self.per = recipe_bytes_per_param(precision)
        else:
            self.per = bytes_per_param(precision, optimizer)
        # attention core, logits and everything else: 16-bit (fp32 for the fp32 recipe); FP8 recipes keep them
        # in bf16 (DeepSeek-V3 §3.3.1, Transformer Engine: only Linear layers run in FP8)
        self.peak = compute_peak(cluster.gpu, "mixed" if self.fp8 else precision)
        self.act_bytes = 4 if precision == "fp32" else 2  # activations in the dtype the layers compute in
        # time model: the kernel model of distlearn.planning.kernels unless a flat efficiency is given (or the GPU's
        # HBM bandwidth is unknown: then the flat COMPUTE_EFFICIENCY)
        self.kernel_model = efficiency is None and cluster.gpu.hbm_bw is not None
        self.eff = COMPUTE_EFFICIENCY if efficiency is None else efficiency
        self.attention = default_attention(model)
        g = cluster.gpu
        self.capacity = g.memory_bytes
        self.reserve = reserve_bytes + fragmentation * g.memory_bytes
        self._memo: dict = {}
        # the model's parameter and FLOP counts (the same for every setting of one model, sequence and batch)
        derived = self._cached(("model_counts", global_batch), lambda: _model_counts(model, global_batch, seq_len))
        (self.moe_flags, self.P_dense, self.P_experts, self.P_layer, self.P_first_extra, self.P_last_extra,
         self.f_layer, self.f_attn, self.f_gemm, self.f_gemm_layers, self.f_logits, self.model_flops_step) = derived

    def _cached(self, key, make):
        try:
            return self._memo[key]
        except KeyError:
            pass
        if self._shared is not None and key[0] in SHAREABLE:
            full = (key, id(self.model), self.s, self.precision, self.optimizer, self.swiglu)
            try:
                value = self._shared[full]
            except KeyError:
                value = self._shared[full] = make()
        else:
            value = make()
        self._memo[key] = value
        return value

    def act(self, b: int, tp: int, sp: bool, recompute: str, cp: int = 1) -> float:
        """:func:`~distlearn.activation_memory.formulas.config_layer_bytes` of one layer for this model, sequence and recipe; with
        context parallelism the layer of ``seq_len / cp`` tokens with flash-style attention
        (:func:`distlearn.context_parallel.simulation.cp_layer_activation_table` is the same table)."""
        hit = self._memo.get(("act", b, tp, sp, recompute, cp))
        if hit is not None:
            return hit
        return self._cached(("act", b, tp, sp, recompute, cp), lambda: config_layer_bytes(
            self.model, seq_len=self.s // cp, micro_batch_size=b, tp=tp, sequence_parallel=sp, recompute=recompute,
            activation_bytes=self.act_bytes, attention="flash" if cp > 1 else None, swiglu=self.swiglu))

    def act_moe(self, b: int, tp: int, sp: bool, recompute: str, cp: int = 1) -> float:
        """Activation bytes of one MoE layer per GPU: :meth:`act` of the same layer with a dense MLP as wide as the
        experts a token uses, (k + shared) × expert width (each token's k routed and the shared experts keep
        their SwiGLU tensors for its copy); the dispatch buffers and MLA's latent shapes are not modelled."""
        hit = self._memo.get(("act_moe", b, tp, sp, recompute, cp))
        if hit is not None:
            return hit
        m = self.model
        dense = lambda: self._cached(("moe_as_dense",), lambda: m.with_(
            num_experts=0, experts_per_token=0, num_shared_experts=0, expert_ffn_hidden_size=None,
            first_dense_layers=0, num_mtp_modules=0,
            ffn_hidden_size=(m.experts_per_token + m.num_shared_experts) * m.expert_ffn))
        return self._cached(("act_moe", b, tp, sp, recompute, cp), lambda: config_layer_bytes(
            dense(), seq_len=self.s // cp, micro_batch_size=b, tp=tp, sequence_parallel=sp, recompute=recompute,
            activation_bytes=self.act_bytes, attention="flash" if cp > 1 else None, swiglu=self.swiglu))

    def stage_sums(self, start: int, n: int) -> "StageSums":
        """Parameters, per-sequence forward FLOPs and MoE layers of the ``n`` layers from layer ``start``."""
        def make():
            if not self.model.is_moe:
                return StageSums(n * self.P_layer, 0, n * self.f_gemm, n * self.f_attn, 0)
            r = range(start, start + n)
            return StageSums(sum(self.P_dense[i] for i in r), sum(self.P_experts[i] for i in r),
                             sum(self.f_gemm_layers[i] for i in r), n * self.f_attn,
                             sum(self.moe_flags[i] for i in r))
        return self._cached(("stage", start, n), make)

    def states(self, psi: int, dp: int, zero_stage: int):
        """:func:`~distlearn.memory.formulas.model_state_bytes` of ``psi`` parameters with this recipe (FP8 recipes:
        :func:`~distlearn.precision.fp8_recipes.recipe_state_bytes`, whose FP8 weight copies are counted with the params)."""
        def make():
            if not self.fp8:
                return model_state_bytes(psi, dp=dp, zero_stage=zero_stage, precision=self.precision,
                                         optimizer=self.optimizer)
            r = recipe_state_bytes(self.precision, psi, dp=dp, zero_stage=zero_stage)
            return _States(r.params + r.fp8_weights, r.grads, r.optimizer)
        return self._cached(("states", psi, dp, zero_stage), make)

    def stages(self, pp: int, stage_layers: tuple[int, ...] | None = None) -> list[int]:
        """Layers on each pipeline stage: ``stage_layers`` when given, else
        :func:`distlearn.pipeline_parallel.schedules.partition_layers`."""
        if stage_layers is not None:
            return list(stage_layers)
        return self._cached(("stages", pp), lambda: partition_layers(self.model.num_layers, pp))

    def collective(self, algorithm: str, nbytes: float, n: int, bandwidth: float) -> float:
        """:func:`distlearn.core.cost.collective_time` of a ring collective with α = :data:`ALPHA`."""
        key = ("coll", algorithm, nbytes, n, bandwidth)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        return self._cached(key, lambda: collective_time(algorithm, nbytes, n, alpha=ALPHA, bandwidth=bandwidth))

    def dp_collectives(self, zero_stage: int, num_microbatches: int) -> list:
        """``(phase, collectives)`` of one optimizer step: :func:`distlearn.zero_fsdp.traffic.step_collectives` by phase."""
        return self._cached(("zero_comm", zero_stage, num_microbatches), lambda: list(
            step_collectives(zero_stage, num_microbatches).by_phase().items()))

    def hardware_flops(self, recompute: str) -> float:
        """FLOPs of one step with ``recompute``'s extra forward work (:func:`step_flops`)."""
        return self._cached(("hw", recompute), lambda: step_flops(self.model, self.B, self.s, recompute)["hardware"])


def _model_counts(model: ModelConfig, global_batch: int, seq_len: int) -> tuple:
    """What :class:`Setting` keeps about the model: per layer whether it is MoE, its dense and routed-expert
    parameters; the largest layer (ZeRO-3's gathered unit); the embedding's and the last stage's extra
    parameters; forward FLOPs per sequence per layer (all, attention core, linear layers; per layer for MoE
    models), of the logits, and the step's model FLOPs."""
    h, l = model.hidden_size, model.num_layers
    if model.is_moe:  # per layer: the part every dp rank holds, and the routed experts ep ranks split
        base = model.attention_parameters() + 2 * model.norm_parameters()
        moe = [model.is_moe_layer(i) for i in range(l)]
        dense = [base + (model.router_parameters() + model.num_shared_experts * model.expert_parameters()
                         if k else model.mlp_parameters()) for k in moe]
        experts = [model.num_experts * model.expert_parameters() if k else 0 for k in moe]
    else:
        moe, dense, experts = [False] * l, [model.layer_parameters()] * l, [0] * l
    p_layer = max(d + e for d, e in zip(dense, experts))  # the largest layer (ZeRO-3's gathered unit)
    tied_copy = model.vocab_size * h if model.tied_embeddings else 0  # Megatron keeps a copy on the last stage
    p_last_extra = model.norm_parameters() + (model.lm_head_parameters() or tied_copy)
    f = forward_flops(model, 1, seq_len)  # per sequence
    f_gemm_layers = [2 * seq_len * matmul_params_per_layer(model, i) for i in range(l)] if model.is_moe else None
    return (moe, dense, experts, p_layer, model.embedding_parameters(), p_last_extra,
            (f["layers"] + f["attention"]) / l, f["attention"] / l, f["layers"] / l, f_gemm_layers, f["logits"],
            step_flops(model, global_batch, seq_len)["model"])


# Setting memo keys whose values depend on the model, sequence length and recipe only (never on the GPU or the
# cluster; "model_counts" names the batch in its key), which settings built for one search's suggestions share.
# A shared memo names the model by id(): keep one shared dict per model object, alive as long as the dict is
SHAREABLE = frozenset({"act", "act_moe", "moe_as_dense", "stage", "states", "candidate_stages", "peak_layers",
                       "zb_closed", "model_counts", "stage_acts", "stage_states", "per_layer_bytes", "least_modes"})


@dataclass(frozen=True)
class StageSums:
    """What ``n`` consecutive layers hold and cost: ``dense_params`` (every dp rank's part), ``expert_params``
    (routed experts, split over ep), ``gemm_flops`` and ``attention_flops`` (forward, per sequence),
    ``moe_layers``."""

    dense_params: float
    expert_params: float
    gemm_flops: float
    attention_flops: float
    moe_layers: int


def stage_starts(sizes: list[int]) -> list[int]:
    """First layer of each stage."""
    out, k = [], 0
    for n in sizes:
        out.append(k)
        k += n
    return out


@dataclass(frozen=True)
class _States:
    """Per-GPU model-state bytes of an FP8 recipe in :func:`distlearn.memory.formulas.model_state_bytes`'s three roles."""

    params: float
    grads: float
    optimizer: float


def interleaved_inflight(pp: int, stage: int, num_chunks: int, num_microbatches: int) -> float:
    """Micro-batches' worth of a stage's activations held at the peak of 1F1B (``num_chunks = 1``: min(p − i, m),
    Narayanan et al. 2021 §2.2.1) or of interleaved 1F1B: Megatron-LM's warm-up of (p − i − 1)·2 + (v − 1)·p
    chunk-micro-batches plus the one in flight, each 1/v of the stage, i.e. (2(p − i − 1) + (v − 1)p + 1)/v; on
    the first stage this is Korthikanti et al. 2022 §4.2.3's p·(1 + (p − 1)/(p·v)). At most m."""
    if num_chunks == 1:
        return float(min(pp - stage, num_microbatches))
    return min(num_microbatches, (2 * (pp - stage - 1) + (num_chunks - 1) * pp + 1) / num_chunks)


def chunk_layers(stage_layers, num_chunks: int) -> tuple[tuple[int, ...], ...]:
    """Layers of each chunk of each stage when stage i's ``stage_layers[i]`` layers are cut into ``num_chunks``
    chunks that differ by at most one layer. The smaller chunks sit at the model's ends: first on the first stage
    (its chunk 0 also holds the embedding), last on the last stage (its last chunk also holds the output layer),
    and last on the middle stages. Llama 3 405B (§3.3.2): 7 layers in 8 chunks on the first stage give
    (0, 1, …, 1), "the first model chunk on the first stage has only the embedding"; the last stage's last chunk
    "only output projection and loss"."""
    out = []
    pp = len(stage_layers)
    for i, n in enumerate(stage_layers):
        base, extra = divmod(n, num_chunks)
        big_first = tuple(base + (1 if c < extra else 0) for c in range(num_chunks))
        out.append(big_first[::-1] if i == 0 and pp > 1 else big_first)
    return tuple(out)


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
    :func:`peak_microbatches` gives the same peak (tests check it)."""
    schedule = "interleaved-1f1b" if num_chunks > 1 else "1f1b"
    m = min(num_microbatches, peak_microbatches(pp, num_chunks))
    return tuple(float(x) for x in peak_inflight_weighted(schedule, pp, m, chunk_layers(stage_layers, num_chunks),
                                                          stages))


def peak_microbatches(pp: int, num_chunks: int) -> int:
    """Micro-batches enough for the activation peak of (interleaved) 1F1B: a multiple of p whose m·v chunk-forwards
    cover the longest warm-up 2(p − 1) + (v − 1)p and two periods p·v of the chunk order (see
    :func:`stage_peak_layers`)."""
    p, v = pp, num_chunks
    return p * -(-(2 * (p - 1) + (v - 1) * p + 2 * p * v + 1) // (v * p))


def _candidate_stages(sizes: list[int], moe_layers: list[int] | None = None) -> list[int]:
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


def plan_memory(st: Setting, p: Plan) -> dict[str, float]:
    """Bytes per GPU of the plan's worst stage: params, grads, optimizer, activations, logits, zero3_buffer,
    reserve, and their total (formulas in the module docstring). Without ``stage_layers`` only the first and the
    last stage can be the worst (the first holds the most micro-batches, the last the logits); with them every
    stage is looked at."""
    held_states, held, buffer = _memory_parts(st, p)
    worst, worst_total, reserve = None, 0.0, st.reserve
    for states, (acts, logits) in zip(held_states, held):
        # sum((params, grads, optimizer, acts, logits, buffer, reserve)), added in that order
        total = states[3] + acts + logits + buffer + reserve
        if worst is None or total > worst_total:
            worst, worst_total = (states, acts, logits), total
    (params, grads, optimizer, _), acts, logits = worst
    return {"params": params, "grads": grads, "optimizer": optimizer, "activations": acts, "logits": logits,
            "zero3_buffer": buffer, "reserve": reserve, "total": worst_total}


def memory_total(st: Setting, p: Plan) -> float:
    """``plan_memory(st, p)["total"]``, the same number, without building the breakdown (the search asks for
    it thousands of times)."""
    held_states, held, buffer = _memory_parts(st, p)
    reserve = st.reserve
    return max(states[3] + acts + logits + buffer + reserve for states, (acts, logits) in zip(held_states, held))


def _memory_parts(st: Setting, p: Plan):
    """(model states, (activations, logits), ZeRO-3 buffer) of :func:`plan_memory`'s candidate stages, memoized
    per layout and batching."""
    b, tp, pp, v, cp = p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.cp
    memo = st._memo  # looked at before building any closure
    stages = memo.get(("candidate_stages", pp, p.stage_layers))
    if stages is None:
        stages = st._cached(("candidate_stages", pp, p.stage_layers), lambda: _candidate_rows(st, p))
    # activations and logits do not depend on the ZeRO stage nor on dp: one computation for all of them
    # with 1F1B they depend on the micro-batch count only up to peak_microbatches (stage_peak_layers), so plans
    # with more micro-batches share one entry
    mb = min(p.num_microbatches, peak_microbatches(pp, v)) if p.schedule == "1f1b" else p.num_microbatches
    key = ("stage_acts", b, tp, pp, v, mb, cp, p.sequence_parallel, p.recompute, p.stage_layers, p.schedule)
    held = memo.get(key)
    if held is None:
        held = st._cached(key, lambda: _stage_activations(st, p, stages))
    buffer = 2 * st.per["params"] * st.P_layer / tp if p.zero_stage == 3 else 0.0
    # the model states do not depend on the micro-batches: one computation for every batching of the layout
    key = ("stage_states", tp, pp, p.dp * cp, p.ep, p.zero_stage, p.stage_layers)
    held_states = memo.get(key)
    if held_states is None:
        held_states = st._cached(key, lambda: _stage_states(st, p, stages))
    return held_states, held, buffer


def _candidate_rows(st: Setting, p: Plan) -> list[tuple]:
    """(stage, layers, extra params, first?, last?, StageSums) of the stages that can be the worst of
    :func:`plan_memory` for the plan's pp and stage split."""
    m, pp = st.model, p.pp
    sizes = st.stages(pp, p.stage_layers)
    starts = stage_starts(sizes) if m.is_moe else [0] * pp  # only MoE layers differ from one another
    if pp == 1:
        rows = [(0, sizes[0], st.P_first_extra + st.P_last_extra, True, True)]
    elif p.stage_layers is None:
        rows = [(0, sizes[0], st.P_first_extra, True, False),
                (pp - 1, sizes[-1], st.P_last_extra, False, True)]
    else:
        moe = [st.stage_sums(a, n).moe_layers for a, n in zip(starts, sizes)] if m.is_moe else None
        rows = [(i, sizes[i], (st.P_first_extra if i == 0 else 0) + (st.P_last_extra if i == pp - 1 else 0),
                 i == 0, i == pp - 1) for i in _candidate_stages(sizes, moe)]
    return [row + (st.stage_sums(starts[row[0]], row[1]),) for row in rows]


def _stage_states(st: Setting, p: Plan, stages) -> list[tuple[float, float, float, float]]:
    """(params, grads, optimizer, their sum params + grads + optimizer) bytes of each of ``stages``
    (:func:`plan_memory`'s candidate stages) for the plan's tp, dp·cp, ep and ZeRO stage."""
    tp, cp = p.tp, p.cp
    out = []
    for stage, layers, extra_params, is_first, is_last, sums in stages:
        states = st.states(max(1, round((sums.dense_params + extra_params) / tp)), p.dp * cp, p.zero_stage)
        params, grads, optimizer = states.params, states.grads, states.optimizer
        if sums.expert_params:  # routed experts: 1/ep of them here, data-parallel over dp·cp/ep ranks
            ex = st.states(max(1, round(sums.expert_params / (tp * p.ep))), p.dp * cp // p.ep, p.zero_stage)
            params, grads, optimizer = params + ex.params, grads + ex.grads, optimizer + ex.optimizer
        out.append((params, grads, optimizer, params + grads + optimizer))
    return out


def _stage_activations(st: Setting, p: Plan, stages) -> list[tuple[float, float]]:
    """(activation bytes, logits bytes) of each of ``stages`` (:func:`plan_memory`'s candidate stages): what the
    micro-batches in flight keep (formulas in the module docstring); the ZeRO stage and dp play no part."""
    m, s, b, tp, pp, v, cp = st.model, st.s, p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.cp
    h, V = m.hidden_size, m.vocab_size
    per_layer = st.act(b, tp, p.sequence_parallel, p.recompute, cp)
    per_moe_layer = st.act_moe(b, tp, p.sequence_parallel, p.recompute, cp) if m.is_moe else 0.0
    tokens = s // cp
    rows = tuple(row[0] for row in stages)
    # the layer-micro-batches of every candidate stage in one schedule walk
    peaks = lambda: st._cached(("peak_layers", pp, min(p.num_microbatches, peak_microbatches(pp, v)), v,
                                p.stage_layers, rows),
                               lambda: dict(zip(rows, stage_peak_layers(pp, p.num_microbatches, v, p.stage_layers,
                                                                        list(rows)))))
    out = []
    for stage, layers, extra_params, is_first, is_last, sums in stages:
        inflight = 1.0
        if is_first and pp > 1 and p.stage_layers is None:
            inflight = min(pp, p.num_microbatches) * ((1 + (pp - 1) / (pp * v)) if v > 1 else 1.0)
        elif pp > 1:
            inflight = interleaved_inflight(pp, stage, v, p.num_microbatches)
        if p.schedule != "1f1b":  # the simulated schedule's own peak (ZB-H1: at most p on every stage)
            inflight = zero_bubble_terms(st, p)[1][stage]
        elif p.stage_layers is not None and v > 1 and not sums.moe_layers:
            # uneven chunks: the real schedule's order, chunk by chunk (Llama 3's embedding-only first chunk)
            inflight = peaks()[stage] / layers
        acts = (per_layer * (layers - sums.moe_layers) + per_moe_layer * sums.moe_layers) * inflight
        if p.recompute == "full":  # one layer's full activations while its forward is recomputed
            acts += (st.act_moe if sums.moe_layers else st.act)(b, tp, p.sequence_parallel, "none", cp)
        if is_first and m.arch == "gpt":
            acts += tokens * b * h / tp * inflight  # embedding dropout mask (Llama has no dropout)
        if cp > 1:  # the all-gathered K and V of the layer computing (Llama 3 §3.3.2's all-gather CP)
            acts += 2 * s * b * m.kv_heads * m.head_dim / tp * st.act_bytes
        logits = 4 * tokens * b * h / tp * (1 + V / h) if is_last else 0.0
        out.append((acts, logits))
    return out


def microbatch_compute_seconds(st: Setting, p: Plan) -> float:
    """Seconds of one micro-batch's forward and backward (recomputation included) on the slowest stage.

    Kernel model (the default, :mod:`distlearn.planning.kernels`): per layer its GEMMs as rooflines, its attention
    core and its memory-bound elementwise work (:func:`~distlearn.planning.kernels.layer_seconds`), the output
    layer on the last stage (:func:`~distlearn.planning.kernels.logits_seconds`), all divided by
    :data:`~distlearn.planning.kernels.END_TO_END`. Flat model (``Setting(efficiency=...)`` given, or a GPU
    without ``hbm_bw``): hardware FLOPs / (peak × efficiency), the linear layers' GEMMs at the recipe's GEMM peak
    (FP8 for the FP8 recipes), the attention core and the logits at the 16-bit peak, divided by ``cp``. Depends on
    b, tp, cp, ep, sequence parallelism, the stages and the recomputation only."""
    key = ("compute", p.micro_batch_size, p.tp, p.pp, p.recompute, p.cp, p.stage_layers, p.sequence_parallel,
           p.ep)
    hit = st._memo.get(key)
    if hit is not None:
        return hit
    if st.kernel_model:
        return st._cached(key, lambda: sum(kernel_stage_parts(st, p).values()))
    return st._cached(key, lambda: _flat_compute_seconds(st, p))


def kernel_stage_parts(st: Setting, p: Plan) -> dict[str, float]:
    """Seconds of one micro-batch on the slowest stage by part, in the kernel model: ``{"gemm", "attention",
    "elementwise", "logits", "unmodelled"}`` (forward + backward + recomputation; ``unmodelled`` is what
    :data:`~distlearn.planning.kernels.END_TO_END` adds: the parts / END_TO_END − the parts). Their sum is
    :func:`microbatch_compute_seconds`. Computed for every recomputation mode at once (the search asks for them
    all), each mode's numbers with the same operations as alone."""
    key = ("kernel_parts", p.micro_batch_size, p.tp, p.pp, p.cp, p.stage_layers, p.sequence_parallel, p.ep)
    hit = st._memo.get(key)
    if hit is not None:
        return hit[p.recompute]

    def make():
        from distlearn.planning import kernels

        m, g = st.model, st.cluster.gpu
        b, tp, pp = p.micro_batch_size, p.tp, p.pp
        sizes = st.stages(pp, p.stage_layers)

        def layer(index):  # LayerSeconds of layer ``index`` (all layers of one kind cost the same)
            return st._cached(("layer_s", b, tp, p.cp, p.sequence_parallel, p.ep, index), lambda: kernels.layer_seconds(
                m, g, micro_batch=b, seq_len=st.s, tp=tp, cp=p.cp, sequence_parallel=p.sequence_parallel,
                attention=st.attention if p.cp == 1 else "flash", swiglu=st.swiglu, gemm_peak=st.gemm_peak,
                peak=st.peak, gemm_bytes=1 if st.fp8 else st.act_bytes, act_bytes=st.act_bytes, layer=index,
                ep=p.ep))

        def parts(ls, n, rc):
            f = 2.0 if rc == "full" else 1.0  # forward passes of the linear layers
            attn_extra = ls.attention_forward if rc == "selective" else 0.0
            elem_extra = {"selective": ls.attention_elementwise_forward, "norm-act": ls.norm_act_forward}.get(rc, 0.0)
            return {"gemm": n * (f * ls.gemm_forward + ls.gemm_backward),
                    "attention": n * (f * ls.attention_forward + ls.attention_backward + attn_extra),
                    "elementwise": n * (f * ls.elementwise_forward + ls.elementwise_backward + elem_extra)}

        logit = st._cached(("logit_s", b, tp, p.cp), lambda: kernels.logits_seconds(
            m, g, tokens=b * st.s / p.cp, tp=tp, peak=st.peak, act_bytes=st.act_bytes))
        out = {}
        # one layer's parts per mode, (parts, their sum), for each kind of layer: the same for every pp
        unit_key = ("unit_parts", b, tp, p.cp, p.sequence_parallel, p.ep)

        def units():
            def with_sum(d):
                return d, sum(d.values())

            def both(ls):
                return {rc: with_sum(parts(ls, 1, rc)) for rc in RECOMPUTE_MODES}
            if not m.is_moe:
                return both(layer(None)), None
            kinds = st.moe_flags  # is_moe_layer of every layer, computed once per setting
            moe_layer = kinds.index(True) if True in kinds else None  # one layer of each kind stands for all
            dense_layer = kinds.index(False) if False in kinds else None
            return (both(layer(dense_layer)) if dense_layer is not None else None,
                    both(layer(moe_layer)) if moe_layer is not None else None)
        dense_units, moe_units = st._cached(unit_key, units)
        if not m.is_moe:  # every layer costs the same: the largest stage, or the last with the logits
            last = sizes[-1]
            biggest = max(sizes[:-1]) if pp > 1 else 0
            for rc in RECOMPUTE_MODES:
                one, one_total = dense_units[rc]
                if pp > 1 and biggest * one_total > last * one_total + logit:
                    best = {k: biggest * v for k, v in one.items()}
                    best["logits"] = 0.0
                else:
                    best = {k: last * v for k, v in one.items()}
                    best["logits"] = logit
                modelled = sum(best.values())
                best["unmodelled"] = modelled / kernels.END_TO_END - modelled
                out[rc] = best
            return out
        zero = ({"gemm": 0.0, "attention": 0.0, "elementwise": 0.0}, 0.0)
        stages = st._cached(("stage_kinds", pp, p.stage_layers), lambda: stage_kinds(st, sizes))
        for rc in RECOMPUTE_MODES:
            dense_unit, dense_total = dense_units[rc] if dense_units is not None else zero
            moe_unit, moe_total = moe_units[rc] if moe_units is not None else zero
            worst, worst_total = None, -1.0   # the slowest stage: its layer counts, then its parts
            for n, n_moe, last in stages:
                total = (n - n_moe) * dense_total + n_moe * moe_total + (logit if last else 0.0)
                if total > worst_total:
                    worst, worst_total = (n, n_moe, last), total
            n, n_moe, last = worst
            best = {k: (n - n_moe) * dense_unit[k] + n_moe * moe_unit[k] for k in zero[0]}
            best["logits"] = logit if last else 0.0
            modelled = sum(best.values())
            best["unmodelled"] = modelled / kernels.END_TO_END - modelled
            out[rc] = best
        return out
    return st._cached(key, make)[p.recompute]


def stage_kinds(st: Setting, sizes: list[int]) -> list[tuple[int, int, bool]]:
    """(layers, MoE layers, last stage?) of the pipeline stages of ``sizes``, each distinct one once, in the order
    of the stages (stages alike cost the same: the first of them is the slowest whenever one is)."""
    kinds = []
    for i, (start, n) in enumerate(zip(stage_starts(sizes), sizes)):
        kind = (n, st.stage_sums(start, n).moe_layers, i == len(sizes) - 1)
        if kind not in kinds:
            kinds.append(kind)
    return kinds


def _flat_compute_seconds(st: Setting, p: Plan) -> float:
    """The flat model of :func:`microbatch_compute_seconds`: every FLOP at peak × ``st.eff``."""
    b, tp, pp = p.micro_batch_size, p.tp, p.pp
    factor = 4.0 if p.recompute == "full" else 3.0  # "norm-act" recomputes only element-wise work
    attn_factor = factor + (1.0 if p.recompute == "selective" else 0.0)
    logit_seconds = 3 * b * st.f_logits / tp / st.peak
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
            starts = stage_starts(sizes)
            unit = lambda a, n: (factor * st.stage_sums(a, n).gemm_flops / st.gemm_peak
                                 + attn_factor * st.stage_sums(a, n).attention_flops / st.peak)
            return max(unit(a, n) + (3 * st.f_logits / st.peak if i == pp - 1 else 0.0)
                       for i, (a, n) in enumerate(zip(starts, sizes)))
        stage_seconds = b * st._cached(("moe_stage_unit", pp, p.stage_layers, p.recompute), per_sequence) / tp
    return stage_seconds / (st.eff * p.cp)


def ep_seconds(st: Setting, p: Plan) -> float:
    """Exposed seconds of one micro-batch's expert-parallel all-to-alls on the stage with the most MoE layers:
    per MoE layer, forward dispatch (FP8 with an FP8 recipe, DeepSeek-V3 §3.3.2, else 16-bit) and combine
    (16-bit), and in backward the same two in 16-bit (again when the forward is recomputed), of the
    b·(s/cp)/tp tokens × k copies × h values each rank holds. An all-to-all of M bytes per rank over n ranks
    costs (n − 1)·α + (n − 1)/n·M/bw — :func:`distlearn.core.cost.collective_time`'s ring all-gather coefficients
    (each rank sends n − 1 messages of M/n). On NVLink when tp·ep fits a node, else the network. Not overlapped:
    DeepSeek-V3 hides it behind compute with DualPipe (§3.2.1), a schedule this planner does not model yet."""
    m = st.model
    if p.ep == 1 or not m.is_moe:
        return 0.0
    sizes = st.stages(p.pp, p.stage_layers)
    moe_layers = max(st.stage_sums(a, n).moe_layers for a, n in zip(stage_starts(sizes), sizes))
    g = st.cluster.gpu
    bw = g.nvlink_bw if p.tp * p.ep <= st.cluster.gpus_per_node else g.network_bw
    values = p.micro_batch_size * (st.s // p.cp) / p.tp * m.experts_per_token * m.hidden_size
    dispatch = 1 if st.fp8 else st.act_bytes
    a2a = lambda nbytes: st.collective("ring_all_gather", nbytes, p.ep, bw)
    forward = a2a(values * dispatch) + a2a(values * st.act_bytes)
    backward = 2 * a2a(values * st.act_bytes)
    return moe_layers * (forward * (2 if p.recompute == "full" else 1) + backward)


def step_seconds_lower_bound(st: Setting, p: Plan) -> float:
    """A lower bound on ``plan_time(st, p)["total"]``: all its terms but the data-parallel one (which is ≥ 0),
    added in the same order from the same numbers, so the bound holds exactly in floating point too. It does not
    depend on the ZeRO stage."""
    return _partial_sum(_pipeline_terms(st, p))


def _partial_sum(terms: dict) -> float:
    total = 0.0
    for value in terms.values():
        total += value
    return total


def bubble_share(st: Setting, p: Plan) -> float:
    """The share of a micro-batch's stage time that each of the p − 1 warm-up / cool-down slots of the pipeline
    costs: 1/v for 1F1B (v = 1) and interleaved 1F1B with equal chunks (Narayanan et al. 2021 §2.2.2: bubble
    (p − 1)/v micro-batch times); with uneven chunks (``stage_layers``) the largest chunk sets the pace:
    ⌈L_max/v⌉ / L_max of the most loaded stage's L_max layers."""
    if p.stage_layers is None or p.num_chunks == 1:
        return 1 / p.num_chunks
    most = max(p.stage_layers)
    return -(-most // p.num_chunks) / most


def cp_seconds(st: Setting, p: Plan) -> float:
    """Exposed seconds of one micro-batch's context-parallel communication on the slowest stage: per layer, the
    forward all-gather of K and V, and in backward the all-gather again plus the reduce-scatter of dK and dV
    (fp32), as :func:`distlearn.context_parallel.simulation.cp_comm_bytes` counts them (``"all-gather"``, Llama 3 §3.3.2:
    exposed, not overlapped); a recomputed forward gathers once more. Ring collectives of
    :func:`distlearn.core.cost.collective_time`, on NVLink when tp·cp fits a node, else on the network."""
    if p.cp == 1:
        return 0.0
    layers = max(st.stages(p.pp, p.stage_layers))
    return layers * st._cached(("cp_layer_s", p.micro_batch_size, p.tp, p.cp, p.recompute),
                               lambda: _cp_layer_seconds(st, p))


def _cp_layer_seconds(st: Setting, p: Plan) -> float:
    """:func:`cp_seconds` of one layer (it depends on b, tp, cp and the recomputation only)."""
    m, g = st.model, st.cluster.gpu
    kw = dict(seq_len=st.s, num_heads=m.num_heads, num_kv_heads=m.kv_heads, head_dim=m.head_dim, cp=p.cp,
              micro_batch_size=p.micro_batch_size, tp=p.tp, dtype_bytes=st.act_bytes)
    fwd = cp_comm_bytes("all-gather", pass_="forward", **kw).bytes_per_rank      # (cp−1)·B_kv sent by each rank
    bwd = cp_comm_bytes("all-gather", pass_="backward", **kw).bytes_per_rank     # (cp−1)·B_kv·(p + 4)/p
    bw = g.nvlink_bw if p.tp * p.cp <= st.cluster.gpus_per_node else g.network_bw
    full = p.cp / (p.cp - 1)  # collective_time takes the whole gathered buffer: (cp−1)/cp of it is sent
    gathers = 3 if p.recompute == "full" else 2
    t_gather = st.collective("ring_all_gather", fwd * full, p.cp, bw)
    t_scatter = st.collective("ring_reduce_scatter", (bwd - fwd) * full, p.cp, bw)
    return gathers * t_gather + t_scatter


def microbatch_terms(st: Setting, p: Plan) -> tuple[float, float, float, float]:
    """(compute, tp_comm, cp_comm, ep_comm) seconds of one micro-batch on the slowest stage: the parts of
    :func:`_pipeline_terms` that depend neither on interleaving nor on the number of micro-batches, memoized."""
    key = ("mb_terms", p.micro_batch_size, p.tp, p.pp, p.cp, p.recompute, p.stage_layers, p.sequence_parallel,
           p.ep)
    hit = st._memo.get(key)  # the search asks for it thousands of times: the memo first, without a closure
    if hit is not None:
        return hit

    def make():
        g, m = st.cluster.gpu, st.model
        b, tp, pp = p.micro_batch_size, p.tp, p.pp
        most_layers = max(st.stages(pp, p.stage_layers))
        t_compute = microbatch_compute_seconds(st, p)
        # tensor parallel: all-reduces of b·s·h activations on NVLink (all-gather + reduce-scatter with SP: same
        # time)
        n_ar = 6 if p.recompute == "full" else 4
        t_tp = most_layers * n_ar * st.collective("ring_all_reduce", st.act_bytes * b * (st.s // p.cp)
                                                  * m.hidden_size, tp, g.nvlink_bw)
        return t_compute, t_tp, cp_seconds(st, p), ep_seconds(st, p)
    return st._cached(key, make)


def microbatch_lower_bound(st: Setting, p: Plan) -> float:
    """A lower bound on :func:`step_seconds_lower_bound` for every interleaving and schedule of the plan's
    micro-batches: the compute, tp, cp and ep terms of :func:`_pipeline_terms`, the same products added in the
    same order (the pp_comm and bubble terms it leaves out are ≥ 0, and adding a number ≥ 0 never lowers a
    floating-point sum)."""
    mb = p.num_microbatches
    t_compute, t_tp, t_cp, t_ep = microbatch_terms(st, p)
    return mb * t_compute + mb * t_tp + mb * t_cp + mb * t_ep


def _pipeline_terms(st: Setting, p: Plan) -> dict[str, float]:
    """compute, tp_comm, cp_comm, pp_comm and bubble of :func:`plan_time` (everything but the data-parallel
    collectives; they do not depend on the ZeRO stage nor on dp), memoized."""
    key = ("terms", p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.num_microbatches, p.cp, p.recompute,
           p.stage_layers, p.sequence_parallel, p.ep)
    if p.schedule == "1f1b":
        hit = st._memo.get(key)
        if hit is not None:
            return hit[0]

    def make():
        g, cl, m = st.cluster.gpu, st.cluster, st.model
        b, tp, pp, v, mb, cp = p.micro_batch_size, p.tp, p.pp, p.num_chunks, p.num_microbatches, p.cp
        t_compute, t_tp, t_cp, t_ep = microbatch_terms(st, p)
        # pipeline p2p: activation forward + gradient back, per chunk
        pp_bw = g.nvlink_bw if cl.world_size <= cl.gpus_per_node else g.network_bw
        t_p2p = 2 * v * (st.act_bytes * b * (st.s // cp) * m.hidden_size / tp / pp_bw + ALPHA) if pp > 1 else 0.0
        t_mb = t_compute + t_tp + t_cp + t_ep + t_p2p
        return {"compute": mb * t_compute, "tp_comm": mb * t_tp, "cp_comm": mb * t_cp, "ep_comm": mb * t_ep,
                "pp_comm": mb * t_p2p, "bubble": (pp - 1) * bubble_share(st, p) * t_mb}, t_mb

    if p.schedule == "1f1b":
        return st._cached(key, make)[0]

    def zero_bubble():  # the same micro-batch, another bubble
        terms, t_mb = st._cached(key, make)
        return {**terms, "bubble": schedule_bubble_ratio(st, p) * p.num_microbatches * t_mb}
    return st._cached(key + (p.schedule,), zero_bubble)


def schedule_costs(st: Setting, recompute: str) -> tuple[float, float, float]:
    """(t_f, t_b, t_W) of one micro-batch through a stage, in units of its forward: the backward is twice the
    forward (three times with full recomputation: the forward runs again), and its weight-gradient part is the
    linear layers' share of the forward FLOPs (the attention core has no weights; Qi et al. 2023 §2)."""
    w = st.f_gemm / (st.f_gemm + st.f_attn)
    return 1.0, (3.0 if recompute == "full" else 2.0), w


def schedule_simulation(st: Setting, p: Plan):
    """:func:`distlearn.pipeline_parallel.schedules.simulate` (split-backward schedules: :mod:`distlearn.pipeline_parallel.zero_bubble`) of the
    plan's schedule with :func:`schedule_costs`, memoized; its ``bubble_ratio`` and ``peak_inflight`` are what
    the planner charges for a zero-bubble schedule (W passes keep their activations, ``w_memory = 1``, as torch
    does)."""
    from distlearn.pipeline_parallel import schedules as pipeline

    def make():
        f, b, w = schedule_costs(st, p.recompute)
        return pipeline.simulate(p.schedule, p.pp, p.num_microbatches, fwd_time=f, bwd_time=b, wgrad_time=w)
    return st._cached(("schedule_sim", p.schedule, p.pp, p.num_microbatches, p.recompute), make)


def zero_bubble_terms(st: Setting, p: Plan) -> tuple[float, tuple[float, ...]]:
    """(t_bubble / t_ideal, micro-batches in flight per stage) of a zero-bubble plan: chapter 05's
    :func:`distlearn.pipeline_parallel.zero_bubble.closed_form` where that module's tests establish it is exact (ZB-H1: t_W ≤ t_f,
    t_W ≤ t_I and m ≥ p, always true of :func:`schedule_costs` when m ≥ p; bubble (p − 1)(t_f + t_I − t_W), p
    micro-batches on every stage), else :func:`schedule_simulation`. tests/test_planner.py checks that both
    agree wherever the closed form is used."""
    from distlearn.pipeline_parallel import zero_bubble

    f, b, w = schedule_costs(st, p.recompute)
    # the closed form at m = p: exact there and for every larger m (its condition is m ≥ p), its bubble time
    # (p − 1)(t_f + t_I − t_W) does not depend on m, its peak is min(p, m) = p
    closed = st._cached(("zb_closed", p.schedule, p.pp, p.recompute), lambda: zero_bubble.closed_form(
        p.schedule, p.pp, p.pp, fwd_time=f, bwd_time=b, wgrad_time=w))
    if closed["exact"] and p.num_microbatches >= p.pp:
        return closed["bubble_time"] / (p.num_microbatches * (f + b)), (closed["peak_inflight"],) * p.pp

    def simulated():
        sim = schedule_simulation(st, p)
        return float(sim.bubble_ratio), tuple(float(x) for x in sim.peak_inflight)
    return st._cached(("zb_sim_terms", p.schedule, p.pp, p.num_microbatches, p.recompute), simulated)


def schedule_bubble_ratio(st: Setting, p: Plan) -> float:
    """t_bubble / t_ideal of the plan's pipeline schedule: (p − 1)/(v·m) for 1F1B and interleaved 1F1B
    (:func:`bubble_ratio`, with uneven chunks :func:`bubble_share`), :func:`zero_bubble_terms` for a
    zero-bubble schedule."""
    if p.schedule == "1f1b":
        return (p.pp - 1) * bubble_share(st, p) / p.num_microbatches
    return zero_bubble_terms(st, p)[0]


def plan_time(st: Setting, p: Plan) -> dict[str, float]:
    """Seconds per step of the plan's slowest stage: compute, tp_comm, cp_comm, ep_comm, pp_comm, bubble, dp_comm
    (exposed parts) and their total (formulas in the module docstring)."""
    time = dict(_pipeline_terms(st, p))
    time["dp_comm"] = _dp_term(st, p)
    time["total"] = _partial_sum(time)
    return time


def plan_seconds(st: Setting, p: Plan) -> float:
    """``plan_time(st, p)["total"]``, the same number (the same additions in the same order), without building the
    breakdown: the search asks for it thousands of times."""
    return step_seconds_lower_bound(st, p) + _dp_term(st, p)


def _dp_term(st: Setting, p: Plan) -> float:
    """:func:`dp_seconds`, memoized per ZeRO stage, batching, layout and recomputation."""
    key = ("dp_s", p.zero_stage, p.num_microbatches, p.micro_batch_size, p.tp, p.pp, p.dp, p.cp, p.ep, p.recompute,
           p.stage_layers)
    dp = st._memo.get(key)
    return dp if dp is not None else st._cached(key, lambda: dp_seconds(st, p))


def dp_seconds(st: Setting, p: Plan) -> float:
    """Exposed seconds per step of the data-parallel / ZeRO collectives (they do not depend on interleaving)."""
    g, cl = st.cluster.gpu, st.cluster
    tp, pp, dp, mb, cp = p.tp, p.pp, p.dp, p.num_microbatches, p.cp
    sizes = st.stages(pp, p.stage_layers)
    t_compute = microbatch_compute_seconds(st, p)
    # data parallel / ZeRO over dp·cp ranks (the cp ranks of a replica hold the same weights): gradient bytes of
    # this GPU's shard of the model (the first stage's)
    first = st.stage_sums(0, sizes[0])
    first_params = (first.dense_params + st.P_first_extra + (st.P_last_extra if pp == 1 else 0)) / tp
    dp_n = dp * cp
    dp_bw = g.nvlink_bw if tp * dp_n <= cl.gpus_per_node else g.network_bw
    # (shard params, group size, bandwidth): the dense part over dp·cp; routed experts over dp·cp/ep
    groups = [(first_params, dp_n, dp_bw)]
    if first.expert_params:
        groups.append((first.expert_params / (tp * p.ep), dp_n // p.ep, g.network_bw))
    t_bwd = t_compute * (3 / 4 if p.recompute == "full" else 2 / 3)  # backward (+ recomputed forward) share
    t_fwd = t_compute - t_bwd
    window = t_bwd if pp == 1 else 0.0
    # one optimizer step's collectives from distlearn.zero_fsdp.traffic (the ZeRO design, reduce-scatter for stages 1–2);
    # each phase's collectives hide behind that phase's compute, the rest is exposed
    # per-unit counts: one collective per layer of the stage (an FSDP unit, a gradient bucket), so the latency of
    # the dp_n-way ring, α·(steps), is paid once per layer
    units = sizes[0]
    t_dp = 0.0
    if dp_n > 1:
        hide = {"forward": t_fwd, "backward": t_bwd, "last_backward": window, "after_step": 0.0}
        for phase, colls in st.dp_collectives(p.zero_stage, mb):
            reps = mb if phase in ("forward", "backward") else 1
            busy = sum(c.times / reps * units * st.collective(
                RING[c.op], params * st.per["grads" if c.what == "gradients" else "params"] / units, n, bw)
                for c in colls for params, n, bw in groups if n > 1)
            t_dp += reps * max(0.0, busy - hide[phase])
    return t_dp


def estimate(st: Setting, p: Plan, memory: dict | None = None) -> Estimate:
    """The :class:`Estimate` of plan ``p`` (``memory``: its :func:`plan_memory` if already computed)."""
    mem = memory or plan_memory(st, p)
    t = plan_time(st, p)
    n = st.cluster.world_size
    zb_ratio = schedule_bubble_ratio(st, p) if p.schedule != "1f1b" else 0.0
    return Estimate(plan=p, memory=mem, capacity=st.capacity, time=t,
                    tokens_per_s=st.B * st.s / t["total"],
                    mfu=st.model_flops_step / (t["total"] * n * st.cluster.gpu.peak_flops),
                    achieved_flops=st.hardware_flops(p.recompute) / (t["total"] * n),
                    bubble_fraction=(bubble_fraction(p.pp, p.num_microbatches, p.num_chunks) if p.schedule == "1f1b"
                                     else zb_ratio / (1 + zb_ratio)),
                    bubble_ratio=(bubble_ratio(p.pp, p.num_microbatches, p.num_chunks) if p.schedule == "1f1b"
                                  else zb_ratio),
                    compute_peak=st.gemm_peak)


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
                 fragmentation=FRAGMENTATION, swiglu="unfused", shared: dict | None = None) -> Setting:
    """A validated :class:`Setting`. ``efficiency``: ``None`` for the kernel model of
    :mod:`distlearn.planning.kernels`, or a share of the peak for the flat model (every FLOP at peak × efficiency,
    the planner before issue 22; :data:`COMPUTE_EFFICIENCY` was its default). ``swiglu``: the Llama MLP's kernel, ``"unfused"`` (the eager module keeps
    4·f values per token) or ``"fused"`` (Megatron-Core's fused SwiGLU keeps 3·f; chapter 08). Raises
    DistlearnValueError for non-positive sizes, an efficiency outside (0, 1], a negative reserve, a fragmentation
    outside [0, 0.9], an unknown recipe or SwiGLU kernel, or fp32 on a GPU without an fp32 peak."""
    check_int("global_batch", global_batch, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    if efficiency is not None:
        check_number("efficiency", efficiency, minimum=0, maximum=1, strict_min=True)
    check_number("reserve_bytes", reserve_bytes, minimum=0)
    check_number("fragmentation", fragmentation, minimum=0, maximum=0.9)
    check_choice("swiglu", swiglu, SWIGLU)
    return Setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                   fragmentation, swiglu, shared)


def evaluate(model, plan: Plan, *, global_batch: int, seq_len: int, gpu: str | GPU = "a100-80gb",
             cluster: Cluster | None = None, precision: str = "mixed", optimizer: str = "adam",
             efficiency: float | None = None, reserve_bytes: float = RESERVE_BYTES,
             fragmentation: float = FRAGMENTATION, swiglu: str = "unfused") -> Estimate:
    """Memory, time and throughput of one given ``plan`` (whether or not it fits: see ``Estimate.fits``).

    ``model``: a preset name or :class:`~distlearn.core.models.ModelConfig`; the cluster is ``cluster`` or
    ``dp·tp·pp`` GPUs of type ``gpu``. Raises DistlearnValueError (bilingual) when the plan is invalid: tp larger
    than a node or not dividing it or the number of heads, GPUs not a whole number of nodes, ``global_batch`` not
    divisible by dp × micro_batch_size, ``num_microbatches`` inconsistent with them, an interleaved plan whose
    layers are not divisible by pp × num_chunks (without ``stage_layers``), ``stage_layers`` that do not place
    every layer once on ``pp`` stages of at least ``num_chunks`` layers each, or a ``cp`` not dividing
    ``seq_len``. ZeRO 1–3 combine with pipeline parallelism (FSDP + PP as in torchtitan and Llama 3).
    """
    check_int("dp", plan.dp, minimum=1)
    check_int("tp", plan.tp, minimum=1)
    check_int("pp", plan.pp, minimum=1)
    check_int("cp", plan.cp, minimum=1)
    model, cluster = resolve(model, gpu, plan.world_size, cluster)
    validate_plan(model, cluster, plan, global_batch, seq_len)
    st = make_setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                      fragmentation, swiglu)
    return estimate(st, plan)


def validate_plan(model: ModelConfig, cluster: Cluster, p: Plan, global_batch: int, seq_len: int | None = None
                  ) -> None:
    """Raise DistlearnValueError (bilingual, naming the field) unless ``p`` is a plan the search could produce."""
    node = cluster.gpus_per_node
    check_int("zero_stage", p.zero_stage, minimum=0, maximum=3)
    check_choice("recompute", p.recompute, RECOMPUTE_MODES)
    check_int("micro_batch_size", p.micro_batch_size, minimum=1)
    check_int("num_chunks", p.num_chunks, minimum=1)
    if p.tp > node:
        raise DistlearnValueError("tp", f"tp = {p.tp} is larger than a node ({node} GPUs): tensor parallelism needs "
                                        f"NVLink and must stay inside one node (tp ≤ {node}).",
                                  f"tp = {p.tp} 大于一个节点（{node} 块 GPU）：张量并行依赖 NVLink，"
                                  f"必须在节点内（tp ≤ {node}）。")
    check_divisible("gpus_per_node", node, "tp", p.tp)
    check_divisible("num_heads", model.num_heads, "tp", p.tp)
    check_divisible("num_kv_heads", model.kv_heads, "tp", p.tp)
    check_int("cp", p.cp, minimum=1)
    if p.world_size != cluster.world_size:
        cp = f"×{p.cp}" if p.cp > 1 else ""
        names = "dp × tp × cp × pp" if p.cp > 1 else "dp × tp × pp"
        raise DistlearnValueError("dp", f"{names} = {p.dp}×{p.tp}{cp}×{p.pp} = {p.world_size} must equal the "
                                        f"number of GPUs, {cluster.world_size}.",
                                  f"{names} = {p.world_size} 必须等于 GPU 数 {cluster.world_size}。")
    if seq_len is not None and p.cp > 1:
        check_divisible("seq_len", seq_len, "cp", p.cp)
    check_int("ep", p.ep, minimum=1)
    if p.ep > 1:
        if not model.is_moe:
            raise DistlearnValueError("ep", f"ep = {p.ep} needs a mixture-of-experts model; {model.name} is dense "
                                            f"(use ep = 1).",
                                      f"ep = {p.ep} 需要混合专家 (MoE) 模型；{model.name} 是稠密模型（请用 ep = 1）。")
        check_divisible("num_experts", model.num_experts, "ep", p.ep)
        check_divisible("dp × cp", p.dp * p.cp, "ep", p.ep)
    check_int("pp", p.pp, minimum=1, maximum=model.num_layers)
    if p.stage_layers is not None:
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
    check_divisible("global_batch", global_batch, "dp × micro_batch_size", p.dp * p.micro_batch_size)
    m = global_batch // (p.dp * p.micro_batch_size)
    if p.num_microbatches != m:
        raise DistlearnValueError(
            "num_microbatches", f"num_microbatches must be global_batch / (dp × micro_batch_size) = {m}; "
                                f"got {p.num_microbatches}.",
            f"num_microbatches 必须等于 global_batch / (dp × micro_batch_size) = {m}；收到 {p.num_microbatches}。")
    check_choice("schedule", p.schedule, PLAN_SCHEDULES)
    if p.schedule != "1f1b":
        if p.pp == 1 or p.num_chunks > 1:
            raise DistlearnValueError(
                "schedule", f"schedule {p.schedule!r} needs pp > 1 and num_chunks = 1 (one model chunk per stage); "
                            f"got pp = {p.pp}, num_chunks = {p.num_chunks}.",
                f"调度 {p.schedule!r} 需要 pp > 1 且 num_chunks = 1（每个阶段一个模型分块）；"
                f"收到 pp = {p.pp}，num_chunks = {p.num_chunks}。")
    if p.num_chunks > 1:
        if p.pp == 1:
            raise DistlearnValueError("num_chunks", "interleaving (num_chunks > 1) needs pp > 1.",
                                      "交错调度（num_chunks > 1）需要 pp > 1。")
        if p.stage_layers is None:  # uneven chunks only when the stages are given (Llama 3's schedule)
            check_divisible("num_layers", model.num_layers, "pp × num_chunks", p.pp * p.num_chunks)
        check_divisible("num_microbatches", m, "pp", p.pp)

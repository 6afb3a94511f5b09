"""Plan a training run: search DP × TP × PP × ZeRO × recomputation × micro-batching for plans that fit, rank them.

A *plan* fixes the tensor-parallel degree ``tp`` (inside one node), the pipeline degree ``pp``, the data-parallel
degree ``dp = world_size / (tp·pp)``, the ZeRO stage, the recomputation mode, the micro-batch size ``b`` and
number ``m = global_batch / (dp·b)``, and the number of interleaved chunks ``v``. For each plan we estimate

**Memory per GPU** (bytes; the worst pipeline stage, first or last):

- model states: :func:`distlearn.memory.model_state_bytes` of the stage's parameters divided by ``tp``, sharded
  over ``dp`` by ZeRO (Rajbhandari et al. 2020) — ZeRO divides by the *data-parallel* degree, not the GPU count;
- activations: :func:`distlearn.activations.config_layer_bytes` (the model's own architecture: Korthikanti et al.
  2022, Table 2 for GPT blocks with materialised attention; Llama blocks with flash attention, grouped-query
  K/V and the SwiGLU MLP, derived and measured in :mod:`distlearn.activation_measure`) × layers of
  the stage × micro-batches in flight. With 1F1B the first stage holds ``min(p, m)`` micro-batches, the last one;
  interleaving multiplies the first stage's by ``1 + (p−1)/(p·v)`` (Korthikanti §4.2.3). Full recomputation keeps
  each layer's input (2·s·b·h bytes) and one layer's full activations while it recomputes;
- logits and the final norm on the last stage: 4·s·b·h/t·(1 + V/h) bytes (fp32 logits for the loss;
  Korthikanti §4.3), the embedding dropout mask s·b·h/t per micro-batch in flight on the first stage (GPT only:
  Llama has no dropout);
- ZeRO-3 working buffer: two layers' gathered 16-bit parameters (the one computing and the one prefetched);
- a stated reserve: :data:`RESERVE_BYTES` for the CUDA context, cuBLAS workspaces and NCCL buffers, plus
  :data:`FRAGMENTATION` of the device memory for the caching allocator's fragmentation and temporaries.

Attention follows :func:`distlearn.activations.default_attention`: GPT presets keep the a·s² scores (the
Megatron-LM runs they reproduce), Llama presets use a flash kernel (only a log-sum-exp per row).

**Time per step** (seconds), for the slowest pipeline stage:

- compute: hardware FLOPs / (peak × :data:`COMPUTE_EFFICIENCY`). Forward FLOPs per micro-batch
  F = 2·b·s·(l·P_matmul + V·h) + 4·b·s²·h·l (matrix multiplies, the attention scores and the logits; Narayanan et
  al. 2021 §5.1). Without recomputation a step costs 3F (backward = 2 × forward); full recomputation runs the
  layers' forward again, 4F on the layers — for a GPT block this is exactly Narayanan et al.'s eq. 3,
  96·B·s·l·h²·(1 + s/6h + V/16lh); selective recomputation adds only the attention core 4·b·s²·h per layer.
- tensor-parallel all-reduces: 2 in forward and 2 in backward per layer (+2 when the forward is recomputed), of
  b·s·h 16-bit values each, over NVLink (Shoeybi et al. 2019, Fig. 4); on the critical path.
- pipeline p2p: each micro-batch sends its activation forward and its gradient back, b·s·h·2/t bytes (scatter /
  gather optimisation, Narayanan §4.1), once per chunk; counted as not overlapped.
- pipeline bubble: (p − 1)/(v·m) of the ideal time (Narayanan §2.2), see :func:`bubble_fraction`.
- data-parallel gradient synchronization, exposed part only: ZeRO 0 all-reduces the gradients once per step, hidden
  behind the last micro-batch's backward when ``pp = 1`` (DDP buckets) and fully exposed with ``pp > 1`` (the
  all-reduce follows the pipeline flush, as in Megatron-LM); ZeRO 1 reduce-scatters the same way and all-gathers
  the updated 16-bit parameters after the step (exposed); ZeRO 2 reduce-scatters every micro-batch's gradients
  (hidden behind that micro-batch's backward); ZeRO 3 also all-gathers parameters in forward and backward of every
  micro-batch (3Ψ traffic, hidden behind compute when prefetched). ZeRO 2 and 3 are not combined with pipeline
  parallelism (DeepSpeed's pipeline engine refuses them).
- collectives cost α + β·bytes per ring step: a ring all-reduce of n ranks takes 2(n−1)/n·bytes/bw + 2(n−1)·α,
  an all-gather or reduce-scatter half of it (Thakur et al. 2005; Patarasuk & Yuan 2009). Ranks are ordered
  tp (innermost), dp, pp as in Megatron-LM, so a dp or pp group that leaves a node runs at the network bandwidth.

Reported: tokens/s, MFU = model FLOPs (without recomputation) / (time × GPUs × peak) (Chowdhery et al. 2022,
App. B), and the achieved FLOP/s per GPU counted Megatron's way (recomputation included), to compare with
published numbers. The optimizer step, the embedding's gradient all-reduce and kernel launch gaps are not modelled.
"""
from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass

from .i18n import bi, get_language
from .hardware import GPU, GPUS, Cluster, get_gpu, make_cluster
from .activations import config_layer_bytes
from .memory import GB, RECOMPUTE, bytes_per_param, model_state_bytes
from .models import PRESETS, ModelConfig, get_preset
from .validate import DistlearnValueError, check_choice, check_divisible, check_int, check_number

COMPUTE_EFFICIENCY = 0.55  # share of peak a transformer layer's kernels reach (GEMMs ~70-80 %, plus memory-bound
#                            softmax / norms / activations); an assumption, NOT fitted to the published runs below.
RESERVE_BYTES = 2e9        # CUDA context (~0.5-1 GB), cuBLAS workspaces, NCCL buffers
FRAGMENTATION = 0.10       # share of device memory lost to allocator fragmentation and temporary buffers
ALPHA = 5e-6               # latency per ring step, seconds (order of magnitude of NCCL's per-hop latency)
MAX_MICRO_BATCH = 16       # micro-batch sizes searched: divisors of global_batch/dp up to this
MAX_CHUNKS = 8             # interleaving: chunks per GPU searched up to this


# ---------------------------------------------------------------- closed forms (sources in the module docstring)
def ring_all_reduce_time(nbytes: float, n: int, bw: float, alpha: float = ALPHA) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` over ``n`` ranks: 2(n−1)/n·nbytes/bw + 2(n−1)·α (0 if n = 1).

    ``bw`` is bytes/s per rank per direction. Source: Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009.
    """
    if n <= 1:
        return 0.0
    return 2 * (n - 1) / n * nbytes / bw + 2 * (n - 1) * alpha


def all_gather_time(nbytes: float, n: int, bw: float, alpha: float = ALPHA) -> float:
    """Seconds for a ring all-gather (or reduce-scatter) whose *full* tensor is ``nbytes``:
    (n−1)/n·nbytes/bw + (n−1)·α (0 if n = 1)."""
    if n <= 1:
        return 0.0
    return (n - 1) / n * nbytes / bw + (n - 1) * alpha


reduce_scatter_time = all_gather_time


def bubble_fraction(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Pipeline bubble as a fraction of the ideal (bubble-free) time: (p − 1)/(v·m).

    Narayanan et al. 2021 §2.2.1 (1F1B and GPipe have the same bubble, (p−1)/m) and §2.2.2 (interleaving with v
    chunks per GPU divides it by v). 0 when pp = 1.
    """
    return (pp - 1) / (num_chunks * num_microbatches)


def matmul_params_per_layer(model: ModelConfig) -> int:
    """Weights of one layer that enter matrix multiplies (biases and norms excluded)."""
    h, kv = model.hidden_size, model.kv_heads * model.head_dim
    mlp = 2 * h * model.ffn_hidden_size if model.arch == "gpt" else 3 * h * model.ffn_hidden_size
    return 2 * h * h + 2 * h * kv + mlp


def forward_flops(model: ModelConfig, num_sequences: int, seq_len: int) -> dict[str, float]:
    """Forward FLOPs of ``num_sequences`` sequences of ``seq_len`` tokens: ``{"layers", "attention", "logits"}``.

    layers: 2·B·s·l·P_matmul; attention (QKᵀ and scores·V, causal mask not exploited): 4·B·s²·h·l;
    logits: 2·B·s·h·V. For a GPT block P_matmul = 12h², giving Narayanan et al.'s 24·B·s·h² + 4·B·s²·h per layer.
    """
    B, s, h, l = num_sequences, seq_len, model.hidden_size, model.num_layers
    return {"layers": 2 * B * s * l * matmul_params_per_layer(model), "attention": 4 * B * s * s * h * l,
            "logits": 2 * B * s * h * model.vocab_size}


def step_flops(model: ModelConfig, num_sequences: int, seq_len: int, recompute: str = "none") -> dict[str, float]:
    """FLOPs of one training step: ``{"model", "hardware"}``.

    model = 3 × forward (what MFU counts); hardware adds what recomputation runs again: the layers' forward for
    ``"full"`` (→ Narayanan et al. 2021 eq. 3 for GPT), the attention core for ``"selective"``.
    """
    check_choice("recompute", recompute, RECOMPUTE)
    f = forward_flops(model, num_sequences, seq_len)
    model_flops = 3 * (f["layers"] + f["attention"] + f["logits"])
    extra = {"none": 0.0, "selective": f["attention"], "full": f["layers"] + f["attention"]}[recompute]
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

    from .models import build_model

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


# ---------------------------------------------------------------- plans
@dataclass(frozen=True)
class Plan:
    """One way to run: degrees, ZeRO stage, recomputation, micro-batching and interleaving."""

    dp: int
    tp: int
    pp: int
    zero_stage: int = 0
    recompute: str = "full"
    micro_batch_size: int = 1
    num_microbatches: int = 1
    num_chunks: int = 1
    sequence_parallel: bool = True

    def describe(self) -> str:
        v = f" v={self.num_chunks}" if self.num_chunks > 1 else ""
        return (f"dp={self.dp} tp={self.tp} pp={self.pp}{v} zero={self.zero_stage} recompute={self.recompute} "
                f"b={self.micro_batch_size} m={self.num_microbatches}")


@dataclass
class Estimate:
    """Memory (bytes per GPU), time (seconds per step) and throughput of one plan."""

    plan: Plan
    memory: dict[str, float]
    capacity: float
    time: dict[str, float]
    tokens_per_s: float
    mfu: float
    achieved_flops: float   # FLOP/s per GPU counted with recomputation (Megatron's convention)
    bubble_fraction: float

    @property
    def fits(self) -> bool:
        return self.memory["total"] <= self.capacity

    @property
    def comm_fraction(self) -> float:
        """Share of the step spent in exposed communication (TP + PP + DP)."""
        t = self.time
        return (t["tp_comm"] + t["pp_comm"] + t["dp_comm"]) / t["total"]


@dataclass
class SearchResult:
    """Ranked plans that fit (fastest first), how many were tried, and a suggestion when none fits."""

    plans: list[Estimate]
    num_evaluated: int
    suggestion: dict | None = None
    message: str = ""

    @property
    def best(self) -> Estimate | None:
        return self.plans[0] if self.plans else None


def _partition(num_layers: int, pp: int) -> tuple[int, int]:
    """Layers on the first and on the last stage when ``num_layers`` is split as evenly as possible (the first
    ``num_layers % pp`` stages take one more); every layer is placed."""
    base, extra = divmod(num_layers, pp)
    return base + (1 if extra else 0), base


class _Context:
    """Everything about (model, cluster, batch, seq) that does not depend on the plan, computed once."""

    def __init__(self, model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                 fragmentation):
        self.model, self.cluster = model, cluster
        self.B, self.s = global_batch, seq_len
        self.precision, self.optimizer = precision, optimizer
        self.per = bytes_per_param(precision, optimizer)
        self.eff = efficiency
        g = cluster.gpu
        self.capacity = g.memory_bytes
        self.reserve = reserve_bytes + fragmentation * g.memory_bytes
        h = model.hidden_size
        self.P_layer = model.layer_parameters()
        self.P_first_extra = model.embedding_parameters()
        tied_copy = model.vocab_size * h if model.tied_embeddings else 0  # Megatron keeps a copy on the last stage
        self.P_last_extra = model.norm_parameters() + (model.lm_head_parameters() or tied_copy)
        f = forward_flops(model, 1, seq_len)  # per sequence
        l = model.num_layers
        self.f_layer = (f["layers"] + f["attention"]) / l
        self.f_attn = f["attention"] / l
        self.f_logits = f["logits"]
        self.model_flops_step = step_flops(model, global_batch, seq_len)["model"]
        self._act = {}

    def act(self, b, tp, sp, recompute):
        key = (b, tp, sp, recompute)
        if key not in self._act:
            self._act[key] = config_layer_bytes(self.model, seq_len=self.s, micro_batch_size=b, tp=tp,
                                                sequence_parallel=sp, recompute=recompute)
        return self._act[key]


def _memory(ctx: _Context, p: Plan) -> dict[str, float]:
    m, s, b, tp, pp, v = ctx.model, ctx.s, p.micro_batch_size, p.tp, p.pp, p.num_chunks
    h, V = m.hidden_size, m.vocab_size
    first_layers, last_layers = _partition(m.num_layers, pp)
    if pp == 1:
        stages = [(first_layers, ctx.P_first_extra + ctx.P_last_extra, True, True)]
    else:
        stages = [(first_layers, ctx.P_first_extra, True, False), (last_layers, ctx.P_last_extra, False, True)]
    best = None
    per_layer = ctx.act(b, tp, p.sequence_parallel, p.recompute)
    for layers, extra_params, is_first, is_last in stages:
        psi = max(1, round((layers * ctx.P_layer + extra_params) / tp))
        st = model_state_bytes(psi, dp=p.dp, zero_stage=p.zero_stage, precision=ctx.precision,
                               optimizer=ctx.optimizer)
        inflight = 1.0
        if is_first and pp > 1:
            inflight = min(pp, p.num_microbatches) * ((1 + (pp - 1) / (pp * v)) if v > 1 else 1.0)
        acts = per_layer * layers * inflight
        if p.recompute == "full":  # one layer's full activations while its forward is recomputed
            acts += ctx.act(b, tp, p.sequence_parallel, "none")
        if is_first and m.arch == "gpt":
            acts += s * b * h / tp * inflight  # embedding dropout mask (Llama has no dropout)
        logits = 4 * s * b * h / tp * (1 + V / h) if is_last else 0.0
        buffer = 2 * 2 * ctx.P_layer / tp if p.zero_stage == 3 else 0.0
        mem = {"params": st.params, "grads": st.grads, "optimizer": st.optimizer, "activations": acts,
               "logits": logits, "zero3_buffer": buffer, "reserve": ctx.reserve}
        mem["total"] = sum(mem.values())
        if best is None or mem["total"] > best["total"]:
            best = mem
    return best


def _time(ctx: _Context, p: Plan) -> dict[str, float]:
    g, cl, m = ctx.cluster.gpu, ctx.cluster, ctx.model
    b, tp, pp, dp, v, mb = p.micro_batch_size, p.tp, p.pp, p.dp, p.num_chunks, p.num_microbatches
    h = m.hidden_size
    rate = g.peak_flops * ctx.eff
    factor = {"none": 3.0, "selective": 3.0, "full": 4.0}[p.recompute]
    layer_flops = b * (factor * ctx.f_layer + (ctx.f_attn if p.recompute == "selective" else 0.0)) / tp
    logit_flops = 3 * b * ctx.f_logits / tp
    first_layers, last_layers = _partition(m.num_layers, pp)
    if pp == 1:
        stage_flops = first_layers * layer_flops + logit_flops
    else:
        stage_flops = max(first_layers * layer_flops, last_layers * layer_flops + logit_flops)
    layers_max = first_layers
    t_compute = stage_flops / rate
    # tensor parallel: all-reduces of b·s·h 16-bit values on NVLink (all-gather + reduce-scatter with SP: same time)
    n_ar = 6 if p.recompute == "full" else 4
    t_tp = layers_max * n_ar * ring_all_reduce_time(2 * b * ctx.s * h, tp, g.nvlink_bw)
    # pipeline p2p: activation forward + gradient back, per chunk
    pp_bw = g.nvlink_bw if cl.world_size <= cl.gpus_per_node else g.network_bw
    t_p2p = 2 * v * (2 * b * ctx.s * h / tp / pp_bw + ALPHA) if pp > 1 else 0.0
    t_mb = t_compute + t_tp + t_p2p
    # data parallel / ZeRO: gradient bytes of this GPU's shard of the model
    first_params = (first_layers * ctx.P_layer + ctx.P_first_extra + (ctx.P_last_extra if pp == 1 else 0)) / tp
    dp_bw = g.nvlink_bw if tp * dp <= cl.gpus_per_node else g.network_bw
    grad_bytes = first_params * ctx.per["grads"]
    param_bytes = first_params * ctx.per["params"]
    t_bwd = t_compute * (3 / 4 if p.recompute == "full" else 2 / 3)  # backward (+ recomputed forward) share
    t_fwd = t_compute - t_bwd
    window = t_bwd if pp == 1 else 0.0
    z = p.zero_stage
    if dp == 1:
        t_dp = 0.0
    elif z == 0:
        t_dp = max(0.0, ring_all_reduce_time(grad_bytes, dp, dp_bw) - window)
    elif z == 1:
        t_dp = (max(0.0, reduce_scatter_time(grad_bytes, dp, dp_bw) - window)
                + all_gather_time(param_bytes, dp, dp_bw))
    elif z == 2:
        t_dp = (mb * max(0.0, reduce_scatter_time(grad_bytes, dp, dp_bw) - t_bwd)
                + all_gather_time(param_bytes, dp, dp_bw))
    else:
        ag = all_gather_time(param_bytes, dp, dp_bw)
        rs = reduce_scatter_time(grad_bytes, dp, dp_bw)
        t_dp = mb * (max(0.0, ag - t_fwd) + max(0.0, ag + rs - t_bwd))
    time = {"compute": mb * t_compute, "tp_comm": mb * t_tp, "pp_comm": mb * t_p2p,
            "bubble": (pp - 1) / v * t_mb, "dp_comm": t_dp}
    time["total"] = sum(time.values())
    return time


def _estimate(ctx: _Context, p: Plan, memory: dict | None = None) -> Estimate:
    mem = memory or _memory(ctx, p)
    t = _time(ctx, p)
    n = ctx.cluster.world_size
    hw = step_flops(ctx.model, ctx.B, ctx.s, p.recompute)["hardware"]
    return Estimate(plan=p, memory=mem, capacity=ctx.capacity, time=t,
                    tokens_per_s=ctx.B * ctx.s / t["total"],
                    mfu=ctx.model_flops_step / (t["total"] * n * ctx.cluster.gpu.peak_flops),
                    achieved_flops=hw / (t["total"] * n),
                    bubble_fraction=bubble_fraction(p.pp, p.num_microbatches, p.num_chunks))


def _resolve(model, gpu, num_gpus, cluster):
    if isinstance(model, str):
        model = get_preset(model)
    if not isinstance(model, ModelConfig):
        raise DistlearnValueError("model", f"model must be a preset name ({', '.join(PRESETS)}) or a ModelConfig; "
                                           f"got {type(model).__name__}.",
                                  f"model 必须是预设名称（{', '.join(PRESETS)}）或 ModelConfig；收到 {type(model).__name__}。")
    if cluster is None:
        cluster = make_cluster(gpu, num_gpus)
    return model, cluster


def _context(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes, fragmentation):
    check_int("global_batch", global_batch, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    check_number("efficiency", efficiency, minimum=0, maximum=1, strict_min=True)
    check_number("reserve_bytes", reserve_bytes, minimum=0)
    check_number("fragmentation", fragmentation, minimum=0, maximum=0.9)
    return _Context(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                    fragmentation)


def evaluate(model, plan: Plan, *, global_batch: int, seq_len: int, gpu: str | GPU = "a100-80gb",
             cluster: Cluster | None = None, precision: str = "mixed", optimizer: str = "adam",
             efficiency: float = COMPUTE_EFFICIENCY, reserve_bytes: float = RESERVE_BYTES,
             fragmentation: float = FRAGMENTATION) -> Estimate:
    """Memory, time and throughput of one given ``plan`` (whether or not it fits: see ``Estimate.fits``).

    ``model``: a preset name or :class:`~distlearn.models.ModelConfig`; the cluster is ``cluster`` or
    ``dp·tp·pp`` GPUs of type ``gpu``. Raises DistlearnValueError (bilingual) when the plan is invalid: tp larger
    than a node or not dividing it or the number of heads, GPUs not a whole number of nodes, ``global_batch`` not
    divisible by dp × micro_batch_size, ``num_microbatches`` inconsistent with them, an interleaved plan whose
    layers are not divisible by pp × num_chunks, or ZeRO 2/3 with pp > 1.
    """
    check_int("dp", plan.dp, minimum=1)
    check_int("tp", plan.tp, minimum=1)
    check_int("pp", plan.pp, minimum=1)
    model, cluster = _resolve(model, gpu, plan.dp * plan.tp * plan.pp, cluster)
    _validate_plan(model, cluster, plan, global_batch)
    ctx = _context(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                   fragmentation)
    return _estimate(ctx, plan)


def _validate_plan(model: ModelConfig, cluster: Cluster, p: Plan, global_batch: int) -> None:
    node = cluster.gpus_per_node
    check_int("zero_stage", p.zero_stage, minimum=0, maximum=3)
    check_choice("recompute", p.recompute, RECOMPUTE)
    check_int("micro_batch_size", p.micro_batch_size, minimum=1)
    check_int("num_chunks", p.num_chunks, minimum=1)
    if p.tp > node:
        raise DistlearnValueError("tp", f"tp = {p.tp} is larger than a node ({node} GPUs): tensor parallelism needs "
                                        f"NVLink and must stay inside one node (tp ≤ {node}).",
                                  f"tp = {p.tp} 大于一个节点（{node} 块 GPU）：张量并行依赖 NVLink，"
                                  f"必须在节点内（tp ≤ {node}）。")
    check_divisible("gpus_per_node", node, "tp", p.tp)
    check_divisible("num_heads", model.num_heads, "tp", p.tp)
    if p.dp * p.tp * p.pp != cluster.world_size:
        raise DistlearnValueError("dp", f"dp × tp × pp = {p.dp}×{p.tp}×{p.pp} = {p.dp * p.tp * p.pp} must equal the "
                                        f"number of GPUs, {cluster.world_size}.",
                                  f"dp × tp × pp = {p.dp * p.tp * p.pp} 必须等于 GPU 数 {cluster.world_size}。")
    check_int("pp", p.pp, minimum=1, maximum=model.num_layers)
    check_divisible("global_batch", global_batch, "dp × micro_batch_size", p.dp * p.micro_batch_size)
    m = global_batch // (p.dp * p.micro_batch_size)
    if p.num_microbatches != m:
        raise DistlearnValueError(
            "num_microbatches", f"num_microbatches must be global_batch / (dp × micro_batch_size) = {m}; "
                                f"got {p.num_microbatches}.",
            f"num_microbatches 必须等于 global_batch / (dp × micro_batch_size) = {m}；收到 {p.num_microbatches}。")
    if p.num_chunks > 1:
        if p.pp == 1:
            raise DistlearnValueError("num_chunks", "interleaving (num_chunks > 1) needs pp > 1.",
                                      "交错调度（num_chunks > 1）需要 pp > 1。")
        check_divisible("num_layers", model.num_layers, "pp × num_chunks", p.pp * p.num_chunks)
        check_divisible("num_microbatches", m, "pp", p.pp)
    if p.pp > 1 and p.zero_stage >= 2:
        raise DistlearnValueError("zero_stage", f"ZeRO stage {p.zero_stage} is not combined with pipeline "
                                                f"parallelism (pp = {p.pp}); use stage 0 or 1.",
                                  f"ZeRO 第 {p.zero_stage} 阶段不与流水线并行（pp = {p.pp}）同时使用；请用 0 或 1。")


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def candidate_plans(model: ModelConfig, cluster: Cluster, global_batch: int):
    """Yield every valid :class:`Plan`: tp dividing the node size and the number of (query and kv) heads, pp ≤ layers, dp dividing
    the global batch, micro-batch sizes up to :data:`MAX_MICRO_BATCH`, ZeRO 0–3 (0–1 with pp > 1), the three
    recomputation modes, interleaving when layers and micro-batches allow it. Sequence parallelism is always on
    with tp > 1: it saves activation memory for the same communication time, so it never loses in this model."""
    n, node, l = cluster.world_size, cluster.gpus_per_node, model.num_layers
    for tp in _divisors(node):
        if model.num_heads % tp or model.kv_heads % tp or n % tp:
            continue
        for pp in _divisors(n // tp):
            if pp > l:
                continue
            dp = n // (tp * pp)
            if global_batch % dp:
                continue
            per_replica = global_batch // dp
            chunks = [1] + ([v for v in range(2, MAX_CHUNKS + 1) if l % (pp * v) == 0] if pp > 1 else [])
            for b in _divisors(per_replica):
                if b > MAX_MICRO_BATCH:
                    break
                m = per_replica // b
                for v in chunks:
                    if v > 1 and m % pp:
                        continue
                    for z in (range(4) if pp == 1 else range(2)) if dp > 1 else (0,):
                        for r in RECOMPUTE:
                            yield Plan(dp, tp, pp, z, r, b, m, v, tp > 1)


def search(model, *, global_batch: int, seq_len: int, gpu: str | GPU = "a100-80gb", num_gpus: int = 8,
           cluster: Cluster | None = None, precision: str = "mixed", optimizer: str = "adam",
           efficiency: float = COMPUTE_EFFICIENCY, reserve_bytes: float = RESERVE_BYTES,
           fragmentation: float = FRAGMENTATION, top: int | None = None, suggest: bool = True) -> SearchResult:
    """Every valid plan for ``model`` on ``num_gpus`` GPUs of type ``gpu`` (or on ``cluster``): those that fit,
    ranked by tokens/s (fastest first; ties: less memory).

    Parameters: ``model`` a preset name or ModelConfig; ``global_batch`` sequences per step; ``seq_len`` tokens per
    sequence; ``precision``/``optimizer`` recipes of :mod:`distlearn.memory`; ``efficiency`` share of peak FLOP/s
    the kernels reach; ``reserve_bytes`` + ``fragmentation`` × memory held back per GPU; ``top`` keeps the best
    ``top`` plans. When nothing fits, ``suggestion`` gives the smallest change that would (see :func:`suggest_fix`).

    Raises DistlearnValueError for an unknown model or GPU, GPUs that are not a whole number of nodes, or
    non-positive sizes.
    """
    model, cluster = _resolve(model, gpu, num_gpus, cluster)
    ctx = _context(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                   fragmentation)
    fits, count = [], 0
    for p in candidate_plans(model, cluster, global_batch):
        count += 1
        mem = _memory(ctx, p)
        if mem["total"] <= ctx.capacity:
            fits.append(_estimate(ctx, p, mem))
    fits.sort(key=lambda e: (-e.tokens_per_s, e.memory["total"]))
    if top is not None:
        fits = fits[:check_int("top", top, minimum=1)]
    result = SearchResult(fits, count)
    if not fits:
        result.message = bi(f"no plan fits: {model.name} with seq_len {seq_len} on {cluster.world_size} × "
                            f"{cluster.gpu.name}", f"没有可行方案：{model.name}（序列长度 {seq_len}）放不进 "
                            f"{cluster.world_size} 块 {cluster.gpu.name}", sep="\n")
        if suggest:
            result.suggestion = suggest_fix(model, cluster=cluster, global_batch=global_batch, seq_len=seq_len,
                                            precision=precision, optimizer=optimizer, reserve_bytes=reserve_bytes,
                                            fragmentation=fragmentation)
    return result


def _any_fits(model, cluster, global_batch, seq_len, precision, optimizer, reserve_bytes, fragmentation) -> bool:
    ctx = _context(model, cluster, global_batch, seq_len, precision, optimizer, COMPUTE_EFFICIENCY, reserve_bytes,
                   fragmentation)
    return any(_memory(ctx, p)["total"] <= ctx.capacity for p in candidate_plans(model, cluster, global_batch))


def suggest_fix(model, *, cluster: Cluster, global_batch: int, seq_len: int, precision: str = "mixed",
                optimizer: str = "adam", reserve_bytes: float = RESERVE_BYTES, fragmentation: float = FRAGMENTATION,
                max_factor: int = 64) -> dict:
    """The smallest single change that makes some plan fit, for each kind of change:

    ``num_gpus`` (on part of a node: 2×, 4×, … GPUs up to a whole node; then the fewest whole nodes, up to
    ``max_factor`` × today's, found by doubling then bisecting), ``seq_len`` (the longest power-of-two fraction of
    today's), ``gpu`` (the first preset with more memory that fits). A key is ``None`` when no such
    change fits. ``message`` says it in both languages.
    """
    model = get_preset(model) if isinstance(model, str) else model
    args = (global_batch, seq_len, precision, optimizer, reserve_bytes, fragmentation)
    out = {"num_gpus": None, "seq_len": None, "gpu": None}
    node = cluster.gpus_per_node
    full = GPUS.get(cluster.gpu.name)
    node_size = full.gpus_per_node if full is not None else node
    if cluster.num_nodes == 1 and node < node_size:  # part of a node: try 2×, 4×, … GPUs up to a whole node
        k = node * 2
        while k <= node_size and out["num_gpus"] is None:
            if _any_fits(model, make_cluster(cluster.gpu.with_(gpus_per_node=node_size), k), *args):
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
        if _any_fits(model, Cluster(grow.gpu, nodes), *args):
            hi = nodes
            break
        lo, nodes = nodes, nodes * 2
    while hi is not None and hi - lo > 1:
        mid = (lo + hi) // 2
        if _any_fits(model, Cluster(grow.gpu, mid), *args):
            hi = mid
        else:
            lo = mid
    if hi is not None:
        out["num_gpus"] = hi * node
    s = seq_len // 2
    while s >= 1:
        if _any_fits(model, cluster, global_batch, s, *args[2:]):
            out["seq_len"] = s
            break
        s //= 2
    for g in sorted(GPUS.values(), key=lambda g: g.memory_bytes):
        if g.memory_bytes > cluster.gpu.memory_bytes:
            c = Cluster(g.with_(gpus_per_node=cluster.gpus_per_node), cluster.num_nodes)
            if _any_fits(model, c, *args):
                out["gpu"] = g.name
                break
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


# ---------------------------------------------------------------- published runs
GPT3_175B_MEGATRON = ModelConfig("gpt3-175b-megatron", "gpt", 51200, 12288, 96, 96, 4 * 12288, 2048,
                                 tied_embeddings=True)
GPT_1T_MEGATRON = ModelConfig("gpt-1t-megatron", "gpt", 51200, 25600, 128, 160, 4 * 25600, 2048,
                              tied_embeddings=True)

PUBLISHED_RUNS = {
    # Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
    # Table 1: vocabulary 51,200, sequence length 2048, A100 GPUs (312 TFLOP/s peak), activation recomputation,
    # FLOP/s counted with eq. 3. Micro-batch size 1, non-interleaved, is our reading of the setup, not Table 1.
    "megatron-gpt3-175b": dict(model=GPT3_175B_MEGATRON, gpu="a100-80gb", num_gpus=1024, global_batch=1536,
                               seq_len=2048, plan=Plan(dp=16, tp=8, pp=8, recompute="full", micro_batch_size=1,
                                                       num_microbatches=96, sequence_parallel=False),
                               published_flops=138e12, source="Narayanan et al. 2021, Table 1 (44 % of peak)"),
    "megatron-gpt-1t": dict(model=GPT_1T_MEGATRON, gpu="a100-80gb", num_gpus=3072, global_batch=3072,
                            seq_len=2048, plan=Plan(dp=6, tp=8, pp=64, recompute="full", micro_batch_size=1,
                                                    num_microbatches=512, sequence_parallel=False),
                            published_flops=163e12, source="Narayanan et al. 2021, Table 1 (52 % of peak)"),
}


def compare_published(name: str) -> dict:
    """The planner's estimate of a published run's own plan beside the published throughput.

    Returns ``{"estimate", "fits", "published_flops", "predicted_flops", "ratio", "published_tokens_per_s",
    "predicted_tokens_per_s", "source"}``; FLOP/s per GPU are counted with eq. 3 (recomputation included), so
    ``ratio = predicted / published`` compares like with like.
    """
    run = PUBLISHED_RUNS[check_choice("name", name, tuple(PUBLISHED_RUNS))]
    est = evaluate(run["model"], run["plan"], global_batch=run["global_batch"], seq_len=run["seq_len"],
                   gpu=run["gpu"])
    per_step = megatron_flops(run["model"], run["global_batch"], run["seq_len"])
    tokens = run["global_batch"] * run["seq_len"]
    predicted = per_step / (est.time["total"] * run["num_gpus"])
    return {"estimate": est, "fits": est.fits, "published_flops": run["published_flops"],
            "predicted_flops": predicted, "ratio": predicted / run["published_flops"],
            "published_tokens_per_s": run["published_flops"] * run["num_gpus"] / per_step * tokens,
            "predicted_tokens_per_s": est.tokens_per_s, "source": run["source"]}


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


# ---------------------------------------------------------------- table and command line
HEADER = ("#", "dp", "tp", "pp", "v", "ZeRO", "recompute", "b", "m", "mem GB", "step s", "tokens/s", "MFU",
          "bubble", "comm")
HEADER_ZH = ("#", "数据", "张量", "流水", "交错", "ZeRO", "重计算", "微批次", "微批数", "显存 GB", "每步/秒", "词元/秒",
             "MFU", "气泡", "通信")
WIDTHS = (2, 4, 4, 4, 4, 4, 9, 6, 6, 9, 7, 9, 6, 6, 5)   # display columns: the table is under 100 wide


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or notebook: East Asian wide / full-width characters count 2."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


RECOMPUTE_SHORT_ZH = {"none": "不重算", "selective": "选择性", "full": "完全"}


def format_table(plans: list[Estimate], limit: int = 10) -> str:
    """Plain-text table of the first ``limit`` plans, with a header line in the current language (both: an English
    and a Chinese line), right-aligned by display width (a Chinese character takes two columns) so that every line
    is under 100 columns."""
    lang = get_language()
    rows = {"en": [HEADER], "zh": [HEADER_ZH]}.get(lang, [HEADER, HEADER_ZH])
    for i, e in enumerate(plans[:limit], 1):
        p = e.plan
        recompute = RECOMPUTE_SHORT_ZH.get(p.recompute, p.recompute) if lang == "zh" else p.recompute
        rows.append((str(i), str(p.dp), str(p.tp), str(p.pp), str(p.num_chunks), str(p.zero_stage), recompute,
                     str(p.micro_batch_size), str(p.num_microbatches),
                     f"{e.memory['total'] / GB:.1f}/{e.capacity / GB:.0f}", f"{e.time['total']:.2f}",
                     f"{e.tokens_per_s:,.0f}", f"{e.mfu:.1%}", f"{e.bubble_fraction:.1%}", f"{e.comm_fraction:.0%}"))
    return "\n".join(" ".join(" " * max(0, w - display_width(c)) + c for c, w in zip(r, WIDTHS)) for r in rows)


def cli(argv: list[str]) -> int:
    """``python -m distlearn plan --model llama3-70b --gpus 64 --gpu h100-80gb --seq-len 8192 --global-batch 512``

    Prints the best plans as a table; returns 0, 1 when no plan fits (with the smallest change that would), 2 on
    bad input (with the bilingual message).
    """
    from .cli import ArgumentParser

    ap = ArgumentParser(prog="python -m distlearn plan",
                        description=bi("Plan a training run: search dp × tp × pp × ZeRO × recomputation × "
                                       "micro-batching.", "规划一次训练：搜索 dp × tp × pp × ZeRO × 重计算 × 微批次的组合。"))
    ap.add_argument("--model", default="llama3-8b", help=bi("preset", "预设模型") + f": {', '.join(PRESETS)}")
    ap.add_argument("--gpus", type=int, default=8, help=bi("number of GPUs", "GPU 数"))
    ap.add_argument("--gpu", default="h100-80gb", help=bi("GPU preset", "GPU 型号") + f": {', '.join(GPUS)}")
    ap.add_argument("--seq-len", type=int, default=4096, help=bi("sequence length", "序列长度"))
    ap.add_argument("--global-batch", type=int, default=512, help=bi("sequences per step", "全局批量大小（序列数）"))
    ap.add_argument("--top", type=int, default=10, help=bi("plans to show", "显示的方案数"))
    ap.add_argument("--efficiency", type=float, default=COMPUTE_EFFICIENCY,
                    help=bi("share of peak FLOP/s reached", "达到峰值算力的比例"))
    ap.add_argument("--precision", default="mixed", help=bi("mixed, mixed-fp32-grads or fp32",
                                                            "mixed（混合精度）、mixed-fp32-grads 或 fp32"))
    args = ap.parse_args(argv)
    try:
        res = search(args.model, global_batch=args.global_batch, seq_len=args.seq_len, gpu=args.gpu,
                     num_gpus=args.gpus, precision=args.precision, efficiency=args.efficiency)
    except DistlearnValueError as exc:
        print(str(exc))
        return 2
    g = get_gpu(args.gpu)
    print(bi(f"{args.model} · {args.gpus} × {g.name} · seq {args.seq_len} · batch {args.global_batch}: "
             f"{len(res.plans)} of {res.num_evaluated} plans fit",
             f"{args.model} · {args.gpus} × {g.name} · 序列长度 {args.seq_len} · 全局批量 {args.global_batch}："
             f"{res.num_evaluated} 个方案中 {len(res.plans)} 个放得下", sep="\n"))
    if not res.plans:
        print(res.message)
        print(res.suggestion["message"])
        return 1
    print(format_table(res.plans, args.top))
    print(bi(f"efficiency {args.efficiency:.0%} of peak, reserve {RESERVE_BYTES / GB:.0f} GB + {FRAGMENTATION:.0%}; "
             f"memory in GB (1e9 bytes)", f"算力效率 {args.efficiency:.0%}，预留 {RESERVE_BYTES / GB:.0f} GB + "
             f"{FRAGMENTATION:.0%}；显存单位 GB（1e9 字节）", sep="\n"))
    return 0

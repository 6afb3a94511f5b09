"""Closed forms of the planner: FLOPs, memory and time of one plan, each formula with its source.

A *plan* (:class:`Plan`) fixes the tensor-parallel degree ``tp`` (inside one node), the pipeline degree ``pp``, the
data-parallel degree ``dp = world_size / (tp·pp)``, the ZeRO stage, the recomputation mode, the micro-batch size
``b`` and number ``m = global_batch / (dp·b)``, and the number of interleaved chunks ``v``. For each plan we estimate

**Memory per GPU** (bytes; the worst pipeline stage, first or last):

- model states: :func:`distlearn.memory.model_state_bytes` of the stage's parameters divided by ``tp``, sharded
  over ``dp`` by ZeRO (Rajbhandari et al. 2020) — ZeRO divides by the *data-parallel* degree, not the GPU count;
- activations: :func:`distlearn.activations.config_layer_bytes` (the model's own architecture: Korthikanti et al.
  2022, Table 2 for GPT blocks with materialised attention; Llama blocks with flash attention, grouped-query
  K/V and the SwiGLU MLP, derived and measured in :mod:`distlearn.activation_measure`), in the activation dtype of
  the recipe (2 bytes, 4 for ``precision="fp32"``; dropout masks 1 byte) × layers of the stage × micro-batches in
  flight. With 1F1B the first stage holds ``min(p, m)`` micro-batches, the last one;
  interleaving multiplies the first stage's by ``1 + (p−1)/(p·v)`` (Korthikanti §4.2.3). Full recomputation keeps
  each layer's input (s·b·h values) and one layer's full activations while it recomputes;
- logits and the final norm on the last stage: 4·s·b·h/t·(1 + V/h) bytes (fp32 logits for the loss;
  Korthikanti §4.3), the embedding dropout mask s·b·h/t per micro-batch in flight on the first stage (GPT only:
  Llama has no dropout);
- ZeRO-3 working buffer: two layers' gathered parameters (the one computing and the one prefetched);
- a stated reserve: :data:`RESERVE_BYTES` for the CUDA context, cuBLAS workspaces and NCCL buffers, plus
  :data:`FRAGMENTATION` of the device memory for the caching allocator's fragmentation and temporaries.

Attention follows :func:`distlearn.activations.default_attention`: GPT presets keep the a·s² scores (the
Megatron-LM runs they reproduce), Llama presets use a flash kernel (only a log-sum-exp per row).

**Time per step** (seconds), for the slowest pipeline stage:

- compute: hardware FLOPs / (peak × :data:`COMPUTE_EFFICIENCY`), the peak of the precision the matrix multiplies
  run in (:func:`compute_peak`: 16-bit for the mixed recipes, fp32 / TF32 for ``"fp32"``). Forward FLOPs per
  micro-batch F = 2·b·s·(l·P_matmul + V·h) + 4·b·s²·h·l (matrix multiplies, the attention scores and the logits;
  Narayanan et al. 2021 §5.1). Without recomputation a step costs 3F (backward = 2 × forward); full recomputation
  runs the layers' forward again, 4F on the layers — for a GPT block this is exactly Narayanan et al.'s eq. 3,
  96·B·s·l·h²·(1 + s/6h + V/16lh); selective recomputation adds only the attention core 4·b·s²·h per layer.
- tensor-parallel all-reduces: 2 in forward and 2 in backward per layer (+2 when the forward is recomputed), of
  b·s·h activation values each (16-bit, fp32 with ``precision="fp32"``), over NVLink (Shoeybi et al. 2019,
  Fig. 4); on the critical path.
- pipeline p2p: each micro-batch sends its activation forward and its gradient back, b·s·h/t values (scatter /
  gather optimisation, Narayanan §4.1), once per chunk; counted as not overlapped.
- pipeline bubble: (p − 1)/v micro-batch times, i.e. the Megatron ratio (p − 1)/(v·m) of the ideal time
  (Narayanan §2.2), see :func:`bubble_ratio`; as an idle share of the pipeline's time, :func:`bubble_fraction`.
- data-parallel gradient synchronization, exposed part only: ZeRO 0 all-reduces the gradients once per step, hidden
  behind the last micro-batch's backward when ``pp = 1`` (DDP buckets) and fully exposed with ``pp > 1`` (the
  all-reduce follows the pipeline flush, as in Megatron-LM); ZeRO 1 reduce-scatters the same way and all-gathers
  the updated parameters after the step (exposed); ZeRO 2 reduce-scatters every micro-batch's gradients (hidden
  behind that micro-batch's backward); ZeRO 3 also all-gathers parameters in forward and backward of every
  micro-batch (3m·Ψ traffic, hidden behind compute when prefetched). The collectives and their phases come from
  :func:`distlearn.zero_comm.step_collectives` (engine ``"zero"``: DeepSpeed's default all-reduce of the gradient
  buckets would double stages 1–2's gradient traffic). ZeRO 2 and 3 are not combined with pipeline parallelism
  (DeepSpeed's pipeline engine refuses them).
- collectives: ring algorithms in the α-β model of :mod:`distlearn.cost` (Thakur et al. 2005; Patarasuk & Yuan
  2009) with α = :data:`ALPHA` per ring step. Ranks are ordered tp (innermost), dp, pp as in Megatron-LM, so a dp
  or pp group that leaves a node runs at the network bandwidth.

Reported: tokens/s, MFU = model FLOPs (without recomputation) / (time × GPUs × peak) (Chowdhery et al. 2022,
App. B) with the GPU's dense 16-bit peak whatever the precision (an fp32 run shows how much of the GPU it leaves
unused), and the achieved FLOP/s per GPU counted Megatron's way (recomputation included), to compare with
published numbers. The optimizer step, the embedding's gradient all-reduce and kernel launch gaps are not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..activations import config_layer_bytes
from ..cost import collective_time
from ..hardware import GPU, Cluster, make_cluster
from ..memory import RECOMPUTE, bytes_per_param, model_state_bytes
from ..models import PRESETS, ModelConfig, get_preset
from ..pipeline import partition_layers
from ..validate import DistlearnValueError, check_choice, check_divisible, check_int, check_number
from ..zero_comm import step_collectives

COMPUTE_EFFICIENCY = 0.55  # share of peak a transformer layer's kernels reach (GEMMs ~70-80 %, plus memory-bound
#                            softmax / norms / activations); an assumption, NOT fitted to the published runs.
RESERVE_BYTES = 2e9        # CUDA context (~0.5-1 GB), cuBLAS workspaces, NCCL buffers
FRAGMENTATION = 0.10       # share of device memory lost to allocator fragmentation and temporary buffers
ALPHA = 5e-6               # latency per ring step, seconds (order of magnitude of NCCL's per-hop latency)
RING = {"all_reduce": "ring_all_reduce", "reduce_scatter": "ring_reduce_scatter", "all_gather": "ring_all_gather"}


# ---------------------------------------------------------------- pipeline bubble (chapter 05's two definitions)
def bubble_ratio(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Megatron's bubble ratio t_bubble / t_ideal = (p − 1)/(v·m); 0 when pp = 1.

    Narayanan et al. 2021 §2.2.1 (1F1B and GPipe have the same bubble, (p−1)/m) and §2.2.2 (interleaving with v
    chunks per GPU divides it by v). It exceeds 1 when m < p − 1: it is not a share of anything.
    """
    return (pp - 1) / (num_chunks * num_microbatches)


def bubble_fraction(pp: int, num_microbatches: int, num_chunks: int = 1) -> float:
    """Bubble fraction as chapter 05 and :mod:`distlearn.pipeline` define it: the idle share of all stage-time,
    1 − busy / (p·T) = (p − 1)/(v·m + p − 1) for equal stages (0 when pp = 1, always below 1).

    Equal to ``distlearn.pipeline.simulate(...).bubble_fraction`` for 1F1B, and for interleaved 1F1B when m is a
    multiple of p (tests check both); ratio r = :func:`bubble_ratio` gives it as r / (1 + r).
    """
    return (pp - 1) / (num_chunks * num_microbatches + pp - 1)


# ---------------------------------------------------------------- FLOPs
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

    from ..models import build_model

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
    ``"fp32"``. Raises DistlearnValueError for fp32 on a GPU whose fp32 peak is unknown."""
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
        return (t["tp_comm"] + t["pp_comm"] + t["dp_comm"]) / t["total"]


class Setting:
    """Everything about (model, cluster, batch, sequence, recipe) that does not depend on the plan, computed once,
    and memo tables for the parts that many plans share (activations per layer, model states, collective times).

    Build it with :func:`make_setting`, which validates the arguments."""

    def __init__(self, model: ModelConfig, cluster: Cluster, global_batch: int, seq_len: int, precision: str,
                 optimizer: str, efficiency: float, reserve_bytes: float, fragmentation: float):
        self.model, self.cluster = model, cluster
        self.B, self.s = global_batch, seq_len
        self.precision, self.optimizer = precision, optimizer
        self.per = bytes_per_param(precision, optimizer)
        self.peak = compute_peak(cluster.gpu, precision)
        self.act_bytes = 4 if precision == "fp32" else 2  # activations in the dtype the layers compute in
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
        self._memo: dict = {}

    def _cached(self, key, make):
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = make()
            return value

    def act(self, b: int, tp: int, sp: bool, recompute: str) -> float:
        """:func:`~distlearn.activations.config_layer_bytes` of one layer for this model, sequence and recipe."""
        return self._cached(("act", b, tp, sp, recompute), lambda: config_layer_bytes(
            self.model, seq_len=self.s, micro_batch_size=b, tp=tp, sequence_parallel=sp, recompute=recompute,
            activation_bytes=self.act_bytes))

    def states(self, psi: int, dp: int, zero_stage: int):
        """:func:`~distlearn.memory.model_state_bytes` of ``psi`` parameters with this recipe."""
        return self._cached(("states", psi, dp, zero_stage), lambda: model_state_bytes(
            psi, dp=dp, zero_stage=zero_stage, precision=self.precision, optimizer=self.optimizer))

    def stages(self, pp: int) -> tuple[int, int]:
        """Layers on the first and on the last pipeline stage (:func:`distlearn.pipeline.partition_layers`)."""
        def make():
            sizes = partition_layers(self.model.num_layers, pp)
            return sizes[0], sizes[-1]
        return self._cached(("stages", pp), make)

    def collective(self, algorithm: str, nbytes: float, n: int, bandwidth: float) -> float:
        """:func:`distlearn.cost.collective_time` of a ring collective with α = :data:`ALPHA`."""
        return self._cached(("coll", algorithm, nbytes, n, bandwidth), lambda: collective_time(
            algorithm, nbytes, n, alpha=ALPHA, bandwidth=bandwidth))

    def dp_collectives(self, zero_stage: int, num_microbatches: int) -> list:
        """``(phase, collectives)`` of one optimizer step: :func:`distlearn.zero_comm.step_collectives` by phase."""
        return self._cached(("zero_comm", zero_stage, num_microbatches), lambda: list(
            step_collectives(zero_stage, num_microbatches).by_phase().items()))

    def hardware_flops(self, recompute: str) -> float:
        """FLOPs of one step with ``recompute``'s extra forward work (:func:`step_flops`)."""
        return self._cached(("hw", recompute), lambda: step_flops(self.model, self.B, self.s, recompute)["hardware"])


def plan_memory(st: Setting, p: Plan) -> dict[str, float]:
    """Bytes per GPU of the plan's worst stage (first or last): params, grads, optimizer, activations, logits,
    zero3_buffer, reserve, and their total (formulas in the module docstring)."""
    m, s, b, tp, pp, v = st.model, st.s, p.micro_batch_size, p.tp, p.pp, p.num_chunks
    h, V = m.hidden_size, m.vocab_size
    first_layers, last_layers = st.stages(pp)
    if pp == 1:
        stages = [(first_layers, st.P_first_extra + st.P_last_extra, True, True)]
    else:
        stages = [(first_layers, st.P_first_extra, True, False), (last_layers, st.P_last_extra, False, True)]
    worst = None
    per_layer = st.act(b, tp, p.sequence_parallel, p.recompute)
    for layers, extra_params, is_first, is_last in stages:
        states = st.states(max(1, round((layers * st.P_layer + extra_params) / tp)), p.dp, p.zero_stage)
        inflight = 1.0
        if is_first and pp > 1:
            inflight = min(pp, p.num_microbatches) * ((1 + (pp - 1) / (pp * v)) if v > 1 else 1.0)
        acts = per_layer * layers * inflight
        if p.recompute == "full":  # one layer's full activations while its forward is recomputed
            acts += st.act(b, tp, p.sequence_parallel, "none")
        if is_first and m.arch == "gpt":
            acts += s * b * h / tp * inflight  # embedding dropout mask (Llama has no dropout)
        logits = 4 * s * b * h / tp * (1 + V / h) if is_last else 0.0
        buffer = 2 * st.per["params"] * st.P_layer / tp if p.zero_stage == 3 else 0.0
        mem = {"params": states.params, "grads": states.grads, "optimizer": states.optimizer, "activations": acts,
               "logits": logits, "zero3_buffer": buffer, "reserve": st.reserve}
        mem["total"] = sum(mem.values())
        if worst is None or mem["total"] > worst["total"]:
            worst = mem
    return worst


def microbatch_compute_seconds(st: Setting, p: Plan) -> float:
    """Seconds of one micro-batch's forward and backward (recomputation included) on the slowest stage: its
    hardware FLOPs / (peak × efficiency). Depends on b, tp, pp and the recomputation only."""
    def make():
        b, tp, pp = p.micro_batch_size, p.tp, p.pp
        factor = {"none": 3.0, "selective": 3.0, "full": 4.0}[p.recompute]
        layer_flops = b * (factor * st.f_layer + (st.f_attn if p.recompute == "selective" else 0.0)) / tp
        logit_flops = 3 * b * st.f_logits / tp
        first_layers, last_layers = st.stages(pp)
        if pp == 1:
            stage_flops = first_layers * layer_flops + logit_flops
        else:
            stage_flops = max(first_layers * layer_flops, last_layers * layer_flops + logit_flops)
        return stage_flops / (st.peak * st.eff)
    return st._cached(("compute", p.micro_batch_size, p.tp, p.pp, p.recompute), make)


def step_seconds_lower_bound(st: Setting, p: Plan) -> float:
    """A lower bound on ``plan_time(st, p)["total"]``: its compute and bubble terms with the communication left
    out, computed as :func:`plan_time` computes them (so the bound holds exactly in floating point too)."""
    t_compute = microbatch_compute_seconds(st, p)
    return p.num_microbatches * t_compute + (p.pp - 1) / p.num_chunks * t_compute


def plan_time(st: Setting, p: Plan) -> dict[str, float]:
    """Seconds per step of the plan's slowest stage: compute, tp_comm, pp_comm, bubble, dp_comm (exposed parts)
    and their total (formulas in the module docstring)."""
    g, cl, m = st.cluster.gpu, st.cluster, st.model
    b, tp, pp, dp, v, mb = p.micro_batch_size, p.tp, p.pp, p.dp, p.num_chunks, p.num_microbatches
    h = m.hidden_size
    first_layers, _ = st.stages(pp)
    t_compute = microbatch_compute_seconds(st, p)
    # tensor parallel: all-reduces of b·s·h activations on NVLink (all-gather + reduce-scatter with SP: same time)
    n_ar = 6 if p.recompute == "full" else 4
    t_tp = first_layers * n_ar * st.collective("ring_all_reduce", st.act_bytes * b * st.s * h, tp, g.nvlink_bw)
    # pipeline p2p: activation forward + gradient back, per chunk
    pp_bw = g.nvlink_bw if cl.world_size <= cl.gpus_per_node else g.network_bw
    t_p2p = 2 * v * (st.act_bytes * b * st.s * h / tp / pp_bw + ALPHA) if pp > 1 else 0.0
    t_mb = t_compute + t_tp + t_p2p
    # data parallel / ZeRO: gradient bytes of this GPU's shard of the model
    first_params = (first_layers * st.P_layer + st.P_first_extra + (st.P_last_extra if pp == 1 else 0)) / tp
    dp_bw = g.nvlink_bw if tp * dp <= cl.gpus_per_node else g.network_bw
    grad_bytes = first_params * st.per["grads"]
    param_bytes = first_params * st.per["params"]
    t_bwd = t_compute * (3 / 4 if p.recompute == "full" else 2 / 3)  # backward (+ recomputed forward) share
    t_fwd = t_compute - t_bwd
    window = t_bwd if pp == 1 else 0.0
    # one optimizer step's collectives from distlearn.zero_comm (the ZeRO design, reduce-scatter for stages 1–2);
    # each phase's collectives hide behind that phase's compute, the rest is exposed
    t_dp = 0.0
    if dp > 1:
        hide = {"forward": t_fwd, "backward": t_bwd, "last_backward": window, "after_step": 0.0}
        for phase, colls in st.dp_collectives(p.zero_stage, mb):
            reps = mb if phase in ("forward", "backward") else 1
            busy = sum(c.times / reps * st.collective(RING[c.op], grad_bytes if c.what == "gradients"
                                                      else param_bytes, dp, dp_bw) for c in colls)
            t_dp += reps * max(0.0, busy - hide[phase])
    time = {"compute": mb * t_compute, "tp_comm": mb * t_tp, "pp_comm": mb * t_p2p,
            "bubble": (pp - 1) / v * t_mb, "dp_comm": t_dp}
    time["total"] = sum(time.values())
    return time


def estimate(st: Setting, p: Plan, memory: dict | None = None) -> Estimate:
    """The :class:`Estimate` of plan ``p`` (``memory``: its :func:`plan_memory` if already computed)."""
    mem = memory or plan_memory(st, p)
    t = plan_time(st, p)
    n = st.cluster.world_size
    return Estimate(plan=p, memory=mem, capacity=st.capacity, time=t,
                    tokens_per_s=st.B * st.s / t["total"],
                    mfu=st.model_flops_step / (t["total"] * n * st.cluster.gpu.peak_flops),
                    achieved_flops=st.hardware_flops(p.recompute) / (t["total"] * n),
                    bubble_fraction=bubble_fraction(p.pp, p.num_microbatches, p.num_chunks),
                    bubble_ratio=bubble_ratio(p.pp, p.num_microbatches, p.num_chunks),
                    compute_peak=st.peak)


def resolve(model, gpu, num_gpus, cluster) -> tuple[ModelConfig, Cluster]:
    """``model`` as a :class:`~distlearn.models.ModelConfig` (a preset name or one) and the cluster (``cluster``, or
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
                 efficiency=COMPUTE_EFFICIENCY, reserve_bytes=RESERVE_BYTES,
                 fragmentation=FRAGMENTATION) -> Setting:
    """A validated :class:`Setting`. Raises DistlearnValueError for non-positive sizes, an efficiency outside
    (0, 1], a negative reserve, a fragmentation outside [0, 0.9], an unknown recipe, or fp32 on a GPU without
    an fp32 peak."""
    check_int("global_batch", global_batch, minimum=1)
    check_int("seq_len", seq_len, minimum=1)
    check_number("efficiency", efficiency, minimum=0, maximum=1, strict_min=True)
    check_number("reserve_bytes", reserve_bytes, minimum=0)
    check_number("fragmentation", fragmentation, minimum=0, maximum=0.9)
    return Setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
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
    model, cluster = resolve(model, gpu, plan.dp * plan.tp * plan.pp, cluster)
    validate_plan(model, cluster, plan, global_batch)
    st = make_setting(model, cluster, global_batch, seq_len, precision, optimizer, efficiency, reserve_bytes,
                      fragmentation)
    return estimate(st, plan)


def validate_plan(model: ModelConfig, cluster: Cluster, p: Plan, global_batch: int) -> None:
    """Raise DistlearnValueError (bilingual, naming the field) unless ``p`` is a plan the search could produce."""
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
    check_divisible("num_kv_heads", model.kv_heads, "tp", p.tp)
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

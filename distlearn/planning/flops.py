"""The planner's counts: FLOPs of a forward pass and a training step, the model's parameters per layer
(:class:`ModelCounts`), and the peak FLOP/s a recipe's matrix multiplies run at.

Units: FLOPs (one multiply-add = 2 FLOPs), parameters (a count), FLOP/s.

Forward FLOPs per micro-batch F = 2·b·s·(l·P_matmul + V·h) + 4·b·s²·h·l: the matrix multiplies, the attention
scores and the logits (Narayanan et al. 2021 §5.1), with P_matmul the weights of one layer that enter a token's
matrix multiplies (:func:`matmul_params_per_layer`; MoE layers count the experts a token uses; MLA's attention
core its own head sizes, :func:`attention_core_flops`). Without recomputation a step costs 3F (backward = 2 ×
forward); full recomputation runs the layers' forward again, 4F on the layers — for a GPT block this is exactly
Narayanan et al.'s eq. 3, 96·B·s·l·h²·(1 + s/6h + V/16lh) (:func:`megatron_flops`); selective recomputation adds
only the attention core 4·b·s²·h per layer. :func:`measured_flops` counts the same with PyTorch's own counter.

Peaks (:func:`compute_peak`): the GPU's dense 16-bit peak for the mixed recipes, fp32 / TF32 for ``"fp32"``, FP8
for the linear layers of the FP8 recipes of :mod:`distlearn.precision.fp8_recipes` (datasheets, in
:mod:`distlearn.core.hardware`).
"""
from __future__ import annotations

from typing import NamedTuple

from distlearn.activation_memory.formulas import RECOMPUTE_MODES
from distlearn.core.hardware import GPU, peak_flops
from distlearn.core.models import ModelConfig, build_model
from distlearn.core.records import GPU as GPU_SPEC, MODEL
from distlearn.core.validate import (DistlearnValueError, check_bool, check_choice, check_elements, check_int,
                                     check_seed, checks, mapping)
from distlearn.memory.formulas import PRECISIONS
from distlearn.precision.fp8_recipes import RECIPES as FP8_RECIPES

FP8_PRECISIONS = tuple(k for k, r in FP8_RECIPES.items() if r.gemm == "fp8")  # distlearn.precision.fp8_recipes, FP8 GEMMs
PLANNER_PRECISIONS = tuple(PRECISIONS) + FP8_PRECISIONS


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


@checks(model=MODEL)
def forward_flops(model: ModelConfig, num_sequences: int, seq_len: int) -> dict[str, float]:
    """Forward FLOPs of ``num_sequences`` sequences of ``seq_len`` tokens: ``{"layers", "attention", "logits"}``.

    layers: 2·B·s·Σ P_matmul (:func:`matmul_params_per_layer`, l·P_matmul for a dense model); attention
    (QKᵀ and scores·V, causal mask not exploited): :func:`attention_core_flops`, 4·B·s²·h·l for standard
    attention; logits: 2·B·s·h·V. For a GPT block P_matmul = 12h², giving Narayanan et al.'s 24·B·s·h² +
    4·B·s²·h per layer. Raises DistlearnValueError unless ``num_sequences`` and ``seq_len`` are integers ≥ 1.
    """
    return _forward_flops(model, check_int("num_sequences", num_sequences), check_int("seq_len", seq_len))


def _forward_flops(model: ModelConfig, B: int, s: int) -> dict[str, float]:
    """:func:`forward_flops` of numbers already checked (:func:`model_counts`)."""
    h, l = model.hidden_size, model.num_layers
    if model.is_moe:
        matmul = sum(matmul_params_per_layer(model, i) for i in range(l))
    else:
        matmul = l * matmul_params_per_layer(model)
    return {"layers": 2 * B * s * matmul, "attention": B * l * attention_core_flops(model, s),
            "logits": 2 * B * s * h * model.vocab_size}


@checks(model=MODEL)
def step_flops(model: ModelConfig, num_sequences: int, seq_len: int, recompute: str = "none", *,
               causal_count: bool = False) -> dict[str, float]:
    """FLOPs of one training step: ``{"model", "hardware"}`` (:func:`flops_of_step` of :func:`forward_flops`).
    ``causal_count``: a counting convention for MFU, not what a kernel runs — count the attention core under the
    causal mask, half of :func:`attention_core_flops` (the scores above the diagonal left out), instead of all of
    it (the default, Narayanan et al. 2021 eq. 3's 4·s²·h per layer). Raises DistlearnValueError for a
    ``recompute`` not in :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES` or a ``causal_count`` that is
    not a bool."""
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    forward = forward_flops(model, num_sequences, seq_len)
    if check_bool("causal_count", causal_count):
        forward = {**forward, "attention": forward["attention"] / 2}
    return _flops_of_step(forward, recompute)


@checks(forward=mapping(("layers", "logits")))
def flops_of_step(forward: dict[str, float], recompute: str) -> dict[str, float]:
    """``{"model", "hardware"}`` FLOPs of a step whose forward costs ``forward`` (:func:`forward_flops`).

    model = 3 × forward (what MFU counts); hardware adds what recomputation runs again: the layers' forward for
    ``"full"`` (→ Narayanan et al. 2021 eq. 3 for GPT), the attention core for ``"selective"``, no matrix
    FLOPs for ``"norm-act"`` (it recomputes element-wise work only). Raises DistlearnValueError for a
    ``recompute`` not in :data:`~distlearn.activation_memory.formulas.RECOMPUTE_MODES`."""
    return _flops_of_step(forward, check_choice("recompute", recompute, RECOMPUTE_MODES))


def _flops_of_step(forward: dict[str, float], recompute: str) -> dict[str, float]:
    """:func:`flops_of_step` for a ``recompute`` already checked (:func:`step_flops`, :class:`ModelCounts`)."""
    model_flops = 3 * (forward["layers"] + forward["attention"] + forward["logits"])
    extra = {"none": 0.0, "norm-act": 0.0, "selective": forward["attention"],
             "full": forward["layers"] + forward["attention"]}[recompute]
    return {"model": model_flops, "hardware": model_flops + extra}


@checks(model=MODEL)
def measured_flops(model: ModelConfig, num_sequences: int, seq_len: int, seed: int = 0) -> dict[str, int]:
    """FLOPs that PyTorch itself counts (``torch.utils.flop_counter.FlopCounterMode``) for one forward and one
    backward of ``model`` built for real on the CPU (keep it small): ``{"forward", "backward"}``.

    Attention runs on SDPA's math backend so its matrix multiplies are visible to the counter (the fused CPU kernel
    is not counted). Compare with :func:`forward_flops` (equal) and with backward = 2 × forward. Imports torch
    (about a second) only when called. Raises DistlearnValueError unless ``num_sequences`` ≥ 1, 1 ≤ ``seq_len`` ≤
    ``model.max_seq_len``, ``seed`` is a seed (:func:`~distlearn.core.validate.check_seed`) and the largest
    activation (tokens × the widest layer, or the attention scores) has at most
    :data:`~distlearn.core.validate.MAX_ELEMENTS` elements.
    """
    B = check_int("num_sequences", num_sequences)
    s = check_int("seq_len", seq_len, maximum=model.max_seq_len)
    seed = check_seed("seed", seed)
    widest = max(model.hidden_size, model.ffn_hidden_size, model.vocab_size)
    check_elements("num_sequences × seq_len", max(B * s * widest, B * model.num_heads * s * s))
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(seed)
    net = build_model(model, device="cpu")
    tokens = torch.randint(0, model.vocab_size, (B, s))
    with sdpa_kernel(SDPBackend.MATH):
        with FlopCounterMode(display=False) as fwd:
            out = net(tokens)
        with FlopCounterMode(display=False) as bwd:
            out.float().sum().backward()
    return {"forward": fwd.get_total_flops(), "backward": bwd.get_total_flops()}


@checks(model=MODEL)
def megatron_flops(model: ModelConfig, batch: int, seq_len: int) -> float:
    """Narayanan et al. 2021 eq. 3: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs per step (with recomputation).

    Valid for GPT blocks (4h MLP, multi-head attention); used to convert published TFLOP/s into tokens/s.
    Raises DistlearnValueError unless ``batch`` and ``seq_len`` are integers ≥ 1.
    """
    batch = check_int("batch", batch)
    s, l, h, V = check_int("seq_len", seq_len), model.num_layers, model.hidden_size, model.vocab_size
    return 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


# ---------------------------------------------------------------- peaks
@checks(gpu=GPU_SPEC)
def compute_peak(gpu: GPU, precision: str) -> float:
    """Dense FLOP/s the matrix multiplies of ``precision`` run at on ``gpu`` (:func:`matmul_peak`). Raises
    DistlearnValueError for an unknown precision, for fp32 on a GPU whose fp32 peak is unknown, or for FP8 on a
    GPU without FP8 tensor cores."""
    check_choice("precision", precision, PLANNER_PRECISIONS)
    return _matmul_peak(gpu, precision)


@checks(gpu=GPU_SPEC)
def matmul_peak(gpu: GPU, precision: str) -> float:
    """:func:`compute_peak` for a ``precision`` known to be one of :data:`PLANNER_PRECISIONS`: ``gpu.peak_flops``
    (16-bit tensor cores) for the mixed-precision recipes, ``gpu.peak_flops_fp32`` (TF32 tensor cores, FP32 on a
    V100) for ``"fp32"``, the FP8 peak (:func:`distlearn.core.hardware.peak_flops` ``(gpu, "fp8")``) for the FP8
    recipes (:data:`FP8_PRECISIONS`: only their linear layers' GEMMs run in FP8). Raises DistlearnValueError for
    a precision not in :data:`PLANNER_PRECISIONS`, for fp32 on a GPU whose fp32 peak is unknown, or for FP8 on a
    GPU without FP8 tensor cores. (:class:`~distlearn.planning.setting.Setting` takes its peaks from
    :meth:`Peaks.of`, with the precision :func:`~distlearn.planning.setting.make_setting` checked.)"""
    check_choice("precision", precision, PLANNER_PRECISIONS)
    return _matmul_peak(gpu, precision)


class Peaks(NamedTuple):
    """The FLOP/s a recipe's kernels run at on one GPU (:meth:`of`)."""

    gemm: float    # the linear layers' GEMMs: :func:`matmul_peak` of the precision (FP8 for the FP8 recipes)
    other: float   # the attention core and the logits: 16-bit (fp32 for "fp32"; FP8 recipes keep them in bf16)

    @classmethod
    def of(cls, gpu: GPU, precision: str) -> Peaks:
        """The peaks of ``precision`` (one of :data:`PLANNER_PRECISIONS`, checked by the caller's boundary:
        :func:`~distlearn.planning.setting.make_setting`) on ``gpu``."""
        return cls(_matmul_peak(gpu, precision),
                   _matmul_peak(gpu, "mixed" if precision in FP8_PRECISIONS else precision))


def _matmul_peak(gpu: GPU, precision: str) -> float:
    """:func:`matmul_peak` for a precision of :data:`PLANNER_PRECISIONS`."""
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


# ---------------------------------------------------------------- the model's counts, once per setting
class StageSums(NamedTuple):
    """What ``n`` consecutive layers hold and cost (:meth:`ModelCounts.stage_sums`)."""

    dense_params: float     # parameters every dp rank holds (attention, norms, dense MLP, router, shared experts)
    expert_params: float    # routed experts' parameters (split over ep)
    gemm_flops: float       # forward FLOPs of the linear layers, per sequence
    attention_flops: float  # forward FLOPs of the attention core, per sequence
    moe_layers: int         # how many of the layers are MoE layers


class ModelCounts(NamedTuple):
    """What the planner keeps about a model for one sequence length and global batch (:func:`model_counts`):
    parameters per layer and forward FLOPs per sequence. Parameters are counts, FLOPs are per sequence of
    ``seq_len`` tokens unless said otherwise."""

    moe_layer: tuple[bool, ...]            # per layer: whether it is an MoE layer
    dense_params: tuple[int, ...]          # per layer: the parameters every dp rank holds
    expert_params: tuple[int, ...]         # per layer: the routed experts' parameters (0 in a dense layer)
    largest_layer_params: int              # dense + expert parameters of the largest layer (ZeRO-3's gathered unit)
    embedding_params: int                  # the first stage's extra parameters (the embedding)
    last_stage_params: int                 # the last stage's extra parameters: final norm + output layer (or the
    #                                        tied embedding's copy Megatron keeps there)
    attention_flops: float                 # forward FLOPs of one layer's attention core
    gemm_flops: float                      # forward FLOPs of one layer's linear layers (the mean over the layers)
    gemm_flops_by_layer: tuple[float, ...] | None  # per layer, for MoE models (None for dense ones)
    logits_flops: float                    # forward FLOPs of the output layer
    model_flops_step: float                # model FLOPs of a step of the global batch (3 × forward, no recompute)
    step_forward: dict[str, float]         # forward FLOPs of the global batch (:func:`forward_flops`)

    def hardware_flops(self, recompute: str) -> float:
        """FLOPs of one step of the global batch with ``recompute``'s extra forward work (:func:`flops_of_step`;
        ``recompute`` checked by the caller's entry point)."""
        return _flops_of_step(self.step_forward, recompute)["hardware"]

    def stage_sums(self, start: int, n: int) -> StageSums:
        """Parameters, per-sequence forward FLOPs and MoE layers of the ``n`` layers from layer ``start``."""
        if self.gemm_flops_by_layer is None:  # a dense model: every layer is the same
            return StageSums(n * self.largest_layer_params, 0, n * self.gemm_flops, n * self.attention_flops, 0)
        r = range(start, start + n)
        return StageSums(sum(self.dense_params[i] for i in r), sum(self.expert_params[i] for i in r),
                         sum(self.gemm_flops_by_layer[i] for i in r), n * self.attention_flops,
                         sum(self.moe_layer[i] for i in r))


def model_counts(model: ModelConfig, global_batch: int, seq_len: int) -> ModelCounts:
    """:class:`ModelCounts` of ``model``: per layer whether it is MoE, its dense and routed-expert parameters
    (:meth:`~distlearn.core.models.ModelConfig.layer_parameters` and its parts); forward FLOPs per sequence
    (:func:`forward_flops`), per layer for MoE models; the step's model FLOPs (:func:`flops_of_step`)."""
    h, l = model.hidden_size, model.num_layers
    if model.is_moe:  # per layer: the part every dp rank holds, and the routed experts ep ranks split
        base = model.attention_parameters() + 2 * model.norm_parameters()
        moe = [model.is_moe_layer(i) for i in range(l)]
        dense = [base + (model.router_parameters() + model.num_shared_experts * model.expert_parameters()
                         if k else model.mlp_parameters()) for k in moe]
        experts = [model.num_experts * model.expert_parameters() if k else 0 for k in moe]
    else:
        moe, dense, experts = [False] * l, [model.layer_parameters()] * l, [0] * l
    tied_copy = model.vocab_size * h if model.tied_embeddings else 0  # Megatron keeps a copy on the last stage
    f = _forward_flops(model, 1, seq_len)  # per sequence
    step = _forward_flops(model, global_batch, seq_len)  # the global batch
    by_layer = tuple(2 * seq_len * matmul_params_per_layer(model, i) for i in range(l)) if model.is_moe else None
    return ModelCounts(
        moe_layer=tuple(moe), dense_params=tuple(dense), expert_params=tuple(experts),
        largest_layer_params=max(d + e for d, e in zip(dense, experts)),
        embedding_params=model.embedding_parameters(),
        last_stage_params=model.norm_parameters() + (model.lm_head_parameters() or tied_copy),
        attention_flops=f["attention"] / l, gemm_flops=f["layers"] / l, gemm_flops_by_layer=by_layer,
        logits_flops=f["logits"],
        model_flops_step=_flops_of_step(step, "none")["model"], step_forward=step)

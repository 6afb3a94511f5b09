"""The planner's time model of one transformer layer, kernel by kernel (issue 22): matrix multiplies as rooflines,
the attention core, and the memory-bound elementwise work, each from the shapes one GPU sees.

Units: seconds, FLOPs, bytes (GB = 1e9), bandwidths in bytes/s. ``tokens`` is the number of tokens one GPU's
micro-batch holds, b·s/cp; ``tp`` the tensor-parallel degree.

**GEMMs** (:func:`layer_gemms`, :func:`gemm_seconds`): each matrix multiply of a layer with its own shape per GPU,
(m × k) · (k × n) with m = tokens and n, k after tensor parallelism (Megatron's column-parallel QKV and MLP-up,
row-parallel attention output and MLP-down; Shoeybi et al. 2019), an MoE layer's experts with the tokens routed
to them (balanced routing), timed as a roofline::

    t = max( 2·m·n·k / (peak × e_gemm),  (m·k + k·n + m·n) · bytes / hbm_bw )

e_gemm (:data:`GEMM_CEILING`) is the best share of the dense bf16 peak a single large matmul reaches, measured by
S. Bekman, *Machine Learning Engineering*, "Maximum Achievable Matmul FLOPS comparison table"
(compute/accelerator/README.md; the A100 and H100 rows as first measured, CUDA 12.1): A100 SXM 267.9 of 312 TFLOP/s =
85.9 %, H100 SXM 792.1 of 989 = 80.1 % (the table's later re-measurement with torch 2.6 / 2.7 reads 271.2 = 86.9 %
and 794.5 = 80.3 %: within about 1 %). The Blackwell, MI300X and FP8 rows are the table's at commit 744d01e
(2026-08-22), measured with torch 2.7–2.10 and CUDA 12.6–13.0: each GPU's own software, so differences of a point
or two between GPUs may be software, not silicon.
Both backward GEMMs of a linear layer (dX = dY·Wᵀ and dW = Xᵀ·dY) have the forward's FLOPs and move the same
three matrices' bytes, so the backward costs twice the forward. No tile or wave quantisation is modelled.

**Attention core** (in :func:`layer_seconds`; :func:`attention_gemms`): *materialised* (the GPT presets, Megatron-LM 2021): QKᵀ and
scores·V as b·a/t batched GEMMs through the same roofline, the fused scale-mask-softmax and the attention
dropout counted with the elementwise work; *flash* (Llama presets, and any plan with cp > 1): the kernel's FLOPs
at a share of the peak (:data:`FLASH_SHARE`) — FlashAttention-2 on the A100 (Dao 2023, §1: "up to 73 % of the
theoretical max throughput in the forward pass, and up to 63 % … in the backward pass"), FlashAttention-3 on
the H100 / H200 (Shah et al. 2024, arXiv 2407.08608 v1/v2 abstract: "FP16 reaching up to 740 TFLOPs/s (75 %
utilization)" — the NeurIPS 2024 version's abstract reads 840 TFLOP/s, 85 %; §4.1: backward 1.5–1.75 ×
FlashAttention-2, which the same abstract puts at "35 % utilization on the H100": 1.5 × 35 % = 52.5 %). These are
headline figures, not the head size the Llama presets run: the 740 TFLOP/s forward is FlashAttention-3's head
dimension 256; its own benchmark figures at head dimension 128 (H100 SXM5, not causal, 8K tokens) read about
646 TFLOP/s forward (65 %) and 559 TFLOP/s backward (57 %), so at d = 128 the forward share is optimistic and the
backward one pessimistic; together they time the flash kernel about 2 % slower than those figures (both counted
with the 2.5 × backward FLOPs below). We take FlashAttention-3 for the H100 because it is the best published Hopper kernel
(FA2 without Hopper instructions is the 35 %); the Llama 3 paper does not say which kernel it ran. The flash
backward runs 2.5 × the forward's FLOPs (five matmuls against two: it recomputes the scores; Dao 2023 §4.1 and the
FlashAttention-2 benchmark script count it so, which is also how its 63 % backward share is measured). With a
causal mask (``causal=True``, the planner's default for a flash kernel: every decoder here is causal) the kernel
skips the tiles above the diagonal, :func:`causal_fraction` ≈ ½ of the scores, at the same share of the peak (an
assumption: FlashAttention-3's causal figures at head dimension 128 read a few per cent lower than the non-causal
ones). The materialised core of Megatron-LM 2021 computes every score and masks them in the softmax: charged in
full. How MFU *counts* attention FLOPs is a separate convention (:func:`distlearn.planning.flops.step_flops`,
``causal_count``).

**FP8 GEMMs** run at the FP8 peak × :data:`FP8_GEMM_CEILING` for per-tensor-scaled recipes (the same table's FP8
best shapes: H100 70.9 %, H200 73.4 %, B200 76.3 %, GB200 72.3 %; below the bf16 share on every NVIDIA GPU in the
table, by 1–9 points), and at
:data:`FP8_BLOCK_CEILING` (DeepGEMM's measured 1426 of 1979 TFLOP/s on the H800) for fine-grained scaling
(:data:`FINE_GRAINED_FP8_RECIPES`). The course's own H200 measurement (:mod:`distlearn.planning.measured`) found
its fastest per-tensor FP8 GEMM at 1,409 TFLOP/s, 71.2 % of the peak.

**Blackwell and the MI300X.** The bf16 ceilings are the same table's: B200 77.6 %, GB200 72.9 %, MI300X 51.1 %.
The flash kernel on the B200 / GB200 is cuDNN's, as NVIDIA's benchmark measured it at 8,192 tokens, causal (B200
52 % forward, 42 % backward; GB200 63 % and 48 %: see :data:`FLASH_SHARE`); the MI300X keeps the A100's
FlashAttention-2 shares (an assumption).

**Elementwise, memory-bound work** (:func:`elementwise_ops`): bytes read + written per layer, forward and
backward, tensor by tensor, at the GPU's HBM bandwidth (``GPU.hbm_bw``, datasheets). GPT as Megatron-LM runs it
(LayerNorm, QKV bias add, fused scale-mask-softmax, attention dropout, the context's head transpose, fused
bias-dropout-add twice, fused bias-GeLU), Llama (RMSNorm, RoPE on q and k, residual adds, SwiGLU fused or not).
Without sequence parallelism the norms, dropouts and residual adds run on the whole b·s·h on every tensor-parallel
rank (replicated; Korthikanti et al. 2022 §4.2.2); with it they are split by tp. Gradient sums where a tensor
feeds two branches (the residual stream) count as one add in backward.

Why larger models reach more of the peak: per layer the GEMM FLOPs grow as s·b·h²/t, the elementwise bytes as
s·b·h (and a·s² for materialised scores), so the memory-bound share falls as h grows (Megatron's 137 → 163
TFLOP/s from 1.7 B to 1 T, Narayanan et al. 2021 Table 1).

What is not modelled, and stays in the one fitted constant (:data:`END_TO_END`, fitted on the calibration runs of
:mod:`distlearn.planning.calibration` only, the same for every run and GPU): kernel launch gaps and
CPU overheads, the optimizer step, data loading and logging (Megatron-LM's README counts its FLOP/s end to end,
"including data loading, optimization, and even logging"), shape quantisation of the GEMMs, HBM bandwidth
below the datasheet's, and the weight gradients' accumulation into fp32 buffers once per micro-batch (Megatron's
``main_grad.add_(grad)``: about 10 bytes per parameter of the stage, 3–6 % of a micro-batch's compute time for
the 2021 runs at 2048 tokens, 1–3 % for Llama 3 at 8K–128K).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from distlearn.activation_memory.formulas import ATTENTION, SWIGLU
from distlearn.core.hardware import GPU
from distlearn.core.models import ModelConfig
from distlearn.core.records import GPU as GPU_SPEC, MODEL
from distlearn.core.validate import (checks, record, DistlearnValueError, check_bool, check_choice, check_int, check_number,
                                     check_positive)
from distlearn.planning import flops
from distlearn.core.guard import read_only

# Bekman, ml-engineering, compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS comparison table"
# (bf16, best shape): A100 SXM 267.9/312, H100 SXM 792.1/989. The H200 has the H100's GH100 die, tensor cores and
# clocks (it differs in memory): we take the H100's share. The V100 is not in the table: the A100's share, an
# assumption. Blackwell and the MI300X from the same table as of commit 744d01e (2026-08-22): B200 SXM 1745.0/2250
# (torch 2.7.1+cu128), GB200 1822.0/2500 (torch 2.10 nightly, cu130), MI300X 668.4 TFLOP/s (ROCm 6.3, TunableOp
# on; the table divides by 1300, the preset's datasheet peak is 1307.4: 51.1 %).
GEMM_CEILING = read_only({"a100": 267.9 / 312, "h100": 792.1 / 989, "h200": 792.1 / 989, "v100": 267.9 / 312,
                "h800": 792.1 / 989, "b200": 1745.0 / 2250, "gb200": 1822.0 / 2500, "mi300x": 668.4 / 1307.4})
# The same table's FP8 (float8_e4m3fn, one scale per tensor, torch._scaled_mm) best shapes, share of the dense FP8
# peak: H100 SXM 1402.6/1979, H200 1453.4/1979, B200 3432.5/4500, GB200 3615.6/5000. The H800 has the H100's compute:
# the H100's share. Per-tensor-scaled FP8 GEMMs (Transformer Engine's recipes, torchao's float8) run at this share; a
# GPU not in it (the A100 and V100 have no FP8; the MI300X is not measured: its FP8 GEMMs at its bf16 share of the
# FP8 peak, an assumption) keeps GEMM_CEILING. The H200 takes its own FP8 row but the H100's bf16 one (the same die;
# the table's H200 bf16 row is "the same" as the H100's): the 2.5-point FP8 gap between them is software or
# measurement, not silicon.
FP8_GEMM_CEILING = read_only({"h100": 1402.6 / 1979, "h200": 1453.4 / 1979, "h800": 1402.6 / 1979,
                              "b200": 3432.5 / 4500, "gb200": 3615.6 / 5000})
# share of the 16-bit peak of a FlashAttention kernel, (forward, backward): A100 FlashAttention-2 (Dao 2023 §1),
# H100 / H200 FlashAttention-3 (Shah et al. 2024: forward 75 %, backward 1.5 × FlashAttention-2's 35 %; see the
# module docstring for the head-dimension-128 figures). The V100 has no FlashAttention-2 (it needs Ampere or
# newer): the A100's shares there are an assumption, like its GEMM ceiling. B200 / GB200: cuDNN's fused attention
# (what Transformer Engine runs by default on Hopper and newer when both backends are available: TE 2.2+ turns
# FlashAttention off "to give FusedAttention preference"), NVIDIA's own benchmark (github.com/NVIDIA/cudnn-frontend,
# benchmark/sdpa_benchmark_training/artifacts/sdpa_bf16_benchmark_results_NVIDIA_{B200,GB200}.csv), bf16, head
# dimension 128, 128 query / 8 KV heads (Llama 3 405B's; other models' head counts are not measured), 8,192 tokens,
# causal, the benchmark crediting half the scores (the GB200 harness s(s + 1)/2) and 2.5 x the forward for the
# backward; the planner charges causal_fraction (0.508 at 8K) of them at these shares, so it times the kernel about
# 1.6 % slower than measured: B200 cuDNN 9.13.1 (NGC PyTorch 25.09; commit 0b1577c) 1171.3 forward and
# 942.5 backward of 2250 TFLOP/s; GB200 cuDNN 9.17.0 (NGC 25.11; commit b372d39) 1584 and 1211 of 2500. These are
# measured at the Llama runs' own sequence length; FlashAttention-4 (arXiv 2603.05451) reports up to 1613 TFLOP/s
# forward on Blackwell but prints no backward figures. The two figures differ in cuDNN version and harness (B200:
# PyTorch SDPA over cuDNN 9.13.1; GB200: the cuDNN frontend, 9.17.0), not only in the GPU. The MI300X: no figure taken, the A100's shares (an assumption).
FLASH_SHARE = read_only({"a100": (0.73, 0.63), "h100": (0.75, 0.525), "h200": (0.75, 0.525), "v100": (0.73, 0.63),
               "h800": (0.75, 0.525), "b200": (1171.3 / 2250, 942.5 / 2250), "gb200": (1584 / 2500, 1211 / 2500),
               "mi300x": (0.73, 0.63)})
FLASH_BACKWARD_FLOPS = 2.5  # a flash backward recomputes the scores: 5 matmuls against the forward's 2
# FP8 GEMMs with fine-grained scaling (1 × 128 activation tiles, 128 × 128 weight blocks, promotion to CUDA cores
# for the accumulation: DeepSeek-V3 §3.3.2), share of the dense FP8 peak (1979 TFLOP/s, H100 / H800 SXM): DeepGEMM's
# README (github.com/deepseek-ai/DeepGEMM, "Normal GEMMs for dense models", commit 55ab91f of 2025-03-25, H800 SXM5,
# NVCC 12.8), its best shape M = 4096, N = 7168, K = 16384 at 1426 TFLOP/s (the table's M = 4096 rows: 751–1426;
# 1.3 x the CUTLASS 3.6 kernel DeepSeek ran before it); the README's later headline "up to 1550 TFLOPS on H800"
# (2025-04-18) is 78 %. Hopper only (DeepGEMM supports nothing else): other GPUs keep the per-tensor
# FP8_GEMM_CEILING (or GEMM_CEILING where no FP8 share is measured).
# A post-hoc, best-shape UPPER BOUND for DeepSeek-V3's pre-training (finished 2024, before DeepGEMM): V3's own MoE
# shapes read 1214–1346 (grouped) in the same README, and the kernel V3 ran was 1.3 x slower; at 1426 / 1.3 ≈ 1100
# TFLOP/s the DeepSeek-V3 row reads 0.83 instead of 0.89 (steady state 0.80 instead of 0.86)
FP8_BLOCK_CEILING = read_only({"h100": 1426 / 1979, "h200": 1426 / 1979, "h800": 1426 / 1979})
# recipes whose linear layers run such fine-grained-scaled FP8 GEMMs (distlearn.precision.fp8_recipes keys); the
# per-tensor recipes (Transformer Engine's, torchao's) run at FP8_GEMM_CEILING
FINE_GRAINED_FP8_RECIPES = ("deepseek-v3",)
# FlashAttention's tile of keys and queries (FlashAttention-2/3 forward kernels: 128 query rows; Dao 2023 §3.1):
# with a causal mask the kernel skips every tile above the diagonal and computes the diagonal tiles whole
FLASH_TILE = 128
# The one fitted constant: the share of the modelled kernel speed reached end to end (launch gaps, optimizer step,
# data loading, ...), the same for every run and GPU, never tuned per run. Fitted on the four calibration runs of
# distlearn.planning.calibration (calibrate(): their ratios' geometric mean = 1; tests/test_published_runs.py checks
# END_TO_END == round(calibrate(), 2)); every other published run is out of sample.
END_TO_END = 0.78
MASK_BYTES = 1  # a dropout mask: one byte per value (torch's bool mask)


@checks(gpu=GPU_SPEC)
def gpu_family(gpu: GPU) -> str:
    """The key of :data:`GEMM_CEILING` / :data:`FLASH_SHARE` for ``gpu``: its name's prefix (``"a100-80gb"`` →
    ``"a100"``, ``"a100-80gb-jean-zay"`` → ``"a100"``, ``"h800"`` → ``"h800"``). A GPU of another family gets
    the A100's figures' key ``"a100"`` (an assumption, named in the breakdown)."""
    for key in GEMM_CEILING:
        if gpu.name.lower().startswith(key):
            return key
    return "a100"


def causal_fraction(seq_len: int, tile: int = FLASH_TILE) -> float:
    """Share of a flash kernel's score tiles computed under a causal mask: n = ⌈s / tile⌉ tiles per side, the
    n(n + 1)/2 on and below the diagonal of n², i.e. (n + 1)/(2n) (0.508 at s = 8192, 0.5005 at 131,072; 1 for one
    tile). With Llama 3's load-balanced context parallelism (2·cp chunks, rank r holding chunks r and 2cp − 1 − r,
    §3.3.2; :func:`distlearn.context_parallel.simulation.layout_chunks` with ``"zigzag"``) every rank runs the same share of them.
    Raises DistlearnValueError unless ``seq_len`` and ``tile`` are integers ≥ 1."""
    return _causal_fraction(check_int("seq_len", seq_len), check_int("tile", tile))


def _causal_fraction(seq_len: int, tile: int) -> float:
    """:func:`causal_fraction` of checked integers."""
    n = -(-seq_len // tile)
    return (n + 1) / (2 * n)


@dataclass(frozen=True)
class Gemm:
    """``count`` matrix multiplies (m × k)·(k × n), e.g. one per attention head of a batched GEMM."""

    name: str
    m: float
    n: float
    k: float
    count: float = 1

    @property
    def flops(self) -> float:
        return 2 * self.m * self.n * self.k * self.count

    def bytes(self, in_bytes: float, out_bytes: float) -> float:
        """Bytes read (both inputs) and written (the output) once each."""
        return ((self.m * self.k + self.k * self.n) * in_bytes + self.m * self.n * out_bytes) * self.count


@checks(g=record(Gemm, "Gemm(\"qkv\", 4096, 4096, 4096)"))
def gemm_seconds(g: Gemm, peak: float, ceiling: float, hbm_bw: float, in_bytes: float = 2,
                 out_bytes: float = 2) -> float:
    """Roofline time of ``g``: max(FLOPs / (peak × ceiling), bytes / hbm_bw), seconds. Raises DistlearnValueError
    unless ``peak``, ``hbm_bw``, ``in_bytes`` and ``out_bytes`` are finite numbers > 0 and ``ceiling`` is in
    (0, 1]."""
    check_positive("peak", peak)
    check_number("ceiling", ceiling, minimum=0, maximum=1, strict_min=True)
    check_positive("hbm_bw", hbm_bw)
    check_positive("in_bytes", in_bytes)
    check_positive("out_bytes", out_bytes)
    return _gemm_seconds(g, peak, ceiling, hbm_bw, in_bytes, out_bytes)


def _gemm_seconds(g: Gemm, peak: float, ceiling: float, hbm_bw: float, in_bytes: float, out_bytes: float) -> float:
    """:func:`gemm_seconds` of checked numbers."""
    return max(g.flops / (peak * ceiling), g.bytes(in_bytes, out_bytes) / hbm_bw)


def _is_moe_layer(model: ModelConfig, layer: int | None) -> bool:
    """Whether ``layer`` of ``model`` is an MoE layer (``None``: its first MoE layer, if it has any)."""
    return model.is_moe and model.is_moe_layer(model.first_dense_layers if layer is None else layer)


def layer_gemms(model: ModelConfig, tokens: float, tp: int, layer: int | None = None, ep: int = 1) -> list[Gemm]:
    """The forward linear-layer GEMMs of one layer on one GPU (attention core excluded): m = ``tokens``.

    GPT: QKV (n = 3h/t), attention output (k = h/t), MLP up (n = f/t), MLP down (k = f/t). Llama: QKV with
    grouped K/V (n = (h + 2·kv)/t), output, gate and up as one GEMM (n = 2f/t), down. MLA (DeepSeek): its
    projections as one GEMM of the same FLOPs (k = h). MoE layer (``layer``; balanced routing): the router
    (n = E), each of the E/ep local experts with tokens·k·ep/E tokens, the shared experts with every token.
    FLOPs sum to 2·tokens·P_matmul/t (:func:`~distlearn.planning.flops.matmul_params_per_layer`).
    """
    h, t = model.hidden_size, tp
    kv = model.kv_heads * model.head_dim
    if model.mla is not None:
        attn_params = model.attention_parameters() - model.mla.kv_lora_rank - (model.mla.q_lora_rank or 0)
        attn = [Gemm("attention projections (MLA)", tokens, attn_params / h / t, h)]
    elif model.arch == "gpt":
        attn = [Gemm("qkv", tokens, 3 * h / t, h), Gemm("attention out", tokens, h, h / t)]
    else:
        attn = [Gemm("qkv", tokens, (h + 2 * kv) / t, h), Gemm("attention out", tokens, h, h / t)]
    if _is_moe_layer(model, layer):
        f, E, k = model.expert_ffn, model.num_experts, model.experts_per_token
        routed = tokens * k * ep / E
        mlp = [Gemm("router", tokens, E, h),
               Gemm("experts gate+up", routed, 2 * f / t, h, count=E / ep),
               Gemm("experts down", routed, h, f / t, count=E / ep)]
        if model.num_shared_experts:
            fs = model.num_shared_experts * f
            mlp += [Gemm("shared gate+up", tokens, 2 * fs / t, h), Gemm("shared down", tokens, h, fs / t)]
        return attn + mlp
    f = model.ffn_hidden_size
    if model.arch == "gpt":
        return attn + [Gemm("mlp up", tokens, f / t, h), Gemm("mlp down", tokens, h, f / t)]
    return attn + [Gemm("mlp gate+up", tokens, 2 * f / t, h), Gemm("mlp down", tokens, h, f / t)]


@checks(model=MODEL)
def attention_gemms(model: ModelConfig, micro_batch: int, seq_len: int, tp: int) -> list[Gemm]:
    """The materialised attention core's two batched GEMMs, b·a/t of each: QKᵀ (s × d)·(d × s) and
    scores·V (s × s)·(s × d) (MLA: d_qk and d_v). Raises DistlearnValueError unless ``micro_batch``, ``seq_len``
    and ``tp`` are integers ≥ 1."""
    return _attention_gemms(model, check_int("micro_batch", micro_batch), check_int("seq_len", seq_len),
                            check_int("tp", tp))


def _attention_gemms(model: ModelConfig, micro_batch: int, seq_len: int, tp: int) -> list[Gemm]:
    """:func:`attention_gemms` of checked numbers."""
    d_qk = model.mla.qk_head_dim if model.mla is not None else model.head_dim
    d_v = model.mla.v_head_dim if model.mla is not None else model.head_dim
    heads = micro_batch * model.num_heads / tp
    s = seq_len
    return [Gemm("QK^T", s, s, d_qk, count=heads), Gemm("scores·V", s, d_v, s, count=heads)]


@dataclass(frozen=True)
class ElementwiseOp:
    """One memory-bound kernel of a layer: ``values`` elements per GPU (a tensor's size), the tensors of that size
    it reads + writes in forward (``forward``) and backward (``backward``), and dropout masks (one byte per value)
    written in forward (``forward_masks``) and read in backward (``backward_masks``)."""

    name: str
    values: float
    forward: float
    backward: float
    forward_masks: float = 0
    backward_masks: float = 0

    def bytes(self, act_bytes: float) -> tuple[float, float]:
        """(forward, backward) bytes with activations of ``act_bytes`` bytes."""
        return (self.values * (self.forward * act_bytes + self.forward_masks * MASK_BYTES),
                self.values * (self.backward * act_bytes + self.backward_masks * MASK_BYTES))


@checks(model=MODEL)
def elementwise_ops(model: ModelConfig, micro_batch: int, tokens: float, tp: int, sequence_parallel: bool,
                    attention: str, swiglu: str = "unfused", seq_len: int | None = None,
                    layer: int | None = None) -> list[ElementwiseOp]:
    """The memory-bound kernels of one layer on one GPU, tensor by tensor (T = ``tokens``, h hidden, f MLP width,
    t = tp; ``rep`` = T·h/t with sequence parallelism, else T·h on every rank).

    GPT (Megatron-LM 2021): LayerNorm ×2 (read x, write y; backward read dy, x, write dx: 2 / 3 tensors of
    ``rep``), QKV bias add (2 / 1 of 3T·h/t: backward reduces the bias gradient), fused scale-mask-softmax (2 / 3 of
    b·a/t·s² scores), attention dropout (2 + mask / 2 + mask of the scores), the context's head transpose (2 / 2 of
    T·h/t), fused bias-dropout-add ×2 (read x and the residual, write out + mask; backward read dy + mask, write
    dx, reduce the bias gradient, and the residual stream's gradient sum: 3 + mask / 6 + mask of ``rep``), fused
    bias-GeLU (2 / 4 of T·f/t: backward reads dy and x, writes dx, reduces the bias gradient).
    Llama: RMSNorm ×2 (2 / 3 of ``rep``), RoPE on q and k (2 / 2 of T·(h + kv)/t), residual add ×2 (3 / 3 of
    ``rep``: backward is the gradient sum), SwiGLU fused (read gate, up, write out: 3 / 5 of T·f/t) or unfused
    (SiLU 2 / 3, then the product 3 / 5). Flash attention's own reads are inside its kernel (:data:`FLASH_SHARE`).
    An MoE layer's MLP is counted as a dense one as wide as the experts a token uses.

    Raises DistlearnValueError unless ``micro_batch`` and ``tp`` are integers ≥ 1, ``tokens`` a finite number > 0,
    ``sequence_parallel`` a bool, ``attention`` one of :data:`~distlearn.activation_memory.formulas.ATTENTION`
    (``"materialised"`` needs ``seq_len``), ``swiglu`` one of :data:`~distlearn.activation_memory.formulas.SWIGLU`,
    ``seq_len`` (unless None) an integer ≥ 1 and ``layer`` (unless None) a layer of the model.
    """
    _check_layer_args(model, micro_batch=micro_batch, tp=tp, sequence_parallel=sequence_parallel,
                      attention=attention, swiglu=swiglu, seq_len=seq_len, layer=layer)
    check_positive("tokens", tokens)
    return _elementwise_ops(model, micro_batch, tokens, tp, sequence_parallel, attention, swiglu, seq_len, layer)


def _check_layer_args(model: ModelConfig, *, micro_batch, tp, sequence_parallel, attention, swiglu, seq_len,
                      layer) -> None:
    """The checks :func:`elementwise_ops` and :func:`layer_seconds` share (DistlearnValueError naming the
    parameter)."""
    check_int("micro_batch", micro_batch)
    check_int("tp", tp)
    check_bool("sequence_parallel", sequence_parallel)
    check_choice("attention", attention, ATTENTION)
    check_choice("swiglu", swiglu, SWIGLU)
    if seq_len is not None:
        check_int("seq_len", seq_len)
    elif attention == "materialised":
        raise DistlearnValueError("seq_len", "materialised attention needs seq_len (its scores are s × s).",
                                  "存下注意力分数（materialised）时需要 seq_len（分数矩阵是 s × s）。")
    if layer is not None:
        check_int("layer", layer, minimum=0, maximum=model.num_layers - 1)


def _elementwise_ops(model: ModelConfig, micro_batch: int, tokens: float, tp: int, sequence_parallel: bool,
                     attention: str, swiglu: str, seq_len: int | None, layer: int | None) -> list[ElementwiseOp]:
    """:func:`elementwise_ops` of checked arguments."""
    h, t, b = model.hidden_size, tp, micro_batch
    rep = tokens * h / (t if sequence_parallel else 1)
    inner = tokens * h / t
    if _is_moe_layer(model, layer):
        f = (model.experts_per_token + model.num_shared_experts) * model.expert_ffn
    else:
        f = model.ffn_hidden_size
    mlp = tokens * f / t
    if model.arch == "gpt":
        ops = [ElementwiseOp("layernorm 1", rep, 2, 3),
               ElementwiseOp("qkv bias add", 3 * inner, 2, 1)]
        if attention == "materialised":
            scores = b * model.num_heads / t * seq_len * seq_len
            ops += [ElementwiseOp("scale-mask-softmax", scores, 2, 3),
                    ElementwiseOp("attention dropout", scores, 2, 2, 1, 1)]
        ops += [ElementwiseOp("context transpose", inner, 2, 2),
                ElementwiseOp("bias-dropout-add 1", rep, 3, 6, 1, 1),
                ElementwiseOp("layernorm 2", rep, 2, 3),
                ElementwiseOp("bias-gelu", mlp, 2, 4),
                ElementwiseOp("bias-dropout-add 2", rep, 3, 6, 1, 1)]
        return ops
    kv = model.kv_heads * model.head_dim
    ops = [ElementwiseOp("rmsnorm 1", rep, 2, 3),
           ElementwiseOp("rope q, k", tokens * (h + kv) / t, 2, 2),
           ElementwiseOp("residual add 1", rep, 3, 3),
           ElementwiseOp("rmsnorm 2", rep, 2, 3)]
    if swiglu == "fused":
        ops.append(ElementwiseOp("swiglu (fused)", mlp, 3, 5))
    else:
        ops += [ElementwiseOp("silu", mlp, 2, 3), ElementwiseOp("silu × up", mlp, 3, 5)]
    if attention == "materialised":
        scores = b * model.num_heads / t * seq_len * seq_len
        ops += [ElementwiseOp("softmax", scores, 2, 3)]
    return ops + [ElementwiseOp("residual add 2", rep, 3, 3)]


@dataclass(frozen=True)
class LayerSeconds:
    """Seconds of one layer's kernels for one micro-batch on one GPU, by part and pass (before :data:`END_TO_END`):
    ``gemm_forward`` / ``gemm_backward`` (linear layers), ``attention_forward`` / ``attention_backward`` (the core:
    batched GEMMs or the flash kernel), ``elementwise_forward`` / ``elementwise_backward`` (memory-bound kernels;
    ``attention_elementwise_forward`` is the softmax and dropout part of it, which selective recomputation runs
    again; ``norm_act_forward`` the norms and the MLP activation, which ``"norm-act"`` recomputation runs again)."""

    gemm_forward: float
    gemm_backward: float
    attention_forward: float
    attention_backward: float
    elementwise_forward: float
    elementwise_backward: float
    attention_elementwise_forward: float
    norm_act_forward: float = 0.0

    def total(self, recompute: str) -> float:
        """Forward + backward, plus what ``recompute`` runs again: the whole forward (``"full"``), the attention
        core with its softmax and dropout (``"selective"``) or the norms and the activation (``"norm-act"``)."""
        fwd = self.gemm_forward + self.attention_forward + self.elementwise_forward
        bwd = self.gemm_backward + self.attention_backward + self.elementwise_backward
        extra = {"none": 0.0, "full": fwd, "norm-act": self.norm_act_forward,
                 "selective": self.attention_forward + self.attention_elementwise_forward}[recompute]
        return fwd + bwd + extra


@checks(model=MODEL, gpu=GPU_SPEC)
def layer_seconds(model: ModelConfig, gpu: GPU, *, micro_batch: int, seq_len: int, tp: int, cp: int = 1,
                  sequence_parallel: bool = True, attention: str = "materialised", swiglu: str = "unfused",
                  gemm_peak: float, peak: float, gemm_bytes: float = 2, act_bytes: float = 2,
                  layer: int | None = None, ep: int = 1, causal: bool = False,
                  fp8_block_scaled: bool = False) -> LayerSeconds:
    """:class:`LayerSeconds` of one layer (``layer``: which one, for a model mixing dense and MoE layers).

    ``gemm_peak``: FLOP/s of the linear layers' GEMMs (FP8 for the FP8 recipes, TF32 for fp32), ``gemm_bytes`` their
    input bytes (1 for FP8; outputs in ``act_bytes``); ``peak``: the attention core's 16-bit (fp32) peak. With
    ``cp`` > 1 each rank holds s/cp queries against all s keys (flash attention). ``causal``: the flash kernel
    runs :func:`causal_fraction` of the score tiles (a materialised core computes every score regardless);
    ``fp8_block_scaled``: the linear GEMMs at :data:`FP8_BLOCK_CEILING` instead of :data:`GEMM_CEILING`.

    Raises DistlearnValueError for a GPU without ``hbm_bw``, or unless ``micro_batch``, ``seq_len``, ``tp``, ``cp``
    and ``ep`` are integers ≥ 1, ``sequence_parallel`` a bool, ``attention`` and ``swiglu`` known names (see
    :func:`elementwise_ops`), ``gemm_peak``, ``peak``, ``gemm_bytes`` and ``act_bytes`` finite numbers > 0 and
    ``layer`` (unless None) a layer of the model. The planner calls :meth:`KernelModel.layer` with the values its
    boundary checked."""
    _check_gpu(gpu)
    _check_layer_args(model, micro_batch=micro_batch, tp=tp, sequence_parallel=sequence_parallel,
                      attention=attention, swiglu=swiglu, seq_len=seq_len, layer=layer)
    check_int("cp", cp)
    check_int("ep", ep)
    check_bool("causal", causal)
    check_bool("fp8_block_scaled", fp8_block_scaled)
    for name, value in (("gemm_peak", gemm_peak), ("peak", peak), ("gemm_bytes", gemm_bytes),
                        ("act_bytes", act_bytes)):
        check_positive(name, value)
    return KernelModel(model, gpu, gemm_peak=gemm_peak, peak=peak, gemm_bytes=gemm_bytes, act_bytes=act_bytes,
                       swiglu=swiglu, fp8_block_scaled=fp8_block_scaled, causal=causal).layer(micro_batch=micro_batch, seq_len=seq_len, tp=tp, cp=cp,
                                            sequence_parallel=sequence_parallel, attention=attention, layer=layer,
                                            ep=ep)


def _check_gpu(gpu: GPU) -> None:
    if gpu.hbm_bw is None:
        raise DistlearnValueError("gpu", f"the kernel model needs GPU {gpu.name!r}'s HBM bandwidth: give GPU(..., "
                                         f"hbm_bw=...) in bytes/s.",
                                  f"内核模型需要 GPU {gpu.name!r} 的显存 (HBM) 带宽：请在 GPU(..., hbm_bw=...) 中给出，"
                                  f"单位 bytes/s。")


@dataclass(frozen=True)
class KernelModel:
    """The kernel model of one setting: the model, the GPU and the recipe's peaks and bytes. Its methods are the
    planner's arithmetic (:mod:`distlearn.planning.step_time`), which runs on values the planner's boundary
    (:func:`~distlearn.planning.evaluation.evaluate`, :func:`~distlearn.planning.setting.make_setting`) checked
    once (issue 31); a reader calls :func:`layer_seconds` and :func:`logits_seconds`, which check theirs."""

    model: ModelConfig
    gpu: GPU
    gemm_peak: float
    peak: float
    gemm_bytes: float = 2
    act_bytes: float = 2
    swiglu: str = "unfused"
    fp8_block_scaled: bool = False   # the linear GEMMs at FP8_BLOCK_CEILING (fine-grained FP8, DeepGEMM)
    causal: bool = False             # the flash kernel skips masked tiles (causal_fraction)

    def layer(self, *, micro_batch: int, seq_len: int, tp: int, cp: int = 1, sequence_parallel: bool = True,
              attention: str = "materialised", layer: int | None = None, ep: int = 1) -> LayerSeconds:
        """:func:`layer_seconds` of checked arguments."""
        model, gpu, peak = self.model, self.gpu, self.peak
        act_bytes, swiglu = self.act_bytes, self.swiglu
        family = gpu_family(gpu)
        e, bw = GEMM_CEILING[family], gpu.hbm_bw
        tokens = micro_batch * seq_len / cp
        g_fwd = sum(self.linear_seconds(tokens=tokens, tp=tp, layer=layer, ep=ep))
        if attention == "flash":
            f_attn = micro_batch * flops.attention_core_flops(model, seq_len) / (tp * cp)
            if self.causal:
                f_attn *= _causal_fraction(seq_len, FLASH_TILE)
            fwd_share, bwd_share = FLASH_SHARE[family]
            a_fwd = f_attn / (peak * fwd_share)
            a_bwd = FLASH_BACKWARD_FLOPS * f_attn / (peak * bwd_share)
        else:
            a_fwd = sum(_gemm_seconds(g, peak, e, bw, act_bytes, act_bytes)
                        for g in _attention_gemms(model, micro_batch, seq_len, tp))
            a_bwd = 2 * a_fwd
        ops = _elementwise_ops(model, micro_batch, tokens, tp, sequence_parallel, attention, swiglu, seq_len, layer)
        return _layer_total(ops, act_bytes, bw, g_fwd, a_fwd, a_bwd)

    def linear_seconds(self, *, tokens: float, tp: int, layer: int | None = None, ep: int = 1) -> list[float]:
        """Forward seconds of each linear-layer GEMM of :func:`layer_gemms` (the same order), as :meth:`layer` times
        them (before END_TO_END): what each tensor-parallel collective can hide behind under
        ``Overlap.tp_comm`` (:func:`distlearn.planning.step_time.tp_exposed_seconds`)."""
        family = gpu_family(self.gpu)
        e = GEMM_CEILING[family]
        if self.fp8_block_scaled:
            e_linear = FP8_BLOCK_CEILING.get(family, FP8_GEMM_CEILING.get(family, e))
        elif self.gemm_bytes == 1:  # FP8 inputs with per-tensor scales
            e_linear = FP8_GEMM_CEILING.get(family, e)
        else:
            e_linear = e
        return [_gemm_seconds(g, self.gemm_peak, e_linear, self.gpu.hbm_bw, self.gemm_bytes, self.act_bytes)
                for g in layer_gemms(self.model, tokens, tp, layer, ep)]

    def logits(self, *, tokens: float, tp: int) -> float:
        """:func:`logits_seconds` of checked arguments (its ``peak`` and ``act_bytes``: this model's)."""
        model, gpu = self.model, self.gpu
        family = gpu_family(gpu)
        g = Gemm("logits", tokens, model.vocab_size / tp, model.hidden_size)
        t_gemm = 3 * _gemm_seconds(g, self.peak, GEMM_CEILING[family], gpu.hbm_bw, self.act_bytes, self.act_bytes)
        loss_bytes = (9.5 + 3.5) * 4 * tokens * model.vocab_size / tp
        return t_gemm + loss_bytes / gpu.hbm_bw


def _layer_total(ops, act_bytes: float, bw: float, g_fwd: float, a_fwd: float, a_bwd: float) -> LayerSeconds:
    """:class:`LayerSeconds` from the GEMM and attention seconds and the elementwise ``ops``."""
    fwd = bwd = attn_fwd = norm_act_fwd = 0.0
    for op in ops:
        f, b = op.bytes(act_bytes)
        fwd, bwd = fwd + f, bwd + b
        if "softmax" in op.name or "attention dropout" in op.name:
            attn_fwd += f
        if op.name.startswith(NORM_ACT_OPS):
            norm_act_fwd += f
    return LayerSeconds(g_fwd, 2 * g_fwd, a_fwd, a_bwd, fwd / bw, bwd / bw, attn_fwd / bw, norm_act_fwd / bw)


# The elementwise_ops that "norm-act" recomputation runs again (their forward once more in backward). Only the
# recomputation's own reads and writes are charged: copying each result back into the freed storage, as
# distlearn.activation_memory.measure.DiscardOutput does, would read and write every recomputed output once more (about
# half as much again)
NORM_ACT_OPS = ("layernorm", "rmsnorm", "bias-gelu", "swiglu", "silu")


@checks(model=MODEL, gpu=GPU_SPEC)
def logits_seconds(model: ModelConfig, gpu: GPU, *, tokens: float, tp: int, peak: float,
                   act_bytes: float = 2) -> float:
    """Forward + backward seconds of the output layer on one GPU: the logits GEMM (m = tokens, n = V/t, k = h) and
    its two backward GEMMs through the roofline, and Megatron's vocab-parallel cross-entropy on fp32 logits
    (forward: cast to fp32, max, subtract, exp, sum, divide by the sum to keep the softmax for backward:
    1.5 + 1 + 2 + 2 + 1 + 2 = 9.5 passes of 4 bytes per logit; backward: scale by the loss gradient, cast back:
    2 + 1.5 = 3.5 passes; 13 in all). Raises DistlearnValueError for a GPU without ``hbm_bw``, or unless
    ``tokens``, ``peak`` and ``act_bytes`` are finite numbers > 0 and ``tp`` an integer ≥ 1. The planner calls
    :meth:`KernelModel.logits` with the values its boundary checked."""
    _check_gpu(gpu)
    check_positive("tokens", tokens)
    check_int("tp", tp)
    check_positive("peak", peak)
    check_positive("act_bytes", act_bytes)
    return KernelModel(model, gpu, gemm_peak=peak, peak=peak, act_bytes=act_bytes).logits(tokens=tokens, tp=tp)


def end_to_end_as(value: float):
    """A ``with`` block in which :data:`END_TO_END` is ``value``, restored after (also on error). For calibration
    only (:func:`distlearn.planning.calibration.calibrate` solves for the value; issue 38): the constant itself is
    guarded against rebinding from outside this module. Raises DistlearnValueError unless ``value`` is in (0, 1]."""
    return _end_to_end_as(check_number("end_to_end", value, minimum=0, maximum=1, strict_min=True))


@contextmanager
def _end_to_end_as(value: float):
    """:func:`end_to_end_as` of a checked value."""
    global END_TO_END
    old, END_TO_END = END_TO_END, value
    try:
        yield
    finally:
        END_TO_END = old

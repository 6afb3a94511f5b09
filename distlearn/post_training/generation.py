"""Generation's own arithmetic (chapter 15): the KV cache, prefill and decode on the roofline, and what tensor,
pipeline and expert parallelism cost a generator in latency and memory.

Units: bytes (GB = 1e9, GiB = 2**30), FLOPs, seconds. ``bytes_per_param`` is the width of a stored weight (2 for
bf16), ``kv_bytes`` the width of one cached element (2 for a bf16 cache).

**KV cache per token** (the main layers; DeepSeek-V3's multi-token prediction module is left out, as a generator
without speculative decoding does not run it):

- grouped-query (and plain multi-head) attention: ``2 · L · kv_heads · head_dim · kv_bytes`` — a key and a value of
  ``head_dim`` for each KV head of each layer. Source: Austin et al. 2025, *How to Scale Your Model*, "All About
  Transformer Inference" (the KV cache: ``2 · S · L · K · H`` values for S tokens, K KV heads of size H);
  Pope et al. 2022, "Efficiently Scaling Transformer Inference", §2.
- multi-head latent attention (DeepSeek-V2/V3): ``L · (kv_lora_rank + qk_rope_head_dim) · kv_bytes`` — one
  compressed latent and one shared rotary key per layer. Source: DeepSeek-V2 (DeepSeek-AI 2024), §2.1.3 and
  Table 1: ``(d_c + d_h^R) · l`` elements per token; DeepSeek-V3: d_c = 512, d_h^R = 64, l = 61.

**A decode step** (batch B, each sequence with T tokens already cached): weight FLOPs ``2 · N · B`` with N the
parameters a token multiplies (the active ones, without the input embedding, which is a lookup); attention FLOPs
``2 · B · T · L · n_heads · (d_k + d_v)`` (a query against T keys, then T values; MLA in its absorbed form attends
over the latent: d_k = kv_lora_rank + qk_rope_head_dim, d_v = kv_lora_rank, DeepSeek-V2 §2.1.3); bytes read: the
weights once (for an MoE layer only the experts some token of the batch uses: ``E · (1 − (1 − k/E)^B)`` of E under
uniform routing) plus the cache ``B · T · kv_bytes_per_token``. Arithmetic intensity = FLOPs / bytes ≈ B for
bf16 weights while the cache is small (Austin et al. 2025; Pope et al. 2022, §3.1): decode is bound by memory
bandwidth until B reaches :func:`critical_batch`. Time of the step: the roofline, ``max(FLOPs / peak, bytes /
HBM bandwidth)``.

**Prefill** (B prompts of S tokens): FLOPs ``2 · N · B · S`` plus causal attention ``B · S² · L · n_heads ·
(d_k + d_v)``; bytes: the weights once and the cache written, ``B · S · kv_bytes_per_token``. Intensity ≈ B · S:
compute-bound.

**Parallelism for generation** (:func:`generation_layout`): TP splits every matrix over ``tp`` GPUs, so each reads
1/tp of the weights (latency ÷ tp when bandwidth-bound), at the price of two all-reduces of the batch's hidden
states per layer (Megatron, Shoeybi et al. 2019; Pope et al. 2022 §3.2 "1D weight-stationary"); the KV cache splits
by KV head only while ``tp ≤ kv_heads`` (beyond, heads are copied) and MLA's latent is shared by all heads, so TP
copies it whole on every rank (the reason DeepSeek-V3's deployment keeps attention's TP groups small, TP 4, and
replicates them data-parallel: DP 80 for decode, report §3.4.2). PP splits the layers:
weights and cache ÷ pp, but a token still crosses every stage in turn, so the latency of a token does not drop.
EP (MoE) splits the routed experts over ``ep`` GPUs that each run the attention of B/ep sequences (data-parallel
attention; DeepSeek-V3's deployment, report §3.4, uses TP-4 attention groups replicated data-parallel, with EP 32
for prefill and EP 320 for decode) and costs a dispatch and a combine all-to-all per MoE layer.
Links: TP and EP on NVLink; PP crosses the network when the layout spans more than one node. Collective latency
(α) is left out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from distlearn.core.hardware import GPU, get_gpu
from distlearn.core.models import ModelConfig
from distlearn.core.records import MODEL
from distlearn.core.validate import DistlearnValueError, check_int, check_number, checks

__all__ = ["kv_bytes_per_token", "kv_bytes", "kv_dims", "decode_step", "prefill", "critical_batch", "decode_intensity",
           "experts_touched", "generation_layout", "Roofline", "GenerationLayout", "reference_kv_bytes_per_token"]


def _gpu(gpu) -> GPU:
    if isinstance(gpu, GPU):
        return gpu
    g = get_gpu(gpu)
    if g.hbm_bw is None:  # pragma: no cover - every preset has one today
        raise DistlearnValueError("gpu", f"{g.name} has no memory bandwidth figure.",
                                  f"{g.name} 没有显存带宽数据。")
    return g


def _width(name: str, value) -> int:
    return check_int(name, value, minimum=1, maximum=8)


@checks(model=MODEL)
def kv_dims(model: ModelConfig) -> tuple[int, int]:
    """``(cached, attended)``: elements cached per token per layer, and ``d_k + d_v``, the width one query head
    dots with per cached token (GQA: ``2 · kv_heads · head_dim`` and ``2 · head_dim``; MLA absorbed:
    ``kv_lora_rank + qk_rope_head_dim`` and ``2 · kv_lora_rank + qk_rope_head_dim``)."""
    if model.mla is not None:
        m = model.mla
        return m.kv_lora_rank + m.qk_rope_head_dim, 2 * m.kv_lora_rank + m.qk_rope_head_dim
    return 2 * model.kv_heads * model.head_dim, 2 * model.head_dim


@checks(model=MODEL)
def kv_bytes_per_token(model: ModelConfig, kv_bytes: int = 2) -> int:
    """Bytes of KV cache one token adds over all ``num_layers`` main layers (module doc: GQA
    ``2·L·kv_heads·head_dim·kv_bytes``, MLA ``L·(kv_lora_rank + qk_rope_head_dim)·kv_bytes``). Raises
    DistlearnValueError for ``kv_bytes`` outside 1 … 8."""
    kv_bytes = _width("kv_bytes", kv_bytes)
    return model.num_layers * kv_dims(model)[0] * kv_bytes


@checks(model=MODEL)
def reference_kv_bytes_per_token(model: ModelConfig, kv_bytes: int = 2) -> int:
    """The same count as :func:`kv_bytes_per_token`, as a loop over layers and over what each layer stores."""
    kv_bytes = _width("kv_bytes", kv_bytes)
    total = 0
    for _layer in range(model.num_layers):
        if model.mla is not None:
            total += model.mla.kv_lora_rank * kv_bytes       # the compressed latent c_KV / 压缩后的潜在向量 c_KV
            total += model.mla.qk_rope_head_dim * kv_bytes   # the one rotary key all heads share / 所有头共用的那个旋转位置键
        else:
            for _head in range(model.kv_heads):
                total += model.head_dim * kv_bytes           # the key of this KV head / 这个 KV 头的键
                total += model.head_dim * kv_bytes           # and its value / 以及它的值
    return total


@checks(model=MODEL)
def kv_bytes(model: ModelConfig, seq_len: int, batch: int = 1, kv_bytes: int = 2) -> int:
    """Bytes of KV cache for ``batch`` sequences of ``seq_len`` tokens: ``batch · seq_len ·``
    :func:`kv_bytes_per_token`. Raises DistlearnValueError for non-positive sizes."""
    seq_len = check_int("seq_len", seq_len, minimum=1, maximum=10**9)
    batch = check_int("batch", batch, minimum=1, maximum=10**9)
    return batch * seq_len * kv_bytes_per_token(model, kv_bytes)


def experts_touched(num_experts: int, k: int, tokens: int) -> float:
    """Expected number of distinct experts ``tokens`` tokens use in one MoE layer when each picks ``k`` of
    ``num_experts`` uniformly: ``E · (1 − (1 − k/E)^tokens)`` (each expert is missed by one token with probability
    1 − k/E). Raises DistlearnValueError for k outside 1 … E or a negative token count."""
    e = check_int("num_experts", num_experts, minimum=1, maximum=10**6)
    k = check_int("k", k, minimum=1, maximum=e)
    tokens = check_int("tokens", tokens, minimum=0, maximum=10**12)
    return e * (1.0 - (1.0 - k / e) ** tokens)


def _weight_bytes_read(model: ModelConfig, tokens: int, bytes_per_param: int) -> float:
    """Bytes of weights a forward over ``tokens`` tokens reads: every parameter but the embedding table (a lookup)
    and the routed experts no token picked (MoE)."""
    params = model.main_parameters() - model.embedding_parameters()
    if model.is_moe:
        unused = model.num_experts - experts_touched(model.num_experts, model.experts_per_token, tokens)
        params -= model.num_moe_layers * unused * model.expert_parameters()
    return params * bytes_per_param


def _matmul_params(model: ModelConfig) -> int:
    return model.active_parameters(include_embedding=False)


@dataclass(frozen=True)
class Roofline:
    """One forward step on one GPU: ``flops``, ``bytes`` (weights + cache read or written), their ratio
    ``intensity`` (FLOPs per byte), ``compute_time`` and ``memory_time`` (s), ``time`` = the larger, ``bound``
    ("compute" or "memory"), ``tokens`` produced or processed."""

    flops: float
    bytes: float
    compute_time: float
    memory_time: float
    tokens: int

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes

    @property
    def time(self) -> float:
        return max(self.compute_time, self.memory_time)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_time >= self.memory_time else "memory"


@checks(model=MODEL)
def decode_step(model: ModelConfig, gpu: str | GPU = "h100-80gb", batch: int = 1, context_len: int = 1024,
                bytes_per_param: int = 2, kv_bytes: int = 2) -> Roofline:
    """One decode step of ``batch`` sequences that each have ``context_len`` tokens cached, on one GPU (the model
    assumed to fit): FLOPs ``2·N·B + 2·B·T·L·n_heads·(d_k + d_v)``, bytes ``weights read + B·T·kv_bytes_per_token``
    (module doc). Raises DistlearnValueError for a bad size or an unknown GPU."""
    g = _gpu(gpu)
    b = check_int("batch", batch, minimum=1, maximum=10**7)
    t = check_int("context_len", context_len, minimum=0, maximum=10**8)
    bpp, kvb = _width("bytes_per_param", bytes_per_param), _width("kv_bytes", kv_bytes)
    attended = kv_dims(model)[1]
    flops = 2 * _matmul_params(model) * b + 2 * b * t * model.num_layers * model.num_heads * attended
    nbytes = _weight_bytes_read(model, b, bpp) + b * t * kv_bytes_per_token(model, kvb)
    return Roofline(flops, nbytes, flops / g.peak_flops, nbytes / g.hbm_bw, b)


@checks(model=MODEL)
def prefill(model: ModelConfig, gpu: str | GPU = "h100-80gb", batch: int = 1, prompt_len: int = 1024,
            bytes_per_param: int = 2, kv_bytes: int = 2) -> Roofline:
    """The prefill of ``batch`` prompts of ``prompt_len`` tokens on one GPU: FLOPs ``2·N·B·S + B·S²·L·n_heads·
    (d_k + d_v)`` (causal: half of the S² pairs, two matrix products), bytes ``weights + B·S·kv_bytes_per_token``
    written (module doc). Raises DistlearnValueError for a bad size or an unknown GPU."""
    g = _gpu(gpu)
    b = check_int("batch", batch, minimum=1, maximum=10**7)
    s = check_int("prompt_len", prompt_len, minimum=1, maximum=10**8)
    bpp, kvb = _width("bytes_per_param", bytes_per_param), _width("kv_bytes", kv_bytes)
    attended = kv_dims(model)[1]
    flops = 2 * _matmul_params(model) * b * s + b * s * s * model.num_layers * model.num_heads * attended
    nbytes = _weight_bytes_read(model, b * s, bpp) + b * s * kv_bytes_per_token(model, kvb)
    return Roofline(flops, nbytes, flops / g.peak_flops, nbytes / g.hbm_bw, b * s)


def decode_intensity(num_params: float, batch: int, context_len: int = 0, kv_bytes_per_token: float = 0.0,
                     bytes_per_param: int = 2) -> float:
    """Arithmetic intensity of a dense decode step, weight FLOPs only (the scaling book's form): ``2·N·B /
    (N·bytes_per_param + B·T·kv_bytes_per_token)`` FLOPs per byte. ≈ B for bf16 weights and a short context; tends
    to ``2·N / (T·kv_bytes_per_token)`` as B grows, whatever the batch. Raises DistlearnValueError for a
    non-positive ``num_params`` or ``batch`` or a negative context."""
    n = check_number("num_params", num_params, minimum=1, maximum=1e15)
    b = check_int("batch", batch, minimum=1, maximum=10**9)
    t = check_int("context_len", context_len, minimum=0, maximum=10**9)
    kv = check_number("kv_bytes_per_token", kv_bytes_per_token, minimum=0, maximum=1e12)
    bpp = _width("bytes_per_param", bytes_per_param)
    return 2 * n * b / (n * bpp + b * t * kv)


def critical_batch(gpu: str | GPU = "h100-80gb", bytes_per_param: int = 2) -> float:
    """The batch above which a decode step of a dense model with a small cache is compute-bound: weight FLOPs
    2·N·B reach the time of reading N·bytes_per_param bytes when ``B = peak · bytes_per_param / (2 · HBM
    bandwidth)`` (Austin et al. 2025, "All About Transformer Inference"). Raises DistlearnValueError for an
    unknown GPU."""
    g = _gpu(gpu)
    bpp = _width("bytes_per_param", bytes_per_param)
    return g.peak_flops * bpp / (2 * g.hbm_bw)


@dataclass(frozen=True)
class GenerationLayout:
    """One generator replica of ``tp · pp · ep`` GPUs decoding ``batch`` sequences of ``context_len`` cached tokens:
    ``weight_bytes`` and ``kv_bytes`` per GPU, ``compute_time`` + ``comm_time`` of one decode step (s) = the
    ``latency`` of one token, ``tokens_per_s`` for the replica, ``gpus``; ``fits`` when weights + cache ≤
    ``gpu_memory`` (bytes, the datasheet's)."""

    gpus: int
    weight_bytes: float
    kv_bytes: float
    compute_time: float
    comm_time: float
    batch: int
    gpu_memory: float

    @property
    def fits(self) -> bool:
        return self.memory_bytes <= self.gpu_memory

    @property
    def memory_bytes(self) -> float:
        return self.weight_bytes + self.kv_bytes

    @property
    def latency(self) -> float:
        return self.compute_time + self.comm_time

    @property
    def tokens_per_s(self) -> float:
        return self.batch / self.latency


@checks(model=MODEL)
def generation_layout(model: ModelConfig, gpu: str | GPU = "h100-80gb", batch: int = 64, context_len: int = 4096,
                      tp: int = 1, pp: int = 1, ep: int = 1, bytes_per_param: int = 2,
                      kv_bytes: int = 2) -> GenerationLayout:
    """Memory per GPU and time per decode step of one generator replica (module doc for the layout).

    Per GPU: weights ``(non-expert/(tp·pp) + routed experts/(tp·pp·ep)) · bytes_per_param``; cache ``(B/ep) · T ·
    kv_bytes_per_token / pp`` times the share of KV heads one TP rank keeps, ``ceil(kv_heads/tp)/kv_heads`` (MLA: 1,
    the latent is copied on every TP rank). Step: the ``pp`` stages in
    turn, each on micro-batches of ``b = B/(ep·pp)`` sequences, at ``max(FLOPs, bytes)`` per GPU (the
    :func:`decode_step` roofline divided over tp·ep, the stage's weights and cache read once per micro-batch); TP
    two ring all-reduces of ``b·h·2`` bytes per layer, ``2·(tp−1)/tp`` of it each over NVLink; EP a dispatch and a
    combine all-to-all of ``b·k·h·2`` bytes per MoE layer, ``(ep−1)/ep`` of it leaving each GPU; PP ``pp − 1`` hops
    of ``b·h·2`` bytes. Raises DistlearnValueError for a batch that does not divide, ``ep > 1`` on a dense model or
    ``ep`` not dividing the experts."""
    g = _gpu(gpu)
    B = check_int("batch", batch, minimum=1, maximum=10**7)
    T = check_int("context_len", context_len, minimum=0, maximum=10**8)
    tp, pp, ep = (check_int(n, v, minimum=1, maximum=4096) for n, v in (("tp", tp), ("pp", pp), ("ep", ep)))
    bpp, kvb = _width("bytes_per_param", bytes_per_param), _width("kv_bytes", kv_bytes)
    if ep > 1 and (not model.is_moe or model.num_experts % ep):
        raise DistlearnValueError("ep", f"ep = {ep} needs an MoE model whose {model.num_experts} experts it divides.",
                                  f"ep = {ep} 需要混合专家 (MoE) 模型，且能整除其 {model.num_experts} 个专家。")
    if pp > model.num_layers:
        raise DistlearnValueError("pp", f"pp = {pp} exceeds the {model.num_layers} layers.",
                                  f"pp = {pp} 超过了 {model.num_layers} 层。")
    if B % (ep * pp):
        raise DistlearnValueError("batch", f"batch {B} must be divisible by ep · pp = {ep * pp} (micro-batches).",
                                  f"batch {B} 必须能被 ep · pp = {ep * pp} 整除（微批次）。")
    b = B // (ep * pp)
    experts = model.num_moe_layers * model.num_experts * model.expert_parameters()
    non_expert = model.main_parameters() - experts
    weights = (non_expert / (tp * pp) + experts / (tp * pp * ep)) * bpp
    share = 1.0 if model.mla is not None else math.ceil(model.kv_heads / tp) / model.kv_heads
    kv = (B // ep) * T * kv_bytes_per_token(model, kvb) / pp * share
    micro = decode_step.unchecked(model, g, b * ep, T, bpp, kvb)   # one micro-batch over the whole model, all ep groups
    stage_flops = micro.flops / (tp * pp * ep)
    touched = experts_touched(model.num_experts, model.experts_per_token, b * ep) if model.is_moe else 0.0
    read = (non_expert - model.embedding_parameters()) / (tp * pp) + (
        model.num_moe_layers * touched * model.expert_parameters() / (tp * pp * ep))
    stage_bytes = read * bpp + b * T * kv_bytes_per_token(model, kvb) / pp * share
    compute = pp * max(stage_flops / g.peak_flops, stage_bytes / g.hbm_bw)
    h, act = model.hidden_size, 2
    comm = 0.0
    if tp > 1:
        comm += model.num_layers * 2 * 2 * (tp - 1) / tp * b * h * act / g.nvlink_bw
    if ep > 1:
        comm += model.num_moe_layers * 2 * (ep - 1) / ep * b * model.experts_per_token * h * act / g.nvlink_bw
    if pp > 1:
        link = g.network_bw if tp * pp * ep > g.gpus_per_node else g.nvlink_bw
        comm += (pp - 1) * b * h * act / link
    return GenerationLayout(tp * pp * ep, weights, kv, compute, comm, B, g.memory_bytes)

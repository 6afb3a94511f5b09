"""Muon, the optimizer that orthogonalises each weight matrix's update, and why it does not fit FSDP's row shards.

A readable reference, in numpy and in torch, checked against each other (tests/test_muon.py):

- :func:`newton_schulz` / :func:`newton_schulz_torch`: the quintic Newton–Schulz iteration of Keller Jordan's Muon
  (``zeropower_via_newtonschulz5`` in github.com/KellerJordan/Muon, ``muon.py``; blog post "Muon: An optimizer for
  hidden layers in neural networks", 2024): normalise by the Frobenius norm (+ 1e-7), transpose when rows > cols,
  then 5 times ``A = X Xᵀ; X ← a X + (b A + c A²) X`` with (a, b, c) = (3.4445, −4.7750, 2.0315). The reference
  runs it in bf16 on a GPU; here it runs in float64 (numpy) and float32 (torch) so that results can be compared.
- :func:`ns_polynomial`: what the iteration does to each singular value. With G = U Σ Vᵀ, every step maps X = U S Vᵀ
  to U p(S) Vᵀ with p(s) = a s + b s³ + c s⁵, so NS(G) = U p⁵(Σ/‖G‖_F) Vᵀ exactly (up to rounding). These
  coefficients push small values up fast (slope a = 3.4445 at 0) but do not converge to 1: they oscillate in about
  [0.68, 1.13] (:func:`ns_output_range` measures the band on a grid). Singular values below about
  1/a⁵ ≈ 0.002 of the Frobenius norm are not raised into that band in 5 steps.
- :func:`muon_update`: momentum (``lerp``, β = 0.95, Nesterov as in Keller Jordan's ``muon_update``), then
  Newton–Schulz of the 2-D update, times :func:`update_scale`. This course uses Moonlight's scale
  0.2·√max(A, B) (Liu et al. 2025, "Muon is Scalable for LLM Training", arXiv 2502.16982, §2.2;
  ``adjust_lr_for_muon`` in github.com/MoonshotAI/Moonlight ``examples/toy_train.py``): an orthogonal A×B update has
  RMS ≈ 1/√max(A, B), so the factor gives it AdamW's typical update RMS of about 0.2, and the 1-D parameters, the
  embedding and the LM head, which stay on AdamW, can share one learning rate and weight decay with the matrices.
  Keller Jordan's own scale ``max(1, A/B)**0.5`` is ``rule="keller"``.

Why FSDP is a problem: FSDP2 keeps rows ``torch.chunk(W, world_size)[rank]`` of each matrix on each rank, and
Newton–Schulz needs the whole matrix (its Frobenius norm and every X Xᵀ mix all rows). :func:`shardwise_newton_schulz`
is the misconception: NS applied to each shard alone. Two correct sharded forms (run on gloo in
:mod:`distlearn.zero_fsdp.lab_muon`):

1. ``"all_gather"`` — every rank all-gathers the whole update of every matrix, computes NS itself, keeps its rows
   (Moonlight's "Distributed Muon", §2.3 of the paper, gathers the ZeRO-1 shards the same way): no scatter, but W
   copies of every NS.
2. ``"owner"`` — matrix i belongs to rank i mod W; the owner gathers the shards, computes NS, scatters the rows back
   (the round-robin of KellerJordan/Muon's distributed ``Muon.step``; microsoft/dion ``dion/muon.py`` does the same
   with all-to-alls over batches of W matrices): each NS once, traffic through the owner.

:func:`step_traffic`, :func:`ns_flops`, :func:`compute_per_rank` and :func:`optimizer_state_bytes` give their costs
in closed form; the lab counts the real collectives and tensors against them. :func:`bf16_ulp` and
:func:`bf16_stagnates` say when a bf16 weight or optimizer state stops moving.

Units: elements (multiply by bytes per element), bytes (B), FLOPs (a multiply-add is 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distlearn.core.models import ModelConfig
from distlearn.core.validate import (DistlearnValueError, MAX_WORLD_SIZE, array, check_bool, check_choice, check_int,
                                     check_number, checks, record)
from distlearn.zero_fsdp.simulation import chunk_sizes

NS_COEFFS = (3.4445, -4.7750, 2.0315)   # (a, b, c) of KellerJordan/Muon's zeropower_via_newtonschulz5
NS_STEPS = 5                              # the reference's default
NS_EPS = 1e-7                             # added to the Frobenius norm before dividing, as in the reference
FORMS = ("all_gather", "owner")
SCALE_RULES = ("moonlight", "keller", "none")
MAX_NS_STEPS = 100


def _steps(steps) -> int:
    return check_int("steps", steps, minimum=0, maximum=MAX_NS_STEPS)


@checks(g=array("rows cols"))
def newton_schulz(g, steps: int = NS_STEPS) -> np.ndarray:
    """Newton–Schulz orthogonalisation of a 2-D array ``g`` (rows, cols) in float64: the quintic iteration of
    KellerJordan/Muon with coefficients :data:`NS_COEFFS`. Returns an array of ``g``'s shape whose singular values
    are p⁵(σ/‖g‖_F) (:func:`ns_polynomial`), roughly 0.68–1.13. Raises DistlearnValueError for a non-2-D or
    non-finite ``g`` or ``steps`` outside [0, 100]."""
    steps = _steps(steps)
    a, b, c = NS_COEFFS
    x = np.asarray(g, dtype=np.float64)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (np.linalg.norm(x) + NS_EPS)
    for _ in range(steps):
        A = x @ x.T
        B = b * A + c * A @ A
        x = a * x + B @ x
    return x.T if tall else x


@checks(g=array("rows cols", torch=True))
def newton_schulz_torch(g, steps: int = NS_STEPS):
    """The same iteration in torch, in ``g``'s floating dtype (float32 here; the reference casts to bf16 on a GPU):
    a tensor of ``g``'s shape. Raises DistlearnValueError as :func:`newton_schulz`."""
    steps = _steps(steps)
    a, b, c = NS_COEFFS
    x = g if g.is_floating_point() else g.float()
    tall = x.size(0) > x.size(1)
    if tall:
        x = x.T
    x = x / (x.norm() + NS_EPS)
    for _ in range(steps):
        A = x @ x.T
        B = b * A + c * A @ A
        x = a * x + B @ x
    return x.T if tall else x


@checks(x=array(None, number=True))
def ns_polynomial(x, steps: int = NS_STEPS) -> np.ndarray:
    """p applied ``steps`` times to each value of ``x`` (float64 array, or a number), p(s) = a s + b s³ + c s⁵: what
    Newton–Schulz does to a singular value s = σ/‖G‖_F. Returns an array of ``x``'s shape."""
    steps = _steps(steps)
    a, b, c = NS_COEFFS
    s = np.asarray(x, dtype=np.float64)
    for _ in range(steps):
        s = a * s + b * s ** 3 + c * s ** 5
    return s


@dataclass(frozen=True)
class NSRange:
    """The band p^steps maps [lo, 1] into: ``low`` and ``high`` (unitless), ``lo`` the smallest input considered."""
    lo: float
    low: float
    high: float


def ns_output_range(lo: float = 0.01, steps: int = NS_STEPS, points: int = 20001) -> NSRange:
    """min and max of :func:`ns_polynomial` over ``points`` values spaced evenly in log between ``lo`` and 1 (an
    input s = σ/‖G‖_F is at most 1). With 5 steps and lo = 0.01 the band is about [0.68, 1.13]. Raises
    DistlearnValueError for lo outside (0, 1], steps outside [0, 100], points outside [2, 10**6]."""
    lo = check_number("lo", lo, minimum=0.0, maximum=1.0, strict_min=True)
    steps = _steps(steps)
    points = check_int("points", points, minimum=2, maximum=10 ** 6)
    y = ns_polynomial(np.geomspace(lo, 1.0, points), steps)
    return NSRange(lo, float(y.min()), float(y.max()))


def update_scale(rows: int, cols: int, rule: str = "moonlight") -> float:
    """The factor Muon multiplies the orthogonalised update by. ``"moonlight"``: 0.2·√max(rows, cols) (Moonlight,
    arXiv 2502.16982 §2.2: matches AdamW's update RMS of ≈ 0.2); ``"keller"``: √max(1, rows/cols)
    (KellerJordan/Muon ``muon_update``); ``"none"``: 1. Raises DistlearnValueError for rows or cols < 1 or another
    rule."""
    rows = check_int("rows", rows, minimum=1)
    cols = check_int("cols", cols, minimum=1)
    rule = check_choice("rule", rule, SCALE_RULES)
    if rule == "moonlight":
        return 0.2 * math.sqrt(max(rows, cols))
    if rule == "keller":
        return math.sqrt(max(1.0, rows / cols))
    return 1.0


@dataclass(frozen=True)
class MuonUpdate:
    """One Muon step on one matrix: ``update`` (rows, cols), already scaled, to subtract times the learning rate, and
    the new ``momentum`` (rows, cols)."""
    update: np.ndarray
    momentum: np.ndarray


@checks(grad=array("rows cols"), momentum=array("rows cols"))
def muon_update(grad, momentum, beta: float = 0.95, nesterov: bool = True, steps: int = NS_STEPS,
                rule: str = "moonlight") -> MuonUpdate:
    """Momentum, then Newton–Schulz, then the scale, in numpy (float64), as KellerJordan/Muon's ``muon_update``:
    ``m ← β m + (1 − β) g``; the update is NS((1 − β) g + β m) with Nesterov, NS(m) without, times
    :func:`update_scale` (rows, cols, rule). The parameter then moves by −lr · update. Returns a :class:`MuonUpdate`;
    ``momentum`` is not changed in place. Raises DistlearnValueError for shapes that differ, β outside [0, 1)."""
    beta = check_number("beta", beta, minimum=0.0, maximum=1.0)
    nesterov = check_bool("nesterov", nesterov)
    rule = check_choice("rule", rule, SCALE_RULES)
    if beta >= 1.0:
        raise DistlearnValueError("beta", f"beta must be in [0, 1), got {beta}.", f"beta 必须在 [0, 1) 内，收到 {beta}。")
    g = np.asarray(grad, dtype=np.float64)
    m = beta * np.asarray(momentum, dtype=np.float64) + (1 - beta) * g
    u = (1 - beta) * g + beta * m if nesterov else m
    return MuonUpdate(newton_schulz(u, steps) * update_scale(g.shape[0], g.shape[1], rule), m)


@checks(g=array("rows cols"))
def shardwise_newton_schulz(g, world_size: int, steps: int = NS_STEPS) -> np.ndarray:
    """The misconception: cut ``g`` (rows, cols) into FSDP2's row shards (``torch.chunk`` on dim 0, see
    :func:`distlearn.zero_fsdp.simulation.chunk_sizes`), run :func:`newton_schulz` on each shard alone, and stack
    the results: (rows, cols), not equal to ``newton_schulz(g)`` for world_size > 1. An empty shard stays empty."""
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    g = np.asarray(g, dtype=np.float64)
    out, start = [], 0
    for n in chunk_sizes(g.shape[0], world_size):
        if n:
            out.append(newton_schulz(g[start:start + n], steps))
        start += n
    return np.concatenate(out, axis=0)


# ------------------------------------------------------------------ costs in closed form
@dataclass(frozen=True)
class ParameterSplit:
    """Which parameters of a dense model go to which optimizer: ``muon`` [(rows, cols), …] (the hidden matrices,
    layer by layer in the order q, k, v, o, gate, up, down for Llama; q, k, v, o, up, down for GPT) and ``adamw``
    [shape, …] (embedding, LM head unless tied, GPT's position embedding, norms and biases)."""
    muon: list
    adamw: list


@checks(config=record(ModelConfig, "get_preset('llama3-8b')"))
def split_parameters(config) -> ParameterSplit:
    """The Muon / AdamW split of a dense ``config`` (arch "llama" or "gpt", no experts), with weights shaped as
    PyTorch's ``nn.Linear`` stores them, (out_features, in_features). Raises DistlearnValueError for an MoE model."""
    if config.num_experts:
        raise DistlearnValueError("config", f"split_parameters covers dense models; {config.name} has experts.",
                                  f"split_parameters 只支持稠密模型；{config.name} 含有专家。")
    h, f = config.hidden_size, config.ffn_hidden_size
    kv = (config.num_kv_heads or config.num_heads) * (h // config.num_heads)
    llama = config.arch == "llama"
    layer = [(h, h), (kv, h), (kv, h), (h, h)] + ([(f, h), (f, h), (h, f)] if llama else [(f, h), (h, f)])
    adamw = [(config.vocab_size, h)] + ([] if config.tied_embeddings else [(config.vocab_size, h)])
    if llama:
        adamw += [(h,)] * (2 * config.num_layers + 1)                       # RMSNorm weights
    else:
        adamw += [(config.max_seq_len, h)] + [(h,)] * (4 * config.num_layers + 2)   # LayerNorm weight and bias
        adamw += [(h,), (kv,), (kv,), (h,), (f,), (h,)] * config.num_layers        # biases
    return ParameterSplit(layer * config.num_layers, adamw)


def _shape_list(name, shapes) -> list[tuple[int, int]]:
    if not isinstance(shapes, (list, tuple)) or not shapes:
        raise DistlearnValueError(name, f"{name} must be a non-empty list of (rows, cols) pairs, got {shapes!r}.",
                                  f"{name} 必须是非空的 (rows, cols) 列表，收到 {shapes!r}。")
    out = []
    for s in shapes:
        if not isinstance(s, (list, tuple)) or len(s) != 2:
            raise DistlearnValueError(name, f"every item of {name} must be a (rows, cols) pair, got {s!r}.",
                                      f"{name} 的每一项都必须是 (rows, cols)，收到 {s!r}。")
        out.append((check_int(f"{name} rows", s[0], minimum=1), check_int(f"{name} cols", s[1], minimum=1)))
    return out


def owner_of(index: int, world_size: int) -> int:
    """The rank that orthogonalises matrix ``index`` in the ``"owner"`` form: round-robin, index mod world_size."""
    index = check_int("index", index, minimum=0)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    return index % world_size


@dataclass(frozen=True)
class MuonTraffic:
    """The collectives of one sharded Muon step on one rank. ``elements``: {op: elements}, counted as
    :class:`distlearn.zero_fsdp.lab_traffic.CollectiveRecorder` reads them on this rank (an all-gather's whole
    output; a gather or scatter only on its root, its whole message); ``sent``: elements this rank sends to
    other ranks (ring all-gather: (W − 1) padded shards; gather: its shard unless it is the root; scatter: the W − 1
    other shards at the root)."""
    elements: dict
    sent: int


def step_traffic(shapes, world_size: int, rank: int, form: str) -> MuonTraffic:
    """Closed form of the optimizer-step collectives of one rank for Muon matrices of ``shapes`` [(rows, cols), …]
    (in the order the optimizer visits them) on ``world_size`` ranks. A matrix of R rows travels as W shards of
    c = ⌈R/W⌉ padded rows (gloo's collectives need equal sizes; DTensor pads the same way).

    - ``"all_gather"``: every rank all-gathers every matrix: W·c·cols elements recorded, (W − 1)·c·cols sent.
    - ``"owner"``: matrix i's owner (i mod W) gathers W·c·cols and scatters W·c·cols; a non-owner sends c·cols in
      the gather, the owner (W − 1)·c·cols in the scatter.

    Summed over ranks, "all_gather" sends (W − 1)·W·c·cols per matrix and "owner" 2·(W − 1)·c·cols: W/2 times less,
    but all of it through one rank per matrix. Raises DistlearnValueError for bad shapes, rank ≥ world_size or
    another form."""
    shapes = _shape_list("shapes", shapes)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    rank = check_int("rank", rank, minimum=0, maximum=world_size - 1)
    form = check_choice("form", form, FORMS)
    elements: dict[str, int] = {}
    sent = 0
    if world_size == 1:
        return MuonTraffic({}, 0)
    for i, (rows, cols) in enumerate(shapes):
        shard = math.ceil(rows / world_size) * cols
        if form == "all_gather":
            elements["all_gather"] = elements.get("all_gather", 0) + world_size * shard
            sent += (world_size - 1) * shard
        elif i % world_size == rank:
            for op in ("gather", "scatter"):
                elements[op] = elements.get(op, 0) + world_size * shard
            sent += (world_size - 1) * shard
        else:
            sent += shard
    return MuonTraffic(elements, sent)


def ns_flops(rows: int, cols: int, steps: int = NS_STEPS) -> int:
    """FLOPs of Newton–Schulz on a (rows, cols) matrix, with m = min and n = max after the transpose: per step
    X Xᵀ (2m²n), A·A (2m³) and B·X (2m²n), so steps·(4m²n + 2m³). The elementwise work (norm, scaling, sums) is left
    out, as torch's FlopCounterMode leaves it out."""
    rows = check_int("rows", rows, minimum=1)
    cols = check_int("cols", cols, minimum=1)
    steps = _steps(steps)
    m, n = min(rows, cols), max(rows, cols)
    return steps * (4 * m * m * n + 2 * m ** 3)


def compute_per_rank(shapes, world_size: int, form: str, steps: int = NS_STEPS) -> list[int]:
    """Newton–Schulz FLOPs of each rank in one step: ``"all_gather"`` — every rank all of them (W-fold redundant);
    ``"owner"`` — each rank those of the matrices it owns (i mod W), so the busiest rank sets the time."""
    shapes = _shape_list("shapes", shapes)
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    form = check_choice("form", form, FORMS)
    flops = [ns_flops(r, c, steps) for r, c in shapes]
    if form == "all_gather":
        return [sum(flops)] * world_size
    out = [0] * world_size
    for i, f in enumerate(flops):
        out[i % world_size] += f
    return out


def optimizer_state_bytes(muon_shapes, adamw_shapes, world_size: int, rank: int, bytes_per_elem: int = 4) -> int:
    """Bytes of optimizer state one rank holds under FSDP2 row sharding: one momentum buffer per Muon matrix and two
    (exp_avg, exp_avg_sq) per AdamW parameter, each only this rank's rows (``chunk_sizes`` of dim 0). Shapes are
    tuples; a 1-D parameter is (n,). Raises DistlearnValueError for bad shapes or rank ≥ world_size."""
    world_size = check_int("world_size", world_size, minimum=1, maximum=MAX_WORLD_SIZE)
    rank = check_int("rank", rank, minimum=0, maximum=world_size - 1)
    bytes_per_elem = check_int("bytes_per_elem", bytes_per_elem, minimum=1, maximum=16)

    def local(shapes, name):
        if not isinstance(shapes, (list, tuple)):
            raise DistlearnValueError(name, f"{name} must be a list of shapes, got {shapes!r}.",
                                      f"{name} 必须是形状的列表，收到 {shapes!r}。")
        total = 0
        for s in shapes:
            if not isinstance(s, (list, tuple)) or not s:
                raise DistlearnValueError(name, f"every item of {name} must be a shape tuple, got {s!r}.",
                                          f"{name} 的每一项都必须是形状元组，收到 {s!r}。")
            dims = [check_int(f"{name} dim", d, minimum=1) for d in s]
            total += chunk_sizes(dims[0], world_size)[rank] * math.prod(dims[1:])
        return total

    return bytes_per_elem * (local(muon_shapes, "muon_shapes") + 2 * local(adamw_shapes, "adamw_shapes"))


# ------------------------------------------------------------------ bf16
def bf16_ulp(x: float) -> float:
    """The gap between ``x`` and the next bf16 number away from zero (8 significant bits): 2^(⌊log₂|x|⌋ − 7);
    for x = 1 that is 2⁻⁷ = 0.0078125. Normal numbers only (|x| ≥ 2⁻¹²⁶). Raises DistlearnValueError for x = 0 or
    |x| outside bf16's normal range."""
    x = check_number("x", x)
    if not 2.0 ** -126 <= abs(x) < 3.39e38:
        raise DistlearnValueError("x", f"x must be a normal bf16 number, 2**-126 ≤ |x| < 3.39e38, got {x!r}.",
                                  f"x 必须是 bf16 的正规数，2**-126 ≤ |x| < 3.39e38，收到 {x!r}。")
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7)


def bf16_stagnates(w: float, delta: float) -> bool:
    """Does the bf16 number ``w`` stay equal to itself after adding ``delta``? For |delta| < ulp/2 it always does
    (round to nearest); for |delta| > ulp/2 it never does. At exactly ulp/2 the tie goes to the even neighbour:
    ``w`` stays if its last significand bit is 0. ``w`` must be a bf16 value (exactly representable); when ``delta``
    pulls ``w`` towards zero across a power of two, the gap below is ulp/2, and the rule uses that one."""
    w = check_number("w", w)
    delta = check_number("delta", delta)
    ulp = bf16_ulp(w)
    below = delta != 0 and np.sign(delta) != np.sign(w) and abs(w) == 2.0 ** math.floor(math.log2(abs(w)))
    half = (ulp / 2 if below else ulp) / 2
    if abs(delta) != half:
        return abs(delta) < half
    significand = round(abs(w) / ulp)  # an integer in [128, 256)
    return significand % 2 == 0

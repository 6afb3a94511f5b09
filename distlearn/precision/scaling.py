"""Low-precision number formats, FP8 scaling, the error of a GEMM from quantised operands, and fp16 loss scaling.

Units: values are plain numbers; byte counts are **bytes**. Everything runs on the CPU with PyTorch's own
``torch.float8_e4m3fn`` / ``torch.float8_e5m2`` dtypes (no GPU needed: a cast is a cast).

**Formats** (:data:`FORMATS`). A binary floating-point format with ``e`` exponent bits and ``m`` mantissa bits
has bias ``2**(e-1) - 1``; a normal number is ``(-1)**s · 2**(E - bias) · (1 + M / 2**m)`` for exponent field
``1 ≤ E ≤ Emax``, a subnormal ``(-1)**s · 2**(1 - bias) · M / 2**m`` for ``E = 0`` (IEEE 754-2008 §3.4). So

- spacing near 1.0 (``eps``) = ``2**-m``; smallest normal = ``2**(1 - bias)``; smallest subnormal =
  ``2**(1 - bias - m)``;
- IEEE-like formats (fp32, fp16, bf16, tf32, E5M2) reserve the all-ones exponent for ±inf and NaN:
  ``Emax = 2**e - 2`` and max = ``2**(Emax - bias) · (2 - 2**-m)`` (fp16: 65504; E5M2: 57344);
- **E4M3 "fn"** (finite, no infinities; Micikevicius et al. 2022, "FP8 Formats for Deep Learning", §2) keeps the
  all-ones exponent for numbers and reserves only ``S.1111.111`` for NaN: ``Emax = 2**e - 1`` and the largest
  mantissa is ``2**m - 2``, so max = ``2**8 · 1.75 = 448``.

tf32 (NVIDIA A100 whitepaper: 8 exponent bits like fp32, 10 mantissa bits like fp16, 19 bits in all, stored in a
32-bit register) has **no torch dtype**: its numbers are computed here from the definition, and
:func:`round_mantissa` rounds fp32 to it (the same bit rounding gives exactly torch's bf16 cast with 7 bits, which
the tests check).

**Scaling** (how FP8 recipes fit a tensor into 448): the scale maps the absolute maximum (amax) onto the format's
max, ``scale = fp8_max / amax / 2**margin`` (Transformer Engine, ``nvte_delayed_scaling_recipe_amax_and_scale_
update``: "The scaling factor is estimated so the FP8 tensor's maximum absolute value is 2^-margin max_fp8_dtype");
the cast is ``clamp(x · scale, -fp8_max, fp8_max).to(fp8)``, the dequantised value ``q / scale``.

- *current* per-tensor scaling: amax of this very tensor (torchao's dynamic tensorwise scaling; TE
  ``Float8CurrentScaling``);
- *delayed* scaling (TE ``DelayedScaling``: "Use scale factor from previous iteration ... and record amax history
  of amax_history_len steps"; ``amax_compute_algo="max"`` "chooses the largest amax in the history window"):
  :class:`DelayedScaler`;
- *fine-grained block* scaling (DeepSeek-V3 report §3.3.2: "for activations, we group and scale elements on a
  1x128 tile basis (i.e., per token per 128 channels); and (2) for weights, we group and scale elements on a
  128x128 block basis"): :func:`quantize_blockwise`, with the loop-by-loop :func:`reference_quantize_blockwise`.

**Loss scaling** (fp16): :func:`update_scale` is ``torch._amp_update_scale_`` as ``torch.amp.GradScaler.update``
calls it (torch 2.13, ``torch/amp/grad_scaler.py``): on inf/NaN the scale is multiplied by ``backoff_factor`` and
the growth tracker reset; otherwise the tracker counts successful steps and, on reaching ``growth_interval``,
the scale is multiplied by ``growth_factor`` (kept only if finite in fp32) and the tracker reset. The step itself
is skipped when gradients are not finite (``GradScaler.step``). :func:`simulate_loss_scaling` runs it on a
stream of gradients cast to fp16; :func:`run_gradscaler` drives the real ``torch.amp.GradScaler("cpu")`` on the
same stream, and the tests require the two scale sequences to be equal.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from distlearn.precision.formats import FP8_FORMATS, FORMATS, FloatFormat, decode_all, get_format, reference_decode  # noqa: F401
from distlearn.core.validate import (array, checks, each, flag, maybe, record, whole, MAX_ELEMENTS, MAX_STEPS, DistlearnValueError, check_bool, check_choice,
                                     check_elements, check_int, check_number, check_seed)

_FP32_MAX = float(np.finfo(np.float32).max)  # GradScaler's scale is an fp32 tensor


# ---------------------------------------------------------------- number formats: distlearn.precision.formats
FORMAT = record(FloatFormat, "get_format('e4m3')")
TENSOR = array(torch=True)                  # a finite torch tensor of any shape
STREAM = each(TENSOR, max_len=MAX_STEPS)    # one tensor per step


def _checked_stream(name: str, grads):
    """``grads`` (a list or a lazy iterator of gradient tensors, one per step) with each tensor checked as it comes
    (:data:`TENSOR`: ``grads[i]`` named in the error) and at most :data:`MAX_STEPS` of them; a value that cannot be
    iterated over, or a string, raises DistlearnValueError at once."""
    if grads is None or isinstance(grads, (str, bytes, dict)) or not hasattr(grads, "__iter__"):
        shown = repr(grads) if len(repr(grads)) <= 60 else repr(grads)[:57] + "..."
        raise DistlearnValueError(name, f"{name} must be a list (or iterator) of gradient tensors, one per step; got "
                                        f"{shown} ({type(grads).__name__}).",
                                  f"{name} 必须是梯度张量的列表（或迭代器），每步一个；收到 {shown}（{type(grads).__name__}）。")

    def checked():
        for i, grad in enumerate(grads):
            if i >= MAX_STEPS:
                raise DistlearnValueError(name, f"{name}: more than {MAX_STEPS:,} steps.",
                                          f"{name}：超过 {MAX_STEPS:,} 步。")
            TENSOR.check(f"{name}[{i}]", grad, {})
            yield grad
    return checked()


@checks(fmt=FORMAT)
def torch_decode_all(fmt: FloatFormat) -> torch.Tensor:
    """torch's own decoding of every bit pattern of an 8- or 16-bit format, as float64 (index = code)."""
    store = {8: torch.uint8, 16: torch.int16}[fmt.bits]
    codes = torch.arange(2 ** fmt.bits, dtype=torch.int32).to(store)
    return codes.view(fmt.dtype()).to(torch.float64)


@checks(fmt=FORMAT)
def finfo_comparison(fmt: FloatFormat) -> dict:
    """This module's numbers for ``fmt`` beside ``torch.finfo`` (None where torch has no dtype: tf32).

    Keys: ``max``, ``eps``, ``smallest_normal``, ``bits`` → ``(ours, torch)``; ``smallest_subnormal`` → (ours,
    torch's value of the bit pattern 1); ``equal``: all pairs equal (None for tf32).
    """
    ours = {"max": fmt.max, "eps": fmt.eps, "smallest_normal": fmt.smallest_normal, "bits": fmt.bits,
            "smallest_subnormal": fmt.smallest_subnormal}
    dt = fmt.dtype()
    if dt is None:
        return {k: (v, None) for k, v in ours.items()} | {"equal": None}
    fi = torch.finfo(dt)
    store = {8: torch.uint8, 16: torch.int16, 32: torch.int32}[fi.bits]
    sub = float(torch.ones((), dtype=store).view(dt).to(torch.float64))
    theirs = {"max": fi.max, "eps": fi.eps, "smallest_normal": fi.smallest_normal, "bits": fi.bits,
              "smallest_subnormal": sub}
    out = {k: (ours[k], theirs[k]) for k in ours}
    out["equal"] = all(a == b for a, b in out.values())
    return out


@checks(x=TENSOR)
def round_mantissa(x: torch.Tensor, mantissa_bits: int) -> torch.Tensor:
    """Round fp32 values to ``mantissa_bits`` fraction bits, round-to-nearest-even, keeping fp32's exponent range.

    ``mantissa_bits=10`` is tf32, ``7`` is bf16 (equal to ``x.to(torch.bfloat16)`` for finite values: a test).
    Works on the bit pattern: add half an ulp of the target (minus one, plus the kept lowest bit for ties to
    even) and clear the dropped bits. Returns an fp32 tensor. Raises DistlearnValueError for bits outside 0..23.
    """
    m = check_int("mantissa_bits", mantissa_bits, minimum=0, maximum=23)
    drop = 23 - m
    if drop == 0:
        return x.to(torch.float32).clone()
    bits = x.to(torch.float32).contiguous().view(torch.int32).to(torch.int64)
    lowest_kept = (bits >> drop) & 1
    rounded = (bits + (1 << (drop - 1)) - 1 + lowest_kept) & ~((1 << drop) - 1)
    finite = torch.isfinite(x.to(torch.float32))
    rounded = torch.where(finite, rounded, bits)
    return (((rounded + 2 ** 31) % 2 ** 32) - 2 ** 31).to(torch.int32).view(torch.float32)


# ---------------------------------------------------------------- FP8 scaling and quantisation
def fp8_dtype(fmt: str) -> torch.dtype:
    """torch's dtype for ``"e4m3"`` (``float8_e4m3fn``) or ``"e5m2"``. Raises DistlearnValueError."""
    return FORMATS[check_choice("fmt", fmt, FP8_FORMATS)].dtype()


def scale_from_amax(amax, fmt: str = "e4m3", margin: int = 0) -> torch.Tensor:
    """``fp8_max / amax / 2**margin`` (fp32), elementwise; where ``amax`` is 0 the scale is 1 (nothing to fit).

    Transformer Engine's formula (module docstring); torchao's ``amax_to_scale`` is the same with margin 0.
    """
    m = check_int("margin", margin, minimum=0, maximum=30)
    top = get_format(check_choice("fmt", fmt, FP8_FORMATS)).max
    amax = torch.as_tensor(amax, dtype=torch.float32)
    return torch.where(amax > 0, top / amax.clamp(min=torch.finfo(torch.float32).tiny) / 2 ** m,
                       torch.ones_like(amax))


@checks(x=TENSOR, scale=array(torch=True, number=True))
def cast_saturated(x: torch.Tensor, scale: torch.Tensor, fmt: str = "e4m3") -> torch.Tensor:
    """``clamp(x · scale, -fp8_max, fp8_max).to(fp8)``: the saturating cast FP8 recipes use (torchao's
    ``to_fp8_saturated``; TE saturates too). Without the clamp torch's E5M2 cast overflows to inf."""
    top = get_format(fmt).max
    return (x.to(torch.float32) * scale).clamp(-top, top).to(fp8_dtype(fmt))


def _e4m3_values() -> np.ndarray:
    """float32 value of each of the 256 E4M3 bit patterns (index = code), decoded by torch itself."""
    return torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).to(torch.float32).numpy()


_E4M3_VALUES = _e4m3_values()


def _as_float32(data: torch.Tensor) -> torch.Tensor:
    """``data.to(torch.float32)``. For E4M3 the same values bit for bit are looked up in torch's own decoding of
    the 256 codes: on the CPU that takes a third of the time of torch 2.13's E4M3 cast (E5M2's cast is fast)."""
    if data.dtype != torch.float8_e4m3fn:
        return data.to(torch.float32)
    return torch.from_numpy(np.take(_E4M3_VALUES, data.view(torch.uint8).numpy()))


@dataclass
class Quantized:
    """An FP8 tensor with its scales: ``data`` (fp8, the shape of the input), ``scale`` (fp32; one per block,
    shape ``(rows / block[0], cols / block[1])``; 0-d for per-tensor), ``block`` (None for per-tensor)."""

    data: torch.Tensor
    scale: torch.Tensor
    fmt: str
    block: tuple[int, int] | None = None

    def dequantize(self) -> torch.Tensor:
        """fp32 values ``data / scale`` (each element divided by its block's scale)."""
        q = _as_float32(self.data)
        if self.block is None:
            return q / self.scale
        r, c = self.block
        rows, cols = q.shape
        # each block divided by its own scale, broadcast (no full-size copy of the scales) / 每块除以自己的缩放因子（广播）
        return (q.reshape(rows // r, r, cols // c, c) / self.scale[:, None, :, None]).reshape(rows, cols)

    @property
    def scale_bytes(self) -> int:
        """Bytes of the fp32 scales (4 per block, 4 for a per-tensor scale)."""
        return 4 * max(self.scale.numel(), 1)


@checks(x=TENSOR)
def quantize_tensorwise(x: torch.Tensor, fmt: str = "e4m3", *, scale: torch.Tensor | float | None = None,
                        margin: int = 0) -> Quantized:
    """Per-tensor scaling: one scale for the whole tensor, from its own amax (*current* scaling) unless a
    ``scale`` is given (*delayed* scaling passes the scale derived from earlier steps)."""
    if scale is None:
        scale = scale_from_amax(x.abs().max(), fmt, margin)
    scale = torch.as_tensor(scale, dtype=torch.float32)
    return Quantized(cast_saturated.unchecked(x, scale, fmt), scale, fmt)


def _check_blocks(x: torch.Tensor, block) -> tuple[int, int]:
    """``block``'s rows and columns once ``x`` (a finite torch tensor of 2 dimensions) and ``block`` (two whole
    numbers that tile it) are checked; else DistlearnValueError naming ``x`` or ``block``."""
    array(torch=True).check("x", x, {})
    return _block_sizes(x, block)


def _block_sizes(x: torch.Tensor, block) -> tuple[int, int]:
    """:func:`_check_blocks` for an ``x`` already checked finite (the NaN scan is the costly part): checks that
    ``x`` is 2-D and that ``block`` is two whole numbers that tile it; else DistlearnValueError."""
    each(whole(1), min_len=2, max_len=2).check("block", block, {})
    if x.dim() != 2:
        raise DistlearnValueError("x", f"block scaling needs a 2-D tensor (rows, columns), got shape {tuple(x.shape)}.",
                                  f"分块缩放需要二维张量（行，列），收到形状 {tuple(x.shape)}。")
    r = check_int("block[0]", block[0])
    c = check_int("block[1]", block[1])
    if x.shape[0] % r or x.shape[1] % c:
        raise DistlearnValueError(
            "block", f"block {r}×{c} must tile the tensor's shape {tuple(x.shape)} exactly.",
            f"块大小 {r}×{c} 必须恰好铺满张量的形状 {tuple(x.shape)}。")
    return r, c


def quantize_blockwise(x: torch.Tensor, block: tuple[int, int] = (1, 128), fmt: str = "e4m3",
                       margin: int = 0) -> Quantized:
    """Fine-grained scaling: one scale per ``block`` (rows × columns) tile, from the tile's own amax.

    DeepSeek-V3 (§3.3.2): activations ``(1, 128)`` — per token, per 128 channels; weights ``(128, 128)``.
    ``x`` is 2-D (tokens × channels, or out_features × in_features) and the blocks must tile it. Vectorised;
    :func:`reference_quantize_blockwise` does the same tile by tile. Raises DistlearnValueError.
    """
    return _quantize_blocks(x, *_check_blocks(x, block), fmt, margin)


def _quantize_blocks(x: torch.Tensor, r: int, c: int, fmt: str, margin: int) -> Quantized:
    """The body of :func:`quantize_blockwise` once ``x`` and the block ``r × c`` are checked."""
    rows, cols = x.shape
    tiles = x.to(torch.float32).reshape(rows // r, r, cols // c, c)
    scale = scale_from_amax(tiles.abs().amax(dim=(1, 3)), fmt, margin)
    data = cast_saturated.unchecked(tiles, scale[:, None, :, None], fmt).reshape(rows, cols)
    return Quantized(data, scale, fmt, (r, c))


def reference_quantize_blockwise(x: torch.Tensor, block: tuple[int, int] = (1, 128), fmt: str = "e4m3",
                                 margin: int = 0) -> Quantized:
    """:func:`quantize_blockwise` written as plain loops over the tiles (the readable reference). Raises
    DistlearnValueError (as :func:`quantize_blockwise`)."""
    r, c = _check_blocks(x, block)
    margin = check_int("margin", margin, minimum=0, maximum=30)
    check_choice("fmt", fmt, FP8_FORMATS)
    rows, cols = x.shape
    top = get_format(fmt).max
    data = torch.empty(rows, cols, dtype=fp8_dtype(fmt))
    scale = torch.empty(rows // r, cols // c, dtype=torch.float32)
    for i in range(rows // r):
        for j in range(cols // c):
            tile = x[i * r:(i + 1) * r, j * c:(j + 1) * c].to(torch.float32)
            amax = tile.abs().max()
            # scale: amax lands on fp8_max / 缩放：让 amax 正好落在 fp8_max 上
            s = top / amax / 2 ** margin if amax > 0 else torch.tensor(1.0)
            scale[i, j] = s
            data[i * r:(i + 1) * r, j * c:(j + 1) * c] = (tile * s).clamp(-top, top).to(fp8_dtype(fmt))
    return Quantized(data, scale, fmt, (r, c))


SCHEMES = ("bf16", "tensorwise", "blockwise")


@dataclass(frozen=True)
class GemmError:
    """Error of ``y = x @ wᵀ`` computed from dequantised operands, against the fp32 product.

    ``rel_error``: ‖ŷ − y‖_F / ‖y‖_F; ``rest_error``: the same for the part of the product carried by the other
    channels, ``x[:, rest] @ w[:, rest]ᵀ`` with ``rest`` = every channel but the ones excluded (the outlier): with
    an outlier the whole product is dominated by the outlier channel, so ``rel_error`` hides what happens to the
    others; ``underflow``: share of the nonzero entries of ``x`` that became 0; ``x_rel_error``: ‖x̂ − x‖_F /
    ‖x‖_F; ``scale_bytes``: bytes of the scales of both operands."""

    scheme: str
    fmt: str
    rel_error: float
    rest_error: float
    x_rel_error: float
    underflow: float
    scale_bytes: int


@checks(x=array("m k", torch=True), w=array("n k", torch=True))
def quantize_operands(x: torch.Tensor, w: torch.Tensor, scheme: str, fmt: str = "e4m3",
                      act_block: tuple[int, int] = (1, 128),
                      weight_block: tuple[int, int] = (128, 128)) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Dequantised ``(x̂, ŵ, scale_bytes)`` for ``scheme``: ``"bf16"`` (a bf16 cast, the usual baseline),
    ``"tensorwise"`` (current per-tensor FP8 scaling of each operand) or ``"blockwise"`` (1×128 activation
    tiles, 128×128 weight blocks by default). Raises DistlearnValueError."""
    check_choice("scheme", scheme, SCHEMES)
    if scheme == "bf16":
        return x.to(torch.bfloat16).float(), w.to(torch.bfloat16).float(), 0
    # x and w were checked finite at the entry: the quantisers below do not scan them again / x、w 已在入口检查
    if scheme == "tensorwise":
        qx, qw = quantize_tensorwise.unchecked(x, fmt), quantize_tensorwise.unchecked(w, fmt)
    else:
        qx = _quantize_blocks(x, *_block_sizes(x, act_block), fmt, 0)
        qw = _quantize_blocks(w, *_block_sizes(w, weight_block), fmt, 0)
    return qx.dequantize(), qw.dequantize(), qx.scale_bytes + qw.scale_bytes


@checks(x=array("m k", torch=True), w=array("n k", torch=True))
def gemm_error(x: torch.Tensor, w: torch.Tensor, scheme: str, fmt: str = "e4m3", *,
               exclude_channels: tuple[int, ...] = (), **blocks) -> GemmError:
    """The error of the GEMM ``x @ wᵀ`` (x: tokens × K, w: N × K) computed in fp32 from the dequantised
    operands of :func:`quantize_operands` — what an FP8 GEMM with fp32 accumulation computes, up to the order of
    the sums. ``exclude_channels``: channels left out of ``rest_error`` (the outlier's). ``blocks``:
    ``act_block``, ``weight_block``. The operands are quantised whole, outlier included."""
    return gemm_errors(x, w, (scheme,), fmt, exclude_channels=exclude_channels, **blocks)[0]


@checks(x=array("m k", torch=True), w=array("n k", torch=True), schemes=each(record(str, "\"tensorwise\"")))
def gemm_errors(x: torch.Tensor, w: torch.Tensor, schemes=SCHEMES, fmt: str = "e4m3", *,
                exclude_channels: tuple[int, ...] = (), **blocks) -> list[GemmError]:
    """:func:`gemm_error` for each of ``schemes`` on the same operands, the fp32 reference GEMMs computed once.
    Runs on one CPU thread: for GEMMs this small, a second thread's start and wait cost more than it saves, ten
    times more on a shared machine (Binder, a classroom server)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _gemm_errors(x, w, schemes, fmt, exclude_channels, blocks)
    finally:
        torch.set_num_threads(threads)


def _kept_runs(rest: torch.Tensor) -> list[tuple[int, int]]:
    """The runs ``[start, stop)`` of consecutive True entries of the 1-D bool mask ``rest``."""
    edges = torch.diff(rest.to(torch.int8), prepend=rest.new_zeros(1, dtype=torch.int8),
                       append=rest.new_zeros(1, dtype=torch.int8))
    return list(zip((edges == 1).nonzero().flatten().tolist(), (edges == -1).nonzero().flatten().tolist()))


def _columns(t: torch.Tensor, runs: list[tuple[int, int]]) -> torch.Tensor:
    """``t[:, rest]`` for the mask whose runs are ``runs``: the same contiguous copy, made from slices (a few
    times faster than a boolean index when few channels are excluded)."""
    return torch.cat([t[:, a:b] for a, b in runs], 1) if runs else t[:, :0]


def _gemm_errors(x, w, schemes, fmt, exclude_channels, blocks) -> list[GemmError]:
    x, w = x.to(torch.float32), w.to(torch.float32)
    rest = torch.ones(x.shape[1], dtype=torch.bool)
    rest[list(exclude_channels)] = False
    ex = ~rest
    runs = _kept_runs(rest)
    # The GEMM without the excluded channels, then the whole one as that plus their (rank-k) part: one large
    # GEMM each, and the small rest is never got by cancelling the outlier's large part out of the whole.
    y_rest = _columns(x, runs) @ _columns(w, runs).T
    y = y_rest + x[:, ex] @ w[:, ex].T
    nonzero = x != 0
    nonzero_count = nonzero.sum().clamp(min=1)
    out = []
    for scheme in schemes:
        xq, wq, scale_bytes = quantize_operands.unchecked(x, w, scheme, fmt, **blocks)  # x, w checked above
        yq_rest = _columns(xq, runs) @ _columns(wq, runs).T
        yq = yq_rest + xq[:, ex] @ wq[:, ex].T
        underflow = float(((xq == 0) & nonzero).sum() / nonzero_count)
        out.append(GemmError(scheme, fmt, float((yq - y).norm() / y.norm()),
                             float((yq_rest - y_rest).norm() / y_rest.norm()), float((xq - x).norm() / x.norm()),
                             underflow, scale_bytes))
    return out


def outlier_activations(tokens: int = 256, channels: int = 1024, *, outlier: float = 1000.0,
                        outlier_channel: int = 7, seed: int = 0) -> torch.Tensor:
    """Activations ``N(0, 1)`` of shape (tokens, channels) with one channel multiplied by ``outlier`` — the
    feature outliers that make per-tensor scaling lose the other channels (DeepSeek-V3 §3.3.2; Dettmers et al.
    2022, LLM.int8(): "outlier features" in a few fixed dimensions). Deterministic in ``seed``."""
    t = check_int("tokens", tokens)
    c = check_int("channels", channels)
    k = check_int("outlier_channel", outlier_channel, minimum=0, maximum=c - 1)
    check_number("outlier", outlier, minimum=0, strict_min=True)
    check_elements("tokens × channels", t * c)
    g = torch.Generator().manual_seed(check_seed("seed", seed))
    x = torch.randn(t, c, generator=g)
    x[:, k] *= outlier
    return x


def gaussian_weights(out_features: int = 512, in_features: int = 1024, seed: int = 1) -> torch.Tensor:
    """Weights ``N(0, 1/in_features)`` (out × in), deterministic in ``seed``."""
    out_features, in_features = check_int("out_features", out_features), check_int("in_features", in_features)
    check_elements("out_features × in_features", out_features * in_features)
    g = torch.Generator().manual_seed(check_seed("seed", seed))
    return torch.randn(out_features, in_features, generator=g) / in_features ** 0.5


# ---------------------------------------------------------------- delayed scaling (amax history)
@dataclass
class DelayedScaler:
    """Transformer Engine's ``DelayedScaling`` for one tensor: the scale used at step t comes from the amax
    history of earlier steps; after the cast the step's amax enters the history and the scale is recomputed.

    ``history_len`` (TE default 1024), ``algo``: ``"max"`` (largest amax in the window, TE's default) or
    ``"most_recent"``; ``margin``; the first step uses scale 1 (TE initialises ``scale`` to ones). TE's update
    (``nvte_delayed_scaling_recipe_amax_and_scale_update``) keeps the scale when the amax is 0 or not finite.
    """

    fmt: str = "e4m3"
    history_len: int = 1024
    algo: str = "max"
    margin: int = 0
    scale: float = 1.0
    history: list[float] = field(default_factory=list)

    def __post_init__(self):
        check_choice("fmt", self.fmt, FP8_FORMATS)
        check_int("history_len", self.history_len)
        check_choice("algo", self.algo, ("max", "most_recent"))
        check_int("margin", self.margin, minimum=0, maximum=30)

    def quantize(self, x: torch.Tensor) -> Quantized:
        """Cast ``x`` with the current (delayed) scale, then record its amax and update the scale."""
        q = quantize_tensorwise(x, self.fmt, scale=self.scale)
        self.history = ([float(x.abs().max())] + self.history)[: self.history_len]
        amax = max(self.history) if self.algo == "max" else self.history[0]
        if amax > 0 and math.isfinite(amax):
            self.scale = float(scale_from_amax(amax, self.fmt, self.margin))
        return q


@dataclass(frozen=True)
class ScalingStep:
    """One step of :func:`compare_scaling_over_steps`: the tensor's amax, the delayed scale used, the share of
    elements saturated (clamped to ±fp8_max) and the relative error ‖x̂ − x‖/‖x‖ under delayed and current
    scaling."""

    step: int
    amax: float
    delayed_scale: float
    saturated: float
    delayed_error: float
    current_error: float


def drifting_tensors(num_steps: int = 12, *, size: int = 4096, growth: float = 1.3, spike_step: int = 8,
                     spike: float = 20.0, seed: int = 0) -> list[torch.Tensor]:
    """A stream of activations whose magnitude grows by ``growth`` per step, with a ``spike``× jump at
    ``spike_step`` (a loss spike): the case where a scale from the history is stale. Deterministic."""
    n = check_int("num_steps", num_steps, maximum=MAX_STEPS)
    size = check_int("size", size, maximum=MAX_ELEMENTS)
    check_elements("num_steps × size", n * size)
    growth = check_number("growth", growth, minimum=0, strict_min=True)
    spike = check_number("spike", spike, minimum=0, strict_min=True)
    check_int("spike_step", spike_step, minimum=0)
    if (n - 1) * math.log10(max(growth, 1.0)) + math.log10(max(spike, 1.0)) > 30:
        raise DistlearnValueError("growth", f"growth = {growth:g} over {n} steps (and a {spike:g}× spike) would "
                                            f"overflow fp32; keep growth ** num_steps × spike below 1e30.",
                                  f"growth = {growth:g}、{n} 步（外加 {spike:g} 倍的尖峰）会使 fp32 上溢；"
                                  f"请让 growth ** num_steps × spike 小于 1e30。")
    g = torch.Generator().manual_seed(check_seed("seed", seed))
    out = []
    for t in range(n):
        x = torch.randn(size, generator=g) * growth ** t
        if t == spike_step:
            x = x * spike
        out.append(x)
    return out


@checks(tensors=STREAM)
def compare_scaling_over_steps(tensors: list[torch.Tensor], fmt: str = "e4m3", history_len: int = 1024,
                               margin: int = 0) -> list[ScalingStep]:
    """Quantise each tensor of the stream with a :class:`DelayedScaler` and with current scaling."""
    scaler = DelayedScaler(fmt, history_len, margin=margin)
    top = get_format(fmt).max
    rows = []
    for t, x in enumerate(tensors):
        used = scaler.scale
        q = scaler.quantize(x)
        saturated = float(((x * used).abs() > top).float().mean())
        cur = quantize_tensorwise(x, fmt, margin=margin)
        rows.append(ScalingStep(t, float(x.abs().max()), used, saturated,
                                float((q.dequantize() - x).norm() / x.norm()),
                                float((cur.dequantize() - x).norm() / x.norm())))
    return rows


# ---------------------------------------------------------------- fp16 dynamic loss scaling
@dataclass(frozen=True)
class ScalerConfig:
    """``torch.amp.GradScaler``'s parameters and defaults (torch 2.13)."""

    init_scale: float = 2.0 ** 16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000

    def __post_init__(self):
        check_number("init_scale", self.init_scale, minimum=0, strict_min=True)
        check_number("growth_factor", self.growth_factor, minimum=1, strict_min=True)
        check_number("backoff_factor", self.backoff_factor, minimum=0, maximum=1, strict_min=True)
        if self.backoff_factor >= 1:
            raise DistlearnValueError("backoff_factor", "backoff_factor must be < 1 (GradScaler asserts it).",
                                      "backoff_factor 必须小于 1（GradScaler 会断言这一点）。")
        check_int("growth_interval", self.growth_interval)


def update_scale(scale: float, growth_tracker: int, found_inf: bool, config: ScalerConfig = ScalerConfig()
                 ) -> tuple[float, int]:
    """One ``GradScaler.update()``: ``torch._amp_update_scale_(scale, growth_tracker, found_inf, growth_factor,
    backoff_factor, growth_interval)`` in fp32 arithmetic, as the scale tensor is fp32.

    found_inf → ``(scale · backoff_factor, 0)``; otherwise the tracker becomes ``growth_tracker + 1`` and, when
    that equals ``growth_interval``, the scale is multiplied by ``growth_factor`` (only if the product is finite
    in fp32) and the tracker reset to 0. Returns ``(new_scale, new_growth_tracker)``. Raises DistlearnValueError
    unless ``scale`` is a finite fp32 number > 0, ``growth_tracker`` an integer ≥ 0 and ``found_inf`` a bool.
    """
    scale = check_number("scale", scale, minimum=0, maximum=_FP32_MAX, strict_min=True)
    growth_tracker = check_int("growth_tracker", growth_tracker, minimum=0)
    found_inf = check_bool("found_inf", found_inf)
    s = float(np.float32(scale))          # the fp32 scale tensor; the factors are doubles, as in the kernel
    if found_inf:
        return float(np.float32(s * config.backoff_factor)), 0
    successful = growth_tracker + 1
    if successful == config.growth_interval:
        with np.errstate(over="ignore"):
            grown = np.float32(s * config.growth_factor)
        return (float(grown) if np.isfinite(grown) else s), 0
    return s, successful


@checks(found_inf=each(flag(), max_len=MAX_STEPS))
def scale_sequence(found_inf: list[bool], config: ScalerConfig = ScalerConfig()) -> list[float]:
    """The scale in force at each step (before that step's update) for a given inf/NaN pattern, plus the final
    scale: ``len(found_inf) + 1`` values, starting at ``init_scale``."""
    scale, tracker, out = float(np.float32(config.init_scale)), 0, []
    for inf in found_inf:
        out.append(scale)
        scale, tracker = update_scale(scale, tracker, bool(inf), config)
    return out + [scale]


def gradient_stream(num_steps: int = 6000, *, size: int = 512, log2_median: float = -27.0,
                    log2_spread: float = 3.0, spikes: dict[int, float] | None = None, seed: int = 0):
    """True (fp32) gradients of a simulated run, one ``size``-vector per step, yielded lazily.

    Magnitudes are log-normal: ``log2|g| ~ N(log2_median, log2_spread²)`` with random signs — most of them below
    fp16's smallest subnormal 2⁻²⁴ (Micikevicius et al. 2018, "Mixed Precision Training", Figure 3: most
    activation gradients of their SSD run lie below 2⁻²⁴). ``spikes``: ``{step: factor}`` multiplies that step's
    gradient (a loss spike, which overflows fp16 once scaled). Deterministic in ``seed``.
    """
    n = check_int("num_steps", num_steps, maximum=MAX_STEPS)
    k = check_int("size", size, maximum=MAX_ELEMENTS)
    check_number("log2_median", log2_median, minimum=-150, maximum=128)
    check_number("log2_spread", log2_spread, minimum=0)
    spikes = dict(spikes or {})
    for step, factor in spikes.items():
        check_int("spikes (step)", step, minimum=0)
        check_number("spikes (factor)", factor, minimum=0, strict_min=True)
    return _gradient_stream(n, k, log2_median, log2_spread, spikes, check_seed("seed", seed))


def _gradient_stream(n, k, log2_median, log2_spread, spikes, seed):
    """The generator behind :func:`gradient_stream`, whose arguments are validated when it is called, not at the
    first ``next`` (a generator function runs no code until then)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(k, generator=g) * log2_spread + log2_median
    signs = torch.where(torch.rand(k, generator=g) < 0.5, -1.0, 1.0)
    for t in range(n):
        jitter = torch.randn(k, generator=g) * 0.25
        grad = signs * torch.exp2(base + jitter)
        yield grad * spikes.get(t, 1.0)


@checks(grad=TENSOR)
def fp16_gradients(grad: torch.Tensor, scale: float) -> torch.Tensor:
    """What an fp16 backward produces for true gradient ``grad`` with the loss scaled by ``scale``: the scaled
    values rounded to fp16 (underflow to 0 / subnormals, overflow to inf), returned as fp32 for the fp32 master
    gradients GradScaler unscales. Raises DistlearnValueError unless ``scale`` is a finite number > 0."""
    scale = check_number("scale", scale, minimum=0, strict_min=True)
    return (grad.to(torch.float32) * scale).to(torch.float16).to(torch.float32)


@dataclass(frozen=True)
class LossScaleRun:
    """A simulated fp16 run: per step the ``scales`` in force, whether the step was ``skipped`` (inf/NaN), and
    ``underflow``: the share of nonzero true gradients that were 0 in fp16 (NaN on skipped steps)."""

    scales: list[float]
    skipped: list[bool]
    underflow: list[float]

    @property
    def mean_underflow(self) -> float:
        vals = [u for u, s in zip(self.underflow, self.skipped) if not s]
        return float(np.mean(vals)) if vals else float("nan")


def simulate_loss_scaling(grads, config: ScalerConfig | None = ScalerConfig()) -> LossScaleRun:
    """Run the dynamic loss scaler on a gradient stream (e.g. :func:`gradient_stream`); ``config=None`` runs
    without loss scaling (scale 1, nothing skipped: inf gradients would go to the optimizer)."""
    scale, tracker = (1.0, 0) if config is None else (float(np.float32(config.init_scale)), 0)
    scales, skipped, underflow = [], [], []
    for grad in _checked_stream("grads", grads):
        g16 = fp16_gradients(grad, scale)
        found_inf = bool(not torch.isfinite(g16).all()) if config is not None else False
        scales.append(scale)
        skipped.append(found_inf)
        nz = grad != 0
        underflow.append(float("nan") if found_inf else float(((g16 == 0) & nz).sum() / nz.sum()))
        if config is not None:
            scale, tracker = update_scale(scale, tracker, found_inf, config)
    return LossScaleRun(scales, skipped, underflow)


@checks(inf_steps=maybe(each(flag(), max_len=MAX_STEPS)))
def run_gradscaler(grads, config: ScalerConfig = ScalerConfig(), inf_steps=None) -> list[float]:
    """Drive the real ``torch.amp.GradScaler("cpu")`` on the stream and return the scale in force at each step.

    Each step: read ``scaler.get_scale()``, give a parameter the fp16 gradients of that scale
    (:func:`fp16_gradients`) — or, where ``grads`` is None, crafted finite gradients with an inf at the steps in
    ``inf_steps`` —, then ``scaler.step(optimizer)`` (which unscales, checks for inf/NaN and skips) and
    ``scaler.update()``. GradScaler decides everything; nothing of this module's rule is used.
    """
    scaler = torch.amp.GradScaler("cpu", init_scale=config.init_scale, growth_factor=config.growth_factor,
                                  backoff_factor=config.backoff_factor, growth_interval=config.growth_interval)
    if grads is None:
        if inf_steps is None:
            raise DistlearnValueError("grads", "grads must be a list of gradient tensors, or None with inf_steps a list of "
                                               "True/False (one per step); got grads=None and inf_steps=None.",
                                      "grads 必须是梯度张量的列表；若 grads 为 None，inf_steps 必须是 True/False 列表"
                                      "（每步一个）；收到 grads=None 和 inf_steps=None。")
        inf_steps = list(inf_steps)
        grads = (torch.tensor([1.0, math.inf if inf else 1.0]) for inf in inf_steps)
        crafted = True
    else:
        crafted = False
    param = None
    out = []
    for grad in (grads if crafted else _checked_stream("grads", grads)):
        if param is None:
            param = torch.nn.Parameter(torch.zeros_like(grad, dtype=torch.float32))
            opt = torch.optim.SGD([param], lr=0.0)
            scaler.scale(torch.zeros((), requires_grad=False))   # lazily creates the scale tensor on the CPU
        scale = scaler.get_scale()
        out.append(scale)
        param.grad = grad.clone() if crafted else fp16_gradients(grad, scale)
        scaler.step(opt)
        scaler.update()
    return out

"""Block-scaled low-precision formats in numpy: MXFP8, NVFP4, and FP8 with fp32 scales (per tensor, DeepSeek-V3's
1×128 / 128×128 blocks), with their bytes per element and per recipe.

Units: values are plain numbers; ``relative_error`` is ‖x̂ − x‖_F / ‖x‖_F; bits and **bytes** per element include
the scales; bytes per layer are bytes (GB = 1e9 where printed). Every quantiser takes a 2-D array (rows ×
columns, the blocks run along the columns: one row of a weight, or one token's channels), converts it to float32
first (as torchao does with ``data_hp.to(torch.float32)``) and refuses NaN, infinity and columns that the block does
not divide (a short bilingual :class:`~distlearn.core.validate.DistlearnValueError`).

**Element formats** (:func:`encode` / :func:`decode`, one uint8 code per element, round to nearest, ties to
even, saturating at the format's largest value): E4M3 (``float8_e4m3fn``, max 448), E5M2 (max 57344) — the
tests require the codes to equal ``x.to(torch.float8_e4m3fn / float8_e5m2).view(torch.uint8)`` bit for bit —
and E2M1 (FP4: ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}, OCP Microscaling Formats (MX) v1.0 spec §5.3.3). torch 2.13 has the
dtype ``torch.float4_e2m1fn_x2`` (two codes per byte, the first in the low nibble) but no cast to it on the CPU
("copy_kernel" not implemented); its own reference encoder is ``_f32_to_floatx_unpacked`` in
``torch/testing/_internal/common_quantized.py`` (copied from torchao), which the tests compare with.

**MXFP8** (:func:`quantize_mx`; OCP MX v1.0 §5 and §6.3): blocks of 32 consecutive elements share one E8M0
scale, a bare power of two (8 exponent bits, bias 127, no sign, no mantissa; code 255 is NaN). The scale is
``X = 2**(floor(log2(amax)) − emax_elem)``, where ``emax_elem`` is the exponent of the element format's largest
normal number (E4M3: 8, E5M2: 15, E2M1: 2); elements are ``clamp(x / X, ±max_elem)`` rounded to the element format.
This is torchao's ``to_mx`` with ``ScaleCalculationMode.FLOOR`` (``torchao/prototype/mx_formats/mx_tensor.py``),
which extracts ``floor(log2(amax))`` from the float32 exponent bits and clamps the scale's exponent to
[−127, 127]. Because the largest element is *floored* to a power of two, ``amax / X`` lies in
[2**emax, 2**(emax + 1)): above E4M3's 448 = 1.75 · 2**8 the largest elements saturate (a documented property of
the FLOOR rule; torchao also offers RCEIL, which rounds the scale up instead).

**NVFP4** (:func:`quantize_nvfp4`): E2M1 elements in blocks of 16, each block with an E4M3 scale, and one fp32
scale per tensor: NVIDIA's "Introducing NVFP4" blog (2025) and torchao's ``nvfp4_quantize`` with a
``per_tensor_scale`` (``torchao/prototype/mx_formats/nvfp4_tensor.py``), in float32 step by step:
``tensor_scale = amax(x) / (448 · 6)``; ``s = clamp(amax(block) / 6 / tensor_scale, 2**−6, 448)`` cast to E4M3;
``total = tensor_scale · s``; elements ``clamp(x / total, ±6)`` rounded to E2M1. (For an all-zero tensor torchao
would divide 0 by 0; here the tensor scale is 1 and every element stays 0.)

**FP8 with fp32 scales** (:func:`quantize_fp8`): ``scale = fp8_max / amax`` (fp32, computed as torch evaluates
``448 / amax_tensor``: the reciprocal, then the product) per block, elements
``clamp(x · scale, ±fp8_max)`` cast; one block = the whole tensor is per-tensor current scaling (torchao's
tensorwise recipe, TE's current scaling), ``(1, 128)`` DeepSeek-V3's activation tiles and ``(128, 128)`` its weight
blocks (DeepSeek-V3 technical report §3.3.2). The tests require it to equal
:func:`distlearn.precision.scaling.quantize_blockwise` (torch) bit for bit.

**Bytes per element** (:func:`bits_per_element`): MXFP8 8 + 8/32 = 8.25 bits; NVFP4 4 + 8/16 = 4.5 bits plus
32 bits per tensor; DeepSeek-V3 activations 8 + 32/128 = 8.25 bits and weights 8 + 32/16384 bits.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distlearn.core.validate import (DistlearnValueError, check_array, check_choice, check_int, check_number,
                                     check_record, check_seed)
from distlearn.core.guard import read_only

# ---------------------------------------------------------------- element formats
# (exponent bits, mantissa bits, bias, largest value, emax = exponent of the largest normal, has NaN code)
ELEMENTS = read_only({
    "e4m3": (4, 3, 7, 448.0, 8),      # float8_e4m3fn: Micikevicius et al. 2022, Table 1
    "e5m2": (5, 2, 15, 57344.0, 15),  # float8_e5m2: IEEE-like, Micikevicius et al. 2022, Table 1
    "e2m1": (2, 1, 1, 6.0, 2),        # FP4: OCP MX v1.0 §5.3.3, no inf, no NaN
})
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)  # OCP MX v1.0 §5.3.3: the 8 magnitudes of E2M1, codes 0–7
E8M0_BIAS = 127    # OCP MX v1.0 §5.4.1: E8M0 = 2**(code − 127), code 255 = NaN, no zero, no sign
E4M3_TINY = 2.0 ** -6   # smallest normal E4M3 number: torchao's E4M3_EPS = torch.finfo(float8_e4m3fn).tiny
NVFP4_TENSOR_DIVISOR = 448.0 * 6.0   # torchao per_tensor_amax_to_scale: amax / (F8E4M3_MAX · F4_E2M1_MAX)


def _elem(fmt: str):
    return ELEMENTS[check_choice("fmt", fmt, tuple(ELEMENTS))]


def float32_values(x) -> np.ndarray:
    """``x`` as a finite float32 numpy array of any shape (the elements every format here starts from); raises
    DistlearnValueError naming ``x`` for values beyond float32's range (about 3.4e38) or a non-array."""
    arr = check_array("x", x)
    with np.errstate(over="ignore"):
        out = arr.astype(np.float32)
    if not np.isfinite(out).all():
        raise DistlearnValueError("x", "x has values beyond float32's range (about 3.4e38).",
                                  "x 中有超出 float32 范围（约 3.4e38）的值。")
    return out


def encode(x, fmt: str = "e4m3") -> np.ndarray:
    """uint8 codes of ``x`` (any shape, converted to float32) in element format ``fmt`` (``"e4m3"``, ``"e5m2"``,
    ``"e2m1"``): round to nearest, ties to even; magnitudes above the format's largest value saturate to it (the
    clamp every recipe applies first); the sign of −0.0 and of negatives rounded to 0 is kept (code 0x80 / 0x8).
    Same shape as ``x``. Raises DistlearnValueError for an unknown format or non-finite values."""
    e_bits, m_bits, bias, top, _ = _elem(fmt)
    v = float32_values(x).astype(np.float64)                # exact: every float32 is a float64
    sign = np.signbit(v)
    a = np.minimum(np.abs(v), top)
    emin = 1 - bias
    _, ex = np.frexp(a)                              # a = f · 2**ex, f in [0.5, 1): floor(log2 a) = ex − 1
    e = np.maximum(ex - 1, emin)
    quantum = np.ldexp(1.0, (e - m_bits).astype(np.int64))
    r = np.round(a / quantum) * quantum              # np.round: ties to even; a / quantum is exact
    r = np.minimum(r, top)
    normal = r >= 2.0 ** emin
    _, rex = np.frexp(np.where(normal, r, 1.0))
    exp_field = np.where(normal, rex - 1 + bias, 0)
    mant = np.where(normal, r / np.ldexp(1.0, (rex - 1).astype(np.int64)) - 1.0, r / 2.0 ** emin) * 2 ** m_bits
    code = (sign.astype(np.int64) << (e_bits + m_bits)) | (exp_field.astype(np.int64) << m_bits) | \
        np.rint(mant).astype(np.int64)
    return code.astype(np.uint8)


def decode(codes, fmt: str = "e4m3") -> np.ndarray:
    """float64 values of uint8 ``codes`` (any shape) in element format ``fmt``; NaN codes (E4M3 ``S.1111.111``,
    E5M2 exponent all ones with a mantissa) decode to NaN and E5M2's infinities to ±inf. Raises
    DistlearnValueError for codes beyond the format's bits."""
    e_bits, m_bits, bias, _, _ = _elem(fmt)
    c = np.asarray(codes)
    if c.dtype.kind not in "iu" or (c.size and (c.min() < 0 or c.max() >= 2 ** (1 + e_bits + m_bits))):
        raise DistlearnValueError("codes", f"codes must be integers in [0, {2 ** (1 + e_bits + m_bits) - 1}] for {fmt}.",
                                  f"{fmt} 的 codes 必须是 [0, {2 ** (1 + e_bits + m_bits) - 1}] 内的整数。")
    c = c.astype(np.int64)
    sign = np.where((c >> (e_bits + m_bits)) & 1, -1.0, 1.0)
    ef = (c >> m_bits) & (2 ** e_bits - 1)
    mf = c & (2 ** m_bits - 1)
    val = np.where(ef == 0, np.ldexp(mf / 2 ** m_bits, 1 - bias),
                   np.ldexp(1 + mf / 2 ** m_bits, (ef - bias).astype(np.int64)))
    if fmt == "e4m3":
        val = np.where((ef == 15) & (mf == 7), np.nan, val)
    elif fmt == "e5m2":
        val = np.where(ef == 31, np.where(mf == 0, np.inf, np.nan), val)
    return sign * val


def round_to(x, fmt: str = "e4m3") -> np.ndarray:
    """``decode(encode(x, fmt), fmt)``: ``x`` rounded (and saturated) to the element format, float64."""
    return decode(encode(x, fmt), fmt)


# ---------------------------------------------------------------- E8M0 (MX) scales
def mx_scale_exponent(amax, fmt: str = "e4m3") -> np.ndarray:
    """Unbiased exponent k of the MX scale ``X = 2**k`` for blocks with largest magnitude ``amax`` (array, ≥ 0):
    ``k = floor(log2(amax)) − emax_elem`` clamped to [−127, 127], OCP MX v1.0 §6.3; ``floor(log2)`` is read from the
    float32 exponent field, as torchao's ``to_mx`` (FLOOR) does, so ``amax`` = 0 or a float32 subnormal gives −127.
    int64 array of ``amax``'s shape. Raises DistlearnValueError for negative or non-finite amax."""
    a = float32_values(amax)
    if (a < 0).any():
        raise DistlearnValueError("amax", "amax must be ≥ 0 (a largest magnitude).", "amax 必须 ≥ 0（它是最大绝对值）。")
    emax = _elem(fmt)[4]
    field = (a.view(np.uint32) >> 23).astype(np.int64) & 0xFF     # biased float32 exponent
    return np.clip(field - 127 - emax, -E8M0_BIAS, E8M0_BIAS)


def mx_scale_exponent_rceil(amax, fmt: str = "e4m3") -> np.ndarray:
    """The RCEIL rule (cuBLAS block quantisation; torchao ``ScaleCalculationMode.RCEIL``): ``k = ceil(log2(amax /
    max_elem))`` with ``amax / max_elem`` in float32, clamped to [−127, 127]; the largest element then never
    saturates. Computed exactly from the float32 bits (torchao uses ``torch.log2``, which can round differently when
    the quotient lies within an ulp of a power of two). int64 array of ``amax``'s shape."""
    a = float32_values(amax)
    if (a < 0).any():
        raise DistlearnValueError("amax", "amax must be ≥ 0 (a largest magnitude).", "amax 必须 ≥ 0（它是最大绝对值）。")
    d = (a / np.float32(_elem(fmt)[3])).astype(np.float32).astype(np.float64)
    m, e = np.frexp(d)                                   # d = m · 2**e, m in [0.5, 1)
    k = np.where(m == 0.5, e - 1, e)                     # ceil(log2 d)
    return np.clip(np.where(d > 0, k, -E8M0_BIAS), -E8M0_BIAS, E8M0_BIAS).astype(np.int64)


def e8m0_code(exponent) -> np.ndarray:
    """uint8 E8M0 codes of the powers of two ``2**exponent`` (integers in [−127, 127]): ``exponent + 127``."""
    e = np.asarray(exponent)
    if e.dtype.kind not in "iu" or (e.size and (e.min() < -127 or e.max() > 127)):
        raise DistlearnValueError("exponent", "exponent must be integers in [−127, 127] (E8M0's range).",
                                  "exponent 必须是 [−127, 127] 内的整数（E8M0 的范围）。")
    return (e.astype(np.int64) + E8M0_BIAS).astype(np.uint8)


# ---------------------------------------------------------------- block-scaled tensors
@dataclass(frozen=True)
class BlockQuantized:
    """A block-scaled tensor.

    ``scheme``: ``"mxfp8"``, ``"nvfp4"`` or ``"fp8"`` (fp32 scales); ``elem``: element format; ``codes``: uint8,
    one per element, the shape of the input (rows, cols); ``scale_codes``: uint8 codes of the block scales (E8M0 for
    MX, E4M3 for NVFP4; None for fp32 scales), shape (rows / block[0], cols / block[1]); ``multiplier``: float64 of
    that shape, what each block's elements are multiplied by to dequantise (MX: 2**k; NVFP4: tensor_scale · s;
    fp8: 1 / scale); ``tensor_scale``: NVFP4's fp32 per-tensor scale (else None); ``block``: (rows, cols) of a
    block; ``scale_bits``: bits of one block scale (8 for E8M0 and E4M3, 32 for fp32); ``fp32_scale``: the fp32
    scales of the ``"fp8"`` scheme (elements are divided by them, as torch does), else None."""

    scheme: str
    elem: str
    codes: np.ndarray
    scale_codes: np.ndarray | None
    multiplier: np.ndarray
    tensor_scale: float | None
    block: tuple[int, int]
    scale_bits: int
    fp32_scale: np.ndarray | None = None

    def dequantize(self) -> np.ndarray:
        """float64 values, shape of the input: each element's value times its block's multiplier (divided by its
        fp32 scale for ``"fp8"``: cast to float32, the same as torch's fp32 division)."""
        r, c = self.block
        if self.fp32_scale is not None:
            div = np.repeat(np.repeat(self.fp32_scale.astype(np.float64), r, axis=0), c, axis=1)
            return decode(self.codes, self.elem) / div
        mult = np.repeat(np.repeat(self.multiplier, r, axis=0), c, axis=1)
        return decode(self.codes, self.elem) * mult

    @property
    def num_blocks(self) -> int:
        return int(self.multiplier.size)

    @property
    def bits_per_element(self) -> float:
        """Element bits + scale bits / block elements (+ 32 / numel for NVFP4's tensor scale)."""
        n = self.codes.size
        extra = 32 if self.tensor_scale is not None else 0
        return ELEMENTS[self.elem][0] + ELEMENTS[self.elem][1] + 1 + (self.num_blocks * self.scale_bits + extra) / n


def _blocks(x, block) -> tuple[np.ndarray, int, int]:
    """float32 2-D array reshaped to (rows/r, r, cols/c, c); validates the shape and the block."""
    arr = float32_values(x)
    if arr.ndim != 2:
        raise DistlearnValueError("x", f"x must be 2-D (rows, columns), got shape {arr.shape}.",
                                  f"x 必须是二维数组（行，列），收到形状 {arr.shape}。")
    r = check_int("block[0]", block[0], maximum=max(arr.shape[0], 1))
    c = check_int("block[1]", block[1], maximum=max(arr.shape[1], 1))
    if arr.shape[0] % r or arr.shape[1] % c:
        raise DistlearnValueError("block", f"block {r}×{c} must tile x's shape {arr.shape} exactly.",
                                  f"块大小 {r}×{c} 必须恰好铺满 x 的形状 {arr.shape}。")
    return arr.reshape(arr.shape[0] // r, r, arr.shape[1] // c, c), r, c


def quantize_mx(x, fmt: str = "e4m3", block_size: int = 32, rule: str = "floor") -> BlockQuantized:
    """MX quantisation (OCP MX v1.0; torchao ``to_mx``, FLOOR): blocks of ``block_size`` consecutive elements of
    each row (32 in the spec) share an E8M0 scale ``2**k`` (:func:`mx_scale_exponent`, or with ``rule="rceil"``
    :func:`mx_scale_exponent_rceil`); elements are
    ``clamp(x / 2**k, ±max)`` rounded to ``fmt`` (``"e4m3"`` or ``"e5m2"`` for MXFP8, ``"e2m1"`` for MXFP4).
    ``x``: 2-D (rows, cols), cols divisible by ``block_size``. Raises DistlearnValueError."""
    tiles, r, c = _blocks(x, (1, block_size))
    top = _elem(fmt)[3]
    rule = check_choice("rule", rule, ("floor", "rceil"))
    amax = np.abs(tiles).max(axis=(1, 3))
    k = mx_scale_exponent(amax, fmt) if rule == "floor" else mx_scale_exponent_rceil(amax, fmt)
    mult = np.ldexp(1.0, k)
    scaled = np.clip(tiles.astype(np.float64) / mult[:, None, :, None], -top, top)   # exact: a power of two
    codes = encode(scaled.reshape(tiles.shape[0] * r, -1), fmt)
    return BlockQuantized("mxfp8" if fmt != "e2m1" else "mxfp4", fmt, codes, e8m0_code(k), mult, None, (r, c), 8)


def nvfp4_tensor_scale(x) -> float:
    """NVFP4's fp32 per-tensor scale, ``amax(x) / (448 · 6)`` in float32 (torchao ``per_tensor_amax_to_scale``);
    1.0 for an all-zero tensor, or one so small that the scale underflows to 0 in float32 (amax below ~4e-42)."""
    a = np.float32(np.abs(float32_values(x)).max(initial=0.0))
    scale = a / np.float32(NVFP4_TENSOR_DIVISOR)
    return float(scale) if scale > 0 else 1.0


def quantize_nvfp4(x, block_size: int = 16) -> BlockQuantized:
    """NVFP4 (torchao ``nvfp4_quantize`` with a per-tensor scale; NVIDIA's NVFP4): E2M1 elements in blocks of
    ``block_size`` (16 in NVFP4) with an E4M3 scale each and one fp32 tensor scale, all in float32 as in the
    module docstring. ``x``: 2-D (rows, cols). Raises DistlearnValueError."""
    tiles, r, c = _blocks(x, (1, block_size))
    f32 = np.float32
    ts = f32(nvfp4_tensor_scale(tiles))
    block_scale = np.abs(tiles).max(axis=(1, 3)).astype(f32) / f32(6.0)
    s = np.clip(block_scale / ts, f32(E4M3_TINY), f32(448.0)).astype(f32)
    s_codes = encode(s, "e4m3")
    total = (ts * decode(s_codes, "e4m3").astype(f32)).astype(f32)
    scaled = np.clip(tiles / total[:, None, :, None], f32(-6.0), f32(6.0)).astype(f32)
    codes = encode(scaled.reshape(tiles.shape[0] * r, -1), "e2m1")
    return BlockQuantized("nvfp4", "e2m1", codes, s_codes, total.astype(np.float64), float(ts), (r, c), 8)


def quantize_fp8(x, fmt: str = "e4m3", block: tuple[int, int] | None = (1, 128)) -> BlockQuantized:
    """FP8 with an fp32 scale per ``block`` (rows × cols; None = one scale for the whole tensor):
    ``scale = fp8_max / amax`` (1 where amax is 0), elements ``clamp(x · scale, ±fp8_max)`` cast, all in float32 —
    :func:`distlearn.precision.scaling.quantize_blockwise` in numpy. ``(1, 128)`` / ``(128, 128)`` are
    DeepSeek-V3's activation / weight blocks. Raises DistlearnValueError."""
    if fmt not in ("e4m3", "e5m2"):
        check_choice("fmt", fmt, ("e4m3", "e5m2"))
    arr = float32_values(x)
    if block is None:
        if arr.ndim != 2:
            _blocks(arr, (1, 1))
        block = arr.shape
    tiles, r, c = _blocks(arr, block)
    f32 = np.float32
    top = f32(ELEMENTS[fmt][3])
    amax = np.abs(tiles).max(axis=(1, 3)).astype(f32)
    with np.errstate(divide="ignore", over="ignore"):
        # torch's ``448 / amax`` is Tensor.__rtruediv__: the fp32 reciprocal, then the product (torchao's
        # amax_to_scale and distlearn.precision.scaling write it so) / torch 的 448 / amax 是先求倒数再相乘
        recip = (f32(1.0) / np.maximum(amax, np.finfo(f32).tiny)).astype(f32)
        scale = np.where(amax > 0, recip * top, f32(1.0)).astype(f32)
    scaled = np.clip((tiles * scale[:, None, :, None]).astype(f32), -top, top)
    codes = encode(scaled.reshape(arr.shape), fmt)
    return BlockQuantized("fp8", fmt, codes, None, 1.0 / scale.astype(np.float64), None, (r, c), 32, scale)


# ---------------------------------------------------------------- schemes, errors, bytes
SCHEMES = ("fp8-tensor", "fp8-1x128", "mxfp8", "mxfp8-rceil", "nvfp4")
SCHEME_NAMES = read_only({"fp8-tensor": ("FP8 E4M3, one fp32 scale per tensor", "FP8 E4M3，每个张量一个 fp32 缩放因子"),
                "fp8-1x128": ("FP8 E4M3, fp32 scale per 1×n block (DeepSeek-V3: n = 128)",
                              "FP8 E4M3，每个 1×n 分块一个 fp32 缩放因子（DeepSeek-V3：n = 128）"),
                "mxfp8": ("MXFP8: E4M3, E8M0 scale per 1×n block (spec: n = 32)",
                          "MXFP8：E4M3，每个 1×n 分块一个 E8M0 缩放因子（规范：n = 32）"),
                "mxfp8-rceil": ("MXFP8 with the RCEIL scale rule (scale rounded up)",
                                "MXFP8，RCEIL 规则（缩放因子向上取整）"),
                "nvfp4": ("NVFP4: E2M1, E4M3 scale per 1×n block (n = 16) + fp32 per tensor",
                          "NVFP4：E2M1，每个 1×n 分块一个 E4M3 缩放因子（n = 16）+ 每个张量一个 fp32")})
SHORT_NAMES = read_only({"fp8-tensor": ("FP8, one scale per tensor", "FP8，逐张量缩放"),
               "fp8-1x128": ("FP8, fp32 scale per block", "FP8，每块一个 fp32 缩放因子"),
               "mxfp8": ("MXFP8 (FLOOR rule)", "MXFP8（FLOOR 规则）"),
               "mxfp8-rceil": ("MXFP8 (RCEIL rule)", "MXFP8（RCEIL 规则）"),
               "nvfp4": ("NVFP4", "NVFP4")})
DEFAULT_BLOCK = read_only({"fp8-tensor": None, "fp8-1x128": 128, "mxfp8": 32, "mxfp8-rceil": 32, "nvfp4": 16})


def quantize(x, scheme: str, block_size: int | None = None) -> BlockQuantized:
    """``x`` (2-D) under one of :data:`SCHEMES`, blocks of 1 × ``block_size`` (None: the scheme's own,
    :data:`DEFAULT_BLOCK`; ignored by ``"fp8-tensor"``). Raises DistlearnValueError."""
    check_choice("scheme", scheme, SCHEMES)
    n = DEFAULT_BLOCK[scheme] if block_size is None else check_int("block_size", block_size)
    if scheme == "fp8-tensor":
        return quantize_fp8(x, "e4m3", None)
    if scheme == "fp8-1x128":
        return quantize_fp8(x, "e4m3", (1, n))
    if scheme in ("mxfp8", "mxfp8-rceil"):
        return quantize_mx(x, "e4m3", n, "floor" if scheme == "mxfp8" else "rceil")
    return quantize_nvfp4(x, n)


def relative_error(x, q: BlockQuantized) -> float:
    """‖dequantised − x‖_F / ‖x‖_F (x as float32; 0 for an all-zero x); ``q`` a :class:`BlockQuantized` of x's
    shape. Raises DistlearnValueError."""
    check_record("q", q, BlockQuantized, "quantize_mx(x)")
    v = float32_values(x).astype(np.float64)
    if v.shape != q.codes.shape:
        raise DistlearnValueError("x", f"x has shape {v.shape}, q holds {q.codes.shape}.",
                                  f"x 的形状是 {v.shape}，q 的形状是 {q.codes.shape}。")
    norm = float(np.linalg.norm(v))
    return float(np.linalg.norm(q.dequantize() - v)) / norm if norm else 0.0


def outlier_tensor(rows: int = 16, cols: int = 1024, outlier: float = 1000.0, seed: int = 0) -> np.ndarray:
    """float32 (rows, cols) of standard normal values whose column 7 is set to ``outlier``: an outlier channel, as
    real activations have (every token carries it). ``rows`` in [1, 4096], ``cols`` in [8, 16384], ``outlier`` in
    [1, 1e30]. Raises DistlearnValueError."""
    rows = check_int("rows", rows, maximum=4096)
    cols = check_int("cols", cols, minimum=8, maximum=16384)
    o = check_number("outlier", outlier, minimum=1.0, maximum=1e30)
    x = np.random.default_rng(check_seed("seed", seed)).standard_normal((rows, cols)).astype(np.float32)
    x[:, 7] = o
    return x


@dataclass(frozen=True)
class ErrorPoint:
    """One point of :func:`error_vs_block_size`: ``scheme``, ``block_size`` (None for per tensor), ``rel_error``
    of the whole tensor, ``others_error``: relative error of every element but the outlier column (what sharing a
    scale with the outlier costs), ``outlier_error``: relative error of the outlier column itself, ``flushed``:
    share of the other nonzero elements that became 0, ``bits``: bits per element with scales."""

    scheme: str
    block_size: int | None
    rel_error: float
    others_error: float
    outlier_error: float
    flushed: float
    bits: float


def _err(a: np.ndarray, b: np.ndarray) -> float:
    n = float(np.linalg.norm(a))
    return float(np.linalg.norm(b - a)) / n if n else 0.0


def error_point(x, scheme: str, block_size: int | None = None, outlier_col: int = 7) -> ErrorPoint:
    """The errors of ``x`` (2-D, e.g. from :func:`outlier_tensor`, whose outlier column is 7) under ``scheme``
    with ``block_size`` (see :class:`ErrorPoint`). Raises DistlearnValueError."""
    v = float32_values(x).astype(np.float64)
    q = quantize(v, scheme, block_size)
    col = check_int("outlier_col", outlier_col, minimum=0, maximum=v.shape[1] - 1)
    d = q.dequantize()
    rest = np.ones(v.shape[1], bool)
    rest[col] = False
    others, dq = v[:, rest], d[:, rest]
    nz = others != 0
    return ErrorPoint(scheme, None if scheme == "fp8-tensor" else q.block[1], _err(v, d), _err(others, dq),
                      _err(v[:, col], d[:, col]), float((dq[nz] == 0).mean()) if nz.any() else 0.0,
                      q.bits_per_element)


def error_vs_block_size(x, schemes=SCHEMES, block_sizes=(16, 32, 64, 128, 256, 512, 1024)) -> list[ErrorPoint]:
    """:func:`error_point` for every scheme and block size that divides x's columns (``"fp8-tensor"`` once, and
    NVFP4 and MXFP8 at any block size, to show what the block size alone does). Raises DistlearnValueError."""
    v = float32_values(x)
    out = []
    for s in schemes:
        check_choice("scheme", s, SCHEMES)
        if s == "fp8-tensor":
            out.append(error_point(v, s))
            continue
        for n in block_sizes:
            if v.ndim == 2 and v.shape[1] % check_int("block_size", n) == 0:
                out.append(error_point(v, s, n))
    return out


def bits_per_element(scheme: str, block_size: int | None = None, numel: int | None = None) -> float:
    """Bits per element of ``scheme`` with its scales, for a tensor of ``numel`` elements (None: the limit of a
    large tensor, where per-tensor scales cost 0): fp8-tensor 8 + 32/numel; fp8-1x128 8 + 32/n; mxfp8 8 + 8/n;
    nvfp4 4 + 8/n + 32/numel; plus ``"bf16"`` 16 and ``"fp8-128x128"`` 8 + 32/16384 (DeepSeek-V3's weights).
    Raises DistlearnValueError."""
    check_choice("scheme", scheme, SCHEMES + ("bf16", "fp8-128x128"))
    per_tensor = 0.0 if numel is None else 32 / check_int("numel", numel, whole_float=True)
    if scheme == "bf16":
        return 16.0
    if scheme == "fp8-128x128":
        return 8 + 32 / (128 * 128)
    n = DEFAULT_BLOCK[scheme] if block_size is None else check_int("block_size", block_size)
    return {"fp8-tensor": 8 + per_tensor, "fp8-1x128": 8 + 32 / (n or 1), "mxfp8": 8 + 8 / (n or 1),
            "mxfp8-rceil": 8 + 8 / (n or 1),
            "nvfp4": 4 + 8 / (n or 1) + per_tensor}[scheme]


# ---------------------------------------------------------------- recipes: where each format goes
@dataclass(frozen=True)
class FormatRecipe:
    """A low-precision training recipe: the element format of the forward GEMM inputs and of the gradients, the
    scheme (with its block) of activations and weights, whether the FSDP2 all-gather carries the low-precision
    weights, and its source."""

    key: str
    name_en: str
    name_zh: str
    forward: str
    gradients: str
    activations: str
    weights: str
    fp8_all_gather: bool
    source: str


FORMAT_RECIPES = (
    FormatRecipe("bf16", "bf16 (baseline)", "bf16（基线）", "bf16", "bf16", "bf16", "bf16", False,
                 "16-bit mixed precision"),
    FormatRecipe("te-hybrid", "Transformer Engine, HYBRID, per-tensor scales", "Transformer Engine，HYBRID，逐张量缩放",
                 "e4m3", "e5m2", "fp8-tensor", "fp8-tensor", False,
                 "TE transformer_engine/common/recipe/__init__.py, Format.HYBRID: 'FP8 tensors in the forward pass "
                 "are in e4m3 format, FP8 tensors in the backward pass are in e5m2 format'"),
    FormatRecipe("te-block", "Transformer Engine Float8BlockScaling", "Transformer Engine 分块缩放（Float8BlockScaling）",
                 "e4m3", "e4m3", "fp8-1x128", "fp8-128x128", False,
                 "TE recipe Float8BlockScaling: E4M3 by default, 1-D (1x128) blocks for activations and gradients, "
                 "2-D (128x128) for weights; 'The scaling factors are float32 containers. They will by default be "
                 "constrained to powers of 2.'"),
    FormatRecipe("torchao-float8", "torchao float8 on FSDP2 (tensorwise)", "torchao float8 + FSDP2（逐张量）",
                 "e4m3", "e4m3", "fp8-tensor", "fp8-tensor", True,
                 "torchtitan docs/float8.md: 'perform float8 all-gather to save bandwidth' "
                 "(enable_fsdp_float8_all_gather)"),
    FormatRecipe("deepseek-v3", "DeepSeek-V3: E4M3 everywhere, fine-grained", "DeepSeek-V3：全部 E4M3，细粒度缩放",
                 "e4m3", "e4m3", "fp8-1x128", "fp8-128x128", False,
                 "DeepSeek-V3 report §3.3.2: 'we adopt the E4M3 format on all tensors'; 1x128 activation tiles, "
                 "128x128 weight blocks; partial sums promoted to FP32 every N_C = 128 elements"),
    FormatRecipe("mxfp8", "MXFP8 (Blackwell; torchao / TE MXFP8BlockScaling)", "MXFP8（Blackwell；torchao / TE）",
                 "e4m3", "e4m3", "mxfp8", "mxfp8", False,
                 "OCP MX v1.0; TE MXFP8BlockScaling (E4M3 by default, 1x32 blocks, E8M0 scales)"),
    FormatRecipe("nvfp4", "NVFP4 (Blackwell)", "NVFP4（Blackwell）", "e2m1", "e2m1", "nvfp4", "nvfp4", False,
                 "NVIDIA 'Introducing NVFP4' (2025); torchao nvfp4_tensor.py: 16-element blocks, E4M3 block "
                 "scale, fp32 tensor scale"),
)


def get_format_recipe(key: str) -> FormatRecipe:
    """The recipe called ``key`` from :data:`FORMAT_RECIPES`. Raises DistlearnValueError."""
    keys = tuple(r.key for r in FORMAT_RECIPES)
    return FORMAT_RECIPES[keys.index(check_choice("recipe", key, keys))]


@dataclass(frozen=True)
class LayerBytes:
    """Bytes of one transformer layer under a recipe: ``weights`` (the low-precision weight copy the GEMMs read,
    scales included), ``activations`` (the activation operands of the layer's GEMMs, the linear layers' inputs, in
    the recipe's format, scales included; whether a recipe also *keeps* them for backward is its own choice, see
    :func:`distlearn.precision.fp8_recipes.fp8_activation_table`: torchao keeps bf16), ``all_gather`` (what one FSDP2 all-gather of the layer's weights puts on the wire: the
    parameters' dtype, bf16 here, unless the recipe all-gathers FP8)."""

    recipe: str
    weights: float
    activations: float
    all_gather: float


def layer_bytes(recipe: str, *, hidden_size: int = 4096, ffn_hidden_size: int = 14336, num_heads: int = 32,
                num_kv_heads: int = 8, tokens: int = 8192) -> LayerBytes:
    """:class:`LayerBytes` of one Llama layer (defaults: Llama 3 8B at 8192 tokens). Weights: the four attention
    projections ``h·(h + 2·h·k/a) + h·h`` and the SwiGLU MLP ``3·h·f`` (norms left out); linear inputs per
    token: h (QKV), h (output projection), h (gate and up share one input), f (down projection). Per-tensor
    scales count 4 bytes per tensor (7 weight tensors, 4 activation tensors). Raises DistlearnValueError."""
    r = get_format_recipe(recipe)
    h = check_int("hidden_size", hidden_size, maximum=2 ** 17)
    f = check_int("ffn_hidden_size", ffn_hidden_size, maximum=2 ** 19)
    a = check_int("num_heads", num_heads, maximum=h)
    k = check_int("num_kv_heads", num_kv_heads, maximum=a)
    t = check_int("tokens", tokens, maximum=2 ** 24)
    if h % a or a % k:
        raise DistlearnValueError("num_heads", "num_heads must divide hidden_size and num_kv_heads num_heads.",
                                  "num_heads 必须整除 hidden_size，num_kv_heads 必须整除 num_heads。")
    shapes_w = [(h, h), (h * k // a, h), (h * k // a, h), (h, h), (f, h), (f, h), (h, f)]
    shapes_a = [(t, h), (t, h), (t, h), (t, f)]

    def size(scheme: str, shapes) -> float:
        if scheme == "bf16":
            return sum(m * n for m, n in shapes) * 2.0
        if scheme == "fp8-tensor":
            return sum(m * n + 4 for m, n in shapes)
        if scheme == "fp8-128x128":
            return sum(m * n + 4 * math.ceil(m / 128) * math.ceil(n / 128) for m, n in shapes)
        return sum(m * n * bits_per_element(scheme, numel=m * n) / 8 for m, n in shapes)

    params = sum(m * n for m, n in shapes_w)
    gather = size("fp8-tensor", shapes_w) if r.fp8_all_gather else params * 2.0
    return LayerBytes(r.key, size(r.weights, shapes_w), size(r.activations, shapes_a), gather)


# ---------------------------------------------------------------- accumulation: DeepSeek-V3's FP32 promotion
def accumulate(products, mantissa_bits: int = 13, promote_every: int | None = None,
               rounding: str = "nearest") -> np.ndarray:
    """Sums of ``products`` (2-D: outputs × K terms) along K, with an accumulator that keeps ``mantissa_bits``
    fraction bits after every addition, rounding to nearest even (``rounding="nearest"``) or towards zero
    (``"truncate"``). DeepSeek-V3's report (§3.3.2, "Increasing Accumulation Precision") measured that the FP8 GEMMs
    of H800 Tensor Cores keep "around 14 bits", i.e. about 13 fraction bits. On an H200 (``torch._scaled_mm`` with
    ``use_fast_accum=True``, :mod:`distlearn.precision.measured`) the truncating model with 13 fraction bits gives
    chapter 08's 64 sums within 0.1 % of the hardware's; round-to-nearest is 7 % off. With ``promote_every = N_C``
    the partial sum is added to an fp64 total every N_C terms and restarted, as DeepSeek does with N_C = 128 on
    CUDA cores in FP32. float64 array (outputs,). ``mantissa_bits`` in [1, 52]. Raises DistlearnValueError."""
    p = check_array("products", products, ndim=2)
    m = check_int("mantissa_bits", mantissa_bits, maximum=52)
    every = p.shape[1] if promote_every is None else check_int("promote_every", promote_every, maximum=2 ** 24)
    cut = {"nearest": np.round, "truncate": np.trunc}[check_choice("rounding", rounding, ("nearest", "truncate"))]

    def keep(v):
        f, e = np.frexp(v)                 # v = f · 2**e, |f| in [0.5, 1)
        return np.ldexp(cut(np.ldexp(f, m + 1)), e - m - 1)

    total = np.zeros(p.shape[0])
    part = np.zeros(p.shape[0])
    for k in range(p.shape[1]):
        part = keep(part + p[:, k])
        if (k + 1) % every == 0:
            total, part = total + part, np.zeros(p.shape[0])
    return total + part

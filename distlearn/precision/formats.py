"""Binary floating-point formats (fp32, tf32, bf16, fp16, FP8 E4M3 / E5M2) defined by their bits, without torch.

:mod:`distlearn.precision.scaling` explains the formulas (its module docstring, "Formats") and re-exports everything here;
this module holds only the definitions, so that code needing a format's bytes (the FP8 recipes, the planner) does
not import torch. Each property is computed from the definition: bias ``2**(e-1) - 1``, spacing near 1.0
``2**-m``, smallest normal ``2**(1 - bias)``, smallest subnormal ``2**(1 - bias - m)``, the largest value
``2**Emax · (2 - 2**-m)`` for IEEE-like formats and 448 for E4M3fn (Micikevicius et al. 2022, §2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from distlearn.core.validate import DistlearnValueError, check_bool, check_choice, check_int, check_text, checks, record
from distlearn.core.guard import read_only

# ---------------------------------------------------------------- number formats
@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: 1 sign bit, ``exponent_bits``, ``mantissa_bits`` (fraction bits).

    ``finite_only``: the E4M3 "fn" convention (no infinities, one NaN pattern per sign). ``storage_bits``: bits
    the format occupies in memory (tf32 lives in 32-bit registers). ``torch_dtype``: the name of the torch dtype,
    or ``None`` (tf32). All properties are computed from the definition (see the module docstring).
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    finite_only: bool = False
    storage_bits: int | None = None
    torch_dtype: str | None = None
    source: str = ""

    def __post_init__(self):
        """``name`` a string; ``exponent_bits`` in [2, 11] and ``mantissa_bits`` in [1, 52] (fp64's are 11 and 52;
        fewer than 2 exponent bits or no mantissa bit leave no finite numbers to describe in the IEEE-like and the
        finite_only convention alike); ``finite_only`` a bool; ``storage_bits`` None or in [bits, 64];
        ``torch_dtype`` None or a string; ``source`` a string. Raises DistlearnValueError naming the field."""
        check_text("name", self.name)
        check_int("exponent_bits", self.exponent_bits, minimum=2, maximum=11)
        check_int("mantissa_bits", self.mantissa_bits, minimum=1, maximum=52)
        check_bool("finite_only", self.finite_only)
        if self.storage_bits is not None:
            check_int("storage_bits", self.storage_bits, minimum=self.bits, maximum=64)
        if self.torch_dtype is not None:
            check_text("torch_dtype", self.torch_dtype)
        check_text("source", self.source)

    @property
    def bits(self) -> int:
        """Significant bits of the encoding: 1 + exponent_bits + mantissa_bits (tf32: 19)."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def nbytes(self) -> float:
        """Bytes one value takes in memory: ``storage_bits / 8`` (tf32: 4; a 12-bit format: 1.5)."""
        return (self.storage_bits or self.bits) / 8

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def max_exponent(self) -> int:
        """Unbiased exponent of the largest finite number."""
        top = 2 ** self.exponent_bits - (1 if self.finite_only else 2)
        return top - self.bias

    @property
    def max(self) -> float:
        """Largest finite value: ``2**Emax · (1 + largest mantissa / 2**m)``; 448 for E4M3fn."""
        m = self.mantissa_bits
        largest_mantissa = 2 ** m - (2 if self.finite_only else 1)
        return math.ldexp(1 + largest_mantissa / 2 ** m, self.max_exponent)

    @property
    def eps(self) -> float:
        """Spacing of representable numbers just above 1.0: ``2**-m``."""
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias)

    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, 1 - self.bias - self.mantissa_bits)

    def dtype(self):
        """The torch dtype (``torch.dtype``), or None when torch has none (tf32). Imports torch."""
        if not self.torch_dtype:
            return None
        import torch

        return getattr(torch, self.torch_dtype)


_IEEE = "IEEE 754-2008 §3.6 (binary32 / binary16)"
FORMATS: dict[str, FloatFormat] = read_only({f.name: f for f in [
    FloatFormat("fp32", 8, 23, torch_dtype="float32", source=_IEEE),
    FloatFormat("tf32", 8, 10, storage_bits=32, source="NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020): "
                "TF32 has the 8-bit exponent of FP32 and the 10-bit mantissa of FP16; no torch dtype"),
    FloatFormat("bf16", 8, 7, torch_dtype="bfloat16", source="Google bfloat16: the top 16 bits of binary32"),
    FloatFormat("fp16", 5, 10, torch_dtype="float16", source=_IEEE),
    FloatFormat("e4m3", 4, 3, finite_only=True, torch_dtype="float8_e4m3fn",
                source="Micikevicius et al. 2022, FP8 Formats for Deep Learning, Table 1: E4M3, no infinities, "
                       "max 448"),
    FloatFormat("e5m2", 5, 2, torch_dtype="float8_e5m2",
                source="Micikevicius et al. 2022, Table 1: E5M2 follows IEEE 754 conventions, max 57344"),
]})
FP8_FORMATS = ("e4m3", "e5m2")


FORMAT = record(FloatFormat, "get_format('e4m3')")


def get_format(name: str) -> FloatFormat:
    """The format called ``name`` (one of :data:`FORMATS`). Raises DistlearnValueError."""
    return FORMATS[check_choice("fmt", name, tuple(FORMATS))]


@checks(fmt=FORMAT)
def reference_decode(fmt: FloatFormat, code: int) -> float:
    """The value of bit pattern ``code`` (an int of ``fmt.bits`` bits) in format ``fmt``, written out.

    Sign, exponent field, mantissa field; exponent 0 is subnormal; the all-ones exponent is inf/NaN for IEEE-like
    formats, and for E4M3fn only the all-ones mantissa is NaN. The tests compare it with torch's own decoding of
    every fp8 and fp16/bf16 bit pattern. Raises DistlearnValueError unless ``code`` is an integer in
    [0, 2**fmt.bits − 1].
    """
    return _decode(fmt, check_int("code", code, minimum=0, maximum=2 ** fmt.bits - 1))


def _decode(fmt: FloatFormat, code: int) -> float:
    """:func:`reference_decode` without the check (``decode_all`` walks every valid code)."""
    e, m = fmt.exponent_bits, fmt.mantissa_bits
    sign = -1.0 if (code >> (e + m)) & 1 else 1.0
    exponent = (code >> m) & (2 ** e - 1)
    mantissa = code & (2 ** m - 1)
    if exponent == 2 ** e - 1:
        if not fmt.finite_only:
            return sign * math.inf if mantissa == 0 else math.nan
        if mantissa == 2 ** m - 1:
            return math.nan
    if exponent == 0:
        return sign * math.ldexp(mantissa / 2 ** m, 1 - fmt.bias)
    return sign * math.ldexp(1 + mantissa / 2 ** m, exponent - fmt.bias)


@checks(fmt=FORMAT)
def decode_all(fmt: FloatFormat) -> list[float]:
    """:func:`reference_decode` of every bit pattern of an 8- or 16-bit format (index = code)."""
    if fmt.bits > 16:
        raise DistlearnValueError("fmt", f"decode_all enumerates 8- and 16-bit formats, not {fmt.name}.",
                                  f"decode_all 只枚举 8 位和 16 位格式，不能用于 {fmt.name}。")
    return [_decode(fmt, c) for c in range(2 ** fmt.bits)]

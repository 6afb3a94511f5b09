"""What the planner assumes, set beside what an NVIDIA H200 did (issue 38): GEMM speed over shape, and the bytes one
Llama block keeps for backward with FlashAttention.

The numbers come from ``python3 -m authoring.gpu_checks --only planner_measure`` (its ``planner_measure`` step),
stored in ``h200_gemm_blocks.json`` beside this file, because the course runs without a GPU. The stored file records
its own date, GPU, torch and CUDA versions (:class:`H200Run`). Two comparisons:

- **GEMMs.** Each linear layer of a Llama 3 8B / 70B / 405B layer at tensor parallelism 8, with m = 256 … 16384
  tokens per GPU, plus square products, timed in bf16 (``torch.mm``) and FP8 E4M3 (``torch._scaled_mm``: one scale
  per tensor, per row, or DeepSeek-V3's 1 × 128 / 128 × 128 blocks). The planner's time for the same shape is
  :func:`distlearn.planning.kernels.gemm_seconds`: the roofline ``max(2mnk / (peak × GEMM_CEILING),
  bytes / hbm_bw)``, with the H200 preset's datasheet peak (989 TFLOP/s bf16, 1,979 FP8, dense) and the share
  the planner takes for the kind (:func:`ceiling`): 80.1 % in bf16 (:data:`~distlearn.planning.kernels.GEMM_CEILING`),
  73.4 % in FP8 with one scale per tensor or row (:data:`~distlearn.planning.kernels.FP8_GEMM_CEILING`, Bekman's
  H200 measurement) and 72.1 % for 128-blocks (:data:`~distlearn.planning.kernels.FP8_BLOCK_CEILING`, DeepGEMM). :func:`gemm_table` gives the ratio
  measured / predicted per shape; :func:`layer_curve` the TFLOP/s of a whole layer's four GEMMs over m.
- **Saved bytes.** :class:`distlearn.activation_memory.measure.LlamaBlock` in bf16 on CUDA with PyTorch's
  FlashAttention kernel forced, counted with saved-tensor hooks (one count per storage) and by the allocator.
  The planner's number is :meth:`distlearn.planning.setting.Setting.act`, the formula of
  :func:`distlearn.activation_memory.formulas.layer_activation_table`. :func:`block_comparison` matches the saved
  storages to the formula's tensors one by one and names each storage left over.

What the GEMM table says about the planner's flat ceiling (issue 38, tried and not adopted): at m ≥ 2048 tokens
the model layers' GEMMs reach 0.51–0.82 of the bf16 peak (most 0.64–0.78), below the flat 80.1 % for almost every
shape, but about equally so for the small runs and the calibrators: Megatron-Core 1.7B's shapes (m 4096, k 2048)
sit near 0.70, the Llama 3 405B calibrators' own shapes (m 8192, TP 8) at 0.64–0.73. A shape-aware Hopper ceiling
interpolated from this table (nearest shapes, m ≥ 1024) therefore moves every H100 row alike: END_TO_END refits
from 0.79 to 0.82 (tried when it stood at 0.79), the A100 rows (which keep their best-shape ceiling) rise, and the
out-of-sample score does not improve (81 % within ±10 % before and after, median 5.4 % → 7.1 %, worst 22.8 % → 18.0 %, BLOOM and two MegaScale
rows leave ±10 % while mcore-1.7b only falls from 1.23 to 1.18). The flat ceiling stays; END_TO_END absorbs the
common gap, and the small rows' miss is not a GEMM-shape effect (see KNOWN_MISSES).

Units: seconds, bytes, FLOP/s (TFLOP/s = 1e12 FLOP/s).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from distlearn.core.validate import DistlearnValueError, check_choice, check_int
from distlearn.planning import kernels
from distlearn.planning.setting import make_setting

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "h200_gemm_blocks.json")
"""The stored measurement (JSON, the ``planner_measure`` step's result as it wrote it)."""

GPU_PRESET = "h200"
"""The GPU preset of :mod:`distlearn.core.hardware` the planner uses for this machine."""
GEMM_KINDS = ("bf16", "fp8_tensorwise", "fp8_tensorwise_fast", "fp8_rowwise_fast", "fp8_blockwise")
"""bf16; FP8 with one scale per tensor (cuBLAS's default accumulation, and fast accumulation), one per row of the
activations and column of the weights (fast accumulation), DeepSeek-V3's blocks (1 × 128 and 128 × 128)."""
MODELS = ("llama3-8b", "llama3-70b", "llama3.1-405b")
"""The presets whose linear layers were timed (tensor parallelism 8)."""
KERNEL_STATE_MAX_BYTES = 64
"""A saved storage this small is the attention kernel's random-number state (seed and offset), not an activation."""


@dataclass(frozen=True)
class GemmTiming:
    """One timed product (m × k)·(k × n) of ``kind``: median ``seconds`` per call, or the ``error`` it raised
    (``seconds`` None). ``model`` and ``name``: the planner's layer and GEMM, ``"square"`` for m = n = k."""
    model: str
    name: str
    m: int
    n: int
    k: int
    kind: str
    seconds: float | None
    error: str | None = None

    @property
    def tflops(self) -> float:
        return 2 * self.m * self.n * self.k / self.seconds / 1e12


@dataclass(frozen=True)
class BlockRun:
    """One measured Llama block: its shape (``hidden_size``, ``num_heads``, ``num_kv_heads``, ``ffn_hidden_size``,
    ``seq_len``, ``micro_batch_size``), how it ran (``norm_impl``, ``swiglu``, ``recompute``, ``backend``,
    ``attention_kernels``: the autograd nodes of the attention that ran), ``saved_bytes`` over distinct storages,
    ``storages``: ((bytes, dtype, shape), ...) largest first, ``allocated_bytes``: the allocator's growth across
    the forward (None on the CPU), ``input_bytes`` and ``output_bytes`` of the block, the forward and backward
    seconds where timed, ``error`` if it failed."""
    name: str
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    ffn_hidden_size: int
    seq_len: int
    micro_batch_size: int
    norm_impl: str
    swiglu: str
    recompute: str
    backend: str
    saved_bytes: int | None
    storages: tuple
    allocated_bytes: int | None
    input_bytes: int | None
    output_bytes: int | None
    attention_kernels: tuple
    forward_seconds: float | None = None
    backward_seconds: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class H200Run:
    """The stored run: where and when (``gpu``, ``torch``, ``cuda``, ``date``), ``gemms`` (:class:`GemmTiming`
    of the planner's shapes), ``squares`` (m = n = k) and ``blocks`` (:class:`BlockRun`), ``timing``: how the
    GEMMs were timed."""
    gpu: str
    torch: str
    cuda: str
    date: str
    timing: str
    gemms: tuple
    squares: tuple
    blocks: tuple


def _timings(row: dict, model: str, name: str) -> list:
    out = []
    for kind in GEMM_KINDS:
        cell = row.get(kind)
        if cell is None:
            continue
        seconds = cell.get("seconds")
        out.append(GemmTiming(model, name, int(row["m"]), int(row["n"]), int(row["k"]), kind,
                              None if seconds is None else float(seconds), cell.get("error")))
    return out


def _block(d: dict) -> BlockRun:
    return BlockRun(
        d["name"], d.get("hidden_size", 0), d.get("num_heads", 0), d.get("num_kv_heads", 0),
        d.get("ffn_hidden_size", 0), d.get("seq_len", 0), d.get("micro_batch_size", 0), d.get("norm_impl", ""),
        d.get("swiglu", ""), d.get("recompute", ""), d.get("backend", ""), d.get("saved_bytes"),
        tuple((int(n), str(t), tuple(s)) for n, t, s in d.get("storages", [])), d.get("allocated_bytes"),
        d.get("input_bytes"), d.get("output_bytes"), tuple(d.get("attention_kernels", ())),
        d.get("forward_seconds"), d.get("backward_seconds"), d.get("error"))


def _load(path: str) -> H200Run:
    """:class:`H200Run` from the JSON at ``path`` (the step's own format)."""
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    gemms = tuple(t for row in d.get("gemm", []) for t in _timings(row, row["model"], row["name"]))
    squares = tuple(t for row in d.get("square", []) for t in _timings(row, "square", "square"))
    return H200Run(str(d.get("gpu")), str(d.get("torch")), str(d.get("cuda")), str(d.get("date")),
                   str(d.get("timing", "")), gemms, squares, tuple(_block(b) for b in d.get("blocks", [])))


_RUN: dict = {}


def stored_run() -> H200Run:
    """The stored H200 run (read once from :data:`PATH`)."""
    if PATH not in _RUN:
        _RUN.clear()
        _RUN[PATH] = _load(PATH)
    return _RUN[PATH]


# ---------------------------------------------------------------- GEMMs: measured against the roofline
def _gpu():
    from distlearn.core.hardware import get_gpu

    return get_gpu(GPU_PRESET)


def _peak_and_bytes(kind: str) -> tuple[float, int]:
    """The peak the planner times ``kind`` with (FLOP/s, dense datasheet) and its input bytes per value."""
    gpu = _gpu()
    return (gpu.peak_flops, 2) if kind == "bf16" else (gpu.peak_fp8_flops, 1)


def peak(kind: str = "bf16") -> float:
    """The H200 preset's dense datasheet peak the planner times ``kind`` with, FLOP/s (bf16, or FP8 for every FP8
    kind). Raises DistlearnValueError for an unknown kind."""
    return _peak_and_bytes(check_choice("kind", kind, GEMM_KINDS))[0]


def predicted_seconds(m: int, n: int, k: int, kind: str = "bf16") -> float:
    """The planner's seconds for one (m × k)·(k × n) product of ``kind`` on the H200:
    :func:`~distlearn.planning.kernels.gemm_seconds` with the preset's peak (bf16, or FP8 for every FP8 kind),
    the share of the peak :func:`ceiling` gives for ``kind``, its HBM bandwidth, inputs of 2 (bf16) or 1
    (FP8) bytes and a bf16 output. Raises DistlearnValueError unless m, n, k are integers in [1, 2**20] and
    ``kind`` one of :data:`GEMM_KINDS`."""
    m, n, k = (check_int(name, v, minimum=1, maximum=1 << 20) for name, v in (("m", m), ("n", n), ("k", k)))
    check_choice("kind", kind, GEMM_KINDS)
    return _predicted(m, n, k, kind)


def ceiling(kind: str = "bf16") -> float:
    """The share of the peak the planner times ``kind`` with on the H200: :data:`~distlearn.planning.kernels.GEMM_CEILING`
    for bf16, :data:`~distlearn.planning.kernels.FP8_BLOCK_CEILING` for DeepSeek-V3's 128-blocks and
    :data:`~distlearn.planning.kernels.FP8_GEMM_CEILING` for the FP8 kinds with one scale per tensor or row (the
    planner has no row-wise recipe: the per-tensor share is the nearest). Raises DistlearnValueError for an unknown
    kind."""
    return _ceiling(check_choice("kind", kind, GEMM_KINDS))


def _ceiling(kind: str) -> float:
    family = kernels.gpu_family(_gpu())
    if kind == "bf16":
        return kernels.GEMM_CEILING[family]
    if kind == "fp8_blockwise":
        return kernels.FP8_BLOCK_CEILING[family]
    return kernels.FP8_GEMM_CEILING[family]


def _predicted(m: int, n: int, k: int, kind: str) -> float:
    gpu = _gpu()
    peak, in_bytes = _peak_and_bytes(kind)
    return kernels.gemm_seconds(kernels.Gemm("gemm", m, n, k), peak, _ceiling(kind), gpu.hbm_bw, in_bytes, 2)


@dataclass(frozen=True)
class GemmComparison:
    """One shape: the measured and the planner's seconds and TFLOP/s, ``ratio`` = predicted / measured seconds
    (1 = the planner is right, < 1 = the GPU was slower than the planner assumes), ``share`` = measured FLOP/s over
    the datasheet peak of ``kind``."""
    timing: GemmTiming
    predicted_seconds: float
    peak: float

    @property
    def ratio(self) -> float:
        return self.predicted_seconds / self.timing.seconds

    @property
    def share(self) -> float:
        return self.timing.tflops * 1e12 / self.peak

    @property
    def predicted_tflops(self) -> float:
        t = self.timing
        return 2 * t.m * t.n * t.k / self.predicted_seconds / 1e12


def gemm_table(kind: str = "bf16", square: bool = False) -> tuple:
    """:class:`GemmComparison` of every stored shape of ``kind`` that ran (the planner's shapes, or with ``square``
    the m = n = k sweep). Raises DistlearnValueError for an unknown ``kind`` or a non-bool ``square``."""
    from distlearn.core.validate import check_bool

    check_choice("kind", kind, GEMM_KINDS)
    run = stored_run()
    rows = run.squares if check_bool("square", square) else run.gemms
    peak = _peak_and_bytes(kind)[0]
    return tuple(GemmComparison(t, _predicted(t.m, t.n, t.k, kind), peak)
                 for t in rows if t.kind == kind and t.seconds is not None)


def failed_kinds() -> dict:
    """``{kind: first error}`` for each kind that failed on some stored shape (what this torch and GPU could not
    run)."""
    out: dict = {}
    run = stored_run()
    for t in run.gemms + run.squares:
        if t.seconds is None and t.kind not in out:
            out[t.kind] = t.error or "not run"
    return out


@dataclass(frozen=True)
class CurvePoint:
    """One m of :func:`layer_curve`: the layer's four GEMMs together, measured and as the planner times them
    (TFLOP/s = their FLOPs over their summed seconds)."""
    m: int
    measured_tflops: float
    predicted_tflops: float

    @property
    def ratio(self) -> float:
        return self.measured_tflops / self.predicted_tflops


def layer_curve(model: str = "llama3-70b", kind: str = "bf16") -> tuple:
    """:class:`CurvePoint` per stored m for ``model``'s linear layers (tensor parallelism 8), only where all four
    GEMMs ran. Raises DistlearnValueError for a model or kind not measured."""
    check_choice("model", model, MODELS)
    by_m: dict = {}
    for c in gemm_table(kind):
        if c.timing.model == model:
            by_m.setdefault(c.timing.m, []).append(c)
    out = []
    for m in sorted(by_m):
        rows = by_m[m]
        if len(rows) < 4:
            continue
        flops = sum(2 * r.timing.m * r.timing.n * r.timing.k for r in rows)
        out.append(CurvePoint(m, flops / sum(r.timing.seconds for r in rows) / 1e12,
                              flops / sum(r.predicted_seconds for r in rows) / 1e12))
    return tuple(out)


def best_share(kind: str = "bf16") -> GemmComparison:
    """The stored shape (planner's or square) of ``kind`` that reached the largest share of the peak: what the
    planner's :data:`~distlearn.planning.kernels.GEMM_CEILING` stands for (the best a single large matmul does).
    Raises DistlearnValueError for an unknown kind, or one with no measurement."""
    rows = gemm_table(kind) + gemm_table(kind, square=True)
    if not rows:
        raise DistlearnValueError("kind", f"no stored measurement of {kind!r}.", f"没有 {kind!r} 的测量数据。")
    return max(rows, key=lambda c: c.share)


# ---------------------------------------------------------------- saved bytes: measured against the formula
@dataclass(frozen=True)
class SavedTensor:
    """One row of :func:`block_comparison`: a formula tensor (``term``, its ``formula_bytes``) and the saved
    storage matched to it (``measured_bytes``, ``dtype``, ``shape``), or a storage beyond the formula
    (``term`` names what it is; ``formula_bytes`` 0), or a formula tensor nothing matched (``measured_bytes`` 0)."""
    term: str
    formula_bytes: int
    measured_bytes: int
    dtype: str = ""
    shape: tuple = ()


@dataclass(frozen=True)
class BlockComparison:
    """A stored block against the planner. ``planner_bytes``: :meth:`~distlearn.planning.setting.Setting.act` of
    the block's Llama preset (None for a shape that is no preset), ``formula_bytes``: the formula's sum (the same
    number), ``measured_bytes``: the saved storages; ``rows``: :class:`SavedTensor` per tensor; ``rstd_bytes``:
    the RMSNorms' fp32 1/rms per row (the formula leaves them out; :func:`~distlearn.activation_memory.measure.
    extra_terms` counts them), ``kernel_state_bytes``: the attention kernel's random-number state,
    ``unexplained_bytes``: storages beyond the formula that are neither, ``missing_bytes``: formula tensors no
    storage matched; ``allocated_bytes``: the allocator's growth, ``expected_allocated_bytes`` = measured − the
    block's input (saved, but allocated before) + its output."""
    run: BlockRun
    planner_bytes: int | None
    formula_bytes: int
    rows: tuple

    @property
    def measured_bytes(self) -> int:
        return self.run.saved_bytes

    def _beyond(self, term: str) -> int:
        return sum(r.measured_bytes for r in self.rows if r.formula_bytes == 0 and r.term == term)

    @property
    def rstd_bytes(self) -> int:
        return self._beyond("rmsnorm 1/rms (fp32)")

    @property
    def kernel_state_bytes(self) -> int:
        return self._beyond("attention kernel RNG state")

    @property
    def unexplained_bytes(self) -> int:
        return self._beyond("unexplained")

    @property
    def missing_bytes(self) -> int:
        return sum(r.formula_bytes for r in self.rows if r.measured_bytes == 0)

    @property
    def attention_kernel(self) -> str:
        """Which SDPA kernel ran, read from what it saved (PyTorch's operator schemas): ``"flash"`` keeps a
        log-sum-exp (b, a, s) and its outputs ``rng_state`` uint64 (2,) and ``unused`` uint64 (); ``"cudnn"`` a
        log-sum-exp (b, a, s, 1) (and ``philox_seed``, ``philox_offset``); ``"efficient"`` a log-sum-exp
        (b, a, s rounded up to 32) and two int64 scalars; ``"recomputed"`` when no log-sum-exp is kept (the core
        runs under selective recomputation); ``"unknown"`` otherwise."""
        lse = next((r for r in self.rows if r.term == "softmax_lse" and r.measured_bytes), None)
        state = sorted((r.dtype, tuple(r.shape)) for r in self.rows if r.term == "attention kernel RNG state")
        if lse is None:
            return "recomputed"
        if len(lse.shape) == 4 and lse.shape[-1] == 1:
            return "cudnn"
        if state == [("uint64", ()), ("uint64", (2,))]:
            return "flash"
        if state == [("int64", ()), ("int64", ())]:
            return "efficient"
        return "unknown"

    @property
    def allocator_rounding_bytes(self) -> int:
        """What PyTorch's CUDA caching allocator adds to the saved storages: each is rounded up to a multiple of
        512 bytes (its smallest block), so a 24-byte RNG state takes 1,024."""
        return sum(-(-n // 512) * 512 - n for n, _, _ in self.run.storages)

    @property
    def expected_allocated_bytes(self) -> int | None:
        if self.run.input_bytes is None or self.run.output_bytes is None:
            return None
        return self.measured_bytes - self.run.input_bytes + self.run.output_bytes


def _formula_tensors(b: BlockRun) -> list:
    """(term, bytes) per tensor of the formula: ``norm_inputs`` is two tensors, every other term one."""
    from distlearn.activation_memory.formulas import layer_activation_table

    table = layer_activation_table(seq_len=b.seq_len, micro_batch_size=b.micro_batch_size,
                                   hidden_size=b.hidden_size, num_heads=b.num_heads, arch="llama",
                                   num_kv_heads=b.num_kv_heads, ffn_hidden_size=b.ffn_hidden_size, attention="flash",
                                   swiglu=b.swiglu, recompute=b.recompute)
    out = []
    for t in table:
        count = 2 if t.name == "norm_inputs" else 1
        out += [(t.name, int(t.nbytes) // count)] * count
    return out


def _planner_bytes(b: BlockRun) -> int | None:
    """:meth:`Setting.act` for the block, if its shape is one of the Llama presets (else None)."""
    from distlearn.core.hardware import make_cluster
    from distlearn.core.models import get_preset

    for name in MODELS:
        c = get_preset(name)
        if (c.hidden_size, c.num_heads, c.kv_heads, c.ffn_hidden_size) == (b.hidden_size, b.num_heads,
                                                                           b.num_kv_heads, b.ffn_hidden_size):
            st = make_setting(c, make_cluster(GPU_PRESET, 8), global_batch=8, seq_len=b.seq_len, swiglu=b.swiglu)
            return int(st.act(b.micro_batch_size, 1, False, b.recompute))
    return None


def _beyond_formula(nbytes: int, dtype: str, b: BlockRun) -> str:
    """What a saved storage the formula does not count is."""
    if dtype == "float32" and nbytes == 4 * b.seq_len * b.micro_batch_size:
        return "rmsnorm 1/rms (fp32)"
    if nbytes <= KERNEL_STATE_MAX_BYTES:
        return "attention kernel RNG state"
    return "unexplained"


def block_names() -> tuple:
    """Names of the stored blocks that ran."""
    return tuple(b.name for b in stored_run().blocks if b.error is None)


def block_comparison(name: str = "8b s4096") -> BlockComparison:
    """The stored block ``name`` (:func:`block_names`) matched tensor by tensor against the formula: each formula
    tensor takes a saved storage of exactly its bytes (and dtype: bf16, the log-sum-exp float32); the storages left
    are named by :func:`_beyond_formula`. Raises DistlearnValueError for a name not stored or a block that
    failed."""
    check_choice("name", name, block_names())
    b = next(x for x in stored_run().blocks if x.name == name)
    left = list(b.storages)
    rows = []
    for term, nbytes in _formula_tensors(b):
        dtype = "float32" if term == "softmax_lse" else "bfloat16"
        hit = next((s for s in left if s[0] == nbytes and s[1] == dtype), None)
        if hit is None:
            rows.append(SavedTensor(term, nbytes, 0))
        else:
            left.remove(hit)
            rows.append(SavedTensor(term, nbytes, hit[0], hit[1], hit[2]))
    rows += [SavedTensor(_beyond_formula(n, t, b), 0, n, t, s) for n, t, s in left]
    formula = sum(n for _, n in _formula_tensors(b))
    return BlockComparison(b, _planner_bytes(b), formula, tuple(rows))

"""Rooflines of parallelism (chapter 14): for each kind of parallelism, the condition under which its communication
takes no longer than the compute it can hide behind, in the style of the scaling book's "how to parallelize a
transformer" (Austin et al. 2025, for TPUs), here with the GPU presets of :mod:`distlearn.core.hardware`.

Notation: C = FLOP/s one GPU reaches (``peak × efficiency``, the planner's :data:`COMPUTE_EFFICIENCY` by default),
W = bytes/s per GPU per direction of the link the collective uses (NVLink inside a node, the network across), Ψ
parameters, T tokens, 16-bit values (2 bytes), ring collectives with (n − 1)/n → 1 and latency left out (the
planner adds both). W is one GPU's link: a group with k GPUs in each node runs k rings, one per NIC (NCCL's
channels; the planner's :func:`distlearn.core.topology.best_collective`), or the hierarchical algorithm, and so
crosses the network up to k times faster; an expert all-to-all sends its (k − 1)/g share over NVLink. The
conditions below are those of a group with one GPU per node. Each condition compares two times, so it holds
whatever the size of the model:

- **DP** (gradient all-reduce behind backward): backward 4ΨT/C vs all-reduce 2·2Ψ/W → T ≥ C/W tokens per GPU per
  step (per micro-batch that carries the all-reduce).
- **FSDP / ZeRO-3** (parameter all-gather behind forward, all-gather + reduce-scatter behind backward, every
  micro-batch): forward 2ΨT/C vs 2Ψ/W → T ≥ C/W tokens per GPU per micro-batch.
- **TP** (Megatron, forward of a GPT block: two all-reduces of h values per token): GEMMs 24h²/t FLOPs per token
  per GPU vs two ring all-reduces of 2h bytes, 2·2(t − 1)/t·2h/W → h ≥ (t − 1)·C/(3W) (the ring's (t − 1)/t kept:
  t is small). Megatron does not overlap them: below the bound they take longer than the layer's GEMMs.
- **CP** (ring attention: one K/V block per step behind one block of attention): 4c²·h/C vs 2c·d_kv·2/W with c = s/cp
  tokens per rank and d_kv = kv heads × head dim → c ≥ C·d_kv/(h·W) — chapter 10's
  :func:`distlearn.context_parallel.simulation.ring_overlap` (Liu et al. 2023 §3), which this module calls.
- **EP** (dispatch and combine all-to-alls of each token's k copies behind its k experts' GEMMs): 2·3h·f_e·k/C vs
  2·k·h·2/W → f_e ≥ 2C/(3W): a condition on the expert width alone, not on the number of tokens.
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.context_parallel.simulation import ring_overlap
from distlearn.core.hardware import GPU, get_gpu, peak_flops
from distlearn.core.i18n import bi, table, text
from distlearn.core.models import ModelConfig, get_preset
from distlearn.core.records import MODEL
from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_number, checks
from distlearn.planning.setting import COMPUTE_EFFICIENCY
from distlearn.core.guard import read_only

KINDS = ("dp", "fsdp", "tp", "cp", "ep")
LINKS = ("network", "nvlink")
LINK_NAMES = read_only({"network": text("rooflines.network", "network", "网络"),
              "nvlink": text("rooflines.nvlink", "NVLink", "NVLink（节点内）")})


@dataclass(frozen=True)
class Roofline:
    """One condition: ``kind``; ``quantity`` (what must be large: its name in both languages), its ``threshold`` and
    the ``value`` a setting gives it (``None`` when no value was given); ``hidden``: value ≥ threshold."""

    kind: str
    quantity_en: str
    quantity_zh: str
    threshold: float
    value: float | None = None

    @property
    def hidden(self) -> bool | None:
        return None if self.value is None else self.value >= self.threshold

    @property
    def quantity(self) -> str:
        return bi(self.quantity_en, self.quantity_zh)


def achieved_flops(gpu: str | GPU, efficiency: float = COMPUTE_EFFICIENCY, dtype: str = "bf16") -> float:
    """C = the GPU's dense ``dtype`` peak (:func:`distlearn.core.hardware.peak_flops`) × ``efficiency``, FLOP/s."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    check_number("efficiency", efficiency, minimum=0, maximum=1, strict_min=True)
    return peak_flops(g, dtype) * efficiency


def link_bandwidth(gpu: str | GPU, link: str) -> float:
    """W: ``gpu.network_bw`` or ``gpu.nvlink_bw`` (bytes/s per GPU per direction)."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    return g.network_bw if check_choice("link", link, LINKS) == "network" else g.nvlink_bw


@checks(model=MODEL)
def roofline(kind: str, gpu: str | GPU, *, link: str | None = None, model: ModelConfig | None = None,
             tp: int = 8, efficiency: float = COMPUTE_EFFICIENCY, value: float | None = None) -> Roofline:
    """The condition for ``kind`` (one of :data:`KINDS`) on ``gpu`` (module docstring). ``link``: default NVLink for
    TP, the network for the others. ``model``: needed for CP (the K/V width over h). ``tp``: TP's degree.
    ``value``: the setting's value of the quantity (tokens per GPU, hidden size, tokens per rank, expert width),
    to say whether it is hidden. Raises DistlearnValueError for an unknown kind or link, CP without a model, tp < 2,
    a ``value`` that is not a finite number ≥ 0.
    """
    check_choice("kind", kind, KINDS)
    if value is not None:
        check_number("value", value, minimum=0)
    link = link or ("nvlink" if kind == "tp" else "network")
    C, W = achieved_flops(gpu, efficiency), link_bandwidth(gpu, link)
    if kind in ("dp", "fsdp"):
        per = "step" if kind == "dp" else "micro-batch"
        per_zh = "每步" if kind == "dp" else "每个微批次"
        return Roofline(kind, f"tokens per GPU per {per}", f"每块 GPU {per_zh}的词元数", C / W, value)
    if kind == "tp":
        t = check_int("tp", tp, minimum=2)
        return Roofline(kind, f"hidden size h (tp = {t})", f"隐藏维度 h（tp = {t}）", (t - 1) * C / (3 * W), value)
    if kind == "cp":
        if model is None:
            raise DistlearnValueError("model", "the CP roofline needs a model (its K/V width over h).",
                                      "上下文并行 (CP) 的屋顶线需要一个模型（它的 K/V 宽度与 h 之比）。")
        # chapter 10's ring_overlap: c ≥ kv·p/(2a) · F/B, i.e. C·d_kv/(h·W) for 16-bit K and V
        need = ring_overlap(tokens_per_rank=1, num_heads=model.num_heads, num_kv_heads=model.kv_heads,
                            head_dim=model.head_dim, flops=C, bandwidth=W)["min_tokens"]
        return Roofline(kind, "tokens per rank s/cp", "每个 rank 的词元数 s/cp", need, value)
    return Roofline(kind, "expert width f_e", "专家宽度 f_e", 2 * C / (3 * W), value)


def roofline_table(gpus=("a100-80gb", "h100-80gb", "h200"), model: ModelConfig | None = None) -> str:
    """The thresholds of every kind for each GPU preset (``model`` for CP: default Llama 3.1 405B), in the current
    language (:func:`distlearn.core.i18n.table`: headers, quantities and links)."""
    model = model or get_preset("llama3.1-405b")
    rows = []
    for kind in KINDS:
        link = "nvlink" if kind == "tp" else "network"
        r = [roofline(kind, g, model=model) for g in gpus]
        rows.append([kind, r[0].quantity, LINK_NAMES[link]()] + [f"{x.threshold:,.0f}" for x in r])
    return table([("kind", "类型"), ("quantity", "关键量"), ("link", "链路"), *gpus], rows,
                 align="<<<" + ">" * len(gpus))

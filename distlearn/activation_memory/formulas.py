"""Whole-model activation memory, the compute price of recomputation, offload traffic, and the seed's grid redone.

Builds on :func:`distlearn.memory.formulas.model_state_bytes` and an architecture-aware count of what each layer keeps for
backward (:func:`layer_activation_table`). Units: **bytes** and **FLOPs**; seconds for times; bandwidths in
**GB/s = 1e9 bytes/s** (vendors quote PCIe and NVMe that way). Convert bytes with ``memory.to_gb`` (1e9) or
``memory.to_gib`` (2**30); never mix them.

Per-layer terms, tensor by tensor, each with its source (:data:`TERM_SOURCE_TEXTS`, (en, zh) pairs):

- **GPT block, attention scores materialised** (Korthikanti et al. 2022, §4.1 and Table 2): with s = seq_len,
  b = micro-batch size, h = hidden size, a = heads, ``s·b·h·(34 + 5·a·s/h)`` bytes — 16-bit tensors of
  ``16·s·b·h + 2·a·s²·b`` elements and 1-byte dropout masks of ``2·s·b·h + a·s²·b``. This is the contract
  function :func:`distlearn.memory.formulas.activation_bytes_per_layer`.
- **Llama block** (no dropout, RMSNorm, SwiGLU MLP of three matrices with intermediate size f, grouped-query
  attention with k kv heads): derived here from the module, term by term, and measured on CPU by
  :mod:`distlearn.activation_memory.measure`. With FlashAttention (how Llama is trained) it keeps
  ``p·sbh·(6 + 2k/a + 4f/h) + 4·a·s·b`` bytes: no s² term, only a fp32 log-sum-exp per row.
- ``attention="materialised"`` or ``"flash"`` for either architecture; :func:`default_attention` picks what
  each preset is trained with.

Whole model, per GPU (pipeline stage ``stage`` of ``pp``):

- layers on the stage: ``num_layers // pp`` plus one on the first ``num_layers % pp`` stages (no layer dropped);
- micro-batches whose activations are alive at once: :func:`inflight_microbatches` (closed form below);
- stage 0 also keeps the embedding dropout mask (``s·b·h`` bytes, ``/t`` with sequence parallelism; GPT only);
- the last stage keeps the final norm's input and the LM head's input (``2·s·b·h`` each, 16-bit, ``/t``) and the
  fp32 logits for the cross-entropy (``4·s·b·V`` bytes, ``/t`` with a vocabulary-parallel loss) — Korthikanti
  §4.3 lists the same terms; with one stage they all sit on the same GPU.

Gradient accumulation runs micro-batches one after the other: only one micro-batch's activations are alive
(without a pipeline), so activation memory depends on the micro-batch size, not on the global batch.
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.memory.formulas import GB, model_state_bytes, RECOMPUTE
from distlearn.core.i18n import bi
from distlearn.core.models import ModelConfig
from distlearn.core.validate import (DistlearnValueError, check_bool, check_choice, check_int, check_positive, check_record,
                                     check_text)
from distlearn.core.guard import read_only

SCHEDULES = ("none", "gpipe", "1f1b")
# memory.RECOMPUTE (Korthikanti's three modes) plus output-discarding recomputation of the norms and the MLP
# activation: "norm-act" (DeepSeek-V3 §3.2.3 and §3.3.3; MindSpeed --recompute-norm and
# --recompute-activation-function for dense layers; Megatron-Core's CheckpointWithoutOutput does the norms,
# recompute_modules "layernorm" with unfused norms, and the activation of MoE experts only, "moe_act")
RECOMPUTE_MODES = RECOMPUTE + ("norm-act",)


# ---------------------------------------------------------------- per-layer terms, architecture-aware
ATTENTION = ("materialised", "flash")
SWIGLU = ("unfused", "fused")

# Where each term comes from, in English and in Chinese: one table of (en, zh) pairs, so the two languages cannot
# drift apart. K22 = Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", §4.1
# (the per-tensor count behind Table 2); FA = Dao et al. 2022, "FlashAttention", §3.1 (the backward recomputes the
# probabilities from Q, K, V, O and the row log-sum-exp); "Llama module": derived here from the module's code, term
# by term (distlearn.activation_memory.measure.LlamaBlock measures each). Keys: the term, then the variant ("gpt" /
# "llama" for the architecture, "flash" / "materialised" for the attention, "selective" / "norm-act" for the
# recomputation mode, "any" otherwise).
# The printed sources name no internal function (style guide: an internal name is an aside). The code behind them:
# - the RMSNorm's fp32 1/rms per row is what torch's _fused_rms_norm_backward(grad, input, shape, rstd, weight) takes;
# - the fp32 log-sum-exp of flash attention is torch's meta registration of _scaled_dot_product_flash_attention:
#   logsumexp (b, a, s) float32;
# - the GQA repeat of K and V before QKᵀ is Megatron's and Hugging Face's repeat_kv;
# - the Llama MLP's SiLU is F.silu; Megatron-Core's fused SwiGLU is fused_bias_swiglu; its output-discarding
#   checkpoint ("norm-act") is CheckpointWithoutOutput.
_K22 = ("Korthikanti et al. 2022 §4.1: ", "Korthikanti 等 2022 §4.1：")
# With "norm-act" the kept inputs of the recomputed functions (Megatron-Core's output-discarding checkpoint saves them)
_DISCARD = ("Megatron-Core's output-discarding checkpoint: ", "Megatron-Core 丢弃输出的检查点：")


def _k22(en: str, zh: str) -> tuple[str, str]:
    return _K22[0] + en, _K22[1] + zh


def _discard(en: str, zh: str) -> tuple[str, str]:
    return _DISCARD[0] + en, _DISCARD[1] + zh


TERM_SOURCE_TEXTS: dict[str, dict[str, tuple[str, str]]] = read_only({
    "norm_inputs": {
        "gpt": _k22("the two LayerNorm inputs (4sbh)", "两个 LayerNorm 的输入 (4sbh)"),
        "llama": ("Llama module: each RMSNorm keeps its input, plus one fp32 1/rms per row for its backward",
                  "Llama 模块：每个 RMSNorm 保存自己的输入，另有每行一个 fp32 的 1/rms 供反向使用"),
        "norm-act": _discard("keeps each norm's input to recompute its output", "保存每个归一化层的输入，用来重计算它的输出"),
    },
    "qkv_input": {
        "any": _k22("QKV input (2sbh), one tensor shared by the Q, K, V projections",
                    "QKV 投影的输入 (2sbh)，Q、K、V 三个投影共用一个张量"),
    },
    "q": {
        "materialised": _k22("Q for QKᵀ", "用于 QKᵀ 的 Q"),
        "flash": ("FlashAttention (Dao et al. 2022) keeps Q", "FlashAttention（Dao 等 2022）保存 Q"),
    },
    "k": {
        "materialised": _k22("K for QKᵀ; with GQA it is first repeated to all heads, as in Megatron and Hugging Face",
                             "用于 QKᵀ 的 K；GQA 先把它复制到所有头，Megatron 和 Hugging Face 都这样做"),
        "flash": ("FlashAttention keeps K as it is, k K/V heads, not repeated",
                  "FlashAttention 保存 K，不复制，只有 k 个 K/V 头"),
        "selective": ("checkpoint input of the recomputed attention core, k K/V heads",
                      "重计算的注意力核心以它为检查点输入，只有 k 个 K/V 头"),
    },
    "v": {
        "materialised": _k22("V for ·V; with GQA it is first repeated to all heads", "用于 ·V 的 V；GQA 先把它复制到所有头"),
        "flash": ("FlashAttention keeps V as it is, k K/V heads, not repeated",
                  "FlashAttention 保存 V，不复制，只有 k 个 K/V 头"),
        "selective": ("checkpoint input of the recomputed attention core, k K/V heads",
                      "重计算的注意力核心以它为检查点输入，只有 k 个 K/V 头"),
    },
    "softmax_output": {
        "any": _k22("softmax output (2as²b); without dropout also the ·V input",
                    "softmax 的输出 (2as²b)；没有 dropout 时它也是 ·V 的输入"),
    },
    "attn_dropout_mask": {
        "any": _k22("attention dropout mask (as²b, 1 byte)", "注意力 dropout 掩码（as²b，每个 1 字节）"),
    },
    "attn_dropout_output": {
        "any": _k22("dropped probabilities, the ·V input (2as²b)", "dropout 之后的概率，即 ·V 的输入 (2as²b)"),
    },
    "softmax_lse": {
        "any": ("FlashAttention: one fp32 log-sum-exp per row and head, shape (b, a, s), as PyTorch declares it",
                "FlashAttention：每行每头一个 fp32 的 log-sum-exp，形状为 (b, a, s)，与 PyTorch 的声明一致"),
    },
    "out_proj_input": {
        "materialised": _k22("output projection input (2sbh)", "输出投影的输入 (2sbh)"),
        "flash": ("the kernel's output O, kept by FlashAttention and by the output projection: one tensor",
                  "注意力核的输出 O：FlashAttention 和输出投影保存的是同一个张量"),
    },
    "mlp_input": {
        "any": _k22("the first MLP linear's input (2sbh); Llama: shared by gate and up",
                    "MLP 第一个线性层的输入 (2sbh)；Llama 的 gate 和 up 投影共用它"),
    },
    "gelu_input": {
        "any": _k22("GeLU input (8sbh for f = 4h)", "GeLU 的输入（f = 4h 时为 8sbh）"),
        "norm-act": _discard("keeps the GeLU input to recompute the fc2 input", "保存 GeLU 的输入，用来重计算 fc2 的输入"),
    },
    "fc2_input": {
        "any": _k22("second linear's input (8sbh for f = 4h)", "第二个线性层的输入（f = 4h 时为 8sbh）"),
    },
    "silu_input": {
        "any": ("Llama module, down(silu(gate(x))·up(x)): the SiLU keeps its input gate(x)",
                "Llama 模块的 MLP 是 down(silu(gate(x))·up(x))：SiLU 保存它的输入 gate(x)"),
        "norm-act": _discard("keeps gate(x) to recompute silu(gate(x))·up(x)", "保存 gate(x)，用来重计算 silu(gate(x))·up(x)"),
    },
    "silu_output": {
        "any": ("Llama module: the product keeps silu(gate(x)) for the gradient of up(x)",
                "Llama 模块：乘法保存 silu(gate(x))，用于求 up(x) 的梯度"),
    },
    "up_output": {
        "any": ("Llama module: the product keeps up(x) for the gradient of silu(gate(x))",
                "Llama 模块：乘法保存 up(x)，用于求 silu(gate(x)) 的梯度"),
        "norm-act": _discard("keeps up(x) to recompute silu(gate(x))·up(x)", "保存 up(x)，用来重计算 silu(gate(x))·up(x)"),
    },
    "swiglu_input": {
        "any": ("Megatron-Core's fused SwiGLU: keeps only [gate(x), up(x)] and recomputes the SiLU",
                "Megatron-Core 的融合 SwiGLU：只保存 [gate(x), up(x)]，SiLU 重计算"),
        "norm-act": _discard("keeps [gate(x), up(x)] to recompute the SwiGLU output",
                             "保存 [gate(x), up(x)]，用来重计算 SwiGLU 的输出"),
    },
    "down_proj_input": {
        "any": ("Llama module: the down projection keeps its input silu(gate(x))·up(x)",
                "Llama 模块：下投影保存它的输入 silu(gate(x))·up(x)"),
    },
    "dropout_masks": {
        "any": _k22("attention-output and MLP-output dropout masks (sbh each, 1 byte)",
                    "注意力输出和 MLP 输出的 dropout 掩码（各 sbh，每个 1 字节）"),
    },
    "layer_input": {
        "any": ("Korthikanti et al. 2022 §5, Table 2: full recomputation keeps the layer input",
                "Korthikanti 等 2022 §5 表 2：完全重计算只保存层的输入"),
    },
})
# One language's view of the table (read-only use; the pairs above are the one place to edit).
TERM_SOURCES = read_only({name: {k: pair[0] for k, pair in options.items()} for name, options in TERM_SOURCE_TEXTS.items()})
TERM_SOURCES_ZH = read_only({name: {k: pair[1] for k, pair in options.items()} for name, options in TERM_SOURCE_TEXTS.items()})


def term_source(name: str, *, arch: str = "gpt", attention: str = "materialised", recompute: str = "none",
                lang: str = "en") -> str:
    """The source of term ``name`` for this architecture, attention kernel and recomputation mode, in English
    (``lang="en"``) or Chinese (``lang="zh"``). Raises DistlearnValueError for an unknown term or option."""
    check_choice("name", name, TERM_SOURCE_TEXTS)
    check_choice("arch", arch, ("gpt", "llama"))
    check_choice("attention", attention, ATTENTION)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    check_choice("lang", lang, ("en", "zh"))
    source = _term_source(name, arch, attention, recompute, lang)
    if source is None:
        raise DistlearnValueError("name", f"term {name!r} has no source for arch={arch!r}, attention={attention!r}, "
                                          f"recompute={recompute!r}.",
                                  f"项 {name!r} 在 arch={arch!r}、attention={attention!r}、recompute={recompute!r} "
                                  f"下没有来源。")
    return source


def _term_source(name: str, arch: str, attention: str, recompute: str, lang: str) -> str | None:
    """:func:`term_source` without the checks (layer_activation_table validated its options already); None when
    the term has no source for this variant."""
    options = TERM_SOURCE_TEXTS[name]
    for key in (recompute if recompute in ("selective", "norm-act") else None, attention, arch, "any"):
        if key in options:
            return options[key][1 if lang == "zh" else 0]
    return None


@dataclass(frozen=True)
class ActivationTerm:
    """One tensor (or group of equal tensors) a layer keeps for backward, per GPU.

    ``elements`` per GPU after parallelism, ``bytes_per_element`` (activation dtype, 1 for masks, 4 for the fp32
    log-sum-exp), ``split``: ``"tp"`` (always divided by the tensor-parallel degree), ``"sp"`` (divided only with
    sequence parallelism) or ``"none"``; ``source``: where the term comes from (:func:`term_source`), in English;
    ``source_zh``: the same in Chinese (``""`` when not given). :attr:`shown_source` is the one to print.
    """

    name: str
    elements: float
    bytes_per_element: int
    split: str
    source: str
    source_zh: str = ""

    @property
    def shown_source(self) -> str:
        """The source in the reader's language (:func:`distlearn.core.i18n.bi`)."""
        return bi(self.source, self.source_zh or self.source)

    @property
    def nbytes(self) -> float:
        return self.elements * self.bytes_per_element


def layer_shape(config: ModelConfig) -> dict:
    """The keyword arguments :func:`layer_activation_table` needs from a ModelConfig: ``arch``, ``hidden_size``,
    ``num_heads``, ``num_kv_heads``, ``ffn_hidden_size``."""
    return dict(arch=config.arch, hidden_size=config.hidden_size, num_heads=config.num_heads,
                num_kv_heads=config.kv_heads, ffn_hidden_size=config.ffn_hidden_size)


def default_attention(config: ModelConfig) -> str:
    """How the model is trained: ``"materialised"`` for GPT presets (they reproduce the Megatron-LM runs of
    Narayanan et al. 2021 / Korthikanti et al. 2022, whose attention stores the a·s² scores), ``"flash"`` for
    Llama (trained with fused attention kernels that keep only the log-sum-exp: FlashAttention-2, cuDNN or
    memory-efficient SDPA, e.g. through ``F.scaled_dot_product_attention`` in torchtitan and Hugging Face
    transformers' default ``attn_implementation="sdpa"``)."""
    return "flash" if config.arch == "llama" else "materialised"


def layer_activation_table(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int,
                           arch: str = "gpt", num_kv_heads: int | None = None, ffn_hidden_size: int | None = None,
                           attention: str = "materialised", dropout: bool | None = None, swiglu: str = "unfused",
                           tp: int = 1, sequence_parallel: bool = False, recompute: str = "none",
                           activation_bytes: int = 2, mask_bytes: int = 1) -> list[ActivationTerm]:
    """The tensors one transformer layer keeps for backward, per GPU, each with its source.

    With s = seq_len, b = micro-batch, h = hidden, a = heads, k = kv heads (GQA; k = a without it),
    f = ffn_hidden_size (4h for GPT by default), p = ``activation_bytes``, t = ``tp``; elements:

    ======================  =====================  ========================  ==================================
    term                    GPT (Korthikanti)       Llama                     split
    ======================  =====================  ========================  ==================================
    norm_inputs             2·sbh                   2·sbh (RMSNorm)           sp
    qkv_input               sbh                     sbh                       sp
    q                       sbh                     sbh                       tp
    k, v                    sbh each (k·sbh/a each with flash, or for GQA kept by selective recomputation)
    softmax_output          a·s²·b                  (materialised only)       tp
    attn_dropout_mask/out   a·s²·b each             (with dropout only)       tp
    softmax_lse             4·a·s·b bytes, fp32     (flash only)              tp
    out_proj_input          sbh                     sbh                       tp
    mlp_input               sbh                     sbh                       sp
    gelu_input, fc2_input   f·sb each               —                         tp
    silu_input, silu_out-   —                       f·sb each (unfused);      tp
    put, up_output,                                 fused: swiglu_input 2f·sb
    down_proj_input                                 and down_proj_input f·sb
    dropout_masks           2·sbh (1 byte)          (with dropout only)       sp
    ======================  =====================  ========================  ==================================

    GPT, materialised, dropout, f = 4h, 16-bit, 1-byte masks: ``sbh·(34 + 5as/h)``, exactly Korthikanti's Table 2
    (and the TP / SP / recomputation rows likewise, see :func:`distlearn.memory.formulas.activation_bytes_per_layer`).
    Llama 3 8B with flash attention (k = a/4, f = 3.5h): ``2·sbh·(6 + 2k/a + 4f/h) + 4asb = 41·sbh + 4asb``.

    ``attention="flash"``: FlashAttention and PyTorch's fused SDPA kernels keep Q, K, V (un-repeated with GQA),
    the output O (also the output projection's input) and a fp32 log-sum-exp per row; the s × s probabilities
    are recomputed in backward. (CUDA's memory-efficient kernel pads the log-sum-exp to a multiple of 32 rows and
    the flash kernel also keeps 24 bytes of RNG state: negligible.) With dropout inside a flash kernel the mask
    is regenerated from the RNG state (FA §3.1), so only the two residual dropout masks remain.
    ``dropout``: default True for GPT, False for Llama (it has none). ``swiglu="fused"`` is Megatron-Core's
    fused SwiGLU (3f·sb instead of 4f·sb). ``recompute="selective"`` recomputes the attention core (drops the
    s² terms, or the log-sum-exp with flash; with GQA the checkpoint keeps K and V un-repeated);
    ``"full"`` keeps only the layer input. ``"norm-act"`` (output-discarding recomputation of both norms and the
    MLP activation, :data:`RECOMPUTE_MODES`) drops the norms' outputs (``qkv_input``, ``mlp_input``) and the
    activation's output (GPT ``fc2_input``; Llama ``down_proj_input``, and ``silu_output`` unfused): each is
    recomputed in backward from the input the checkpoint keeps, just before the next linear layer's backward
    needs it. Llama, flash: ``p·sbh·(4 + 2k/a + 2f/h) + 4asb`` bytes, fused or not. Raises DistlearnValueError
    (bad sizes, t not dividing a or k).
    """
    if dropout is not None:
        dropout = check_bool("dropout", dropout)
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    s = check_int("seq_len", seq_len)
    b = check_int("micro_batch_size", micro_batch_size)
    h = check_int("hidden_size", hidden_size)
    a = check_int("num_heads", num_heads)
    check_choice("arch", arch, ("gpt", "llama"))
    kv = a if num_kv_heads is None else check_int("num_kv_heads", num_kv_heads, maximum=a)
    f = 4 * h if ffn_hidden_size is None else check_int("ffn_hidden_size", ffn_hidden_size)
    check_choice("attention", attention, ATTENTION)
    check_choice("swiglu", swiglu, SWIGLU)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    t = check_int("tp", tp)
    p = check_int("activation_bytes", activation_bytes, minimum=1, maximum=8)
    m = check_int("mask_bytes", mask_bytes, minimum=1, maximum=8)
    for name, heads in (("num_heads", a), ("num_kv_heads", kv)):
        if heads % t:
            raise DistlearnValueError("tp", f"tp = {t} must divide {name} = {heads} (heads are split across ranks).",
                                      f"tp = {t} 必须整除 {name} = {heads}（注意力头在各 rank 之间切分）。")
    if a % kv:
        raise DistlearnValueError("num_kv_heads", f"num_heads {a} must be divisible by num_kv_heads {kv}.",
                                  f"num_heads {a} 必须能被 num_kv_heads {kv} 整除。")
    drop = (arch == "gpt") if dropout is None else bool(dropout)
    sbh, sb = s * b * h, s * b
    sp_div = t if sequence_parallel else 1

    def term(name, elements, nbytes, split):
        div = t if split == "tp" else sp_div if split == "sp" else 1
        return ActivationTerm(name, elements / div, nbytes, split, _term_source(name, arch, attention, recompute, "en"),
                              _term_source(name, arch, attention, recompute, "zh"))

    if recompute == "full":
        return [term("layer_input", sbh, p, "sp")]
    selective = recompute == "selective"
    kept = recompute != "norm-act"              # the norms' and the activation's outputs
    kv_sbh = sbh * kv / a                       # K or V without repetition
    repeated = attention == "materialised" and not selective
    out = [term("norm_inputs", 2 * sbh, p, "sp")] + ([term("qkv_input", sbh, p, "sp")] if kept else [])
    out += [term("q", sbh, p, "tp"), term("k", sbh if repeated else kv_sbh, p, "tp"),
            term("v", sbh if repeated else kv_sbh, p, "tp")]
    if not selective:
        if attention == "materialised":
            ass = a * s * s * b
            out.append(term("softmax_output", ass, p, "tp"))
            if drop:
                out += [term("attn_dropout_mask", ass, m, "tp"), term("attn_dropout_output", ass, p, "tp")]
        else:
            out.append(term("softmax_lse", a * s * b, 4, "tp"))
    out += [term("out_proj_input", sbh, p, "tp")] + ([term("mlp_input", sbh, p, "sp")] if kept else [])
    if arch == "gpt":
        out += [term("gelu_input", f * sb, p, "tp")] + ([term("fc2_input", f * sb, p, "tp")] if kept else [])
    elif swiglu == "unfused":
        out += [term("silu_input", f * sb, p, "tp")] + ([term("silu_output", f * sb, p, "tp")] if kept else [])
        out += [term("up_output", f * sb, p, "tp")] + ([term("down_proj_input", f * sb, p, "tp")] if kept else [])
    else:
        out += [term("swiglu_input", 2 * f * sb, p, "tp")]
        out += [term("down_proj_input", f * sb, p, "tp")] if kept else []
    if drop:
        out.append(term("dropout_masks", 2 * sbh, m, "sp"))
    return out


def layer_activation_terms(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int,
                           activation_bytes: int = 2, mask_bytes: int = 1, dropout: bool | None = None,
                           **layer) -> dict:
    """Bytes one layer keeps for backward, term by term: ``{name: bytes, ..., "total": bytes}``.

    The terms of :func:`layer_activation_table` (same keyword arguments: ``arch``, ``num_kv_heads``,
    ``ffn_hidden_size``, ``attention``, ``swiglu``, ``tp``, ``sequence_parallel``, ``recompute``). With the
    defaults (GPT, materialised attention, dropout, 16-bit, 1-byte masks) the total is Korthikanti's
    ``sbh·(34 + 5·a·s/h)``, exactly :func:`distlearn.memory.formulas.activation_bytes_per_layer`; ``dropout=False`` gives
    ``sbh·(32 + 2·a·s/h)``·(activation_bytes / 2). Raises DistlearnValueError.
    """
    if dropout is not None:
        dropout = check_bool("dropout", dropout)
    table = layer_activation_table(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size,
                                   num_heads=num_heads, activation_bytes=activation_bytes, mask_bytes=mask_bytes,
                                   dropout=dropout, **layer)
    terms = {t.name: t.nbytes for t in table}
    terms["total"] = sum(terms.values())
    return terms


def layer_activation_bytes(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int, tp: int = 1,
                           sequence_parallel: bool = False, recompute: str = "none", activation_bytes: int = 2,
                           **layer) -> float:
    """Bytes per GPU one layer keeps for backward: the sum of :func:`layer_activation_table`.

    Defaults (GPT, materialised attention with dropout) give Korthikanti's Table 2 with the activation dtype
    explicit (dropout masks stay 1 byte). With ``p = activation_bytes``::

        no SP:  sbh·(4p + 2 + 12p/t) + a·s²·b·(2p + 1)/t;  SP: all of it divided by t
        full:   p·sbh (the layer input; /t with SP);  selective: drop the a·s²·b term

    ``activation_bytes=2`` gives exactly :func:`distlearn.memory.formulas.activation_bytes_per_layer` (a test checks it
    over random shapes). For a model use ``**layer_shape(config), attention=default_attention(config)``.
    Returns bytes. Raises DistlearnValueError like the contract function.
    """
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    table = layer_activation_table(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size,
                                   num_heads=num_heads, tp=tp, sequence_parallel=sequence_parallel,
                                   recompute=recompute, activation_bytes=activation_bytes, **layer)
    return sum(t.nbytes for t in table)


def config_layer_bytes(config: ModelConfig, *, seq_len: int, micro_batch_size: int, tp: int = 1,
                       sequence_parallel: bool = False, recompute: str = "none", attention: str | None = None,
                       activation_bytes: int = 2, swiglu: str = "unfused") -> float:
    """:func:`layer_activation_bytes` for one layer of ``config`` (its architecture, GQA and MLP width), with
    ``attention`` defaulting to :func:`default_attention`. Returns bytes per GPU."""
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    return layer_activation_bytes(seq_len=seq_len, micro_batch_size=micro_batch_size, tp=tp,
                                  sequence_parallel=sequence_parallel, recompute=recompute,
                                  activation_bytes=activation_bytes, swiglu=swiglu,
                                  attention=attention or default_attention(config), **layer_shape(config))


# ---------------------------------------------------------------- pipeline
def layers_on_stage(num_layers: int, pp: int, stage: int) -> int:
    """Layers held by pipeline stage ``stage`` (0-based): ``L // pp``, plus one for the first ``L % pp`` stages.

    Every layer is placed (the counts sum to ``num_layers``) and counts differ by at most one. Raises
    DistlearnValueError when ``pp > num_layers`` (a stage would be empty) or ``stage`` is out of range.
    """
    num_layers = check_int("num_layers", num_layers)
    pp = check_int("pp", pp, maximum=num_layers)
    stage = check_int("stage", stage, minimum=0, maximum=pp - 1)
    return num_layers // pp + (1 if stage < num_layers % pp else 0)


def inflight_microbatches(schedule: str, pp: int, num_microbatches: int, stage: int) -> int:
    """Micro-batches whose activations stage ``stage`` holds at its peak, in closed form.

    - ``"none"`` (no pipeline, gradient accumulation): 1 — each micro-batch finishes backward before the next.
    - ``"gpipe"``: all forwards run before any backward, so every stage keeps ``num_microbatches`` (Huang et al.
      2019).
    - ``"1f1b"``: stage s runs ``pp − s − 1`` warm-up forwards and then one more before its first backward, so it
      keeps ``min(pp − s, num_microbatches)`` (Narayanan et al. 2021, §2.2; PipeDream-Flush). The first stage
      holds the most, ``pp``.

    (``distlearn.pipeline_parallel.schedules.simulate`` measures the same numbers as ``peak_inflight`` from an event simulation;
    this function is the closed form.) Raises DistlearnValueError for an unknown schedule or bad sizes.
    """
    check_choice("schedule", schedule, SCHEDULES)
    pp = check_int("pp", pp)
    m = check_int("num_microbatches", num_microbatches)
    stage = check_int("stage", stage, minimum=0, maximum=pp - 1)
    if schedule == "none":
        if pp != 1:
            raise DistlearnValueError("schedule", "schedule='none' means no pipeline: it needs pp = 1.",
                                      "schedule='none' 表示没有流水线：需要 pp = 1。")
        return 1
    if schedule == "gpipe":
        return m
    return min(pp - stage, m)


# ---------------------------------------------------------------- whole model
@dataclass(frozen=True)
class ActivationBytes:
    """Activation bytes on one GPU (one pipeline stage), by part. ``total`` sums them."""

    layers: float          # transformer layers × micro-batches in flight
    embedding: float       # embedding dropout mask (first stage; 0 without dropout, e.g. Llama)
    head: float            # final norm + LM head inputs, 16-bit (last stage)
    logits: float          # fp32 logits kept for the cross-entropy (last stage)
    working: float = 0.0   # full recomputation: one layer's activations rebuilt during its backward
    layers_on_stage: int = 0
    inflight: int = 1

    @property
    def total(self) -> float:
        return self.layers + self.embedding + self.head + self.logits + self.working


def model_activation_bytes(config: ModelConfig, *, seq_len: int, micro_batch_size: int, tp: int = 1,
                           sequence_parallel: bool = False, recompute: str = "none", pp: int = 1, stage: int = 0,
                           schedule: str | None = None, num_microbatches: int = 1, activation_bytes: int = 2,
                           logits_bytes: int = 4, attention: str | None = None,
                           swiglu: str = "unfused") -> ActivationBytes:
    """Activation bytes on one GPU holding pipeline stage ``stage`` of ``config`` (see the module docstring).

    Each layer is counted for ``config``'s architecture (:func:`layer_activation_table`: GPT or Llama, GQA, the
    MLP width) with ``attention`` defaulting to :func:`default_attention` (GPT: materialised, Llama: flash).

    ``schedule`` defaults to ``"none"`` for ``pp = 1`` and ``"1f1b"`` otherwise. With ``recompute="full"`` the
    layers keep only their inputs (2·s·b·h each), and during backward one layer is recomputed at a time: its full
    activations (``working``) are alive on top of the checkpoints (Korthikanti §5 counts only the checkpoints;
    we add this term because it is real peak memory). ``activation_bytes`` is 2 for 16-bit training (the paper),
    4 for fp32. ``logits_bytes`` is 4 for fp32 logits (Korthikanti §4.3; PyTorch's ``cross_entropy`` on upcast
    logits); set 2 when the loss keeps 16-bit logits.

    Returns :class:`ActivationBytes` in bytes. Raises DistlearnValueError for bad sizes.
    """
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    s = check_int("seq_len", seq_len)
    b = check_int("micro_batch_size", micro_batch_size)
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    p = check_int("activation_bytes", activation_bytes, minimum=1, maximum=8)
    logits_bytes = check_int("logits_bytes", logits_bytes, minimum=1, maximum=8)
    pp = check_int("pp", pp, maximum=config.num_layers)
    schedule = schedule or ("none" if pp == 1 else "1f1b")
    inflight = inflight_microbatches(schedule, pp, num_microbatches, stage)
    n_layers = layers_on_stage(config.num_layers, pp, stage)
    kw = dict(seq_len=s, micro_batch_size=b, tp=tp, sequence_parallel=sequence_parallel, activation_bytes=p,
              attention=attention, swiglu=swiglu)
    per_layer = config_layer_bytes(config, **kw, recompute=recompute)
    working = config_layer_bytes(config, **kw, recompute="none") if recompute == "full" else 0.0
    sbh = s * b * config.hidden_size
    split = tp if sequence_parallel else 1
    has_dropout = config.arch == "gpt"   # GPT: embedding dropout (1-byte mask); Llama has no dropout
    embedding = sbh / split * inflight if stage == 0 and has_dropout else 0.0
    last = stage == pp - 1
    head = 2 * p * sbh / split * inflight if last else 0.0
    logits = logits_bytes * s * b * config.vocab_size / tp * inflight if last else 0.0
    return ActivationBytes(per_layer * n_layers * inflight, embedding, head, logits, working, n_layers, inflight)


def gradient_accumulation_steps(global_batch_size: int, micro_batch_size: int, dp: int = 1) -> int:
    """Accumulation steps so that ``global_batch_size = micro_batch_size × steps × dp`` (sequences).

    DeepSpeed's ``train_batch_size`` obeys the same identity. Raises DistlearnValueError unless
    ``micro_batch_size × dp`` divides ``global_batch_size``.
    """
    g = check_int("global_batch_size", global_batch_size)
    b = check_int("micro_batch_size", micro_batch_size)
    dp = check_int("dp", dp)
    if g % (b * dp):
        raise DistlearnValueError(
            "global_batch_size",
            f"global_batch_size = {g} must be a multiple of micro_batch_size × dp = {b} × {dp} = {b * dp}.",
            f"global_batch_size = {g} 必须是 micro_batch_size × dp = {b} × {dp} = {b * dp} 的整数倍。")
    return g // (b * dp)


# ---------------------------------------------------------------- recompute cost
def layer_forward_flops(*, seq_len: int, micro_batch_size: int, hidden_size: int, ffn_hidden_size: int | None = None,
                        tp: int = 1) -> dict:
    """Forward FLOPs of one GPT layer per GPU (a multiply-add = 2 FLOPs), split into matmul parts.

    ``linear = 2·s·b·(4h² + 2·h·f)`` (Q, K, V, output projection and the two MLP matrices; f = 4h gives the
    familiar 24·s·b·h²) and ``attention = 4·s²·b·h`` (QKᵀ and probabilities·V). Three of these forwards plus the
    LM head's give the model FLOPs ``72·B·s·l·h²·(1 + s/6h + V/12hl)`` per iteration (Korthikanti et al. 2022,
    Appendix A); Narayanan et al. 2021 (§5.1) recompute every layer, so they count four forwards of the layers,
    ``96·B·s·l·h²·(1 + s/6h + V/16lh)``. Element-wise ops are not counted. Divided by ``tp``. Returns
    ``{"linear", "attention", "total"}``.
    """
    s = check_int("seq_len", seq_len)
    b = check_int("micro_batch_size", micro_batch_size)
    h = check_int("hidden_size", hidden_size)
    f = 4 * h if ffn_hidden_size is None else check_int("ffn_hidden_size", ffn_hidden_size)
    t = check_int("tp", tp)
    linear = 2 * s * b * (4 * h * h + 2 * h * f) / t
    attention = 4 * s * s * b * h / t
    return {"linear": linear, "attention": attention, "total": linear + attention}


def recompute_flops(config: ModelConfig, *, seq_len: int, micro_batch_size: int, recompute: str = "none",
                    tp: int = 1) -> dict:
    """FLOPs per micro-batch per GPU for forward + backward of all layers and the LM head, and the extra forward
    FLOPs that recomputation adds.

    Backward costs two forwards (gradients w.r.t. inputs and w.r.t. weights). Full recomputation runs every
    layer's forward again (+1 forward of the layers: 4 instead of 3 forwards, +33 % of the layers' work);
    selective recomputation (Korthikanti §5) re-runs only QKᵀ, softmax, dropout and probabilities·V, i.e. the
    ``attention`` FLOPs of :func:`layer_forward_flops`. Llama's SwiGLU MLP has three matrices: counted as
    ``2·s·b·(4h² + 3hf)`` per layer there (and GQA's smaller K, V are ignored: an upper bound).
    ``"norm-act"`` recomputes only element-wise work (the norms and the activation): 0 extra FLOPs here.

    Returns ``{"model": fwd+bwd FLOPs, "extra": recompute FLOPs, "overhead": extra / model}``.
    """
    check_choice("recompute", recompute, RECOMPUTE_MODES)
    f = config.ffn_hidden_size * (1.5 if config.arch == "llama" else 1)
    layer = layer_forward_flops(seq_len=seq_len, micro_batch_size=micro_batch_size,
                                hidden_size=config.hidden_size, ffn_hidden_size=int(round(f)) or 1, tp=tp)
    head = 2 * seq_len * micro_batch_size * config.hidden_size * config.vocab_size / tp
    model = 3 * (config.num_layers * layer["total"] + head)
    extra = {"none": 0.0, "norm-act": 0.0, "selective": config.num_layers * layer["attention"],
             "full": config.num_layers * layer["total"]}[recompute]
    return {"model": model, "extra": extra, "overhead": extra / model}


# ---------------------------------------------------------------- offload traffic
def offload_traffic(num_params: int, *, dp: int = 1, zero_stage: int = 2, offload_optimizer: bool = True,
                    offload_params: bool = False, nvme: bool = False, recompute_full: bool = False,
                    pcie_gb_per_s: float = 25.0, nvme_gb_per_s: float = 6.0, grad_bytes: int = 2) -> dict:
    """Bytes each GPU moves per optimizer step because of offload, and the time at the given bandwidths.

    Model (16-bit params and grads, fp32 Adam state of 12 B/param; shard = Ψ/dp with ZeRO ≥ 1, else Ψ):

    - optimizer offload (ZeRO-Offload, Ren et al. 2021, §4.1): 16-bit gradients of the shard go GPU→CPU
      (2 B/param) and updated 16-bit parameters come back CPU→GPU (2 B/param): 4 B/param over PCIe.
      ``grad_bytes=4`` is what DeepSpeed 0.19.8 sends: it converts each gradient partition to the fp32 master
      dtype on the GPU before the copy (``stage_1_and_2.py``, ``async_inplace_copy_grad_to_fp32_buffer_from_gpu``;
      ``stage3.py``, ``_offload_grad_partition_at_boundary``), 6 B/param in all;
    - parameter offload (ZeRO-Infinity, Rajbhandari et al. 2021, stage 3 only): the parameter shard is fetched
      CPU→GPU for every forward and backward (2 × 2 B/param, one more with full recomputation), and updated
      parameters no longer come back (they stay on the host); without optimizer offload the gradients still go
      to the GPU optimizer and parameters are written back (2 B/param);
    - ``nvme``: optimizer state lives on NVMe, read and written once per step (2 × 12 B/param over NVMe).

    ``pcie_gb_per_s`` / ``nvme_gb_per_s`` are *effective* one-direction bandwidths in GB/s (1e9 B/s) available
    to this GPU (GPUs of a node that share one drive share its bandwidth); the
    defaults (25 GB/s ≈ PCIe 4.0 ×16 in practice, 6 GB/s ≈ one PCIe 4.0 NVMe drive) are assumptions to change.
    Transfers are assumed not to overlap with compute (an upper bound on added time).
    Returns ``{"pcie_bytes", "nvme_bytes", "pcie_s", "nvme_s", "total_s"}``. Raises DistlearnValueError.
    """
    nvme = check_bool("nvme", nvme)
    offload_optimizer = check_bool("offload_optimizer", offload_optimizer)
    offload_params = check_bool("offload_params", offload_params)
    recompute_full = check_bool("recompute_full", recompute_full)
    n = check_int("num_params", num_params)
    dp = check_int("dp", dp)
    zero_stage = check_int("zero_stage", zero_stage, minimum=0, maximum=3)
    pcie = check_positive("pcie_gb_per_s", pcie_gb_per_s)
    nvme_bw = check_positive("nvme_gb_per_s", nvme_gb_per_s)
    gb = check_int("grad_bytes", grad_bytes, minimum=1, maximum=8)
    if offload_params and zero_stage != 3:
        raise DistlearnValueError("offload_params", "parameter offload needs zero_stage = 3.",
                                  "参数卸载需要 zero_stage = 3。")
    if nvme and not offload_optimizer:
        raise DistlearnValueError("nvme", "NVMe offload here means the optimizer state: set offload_optimizer.",
                                  "此处的 NVMe 卸载指优化器状态：请同时设置 offload_optimizer。")
    shard = n / dp if zero_stage >= 1 else n
    pcie_bytes = 0.0
    if offload_optimizer:
        pcie_bytes += gb * shard                      # gradients down
        if not offload_params:
            pcie_bytes += 2 * shard                   # updated parameters up
    if offload_params:
        pcie_bytes += 2 * shard * (3 if recompute_full else 2)   # fetched for forward, backward (+ recompute)
        if not offload_optimizer:
            pcie_bytes += 2 * shard                   # grads stay on the GPU; updated params written back to the host
    nvme_bytes = 2 * 12 * shard if nvme else 0.0
    pcie_s, nvme_s = pcie_bytes / (pcie * GB), nvme_bytes / (nvme_bw * GB)
    return {"pcie_bytes": pcie_bytes, "nvme_bytes": nvme_bytes, "pcie_s": pcie_s, "nvme_s": nvme_s,
            "total_s": pcie_s + nvme_s}


# ---------------------------------------------------------------- the CPU optimizer step (ZeRO-Offload's bottleneck)
CPU_ADAM_BYTES_PER_PARAM = 28
"""Host-memory traffic of one CPU Adam step per parameter in DeepSpeed 0.19.8 (``csrc/adam/cpu_adam_impl.cpp``,
``Adam_Optimizer::Step_1/4/8``): it reads the fp32 parameter, gradient, ``exp_avg`` and ``exp_avg_sq`` (16 B) and
writes the parameter and both moments back (12 B). The step is bound by host memory bandwidth."""

CPU_ADAM_PARAMS_PER_S = 11.6e9 / 8.2
"""Parameters per second one host's DeepSpeedCPUAdam is assumed to update: 11.6 B parameters in 8.2 s, as reported
by its author for an 11.6B GPT-2 (DeepSpeed PR #735, 2021: "6x to 7x improvement over torch.adam ... from 56 seconds
to 8.2 seconds"; the PR states neither the CPU nor how many ranks shared it); ≈ 1.4e9 params/s. The ZeRO-Offload
paper (Ren et al. 2021) builds CPU-Adam for this reason:
with PyTorch's CPU Adam the CPU step dominates the iteration. An assumption to change: it depends on the host's
cores and memory channels (the roofline is host bandwidth / :data:`CPU_ADAM_BYTES_PER_PARAM`)."""


def offload_step_time(num_params: int, *, dp: int, ranks_per_host: int = 8, zero_stage: int = 2,
                      pcie_gb_per_s: float = 25.0, cpu_adam_params_per_s: float = CPU_ADAM_PARAMS_PER_S,
                      grad_bytes: int = 2, host_memory_gb_per_s: float | None = None) -> dict:
    """Seconds per optimizer step that ZeRO-Offload adds to one rank: PCIe traffic and the CPU Adam step.

    Each rank's shard is Ψ/dp parameters (ZeRO ≥ 1). The ``ranks_per_host`` ranks of a node update their shards
    at the same time on the node's CPU, so the host updates ``ranks_per_host × Ψ/dp`` parameters per step at
    ``cpu_adam_params_per_s`` (:data:`CPU_ADAM_PARAMS_PER_S`, sourced there):

    - ``pcie_s``: :func:`offload_traffic` (``grad_bytes`` down, 2 B up per parameter of the shard);
    - ``cpu_adam_s = ranks_per_host · Ψ/dp / cpu_adam_params_per_s``;
    - ``roofline_s``: the least time the host's memory allows, ``28 B × ranks_per_host · Ψ/dp /
      host_memory_gb_per_s`` (only when ``host_memory_gb_per_s`` is given, GB/s = 1e9 B/s);
    - ``total_s = pcie_s + cpu_adam_s``: nothing overlapped, as in DeepSpeed's default schedule, where the CPU
      step starts after the last gradient arrives and the next forward waits for the updated parameters. (The
      paper's one-step delayed parameter update, DPU, overlaps the CPU step with the next step's forward and
      backward after a warm-up; then only ``max(0, cpu_adam_s − GPU step)`` shows.)

    Returns ``{"host_params", "pcie_s", "cpu_adam_s", "roofline_s", "total_s"}`` (seconds). Raises
    DistlearnValueError.
    """
    n = check_int("num_params", num_params)
    dp = check_int("dp", dp)
    ranks = check_int("ranks_per_host", ranks_per_host)
    zero_stage = check_int("zero_stage", zero_stage, minimum=1, maximum=3)
    rate = check_positive("cpu_adam_params_per_s", cpu_adam_params_per_s)
    pcie = offload_traffic(n, dp=dp, zero_stage=zero_stage, offload_optimizer=True, pcie_gb_per_s=pcie_gb_per_s,
                           grad_bytes=grad_bytes)["pcie_s"]
    host_params = ranks * n / dp
    cpu_s = host_params / rate
    roofline = None
    if host_memory_gb_per_s is not None:
        roofline = CPU_ADAM_BYTES_PER_PARAM * host_params / (check_positive("host_memory_gb_per_s",
                                                                            host_memory_gb_per_s) * GB)
    return {"host_params": host_params, "pcie_s": pcie, "cpu_adam_s": cpu_s, "roofline_s": roofline,
            "total_s": pcie + cpu_s}


def estimate_memory(config: ModelConfig, *, seq_len: int, n_gpus: int, use_bf16: bool, use_offload: bool,
                    use_ckpt: bool, micro_batch_size: int = 1) -> dict:
    """The seed's grid question answered with the real formulas: bytes per GPU for ``config`` trained with
    ZeRO-3 / FSDP FULL_SHARD over ``n_gpus`` data-parallel ranks (what the seed's "divide by n_gpus" means).

    - model states: ``model_state_bytes(Ψ, dp=n_gpus, zero_stage=3, precision="mixed" if use_bf16 else "fp32")``
      — 16 B/param either way (bf16 saves activation memory and time, not model-state memory);
    - ``use_offload``: the optimizer state (fp32 master + 2 moments) moves to CPU memory: gone from the GPU;
    - activations: :func:`model_activation_bytes` with micro-batch 1 (Korthikanti; 16-bit with bf16, 4-byte
      tensors without); ``use_ckpt`` = full recomputation (layer inputs only + one layer's working set);
    - the ZeRO-3 working set: one transformer block (an FSDP unit) gathered unsharded (16-bit, or fp32), which
      the sharded totals forget.

    Returns a dict of bytes: ``params, grads, optimizer, activations, gathered, total, cpu``.
    """
    check_record("config", config, ModelConfig, "get_preset('llama3-8b')")
    use_bf16 = check_bool("use_bf16", use_bf16)
    use_offload = check_bool("use_offload", use_offload)
    use_ckpt = check_bool("use_ckpt", use_ckpt)
    n = config.num_parameters()
    states = model_state_bytes(n, dp=n_gpus, zero_stage=3, precision="mixed" if use_bf16 else "fp32",
                               offload_optimizer=use_offload)
    recompute = "full" if use_ckpt else "none"
    activations = model_activation_bytes(config, seq_len=seq_len, micro_batch_size=micro_batch_size,
                                         recompute=recompute, activation_bytes=2 if use_bf16 else 4).total
    gathered = config.layer_parameters() * (2 if use_bf16 else 4)
    total = states.total + activations + gathered
    return {"params": states.params, "grads": states.grads, "optimizer": states.optimizer,
            "activations": activations, "gathered": gathered, "total": total, "cpu": states.cpu_total}


__all__ = ["RECOMPUTE_MODES", "layer_activation_terms", "layers_on_stage", "inflight_microbatches",
           "ActivationBytes",
           "model_activation_bytes", "gradient_accumulation_steps", "layer_forward_flops", "recompute_flops",
           "offload_traffic", "offload_step_time", "CPU_ADAM_PARAMS_PER_S", "CPU_ADAM_BYTES_PER_PARAM",
           "estimate_memory",
           "layer_activation_bytes", "layer_activation_table", "ActivationTerm", "TERM_SOURCES", "TERM_SOURCES_ZH", "TERM_SOURCE_TEXTS", "layer_shape",
           "default_attention", "config_layer_bytes", "ATTENTION", "term_source"]


# Chinese glosses of the activation terms and recomputation modes, for tables: i18n.named(name, gloss).
TERM_ZH = read_only({"layernorm_inputs": "两个 LayerNorm 的输入", "qkv_input": "QKV 投影的输入", "q_k": "Q 和 K",
           "softmax_output": "softmax 的输出", "softmax_dropout_mask": "softmax 之后的 dropout 掩码",
           "attn_probs_and_v": "dropout 后的注意力概率和 V", "out_proj_input": "输出投影的输入",
           "mlp_input": "MLP 的输入", "gelu_input": "GeLU 的输入", "fc2_input": "第二个全连接层的输入",
           "dropout_masks": "注意力和 MLP 的 dropout 掩码", "total": "合计",
           "norm_inputs": "两个归一化层的输入", "q": "用于 QKᵀ 的 Q", "k": "用于 QKᵀ 的 K", "v": "用于 ·V 的 V",
           "attn_dropout_mask": "注意力的 dropout 掩码", "attn_dropout_output": "dropout 后的注意力概率",
           "down_proj_input": "down 投影的输入", "silu_input": "SiLU 的输入", "silu_output": "SiLU 的输出",
           "softmax_lse": "softmax 每行的 fp32 log-sum-exp", "up_output": "up 投影的输出"})
RECOMPUTE_ZH = read_only({"none": "不重计算", "selective": "选择性重计算", "full": "完全重计算",
                "norm-act": "重计算归一化与激活函数"})


def term_label(name: str) -> str:
    """An activation term (or a recomputation mode) with its Chinese gloss in the current language."""
    from distlearn.core.i18n import named

    check_text("name", name)
    gloss = TERM_ZH.get(name) or RECOMPUTE_ZH.get(name)
    return named(name, gloss) if gloss else name


ATTENTION_ZH = read_only({"flash": "flash 注意力", "materialised": "存下注意力分数"})


def attention_label(name: str) -> str:
    """An attention kernel name (``"flash"``, ``"materialised"``) with its Chinese gloss in the current language."""
    from distlearn.core.i18n import named

    check_text("name", name)
    return named(name, ATTENTION_ZH[name]) if name in ATTENTION_ZH else name

"""Model-state and activation memory per GPU.

Units: every function returns **bytes**. Convert with :func:`to_gb` (GB = 1e9 bytes, as the ZeRO paper and GPU
vendors' marketing use) or :func:`to_gib` (GiB = 2**30 bytes, as ``nvidia-smi``, PyTorch and DeepSpeed print).

Model states (Rajbhandari et al. 2020, "ZeRO", §3.1 and Figure 1): with mixed-precision Adam every parameter costs
2 bytes (16-bit weights) + 2 bytes (16-bit gradients) + K = 12 bytes of optimizer state (fp32 master weights,
momentum and variance), 16 bytes in all. ZeRO stage 1 shards the optimizer state over the data-parallel degree
``dp``, stage 2 also the gradients, stage 3 also the parameters. ``dp`` is the number of data-parallel replicas,
*not* the number of GPUs: with tensor or pipeline parallelism the model is first divided by ``tp × pp``.

Activations (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Table 2):
bytes per GPT transformer layer (GeLU MLP of 4h, dropout, attention scores stored) with 16-bit activations and 1-byte
dropout masks. For other blocks (Llama: SwiGLU, grouped-query attention, no dropout; FlashAttention, which stores
no scores) use :func:`distlearn.activation_memory.formulas.layer_activation_bytes` / ``config_layer_bytes``.
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core.validate import check_bool, DistlearnValueError, check_choice, check_int, check_number, check_text
from distlearn.core.guard import read_only

GB = 1e9
GiB = 2 ** 30

# bytes per parameter: (weights, gradients, master weights kept by the optimizer); read-only (a mappingproxy), so that
# a notebook cell cannot change what every later cell computes
PRECISIONS = read_only({
    "fp32": (4, 4, 0),               # everything in fp32
    "mixed": (2, 2, 4),              # ZeRO paper: fp16/bf16 weights and grads, fp32 master copy in the optimizer
    "mixed-fp32-grads": (2, 4, 4),   # Megatron-LM bf16 style: fp32 main_grad buffer (18 B with Adam; torch.autocast
                                     # is not this: it keeps fp32 weights and grads, the "fp32" row)
})
# each of PRECISIONS as a reader reads it, (English, Chinese): the bytes per parameter of weights + grads + master
PRECISION_LABELS = read_only({
    "fp32": ("fp32 (4+4 B)", "fp32（4+4 字节）"),
    "mixed": ("bf16/fp16 + fp32 master (2+2+4 B)", "bf16/fp16 + fp32 主权重（2+2+4 字节）"),
    "mixed-fp32-grads": ("bf16 + fp32 grads + master (2+4+4 B)", "bf16 + fp32 梯度 + 主权重（2+4+4 字节）"),
})
# bytes per parameter of optimizer state beyond the master weights; read-only, like PRECISIONS
OPTIMIZERS = read_only({
    "adam": 8,           # fp32 momentum + variance (AdamW likewise)
    "adam-8bit": 2,      # bitsandbytes 8-bit Adam: two 1-byte states (block-wise scales, ~0.03 B/param, ignored)
    "sgd-momentum": 4,   # one fp32 momentum buffer
    "sgd": 0,            # plain SGD keeps no state
})


@dataclass(frozen=True)
class ModelStateBytes:
    """Per-GPU bytes of model states; ``cpu_*`` are the bytes this GPU's process keeps in host memory (offload)."""

    params: float
    grads: float
    optimizer: float
    cpu_params: float = 0.0
    cpu_optimizer: float = 0.0

    @property
    def total(self) -> float:
        """GPU bytes: params + grads + optimizer."""
        return self.params + self.grads + self.optimizer

    @property
    def cpu_total(self) -> float:
        """Host bytes per GPU process moved there by offload."""
        return self.cpu_params + self.cpu_optimizer


def bytes_per_param(precision: str = "mixed", optimizer: str = "adam") -> dict[str, int]:
    """Bytes per parameter for a recipe, unsharded: ``{"params", "grads", "optimizer", "total"}``.

    ``fp32`` + ``adam`` = 4 + 4 + 8 = 16; ``mixed`` + ``adam`` = 2 + 2 + 12 = 16 (ZeRO paper, K = 12);
    ``mixed-fp32-grads`` + ``adam`` = 2 + 4 + 12 = 18. Raises DistlearnValueError for unknown names.
    """
    w, g, master = PRECISIONS[check_choice("precision", precision, tuple(PRECISIONS))]
    o = master + OPTIMIZERS[check_choice("optimizer", optimizer, tuple(OPTIMIZERS))]
    return {"params": w, "grads": g, "optimizer": o, "total": w + g + o}


def model_state_bytes(num_params: int, *, dp: int = 1, zero_stage: int = 0, precision: str = "mixed",
                      optimizer: str = "adam", offload_optimizer: bool = False,
                      offload_params: bool = False) -> ModelStateBytes:
    """Per-GPU bytes of parameters, gradients and optimizer state under ZeRO stage ``zero_stage`` over ``dp``.

    Parameters
    ----------
    num_params : Ψ, the number of parameters this data-parallel group holds (the whole model, or one tensor /
        pipeline shard of it), an integer ≥ 1 (a whole-number float such as ``7.5e9`` is accepted).
    dp : data-parallel degree (integer ≥ 1): the number of replicas that ZeRO shards over.
    zero_stage : 0 (plain DDP), 1 (optimizer states sharded), 2 (+ gradients), 3 (+ parameters; FSDP FULL_SHARD).
    precision, optimizer : recipe names, see :data:`PRECISIONS` and :data:`OPTIMIZERS`.
    offload_optimizer : optimizer state (master weights included) lives in CPU memory (ZeRO-Offload).
    offload_params : parameter shards live in CPU memory (ZeRO-Infinity); needs ``zero_stage=3``.

    Returns bytes per GPU (sharded parts are Ψ·bytes/dp exactly, as in ZeRO Figure 1; real frameworks pad each
    shard to a whole number of elements). Example: Ψ = 7.5e9, dp = 64 → 120, 31.4, 16.6, 1.9 GB for stages 0–3.

    Raises DistlearnValueError for non-integer or non-positive sizes, an unknown stage or recipe, or
    ``offload_params`` without stage 3.
    """
    offload_optimizer = check_bool("offload_optimizer", offload_optimizer)
    offload_params = check_bool("offload_params", offload_params)
    num_params = check_int("num_params", num_params, minimum=1, whole_float=True)  # 7.5e9 is fine
    dp = check_int("dp", dp, minimum=1)
    zero_stage = check_int("zero_stage", zero_stage, minimum=0, maximum=3)
    per = bytes_per_param(precision, optimizer)
    if offload_params and zero_stage != 3:
        raise DistlearnValueError(
            "offload_params", f"offload_params needs zero_stage=3 (parameters must be sharded); got zero_stage={zero_stage}.",
            f"offload_params 需要 zero_stage=3（参数必须先分片）；收到 zero_stage={zero_stage}。")
    params = num_params * per["params"] / (dp if zero_stage >= 3 else 1)
    grads = num_params * per["grads"] / (dp if zero_stage >= 2 else 1)
    optim = num_params * per["optimizer"] / (dp if zero_stage >= 1 else 1)
    cpu_params = cpu_optim = 0.0
    if offload_optimizer:
        cpu_optim, optim = optim, 0.0
    if offload_params:
        cpu_params, params = params, 0.0
    return ModelStateBytes(params, grads, optim, cpu_params, cpu_optim)


RECOMPUTE = ("none", "selective", "full")


def activation_bytes_per_layer(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int,
                               tp: int = 1, sequence_parallel: bool = False, recompute: str = "none") -> float:
    """Bytes of activations one GPT layer keeps for backward, per GPU (Korthikanti et al. 2022, Table 2).

    A GPT block as Korthikanti count it: GeLU MLP of 4h, dropout, the a·s² attention scores stored. It is *not* a
    Llama layer's count (see :func:`distlearn.activation_memory.formulas.config_layer_bytes`).

    With s = ``seq_len``, b = ``micro_batch_size``, h = ``hidden_size``, a = ``num_heads``, t = ``tp``:

    ======================  ===============================
    no parallelism          s·b·h·(34 + 5·a·s/h)
    tensor parallel         s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence par.  s·b·h·(34/t + 5·a·s/(h·t))
    selective recompute     drops the 5·a·s/h attention term
    full recompute          2·s·b·h (only the layer input; /t with sequence parallelism)
    ======================  ===============================

    The formula already counts bytes (16-bit activations, 1-byte dropout masks): do not multiply by a dtype size.
    Check value: GPT-3 175B (s = 2048, b = 1, h = 12288, a = 96) → 2736 MiB per layer without parallelism.

    Raises DistlearnValueError for non-positive sizes, a ``tp`` that does not divide ``num_heads``, or an
    unknown ``recompute`` mode.
    """
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    s = check_int("seq_len", seq_len, minimum=1)
    b = check_int("micro_batch_size", micro_batch_size, minimum=1)
    h = check_int("hidden_size", hidden_size, minimum=1)
    a = check_int("num_heads", num_heads, minimum=1)
    t = check_int("tp", tp, minimum=1)
    check_choice("recompute", recompute, RECOMPUTE)
    if a % t:
        raise DistlearnValueError("tp", f"tp = {t} must divide num_heads = {a} (heads are split across ranks).",
                                  f"tp = {t} 必须整除 num_heads = {a}（注意力头在各 rank 之间切分）。")
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sequence_parallel else 1)
    attention_scores = 0.0 if recompute == "selective" else 5 * a * s / (h * t)
    if sequence_parallel:
        return sbh * (34 / t + attention_scores)
    return sbh * (10 + 24 / t + attention_scores)


def to_gb(num_bytes: float) -> float:
    """Bytes → GB (1e9 bytes). Raises DistlearnValueError unless ``num_bytes`` is a finite number (a difference of
    bytes may be negative)."""
    return check_number("num_bytes", num_bytes) / GB


def to_gib(num_bytes: float) -> float:
    """Bytes → GiB (2**30 bytes). Raises DistlearnValueError unless ``num_bytes`` is a finite number (a difference
    of bytes may be negative)."""
    return check_number("num_bytes", num_bytes) / GiB


# Chinese glosses of the recipe names, for tables and labels: distlearn.core.i18n.named(name, RECIPE_ZH[name]).
RECIPE_ZH = read_only({"fp32": "全 fp32", "mixed": "混合精度", "mixed-fp32-grads": "混合精度，fp32 梯度",
             "adam": "Adam", "adam-8bit": "8 位 Adam", "sgd-momentum": "带动量的 SGD", "sgd": "SGD"})


def recipe_label(name: str) -> str:
    """A precision or optimizer name with its Chinese gloss in the current language (``mixed（混合精度）``)."""
    from distlearn.core.i18n import named

    check_text("name", name)
    zh = RECIPE_ZH.get(name)
    return name if zh is None or zh.lower() == name else named(name, zh)

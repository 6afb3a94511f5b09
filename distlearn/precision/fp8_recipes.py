"""What each FP8 training recipe keeps, tensor by tensor: bytes per parameter, per GPU under ZeRO, activations
and communication.

Units: **bytes** (per parameter, or per GPU). Every total is a sum over :class:`KeptTensor` rows, each with its
dtype (bytes from :data:`distlearn.precision.scaling.FORMATS`) and the sentence of its source; no total is typed in.

Recipes (:data:`RECIPES`) and their sources, quoted:

- ``bf16-mixed`` — the 16-bit baseline of Megatron-LM: bf16 weights, fp32 ``main_grad`` accumulation buffers,
  and a distributed optimizer holding fp32 master weights and Adam's two moments. Megatron Core's
  *Distributed Optimizer* documentation: "bf16 param, fp32 grads" = 18 bytes per parameter (its table row
  "6 + 12/d"), the same as :func:`distlearn.memory.formulas.bytes_per_param` ``("mixed-fp32-grads", "adam")``.
- ``te-fp8`` — Transformer Engine's FP8 linear layers in that setup (bf16 parameters, fp32 master in the
  optimizer). TE keeps the FP8 cast of each weight for the whole step: ``Linear.forward``'s docstring,
  ``is_first_microbatch``: "during FP8 training, it allows caching of the FP8 versions of the weights". It keeps
  two: the row-wise copy for the forward GEMM and a column-wise (transposed) copy for Dgrad: "Weight with
  column-wise usage is needed for dgrad GEMM" (TE v2.7 ``pytorch/module/linear.py``), because "Hopper only
  supports TN GEMMs for FP8. 'Column-wise data' is transpose of data" (``common/gemm/cublaslt_gemm.cu``).
  Blackwell's FP8 GEMMs take either layout, and there TE allocates no transpose: "with_transpose =
  columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()" (``pytorch/csrc/quantizer.cpp``), one buffer serving
  both usages. The tables count Hopper's two copies; the planner leaves the transposed one out on a B200 or GB200
  (:func:`fp8_transpose_kept`), 1 B per parameter less. This is TE's per-tensor scaling (delayed or current), the
  recipe the planner times; its MXFP8 recipe (TE's default on Blackwell) keeps separate row-wise and column-wise
  buffers, each with one scale per 32 values, and is not one of these recipes. Per-tensor scales and TE's amax
  history (1024 fp32 values per quantised tensor)
  are a few kilobytes per layer: 0 per parameter here.
- ``te-fp32-params`` — TE modules with fp32 parameters (TE's default ``params_dtype``), the row the Ultra-Scale
  Playbook tabulates ("Transformer engine | FP8 | n/a | n/a | FP32 | FP32 | FP32 + FP32 | 4 + 4 + 4 + 4 = 16
  bytes"); the Playbook leaves out the two cached FP8 copies, which are counted here.
- ``megatron-fp8-cs`` — Megatron-Core's FP8 recipe of 2025–26 (Megatron-Bridge's FP8 current-scaling performance
  recipes): ``--fp8-param-gather`` keeps the parameters themselves in FP8 ("Keep the compute param in fp8 (do not
  use any other intermediate dtype) and perform the param all-gather in fp8", Megatron-LM ``arguments.py``), 1 B,
  plus TE's transposed copy for Dgrad, 1 B; ``grad_reduce_in_fp32 = False`` keeps and reduces the gradients in
  bf16, 2 B (``param_and_grad_buffer.py``: "torch.float if grad_reduce_in_fp32, else param.dtype"); the distributed
  optimizer's fp32 master weights and Adam moments, 12 B: 16 B per parameter. The data-parallel collectives move
  those bytes: the all-gather 1 B and the reduce-scatter 2 B per parameter.
- ``deepseek-v3`` — DeepSeek-V3 technical report §3.3: "We adopt the BF16 data format instead of FP32 to track
  the first and second moments in the AdamW (Loshchilov and Hutter, 2017) optimizer, without incurring
  observable performance degradation. However, the master weights (stored by the optimizer) and gradients (used
  for batch size accumulation) are still retained in FP32 to ensure numerical stability throughout training."
  and §3.3.2: "for weights, we group and scale elements on a 128x128 block basis" — the FP8 weight with one fp32
  scale per 128 × 128 block. The Playbook's row ("DeepSeek-V3 | FP8 | FP32 | FP32 | FP8 | BF16 | BF16 + BF16 |
  4 + 4 + 1 + 2 + 2 + 2 = 15") also counts BF16 gradients, which the report does not list (its GEMMs "produce
  outputs in BF16 or FP32" and the weight gradients are accumulated in FP32): listed here, not counted.
- ``torchao-fsdp2-float8`` — torchtitan's float8 recipe on FSDP2 (``docs/float8.md``): fp32 sharded parameters
  (the master weights), fp32 gradients, fp32 Adam moments; "We cast high precision weights (1/N on each rank)
  into float8, and perform float8 all-gather to save bandwidth. At the beginning of the forward, we already have
  the unsharded float8 weights." The unsharded FP8 weights exist only for the FSDP units being computed when
  ``force_recompute_fp8_weight_in_bwd`` is on ("preventing unsharded fp8 weights from being saved for
  backward"); without it every layer's unsharded FP8 weight stays until its backward: + 1 B per parameter,
  not divided by dp.

Activations (:func:`fp8_activation_table`): only the inputs of the linear layers can be cached in FP8.
Transformer Engine caches its FP8 input ("Discard row-wise data since it is not needed in backward pass ...
Cached input tensor saved_inputmat = inputmat", TE ``linear.py``). torchao's ``matmul_with_hp_or_float8_args``
does ``ctx.save_for_backward(input_hp, weight_hp_t)``: the high-precision input, so it saves no activation
bytes. DeepSeek-V3 §3.3.3 caches the linear inputs in FP8 with 1×128 tiles, the input of the linear after
attention in "a customized E5M6 data format" shared with the attention backward, and for SwiGLU "we cache the
inputs of the SwiGLU operator and recompute its output in the backward pass" (in the MoE experts; applied here to
a dense layer to show the rule). Normalisation and attention stay in BF16 in all three ("we maintain the original
precision (e.g., BF16 or FP32) for the following components: the embedding module, the output head, MoE gating
modules, normalization operators, and attention operators").
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from distlearn.activation_memory.formulas import default_attention, layer_activation_table, layer_shape
from distlearn.core.i18n import bi
from distlearn.precision.formats import FORMATS, FloatFormat
from distlearn.core.models import ModelConfig
from distlearn.core.validate import DistlearnValueError, check_bool, check_choice, check_int, check_record
from distlearn.core.guard import read_only

E5M6 = FloatFormat("e5m6", 5, 6, storage_bits=12,
                   source="DeepSeek-V3 report §3.3.3: 'We adopt a customized E5M6 data format exclusively for these "
                          "activations' (the inputs of the linear after attention); 12 bits, no torch dtype")
ROLES = ("params", "grads", "optimizer", "fp8_weights")


def dtype_bytes(dtype: str) -> float:
    """Bytes per element of ``dtype`` (a :data:`distlearn.precision.scaling.FORMATS` key or ``"e5m6"``), from its bits."""
    return E5M6.nbytes if dtype == "e5m6" else FORMATS[check_choice("dtype", dtype, tuple(FORMATS) + ("e5m6",))].nbytes


@dataclass(frozen=True)
class KeptTensor:
    """One tensor a recipe keeps per parameter.

    ``role``: ``"params"`` (sharded by ZeRO-3), ``"grads"`` (ZeRO-2), ``"optimizer"`` (master weights and
    moments, ZeRO-1) or ``"fp8_weights"`` (FP8 copies of the weights used by the GEMMs: per model replica, never
    divided by dp). ``dtype``: a format name; ``scale_block``: elements per fp32 scale (128 × 128 for DeepSeek's
    weight blocks), None when the scales are per tensor (0 bytes per parameter). ``kept``: the recipe's source
    says it is there for the step (counted in the total); ``in_playbook``: the Ultra-Scale Playbook's table
    counts it. ``source``: the quoted sentence or file. ``tn_only``: the tensor exists only on a GPU whose FP8
    GEMMs take the TN layout alone (Hopper): TE's transposed weight copy, dropped on Blackwell
    (:data:`NON_TN_FP8_GPUS`).
    """

    name_en: str
    name_zh: str
    role: str
    dtype: str
    source: str
    kept: bool = True
    in_playbook: bool = True
    scale_block: int | None = None
    tn_only: bool = False   # kept only where FP8 GEMMs take the TN layout alone (Hopper): see NON_TN_FP8_GPUS

    @property
    def bytes_per_param(self) -> float:
        scales = 4 / self.scale_block if self.scale_block else 0.0
        return dtype_bytes(self.dtype) + scales

    @property
    def name(self) -> str:
        return bi(self.name_en, self.name_zh)


@dataclass(frozen=True)
class Recipe:
    """A training recipe: its tensors, the precision of its GEMMs, and the Playbook's total (None if no row)."""

    key: str
    title_en: str
    title_zh: str
    gemm: str
    tensors: tuple[KeptTensor, ...]
    playbook_total: float | None = None

    @property
    def title(self) -> str:
        return bi(self.title_en, self.title_zh)

    def bytes_per_param(self, fp8_transpose: bool = True) -> dict[str, float]:
        """``{role: bytes per parameter, ..., "total": ...}`` over the kept tensors (unsharded); without
        ``fp8_transpose`` (Blackwell) the ``tn_only`` tensors are left out."""
        kept = [t for t in self.tensors if t.kept and (fp8_transpose or not t.tn_only)]
        out = {r: sum(t.bytes_per_param for t in kept if t.role == r) for r in ROLES}
        out["total"] = sum(out[r] for r in ROLES)
        return out

    def playbook_sum(self) -> float:
        """The sum over the tensors the Playbook counts (its total, rebuilt tensor by tensor)."""
        return sum(dtype_bytes(t.dtype) for t in self.tensors if t.in_playbook)


_MEG = "Megatron Core, Distributed Optimizer docs: 'bf16 param, fp32 grads' → 18 B/param (6 + 12/d)"
_TE_CACHE = ("TE Linear.forward(is_first_microbatch): 'during FP8 training, it allows caching of the FP8 versions "
             "of the weights'")
_TE_T = ("TE v2.7 pytorch/module/linear.py: 'Weight with column-wise usage is needed for dgrad GEMM'; "
         "common/gemm/cublaslt_gemm.cu: 'Hopper only supports TN GEMMs for FP8. \"Column-wise data\" is transpose of "
         "data'; pytorch/csrc/quantizer.cpp: 'with_transpose = columnwise_usage && "
         "!nvte_is_non_tn_fp8_gemm_supported()' (none on Blackwell)")
_DS_OPT = ("DeepSeek-V3 §3.3.3: 'We adopt the BF16 data format instead of FP32 to track the first and second "
           "moments in the AdamW ... optimizer'")
_DS_FP32 = ("DeepSeek-V3 §3.3.3: 'the master weights (stored by the optimizer) and gradients (used for batch size "
            "accumulation) are still retained in FP32'")
_DS_W = "DeepSeek-V3 §3.3.2: 'for weights, we group and scale elements on a 128x128 block basis'"
_TT = ("torchtitan docs/float8.md: 'We cast high precision weights (1/N on each rank) into float8, and perform "
       "float8 all-gather to save bandwidth'")
_PB = "Ultra-Scale Playbook, FP8 pretraining table"
_FP8_PG = ("Megatron-LM arguments.py, --fp8-param-gather: 'Keep the compute param in fp8 (do not use any other "
           "intermediate dtype) and perform the param all-gather in fp8'; megatron/core/distributed/"
           "param_and_grad_buffer.py group_params_for_buffers (Megatron-LM of 2026; distributed_data_parallel.py at "
           "the commits Megatron-Bridge's tags pin): 'param_dtype: storage dtype (torch.uint8 for FP8 ... "
           "parameters)'; on Blackwell TE keeps no separate transpose (one buffer, 15 B per parameter in all)")
_BF16_GRAD = ("megatron/core/distributed/param_and_grad_buffer.py group_params_for_buffers (distributed_data_parallel.py "
              "at the commits the tags pin): 'grad_dtype: gradient reduction dtype (torch.float if grad_reduce_in_fp32, else param.dtype)'; Megatron-Bridge's FP8-CS "
              "performance recipes set grad_reduce_in_fp32 = False (the parameters' nominal dtype is bf16)")


def _baseline(weights_dtype: str = "bf16", master: bool = True, pb_bf16_grads: bool = True) -> list[KeptTensor]:
    rows = [KeptTensor("weights", "权重", "params", weights_dtype, _MEG),
            KeptTensor("fp32 gradients (main_grad)", "fp32 梯度（main_grad）", "grads", "fp32", _MEG)]
    if pb_bf16_grads:
        rows.append(KeptTensor("bf16 gradients (fused into main_grad, never kept)", "bf16 梯度（直接累加进 main_grad，不保留）",
                               "grads", "bf16", _PB + ": 'Gradients BF16' beside 'Accumulated gradients FP32'",
                               kept=False))
    if master:
        rows.append(KeptTensor("fp32 master weights", "fp32 主权重", "optimizer", "fp32", _MEG))
    rows += [KeptTensor("Adam first moment", "Adam 一阶矩", "optimizer", "fp32", _MEG),
             KeptTensor("Adam second moment", "Adam 二阶矩", "optimizer", "fp32", _MEG)]
    return rows


_FP8_COPIES = [KeptTensor("FP8 weights, row-wise (forward)", "FP8 权重，按行（前向）", "fp8_weights", "e4m3", _TE_CACHE,
                          in_playbook=False),
               KeptTensor("FP8 weights, transposed (Dgrad)", "FP8 权重，转置（Dgrad）", "fp8_weights", "e4m3", _TE_T,
                          in_playbook=False, tn_only=True)]

RECIPES: dict[str, Recipe] = read_only({r.key: r for r in [
    Recipe("bf16-mixed", "bf16 mixed precision (Megatron-LM)", "bf16 混合精度（Megatron-LM）", "bf16",
           tuple(_baseline()), playbook_total=20),
    Recipe("te-fp8", "Transformer Engine FP8, bf16 params", "Transformer Engine FP8，bf16 参数", "fp8",
           tuple(KeptTensor(t.name_en, t.name_zh, t.role, t.dtype, t.source, t.kept, False)
                 for t in _baseline()) + tuple(_FP8_COPIES)),
    Recipe("te-fp32-params", "Transformer Engine FP8, fp32 params", "Transformer Engine FP8，fp32 参数", "fp8",
           tuple([KeptTensor("fp32 weights (also the master)", "fp32 权重（同时是主权重）", "params", "fp32",
                             _PB + ": 'Transformer engine ... Model weights FP32'"),
                  KeptTensor("fp32 gradients", "fp32 梯度", "grads", "fp32", _PB + ": 'Gradients FP32'"),
                  KeptTensor("Adam first moment", "Adam 一阶矩", "optimizer", "fp32", _PB),
                  KeptTensor("Adam second moment", "Adam 二阶矩", "optimizer", "fp32", _PB)] + _FP8_COPIES),
           playbook_total=16),
    Recipe("megatron-fp8-cs", "Megatron-Core FP8, FP8 primary weights, bf16 gradients",
           "Megatron-Core FP8：FP8 主权重，bf16 梯度", "fp8",
           (KeptTensor("FP8 weights: the parameters themselves (row-wise)", "FP8 权重：参数本身（按行）", "params",
                       "e4m3", _FP8_PG, in_playbook=False),
            _FP8_COPIES[1],  # TE's transposed copy for Dgrad
            KeptTensor("bf16 gradients (main_grad)", "bf16 梯度（main_grad）", "grads", "bf16", _BF16_GRAD,
                       in_playbook=False))
           + tuple(dataclasses.replace(t, in_playbook=False) for t in _baseline() if t.role == "optimizer")),
    Recipe("deepseek-v3", "DeepSeek-V3 FP8 (report §3.3)", "DeepSeek-V3 FP8（技术报告 §3.3）", "fp8",
           (KeptTensor("fp32 master weights", "fp32 主权重", "optimizer", "fp32", _DS_FP32),
            KeptTensor("fp32 gradients (accumulation)", "fp32 梯度（累加）", "grads", "fp32", _DS_FP32),
            KeptTensor("bf16 gradients (Playbook only)", "bf16 梯度（仅《超大规模训练手册》计入）", "grads", "bf16",
                       _PB + ": 'Gradients BF16'; not in the report", kept=False),
            KeptTensor("AdamW first moment, bf16", "AdamW 一阶矩，bf16", "optimizer", "bf16", _DS_OPT),
            KeptTensor("AdamW second moment, bf16", "AdamW 二阶矩，bf16", "optimizer", "bf16", _DS_OPT),
            KeptTensor("FP8 weights + 128×128 block scales", "FP8 权重 + 128×128 分块缩放因子", "fp8_weights", "e4m3",
                       _DS_W, scale_block=128 * 128)),
           playbook_total=15),
    Recipe("torchao-fsdp2-float8", "torchao float8 + FSDP2 float8 all-gather", "torchao float8 + FSDP2 的 float8 AllGather",
           "fp8",
           (KeptTensor("fp32 sharded weights (also the master)", "fp32 分片权重（同时是主权重）", "params", "fp32", _TT,
                       in_playbook=False),
            KeptTensor("fp32 gradients", "fp32 梯度", "grads", "fp32",
                       "FSDP2 reduce-scatters into the fp32 sharded gradients (reduce_dtype fp32)", in_playbook=False),
            KeptTensor("Adam first moment", "Adam 一阶矩", "optimizer", "fp32", "torch.optim.AdamW: state like the param",
                       in_playbook=False),
            KeptTensor("Adam second moment", "Adam 二阶矩", "optimizer", "fp32", "torch.optim.AdamW: state like the param",
                       in_playbook=False),
            KeptTensor("unsharded FP8 weights saved for backward", "为反向保存的未分片 FP8 权重", "fp8_weights", "e4m3",
                       "torchtitan: force_recompute_fp8_weight_in_bwd 'preventing unsharded fp8 weights from being "
                       "saved for backward' (recommended): not kept", kept=False, in_playbook=False))),
]})


def get_recipe(key: str) -> Recipe:
    """The recipe called ``key`` (one of :data:`RECIPES`). Raises DistlearnValueError listing the names."""
    return RECIPES[check_choice("recipe", key, tuple(RECIPES))]


# GPUs whose FP8 GEMMs take every layout, so Transformer Engine keeps one FP8 buffer per weight and no transposed
# copy: TE pytorch/utils.py is_non_tn_fp8_gemm_supported (v2.7 onwards): "(10, 0) <= device_capability < (12, 0) or
# device_capability >= (13, 0)", and csrc/quantizer.cpp: "with_transpose = columnwise_usage &&
# !is_non_tn_fp8_gemm_supported". The B200 and GB200 are compute capability 10.0; Hopper (9.0) keeps the copy.
NON_TN_FP8_GPUS = ("b200", "gb200")


def fp8_transpose_kept(gpu_name: str) -> bool:
    """Whether Transformer Engine keeps a separate transposed FP8 copy of each weight on the GPU called
    ``gpu_name`` (a preset name of :mod:`distlearn.core.hardware`, e.g. ``"h100-80gb"``): False for the GPUs of
    :data:`NON_TN_FP8_GPUS` (name prefix, any case), True otherwise ("Hopper only supports TN GEMMs for FP8", TE's cublaslt_gemm.cu).
    Raises DistlearnValueError unless ``gpu_name`` is a string."""
    if not isinstance(gpu_name, str):
        raise DistlearnValueError("gpu_name", f"gpu_name must be a GPU's name (a string), got {gpu_name!r}.",
                                  f"gpu_name 必须是 GPU 的名称（字符串），收到 {gpu_name!r}。")
    return not gpu_name.lower().startswith(NON_TN_FP8_GPUS)


def bytes_per_param(recipe: str, *, fp8_transpose: bool = True) -> dict[str, float]:
    """Unsharded bytes per parameter of a recipe: ``{"params", "grads", "optimizer", "fp8_weights", "total"}``.

    For the planner (chapter 14), on Hopper: bf16-mixed 18, te-fp8 20, te-fp32-params 18, megatron-fp8-cs 16
    (1 + 1 + 2 + 12), deepseek-v3 13.000244 (4 + 4 + 2 + 2 + 1 + 4/16384), torchao-fsdp2-float8 16. With
    ``fp8_transpose=False`` (Blackwell, :func:`fp8_transpose_kept`) TE's transposed copy is left out: te-fp8 19,
    te-fp32-params 17, megatron-fp8-cs 15. Raises DistlearnValueError for an unknown recipe or a non-bool
    ``fp8_transpose``.
    """
    return dict(_recipe_bytes(get_recipe(recipe).key, check_bool("fp8_transpose", fp8_transpose)))  # a copy


@functools.lru_cache(maxsize=None)
def _recipe_bytes(key: str, fp8_transpose: bool = True) -> tuple[tuple[str, float], ...]:
    """``RECIPES[key].bytes_per_param(fp8_transpose)`` as items, computed once per recipe and layout rule (the
    recipes are read-only; the planner asks for them thousands of times per search)."""
    return tuple(RECIPES[key].bytes_per_param(fp8_transpose).items())


@dataclass(frozen=True)
class RecipeStateBytes:
    """Per-GPU bytes of a recipe's model states under ZeRO (``fp8_weights`` are per replica, not sharded)."""

    params: float
    grads: float
    optimizer: float
    fp8_weights: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.fp8_weights


def recipe_state_bytes(recipe: str, num_params: int, *, dp: int = 1, zero_stage: int = 0,
                       fp8_transpose: bool = True) -> RecipeStateBytes:
    """Bytes per GPU of ``recipe``'s model states for ``num_params`` parameters (this GPU's tensor/pipeline shard)
    under ZeRO stage ``zero_stage`` over ``dp`` data-parallel ranks: stage ≥ 1 divides the optimizer state (master
    weights and moments) by dp, ≥ 2 also the gradients, 3 also the parameters, as in
    :func:`distlearn.memory.formulas.model_state_bytes`. The FP8 weight copies are made from the (all-gathered) weights of
    each replica and are never divided by dp; ``fp8_transpose`` as in :func:`bytes_per_param` (False on Blackwell).
    Raises DistlearnValueError."""
    per = bytes_per_param(recipe, fp8_transpose=fp8_transpose)
    n = check_int("num_params", num_params, minimum=1, whole_float=True)
    d = check_int("dp", dp)
    z = check_int("zero_stage", zero_stage, minimum=0, maximum=3)
    return RecipeStateBytes(n * per["params"] / (d if z >= 3 else 1), n * per["grads"] / (d if z >= 2 else 1),
                            n * per["optimizer"] / (d if z >= 1 else 1), n * per["fp8_weights"])


# ---------------------------------------------------------------- activations
ACTIVATION_RECIPES = ("bf16-mixed", "te-fp8", "torchao-fsdp2-float8", "deepseek-v3")
# the activation rules each recipe of RECIPES follows: te-fp32-params and megatron-fp8-cs run the same Transformer Engine
# linear layers as te-fp8 (the weights' dtype changes the weights, not what a layer caches for backward)
ACTIVATION_RULES = read_only({**{k: k for k in ACTIVATION_RECIPES}, "te-fp32-params": "te-fp8",
                              "megatron-fp8-cs": "te-fp8"})
LINEAR_INPUTS = ("qkv_input", "mlp_input", "down_proj_input", "fc2_input")   # inputs only a linear layer keeps
TILE = 128   # DeepSeek-V3's 1×128 activation tiles: one fp32 scale per 128 elements


@dataclass(frozen=True)
class FP8ActivationTerm:
    """One saved tensor of a layer: ``bf16_bytes`` in the 16-bit baseline, ``fp8_bytes`` under the recipe,
    ``rule_en``/``rule_zh``: why."""

    name: str
    bf16_bytes: float
    fp8_bytes: float
    rule_en: str
    rule_zh: str


def _rule(recipe: str, term: str, attention: str) -> tuple[float | None, str, str]:
    """(bytes per element or None for unchanged, English rule, Chinese rule) for one term under one recipe."""
    keep = (None, "kept in bf16 (not a linear layer's own input)", "保持 bf16（不是线性层独有的输入）")
    if recipe in ("bf16-mixed", "torchao-fsdp2-float8"):
        if recipe == "torchao-fsdp2-float8" and (term in LINEAR_INPUTS or term == "out_proj_input"):
            return (None, "torchao saves the high-precision input (save_for_backward(input_hp, ...))",
                    "torchao 为反向保存高精度输入（save_for_backward(input_hp, ...)）")
        return keep
    if recipe == "te-fp8":
        if term in LINEAR_INPUTS:
            return 1.0, "cached as the FP8 GEMM input", "以 FP8 GEMM 输入的形式缓存"
        if term == "out_proj_input":
            if attention == "flash":
                return (-1.0, "attention keeps its bf16 output O; the projection adds an FP8 copy",
                        "注意力保留 bf16 输出 O；输出投影再存一份 FP8 副本")
            return 1.0, "cached as the FP8 GEMM input", "以 FP8 GEMM 输入的形式缓存"
        return keep
    # deepseek-v3
    tile = 1 + 4 / TILE
    if term in LINEAR_INPUTS and term != "down_proj_input":
        return tile, "FP8, 1×128 tiles", "FP8，1×128 分块"
    if term == "out_proj_input":
        return (E5M6.nbytes + 4 / TILE, "E5M6 (12 bits), one copy shared with the attention backward",
                "E5M6（12 位），与注意力反向共用一份")
    if term in ("silu_input", "up_output", "swiglu_input"):
        return tile, "SwiGLU input cached in FP8, 1×128 tiles", "SwiGLU 输入以 FP8 缓存，1×128 分块"
    if term in ("silu_output", "down_proj_input"):
        return 0.0, "SwiGLU output recomputed in backward", "SwiGLU 输出在反向时重计算"
    return keep


def fp8_activation_table(recipe: str, *, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int,
                         **layer) -> list[FP8ActivationTerm]:
    """The terms of :func:`distlearn.activation_memory.formulas.layer_activation_table` (same keyword arguments) under an FP8
    recipe, per GPU. Baseline bytes are the table's own; a recipe changes only linear inputs (and DeepSeek-V3's
    SwiGLU). ``te-fp8`` with flash attention *adds* a byte per element of the attention output (its bf16 copy stays
    for the attention backward). Raises DistlearnValueError for an unknown recipe (one of
    :data:`ACTIVATION_RECIPES`)."""
    check_choice("recipe", recipe, ACTIVATION_RECIPES)
    attention = layer.get("attention", "materialised")
    out = []
    for t in layer_activation_table(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size,
                                    num_heads=num_heads, **layer):
        per, en, zh = _rule(recipe, t.name, attention)
        if per is None:
            fp8 = t.nbytes
        elif per < 0:      # an FP8 copy on top of the bf16 tensor
            fp8 = t.nbytes + t.elements * 1.0
        else:
            fp8 = t.elements * per
        out.append(FP8ActivationTerm(t.name, t.nbytes, fp8, en, zh))
    return out


def config_layer_fp8_bytes(config: ModelConfig, recipe: str, *, seq_len: int, micro_batch_size: int, tp: int = 1,
                           sequence_parallel: bool = False, recompute: str = "none", attention: str | None = None,
                           activation_bytes: int = 2, swiglu: str = "unfused") -> float:
    """Bytes per GPU one layer of ``config`` (a :class:`~distlearn.core.models.ModelConfig`) keeps for backward under
    the FP8 recipe ``recipe`` (a key of :data:`RECIPES`, its rules from :data:`ACTIVATION_RULES`): the sum of
    :func:`fp8_activation_table`'s ``fp8_bytes``, with the keyword arguments of
    :func:`distlearn.activation_memory.formulas.config_layer_bytes` (``attention`` defaults to the model's). The
    planner's activations under an FP8 recipe (chapter 14): Transformer Engine caches each linear layer's input in
    FP8, so a te-fp8 layer keeps fewer bytes than the same layer in bf16. Raises DistlearnValueError for an unknown
    recipe, a ``config`` that is not a ModelConfig or a bad shape."""
    check_record("config", config, ModelConfig, "get_preset('llama3-8b')")
    rules = ACTIVATION_RULES[check_choice("recipe", recipe, tuple(ACTIVATION_RULES))]
    return sum(t.fp8_bytes for t in fp8_activation_table(
        rules, seq_len=seq_len, micro_batch_size=micro_batch_size, tp=tp, sequence_parallel=sequence_parallel,
        recompute=recompute, attention=attention or default_attention(config), activation_bytes=activation_bytes,
        swiglu=swiglu, **layer_shape(config)))


# ---------------------------------------------------------------- communication
@dataclass(frozen=True)
class CommItem:
    """A collective of a recipe: bytes per element on the wire with FP8 and in the bf16 / fp32 baseline."""

    recipe: str
    collective: str
    what_en: str
    what_zh: str
    fp8_bytes: float
    baseline_bytes: float
    baseline: str
    source: str


COMMUNICATION = (
    CommItem("torchao-fsdp2-float8", "all_gather", "FSDP parameter all-gather", "FSDP 参数 AllGather",
             dtype_bytes("e4m3"), dtype_bytes("bf16"), "bf16 param_dtype", _TT),
    CommItem("torchao-fsdp2-float8", "all_gather", "FSDP parameter all-gather", "FSDP 参数 AllGather",
             dtype_bytes("e4m3"), dtype_bytes("fp32"), "fp32 params", _TT),
    CommItem("torchao-fsdp2-float8", "reduce_scatter", "FSDP gradient reduce-scatter", "FSDP 梯度 ReduceScatter",
             dtype_bytes("fp32"), dtype_bytes("fp32"), "reduce_dtype fp32",
             "float8 changes the weights' all-gather only; gradients are reduced in reduce_dtype"),
    CommItem("deepseek-v3", "all_to_all", "MoE dispatch (activations before the up-projection)",
             "MoE 分发（上投影之前的激活值）", dtype_bytes("e4m3") + 4 / TILE, dtype_bytes("bf16"), "bf16",
             "DeepSeek-V3 §3.3.3: 'we quantize the activation before MoE up-projections into FP8 and then apply "
             "dispatch components'"),
    CommItem("deepseek-v3", "all_to_all", "MoE backward: activation gradient before the down-projection",
             "MoE 反向：下投影之前的激活值梯度", dtype_bytes("e4m3") + 4 / TILE, dtype_bytes("bf16"), "bf16",
             "DeepSeek-V3 §3.3.3, right after the FP8 dispatch: 'A similar strategy is applied to the activation "
             "gradient before MoE down-projections' (FP8, 1 × 128 tiles, power-of-2 scales)"),
    CommItem("deepseek-v3", "all_to_all", "MoE combine (forward and backward)", "MoE 合并（前向与反向）",
             dtype_bytes("bf16"), dtype_bytes("bf16"), "bf16",
             "DeepSeek-V3 §3.3.3: 'For both the forward and backward combine components, we retain them in BF16'"),
)

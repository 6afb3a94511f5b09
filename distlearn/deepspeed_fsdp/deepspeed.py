"""DeepSpeed in practice: a sourced comparison with DDP / FSDP, the ZeRO ↔ FSDP mapping, config generation, and
DeepSpeed's own model-state estimators written out as formulas.

Importing this module does not import DeepSpeed (a 35 MB package that probes compilers on first use): functions
that need it import it inside, as ``import deepspeed`` — an absolute import of the real package, never this module.

Versions checked: **torch 2.13.0**, **DeepSpeed 0.19.8** (November 2026). :data:`COMPARISON` gives each claim a
source (documentation page, or the file of the installed package where the behaviour is coded) and the version it
was checked against; :func:`verify_claims` re-checks the ones that can be read from the installed packages, and a
test runs it, so the table cannot silently go stale (seed mistake 12).

DeepSpeed is a product name: it stays in English in Chinese text too (never "深度速度", seed mistake 13).
"""
from __future__ import annotations

import contextlib
import inspect
import io
import os
from dataclasses import dataclass

from distlearn.memory.formulas import GiB
from distlearn.core.validate import (MAX_WORLD_SIZE, check_bool, check_record, checks, each, mapping, record, DistlearnValueError, check_choice, check_int,
                                     check_number, check_positive, check_text)
from distlearn.core.guard import read_only

TORCH_VERSION = "2.13.0"
DEEPSPEED_VERSION = "0.19.8"
FRAMEWORKS = ("DDP", "FSDP1", "FSDP2", "ZeRO-1", "ZeRO-2", "ZeRO-3", "ZeRO-Infinity")

_PT = "https://docs.pytorch.org/docs/2.13/"
_DS = "https://www.deepspeed.ai/docs/config-json/"
SOURCES = read_only({
    "ddp": _PT + "notes/ddp.html",
    "fsdp1": _PT + "fsdp.html",
    "fsdp2": _PT + "distributed.fsdp.fully_shard.html",
    "pipelining": _PT + "distributed.pipelining.html",
    "zero_paper": "Rajbhandari et al. 2020, ZeRO, SC20, §5 (arXiv:1910.02054)",
    "offload_paper": "Ren et al. 2021, ZeRO-Offload, USENIX ATC (arXiv:2101.06840)",
    "infinity_paper": "Rajbhandari et al. 2021, ZeRO-Infinity, SC21 (arXiv:2104.07857)",
    "ds_config": _DS,
    "ds_zero": "https://deepspeed.readthedocs.io/en/latest/zero3.html",
    "ds_pipe": "deepspeed/runtime/pipe/engine.py (0.19.8): 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'",
    "ds_stage3": "deepspeed/runtime/zero/stage3.py (0.19.8): optimizer swapping to NVMe lives only in stage 3",
    "fsdp1_api": "torch/distributed/fsdp/api.py (2.13.0): ShardingStrategy, CPUOffload",
    "fsdp2_api": "torch/distributed/fsdp/_fully_shard/_fsdp_api.py (2.13.0): CPUOffloadPolicy, MixedPrecisionPolicy",
})


@dataclass(frozen=True)
class Claim:
    """One cell of the comparison: ``framework`` × ``feature`` → ``value`` (en / zh), with where it comes from."""

    feature: str
    framework: str
    en: str
    zh: str
    source: str
    version: str
    verify: str | None = None   # name of a check in _VERIFIERS, run against the installed packages


FEATURES = read_only({
    "optimizer_sharded": ("Optimizer states sharded", "优化器状态分片"),
    "grads_sharded": ("Gradients sharded", "梯度分片"),
    "params_sharded": ("Parameters sharded", "参数分片"),
    "cpu_offload": ("CPU offload", "CPU 卸载"),
    "nvme_offload": ("NVMe offload", "NVMe 卸载"),
    "pipeline": ("Pipeline parallelism", "流水线并行"),
    "api": ("How you use it", "使用方式"),
})


def _row(feature, values, source, version, verify=None):
    return [Claim(feature, fw, en, zh, source if isinstance(source, str) else source[i],
                  version if isinstance(version, str) else version[i], verify)
            for i, (fw, (en, zh)) in enumerate(zip(FRAMEWORKS, values))]


_PT_V, _DS_V = f"torch {TORCH_VERSION}", f"DeepSpeed {DEEPSPEED_VERSION}"
_VERSIONS = [_PT_V, _PT_V, _PT_V, _DS_V, _DS_V, _DS_V, _DS_V]
_SRC_DOCS = [SOURCES["ddp"], SOURCES["fsdp1"], SOURCES["fsdp2"], SOURCES["zero_paper"], SOURCES["zero_paper"],
             SOURCES["zero_paper"], SOURCES["infinity_paper"]]
NO, YES = ("no", "否"), ("yes", "是")

COMPARISON: list[Claim] = (
    read_only(_row("optimizer_sharded", [NO, YES, YES, YES, YES, YES, YES], _SRC_DOCS, _VERSIONS)
    + _row("grads_sharded", [NO, YES, YES, NO, YES, YES, YES], _SRC_DOCS, _VERSIONS)
    + _row("params_sharded", [NO, ("yes (FULL_SHARD; SHARD_GRAD_OP only outside forward/backward)",
                                   "是（FULL_SHARD；SHARD_GRAD_OP 仅在前向/反向之外分片）"),
                              ("yes (per parameter, DTensor on dim 0 unless shard_placement_fn picks another)",
                               "是（逐参数，DTensor 默认按第 0 维，shard_placement_fn 可另选维度）"),
                              NO, NO, YES, YES], _SRC_DOCS, _VERSIONS, "fsdp1_strategies")
    + _row("cpu_offload", [NO, ("params + grads, optimizer step on CPU (CPUOffload)",
                                "参数 + 梯度，优化器在 CPU 上更新（CPUOffload）"),
                           ("params + grads + optimizer (CPUOffloadPolicy)", "参数 + 梯度 + 优化器（CPUOffloadPolicy）"),
                           ("optimizer states (offload_optimizer)", "优化器状态（offload_optimizer）"),
                           ("optimizer states (offload_optimizer)", "优化器状态（offload_optimizer）"),
                           ("optimizer + params (offload_param)", "优化器 + 参数（offload_param）"),
                           ("optimizer + params", "优化器 + 参数")],
           [SOURCES["ddp"], SOURCES["fsdp1_api"], SOURCES["fsdp2_api"], SOURCES["ds_config"], SOURCES["ds_config"],
            SOURCES["ds_config"], SOURCES["ds_config"]], _VERSIONS, "cpu_offload_apis")
    + _row("nvme_offload", [NO, NO, NO, NO, NO, ("yes (offload_param / offload_optimizer device nvme)",
                                                 "是（offload_param / offload_optimizer 的 device 设为 nvme）"),
                            ("yes: this is ZeRO-Infinity", "是：这就是 ZeRO-Infinity")],
           [SOURCES["ddp"], SOURCES["fsdp1_api"], SOURCES["fsdp2_api"], SOURCES["ds_stage3"], SOURCES["ds_stage3"],
            SOURCES["ds_stage3"], SOURCES["infinity_paper"]], _VERSIONS, "nvme_stage3_only")
    + _row("pipeline", [("compose with torch.distributed.pipelining", "可与 torch.distributed.pipelining 组合"),
                        ("compose with torch.distributed.pipelining", "可与 torch.distributed.pipelining 组合"),
                        ("compose with torch.distributed.pipelining (DeviceMesh)",
                         "可与 torch.distributed.pipelining 组合（DeviceMesh）"),
                        ("yes: deepspeed.pipe.PipelineModule", "支持：deepspeed.pipe.PipelineModule"),
                        ("not with DeepSpeed's pipeline engine", "不能与 DeepSpeed 流水线引擎同用"),
                        ("not with DeepSpeed's pipeline engine", "不能与 DeepSpeed 流水线引擎同用"),
                        ("not with DeepSpeed's pipeline engine", "不能与 DeepSpeed 流水线引擎同用")],
           [SOURCES["pipelining"]] * 3 + [SOURCES["ds_pipe"]] * 4, _VERSIONS, "pipeline_support")
    + _row("api", [("wrap the model: DistributedDataParallel(model)", "包装整个模型：DistributedDataParallel(model)"),
                   ("wrap units: FullyShardedDataParallel + auto_wrap_policy, FlatParameter",
                    "按单元包装：FullyShardedDataParallel + auto_wrap_policy，FlatParameter"),
                   ("call fully_shard(module) per block, then on the root", "对每个 block 调用 fully_shard(module)，再对根模块调用"),
                   ("deepspeed.initialize(model, config=JSON)", "调用 deepspeed.initialize(model, config=JSON)"),
                   ("deepspeed.initialize(model, config=JSON)", "调用 deepspeed.initialize(model, config=JSON)"),
                   ("deepspeed.initialize(...) + zero.Init for big models", "deepspeed.initialize(...) + 大模型用 zero.Init"),
                   ("as ZeRO-3, offload devices in the config", "同 ZeRO-3，在配置中指定卸载设备")],
           [SOURCES["ddp"], SOURCES["fsdp1"], SOURCES["fsdp2"], SOURCES["ds_config"], SOURCES["ds_config"],
            SOURCES["ds_zero"], SOURCES["ds_zero"]], _VERSIONS, "apis_exist"))
)

# ZeRO stage ↔ FSDP: (ZeRO, FSDP1 ShardingStrategy, FSDP2 fully_shard arguments, note en, note zh). Sources: torch
# 2.13 torch/distributed/fsdp/_fully_shard/_fully_shard.py (fully_shard's reshard_after_forward: bool | int | None,
# default None = True except the root; shard_placement_fn default Shard(0)); DeepSpeed 0.19.8
# runtime/zero/partition_parameters.py (_partition_param_sec: hpZ's secondary partition) and runtime/config.py
# (_REMOVED_ZERO_CONFIG_KEYS: MiCS removed); Wang et al. 2023, ZeRO++ (arXiv:2306.10209) §3.2; Zhang et al. 2022,
# MiCS (arXiv:2205.00119). Checked on the real engines by tests/test_zero_comm.py (hierarchical collectives).
ZERO_FSDP_MAPPING = read_only([
    ("ZeRO-0 (DDP)", "NO_SHARD (deprecated)", "— (use DDP / replicate)",
     "nothing sharded; FSDP1 NO_SHARD warns it is deprecated", "不分片；FSDP1 的 NO_SHARD 会提示已弃用"),
    ("ZeRO-1", "— (none)", "— (none)",
     "FSDP always shards gradients together with optimizer states: there is no optimizer-only mode",
     "FSDP 总是把梯度和优化器状态一起分片：没有只分片优化器状态的模式"),
    ("ZeRO-2", "SHARD_GRAD_OP", "fully_shard(m, reshard_after_forward=False)",
     "close, not equal: ZeRO-2 keeps the 16-bit parameters whole all the time and all-gathers them once per step; "
     "FSDP keeps them gathered only from forward to the end of backward and gathers them again for every "
     "micro-batch", "接近但不相同：ZeRO-2 始终保留完整的 16 位参数，每步只 AllGather 一次；FSDP 只在前向到反向结束期间保留"
     "完整参数，每个微批次都要重新 AllGather"),
    ("ZeRO-3", "FULL_SHARD", "fully_shard(m) (reshard_after_forward=None: True for every module but the root)",
     "parameters gathered per unit for forward and again for backward, then freed; FSDP2 keeps the root gathered "
     "from forward to backward", "参数按单元在前向、反向各 AllGather 一次，用完即释放；FSDP2 的根模块从前向到反向一直保持收集状态"),
    ("ZeRO++ hpZ (zero_hpz_partition_size = GPUs per node)", "— (none)",
     "fully_shard(m, reshard_after_forward=<GPUs per node>)",
     "ZeRO-3's partition over all ranks stays (optimizer states, gradients, the primary parameter shard); after "
     "forward each rank also keeps a secondary shard of the parameters over its node, so the backward all-gather "
     "runs inside the node. Gradients are still reduce-scattered over all ranks. Not HSDP",
     "ZeRO-3 在所有 rank 上的分片保持不变（优化器状态、梯度、主参数分片）；前向之后每个 rank 还在本节点内保留一份参数的"
     "次级分片，于是反向的 AllGather 只在节点内进行。梯度仍在所有 rank 上做 ReduceScatter。这不是 HSDP"),
    ("MiCS (removed in DeepSpeed 0.19.8)", "HYBRID_SHARD / _HYBRID_SHARD_ZERO2",
     "fully_shard(m, mesh=2-D DeviceMesh) (HSDP)",
     "all model states sharded within a group, replicated across groups: gathers and reduce-scatters inside the "
     "group, an all-reduce of the gradient shards across groups. DeepSpeed 0.19.8 rejects mics_shard_size",
     "所有模型状态在组内分片、组间复制：AllGather 和 ReduceScatter 在组内进行，梯度分片在组间做 AllReduce。"
     "DeepSpeed 0.19.8 会拒绝 mics_shard_size"),
])

# Chinese of the English words inside ZERO_FSDP_MAPPING's first three columns (the rest are API names).
MAPPING_ZH = read_only({"ZeRO-0 (DDP)": "ZeRO-0（DDP）", "NO_SHARD (deprecated)": "NO_SHARD（已弃用）",
              "— (use DDP / replicate)": "—（改用 DDP / replicate）", "— (none)": "—（无）",
              "fully_shard(m) (reshard_after_forward=True, the default)":
                  "fully_shard(m)（默认 reshard_after_forward=True）",
              "ZeRO++ hpZ / MiCS (shard inside a node)": "ZeRO++ hpZ / MiCS（在节点内分片）",
              "fully_shard(m, mesh=2-D DeviceMesh) (HSDP)": "fully_shard(m, mesh=二维 DeviceMesh)（HSDP）",
              "fully_shard(m) (reshard_after_forward=None: True for every module but the root)":
                  "fully_shard(m)（reshard_after_forward=None：除根模块外都取 True）",
              "ZeRO++ hpZ (zero_hpz_partition_size = GPUs per node)":
                  "ZeRO++ hpZ（zero_hpz_partition_size = 每个节点的 GPU 数）",
              "fully_shard(m, reshard_after_forward=<GPUs per node>)":
                  "fully_shard(m, reshard_after_forward=<每个节点的 GPU 数>)",
              "MiCS (removed in DeepSpeed 0.19.8)": "MiCS（DeepSpeed 0.19.8 已移除）"})


def mapping_rows(lang: str = "en") -> list[tuple[str, str, str, str]]:
    """:data:`ZERO_FSDP_MAPPING` in ``"en"`` or ``"zh"``: (ZeRO, FSDP1, FSDP2, note) per row."""
    check_choice("lang", lang, ("en", "zh"))
    zh = (lambda s: MAPPING_ZH.get(s, s)) if lang == "zh" else (lambda s: s)
    return [(zh(z), zh(f1), zh(f2), en if lang == "en" else cn) for z, f1, f2, en, cn in ZERO_FSDP_MAPPING]


def prepare_deepspeed() -> None:
    """Tell DeepSpeed to use its CPU accelerator when there is no GPU (it would otherwise log a warning on import):
    sets ``DS_ACCELERATOR=cpu`` unless already set. Call it before ``import deepspeed``, as the labs and
    :mod:`distlearn.deepspeed_fsdp.lab_preload` do."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


INSTALL_HINT_EN = ("DeepSpeed is not installed, and this function runs DeepSpeed's own code. Install it with "
                   "`pip install deepspeed==0.19.8` (or `make lab`, which installs it).")
INSTALL_HINT_ZH = ("未安装 DeepSpeed，而这个函数要运行 DeepSpeed 自己的代码。请用 `pip install deepspeed==0.19.8` 安装"
                   "（或运行 `make lab`，它会安装 DeepSpeed）。")


class DeepSpeedMissingError(ImportError):
    """Raised (message in English and Chinese) when a function needs DeepSpeed and it cannot be imported."""

    def __init__(self, cause: BaseException | None = None):
        detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
        super().__init__(f"{INSTALL_HINT_EN}{detail}\n{INSTALL_HINT_ZH}", name="deepspeed")


def require_deepspeed():
    """Prepare and import DeepSpeed; raise :class:`DeepSpeedMissingError` (an ImportError, bilingual, with the
    install command) when it is not installed."""
    prepare_deepspeed()
    try:
        import deepspeed
    except ImportError as exc:
        raise DeepSpeedMissingError(exc) from exc
    return deepspeed


# ---------------------------------------------------------------- verification against the installed packages
def _v_fsdp1_strategies():
    from torch.distributed.fsdp import ShardingStrategy

    return {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "_HYBRID_SHARD_ZERO2"} <= set(
        ShardingStrategy.__members__)


def _v_cpu_offload_apis():
    from torch.distributed.fsdp import CPUOffload, CPUOffloadPolicy  # noqa: F401  (FSDP1, FSDP2)
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    fields = DeepSpeedZeroConfig.model_fields
    return "offload_params" in inspect.signature(CPUOffload).parameters and {"offload_param",
                                                                             "offload_optimizer"} <= set(fields)


def _v_nvme_stage3_only():
    import deepspeed.runtime.zero.stage3 as s3
    import deepspeed.runtime.zero.stage_1_and_2 as s12
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum

    return ("nvme" in OffloadDeviceEnum.__members__ and "swap" in inspect.getsource(s3)
            and "swap" not in inspect.getsource(s12))


def _v_pipeline_support():
    import deepspeed.runtime.pipe.engine as pe
    from torch.distributed.pipelining import Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B  # noqa: F401

    return "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" in inspect.getsource(pe)


def _v_apis_exist():
    import deepspeed
    from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard  # noqa: F401

    return callable(deepspeed.initialize) and hasattr(deepspeed.zero, "Init")


def _v_fsdp2_defaults():
    from torch.distributed.fsdp import fully_shard

    sig = inspect.signature(fully_shard)
    doc = fully_shard.__doc__ or ""
    return (sig.parameters["reshard_after_forward"].default is None and sig.parameters["shard_placement_fn"].default
            is None and "set to ``True`` for non-root modules and ``False``" in doc and "Shard(0)" in doc
            and "If an ``int``" in doc)


def _v_hpz_and_mics():
    import deepspeed.runtime.config as ds_config
    import deepspeed.runtime.zero.partition_parameters as pp
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    return ("zero_hpz_partition_size" in DeepSpeedZeroConfig.model_fields and "_partition_param_sec" in
            inspect.getsource(pp) and "mics_shard_size" in getattr(ds_config, "_REMOVED_ZERO_CONFIG_KEYS", {}))


def _v_stage12_reduction():
    import deepspeed.runtime.zero.stage_1_and_2 as s12
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    src = inspect.getsource(s12)
    return (DeepSpeedZeroConfig.model_fields["use_multi_rank_bucket_allreduce"].default is True
            and "reduce_scatter_tensor" not in src and "reduce_scatter_fn" not in src
            and "if self.partition_gradients or self.is_gradient_accumulation_boundary()" in src)


_VERIFIERS = {"fsdp1_strategies": _v_fsdp1_strategies, "cpu_offload_apis": _v_cpu_offload_apis,
              "nvme_stage3_only": _v_nvme_stage3_only, "pipeline_support": _v_pipeline_support,
              "apis_exist": _v_apis_exist, "fsdp2_defaults": _v_fsdp2_defaults, "hpz_and_mics": _v_hpz_and_mics,
              "stage12_reduction": _v_stage12_reduction}


# What each check of :func:`verify_claims` confirms, in English and Chinese (printed in the reader's language).
VERIFIER_LABELS = read_only({
    "fsdp1_strategies": ("FSDP1 has the sharding strategies of the table (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, "
                         "HYBRID_SHARD)", "FSDP1 有表中的各种分片策略（FULL_SHARD、SHARD_GRAD_OP、NO_SHARD、HYBRID_SHARD）"),
    "cpu_offload_apis": ("both libraries have the CPU offload options of the table",
                         "两个库都有表中的 CPU 卸载选项"),
    "nvme_stage3_only": ("DeepSpeed offloads to NVMe, and only in ZeRO-3", "DeepSpeed 能卸载到 NVMe，而且只在 ZeRO-3 中"),
    "pipeline_support": ("DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3",
                         "DeepSpeed 的流水线引擎拒绝 ZeRO-2 和 ZeRO-3"),
    "apis_exist": ("the entry points of the table exist (deepspeed.initialize, zero.Init, FSDP, fully_shard)",
                   "表中的入口都存在（deepspeed.initialize、zero.Init、FSDP、fully_shard）"),
    "fsdp2_defaults": ("FSDP2's defaults are as stated (reshard after forward except the root, Shard(0))",
                       "FSDP2 的默认值与正文一致（除根模块外前向后重新分片，Shard(0)）"),
    "hpz_and_mics": ("ZeRO++'s hpZ is there; MiCS's config key was removed",
                     "ZeRO++ 的 hpZ 仍在；MiCS 的配置项已被移除"),
    "stage12_reduction": ("ZeRO-1 and 2 all-reduce the gradients by default, never reduce-scatter",
                          "ZeRO-1 和 ZeRO-2 默认对梯度做 AllReduce，从不调用 ReduceScatter"),
})


def verify_claims() -> dict[str, bool]:
    """Run every code-checkable claim against the installed torch and DeepSpeed. Returns ``{check: passed}``.

    Raises :class:`DeepSpeedMissingError` (an ImportError) when DeepSpeed is not installed."""
    require_deepspeed()
    return {name: bool(fn()) for name, fn in _VERIFIERS.items()}


def installed_versions() -> dict[str, str]:
    """``{"torch": ..., "deepspeed": ...}`` as installed (DeepSpeed: ``"not installed"`` if missing)."""
    import torch

    prepare_deepspeed()
    try:
        import deepspeed
        ds = deepspeed.__version__
    except ImportError:
        ds = "not installed"
    return {"torch": torch.__version__.split("+")[0], "deepspeed": ds}


def comparison_table(lang: str = "en") -> list[list[str]]:
    """Rows ``[feature, DDP, FSDP1, FSDP2, ZeRO-1, ZeRO-2, ZeRO-3, ZeRO-Infinity]`` in ``"en"`` or ``"zh"``."""
    check_choice("lang", lang, ("en", "zh"))
    rows = []
    for key, (fen, fzh) in FEATURES.items():
        cells = {c.framework: (c.en if lang == "en" else c.zh) for c in COMPARISON if c.feature == key}
        rows.append([fen if lang == "en" else fzh] + [cells[f] for f in FRAMEWORKS])
    return rows


# ---------------------------------------------------------------- config generation
PRECISIONS = ("bf16", "fp16", "fp32")


def deepspeed_config(*, micro_batch_size: int, gradient_accumulation_steps: int = 1, dp: int = 1,
                     zero_stage: int = 2, precision: str = "bf16", offload_optimizer: str | None = None,
                     offload_params: str | None = None, nvme_path: str | None = None,
                     reduce_bucket_size: int = 500_000_000, allgather_bucket_size: int = 500_000_000,
                     overlap_comm: bool = True, gradient_clipping: float | None = 1.0,
                     extra: dict | None = None) -> dict:
    """A DeepSpeed JSON config (as a dict) for a plan.

    - ``train_batch_size = micro_batch_size × gradient_accumulation_steps × dp`` (DeepSpeed checks this identity
      against its data-parallel world size: docs "Batch Size related parameters");
    - ``zero_optimization.stage`` = ``zero_stage`` (0–3); ``offload_optimizer`` / ``offload_params`` ∈ {None,
      ``"cpu"``, ``"nvme"``}: parameter offload needs stage 3, NVMe needs stage 3 and ``nvme_path``;
    - ``precision``: ``"bf16"`` (``{"bf16": {"enabled": true}}``), ``"fp16"`` (dynamic loss scaling:
      ``loss_scale = 0``) or ``"fp32"``;
    - bucket sizes in **elements** (DeepSpeed's unit): ``reduce_bucket_size`` (gradient reduction: all-reduced
      buckets in stages 1–2 by default, reduce-scatter in stage 3; :mod:`distlearn.zero_fsdp.traffic`),
      ``allgather_bucket_size`` (stages 1–2), ``stage3_prefetch_bucket_size`` (stage 3, same value);
    - ``extra``: keys merged last (e.g. ``{"zero_allow_untested_optimizer": True}``).

    Raises DistlearnValueError for impossible combinations. Validate the result with :func:`validate_config`.
    """
    if nvme_path is not None and not isinstance(nvme_path, str):
        raise DistlearnValueError("nvme_path", f"nvme_path must be a folder name (a string), got {nvme_path!r}.",
                                  f"nvme_path 必须是目录名（字符串），收到 {nvme_path!r}。")
    overlap_comm = check_bool("overlap_comm", overlap_comm)
    b = check_int("micro_batch_size", micro_batch_size)
    gas = check_int("gradient_accumulation_steps", gradient_accumulation_steps)
    dp = check_int("dp", dp)
    zero_stage = check_int("zero_stage", zero_stage, minimum=0, maximum=3)
    check_choice("precision", precision, PRECISIONS)
    check_choice("offload_optimizer", offload_optimizer, (None, "cpu", "nvme"))
    check_choice("offload_params", offload_params, (None, "cpu", "nvme"))
    reduce_bucket_size = check_int("reduce_bucket_size", reduce_bucket_size)
    allgather_bucket_size = check_int("allgather_bucket_size", allgather_bucket_size)
    if offload_params and zero_stage != 3:
        raise DistlearnValueError("offload_params", f"parameter offload needs zero_stage=3, got {zero_stage}.",
                                  f"参数卸载需要 zero_stage=3，收到 {zero_stage}。")
    if offload_optimizer and zero_stage == 0:
        raise DistlearnValueError("offload_optimizer", "optimizer offload needs zero_stage ≥ 1.",
                                  "优化器卸载需要 zero_stage ≥ 1。")
    if "nvme" in (offload_optimizer, offload_params):
        if zero_stage != 3:
            raise DistlearnValueError("zero_stage", "NVMe offload works only with zero_stage=3 (ZeRO-Infinity).",
                                      "NVMe 卸载只能与 zero_stage=3（ZeRO-Infinity）一起使用。")
        if not nvme_path:
            raise DistlearnValueError("nvme_path", "NVMe offload needs nvme_path (a folder on a fast local drive).",
                                      "NVMe 卸载需要 nvme_path（快速本地硬盘上的目录）。")
    zero: dict = {"stage": zero_stage, "reduce_bucket_size": reduce_bucket_size, "overlap_comm": overlap_comm}
    if zero_stage in (1, 2):
        zero.update(allgather_bucket_size=allgather_bucket_size, contiguous_gradients=True)
    if zero_stage == 3:
        zero["stage3_prefetch_bucket_size"] = allgather_bucket_size
    for key, device in (("offload_optimizer", offload_optimizer), ("offload_param", offload_params)):
        if device:
            zero[key] = {"device": device, "pin_memory": True}
            if device == "nvme":
                zero[key]["nvme_path"] = nvme_path
    config: dict = {
        "train_batch_size": b * gas * dp,
        "train_micro_batch_size_per_gpu": b,
        "gradient_accumulation_steps": gas,
        "zero_optimization": zero,
    }
    if precision == "bf16":
        config["bf16"] = {"enabled": True}
    elif precision == "fp16":
        config["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    if gradient_clipping is not None:
        config["gradient_clipping"] = check_positive("gradient_clipping", gradient_clipping)
    config.update(extra or {})
    return config


@checks(config=mapping(numbers=False))
def validate_config(config: dict, dp: int = 1):
    """Parse ``config`` with DeepSpeed's own ``deepspeed.runtime.config.DeepSpeedConfig`` as ``dp`` data-parallel
    ranks would see it, and return that object (e.g. ``.train_batch_size``, ``.zero_optimization_stage``).

    Without a process group DeepSpeedConfig assumes one rank, so the rank and world size it asks
    ``deepspeed.comm`` for are answered with 0 and ``dp`` while it parses; nothing else is changed. DeepSpeed's
    own errors (e.g. a ``train_batch_size`` that is not micro-batch × accumulation × world size) propagate.
    Raises :class:`DeepSpeedMissingError` (an ImportError) when DeepSpeed is not installed.
    """
    from unittest import mock

    require_deepspeed()
    import deepspeed.runtime.config as ds_config  # absolute import of the real package

    dp = check_int("dp", dp, maximum=MAX_WORLD_SIZE)
    quiet = io.StringIO()
    with mock.patch.object(ds_config.dist, "get_rank", lambda *a, **k: 0), \
            mock.patch.object(ds_config.dist, "get_world_size", lambda *a, **k: dp), \
            contextlib.redirect_stdout(quiet):
        return ds_config.DeepSpeedConfig(dict(config))


# ---------------------------------------------------------------- DeepSpeed's estimators, as formulas
def _check_estimate(total_params, num_gpus_per_node, num_nodes, additional_buffer_factor=1.5):
    """The arguments every estimator shares, checked: ``(Ψ, gpus per node, nodes, buffer factor)``."""
    return (check_int("total_params", total_params),
            check_int("num_gpus_per_node", num_gpus_per_node, maximum=MAX_WORLD_SIZE),
            check_int("num_nodes", num_nodes, maximum=MAX_WORLD_SIZE),
            check_number("additional_buffer_factor", additional_buffer_factor, minimum=1, maximum=100))


def _check_largest(largest_layer_params, zero_stage: int):
    """``largest_layer_params``: an int ≥ 1, required by ZeRO-3 (None allowed for ZeRO-2)."""
    if largest_layer_params is not None:
        return check_int("largest_layer_params", largest_layer_params)
    if zero_stage == 3:
        raise DistlearnValueError("largest_layer_params", "ZeRO-3's estimate needs largest_layer_params.",
                                  "ZeRO-3 的估算需要 largest_layer_params。")
    return None


def zero2_model_states_mem_needs(total_params: int, num_gpus_per_node: int = 1, num_nodes: int = 1,
                                 cpu_offload: bool = True, additional_buffer_factor: float = 1.5) -> tuple[int, int]:
    """``(cpu_bytes, gpu_bytes)`` exactly as ``deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_
    mem_needs`` computes them (DeepSpeed 0.19.8), with Ψ = ``total_params``, G = nodes × GPUs per node:

    - no offload: GPU ``2Ψ + int(18Ψ/G)`` — 2 B of 16-bit parameters, unsharded, plus 18 B/param sharded (2 B
      16-bit grads + 4 B fp32 grads + 4 B fp32 master weights + 8 B Adam moments); CPU ``4Ψ·gpus_per_node·1.5``
      (the model loaded in fp32 by each local process, times the buffer factor);
    - CPU offload: GPU ``2Ψ``; CPU ``Ψ·max(4G, 16)·1.5``.

    Both are truncated to int, in bytes; DeepSpeed prints them divided by 2**30 as "GB" (they are GiB).
    """
    total_params, num_gpus_per_node, num_nodes, additional_buffer_factor = _check_estimate(
        total_params, num_gpus_per_node, num_nodes, additional_buffer_factor)
    cpu_offload = check_bool("cpu_offload", cpu_offload)
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu = 2 * total_params
        cpu = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu = 2 * total_params + int(18 * total_params / total_gpus)
        cpu = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu), int(gpu)


def zero3_model_states_mem_needs(total_params: int, largest_layer_params: int, num_gpus_per_node: int = 1,
                                 num_nodes: int = 1, cpu_offload: bool = True, cpu_offload_params: bool = True,
                                 zero_init: bool = True, additional_buffer_factor: float = 1.5) -> tuple[int, int, int]:
    """``(cpu_bytes, gpu_bytes, largest_layer_bytes)`` exactly as DeepSpeed 0.19.8's
    ``deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs``. With L = ``largest_layer_params``:

    - largest layer: ``4L`` (its 16-bit parameters and 16-bit gradients, gathered whole on the GPU);
    - no offload: GPU ``4L + int(18Ψ/G)``; CPU ``L·4·gpus_per_node·1.5`` with ``zero_init`` (the model is built
      already partitioned) else ``Ψ·4·gpus_per_node·1.5``;
    - optimizer offload: GPU ``4L + int(2Ψ/G)``; CPU ``Ψ·16/nodes·1.5`` (zero_init) else
      ``Ψ·max(4·gpus_per_node, 16/nodes)·1.5``;
    - optimizer + parameter offload: GPU ``4L``; CPU ``Ψ·18/nodes·1.5`` (zero_init) else
      ``Ψ·max(4·gpus_per_node, 18/nodes)·1.5``.
    """
    total_params, num_gpus_per_node, num_nodes, additional_buffer_factor = _check_estimate(
        total_params, num_gpus_per_node, num_nodes, additional_buffer_factor)
    largest_layer_params = check_int("largest_layer_params", largest_layer_params)
    cpu_offload, cpu_offload_params = check_bool("cpu_offload", cpu_offload), check_bool("cpu_offload_params",
                                                                                          cpu_offload_params)
    zero_init = check_bool("zero_init", zero_init)
    total_gpus = num_nodes * num_gpus_per_node
    per_node = 1 / num_nodes
    largest = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu = largest
            k = 18
        else:
            gpu = largest + int(2 * total_params / total_gpus)
            k = 16
        if zero_init:
            cpu = total_params * k * per_node * additional_buffer_factor
        else:
            cpu = total_params * max(4 * num_gpus_per_node, k * per_node) * additional_buffer_factor
    else:
        gpu = largest + int(18 * total_params / total_gpus)
        if zero_init:
            cpu = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu), int(gpu), largest


def estimator_rows(total_params: int, largest_layer_params: int | None = None, *, zero_stage: int = 3,
                   num_gpus_per_node: int = 1, num_nodes: int = 1, additional_buffer_factor: float = 1.5) -> list:
    """The rows DeepSpeed's ``estimate_zero{2,3}_model_states_mem_needs_all_cold`` print, in the same order:
    ``(cpu_gib, gpu_gib, options)`` with GiB = 2**30 bytes and ``options`` as DeepSpeed writes it."""
    zero_stage = check_choice("zero_stage", check_int("zero_stage", zero_stage), (2, 3))
    total_params, num_gpus_per_node, num_nodes, additional_buffer_factor = _check_estimate(
        total_params, num_gpus_per_node, num_nodes, additional_buffer_factor)
    largest_layer_params = _check_largest(largest_layer_params, zero_stage)
    rows = []
    if zero_stage == 2:
        for off in (True, False):
            cpu, gpu = zero2_model_states_mem_needs(total_params, num_gpus_per_node, num_nodes, off,
                                                    additional_buffer_factor)
            rows.append((cpu / GiB, gpu / GiB, f"offload_optimizer={'cpu ' if off else 'none'}"))
        return rows
    for off in (True, False):
        for off_p in (True, False):
            if not off and off_p:
                continue
            for zi in (True, False):
                cpu, gpu, _ = zero3_model_states_mem_needs(total_params, largest_layer_params, num_gpus_per_node,
                                                           num_nodes, off, off_p, zi, additional_buffer_factor)
                opts = (f"offload_param={'cpu ' if off_p else 'none'}, offload_optimizer={'cpu ' if off else 'none'},"
                        f" zero_init={1 if zi else 0}")
                rows.append((cpu / GiB, gpu / GiB, opts))
    return rows


@checks(rows=each(record(tuple, "(1.5, 0.25, 'offload_param=cpu')"), min_len=0))
def format_rows(rows) -> str:
    """The table lines exactly as DeepSpeed prints them (``  per CPU  |  per GPU |   Options`` and the rows)."""
    lines = ["  per CPU  |  per GPU |   Options"]
    lines += [f" {cpu:7.2f}GB | {gpu:6.2f}GB | {opts}" for cpu, gpu, opts in rows]
    return "\n".join(lines)


def deepspeed_estimate_output(total_params: int, largest_layer_params: int | None = None, *, zero_stage: int = 3,
                              num_gpus_per_node: int = 1, num_nodes: int = 1) -> str:
    """What DeepSpeed's own ``estimate_zero{2,3}_model_states_mem_needs_all_cold`` prints (captured).
    Raises :class:`DeepSpeedMissingError` (an ImportError) when DeepSpeed is not installed."""
    zero_stage = check_choice("zero_stage", check_int("zero_stage", zero_stage), (2, 3))
    total_params, num_gpus_per_node, num_nodes, _ = _check_estimate(total_params, num_gpus_per_node, num_nodes)
    largest_layer_params = _check_largest(largest_layer_params, zero_stage)
    require_deepspeed()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        if zero_stage == 2:
            from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs_all_cold

            estimate_zero2_model_states_mem_needs_all_cold(total_params, num_gpus_per_node, num_nodes)
        else:
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs_all_cold

            estimate_zero3_model_states_mem_needs_all_cold(total_params, largest_layer_params, num_gpus_per_node,
                                                           num_nodes)
    return buf.getvalue()


def largest_layer_params_of_config(config) -> int:
    """DeepSpeed's "largest layer" for a :class:`distlearn.core.models.ModelConfig` without building it: the most
    parameters owned directly by one module of :func:`distlearn.core.models.build_model` — the token embedding (V·h),
    an MLP matrix (h·f, + f bias for GPT), an attention projection, or GPT's position table."""
    h, f, gpt = config.hidden_size, config.ffn_hidden_size, config.arch == "gpt"
    kv = config.kv_heads * config.head_dim
    candidates = [config.vocab_size * h, h * f + (f if gpt else 0), f * h + (h if gpt else 0),
                  h * h + (h if gpt else 0), h * kv + (kv if gpt else 0)]
    if gpt:
        candidates.append(config.max_seq_len * h)
    return max(candidates)


def printed_numbers(text: str) -> list[float]:
    """The numbers in front of "GB" in an estimator printout (DeepSpeed's or :func:`format_rows`'), in order."""
    import re

    return [float(x) for x in re.findall(r"([\d.]+)GB", check_text("text", text))]


def largest_layer_params(module) -> int:
    """The largest number of parameters owned directly by one submodule (``parameters(recurse=False)``), as
    DeepSpeed's ``model_to_params`` defines "largest layer" (for a transformer: usually the embedding)."""
    import torch

    check_record("module", module, torch.nn.Module, "torch.nn.Linear(4, 4)")
    return max((sum(p.numel() for p in m.parameters(recurse=False)) for m in module.modules()), default=0)


__all__ = ["COMPARISON", "Claim", "FEATURES", "FRAMEWORKS", "ZERO_FSDP_MAPPING", "SOURCES", "verify_claims",
           "installed_versions", "comparison_table", "deepspeed_config", "validate_config",
           "zero2_model_states_mem_needs", "zero3_model_states_mem_needs", "estimator_rows", "format_rows",
           "deepspeed_estimate_output", "printed_numbers", "largest_layer_params", "largest_layer_params_of_config",
           "prepare_deepspeed", "require_deepspeed", "DeepSpeedMissingError"]

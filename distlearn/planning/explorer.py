"""Explorer for chapter 14: model, cluster, batch and sequence length → ranked plans, memory stack, time breakdown.

``compute(**values)`` is pure and never raises for values the controls can reach (bad combinations come back as
``{"error": message}``); ``render(result)`` prints the table and draws two stacked bars for the chosen plan.
"""
from __future__ import annotations

from collections import OrderedDict

import matplotlib.pyplot as plt

from distlearn import planning as planner
from distlearn.core import plots
from distlearn.core.hardware import GPUS
from distlearn.core.i18n import bi, text
from distlearn.memory.formulas import GB
from distlearn.core.models import MOE_PRESETS, PRESETS
from distlearn.planning.command_line import precision_label
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

T_MODEL = text("planner.model", "Model", "模型")
T_GPU = text("planner.gpu", "GPU type", "GPU 型号")
T_NGPUS = text("planner.num_gpus", "Number of GPUs", "GPU 数量")
T_SEQ = text("planner.seq_len", "Sequence length", "序列长度")
T_BATCH = text("planner.global_batch", "Global batch (sequences)", "全局批量大小（序列数）")
T_RANK = text("planner.rank", "Show plan #", "查看第几个方案")
T_PREC = text("planner.precision", "Precision recipe", "精度方案")
T_CP = text("planner.cp", "Context parallel cp (1 = searched)", "上下文并行 cp（1 = 自动搜索）")
T_EP = text("planner.ep", "Expert parallel ep (MoE models)", "专家并行 ep（MoE 模型）")
T_MEM = text("planner.memory", "Memory per GPU (GB)", "每块 GPU 的显存（GB）")
T_TIME = text("planner.time", "Time per step (s)", "每步时间（秒）")

MEMORY_PARTS = ("params", "grads", "optimizer", "activations", "logits", "zero3_buffer", "reserve")
TIME_PARTS = ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "bubble")
LABELS = read_only({
    "params": ("parameters", "参数"), "grads": ("gradients", "梯度"), "optimizer": ("optimizer states", "优化器状态"),
    "activations": ("activations", "激活值"), "logits": ("logits", "logits（输出层）"), "zero3_buffer": ("ZeRO-3 buffer",
                                                                                             "ZeRO-3 缓冲"),
    "reserve": ("reserve", "预留"), "compute": ("compute", "计算"), "tp_comm": ("TP all-reduce", "张量并行通信"),
    "cp_comm": ("CP K/V all-gather", "上下文并行 K/V 全收集"), "ep_comm": ("EP all-to-all", "专家并行全对全"),
    "pp_comm": ("PP p2p", "流水线点对点"), "dp_comm": ("DP / ZeRO comm (exposed)", "数据并行/ZeRO 通信（未被隐藏）"),
    "bubble": ("pipeline bubble", "流水线气泡"),
})
COLORS = read_only({"params": "#4C72B0", "grads": "#DD8452", "optimizer": "#55A868", "activations": "#C44E52",
          "logits": "#8172B3", "zero3_buffer": "#937860", "reserve": "#BBBBBB", "compute": "#4C72B0",
          "tp_comm": "#DD8452", "cp_comm": "#DA8BC3", "ep_comm": "#CCB974", "pp_comm": "#8172B3", "dp_comm": "#C44E52", "bubble": "#DDDDDD"})


def controls() -> dict:
    return {
        "model": base.dropdown(T_MODEL, list(PRESETS) + list(MOE_PRESETS), "llama3-8b"),
        "gpu": base.dropdown(T_GPU, list(GPUS), "h100-80gb"),
        "num_gpus": base.log2_slider(T_NGPUS, 16, 1, 2048),
        "seq_len": base.log2_slider(T_SEQ, 4096, 512, 32768),
        "global_batch": base.log2_slider(T_BATCH, 256, 8, 4096),
        "precision": base.dropdown(T_PREC, [(precision_label(p), p) for p in planner.PLANNER_PRECISIONS], "mixed"),
        "cp": base.log2_slider(T_CP, 1, 1, 16),
        "ep": base.log2_slider(T_EP, 1, 1, 64),
        "rank": base.int_slider(T_RANK, 1, 1, 10),
    }


MEMOS_KEPT = 32  # search memos kept, one per (model, sequence length, global batch, precision), LRU
_memos: OrderedDict = OrderedDict()


def _memo(model: str, seq_len: int, global_batch: int, precision: str) -> dict:
    """The search memo of this model, sequence length, global batch and recipe (planner.search's ``memo``): a
    slider move that keeps them (GPU type or count, cp, ep, plan number) finds their per-layer bytes and model
    states computed; at most :data:`MEMOS_KEPT` memos are kept. The batch is part of the key although the shared
    entries are keyed by the model, sequence and recipe: "zb_closed" comes from the FLOP counts of one batch
    (their ratio, equal for every batch only up to rounding)."""
    key = (model, seq_len, global_batch, precision)
    memo = _memos.pop(key, None)
    _memos[key] = memo = {} if memo is None else memo
    while len(_memos) > MEMOS_KEPT:
        _memos.popitem(last=False)
    return memo


@base.within_controls(lambda: controls())
def compute(model="llama3-8b", gpu="h100-80gb", num_gpus=16, seq_len=4096, global_batch=256, precision="mixed",
            cp=1, ep=1, rank=1) -> dict:
    """Search and return ``{"table", "plans", "chosen", "num_evaluated"}`` or ``{"error"}`` / ``{"no_fit"}``.
    ``cp = 1`` lets the search choose the context-parallel degree, a larger ``cp`` fixes it; ``ep`` is the
    expert-parallel degree (mixture-of-experts models only); ``precision`` a recipe of
    :data:`distlearn.planning.PLANNER_PRECISIONS`."""
    try:
        res = planner.search(MOE_PRESETS.get(model, model), global_batch=global_batch, seq_len=seq_len, gpu=gpu, num_gpus=num_gpus,
                             top=10, precision=precision, cp=None if cp == 1 else cp, ep=ep,
                             memo=_memo(model, seq_len, global_batch, precision))
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    if not res.plans:  # no suggestion when no plan can even be formed: the message says why
        hint = "\n" + res.suggestion["message"] if res.suggestion else ""
        return {"no_fit": res.message + hint, "num_evaluated": res.num_evaluated}
    shown = min(rank, len(res.plans))
    return {"table": planner.format_table(res.plans), "plans": res.plans, "chosen": res.plans[shown - 1],
            "shown": shown,
            "num_evaluated": res.num_evaluated}


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    if "no_fit" in result:
        print(result["no_fit"])
        return
    print(result["table"])
    print(planner.table_legend())
    e = result["chosen"]
    print(bi(f"Chosen: {e.plan.describe()}", f"所选方案：{e.plan.describe()}", sep="\n"))
    fig, (ax1, ax2) = plots.new_figure(10, 3.4, nrows=2)
    left = 0.0
    for k in MEMORY_PARTS:
        v = e.memory[k] / GB
        if v > 0:
            ax1.barh(0, v, left=left, color=COLORS[k], label=bi(*LABELS[k]))
            left += v
    ax1.axvline(e.capacity / GB, color="k", ls="--")
    ax1.set_yticks([])
    ax1.set_xlabel(str(T_MEM))
    ax1.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    left = 0.0
    for k in TIME_PARTS:
        v = e.time[k]
        if v > 0:
            ax2.barh(0, v, left=left, color=COLORS[k], label=bi(*LABELS[k]))
            left += v
    ax2.set_yticks([])
    ax2.set_xlabel(str(T_TIME))
    ax2.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    plots.title(ax1, f"Plan #{result['shown']}: memory per GPU (dashed: capacity) and time per step",
                f"第 {result['shown']} 个方案：每块 GPU 的显存（虚线：容量）与每步时间")
    plt.show()


def explorer():
    return base.build(controls(), compute, render,
                      title=bi("Plan a training run", "规划一次训练"))

"""Explorer for chapter 02: pick a collective, a world size and a step; see which rank holds which chunk (and how
many ranks' data it already contains), the messages of that step, and the bytes each rank has sent so far for a
message of the chosen size."""
from __future__ import annotations

import functools

import matplotlib.pyplot as plt
import numpy as np

from distlearn.core import plots
from distlearn.core.comm import OPERATIONS, VirtualCluster, ring_bytes_per_rank
from distlearn.core.i18n import bi, text
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

L_OP = text("collectives.operation", "Operation", "操作")
L_WS = text("collectives.world_size", "World size", "world size（进程总数）")
L_STEP = text("collectives.step", "Step", "步骤")
L_MB = text("collectives.message_mb", "Message (MB)", "消息大小（MB）")
MAX_WS = 8
# Chinese names of the collectives and of the step phases VirtualCluster records (glossary: collective names stay
# in English in Chinese text, except 广播).
ZH_NAMES = read_only({"start": "初始", "broadcast": "广播", "reduce": "Reduce", "all_reduce": "AllReduce",
            "all_gather": "AllGather", "reduce_scatter": "ReduceScatter", "all_to_all": "AllToAll"})


def zh_name(name: str) -> str:
    """Chinese name of an operation (``"all_reduce"``) or a step phase (``"reduce-scatter"``, ``"start"``)."""
    return ZH_NAMES.get(name.replace("-", "_"), name)


def op_label_zh(operation: str) -> str:
    """The Chinese label of an operation in the explorer's drop-down: its glossary name and the identifier,
    e.g. "全规约 AllReduce（all_reduce）"."""
    return f"{OP_LABELS_ZH.get(operation, zh_name(operation))}（{operation}）"


# English names of the collectives (glossary), for the drop-down and the plot title: "all-reduce", not "all_reduce".
OP_NAMES_EN = read_only({"broadcast": "broadcast", "reduce": "reduce", "all_reduce": "all-reduce",
                         "all_gather": "all-gather", "reduce_scatter": "reduce-scatter", "all_to_all": "all-to-all"})


# Glossary names (docs/glossary.md) of the collectives, for labels.
OP_LABELS_ZH = read_only({"broadcast": "广播 Broadcast", "reduce": "规约 Reduce", "all_reduce": "全规约 AllReduce",
                "all_gather": "全收集 AllGather", "reduce_scatter": "规约-分散 ReduceScatter",
                "all_to_all": "全对全 AllToAll"})


def step_title(operation: str, step: int, phase: str, sep: str = "\n") -> str:
    """Bilingual title of step ``step`` (0 = the start) of ``operation`` in phase ``phase``:
    "broadcast 0: start" / "广播 第 0 步：初始" (on two lines when both languages are shown). Both titles leave
    out a phase named like the operation ("broadcast 1", "广播 第 1 步", not "broadcast 1: broadcast"), to fit
    small plots."""
    op_zh, phase_zh = zh_name(operation), zh_name(phase)
    same = phase.replace("-", "_") == operation
    zh = f"{op_zh} 第 {step} 步" + ("" if same else f"：{phase_zh}")
    return bi(f"{operation} {step}" + ("" if same else f": {phase}"), zh, sep=sep)


def run_steps(operation: str, world_size: int):
    """Run ``operation`` on a small integer message (world_size·4 elements, float64) and return the cluster
    (with its ``steps``) and the message bytes that the per-rank bytes are relative to."""
    n = world_size
    xs = [np.arange(4 * n, dtype=np.float64) + 100 * r for r in range(n)]
    c = VirtualCluster(n)
    if operation == "all_gather":
        c.all_gather([x[:4] for x in xs])
        return c, 4 * n * 8  # the output
    c.run(operation, xs)
    return c, xs[0].nbytes


@functools.lru_cache(maxsize=None)
def num_steps(operation: str, world_size: int) -> int:
    """How many steps ``operation`` takes on ``world_size`` ranks in :class:`~distlearn.core.comm.VirtualCluster`
    (step 0, the start, not counted): n − 1 for a chain or ring of one phase, 2(n − 1) for the ring all-reduce."""
    return len(run_steps(operation, world_size)[0].steps) - 1


def limits(values: dict) -> dict:
    """The Step slider ends at the chosen operation's last step on the chosen world size (all-reduce on 8 ranks:
    14; broadcast on 4: 3), so that it offers no step that does not exist."""
    return {"step": num_steps(values["operation"], values["world_size"])}


@base.within_controls(lambda: controls())
def compute(operation: str = "all_reduce", world_size: int = 4, step: int = 0, message_mb: int = 64) -> dict:
    """State of ``operation`` after ``step`` steps (clamped to the last) for a message of ``message_mb`` MB
    (1e6 bytes): holdings (world_size, chunks), the step's transfers, cumulative bytes sent per rank (bytes) and
    the total per rank from the closed form (:func:`distlearn.core.comm.ring_bytes_per_rank`)."""
    if operation not in OPERATIONS or not 1 <= world_size <= 64:
        return {"error": bi(f"unknown operation {operation!r} or world size {world_size}",
                            f"未知操作 {operation!r} 或 world size {world_size}")}
    c, small = run_steps(operation, world_size)
    steps = c.steps
    step = int(min(max(step, 0), len(steps) - 1))
    scale = message_mb * 1e6 / small
    sent = np.zeros(world_size)
    for s in steps[1:step + 1]:
        for t in s.transfers:
            sent[t.src] += t.nbytes * scale
    return {"operation": operation, "world_size": world_size, "step": step, "num_steps": len(steps) - 1,
            "phase": steps[step].phase, "holdings": steps[step].holdings,
            "vmax": int(max(s.holdings.max() for s in steps)),
            "transfers": [(t.src, t.dst, t.chunk) for t in steps[step].transfers],
            "bytes_sent": sent, "formula_per_rank": ring_bytes_per_rank(operation, message_mb * 1e6, world_size),
            "total_sent": c.bytes_sent * scale}


def draw_holdings(ax, holdings, vmax: int) -> None:
    """Heat map of a step's ``holdings`` (ranks × chunks) on ``ax``, each cell labelled with its count (white on
    dark cells, so a finished all-reduce stays readable); the colour scale runs from 0 to ``vmax`` (world_size for
    reductions, 1 for operations that only copy)."""
    top = max(1, vmax)
    ax.imshow(holdings, cmap="Blues", vmin=0, vmax=top, aspect="auto")
    for r in range(holdings.shape[0]):
        for c in range(holdings.shape[1]):  # white digits on the dark (nearly complete) cells, black on the light
            dark = holdings[r, c] > 0.55 * top
            ax.text(c, r, str(holdings[r, c]), ha="center", va="center", fontsize=9,
                    color="white" if dark else "black")
    ax.set_xticks(range(holdings.shape[1]))
    ax.set_yticks(range(holdings.shape[0]))
    ax.set_xlabel(bi("chunk", "数据块"))
    ax.set_ylabel("rank")


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    n, hold = result["world_size"], result["holdings"]
    fig, (ax1, ax2) = plots.new_figure(10, 3.6, ncols=2)
    draw_holdings(ax1, hold, result["vmax"])
    op, phase = result["operation"], result["phase"]
    plots.title(ax1, f"{OP_NAMES_EN.get(op, op)}: step {result['step']}/{result['num_steps']} ({phase})",
                f"{zh_name(op)}：第 {result['step']}/{result['num_steps']} 步（{zh_name(phase)}）")
    ax2.bar(range(n), result["bytes_sent"] / 1e6, color=plots.COLORS["comm"])
    ax2.axhline(result["formula_per_rank"] / 1e6, color="k", ls="--", lw=1)
    ax2.set_xlabel("rank")
    ax2.set_ylabel(bi("MB sent so far", "已发送 MB"))
    plots.title(ax2, *formula_title(op))
    plt.show()
    moves = ", ".join(f"{s}→{d} [{c}]" for s, d, c in result["transfers"]) or "—"
    print(bi(f"messages in this step (src→dst [chunk]): {moves}", f"本步的消息（源→目的 [数据块]）：{moves}"))


def formula_title(operation: str) -> tuple[str, str]:
    """(English, Chinese) title of the bytes panel. The dashed line is the closed form per rank for the whole
    collective; for broadcast and reduce that is (n−1)/n·M, the AVERAGE per rank (in the chain n−1 ranks each send
    the whole message and the last one sends nothing), so it is labelled as such."""
    if operation in ("broadcast", "reduce"):
        return ("Bytes sent per rank (dashed: average per rank, whole collective)",
                "每个 rank 已发送的字节（虚线：整个集合通信中每个 rank 的平均值）")
    return ("Bytes sent per rank (dashed: closed form, whole collective)",
            "每个 rank 已发送的字节（虚线：整个集合通信的公式值）")


def controls() -> dict:
    return {"operation": base.dropdown(L_OP, [((OP_NAMES_EN[op], op_label_zh(op)), op) for op in OPERATIONS],
                                       "all_reduce"),
            "world_size": base.int_slider(L_WS, 4, 2, MAX_WS),
            "step": base.int_slider(L_STEP, 0, 0, 2 * (MAX_WS - 1)),
            "message_mb": base.log2_slider(L_MB, 64, 1, 1024)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render,
                      title=bi("Collectives step by step", "集合通信逐步演示"), limits=limits)

"""Figures for chapter 05: Gantt charts of pipeline schedules, bubble fraction vs number of micro-batches, and the
zero-bubble idea in one picture (1F1B above ZB-H1)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language, text
from distlearn.pipeline_parallel.schedules import closed_form, simulate
from distlearn.pipeline_parallel.timeline import KINDS, PipelineResult
from distlearn.core.guard import read_only

T_STAGE = text("pipeline.stage", "stage", "阶段")
T_TIME = text("pipeline.time", "time", "时间")
T_FWD = text("pipeline.forward", "forward", "前向")
T_BWD = text("pipeline.backward", "backward", "反向")
T_IDLE = text("pipeline.idle", "idle (bubble)", "空闲（气泡）")
T_INPUT = text("pipeline.input_grad", "input gradient I", "输入梯度 I")
T_WEIGHT = text("pipeline.weight_grad", "weight gradient W", "权重梯度 W")
T_OVERLAP = text("pipeline.overlap", "F&B overlapped", "F&B 重叠")
# colours of ev_kind 0..4: F, B (whole backward), I, W, F&B
KIND_COLORS = (plots.COLORS["forward"], plots.COLORS["backward"], "#8CC084", "#C9A227", "#8172B3")
T_M = text("pipeline.num_microbatches", "number of micro-batches m", "微批次数 m")
T_BUBBLE = text("pipeline.bubble_fraction", "bubble fraction (idle share)", "气泡率（空闲占比）")
T_CLOSED = text("pipeline.closed_form", "closed form (p − 1)/(m + p − 1)", "闭式解 (p − 1)/(m + p − 1)")

NAMES = read_only({"gpipe": ("GPipe", "GPipe"), "1f1b": ("1F1B", "1F1B"),
         "interleaved-1f1b": ("interleaved 1F1B", "交错 1F1B"),
         "zb-h1": ("ZB-H1", "ZB-H1"), "zb-h2": ("ZB-H2 (greedy, 2p − 1 held)", "ZB-H2（贪心，至多 2p − 1 个）"),
         "interleaved-zb": ("interleaved zero bubble", "交错零气泡"), "zbv": ("ZB-V", "ZB-V"),
         "dualpipev": ("DualPipeV", "DualPipeV"), "dualpipe": ("DualPipe", "DualPipe")})


def gantt(result: PipelineResult, ax=None, label_microbatches: bool | None = None):
    """Draw ``result``'s timeline: one row per stage (stage 0 on top), forwards blue, backwards green, the
    grey background is idle time. Chunks of an interleaved schedule are told apart by shade. Split-backward
    schedules also show input-gradient passes I (light green), weight-gradient passes W (ochre) and overlapped
    F&B blocks (purple; labelled forward/backward micro-batch). Returns ``ax``."""
    if ax is None:
        _, ax = plots.new_figure(9, 0.45 * result.num_stages + 1.6)
    p, total = result.num_stages, result.total_time
    if label_microbatches is None:
        label_microbatches = result.num_microbatches * result.num_chunks <= 24 and p <= 16
    ax.barh(np.arange(p), [total] * p, height=0.8, color=plots.COLORS["idle"], zorder=0)
    # One PolyCollection for all events: thousands of separate bars (p = 16, m = 64, v = 4 has 8192) take seconds.
    x0, x1 = result.ev_start, result.ev_end
    y0, y1 = result.ev_stage - 0.4, result.ev_stage + 0.4
    verts = np.stack([np.stack([x0, y0], 1), np.stack([x0, y1], 1), np.stack([x1, y1], 1), np.stack([x1, y0], 1)], 1)
    base = np.array([_rgb(c) for c in KIND_COLORS])[result.ev_kind.astype(int)]
    lighten = (0.45 * result.ev_chunk / max(1, result.num_chunks - 1))[:, None]  # later chunks lighter
    faces = base + (1.0 - base) * lighten
    edge = "white" if len(x0) <= 2000 else "none"
    ax.add_collection(PolyCollection(verts, facecolors=faces, edgecolors=edge, linewidths=0.5, zorder=1))
    if label_microbatches:
        bwd = result.ev_bwd_microbatch if result.ev_bwd_microbatch is not None else np.full(len(x0), -1)
        for s, k, j, jb, st, en in zip(result.ev_stage, result.ev_kind, result.ev_microbatch, bwd, result.ev_start,
                                       result.ev_end):
            ax.text((st + en) / 2, s, f"{j}/{jb}" if k == 4 else str(j), ha="center", va="center", fontsize=7,
                    color="white", zorder=2)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_yticks(range(p))
    ax.set_xlim(0, total)
    ax.set_xlabel(plots.label(T_TIME))
    ax.set_ylabel(plots.label(T_STAGE))
    present = set(np.unique(result.ev_kind).tolist())
    handles = [Patch(color=KIND_COLORS[k], label=plots.label(t))
               for k, t in enumerate((T_FWD, T_BWD, T_INPUT, T_WEIGHT, T_OVERLAP)) if k in present or k < 2]
    if result.num_chunks > 1:   # the shades: one legend entry per model chunk (later chunks lighter), in blue
        nc, blue = result.num_chunks, np.array(_rgb(KIND_COLORS[0]))
        handles += [Patch(color=tuple(blue + (1.0 - blue) * 0.45 * c / (nc - 1)),
                          label=plots.label(bi(f"model chunk {c}", f"模型块 {c}"))) for c in range(nc)]
    ax.legend(handles=handles + [Patch(color=plots.COLORS["idle"], label=plots.label(T_IDLE))],
              loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    en, zh = NAMES[result.schedule]
    v = f", v = {result.num_chunks}" if result.num_chunks > 1 else ""
    costs = cost_label(result)
    head = f"p = {p}, m = {result.num_microbatches}{v}{', ' + costs if costs else ''}: "
    plots.title(ax, f"{en}, {head}bubble (idle share) {result.bubble_fraction:.1%}",
                f"{zh}，{head}气泡率（空闲占比）{result.bubble_fraction:.1%}")
    return ax


def cost_label(result: PipelineResult) -> str:
    """``"t_f = 1, t_b = 2"`` (one micro-batch through one whole stage, all chunks) when every stage has the same
    costs, read back from the events; split-backward schedules add the parts, ``"t_f = 1, t_b = 2 (I 1.8 + W
    0.2)"``. ``""`` when stages differ or an overlapped F&B block hides the parts (the caption then gives no costs
    rather than wrong ones). Point-to-point time is not an op's duration and is not shown."""
    v = result.num_chunks
    dur = (result.ev_end - result.ev_start) * v
    parts = {k: dur[result.ev_kind == code] for code, k in enumerate(KINDS)}
    present = {k: d for k, d in parts.items() if d.size}
    if "F&B" in present or "F" not in present or not all(np.allclose(d, d[0]) for d in present.values()):
        return ""
    t = {k: float(d[0]) for k, d in present.items()}
    if "B" in t and not ({"I", "W"} & set(t)):
        return f"t_f = {t['F']:g}, t_b = {t['B']:g}"
    if {"I", "W"} <= set(t) and "B" not in t:
        return f"t_f = {t['F']:g}, t_b = {t['I'] + t['W']:g} (I {t['I']:g} + W {t['W']:g})"
    return ""


def _rgb(hex_color: str):
    h = hex_color.lstrip("#")
    return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))


def bubble_vs_microbatches(num_stages: int, ms: Sequence[int], ax=None, fwd_time: float = 1.0,
                           bwd_time: float = 2.0):
    """Bubble fraction of GPipe, 1F1B and interleaved 1F1B (v = 2) vs ``m``, with the closed form. Returns ``ax``."""
    if ax is None:
        _, ax = plots.new_figure(7, 4)
    ms = list(ms)
    ax.plot(ms, [closed_form("1f1b", num_stages, m)["bubble_fraction"] for m in ms], "k-", lw=3, alpha=0.3,
            label=plots.label(T_CLOSED))
    for schedule, marker, v in (("gpipe", "o", 1), ("1f1b", "x", 1), ("interleaved-1f1b", "s", 2)):
        ys = [simulate(schedule, num_stages, m, fwd_time=fwd_time, bwd_time=bwd_time,
                       num_chunks=v).bubble_fraction for m in ms]
        en, zh = NAMES[schedule]
        ax.plot(ms, ys, marker=marker, ls="--" if v > 1 else "none",
                label=bi(f"{en}, simulated" + (", v = 2" if v > 1 else ""),
                         f"{zh}，模拟" + ("，v = 2" if v > 1 else "")))
    ax.set_xscale("log", base=2)
    ax.set_xlabel(plots.label(T_M))
    ax.set_ylabel(plots.label(T_BUBBLE))
    ax.legend(fontsize=8)
    costs = f"t_f = {fwd_time:g}, t_b = {bwd_time:g}"
    plots.title(ax, f"Bubble fraction (idle share), p = {num_stages} stages, {costs}, no p2p time",
                f"气泡率（空闲占比），p = {num_stages} 个阶段，{costs}，无点对点通信时间")
    return ax


T_BUBBLE_SHADE = text("pipeline.bubble_shade", "bubble (stage idle)", "气泡（阶段空闲）")


def zero_bubble_picture(num_stages: int = 4, num_microbatches: int = 8, *, fwd_time: float = 1.0,
                        bwd_time: float = 2.0, wgrad_time: float = 1.0):
    """The idea of zero-bubble scheduling in one picture: 1F1B (top) and ZB-H1 (bottom) on the same time axis,
    one row per stage, one box per operation, numbered by micro-batch. F is the forward, B 1F1B's whole backward;
    ZB-H1 splits B into the input gradient I (sent at once to the previous stage) and the weight gradient W
    (needed only by the optimizer), and moves W into the gaps. Hatched grey is the bubble: a stage's idle time
    within the step. Both timelines are :func:`distlearn.pipeline_parallel.schedules.simulate`'s events, nothing
    drawn by hand, so the picture shows what the chapter's numbers say (p = 4, m = 8, t_f = 1, t_b = 2, t_W = 1:
    step 33 → 27, idle per stage 9 → 3).

    - ``num_stages`` p: 2 … 8; ``num_microbatches`` m: 1 … 16 (a legible picture; the simulation allows more).
    - ``fwd_time``, ``bwd_time`` (whole backward, I + W), ``wgrad_time`` (the W part): in any time unit, checked
      by the simulation (0 < ``wgrad_time`` < ``bwd_time``).

    Rectangles carry ``gid`` ``"F:s:j"`` (kind, stage, micro-batch) and ``"bubble:s"``, so a test can read the
    schedule back. Returns the figure (two axes: 1F1B, ZB-H1). Raises DistlearnValueError for arguments out of range.
    """
    from matplotlib.patches import Rectangle

    from distlearn.core.validate import check_int

    p = check_int("num_stages", num_stages, minimum=2, maximum=8)
    m = check_int("num_microbatches", num_microbatches, minimum=1, maximum=16)
    results = (simulate("1f1b", p, m, fwd_time=fwd_time, bwd_time=bwd_time),
               simulate("zb-h1", p, m, fwd_time=fwd_time, bwd_time=bwd_time, wgrad_time=wgrad_time))
    end = max(r.total_time for r in results)
    fig, axes = plots.plt.subplots(2, 1, figsize=(10, 1.05 * p + 2.6), sharex=True, layout="constrained")
    heads = (bi("1F1B: each backward B is one block (I + W together)", "1F1B：每个反向 B 是一整块（I 和 W 一起做）"),
             bi("ZB-H1: I at once, W later, into the gaps", "ZB-H1：I 立即做，W 推迟，填进空隙"))
    fsize = 7 if end / m < 6 else 8
    for ax, res, head in zip(axes, results, heads):
        for s in range(p):   # the bubble first, underneath: every idle stretch within the step / 先画气泡：步内每段空闲
            mine = np.flatnonzero(res.ev_stage == s)
            order = mine[np.argsort(res.ev_start[mine])]
            t = 0.0
            for i in order:
                if res.ev_start[i] > t + 1e-9:
                    ax.add_patch(Rectangle((t, s - 0.4), res.ev_start[i] - t, 0.8, facecolor=plots.COLORS["idle"],
                                           edgecolor="#999999", hatch="///", lw=0, gid=f"bubble:{s}"))
                t = max(t, float(res.ev_end[i]))
            if res.total_time > t + 1e-9:
                ax.add_patch(Rectangle((t, s - 0.4), res.total_time - t, 0.8, facecolor=plots.COLORS["idle"],
                                       edgecolor="#999999", hatch="///", lw=0, gid=f"bubble:{s}"))
        for s, k, j, st, en in zip(res.ev_stage, res.ev_kind, res.ev_microbatch, res.ev_start, res.ev_end):
            kind = KINDS[int(k)]
            ax.add_patch(Rectangle((st, s - 0.4), en - st, 0.8, facecolor=KIND_COLORS[int(k)], edgecolor="white",
                                   lw=0.8, gid=f"{kind}:{int(s)}:{int(j)}"))
            ax.text((st + en) / 2, s, str(int(j)), ha="center", va="center", fontsize=fsize,
                    color="#222222" if kind in ("I", "W") else "white")   # dark on the light colours / 浅色上用深色字
        idle = float(res.total_time - res.busy.max())
        ax.text(end + 0.02 * end, (p - 1) / 2,
                bi(f"step time {res.total_time:g}\nidle per stage {idle:g}",
                   f"每步时间 {res.total_time:g}\n每个阶段空闲 {idle:g}", sep="\n\n"), ha="left", va="center", fontsize=9)
        ax.set_ylim(p - 0.5, -0.5)
        ax.set_yticks(range(p))
        ax.set_ylabel(plots.label(T_STAGE))
        ax.set_title(head, fontsize=10, loc="left")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    # where 1F1B's step ends, on the ZB-H1 row: the time won / 在 ZB-H1 一行标出 1F1B 的结束时刻：省下的时间
    saved = results[0].total_time - results[1].total_time
    axes[1].axvline(results[0].total_time, color="#555555", ls="--", lw=1)
    if saved > 0:
        axes[1].annotate("", xy=(results[1].total_time, p - 0.5 + 0.02), xytext=(results[0].total_time, p - 0.5 + 0.02),
                         arrowprops=dict(arrowstyle="<->", color="#555555", lw=1, shrinkA=0, shrinkB=0),
                         annotation_clip=False)
        axes[1].text((results[0].total_time + results[1].total_time) / 2, p - 1,
                     bi(f"{saved:g} saved", f"省下 {saved:g}"), ha="center", va="center", fontsize=9, color="#333333")
    axes[1].set_xlim(0, end + 0.2 * end)
    axes[1].set_xticks(np.arange(0, end + 1e-9, 3 if end <= 60 else 10))
    axes[1].set_xlabel(bi(f"time (one forward = {fwd_time:g})", f"时间（一次前向 = {fwd_time:g}）"))
    names = (("F", bi("forward F", "前向 F")), ("B", bi("backward B = I + W", "反向 B = I + W")),
             ("I", plots.label(T_INPUT)), ("W", plots.label(T_WEIGHT)))
    handles = [Patch(facecolor=KIND_COLORS[KINDS.index(k)], label=t) for k, t in names]
    handles.append(Patch(facecolor=plots.COLORS["idle"], edgecolor="#999999", hatch="///",
                         label=plots.label(T_BUBBLE_SHADE)))
    fig.legend(handles=handles, loc="outside lower center", ncols=3 if get_language() == "both" else 5, fontsize=8,
               frameon=False)
    costs = f"t_f = {fwd_time:g}, t_b = {bwd_time:g} = I {bwd_time - wgrad_time:g} + W {wgrad_time:g}"
    fig.suptitle(bi(f"Zero bubble: W fills 1F1B's bubble (p = {p} stages, m = {m} micro-batches, {costs})",
                    f"零气泡：用 W 填充 1F1B 的气泡（p = {p} 个阶段，m = {m} 个微批次，{costs}）", sep="\n"),
                 fontsize=11)
    return fig

"""Explorer for chapter 07: compute/communication ratio, prefetch depth and all-gather limit → timeline and memory.

``compute(...)`` runs :func:`distlearn.overlap_prefetch.timeline.uniform`; ``plot_timeline`` draws the two streams (compute, comm) as a
Gantt chart above the unsharded bytes over time. The notebook uses ``plot_timeline`` too.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.overlap_prefetch import timeline as overlap
from distlearn.core import plots
from distlearn.core.i18n import bi, text
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

L_RATIO = text("overlap.ratio", "all-gather time / forward time", "AllGather 时间 / 前向计算时间")
L_DEPTH = text("overlap.depth", "prefetch depth", "预取深度")
DEPTH_LABELS = read_only({0: ("0 · CPU-bound worst case", "0 · CPU 瓶颈下的最坏情况"),
                1: ("1 · FSDP2 / FSDP1 default", "1 · FSDP2 / FSDP1 默认"),
                2: ("2 · explicit prefetch", "2 · 显式预取"), 3: ("3 · explicit prefetch", "3 · 显式预取"),
                4: ("4 · explicit prefetch", "4 · 显式预取")})
L_LIMIT = text("overlap.limit", "max units unsharded (0 = no limit)", "最多同时未分片的单元数（0 = 不限）")
L_UNITS = text("overlap.units", "number of units", "单元数")
L_RESHARD = text("overlap.reshard", "reshard after forward (FULL_SHARD)", "前向后重新分片 (FULL_SHARD)")
L_TITLE = text("overlap.title", "One FSDP step: timeline and memory", "一次 FSDP 迭代：时间线与显存")


@base.within_controls(lambda: controls())
def compute(ratio: float = 0.6, depth: int = 1, limit: int = 0, units: int = 6, reshard: bool = True) -> dict:
    """Simulate ``units`` identical units (forward 1, backward 2, all-gather = reduce-scatter = ``ratio``), both
    phases with prefetch ``depth`` (1 = what FSDP2 and FSDP1 do by default, 0 = the CPU-bound worst case, ≥ 2 =
    explicit prefetch; :data:`distlearn.overlap_prefetch.timeline.PREFETCH_MODES`).

    Returns ``{"result": OverlapResult, "serial": time without any overlap, "ideal": compute-only time, ...}``, or
    ``{"error": message}`` for an invalid combination.
    """
    try:
        r = overlap.uniform(units, 1.0, ratio, forward_prefetch=depth, backward_prefetch=depth,
                            max_inflight=limit or None, reshard_after_forward=reshard)
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    serial = overlap.uniform(units, 1.0, ratio, forward_prefetch=0, backward_prefetch=0,
                             reshard_after_forward=reshard)
    return {"result": r, "depth": depth, "serial": serial.total_time, "ideal": r.compute_time, "total": r.total_time,
            "peak_units": r.peak_units, "peak_bytes": r.peak_bytes, "serial_peak_bytes": serial.peak_bytes}


KIND_COLOR = read_only({"forward": plots.COLORS["forward"], "backward": plots.COLORS["backward"],
              "all_gather": plots.COLORS["comm"], "reduce_scatter": "#C44E52"})


def plot_timeline(result, unit_label: tuple[str, str] = ("unit-sizes", "单元大小"),
                  title: tuple[str, str] | None = None):
    """Gantt chart of ``result.ops`` (compute and comm lanes) above the unsharded memory over time.

    ``unit_label``: (English, Chinese) name of the memory unit on the lower panel's y axis."""
    fig, (ax, axm) = plt.subplots(2, 1, figsize=(9, 4.2), sharex=True, layout="constrained",
                                  gridspec_kw={"height_ratios": [1.3, 1]})
    lanes = {"compute": 1, "comm": 0}
    for o in result.ops:
        ax.barh(lanes[o.stream], o.end - o.start, left=o.start, height=0.6, color=KIND_COLOR[o.kind],
                edgecolor="white", linewidth=0.6)
        if o.end - o.start > 0.02 * result.total_time:
            ax.text((o.start + o.end) / 2, lanes[o.stream], str(o.unit), ha="center", va="center", fontsize=7,
                    color="white")
    ax.set_yticks([0, 1], [bi("comm", "通信"), bi("compute", "计算")])
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in KIND_COLOR.values()]
    fig.legend(handles, [bi("forward", "前向"), bi("backward", "反向"), "AllGather", "ReduceScatter"],
               ncol=4, fontsize=7, loc="outside lower center")
    times, values = result.memory_curve()
    axm.step(times, values, where="post", color=plots.COLORS["params"])
    axm.set_ylabel(bi(f"unsharded ({unit_label[0]})", f"未分片（{unit_label[1]}）", sep="\n"), fontsize=8)
    axm.set_xlabel(bi("time", "时间"))
    if title:
        plots.title(ax, *title)
    return fig


def render(res: dict) -> None:
    if "error" in res:
        print(res["error"])
        return
    print(bi(f"prefetch depth {res['depth']}: {DEPTH_LABELS[res['depth']][0]}",
             f"预取深度 {res['depth']}：{DEPTH_LABELS[res['depth']][1]}"))
    print(bi(f"step time {res['total']:.2f} (no overlap {res['serial']:.2f}, compute only {res['ideal']:.2f}); "
             f"peak unsharded: {res['peak_units']} units' parameters, {res['peak_bytes']:.0f} unit-sizes with "
             f"gradients",
             f"每步时间 {res['total']:.2f}（不重叠 {res['serial']:.2f}，纯计算 {res['ideal']:.2f}）；"
             f"峰值未分片：{res['peak_units']} 个单元的参数，连同梯度共 {res['peak_bytes']:.0f} 个单元大小", sep="\n"))
    plot_timeline(res["result"], title=(L_TITLE.en, L_TITLE.zh))
    plt.show()


def controls() -> dict:
    return {"ratio": base.float_slider(L_RATIO, 0.6, 0.1, 3.0, 0.1),
            "depth": base.int_slider(L_DEPTH, 1, min(DEPTH_LABELS), max(DEPTH_LABELS)),  # its meaning is printed
            "limit": base.int_slider(L_LIMIT, 0, 0, 4),
            "units": base.int_slider(L_UNITS, 6, 1, 16),
            "reshard": base.checkbox(L_RESHARD, True)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=L_TITLE)

"""Figure of chapter 07: the idea of prefetching in one picture. The same units' forward pass, drawn twice on two
streams (communication above, compute below) with the unsharded units underneath: without prefetch every all-gather
waits for the previous unit to finish; with prefetch the all-gather of unit i+1 is issued as unit i starts, and one
more unit is unsharded in memory. The bars come from :func:`distlearn.overlap_prefetch.timeline.simulate`."""
from __future__ import annotations

from matplotlib.patches import Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.core.validate import check_int, check_number
from distlearn.overlap_prefetch import timeline

AG_COLOR = plots.COLORS["comm"]
FW_COLOR = plots.COLORS["forward"]
MEM_COLOR = plots.COLORS["params"]
UNIT_H = 0.38          # height of one unsharded unit in the memory lane


def prefetch_picture(n_units: int = 4, compute: float = 1.0, comm: float = 0.6, ax=None):
    """Prefetching in one picture: ``n_units`` identical units (forward ``compute``, all-gather ``comm``), forward
    only, drawn once at depth 0 (no prefetch) and once at depth 1 (the all-gather of unit i+1 issued when unit i
    starts). Each panel has a communication lane (all-gather bars, gid ``"all_gather"``), a compute lane (forward
    bars, gid ``"forward"``; the compute stream's idle gaps hatched, gid ``"idle"``), vertical arrows where the next
    all-gather is issued (gid ``"issue"``), and the unsharded units over time below them, with their peak. All text
    goes through :func:`distlearn.core.i18n.bi`. Returns the axes."""
    n = check_int("n_units", n_units, minimum=2)
    compute = check_number("compute", compute, minimum=0, strict_min=True)
    comm = check_number("comm", comm, minimum=0, strict_min=True)
    runs = [timeline.uniform(n, compute, comm, include_backward=False, forward_prefetch=k) for k in (0, 1)]
    span = max(r.total_time for r in runs)
    peak = max(r.peak_units for r in runs)
    mem_h = peak * UNIT_H
    panel_h = mem_h + 2.0
    if ax is None:
        _, ax = plots.new_figure(10.0, 2 * panel_h * 0.62 + 1.4)
    heads = (bi("Without prefetch (depth 0): each all-gather waits until the previous unit has finished",
                "不预取（深度 0）：每次 AllGather 都要等上一个单元算完"),
             bi("With prefetch (depth 1): the all-gather of unit i+1 runs while unit i computes",
                "预取（深度 1）：单元 i 计算时，单元 i+1 的 AllGather 同时进行"))
    for p, (r, head) in enumerate(zip(runs, heads)):
        base = (1 - p) * (panel_h + 0.9)          # the top panel first
        y_mem, y_fw, y_ag = base, base + mem_h + 0.55, base + mem_h + 1.35
        for y, name in ((y_ag, bi("comm stream", "通信流")), (y_fw, bi("compute stream", "计算流")),
                        (y_mem + mem_h / 2, bi("unsharded units", "未分片的单元"))):
            ax.text(-0.08 * span, y, name, ha="right", va="center", fontsize=8)
        ax.text(-0.08 * span - 0.12 * span, y_ag + 0.55, head, ha="left", va="bottom", fontsize=9)
        busy = sorted((o.start, o.end) for o in r.ops if o.stream == "compute")
        last = 0.0
        for start, end in busy:                   # the compute stream waiting for parameters
            if start > last + 1e-12:
                ax.add_patch(Rectangle((last, y_fw - 0.22), start - last, 0.44, facecolor="white",
                                       edgecolor=plots.COLORS["idle"], hatch="///", lw=0.6, gid="idle"))
            last = end
        for o in r.ops:
            ag = o.kind == "all_gather"
            y = y_ag if ag else y_fw
            ax.add_patch(Rectangle((o.start, y - 0.25), o.end - o.start, 0.5, facecolor=AG_COLOR if ag else FW_COLOR,
                                   edgecolor="white", lw=0.8, gid=o.kind))
            ax.text((o.start + o.end) / 2, y, (f"AG{o.unit}" if ag else bi(f"F{o.unit}", f"前向{o.unit}")),
                    ha="center", va="center", fontsize=7, color="white")
            if ag and o.unit > 0:                 # where the CPU issued it, seen from the compute stream
                ax.annotate("", xy=(o.issue, y_ag - 0.27), xytext=(o.issue, y_fw + 0.27),
                            arrowprops=dict(arrowstyle="->", color="#333333", lw=0.9, shrinkA=0, shrinkB=0),
                            gid="issue")
        times, values = r.memory_curve()
        ax.fill_between(times, y_mem, [y_mem + v * UNIT_H for v in values], step="post", color=MEM_COLOR,
                        alpha=0.55, lw=0)
        for level in range(1, peak + 1):
            ax.plot([0, r.total_time], [y_mem + level * UNIT_H] * 2, color="#BBBBBB", lw=0.5, ls=":")
        ax.plot([0, r.total_time], [y_mem, y_mem], color="#555555", lw=0.6)
        ax.text(r.total_time + 0.02 * span, y_fw,
                bi(f"forward ends at {r.total_time:g}", f"前向在 {r.total_time:g} 结束"),
                ha="left", va="center", fontsize=8)
        ax.text(r.total_time + 0.02 * span, y_mem + r.peak_units * UNIT_H / 2,
                bi(f"peak: {r.peak_units} unit{'s' if r.peak_units > 1 else ''}",
                   f"峰值：{r.peak_units} 个单元"), ha="left", va="center", fontsize=8)
    ax.text(-0.2 * span, -0.35, bi(
        "Arrows: the moment the next all-gather is issued. Hatched: the compute stream waits for parameters.",
        "箭头：发起下一次 AllGather 的时刻。斜线：计算流在等参数。"), ha="left", va="top", fontsize=8,
        color="#444444")
    ax.set_xlim(-0.2 * span, span * 1.22)
    ax.set_ylim(-1.0, 2 * panel_h + 1.6)
    ax.set_axis_off()
    plots.title(ax, f"Prefetching in one picture: {n} units, forward {compute:g}, all-gather {comm:g}",
                f"一张图看懂预取：{n} 个单元，前向 {compute:g}，AllGather {comm:g}")
    return ax

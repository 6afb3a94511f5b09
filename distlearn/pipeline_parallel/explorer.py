"""Chapter 05 explorer: pick a schedule, stages, micro-batches, chunks, backward/forward cost ratio and p2p time;
see the Gantt chart, the bubble fraction and the peak activations held by each stage. The split-backward schedules
(ZB-H1, ZB-H2, interleaved zero bubble, ZB-V, DualPipeV, DualPipe) also take the weight-gradient share of the
backward."""
from __future__ import annotations

from distlearn.core.i18n import bi, text
from distlearn.pipeline_parallel import zero_bubble
from distlearn.pipeline_parallel.plots import NAMES
from distlearn.pipeline_parallel.schedules import ALL_SCHEDULES, closed_form, simulate
from distlearn.pipeline_parallel.zero_bubble import ZERO_BUBBLE_SCHEDULES
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base

T_TITLE = text("pipeline.explorer", "Pipeline schedule explorer", "流水线调度探索器")
T_SCHEDULE = text("pipeline.schedule", "schedule", "调度")
T_STAGES = text("pipeline.num_stages", "stages p", "阶段数 p")
T_MB = text("pipeline.num_microbatches_short", "micro-batches m", "微批次数 m")
T_CHUNKS = text("pipeline.num_chunks", "chunks per stage v", "每阶段模型块数 v")
T_RATIO = text("pipeline.bwd_ratio", "backward / forward time", "反向 / 前向 耗时比")
T_P2P = text("pipeline.p2p_time", "p2p time (× forward)", "点对点通信时间（× 前向）")
INTERLEAVED = ("interleaved-1f1b", "interleaved-zb")   # the schedules whose number of chunks v the reader picks
T_WSHARE = text("pipeline.wgrad_share", "weight-gradient share of the backward (W / B)", "反向中权重梯度的占比（W / B）")


def controls() -> dict:
    return {
        "schedule": base.dropdown(T_SCHEDULE, [("GPipe", "gpipe"), ("1F1B", "1f1b"),
                                               (("interleaved 1F1B", "交错 1F1B"), "interleaved-1f1b"),
                                               ("ZB-H1", "zb-h1"), (("ZB-H2 (greedy)", "ZB-H2（贪心）"), "zb-h2"),
                                               (("interleaved zero bubble", "交错零气泡"), "interleaved-zb"),
                                               ("ZB-V", "zbv"), ("DualPipeV", "dualpipev"),
                                               ("DualPipe", "dualpipe")], "1f1b"),
        "num_stages": base.int_slider(T_STAGES, 4, 1, 16),
        "num_microbatches": base.int_slider(T_MB, 8, 1, 64),
        "num_chunks": base.int_slider(T_CHUNKS, 2, 1, 4),
        "bwd_ratio": base.float_slider(T_RATIO, 2.0, 0.5, 3.0, 0.25),
        "p2p_time": base.float_slider(T_P2P, 0.0, 0.0, 1.0, 0.05),
        "wgrad_share": base.float_slider(T_WSHARE, 0.5, 0.1, 0.9, 0.05),
    }


@base.within_controls(lambda: controls())
def compute(schedule="1f1b", num_stages=4, num_microbatches=8, num_chunks=2, bwd_ratio=2.0, p2p_time=0.0,
            wgrad_share=0.5) -> dict:
    """Simulate one step (forward time 1 per micro-batch per stage). ``num_chunks`` only applies to the
    interleaved schedules; ``wgrad_share`` (W's share of the backward) only to the split-backward ones.
    Returns ``{"result", "closed_form", "note"}`` or ``{"error": message}``."""
    if schedule not in ALL_SCHEDULES:
        return {"error": bi(f"unknown schedule {schedule!r}", f"未知调度 {schedule!r}")}
    if schedule in ZERO_BUBBLE_SCHEDULES:
        return _compute_split(schedule, num_stages, num_microbatches, num_chunks, bwd_ratio, p2p_time, wgrad_share)
    v = num_chunks if schedule == "interleaved-1f1b" else 1
    note = ""
    if schedule != "interleaved-1f1b" and num_chunks > 1:
        note = bi("chunks apply only to interleaved 1F1B: v = 1 here.", "模型块数只用于交错 1F1B：此处 v = 1。")
    try:
        r = simulate(schedule, num_stages, num_microbatches, fwd_time=1.0, bwd_time=bwd_ratio, num_chunks=v,
                     p2p_time=p2p_time)
        cf = closed_form(schedule, num_stages, num_microbatches, fwd_time=1.0, bwd_time=bwd_ratio, num_chunks=v)
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    if p2p_time > 0 or (v > 1 and num_microbatches % num_stages):
        note += bi(" The closed form assumes no p2p time and, when interleaved, m a multiple of p: here it is only "
                   "an approximation.", "闭式解假设没有点对点通信时间，且交错调度时 m 是 p 的倍数：此处它只是近似。")
    return {"result": r, "closed_form": cf, "note": note.strip()}


def _compute_split(schedule, p, m, num_chunks, bwd_ratio, p2p_time, wgrad_share) -> dict:
    """The split-backward schedules: the simulation, and the published closed form where there is one."""
    v = num_chunks if schedule == "interleaved-zb" else 1
    note = ""
    if schedule != "interleaved-zb" and num_chunks > 1:
        en, zh = NAMES[schedule]
        note = bi(f"chunks: {en} has a fixed layout (v is not used).", f"模型块数：{zh} 的布局是固定的（不使用 v）。")
    try:
        r = simulate(schedule, p, m, fwd_time=1.0, bwd_time=bwd_ratio, wgrad_time=wgrad_share * bwd_ratio,
                     num_chunks=v, p2p_time=p2p_time)
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    cf = None
    if schedule in ("zb-h1", "zb-h2", "zbv", "dualpipe"):
        cf = zero_bubble.closed_form(schedule, p, m, fwd_time=1.0, bwd_time=bwd_ratio,
                                     wgrad_time=wgrad_share * bwd_ratio)
        if not cf["exact"] or p2p_time > 0:
            note += bi(" The closed form is exact only for the costs its source assumes (and no p2p time): here "
                       "it is only a guide.", "闭式解只在其来源假设的代价下（且没有点对点通信时间）才精确：此处仅供参考。")
    return {"result": r, "closed_form": cf, "note": note.strip()}


def _render_split(r, cf) -> None:
    idle = ", ".join(f"{x:.2f}" for x in r.span_idle)
    text_cf = "" if cf is None or cf["bubble_time"] != cf["bubble_time"] else f"{cf['bubble_time']:.2f}"
    print(bi(f"step time {r.total_time:.2f}; bubble fraction {r.bubble_fraction:.1%} (idle share, with the flush)",
             f"每步时间 {r.total_time:.2f}；气泡率 {r.bubble_fraction:.1%}（空闲占比，含冲刷）", sep="\n"))
    print(bi(f"idle inside each stage's span: {idle}" + (f" (closed form, worst stage: {text_cf})" if text_cf else ""),
             f"各阶段首末操作之间的空闲：{idle}" + (f"（闭式解，最差阶段：{text_cf}）" if text_cf else ""), sep="\n"))


def render(out: dict) -> None:
    import matplotlib.pyplot as plt

    from distlearn.pipeline_parallel.plots import gantt

    if "error" in out:
        print(out["error"])
        return
    r, cf = out["result"], out["closed_form"]
    if out["note"]:
        print(out["note"])
    if r.schedule in ZERO_BUBBLE_SCHEDULES:
        _render_split(r, cf)
    else:
        print(bi(f"total time {r.total_time:.2f} (closed form {cf['total_time']:.2f}); bubble fraction "
                 f"{r.bubble_fraction:.1%} (closed form {cf['bubble_fraction']:.1%}); t_bubble / t_ideal = "
                 f"{r.bubble_ratio:.3f}",
                 f"总时间 {r.total_time:.2f}（闭式解 {cf['total_time']:.2f}）；气泡率 {r.bubble_fraction:.1%}"
                 f"（闭式解 {cf['bubble_fraction']:.1%}）；t_bubble / t_ideal = {r.bubble_ratio:.3f}", sep="\n"))
    peaks = ", ".join(f"{x:g}" for x in r.peak_inflight)
    print(bi(f"peak activations per stage (micro-batches): {peaks}", f"各阶段峰值激活值（以微批次计）：{peaks}"))
    gantt(r)
    plt.show()


def active(values: dict) -> dict:
    """Which controls matter: the chunks v only for the interleaved schedules (the others have one chunk per stage,
    or the fixed two of ZB-V, DualPipeV and DualPipe), the weight-gradient share only when the backward is split."""
    return {"num_chunks": values["schedule"] in INTERLEAVED, "wgrad_share": values["schedule"] in ZERO_BUBBLE_SCHEDULES}


def explorer():
    return base.build(controls(), compute, render, title=T_TITLE, active=active)

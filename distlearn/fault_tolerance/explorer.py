"""Explorer for chapter 13: GPUs, failure rate per GPU-day, checkpoint and restart time, checkpoint interval →
the job's MTBF, expected restarts per day, and the goodput curve (Daly 2006's complete model) with Young's
interval, Daly's estimate and the exact optimum marked. All numbers come from :mod:`distlearn.fault_tolerance.goodput`.
"""
from __future__ import annotations

import ipywidgets as W
import matplotlib.pyplot as plt
import numpy as np

from distlearn.fault_tolerance import goodput as ft
from distlearn.core import plots
from distlearn.core.i18n import bi, text
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

L_GPUS = text("ft.gpus", "GPUs in the job", "作业中的 GPU 数")
L_RATE = text("ft.rate", "failures per GPU-day", "每块 GPU 每天的故障数")
L_CKPT = text("ft.ckpt", "checkpoint time δ (s)", "保存检查点的时间 δ（秒）")
L_RESTART = text("ft.restart", "restart time R (min)", "重启时间 R（分钟）")
L_INTERVAL = text("ft.interval", "checkpoint interval τ (min)", "检查点间隔 τ（分钟）")
L_TITLE = text("ft.title", "Goodput versus checkpoint interval", "有效训练时间占比 (goodput) 随检查点间隔的变化")

LLAMA3_RATE = ft.rate_per_unit_day(419, 54, 16384)   # Llama 3 405B: 419 unexpected interruptions, 54 days, 16,384 GPUs
RATES = read_only([1e-4, 2e-4, LLAMA3_RATE, 1e-3, 2e-3, 5e-3])


@base.within_controls(lambda: controls())
def compute(num_gpus: int = 16384, failures_per_gpu_day: float = LLAMA3_RATE, checkpoint_s: float = 60.0,
            restart_min: float = 10.0, interval_min: float = 30.0) -> dict:
    """The job's MTBF (hours), restarts per day, the three intervals (minutes), goodput at ``interval_min`` and
    at the optimum, and the curve ``(intervals, goodputs)`` in minutes; or ``{"error": message}``."""
    try:
        mtbf_min = ft.job_mtbf_hours(num_gpus, failures_per_gpu_day) * 60.0
        delta = checkpoint_s / 60.0
        p = ft.plan(delta, restart_min, mtbf_min)
        g_here = ft.goodput(interval_min, delta, restart_min, mtbf_min)
        lo, hi = min(p.optimum, interval_min) / 20.0, max(p.optimum, interval_min) * 20.0
        taus = np.geomspace(lo, min(hi, 50.0 * mtbf_min), 200)
        curve = [ft.goodput(float(t), delta, restart_min, mtbf_min) for t in taus]
        lost = ft.expected_lost_work(interval_min, delta, mtbf_min)
    except (ValueError, OverflowError) as exc:
        return {"error": str(exc)}
    return {"num_gpus": num_gpus, "rate": failures_per_gpu_day, "mtbf_h": mtbf_min / 60.0,
            "restarts_per_day": ft.job_failures_per_day(num_gpus, failures_per_gpu_day), "plan": p,
            "interval_min": interval_min, "goodput": g_here, "lost_min": lost, "restart_min": restart_min,
            "taus": taus.tolist(), "curve": curve}


def render(res: dict) -> None:
    if "error" in res:
        print(res["error"])
        return
    p = res["plan"]
    print(bi(f"{res['num_gpus']:,} GPUs × {res['rate']:.2e} failures per GPU-day → MTBF {res['mtbf_h']:.2f} h, "
             f"{res['restarts_per_day']:.1f} restarts per day",
             f"{res['num_gpus']:,} 块 GPU × 每块每天 {res['rate']:.2e} 次故障 → 平均无故障时间 (MTBF) "
             f"{res['mtbf_h']:.2f} 小时，每天约重启 {res['restarts_per_day']:.1f} 次", sep="\n"))
    print(bi(f"Young {p.young:.1f} min, Daly {p.daly:.1f} min, exact optimum {p.optimum:.1f} min → goodput "
             f"{p.goodput_optimum:.1%}",
             f"Young {p.young:.1f} 分钟，Daly {p.daly:.1f} 分钟，精确最优 {p.optimum:.1f} 分钟 → 有效训练时间占比 "
             f"{p.goodput_optimum:.1%}", sep="\n"))
    print(bi(f"your interval {res['interval_min']:g} min: goodput {res['goodput']:.1%}; each failure loses "
             f"{res['lost_min']:.1f} min of work + {res['restart_min']:g} min restart",
             f"你的间隔 {res['interval_min']:g} 分钟：有效训练时间占比 {res['goodput']:.1%}；每次故障丢失 "
             f"{res['lost_min']:.1f} 分钟的计算 + {res['restart_min']:g} 分钟重启", sep="\n"))
    fig, ax = plots.new_figure(8, 3.2)
    ax.plot(res["taus"], [100 * g for g in res["curve"]], color=plots.COLORS["params"])
    ax.axvline(res["interval_min"], color="0.5", ls=":", label=bi("your interval", "你的间隔"))
    ax.plot([p.optimum], [100 * p.goodput_optimum], "o", color=plots.COLORS["optimizer"],
            label=bi("optimum", "最优"))
    ax.plot([p.young], [100 * p.goodput_young], "x", color="k", label=bi("Young", "Young 公式"))
    ax.set_xscale("log")
    ax.set_xlabel(bi("checkpoint interval τ (min)", "检查点间隔 τ（分钟）"))
    ax.set_ylabel(bi("goodput (%)", "有效训练时间占比（%）"))
    ax.legend(fontsize=8, loc="lower center")
    plots.title(ax, L_TITLE.en, L_TITLE.zh)
    plt.show()


def controls() -> dict:
    rates = [(f"{r:.2e}" + (" (Llama 3)" if r == LLAMA3_RATE else ""), r) for r in RATES]
    return {"num_gpus": base.log2_slider(L_GPUS, 16384, 8, 131072),
            "failures_per_gpu_day": W.SelectionSlider(options=rates, value=LLAMA3_RATE, description=str(L_RATE),
                                                      continuous_update=False, style=base.STYLE,
                                                      layout=base.LAYOUT),
            "checkpoint_s": base.float_slider(L_CKPT, 60.0, 1.0, 600.0, 1.0),
            "restart_min": base.float_slider(L_RESTART, 10.0, 0.0, 60.0, 0.5),
            "interval_min": base.float_slider(L_INTERVAL, 30.0, 1.0, 600.0, 1.0)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=L_TITLE)

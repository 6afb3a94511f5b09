"""Figures of the RL systems part of chapter 15, in the reader's language: the two placements' timelines side by side
(:func:`plot_timelines`) and the RL lab's reward curves with the importance ratio (:func:`plot_reward_curves`)."""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.core.guard import read_only

KIND_COLORS = read_only({"generate": "#4C72B0", "score": "#8172B3", "train": "#55A868", "sync": "#DD8452",
               "reshard": "#C44E52", "offload": "#937860"})
KIND_NAMES = read_only({"generate": ("generate", "生成"), "score": ("score", "打分"), "train": ("train", "训练"),
              "sync": ("weight broadcast", "权重广播"), "reshard": ("reshard", "重新分片"),
              "offload": ("offload / reload", "卸载 / 载回")})
POOL_NAMES = read_only({"all": ("all GPUs", "全部 GPU"), "generator": ("generator pool", "生成池"),
              "trainer": ("trainer pool", "训练池")})
SOURCES = ("Placements: HybridFlow/verl (arXiv 2409.19256), OpenRLHF (arXiv 2405.11143), AReaL (arXiv 2505.24298); "
           "80 % generation share: OpenRLHF",
           "放置方式：HybridFlow/verl（arXiv 2409.19256）、OpenRLHF（arXiv 2405.11143）、AReaL（arXiv 2505.24298）；"
           "生成占 80 %：OpenRLHF")


def _lanes(ax, timeline, until: float) -> None:
    """Draw ``timeline``'s phases that start before ``until`` as horizontal bars, one lane per pool."""
    pools = ["all"] if timeline.placement == "colocated" else ["trainer", "generator"]
    for p in timeline.phases:
        if p.start >= until:
            continue
        y = pools.index(p.pool)
        ax.barh(y, min(p.end, until) - p.start, left=p.start, height=0.6, color=KIND_COLORS[p.kind],
                edgecolor="white", linewidth=0.5)
        if p.kind in ("generate", "train") and (min(p.end, until) - p.start) > 0.06 * until:
            ax.text((p.start + min(p.end, until)) / 2, y, f"v{p.version}", ha="center", va="center", fontsize=7,
                    color="white")
    ax.set_yticks(range(len(pools)), [bi(*POOL_NAMES[p]) for p in pools])
    ax.set_xlim(0, until)
    ax.set_ylim(-0.6, len(pools) - 0.4)


def plot_timelines(comparison, steps: int = 3):
    """The colocated and the disaggregated timeline of ``comparison`` (:func:`distlearn.post_training.rl_timeline.
    compare`) one above the other on the same time axis, covering ``steps`` colocated steps; each title carries the
    steady step time and the policy lag. Bars: generate, score, train, weight broadcast, reshard, offload; the label
    vN on a bar is the weight version it used (generation) or produced (training). Returns the figure."""
    col, dis = comparison.colocated, comparison.disaggregated
    until = max(steps * col.step_time, min(steps * dis.step_time, 2 * steps * col.step_time))
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(9, 3.8), layout="constrained", sharex=True,
                                 gridspec_kw={"height_ratios": [1, 1.6]})
    _lanes(a1, col, until)
    _lanes(a2, dis, until)
    a1.set_title(bi(f"colocated: step {col.step_time:.1f} s, policy lag 0",
                    f"共置部署：每步 {col.step_time:.1f} 秒，策略滞后 0"), fontsize=9)
    k = dis.setup.staleness
    mode = bi("synchronous", "同步") if k == 0 else bi(f"asynchronous, k = {k}", f"异步，k = {k}")
    a2.set_title(bi(f"disaggregated ({mode}): step {dis.step_time:.1f} s, policy lag {dis.policy_lag}",
                    f"分离部署（{mode}）：每步 {dis.step_time:.1f} 秒，策略滞后 {dis.policy_lag}"), fontsize=9)
    a2.set_xlabel(bi("time (s)", "时间（秒）"))
    kinds = [k for k in KIND_COLORS if any(p.kind == k for p in col.phases + dis.phases)]
    fig.legend([plt.Rectangle((0, 0), 1, 1, color=KIND_COLORS[k]) for k in kinds],
               [bi(*KIND_NAMES[k]) for k in kinds], ncol=len(kinds), fontsize=7, loc="outside lower center",
               title=bi(*SOURCES), title_fontsize=6, frameon=False)
    return fig


def plot_reward_curves(runs: dict):
    """Reward per step (left) and mean |ρ − 1| per step (right) of several RL runs: ``runs`` maps an (English,
    Chinese) label to a :class:`distlearn.post_training.lab_rl.RLRun`. Returns the figure."""
    fig, (ax, axr) = plots.new_figure(9.0, 3.2, ncols=2)
    styles = [("-", 3.5, 0.45), ("--", 1.5, 1.0), (":", 2.0, 1.0), ("-.", 1.5, 1.0)]   # curves that coincide stay visible
    for i, ((en, zh), run) in enumerate(runs.items()):
        ls, lw, alpha = styles[i % len(styles)]
        line, = ax.plot(range(len(run.rewards)), run.rewards, ls=ls, lw=lw, alpha=alpha, label=bi(en, zh))
        axr.plot(range(len(run.ratio_dev)), run.ratio_dev, ls=ls, lw=lw, alpha=alpha, color=line.get_color())
    steps = max(len(run.rewards) for run in runs.values())
    ax.axhline(1 / 8, color="0.6", lw=0.8, ls=":")
    ax.text(steps - 1, 1 / 8 - 0.06, bi("random policy", "随机策略"), fontsize=7, color="0.4", ha="right")
    ax.set_xlabel(bi("update", "更新次数"))
    ax.set_ylabel(bi("mean reward", "平均奖励"))
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    axr.set_xlabel(bi("update", "更新次数"))
    axr.set_ylabel(bi("mean |ρ − 1|", "|ρ − 1| 的均值"))
    plots.title(ax, "Reward of the RL lab (real processes)", "RL 实验的奖励（真实进程）")
    plots.title(axr, "Importance ratio ρ = π_trainer / π_generator", "重要性比 ρ = π_训练 / π_生成")
    return fig

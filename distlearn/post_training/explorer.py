"""Explorer for chapter 15's RL placements: model size, GPUs, the generator pool's share of them, generation's share of
the step, network bandwidth, the dedicated generator's per-GPU efficiency and the staleness bound k → both
timelines (:func:`distlearn.post_training.plots_rl.plot_timelines`) and their numbers.

``compute`` builds an :class:`~distlearn.post_training.rl_timeline.RLSetup` (one step's compute fixed at 100 s on
all GPUs, split by the generation share) and runs :func:`~distlearn.post_training.rl_timeline.compare`.
"""
from __future__ import annotations

import matplotlib.pyplot as plt

from distlearn.core import explorer as base
from distlearn.core.i18n import bi, table, text
from distlearn.core.validate import DistlearnValueError
from distlearn.post_training import plots_rl
from distlearn.post_training.rl_timeline import RLSetup, compare

STEP_SECONDS = 100.0   # one step's generation + training on all GPUs (illustrative) / 全部 GPU 上一步的计算时间（示意）

L_MODEL = text("post_training.model", "model size (billions of parameters)", "模型大小（十亿参数）")
L_GPUS = text("post_training.gpus", "GPUs in all", "GPU 总数")
L_POOL = text("post_training.pool", "generator pool's share of the GPUs", "生成池占 GPU 的比例")
L_SHARE = text("post_training.share", "generation's share of the step", "生成在每步时间中的占比")
L_NET = text("post_training.network", "network per GPU (GB/s)", "每块 GPU 的网络带宽（GB/s）")
L_EFF = text("post_training.efficiency", "dedicated generator's speed per GPU (× colocated)",
             "独立生成池每块 GPU 的速度（相对共置的倍数）")
L_K = text("post_training.staleness", "staleness bound k (0 = synchronous)", "陈旧度上限 k（0 = 同步）")
L_TITLE = text("post_training.title", "RL step: colocated versus disaggregated", "RL 的一步：共置部署与分离部署")


@base.within_controls(lambda: controls())
def compute(params_billion: float = 7, gpus: int = 16, pool_share: float = 0.75, gen_share: float = 0.8,
            network_gbs: float = 50, gen_efficiency: float = 1.0, staleness: int = 0) -> dict:
    """Both placements for these values; the generator pool is round(pool_share · gpus) GPUs, at least 1 and at most
    gpus − 1. Returns ``{"comparison": Comparison, "setup": RLSetup}`` or ``{"error": message}``."""
    gen_gpus = min(gpus - 1, max(1, round(pool_share * gpus)))
    try:
        setup = RLSetup(params_billion=params_billion, gpus=gpus, gen_gpus=gen_gpus,
                        gen_seconds=STEP_SECONDS * gen_share, train_seconds=STEP_SECONDS * (1 - gen_share),
                        network_gbs=network_gbs, gen_efficiency=gen_efficiency, staleness=staleness)
        return {"comparison": compare(setup), "setup": setup}
    except DistlearnValueError as exc:
        return {"error": str(exc)}


def render(res: dict) -> None:
    if "error" in res:
        print(res["error"])
        return
    c, s = res["comparison"], res["setup"]
    col, dis = c.colocated, c.disaggregated
    o = col.overheads
    print(bi(f"{s.gpus} GPUs: colocated on all; disaggregated {s.gen_gpus} generate, {s.train_gpus} train.",
             f"{s.gpus} 块 GPU：共置部署时全部共用；分离部署时 {s.gen_gpus} 块生成、{s.train_gpus} 块训练。"))
    rows = [[bi("colocated", "共置部署"), f"{col.step_time:.2f}", f"{100 * col.idle_overall:.1f}", col.policy_lag,
             bi(f"reshard {o.reshard:.2f} + offload {o.offload:.2f}", f"重新分片 {o.reshard:.2f} + 卸载 {o.offload:.2f}")],
            [bi("disaggregated", "分离部署"), f"{dis.step_time:.2f}", f"{100 * dis.idle_overall:.1f}", dis.policy_lag,
             bi(f"broadcast {o.broadcast:.2f}", f"广播 {o.broadcast:.2f}")]]
    print(table([("placement", "放置方式"), ("step (s)", "每步（秒）"), ("GPU idle (%)", "GPU 空闲（%）"),
                 ("policy lag", "策略滞后"), ("transfers (s)", "传输（秒）")], rows))
    winner = bi("colocated", "共置部署") if c.faster == "colocated" else bi("disaggregated", "分离部署")
    print(bi(f"faster: {winner} (colocated step / disaggregated step = {c.speedup:.2f})",
             f"更快的是：{winner}（共置部署每步 / 分离部署每步 = {c.speedup:.2f}）"))
    plots_rl.plot_timelines(c)
    plt.show()


def controls() -> dict:
    return {"params_billion": base.selection_slider(L_MODEL, [0.5, 1.5, 7, 14, 32, 70, 235, 671], 7),
            "gpus": base.log2_slider(L_GPUS, 16, 4, 256),
            "pool_share": base.float_slider(L_POOL, 0.75, 0.1, 0.9, 0.05),
            "gen_share": base.float_slider(L_SHARE, 0.8, 0.3, 0.95, 0.05),
            "network_gbs": base.selection_slider(L_NET, [3.125, 12.5, 25, 50, 100], 50),
            "gen_efficiency": base.float_slider(L_EFF, 1.0, 0.5, 2.0, 0.1),
            "staleness": base.int_slider(L_K, 0, 0, 4)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render, title=L_TITLE)

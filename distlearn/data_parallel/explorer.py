"""Explorer for chapter 03: world size, batch size, how the batch is split and how per-rank losses are combined →
the loss reported vs the full-batch loss (the bias of the naive mean), and the bytes and time of the gradient
all-reduce per step."""
from __future__ import annotations

import numpy as np

from distlearn.data_parallel import simulation as dp
from distlearn.core.comm import ring_bytes_per_rank
from distlearn.core.cost import collective_time
from distlearn.core.i18n import bi, text
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

L_WS = text("dp.world_size", "World size", "world size（进程总数）")
L_BATCH = text("dp.batch", "Global batch size", "全局批量大小")
L_SPLIT = text("dp.split", "Split", "切分方式")
L_RED = text("dp.reduction", "Reduction", "规约方式")
L_PARAMS = text("dp.params", "Parameters (billions, bf16 grads)", "参数量（十亿，bf16 梯度）")
L_BW = text("dp.bandwidth", "Link bandwidth (GB/s)", "链路带宽（GB/s）")

SPLIT_OPTIONS = read_only([(("contiguous, uneven", "连续切分（不均匀）"), "contiguous"),
                 (("drop the remainder", "丢弃余数"), "drop_remainder"),
                 (("DistributedSampler (pads by repeating)", "DistributedSampler（重复样本填充）"), "sampler_pad")])
RED_OPTIONS = read_only([(("weighted by shard size", "按分片大小加权"), "weighted"),
               (("mean of shard means (seed)", "分片均值的平均（原始示例代码）"), "mean_of_means")])

_rng = np.random.default_rng(42)
DATA, WEIGHT = read_only(_rng.standard_normal((128, 32))), read_only(_rng.standard_normal((32, 16)))  # unwriteable / 只读
MODEL = dp.linear_mse_model(WEIGHT)


@base.within_controls(lambda: controls())
def compute(world_size: int = 3, batch_size: int = 64, split: str = "contiguous", reduction: str = "mean_of_means",
            params_b: float = 7.0, bandwidth_gbs: float = 100.0) -> dict:
    """Loss reported vs full-batch loss for the seed's model on the first ``batch_size`` of 128 fixed samples,
    and the ring all-reduce of ``params_b``·1e9 bf16 gradients: bytes per rank and α-β time (α = 0) at
    ``bandwidth_gbs`` GB/s."""
    problems = [(name, value, high) for name, value, high in (("world_size", world_size, 64),
                                                              ("batch_size", batch_size, len(DATA)))
                if not 1 <= value <= high]
    if problems:  # the controls' check (within_controls) has made both whole numbers ≥ 1
        return {"error": bi("; ".join(f"{n} must be an integer in [1, {h}], got {v}" for n, v, h in problems) + ".",
                            "；".join(f"{n} 必须是整数（范围 [1, {h}]），收到 {v}" for n, v, h in problems) + "。")}
    data = DATA[:batch_size]
    full = MODEL(data)[0]
    loss, sizes = dp.data_parallel_loss(data, world_size, MODEL, split=split, reduction=reduction)
    nbytes = params_b * 1e9 * 2
    return {"shard_sizes": sizes, "full_loss": full, "loss": loss, "bias": loss - full,
            "bytes_per_rank": ring_bytes_per_rank("all_reduce", nbytes, world_size),
            "seconds": collective_time("ring_all_reduce", nbytes, world_size, alpha=0.0,
                                       bandwidth=bandwidth_gbs * 1e9)}


def render(r: dict) -> None:
    if "error" in r:
        print(r["error"])
        return
    print(bi(f"shard sizes: {r['shard_sizes']}", f"各 rank 分片大小：{r['shard_sizes']}"))
    print(bi(f"full-batch loss {r['full_loss']:.6f}, reported {r['loss']:.6f}, bias {r['bias']:+.2e}",
             f"整个批次的损失 {r['full_loss']:.6f}，报告值 {r['loss']:.6f}，偏差 {r['bias']:+.2e}", sep="\n"))
    print(bi(f"gradient all-reduce: {r['bytes_per_rank'] / 1e9:.2f} GB sent per rank, "
             f"≥ {r['seconds'] * 1e3:.1f} ms per step (bandwidth term only)",
             f"梯度 AllReduce：每个 rank 发送 {r['bytes_per_rank'] / 1e9:.2f} GB，"
             f"每步至少 {r['seconds'] * 1e3:.1f} 毫秒（仅带宽项）", sep="\n"))


def controls() -> dict:
    return {"world_size": base.int_slider(L_WS, 3, 1, 16),
            "batch_size": base.int_slider(L_BATCH, 64, 1, 128),
            "split": base.dropdown(L_SPLIT, SPLIT_OPTIONS, "contiguous"),
            "reduction": base.dropdown(L_RED, RED_OPTIONS, "mean_of_means"),
            "params_b": base.float_slider(L_PARAMS, 7.0, 0.1, 70.0, 0.1),
            "bandwidth_gbs": base.float_slider(L_BW, 100.0, 1.0, 900.0, 1.0)}


def explorer():
    return base.build(controls(), lambda **kw: compute(**kw), render,
                      title=bi("Data parallelism explorer", "数据并行探索器"))

"""The seed's ``memory_calculator`` table from ``run_all_demos`` (seed A), kept faithfully, and its correction.

:func:`distlearn.seeds.functions.seed_memory_calculator` is the seed's function copied as it was (only renamed and
documented), so the chapter can show what it printed. It has four mistakes (course outline, seed mistakes 2 and 3):

1. Adam's optimizer state is 2 × 4 bytes per parameter, without the fp32 master weights (another 4): mixed-precision
   Adam needs 2 + 2 + 12 = 16 bytes per parameter, not 12.
2. Activations are ``0.5 × params × bytes`` when no shape is given — an invented constant — and otherwise
   ``4·s·b·h·bytes`` per layer, which undercounts what a Llama layer keeps (41·s·b·h bytes for Llama 3 8B with
   flash attention, :func:`distlearn.activation_memory.formulas.config_layer_bytes`); they are also never divided by anything,
   whatever the sharding.
3. "FSDP" divides by the number of GPUs: correct only because every GPU is a data-parallel rank here; with tensor or
   pipeline parallelism ZeRO divides by dp, not the GPU count.
4. "Fits on 80 GB" compares with 80 GB and nothing held back: the CUDA context, NCCL buffers and the allocator's
   fragmentation take several GB.

:func:`corrected_memory_row` recomputes each row with :mod:`distlearn.memory.formulas` and the planner's reserve, and
:func:`planner_row` asks the planner whether *any* plan (TP, PP, ZeRO, recomputation) fits on those GPUs.
"""
from __future__ import annotations

from distlearn.core.i18n import bi, table
from distlearn.core.hardware import make_cluster
from distlearn.activation_memory.formulas import config_layer_bytes
from distlearn.memory.formulas import GB, GiB, model_state_bytes
from distlearn.core.models import PRESETS
from distlearn.seeds.functions import seed_memory_calculator  # the seed's function, kept once (chapter 01 shows it too)
from distlearn import planning as planner
from distlearn.core.guard import read_only

# the rows of run_all_demos' MEMORY CALCULATOR table: (params_billions, sharding, num_gpus)
SEED_CONFIGS = read_only([(7, "none", 1), (7, "fsdp", 8), (70, "none", 1), (70, "fsdp", 8), (70, "fsdp", 16),
                (405, "fsdp", 64), (405, "fsdp", 128)])
# the published shapes we use for the corrected rows
SHAPES = read_only({7: "llama2-7b", 70: "llama2-70b", 405: "llama3.1-405b"})


def seed_memory_table() -> str:
    """The table ``run_all_demos`` printed under "MEMORY CALCULATOR", reproduced line for line."""
    lines = [f"  {'Model':>8} {'Sharding':>8} {'GPUs':>5} {'Per-GPU':>10} {'Fits 80GB':>10}", "  " + "-" * 50]
    for params, shard, gpus in SEED_CONFIGS:
        result = seed_memory_calculator(params, num_gpus=gpus, sharding=shard)
        fits = "Yes" if result["fits_on_80gb"] else "No"
        lines.append(f"  {params:>6}B {shard:>8} {gpus:>5} {result['per_gpu_total_gb']:>8.1f}GB {fits:>10}")
    return "\n".join(lines)


def corrected_memory_row(params_billions: int, sharding: str, num_gpus: int, *, seq_len: int = 2048,
                         micro_batch_size: int = 1, recompute: str = "none", gpu: str = "a100-80gb") -> dict:
    """One seed row done right: Ψ = ``params_billions`` × 1e9 (the seed's count, to compare like with like),
    16 bytes/parameter sharded by ZeRO-3 over dp = ``num_gpus`` when ``sharding == "fsdp"``, the activations of
    the matching published Llama shape (:data:`SHAPES`; flash attention, grouped-query K/V, SwiGLU:
    :func:`distlearn.activation_memory.formulas.config_layer_bytes`), and the planner's reserve.

    Returns bytes per GPU: ``params``, ``grads``, ``optimizer``, ``activations``, ``reserve``, ``total``, plus
    ``capacity`` and ``fits``.
    """
    shape = PRESETS[SHAPES[params_billions]]
    st = model_state_bytes(int(params_billions * 1e9), dp=num_gpus, zero_stage=3 if sharding == "fsdp" else 0)
    acts = shape.num_layers * config_layer_bytes(shape, seq_len=seq_len, micro_batch_size=micro_batch_size,
                                                 recompute=recompute)
    if recompute == "full":  # one layer's full activations while it is recomputed
        acts += config_layer_bytes(shape, seq_len=seq_len, micro_batch_size=micro_batch_size)
    cap = make_cluster(gpu, num_gpus).gpu.memory_bytes
    reserve = planner.RESERVE_BYTES + planner.FRAGMENTATION * cap
    row = {"params": st.params, "grads": st.grads, "optimizer": st.optimizer, "activations": acts,
           "reserve": reserve}
    row["total"] = sum(row.values())
    row.update(capacity=cap, fits=row["total"] <= cap)
    return row


def planner_row(params_billions: int, num_gpus: int, *, seq_len: int = 2048, gpu: str = "a100-80gb") -> dict:
    """Does *any* plan fit? The planner on ``num_gpus`` GPUs with one sequence per data-parallel rank per
    micro-batch and a global batch of ``num_gpus`` sequences. Returns ``{"fits", "best", "suggestion"}``."""
    res = planner.search(SHAPES[params_billions], global_batch=max(num_gpus, 8), seq_len=seq_len, gpu=gpu,
                         num_gpus=num_gpus)
    return {"fits": bool(res.plans), "best": res.best,
            "suggestion": res.suggestion["num_gpus"] if res.suggestion else None}


def _yes_no(flag: bool) -> str:
    return bi("yes", "是", sep="/") if flag else bi("no", "否", sep="/")


def corrected_memory_table(recompute: str = "none") -> str:
    """The seed's rows, corrected, in GB (1e9 bytes) and GiB (2**30 bytes), with the planner's verdict; labels in
    the current language (:func:`distlearn.core.i18n.table`)."""
    rows = []
    for params, shard, gpus in SEED_CONFIGS:
        r = corrected_memory_row(params, shard, gpus, recompute=recompute)
        p = planner_row(params, gpus)
        states = r["params"] + r["grads"] + r["optimizer"]
        rows.append([f"{params}B", bi("none", "不分片") if shard == "none" else shard.upper(), gpus,
                     f"{states / GB:.1f}", f"{r['activations'] / GB:.1f}", f"{r['total'] / GB:.1f}",
                     f"{r['total'] / GiB:.1f}", _yes_no(r["fits"]), _yes_no(p["fits"])])
    return table([("model", "模型"), ("sharding", "分片"), ("GPUs", "GPU 数"), ("states GB", "模型状态 GB"),
                  ("activations GB", "激活值 GB"), ("total GB", "合计 GB"), ("total GiB", "合计 GiB"),
                  ("fits?", "放得下？"), ("any plan?", "有可行方案？")], rows)

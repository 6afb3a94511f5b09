"""Published training runs the planner is checked against, each with its source (tests/test_planner.py).

Megatron-LM (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", Table 1): vocabulary 51,200, sequence length 2048, A100 GPUs (312 TFLOP/s peak), activation
recomputation, FLOP/s counted with their eq. 3 (:func:`~distlearn.planner.formulas.megatron_flops`). Micro-batch
size 1, non-interleaved, is our reading of the setup, not Table 1. The ZeRO paper's Table 2 (model-state limits) is
reproduced by :func:`~distlearn.planner.formulas.zero_max_params`.
"""
from __future__ import annotations

from ..models import ModelConfig
from ..validate import check_choice
from .formulas import Plan, evaluate, megatron_flops

GPT3_175B_MEGATRON = ModelConfig("gpt3-175b-megatron", "gpt", 51200, 12288, 96, 96, 4 * 12288, 2048,
                                 tied_embeddings=True)
GPT_1T_MEGATRON = ModelConfig("gpt-1t-megatron", "gpt", 51200, 25600, 128, 160, 4 * 25600, 2048,
                              tied_embeddings=True)

PUBLISHED_RUNS = {
    "megatron-gpt3-175b": dict(model=GPT3_175B_MEGATRON, gpu="a100-80gb", num_gpus=1024, global_batch=1536,
                               seq_len=2048, plan=Plan(dp=16, tp=8, pp=8, recompute="full", micro_batch_size=1,
                                                       num_microbatches=96, sequence_parallel=False),
                               published_flops=138e12, source="Narayanan et al. 2021, Table 1 (44 % of peak)"),
    "megatron-gpt-1t": dict(model=GPT_1T_MEGATRON, gpu="a100-80gb", num_gpus=3072, global_batch=3072,
                            seq_len=2048, plan=Plan(dp=6, tp=8, pp=64, recompute="full", micro_batch_size=1,
                                                    num_microbatches=512, sequence_parallel=False),
                            published_flops=163e12, source="Narayanan et al. 2021, Table 1 (52 % of peak)"),
}


def compare_published(name: str) -> dict:
    """The planner's estimate of a published run's own plan beside the published throughput.

    Returns ``{"estimate", "fits", "published_flops", "predicted_flops", "ratio", "published_tokens_per_s",
    "predicted_tokens_per_s", "source"}``; FLOP/s per GPU are counted with eq. 3 (recomputation included), so
    ``ratio = predicted / published`` compares like with like. Raises DistlearnValueError for an unknown name.
    """
    run = PUBLISHED_RUNS[check_choice("name", name, tuple(PUBLISHED_RUNS))]
    est = evaluate(run["model"], run["plan"], global_batch=run["global_batch"], seq_len=run["seq_len"],
                   gpu=run["gpu"])
    per_step = megatron_flops(run["model"], run["global_batch"], run["seq_len"])
    tokens = run["global_batch"] * run["seq_len"]
    predicted = per_step / (est.time["total"] * run["num_gpus"])
    return {"estimate": est, "fits": est.fits, "published_flops": run["published_flops"],
            "predicted_flops": predicted, "ratio": predicted / run["published_flops"],
            "published_tokens_per_s": run["published_flops"] * run["num_gpus"] / per_step * tokens,
            "predicted_tokens_per_s": est.tokens_per_s, "source": run["source"]}

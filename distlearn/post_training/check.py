"""Checkers for chapter 15 (post-training and generation). Expected values come from
:mod:`distlearn.post_training.generation` (KV bytes tested against a real KV cache built with torch, the decode
intensity against :func:`~distlearn.post_training.generation.decode_step`) and
:mod:`distlearn.post_training.resharding` (tested against the bytes the gloo lab counts)."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, Why, verify  # CheckFailed: what a wrong answer raises
from distlearn.core.models import MLA, MOE_PRESETS, PRESETS, ModelConfig
from distlearn.post_training.generation import decode_intensity, generation_layout, kv_bytes_per_token
from distlearn.post_training.lab_rl import policy_loss
from distlearn.post_training.resharding import Weight, received
from distlearn.post_training.rl_timeline import RLSetup, simulate

__all__ = ["ex15_kv_bytes_per_token", "ex15_decode_intensity", "ex15_reshard_received", "ex15_tp_kv_per_gpu",
           "CheckFailed"]


def ex15_kv_bytes_per_token(fn):
    """``fn(model)`` → bytes of bf16 KV cache one token adds over all layers of ``model`` (a ModelConfig)."""
    hint_gqa_en = ("Grouped-query attention caches a key and a value for each KV head (num_kv_heads, not num_heads: "
                   "use model.kv_heads) of head_dim numbers, in every layer, 2 bytes each.")
    hint_gqa_zh = ("分组查询注意力在每一层为每个 KV 头（是 num_kv_heads，不是 num_heads：用 model.kv_heads）缓存一个键和一个值，"
                   "各 head_dim 个数，每个数 2 字节。")
    hint_mla_en = ("This model uses latent attention (model.mla is set). Each layer caches one compressed latent of "
                   "kv_lora_rank numbers and one rotary key of qk_rope_head_dim numbers, shared by all heads; no "
                   "factor 2 and no head count.")
    hint_mla_zh = ("这个模型用潜在注意力（model.mla 不为空）。每层只缓存一个 kv_lora_rank 维的压缩潜向量和一个 qk_rope_head_dim 维、"
                   "所有头共享的旋转位置键；没有因子 2，也不乘头数。")
    tiny_mla = ModelConfig("tiny-mla", "llama", 100, 64, 3, 4, 128, 64,
                           mla=MLA(q_lora_rank=None, kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8,
                                   v_head_dim=8))
    tiny_mqa = ModelConfig("tiny-mqa", "llama", 100, 64, 5, 8, 128, 64, num_kv_heads=1)
    models = [PRESETS["llama3-8b"], PRESETS["llama2-7b"], PRESETS["gpt3-175b"], PRESETS["llama3.1-405b"],
              MOE_PRESETS["deepseek-v3"], MOE_PRESETS["mixtral-8x7b"], tiny_mla, tiny_mqa]
    cases = [Case((m,), expected=kv_bytes_per_token(m, 2), rtol=0,
                  hint_en=hint_mla_en if m.mla is not None else hint_gqa_en,
                  hint_zh=hint_mla_zh if m.mla is not None else hint_gqa_zh) for m in models]
    verify("ex15_kv_bytes_per_token", fn, cases)


def ex15_decode_intensity(fn):
    """``fn(num_params, batch, context_len, kv_bytes_per_token)`` → FLOPs per byte of one decode step with bf16
    weights (weight FLOPs only)."""
    hint_en = ("FLOPs: 2 per parameter per sequence in the batch. Bytes: every weight is read once per step (2 bytes "
               "each), whatever the batch, but each sequence reads its own cache of context_len tokens. Divide the "
               "two.")
    hint_zh = ("FLOPs：批里每条序列、每个参数 2 次。字节：每一步每个权重读一次（各 2 字节），与批大小无关；但每条序列都要读自己那份 "
               "context_len 个词元的缓存。两者相除。")
    args = [(8.0e9, 1, 0, 131072), (8.0e9, 64, 0, 131072), (8.0e9, 64, 4096, 131072), (70.6e9, 256, 8192, 327680),
            (7.0e9, 32, 2048, 524288), (37e9, 512, 4096, 70272), (1.0e6, 3, 10, 100.0)]
    cases = [Case(a, expected=decode_intensity(*a), rtol=1e-9, hint_en=hint_en, hint_zh=hint_zh) for a in args]
    verify("ex15_decode_intensity", fn, cases)


def ex15_reshard_received(fn):
    """``fn(rows, cols, kind, world_size, tp, rank)`` → elements of a (rows, cols) weight that rank ``rank``
    receives to go from FSDP rows over ``world_size`` ranks to its TP shard (``kind`` "column" or "row"; TP rank
    ``rank % tp``)."""
    hint_en = ("What the rank needs: column → rows chunk (rank % tp) of tp, every column; row → every row, columns "
               "chunk (rank % tp) of tp. What it holds: rows chunk rank of world_size, every column. It receives "
               "what it needs minus the overlap with what it holds.")
    hint_zh = ("它需要什么：column → 按 tp 切分的第 (rank % tp) 块行、全部列；row → 全部行、按 tp 切分的第 (rank % tp) 块列。"
               "它持有什么：按 world_size 切分的第 rank 块行、全部列。要接收的 = 需要的 − 与已持有部分的重叠。")
    args = [(16, 16, "column", 4, 2, 0), (16, 16, "column", 4, 2, 1), (16, 16, "row", 4, 2, 3),
            (32, 8, "column", 8, 8, 5), (32, 8, "column", 8, 1, 2), (8, 32, "row", 8, 4, 6),
            (24, 12, "row", 2, 2, 1), (64, 16, "column", 8, 2, 7)]
    cases = [Case(a, expected=received(Weight("w", a[0], a[1], a[2]), a[3], a[4], a[5]), rtol=0,
                  hint_en=hint_en, hint_zh=hint_zh) for a in args]
    verify("ex15_reshard_received", fn, cases)


def ex15_tp_kv_per_gpu(fn):
    """``fn(model, batch, context_len, tp)`` → bytes of bf16 KV cache one GPU of a TP group of ``tp`` holds for
    ``batch`` sequences of ``context_len`` cached tokens (expected: :func:`generation_layout`'s ``kv_bytes``)."""
    hint_gqa_en = ("Tensor parallelism splits attention by heads, so a rank caches only the KV heads it serves. How "
                   "many is that? Check your count when tp is larger than model.kv_heads: can a rank serve part of "
                   "a head?")
    hint_gqa_zh = ("张量并行按头切分注意力，一个 rank 只缓存自己负责的 KV 头。那是几个？再看 tp 大于 model.kv_heads "
                   "的情形：一个 rank 能只负责半个头吗？")
    hint_mla_en = ("Latent attention caches one latent per token that every head reads, so tensor parallelism cannot "
                   "split it: every TP rank keeps all of it.")
    hint_mla_zh = "潜在注意力每个词元只缓存一个所有头都要读的潜向量，张量并行切不开它：每个张量并行 rank 都保留完整的一份。"
    tiny_mla = ModelConfig("tiny-mla", "llama", 100, 64, 3, 4, 128, 64,
                           mla=MLA(q_lora_rank=None, kv_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8,
                                   v_head_dim=8))
    args = [(PRESETS["llama3-70b"], 64, 4096, 1), (PRESETS["llama3-70b"], 64, 4096, 8),
            (PRESETS["llama3-70b"], 16, 8192, 16), (PRESETS["llama2-7b"], 8, 2048, 4), (PRESETS["llama3-8b"], 3, 100, 2),
            (MOE_PRESETS["deepseek-v3"], 32, 4096, 8), (tiny_mla, 5, 10, 2)]
    cases = [Case(a, expected=generation_layout(a[0], "h100-80gb", batch=a[1], context_len=a[2], tp=a[3]).kv_bytes,
                  rtol=1e-12, hint_en=hint_mla_en if a[0].mla is not None else hint_gqa_en,
                  hint_zh=hint_mla_zh if a[0].mla is not None else hint_gqa_zh) for a in args]
    verify("ex15_tp_kv_per_gpu", fn, cases)


# ---------------------------------------------------------------- the RL exercises: expected values from
# rl_timeline.simulate (checked against the closed forms by the tests) and lab_rl.policy_loss (the lab's loss)
def _setup_for(gen_seconds, train_seconds, gpus, gen_gpus, sync_seconds, staleness) -> RLSetup:
    """A setup whose weight broadcast takes ``sync_seconds`` (1B parameters = 2 GB over 2 / sync GB/s), no scoring,
    no offload, generation on one GPU per replica."""
    return RLSetup(params_billion=1.0, gpus=gpus, gen_gpus=gen_gpus, gen_seconds=gen_seconds,
                   train_seconds=train_seconds, score_seconds=0.0, gen_tp=1, offload=False,
                   network_gbs=2.0 / sync_seconds, staleness=staleness)


def ex15_disaggregated_step_time(fn):
    """``fn(gen_seconds, train_seconds, gpus, gen_gpus, sync_seconds, staleness)`` → steady step time (s) of the
    disaggregated placement: generation and training take ``gen_seconds`` and ``train_seconds`` on all ``gpus``
    GPUs and scale linearly with the pool size; the weight broadcast takes ``sync_seconds``; no scoring."""
    cases = []
    for args in [(80, 20, 16, 12, 0.5, 0), (80, 20, 16, 12, 0.5, 1), (60, 40, 8, 4, 2.0, 1), (50, 50, 8, 2, 1.0, 3),
                 (90, 10, 10, 9, 0.25, 2), (30, 70, 32, 8, 4.0, 0)]:
        expected = simulate(_setup_for(*args), "disaggregated").step_time
        cases.append(Case(args, expected=expected, rtol=1e-9,
                          hint_en="First the time of each pool: gen_seconds · gpus / gen_gpus for the generator, "
                                  "train_seconds · gpus / (gpus − gen_gpus) for the trainer. With staleness 0 the "
                                  "pools take turns; with staleness ≥ 1 they overlap, and the broadcast needs both.",
                          hint_zh="先算两个池各自的时间：生成池 gen_seconds · gpus / gen_gpus，训练池 "
                                  "train_seconds · gpus / (gpus − gen_gpus)。staleness 为 0 时两个池轮流工作；"
                                  "staleness ≥ 1 时二者重叠，而权重广播需要两个池同时参与。"))
    verify("ex15_disaggregated_step_time", fn, cases)


def ex15_policy_lag(fn):
    """``fn(gen_pool_seconds, train_pool_seconds, staleness)`` → the steady policy lag (versions) of the
    disaggregated placement: the generator pool needs ``gen_pool_seconds`` per batch, the trainer pool
    ``train_pool_seconds`` per update (broadcast 0.5 s)."""
    cases = []
    for g, t, k in [(90, 60, 0), (90, 60, 1), (90, 60, 3), (40, 60, 1), (40, 60, 3), (40, 60, 5), (60, 60, 2)]:
        setup = _setup_for(g / 2, t / 2, 2, 1, 0.5, k)       # one GPU per pool: the pool times are g and t
        cases.append(Case((g, t, k), expected=simulate(setup, "disaggregated").policy_lag,
                          hint_en="Batch i is trained by update i; its lag is i minus the version it was generated "
                                  "with. Which pool waits for the other? A fast generator runs ahead until the "
                                  "staleness bound stops it; a slow one is never ahead by more than one batch.",
                          hint_zh="批次 i 由第 i 次更新来训练；它的滞后是 i 减去生成它时所用的权重版本。哪个池在等"
                                  "另一个？生成池快时会一直往前跑，直到被陈旧度上限挡住；生成池慢时最多只领先一个批次。"))
    verify("ex15_policy_lag", fn, cases)


def _python_float_close(got, expected) -> bool | Why:
    """``got`` is a Python number (not a tensor, not a bool) within rtol 1e-5 / atol 1e-6 of ``expected``."""
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return Why(f"returned {type(got).__name__}: return a Python float (a 0-d tensor's .item())",
                   f"返回的是 {type(got).__name__}：请返回 Python 浮点数（0 维张量用 .item() 取出）")
    return abs(got - expected) <= 1e-6 + 1e-5 * abs(expected)


def ex15_clipped_loss(fn):
    """``fn(logp_train, logp_gen, adv, eps)`` (torch tensors (B, L), (B, L), (B,); eps a float) → the PPO clipped
    loss as a Python float: − mean over tokens of min(ρ·A, clip(ρ, 1 − eps, 1 + eps)·A), ρ = exp(logp_train −
    logp_gen)."""
    import torch

    cases = []
    for seed, b, n, eps, shift in [(0, 4, 3, 0.2, 0.0), (1, 6, 5, 0.2, 0.3), (2, 3, 2, 0.1, -0.5), (3, 8, 4, 0.3, 1.0)]:
        g = torch.Generator().manual_seed(seed)
        logp_gen = -torch.rand(b, n, generator=g) * 3
        logp_train = logp_gen + shift * torch.randn(b, n, generator=g)
        adv = torch.randn(b, generator=g)
        expected = policy_loss(logp_train, logp_gen, adv, eps)[0].item()
        cases.append(Case((logp_train, logp_gen, adv, eps), expected=expected, compare=_python_float_close,
                          hint_en="ρ is per token; A is per sequence, so broadcast it over the L tokens "
                                  "(adv[:, None]). Take the smaller of the two products, then the mean, then the "
                                  "minus sign.",
                          hint_zh="ρ 按词元计算；A 按序列给出，要在 L 个词元上广播（adv[:, None]）。"
                                  "两个乘积取较小者，再取均值，最后加负号。"))
    verify("ex15_clipped_loss", fn, cases)

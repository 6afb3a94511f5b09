"""Checkers for chapter 15 (post-training and generation). Expected values come from
:mod:`distlearn.post_training.generation` (KV bytes tested against a real KV cache built with torch, the decode
intensity against :func:`~distlearn.post_training.generation.decode_step`) and
:mod:`distlearn.post_training.resharding` (tested against the bytes the gloo lab counts)."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.core.models import MLA, MOE_PRESETS, PRESETS, ModelConfig
from distlearn.post_training.generation import decode_intensity, generation_layout, kv_bytes_per_token
from distlearn.post_training.resharding import Weight, received

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
    hint_gqa_en = ("A TP rank keeps the cache of its own KV heads: ceil(kv_heads / tp) of them. When tp exceeds the "
                   "number of KV heads, each rank still needs one whole KV head: the heads are copied, not split.")
    hint_gqa_zh = ("一个张量并行 rank 只保留自己那些 KV 头的缓存：ceil(kv_heads / tp) 个。tp 大于 KV 头数时，每个 rank 仍需要一个"
                   "完整的 KV 头：这些头是被复制，而不是被切开。")
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

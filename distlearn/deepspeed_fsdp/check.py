"""Checkers for chapter 09 (DeepSpeed and FSDP). Expected values come from distlearn.deepspeed_fsdp.deepspeed, which the tests
check against DeepSpeed 0.19.8's own functions."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.deepspeed_fsdp.deepspeed import zero2_model_states_mem_needs, zero3_model_states_mem_needs


def ex09_train_batch_size(fn):
    """``fn(micro_batch_size, gradient_accumulation_steps, dp)`` → DeepSpeed's ``train_batch_size``."""
    cases = [Case(args=a, expected=a[0] * a[1] * a[2],
                  hint_en="train_batch_size = micro-batch per GPU × accumulation steps × data-parallel ranks.",
                  hint_zh="train_batch_size = 每块 GPU 的微批次 × 梯度累积步数 × 数据并行 rank 数。")
             for a in [(1, 1, 1), (2, 4, 8), (4, 16, 64), (3, 5, 7)]]
    verify("ex09_train_batch_size", fn, cases)


def ex09_zero2_gpu_bytes(fn):
    """``fn(total_params, total_gpus)`` → GPU bytes DeepSpeed's ZeRO-2 estimator gives without offload."""
    cases = [Case(args=(n, g), expected=zero2_model_states_mem_needs(n, g, 1, cpu_offload=False)[1],
                  hint_en="Recall what the chapter read in DeepSpeed's estimate_zero2_model_states_mem_needs: "
                          "which bytes per parameter stay whole on every GPU, which are divided by the number of "
                          "GPUs, and where DeepSpeed rounds down to whole bytes.",
                  hint_zh="回想本章读过的 DeepSpeed 函数 estimate_zero2_model_states_mem_needs：每个参数有哪些字节"
                          "在每块 GPU 上完整保留，哪些按 GPU 数均分，以及 DeepSpeed 在哪里向下取整为整数字节。")
             for n, g in [(10**9, 8), (7_000_000_000, 64), (123_456_789, 3), (1, 1)]]
    verify("ex09_zero2_gpu_bytes", fn, cases)


def ex09_zero3_gpu_bytes(fn):
    """``fn(total_params, largest_layer_params, total_gpus)`` → DeepSpeed's ZeRO-3 GPU estimate, no offload."""
    cases = [Case(args=(n, big, g), expected=zero3_model_states_mem_needs(n, big, g, 1, cpu_offload=False,
                                                                          cpu_offload_params=False)[1],
                  hint_en="The largest layer gathered whole: 4·L (16-bit params + grads), plus int(18·Ψ/G).",
                  hint_zh="最大层被完整 AllGather：4·L（16 位参数 + 梯度），再加 int(18·Ψ/G)。")
             for n, big, g in [(10**9, 10**8, 8), (70_000_000_000, 1_050_673_152, 64), (1000, 10, 3)]]
    verify("ex09_zero3_gpu_bytes", fn, cases)


def ex09_fsdp_strategy(fn):
    """``fn(zero_stage)`` → the FSDP1 ``ShardingStrategy`` name closest to that ZeRO stage, or ``None``."""
    expected = {0: "NO_SHARD", 1: None, 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"}
    hint = ("Compare what each ZeRO stage shards (parameters, gradients, optimizer states) with what each FSDP "
            "strategy shards (chapter 06's table). One stage has no FSDP strategy: return None for it. A name "
            "('FULL_SHARD') or the enum member (ShardingStrategy.FULL_SHARD) both count.",
            "把 ZeRO 各阶段分片的内容（参数、梯度、优化器状态）与 FSDP 各策略分片的内容对照（见第 06 章的表）。"
            "有一个阶段没有对应的 FSDP 策略：对它返回 None。返回名称（'FULL_SHARD'）或枚举成员"
            "（ShardingStrategy.FULL_SHARD）都可以。")
    cases = [Case(args=(k,), expected=v, hint_en=hint[0], hint_zh=hint[1]) for k, v in expected.items()]
    verify("ex09_fsdp_strategy", fn, cases)

"""Checkers for chapter 01 (where does the memory go?). Expected values come from :mod:`distlearn.memory.formulas` and
:mod:`distlearn.core.models`, which tests pin to the ZeRO paper and to published parameter counts."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.memory.formulas import bytes_per_param, model_state_bytes
from distlearn.core.models import ModelConfig

_MASTER_EN = ("In mixed precision the optimizer keeps an fp32 master copy of the weights (4 B/param) besides its own "
              "state (Adam: two fp32 moments, 8 B; SGD: none).")
_MASTER_ZH = "混合精度下，优化器除了自身状态（Adam：fp32 的一阶矩和二阶矩，8 字节；SGD：无）之外，还保留一份 fp32 主权重（每个参数 4 字节）。"


def ex01_bytes_per_param(fn) -> None:
    """``fn(precision, optimizer) -> int``: model-state bytes per parameter (weights + grads + optimizer)."""
    combos = [("fp32", "adam"), ("mixed", "adam"), ("mixed-fp32-grads", "adam"), ("fp32", "sgd"),
              ("fp32", "sgd-momentum"), ("mixed", "sgd"), ("mixed", "adam-8bit")]
    hints = {
        "mixed": (_MASTER_EN, _MASTER_ZH),
        "mixed-fp32-grads": ("Gradients are accumulated in fp32 (4 B), weights stay 16-bit (2 B), and the "
                             "optimizer keeps the fp32 master copy.",
                             "梯度以 fp32（4 字节）累加，权重仍为 16 位（2 字节），优化器保留 fp32 主权重。"),
        "fp32": ("fp32 weights 4 B + fp32 grads 4 B + state: Adam 8 B, SGD with momentum 4 B, plain SGD 0 B.",
                 "fp32 权重 4 字节 + fp32 梯度 4 字节 + 状态：Adam 8 字节，带动量 SGD 4 字节，普通 SGD 0 字节。"),
    }
    eight_bit = ("8-bit Adam keeps its two moments in 1 byte each (2 B), not 4; the fp32 master copy of mixed "
                 "precision stays 4 B.",
                 "8 位 Adam 的一阶矩和二阶矩各占 1 字节（共 2 字节），而不是 4 字节；混合精度的 fp32 主权重仍是 4 字节。")
    cases = [Case(args=(p, o), expected=bytes_per_param(p, o)["total"],
                  hint_en=(eight_bit if o == "adam-8bit" else hints[p])[0],
                  hint_zh=(eight_bit if o == "adam-8bit" else hints[p])[1])
             for p, o in combos]
    verify("ex01_bytes_per_param", fn, cases)


def ex01_zero_model_states(fn) -> None:
    """``fn(num_params, dp, zero_stage) -> bytes`` per GPU with mixed-precision Adam (2 + 2 + 12 B/param)."""
    cases = []
    for num_params, dp, stage in [(7_500_000_000, 64, 0), (7_500_000_000, 64, 1), (7_500_000_000, 64, 2),
                                  (7_500_000_000, 64, 3), (1_000_000_000, 1, 3), (6_738_415_616, 8, 2),
                                  (70_000_000_000, 1024, 3)]:
        cases.append(Case(args=(num_params, dp, stage),
                          # rtol 1e-6: a right answer computed in float32 (24-bit mantissa, ~6e-8 relative) passes;
                          # the nearest wrong answer (a 2 B term left undivided) is off by more than 1e-2
                          expected=model_state_bytes(num_params, dp=dp, zero_stage=stage).total, rtol=1e-6,
                          hint_en="Stage 1 divides the 12 B of optimizer state by dp, stage 2 also the 2 B of "
                                  "gradients, stage 3 also the 2 B of parameters. " + _MASTER_EN,
                          hint_zh="阶段 1 把 12 字节优化器状态除以 dp，阶段 2 再把 2 字节梯度除以 dp，阶段 3 再把 2 字节"
                                  "参数除以 dp。" + _MASTER_ZH))
    verify("ex01_zero_model_states", fn, cases)


def ex01_llama_layer_params(fn) -> None:
    """``fn(hidden_size, ffn_hidden_size, num_heads, num_kv_heads) -> int``: parameters of one Llama layer."""
    shapes = [(4096, 11008, 32, 32), (4096, 14336, 32, 8), (8192, 28672, 64, 8), (5120, 13824, 40, 40),
              (64, 176, 4, 2)]
    cases = [Case(args=s, expected=ModelConfig("x", "llama", 1000, s[0], 1, s[2], s[1], 16,
                                               num_kv_heads=s[3]).layer_parameters(),
                  hint_en="Q and O are h×h; K and V are h×(num_kv_heads·h/num_heads) (grouped-query attention); "
                          "SwiGLU has three h×f matrices; two RMSNorms of h weights; no biases.",
                  hint_zh="Q 和 O 是 h×h；K 和 V 是 h×(num_kv_heads·h/num_heads)（分组查询注意力）；SwiGLU 有三个 "
                          "h×f 矩阵；两个各含 h 个权重的 RMSNorm；没有偏置。")
             for s in shapes]
    verify("ex01_llama_layer_params", fn, cases)


def ex01_zero_with_tp(fn) -> None:
    """``fn(num_params, num_gpus, tp, zero_stage) -> bytes`` per GPU, mixed-precision Adam, tensor parallel of
    degree ``tp`` inside data parallel of degree ``num_gpus // tp``."""
    cases = []
    for num_params, gpus, tp, stage in [(8_000_000_000, 8, 8, 3), (8_000_000_000, 8, 1, 3),
                                        (8_000_000_000, 8, 2, 3), (8_000_000_000, 64, 8, 1),
                                        (70_000_000_000, 512, 8, 2)]:
        cases.append(Case(args=(num_params, gpus, tp, stage),
                          expected=model_state_bytes(num_params // tp, dp=gpus // tp, zero_stage=stage).total,
                          hint_en="Each GPU holds 1/tp of the model, and ZeRO shards that over dp = num_gpus / tp "
                                  "replicas, not over num_gpus: with tp = num_gpus, dp = 1 and ZeRO saves nothing.",
                          hint_zh="每块 GPU 持有模型的 1/tp，ZeRO 再在 dp = num_gpus / tp 个副本之间分片，而不是在 "
                                  "num_gpus 之间：tp = num_gpus 时 dp = 1，ZeRO 什么也省不了。"))
    verify("ex01_zero_with_tp", fn, cases)


def ex01_format_numbers(fn) -> None:
    """``fn(exponent_bits, mantissa_bits, finite_only) -> (max, eps, smallest_normal, smallest_subnormal)``."""
    from distlearn.precision.scaling import FloatFormat

    shapes = [(5, 10, False), (8, 7, False), (4, 3, True), (5, 2, False), (8, 10, False), (8, 23, False),
              (3, 4, True), (6, 1, False)]
    cases = []
    for e, m, fn_ in shapes:
        f = FloatFormat("x", e, m, finite_only=fn_)
        cases.append(Case(args=(e, m, fn_), expected=(f.max, f.eps, f.smallest_normal, f.smallest_subnormal),
                          rtol=1e-12,
                          hint_en="bias = 2^(e-1) - 1; eps = 2^-m; smallest normal 2^(1-bias), subnormal 2^(1-bias-m). "
                                  "IEEE-like: the all-ones exponent is inf/NaN, so the largest exponent field is "
                                  "2^e - 2. finite_only (E4M3fn): the all-ones exponent holds numbers too, only the "
                                  "all-ones mantissa there is NaN.",
                          hint_zh="偏置 bias = 2^(e-1) - 1；eps = 2^-m；最小正规数 2^(1-bias)，最小次正规数 2^(1-bias-m)。"
                                  "类 IEEE 格式：全 1 指数留给 inf/NaN，所以最大指数字段是 2^e - 2。finite_only（E4M3fn）："
                                  "全 1 指数也表示数，只有其中尾数全 1 的编码是 NaN。"))
    verify("ex01_format_numbers", fn, cases)


def ex01_update_loss_scale(fn) -> None:
    """``fn(scale, growth_tracker, found_inf, growth_interval) -> (new_scale, new_growth_tracker)`` with
    GradScaler's growth_factor 2 and backoff_factor 0.5."""
    from distlearn.precision.scaling import ScalerConfig, update_scale

    cases = []
    for scale, tracker, inf, interval in [(65536.0, 0, True, 2000), (65536.0, 1999, False, 2000),
                                          (65536.0, 1998, False, 2000), (32768.0, 5, True, 2000),
                                          (8.0, 0, False, 1), (2.0 ** 127, 2, False, 3), (1.0, 0, False, 2000)]:
        cases.append(Case(args=(scale, tracker, inf, interval),
                          expected=update_scale(scale, tracker, inf, ScalerConfig(growth_interval=interval)),
                          hint_en="inf/NaN: halve the scale and reset the tracker to 0. Otherwise count one more "
                                  "good step; when the count reaches growth_interval, double the scale (only if "
                                  "the result is still a finite fp32 number) and reset the count to 0.",
                          hint_zh="出现 inf/NaN：缩放因子减半，计数器清零。否则把成功步数加一；达到 growth_interval "
                                  "时缩放因子翻倍（只在结果仍是有限的 fp32 数时），并把计数清零。"))
    verify("ex01_update_loss_scale", fn, cases)

"""Chapter 08's exercise checkers: they accept answers written from the closed forms alone (no distlearn code) and
reject the typical wrong ones; chapter 01's 8-bit Adam case gets its own hint."""
import pytest

from distlearn.core import check
from distlearn.memory import check as ch01
from distlearn.activation_memory import check as ch08


# ---------------------------------------------------------------- independent closed forms
def _layer(s, b, h, a):                       # Korthikanti et al. 2022, Table 2
    return s * b * h * (34 + 5 * a * s / h)


def _inflight(pp, m, stage):                  # 1F1B: pp - stage forwards before the first backward, at most m
    return min(pp - stage, m)


def _selective(s, h, L, V):                   # one more forward of QKᵀ and ·V per layer / three forwards + LM head
    return L * 4 * s * s * h / (3 * (L * (24 * s * h * h + 4 * s * s * h) + 2 * s * h * V))


def _offload(n, dp, bw):                      # 2 B gradient down + 2 B parameter up per parameter of the shard
    return 4 * n / dp / (bw * 1e9)


def _llama(s, b, h, a, k, f):                 # flash: 6 sbh-sized tensors, K and V at k/a, SwiGLU 4f, fp32 lse
    return 2 * s * b * h * (6 + 2 * k / a + 4 * f / h) + 4 * a * s * b


def _offload_step(n, dp, ranks, bw, rate):
    return _offload(n, dp, bw) + ranks * n / dp / rate


def _mx(x, n):                               # MX rule with math.log2 on each block, written independently
    import math

    import numpy as np
    out = np.empty((x.shape[0], x.shape[1] // n), dtype=int)
    for i in range(x.shape[0]):
        for j in range(x.shape[1] // n):
            amax = float(np.abs(x[i, j * n:(j + 1) * n]).max())
            out[i, j] = -127 if amax == 0 else max(-127, min(127, math.floor(math.log2(amax)) - 8))
    return out


CORRECT = [(ch08.ex08_mx_exponents, _mx), (ch08.ex08_layer_activation_bytes, _layer), (ch08.ex08_inflight_1f1b, _inflight),
           (ch08.ex08_selective_overhead, _selective), (ch08.ex08_offload_seconds, _offload),
           (ch08.ex08_llama_layer_bytes, _llama), (ch08.ex08_offload_step_seconds, _offload_step)]


def test_checkers_accept_independent_answers(capsys):
    for checker, fn in CORRECT:
        checker(fn)
    assert [line[0] for line in capsys.readouterr().out.splitlines()] == ["✓"] * len(CORRECT)


@pytest.mark.parametrize("checker,wrong", [
    (ch08.ex08_layer_activation_bytes, lambda s, b, h, a: 2 * _layer(s, b, h, a)),        # bytes times 2 again
    (ch08.ex08_layer_activation_bytes, lambda s, b, h, a: 34 * s * b * h),                # no attention scores
    (ch08.ex08_inflight_1f1b, lambda pp, m, stage: pp - stage),                           # ignores m
    (ch08.ex08_inflight_1f1b, lambda pp, m, stage: min(pp - stage - 1, m)),               # warm-up only
    (ch08.ex08_selective_overhead, lambda s, h, L, V: 4 * s * s * h / (3 * (24 * s * h * h + 4 * s * s * h))),
    (ch08.ex08_offload_seconds, lambda n, dp, bw: 4 * n / dp / (bw * 2**30)),              # GiB/s for GB/s
    (ch08.ex08_offload_seconds, lambda n, dp, bw: 2 * n / dp / (bw * 1e9)),                # one direction only
    (ch08.ex08_llama_layer_bytes, lambda s, b, h, a, k, f: _llama(s, b, h, a, k, f) - 4 * a * s * b),   # no lse
    (ch08.ex08_llama_layer_bytes, lambda s, b, h, a, k, f: _llama(s, b, h, a, a, f)),      # K, V repeated
    (ch08.ex08_offload_step_seconds, lambda n, dp, r, bw, rate: _offload(n, dp, bw) + n / dp / rate),  # one rank
    (ch08.ex08_mx_exponents, lambda x, n: _mx(x, n) + 8),                                  # forgot the − 8
    (ch08.ex08_mx_exponents, lambda x, n: __import__("numpy").ceil(__import__("numpy").log2(       # rounds up
        __import__("numpy").abs(x).reshape(x.shape[0], -1, n).max(-1) + 1e-300)).astype(int) - 8),
])
def test_checkers_reject_typical_wrong_answers(checker, wrong):
    with pytest.raises(check.CheckFailed):
        checker(wrong)


def test_hints_do_not_print_the_formula(capsys):
    with pytest.raises(check.CheckFailed):
        ch08.ex08_layer_activation_bytes(lambda s, b, h, a: 2 * _layer(s, b, h, a))
    with pytest.raises(check.CheckFailed):
        ch08.ex08_selective_overhead(lambda s, h, L, V: 0.0)
    with pytest.raises(check.CheckFailed):
        ch08.ex08_llama_layer_bytes(lambda s, b, h, a, k, f: _llama(s, b, h, a, a, f))
    out = capsys.readouterr().out
    assert "34 + 5" not in out and "24sh²" not in out and "dtype size" in out and "LM head" in out
    assert "4·a·s·b" not in out and "4·f·sb" not in out and "num_kv_heads heads" in out


def test_eight_bit_adam_gets_its_own_hint(capsys):
    table = {("fp32", "adam"): 16, ("mixed", "adam"): 16, ("mixed-fp32-grads", "adam"): 18, ("fp32", "sgd"): 8,
             ("fp32", "sgd-momentum"): 12, ("mixed", "sgd"): 8, ("mixed", "adam-8bit"): 16}   # 8-bit as fp32 Adam
    with pytest.raises(check.CheckFailed):
        ch01.ex01_bytes_per_param(lambda p, o: table[(p, o)])
    out = capsys.readouterr().out
    assert "1 byte each" in out and "two fp32 moments" not in out

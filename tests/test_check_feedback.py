"""Exercise feedback that teaches (issue 14, items 3, 4, 6): a failing case names the first thing that is wrong,
briefly; checkers accept every correct form of an answer (enum members, fractions), say when a number came back as
text, stop an endless loop, and keep hints from giving the answer away; a bad argument shows the bilingual message
and the reader's own line, not a traceback through distlearn.validate."""
from fractions import Fraction

import numpy as np
import pytest

from distlearn import check
from distlearn.check import Case, CheckFailed


def feedback(checker, fn, capsys) -> str:
    with pytest.raises(CheckFailed):
        checker(fn)
    return capsys.readouterr().out


def ring_via_rank0(cluster, arrays):
    """A wrong ring all-reduce: everyone sends to rank 0, which sums and sends the total back (right sums, wrong
    traffic)."""
    n = cluster.world_size
    for r in range(1, n):
        cluster.send(np.asarray(arrays[r], dtype=float), r, 0)
    total = np.asarray(arrays[0], dtype=float) + sum(cluster.recv(r, 0) for r in range(1, n))
    for r in range(1, n):
        cluster.send(total, 0, r)
    return [total] + [cluster.recv(0, r) for r in range(1, n)]


def test_ring_feedback_says_the_sums_are_right_and_the_traffic_wrong(capsys):
    out = feedback(check.ex02_ring_all_reduce, ring_via_rank0, capsys)
    lines = out.strip().splitlines()
    assert "right sums, but the traffic is not a ring's" in out and "求和结果都正确" in out
    assert len(lines) <= 16, out                          # not a wall: 3 cases, one reason each, the hint once
    assert out.count("Hint:") == 1 and out.count("提示：") == 1
    assert "..." not in out and len(out) <= 1800, out    # no value cut at 120 characters
    assert out.count("ring_via_rank0(") == 3              # each call shown once, not repeated per language
    assert "array(8)" in out and "VirtualCluster(world_size=4)" in out


def test_ring_feedback_names_a_wrong_sum(capsys):
    def off_by_one(cluster, arrays):
        total = np.sum(arrays, axis=0)
        return [total + (r == 1) for r in range(cluster.world_size)]

    out = feedback(check.ex02_ring_all_reduce, off_by_one, capsys)
    assert "rank 1's result: element [0] is" in out and "rank 1 的结果" in out


def test_row_parallel_feedback_names_the_wrong_part(capsys):
    def concatenates(x, w, tp):  # right product, but the bytes of an all-gather instead of an all-reduce
        return x @ w, 0

    out = feedback(check.ex04_row_parallel_forward, concatenates, capsys)
    assert "bytes sent by rank 0 (item 1 of the returned tuple): returned 0, expected" in out
    assert "array(" not in out.split("→")[1].splitlines()[0]  # the reason is not two look-alike arrays


def test_wrong_array_names_its_first_wrong_element(capsys):
    def halves(x, w, tp):
        return x @ w / 2, 0

    out = feedback(check.ex04_row_parallel_forward, halves, capsys)
    assert "the output (item 0 of the returned tuple): element [0, 0] is" in out
    assert "elements differ" in out and "个元素中有" in out


def test_fsdp_strategy_accepts_the_real_enum(capsys):
    from torch.distributed.fsdp import ShardingStrategy

    table = {0: ShardingStrategy.NO_SHARD, 1: None, 2: ShardingStrategy.SHARD_GRAD_OP,
             3: ShardingStrategy.FULL_SHARD}
    check.ex09_fsdp_strategy(lambda stage: table[stage])
    assert "✓" in capsys.readouterr().out


def test_fsdp_hint_is_about_the_stage_asked(capsys):
    out = feedback(check.ex09_fsdp_strategy, lambda stage: "FULL_SHARD", capsys)
    assert "ZeRO-1 shards only optimizer states" not in out  # the old, unrelated hint
    assert "Compare what each ZeRO stage shards" in out


def test_a_fraction_is_a_number(capsys):
    check.ex05_bubble_fraction(lambda p, m: Fraction(p - 1, m + p - 1))
    assert "all 5 hidden cases pass" in capsys.readouterr().out


def test_a_number_returned_as_text_gets_a_type_hint(capsys):
    out = feedback(check.ex09_train_batch_size, lambda mbs, gas, dp: str(mbs * gas * dp), capsys)
    assert "not a number: return the number (64, not '64')" in out and "不是数值" in out


def test_an_endless_loop_is_stopped_per_case(capsys, monkeypatch):
    monkeypatch.setattr(check, "DEFAULT_TIMEOUT", 0.5)

    def spins(mbs, gas, dp):
        while True:
            pass

    import time
    t0 = time.monotonic()
    out = feedback(check.ex09_train_batch_size, spins, capsys)
    assert time.monotonic() - t0 < 10
    assert "did not finish within 0.5 s: an endless loop?" in out and "死循环" in out


def test_an_exception_in_the_answer_is_one_line_with_its_place(capsys):
    def divides(mbs, gas, dp):
        return mbs * gas * dp / (dp - dp)

    out = feedback(check.ex09_train_batch_size, divides, capsys)
    assert "raised ZeroDivisionError: division by zero (line" in out and "of your code: return mbs" in out
    assert "Traceback" not in out


def test_weighted_mean_has_an_empty_rank_whose_mean_is_nan(capsys):
    def multiplies_by_zero(means, sizes):  # weights an empty rank by 0 — but its mean is nan
        return sum(m * s for m, s in zip(means, sizes)) / sum(sizes)

    out = feedback(check.ex03_weighted_mean, multiplies_by_zero, capsys)
    assert "returned nan" in out
    check.ex03_weighted_mean(lambda means, sizes: sum(m * s for m, s in zip(means, sizes) if s) / sum(sizes))


@pytest.mark.parametrize("checker, leaked", [
    ("ex08_selective_overhead", ("4s²h", "24sh²", "2shV")),
    ("ex09_zero2_gpu_bytes", ("18·Ψ", "int(18", "2 + 4")),
])
def test_hints_do_not_give_the_answer_away(checker, leaked, capsys):
    with pytest.raises(CheckFailed):
        getattr(check, checker)(lambda *a: -1)
    out = capsys.readouterr().out
    assert "Hint:" in out and not [s for s in leaked if s in out], out


def test_only_the_first_cases_are_shown_and_a_hint_once(capsys):
    cases = [Case((k,), expected=k + 1, hint_en="add one", hint_zh="加一") for k in range(6)]
    with pytest.raises(CheckFailed):
        check.verify("ex_demo", lambda k: k, cases)
    out = capsys.readouterr().out
    assert out.count("Hint: add one") == 1 and "showing the first 3 of 6" in out


def test_validation_error_shows_the_message_and_the_readers_line():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    result = shell.run_cell("from distlearn import memory\nmemory.model_state_bytes(7_000_000_000, dp=0)")
    exc = result.error_in_exec
    lines = exc._render_traceback_()
    text = "\n".join(lines)
    assert len(lines) <= 5 and "validate.py" not in text, text
    assert "dp must be an integer" in text and "dp 必须是整数" in text
    assert "memory.model_state_bytes(7_000_000_000, dp=0)" in text and "distlearn.memory.model_state_bytes" in text


def test_a_compare_that_says_no_still_names_the_first_difference(capsys):
    """A checker's own ``compare`` returning False falls back to :func:`difference` (a Why is falsy, so an ``or``
    would always pick the generic sentence)."""
    cases = [Case((1,), expected=(np.array([1, 2]), np.array([0.5, 0.5])), compare=lambda g, e: False,
                  parts=(("experts", "experts"), ("weights", "weights")))]
    with pytest.raises(CheckFailed):
        check.verify("ex_demo", lambda k: (np.array([1, 2]), np.array([0.4, 0.6])), cases)
    out = capsys.readouterr().out
    assert "weights (item 1 of the returned tuple): element [0] is 0.4 instead of 0.5" in out
    assert "does not pass this case" not in out

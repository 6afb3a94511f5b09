"""Exercise feedback that teaches (issue 14, items 3, 4, 6): a failing case names the first thing that is wrong,
briefly; checkers accept every correct form of an answer (enum members, fractions), say when a number came back as
text, stop an endless loop, and keep hints from giving the answer away; a bad argument shows the bilingual message
and the reader's own line, not a traceback through distlearn.core.validate."""
from fractions import Fraction

import numpy as np
import pytest

from distlearn.core import check
from distlearn.core.check import Case, CheckFailed


def feedback(checker, fn, capsys) -> str:
    with pytest.raises(CheckFailed):
        checker(fn)
    return capsys.readouterr().out


def via_rank0(cluster, arrays):
    """A wrong all-reduce: everyone sends to rank 0, which sums and sends the total back (right sums, wrong
    traffic)."""
    n = cluster.world_size
    for r in range(1, n):
        cluster.send(np.asarray(arrays[r], dtype=float), r, 0)
    total = np.asarray(arrays[0], dtype=float) + sum(cluster.recv(r, 0) for r in range(1, n))
    for r in range(1, n):
        cluster.send(total, 0, r)
    return [total] + [cluster.recv(0, r) for r in range(1, n)]


def ring(cluster, arrays):
    """A correct ring all-reduce: right sums and bytes, but 2(n−1) messages per rank instead of 2·log₂n."""
    n = cluster.world_size
    chunks = [[c.copy() for c in np.array_split(np.asarray(a, dtype=float), n)] for a in arrays]
    for s in range(n - 1):
        for r in range(n):
            cluster.send(chunks[r][(r - s - 1) % n], r, (r + 1) % n)
        for r in range(n):
            c = (r - 1 - s - 1) % n
            chunks[r][c] = chunks[r][c] + cluster.recv((r - 1) % n, r)
    for s in range(n - 1):
        for r in range(n):
            cluster.send(chunks[r][(r - s) % n], r, (r + 1) % n)
        for r in range(n):
            chunks[r][(r - 1 - s) % n] = cluster.recv((r - 1) % n, r)
    return [np.concatenate(c) for c in chunks]


def test_all_reduce_feedback_says_the_sums_are_right_and_the_bytes_wrong(capsys):
    out = feedback(check.ex02_halving_doubling_all_reduce, via_rank0, capsys)
    lines = out.strip().splitlines()
    assert "every rank got the right sums, but rank" in out and "求和结果都正确" in out
    assert len(lines) <= 16, out                          # not a wall: 3 cases, one reason each, the hint once
    assert out.count("Hint:") == 1 and out.count("提示：") == 1
    assert "..." not in out and len(out) <= 2200, out    # no value cut at 120 characters
    assert out.count("via_rank0(") == 3                   # each call shown once, not repeated per language
    assert "array(8)" in out and "VirtualCluster(world_size=4)" in out


def test_a_ring_passes_the_bytes_but_not_the_messages(capsys):
    out = feedback(check.ex02_halving_doubling_all_reduce, ring, capsys)
    assert "right sums and right bytes, but rank 0 sent 6 messages, more than the 4 = 2·log₂4" in out
    assert "14 messages, more than the 6" in out and "发送了 6 条消息，多于递归减半-递归倍增的 4" in out
    assert "2 hidden cases pass" not in out and "5 of 7 hidden cases fail" in out   # n = 1 and n = 2 agree


def test_all_reduce_feedback_names_a_wrong_sum(capsys):
    def off_by_one(cluster, arrays):
        total = np.sum(arrays, axis=0)
        return [total + (r == 1) for r in range(cluster.world_size)]

    out = feedback(check.ex02_halving_doubling_all_reduce, off_by_one, capsys)
    assert "rank 1's result: element [0] is" in out and "rank 1 的结果" in out


def test_row_parallel_feedback_names_the_wrong_part(capsys):
    def concatenates(x, w, tp):  # right product, but the bytes of an all-gather instead of an all-reduce
        return x @ w, 0

    out = feedback(check.ex04_row_parallel_forward, concatenates, capsys)
    assert "bytes sent by rank 0 (item 2 of the returned tuple): returned 0, expected" in out
    assert "array(" not in out.split("→")[1].splitlines()[0]  # the reason is not two look-alike arrays


def test_wrong_array_names_its_first_wrong_element(capsys):
    def halves(x, w, tp):
        return x @ w / 2, 0

    out = feedback(check.ex04_row_parallel_forward, halves, capsys)
    assert "the output (item 1 of the returned tuple): element [0, 0] is" in out
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
    result = shell.run_cell("from distlearn.memory import formulas as memory\nmemory.model_state_bytes(7_000_000_000, dp=0)")
    exc = result.error_in_exec
    lines = exc._render_traceback_()
    text = "\n".join(lines)
    assert len(lines) <= 5 and "validate.py" not in text, text
    assert "dp must be an integer" in text and "dp 必须是整数" in text
    assert "memory.model_state_bytes(7_000_000_000, dp=0)" in text and "distlearn.memory.formulas.model_state_bytes" in text


def test_validation_error_is_shown_in_the_readers_language():
    """Under English or 中文 (the chapter's language switch) the error shows that language only, the reader's
    line included; under both, both."""
    from IPython.core.interactiveshell import InteractiveShell

    import distlearn
    shell = InteractiveShell.instance()
    exc = shell.run_cell("from distlearn.memory import formulas as memory\nmemory.model_state_bytes(7_000_000_000, dp=0)").error_in_exec
    try:
        distlearn.set_language("en")
        en = "\n".join(exc._render_traceback_())
        distlearn.set_language("zh")
        zh = "\n".join(exc._render_traceback_())
    finally:
        distlearn.set_language("both")
    assert "dp must be an integer" in en and "必须" not in en and "(line 2)" in en, en
    assert "dp 必须是整数" in zh and "must be" not in zh and "（第 2 行）" in zh, zh


def _interleaved(stage, p, m, v, warmup=None, backward_chunks=None):
    """An independent loop version of the interleaved 1F1B order, with knobs to break it on purpose."""
    forwards = [("F", r + j, c) for r in range(0, m, p) for c in range(v) for j in range(p)]
    chunks = backward_chunks or (lambda v: list(reversed(range(v))))
    backwards = [("B", r + j, c) for r in range(0, m, p) for c in chunks(v) for j in range(p)]
    w = min(2 * (p - stage - 1) + (v - 1) * p, m * v) if warmup is None else warmup(stage, p, m, v)
    order = forwards[:w]
    for i in range(m * v - w):
        order += [forwards[w + i], backwards[i]]
    return order + backwards[m * v - w:]


def test_interleaved_order_checker_passes_a_loop_and_catches_wrong_orders(capsys):
    check.ex05_interleaved_order(_interleaved)
    assert "all 6 hidden cases pass" in capsys.readouterr().out
    from distlearn.pipeline_parallel.schedules import reference_1f1b_order
    wrong = {
        "plain 1F1B, chunk 0": lambda s, p, m, v: [(k, j, 0) for k, j in reference_1f1b_order(s, p, m)],
        "1F1B warm-up times v": lambda s, p, m, v: _interleaved(s, p, m, v, warmup=lambda s, p, m, v:
                                                              min((p - s - 1) * v, m * v)),
        "warm-up not capped at m·v": lambda s, p, m, v: _interleaved(s, p, m, v, warmup=lambda s, p, m, v:
                                                                   2 * (p - s - 1) + (v - 1) * p),
        "backwards chunk 0 first": lambda s, p, m, v: _interleaved(s, p, m, v, backward_chunks=lambda v: range(v)),
    }
    for name, fn in wrong.items():
        out = feedback(check.ex05_interleaved_order, fn, capsys)
        assert "torch runs" in out or "operations, expected" in out, (name, out)


def test_peak_activations_checker_covers_the_interleaved_schedule(capsys):
    def right(schedule, s, p, m, v):
        if schedule == "gpipe":
            return m
        w = min(p - s - 1, m) if schedule == "1f1b" else min(2 * (p - s - 1) + (v - 1) * p, m * v)
        return min(w + 1, m * v) / v

    check.ex05_peak_activations(right)
    assert "all 10 hidden cases pass" in capsys.readouterr().out
    wrong = {
        "the 1F1B answer the chapter prints": lambda sch, s, p, m, v: m if sch == "gpipe" else min(p - s, m),
        "Korthikanti's stage-0 value everywhere": lambda sch, s, p, m, v: (
            m if sch == "gpipe" else min(p - s, m) if sch == "1f1b" else p + (p - 1) / v),
        "warm-up not capped at m·v": lambda sch, s, p, m, v: (
            right(sch, s, p, m, v) if sch != "interleaved-1f1b" else (2 * (p - s - 1) + (v - 1) * p + 1) / v),
        "counted in chunks, not micro-batches": lambda sch, s, p, m, v: right(sch, s, p, m, v) * v,
    }
    for name, fn in wrong.items():
        feedback(check.ex05_peak_activations, fn, capsys)   # raises CheckFailed, else pytest.raises fails


def test_a_compare_that_says_no_still_names_the_first_difference(capsys):
    """A checker's own ``compare`` returning False falls back to :func:`difference` (a Why is falsy, so an ``or``
    would always pick the generic sentence)."""
    cases = [Case((1,), expected=(np.array([1, 2]), np.array([0.5, 0.5])), compare=lambda g, e: False,
                  parts=(("experts", "experts"), ("weights", "weights")))]
    with pytest.raises(CheckFailed):
        check.verify("ex_demo", lambda k: (np.array([1, 2]), np.array([0.4, 0.6])), cases)
    out = capsys.readouterr().out
    assert "weights (item 2 of the returned tuple): element [0] is 0.4 instead of 0.5" in out
    assert "does not pass this case" not in out


def test_two_ranks_exchanging_whole_arrays_pass_the_two_rank_case():
    """On 2 ranks one message each way moves the same bytes as halving-doubling with fewer messages: not failed."""
    from distlearn.collectives.check import _halving_doubling_case

    case = _halving_doubling_case(2, 8, 0)
    cluster, arrays = case.args
    cluster.send(arrays[0], 0, 1)
    cluster.send(arrays[1], 1, 0)
    got = [arrays[0] + cluster.recv(1, 0), arrays[1] + cluster.recv(0, 1)]
    assert case.compare(got, case.expected) is True

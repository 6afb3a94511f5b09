"""Chapter 10's exercise checkers: they accept answers written from the closed forms alone (no distlearn code),
reject the typical wrong ones, and their hints point at the mistake without printing the formula."""
import numpy as np
import pytest

from distlearn.core import check
from distlearn.context_parallel import check as ch10


# ---------------------------------------------------------------- independent answers
def _merge(oa, la, ob, lb):                   # softmax shares relative to the larger lse: never overflows
    m = np.maximum(la, lb)
    wa, wb = np.exp(la - m), np.exp(lb - m)
    return (wa[:, None] * oa + wb[:, None] * ob) / (wa + wb)[:, None], m + np.log(wa + wb)


def _zigzag(s, cp):
    c = s // (2 * cp)
    return [np.r_[r * c:(r + 1) * c, (2 * cp - 1 - r) * c:(2 * cp - r) * c] for r in range(cp)]


def _work(s, cp, layout):                     # query i attends to i + 1 keys
    pos = _zigzag(s, cp) if layout == "zigzag" else [np.arange(r * s // cp, (r + 1) * s // cp) for r in range(cp)]
    return [int(sum(i + 1 for i in p)) for p in pos]


def _hidden(c, a, kv, d, f, bw):              # 4c²da FLOPs vs K and V: 2·c·d·kv values of 2 bytes
    return 4 * c * c * d * a / f >= 2 * c * d * kv * 2 / bw


CORRECT = [(ch10.ex10_merge_blocks, _merge), (ch10.ex10_zigzag_positions, _zigzag), (ch10.ex10_causal_work, _work),
           (ch10.ex10_ring_hidden, _hidden)]


def test_checkers_accept_independent_answers(capsys):
    for checker, fn in CORRECT:
        checker(fn)
    assert [line[0] for line in capsys.readouterr().out.splitlines()] == ["✓"] * len(CORRECT)


def _naive_merge(oa, la, ob, lb):             # e^lse directly: inf / inf at lse = 800
    with np.errstate(over="ignore", invalid="ignore"):
        ea, eb = np.exp(la), np.exp(lb)
        return (ea[:, None] * oa + eb[:, None] * ob) / (ea + eb)[:, None], np.log(ea + eb)


@pytest.mark.parametrize("checker,wrong", [
    (ch10.ex10_merge_blocks, lambda oa, la, ob, lb: ((oa + ob) / 2, np.logaddexp(la, lb))),          # average
    (ch10.ex10_merge_blocks, _naive_merge),                                                         # overflows
    (ch10.ex10_merge_blocks, lambda oa, la, ob, lb: (_merge(oa, la, ob, lb)[0], np.maximum(la, lb))),  # lse = max
    (ch10.ex10_zigzag_positions, lambda s, cp: [p[::-1] for p in _zigzag(s, cp)]),                 # order reversed
    (ch10.ex10_zigzag_positions, lambda s, cp: [np.arange(r * s // cp, (r + 1) * s // cp) for r in range(cp)]),
    (ch10.ex10_causal_work, lambda s, cp, lay: [s * (s + 1) // 2 // cp] * cp),                    # equal shares
    (ch10.ex10_causal_work, lambda s, cp, lay: [w - s // cp for w in _work(s, cp, lay)]),          # self excluded
    (ch10.ex10_ring_hidden, lambda c, a, kv, d, f, bw: _hidden(c, a, a, d, f, bw)),                # query heads
    (ch10.ex10_ring_hidden, lambda c, a, kv, d, f, bw: 4 * c * c * d * a / f >= c * d * kv * 2 / bw),   # K only
])
def test_checkers_reject_typical_wrong_answers(checker, wrong):
    with pytest.raises(check.CheckFailed):
        checker(wrong)


def test_hints_do_not_print_the_formula(capsys):
    for checker, wrong in [(ch10.ex10_merge_blocks, lambda oa, la, ob, lb: ((oa + ob) / 2, np.logaddexp(la, lb))),
                           (ch10.ex10_causal_work, lambda s, cp, lay: [s * (s + 1) // 2 // cp] * cp),
                           (ch10.ex10_ring_hidden, lambda c, a, kv, d, f, bw: _hidden(c, a, a, d, f, bw))]:
        with pytest.raises(check.CheckFailed):
            checker(wrong)
    out = capsys.readouterr().out
    for formula in ("e^(lse_a − lse)", "c(c+1)/2", "c²", "4·c²·d·a", "2·c·d·kv", "logaddexp"):
        assert formula not in out, formula
    assert "share" in out and "Equal tokens are not equal work" in out and "K/V heads only" in out

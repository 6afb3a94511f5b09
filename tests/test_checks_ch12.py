"""Chapter 12's exercise checkers: they accept answers written from the closed forms alone (no distlearn code),
reject the typical wrong ones, and their hints point at the method without printing the answer's formula."""
import pytest

from distlearn.core import check
from distlearn.nd_parallel import check as ch12


# ---------------------------------------------------------------- independent answers
def _coords(r, shape):                        # row-major, tp fastest
    pp, dp, cp, tp = shape
    return [r // (dp * cp * tp), r // (cp * tp) % dp, r // tp % cp, r % tp]


def _rank(c, shape):
    return ((c[0] * shape[1] + c[1]) * shape[2] + c[2]) * shape[3] + c[3]


def _group(rank, shape, dim):
    axis = ("pp", "dp", "cp", "tp").index(dim)
    c = _coords(rank, shape)
    return [_rank(c[:axis] + [i] + c[axis + 1:], shape) for i in range(shape[axis])]


def _tp_bytes(L, m, b, s, h, tp, p):          # 4 all-gathers + 4 reduce-scatters per layer and micro-batch
    return 8 * L * m * p * b * s * h * (tp - 1) / tp


def _nodes(shape, g):
    return {d: len({r // g for r in _group(0, shape, d)}) for d, n in zip(("pp", "dp", "cp", "tp"), shape) if n > 1}


def test_checkers_accept_independent_answers(capsys):
    ch12.ex12_group_ranks(_group)
    ch12.ex12_tp_bytes(_tp_bytes)
    ch12.ex12_nodes_spanned(_nodes)
    assert [line[0] for line in capsys.readouterr().out.splitlines()] == ["✓"] * 3


@pytest.mark.parametrize("checker,wrong", [
    (ch12.ex12_group_ranks, lambda r, shape, dim: _group(r, shape[::-1], {"pp": "tp", "dp": "cp", "cp": "dp",
                                                                             "tp": "pp"}[dim])),   # column-major
    (ch12.ex12_tp_bytes, lambda L, m, b, s, h, tp, p: 4 * L * m * p * b * s * h * (tp - 1) / tp),   # forward only
    (ch12.ex12_tp_bytes, lambda L, m, b, s, h, tp, p: 8 * L * m * p * b * s * h / tp),              # shard, no ring
    (ch12.ex12_nodes_spanned, lambda shape, g: {d: 1 for d, n in zip(("pp", "dp", "cp", "tp"), shape) if n > 1}),
])
def test_checkers_reject_typical_wrong_answers(checker, wrong):
    with pytest.raises(check.CheckFailed):
        checker(wrong)


def test_hints_do_not_print_the_formula(capsys):
    for checker, wrong in [(ch12.ex12_group_ranks, lambda r, shape, dim: [r]),
                           (ch12.ex12_tp_bytes, lambda *a: 0.0)]:
        with pytest.raises(check.CheckFailed):
            checker(wrong)
    out = capsys.readouterr().out
    for formula in ("((p·dp + d)·cp + c)·tp + t", "pp = r // dp", "2 all-gathers and 2 reduce-scatters",
                    "前向 2 次 AllGather", "Multiply by layers and micro-batches"):
        assert formula not in out, formula
    assert "repeated division" in out and "(tp − 1)/tp" in out

"""Chapter 02's all-reduce and chapter 05's bubble and partition checkers: they accept answers written from the
closed forms alone (no distlearn code), reject the typical wrong ones, and their hints point at the mistake or the
method without printing the formula or the algorithm."""
import pytest

from distlearn.core import check, i18n
from distlearn.collectives import check as ch02
from distlearn.pipeline_parallel import check as ch05


# ---------------------------------------------------------------- independent answers
def _all_reduce(m, n):                      # ring: n − 1 reduce-scatter + n − 1 all-gather steps of m / n each
    return 2 * (n - 1) * m / n


def _bubble(p, m):                          # GPipe / 1F1B: idle (p − 1) slots out of m + p − 1
    return (p - 1) / (m + p - 1)


def _partition_last_first(n, p):            # extra layers on the *last* stages: as valid as on the first
    base, extra = divmod(n, p)
    return [base + (1 if s >= p - extra else 0) for s in range(p)]


def _partition_greedy(n, p):                # hand out layers one by one, round robin
    sizes = [0] * p
    for i in range(n):
        sizes[i % p] += 1
    return sizes


CORRECT = [(ch02.ex02_all_reduce_bytes, _all_reduce), (ch05.ex05_bubble_fraction, _bubble),
           (ch05.ex05_partition_layers, _partition_last_first), (ch05.ex05_partition_layers, _partition_greedy)]


def test_checkers_accept_independent_answers(capsys):
    for checker, fn in CORRECT:
        checker(fn)
    assert [line[0] for line in capsys.readouterr().out.splitlines()] == ["✓"] * len(CORRECT)


WRONG = [
    (ch02.ex02_all_reduce_bytes, lambda m, n: 2 * m),                               # whole message per step
    (ch02.ex02_all_reduce_bytes, lambda m, n: (n - 1) * m / n),                     # one phase only
    (ch05.ex05_bubble_fraction, lambda p, m: (p - 1) / m),                          # idle over busy time
    (ch05.ex05_bubble_fraction, lambda p, m: (p - 1) / (m + p)),                    # off by one slot
    (ch05.ex05_partition_layers, lambda n, p: [n // p] * p),                        # remainder dropped
    (ch05.ex05_partition_layers, lambda n, p: [n // p] * (p - 1) + [n // p + n % p]),   # remainder all on one stage
    (ch05.ex05_partition_layers, lambda n, p: [-(-n // p)] * p),                    # ceil everywhere: too many
]


@pytest.mark.parametrize("checker,wrong", WRONG)
def test_checkers_reject_typical_wrong_answers(checker, wrong):
    with pytest.raises(check.CheckFailed):
        checker(wrong)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_hints_do_not_print_the_formula(capsys, lang):
    before = i18n.get_language()
    i18n.set_language(lang)
    try:
        for checker, wrong in WRONG:
            with pytest.raises(check.CheckFailed):
                checker(wrong)
    finally:
        i18n.set_language(before)
    out = capsys.readouterr().out
    for formula in ("2(n−1)/n", "2(n-1)/n", "(n−1)/n", "n−1", "(p − 1)(t_f + t_b)", "(m + p − 1)", "p − 1",
                    "n % p", "r = n", "extra layer to", "多分一层"):
        assert formula not in out, formula
    en = ["reduce-scatter followed by an all-gather", "not idle over busy", "integer division leave over"]
    zh = ["ReduceScatter 和 AllGather 两部分", "而不是空闲时间与计算时间之比", "整数除法会余下几层"]
    for phrase in (en if lang == "en" else zh):
        assert phrase in out, phrase


def test_partition_feedback_names_the_mistake(capsys):
    with pytest.raises(check.CheckFailed):
        ch05.ex05_partition_layers(lambda n, p: [n // p] * p)
    with pytest.raises(check.CheckFailed):
        ch05.ex05_partition_layers(lambda n, p: [n // p] * (p - 1) + [n // p + n % p])
    out = capsys.readouterr().out
    assert "the sizes sum to 9, but there are 10 layers to place" in out
    assert "differ by more than one" in out

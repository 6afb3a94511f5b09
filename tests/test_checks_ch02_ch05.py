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


def _hierarchical(m, k, d, b_in, b_net, a_in, a_net):   # Thakur et al. 2005 / Patarasuk & Yuan 2009 rings, per level
    rs = ag = (k - 1) * a_in + (k - 1) * (m / k) / b_in                   # k − 1 steps of m / k inside a domain
    ar = 2 * (d - 1) * a_net + 2 * (d - 1) * (m / k / d) / b_net           # ring all-reduce of m / k on one rail
    return rs + ar + ag


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


CORRECT = [(ch02.ex02_all_reduce_bytes, _all_reduce), (ch02.ex02_hierarchical_time, _hierarchical),
           (ch05.ex05_bubble_fraction, _bubble),
           (ch05.ex05_partition_layers, _partition_last_first), (ch05.ex05_partition_layers, _partition_greedy)]


def test_checkers_accept_independent_answers(capsys):
    for checker, fn in CORRECT:
        checker(fn)
    assert [line[0] for line in capsys.readouterr().out.splitlines()] == ["✓"] * len(CORRECT)


WRONG = [
    (ch02.ex02_all_reduce_bytes, lambda m, n: 2 * m),                               # whole message per step
    (ch02.ex02_all_reduce_bytes, lambda m, n: (n - 1) * m / n),                     # one phase only
    (ch02.ex02_hierarchical_time,                                                   # across on the whole message
     lambda m, k, d, bi, bn, ai, an: _hierarchical(m, k, d, bi, bn, ai, an) + 2 * (d - 1) / d * m * (1 - 1 / k) / bn),
    (ch02.ex02_hierarchical_time,                                                   # the all-gather forgotten
     lambda m, k, d, bi, bn, ai, an: _hierarchical(m, k, d, bi, bn, ai, an) - (k - 1) * (ai + m / k / bi)),
    (ch02.ex02_hierarchical_time,                                                   # one flat ring over the network
     lambda m, k, d, bi, bn, ai, an: 2 * (k * d - 1) * (an + m / (k * d) / bn)),
    (ch02.ex02_hierarchical_time,                                                   # latencies left out
     lambda m, k, d, bi, bn, ai, an: _hierarchical(m, k, d, bi, bn, 0.0, 0.0)),
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
                    "k−1", "k - 1", "d−1", "d - 1", "M/k", "/ k",
                    "n % p", "r = n", "extra layer to", "多分一层"):
        assert formula not in out, formula
    en = ["reduce-scatter followed by an all-gather", "not idle over busy", "integer division leave over",
          "on what each GPU kept after step 1"]
    zh = ["ReduceScatter 和 AllGather 两部分", "而不是空闲时间与计算时间之比", "整数除法会余下几层",
          "第 1 步之后每块 GPU 留下的那一份"]
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


# ---------------------------------------------------------------- ZB-H1's bubble (issue 32 item 14)
def _zb_h1(p, f, b, w):                     # Qi et al. 2023 Table 2, their T_B = t_b − t_W
    return (p - 1) * (f + (b - w) - w)


ZB_WRONG = [lambda p, f, b, w: (p - 1) * (f + b),                  # 1F1B's bubble: nothing filled
            lambda p, f, b, w: (p - 1) * (f + b - w),              # the full backward travels, W subtracted once
            lambda p, f, b, w: p * (f + (b - w) - w)]              # one hop too many


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_zb_h1_hint_guides_without_the_formula(capsys, lang):
    """The hint printed after a wrong try names no piece of (p − 1)(t_f + t_I − t_W), in either language, and
    still points at the method (the split backward, a drawing with 2 and then 3 stages)."""
    before = i18n.get_language()
    i18n.set_language(lang)
    try:
        ch05.ex05_zb_h1_bubble(_zb_h1)
        assert capsys.readouterr().out.startswith("✓")
        for wrong in ZB_WRONG:
            with pytest.raises(check.CheckFailed):
                ch05.ex05_zb_h1_bubble(wrong)
    finally:
        i18n.set_language(before)
    out = capsys.readouterr().out
    hint = out[out.index("Hint:" if lang == "en" else "提示："):]
    for piece in ("p − 1", "p - 1", "p−1", "(p", "t_f", "t_I", "t_W", "t_b", "+ t", "− t", "- t", "fills part of",
                  "填充每段空闲的一部分", "num_stages - 1"):
        assert piece not in hint, piece
    want = (["which part can wait", "F, I and W", "2 stages", "3 stages"] if lang == "en"
            else ["哪一部分可以推迟", "F、I、W", "2 个阶段", "3 个阶段"])
    for phrase in want:
        assert phrase in hint, phrase

"""Issue 32, item 14 (chapter 01's exercises): a right answer computed in float32 passes ``ex01_zero_model_states``;
the rule ``ex01_update_loss_scale`` asks for (grow only to a finite fp32 scale) is PyTorch's own and is stated in
the exercise, in both languages."""
from pathlib import Path

import numpy as np
import pytest
import torch

from distlearn.memory import check as ch01
from distlearn.precision.scaling import ScalerConfig, update_scale

ROOT = Path(__file__).resolve().parent.parent
MIXED_ADAM = {"params": 2, "grads": 2, "optimizer": 12}


def zero_states(num_params, dp, zero_stage, dtype=np.float64, forget=None):
    """Bytes per GPU of mixed-precision Adam under ZeRO, computed in ``dtype``; ``forget``: a term left undivided."""
    divided = {"optimizer": zero_stage >= 1, "grads": zero_stage >= 2, "params": zero_stage >= 3}
    total = dtype(0)
    for part, nbytes in MIXED_ADAM.items():
        share = dtype(num_params) * dtype(nbytes)
        total += share / dtype(dp) if divided[part] and part != forget else share
    return total


def test_a_right_answer_in_float32_passes(capsys):
    assert float(zero_states(7_500_000_000, 64, 1, np.float32)) != 31_406_250_000   # float32 really rounds here
    ch01.ex01_zero_model_states(lambda n, dp, s: zero_states(n, dp, s, np.float32))
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("forget", ["optimizer", "grads", "params"])
def test_a_term_left_undivided_still_fails(forget, capsys):
    with pytest.raises(ch01.CheckFailed):
        ch01.ex01_zero_model_states(lambda n, dp, s: zero_states(n, dp, s, np.float32, forget=forget))


def torch_update(scale, tracker, found_inf, interval):
    """One ``GradScaler.update()`` on CPU through PyTorch's own kernel (``torch._amp_update_scale_``)."""
    s, t = torch.tensor([scale], dtype=torch.float32), torch.tensor([tracker], dtype=torch.int32)
    torch._amp_update_scale_(s, t, torch.tensor([float(found_inf)]), 2.0, 0.5, interval)
    return s.item(), t.item()


@pytest.mark.parametrize("case", [(2.0 ** 127, 2, False, 3), (65536.0, 1999, False, 2000), (65536.0, 0, True, 2000),
                                  (2.0 ** 126, 0, False, 1), (8.0, 0, False, 1)])
def test_the_finite_fp32_rule_is_pytorchs(case):
    assert update_scale(*case[:3], ScalerConfig(growth_interval=case[3])) == torch_update(*case)


def test_the_exercise_states_the_finite_fp32_rule_in_both_languages():
    text = (ROOT / "solutions" / "01_memory.md").read_text(encoding="utf-8")
    exercise = text[text.index("## Exercise 6"):text.index("def update_loss_scale")]
    assert "finite fp32 number" in exercise and "有限的 fp32 数" in exercise


# ---------------------------------------------------------------------------------------------- item 14, ch02
@pytest.mark.parametrize("exercise, wrong", [
    ("ex02_bus_bandwidth", lambda nbytes, seconds, world_size: nbytes / seconds),
    ("ex02_ring_time", lambda nbytes, world_size, alpha, bandwidth: alpha + nbytes / bandwidth)])
def test_chapter02_hints_guide_without_giving_the_formula(exercise, wrong, capsys):
    from distlearn.collectives import check as ch02

    with pytest.raises(ch02.CheckFailed):
        getattr(ch02, exercise)(wrong)
    out = capsys.readouterr().out
    assert "Hint" in out or "提示" in out
    for formula in ("2(n−1)", "2(n-1)", "2 (n−1)", "2·(n−1)", "2 * (n - 1)"):
        assert formula not in out, f"{exercise}'s hint gives the formula away: {formula}"


# ---------------------------------------------------------------------------------------------- item 14, ch04
@pytest.mark.parametrize("exercise, wrong, formulas", [
    ("ex04_sp_activation_saving", lambda s, b, h, a, tp: s * b * h,
     ("10 + 24/t", "34/t", "10·s·b·h", "5as/(ht)")),
    ("ex04_layer_comm_bytes", lambda s, b, h, tp, nb: s * b * h * nb,
     ("2(t−1)/t", "2(t-1)/t", "s·b·h·dtype_bytes")),
])
def test_chapter04_hints_guide_without_giving_the_formula(exercise, wrong, formulas, capsys):
    from distlearn.tensor_parallel import check as ch04

    with pytest.raises(ch04.CheckFailed):
        getattr(ch04, exercise)(wrong)
    out = capsys.readouterr().out
    assert "Hint" in out or "提示" in out
    for formula in formulas:
        assert formula not in out, f"{exercise}'s hint gives the formula away: {formula}"

"""Contract values of distlearn.memory.formulas against the ZeRO paper and Korthikanti et al. 2022."""
import pytest

from distlearn.memory.formulas import GB, GiB, activation_bytes_per_layer, bytes_per_param, model_state_bytes
from distlearn.core.validate import DistlearnValueError


@pytest.mark.parametrize("stage,expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure_1(stage, expected_gb):
    """ZeRO (Rajbhandari et al. 2020) Figure 1: Ψ = 7.5B, Nd = 64, K = 12."""
    assert round(model_state_bytes(7_500_000_000, dp=64, zero_stage=stage).total / GB, 1) == expected_gb


@pytest.mark.parametrize("precision,optimizer,total", [("fp32", "adam", 16), ("mixed", "adam", 16),
                                                       ("mixed-fp32-grads", "adam", 18), ("fp32", "sgd", 8),
                                                       ("fp32", "sgd-momentum", 12), ("mixed", "adam-8bit", 10)])
def test_bytes_per_param(precision, optimizer, total):
    assert bytes_per_param(precision, optimizer)["total"] == total


def test_offload_moves_bytes_to_cpu():
    m = model_state_bytes(10**9, dp=8, zero_stage=3, offload_optimizer=True, offload_params=True)
    assert m.optimizer == 0 and m.params == 0 and m.cpu_optimizer == 12e9 / 8 and m.cpu_params == 2e9 / 8


def test_gpt3_activation_check_value():
    b = activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
    assert b / 2**20 == pytest.approx(2736, abs=0.5)


def test_activation_modes_are_consistent():
    kw = dict(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96)
    sbh = 2048 * 12288
    assert activation_bytes_per_layer(**kw, tp=8, sequence_parallel=True) == pytest.approx(
        activation_bytes_per_layer(**kw) / 8)
    assert activation_bytes_per_layer(**kw, recompute="selective") == 34 * sbh
    assert activation_bytes_per_layer(**kw, recompute="full") == 2 * sbh


@pytest.mark.parametrize("kwargs", [dict(num_params=0), dict(num_params=10, dp=0), dict(num_params=10, zero_stage=4),
                                    dict(num_params=10, precision="fp8"), dict(num_params=10, offload_params=True)])
def test_bad_input(kwargs):
    with pytest.raises(DistlearnValueError):
        model_state_bytes(**kwargs)

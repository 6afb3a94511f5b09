"""The accumulator model of chapter 08 against what an H200 did (distlearn/precision/measured.py; stored run of
authoring/gpu_checks.py). The stored sums are the hardware's; the model must reproduce them, and the wrong model
(round-to-nearest) must visibly fail the same comparison."""
import numpy as np
import pytest

from distlearn.precision import block_scaled as B
from distlearn.precision import measured as H


@pytest.fixture(scope="module")
def run():
    return H.h200()


def test_the_stored_inputs_are_chapter_08s(run):
    rng = np.random.default_rng(0)
    a, w = np.abs(rng.standard_normal((64, 4096))), np.abs(rng.standard_normal((64, 4096)))
    products = B.round_to(a, "e4m3") * B.round_to(w, "e4m3")
    assert np.array_equal(products.sum(axis=1), run.exact)       # the course's E4M3 rounding = torch's cast


@pytest.mark.parametrize("every, mode", [(None, "fast_accum"), (128, "default")])
def test_the_probe_is_predicted_by_a_14_bit_accumulator(run, every, mode):
    """The model with 13 fraction bits (14 significant) predicts every probe row: ones kept up to 2**13, lost from
    2**14; with promotion every 128 products only the first block's 127 ones are lost."""
    for row in run.probe:
        model = B.accumulate(H.probe_products(row.big_exponent, run.K), 13, every, rounding="truncate")[0]
        assert model - 2.0 ** row.big_exponent == getattr(row, f"ones_kept_{mode.split('_')[0]}"), row
    # one more bit (a deliberately wrong model) would keep the ones at 2**14 and fail the comparison
    wrong = B.accumulate(H.probe_products(14, run.K), 14, None, rounding="truncate")[0] - 2.0 ** 14
    assert wrong != next(r.ones_kept_fast for r in run.probe if r.big_exponent == 14)


def test_truncation_matches_the_hardware_and_round_to_nearest_does_not(run):
    rng = np.random.default_rng(0)
    a, w = np.abs(rng.standard_normal((64, 4096))), np.abs(rng.standard_normal((64, 4096)))
    p = B.round_to(a, "e4m3") * B.round_to(w, "e4m3")
    trunc = B.accumulate(p, 13, rounding="truncate")
    nearest = B.accumulate(p, 13, rounding="nearest")
    assert np.max(np.abs(trunc - run.fast_accum) / run.exact) < 2e-3
    assert abs(np.median(run.relative_error("fast_accum")) - np.median(np.abs(trunc - run.exact) / run.exact)) < 1e-3
    assert np.min(np.abs(nearest - run.fast_accum) / run.exact) > 0.05    # the old model is 6-7 % off
    # cuBLAS's default promotes: 100x smaller errors than fast accumulation on the same inputs
    assert np.median(run.relative_error("default")) * 100 < np.median(run.relative_error("fast_accum"))


def test_bad_input_names_the_parameter():
    from distlearn.core.validate import DistlearnValueError

    with pytest.raises(DistlearnValueError) as e:
        H.probe_products(17)
    assert e.value.param == "big_exponent"
    with pytest.raises(DistlearnValueError) as e:
        B.accumulate(np.ones((1, 4)), rounding="up")
    assert e.value.param == "rounding"

"""Chapter 04's weight-gradient formula (issue 13, item 14): ∂L/∂B_r = GeLU(Z_r)ᵀ ∂L/∂Y, with Z_r = X A_r, in both
languages — checked against the simulation's gradients, where the old formula Z_rᵀ ∂L/∂Y fails."""
import pathlib
import re

import numpy as np

from distlearn.tensor_parallel import simulation as tp_sim

CHAPTER = pathlib.Path(__file__).resolve().parents[1] / "notebooks" / "04_tensor_parallel.md"


def test_chapter_states_the_gelu_output_in_both_languages():
    text = CHAPTER.read_text()
    right = r"\partial L/\partial B_r = \mathrm{GeLU}(Z_r)^\top \partial L/\partial Y"
    assert text.count(right) == 2                                   # the English cell and its Chinese partner
    assert text.count("Z_r = XA_r") == 2
    assert not re.search(r"\\partial L/\\partial B_r = Z_r\^\\top", text)


def test_formula_matches_the_simulated_gradients():
    rng = np.random.default_rng(0)
    s, b, h, f, t = 8, 2, 16, 64, 4
    X, dY = rng.standard_normal((s, b, h)), rng.standard_normal((s, b, h))
    A, a_bias = rng.standard_normal((h, f)) / h ** 0.5, rng.standard_normal(f)
    B, b_bias = rng.standard_normal((f, h)) / f ** 0.5, rng.standard_normal(h)
    r = tp_sim.megatron_mlp(X, A, a_bias, B, b_bias, dY, t)
    x2, dy2 = X.reshape(-1, h), dY.reshape(-1, h)
    for rank in range(t):
        cols = slice(rank * f // t, (rank + 1) * f // t)
        Z = x2 @ A[:, cols] + a_bias[cols]
        got = r.local[rank]["grad_w2"]
        assert np.allclose(got, tp_sim.gelu(Z).T @ dy2, atol=1e-12)   # GeLU(Z_r)ᵀ ∂L/∂Y
        assert not np.allclose(got, Z.T @ dy2, atol=1e-3)             # the old Z_rᵀ ∂L/∂Y is wrong

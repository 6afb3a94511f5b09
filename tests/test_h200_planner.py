"""The planner against an H200 (issue 38): distlearn/planning/measured.py on the stored run of authoring/gpu_checks.py's
planner_measure step. The GEMM roofline and the activation formula are recomputed here from their closed forms, so
a planner broken on purpose (a ceiling dropped, a saved tensor forgotten) fails these tests; the numbers chapter 14
quotes are checked against the stored run."""
import pytest

from authoring import gpu_checks as G
from distlearn.core.models import get_preset
from distlearn.planning import kernels as K
from distlearn.planning import measured as H

PEAK_BF16, PEAK_FP8, HBM = 989e12, 1979e12, 4.8e12       # H200 SXM datasheet, dense
CEILING = 792.1 / 989                                      # Bekman's H100 SXM table, the H100 family's share


def roofline(m, n, k, kind):
    """The planner's GEMM time, written out: max(FLOPs / (peak × ceiling), bytes / HBM bandwidth)."""
    peak, size = (PEAK_BF16, 2) if kind == "bf16" else (PEAK_FP8, 1)
    return max(2 * m * n * k / (peak * CEILING), ((m * k + k * n) * size + m * n * 2) / HBM)


def llama_flash_bytes(s, b, h, a, kv, f, swiglu="unfused", recompute="none"):
    """Chapter 08's closed form for a Llama block with FlashAttention, bf16:
    2·sbh·(6 + 2k/a + 4f/h) + 4·a·s·b (fused SwiGLU: 3f instead of 4f; selective: no log-sum-exp;
    norm-act: 2·sbh·(4 + 2k/a + 2f/h) + 4·a·s·b)."""
    sbh = s * b * h
    if recompute == "norm-act":
        return 2 * sbh * (4 + 2 * kv / a + 2 * f / h) + 4 * a * s * b
    mlp = 3 if swiglu == "fused" else 4
    return 2 * sbh * (6 + 2 * kv / a + mlp * f / h) + (0 if recompute == "selective" else 4 * a * s * b)


@pytest.fixture(scope="module")
def run():
    return H.stored_run()


def test_the_timed_shapes_are_the_planners():
    """gpu_checks.PLANNER_GEMMS is what kernels.layer_gemms gives at tensor parallelism 8."""
    assert {g[0] for g in G.PLANNER_GEMMS} == set(H.MODELS)
    for model in H.MODELS:
        want = [(g.name, int(g.n), int(g.k)) for g in K.layer_gemms(get_preset(model), 4096, 8)]
        assert [(name, n, k) for mdl, name, n, k in G.PLANNER_GEMMS if mdl == model] == want
    assert G.GEMM_KINDS == H.GEMM_KINDS


def test_the_run_says_where_and_when(run):
    assert "H200" in run.gpu and run.torch.startswith("2.") and run.date[:4].isdigit()
    assert len(run.gemms) == len(G.PLANNER_GEMMS) * len(G.PLANNER_TOKENS) * len(G.GEMM_KINDS)


def check_gemm_predictions():
    """Every stored shape: the module's predicted seconds are the written-out roofline (to 1e-12)."""
    for kind in H.GEMM_KINDS:
        for c in H.gemm_table(kind) + H.gemm_table(kind, square=True):
            t = c.timing
            assert c.predicted_seconds == pytest.approx(roofline(t.m, t.n, t.k, kind), rel=1e-12), (kind, t)


def test_the_planners_gemm_times_are_its_roofline():
    check_gemm_predictions()


def test_a_broken_roofline_fails(monkeypatch):
    real = K._gemm_seconds
    monkeypatch.setattr(K, "_gemm_seconds", lambda g, peak, ceiling, bw, i, o: real(g, peak, 1.0, bw, i, o))
    with pytest.raises(AssertionError):
        check_gemm_predictions()


def check_blocks():
    """Every stored block that ran: the planner's bytes are the closed form, each formula tensor is one saved
    storage of exactly its size, and what is left is the RMSNorms' fp32 1/rms (two per block, none with norm-act)
    and the attention kernel's RNG state; nothing unexplained."""
    names = H.block_names()
    assert len(names) >= 8
    for name in names:
        c = H.block_comparison(name)
        b = c.run
        closed = llama_flash_bytes(b.seq_len, b.micro_batch_size, b.hidden_size, b.num_heads, b.num_kv_heads,
                                   b.ffn_hidden_size, b.swiglu, b.recompute)
        assert c.planner_bytes == c.formula_bytes == closed, name
        assert c.missing_bytes == 0 and c.unexplained_bytes == 0, (name, [r for r in c.rows if
                                                                          r.term == "unexplained" or not r.measured_bytes])
        rstd = 0 if b.recompute == "norm-act" else 2 * 4 * b.seq_len * b.micro_batch_size
        assert c.rstd_bytes == rstd, name
        assert c.measured_bytes == closed + rstd + c.kernel_state_bytes, name
        assert c.kernel_state_bytes <= 2 * H.KERNEL_STATE_MAX_BYTES, name


def test_saved_bytes_are_the_formula_tensor_by_tensor():
    check_blocks()


def test_a_forgotten_tensor_fails(monkeypatch):
    from distlearn.activation_memory import formulas as F

    real = F.layer_activation_table
    monkeypatch.setattr(F, "layer_activation_table",
                        lambda **kw: [t for t in real(**kw) if t.name != "softmax_lse"])
    with pytest.raises(AssertionError):
        check_blocks()


def test_bad_input_names_the_parameter():
    from distlearn.core.validate import DistlearnValueError

    for call, param in ((lambda: H.predicted_seconds(0, 1, 1), "m"), (lambda: H.gemm_table("fp4"), "kind"),
                        (lambda: H.layer_curve("gpt3-175b"), "model"), (lambda: H.block_comparison("nope"), "name")):
        with pytest.raises(DistlearnValueError) as e:
            call()
        assert e.value.param == param

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


# ---------------------------------------------------------------- the GPU step itself, before a GPU runs it
def test_the_step_runs_on_the_cpu_and_its_blocks_match_the_formula():
    """planner_measure's dry run (tiny shapes on the CPU) records every GEMM kind (or its error), and its blocks'
    saved bytes are chapter 08's closed form plus the two RMSNorms' fp32 1/rms — the same check the H200 run gets."""
    r = G.planner_measure(dry_run=True)
    assert r["dry_run"] and r["gemm"] and r["square"] and not r["skipped"]
    for row in r["gemm"] + r["square"]:
        assert set(G.GEMM_KINDS) <= set(row)
        assert "seconds" in row["bf16"] and "seconds" in row["fp8_tensorwise"]
    for b in r["blocks"]:
        assert b["attention_kernels"] == ["ScaledDotProductFlashAttentionForCpuBackward0"]
        assert "aten::_scaled_dot_product_flash_attention_for_cpu" in b["attention_ops"]
        s, n = b["seq_len"], b["micro_batch_size"]
        closed = llama_flash_bytes(s, n, b["hidden_size"], b["num_heads"], b["num_kv_heads"], b["ffn_hidden_size"],
                                   b["swiglu"], b["recompute"])
        assert b["saved_bytes"] == closed + 2 * 4 * s * n, b["name"]


class _FakeCuda:
    """Just enough of torch.cuda for _Timer's CUDA path: events on the CPU clock, a graph that records the calls
    made while capturing and replays them."""

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            import time
            self.t = time.perf_counter()

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

    class CUDAGraph:
        def __init__(self):
            self.calls = []

        def replay(self):
            for f in self.calls:
                f()

    class Stream:
        def wait_stream(self, other):
            pass

    def __init__(self, fail_capture=False):
        self.capturing, self.fail = None, fail_capture

    def synchronize(self):
        pass

    def empty_cache(self):
        pass

    def current_stream(self):
        return self.Stream()

    def stream(self, s):
        import contextlib
        return contextlib.nullcontext()

    def graph(self, g):
        import contextlib
        fake = self

        @contextlib.contextmanager
        def capture():
            if fake.fail:
                raise RuntimeError("capture failed")
            fake.capturing = g
            yield
            fake.capturing = None
        return capture()


@pytest.mark.parametrize("fail", [False, True])
def test_the_cuda_timer_path(fail):
    """_Timer's CUDA branch with a fake torch.cuda: the graph holds `inner` calls rotating through the operand
    sets, and a failed capture falls back to launching them one by one for that kind only."""
    import types

    cuda = _FakeCuda(fail)
    seen = []

    def make(i):
        def f():
            if cuda.capturing is not None:
                cuda.capturing.calls.append(f)
            seen.append(i)
        return f

    timer = G._Timer(types.SimpleNamespace(cuda=cuda), cuda=True, reps=10, min_seconds=1e-4)
    row = timer([make(0), make(1), make(2)], out_bytes=1 << 20, kind="bf16")
    assert row["seconds"] > 0 and row["inner"] >= 1 and row["reps"] == 10
    assert row["method"].startswith("eager (graph failed") if fail else row["method"] == "cuda graph"
    assert set(seen) == {0, 1, 2}
    assert ("bf16" in timer.no_graphs) == fail

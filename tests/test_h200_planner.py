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
FP8_TENSOR = 1453.4 / 1979                                 # Bekman's H200 FP8 (per tensor) best shape
FP8_BLOCK = 1426 / 1979                                    # DeepGEMM's best shape (H800), 128-blocks


def roofline(m, n, k, kind):
    """The planner's GEMM time, written out: max(FLOPs / (peak × ceiling), bytes / HBM bandwidth)."""
    peak, size = (PEAK_BF16, 2) if kind == "bf16" else (PEAK_FP8, 1)
    share = CEILING if kind == "bf16" else FP8_BLOCK if kind == "fp8_blockwise" else FP8_TENSOR
    return max(2 * m * n * k / (peak * share), ((m * k + k * n) * size + m * n * 2) / HBM)


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


# ---------------------------------------------------------------- what chapter 14 quotes
def _pct(x):
    return f"{round(100 * x)}"


def quoted_numbers() -> dict:
    """Each number chapter 14's "On real hardware" quotes, recomputed from the stored run and the planner."""
    run = H.stored_run()
    big = {k: [p for m in H.MODELS for p in H.layer_curve(m, k) if p.m >= 4096]
           for k in ("bf16", "fp8_tensorwise", "fp8_blockwise")}
    lo = {k: min(p.ratio for p in v) for k, v in big.items()}
    hi = {k: max(p.ratio for p in v) for k, v in big.items()}
    best = H.best_share("bf16")
    small = next(p for p in H.layer_curve("llama3-8b", "bf16") if p.m == 256)
    c = H.block_comparison("8b s4096")
    squares = {t.timing.m: t.timing.tflops for t in H.gemm_table("bf16", square=True)}
    fp8_planner = H.peak("fp8_tensorwise") * K.FP8_GEMM_CEILING["h200"]
    return {
        "ceiling": f"{100 * K.GEMM_CEILING['h200']:.1f}%",
        "bf16 planner": f"{2 * 8192 ** 3 / H.predicted_seconds(8192, 8192, 8192) / 1e12:.0f}",
        "best bf16": f"{best.timing.tflops:.0f}", "best share": f"{100 * best.share:.1f}%",
        "bf16 layers": f"{_pct(lo['bf16'])}–{_pct(hi['bf16'])}%",
        "8b at 256": f"{small.measured_tflops:.0f}", "8b at 256 share": _pct(small.ratio) + "%",
        "fp8 planner": f"{fp8_planner / 1e12:,.0f}",
        "fp8 tensor layers": f"{_pct(lo['fp8_tensorwise'])}–{_pct(hi['fp8_tensorwise'])}%",
        "fp8 block layers": f"{_pct(lo['fp8_blockwise'])}–{_pct(hi['fp8_blockwise'])}%",
        "measured bytes": f"{c.measured_bytes:,}", "formula bytes": f"{c.planner_bytes:,}",
        "difference": f"{c.measured_bytes - c.planner_bytes:,}", "rstd each": f"2 × {c.rstd_bytes // 2:,}",
        "state": f"{c.kernel_state_bytes}", "rounding": f"{c.allocator_rounding_bytes:,}",
        "cudnn state": f"{H.block_comparison('8b s4096 default backend').kernel_state_bytes}",
        "sweep": f"{json_value('gemm_seconds')}", "layers time": f"{json_value('block_seconds')}",
        "square 4096": f"{squares[4096]:.0f}", "square 8192": f"{squares[8192]:.0f}",
        "date": run.date[:10], "torch": run.torch.split("+")[0], "cuda": run.cuda,
    }


def json_value(key):
    import json

    with open(H.PATH, encoding="utf-8") as f:
        return json.load(f)[key]


QUOTED = {"ceiling": "80.1%", "bf16 planner": "792", "best bf16": "808", "best share": "81.7%", "bf16 layers": "86–91%",
          "8b at 256": "370", "8b at 256 share": "47%", "fp8 planner": "1,453", "fp8 tensor layers": "78–94%",
          "fp8 block layers": "69–80%",
          "measured bytes": "688,422,936", "formula bytes": "688,390,144", "difference": "32,792",
          "rstd each": "2 × 16,384", "state": "24", "rounding": "1,000", "cudnn state": "16", "sweep": "13.4",
          "layers time": "6.6", "square 4096": "778", "square 8192": "700", "date": "2026-12-04", "torch": "2.11.0",
          "cuda": "13.0"}


def test_the_numbers_chapter_14_quotes_are_the_stored_runs():
    assert quoted_numbers() == QUOTED


def test_a_broken_ceiling_changes_the_quoted_numbers(monkeypatch):
    real = K._gemm_seconds
    monkeypatch.setattr(K, "_gemm_seconds", lambda g, peak, ceiling, bw, i, o: real(g, peak, 0.9, bw, i, o))
    assert quoted_numbers() != QUOTED


def test_the_kernel_that_ran_is_read_from_its_saved_tensors():
    """Forced FlashAttention left a (b, a, s) log-sum-exp and uint64 rng_state (2,) + unused (); PyTorch's own
    choice left cuDNN's (b, a, s, 1) log-sum-exp and two int64 philox scalars; selective recomputation kept none."""
    for name in H.block_names():
        c = H.block_comparison(name)
        want = ("cudnn" if c.run.backend == "default" else "recomputed" if c.run.recompute == "selective"
                else "flash")
        assert c.attention_kernel == want, name


def test_the_allocator_grew_by_the_saved_bytes():
    """allocator growth = saved − the block's input (saved, but allocated before) + its output + rounding of each
    saved storage up to 512 bytes: exact for every block."""
    for name in H.block_names():
        c = H.block_comparison(name)
        assert c.run.allocated_bytes == c.expected_allocated_bytes + c.allocator_rounding_bytes, name


def test_chapter_14_quotes_them_in_both_languages():
    """The section in notebooks/14_planning.md (pasted from the issue-38 section file) quotes each number in its
    English and its Chinese cells."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).parents[1] / "notebooks" / "14_planning.md").read_text(encoding="utf-8")
    start = text.find("**On real hardware.**")
    if start < 0:
        pytest.skip("chapter 14 does not have the 'On real hardware' section yet")
    end = text.find("## Step 5", start)
    section = re.sub(r"```.*?```", "", text[text.rfind("+++", 0, start):end], flags=re.S)   # prose only
    cells = re.split(r'\+\+\+ \{"tags": \["lang-(en|zh)"\]\}', section)
    en = " ".join(cells[i + 1] for i in range(1, len(cells) - 1, 2) if cells[i] == "en")
    zh = " ".join(cells[i + 1] for i in range(1, len(cells) - 1, 2) if cells[i] == "zh")
    for key, value in QUOTED.items():
        assert value in en, (key, value, "en")
        assert value in zh, (key, value, "zh")


def test_the_asides_claims():
    """The aside: in the roofline only Llama 3 8B's attention output at 256 tokens is memory-bound among the bf16
    shapes; fast accumulation is a few percent faster in the median (per-tensor FP8); every FP8 kind ran."""
    bound = [c.timing for c in H.gemm_table("bf16") + H.gemm_table("bf16", square=True)
             if c.predicted_seconds > 2 * c.timing.m * c.timing.n * c.timing.k / (PEAK_BF16 * CEILING) * (1 + 1e-9)]
    assert [(t.model, t.name, t.m) for t in bound] == [("llama3-8b", "attention out", 256)]
    default = {(c.timing.model, c.timing.name, c.timing.m): c.timing.seconds for c in H.gemm_table("fp8_tensorwise")}
    fast = {(c.timing.model, c.timing.name, c.timing.m): c.timing.seconds for c in H.gemm_table("fp8_tensorwise_fast")}
    ratios = sorted(default[key] / fast[key] for key in default)
    assert 1.0 < ratios[len(ratios) // 2] < 1.06
    assert H.failed_kinds() == {}

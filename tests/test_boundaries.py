"""Nothing a student types can crash, hang or fool the course (issue 33): a property run over every public function
of the simulation and calculator modules and over every explorer's ``compute``.

For each function the test first makes a valid call: defaults, plus a small table of valid examples by parameter
name (a model preset, a GPU …), or, for a function whose parameters are arrays, tensors, modules or records, the
call written out in tests/boundary_examples.py. Then, one parameter at a time, it passes values a student might type
by mistake, chosen from the parameter's annotation or default: for an int ``-1``, ``2.5``, ``True``, ``"8"``,
``None``, ``nan`` and ``10**12``; for a float ``nan``, ``inf``, ``-1.0``, ``"x"``, ``None``; for a bool ``"False"``,
``2``, ``None``; for a string ``"nope"``, ``None`` and ``3``. A call passes when it

- raises the course's own :class:`distlearn.core.validate.DistlearnValueError` (an explorer may also return
  ``{"error": …}``, which it shows in place of the plot), or
- returns in time, for values that can be valid (``10**12`` GPUs in a closed form, a negative offset …) — never for
  a value of the wrong type, ``nan`` or ``inf``, ``None`` where the annotation does not allow it, or a string
  for a bool: those must be refused.

It fails on any other exception (a raw ``ZeroDivisionError``, ``KeyError``, ``TypeError`` …), on a call that runs
longer than :data:`LIMIT` seconds (stopped by a timer signal: the work is Python code, so it can be interrupted), and
on an invalid value silently accepted. Skipped, with the reason: labs (they start processes), plots, checkers (the
sandbox has its own tests), seed reproductions (they reproduce the seed's code, mistakes included), the language and
launch helpers, and the planner's inner arithmetic (:data:`INNER`).

Measured (2026-12-04, second run): 347 public functions, every one with a valid call (242 of them written out in
tests/boundary_examples.py, the rest from defaults and the table by parameter name), 5,517 calls; the 16
explorers' ``compute`` take 634 calls. 0 raw exceptions, 0 hangs, 0 invalid values accepted (the first run over all 347 found 765
problems in 82 functions; each was fixed at the function's boundary). About 35 s with two workers on 2 cores.
Third run (issue 33, items 2–5): 351 functions (the bubble functions are no longer inner arithmetic; 244 written
out), 5,569 scalar calls and 634 explorer calls, 0 problems. The array, record and function arguments of the
written-out calls (184 functions) now get bad values of their kind too (:func:`structured_bad_values`): 1,304
calls; the first run found 941 problems; chapter 10's attention and merge functions, chapter 02's ring and NCCL
average, the α-β fits, estimate_memory and count_parameters were fixed at their boundaries (135), and the 806
left were listed in tests/boundary_known_problems.txt, a list that could only shrink (now empty and removed). About
15 s with two workers on an idle machine.
Fourth run: the planner's formulas (Setting and Plan tested inline at entry, ``type(st) is Setting``: the search
keeps its speed), tensor_parallel.simulation and precision check their records, arrays (named axes that must agree
across parameters) and streams with :func:`distlearn.core.validate.checks`, then core.moe.route, DeepSpeed's helpers
and goodput.simulate_run: 1,308 calls, 586 fixed, 220 left.
Fifth run: overlap_prefetch.timeline, pipeline_parallel.schedules, data_parallel, nd_parallel, zero_fsdp and experts
simulations check their arrays and records at the boundary (the references that chapters 06 and 11 print are
wrapped after their definitions); DeepSpeed's own AssertionError for ``validate_config({})`` is an expected
engine error (:data:`ENGINE_ERRORS`): 0 problems left, and tests/boundary_known_problems.txt is gone.
"""
from __future__ import annotations

import importlib
import inspect
import math
import pkgutil
import signal
from dataclasses import dataclass

import pytest

import distlearn
from distlearn.core.validate import DistlearnValueError

from boundary_examples import CALLS

LIMIT = 30.0  # seconds per call: a hang, not a slow first import of torch on a busy machine (10 s failed at load 14)
SKIPPED_MODULES = {
    # by the last part of the module name: what they are, and why the property run leaves them out
    "lab": "real multi-process labs (start processes)", "plots": "drawing", "check": "exercise checkers (sandbox tests)",
    "explorer": "widgets (their compute() is tested below)", "measure": "measures real modules on torch",
    "__main__": "command line (tests/test_planner.py)", "launch": "starts processes", "sandbox": "the checker sandbox",
    "language": "the language switch widget", "current_language": "language state", "i18n": "text rendering",
    "env": "environment report", "cli": "argparse helpers", "comments": "authoring", "validate": "the validators",
    "guard": "the guard on the course's constants (tests/test_guard.py)",
}
SKIPPED_PACKAGES = ("distlearn.seeds",)  # the seed code's own functions, mistakes included
# The planner's inner arithmetic: called thousands of times per search with values that evaluate() and search()
# validated once at their boundary (issue 31: validate once, keep inner loops arithmetic).
INNER = {"distlearn.planning.memory": {"interleaved_inflight", "peak_microbatches"},
         "distlearn.planning.flops": {"matmul_params_per_layer", "attention_core_flops", "model_counts"},
         "distlearn.planning.kernels": {"layer_gemms"},
         "distlearn.planning.plan_search": {"balanced_stages", "candidate_groups", "candidate_plans",
                                            "no_layout_message", "suggest_fix"}}
SCALAR = {"int", "float", "bool", "str", "int | None", "float | None", "str | None", "bool | None", "int | float",
          "float | int", "float | None", "bool | str", "str | bool"}


def _valid_examples() -> dict:
    """Valid values by parameter name, for parameters without a default."""
    from distlearn.core.hardware import make_cluster
    from distlearn.core.models import get_preset

    model = get_preset("llama3-8b")
    return {"model": model, "config": model, "gpu": "h100-80gb", "cluster": make_cluster("h100-80gb", 8),
            "model_name": "llama3-8b", "preset": "llama3-8b", "name": "llama3-8b",
            # scalars without a default: a small valid value of each name (the call must succeed with them)
            "seq_len": 2048, "world_size": 4, "num_params": 1_000_000, "tp": 2, "dp": 2, "pp": 2, "cp": 2,
            "ep": 2, "stage": 0, "rank": 0, "zero_stage": 1, "micro_batch_size": 1, "num_microbatches": 8,
            "num_layers": 8, "hidden_size": 1024, "num_heads": 16, "num_kv_heads": 8, "ffn_hidden_size": 4096,
            "num_stages": 4, "num_tokens": 64, "num_experts": 8, "k": 2, "tokens": 64, "channels": 64, "size": 64,
            "n": 8, "nbytes": 1_000_000, "seconds": 1e-3, "bandwidth": 1e10, "alpha": 1e-5, "mtbf": 10.0,
            "interval": 1.0, "checkpoint_time": 0.1, "restart_time": 0.1, "delta": 0.1, "m": 10.0,
            "num_units": 8, "failures_per_unit_day": 1e-3, "global_batch": 64, "global_batch_size": 64,
            "batch_size": 8, "num_samples": 64, "capacity_factor": 1.25, "num_chunks": 2, "schedule": "1f1b",
            "precision": "mixed", "optimizer": "adam", "dtype_bytes": 2, "bucket_cap_mb": 25.0, "x": 0.5,
            "compute": 1.0, "comm": 0.5, "forward": 1.0, "backward": 2.0, "steps": 10, "epoch": 0,
            "memory_bytes": 80e9, "unsharded_bytes": 1_000_000, "tokens_per_gpu": 4096, "tokens_per_rank": 4096,
            "total_params": 1_000_000, "layer": 0, "layers": 8, "value": 1.0, "scale": 1.0, "amax": 1.0}


def public_functions() -> list[tuple[str, str]]:
    """``(module, function)`` for every public function the property run covers."""
    out = []
    for info in pkgutil.walk_packages(distlearn.__path__, "distlearn."):
        last = info.name.rsplit(".", 1)[-1]
        if info.ispkg or info.name.startswith(SKIPPED_PACKAGES) or any(
                last == s or last.startswith(s + "_") or last.endswith("_" + s) for s in SKIPPED_MODULES):
            continue
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if name in INNER.get(info.name, ()):
                continue
            if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == info.name:
                out.append((info.name, name))
    return out


def _annotation(p: inspect.Parameter) -> str:
    a = p.annotation
    return (a if isinstance(a, str) else getattr(a, "__name__", str(a))).replace("'", "").strip()


def _kind(p: inspect.Parameter) -> str | None:
    """``"int"``, ``"float"``, ``"bool"`` or ``"str"`` for a scalar parameter (from the annotation, else the
    default's type), None otherwise."""
    ann = _annotation(p)
    for kind in ("bool", "int", "float", "str"):
        if ann in (kind, f"{kind} | None"):
            return kind
    if ann in ("int | float", "float | int"):
        return "float"
    if p.annotation is p.empty and p.default is not p.empty and p.default is not None:
        t = type(p.default)
        return {bool: "bool", int: "int", float: "float", str: "str"}.get(t)
    return None


def bad_values(kind: str) -> list[tuple[object, bool]]:
    """``(value, always_invalid)`` a student might type for a parameter of ``kind``."""
    return {
        "int": [(-1, False), (0, False), (2.5, True), (True, True), ("8", True), (None, True), (math.nan, True),
                (10 ** 12, False)],
        "float": [(math.nan, True), (math.inf, False), (-1.0, False), ("x", True), (None, True)],
        "bool": [("False", True), (2, True), (None, True)],
        "str": [("nope", False), (None, True), (3, True)],
    }[kind]


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout


@dataclass
class Result:
    how: str     # "refused", "returned", "raw", "hang"
    detail: str = ""
    origin: str = ""  # for "raw": the file of the innermost frame that raised


def call(fn, kwargs: dict) -> Result:
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT)
    kwargs = dict(kwargs)
    args = kwargs.pop("*", ())
    try:
        out = fn(*args, **kwargs)
        if isinstance(out, dict) and "error" in out:
            return Result("refused", "explorer error")
        return Result("returned")
    except DistlearnValueError:
        return Result("refused")
    except _Timeout:
        return Result("hang", f"> {LIMIT} s")
    except Exception as e:  # noqa: BLE001 — what the test is looking for
        tb = e.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        origin = tb.tb_frame.f_code.co_filename if tb is not None else ""
        return Result("raw", f"{type(e).__name__}: {str(e)[:120]}", origin)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _allows_none(p: inspect.Parameter) -> bool:
    return "None" in _annotation(p) or p.default is None


def probe(fn) -> tuple[list[str], int, str | None]:
    """(problems, number of calls, why skipped or None) for one function."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], 0, "no signature"
    examples = _valid_examples()
    built = CALLS.get(f"{fn.__module__}.{fn.__name__}")
    base, scalars = {}, []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if built is None and p.default is p.empty:
            if p.name in examples:
                base[p.name] = examples[p.name]
            else:
                return [], 0, f"required parameter {p.name!r} has no example"
        kind = _kind(p)
        if kind:
            scalars.append((p, kind))
    fresh = (lambda: built()) if built else (lambda: base)  # a fresh call each time: some functions change their input
    first = call(fn, fresh())
    if first.how != "returned":
        return [], 1, f"no valid call with the defaults ({first.how} {first.detail})"
    problems, calls = [], 1
    for p, kind in scalars:
        for value, invalid in bad_values(kind):
            if value is None and _allows_none(p):
                continue
            if kind == "str" and value == "nope" and not isinstance(p.default, str):
                continue
            r = call(fn, {**fresh(), p.name: value})
            calls += 1
            where = f"{fn.__module__}.{fn.__name__}({p.name}={value!r})"
            if r.how in ("raw", "hang") or (r.how == "returned" and invalid):
                problems.append(f"{where}: {r.how if r.how != 'returned' else 'silently accepted'} {r.detail}")
    return problems, calls, None


# ------------------------------------------------------------------ array, record and function parameters
@dataclass(frozen=True)
class OtherRecord:
    """A record of the wrong type: what a student passes when they mix up two records."""
    name: str = "other"
    value: int = 1


def _is_numeric_array(value) -> bool:
    import numpy as np

    if type(value).__module__ == "torch" and hasattr(value, "dtype"):
        return value.dtype.is_floating_point or not value.dtype.is_complex
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "iuf"
    if type(value) in (list, tuple) and value:
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError):
            return False
        return arr.dtype.kind in "iuf"
    return False


def structured_bad_values(value) -> list[tuple[object, bool, str]]:
    """``(bad value, always_invalid, what)`` of the kind of a valid array, record, function or collection argument
    ``value``: ``None``, a string and (records) a record of another type are never valid; an empty array and a wrong
    shape may be (a function of any shape), so only a raw exception or a hang is a problem there; a NaN in a float
    array is never valid unless the function's job is to find it (:data:`NAN_ALLOWED`)."""
    import numpy as np

    out = [(None, True, "None"), ("abc", True, "a string")]
    if _is_numeric_array(value):
        torch_value = type(value).__module__ == "torch"
        arr = value.detach().cpu().numpy() if torch_value else np.asarray(value)
        back = (lambda a: __import__("torch").as_tensor(a, dtype=value.dtype)) if torch_value else (
            (lambda a: a) if isinstance(value, np.ndarray) else (lambda a: a.tolist()))
        out.append((back(np.zeros((0,) * max(arr.ndim, 1), dtype=arr.dtype)), False, "an empty array"))
        if arr.dtype.kind == "f" and arr.size:
            with_nan = arr.copy()
            with_nan.flat[0] = np.nan
            out.append((back(with_nan), True, "an array holding NaN"))
        if arr.ndim >= 2:
            out.append((back(arr.reshape(-1)), True, f"a 1-D array instead of shape {arr.shape}"))
        elif arr.ndim == 1 and arr.size > 1:
            out.append((back(arr.reshape(1, -1)), False, f"a 2-D array instead of shape {arr.shape}"))
        return out
    if callable(value) and not isinstance(value, type):
        return out + [(OtherRecord(), True, "a record instead of a function")]
    if type(value) in (list, tuple):
        return out + [(type(value)(), False, "an empty collection")] + (
            [([OtherRecord()] * len(value), True, "records of the wrong type")] if value else [])
    if isinstance(value, dict):
        return out + [({}, False, "an empty dict")]
    if isinstance(value, (str, bytes, bool, int, float)) or value is None:
        return []
    return out + [(OtherRecord(), True, "a record of the wrong type")]


# (function, parameter) whose job includes NaN (finding an overflow) or whose array may have any shape
NAN_ALLOWED = {  # a collective moves whatever the ranks hold: NaN propagates, as in NCCL
    ("distlearn.core.comm.nccl_average", "arrays"), ("distlearn.core.comm.reference_ring_all_reduce", "arrays")}
ANY_SHAPE = {  # one array per rank along the first axis, of any shape
    ("distlearn.core.comm.nccl_average", "arrays"), ("distlearn.core.comm.reference_ring_all_reduce", "arrays"),
    # a weight (d_in, d_out) or a bias (d_out,): both are split by columns
    ("distlearn.tensor_parallel.simulation.shard_columns", "w"),
    ("distlearn.precision.scaling.quantize_tensorwise", "x"),  # one scale for a tensor of any shape
    # (N, ...): N samples' gradients of any shape; a 1-D array is N gradients of a scalar parameter
    ("distlearn.data_parallel.simulation.ddp_gradient", "per_sample_grads")}


# (function, parameter, bad value) where the real engine's own error is the lesson, not a hole in our boundary:
# → (exception type, the package whose code must raise it). Chapter 09 passes DeepSpeed a config it rejects and
# prints DeepSpeed's own AssertionError on purpose (the config's batch sizes must agree); the boundary's job is our
# parameters (config is a dict, dp a world size), and an empty dict is a dict: what is missing in it is for
# DeepSpeed's DeepSpeedConfig to say. The exception must come from DeepSpeed's code, not from ours.
ENGINE_ERRORS = {("distlearn.deepspeed_fsdp.deepspeed.validate_config", "config", "an empty dict"):
                 ("AssertionError", "deepspeed")}


def _engine_error(qual: str, name: str, what: str, r: Result) -> bool:
    """True for a raw exception listed in :data:`ENGINE_ERRORS`, of that type, raised inside that engine's package
    directory."""
    import importlib.util
    import os

    expected = ENGINE_ERRORS.get((qual, name, what))
    if expected is None or r.how != "raw" or not r.detail.startswith(expected[0] + ":"):
        return False
    home = os.path.dirname(importlib.util.find_spec(expected[1]).origin)
    return os.path.realpath(r.origin).startswith(os.path.realpath(home) + os.sep)


def probe_structured(fn) -> tuple[list[str], int]:
    """(problems, calls) for the non-scalar arguments of ``fn``'s written-out call (tests/boundary_examples.py)."""
    qual = f"{fn.__module__}.{fn.__name__}"
    built = CALLS.get(qual)
    if built is None:
        return [], 0
    sig = inspect.signature(fn)
    scalar = {p.name for p in sig.parameters.values() if _kind(p)}
    problems, calls = [], 0
    for name, value in built().items():
        if name == "*" or name in scalar:
            continue
        p = sig.parameters.get(name)
        for bad, invalid, what in structured_bad_values(value):
            if bad is None and p is not None and _allows_none(p):
                continue
            if what == "an array holding NaN" and (qual, name) in NAN_ALLOWED:
                continue
            if what.startswith("a 1-D array") and (qual, name) in ANY_SHAPE:
                invalid = False
            r = call(fn, {**built(), name: bad})
            calls += 1
            if _engine_error(qual, name, what, r):
                continue
            if r.how in ("raw", "hang") or (r.how == "returned" and invalid):
                problems.append(f"{qual}({name}={what}): {r.how if r.how != 'returned' else 'silently accepted'} "
                                f"{r.detail}")
    return problems, calls


@pytest.mark.parametrize("module, name", public_functions(), ids=lambda x: x)
def test_public_function_boundaries(module, name):
    fn = getattr(importlib.import_module(module), name)
    problems, calls, skipped = probe(fn)
    assert not skipped, skipped  # every function has a valid call (test_the_property_run_covers_every_public_function)
    assert not problems, "\n".join(problems)


def test_array_record_and_function_parameters_get_bad_values_of_their_kind():
    """Every array, record, function or collection argument of the written-out calls (tests/boundary_examples.py)
    also receives ``None``, a string, a record of another type, an empty array, an array holding NaN and an array
    of the wrong shape (:func:`structured_bad_values`). A raw exception, a hang or silently accepted nonsense is a
    problem, and there are none: the list of known problems this run started with (941) is empty and gone. The
    one raw exception allowed is the real engine's own lesson (:data:`ENGINE_ERRORS`)."""
    problems, calls = [], 0
    for module, name in public_functions():
        found, n = probe_structured(getattr(importlib.import_module(module), name))
        problems += found
        calls += n
    assert calls > 1200, calls
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


# ------------------------------------------------------------------ explorers
def _explorer_modules() -> list[str]:
    from distlearn.core.explorer import explorer_modules

    return sorted(explorer_modules().values())


@pytest.mark.parametrize("module", _explorer_modules())
def test_explorer_compute_boundaries(module):
    """Every explorer's ``compute`` refuses what a control could never send and a student might type: it raises
    the course's error or returns ``{"error": …}`` (shown in place of the plot), never a raw exception or a hang."""
    fn = importlib.import_module(module).compute
    problems, calls, skipped = probe(fn)
    assert not skipped, skipped
    assert calls > 1 and not problems, "\n".join(problems)


def test_the_property_run_covers_every_public_function():
    """The run is not allowed to shrink quietly: every public function gets a valid call (from its defaults, the
    table of examples by parameter name, or tests/boundary_examples.py) and then its bad values."""
    skipped = []
    for module, name in public_functions():
        _, calls, why = probe(getattr(importlib.import_module(module), name))
        if why is not None:
            skipped.append(f"{module}.{name}: {why}")
    assert len(public_functions()) > 300 and not skipped, "\n".join(skipped)


@pytest.mark.parametrize("args", [["--model", "nope"], ["--gpu", "nope"], ["--precision", "nope"], ["--gpus", "0"],
                                  ["--seq-len", "x"]])
def test_planner_cli_errors_go_to_stderr_with_status_2(args):
    """argparse's convention, for the course's own errors too (they went to stdout before, issue 33)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "distlearn", "plan", *args], capture_output=True, text=True,
                       env={**__import__("os").environ, "DISTLEARN_LANG": "both"}, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "" and r.stderr.strip()
    assert any("\u4e00" <= ch <= "\u9fff" for ch in r.stderr) and "error" in r.stderr.lower() or "usage" in r.stderr


# ------------------------------------------------------------------ issue 33: what a new-user trial found
@pytest.fixture
def both_languages():
    from distlearn.core.current_language import get_language, store

    old = get_language()
    store("both")
    yield
    store(old)


def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _error(result) -> str:
    assert isinstance(result, dict) and "error" in result, result
    return result["error"]


def test_experts_explorer_names_its_own_parameters(both_languages):
    from distlearn.experts import explorer as x

    e = _error(x.compute(k=300))
    assert "experts_per_token" not in e and "k = 300 must be ≤ num_experts = 256" in e and _cjk(e), e
    e = _error(x.compute(num_experts=6, ep=4))
    assert "experts_per_token" not in e, e
    assert "k = 8" in e and "num_experts = 6" in e and "ep = 4" in e and "divide" in e and _cjk(e), e
    assert "error" not in x.compute()


def test_exact_slider_refuses_with_its_real_range(both_languages):
    from distlearn.memory import explorer as m

    for bad in (True, 7, -1):
        e = _error(m.compute(zero_stage=bad))
        assert "zero_stage" in e and "[0, 3]" in e and "192" not in e, e
    assert "error" not in m.compute(zero_stage=3)


def test_data_parallel_explorer_out_of_range_names_the_parameter(both_languages):
    from distlearn.data_parallel import explorer as d

    e = _error(d.compute(world_size=65, batch_size=64))
    assert "world_size" in e and "64" in e and _cjk(e), e
    e = _error(d.compute(world_size=4, batch_size=200))
    assert "batch_size" in e and "128" in e, e


def test_unknown_keyword_is_a_bilingual_course_error(both_languages):
    from distlearn.memory import explorer as m

    e = _error(m.compute(foo=1))
    assert "foo" in e and "zero_stage" in e and "dp" in e and _cjk(e), e
    e = _error(m.compute("llama3-8b", 7, "mixed", "adam", 8, 0, False, False, False, "h100-80gb", 1, 2, 3, 4, 5))
    assert _cjk(e), e


@pytest.mark.parametrize("call", [
    lambda S, X: S.sync_batchnorm([]), lambda S, X: S.sync_batchnorm(None), lambda S, X: S.sync_batchnorm("abc"),
    lambda S, X: S.data_parallel_loss([[1.0, 2.0]] * 8, 3, None),
    lambda S, X: S.data_parallel_loss("abc", 3, lambda a: (float(a.sum()),)),
    lambda S, X: X.route("abc", 1), lambda S, X: X.route([[float("nan")] * 4] * 3, 2),
    lambda S, X: X.aux_loss(None, None), lambda S, X: X.aux_loss([[0.5, 0.5]] * 2, [[0], [5]]),
    lambda S, X: X.MoEWeights.random(10 ** 9, 32, 64), lambda S, X: X.MoEWeights.random(0, 32, 64),
    lambda S, X: X.straggler_factor([]),
    lambda S, X: S.overlap_timeline([1] * 10 ** 7, [1e-6] * 10 ** 7, 8),
], ids=["sbn-empty", "sbn-none", "sbn-str", "dpl-fn-none", "dpl-data-str", "route-str", "route-nan", "aux-none",
        "aux-index", "moe-huge", "moe-zero", "straggler-empty", "overlap-huge"])
def test_array_and_record_arguments_are_checked_at_the_boundary(call, both_languages):
    import time

    from distlearn.data_parallel import simulation as S
    from distlearn.experts import simulation as X

    start = time.perf_counter()
    with pytest.raises(DistlearnValueError) as info:
        call(S, X)
    assert _cjk(str(info.value)) and time.perf_counter() - start < 3, str(info.value)


def test_planning_refuses_a_plan_that_is_not_a_plan_and_a_huge_batch(both_languages):
    from distlearn import planning
    from distlearn.planning import plan_search

    with pytest.raises(DistlearnValueError) as info:
        planning.evaluate("llama3-8b", "dp=8", global_batch=64, seq_len=2048)
    assert "plan" in str(info.value) and _cjk(str(info.value))
    with pytest.raises(DistlearnValueError) as info:
        plan_search.search("llama3-8b", global_batch=10 ** 12, seq_len=2048)
    assert "global_batch" in str(info.value) and "262144" in str(info.value).replace(",", "")


def test_ep_memory_of_a_dense_model_says_it_has_no_experts(both_languages):
    from distlearn.core.models import get_preset
    from distlearn.experts import simulation as X

    with pytest.raises(DistlearnValueError) as info:
        X.ep_model_state_bytes(get_preset("llama3-8b"), dp=8, ep=8)
    assert "mixture-of-experts" in str(info.value) and "got 0" not in str(info.value)

"""The planner's modules (issue 31): one job each, no import cycle and no private name imported across them, a memo
that cannot return another model's entry, and validation once, at the public entry points."""
import ast
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from distlearn import planning as P
from distlearn.core import validate
from distlearn.core.hardware import make_cluster
from distlearn.core.models import get_preset
from distlearn.core.validate import DistlearnValueError
from distlearn.planning.memory import plan_memory
from distlearn.planning.setting import make_setting

PACKAGE = Path(P.__file__).parent
JOBS = ("flops", "setting", "memory", "step_time", "kernels", "evaluation")


def _planning_imports(path: Path) -> list[tuple[str, list[str], bool]]:
    """(module imported from distlearn.planning, names, at module level?) of every such import in ``path``."""
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [a.name for a in node.names]
            if node.module == "distlearn.planning":
                out += [(f"distlearn.planning.{n}", [], id(node) in top) for n in names]
            elif node.module.startswith("distlearn.planning."):
                out.append((node.module, names, id(node) in top))
    return out


def test_formulas_module_is_gone_and_the_jobs_are_modules():
    assert not (PACKAGE / "formulas.py").exists()
    for job in JOBS:
        doc = ast.get_docstring(ast.parse((PACKAGE / f"{job}.py").read_text()))
        assert doc and len(doc) > 100, job


def test_planning_modules_form_no_cycle_and_import_no_private_name():
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "__init__.py":
            continue
        imports = _planning_imports(path)
        private = [(m, n) for m, names, _ in imports for n in names if n.startswith("_")]
        assert not private, (path.name, private)
        inner = [m for m, _, at_top in imports if not at_top]
        assert not inner, (path.name, "imports inside a function", inner)
        graph[path.stem] = {m.rsplit(".", 1)[1] for m, _, _ in imports}

    def reaches(start, goal, seen=()):
        return any(n == goal or (n not in seen and reaches(n, goal, seen + (n,))) for n in graph.get(start, ()))
    cycles = [m for m in graph if reaches(m, m)]
    assert not cycles, cycles
    assert "kernels" in graph["step_time"] and "flops" in graph["kernels"]  # the old formulas ↔ kernels cycle, gone


# ---------------------------------------------------------------- the memo
def test_a_shared_memo_is_keyed_by_the_models_value_not_its_address():
    """A setting built with a shared memo reads another setting's entries only for an equal model: an equal model
    built anew shares them, and a model changed in place (same object, same id(), other values) does not get the
    old entries back."""
    cluster = make_cluster("h100-80gb", 8)
    plan = P.Plan(dp=8, tp=1, pp=1, zero_stage=3, recompute="full", micro_batch_size=1, num_microbatches=8)
    model = get_preset("llama3-8b").with_()  # our own copy: changed in place below
    shared = {}
    before = plan_memory(make_setting(model, cluster, 64, 2048, shared=shared), plan)
    entries = len(shared)
    twin = get_preset("llama3-8b").with_()
    assert twin is not model and plan_memory(make_setting(twin, cluster, 64, 2048, shared=shared), plan) == before
    assert len(shared) == entries  # every entry was found under the twin's value
    address = id(model)
    object.__setattr__(model, "hidden_size", 2048)  # a frozen dataclass changed anyway: the same id, other values
    object.__setattr__(model, "ffn_hidden_size", 7168)
    assert id(model) == address
    same_id = plan_memory(make_setting(model, cluster, 64, 2048, shared=shared), plan)
    own = plan_memory(make_setting(model.with_(), cluster, 64, 2048), plan)  # no shared memo at all
    assert same_id == own and own["total"] < before["total"]


# ---------------------------------------------------------------- validation at the boundary
def _count_checks(monkeypatch, fn) -> list[tuple[str, str, str, str]]:
    """(calling module, calling function, parameter name, check) of every check_* of distlearn.core.validate that
    ``fn()`` runs, in every distlearn module."""
    real = {n: getattr(validate, n) for n in dir(validate) if n.startswith("check_")}
    calls = []

    def counted(name):
        def check(param, *args, **kwargs):
            frame = sys._getframe(1)
            calls.append((frame.f_globals.get("__name__"), frame.f_code.co_name, param, name))
            return real[name](param, *args, **kwargs)
        return check
    for module in [m for n, m in sys.modules.items() if n.startswith("distlearn") and m is not validate]:
        for name, fn_ in real.items():
            if getattr(module, name, None) is fn_:
                monkeypatch.setattr(module, name, counted(name))
    fn()
    monkeypatch.undo()
    return calls


BOUNDARY = {("distlearn.planning.evaluation", f) for f in ("validate_plan_fields", "validate_plan_layout",
                                                           "_check_layout", "_check_expert_parallel",
                                                           "_check_stage_layers", "_check_interleaving")}
BOUNDARY |= {("distlearn.planning.setting", "make_setting"), ("distlearn.planning.setting", "check_plan_fields")}


@pytest.mark.parametrize("plan,batch", [
    (P.Plan(dp=4, tp=2, pp=2, zero_stage=1, recompute="selective", micro_batch_size=1, num_microbatches=8), 32),
    (P.Plan(dp=2, tp=2, pp=16, zero_stage=3, recompute="full", micro_batch_size=2, num_microbatches=64), 256),
    (P.Plan(dp=4, tp=2, pp=8, zero_stage=0, recompute="none", num_microbatches=32, num_chunks=5), 128),
    (P.Plan(dp=4, tp=2, pp=8, zero_stage=2, recompute="norm-act", num_microbatches=32, schedule="zb-h1"), 128),
])
def test_one_evaluate_checks_each_input_once_at_its_boundary(monkeypatch, plan, batch):
    """The planner checks what the reader gave once, in evaluate's boundary (validate_plan_*, make_setting); the
    formulas it then runs (flops, memory, step_time, Setting's methods) check nothing. The other chapters' public
    functions it calls (model states, activations, collective times) check their own arguments, once per memo
    entry: a small number."""
    calls = _count_checks(monkeypatch, lambda: P.evaluate("llama3-70b", plan, global_batch=batch, seq_len=4096,
                                                          gpu="h100-80gb"))
    ours = [c for c in calls if c[0].startswith("distlearn.planning")]
    assert {c[:2] for c in ours} <= BOUNDARY, sorted({c[:2] for c in ours} - BOUNDARY)
    checks = [c[2:] for c in ours]  # (parameter, check): global_batch is both a whole number and divisible by dp·b
    assert len(checks) == len(set(checks)), sorted(c for c in checks if checks.count(c) > 1)  # each input once
    # the other chapters' functions also check their booleans since issue 33: about 100 checks, none repeated per stage
    # (make_setting's grad_sync and causal, issue 38, are two more inputs checked once)
    assert 15 <= len(ours) <= 27 and len(calls) <= 110, (len(ours), len(calls))


def test_the_number_of_checks_does_not_grow_with_the_pipeline(monkeypatch):
    """The same plan on 2 to 16 pipeline stages (8× the micro-batches): the same checks, as many."""
    counts = set()
    for pp in (2, 4, 8, 16):
        dp = 32 // pp
        plan = P.Plan(dp=dp, tp=2, pp=pp, zero_stage=3, recompute="full", num_microbatches=256 // dp)
        calls = _count_checks(monkeypatch, lambda: P.evaluate("llama3-70b", plan, global_batch=256, seq_len=4096,
                                                              gpu="h100-80gb"))
        counts.add(len(calls))
    assert len(counts) == 1 and counts.pop() < 110


def test_the_count_sees_a_check_in_an_inner_formula(monkeypatch):
    """The test above fails when a formula checks its input again: with Setting taking its peaks from the checking
    compute_peak (as before issue 31) instead of the unchecked Peaks.of, the counter sees "precision" checked
    twice, in distlearn.planning.flops."""
    from distlearn.planning import flops, setting

    class CheckingPeaks(flops.Peaks):
        @classmethod
        def of(cls, gpu, precision):
            other = "mixed" if precision in flops.FP8_PRECISIONS else precision
            return cls(flops.compute_peak(gpu, precision), flops.compute_peak(gpu, other))
    monkeypatch.setattr(setting, "Peaks", CheckingPeaks)
    calls = _count_checks(monkeypatch, lambda: P.evaluate("llama3-8b", GOOD, **KW))
    inner = [c for c in calls if c[:2] == ("distlearn.planning.flops", "compute_peak")]
    assert [c[2:] for c in inner] == [("precision", "check_choice")] * 2


GOOD = P.Plan(dp=4, tp=2, pp=2, zero_stage=1, recompute="selective", micro_batch_size=1, num_microbatches=8)
KW = dict(global_batch=32, seq_len=2048, gpu="h100-80gb")
# (what is wrong, the parameter the error names, the start of its English message): recorded before the split; the
# plan's integer fields name their upper bound too since issue 33 (setting.PLAN_RANGES, checked when a Plan is built)
BAD = [
    (dict(plan=dict(dp=0)), "dp", "dp must be an integer in [1, 1048576], got 0."),
    (dict(plan=dict(dp=4.0)), "dp", "dp must be an integer in [1, 1048576], got 4.0 (float)."),
    (dict(plan=dict(cp=0)), "cp", "cp must be an integer in [1, 1048576], got 0."),
    (dict(plan=dict(tp=16, dp=1, num_microbatches=32)), "tp", "tp = 16 is larger than a node (8 GPUs)"),
    (dict(plan=dict(tp=3)), "gpus_per_node", "gpus_per_node = 8 must be divisible by tp = 3."),
    (dict(plan=dict(zero_stage=4)), "zero_stage", "zero_stage must be an integer in [0, 3], got 4."),
    (dict(plan=dict(recompute="bogus")), "recompute", "recompute must be one of"),
    (dict(plan=dict(micro_batch_size=0)), "micro_batch_size", "micro_batch_size must be an integer in [1, 1048576], got 0."),
    (dict(plan=dict(ep=0)), "ep", "ep must be an integer in [1, 1048576], got 0."),
    (dict(plan=dict(ep=2)), "ep", "ep = 2 needs a mixture-of-experts model; llama3-8b is dense"),
    (dict(plan=dict(pp=64, dp=1, tp=1, num_microbatches=32)), "pp", "pp must be an integer in [1, 32], got 64."),
    (dict(plan=dict(num_microbatches=7)), "num_microbatches", "num_microbatches must be global_batch"),
    (dict(plan=dict(schedule="gpipe")), "schedule", "schedule must be one of '1f1b', 'zb-h1'; got 'gpipe'."),
    (dict(plan=dict(schedule="zb-h1", num_chunks=2)), "schedule", "schedule 'zb-h1' needs pp > 1"),
    (dict(plan=dict(num_chunks=3)), "num_layers", "num_layers = 32 must be divisible by pp × num_chunks = 6."),
    (dict(plan=dict(stage_layers=(16, 15))), "stage_layers", "stage_layers must be a tuple of pp = 2"),
    (dict(kw=dict(seq_len=0)), "seq_len", "seq_len must be an integer ≥ 1, got 0."),
    (dict(kw=dict(precision="bogus")), "precision", "precision must be one of 'fp32', 'mixed'"),
    (dict(kw=dict(optimizer="bogus")), "optimizer", "optimizer must be one of 'adam'"),
    (dict(kw=dict(efficiency=2)), "efficiency", "efficiency must be a number in (0, 1], got 2."),
    (dict(kw=dict(fragmentation=0.95)), "fragmentation", "fragmentation must be a number in [0, 0.9], got 0.95."),
    (dict(kw=dict(swiglu="bogus")), "swiglu", "swiglu must be one of 'unfused', 'fused'; got 'bogus'."),
    (dict(kw=dict(precision="te-fp8", gpu="a100-80gb")), "dtype", "a100-80gb has no FP8 tensor cores"),
]


@pytest.mark.parametrize("bad,param,message", BAD, ids=[f"{p}-{i}" for i, (_, p, _) in enumerate(BAD)])
def test_bad_input_still_gives_the_bilingual_error_naming_the_parameter(bad, param, message):
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate("llama3-8b", replace(GOOD, **bad.get("plan", {})), **{**KW, **bad.get("kw", {})})
    assert e.value.param == param
    assert e.value.en.startswith(message), e.value.en
    assert any("\u4e00" <= ch <= "\u9fff" for ch in e.value.zh) and e.value.zh != e.value.en

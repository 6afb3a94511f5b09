"""Issue 38 audit: a run option that changes nothing is named (``step_time.ineffective_options``), and the
commands ``python -m distlearn compare`` and ``python -m distlearn plan`` say so under the run's result.

The proof is exhaustive over small layouts (1–8 GPUs: dp, tp, pp, cp, ep ∈ {1, 2}, ZeRO 0–3) and every combination
of the options: for every option the function calls ineffective, :func:`plan_time` and :func:`plan_memory` are
identical (==, not approx) with and without it; for every kind of option, some layout where it is called effective
changes them. The same check run on a function that calls everything ineffective, or nothing, fails."""
from __future__ import annotations

import dataclasses
import itertools
import json

import pytest

from distlearn.core.hardware import make_cluster
from distlearn.core.models import MOE_PRESETS, get_preset
from distlearn.planning.evaluation import validate_plan
from distlearn.planning.memory import plan_memory
from distlearn.planning.setting import NO_OVERLAP, Overlap, Plan, make_setting
from distlearn.planning.step_time import IneffectiveOption, ineffective_options, plan_time

OPTIONS = ("grad_sync",) + tuple(f.name for f in dataclasses.fields(Overlap))
DEFAULTS = {"grad_sync": "per_step", **dataclasses.asdict(NO_OVERLAP)}
OTHER = {"grad_sync": "per_microbatch", **{k: not v for k, v in dataclasses.asdict(NO_OVERLAP).items()}}
GLOBAL_BATCH, SEQ = 16, 1024

# (model, precision, efficiency): a dense model on the kernel model; an MoE model with DeepSeek-V3's FP8 recipe (the
# FP8 dispatch and the fine-grained ceiling apply); the same on the flat model (no GEMM ceiling at all)
CASES = {"dense": ("llama3-8b", "mixed", None), "moe-fp8": ("mixtral-8x7b", "deepseek-v3", None),
         "moe-fp8-flat": ("mixtral-8x7b", "deepseek-v3", 0.5)}


def _plans(model):
    for dp, tp, pp, cp, ep, zero in itertools.product((1, 2), (1, 2), (1, 2), (1, 2), (1, 2), range(4)):
        if ep > 1 and (not model.is_moe or ep > dp * cp):
            continue
        p = Plan(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero_stage=zero, recompute="selective", micro_batch_size=1,
                 num_microbatches=GLOBAL_BATCH // dp)
        try:
            validate_plan(model, make_cluster("h100-80gb", p.world_size), p, GLOBAL_BATCH, SEQ)
        except Exception:
            continue
        yield p


def _options(on: frozenset) -> dict:
    values = {k: (OTHER[k] if k in on else DEFAULTS[k]) for k in OPTIONS}
    return {"grad_sync": values.pop("grad_sync"), "overlap": Overlap(**values)}


def _table(case: str):
    """{(options set, plan): (setting, time, memory)} over every subset of OPTIONS and every small plan."""
    name, precision, efficiency = CASES[case]
    model = {**MOE_PRESETS}.get(name) or get_preset(name)
    shared, out = {}, {}
    plans = list(_plans(model))
    for n in range(len(OPTIONS) + 1):
        for on in map(frozenset, itertools.combinations(OPTIONS, n)):
            for world in sorted({p.world_size for p in plans}):
                st = make_setting(model, make_cluster("h100-80gb", world), GLOBAL_BATCH, SEQ, precision,
                                  efficiency=efficiency, shared=shared, **_options(on))
                for p in plans:
                    if p.world_size == world:
                        out[on, p] = (st, plan_time(st, p), plan_memory(st, p))
    return out


TABLES = {}


def table(case):
    if case not in TABLES:
        TABLES[case] = _table(case)
    return TABLES[case]


def known_miss(st, p, option) -> bool:
    """The one place where an option the function leaves unnamed changes nothing on these layouts: grad_sync with
    ZeRO-3 on dp·cp = 1 under a recipe that keeps no 16-bit weights (DeepSeek-V3's: ZeRO-3's gathered-layer buffer
    is 0 bytes either way). The function errs only this way, and only here."""
    return option == "grad_sync" and p.zero_stage == 3 and p.dp * p.cp == 1 and st.per["params"] == 0


def problems(fn, cases=tuple(CASES)) -> list[str]:
    """What is wrong with ``fn`` as ineffective_options: an option it calls ineffective that changes the time or
    the memory; an option it names that is not set; an option it leaves unnamed that changes nothing (outside
    :func:`known_miss`); a kind of option never called ineffective, or never shown to change anything where ``fn``
    calls it effective."""
    bad, changes, named_somewhere = [], set(), set()
    for case in cases:
        rows = table(case)
        for (on, p), (st, time, memory) in rows.items():
            named = {r.option: r for r in fn(st, p)}
            named_somewhere |= set(named)
            for option in on:
                _, t0, m0 = rows[on - {option}, p]
                same = time == t0 and memory == m0
                if option in named and not same:
                    bad.append(f"{case}: {option} called ineffective but changes {p.describe()} (on: {sorted(on)})")
                elif option not in named and same and not known_miss(st, p, option):
                    bad.append(f"{case}: {option} changes nothing on {p.describe()} but is not named")
                changes |= {option} if not same and option not in named else set()
            bad += [f"{case}: {o} named but not set" for o in named if o not in on]
    bad += [f"{o}: never called ineffective" for o in OPTIONS if o not in named_somewhere]
    bad += [f"{o}: never called effective where it changes the prediction" for o in OPTIONS if o not in changes]
    return bad


def test_every_option_called_ineffective_changes_nothing_and_every_kind_changes_something_somewhere():
    assert problems(ineffective_options) == []


def _set_options(st):
    """Every option of ``st`` set away from its default (what a function calling everything ineffective names)."""
    values = {"grad_sync": st.grad_sync, **dataclasses.asdict(st.overlap)}
    return [IneffectiveOption(k, v, "", "") for k, v in values.items() if v != DEFAULTS[k]]


@pytest.mark.parametrize("fn", [lambda st, p: _set_options(st), lambda st, p: []], ids=["everything", "nothing"])
def test_the_check_fails_a_function_that_calls_everything_or_nothing_ineffective(fn):
    assert problems(fn)


def test_the_check_fails_a_rule_off_by_one_layout():
    """tp_comm called ineffective up to tp = 2 instead of tp = 1 (a deliberate break): named."""
    def broken(st, p):
        out = [r for r in ineffective_options(st, p) if r.option != "tp_comm"]
        return out + ([IneffectiveOption("tp_comm", True, "", "")] if st.overlap.tp_comm and p.tp <= 2 else [])
    assert any("tp_comm called ineffective" in line for line in problems(broken, ("dense",)))

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


# ---------------------------------------------------------------- the published runs and the two commands
def test_run_setting_is_the_setting_compare_run_evaluates():
    from distlearn.planning.calibration import compare_run, run_setting
    from distlearn.planning.evaluation import estimate
    from distlearn.planning.published_runs import PUBLISHED_RUNS

    for name, run in PUBLISHED_RUNS.items():
        assert estimate(run_setting(run), run["plan"]) == compare_run(run)["estimate"], name


def test_on_every_published_run_an_option_called_ineffective_can_be_dropped_without_a_change():
    """The published layouts themselves (16,384 GPUs, DeepSeek-V3, ...): dropping an option the function names
    leaves the run's estimate identical; the GPT-3 175B row's ddp_impl_local (pp = 16: exposed anyway) is one."""
    from distlearn.planning.calibration import OVERLAP_OPTIONS, compare_run, run_setting
    from distlearn.planning.published_runs import PUBLISHED_RUNS

    key = {field: k for k, field in OVERLAP_OPTIONS.items()} | {"grad_sync": "grad_sync"}
    named = {}
    for name, run in PUBLISHED_RUNS.items():
        for x in ineffective_options(run_setting(run), run["plan"]):
            without = {**run, "options": {k: v for k, v in run["options"].items() if k != key[x.option]}}
            assert compare_run(without)["estimate"] == compare_run(run)["estimate"], (name, x.option)
            named.setdefault(name, []).append(x.option)
    assert named.get("megatron-gpt3-175b") == ["grad_reduce_exposed"], named


def _zh_readable(out, lang):
    from authoring import lang_audit as A

    lines = [line for line in out.splitlines() if line.strip()]
    return [line for line in lines if not A.readable(line, lang)]


def _file(tmp_path, **plan):
    run = json.load(open("examples/private_run.json", encoding="utf-8"))["runs"][0]
    run["plan"].update(plan)
    run["options"] = {"tp_comm_overlap": True, "overlap_param_gather": True, "grad_sync": "per_microbatch"}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_names_each_option_that_changes_nothing_under_the_run(tmp_path, capsys, lang):
    """GPT-3 175B with tp 8 · pp 16 · ZeRO 0: the TP overlap changes the step (no note); the parameter gather (DDP
    gathers nothing) and grad_sync (ZeRO 0) change nothing, and ddp_impl_local is gone; with tp = 1 (dp = 64) the TP
    overlap gets its note too. One line each, in the reader's language."""
    from distlearn.__main__ import main
    from distlearn.core import i18n

    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        assert main(["compare", _file(tmp_path)]) == 0
        out = capsys.readouterr().out
        assert main(["compare", _file(tmp_path, tp=1, dp=64, num_microbatches=24)]) == 0
        tp1 = capsys.readouterr().out
    finally:
        i18n.set_language(old)
    words = {"en": "changes nothing here: ", "zh": "在这里不影响预测："}[lang]
    notes = [line.strip() for line in out.splitlines() if words in line]
    assert [n.split(words)[0] for n in notes] == ["grad_sync = per_microbatch ", "overlap_param_gather = true "]
    assert ("DDP" in notes[1]) and ("ZeRO 0" in notes[0] if lang == "en" else "不用 ZeRO" in notes[0])
    assert "tp_comm_overlap = true " + words in tp1 and ("tp = 1" in tp1)
    assert not _zh_readable(out + tp1, lang)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_plan_command_notes_an_option_that_changes_none_of_the_plans_shown(capsys, lang):
    """llama3-8b on 8 GPUs, batch 64: the best plans are pp = 1, so --overlap grad_reduce changes none of them (the
    planner hides the reduction behind the last backward already); --overlap tp_comm changes some (tp = 2): no
    note. The same notes whichever recomputation modes are searched."""
    from distlearn.core import i18n
    from distlearn.planning.command_line import cli

    args = ["--model", "llama3-8b", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64", "--top", "3",
            "--overlap", "tp_comm,grad_reduce", "--recompute", "none"]
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        assert cli(args) == 0
        out = capsys.readouterr().out
        assert cli(args[:-2]) == 0  # every recomputation mode: the same notes
        again = capsys.readouterr().out
    finally:
        i18n.set_language(old)
    notes = [line for line in out.splitlines() if line.startswith("--")]
    assert len(notes) == 1 and notes[0].startswith("--overlap grad_reduce ") and "pp = 1" in notes[0], out
    assert ("3 plans shown" in notes[0]) if lang == "en" else ("显示的 3 个方案" in notes[0])
    assert [line for line in again.splitlines() if line.startswith("--")] == notes
    assert not _zh_readable(out, lang)


# ---------------------------------------------------------------- the kernel options: swiglu, attention, causal
# each flipped alone from its default (they act on the layer's kernels and saved bytes, apart from the overlaps):
# a Llama and a GPT model on the kernel model and on the flat one, an MoE model under DeepSeek-V3's FP8 recipe, every
# recomputation mode, a sequence of 1,024 tokens and one of a single flash tile
KERNEL_CASES = {"llama": ("llama3-8b", "mixed", None), "llama-flat": ("llama3-8b", "mixed", 0.5),
                "gpt": ("gpt2-small", "mixed", None), "gpt-flat": ("gpt2-small", "mixed", 0.5),
                "moe-fp8": ("mixtral-8x7b", "deepseek-v3", None)}


def _flipped(model, option):
    """The non-default value of a kernel option for ``model``."""
    from distlearn.activation_memory.formulas import default_attention
    return {"swiglu": "fused", "causal": False,
            "attention": "materialised" if default_attention(model) == "flash" else "flash"}[option]


def kernel_problems(fn) -> list[str]:
    """What is wrong with ``fn`` as ineffective_options on the kernel options (the same rules as :func:`problems`)."""
    bad, changes, named_somewhere = [], set(), set()
    for case, (name, precision, efficiency) in KERNEL_CASES.items():
        model = {**MOE_PRESETS}.get(name) or get_preset(name)
        for seq, recompute in itertools.product((1024, 128), ("none", "selective", "norm-act", "full")):
            for p in _plans(model):
                p = dataclasses.replace(p, recompute=recompute)
                cluster = make_cluster("h100-80gb", p.world_size)
                base = make_setting(model, cluster, GLOBAL_BATCH, seq, precision, efficiency=efficiency)
                t0, m0 = plan_time(base, p), plan_memory(base, p)
                for option in ("swiglu", "attention", "causal"):
                    st = make_setting(model, cluster, GLOBAL_BATCH, seq, precision, efficiency=efficiency,
                                      **{option: _flipped(model, option)})
                    same = plan_time(st, p) == t0 and plan_memory(st, p) == m0
                    named = {r.option for r in fn(st, p)}
                    named_somewhere |= named
                    if option in named and not same:
                        bad.append(f"{case}: {option} called ineffective but changes {p.describe()} at s = {seq}")
                    elif option not in named and same:
                        bad.append(f"{case}: {option} changes nothing on {p.describe()} at s = {seq} but is not named")
                    changes |= {option} if not same and option not in named else set()
                    bad += [f"{case}: {o} named but not set" for o in named if o != option]
    bad += [f"{o}: never called ineffective" for o in ("swiglu", "attention", "causal") if o not in named_somewhere]
    bad += [f"{o}: never called effective where it changes the prediction" for o in ("swiglu", "attention", "causal")
            if o not in changes]
    return bad


def test_the_kernel_options_called_ineffective_change_nothing_and_change_something_elsewhere():
    assert kernel_problems(ineffective_options) == []


def test_the_kernel_check_fails_a_rule_that_forgets_the_flat_model():
    """causal called effective on the flat time model (a deliberate break): caught."""
    def broken(st, p):
        return [r for r in ineffective_options(st, p) if not (r.option == "causal" and not st.kernel_model)]
    assert any("causal changes nothing" in line for line in kernel_problems(broken))


# ---------------------------------------------------------------- the model's node-limited routing
def _routing_rows():
    """(plan, named, same): every small MoE layout (dp, tp, ep ∈ {1, 2, 4}) on GPUs in NVLink domains of 2, so an
    ep group of 4 spans two domains, with max_nodes_per_token = 1, 2 and 4 (Mixtral routes each token to 2
    experts); ``named``: the limit called ineffective; ``same``: time and memory identical (==) with the limit and
    without it."""
    base = MOE_PRESETS["mixtral-8x7b"]
    gpu = make_cluster("h100-80gb", 8).gpu.with_(gpus_per_node=2)
    for dp, tp, ep in itertools.product((1, 2, 4), (1, 2), (1, 2, 4)):
        if ep > dp:
            continue
        p = Plan(dp=dp, tp=tp, pp=1, ep=ep, zero_stage=1, recompute="selective", micro_batch_size=1,
                 num_microbatches=GLOBAL_BATCH // dp)
        cluster = make_cluster(gpu, p.world_size)
        st0 = make_setting(base, cluster, GLOBAL_BATCH, SEQ)
        assert "max_nodes_per_token" not in {r.option for r in ineffective_options(st0, p)}
        time0, memory0 = plan_time(st0, p), plan_memory(st0, p)
        for limit in (1, 2, 4):
            st1 = make_setting(dataclasses.replace(base, max_nodes_per_token=limit), cluster, GLOBAL_BATCH, SEQ)
            named = {r.option for r in ineffective_options(st1, p)}
            yield p, "max_nodes_per_token" in named, plan_time(st1, p) == time0 and plan_memory(st1, p) == memory0


def test_max_nodes_per_token_named_only_where_it_changes_nothing():
    """Named without expert parallelism or with the ep group inside one NVLink domain (the direct all-to-all), and
    there it changes nothing; where the group spans domains (ep 4 over domains of 2) it is not named and changes
    the time on some layout. As for every option, the list may leave out a layout where it happens to change
    nothing (a limit that does not bind and a dispatch time that comes out equal), never the other way."""
    rows = list(_routing_rows())
    assert [p.describe() for p, named, same in rows if named and not same] == []
    assert any(named for _, named, _ in rows) and any(not named and not same for _, named, same in rows)


def test_node_limited_dispatch_never_reaches_more_domains_than_experts():
    """A token with k routed experts reaches at most k domains: top-1 routing over two domains sends each token over
    the network at most once, (d − 1)/d of its bytes on average, whatever max_domains allows; with k = 8 and
    DeepSeek-V3's M = 4 the limit M binds."""
    from distlearn.core.topology import dispatch_cost, make_topology

    topo = make_topology("h100-80gb")
    nbytes = 1e9
    one = dispatch_cost(topo, nbytes, 1, 16, 8, 4)
    assert one.seconds == pytest.approx(15 * topo.alpha_network + max(0, (1 / 2) * nbytes / topo.network_bw))
    eight = dispatch_cost(topo, nbytes, 8, 32, 8, 4)
    assert eight.seconds == pytest.approx(31 * topo.alpha_network
                                          + max(8 * 7 / 8 * nbytes / topo.intra_bw, 4 * 3 / 4 * nbytes / topo.network_bw))

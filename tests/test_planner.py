"""Planner (chapter 14): closed forms against independent counts, published runs, the search's exact shortcuts,
bad input, CLI. Speed is measured by ``make bench`` (benchmarks/bench_planner.py), not here."""
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from distlearn import planning as P
from distlearn.seeds import planning as S
from distlearn.core.comm import VirtualCluster
from distlearn.core.hardware import GPUS, Cluster, make_cluster
from distlearn.memory.formulas import activation_bytes_per_layer, model_state_bytes
from distlearn.pipeline_parallel import schedules as pipeline
from distlearn.core.models import PRESETS, get_preset
from distlearn.planning import evaluation as EV, flops as FL, kernels as K, memory as MEM, setting as SET
from distlearn.planning import step_time as STEP
from distlearn.core.validate import DistlearnValueError


# ---------------------------------------------------------------- closed forms vs independent sources
def test_collective_times_come_from_the_topology_module(monkeypatch):
    """The planner's TP and DP communication times are the α-β ring times (distlearn.core.cost's closed forms) of
    groups inside one NVLink domain, taken from distlearn.core.topology (no copy of its own): checked by value,
    then by replacing the topology's function and seeing the planner's times follow."""
    from distlearn.core import cost
    m = PRESETS["llama3-8b"]
    plan = P.Plan(dp=4, tp=2, pp=2, zero_stage=0, recompute="selective", micro_batch_size=1, num_microbatches=8)
    e = P.evaluate(m, plan, global_batch=32, seq_len=2048, gpu="h100-80gb", cluster=make_cluster("h100-80gb", 16))
    g = GPUS["h100-80gb"]
    first_layers = 16  # 32 layers on 2 stages
    shard = (first_layers * m.layer_parameters() + m.embedding_parameters()) / 2
    # ranks: tp innermost, then dp, so the tp × dp = 8 GPUs of a dp group share one node (NVLink)
    # one all-reduce per layer of the stage (a bucket each): 16 × the ring time of 1/16 of the shard
    dp_time = 16 * cost.collective_time("ring_all_reduce", shard * 2 / 16, 4, alpha=P.ALPHA, bandwidth=g.nvlink_bw)
    assert e.time["dp_comm"] == pytest.approx(dp_time, rel=1e-12)  # pp > 1: the all-reduce is fully exposed
    assert dp_time > cost.collective_time("ring_all_reduce", shard * 2, 4, alpha=P.ALPHA, bandwidth=g.nvlink_bw)
    tp_time = cost.collective_time("ring_all_reduce", 2 * 1 * 2048 * m.hidden_size, 2, alpha=P.ALPHA,
                                   bandwidth=g.nvlink_bw)
    assert e.time["tp_comm"] == pytest.approx(8 * first_layers * 4 * tp_time, rel=1e-12)
    from types import SimpleNamespace
    monkeypatch.setattr(SET, "best_collective", SimpleNamespace(unchecked=lambda *a, **k: SimpleNamespace(seconds=1.0)))
    e2 = P.evaluate(m, plan, global_batch=32, seq_len=2048, cluster=make_cluster("h100-80gb", 16))
    assert e2.time["dp_comm"] == 16.0 and e2.time["tp_comm"] == 8 * first_layers * 4 * 1.0


def _gpipe_makespan(p, m, f=1.0, b=2.0):
    """Independent event simulation of GPipe: all forwards, then all backwards, each waiting on its neighbours."""
    F = [[0.0] * m for _ in range(p)]
    for s in range(p):
        for i in range(m):
            F[s][i] = max(F[s - 1][i] if s else 0.0, F[s][i - 1] if i else 0.0) + f
    B = [[0.0] * m for _ in range(p)]
    start = F[p - 1][m - 1]
    for s in reversed(range(p)):
        for i in range(m):
            B[s][i] = max(B[s + 1][i] if s < p - 1 else start, B[s][i - 1] if i else start) + b
    return max(B[0])


@pytest.mark.parametrize("p,m", [(2, 1), (4, 4), (4, 8), (8, 32), (3, 7)])
def test_bubble_ratio_matches_event_simulation(p, m):
    ideal = m * 3.0
    assert (_gpipe_makespan(p, m) - ideal) / ideal == pytest.approx(P.bubble_ratio(p, m))
    assert P.bubble_ratio(p, m, num_chunks=2) == pytest.approx(P.bubble_ratio(p, m) / 2)


@pytest.mark.parametrize("p,m,v", [(2, 1, 1), (4, 4, 1), (8, 3, 1), (8, 32, 1), (4, 8, 2), (4, 4, 4), (8, 16, 2)])
def test_bubble_fraction_is_chapter_05s_idle_share(p, m, v):
    from distlearn.pipeline_parallel import schedules as pipeline
    schedule = "1f1b" if v == 1 else "interleaved-1f1b"
    sim = pipeline.simulate(schedule, p, m, num_chunks=v)
    assert P.bubble_fraction(p, m, v) == pytest.approx(sim.bubble_fraction, rel=1e-12)
    assert P.bubble_fraction(p, m, v) < 1  # a share, unlike the ratio (7 for p = 8, m = 1)
    r = P.bubble_ratio(p, m, v)
    assert P.bubble_fraction(p, m, v) == pytest.approx(r / (1 + r))


@pytest.mark.parametrize("args, name", [((0, 4), "pp"), ((4, 0), "num_microbatches"), ((4, 4, 0), "num_chunks"),
                                        ((-3, 4), "pp"), ((4, 2.5), "num_microbatches"), ((True, 4), "pp"),
                                        (("4", 4), "pp"), ((2 ** 21, 4), "pp"), ((4, 10 ** 12), "num_microbatches"),
                                        ((4, 4, 1025), "num_chunks")])
def test_bubble_functions_refuse_what_is_not_a_pipeline(args, name):
    """bubble_fraction(0, 4) was −0.333 and bubble_ratio(4, 0) a ZeroDivisionError (issue 33): the public functions
    check their arguments; the planner's evaluation uses the unchecked bodies on a plan already checked."""
    for fn in (P.bubble_fraction, P.bubble_ratio):
        with pytest.raises(DistlearnValueError) as info:
            fn(*args)
        assert info.value.param == name
    plan = P.Plan(dp=1, tp=1, pp=4, num_microbatches=8, num_chunks=2)
    assert STEP.plan_bubble(plan) == (P.bubble_fraction(4, 8, 2), P.bubble_ratio(4, 8, 2))
    with pytest.raises(DistlearnValueError):
        STEP.plan_bubble("pp=4")


def test_hardware_flops_with_full_recompute_is_megatron_eq3():
    for model in (P.GPT3_175B_MEGATRON, P.GPT_1T_MEGATRON, PRESETS["gpt2-small"]):
        for batch in (1, 1536):
            assert P.step_flops(model, batch, 2048, "full")["hardware"] == pytest.approx(
                P.megatron_flops(model, batch, 2048), rel=1e-12)


def test_model_flops_near_6ND():
    m = P.GPT3_175B_MEGATRON
    tokens = 1536 * 2048
    ratio = P.step_flops(m, 1536, 2048)["model"] / (6 * m.num_parameters() * tokens)
    assert 1.0 < ratio < 1.05  # the attention scores (s/6h ≈ 2.8 %) are what 6ND leaves out
    f = P.step_flops(m, 8, 2048)
    assert P.step_flops(m, 8, 2048, "selective")["hardware"] > f["model"]
    assert P.step_flops(m, 8, 2048, "full")["hardware"] > P.step_flops(m, 8, 2048, "selective")["hardware"]


# ---------------------------------------------------------------- ZeRO paper Table 2 (model states only)
ZERO_TABLE2 = {1: (2, 7.6, 14.4, 128), 2: (4, 15.2, 28.8, 256), 4: (8, 30.4, 57.6, 512),
               8: (16, 60.8, 115.2, 1024), 16: (32, 121.6, 230.4, 2048)}  # billions; 0.5T, 1T, 2T as 512, ...


@pytest.mark.parametrize("mp", sorted(ZERO_TABLE2))
def test_zero_paper_table2_max_model_sizes(mp):
    v100 = GPUS["v100-32gb"]
    for stage, paper in enumerate(ZERO_TABLE2[mp]):
        psi = P.zero_max_params(v100.memory_bytes, dp=64, zero_stage=stage, mp=mp)
        assert psi / 1e9 == pytest.approx(paper, rel=0.006), (mp, stage)
        # the memory side agrees: model states of Ψ/mp at dp = 64 fill exactly 32 GB
        assert model_state_bytes(int(psi / mp), dp=64, zero_stage=stage).total == pytest.approx(32e9, rel=1e-9)


# ---------------------------------------------------------------- published runs (2021–2024)
# Each run's figures, the calibration of END_TO_END and the out-of-sample score: tests/test_published_runs.py.
def test_every_published_layout_fits_and_llama3_needs_norm_act():
    """Every published run the planner can express fits on its own layout (and DeepSeek-V3). Llama 3 405B fits
    only because its reading recomputes the norms' and the activation's outputs (norm-act): with every tensor stored
    it is over the 80 GB (the chapter says so); with full recomputation it fits but reaches 14 % less MFU (with
    §3.3.2's FP32 gradients). DeepSeek-V3 recomputes them because its report says so (§3.2.3, §3.3.3), and under its
    FP8 recipe (linear inputs cached in FP8, fp8_activation_table) it would fit with every tensor stored too."""
    from dataclasses import replace
    for name in P.PUBLISHED_RUNS:
        if P.PUBLISHED_RUNS[name].get("not_modelled") and name != "deepseek-v3":
            continue
        r = P.compare_published(name)
        if name.startswith("mbridge"):
            # Megatron-Bridge's FP8 recipes (megatron-fp8-cs: FP8 primary weights, BF16 gradients, linear inputs
            # cached in FP8, SwiGLU fused) fit, run by NVIDIA with no recomputation, except the rows that move
            # activations to the CPU (not modelled) and the GB200 405B rows of PP 16 (v0.3.0's layout; interleaved
            # 1F1B's warm-up keeps 130–142 GB of activations on the first stage in the planner): an open gap of the
            # memory model, kept visible here
            run = P.PUBLISHED_RUNS[name]
            offload = "offloads activations" in (run.get("not_modelled") or "")
            big = "gb200-405b" in name and run["plan"].pp == 16
            assert r["fits"] is not (offload or big), (name, r["estimate"].memory["total"])
            assert run["precision"] == "megatron-fp8-cs"
            continue
        assert r["fits"], (name, r["estimate"].memory)
        run = P.PUBLISHED_RUNS[name]
        if name.startswith("llama3") or name == "deepseek-v3":
            assert run["plan"].recompute == "norm-act" and "norm-act" in run["reading"]
            stored = P.evaluate(P.published.run_model(run), replace(run["plan"], recompute="none"),
                                global_batch=run["global_batch"], seq_len=run["seq_len"],
                                cluster=P.published.run_cluster(run), precision=run["precision"],
                                **P.published.run_options(run))
            assert stored.fits is (name == "deepseek-v3"), name
            assert stored.memory["total"] < 1.4 * stored.capacity, name
            assert stored.time["total"] < r["estimate"].time["total"] < 1.01 * stored.time["total"]  # 0.6 % slower
    run = P.PUBLISHED_RUNS["llama3-405b-8k-gpus"]
    e = P.evaluate(run["model"], replace(run["plan"], recompute="full"), global_batch=run["global_batch"],
                   seq_len=run["seq_len"], gpu="h100-80gb", precision=run["precision"],
                   **P.published.run_options(run))
    own = P.compare_published("llama3-405b-8k-gpus")["estimate"]
    # fits, but slower: full recomputation runs one more forward, at most 1/4 of forward + backward + that forward
    # (the forward is 1/3 of forward + backward) and more than the norm-act outputs it replaces
    assert e.fits and 0.10 < 1 - e.mfu / own.mfu < 0.25


def test_the_planners_best_llama3_plan_differs_from_the_published_one_by_its_gradient_sync():
    """Issue 22 asked for the planner's best plan to be at most 10 % faster than each Llama 3 layout. With §3.3.2's
    sharded FP32 gradients (reduce-scattered every micro-batch, grad_sync="per_microbatch") and the search's
    ZeRO-1 (one reduce-scatter per step) the best plan on 16,384 GPUs keeps the published degrees, chunks and
    micro-batches and changes only the ZeRO stage: all its time terms but the data-parallel one are the published
    layout's, so the whole gap is the exposed gradient traffic (about 11 %, outside issue 22's 10 %: chapter 14's
    prose must say so)."""
    from dataclasses import replace
    run = P.PUBLISHED_RUNS["llama3-405b-16k-gpus"]
    res = P.search(run["model"], global_batch=run["global_batch"], seq_len=run["seq_len"],
                   cluster=P.published.run_cluster(run), precision=run["precision"], top=3)
    own = P.compare_published("llama3-405b-16k-gpus")["estimate"]
    best = res.best
    assert best.plan == replace(run["plan"], zero_stage=1) and best.tokens_per_s > own.tokens_per_s
    for term in ("compute", "tp_comm", "cp_comm", "pp_comm", "bubble"):
        assert best.time[term] == pytest.approx(own.time[term], rel=1e-9), term
    assert own.time["total"] - best.time["total"] == pytest.approx(own.time["dp_comm"] - best.time["dp_comm"],
                                                                   rel=1e-9)


def test_a_broken_time_model_fails_the_published_check(monkeypatch):
    """The ±10 % check can fail: with the bubble charged as if there were no interleaving (v times) the Llama 3
    rows leave the band."""
    real = STEP.bubble_share
    monkeypatch.setattr(STEP, "bubble_share", lambda st, p: p.num_chunks * real(st, p))
    assert not P.compare_published("llama3-405b-16k-gpus")["within"]
    monkeypatch.setattr(STEP, "bubble_share", real)
    assert P.compare_published("llama3-405b-16k-gpus")["within"]


def test_search_finds_the_published_175b_layout():
    res = P.search(P.GPT3_175B_MEGATRON, global_batch=1536, seq_len=2048, gpu="a100-80gb", num_gpus=1024)
    layouts = {(e.plan.dp, e.plan.tp, e.plan.pp) for e in res.plans}
    assert (16, 8, 8) in layouts
    assert all(e.fits for e in res.plans)


# ---------------------------------------------------------------- memory accounting
def test_memory_breakdown_matches_hand_count():
    m = PRESETS["llama3-8b"]
    plan = P.Plan(dp=8, tp=1, pp=1, zero_stage=3, recompute="selective", micro_batch_size=2, num_microbatches=4,
                  sequence_parallel=False)
    e = P.evaluate(m, plan, global_batch=64, seq_len=4096, gpu="h100-80gb")
    assert e.memory["params"] == pytest.approx(8_030_261_248 * 2 / 8, rel=1e-9)
    assert e.memory["optimizer"] == pytest.approx(8_030_261_248 * 12 / 8, rel=1e-9)
    s, b, h = 4096, 2, 4096
    # Llama 3 8B with flash attention (GQA 8 of 32 heads, f = 3.5h), selective: 2·sbh·(6 + 2/4 + 14) = 41·sbh per
    # layer, no embedding dropout mask (the old Korthikanti count, 34·sbh + s·b·h, was a GPT block's)
    acts = 32 * s * b * h * 41
    assert e.memory["activations"] == pytest.approx(acts)
    assert e.memory["logits"] == pytest.approx(4 * s * b * h * (1 + m.vocab_size / h))
    assert e.memory["reserve"] == pytest.approx(P.RESERVE_BYTES + P.FRAGMENTATION * 80e9)
    assert e.memory["total"] == pytest.approx(sum(v for k, v in e.memory.items() if k != "total"))


def test_first_stage_holds_p_microbatches_and_interleaving_adds():
    m = P.GPT3_175B_MEGATRON
    kw = dict(global_batch=64, seq_len=2048, gpu="a100-80gb")
    base = dict(dp=1, tp=8, pp=8, recompute="selective", micro_batch_size=1, num_microbatches=64)
    e1 = P.evaluate(m, P.Plan(**base), **kw)
    per = activation_bytes_per_layer(seq_len=2048, micro_batch_size=1, hidden_size=12288, num_heads=96, tp=8,
                                     sequence_parallel=True, recompute="selective")
    mask = 2048 * 12288 / 8
    assert e1.memory["activations"] == pytest.approx((per * 12 + mask) * 8)  # 12 layers × p = 8 micro-batches
    e2 = P.evaluate(m, P.Plan(**base, num_chunks=2), **kw)
    assert e2.memory["activations"] == pytest.approx((per * 12 + mask) * 8 * (1 + 7 / 16))
    assert e2.bubble_ratio == pytest.approx(e1.bubble_ratio / 2)
    assert (e1.bubble_fraction, e2.bubble_fraction) == pytest.approx((7 / 71, 7 / 135))  # (p−1)/(vm+p−1)


def test_zero_divides_by_dp_not_gpus():
    # 8 GPUs all in tensor parallelism: dp = 1, so ZeRO-3 shards over nothing (seed mistake 3)
    m = PRESETS["llama2-13b"]
    e = P.evaluate(m, P.Plan(dp=1, tp=8, pp=1, zero_stage=0, num_microbatches=8), global_batch=8, seq_len=2048,
                   gpu="a100-80gb")
    states = e.memory["params"] + e.memory["grads"] + e.memory["optimizer"]
    assert states == pytest.approx(16 * m.num_parameters() / 8, rel=1e-6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["gpt2-small", "llama2-7b", "llama3-8b", "llama2-13b"]),
       nodes=st.sampled_from([1, 2, 4]), gpu=st.sampled_from(["a100-80gb", "h100-80gb", "h200"]),
       batch=st.sampled_from([8, 24, 64]), seq=st.sampled_from([512, 2048, 4096]))
def test_every_returned_plan_is_valid_and_fits(model, nodes, gpu, batch, seq):
    res = P.search(model, global_batch=batch, seq_len=seq, gpu=gpu, num_gpus=8 * nodes)
    last = float("inf")
    for e in res.plans:
        p = e.plan
        assert p.dp * p.tp * p.pp == 8 * nodes and p.tp <= 8
        assert p.dp * p.micro_batch_size * p.num_microbatches == batch
        assert e.memory["total"] <= e.capacity
        assert 0 < e.mfu < max(K.GEMM_CEILING.values()) * K.END_TO_END + 1e-9
        assert e.tokens_per_s <= last
        last = e.tokens_per_s
        t = e.time
        assert t["total"] == pytest.approx(sum(v for k, v in t.items() if k != "total"))


# ---------------------------------------------------------------- bad input and impossible targets
def _bilingual(exc):
    return any("\u4e00" <= ch <= "\u9fff" for ch in str(exc)) and any(ch.isascii() and ch.isalpha() for ch in str(exc))


def test_bad_inputs_raise_bilingual_errors():
    with pytest.raises(DistlearnValueError) as e:
        make_cluster("h100-80gb", 12)
    assert e.value.param == "num_gpus" and _bilingual(e.value)
    m = PRESETS["llama3-8b"]
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, P.Plan(dp=1, tp=16, pp=1, num_microbatches=8), global_batch=8, seq_len=1024)
    assert e.value.param == "tp" and "node" in str(e.value) and _bilingual(e.value)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, P.Plan(dp=4, tp=2, pp=1, micro_batch_size=2, num_microbatches=1), global_batch=10,
                   seq_len=1024)
    assert e.value.param == "global_batch" and _bilingual(e.value)
    # ZeRO 3 (FSDP) with pipeline parallelism is a plan (torchtitan, Llama 3); stage 4 is not. Reduced every
    # micro-batch it keeps ZeRO-3's buffer; under torch's pipelining (per_step, the default) the stage's weights
    # stay gathered after each backward and its gradients whole: no buffer, 2 bytes x the stage's parameters / tp
    z3 = P.Plan(dp=2, tp=2, pp=2, zero_stage=3, num_microbatches=4)
    assert P.evaluate(m, z3, global_batch=8, seq_len=1024, grad_sync="per_microbatch").memory["zero3_buffer"] > 0
    held = P.evaluate(m, z3, global_batch=8, seq_len=1024).memory
    last_stage = (16 * m.layer_parameters() + m.vocab_size * m.hidden_size + m.hidden_size) / 2  # + output, norm
    assert held["zero3_buffer"] == 0 and held["grads"] == pytest.approx(2 * last_stage, rel=1e-9)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, z3, global_batch=8, seq_len=1024, grad_sync="sometimes")
    assert e.value.param == "grad_sync" and _bilingual(e.value)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, P.Plan(dp=2, tp=2, pp=2, zero_stage=4, num_microbatches=4), global_batch=8, seq_len=1024)
    assert e.value.param == "zero_stage"
    with pytest.raises(DistlearnValueError) as e:  # cp must divide the sequence
        P.evaluate(m, P.Plan(dp=1, tp=2, pp=2, cp=3, num_microbatches=8), global_batch=8, seq_len=1024,
                   cluster=Cluster(GPUS["h100-80gb"].with_(gpus_per_node=4), 3))
    assert e.value.param == "seq_len" and _bilingual(e.value)
    with pytest.raises(DistlearnValueError) as e:  # dp × tp × cp × pp must be the GPU count
        P.evaluate(m, P.Plan(dp=2, tp=2, pp=2, cp=2, num_microbatches=4), global_batch=8, seq_len=1024,
                   gpu="h100-80gb", cluster=make_cluster("h100-80gb", 8))
    assert e.value.param == "dp" and "cp" in str(e.value) and _bilingual(e.value)
    with pytest.raises(DistlearnValueError) as e:  # uneven stages must place every layer once
        P.evaluate(m, P.Plan(dp=4, tp=1, pp=2, num_microbatches=2, stage_layers=(15, 16)), global_batch=8,
                   seq_len=1024)
    assert e.value.param == "stage_layers" and _bilingual(e.value)
    with pytest.raises(DistlearnValueError):
        P.search("gpt-5", global_batch=8, seq_len=1024)
    with pytest.raises(DistlearnValueError):
        P.search("llama3-8b", global_batch=8, seq_len=1024, gpu="tpu-v9")


def test_no_plan_fits_suggests_the_smallest_gpu_count():
    res = P.search("llama3.1-405b", global_batch=64, seq_len=8192, gpu="h100-80gb", num_gpus=16)
    assert not res.plans and "no plan fits" in res.message
    n = res.suggestion["num_gpus"]
    assert n is not None and n % 8 == 0
    assert P.search("llama3.1-405b", global_batch=64, seq_len=8192, gpu="h100-80gb", num_gpus=n).plans
    assert not P.search("llama3.1-405b", global_batch=64, seq_len=8192, gpu="h100-80gb", num_gpus=n - 8,
                        suggest=False).plans
    assert str(n) in res.suggestion["message"] and "块 GPU" in res.suggestion["message"]


def test_no_plan_fits_suggests_a_shorter_sequence():
    kw = dict(global_batch=8, gpu="h200", num_gpus=1)
    res = P.search("llama2-7b", seq_len=32768, **kw)
    assert not res.plans
    s = res.suggestion["seq_len"]
    assert s is not None and 32768 % s == 0
    assert P.search("llama2-7b", seq_len=s, suggest=False, **kw).plans
    assert not P.search("llama2-7b", seq_len=2 * s, suggest=False, **kw).plans


# ---------------------------------------------------------------- seed table
def test_seed_memory_calculator_is_faithful_and_corrected():
    r = S.seed_memory_calculator(7)
    assert r["per_gpu_total_gb"] == pytest.approx(14 + 56 + 14 + 7)  # 2 + 8 + 2 B/param + 0.5 × 2 B "activations"
    assert r["fits_on_80gb"] is False
    assert S.seed_memory_calculator(70, num_gpus=8, sharding="fsdp")["per_gpu_total_gb"] == pytest.approx(175.0)
    assert "91.0GB" in S.seed_memory_table()
    c = S.corrected_memory_row(7, "none", 1)
    assert c["params"] + c["grads"] + c["optimizer"] == pytest.approx(16 * 7e9)  # master weights restored
    c8 = S.corrected_memory_row(7, "fsdp", 8, recompute="full")
    assert c8["params"] + c8["grads"] + c8["optimizer"] == pytest.approx(2 * 7e9)
    assert c8["reserve"] > 0 and c8["fits"]


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_corrected_memory_table_verdicts_are_bilingual_and_match_the_rows(recompute):
    lines = S.corrected_memory_table(recompute).splitlines()[2:]
    assert len(lines) == len(S.SEED_CONFIGS)
    for line, (params, shard, gpus) in zip(lines, S.SEED_CONFIGS):
        fits, any_plan = line.split()[-2:]
        assert fits == ("yes/是" if S.corrected_memory_row(params, shard, gpus, recompute=recompute)["fits"] else "no/否")
        assert any_plan == ("yes/是" if S.planner_row(params, gpus)["fits"] else "no/否")


# ---------------------------------------------------------------- command line
def test_cli_prints_table(capsys):
    rc = P.cli(["--model", "llama3-70b", "--gpus", "64", "--gpu", "h100-80gb", "--seq-len", "8192",
                "--global-batch", "512", "--top", "3"])
    out = capsys.readouterr().out
    assert rc == 0 and "tokens/s" in out and "词元/秒" in out and "MFU" in out
    assert P.cli(["--model", "llama3-8b", "--gpus", "12"]) == 2
    assert "整数个节点" in capsys.readouterr().err
    assert P.cli(["--model", "llama3.1-405b", "--gpus", "8", "--seq-len", "8192", "--global-batch", "8"]) == 1
    assert "no plan fits" in capsys.readouterr().out


def test_cli_through_python_m():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "distlearn", "plan", "--model", "llama3-8b", "--gpus", "8",
                          "--seq-len", "2048", "--global-batch", "64", "--top", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "dp" in out.stdout and "ZeRO" in out.stdout


@pytest.mark.parametrize("arch", ["gpt", "llama"])
def test_forward_flops_equal_pytorch_flop_counter(arch):
    from distlearn.core.models import ModelConfig
    c = ModelConfig("tiny", arch, 96, 64, 2, 4, 256 if arch == "gpt" else 160, 32,
                    num_kv_heads=None if arch == "gpt" else 2)
    got = P.measured_flops(c, 3, 32)
    expected = sum(P.forward_flops(c, 3, 32).values())
    assert got["forward"] == expected
    assert got["backward"] == 2 * expected
    assert P.step_flops(c, 3, 32)["model"] == got["forward"] + got["backward"]


def test_custom_cluster_limits_tp_to_its_node():
    from distlearn.core.hardware import GPU, Cluster
    gpu = GPU("my-gpu", 48e9, 200e12, 100e9, 12.5e9, gpus_per_node=4)
    res = P.search("llama2-7b", global_batch=32, seq_len=2048, cluster=Cluster(gpu, 4))
    assert res.plans and max(e.plan.tp for e in res.plans) <= 4
    assert all(e.capacity == 48e9 for e in res.plans)
    assert P.cli(["--model", "llama3-8b", "--precision", "fp64"]) == 2


def test_format_table_fits_100_columns_in_both_languages():
    res = P.search("llama3-70b", global_batch=512, seq_len=8192, gpu="h100-80gb", num_gpus=64, top=10)
    lines = P.format_table(res.plans).splitlines()
    assert len(lines) == 2 + len(res.plans)
    assert all(P.display_width(line) <= 100 for line in lines)
    assert "重计算" in lines[1] and "recompute" in lines[0]
    # every column right-aligned to the same display width in every row
    assert len({P.display_width(line) for line in lines}) == 1
    assert P.display_width("显存 GB") == 7 and P.display_width("ab") == 2


# ---------------------------------------------------------------- the search's shortcuts change no result
def _brute_force(model, cluster, batch, seq, **kw):
    """Every candidate evaluated, fitting ones ranked by the same stable sort: the search without shortcuts."""
    st = SET.make_setting(model, cluster, batch, seq, **kw)
    fits = []
    for p in P.candidate_plans(model, cluster, batch, seq):
        mem = MEM.plan_memory(st, p)
        if mem["total"] <= st.capacity:
            fits.append(EV.estimate(st, p, mem))
    fits.sort(key=lambda e: (-e.tokens_per_s, e.memory["total"]))
    return fits


def _whole_nodes(gpu: str, num_gpus: int) -> bool:
    """make_cluster's rule: part of one node, or whole nodes (a 72-GPU GB200 NVL72 domain takes 8, 16, 64, not 256)."""
    node = GPUS[gpu].gpus_per_node
    return num_gpus < node or num_gpus % node == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["gpt2-small", "llama2-7b", "llama3-8b", "llama2-70b", "gpt3-175b"]),
       num_gpus=st.sampled_from([1, 2, 4, 8, 16, 32, 64]), gpu=st.sampled_from(sorted(GPUS)),
       batch=st.sampled_from([8, 16, 64, 96, 512]), seq=st.sampled_from([512, 2048, 8192, 32768]),
       top=st.sampled_from([1, 3, 10]))
def test_search_equals_brute_force(model, num_gpus, gpu, batch, seq, top):
    assume(_whole_nodes(gpu, num_gpus))
    m, cluster = PRESETS[model], make_cluster(gpu, num_gpus)
    brute = _brute_force(m, cluster, batch, seq)
    full = P.search(m, global_batch=batch, seq_len=seq, cluster=cluster, suggest=False)
    assert full.plans == brute and full.num_evaluated == sum(1 for _ in P.candidate_plans(m, cluster, batch, seq))
    assert P.search(m, global_batch=batch, seq_len=seq, cluster=cluster, suggest=False, top=top).plans == brute[:top]
    assert P.any_plan_fits(m, cluster, batch, seq) == bool(brute)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["gpt2-small", "llama3-8b", "llama2-70b", "gpt3-175b"]),
       num_gpus=st.sampled_from([8, 16, 64]), gpu=st.sampled_from(["a100-80gb", "h100-80gb", "b200"]),
       batch=st.sampled_from([16, 64, 512]), seq=st.sampled_from([2048, 8192]), top=st.sampled_from([1, 3, 10]),
       grad_sync=st.sampled_from(["per_step", "per_microbatch"]), attention=st.sampled_from([None, "flash",
                                                                                          "materialised"]),
       causal=st.booleans(), overlap=st.sampled_from([None, SET.Overlap(tp_comm=True),
                                                      SET.Overlap(tp_comm=True, grad_reduce=True, param_gather=True),
                                                      SET.Overlap(grad_reduce_exposed=True)]))
def test_search_with_a_runs_options_equals_brute_force(model, num_gpus, gpu, batch, seq, top, grad_sync, attention,
                                                        causal, overlap):
    """search() with the options evaluate() takes (issue 38: a run's gradient sync, attention kernel and overlaps)
    ranks exactly what evaluating every candidate with the same options ranks, with and without ``top`` (the
    pruning bounds stay lower bounds), and any_plan_fits agrees with it."""
    assume(_whole_nodes(gpu, num_gpus))
    m, cluster = PRESETS[model], make_cluster(gpu, num_gpus)
    opts = dict(grad_sync=grad_sync, attention=attention, causal=causal, overlap=overlap)
    brute = _brute_force(m, cluster, batch, seq, **opts)
    kw = dict(global_batch=batch, seq_len=seq, cluster=cluster, suggest=False, **opts)
    assert P.search(m, **kw).plans == brute
    assert P.search(m, top=top, **kw).plans == brute[:top]
    assert P.any_plan_fits(m, cluster, batch, seq, attention=attention, grad_sync=grad_sync) == bool(brute)


def test_search_with_metas_options_times_metas_layout_as_compare_run_does():
    """Searched with the run's own options (FP32 gradients reduce-scattered every micro-batch, Llama 3 §3.3.2), the
    search times Meta's layout for Llama 3 405B on 16,384 H100 exactly as compare_run does; the best plan keeps its
    degrees, chunks and micro-batches at ZeRO-1 (one reduce-scatter per step), faster by the gradient traffic alone.
    With the search's default (per_step) Meta's layout itself is credited the once-per-step reduce-scatter."""
    from dataclasses import replace
    run = P.PUBLISHED_RUNS["llama3-405b-16k-gpus"]
    opts = P.published.run_options(run)
    assert opts.get("grad_sync") == "per_microbatch"
    kw = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], cluster=P.published.run_cluster(run),
              precision=run["precision"], top=10)
    own = P.compare_published("llama3-405b-16k-gpus")["estimate"]
    res = P.search(run["model"], **kw, **opts)
    metas = [e for e in res.plans if e.plan == run["plan"]]
    assert len(metas) == 1 and metas[0].tokens_per_s == pytest.approx(own.tokens_per_s, rel=1e-12)
    assert res.best.plan == replace(run["plan"], zero_stage=1)
    assert res.best.time["total"] - own.time["total"] == pytest.approx(
        res.best.time["dp_comm"] - own.time["dp_comm"], rel=1e-9)
    default = [e for e in P.search(run["model"], **kw).plans if e.plan == run["plan"]]
    assert len(default) == 1 and default[0].tokens_per_s > 1.05 * own.tokens_per_s


def test_search_options_reach_the_suggestion():
    """When nothing fits, the suggestion is computed with the search's memory options: holding gradients whole
    until the step's end (per_step under pipeline parallelism) needs at least as many GPUs as sharding them every
    micro-batch."""
    kw = dict(global_batch=64, seq_len=8192, gpu="h100-80gb", num_gpus=16)
    a = P.search("llama3.1-405b", grad_sync="per_step", **kw)
    b = P.search("llama3.1-405b", grad_sync="per_microbatch", **kw)
    assert not a.plans and not b.plans
    assert a.suggestion["num_gpus"] >= b.suggestion["num_gpus"]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from([("mixtral-8x7b", 1, None), ("mixtral-8x7b", 2, 2), ("deepseek-v3", 8, None),
                             ("deepseek-v3", 2, 4), ("llama3-8b@30", 1, 2), ("llama3.1-405b@126", 1, None)]),
       num_gpus=st.sampled_from([8, 16, 64, 256]), gpu=st.sampled_from(sorted(GPUS)),
       batch=st.sampled_from([16, 64, 256]), seq=st.sampled_from([4096, 16384, 32768]),
       top=st.sampled_from([1, 3, 10]))
def test_search_equals_brute_force_with_experts_cp_and_uneven_stages(case, num_gpus, gpu, batch, seq, top):
    """The shortcuts also change nothing for mixture-of-experts models with ep > 1, a given cp, and layer counts
    that the pipeline splits unevenly (30 and 126 layers), where the bounds, the shared memos and the capped
    activation entries are exercised hardest."""
    from distlearn.core.models import MOE_PRESETS
    name, ep, cp = case
    base, _, layers = name.partition("@")
    m = MOE_PRESETS.get(base) or get_preset(base)
    if layers:
        m = m.with_(num_layers=int(layers))
    assume(_whole_nodes(gpu, num_gpus))
    cluster = make_cluster(gpu, num_gpus)
    stt = SET.make_setting(m, cluster, batch, seq)
    brute = []
    for group in P.candidate_groups(m, cluster, batch, seq, cp, ep):
        for p in group.plans():
            mem = MEM.plan_memory(stt, p)
            if mem["total"] <= stt.capacity:
                brute.append(EV.estimate(stt, p, mem))
    brute.sort(key=lambda e: (-e.tokens_per_s, e.memory["total"]))
    kw = dict(global_batch=batch, seq_len=seq, cluster=cluster, cp=cp, ep=ep, suggest=False)
    assert P.search(m, **kw).plans == brute
    assert P.search(m, top=top, **kw).plans == brute[:top]
    if cp is None and ep == 1:
        assert P.any_plan_fits(m, cluster, batch, seq) == bool(brute)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["gpt2-small", "llama2-13b", "llama3-70b"]), num_gpus=st.sampled_from([4, 8, 32]),
       batch=st.sampled_from([8, 64, 512]), seq=st.sampled_from([512, 4096, 16384]))
def test_smallest_plan_of_each_group_has_the_least_memory(model, num_gpus, batch, seq):
    """The claim the search's memory shortcut rests on: in every (tp, pp, ZeRO, recomputation) group, b = 1 and
    v = 1 need the least memory."""
    m, cluster = PRESETS[model], make_cluster("a100-80gb", num_gpus)
    st_ = SET.make_setting(m, cluster, batch, seq)
    for group in P.candidate_groups(m, cluster, batch, seq):
        for z in group.zero_stages:
            for r in ("none", "selective", "norm-act", "full"):
                least = MEM.plan_memory(st_, group.smallest(z, r))["total"]
                others = [MEM.plan_memory(st_, p)["total"] for p in group.plans(lambda z2, r2: (z2, r2) == (z, r))]
                assert least == pytest.approx(min(others), rel=1e-12)
        # the orderings the search's _kept and any_plan_fits rest on: ZeRO 0 ≥ 1 ≥ 2; none ≥ selective and
        # none ≥ norm-act; of two modes other than full, fewer bytes per layer is less memory
        modes = ("none", "selective", "norm-act", "full")
        mem = {(z, r): MEM.plan_memory(st_, group.smallest(z, r))["total"] for z in group.zero_stages for r in modes}
        per = P.plan_search._per_layer_bytes(st_, group)
        for r in modes:
            chain = [mem[(z, r)] for z in group.zero_stages if z <= 2]
            assert chain == sorted(chain, reverse=True)
        for z in group.zero_stages:
            assert mem[(z, "none")] >= mem[(z, "selective")] and mem[(z, "none")] >= mem[(z, "norm-act")]
            for a in per:
                for b in per:
                    if P.plan_search._keeps_no_more(per[a], per[b]):
                        assert mem[(z, a)] <= mem[(z, b)]
        least = P.plan_search._least_memory_modes(st_, group)
        # flash attention (Llama, or any model with cp > 1): norm-act keeps less than selective; the scores
        # stored (GPT without cp): selective does
        flash = m.arch == "llama" or group.cp > 1
        assert least == (("norm-act", "full") if flash else ("selective", "full"))


# ---------------------------------------------------------------- precision: fp32 runs at the fp32 / TF32 peak
def test_gpu_presets_state_their_fp32_peak():
    for g in GPUS.values():
        assert 0 < g.peak_flops_fp32 < g.peak_flops and "datasheet" in g.source
    assert GPUS["a100-80gb"].peak_flops_fp32 == 156e12      # TF32 dense (312 with sparsity)
    assert GPUS["h100-80gb"].peak_flops_fp32 == 494.5e12    # TF32 989 with sparsity
    assert GPUS["v100-32gb"].peak_flops_fp32 == 15.7e12     # FP32: the V100 has no TF32


def test_fp32_changes_step_time_and_mfu():
    m = PRESETS["llama3-8b"]
    plan = P.Plan(dp=8, tp=1, pp=1, zero_stage=3, recompute="selective", micro_batch_size=1, num_microbatches=8,
                  sequence_parallel=False)
    kw = dict(global_batch=64, seq_len=4096, gpu="h100-80gb")
    flat = dict(kw, efficiency=P.COMPUTE_EFFICIENCY)  # the flat model: every FLOP at the recipe's peak
    g = GPUS["h100-80gb"]
    assert P.evaluate(m, plan, precision="fp32", **flat).time["compute"] == pytest.approx(
        P.evaluate(m, plan, **flat).time["compute"] * g.peak_flops / g.peak_flops_fp32)
    mixed, fp32 = P.evaluate(m, plan, **kw), P.evaluate(m, plan, precision="fp32", **kw)
    # the kernel model: GEMMs at the TF32 peak (half the bf16 one), memory-bound bytes doubled (4-byte values)
    assert 1.5 < fp32.time["compute"] / mixed.time["compute"] <= g.peak_flops / g.peak_flops_fp32 + 1e-9
    assert fp32.compute_peak == g.peak_flops_fp32 and mixed.compute_peak == g.peak_flops
    assert fp32.tokens_per_s < 0.6 * mixed.tokens_per_s and fp32.mfu < 0.6 * mixed.mfu
    assert fp32.memory["params"] == 2 * mixed.memory["params"]  # 4 bytes per weight instead of 2
    # fp32 activations (Llama, selective recomputation with flash attention: no masks, no log-sum-exp kept)
    assert fp32.memory["activations"] == pytest.approx(2 * mixed.memory["activations"], rel=1e-12)
    from distlearn.core.hardware import GPU, Cluster
    custom = Cluster(GPU("my-gpu", 48e9, 200e12, 100e9, 12.5e9, gpus_per_node=8), 1)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, plan, global_batch=64, seq_len=4096, cluster=custom, precision="fp32")
    assert e.value.param == "precision" and _bilingual(e.value)


def test_cli_fp32_prints_slower_steps(capsys):
    args = ["--model", "llama3-8b", "--gpus", "8", "--seq-len", "2048", "--global-batch", "64", "--top", "1"]
    assert P.cli(args) == 0
    mixed = capsys.readouterr().out
    assert P.cli(args + ["--precision", "fp32"]) == 0
    fp32 = capsys.readouterr().out
    first = lambda out: next(line for line in out.splitlines() if line.split()[:1] == ["1"])  # the first plan's row
    step = lambda out: float(first(out).split()[10])  # its "step s" column
    assert step(fp32) > 1.5 * step(mixed)
    assert "494.5 TFLOP/s" in fp32 and "989 TFLOP/s" in mixed


# ---------------------------------------------------------------- table and command line: labels and bad input
def test_bubble_column_shows_the_labelled_idle_share():
    m = P.GPT3_175B_MEGATRON
    e = P.evaluate(m, P.Plan(dp=1, tp=8, pp=8, recompute="full", num_microbatches=1), global_batch=1,
                   seq_len=2048, gpu="a100-80gb")
    assert e.bubble_ratio == 7 and e.bubble_fraction == pytest.approx(7 / 8)
    lines = P.format_table([e]).splitlines()
    assert lines[0].split()[-2] == "bubble" and lines[1].split()[-2] == "气泡率"
    assert lines[2].split()[-2] == "87.5%"  # not 700.0 %
    legend = P.table_legend()
    assert "idle share" in legend and "bubble_fraction" in legend and "空闲占比" in legend
    assert all(P.display_width(line) <= 100 for line in legend.splitlines())


@pytest.mark.parametrize("top", ["-3", "0", "two"])
def test_cli_rejects_top_below_one(capsys, top):
    assert P.cli(["--top", top]) == 2
    err = capsys.readouterr().err
    assert "--top" in err and "≥ 1" in err and "整数" in err and "错误" in err


def test_cli_top_limits_the_rows(capsys):
    assert P.cli(["--model", "llama3-8b", "--gpus", "8", "--seq-len", "2048", "--global-batch", "64",
                  "--top", "2"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"])]
    assert [r.split()[0] for r in rows] == ["1", "2"]


@pytest.mark.parametrize("option,value", [("--gpus", "eight"), ("--seq-len", "4k"), ("--global-batch", "1.5"),
                                          ("--efficiency", "2")])
def test_cli_type_errors_are_bilingual(capsys, option, value):
    assert P.cli([option, value]) == 2
    err = capsys.readouterr().err
    assert option in err and repr(value) in err and _bilingual(err)


def test_no_layout_names_the_real_cause(capsys):
    res = P.search("llama3-8b", global_batch=512, seq_len=4096, gpu="h100-80gb", num_gpus=100000)
    assert res.num_evaluated == 0 and res.suggestion is None
    assert "data-parallel" in res.message and "global batch of 512" in res.message and "数据并行" in res.message
    assert P.cli(["--gpus", "100000"]) == 1
    out = capsys.readouterr().out
    assert "0 of 0" not in out and "no single change" not in out.lower() and "dp" in out and "全局批量" in out
    small = P.search("gpt2-small", global_batch=8, seq_len=1024, gpu="h100-80gb", num_gpus=2048)
    assert "more than the global batch of 8" in small.message and "至少" in small.message


def test_help_describes_plan_and_shows_defaults(capsys):
    from distlearn.__main__ import main
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "plan" in out and "rank them by throughput" in out and "吞吐量" in out
    assert main(["bogus"]) == 2
    assert P.cli(["--help"]) == 0
    out = capsys.readouterr().out
    assert "(default / 默认: 8)" in out and "(default / 默认: llama3-8b)" in out and "(default / 默认: 10)" in out


def test_explorer_explains_why_no_plan_can_be_formed():
    from distlearn.planning import explorer
    r = explorer.compute(model="gpt2-small", num_gpus=2048, global_batch=8)
    assert "global batch of 8" in r["no_fit"] and "全局批量" in r["no_fit"]
    assert "No single change" not in r["no_fit"] and r["num_evaluated"] == 0


# ---------------------------------------------------------------- mixture of experts and expert parallelism
def test_moe_forward_flops_are_the_active_parameters():
    """DeepSeek-V3: the GEMM FLOPs per token are 2 × the parameters a token uses (the model's own count,
    ModelConfig.active_parameters without the embedding; MLA's two latent RMSNorm weights are not matmuls), and
    that is the report's "37B activated parameters" (§1)."""
    from distlearn.core.models import MOE_PRESETS
    d = MOE_PRESETS["deepseek-v3"]
    f = P.forward_flops(d, 2, 4096)
    per_token = (f["layers"] + f["logits"]) / (2 * 2 * 4096)
    norms = d.num_layers * (d.mla.q_lora_rank + d.mla.kv_lora_rank + 2 * d.hidden_size) + d.hidden_size
    assert per_token == pytest.approx(d.active_parameters(include_embedding=False) - norms, rel=1e-12)
    assert per_token / 1e9 == pytest.approx(37, rel=0.02)
    # MLA's attention core: d_qk = 192 and d_v = 128 per head, not 4·s²·h
    assert f["attention"] == 2 * d.num_layers * 2 * 4096 ** 2 * 128 * (192 + 128)


@pytest.mark.parametrize("arch_kw", [dict(num_experts=4, experts_per_token=2),
                                     dict(num_experts=4, experts_per_token=1, num_shared_experts=1,
                                          first_dense_layers=1)])
def test_moe_flops_equal_pytorch_flop_counter(arch_kw):
    """A tiny MoE model built for real: PyTorch's FLOP counter sees exactly k routed (+ shared) experts per token."""
    from distlearn.core.models import ModelConfig
    c = ModelConfig("tiny-moe", "llama", 96, 64, 2, 4, 160, 32, num_kv_heads=2, expert_ffn_hidden_size=48,
                    **arch_kw)
    got = P.measured_flops(c, 3, 32)
    expected = sum(P.forward_flops(c, 3, 32).values())
    assert got["forward"] == pytest.approx(expected, rel=0.01)


def test_expert_parallelism_divides_the_experts_and_pays_all_to_alls():
    from distlearn.core import cost
    from distlearn.core.models import MOE_PRESETS
    mix = MOE_PRESETS["mixtral-8x7b"]
    kw = dict(global_batch=32, seq_len=4096, gpu="h100-80gb")
    base = dict(dp=16, tp=1, pp=1, zero_stage=0, recompute="full", micro_batch_size=1, num_microbatches=2,
                sequence_parallel=False)
    e1 = P.evaluate(mix, P.Plan(**base), **kw)
    e8 = P.evaluate(mix, P.Plan(**base, ep=8), **kw)
    experts = mix.num_layers * mix.num_experts * mix.expert_parameters()
    assert e1.memory["params"] - e8.memory["params"] == pytest.approx(2 * experts * (1 - 1 / 8), rel=1e-6)
    assert e1.time["ep_comm"] == 0
    # per MoE layer: forward dispatch + combine, twice with the recomputed forward, backward two more; each an
    # all-to-all of b·s·k·h 16-bit values per rank over 8 ranks of one node (NVLink)
    g = GPUS["h100-80gb"]
    a2a = cost.collective_time("ring_all_gather", 2 * 4096 * 2 * 4096, 8, alpha=P.ALPHA, bandwidth=g.nvlink_bw)
    assert e8.time["ep_comm"] == pytest.approx(2 * 32 * (2 * 2 + 2) * a2a, rel=1e-12)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate("llama3-8b", P.Plan(**base, ep=2), **kw)
    assert e.value.param == "ep" and _bilingual(e.value)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(mix, P.Plan(**base, ep=16), **kw)  # 8 experts cannot be split 16 ways
    assert e.value.param == "num_experts"


def test_fp8_recipe_runs_linear_gemms_at_the_fp8_peak():
    """FP8: the linear layers' GEMMs at hardware.peak_flops(gpu, "fp8") (1979 TFLOP/s dense on an H100), attention
    and logits at the bf16 peak; the recipe's bytes per parameter (distlearn.precision.fp8_recipes: te-fp8 keeps FP8 weight
    copies on top of bf16 mixed precision)."""
    from distlearn.precision.fp8_recipes import bytes_per_param as recipe_bytes
    from distlearn.core.hardware import peak_flops
    m = PRESETS["llama3-8b"]
    plan = P.Plan(dp=8, tp=1, pp=1, zero_stage=1, recompute="none", micro_batch_size=1, num_microbatches=8,
                  sequence_parallel=False)
    kw = dict(global_batch=64, seq_len=4096, gpu="h100-80gb")
    f = P.forward_flops(m, 8, 4096)
    g = GPUS["h100-80gb"]
    flat = P.evaluate(m, plan, precision="te-fp8", efficiency=0.55, **kw)  # the flat model, by hand
    expect = 3 * (f["layers"] / peak_flops(g, "fp8") + (f["attention"] + f["logits"]) / g.peak_flops) / 0.55
    assert flat.time["compute"] == pytest.approx(expect, rel=1e-9) and flat.compute_peak == 1979e12
    assert flat.time["compute"] < 0.6 * P.evaluate(m, plan, efficiency=0.55, **kw).time["compute"]
    bf16, fp8 = P.evaluate(m, plan, **kw), P.evaluate(m, plan, precision="te-fp8", **kw)
    # the kernel model: only the linear GEMMs change (FP8 peak, 1-byte inputs): the rest is the bf16 plan's
    st16 = SET.make_setting(m, make_cluster("h100-80gb", 8), 64, 4096)
    st8 = SET.make_setting(m, make_cluster("h100-80gb", 8), 64, 4096, precision="te-fp8")
    p16, p8 = STEP.kernel_stage_parts(st16, plan), STEP.kernel_stage_parts(st8, plan)
    assert p8["attention"] == p16["attention"] and p8["elementwise"] == p16["elementwise"]
    # half the time at twice the peak, slowed by FP8's lower measured share (70.9 % against bf16's 80.1 %)
    fp8_slower = K.GEMM_CEILING["h100"] / K.FP8_GEMM_CEILING["h100"]
    assert p8["logits"] == p16["logits"] and p8["gemm"] / p16["gemm"] == pytest.approx(0.5 * fp8_slower, abs=0.01)
    assert fp8.compute_peak == 1979e12 and fp8.time["compute"] < 0.8 * bf16.time["compute"]
    psi = m.num_parameters()
    per = recipe_bytes("te-fp8")
    assert fp8.memory["params"] == pytest.approx(psi * (per["params"] + per["fp8_weights"]), rel=1e-6)
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, plan, precision="te-fp8", global_batch=64, seq_len=4096, gpu="a100-80gb")
    assert e.value.param == "dtype" and _bilingual(e.value)


def test_context_parallel_time_and_memory_by_hand():
    """cp = 2 on Llama 3 8B: activations of s/2 tokens per rank (flash), compute halved, K/V all-gathers per layer
    as distlearn.context_parallel.simulation.cp_comm_bytes counts them, timed by distlearn.core.cost."""
    from distlearn.core import cost
    from distlearn.activation_memory.formulas import config_layer_bytes
    m = PRESETS["llama3-8b"]
    kw = dict(global_batch=8, seq_len=16384, gpu="h100-80gb")
    base = dict(tp=4, pp=1, zero_stage=1, recompute="none", micro_batch_size=1, sequence_parallel=True)
    e1 = P.evaluate(m, P.Plan(dp=2, num_microbatches=4, **base), **kw)
    e2 = P.evaluate(m, P.Plan(dp=1, cp=2, num_microbatches=8, **base), **kw)
    assert e2.time["compute"] == pytest.approx(e1.time["compute"], rel=1e-12)  # 2× the micro-batches, ½ each
    per_layer = config_layer_bytes(m, seq_len=8192, micro_batch_size=1, tp=4, sequence_parallel=True,
                                   attention="flash")
    kv = 2 * 16384 * 8 * 128 / 4 * 2  # gathered K and V of one layer
    assert e2.memory["activations"] == pytest.approx(32 * per_layer + kv, rel=1e-12)
    block = 2 * 8192 * (8 // 4) * 128  # one rank's K/V elements
    g = GPUS["h100-80gb"]
    gather = cost.collective_time("ring_all_gather", 2 * block * 2, 2, alpha=P.ALPHA, bandwidth=g.nvlink_bw)
    scatter = cost.collective_time("ring_reduce_scatter", 2 * block * 4, 2, alpha=P.ALPHA, bandwidth=g.nvlink_bw)
    assert e2.time["cp_comm"] == pytest.approx(8 * 32 * (2 * gather + scatter), rel=1e-12)


def test_llama3_balanced_stages_and_uneven_chunks():
    assert P.balanced_stages(126, 16) == P.LLAMA3_405B_STAGES
    assert P.balanced_stages(64, 16) is None and P.balanced_stages(31, 16) is None  # even, or 15 extra > 14
    run = P.PUBLISHED_RUNS["llama3-405b-16k-gpus"]
    e = P.compare_published("llama3-405b-16k-gpus")["estimate"]
    t_mb = sum(e.time[k] for k in ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm")) / 16
    assert e.time["bubble"] == pytest.approx(15 * (1 / 8) * t_mb, rel=1e-12)  # one-layer chunks of the 8 layers
    # the search now finds plans with these stages (126 = 16 × 7 + 14)
    res = P.search("llama3.1-405b", global_batch=2048, seq_len=8192, gpu="h100-80gb", num_gpus=16384, top=50)
    assert any(e.plan.stage_layers == P.LLAMA3_405B_STAGES for e in res.plans) or all(
        e.plan.pp != 16 for e in res.plans)
    assert run["plan"].stage_layers == P.LLAMA3_405B_STAGES


# ---------------------------------------------------------------- rooflines of parallelism
def test_roofline_thresholds_by_hand():
    from distlearn.planning import rooflines as R
    h100 = GPUS["h100-80gb"]
    C = h100.peak_flops * P.COMPUTE_EFFICIENCY
    assert R.roofline("dp", "h100-80gb").threshold == pytest.approx(C / 50e9)
    assert R.roofline("fsdp", "h100-80gb", link="nvlink").threshold == pytest.approx(C / 450e9)
    assert R.roofline("tp", "h100-80gb", tp=8).threshold == pytest.approx(7 * C / (3 * 450e9))
    m = PRESETS["llama3.1-405b"]
    assert R.roofline("cp", "h100-80gb", model=m).threshold == pytest.approx(C * 8 * 128 / (16384 * 50e9))
    assert R.roofline("ep", "h100-80gb").threshold == pytest.approx(2 * C / (3 * 50e9))
    r = R.roofline("ep", "h100-80gb", value=2048)  # DeepSeek-V3's experts over InfiniBand: far below
    assert r.hidden is False and "专家" in r.quantity
    with pytest.raises(DistlearnValueError) as e:
        R.roofline("cp", "h100-80gb")
    assert e.value.param == "model" and _bilingual(e.value)
    with pytest.raises(DistlearnValueError):
        R.roofline("xp", "h100-80gb")


def _no_latency(monkeypatch):
    monkeypatch.setattr(SET, "ALPHA", 0.0)


def _one_gpu_per_node(n):
    """n H100s, one per node: every ring step and every all-to-all message crosses a NIC, the rooflines' W (with 8
    per node the planner runs a ring per NIC or the hierarchical algorithm, and half an EP 16 group's peers are on
    NVLink: faster than the rooflines' W)."""
    return Cluster(GPUS["h100-80gb"].with_(gpus_per_node=1), n)


@pytest.mark.parametrize("factor,hidden", [(1.3, True), (0.7, False)])
def test_dp_roofline_agrees_with_the_planner(monkeypatch, factor, hidden):
    """Pure data parallelism across 2 nodes (ZeRO 0, one micro-batch): the planner's all-reduce is hidden behind the
    backward exactly when the tokens per GPU exceed the roofline's C/W (within its approximations: 6Ψ per token)."""
    from distlearn.planning import rooflines as R
    _no_latency(monkeypatch)
    m = PRESETS["llama2-7b"]
    tokens = R.roofline("dp", "h100-80gb").threshold * factor
    b = max(1, round(tokens / 512))
    e = P.evaluate(m, P.Plan(dp=16, tp=1, pp=1, zero_stage=0, recompute="none", micro_batch_size=b,
                             num_microbatches=1, sequence_parallel=False), global_batch=16 * b, seq_len=512,
                   cluster=_one_gpu_per_node(16), efficiency=P.COMPUTE_EFFICIENCY)  # C = peak × efficiency
    assert (e.time["dp_comm"] == 0) is hidden


@pytest.mark.parametrize("factor,hidden", [(1.3, True), (0.7, False)])
def test_tp_roofline_agrees_with_the_planner(monkeypatch, factor, hidden):
    """A GPT block with tp = 8: the planner's forward all-reduces take less time than the forward GEMMs exactly when
    h exceeds (t − 1)·C/(3W)."""
    from distlearn.core.models import ModelConfig
    from distlearn.planning import rooflines as R
    _no_latency(monkeypatch)
    h = int(R.roofline("tp", "h100-80gb").threshold * factor) // 512 * 512
    m = ModelConfig("gpt-h", "gpt", 1024, h, 4, h // 64, 4 * h, 128)
    e = P.evaluate(m, P.Plan(dp=1, tp=8, pp=1, recompute="none", micro_batch_size=1, num_microbatches=1),
                   global_batch=1, seq_len=128, gpu="h100-80gb", efficiency=P.COMPUTE_EFFICIENCY)
    f = P.forward_flops(m, 1, 128)
    gemm_forward = f["layers"] / 8 / (GPUS["h100-80gb"].peak_flops * P.COMPUTE_EFFICIENCY)
    assert (e.time["tp_comm"] / 2 <= gemm_forward) is hidden  # 2 of the 4 all-reduces per layer are forward


@pytest.mark.parametrize("factor,hidden", [(1.3, True), (0.7, False)])
def test_ep_roofline_agrees_with_the_planner(monkeypatch, factor, hidden):
    """Experts of width f_e across nodes: the planner's forward all-to-alls take less time than the experts'
    forward GEMMs exactly when f_e exceeds 2C/(3W), whatever the number of tokens."""
    from distlearn.core.models import ModelConfig
    from distlearn.planning import rooflines as R
    _no_latency(monkeypatch)
    f_e = int(R.roofline("ep", "h100-80gb").threshold * factor)
    m = ModelConfig("moe-fe", "llama", 1024, 1024, 2, 8, 1024, 1024, num_experts=16, experts_per_token=2,
                    expert_ffn_hidden_size=f_e)
    e = P.evaluate(m, P.Plan(dp=16, tp=1, pp=1, ep=16, recompute="none", micro_batch_size=1, num_microbatches=1,
                             sequence_parallel=False), global_batch=16, seq_len=1024, cluster=_one_gpu_per_node(16),
                   efficiency=P.COMPUTE_EFFICIENCY)
    experts_forward = 2 * 1024 * 2 * 2 * 3 * 1024 * f_e / (GPUS["h100-80gb"].peak_flops * P.COMPUTE_EFFICIENCY)
    assert (e.time["ep_comm"] / 2 <= experts_forward) is hidden  # forward: dispatch + combine of 4 all-to-alls


def test_tables_show_context_parallelism_and_fit_100_columns():
    res = P.search("llama3.1-405b", global_batch=128, seq_len=131072, gpu="h100-80gb", num_gpus=16384, top=3)
    assert res.plans and all(e.plan.cp > 1 for e in res.plans)  # 128K tokens: the search uses CP
    lines = P.format_table(res.plans).splitlines()
    assert f"8c{res.plans[0].plan.cp}" in lines[2] and all(P.display_width(x) <= 100 for x in lines)
    assert "8c16" in P.table_legend() and "上下文并行" in P.table_legend()
    lines = P.published_table().splitlines()  # its blocks: tests/test_published_runs.py
    assert all(P.display_width(x) <= 100 for x in lines) and "公布值" in lines[1]
    assert [x[:2] for x in lines[-2:]] == ["* ", "* "]  # the converted figures' footnote, in both languages


# ---------------------------------------------------------------- audit of the published figures (chapter 14)
def test_llama3_layouts_shard_gradients_as_the_paper_says():
    """Llama 3 §3.3.2: FSDP shards the optimizer state *and the gradients*, weights are not resharded after
    forward: ZeRO-2 (FSDP's SHARD_GRAD_OP), not ZeRO-1, whose unsharded gradients cost 6.4 GB per GPU here."""
    for name in ("llama3-405b-8k-gpus", "llama3-405b-16k-gpus", "llama3-405b-16k-gpus-cp16"):
        run = P.PUBLISHED_RUNS[name]
        assert run["plan"].zero_stage == 2, name
        kw = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], cluster=P.published.run_cluster(run),
                  precision=run["precision"])
        stage_params = 405.9e9 / (run["plan"].tp * run["plan"].pp)  # ≈ 3.2 G parameters per GPU
        # reduce-scattered every micro-batch: sharded over dp·cp, not 2 bytes × every parameter
        e = P.evaluate(run["model"], run["plan"], grad_sync="per_microbatch", **kw)
        assert e.memory["grads"] < 0.05 * 2 * stage_params
        # torch's pipelining (per_step) holds a middle stage's 8 layers' gradients whole until the last backward
        middle = 8 * run["model"].layer_parameters() / run["plan"].tp
        e = P.evaluate(run["model"], run["plan"], grad_sync="per_step", **kw)
        # §3.3.2's FP32 gradients (mixed-fp32-grads): 4 bytes per parameter, 12.6–13 GB (6.4 GB with bf16)
        assert e.memory["grads"] == pytest.approx(4 * middle, rel=1e-9) and 12.6e9 < 4 * middle < 13e9


def test_deepseek_published_rate_is_the_gpu_hours_figure():
    """DeepSeek-V3 §1 / Table 1: 180K H800 GPU hours per trillion tokens, recomputed here: 1,543.2 tokens/s per
    GPU; the table marks the converted FLOP/s as derived, not published."""
    rate = 1e12 / (180_000 * 3600)
    assert rate == pytest.approx(1543.2, abs=0.05)
    r = P.compare_published("deepseek-v3")
    assert r["published_tokens_per_s"] == pytest.approx(rate * 2048, rel=1e-9)
    assert r["predicted_tokens_per_s"] / 2048 / rate == pytest.approx(r["ratio"], rel=1e-9)
    row = next(line for line in P.published_table().splitlines() if line.startswith("deepseek-v3"))
    assert f"{r['published_flops'] / 1e12:.0f}*" in row and round(r["published_flops"] / 1e12) == 434  # the prose's
    for line in P.published_table().splitlines():  # '*' marks exactly the figures published as a rate or a time
        if line.split() and line.split()[0] in P.PUBLISHED_RUNS:
            assert ("*" in line) == ("published_flops" not in P.PUBLISHED_RUNS[line.split()[0]]), line


def test_published_figures_of_bloom_gpt3_and_megatron_eq3():
    """BLOOM ≈ 150 TFLOP/s (Bekman 2022), GPT-3 175B 138 TFLOP/s on 1024 A100 at batch 1536; Megatron eq. 3 by
    hand for GPT-3 175B: 96·B·s·l·h²·(1 + s/6h + V/16lh)."""
    R = P.PUBLISHED_RUNS
    assert R["bloom-176b"]["published_flops"] == 150e12 and R["bloom-176b"]["plan"].world_size == 384
    g = R["megatron-gpt3-175b"]
    assert (g["published_flops"], g["num_gpus"], g["global_batch"]) == (138e12, 1024, 1536)
    # §5.1's end-to-end estimate for this run uses X = 140 TFLOP/s (34 days for 300 B tokens): within the band too
    predicted = P.compare_published("megatron-gpt3-175b")["predicted_flops"]
    assert abs(predicted / 140e12 - 1) <= P.TOLERANCE
    assert 8 * 300e9 * g["model"].num_parameters() / (1024 * 140e12) / 86400 == pytest.approx(34, abs=0.5)
    B, s, l, h, V = 1536, 2048, 96, 12288, 51200
    assert P.megatron_flops(g["model"], B, s) == pytest.approx(
        96 * B * s * l * h ** 2 * (1 + s / (6 * h) + V / (16 * l * h)), rel=1e-12)
    # 1 T row: 163 TFLOP/s × 3072 GPUs against the 502 PFLOP/s aggregate of Table 1 (502 / 3072 = 163.4: rounded)
    assert R["megatron-gpt-1t"]["published_flops"] * 3072 / 1e15 == pytest.approx(502, abs=1.5)


def test_llama3_128k_row_depends_on_the_attention_convention():
    """Attention is 8 % of the model FLOPs at 8K and 57 % at 128K (non-causal count). The time charges the kernel
    that runs: a causal flash kernel computes (n + 1)/(2n) of the n × n tiles of 128 tokens (n = 1024 at 128K,
    0.50049), so the attention part of the CP 16 row's compute is that share of the non-causal kernel's, exactly;
    the count is a separate convention (step_flops(causal_count=True): half of the scores)."""
    for name, lo, hi in (("llama3-405b-8k-gpus", 0.07, 0.09), ("llama3-405b-16k-gpus-cp16", 0.55, 0.59)):
        run = P.PUBLISHED_RUNS[name]
        f = P.forward_flops(run["model"], 1, run["seq_len"])
        assert lo < f["attention"] / sum(f.values()) < hi
    run = P.PUBLISHED_RUNS["llama3-405b-16k-gpus-cp16"]
    assert K.causal_fraction(131072) == 1025 / 2048 and K.causal_fraction(128) == 1.0
    st = SET.make_setting(run["model"], P.published.run_cluster(run), run["global_batch"], run["seq_len"])
    causal = STEP.kernel_stage_parts(st, run["plan"])
    full = STEP.kernel_stage_parts(SET.make_setting(run["model"], P.published.run_cluster(run), run["global_batch"],
                                                    run["seq_len"], causal=False), run["plan"])
    assert causal["attention"] == pytest.approx(1025 / 2048 * full["attention"], rel=1e-12)
    assert causal["gemm"] == full["gemm"] and causal["elementwise"] == full["elementwise"]
    f = P.forward_flops(run["model"], run["global_batch"], run["seq_len"])
    counted = P.step_flops(run["model"], run["global_batch"], run["seq_len"], causal_count=True)["model"]
    assert counted == pytest.approx(3 * (f["layers"] + f["attention"] / 2 + f["logits"]), rel=1e-12)


def test_cli_rows_are_the_searched_plans(capsys):
    """Every number the command line prints in a row (memory, step time, tokens/s, MFU, bubble, comm) is the searched
    plan's own, in rank order: the table cannot drift from what the tests check."""
    args = dict(global_batch=512, seq_len=8192, gpu="h100-80gb", num_gpus=64)
    assert P.cli(["--model", "llama3-70b", "--gpus", "64", "--gpu", "h100-80gb", "--seq-len", "8192",
                  "--global-batch", "512", "--top", "3"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] in (["1"], ["2"], ["3"])]
    plans = P.search("llama3-70b", top=3, **args).plans
    assert len(rows) == 3
    for row, e in zip(rows, plans):
        p = e.plan
        v = f"{p.num_chunks}zb" if p.schedule == "zb-h1" else str(p.num_chunks)
        assert row[1:9] == [str(p.dp), str(p.tp), str(p.pp), v, str(p.zero_stage), p.recompute,
                            str(p.micro_batch_size), str(p.num_microbatches)]
        used, cap = (float(x) for x in row[9].split("/"))
        assert used == pytest.approx(e.memory["total"] / 1e9, abs=0.05)
        assert cap == pytest.approx(e.capacity / 1e9, abs=0.5)
        assert float(row[10]) == pytest.approx(e.time["total"], abs=0.005)
        assert float(row[11].replace(",", "")) == pytest.approx(e.tokens_per_s, abs=0.5)
        assert float(row[12].rstrip("%")) == pytest.approx(100 * e.mfu, abs=0.05)
        assert float(row[13].rstrip("%")) == pytest.approx(100 * e.bubble_fraction, abs=0.05)
        # MFU by hand: model FLOPs / (step × GPUs × 989e12)
        flops = P.step_flops(PRESETS["llama3-70b"], 512, 8192)["model"]
        assert e.mfu == pytest.approx(flops / (e.time["total"] * 64 * 989e12), rel=1e-12)


def test_pipeline_exercise_hint_does_not_give_the_formula(capsys):
    """Exercise 2's hint points at the bubble ratio without handing over the closed form (m + (p − 1)/v)·t."""
    from distlearn.core.check import CheckFailed
    from distlearn.planning import check as ch14
    with pytest.raises(CheckFailed):
        ch14.ex14_pipeline_step_time(lambda t, m, p, v: m * t)  # no bubble: fails on the first pipelined case
    out = capsys.readouterr().out
    assert "bubble_ratio" in out and "(m + (p − 1)/v)" not in out and "(p − 1)/(v·m)" not in out


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_table_and_cli_follow_the_language(capsys, lang):
    """Under one language the table has one header line in it, recompute modes are named in it, and the CLI's own
    lines (summary, legend, efficiency note) carry no line of the other language."""
    import distlearn
    from authoring import lang_audit

    res = P.search("llama3-8b", global_batch=64, seq_len=2048, gpu="h100-80gb", num_gpus=8, top=3)
    distlearn.set_language(lang)
    try:
        lines = P.format_table(res.plans).splitlines()
        assert len(lines) == 1 + len(res.plans)
        assert ("显存 GB" in lines[0]) == (lang == "zh") and ("mem GB" in lines[0]) == (lang == "en")
        if lang == "zh":
            assert all(line.split()[6] in P.RECOMPUTE_ZH.values() for line in lines[1:])
        assert P.cli(["--model", "llama3-8b", "--gpus", "8", "--seq-len", "2048", "--global-batch", "64",
                      "--top", "2"]) == 0
        out = [ln for ln in capsys.readouterr().out.splitlines() if ln.strip()]
        assert not [ln for ln in out if not lang_audit.readable(ln, lang)], out
    finally:
        distlearn.set_language("both")


# ---------------------------------------------------------------- Llama 3's memory: the schedule's real order (issue 22)
@pytest.mark.parametrize("p,m,v", [(4, 8, 1), (4, 8, 2), (8, 16, 4), (16, 32, 8), (16, 16, 8), (6, 12, 3)])
def test_weighted_peak_equals_the_simulation_and_the_closed_form_for_equal_chunks(p, m, v):
    """Equal chunks: the weighted count is the simulation's peak (chunks alive) and Megatron's closed form ×
    layers, for every stage."""
    sched = "interleaved-1f1b" if v > 1 else "1f1b"
    weighted = pipeline.peak_inflight_weighted(sched, p, m, [[1.0] * v] * p)
    sim = pipeline.simulate(sched, p, m, num_chunks=v)
    assert list(weighted) == list(sim.peak_inflight_chunks.astype(float))
    for stage in range(p):
        assert weighted[stage] == pytest.approx(v * MEM.interleaved_inflight(p, stage, v, m), rel=1e-12)
    three = pipeline.peak_inflight_weighted(sched, p, m, [[3.0] * v] * p)
    assert list(three) == [3 * x for x in weighted]


def test_llama3_chunks_and_their_peak_by_hand():
    """Llama 3 §3.3.2: 126 layers on 16 stages, one layer fewer on the first and the last, one-layer chunks, the
    first chunk of the first stage only the embedding. By hand (Megatron's order, rounds of p = 16 micro-batches
    through chunk 0, 1, …, 7): stage 0's warm-up of 2·15 + 7·16 = 142 chunk-forwards (+ 1) holds chunks 1–7 of 16
    micro-batches = 112 layers (its other forwards are on the empty chunk 0); stage 1's 2·14 + 112 + 1 = 141 are
    all one layer. With m = 16 = p every forward runs before any backward: 16 × 8 = 128 layers."""
    chunks = MEM.chunk_layers(P.LLAMA3_405B_STAGES, 8)
    assert chunks[0] == (0,) + (1,) * 7 and chunks[-1] == (1,) * 7 + (0,) and chunks[1] == (1,) * 8
    assert MEM.chunk_layers((7, 9, 8), 4) == ((1, 2, 2, 2), (3, 2, 2, 2), (2, 2, 2, 2))
    peaks = MEM.stage_peak_layers(16, 32, 8, P.LLAMA3_405B_STAGES)
    assert peaks[:3] == (112.0, 141.0, 139.0) and max(peaks) == 141
    assert max(MEM.stage_peak_layers(16, 16, 8, P.LLAMA3_405B_STAGES)) == 128 == 16 * 8
    # the closed form without the empty chunk would have said (2·15 + 7·16 + 1)/8 × 7 = 125.1 on stage 0
    assert MEM.interleaved_inflight(16, 0, 8, 32) * 7 == pytest.approx(143 / 8 * 7)


def test_only_the_end_stages_may_have_a_chunk_without_layers():
    """stage_layers may give the first and the last stage num_chunks − 1 layers (an embedding- or output-only
    chunk), no middle stage."""
    m = get_preset("llama3-8b")  # 32 layers
    base = dict(dp=1, tp=1, pp=4, recompute="full", micro_batch_size=1, num_microbatches=4, num_chunks=4)
    P.validate_plan(m, make_cluster("h100-80gb", 4), P.Plan(**base, stage_layers=(7, 9, 9, 7)), 4)
    P.validate_plan(m, make_cluster("h100-80gb", 4), P.Plan(**base, stage_layers=(3, 13, 13, 3)), 4)
    with pytest.raises(DistlearnValueError):
        P.validate_plan(m, make_cluster("h100-80gb", 4), P.Plan(**base, stage_layers=(2, 14, 13, 3)), 4)
    with pytest.raises(DistlearnValueError):
        P.validate_plan(m, make_cluster("h100-80gb", 4), P.Plan(**base, stage_layers=(10, 3, 10, 9)), 4)


def test_llama3_memory_readings_against_the_closed_form():
    """Llama block with flash attention, SP, tp = t, 16-bit: one layer keeps 2·sbh/t·(6 + 2k/a + 4f/h) bytes with
    every tensor stored (eager SwiGLU; 3f/h fused), 2·sbh/t·(4 + 2k/a + 2f/h) with norm-act, + 4·a·s·b/t (fp32
    log-sum-exp); the worst stage holds 141 (8K GPUs) or 128 (16K) of them, plus its model states and the reserve of
    2 GB + 10 % of 80 GB (2 GB only without the fragmentation allowance). With the allowance only norm-act fits;
    without it the fused 16K layout fits too."""
    cfg = get_preset("llama3.1-405b")
    s, h, a, k, f, t = 8192, cfg.hidden_size, cfg.num_heads, cfg.kv_heads, cfg.ffn_hidden_size, 8
    lse = 4 * a * s / t
    per_layer = {"none": 2 * s * h / t * (6 + 2 * k / a + 4 * f / h) + lse,
                 "none-fused-swiglu": 2 * s * h / t * (6 + 2 * k / a + 3 * f / h) + lse,
                 "none-fused-swiglu-no-fragmentation": 2 * s * h / t * (6 + 2 * k / a + 3 * f / h) + lse,
                 "norm-act": 2 * s * h / t * (4 + 2 * k / a + 2 * f / h) + lse}
    assert set(per_layer) == set(P.published.MEMORY_READINGS)
    for name, peak in (("llama3-405b-8k-gpus", 141), ("llama3-405b-16k-gpus", 128)):
        r = P.memory_readings(name)
        for key, per in per_layer.items():
            mem = r[key]["memory"]
            reserve = 2e9 + (0 if key.endswith("no-fragmentation") else 0.1 * 80e9)
            assert r[key]["layer_bytes"] == pytest.approx(per, rel=1e-12)
            assert r[key]["peak_layers"] == peak
            assert mem["activations"] == pytest.approx(peak * per, rel=1e-12)
            assert mem["reserve"] == pytest.approx(reserve)
            assert mem["total"] == pytest.approx(mem["params"] + mem["grads"] + mem["optimizer"] + peak * per
                                                 + reserve, rel=1e-12)
            fits = key == "norm-act" or (key.endswith("no-fragmentation") and name == "llama3-405b-16k-gpus")
            assert r[key]["fits"] == (per <= r[key]["layer_bytes_to_fit"]) == fits
        assert r["norm-act"]["memory"]["total"] == pytest.approx(P.compare_published(name)["estimate"].memory["total"])
    with pytest.raises(DistlearnValueError):
        P.memory_readings("deepseek-v3")


def test_the_peak_shortcut_is_exact():
    """stage_peak_layers stops at peak_microbatches: the same peak as the whole schedule for every m (uneven
    chunks, several p and v)."""
    for p, v in [(4, 2), (8, 3), (16, 8), (6, 4), (16, 2)]:
        layers = (v - 1,) + (v + 1,) * (p - 2) + (v,)
        for m in range(p, 12 * p + 1, p):
            full = pipeline.peak_inflight_weighted("interleaved-1f1b", p, m, MEM.chunk_layers(layers, v))
            assert MEM.stage_peak_layers(p, m, v, layers) == tuple(float(x) for x in full), (p, v, m)


def test_candidate_stages_give_the_worst_stage_of_all(monkeypatch):
    """plan_memory looks only at the stages candidate_stages keeps (first, last, undominated middle ones; MoE:
    dense and MoE layers counted apart): the same worst stage as looking at every stage."""
    from distlearn.core.models import MOE_PRESETS
    for model, gpus, batch in [(MOE_PRESETS["deepseek-v3"], 256, 512), (get_preset("llama3.1-405b"), 1024, 512)]:
        cluster = make_cluster("h100-80gb", gpus)
        plans = [p for g in P.candidate_groups(model, cluster, batch, 4096) for p in list(g.plans())[:24]
                 if p.stage_layers is not None]
        assert len(plans) > 100
        fast = [MEM.plan_memory(SET.make_setting(model, cluster, batch, 4096), p)["total"] for p in plans]
        monkeypatch.setattr(MEM, "candidate_stages", lambda sizes, moe=None: list(range(len(sizes))))
        every = [MEM.plan_memory(SET.make_setting(model, cluster, batch, 4096), p)["total"] for p in plans]
        monkeypatch.undo()
        assert fast == pytest.approx(every, rel=1e-12)


def test_search_with_a_given_cp_and_ep():
    """cp fixes the context-parallel degree (also below MIN_CP_TOKENS: the reader chose it); ep fixes the expert
    degree of an MoE model (dividing dp·cp and its experts); ep > 1 on a dense model is refused in both
    languages; a cp / ep no layout allows says so."""
    from distlearn.core.models import MOE_PRESETS
    res = P.search("llama3-8b", global_batch=256, seq_len=4096, gpu="h100-80gb", num_gpus=16, cp=4, top=5)
    assert res.plans and all(e.plan.cp == 4 for e in res.plans)
    ds = MOE_PRESETS["deepseek-v3"]
    res = P.search(ds, global_batch=256, seq_len=4096, gpu="h100-80gb", num_gpus=256, ep=8, top=5)
    assert res.plans and all(e.plan.ep == 8 and (e.plan.dp * e.plan.cp) % 8 == 0 for e in res.plans)
    with pytest.raises(DistlearnValueError) as err:
        P.search("llama3-8b", global_batch=256, seq_len=4096, gpu="h100-80gb", num_gpus=16, ep=2)
    assert "MoE" in str(err.value)
    res = P.search(ds, global_batch=256, seq_len=4096, gpu="h100-80gb", num_gpus=16, ep=64)
    assert not res.plans and res.num_evaluated == 0 and "ep = 64" in res.message


def test_zb_h1_plan_uses_chapter_05s_simulation_and_its_closed_form():
    """A plan with schedule="zb-h1" is charged the bubble of distlearn.pipeline_parallel.zero_bubble's simulation (costs t_f = 1,
    t_b = 2, t_W = the linear layers' share of the forward), which is Qi et al. 2023's closed form
    (p − 1)(t_f + t_I − t_W); its activations are those of p micro-batches on every stage (1F1B: p − i); 1F1B
    itself keeps Megatron's (p − 1)/m. The check can fail: with W charged as free the bubble grows."""
    from dataclasses import replace
    from distlearn.pipeline_parallel import zero_bubble
    run = P.PUBLISHED_RUNS["megatron-gpt3-175b"]
    kw = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], gpu="a100-80gb", precision=run["precision"])
    plan = replace(run["plan"], recompute="selective", sequence_parallel=True)
    base = P.evaluate(run["model"], plan, **kw)
    zb = P.evaluate(run["model"], replace(plan, schedule="zb-h1"), **kw)
    st = SET.make_setting(run["model"], make_cluster("a100-80gb", 1024), run["global_batch"], run["seq_len"],
                        run["precision"])
    costs = STEP.schedule_costs(st, "selective")
    f, b = costs.forward, costs.backward
    p, m = plan.pp, plan.num_microbatches
    closed = zero_bubble.closed_form("zb-h1", p, m, fwd_time=f, bwd_time=b, wgrad_time=costs.weight_grad)
    assert closed["exact"]
    t_mb = sum(base.time[k] for k in ("compute", "tp_comm", "cp_comm", "ep_comm", "pp_comm")) / m
    assert base.time["bubble"] == pytest.approx((p - 1) * t_mb, rel=1e-12)
    assert zb.time["bubble"] == pytest.approx(closed["bubble_time"] / (f + b) * t_mb, rel=1e-9)
    assert zb.bubble_ratio == pytest.approx(closed["bubble_time"] / (m * (f + b)), rel=1e-9)
    assert zb.time["total"] < base.time["total"] and zb.time["compute"] == base.time["compute"]
    per_layer = st.act(1, plan.tp, True, "selective")
    layers = run["model"].num_layers // p
    # the first stage holds p micro-batches either way; the last one now holds p too (beside the logits)
    assert zb.memory["activations"] >= per_layer * layers * p and zb.memory["total"] >= base.memory["total"]
    # every stage holds p micro-batches: the last stage too (1F1B: 1)
    assert STEP.schedule_simulation(st, replace(plan, schedule="zb-h1")).peak_inflight.min() == p
    with pytest.raises(DistlearnValueError):
        P.evaluate(run["model"], replace(plan, schedule="zb-h1", num_chunks=2), **kw)
    with pytest.raises(DistlearnValueError):
        P.evaluate(run["model"], replace(plan, schedule="dualpipe"), **kw)
    assert layers * p == run["model"].num_layers


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_zero_bubble_closed_form_is_the_simulation_where_the_planner_uses_it(recompute):
    """zero_bubble_terms takes chapter 05's closed form only where distlearn.pipeline_parallel.zero_bubble marks it exact: there
    it equals the simulation (bubble ratio and every stage's peak), for several p, m and both cost sets."""
    from dataclasses import replace
    from distlearn.pipeline_parallel import zero_bubble
    m = get_preset("llama3-8b")
    st = SET.make_setting(m, make_cluster("h100-80gb", 64), 512, 4096)
    for pp, mb in [(2, 2), (4, 4), (4, 12), (8, 8), (8, 30), (16, 16), (4, 3)]:
        plan = P.Plan(dp=1, tp=1, pp=pp, recompute=recompute, num_microbatches=mb, schedule="zb-h1")
        terms = STEP.zero_bubble_terms(st, plan)
        sim = STEP.schedule_simulation(st, plan)
        c = STEP.schedule_costs(st, recompute)
        exact = zero_bubble.closed_form("zb-h1", pp, mb, fwd_time=c.forward, bwd_time=c.backward,
                                        wgrad_time=c.weight_grad)["exact"]
        assert exact == (mb >= pp)
        assert terms.bubble_ratio == pytest.approx(sim.bubble_ratio, rel=1e-9, abs=1e-12), (pp, mb)
        assert terms.inflight == pytest.approx(tuple(sim.peak_inflight), rel=1e-12), (pp, mb)


def test_zb_h1_never_needs_less_memory_than_1f1b():
    """The search skips a ZB-H1 plan whose 1F1B twin does not fit: ZB-H1 keeps p micro-batches on every stage,
    1F1B min(p − i, m), so it never needs less (checked on every such plan of two clusters)."""
    from dataclasses import replace
    for model, gpus, batch, seq in [("llama3-8b", 64, 256, 4096), ("gpt3-175b", 256, 512, 2048)]:
        cfg, cluster = get_preset(model), make_cluster("h100-80gb", gpus)
        st = SET.make_setting(cfg, cluster, batch, seq)
        n = 0
        for p in P.candidate_plans(cfg, cluster, batch, seq):
            if p.schedule == "zb-h1":
                twin = replace(p, schedule="1f1b")
                assert MEM.plan_memory(st, p)["total"] >= MEM.plan_memory(st, twin)["total"] * (1 - 1e-12)
                n += 1
        assert n > 50


def test_chapter_14_figures_of_the_memory_readings_and_zb_h1():
    """Chapter 14's prose: with every tensor stored 99–108 GB (DeepSeek-V3 86 GB); 141 / 128 layer-micro-batches,
    91 GB of activations before the weights at 8,192 GPUs; norm-act takes a Llama 3 layer from 15.9 to 10.6 units
    of s·b·h/t 16-bit values for 0.2 % of the step; fused SwiGLU saves 14–15 GB and still nothing fits (≤ 0.45 /
    0.49 GB per layer against 0.53), norm-act keeps 0.36 GB: 68 and 62 GB; full recomputation 14 % less MFU;
    ZB-H1 about halves GPT-3 175B's bubble; on DeepSeek-V3 it holds 53 GB instead of 51 (54 with every tensor
    stored: its FP8 recipe caches the linear inputs in FP8); with §3.3.2's
    FP32 gradients the planner's best on 16,384 GPUs is the published layout with ZeRO-1 (42.6 % against 41 %), on
    8,192 TP 8 × PP 32 (44.4 % against 41.5 %), both ahead of full recomputation (36 %). These figures change
    with issue 38 (FP32 gradients, END_TO_END refitted to 0.80): chapter 14's prose must follow. The 141 is Megatron's interleaved warm-up of the
    second stage, 2(p − 2) + (v − 1)p chunk-forwards + the one in flight, one layer each: 17.6 micro-batches of
    its 8 layers, more than 1F1B's p − 1 = 15 (the chapter says so)."""
    from dataclasses import replace
    readings = {n: P.memory_readings(n) for n in P.LLAMA3_RUNS}
    r8, r16 = readings["llama3-405b-8k-gpus"], readings["llama3-405b-16k-gpus"]
    stored = [r["none"]["memory"]["total"] / 1e9 for r in readings.values()]
    assert (round(min(stored)), round(max(stored))) == (99, 108)
    assert (r8["none"]["peak_layers"], r16["none"]["peak_layers"]) == (141, 128)
    p, v = 16, 8
    assert 2 * (p - 2) + (v - 1) * p + 1 == 141 and round(141 / 8, 1) == 17.6 > p - 1
    assert MEM.interleaved_inflight(p, 1, v, 32) * 8 == 141 and MEM.interleaved_inflight(p, 1, v, 16) * 8 == 128
    assert round(r8["none"]["memory"]["activations"] / 1e9) == 91 and round(r8["none"]["layer_bytes"] / 1e9, 2) == 0.64
    cfg = get_preset("llama3.1-405b")
    unit = 8192 * cfg.hidden_size / 8 * 2
    lse = 4 * cfg.num_heads * 8192 / 8
    units = [round((r8[k]["layer_bytes"] - lse) / unit, 1) for k in ("none-fused-swiglu", "norm-act")]
    assert units == [15.9, 10.6]
    own8 = P.compare_published("llama3-405b-8k-gpus")["estimate"]
    l8 = P.PUBLISHED_RUNS["llama3-405b-8k-gpus"]
    kw8 = dict(global_batch=l8["global_batch"], seq_len=l8["seq_len"], gpu="h100-80gb", precision=l8["precision"],
               **P.published.run_options(l8))
    none8 = P.evaluate(l8["model"], replace(l8["plan"], recompute="none"), **kw8)
    assert round(100 * (own8.time["total"] / none8.time["total"] - 1), 1) == 0.2  # 0.6 with bf16 gradients
    saved = [r["none"]["memory"]["total"] - r["none-fused-swiglu"]["memory"]["total"] for r in (r8, r16)]
    assert (round(min(saved) / 1e9), round(max(saved) / 1e9)) == (14, 15)
    assert not any(r[k]["fits"] for r in readings.values() for k in ("none", "none-fused-swiglu"))
    assert [round(r["none"]["layer_bytes_to_fit"] / 1e9, 2) for r in (r8, r16)] == [0.45, 0.49]
    assert round(r8["none-fused-swiglu"]["layer_bytes"] / 1e9, 2) == 0.53
    assert round(r8["norm-act"]["layer_bytes"] / 1e9, 2) == 0.36
    assert [round(r["norm-act"]["memory"]["total"] / 1e9) for r in (r8, r16)] == [68, 62]
    # the reserve decides it: without the 10 % allowance the fused 16K layout fits (77 GB); a real H100 has
    # 81,559 MiB (nvidia-smi) = 85.5 GB, on which the fused 8K layout with no allowance (84.3 GB) fits, 1.3 GB spare
    nofrag8, nofrag16 = (r["none-fused-swiglu-no-fragmentation"] for r in (r8, r16))
    assert not nofrag8["fits"] and nofrag16["fits"] and round(nofrag16["memory"]["total"] / 1e9) == 77
    real_h100 = 81559 * 2 ** 20
    assert round(real_h100 / 1e9, 1) == 85.5 and round(nofrag8["memory"]["total"] / 1e9, 1) == 84.4
    assert round((real_h100 - nofrag8["memory"]["total"]) / 1e9, 1) == 1.2  # 84.3 and 1.3 with bf16 gradients
    # storing every tensor is 0.6 % faster: each Llama 3 row stays within ±10 % either way
    for name in P.LLAMA3_RUNS:
        run = P.PUBLISHED_RUNS[name]
        none = P.evaluate(run["model"], replace(run["plan"], recompute="none"), global_batch=run["global_batch"],
                          seq_len=run["seq_len"], gpu="h100-80gb", precision=run["precision"],
                          **P.published.run_options(run))
        r = P.compare_published(name)
        assert abs(r["ratio"] * r["estimate"].time["total"] / none.time["total"] - 1) <= 0.10
    run = P.PUBLISHED_RUNS["megatron-gpt3-175b"]
    kw = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], gpu="a100-80gb", precision=run["precision"])
    one, zb = (P.evaluate(run["model"], replace(run["plan"], schedule=s), **kw) for s in ("1f1b", "zb-h1"))
    assert 0.45 < zb.time["bubble"] / one.time["bubble"] < 0.55
    run = P.PUBLISHED_RUNS["deepseek-v3"]
    r = P.compare_published("deepseek-v3")
    ds = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], cluster=P.published.run_cluster(run),
              precision=run["precision"], **P.published.run_options(run))
    zb = P.evaluate(P.published.run_model(run), replace(run["plan"], schedule="zb-h1"), **ds)
    # ZB-H1 changes only the bubble: the step is shorter by exactly the bubble it removes, and the ratio stays
    # below the DualPipe bound (every expert all-to-all hidden)
    own_t = r["estimate"].time
    assert zb.time["total"] == pytest.approx(own_t["total"] - own_t["bubble"] + zb.time["bubble"], rel=1e-9)
    from distlearn.planning.calibration import deepseek_steps
    assert r["ratio"] < r["ratio"] * own_t["total"] / zb.time["total"] < deepseek_steps()[-2].ratio
    assert (round(zb.memory["total"] / 1e9), round(r["estimate"].memory["total"] / 1e9)) == (53, 51)
    assert round(P.evaluate(P.published.run_model(run), replace(run["plan"], recompute="none"), **ds).memory["total"] / 1e9) == 54
    llama = P.PUBLISHED_RUNS["llama3-405b-16k-gpus"]
    kw16 = dict(global_batch=llama["global_batch"], seq_len=llama["seq_len"], gpu="h100-80gb",
                precision=llama["precision"], **P.published.run_options(llama))
    own16 = P.compare_published("llama3-405b-16k-gpus")["estimate"]
    full16 = P.evaluate(llama["model"], replace(llama["plan"], recompute="full"), **kw16)
    # with §3.3.2's FP32 gradients (issue 38), ZeRO-2 reduce-scatters 4-byte gradients every micro-batch in this
    # model: the best plans keep the published degrees but use ZeRO-1 (chapter 14's 43 % / 46.5 % / 24 % were with
    # bf16 gradients; issue 38's once-per-step reduce-scatter for FSDP + PP changes these again)
    search16 = {k: v for k, v in kw16.items() if k not in ("grad_sync", "causal", "overlap")}  # search: per_step
    best16 = P.search(llama["model"], num_gpus=16384, top=1, **search16).best
    assert best16.plan == replace(llama["plan"], zero_stage=1)
    # MFU figures of chapter 14 follow END_TO_END; here only their order: the best plan ahead of the published
    # layout, which is ahead of full recomputation (at most 1/4 slower: one more forward)
    assert best16.mfu > own16.mfu > full16.mfu > 0.75 * own16.mfu
    search8 = {k: v for k, v in kw8.items() if k not in ("grad_sync", "causal", "overlap")}
    best8 = P.search(l8["model"], num_gpus=8192, top=1, **search8).best
    full8 = P.evaluate(l8["model"], replace(l8["plan"], recompute="full"), **kw8)
    assert best8.plan.recompute == "norm-act" and best8.mfu > own8.mfu > full8.mfu > 0.75 * own8.mfu
    without8 = P.search(l8["model"], num_gpus=8192, top=1, recompute=("none", "selective", "full"), **search8).best
    # without norm-act nothing with the published degrees fits: the best is a ZeRO-3 plan without pipeline
    # stages and with full recomputation, behind the norm-act best
    assert (without8.plan.pp, without8.plan.zero_stage, without8.plan.recompute) == (1, 3, "full")
    assert without8.mfu < best8.mfu


def test_a_shared_memo_changes_no_number():
    """Settings for other GPUs and GPU counts (a search's suggestions) share the memo entries of SHAREABLE: the
    memory of every plan is the same as with a setting of its own."""
    from distlearn.core.models import MOE_PRESETS
    shared = {}
    for model in (get_preset("llama3-8b"), MOE_PRESETS["deepseek-v3"]):
        for gpu, n in (("v100-32gb", 64), ("h100-80gb", 128), ("h200", 256)):
            cluster = make_cluster(gpu, n)
            a = SET.make_setting(model, cluster, 512, 4096, shared=shared)
            b = SET.make_setting(model, cluster, 512, 4096)
            plans = [p for g in P.candidate_groups(model, cluster, 512, 4096) for p in list(g.plans())[:6]]
            assert plans and [MEM.plan_memory(a, p) for p in plans] == [MEM.plan_memory(b, p) for p in plans]
            assert P.any_plan_fits(model, cluster, 512, 4096, shared=shared) == P.any_plan_fits(model, cluster, 512,
                                                                                                  4096)
    assert shared


# ---------------------------------------------------------------- the kernel time model (issue 22)
def test_gpu_presets_state_their_hbm_bandwidth():
    """Datasheet HBM bandwidths (bytes/s): V100 900 GB/s, A100 80GB SXM 2,039 GB/s, H100 SXM 3.35 TB/s, H200
    4.8 TB/s, each named in the preset's source."""
    expect = {"v100-32gb": 900e9, "a100-80gb": 2039e9, "h100-80gb": 3.35e12, "h200": 4.8e12}
    for name, bw in expect.items():
        assert GPUS[name].hbm_bw == pytest.approx(bw) and "HBM" in GPUS[name].source
    with pytest.raises(DistlearnValueError) as e:
        GPUS["h100-80gb"].with_(hbm_bw=0)
    assert e.value.param == "hbm_bw"


def test_gemm_roofline_compute_bound_and_memory_bound_by_hand():
    """A square 8192³ GEMM is compute-bound: 2·8192³ / (312e12 × 0.859); a matrix-vector product (m = 1) is
    memory-bound: its 2-byte weight matrix read once, (8192 + 8192² + 8192)·2 / 2.039e12."""
    a100 = GPUS["a100-80gb"]
    e = K.GEMM_CEILING["a100"]
    assert e == pytest.approx(0.859, abs=5e-4) and K.GEMM_CEILING["h100"] == pytest.approx(0.801, abs=5e-4)
    n = 8192
    square = K.Gemm("square", n, n, n)
    assert K.gemm_seconds(square, a100.peak_flops, e, a100.hbm_bw) == pytest.approx(2 * n ** 3 / (312e12 * e))
    vector = K.Gemm("gemv", 1, n, n)
    assert K.gemm_seconds(vector, a100.peak_flops, e, a100.hbm_bw) == pytest.approx((n + n * n + n) * 2 / 2039e9)
    # 1-byte FP8 inputs halve the bytes read
    assert K.gemm_seconds(vector, 1979e12, e, a100.hbm_bw, 1, 2) == pytest.approx((n + n * n + 2 * n) / 2039e9)


@pytest.mark.parametrize("name,tp,ep", [("gpt3-175b", 8, 1), ("llama3-70b", 4, 1), ("deepseek-v3", 1, 8),
                                        ("mixtral-8x7b", 2, 4)])
def test_layer_gemms_count_the_matmul_flops(name, tp, ep):
    """The per-GPU GEMMs of one layer add up to 2·tokens·P_matmul / tp (flops.matmul_params_per_layer; an MoE
    layer's experts with their routed tokens), whatever ep — except the router, which every tensor-parallel rank
    runs whole (Megatron-Core replicates it)."""
    from distlearn.core.models import get_moe_preset
    m = PRESETS[name] if name in PRESETS else get_moe_preset(name)
    layer = m.num_layers - 1
    tokens = 4096
    flops = sum(g.flops for g in K.layer_gemms(m, tokens, tp, layer, ep))
    router = m.router_parameters() if m.is_moe else 0
    expect = 2 * tokens * ((FL.matmul_params_per_layer(m, layer) - router) / tp + router)
    assert flops == pytest.approx(expect, rel=1e-9)


def test_gpt_layer_elementwise_bytes_by_hand():
    """One GPT layer's memory-bound bytes (Megatron-LM 2021, 2-byte values, 1-byte dropout masks), written out.
    Forward, without sequence parallelism: LayerNorm 2 + bias-dropout-add 3 (+ mask), twice, on all T·h of every
    rank = 22·T·h bytes; QKV bias 2 × 3h/t, context transpose 2 × h/t, bias-GeLU 2 × 4h/t = 32·T·h/t; softmax 2
    and dropout 2 (+ mask) of b·a·s²/t scores = 9·b·a·s²/t. Backward: 2 × (3 + 6 tensors + mask) = 38·T·h,
    (1·3 + 2 + 4·4)·2 = 42·T·h/t, (3 + 2)·2 + 1 = 11·b·a·s²/t. With sequence parallelism the first group is split
    by t too."""
    m = PRESETS["gpt3-175b"]
    b, s, t = 2, 2048, 8
    T, h, a = b * s, m.hidden_size, m.num_heads
    for sp in (False, True):
        ops = K.elementwise_ops(m, b, T, t, sp, "materialised", seq_len=s)
        fwd = sum(op.bytes(2)[0] for op in ops)
        bwd = sum(op.bytes(2)[1] for op in ops)
        rep = T * h / (t if sp else 1)
        assert fwd == pytest.approx(22 * rep + 32 * T * h / t + 9 * b * a * s * s / t)
        assert bwd == pytest.approx(38 * rep + 42 * T * h / t + 11 * b * a * s * s / t)
    # flash attention: no scores to read or write
    flash = K.elementwise_ops(m, b, T, t, True, "flash", seq_len=s)
    assert sum(op.bytes(2)[0] for op in flash) == pytest.approx(22 * T * h / t + 32 * T * h / t)


def test_llama_layer_elementwise_bytes_by_hand():
    """Llama, sequence parallel: RMSNorm 2 + residual add 3, twice (10 · T·h/t), RoPE 2 × (h + kv)/t, SwiGLU
    unfused SiLU 2 + product 3 (5 · T·f/t) or fused 3 (3 · T·f/t); backward 3 + 3 twice, 2, and 3 + 5 or 5."""
    m = PRESETS["llama3-70b"]
    b, s, t = 1, 8192, 8
    T, h, f, kv = b * s, m.hidden_size, m.ffn_hidden_size, m.kv_heads * m.head_dim
    for swiglu, fw, bw in (("unfused", 5, 8), ("fused", 3, 5)):
        ops = K.elementwise_ops(m, b, T, t, True, "flash", swiglu, s)
        fwd, bwd = (sum(op.bytes(2)[i] for op in ops) for i in (0, 1))
        assert fwd == pytest.approx(2 * T * (10 * h + 2 * (h + kv) + fw * f) / t)
        assert bwd == pytest.approx(2 * T * (12 * h + 2 * (h + kv) + bw * f) / t)


def test_norm_act_recomputes_the_norms_and_the_activation_forward_by_hand():
    """norm-act runs the two norms and the MLP activation once more in backward: Llama RMSNorm 2 × 2 (T·h/t with
    SP) + SwiGLU 5 (unfused: SiLU 2 + product 3) or 3 (fused) of T·f/t; GPT LayerNorm 2 × 2 + bias-GeLU 2 of T·f/t;
    16-bit, at the HBM bandwidth. No other part of the layer changes."""
    b, s, t = 1, 8192, 8
    for name, swiglu, per_f in (("llama3-70b", "unfused", 5), ("llama3-70b", "fused", 3), ("gpt3-175b", "unfused", 2)):
        m = PRESETS[name]
        g = GPUS["h100-80gb"]
        T, h, f = b * s, m.hidden_size, m.ffn_hidden_size
        ls = K.layer_seconds(m, g, micro_batch=b, seq_len=s, tp=t, attention="flash", swiglu=swiglu,
                             gemm_peak=g.peak_flops, peak=g.peak_flops)
        assert ls.norm_act_forward == pytest.approx(2 * T * (4 * h + per_f * f) / t / g.hbm_bw)
        assert ls.total("norm-act") - ls.total("none") == pytest.approx(ls.norm_act_forward)
        assert 0 < ls.norm_act_forward < 0.1 * ls.total("none")

def test_flash_attention_runs_at_its_published_share():
    """Flash attention's forward FLOPs at FlashAttention-3's 75 % of the H100 peak, its backward's 2.5 × the
    forward FLOPs at 52.5 % (1.5 × FlashAttention-2's 35 %); FlashAttention-2's 73 % / 63 % on the A100."""
    m = PRESETS["llama3-70b"]
    s, t = 8192, 8
    for gpu, (fwd, bwd) in (("h100-80gb", (0.75, 0.525)), ("a100-80gb", (0.73, 0.63))):
        g = GPUS[gpu]
        ls = K.layer_seconds(m, g, micro_batch=1, seq_len=s, tp=t, attention="flash", gemm_peak=g.peak_flops,
                             peak=g.peak_flops)
        flops = 4 * s * s * m.hidden_size / t
        assert ls.attention_forward == pytest.approx(flops / (g.peak_flops * fwd))
        assert ls.attention_backward == pytest.approx(2.5 * flops / (g.peak_flops * bwd))


@pytest.mark.parametrize("name,recompute", [("megatron-gpt-145.6b", "full"), ("llama3-405b-8k-gpus", "none"),
                                            ("llama3-405b-8k-gpus", "selective"), ("deepseek-v3", "none")])
def test_kernel_model_without_its_memory_bound_parts_is_the_flat_model(monkeypatch, name, recompute):
    """Infinite HBM bandwidth, every ceiling e (flash backward 1.25·e: its 2.5 × FLOPs then take the time of
    2 × at e) and no end-to-end constant: the kernel model becomes the flat model at efficiency e, exactly."""
    from dataclasses import replace
    e = 0.6
    monkeypatch.setattr(K, "GEMM_CEILING", {k: e for k in K.GEMM_CEILING})
    monkeypatch.setattr(K, "FP8_BLOCK_CEILING", {k: e for k in K.FP8_BLOCK_CEILING})
    monkeypatch.setattr(K, "FLASH_SHARE", {k: (e, 1.25 * e) for k in K.FLASH_SHARE})
    monkeypatch.setattr(K, "END_TO_END", 1.0)
    run = P.PUBLISHED_RUNS[name]
    cluster = P.published.run_cluster(run)
    cluster = Cluster(cluster.gpu.with_(hbm_bw=1e40), cluster.num_nodes)
    plan = replace(run["plan"], recompute=recompute)
    kw = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], cluster=cluster, precision=run["precision"])
    # the flat model counts every score: the kernel model with a non-causal kernel is the same arithmetic
    kernel, flat = P.evaluate(run["model"], plan, causal=False, **kw), P.evaluate(run["model"], plan, efficiency=e, **kw)
    assert kernel.time["compute"] == pytest.approx(flat.time["compute"], rel=1e-9)


def test_memory_bound_share_falls_as_the_model_grows():
    """Why larger models reach more of the peak: per layer GEMM FLOPs grow as h², elementwise bytes as h, so the
    elementwise share of the Megatron Table 1 runs falls from 1.7 B to 1 T and their kernel FLOP/s rise."""
    shares, rates = [], []
    for name in ("megatron-gpt-1.7b", "megatron-gpt-18.4b", "megatron-gpt-145.6b", "megatron-gpt-1t"):
        run = P.PUBLISHED_RUNS[name]
        st = SET.make_setting(run["model"], P.published.run_cluster(run), run["global_batch"], run["seq_len"],
                            run["precision"])
        parts = STEP.kernel_stage_parts(st, run["plan"])
        shares.append(parts["elementwise"] / sum(parts.values()))
        rates.append(P.compare_published(name)["predicted_flops"])
    assert shares == sorted(shares, reverse=True) and shares[0] > 3 * shares[-1]
    assert rates[-1] > rates[0]


def test_required_published_rows_within_ten_percent():
    """Issue 22's required rows, each within ±10 % with one set of constants; none of them is a stated miss."""
    required = ("megatron-gpt-1.7b", "megatron-gpt-18.4b", "megatron-gpt-145.6b", "megatron-gpt3-175b",
                "megatron-gpt-1t", "bloom-176b", "llama3-405b-8k-gpus", "llama3-405b-16k-gpus")
    for name in required:
        assert name not in P.KNOWN_MISSES
        r = P.compare_published(name)
        assert abs(r["ratio"] - 1) <= 0.10, (name, r["ratio"])


def test_break_on_purpose_without_elementwise_work_the_table_misses(monkeypatch):
    """The memory-bound part is what keeps the small models in the table: with no elementwise bytes the 1.7 B
    row is predicted more than 10 % too fast. (The planner runs the unchecked ``_elementwise_ops`` through
    :meth:`KernelModel.layer`; ``elementwise_ops`` is its checking entry point for readers.)"""
    assert P.compare_published("megatron-gpt-1.7b")["within"]
    monkeypatch.setattr(K, "_elementwise_ops", lambda *a, **k: [])
    assert P.compare_published("megatron-gpt-1.7b")["ratio"] > 1.10


def test_kernel_parts_sum_to_the_compute_time():
    """kernel_stage_parts (the chapter's breakdown) adds up to the micro-batch's compute time, the unmodelled part
    being (1/END_TO_END − 1) of the rest."""
    run = P.PUBLISHED_RUNS["llama3-405b-8k-gpus"]
    st = SET.make_setting(run["model"], P.published.run_cluster(run), run["global_batch"], run["seq_len"])
    parts = STEP.kernel_stage_parts(st, run["plan"])
    modelled = sum(v for k, v in parts.items() if k != "unmodelled")
    assert parts["unmodelled"] == pytest.approx(modelled * (1 / K.END_TO_END - 1))
    assert sum(parts.values()) == pytest.approx(STEP.microbatch_compute_seconds(st, run["plan"]))
    est = P.compare_published("llama3-405b-8k-gpus")["estimate"]
    assert est.time["compute"] == pytest.approx(run["plan"].num_microbatches * sum(parts.values()))


def test_chapter_14_best_plan_per_gpu_count_uses_norm_act():
    """Chapter 14's Llama 3 70B sweep (H100, seq 8192, batch 512): nothing fits on 16 GPUs; with norm-act among the
    modes the best plan is never slower than the best without it; at 24 GPUs the best without norm-act needs full
    recomputation and the best uses norm-act; every best plan that recomputes with norm-act would not fit storing
    every tensor (else storing, which is faster, would have won). (The plans themselves moved with issue 38's time
    model, e.g. ZeRO-3 without pipeline stages from 32 GPUs on: chapter 14's prose must follow.)"""
    from dataclasses import replace
    kw = dict(global_batch=512, seq_len=8192, gpu="h100-80gb")
    counts = (16, 24, 32, 48, 64, 128, 256)
    best = {n: P.search("llama3-70b", num_gpus=n, top=1, **kw).best for n in counts}
    without = {n: P.search("llama3-70b", num_gpus=n, top=1, recompute=("none", "selective", "full"), **kw).best
               for n in counts[1:]}
    assert best[16] is None
    assert all(best[n].tokens_per_s >= without[n].tokens_per_s for n in counts[1:])
    assert without[24].plan.recompute == "full" and best[24].plan.recompute == "norm-act"
    assert best[24].tokens_per_s > without[24].tokens_per_s
    for n in counts[1:]:
        if best[n].plan.recompute == "norm-act":
            assert not P.evaluate("llama3-70b", replace(best[n].plan, recompute="none"), **kw).fits


def test_search_limited_to_some_recomputation_modes():
    """``recompute=`` searches only those modes: the plans are the full search's plans of those modes, in order."""
    kw = dict(global_batch=512, seq_len=8192, gpu="h100-80gb", num_gpus=32)
    everything = P.search("llama3-70b", **kw)
    some = P.search("llama3-70b", recompute=("none", "full"), **kw)
    assert some.plans == [e for e in everything.plans if e.plan.recompute in ("none", "full")]
    assert some.num_evaluated == everything.num_evaluated // 2
    with pytest.raises(DistlearnValueError, match="recompute"):
        P.search("llama3-70b", recompute=("some",), **kw)
    with pytest.raises(DistlearnValueError, match="recompute"):
        P.search("llama3-70b", recompute=(), **kw)
    with pytest.raises(DistlearnValueError, match="recompute must be a tuple"):
        P.search("llama3-70b", recompute=3, **kw)
    one = P.search("llama3-70b", recompute="norm-act", top=3, **kw)   # one mode by name
    assert one.plans == [e for e in everything.plans if e.plan.recompute == "norm-act"][:3]
    assert P.format_table(one) == P.format_table(one.plans)          # a search's result or its plans


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cli_limits_the_recomputation_modes(capsys, lang, monkeypatch):
    """``--recompute none,full`` searches only those modes; a mode that does not exist is a clear error (status 2)
    naming the option and the modes, in the reader's language."""
    from distlearn.core import i18n
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        assert P.cli(["--model", "llama3-8b", "--gpus", "8", "--top", "20", "--recompute", "none,full"]) == 0
        out = capsys.readouterr().out
        rows = [r for r in (line.split() for line in out.splitlines()) if len(r) == len(P.HEADER) and r[0].isdigit()]
        col = P.HEADER.index("recompute")
        assert rows and {r[col] for r in rows} <= ({"none", "full"} if lang == "en" else {"不重计算", "完全"})
        assert P.cli(["--recompute", "nope"]) == 2
        err = capsys.readouterr().err
        assert "--recompute" in err and "norm-act" in err and ("必须" in err) == (lang == "zh")
    finally:
        i18n.set_language(old)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cli_takes_a_runs_gradient_sync_and_overlaps(capsys, lang):
    """``--grad-sync`` and ``--overlap`` reach the search: the table's best plan is search()'s with the same options,
    the options are named above the table, and an unknown overlap is a clear error (status 2) in the reader's
    language."""
    from distlearn.core import i18n
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        argv = ["--model", "llama3-70b", "--gpus", "64", "--seq-len", "8192", "--global-batch", "512", "--top", "1"]
        assert P.cli(argv + ["--grad-sync", "per_microbatch", "--overlap", "tp_comm,grad_reduce"]) == 0
        out = capsys.readouterr().out
        assert "per_microbatch" in out and "tp_comm" in out and ("重叠" in out) == (lang == "zh")
        best = P.search("llama3-70b", num_gpus=64, gpu="h100-80gb", seq_len=8192, global_batch=512, top=1,
                        grad_sync="per_microbatch", overlap=SET.Overlap(tp_comm=True, grad_reduce=True)).best
        plain = P.search("llama3-70b", num_gpus=64, gpu="h100-80gb", seq_len=8192, global_batch=512, top=1).best
        assert best.tokens_per_s != plain.tokens_per_s
        assert f"{best.tokens_per_s:,.0f}" in out
        assert P.cli(["--overlap", "tp,bogus"]) == 2
        err = capsys.readouterr().err
        assert "--overlap" in err and "param_gather" in err and ("必须" in err) == (lang == "zh")
    finally:
        i18n.set_language(old)


# ---------------------------------------------------------------- issue 38: the time model's parts, against counts
def _cc(topo, op, nbytes, g, k):
    """The faster of collective_cost's two closed forms across domains (one ring per NIC, hierarchical)."""
    from distlearn.core.topology import collective_cost
    if g // k == 1:
        return collective_cost(topo, op, nbytes, g, k, "ring", rings=k).seconds
    return min(collective_cost(topo, op, nbytes, g, k, "ring", rings=k).seconds,
               collective_cost(topo, op, nbytes, g, k, "hierarchical").seconds)


@pytest.mark.parametrize("tp, per_node", [(8, 1), (2, 4)])
def test_dp_group_across_nodes_is_the_topologys_closed_form(tp, per_node):
    """DDP across 4 H100 nodes, pp = 2 (the all-reduce exposed after the flush): the dp ranks spaced tp apart sit
    per_node to a node, and each layer's all-reduce costs what collective_cost's closed forms say (tp 8: one per
    node, the ring through one NIC; tp 2: four per node, the faster of 4 rings and the hierarchical algorithm)."""
    from distlearn.core.topology import Topology
    m = PRESETS["llama3-8b"]
    dp = 16 // tp
    plan = P.Plan(dp=dp, tp=tp, pp=2, zero_stage=0, recompute="selective", micro_batch_size=1, num_microbatches=8)
    e = P.evaluate(m, plan, global_batch=8 * dp, seq_len=2048, cluster=make_cluster("h100-80gb", 32))
    g = GPUS["h100-80gb"]
    topo = Topology("h100", 8, g.nvlink_bw, g.network_bw, alpha_intra=P.ALPHA, alpha_network=P.ALPHA)
    shard = (16 * m.layer_parameters() + m.vocab_size * m.hidden_size + m.hidden_size) / tp  # the last stage's
    first = (16 * m.layer_parameters() + m.embedding_parameters()) / tp
    assert e.time["dp_comm"] == pytest.approx(16 * _cc(topo, "all_reduce", 2 * first / 16, dp, per_node), rel=1e-12)
    assert shard > first  # the first stage's shard is the one the planner charges (its layers' buckets)


def test_deepseek_expert_all_to_all_is_the_reports_infiniband_volume():
    """DeepSeek-V3's EP 64 over 8 H800 nodes (tp 1, b = 1, s = 4096): per MoE layer and micro-batch, four
    all-to-alls of the 4096 × 7168 values a GPU holds — dispatch and the backward's dispatch-direction one in FP8
    with a 4-byte scale per 128 values, both combines in BF16 (§3.3.3) — each crossing InfiniBand with
    3.5 copies per token (at most 4 target nodes, the own one among them 1 time in 2, §2.1.2 / §3.2.2), the
    NVLink forwarding of 7 copies hidden under it (160 GB/s against 50), 63 messages of α each."""
    run = P.PUBLISHED_RUNS["deepseek-v3"]
    model, plan = run["model"], run["plan"]
    assert model.max_nodes_per_token == 4 and plan.tp == 1 and plan.ep == 64 and plan.micro_batch_size == 1
    st = SET.make_setting(model, P.published.run_cluster(run), run["global_batch"], run["seq_len"],
                          precision=run["precision"])
    assert STEP.all_to_all_bytes(st) == {"dispatch": 1 + 4 / 128, "combine": 2.0, "backward_dispatch": 1 + 4 / 128,
                                         "backward_combine": 2.0}
    values = 4096 * 7168
    one = lambda per: 63 * P.ALPHA + 3.5 * values * per / 50e9  # noqa: E731
    starts = [sum(plan.stage_layers[:i]) for i in range(plan.pp)]
    moe = max(sum(1 for layer in range(a, a + n) if layer >= 3) for a, n in zip(starts, plan.stage_layers))
    layer = 2 * one(1 + 4 / 128) + 2 * one(2.0)
    assert STEP.ep_seconds(st, plan) == pytest.approx(moe * layer, rel=1e-12)
    # without the node limit each of the 8 copies is its own message: 56/64 of them cross InfiniBand, twice as many
    free = SET.make_setting(model.with_(max_nodes_per_token=None), P.published.run_cluster(run), run["global_batch"],
                            run["seq_len"], precision=run["precision"])
    ib = lambda per: 63 * P.ALPHA + 7 * values * per / 50e9  # noqa: E731
    assert STEP.ep_seconds(free, plan) == pytest.approx(moe * (2 * ib(1 + 4 / 128) + 2 * ib(2.0)), rel=1e-12)


def test_ep_and_cp_groups_inside_a_gb200_domain_stay_on_nvlink():
    """On GB200 NVL72 (72 GPUs in one NVLink domain) an EP 32 group with tp 2 (64 GPUs) stays inside the domain: its
    all-to-all is the direct one at 900 GB/s with no network bytes; on 8-GPU H100 nodes the same group spans 8."""
    from distlearn.core.topology import collective_cost
    from distlearn.core.models import MOE_PRESETS
    m = MOE_PRESETS["mixtral-8x7b"].with_(num_experts=32)
    plan = P.Plan(dp=32, tp=2, pp=1, ep=32, recompute="selective", micro_batch_size=1, num_microbatches=1)
    st = SET.make_setting(m, Cluster(GPUS["gb200-nvl72"], 1), 32, 4096)
    assert st.topology.gpus_per_domain == 72
    values = 4096 / 2 * m.hidden_size
    expect = collective_cost(st.topology, "all_to_all", 2 * values * 2, 32, 32, "direct")
    assert expect.network_bytes == 0
    assert STEP.ep_seconds(st, plan) == pytest.approx(m.num_layers * 4 * expect.seconds, rel=1e-12)
    h100 = SET.make_setting(m, make_cluster("h100-80gb", 64), 32, 4096)
    across = collective_cost(h100.topology, "all_to_all", 2 * values * 2, 32, 4, "direct")
    assert STEP.ep_seconds(h100, plan) == pytest.approx(m.num_layers * 4 * across.seconds, rel=1e-12)


def test_fsdp_with_pipelining_reduces_once_per_step_as_torch_does():
    """torch 2.13's pipelining turns gradient sync off for every micro-batch (backward_maybe_with_nosync) and
    reduce-scatters once per step (perform_reduce_grad): the planner's collectives per step are chapter 12's
    (distlearn.nd_parallel.simulation, whose counts tests/test_labs_nd_parallel.py checks against the real engine):
    one reduce-scatter per FSDP group, fsdp_all_gathers' all-gathers (1 for ZeRO 2, one per forward that freed the
    weights for ZeRO 3). Its time: exposed after the flush; per_microbatch keeps the reduce-scatter of every
    micro-batch behind its backward."""
    from distlearn.core.topology import collective_cost
    from distlearn.nd_parallel import simulation as ND
    m = PRESETS["llama3-8b"]
    pp, mb = 4, 8
    st = SET.make_setting(m, make_cluster("h100-80gb", 32), 64, 2048)
    for zero in (2, 3):
        phases = dict(st.dp_collectives(zero, mb, pp))
        rs = [c for cs in phases.values() for c in cs if c.op == "reduce_scatter"]
        ag = [c for cs in phases.values() for c in cs if c.op == "all_gather"]
        lay = ND.Layout(pp=pp, dp=2, tp=1, zero_stage=zero, num_microbatches=mb)
        traffic = ND.group_traffic(get_preset("llama3-8b").with_(num_layers=8, vocab_size=64, hidden_size=64,
                                                                 num_heads=4, num_kv_heads=2, ffn_hidden_size=128),
                                   lay, 0, seq_len=16)
        per_group = {t.collective: t.calls for t in traffic if t.dim == "dp"}
        assert [c.times for c in rs] == [per_group["reduce_scatter"]] == [1]
        assert [c.times for c in ag] == [per_group["all_gather"]]
        assert per_group["all_gather"] == ND.fsdp_all_gathers(ND.one_f_one_b_order(pp, 0, mb), zero, True)
    plan = P.Plan(dp=8, tp=1, pp=pp, zero_stage=2, recompute="selective", micro_batch_size=1, num_microbatches=mb)
    e = P.evaluate(m, plan, global_batch=64, seq_len=2048, cluster=make_cluster("h100-80gb", 32))
    # the first stage's 8 layers and embedding in bf16, one collective per layer (a bucket) inside the node
    shard = 2 * (8 * m.layer_parameters() + m.embedding_parameters())
    one = lambda op: 8 * collective_cost(st.topology, op, shard / 8, 8, 8, "ring", rings=8).seconds  # noqa: E731
    assert e.time["dp_comm"] == pytest.approx(one("reduce_scatter") + one("all_gather"), rel=1e-12)
    each = P.evaluate(m, plan, global_batch=64, seq_len=2048, cluster=make_cluster("h100-80gb", 32),
                      grad_sync="per_microbatch")
    assert each.time["dp_comm"] == pytest.approx(one("all_gather"), rel=1e-12)  # the reduce-scatters hidden


def test_fine_grained_fp8_gemms_run_at_deepgemms_measured_speed():
    """DeepGEMM's README (H800 SXM5): 1426 TFLOP/s at M = 4096, N = 7168, K = 16384 — its best normal GEMM —
    of the 1979 TFLOP/s FP8 peak. A compute-bound FP8 GEMM of the DeepSeek-V3 recipe takes FLOPs / 1426e12;
    the Transformer Engine recipes (one scale per tensor) run at Bekman's measured FP8 share (H100: 1402.6 of
    1979; the H800 has the H100's compute)."""
    h800 = GPUS["h800"]
    assert K.FP8_BLOCK_CEILING["h800"] * h800.peak_fp8_flops == pytest.approx(1426e12)
    m = PRESETS["llama3-70b"]
    kw = dict(micro_batch=1, seq_len=8192, tp=8, attention="flash", gemm_peak=h800.peak_fp8_flops,
              peak=h800.peak_flops, gemm_bytes=1)
    block = K.layer_seconds(m, h800, fp8_block_scaled=True, **kw)
    tensor = K.layer_seconds(m, h800, **kw)
    flops = 2 * 8192 * FL.matmul_params_per_layer(m) / 8
    assert block.gemm_forward == pytest.approx(flops / 1426e12, rel=1e-12)
    assert K.FP8_GEMM_CEILING["h800"] * h800.peak_fp8_flops == pytest.approx(1402.6e12)
    assert tensor.gemm_forward == pytest.approx(flops / 1402.6e12, rel=1e-12)
    bf16 = K.layer_seconds(m, h800, **{**kw, "gemm_peak": h800.peak_flops, "gemm_bytes": 2})
    assert bf16.gemm_forward == pytest.approx(flops / (989e12 * 792.1 / 989), rel=1e-12)
    assert "deepseek-v3" in K.FINE_GRAINED_FP8_RECIPES and "te-fp8" not in K.FINE_GRAINED_FP8_RECIPES


def test_causal_mask_changes_the_flash_kernel_only():
    """A flash kernel skips the tiles above the diagonal: 65/128 of the scores at 8K (64 tiles of 128); the
    materialised attention of Megatron-LM 2021 computes them all, causal or not."""
    g = GPUS["h100-80gb"]
    m = PRESETS["llama3-70b"]
    kw = dict(micro_batch=1, seq_len=8192, tp=8, gemm_peak=g.peak_flops, peak=g.peak_flops)
    c, f = (K.layer_seconds(m, g, attention="flash", causal=x, **kw) for x in (True, False))
    assert c.attention_forward == pytest.approx(65 / 128 * f.attention_forward, rel=1e-12)
    assert c.attention_backward == pytest.approx(65 / 128 * f.attention_backward, rel=1e-12)
    c, f = (K.layer_seconds(m, g, attention="materialised", causal=x, **kw) for x in (True, False))
    assert c == f
    run = P.PUBLISHED_RUNS["megatron-gpt-145.6b"]
    kw = dict(global_batch=run["global_batch"], seq_len=run["seq_len"], cluster=P.published.run_cluster(run),
              precision=run["precision"])
    assert P.evaluate(run["model"], run["plan"], causal=True, **kw).time == P.evaluate(
        run["model"], run["plan"], causal=False, **kw).time


def test_blackwell_mi300x_and_fp8_ceilings_are_bekmans_measurements():
    """S. Bekman, ml-engineering, "Maximum Achievable Matmul FLOPS comparison table" (commit 744d01e, 2026-08-22):
    bf16 B200 1745.0 of 2250, GB200 1822.0 of 2500, MI300X 668.4 of 1300 TFLOP/s; FP8 H100 1402.6, H200 1453.4 of
    1979, B200 3432.5 of 4500, GB200 3615.6 of 5000. Each GPU has its own family (none falls back to the A100's
    85.9 %), and a compute-bound layer GEMM on a B200 takes FLOPs / 1745e12 in bf16, FLOPs / 3432.5e12 in FP8."""
    tflops = {("b200", "bf16"): 1745.0, ("gb200-nvl72", "bf16"): 1822.0, ("mi300x", "bf16"): 668.4,
              ("h100-80gb", "fp8"): 1402.6, ("h200", "fp8"): 1453.4, ("b200", "fp8"): 3432.5,
              ("gb200-nvl72", "fp8"): 3615.6}
    for (name, dtype), value in tflops.items():
        g = GPUS[name]
        family = K.gpu_family(g)
        assert family != "a100" and family in K.FLASH_SHARE
        table = K.GEMM_CEILING if dtype == "bf16" else K.FP8_GEMM_CEILING
        peak = g.peak_flops if dtype == "bf16" else g.peak_fp8_flops
        assert table[family] * peak == pytest.approx(value * 1e12, rel=1e-9), name
    b200, m = GPUS["b200"], PRESETS["llama3-70b"]
    flops = 2 * 8192 * FL.matmul_params_per_layer(m) / 8
    kw = dict(micro_batch=1, seq_len=8192, tp=8, attention="flash", peak=b200.peak_flops)
    assert K.layer_seconds(m, b200, gemm_peak=b200.peak_flops, **kw).gemm_forward == pytest.approx(
        flops / 1745e12, rel=1e-12)
    assert K.layer_seconds(m, b200, gemm_peak=b200.peak_fp8_flops, gemm_bytes=1, **kw).gemm_forward == pytest.approx(
        flops / 3432.5e12, rel=1e-12)
    # FP8 reaches less of its peak than bf16 on every GPU measured
    assert all(K.FP8_GEMM_CEILING[k] < K.GEMM_CEILING[k] for k in K.FP8_GEMM_CEILING)


def test_blackwell_flash_shares_are_nvidias_cudnn_benchmark():
    """NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training artifacts, bf16, head dim 128, 128 q / 8 kv heads,
    8,192 tokens, causal: B200 cuDNN 9.13.1 1171.278 / 942.509 TFLOP/s (forward / backward), GB200 cuDNN 9.17.0
    1584 / 1211. Recomputed from the CSV's times (1.877 ms / 5.833 ms on the B200) with the planner's own count:
    causal = half the scores, backward 2.5 x forward. A flash layer on a B200 takes those seconds."""
    s, heads, d = 8192, 128, 128
    fwd_flops = 4 * s * s * d * heads / 2
    assert fwd_flops / 1.877e-3 == pytest.approx(1171.278e12, rel=1e-3)
    assert K.FLASH_BACKWARD_FLOPS * fwd_flops / 5.833e-3 == pytest.approx(942.509e12, rel=1e-3)
    for name, (fwd, bwd) in {"b200": (1171.3, 942.5), "gb200-nvl72": (1584, 1211)}.items():
        g = GPUS[name]
        f, b = K.FLASH_SHARE[K.gpu_family(g)]
        assert (f * g.peak_flops, b * g.peak_flops) == (pytest.approx(fwd * 1e12), pytest.approx(bwd * 1e12))
    # the planner's attention core on a B200, one Llama 3 70B layer at TP 8, 8K tokens, causal kernel
    b200, m = GPUS["b200"], PRESETS["llama3-70b"]
    ls = K.layer_seconds(m, b200, micro_batch=1, seq_len=8192, tp=8, attention="flash", causal=True,
                         gemm_peak=b200.peak_flops, peak=b200.peak_flops)
    core = FL.attention_core_flops(m, 8192) / 8 * K.causal_fraction(8192)
    assert ls.attention_forward == pytest.approx(core / 1171.3e12, rel=1e-9)
    assert ls.attention_backward == pytest.approx(2.5 * core / 942.5e12, rel=1e-9)


def test_block_scaled_fp8_without_a_block_ceiling_falls_back_to_the_fp8_share():
    """DeepGEMM's ceiling exists only for Hopper; a block-scaled FP8 GEMM on a B200 runs at the B200's measured
    per-tensor FP8 share (3432.5 TFLOP/s), never at the bf16 share (which would make it faster than per-tensor FP8)."""
    b200, m = GPUS["b200"], PRESETS["llama3-70b"]
    flops = 2 * 8192 * FL.matmul_params_per_layer(m) / 8
    ls = K.layer_seconds(m, b200, micro_batch=1, seq_len=8192, tp=8, attention="flash", peak=b200.peak_flops,
                         gemm_peak=b200.peak_fp8_flops, gemm_bytes=1, fp8_block_scaled=True)
    assert "b200" not in K.FP8_BLOCK_CEILING
    assert ls.gemm_forward == pytest.approx(flops / 3432.5e12, rel=1e-12)

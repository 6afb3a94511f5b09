"""Planner (chapter 14): closed forms against independent counts, published runs, the search's exact shortcuts,
bad input, CLI. Speed is measured by ``make bench`` (benchmarks/bench_planner.py), not here."""
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from distlearn import planner as P
from distlearn import seeds_planning as S
from distlearn.comm import VirtualCluster
from distlearn.hardware import GPUS, make_cluster
from distlearn.memory import activation_bytes_per_layer, model_state_bytes
from distlearn.models import PRESETS
from distlearn.validate import DistlearnValueError


# ---------------------------------------------------------------- closed forms vs independent sources
def test_collective_times_come_from_the_cost_module(monkeypatch):
    """The planner's TP and DP communication times are distlearn.cost's α-β ring times (no copy of its own):
    checked by value, then by replacing cost's function and seeing the planner's times follow."""
    from distlearn import cost
    from distlearn.planner import formulas
    m = PRESETS["llama3-8b"]
    plan = P.Plan(dp=4, tp=2, pp=2, zero_stage=0, recompute="selective", micro_batch_size=1, num_microbatches=8)
    e = P.evaluate(m, plan, global_batch=32, seq_len=2048, gpu="h100-80gb", cluster=make_cluster("h100-80gb", 16))
    g = GPUS["h100-80gb"]
    first_layers = 16  # 32 layers on 2 stages
    shard = (first_layers * m.layer_parameters() + m.embedding_parameters()) / 2
    # ranks: tp innermost, then dp, so the tp × dp = 8 GPUs of a dp group share one node (NVLink)
    dp_time = cost.collective_time("ring_all_reduce", shard * 2, 4, alpha=P.ALPHA, bandwidth=g.nvlink_bw)
    assert e.time["dp_comm"] == pytest.approx(dp_time, rel=1e-12)  # pp > 1: the all-reduce is fully exposed
    tp_time = cost.collective_time("ring_all_reduce", 2 * 1 * 2048 * m.hidden_size, 2, alpha=P.ALPHA,
                                   bandwidth=g.nvlink_bw)
    assert e.time["tp_comm"] == pytest.approx(8 * first_layers * 4 * tp_time, rel=1e-12)
    monkeypatch.setattr(formulas, "collective_time", lambda *a, **k: 1.0)
    e2 = P.evaluate(m, plan, global_batch=32, seq_len=2048, cluster=make_cluster("h100-80gb", 16))
    assert e2.time["dp_comm"] == 1.0 and e2.time["tp_comm"] == 8 * first_layers * 4 * 1.0


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
    from distlearn import pipeline
    schedule = "1f1b" if v == 1 else "interleaved-1f1b"
    sim = pipeline.simulate(schedule, p, m, num_chunks=v)
    assert P.bubble_fraction(p, m, v) == pytest.approx(sim.bubble_fraction, rel=1e-12)
    assert P.bubble_fraction(p, m, v) < 1  # a share, unlike the ratio (7 for p = 8, m = 1)
    r = P.bubble_ratio(p, m, v)
    assert P.bubble_fraction(p, m, v) == pytest.approx(r / (1 + r))


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


# ---------------------------------------------------------------- published Megatron-LM runs
RATIO_BAND = (0.75, 1.25)  # predicted / published FLOP/s per GPU; one efficiency constant for both runs


@pytest.mark.parametrize("name", sorted(P.PUBLISHED_RUNS))
def test_published_runs_feasible_and_throughput_in_band(name):
    r = P.compare_published(name)
    assert r["fits"], r["estimate"].memory
    assert RATIO_BAND[0] <= r["ratio"] <= RATIO_BAND[1], r["ratio"]
    assert r["predicted_tokens_per_s"] / r["published_tokens_per_s"] == pytest.approx(r["ratio"], rel=1e-9)


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
        assert 0 < e.mfu < P.COMPUTE_EFFICIENCY + 1e-9
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
    with pytest.raises(DistlearnValueError) as e:
        P.evaluate(m, P.Plan(dp=2, tp=2, pp=2, zero_stage=3, num_microbatches=4), global_batch=8, seq_len=1024)
    assert e.value.param == "zero_stage"
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
    assert "整数个节点" in capsys.readouterr().out
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
    from distlearn.models import ModelConfig
    c = ModelConfig("tiny", arch, 96, 64, 2, 4, 256 if arch == "gpt" else 160, 32,
                    num_kv_heads=None if arch == "gpt" else 2)
    got = P.measured_flops(c, 3, 32)
    expected = sum(P.forward_flops(c, 3, 32).values())
    assert got["forward"] == expected
    assert got["backward"] == 2 * expected
    assert P.step_flops(c, 3, 32)["model"] == got["forward"] + got["backward"]


def test_custom_cluster_limits_tp_to_its_node():
    from distlearn.hardware import GPU, Cluster
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
    from distlearn.planner import formulas as F
    st = F.make_setting(model, cluster, batch, seq, **kw)
    fits = []
    for p in P.candidate_plans(model, cluster, batch):
        mem = F.plan_memory(st, p)
        if mem["total"] <= st.capacity:
            fits.append(F.estimate(st, p, mem))
    fits.sort(key=lambda e: (-e.tokens_per_s, e.memory["total"]))
    return fits


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["gpt2-small", "llama2-7b", "llama3-8b", "llama2-70b", "gpt3-175b"]),
       num_gpus=st.sampled_from([1, 2, 4, 8, 16, 32, 64]), gpu=st.sampled_from(sorted(GPUS)),
       batch=st.sampled_from([8, 16, 64, 96, 512]), seq=st.sampled_from([512, 2048, 8192, 32768]),
       top=st.sampled_from([1, 3, 10]))
def test_search_equals_brute_force(model, num_gpus, gpu, batch, seq, top):
    m, cluster = PRESETS[model], make_cluster(gpu, num_gpus)
    brute = _brute_force(m, cluster, batch, seq)
    full = P.search(m, global_batch=batch, seq_len=seq, cluster=cluster, suggest=False)
    assert full.plans == brute and full.num_evaluated == sum(1 for _ in P.candidate_plans(m, cluster, batch))
    assert P.search(m, global_batch=batch, seq_len=seq, cluster=cluster, suggest=False, top=top).plans == brute[:top]
    assert P.any_plan_fits(m, cluster, batch, seq) == bool(brute)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["gpt2-small", "llama2-13b", "llama3-70b"]), num_gpus=st.sampled_from([4, 8, 32]),
       batch=st.sampled_from([8, 64, 512]), seq=st.sampled_from([512, 4096, 16384]))
def test_smallest_plan_of_each_group_has_the_least_memory(model, num_gpus, batch, seq):
    """The claim the search's memory shortcut rests on: in every (tp, pp, ZeRO, recomputation) group, b = 1 and
    v = 1 need the least memory."""
    from distlearn.planner import formulas as F
    m, cluster = PRESETS[model], make_cluster("a100-80gb", num_gpus)
    st_ = F.make_setting(m, cluster, batch, seq)
    for group in P.candidate_groups(m, cluster, batch):
        for z in group.zero_stages:
            for r in ("none", "selective", "full"):
                least = F.plan_memory(st_, group.smallest(z, r))["total"]
                others = [F.plan_memory(st_, p)["total"] for p in group.plans(lambda z2, r2: (z2, r2) == (z, r))]
                assert least == pytest.approx(min(others), rel=1e-12)


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
    mixed, fp32 = P.evaluate(m, plan, **kw), P.evaluate(m, plan, precision="fp32", **kw)
    g = GPUS["h100-80gb"]
    assert fp32.time["compute"] == pytest.approx(mixed.time["compute"] * g.peak_flops / g.peak_flops_fp32)
    assert fp32.compute_peak == g.peak_flops_fp32 and mixed.compute_peak == g.peak_flops
    assert fp32.tokens_per_s < 0.6 * mixed.tokens_per_s and fp32.mfu < 0.6 * mixed.mfu
    assert fp32.memory["params"] == 2 * mixed.memory["params"]  # 4 bytes per weight instead of 2
    # fp32 activations (Llama, selective recomputation with flash attention: no masks, no log-sum-exp kept)
    assert fp32.memory["activations"] == pytest.approx(2 * mixed.memory["activations"], rel=1e-12)
    from distlearn.hardware import GPU, Cluster
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
    from distlearn.widgets import planner as explorer
    r = explorer.compute(model="gpt2-small", num_gpus=2048, global_batch=8)
    assert "global batch of 8" in r["no_fit"] and "全局批量" in r["no_fit"]
    assert "No single change" not in r["no_fit"] and r["num_evaluated"] == 0


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_table_and_cli_follow_the_language(capsys, lang):
    """Under one language the table has one header line in it, recompute modes are named in it, and the CLI's own
    lines (summary, legend, efficiency note) carry no line of the other language."""
    import distlearn
    from distlearn import lang_audit

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

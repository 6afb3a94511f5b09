"""Issue 36, the hardware and topology: the new GPU presets (B200, GB200 NVL72, MI300X), the topology model's α-β
times against closed forms and hand computations, the hierarchical all-reduce (simulated and on real gloo
processes), placement of each parallelism, and the HSDP lab."""
from __future__ import annotations

import pytest

from distlearn.core.hardware import GPUS, get_gpu, make_cluster, peak_flops
from distlearn.core.validate import DistlearnValueError


# ---------------------------------------------------------------- 1. presets
@pytest.mark.parametrize("name, memory, bf16, fp8, tf32, nvlink, network, hbm, node", [
    # datasheet figures, per GPU, dense (sparse / 2), per direction (bidirectional / 2), 400 Gb/s = 50 GB/s
    ("b200", 1440e9 / 8, 36e15 / 8 / 2, 72e15 / 8 / 2, 18e15 / 8 / 2, 1.8e12 / 2, 50e9, 64e12 / 8, 8),
    ("gb200-nvl72", 186e9, 360e15 / 72 / 2, 720e15 / 72 / 2, 180e15 / 72 / 2, 1.8e12 / 2, 50e9, 576e12 / 72, 72),
    # (130 TB/s of NVLink in all is 72 × 1.8 TB/s = 129.6 rounded)
    ("mi300x", 192e9, 1307.4e12, 5229.8e12 / 2, 1307.4e12 / 2, 7 * 128e9 / 2, 50e9, 5.3e12, 8),
])
def test_new_presets_carry_their_datasheet_figures(name, memory, bf16, fp8, tf32, nvlink, network, hbm, node):
    g = get_gpu(name)
    assert g.memory_bytes == pytest.approx(memory, rel=2e-3)   # 13.4 TB / 72 = 186.1 GB
    assert peak_flops(g, "bf16") == pytest.approx(bf16)
    assert peak_flops(g, "fp8") == pytest.approx(fp8)
    assert peak_flops(g, "fp32") == pytest.approx(tf32)
    assert g.nvlink_bw == pytest.approx(nvlink) and g.network_bw == pytest.approx(network)
    assert g.hbm_bw == pytest.approx(hbm) and g.gpus_per_node == node
    assert "datasheet" in g.source


def test_uncertain_figures_say_so_and_the_docstring_table_lists_every_preset():
    import distlearn.core.hardware as hw
    assert "uncertain" in GPUS["gb200-nvl72"].source and "uncertain" in GPUS["mi300x"].source
    for label in ("B200", "GB200 NVL72", "MI300X"):
        assert any(line.startswith(label + " ") for line in hw.__doc__.splitlines())


def test_a_gb200_cluster_is_whole_72_gpu_domains():
    assert make_cluster("gb200-nvl72", 144).num_nodes == 2
    assert make_cluster("gb200-nvl72", 64).gpus_per_node == 64
    with pytest.raises(DistlearnValueError) as e:
        make_cluster("gb200-nvl72", 256)
    assert e.value.param == "num_gpus" and "216" in str(e.value) and "288" in str(e.value)


# ---------------------------------------------------------------- 2. the topology model
import numpy as np  # noqa: E402

from distlearn.core.topology import Topology, collective_cost, group_placement, make_topology  # noqa: E402

H100 = make_topology("h100-80gb")


def test_topologies_built_from_presets():
    assert (H100.gpus_per_domain, H100.intra_bw, H100.network_bw, H100.gpus_per_host) == (8, 450e9, 50e9, 8)
    nvl = make_topology("gb200-nvl72")
    assert (nvl.gpus_per_domain, nvl.gpus_per_host, nvl.nics_per_host, nvl.intra_bw) == (72, 4, 4, 900e9)
    small = make_topology("h100-80gb", gpus_per_domain=4)
    assert (small.gpus_per_domain, small.gpus_per_host) == (4, 4)
    for bad in (dict(node="nvl36"), dict(gpus_per_domain=9), dict(gpus_per_domain=0)):
        with pytest.raises(DistlearnValueError):
            make_topology("h100-80gb", **bad)
    with pytest.raises(DistlearnValueError) as e:
        Topology("x", 8, 450e9, 50e9, gpus_per_host=3, nics_per_host=3)
    assert e.value.param == "gpus_per_host"


def test_rails_and_switch_hops():
    # 2 nodes of 8: GPU 3 of node 0 (rank 3) and GPU 3 of node 1 (rank 11) share rail 3: one leaf switch
    assert [H100.rail_of(r) for r in (0, 3, 11, 15)] == [0, 3, 3, 7]
    assert H100.switch_hops(3, 5) == 1 and H100.switch_hops(3, 11) == 1 and H100.switch_hops(3, 12) == 3
    assert H100.with_(rail_optimized=False).switch_hops(3, 11) == 3 and H100.switch_hops(4, 4) == 0
    nvl = make_topology("gb200-nvl72")   # 72 in one domain: NVLink reaches across the 18 trays
    assert nvl.switch_hops(0, 71) == 1 and nvl.rail_of(5) == 1


@pytest.mark.parametrize("g", [2, 4, 8])
def test_inside_one_domain_is_the_ring_formula_at_nvlink_speed(g):
    m = 1e9
    for op, c, steps in (("all_reduce", 2 * (g - 1) / g, 2 * (g - 1)), ("all_gather", (g - 1) / g, g - 1),
                         ("reduce_scatter", (g - 1) / g, g - 1)):
        t = H100.with_(alpha_intra=1e-5)
        cost = collective_cost(t, op, m, g)
        assert cost.domains == 1 and cost.network_bytes == 0
        assert cost.seconds == pytest.approx(steps * 1e-5 + c * m / 450e9)
        assert cost.intra_bytes == pytest.approx(c * m)


def test_the_docstring_example_by_hand():
    """16 H100s in 2 nodes, 1 GB: one ring 2·15/16·1e9/50e9 = 37.5 ms; hierarchical 1.944 + 2.5 + 1.944 ms."""
    ring = collective_cost(H100, "all_reduce", 1e9, 16)
    hier = collective_cost(H100, "all_reduce", 1e9, 16, algorithm="hierarchical")
    assert ring.seconds == pytest.approx(0.0375) and ring.network_bytes == pytest.approx(1.875e9)
    assert [lv.seconds * 1e3 for lv in hier.levels] == pytest.approx([7 / 8 / 0.45, 2.5, 7 / 8 / 0.45])
    assert hier.network_bytes == pytest.approx(0.125e9)        # 2·(1/2)·1e9/8: k = 8 times less per NIC than M
    assert hier.intra_bytes == pytest.approx(2 * 7 / 8 * 1e9)
    # NCCL's 8 rings, one per NIC: the network term 2·15/16·1e9/(8·50e9) = 4.6875 ms
    assert collective_cost(H100, "all_reduce", 1e9, 16, rings=8).seconds == pytest.approx(4.6875e-3)


@pytest.mark.parametrize("d, k", [(2, 4), (4, 8), (3, 2), (9, 8)])
def test_hierarchical_closed_forms(d, k):
    t = H100.with_(alpha_intra=2e-6, alpha_network=1e-5)
    m, g = 6e8, d * k
    ar = collective_cost(t, "all_reduce", m, g, per_domain=k, algorithm="hierarchical")
    expect = (2 * (k - 1) * 2e-6 + 2 * (k - 1) / k * m / 450e9
              + 2 * (d - 1) * 1e-5 + 2 * (d - 1) / d * m / k / 50e9)
    assert ar.seconds == pytest.approx(expect)
    ag = collective_cost(t, "all_gather", m, g, per_domain=k, algorithm="hierarchical")
    rs = collective_cost(t, "reduce_scatter", m, g, per_domain=k, algorithm="hierarchical")
    assert ag.seconds == pytest.approx(rs.seconds) == pytest.approx(expect / 2)
    assert ag.network_bytes == pytest.approx((d - 1) / d * m / k)


def test_all_to_all_inside_and_across():
    m = 8e8
    inside = collective_cost(H100, "all_to_all", m, 8, algorithm="direct")
    assert inside.seconds == pytest.approx(7 / 8 * m / 450e9)
    across = collective_cost(H100, "all_to_all", m, 16, algorithm="direct")
    assert across.seconds == pytest.approx(8 / 16 * m / 50e9)          # half the data leaves the node, at 50 GB/s
    assert across.network_bytes == pytest.approx(m / 2)
    spread = collective_cost(H100, "all_to_all", m, 8, per_domain=1, algorithm="direct")
    assert spread.seconds == pytest.approx(7 / 8 * m / 50e9)           # 9× slower than inside: 450 / 50


def test_collective_cost_refuses_bad_input():
    for kw, param in ((dict(operation="gather"), "operation"), (dict(per_domain=3), "per_domain"),
                      (dict(rings=9), "rings"), (dict(algorithm="direct"), "algorithm"),
                      (dict(nbytes=-1), "nbytes")):
        args = dict(operation="all_reduce", nbytes=1e6, group=16) | kw
        with pytest.raises(DistlearnValueError) as e:
            collective_cost(H100, **args)
        assert e.value.param == param
    assert group_placement(H100, [0, 8, 16]) == (3, 1) and group_placement(H100, range(16)) == (2, 8)
    with pytest.raises(DistlearnValueError):
        group_placement(H100, [0, 1, 8])


# ---------------------------------------------------------------- 3. hierarchical all-reduce: simulated, then real
from distlearn.collectives.hierarchical import simulate_hierarchical_all_reduce  # noqa: E402


@pytest.mark.parametrize("d, k, length", [(2, 4, 16), (3, 2, 12), (2, 8, 64), (4, 1, 8)])
def test_simulated_hierarchical_equals_flat_and_its_bytes_equal_the_model(d, k, length):
    rng = np.random.default_rng(0)
    xs = [rng.integers(-50, 50, size=length).astype(np.int64) for _ in range(d * k)]
    run = simulate_hierarchical_all_reduce(xs, k)
    total = np.sum(xs, axis=0)
    assert all(np.array_equal(o, total) for o in run.outputs)
    m = length * 8
    model = collective_cost(make_topology("h100-80gb", gpus_per_domain=k), "all_reduce", m, d * k,
                            algorithm="hierarchical")
    if d * k > 1 and k > 1:
        for lv in model.levels:
            assert run.bytes_per_level[lv.name].mean() == pytest.approx(lv.nbytes)
    fl = [rng.standard_normal(length) for _ in range(d * k)]
    out = simulate_hierarchical_all_reduce(fl, k).outputs
    assert all(np.allclose(o, np.sum(fl, axis=0), rtol=1e-12, atol=1e-12) for o in out)


def test_simulation_refuses_a_grouping_that_does_not_divide():
    with pytest.raises(DistlearnValueError) as e:
        simulate_hierarchical_all_reduce([np.zeros(6)] * 6, 4)
    assert e.value.param == "gpus_per_domain"


def test_real_gloo_hierarchical_all_reduce_equals_one_flat_all_reduce():
    """8 gloo processes as 2 "nodes" of 4: the three stages give the flat all-reduce's sum, bit for bit for int64,
    to rounding for float32; the bytes of each stage equal the model's levels."""
    from distlearn.collectives.lab import hierarchical_all_reduce
    from distlearn.core.launch import run
    res = run(hierarchical_all_reduce, 8, 4, 32)
    for r in res:
        assert r["flat"].dtype == np.int64 and np.array_equal(r["flat"], r["hierarchical"])
    model = collective_cost(make_topology("h100-80gb", gpus_per_domain=4), "all_reduce", 32 * 8, 8,
                            algorithm="hierarchical")
    assert [(name, sent) for name, _, _, sent in res[0]["levels"]] == [(lv.name, lv.nbytes) for lv in model.levels]
    res = run(hierarchical_all_reduce, 4, 2, 8, 0, "float32")
    for r in res:
        assert r["flat"].dtype == np.float32 and np.allclose(r["flat"], r["hierarchical"], rtol=1e-6)


# ---------------------------------------------------------------- 4. placement
from distlearn.core.models import get_preset  # noqa: E402
from distlearn.core.topology import placement  # noqa: E402

LLAMA70 = get_preset("llama3-70b")


def _rows(order, topo=H100, **layout):
    return {r.name: r for r in placement(topo, LLAMA70, order=order, **(dict(tp=8, pp=4, dp=2) | layout))}


def test_tp_inside_the_node_by_hand():
    """Llama 3 70B, 64 H100s, tp 8 innermost: 80/4 = 20 layers × 8 micro-batches × 4 all-reduces = 640 calls of
    8192 tokens × 8192 × 2 bytes = 134.2 MB, each 2·7/8·134.2e6 / 450e9 s."""
    r = _rows("tp-cp-ep-dp-pp")
    tp = r["tp"]
    assert (tp.size, tp.stride, tp.domains, tp.per_domain, tp.calls) == (8, 1, 1, 8, 640)
    assert tp.nbytes == 8192 * 8192 * 2
    assert tp.seconds == pytest.approx(640 * 2 * 7 / 8 * 8192 * 8192 * 2 / 450e9) and tp.slowdown == pytest.approx(1)
    # dp: the 2 replicas are a node apart; one all-reduce of this GPU's bf16 gradients, P/(tp·pp) values
    p = sum(LLAMA70.layer_parameters(i) for i in range(80)) + LLAMA70.embedding_parameters() \
        + LLAMA70.lm_head_parameters()
    assert r["dp"].nbytes == pytest.approx(p / 32 * 2) and (r["dp"].domains, r["dp"].per_domain) == (2, 1)
    assert r["dp"].seconds == pytest.approx(p / 32 * 2 / 50e9)          # 2·(1/2)·M at 50 GB/s
    assert r["pp"].seconds == pytest.approx(16 * 8192 * 8192 * 2 / 50e9) and r["pp"].stride == 16


def test_tp_spanning_nodes_costs_what_the_model_says():
    two = _rows("dp-tp-cp-ep-pp")["tp"]          # stride 2: 4 GPUs in each of 2 nodes
    assert (two.domains, two.per_domain) == (2, 4)
    m = 8192 * 8192 * 2
    ring4 = 2 * 7 / 8 * m / (4 * 50e9)                                 # 4 rings, one per NIC
    hier = 2 * 3 / 4 * m / 450e9 + 2 * 1 / 2 * m / 4 / 50e9
    assert two.seconds == pytest.approx(640 * min(ring4, hier))
    eight = _rows("dp-pp-cp-ep-tp")["tp"]        # stride 8: one GPU in each of 8 nodes
    assert (eight.domains, eight.per_domain) == (8, 1)
    assert eight.slowdown == pytest.approx(450 / 50)                     # 9×: the network instead of NVLink
    nvl = _rows("dp-pp-cp-ep-tp", make_topology("gb200-nvl72"))["tp"]  # all 64 GPUs in one 72-GPU domain
    assert nvl.domains == 1 and nvl.slowdown == pytest.approx(1)


def test_placement_refuses_bad_layouts():
    for kw, param in ((dict(order="tp-dp-pp"), "order"), (dict(ep=2), "ep"), (dict(tp=0), "tp"),
                      (dict(pp=3), "tp")):
        with pytest.raises(DistlearnValueError) as e:
            placement(H100, LLAMA70, **(dict(tp=8, pp=4, dp=2) | kw))
        assert e.value.param == param
    with pytest.raises(DistlearnValueError) as e:   # 15 ranks of gradient group on nodes of 8: 8 + 7, uneven
        placement(H100, LLAMA70, tp=1, cp=5, dp=3, order="cp-tp-ep-dp-pp", seq_len=5 * 2048)
    assert e.value.param == "ranks"


# ---------------------------------------------------------------- 5. HSDP
def _bytes(calls, op, group):
    """Bytes a ring sends per rank for the recorded calls of ``op`` on groups of ``group`` ranks (fp32)."""
    share = 2 * (group - 1) / group if op == "all_reduce" else (group - 1) / group
    return sum(share * n * 4 for o, n, g in calls if o == op and g == group)


def test_hsdp_equals_flat_fsdp_and_one_process_and_its_traffic_is_the_model():
    """4 gloo ranks: FSDP2 on a 2×2 mesh (shard inside "nodes" of 2, replicate across) and on a flat mesh of 4 give
    one process's losses and parameters after 2 SGD steps; HSDP's reduce-scatter stays inside the node and only an
    all-reduce of half the gradients crosses it, the first two levels of the hierarchical all-reduce."""
    import numpy as np
    from distlearn.core.launch import run
    from distlearn.zero_fsdp.lab import reference_parameters, train_hsdp
    ref = reference_parameters()
    hsdp, flat = run(train_hsdp, 4, 2), run(train_hsdp, 4)
    for res in (hsdp, flat):
        assert res[0]["losses"] == pytest.approx(ref["losses"], rel=1e-6)
        for name, value in ref["params"].items():
            assert np.allclose(res[0]["params"][name], value, rtol=1e-5, atol=1e-6), name
    calls, padded = hsdp[0]["calls"], hsdp[0]["padded_numel"]
    assert {(o, g) for o, _, g in calls} == {("all_gather", 2), ("reduce_scatter", 2), ("all_reduce", 2)}
    assert sum(n for o, n, _ in calls if o == "reduce_scatter") == padded
    assert sum(n for o, n, _ in calls if o == "all_reduce") == padded // 2
    model = collective_cost(make_topology("h100-80gb", gpus_per_domain=2), "all_reduce", padded * 4, 4,
                            algorithm="hierarchical")
    assert _bytes(calls, "reduce_scatter", 2) == pytest.approx(model.levels[0].nbytes)   # inside the node
    assert _bytes(calls, "all_reduce", 2) == pytest.approx(model.levels[1].nbytes)       # across, on M/2
    fcalls = flat[0]["calls"]
    assert {(o, g) for o, _, g in fcalls} == {("all_gather", 4), ("reduce_scatter", 4)}
    assert sum(n for o, n, _ in fcalls if o == "reduce_scatter") == flat[0]["padded_numel"]


def test_chapter02_prose_numbers_are_the_closed_forms():
    """Chapter 02, "Where the bytes travel": every time its prose quotes, recomputed here from the ring formulas
    (Patarasuk & Yuan 2009) and the datasheet bandwidths, 450 GB/s NVLink and 50 GB/s per NIC (H100), 900 GB/s
    (GB200 NVL72); both languages quote the same figures."""
    from pathlib import Path

    md = (Path(__file__).resolve().parents[1] / "notebooks" / "02_collectives.md").read_text(encoding="utf-8")
    start = md.index("## Where the bytes travel")
    section = md[start:md.index("## The same collectives with real processes")]
    m, nvl, net = 14e9, 450e9, 50e9
    inside = 2 * 7 / 8 * m / nvl
    ring = lambda g, bw: 2 * (g - 1) / g * m / bw                                  # noqa: E731
    across = lambda d: 2 * (d - 1) / d * (m / 8) / net                             # noqa: E731
    times_ms = {"inside": inside, "one ring": ring(16, net), "8 rings": ring(16, 8 * net),
                "hierarchical": inside + across(2), "network, 2 nodes": across(2),
                "network, 64 nodes": across(64), "bound": 2 * m / 8 / net}
    want = [f"{t * 1e3:.1f} ms" for t in times_ms.values()]
    assert want == ["54.4 ms", "525.0 ms", "65.6 ms", "89.4 ms", "35.0 ms", "68.9 ms", "70.0 ms"]
    for text in want[:-1]:
        assert section.count(text) >= 2, text                                       # English and Chinese
    assert section.count("= 70 ms") == 2
    tp = 8192 * 8192 * 2                                                             # bytes per all-reduce
    p = sum(LLAMA70.layer_parameters(i) for i in range(80)) + LLAMA70.embedding_parameters() \
        + LLAMA70.lm_head_parameters()
    step = {"tp inside": 640 * 2 * 7 / 8 * tp / nvl, "tp across": 640 * 2 * 7 / 8 * tp / net,
            "dp across": p / 32 * 2 / net, "tp on NVL72": 640 * 2 * 7 / 8 * tp / 900e9}
    for t in step.values():
        assert section.count(f"{t:.3f} s") >= 2, t
    assert f"{step['tp across'] / step['tp inside']:.1f} times" in section and "9.0 倍" in section


# ---------------------------------------------------------------- 5. what the planner reads (issue 38)
def test_per_domain_places_a_strided_group_on_the_domains():
    """A group of n ranks spaced s apart shares a domain of D GPUs with min(n, D // s) of its members (rounded down
    to a divisor of n): EP 64 with tp 1 → 8 per 8-GPU node; DP with tp 8 → 1; tp 2 → 4; a GB200 NVL72 domain holds
    16 of a stride-4 group, 8 of 128 at stride 8 (9 would not divide 128)."""
    from distlearn.core.topology import make_topology, per_domain
    h100, nvl = make_topology("h100-80gb"), make_topology("gb200-nvl72")
    cases = [(h100, 64, 1, 8), (h100, 64, 8, 1), (h100, 128, 2, 4), (h100, 4, 1, 4), (h100, 16, 16, 1),
             (nvl, 16, 4, 16), (nvl, 128, 8, 8), (nvl, 64, 1, 64)]
    assert [per_domain(t, n, s) for t, n, s, _ in cases] == [k for *_, k in cases]
    with pytest.raises(DistlearnValueError) as e:
        per_domain(h100, 0, 1)
    assert e.value.param == "size"


def test_best_collective_is_the_faster_closed_form():
    """All-reduce of 1 GB on 16 H100s: 2 nodes × 8 → 8 rings, one per NIC: 2·15/16·1e9 / (8 × 50e9) = 4.6875 ms,
    faster than the hierarchical 6.39 ms (the docstring example); 16 nodes × 1 → the one ring at 50 GB/s, 37.5 ms;
    inside one node the ring at 450 GB/s; an all-to-all is the direct one."""
    from distlearn.core.topology import best_collective, collective_cost, make_topology
    t = make_topology("h100-80gb")
    two = best_collective(t, "all_reduce", 1e9, 16, 8)
    assert two.algorithm == "ring" and two.seconds == pytest.approx(2 * 15 / 16 * 1e9 / 400e9, rel=1e-12)
    assert collective_cost(t, "all_reduce", 1e9, 16, 8, "hierarchical").seconds == pytest.approx(6.39e-3, abs=1e-5)
    one = best_collective(t, "all_reduce", 1e9, 16, 1)
    assert one.seconds == pytest.approx(2 * 15 / 16 * 1e9 / 50e9, rel=1e-12)
    assert best_collective(t, "all_gather", 1e9, 8).seconds == pytest.approx(7 / 8 * 1e9 / 450e9, rel=1e-12)
    # few NICs per domain against a slow network: the hierarchical one wins (k = 2 rings of 1 GB/s vs NVLink)
    slow = t.with_(network_bw=1e9)
    tree = best_collective(slow, "all_reduce", 1e9, 16, 2)
    assert tree.algorithm == "hierarchical" and tree.seconds < collective_cost(
        slow, "all_reduce", 1e9, 16, 2, "ring", rings=2).seconds
    assert best_collective(t, "all_to_all", 1e9, 16, 8).algorithm == "direct"


def test_node_limited_dispatch_halves_deepseeks_infiniband_bytes():
    """DeepSeek-V3 (§2.1.2, §3.2.2): EP 64 over 8 H800 nodes, k = 8 experts per token on at most M = 4 nodes. Per
    token of X bytes: unrestricted, 56 of the 64 expert GPUs sit on other nodes, 8·56/64 = 7 X over InfiniBand;
    node-limited, one copy per remote target node, 4 × 7/8 = 3.5 X (the targets are the own node 1 time in 2),
    and every copy off its landing GPU forwarded over NVLink, 8 × 7/8 = 7 X. IB-bound both ways (3.5 X / 50 GB/s
    > 7 X / 160 GB/s): the time halves. M ≥ d routes to all d − 1 other domains once."""
    from distlearn.core.hardware import GB_S
    from distlearn.core.topology import Topology, collective_cost, dispatch_cost
    h800 = Topology("h800", 8, 160 * GB_S, 50 * GB_S, alpha_network=5e-6)
    X = 4096 * 7168 * (1 + 4 / 128)  # one micro-batch of tokens in FP8 with its 1 x 128 scales
    free = dispatch_cost(h800, X, 8, 64, 8)
    limited = dispatch_cost(h800, X, 8, 64, 8, max_domains=4)
    assert free == collective_cost(h800, "all_to_all", 8 * X, 64, 8, "direct")
    assert free.network_bytes == pytest.approx(7 * X) and limited.network_bytes == pytest.approx(3.5 * X)
    assert limited.intra_bytes == pytest.approx(7 * X)
    assert limited.seconds == pytest.approx(63 * 5e-6 + 3.5 * X / 50e9, rel=1e-12)
    assert free.seconds == pytest.approx(63 * 5e-6 + 7 * X / 50e9, rel=1e-12)
    assert dispatch_cost(h800, X, 8, 32, 8, max_domains=4).network_bytes == pytest.approx(3 * X)  # 4 nodes: all 3
    assert dispatch_cost(h800, X, 8, 16, 8, max_domains=4).network_bytes == pytest.approx(X)  # 2 nodes: the other
    assert dispatch_cost(h800, X, 8, 8, 8, max_domains=4).network_bytes == 0   # inside one node
    with pytest.raises(DistlearnValueError) as e:
        dispatch_cost(h800, X, 8, 64, 8, max_domains=0)
    assert e.value.param == "max_domains"

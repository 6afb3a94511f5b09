"""Chapter 12's model of a composed run (distlearn.nd_parallel), checked against independent sources: the loop
reference of the mesh order, Llama 3's Table 4 layouts, PyTorch's own parameter count, torch.chunk, ring
closed forms. The real run (8 gloo ranks) is in tests/test_labs_nd_parallel.py."""
import itertools

import pytest
import torch

from distlearn import nd_parallel as N
from distlearn.comm import ring_bytes_per_rank
from distlearn.models import build_model
from distlearn.validate import DistlearnValueError

SHAPES = [(2, 2, 1, 2), (1, 2, 2, 1), (2, 3, 2, 2), (4, 1, 1, 2), (1, 1, 1, 8), (3, 2, 1, 1)]


@pytest.mark.parametrize("shape", SHAPES)
def test_groups_equal_the_loop_reference_and_partition_the_ranks(shape):
    for dim in N.DIMS:
        gs = N.groups(shape, dim)
        assert gs == N.reference_groups(shape, dim)
        assert sorted(r for g in gs for r in g) == list(range(N.Layout(*shape).world_size))
        assert all(len(g) == shape[N.DIMS.index(dim)] for g in gs)
        for g in gs:
            for r in g:
                assert N.group_of(r, shape, dim) == g
    for r in range(N.Layout(*shape).world_size):
        assert N.rank_of(N.coords(r, shape), shape) == r


def test_tp_is_innermost_the_example_of_the_docstring():
    assert N.groups((2, 2, 1, 2), "tp") == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert N.groups((2, 2, 1, 2), "dp") == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert N.groups((2, 2, 1, 2), "pp") == [[0, 4], [1, 5], [2, 6], [3, 7]]


@pytest.mark.parametrize("row", N.LLAMA3_405B_LAYOUTS, ids=lambda r: f"{r['gpus']}-cp{r['cp']}")
def test_llama3_table4_layouts_put_tp_inside_a_node(row):
    """Dubey et al. 2024, Table 4: the degrees multiply to the GPU count; with 8 GPUs per node and tp innermost,
    every tp group is one node and every other dimension crosses nodes."""
    lay = N.Layout(pp=row["pp"], dp=row["dp"], cp=row["cp"], tp=row["tp"])
    assert lay.world_size == row["gpus"]
    assert N.nodes_spanned(lay, "tp", 8) == 1
    for dim in ("cp", "dp", "pp"):
        if getattr(lay, dim) > 1:
            assert N.nodes_spanned(lay, dim, 8) == getattr(lay, dim)
    # the same degrees with tp outermost would put each tp group on 8 nodes
    assert N.nodes_spanned((row["tp"], row["dp"], row["cp"], row["pp"]), "pp", 8) == row["tp"]   # tp in the pp slot


@pytest.mark.parametrize("pp,tp", [(1, 1), (2, 2), (4, 1), (3, 4), (2, 4)])
def test_stage_parameters_add_up_to_pytorchs_count(pp, tp):
    """Summed over stages and tensor-parallel ranks, and over the FSDP shards of one of them, the course's counts
    equal PyTorch's numel of the model (the RMSNorm weights are replicated tp times)."""
    cfg = N.TOY_MODEL
    model = build_model(cfg, device="meta")
    total = sum(p.numel() for p in model.parameters())
    norms = sum(p.numel() for n, p in model.named_parameters() if "norm" in n)
    for dp in (1, 2, 3):
        lay = N.Layout(pp=pp, dp=dp, tp=tp)
        # every replica's dp shards together hold the replica once (torch.chunk of each tensor's rows)
        one_replica = sum(N.stage_parameters(cfg, lay, N.rank_of({"pp": s, "dp": d, "tp": t}, lay))
                          for s in range(pp) for d in range(dp) for t in range(tp))
        assert one_replica == total - norms + norms * tp
    names = [n for s in range(pp) for n, _ in N.stage_parameter_shapes(cfg, pp, s, 1)]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters())
    for s in range(pp):
        shapes = dict(N.stage_parameter_shapes(cfg, pp, s, 1))
        assert all(tuple(model.get_parameter(n).shape) == sh for n, sh in shapes.items())


def test_fsdp_chunk_sizes_are_torch_chunk():
    for n, parts in itertools.product(range(0, 12), range(1, 6)):
        sizes = [c.shape[0] for c in torch.arange(n).chunk(parts)] if n else []
        sizes += [0] * (parts - len(sizes))
        assert [N._chunk(n, parts, i) for i in range(parts)] == sizes


def test_one_f_one_b_order_is_chapter_05s():
    from distlearn.pipeline import stage_order

    for pp, m in [(2, 2), (2, 3), (4, 8), (3, 5), (4, 2)]:
        for stage in range(pp):
            ops = "".join(k for k, _, _ in stage_order("1f1b", stage, pp, m))
            assert ops == N.one_f_one_b_order(pp, stage, m), (pp, m, stage)


def test_fsdp_all_gathers_rules():
    assert N.fsdp_all_gathers("FB", 3, pipelined=False) == 2          # gather for forward, again for backward
    assert N.fsdp_all_gathers("FB", 2, pipelined=False) == 1          # ZeRO-2 keeps them until the backward
    assert N.fsdp_all_gathers("FFBB", 3, pipelined=True) == 3
    assert N.fsdp_all_gathers("FBFB", 3, pipelined=True) == 3


def test_traffic_bytes_are_ring_closed_forms():
    lay = N.Layout(pp=2, dp=2, tp=2, micro_batch_size=1, num_microbatches=2)
    t = N.group_traffic(N.TOY_MODEL, lay, 0, seq_len=16)
    h = N.TOY_MODEL.hidden_size
    act = next(x for x in t if x.dim == "tp" and x.collective == "all_gather")
    assert act.bytes_per_call == 4 * 1 * 16 * h and act.calls == 4 * 2 * 2 + 2
    assert act.bytes_sent == act.calls * act.bytes_per_call / 2
    send = next(x for x in t if x.dim == "pp" and x.collective == "send")
    assert send.bytes_per_call == 4 * 16 * h / 2 and send.bytes_sent == 2 * send.bytes_per_call
    for x in t:
        if x.collective not in ("send", "recv"):
            assert x.bytes_sent == pytest.approx(x.calls * ring_bytes_per_rank(x.collective, x.bytes_per_call,
                                                                               x.group_size))
    assert set(N.bytes_sent_per_step(t)) == {"tp", "pp", "dp"}


def test_bad_input_raises_bilingual_errors():
    with pytest.raises(DistlearnValueError):
        N.Layout(tp=0)
    with pytest.raises(DistlearnValueError):
        N.coords(8, (2, 2, 1, 2))
    with pytest.raises(DistlearnValueError):
        N.stage_parameter_shapes(N.TOY_MODEL, 1, 0, tp=3)
    with pytest.raises(DistlearnValueError):
        N.predict_rank_memory(N.TOY_MODEL, N.Layout(cp=2), 0, seq_len=16)
    with pytest.raises(DistlearnValueError):
        N.group_traffic(N.TOY_MODEL, N.Layout(dp=2, zero_stage=0), 0, seq_len=16)


def test_the_numbers_chapter_12_quotes_for_llama3_405b():
    """Chapter 12 §3 and exercise 3's answer: rank 0 of tp 8 × pp 16 × dp 64, bf16, 16 micro-batches of one 8K
    sequence: pipeline about half a GB per step, FSDP over 10 GB with ZeRO-2 and over 100 GB with ZeRO-3."""
    from distlearn.models import PRESETS

    m = PRESETS["llama3.1-405b"]
    sent = {z: N.bytes_sent_per_step(N.group_traffic(m, N.Layout(pp=16, dp=64, tp=8, zero_stage=z,
                                                                  num_microbatches=16), 0, seq_len=8192,
                                                     activation_bytes=2)) for z in (2, 3)}
    assert 0.4e9 < sent[2]["pp"] < 0.6e9 and sent[2]["pp"] == sent[3]["pp"]
    assert 10e9 < sent[2]["dp"] < 100e9 < sent[3]["dp"]
    assert sent[3]["tp"] > sent[3]["dp"]      # tp sends the most, inside the node

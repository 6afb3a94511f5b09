"""Chapter 12's model of a composed run (distlearn.nd_parallel.simulation), checked against independent sources: the loop
reference of the mesh order, Llama 3's Table 4 layouts, PyTorch's own parameter count, torch.chunk, ring
closed forms. The real runs (8 gloo ranks) are chapter 12's own, checked by nbval, and
tests/test_labs_nd_parallel.py's."""
import itertools

import numpy as np
import pytest
import torch

from distlearn.nd_parallel import simulation as N
from distlearn.core.comm import ring_bytes_per_rank
from distlearn.core.models import build_model
from distlearn.core.validate import DistlearnValueError

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


@pytest.mark.parametrize("row", N.LLAMA3_405B_LAYOUTS, ids=lambda r: f"{r['gpus']}-cp{r['cp']}")
def test_llama3_table4_rows_give_16m_tokens_and_the_papers_tflops(row):
    """Table 4: every row trains 2**24 ("16M") tokens per step = dp × batch size/DP × sequence; MFU = TFLOPs/GPU
    over the H100's 989 dense BF16 TFLOP/s to within a percentage point (400/989 = 40.4 % is printed 41 %: the
    table rounds its TFLOPs). The chapter's example layout is built from
    the row: one sequence per micro-batch, so num_microbatches = batch size/DP (32 on 8,192 GPUs, not 16)."""
    assert row["dp"] * row["batch_size_per_dp"] * row["seq_len"] == 2 ** 24
    assert abs(row["tflops_per_gpu"] / 989 - row["bf16_mfu"]) < 0.01
    lay = N.llama3_layout(row)
    assert lay.world_size == row["gpus"] and lay.global_batch * row["seq_len"] == 2 ** 24
    assert lay.zero_stage == 2          # Llama 3 does not reshard after forward (§3.3.2)


def test_llama3_long_context_dp_is_8_not_the_printed_4():
    """arXiv v1 of Table 4 prints DP 4 for the 128K row; 4 gives neither the 16,384 GPUs nor the 16M tokens."""
    from distlearn.context_parallel.simulation import LLAMA3_405B_LONG_CONTEXT as long
    row = N.LLAMA3_405B_LAYOUTS[2]
    assert {k: row[k] for k in ("gpus", "tp", "cp", "pp", "dp", "seq_len")} == \
        {k: long[k] for k in ("gpus", "tp", "cp", "pp", "dp", "seq_len")}
    assert 8 * 16 * 16 * 4 != row["gpus"] and 4 * row["batch_size_per_dp"] * row["seq_len"] != 2 ** 24


def test_llama3_order_dp_outermost_spans_the_same_nodes():
    """Llama 3's order [TP, CP, PP, DP] (inside out) puts dp outermost; with tp = 8 = GPUs per node every group of
    an outer dimension still spans as many nodes as its size, as in torchtitan's (pp, dp, cp, tp)."""
    for row in N.LLAMA3_405B_LAYOUTS:
        llama_order = (row["dp"], row["pp"], row["cp"], row["tp"])     # slots: (pp, dp, cp, tp) of the helpers
        assert N.nodes_spanned(llama_order, "pp", 8) == row["dp"]    # the dp group sits in the outermost slot
        assert N.nodes_spanned(llama_order, "dp", 8) == row["pp"]
        assert N.nodes_spanned(llama_order, "tp", 8) == 1


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
    from distlearn.pipeline_parallel.schedules import stage_order

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
    """Chapter 12 §3: rank 0 of tp 8 × pp 16 × dp 64, bf16, Table 4's 32 sequences per replica as 32 micro-batches
    of one 8K sequence: the pipeline sends m·s·h/tp·2 bytes (1.07 GB); tp the most. Exercise 3's answer: the 16,384-GPU
    row (dp 128, 16 per replica): pipeline about 0.5 GB, FSDP about 14 GB with ZeRO-2 (one all-gather and one
    reduce-scatter of the stage's 6.9 GB shard), over 100 GB with ZeRO-3 (17 all-gathers: 16 forwards + the first
    backward)."""
    from distlearn.core.models import PRESETS

    m = PRESETS["llama3.1-405b"]
    h, s = m.hidden_size, 8192

    def sent(row, z):
        return N.bytes_sent_per_step(N.group_traffic(m, N.llama3_layout(row, z), 0, seq_len=s, activation_bytes=2))

    small, big = N.LLAMA3_405B_LAYOUTS[:2]
    assert N.llama3_layout(small).num_microbatches == 32
    assert sent(small, 2)["pp"] == 32 * s * h // 8 * 2 and sent(small, 3)["tp"] > sent(small, 3)["dp"]
    assert 0.5e9 < sent(big, 2)["pp"] == 16 * s * h // 8 * 2 < 0.6e9
    shard = 2 * sum(int(np.prod(shape)) for _, shape in N.stage_parameter_shapes(m, 16, 0, 8))
    assert sent(big, 2)["dp"] == pytest.approx(2 * shard * 127 / 128, rel=1e-3)
    assert 13e9 < sent(big, 2)["dp"] < 15e9
    assert sent(big, 3)["dp"] == pytest.approx(18 * shard * 127 / 128, rel=1e-3) and sent(big, 3)["dp"] > 100e9


def test_every_traffic_description_has_its_chinese():
    """The chapter prints ``what`` in the reader's language: every description group_traffic can return is in
    WHAT_ZH (toy layouts with every dimension, both ends of the pipeline, ZeRO 2 and 3)."""
    seen = set()
    for lay in (N.Layout(pp=2, dp=2, tp=2, micro_batch_size=1, num_microbatches=2),
                N.Layout(dp=2, cp=2, tp=2, micro_batch_size=1, num_microbatches=1)):
        for rank in range(lay.world_size):
            for t in N.group_traffic(N.TOY_MODEL, lay, rank, seq_len=N.TOY_SEQ):
                seen.add(t.what)
    assert seen and seen <= set(N.WHAT_ZH), seen - set(N.WHAT_ZH)


def test_memory_terms_and_traffic_labels_follow_the_language():
    """Every key of RankMemory.terms has its Chinese (TERMS_ZH), and GroupTraffic.label() switches language."""
    from distlearn.core import i18n

    keys = set()
    for lay in (N.Layout(pp=2, dp=2, tp=2, micro_batch_size=1, num_microbatches=2),
                N.Layout(dp=2, tp=2, micro_batch_size=1, num_microbatches=1)):
        for rank in range(lay.world_size):
            keys |= set(N.predict_rank_memory(N.TOY_MODEL, lay, rank, seq_len=N.TOY_SEQ).terms)
    assert {"layers", "head", "logits"} <= keys <= set(N.TERMS_ZH), keys - set(N.TERMS_ZH)
    t = N.group_traffic(N.TOY_MODEL, N.Layout(pp=2, dp=2, tp=2, micro_batch_size=1, num_microbatches=2), 0,
                        seq_len=N.TOY_SEQ)[0]
    old = i18n.get_language()
    try:
        i18n.set_language("en")
        assert t.label() == t.what
        i18n.set_language("zh")
        assert t.label() == N.WHAT_ZH[t.what] and i18n._CJK.search(t.label())
    finally:
        i18n.set_language(old)


def test_torchrun_layout_fits_any_world_size():
    """``torchrun -m distlearn.nd_parallel.lab`` runs on any rank count (it once divided by 4 and failed on 2)."""
    from distlearn.nd_parallel.lab import torchrun_layout

    for ws, want in {1: (1, 1, 1), 2: (1, 2, 1), 3: (3, 1, 1), 4: (1, 2, 2), 6: (3, 2, 1), 8: (2, 2, 2)}.items():
        lay = torchrun_layout(ws)
        assert (lay.dp, lay.tp, lay.pp) == want and lay.dp * lay.tp * lay.pp * lay.cp == ws

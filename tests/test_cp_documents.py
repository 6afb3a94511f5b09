"""Packed sequences under context parallelism (distlearn.context_parallel.packed, chapter 10's document-mask section).

Independent sources: attention computed separately per document (numpy, and PyTorch's own SDPA per document slice),
brute-force pair counts, PyTorch 2.13's load balancers (_HeadTailLoadBalancer, _PerDocumentHeadTailLoadBalancer) and
its context-parallel source (what it supports for masks). A deliberate break (the averaging merge; a mask that
forgets the documents) shows that the comparisons can fail."""
import inspect

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from distlearn.context_parallel import packed as P
from distlearn.context_parallel import simulation as C
from distlearn.core.validate import DistlearnValueError

TOL = 1e-12
CASES = [((24, 8, 16, 16), 2), ((24, 8, 16, 16), 4), ((12, 6, 18, 12), 3), ((5, 11), 2), ((16,), 4),
         ((1, 1, 1, 1, 4), 2), ((8, 8, 8), 1)]


def _qkv(s, seed=0, b=2, a=4, kv=2, d=8):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((b, a, s, d)), rng.standard_normal((b, kv, s, d)), rng.standard_normal((b, kv, s, d))


def _layouts(lengths, cp):
    out = []
    for layout in P.PACKED_LAYOUTS:
        try:
            P.packed_positions(lengths, cp, layout)
        except DistlearnValueError:
            continue
        out.append(layout)
    return out


def test_document_ids_and_mask_by_hand():
    assert P.document_ids([3, 2]).tolist() == [0, 0, 0, 1, 1]
    docs = P.document_ids([3, 2])
    m = P.document_mask(np.arange(5), np.arange(5), docs)
    want = np.array([[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 1, 1]], bool)
    assert (m == want).all()
    # a query chunk of rank 1 against a key chunk of rank 0, global positions / rank 1 的查询片段对 rank 0 的键片段
    assert P.document_mask([3, 4], [0, 1, 2], docs).sum() == 0
    assert P.document_mask([2], [0, 1, 2], docs).tolist() == [[True, True, True]]


def test_per_document_reference_equals_pytorch_sdpa_per_document():
    lengths = (24, 8, 16, 16)
    q, k, v = _qkv(64)
    ref = P.per_document_attention(q, k, v, lengths)
    outs, start = [], 0
    for n in lengths:
        sl = slice(start, start + n)
        outs.append(F.scaled_dot_product_attention(*(torch.from_numpy(x[:, :, sl]) for x in (q, k, v)),
                                                   is_causal=True, enable_gqa=True))
        start += n
    assert np.abs(ref.out - torch.cat(outs, 2).numpy()).max() < TOL


@pytest.mark.parametrize("lengths,cp", CASES)
def test_global_mask_on_shards_equals_per_document_attention(lengths, cp):
    s = sum(lengths)
    q, k, v = _qkv(s, seed=cp)
    ref = P.per_document_attention(q, k, v, lengths)
    for layout in _layouts(lengths, cp):
        for fn in (P.packed_ring_attention, P.packed_allgather_attention):
            r = fn(q, k, v, lengths, cp, layout=layout)
            assert np.abs(r.out - ref.out).max() < TOL, (fn.__name__, layout)
            assert np.abs(r.lse - ref.lse).max() < TOL
            assert r.work.sum() == sum(n * (n + 1) // 2 for n in lengths)


@pytest.mark.parametrize("lengths,cp", CASES)
def test_every_mode_computes_its_effective_mask(lengths, cp):
    s = sum(lengths)
    q, k, v = _qkv(s, seed=10 + cp)
    for layout in _layouts(lengths, cp):
        for mode in P.MASK_MODES:
            for fn, variant in ((P.packed_ring_attention, "ring"), (P.packed_allgather_attention, "all-gather")):
                r = fn(q, k, v, lengths, cp, layout=layout, mode=mode)
                m = P.effective_mask(lengths, cp, layout=layout, mode=mode, variant=variant)
                one = C.block_attention(q, k, v, mask=m)
                assert np.abs(r.out - one.out).max() < TOL, (layout, mode, variant)
                assert r.work.sum() == m.sum()


def test_the_mistakes_differ_from_per_document_attention_where_they_should():
    lengths, s = (24, 8, 16, 16), 64
    q, k, v = _qkv(s)
    ref = P.per_document_attention(q, k, v, lengths).out
    err = lambda **kw: np.abs(P.packed_ring_attention(q, k, v, lengths, **kw).out - ref).max()
    for cp in (2, 4):
        for layout in P.PACKED_LAYOUTS:
            assert err(cp=cp, layout=layout, mode="causal-only") > 0.1
            assert err(cp=cp, layout=layout, mode="local") > 0.1
        assert err(cp=cp, layout="contiguous", mode="unrestored") < TOL     # no re-ordering: nothing to restore
        assert err(cp=cp, layout="zigzag", mode="unrestored") > 0.1
    # one document: the causal mask is the document mask / 只有一个文档时，因果掩码就是文档掩码
    q1, k1, v1 = _qkv(16)
    assert np.abs(P.packed_ring_attention(q1, k1, v1, (16,), 2, mode="causal-only").out
                  - C.full_attention(q1, k1, v1, causal=True).out).max() < TOL


def test_causal_only_is_plain_causal_attention():
    lengths = (24, 8, 16, 16)
    m = P.effective_mask(lengths, 4, layout="zigzag", mode="causal-only")
    assert (m == np.tril(np.ones((64, 64), bool))).all()
    g = P.effective_mask(lengths, 4, layout="zigzag", mode="global")
    assert (g == P.effective_mask(lengths, 1, layout="contiguous")).all()


def test_deliberate_break_is_caught(monkeypatch):
    """Break the simulation on purpose: average the blocks instead of weighting them by their softmax mass."""
    lengths = (24, 8, 16, 16)
    q, k, v = _qkv(64)
    ref = P.per_document_attention(q, k, v, lengths).out
    monkeypatch.setattr(P, "merge_blocks", C.averaging_merge)
    assert np.abs(P.packed_ring_attention(q, k, v, lengths, 2).out - ref).max() > 1e-3


def test_layouts_equal_pytorch_load_balancers():
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import (
        _HeadTailLoadBalancer, _PerDocumentHeadTailLoadBalancer)

    for lengths, cp in (((24, 8, 16, 16), 2), ((24, 8, 16, 16), 4), ((12, 6, 18, 12), 3)):
        ours = P.packed_positions(lengths, cp, "document-zigzag")
        theirs = _PerDocumentHeadTailLoadBalancer([list(lengths)], cp, "cpu")._generate_indices()[0].numpy()
        # PyTorch lists the pieces document by document, rank by rank inside each; ours rank by rank
        # PyTorch 按文档排列各片段（文档内再按 rank）；我们按 rank 排列
        starts = np.concatenate([[0], np.cumsum(lengths)])
        for r in range(cp):
            pieces = [theirs[a:b].reshape(cp, -1)[r] for a, b in zip(starts[:-1], starts[1:])]
            assert ours[r].tolist() == np.concatenate(pieces).tolist()
        head_tail = _HeadTailLoadBalancer(sum(lengths), cp, "cpu")._generate_indices()[0]
        assert np.concatenate(P.packed_positions(lengths, cp, "zigzag")).tolist() == head_tail.tolist()


def _brute_work(lengths, pos):
    docs = [d for d, n in enumerate(lengths) for _ in range(n)]
    return [sum(1 for i in p for j in range(len(docs)) if j <= i and docs[j] == docs[i]) for p in pos]


@pytest.mark.parametrize("lengths,cp", CASES)
def test_document_work_counts(lengths, cp):
    for layout in _layouts(lengths, cp):
        w = P.document_work(lengths, cp, layout)
        assert w.tolist() == _brute_work(lengths, P.packed_positions(lengths, cp, layout))
        assert w.sum() == sum(n * (n + 1) // 2 for n in lengths)
        if layout == "document-zigzag":        # closed form: every document's triangle split evenly
            c = [n // (2 * cp) for n in lengths]
            assert w.tolist() == [sum(x * (x + 1) + (2 * cp - 1) * x * x for x in c)] * cp


def test_zigzag_does_not_balance_documents_but_per_document_zigzag_does():
    lengths = (24, 8, 16, 16)
    z = P.document_work(lengths, 4, "zigzag")
    assert z.max() / z.mean() > 1.3
    d = P.document_work(lengths, 4, "document-zigzag")
    assert d.max() == d.min()


def test_chunk_mask_modes_by_hand():
    lengths = (3, 5)                 # documents 0: tokens 0-2, 1: tokens 3-7 / 文档 0：词元 0-2，文档 1：词元 3-7
    # rank 1 (tokens 4-7, contiguous cp = 2) against rank 0's keys (0-3) / rank 1（词元 4-7）对 rank 0 的键（0-3）
    g = P.chunk_mask([4, 5, 6, 7], [0, 1, 2, 3], lengths)
    assert g[:, 3].all() and not g[:, :3].any()
    local = P.chunk_mask([4, 5, 6, 7], [0, 1, 2, 3], lengths, mode="local")
    # local: queries believe positions 0-3, all document 0; keys believe 0-3 with documents 0,0,0,1 / 本地编号
    assert local.tolist() == [[True, False, False, False], [True, True, False, False], [True, True, True, False],
                              [True, True, True, False]]
    with pytest.raises(DistlearnValueError):
        P.chunk_mask([9], [0], lengths)
    with pytest.raises(DistlearnValueError):
        P.packed_positions((5, 11), 2, "document-zigzag")


def test_torch_213_context_parallel_masks_what_the_chapter_says():
    """The Under-the-hood aside: SDPA under CP takes is_causal only (attn_bias raises); flex_attention's CP path
    all-gathers K/V and rewrites the mask_mod to global (restored) indices."""
    from torch.distributed.tensor.experimental._context_parallel import _attention as A

    src = inspect.getsource(A)
    assert torch.__version__.startswith("2.13")
    assert src.count('raise NotImplementedError("attn_bias is not supported yet")') == 2
    assert "def _create_cp_block_mask" in src and "qkv_idx_restore" in src
    assert "flex_cp_allgather(" in inspect.getsource(A._ContextParallel.flex_input_fn)
    block = inspect.getsource(A._create_cp_block_mask)
    assert "Q_LEN % (device_mesh.size() * _DEFAULT_SPARSE_BLOCK_SIZE)" in block and "torch.compile(" in block


def test_loss_of_a_trained_model_under_each_mistake():
    from distlearn.context_parallel.lab import PACKED_LENGTHS, packed_loss

    masks = {m: P.effective_mask(PACKED_LENGTHS, 2, layout="zigzag", mode=m) for m in P.MASK_MODES}
    loss = packed_loss(masks)
    for m in ("causal-only", "local", "unrestored"):
        assert loss[m] > loss["global"] + 0.05, (m, loss)
    # the global mask is the one-process per-document mask: same loss / 全局掩码就是单进程的按文档掩码：损失相同
    again = packed_loss({"one-process": P.effective_mask(PACKED_LENGTHS, 1, layout="contiguous"), **masks})
    assert abs(again["one-process"] - loss["global"]) < 1e-6


@pytest.mark.slow
def test_lab_three_ranks_equals_per_document_sdpa():
    from distlearn.context_parallel.lab import packed_check
    from distlearn.core import launch

    lengths = (12, 6, 18, 12)
    cases = (("contiguous", True), ("zigzag", True), ("document-zigzag", True), ("zigzag", False))
    by_rank = launch.run(packed_check, 3, lengths, cases, 1, 6, 3, 4, timeout=300)
    for case in cases:
        err = max(max(r[case]["out_err"], r[case]["grad_err"]) for r in by_rank)
        assert (err < TOL) if case[1] else (err > 0.1), (case, err)
        kw = dict(seq_len=48, num_heads=6, num_kv_heads=3, head_dim=4, cp=3, dtype_bytes=8, grad_bytes=8)
        assert by_rank[0][case]["fwd_bytes"] == C.cp_comm_bytes("ring", **kw).bytes_per_rank
        assert by_rank[0][case]["bwd_bytes"] == C.cp_comm_bytes("ring", **kw, pass_="backward").bytes_per_rank


def test_pytorch_per_document_indices_sharded_contiguously():
    """The aside's observation: PyTorch 2.13's per-document indices, cut into cp equal contiguous pieces (what
    _context_parallel_buffers does with Shard(seq_dim)), do not give each rank its pieces of every document."""
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import _PerDocumentHeadTailLoadBalancer

    lengths = (24, 8, 16, 16)
    idx = _PerDocumentHeadTailLoadBalancer([list(lengths)], 2, "cpu")._generate_indices()[0].numpy()
    docs = P.document_ids(lengths)
    work = [int(P.document_mask(p, np.arange(64), docs).sum()) for p in idx.reshape(2, -1)]
    assert work == [336, 272]
    assert P.document_work(lengths, 2, "document-zigzag").tolist() == [304, 304]


@pytest.mark.slow
@pytest.mark.extended
def test_pytorch_flex_context_parallel_with_a_document_mask():
    """PyTorch 2.13's own CP for flex attention takes a document BlockMask: on 2 gloo processes, head-tail
    layout, it equals per-document SDPA (and not plain causal attention). Slow: torch.compile builds the mask."""
    from distlearn.context_parallel.lab import torch_flex_check
    from distlearn.core import launch

    for r in launch.run(torch_flex_check, 2, timeout=900):
        assert r["err_documents"] < 1e-5, r
        assert r["err_causal"] > 0.1, r


def test_chapter_stored_outputs_are_right():
    """What chapter 10 stores for its packed-sequence section: the gloo lab on 2 and 4 processes equal to
    per-document SDPA (and far from it without document ids), and the work table equal to document_work."""
    import re

    from stored_outputs import stored_text

    from distlearn.context_parallel.lab import PACKED_LENGTHS

    lines = [ln for ln in stored_text("10_context_parallel", "launch.run(packed_check").splitlines() if "processes" in ln]
    assert len(lines) == 8
    good = [ln for ln in lines if "no document ids" not in ln]
    assert len(good) == 6 and all(ln.split(" / ")[0].endswith("< 1e-12") for ln in good)
    for ln in lines:
        if "no document ids" in ln:
            assert float(ln.split(" / ")[0].rsplit(": ", 1)[1]) > 1
    work = stored_text("10_context_parallel", "K.document_work(")
    for cp in (2, 4):
        for layout in P.PACKED_LAYOUTS:
            pairs = "  ".join(f"{x:3d}" for x in P.document_work(PACKED_LENGTHS, cp, layout))
            assert re.search(rf"^{cp}\s.*{re.escape(pairs)}", work, re.M), (cp, layout)

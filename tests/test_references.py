"""Each chapter's readable reference algorithm (shown in the chapter) == the package's fast implementation.

Ring all-reduce as two step loops (chapter 02) vs ``VirtualCluster.all_reduce``; FSDP1's flat-parameter shard and
gather in torch (chapter 06) vs ``fsdp.flatten_and_shard`` / ``gather_flat``; 1F1B as warm-up / steady / cool-down
loops (chapter 05) vs the vectorized ``pipeline.stage_order`` and ``pipeline.simulate``; top-k routing with capacity as
loops (chapter 11) vs ``experts.route``; the KV cache counted layer by layer (chapter 15) vs
``generation.kv_bytes_per_token``.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from distlearn.zero_fsdp import simulation as fsdp
from distlearn.pipeline_parallel import schedules as P
from distlearn.core.comm import VirtualCluster, reference_ring_all_reduce

times = st.floats(0.05, 10.0, allow_nan=False, allow_infinity=False)


# ---------------------------------------------------------------- chapter 02: ring all-reduce
@settings(max_examples=120, deadline=None)
@given(n=st.integers(1, 9), length=st.integers(0, 40), floats=st.booleans(), data=st.data())
def test_ring_all_reduce_reference_equals_virtual_cluster(n, length, floats, data):
    elems = st.floats(-1e6, 1e6, allow_nan=False) if floats else st.integers(-1000, 1000)
    dtype = np.float64 if floats else np.int64
    xs = [np.array(data.draw(st.lists(elems, min_size=length, max_size=length)), dtype=dtype) for _ in range(n)]
    ref = reference_ring_all_reduce(xs)
    fast = VirtualCluster(n).all_reduce(xs)
    assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(ref, fast))  # same additions, same order
    if not floats:
        assert all(np.array_equal(a, np.sum(xs, axis=0)) for a in ref)               # exact for integers


def test_ring_all_reduce_reference_keeps_shape_and_inputs():
    xs = [np.arange(12.0).reshape(3, 4) * (r + 1) for r in range(3)]
    before = [x.copy() for x in xs]
    out = reference_ring_all_reduce(xs)
    assert all(o.shape == (3, 4) and np.array_equal(o, sum(before)) for o in out)
    assert all(np.array_equal(x, b) for x, b in zip(xs, before))                    # inputs untouched


# ---------------------------------------------------------------- chapter 06: flat parameter shard / pad / gather
shapes = st.lists(st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple), min_size=1, max_size=5)


@settings(max_examples=120, deadline=None)
@given(shape_list=shapes, world_size=st.integers(1, 9))
def test_flat_shard_reference_equals_flatten_and_shard(shape_list, world_size):
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=g, dtype=torch.float64) for s in shape_list]
    fast = fsdp.flatten_and_shard(params, world_size)
    ref = [fsdp.reference_flat_shard(params, world_size, r) for r in range(world_size)]
    assert [t.numel() for t in ref] == [fast.shard_size] * world_size
    assert all(np.array_equal(t.numpy(), s) for t, s in zip(ref, fast.shards))      # same data, same padding
    back = fsdp.reference_flat_gather(ref, shape_list)
    assert all(b.shape == p.shape and torch.equal(b, p) for b, p in zip(back, params))
    fast_back = fsdp.gather_flat(fast.shards, fast.shapes)
    assert all(np.array_equal(a, b.numpy()) for a, b in zip(fast_back, back))


# ---------------------------------------------------------------- chapter 05: 1F1B
@settings(max_examples=150, deadline=None)
@given(p=st.integers(1, 10), m=st.integers(1, 24))
def test_1f1b_reference_order_equals_stage_order(p, m):
    for s in range(p):
        fast = [(k, j) for k, j, _ in P.stage_order("1f1b", s, p, m)]
        assert P.reference_1f1b_order(s, p, m) == fast


@settings(max_examples=150, deadline=None)
@given(p=st.integers(1, 8), m=st.integers(1, 16), data=st.data())
def test_1f1b_reference_timeline_equals_simulate(p, m, data):
    per_stage = data.draw(st.booleans())
    f = data.draw(st.lists(times, min_size=p, max_size=p)) if per_stage else data.draw(times)
    b = data.draw(st.lists(times, min_size=p, max_size=p)) if per_stage else data.draw(times)
    comm = data.draw(st.one_of(st.just(0.0), st.floats(0.0, 3.0, allow_nan=False)))
    ref = P.reference_1f1b(p, m, fwd_time=f, bwd_time=b, p2p_time=comm)
    fast = P.simulate("1f1b", p, m, fwd_time=f, bwd_time=b, p2p_time=comm)
    assert len(ref) == len(fast.events) == 2 * p * m
    for x, y in zip(ref, fast.events):
        assert (x.stage, x.kind, x.microbatch, x.chunk, x.end) == (y.stage, y.kind, y.microbatch, y.chunk, y.end)
        assert x.start == pytest.approx(y.start, rel=1e-12, abs=1e-12)  # fast one stores end − duration
    assert max(e.end for e in ref) == fast.total_time


def test_1f1b_reference_catches_a_wrong_warmup():
    """The comparison can fail: one warm-up forward too many (GPipe-like) changes the timeline."""
    p, m = 4, 8
    right_order = P.reference_1f1b_order

    def wrong_order(stage, num_stages, num_microbatches):
        order = right_order(stage, num_stages, num_microbatches)
        if stage == 1:                                    # F before B: warm-up of p − s instead of p − s − 1
            i = order.index(("B", 0))
            order[i], order[i + 1] = order[i + 1], order[i]
        return order

    right = P.reference_1f1b(p, m)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(P, "reference_1f1b_order", wrong_order)
        wrong = P.reference_1f1b(p, m)
    assert right == P.simulate("1f1b", p, m).events
    assert wrong != right


@pytest.mark.parametrize("kwargs", [dict(num_stages=0, num_microbatches=2), dict(num_stages=2, num_microbatches=0),
                                    dict(num_stages=2, num_microbatches=2, fwd_time=[1.0]),
                                    dict(num_stages=2, num_microbatches=2, p2p_time=-1.0)])
def test_1f1b_reference_rejects_bad_input(kwargs):
    from distlearn.core.validate import DistlearnValueError

    with pytest.raises(DistlearnValueError):
        P.reference_1f1b(**kwargs)


# ---------------------------------------------------------------- chapter 10: the online softmax, one key at a time
@settings(max_examples=60, deadline=None)
@given(cp=st.integers(1, 4), layout=st.sampled_from(["contiguous", "zigzag", "striped"]), causal=st.booleans(),
       chunks=st.integers(1, 2), groups=st.sampled_from([1, 2]), seed=st.integers(0, 10_000))
def test_online_softmax_reference_equals_ring_attention(cp, layout, causal, chunks, groups, seed):
    from distlearn.context_parallel import simulation as C

    s = chunks * (2 * cp if layout == "zigzag" else cp)
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, 2 * groups, s, 3))
    k, v = rng.standard_normal((1, 2, s, 3)), rng.standard_normal((1, 2, s, 3))
    ref_out, ref_lse = C.reference_online_attention(q, k, v, causal)
    ring = C.ring_attention_forward(q, k, v, cp, causal=causal, layout=layout)
    assert np.abs(ref_out - ring.out).max() < 1e-12 and np.abs(ref_lse - ring.lse).max() < 1e-12


# ---------------------------------------------------------------- chapter 11: top-k routing with capacity
@settings(max_examples=150, deadline=None)
@given(t=st.integers(1, 30), e=st.integers(1, 10), data=st.data(),
       cf=st.one_of(st.none(), st.floats(0.1, 3.0)), seed=st.integers(0, 10_000))
def test_reference_route_equals_route(t, e, data, cf, seed):
    from distlearn.experts import simulation as X

    k = data.draw(st.integers(1, e))
    logits = np.random.default_rng(seed).standard_normal((t, e)) * 2     # continuous: no ties
    experts, weights, kept = X.reference_route(logits, k, cf)
    r = X.route(logits, k, capacity_factor=cf)
    np.testing.assert_array_equal(np.array(experts), r.index)
    np.testing.assert_array_equal(np.array(kept), r.kept)
    np.testing.assert_allclose(np.array(weights), r.weights, rtol=1e-12, atol=1e-15)


# ---------------------------------------------------------------- chapter 15: KV-cache bytes per token
@settings(max_examples=150, deadline=None)
@given(layers=st.integers(1, 128), kv=st.sampled_from([1, 2, 4, 8]), group=st.sampled_from([1, 2, 4, 8]),
       head_dim=st.sampled_from([16, 64, 128]), mla=st.booleans(), lora=st.integers(1, 1024),
       rope=st.integers(0, 128), width=st.sampled_from([1, 2, 4]))
def test_kv_cache_reference_loop_equals_the_closed_form(layers, kv, group, head_dim, mla, lora, rope, width):
    from distlearn.core.models import MLA, ModelConfig
    from distlearn.post_training.generation import kv_bytes_per_token, reference_kv_bytes_per_token

    heads = kv * group
    config = ModelConfig("m", "llama", 100, heads * head_dim, layers, heads, 64, 64, num_kv_heads=kv,
                         mla=MLA(None, lora, 16, rope, 16) if mla else None)
    assert reference_kv_bytes_per_token(config, width) == kv_bytes_per_token(config, width)

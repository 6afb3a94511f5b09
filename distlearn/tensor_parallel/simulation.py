"""Tensor parallelism (Megatron-LM style) simulated on a :class:`~distlearn.core.comm.VirtualCluster`.

Every function here computes with real numpy arrays, one per rank, and moves data between ranks only through the
cluster's collectives, which count the bytes each rank sends. Forward *and* backward are written out by hand, so
every collective is visible; the tests compare each result with the unsharded computation (numpy and PyTorch
autograd) and each byte count with the closed forms below.

Conventions
-----------
- A linear layer is ``y = x @ W + b`` with ``W`` of shape ``(d_in, d_out)``. PyTorch's ``nn.Linear.weight`` is
  ``W.T`` (shape ``(d_out, d_in)``), so a *column* split of ``W`` is a split of ``nn.Linear.weight`` along dim 0
  (DTensor ``ColwiseParallel``: ``Shard(0)``), and a *row* split of ``W`` is a split along dim 1
  (``RowwiseParallel``: ``Shard(1)``).
- Activations have shape ``(s, b, h)``: sequence first, as in Megatron-LM, so sequence parallelism splits axis 0,
  which is the axis :meth:`VirtualCluster.all_gather` / ``reduce_scatter`` work on.

Sources: Shoeybi et al. 2019, *Megatron-LM* (§3, Fig. 3: the f and g operators); Korthikanti et al. 2022,
*Reducing Activation Recomputation in Large Transformer Models* (§4.2: sequence parallelism, the g / ḡ operators);
Megatron-LM ``megatron/core/tensor_parallel/{layers,mappings}.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from distlearn.core.comm import VirtualCluster
from distlearn.core.i18n import bi
from distlearn.core.validate import (DistlearnValueError, array, check_bool, check_choice, check_int, check_text, checks,
                                     each, mapping, record)
from distlearn.core.guard import read_only

__all__ = [
    "simulate_tensor_parallelism", "shard_columns", "shard_rows",
    "column_parallel_forward", "column_parallel_backward", "row_parallel_forward", "row_parallel_backward",
    "megatron_mlp", "reference_mlp", "parallel_attention", "reference_attention",
    "sequence_parallel_mlp_block", "reference_mlp_block", "block_comm", "layer_comm_bytes",
    "layer_weight_bytes", "layer_activation_bytes", "CommRecord", "TPResult", "gelu", "gelu_grad",
    "comm_counts", "sp_saved_bytes", "SP_SCHEMES",
]


# ---------------------------------------------------------------- records
#: Chinese for every :attr:`CommRecord.label` and phase the simulations write (a test checks none is missing).
LABELS_ZH = read_only({
    "column: gather output": "列并行：收集输出",
    "f backward: all-reduce dX": "f 反向：对 dX 做 AllReduce",
    "g forward: all-reduce partial sums": "g 前向：对部分和做 AllReduce",
    "ḡ forward: reduce-scatter": "ḡ 前向：ReduceScatter",
    "g forward: all-gather sequence": "g 前向：沿序列 AllGather",
    "ḡ backward: all-gather dY": "ḡ 反向：对 dY 做 AllGather",
    "re-gather LN output for dW1": "为计算 dW1 重新收集 LN 输出",
    "g backward: reduce-scatter dLN": "g 反向：对 dLN 做 ReduceScatter",
    "all-reduce LayerNorm and bias grads": "对 LayerNorm 和偏置的梯度做 AllReduce",
    "step: all-reduce Partial LN weight grad": "优化器更新：对 Partial 的 LN 权重梯度做 AllReduce",
    "step: all-reduce Partial LN bias grad": "优化器更新：对 Partial 的 LN 偏置梯度做 AllReduce",
    "forward": "前向",
    "backward": "反向",
    "step": "优化器更新",
})

#: The two ways to run a sequence-parallel block (see :func:`sequence_parallel_mlp_block`).
SP_SCHEMES = ("megatron", "pytorch")


@dataclass
class CommRecord:
    """One collective: what it is for, which collective, forward or backward, and bytes sent by each rank."""

    label: str
    op: str
    phase: str
    bytes_per_rank: int

    def label_text(self) -> str:
        """``label`` in the current language (:func:`distlearn.core.i18n.bi`), e.g. "f backward: all-reduce dX / …"."""
        return bi(self.label, LABELS_ZH[self.label])

    def phase_text(self) -> str:
        """``phase`` ("forward" / "backward") in the current language."""
        return bi(self.phase, LABELS_ZH[self.phase])


@dataclass
class TPResult:
    """Result of a simulated tensor-parallel computation.

    ``output``: the full output (assembled from the ranks, for comparison); ``grads``: full gradients by name,
    assembled from the ranks' shards; ``local``: per-rank dicts of the shards each rank holds (weights and
    gradients); ``comm``: the collectives in order; ``bytes_sent``: total bytes sent per rank (array of tp).
    """

    output: np.ndarray
    grads: dict
    local: list
    comm: list = field(default_factory=list)
    bytes_sent: np.ndarray | None = None

    def bytes_by_phase(self) -> dict:
        """Bytes sent per rank, summed over the collectives of each phase (forward / backward, and "step" for
        reductions deferred to the optimizer step)."""
        out = {"forward": 0, "backward": 0}
        for c in self.comm:
            out[c.phase] = out.get(c.phase, 0) + c.bytes_per_rank
        return out


CLUSTER = record(VirtualCluster, "VirtualCluster(2)")


@checks(records=each(record(CommRecord, "megatron_mlp(...).comm[0]"), min_len=0))
def comm_counts(records) -> dict:
    """How many collectives of each kind each phase runs: ``{phase: {op: count}}`` from a list of
    :class:`CommRecord` (e.g. ``TPResult.comm``), in the shape :func:`distlearn.tensor_parallel.lab.tp_check`
    reports what PyTorch's ``CommDebugMode`` counted, so the two compare with ``==``. Phases with no collective are
    left out."""
    out: dict = {}
    for c in records:
        phase = out.setdefault(c.phase, {})
        phase[c.op] = phase.get(c.op, 0) + 1
    return out


@checks(counts=mapping(numbers=False))
def comm_text(counts: dict) -> str:
    """``{phase: {op: count}}`` (:func:`comm_counts`, or what the lab counted) as one line in the current
    language, e.g. ``forward: 1 × all_reduce; backward: 1 × all_reduce`` / ``前向：1 次 all_reduce；反向：1 次 all_reduce``."""
    parts_en, parts_zh = [], []
    for phase, ops in counts.items():
        parts_en.append(f"{phase}: " + ", ".join(f"{n} × {op}" for op, n in ops.items()))
        parts_zh.append(f"{LABELS_ZH.get(phase, phase)}：" + "，".join(f"{n} 次 {op}" for op, n in ops.items()))
    return bi("; ".join(parts_en) or "none", "；".join(parts_zh) or "无")


def _traced(cluster: VirtualCluster, log: list | None, label: str, phase: str, op: str, *args, **kw):
    before = int(cluster.bytes_sent[0])
    result = getattr(cluster, op)(*args, **kw)
    if log is not None:
        log.append(CommRecord(label, op, phase, int(cluster.bytes_sent[0]) - before))
    return result


def _gather_last(cluster, shards, log, label, phase):
    """All-gather along the last axis (the cluster gathers axis 0: move the axis there and back)."""
    gathered = _traced(cluster, log, label, phase, "all_gather", [np.moveaxis(s, -1, 0) for s in shards])
    return [np.moveaxis(g, 0, -1) for g in gathered]


# ---------------------------------------------------------------- sharding
def _check_tp(tp) -> int:
    return check_int("tp", tp, minimum=1, maximum=1024)


def _check_split(name: str, size: int, tp: int, what_en: str, what_zh: str) -> None:
    if size % tp:
        raise DistlearnValueError(
            name, f"{name} = {size} is not divisible by tp = {tp}: the {what_en} cannot be split evenly over "
                  f"{tp} ranks. Choose tp among the divisors of {size} ({_divisors(size)}), or change {name}.",
            f"{name} = {size} 不能被 tp = {tp} 整除：{what_zh}无法在 {tp} 个 rank 之间均匀切分。"
            f"请从 {size} 的因数（{_divisors(size)}）中选择 tp，或修改 {name}。")


def _check_shapes(**shapes) -> None:
    """``name=(actual_shape, expected_shape)``: raise DistlearnValueError naming the first mismatch."""
    for name, (got, want) in shapes.items():
        if tuple(got) != tuple(want):
            raise DistlearnValueError(name, f"{name} has shape {tuple(got)}, expected {tuple(want)}.",
                                      f"{name} 的形状为 {tuple(got)}，应为 {tuple(want)}。")


def _mlp_shapes(x, w1, b1, w2, b2, grad_out) -> None:
    x, w1 = np.asarray(x), np.asarray(w1)
    if x.ndim < 1 or w1.ndim != 2:
        raise DistlearnValueError("w1", "x needs a feature axis and w1 must be 2-D (h, f).",
                                  "x 需要特征维，w1 必须是二维 (h, f)。")
    h, f = x.shape[-1], w1.shape[1]
    _check_shapes(w1=(w1.shape, (h, f)), b1=(np.shape(b1), (f,)), w2=(np.shape(w2), (f, h)), b2=(np.shape(b2), (h,)),
                  grad_out=(np.shape(grad_out), x.shape))


def _divisors(n: int) -> str:
    small = [d for d in range(1, min(n, 64) + 1) if n % d == 0]
    return ", ".join(map(str, small)) + (", …" if n > 64 else "")


@checks(w=array("... d_out"))
def shard_columns(w: np.ndarray, tp: int, name: str = "d_out") -> list[np.ndarray]:
    """Split ``w`` (shape ``(d_in, d_out)``, or a bias ``(d_out,)``) into ``tp`` blocks of columns (last axis).

    Rank r gets columns ``[r·d_out/tp, (r+1)·d_out/tp)``. Raises DistlearnValueError if tp does not divide d_out.
    ``name`` is the size named in that error.
    """
    tp = _check_tp(tp)
    check_text("name", name)
    w = np.asarray(w)
    _check_split(name, w.shape[-1], tp, "output features (columns)", "输出特征（列）")
    return [c.copy() for c in np.split(w, tp, axis=-1)]


@checks(w=array("d_in d_out"))
def shard_rows(w: np.ndarray, tp: int, name: str = "d_in") -> list[np.ndarray]:
    """Split ``w`` (shape ``(d_in, d_out)``) into ``tp`` blocks of rows (axis 0): rank r gets rows
    ``[r·d_in/tp, (r+1)·d_in/tp)``. Raises DistlearnValueError if tp does not divide d_in (``name`` is the size
    named in that error)."""
    tp = _check_tp(tp)
    check_text("name", name)
    w = np.asarray(w)
    _check_split(name, w.shape[0], tp, "input features (rows)", "输入特征（行）")
    return [c.copy() for c in np.split(w, tp, axis=0)]


# ---------------------------------------------------------------- column- and row-parallel linear layers
@checks(cluster=CLUSTER, x=each(array("... d_in")), w_shards=each(array("d_in d_local")), b_shards=each(array("d_local")))
def column_parallel_forward(cluster: VirtualCluster, x: list, w_shards: list, b_shards: list | None = None, *,
                            gather_output: bool = False, log: list | None = None) -> list:
    """Column-parallel ``y = x @ W + b``: rank r computes ``x @ W_r + b_r``, its block of output features.

    ``x``: one array per rank, the same full input ``(..., d_in)`` on every rank (the f operator: identity in
    forward). Returns per-rank outputs ``(..., d_out/tp)``, or, with ``gather_output=True``, the full
    ``(..., d_out)`` on every rank after an all-gather ((tp−1)/tp × output bytes per rank). Followed by a
    row-parallel layer, no gather is needed: that is the point of the Megatron MLP.
    """
    gather_output = check_bool("gather_output", gather_output)
    out = [xi @ w + (0 if b_shards is None else b) for xi, w, b in
           zip(x, w_shards, b_shards if b_shards is not None else [None] * len(x))]
    if gather_output:
        out = _gather_last(cluster, out, log, "column: gather output", "forward")
    return out


@checks(cluster=CLUSTER, x=each(array("... d_in")), w_shards=each(array("d_in d_local")), grad_out=each(array("... d_local")))
def column_parallel_backward(cluster: VirtualCluster, x: list, w_shards: list, grad_out: list, *,
                             log: list | None = None) -> tuple[list, list, list]:
    """Backward of :func:`column_parallel_forward`.

    ``grad_out``: per-rank gradient of the local output block ``(..., d_out/tp)`` (if the forward gathered, the
    backward of that all-gather is just taking one's own slice: no communication). Returns
    ``(grad_x, grad_w, grad_b)``: ``grad_w[r] = x^T @ dY_r`` and ``grad_b[r]`` need no communication;
    ``grad_x = Σ_r dY_r @ W_r^T`` is a sum of partial results, so it needs an **all-reduce** (the backward of f),
    2(tp−1)/tp × input bytes per rank.
    """
    gw = [_wgrad(xi, g) for xi, g in zip(x, grad_out)]
    gb = [g.reshape(-1, g.shape[-1]).sum(axis=0) for g in grad_out]
    partial = [g @ w.T for g, w in zip(grad_out, w_shards)]
    gx = _traced(cluster, log, "f backward: all-reduce dX", "backward", "all_reduce", partial)
    return gx, gw, gb


@checks(cluster=CLUSTER, x_shards=each(array("... d_local")), w_shards=each(array("d_local d_out")), b=array("d_out"))
def row_parallel_forward(cluster: VirtualCluster, x_shards: list, w_shards: list, b: np.ndarray | None = None, *,
                         log: list | None = None, reduce: str = "all_reduce") -> list:
    """Row-parallel ``y = x @ W + b``: rank r holds rows ``W_r`` and the matching input features ``x_r``
    ``(..., d_in/tp)`` and computes the partial sum ``x_r @ W_r`` (full shape ``(..., d_out)``). The partial sums
    must be added: an **all-reduce** (the g operator), 2(tp−1)/tp × output bytes per rank. The bias is added once,
    after the reduction. ``reduce="reduce_scatter"`` (sequence parallelism) instead leaves rank r with its block
    of axis 0 (the sequence), (tp−1)/tp × output bytes per rank. Raises DistlearnValueError for another ``reduce``.
    """
    check_choice("reduce", reduce, ("all_reduce", "reduce_scatter"))
    partial = [xi @ w for xi, w in zip(x_shards, w_shards)]
    label = "g forward: all-reduce partial sums" if reduce == "all_reduce" else "ḡ forward: reduce-scatter"
    out = _traced(cluster, log, label, "forward", reduce, partial)
    return [o + (0 if b is None else b) for o in out]


@checks(cluster=CLUSTER, x_shards=each(array("... d_local")), w_shards=each(array("d_local d_out")), grad_out=each(array("... d_out")))
def row_parallel_backward(cluster: VirtualCluster, x_shards: list, w_shards: list, grad_out: list
                          ) -> tuple[list, list, list]:
    """Backward of :func:`row_parallel_forward` (all-reduce variant): ``grad_out`` is the full ``(..., d_out)``
    gradient, the same on every rank (the backward of an all-reduce is the identity). Returns ``(grad_x_shards,
    grad_w_shards, grad_b)``: ``dX_r = dY @ W_r^T``, ``dW_r = X_r^T @ dY``, ``db = Σ dY``: no communication."""
    gx = [g @ w.T for g, w in zip(grad_out, w_shards)]
    gw = [_wgrad(xi, g) for xi, g in zip(x_shards, grad_out)]
    gb = [g.reshape(-1, g.shape[-1]).sum(axis=0) for g in grad_out]
    return gx, gw, gb


def _wgrad(x, g):
    return x.reshape(-1, x.shape[-1]).T @ g.reshape(-1, g.shape[-1])


# ---------------------------------------------------------------- the seed's function, corrected
@checks(input_data=array("... d_in"), weight_matrix=array("d_in d_out"))
def simulate_tensor_parallelism(input_data, weight_matrix, tp: int, *, split: str = "column") -> dict:
    """The seed's experiment done right: ``y = x @ W`` on ``tp`` simulated ranks, with the communication counted.

    ``split="column"``: each rank multiplies by a block of columns and an **all-gather** assembles the output
    ((tp−1)/tp × output bytes sent per rank). ``split="row"``: each rank multiplies its block of input features by
    its block of rows, and an **all-reduce** adds the partial sums (2(tp−1)/tp × output bytes per rank);
    concatenating them, as the seed does for columns, would give a wrong answer.

    Returns ``{"output", "max_error", "bytes_sent_per_rank", "collective"}``. Raises DistlearnValueError when tp
    does not divide the split dimension.
    """
    check_choice("split", split, ("column", "row"))
    tp = _check_tp(tp)
    x, w = np.asarray(input_data), np.asarray(weight_matrix)
    cluster = VirtualCluster(tp)
    if split == "column":
        out = column_parallel_forward(cluster, [x] * tp, shard_columns(w, tp), gather_output=True)
        op = "all_gather"
    else:
        out = row_parallel_forward(cluster, shard_columns(x, tp, "d_in"), shard_rows(w, tp))
        op = "all_reduce"
    assert all(np.array_equal(out[0], o) for o in out)
    return {"output": out[0], "max_error": float(np.abs(out[0] - x @ w).max()),
            "bytes_sent_per_rank": int(cluster.bytes_sent[0]), "collective": op if tp > 1 else "none"}


# ---------------------------------------------------------------- the Megatron MLP
def gelu(x):
    """GeLU, tanh approximation (GPT-2 / Megatron; ``torch.nn.functional.gelu(x, approximate="tanh")``)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu_grad(x):
    """Derivative of :func:`gelu`."""
    c = np.sqrt(2 / np.pi)
    t = np.tanh(c * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t ** 2) * c * (1 + 3 * 0.044715 * x ** 2)


@checks(x=array("... h"), w1=array("h f"), b1=array("f"), w2=array("f h"), b2=array("h"), grad_out=array("... h"))
def reference_mlp(x, w1, b1, w2, b2, grad_out) -> tuple[np.ndarray, dict]:
    """Unsharded MLP ``gelu(x @ w1 + b1) @ w2 + b2``, forward and hand-written backward.

    Shapes: ``x (…, h)``, ``w1 (h, f)``, ``b1 (f,)``, ``w2 (f, h)``, ``b2 (h,)``, ``grad_out (…, h)``.
    Returns ``(output, {"w1", "b1", "w2", "b2", "x"})``.
    """
    z = x @ w1 + b1
    a = gelu(z)
    y = a @ w2 + b2
    da = grad_out @ w2.T
    dz = da * gelu_grad(z)
    return y, {"w1": _wgrad(x, dz), "b1": dz.reshape(-1, dz.shape[-1]).sum(0), "w2": _wgrad(a, grad_out),
               "b2": grad_out.reshape(-1, grad_out.shape[-1]).sum(0), "x": dz @ w1.T}


@checks(x=array("... h"), w1=array("h f"), b1=array("f"), w2=array("f h"), b2=array("h"), grad_out=array("... h"))
def megatron_mlp(x, w1, b1, w2, b2, grad_out, tp: int) -> TPResult:
    """The Megatron-LM MLP on ``tp`` simulated ranks: column-parallel ``w1``, GeLU on each rank's block, row-parallel
    ``w2`` (Shoeybi et al. 2019, §3, Fig. 3a).

    Communication: **one all-reduce in forward** (g, after ``w2``) and **one in backward** (f's backward, for
    ``dX``), each 2(tp−1)/tp × s·b·h elements per rank. The GeLU needs no communication because the column split
    keeps each of its inputs whole on one rank.

    Shapes as in :func:`reference_mlp`; ``f = w1.shape[1]`` must be divisible by ``tp`` (DistlearnValueError).
    ``result.local[r]`` holds rank r's ``w1``, ``b1``, ``w2`` shards and their gradients.
    """
    tp = _check_tp(tp)
    _mlp_shapes(x, w1, b1, w2, b2, grad_out)
    _check_split("ffn_hidden_size", w1.shape[1], tp, "MLP hidden features", "MLP 隐藏层特征")
    cluster, log = VirtualCluster(tp), []
    w1s, b1s, w2s = shard_columns(w1, tp, "ffn_hidden_size"), shard_columns(b1, tp, "ffn_hidden_size"), \
        shard_rows(w2, tp, "ffn_hidden_size")
    xs = [x] * tp                                                     # f: identity in forward
    z = column_parallel_forward(cluster, xs, w1s, b1s, log=log)
    a = [gelu(zi) for zi in z]                                        # local: no communication
    y = row_parallel_forward(cluster, a, w2s, b2, log=log)            # g: all-reduce
    gy = [grad_out] * tp                                              # g backward: identity
    da, gw2, gb2 = row_parallel_backward(cluster, a, w2s, gy)
    dz = [d * gelu_grad(zi) for d, zi in zip(da, z)]
    gx, gw1, gb1 = column_parallel_backward(cluster, xs, w1s, dz, log=log)  # f backward: all-reduce
    local = [{"w1": w1s[r], "b1": b1s[r], "w2": w2s[r], "grad_w1": gw1[r], "grad_b1": gb1[r], "grad_w2": gw2[r],
              "grad_b2": gb2[r], "grad_x": gx[r], "output": y[r]} for r in range(tp)]
    grads = {"w1": np.concatenate(gw1, -1), "b1": np.concatenate(gb1, -1), "w2": np.concatenate(gw2, 0),
             "b2": gb2[0], "x": gx[0]}
    return TPResult(y[0], grads, local, log, cluster.bytes_sent.copy())


# ---------------------------------------------------------------- attention split by heads
def _attn_core(q, k, v, num_heads, causal):
    """q, k, v (s, b, n·d) → per-head attention; returns output (s, b, n·d) and what backward needs."""
    s, b, hd = q.shape
    d = hd // num_heads
    split = lambda t: t.reshape(s, b, num_heads, d).transpose(1, 2, 0, 3)  # (b, n, s, d)
    qh, kh, vh = split(q), split(k), split(v)
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(d)
    if causal:
        scores = np.where(np.triu(np.ones((s, s), bool), 1), -np.inf, scores)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ vh
    return o.transpose(2, 0, 1, 3).reshape(s, b, hd), (qh, kh, vh, p, d)


def _attn_core_backward(do, cache):
    qh, kh, vh, p, d = cache
    b, n, s, _ = qh.shape
    doh = do.reshape(s, b, n, d).transpose(1, 2, 0, 3)
    dv = p.transpose(0, 1, 3, 2) @ doh
    dp = doh @ vh.transpose(0, 1, 3, 2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True)) / np.sqrt(d)
    dq, dk = ds @ kh, ds.transpose(0, 1, 3, 2) @ qh
    merge = lambda t: t.transpose(2, 0, 1, 3).reshape(s, b, n * d)
    return merge(dq), merge(dk), merge(dv)


def _attention_rank(x, wq, wk, wv, wo, heads, causal, grad_out):
    """One rank's share (or the whole thing when it holds all heads): forward partial output and backward."""
    q, k, v = x @ wq, x @ wk, x @ wv
    o, cache = _attn_core(q, k, v, heads, causal)
    y = o @ wo
    do = grad_out @ wo.T
    dq, dk, dv = _attn_core_backward(do, cache)
    grads = {"wq": _wgrad(x, dq), "wk": _wgrad(x, dk), "wv": _wgrad(x, dv), "wo": _wgrad(o, grad_out),
             "x": dq @ wq.T + dk @ wk.T + dv @ wv.T}
    return y, grads


@checks(x=array("s b h"), wq=array("h h"), wk=array("h h"), wv=array("h h"), wo=array("h h"), grad_out=array("s b h"))
def reference_attention(x, wq, wk, wv, wo, num_heads: int, grad_out, causal: bool = True):
    """Unsharded multi-head self-attention (no biases): ``x (s, b, h)``, each weight ``(h, h)``; returns
    ``(output (s, b, h), {"wq", "wk", "wv", "wo", "x"})``. Raises DistlearnValueError unless ``num_heads`` is an
    integer ≥ 1 that divides h and ``causal`` a bool."""
    num_heads = check_int("num_heads", num_heads, minimum=1)
    causal = check_bool("causal", causal)
    h = np.shape(x)[-1]
    if h % num_heads:
        raise DistlearnValueError("num_heads", f"hidden_size = {h} must be divisible by num_heads = {num_heads}.",
                                  f"hidden_size = {h} 必须能被 num_heads = {num_heads} 整除。")
    return _attention_rank(x, wq, wk, wv, wo, num_heads, causal, grad_out)


@checks(x=array("s b h"), wq=array("h h"), wk=array("h h"), wv=array("h h"), wo=array("h h"), grad_out=array("s b h"))
def parallel_attention(x, wq, wk, wv, wo, num_heads: int, grad_out, tp: int, causal: bool = True) -> TPResult:
    """Self-attention split by heads over ``tp`` simulated ranks (Shoeybi et al. 2019, Fig. 3b).

    ``wq``, ``wk``, ``wv`` are column-parallel: rank r holds the columns of heads ``[r·a/tp, (r+1)·a/tp)``, so each
    rank computes whole heads with no communication; ``wo`` is row-parallel (the matching rows), and its partial
    sums are all-reduced (g). Backward: one all-reduce of ``dX`` (f). ``num_heads`` must be divisible by ``tp``
    and ``h`` by ``num_heads`` (DistlearnValueError naming the sizes).
    """
    tp = _check_tp(tp)
    num_heads = check_int("num_heads", num_heads, minimum=1)
    causal = check_bool("causal", causal)
    x = np.asarray(x)
    if x.ndim != 3:
        raise DistlearnValueError("x", f"x must have shape (s, b, h), got {x.shape}.",
                                  f"x 的形状必须是 (s, b, h)，收到 {x.shape}。")
    h = x.shape[-1]
    _check_shapes(**{n: (np.shape(w), (h, h)) for n, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo))},
                  grad_out=(np.shape(grad_out), x.shape))
    if h % num_heads:
        raise DistlearnValueError("hidden_size", f"hidden_size = {h} must be divisible by num_heads = {num_heads}.",
                                  f"hidden_size = {h} 必须能被 num_heads = {num_heads} 整除。")
    _check_split("num_heads", num_heads, tp, "attention heads", "注意力头")
    cluster, log = VirtualCluster(tp), []
    qs, ks, vs = (shard_columns(w, tp, "hidden_size") for w in (wq, wk, wv))
    os_ = shard_rows(wo, tp, "hidden_size")
    parts = [_attention_rank(x, qs[r], ks[r], vs[r], os_[r], num_heads // tp, causal, grad_out) for r in range(tp)]
    y = _traced(cluster, log, "g forward: all-reduce partial sums", "forward", "all_reduce", [p[0] for p in parts])
    gx = _traced(cluster, log, "f backward: all-reduce dX", "backward", "all_reduce", [p[1]["x"] for p in parts])
    local = [{"wq": qs[r], "wk": ks[r], "wv": vs[r], "wo": os_[r], **{f"grad_{k}": v for k, v in parts[r][1].items()
                                                                     if k != "x"}, "grad_x": gx[r]}
             for r in range(tp)]
    grads = {k: np.concatenate([p[1][k] for p in parts], -1) for k in ("wq", "wk", "wv")}
    grads["wo"] = np.concatenate([p[1]["wo"] for p in parts], 0)
    grads["x"] = gx[0]
    return TPResult(y[0], grads, local, log, cluster.bytes_sent.copy())


# ---------------------------------------------------------------- sequence parallelism
EPS = 1e-5


def _layernorm(x, gamma, beta):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + EPS)
    return xhat * gamma + beta, (xhat, var)


def _layernorm_backward(dy, gamma, cache):
    xhat, var = cache
    dxhat = dy * gamma
    dx = (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True)) / np.sqrt(var + EPS)
    flat = lambda t: t.reshape(-1, t.shape[-1])
    return dx, (flat(dy) * flat(xhat)).sum(0), flat(dy).sum(0)


@checks(x=array("s b h"), gamma=array("h"), beta=array("h"), w1=array("h f"), b1=array("f"), w2=array("f h"), b2=array("h"), grad_out=array("s b h"))
def reference_mlp_block(x, gamma, beta, w1, b1, w2, b2, grad_out):
    """Unsharded pre-LN MLP block ``x + MLP(LayerNorm(x))`` (dropout omitted: identity), forward and backward.

    ``x (s, b, h)``; returns ``(output, {"gamma", "beta", "w1", "b1", "w2", "b2", "x"})``.
    """
    ln, cache = _layernorm(x, gamma, beta)
    y, g = reference_mlp(ln, w1, b1, w2, b2, grad_out)
    dln = g.pop("x")
    dx, dgamma, dbeta = _layernorm_backward(dln, gamma, cache)
    return x + y, {**g, "gamma": dgamma, "beta": dbeta, "x": grad_out + dx}


@checks(x=array("s b h"), gamma=array("h"), beta=array("h"), w1=array("h f"), b1=array("f"), w2=array("f h"), b2=array("h"), grad_out=array("s b h"))
def sequence_parallel_mlp_block(x, gamma, beta, w1, b1, w2, b2, grad_out, tp: int, *,
                                sequence_parallel: bool = True, scheme: str = "megatron") -> TPResult:
    """The pre-LN MLP block ``x + MLP(LayerNorm(x))`` on ``tp`` ranks, with or without sequence parallelism.

    Without it (Megatron 2019): every rank holds the whole ``(s, b, h)`` input and computes the same LayerNorm;
    f = identity / all-reduce, g = all-reduce / identity.

    With it (Korthikanti et al. 2022, §4.2.2, Fig. 5): rank r holds only sequence positions
    ``[r·s/tp, (r+1)·s/tp)`` of the input, the LayerNorm, the residual (and the dropout) run on that shard, and
    the MLP's collectives become **g = all-gather** (forward) / reduce-scatter (backward) before the column-parallel
    layer and **ḡ = reduce-scatter** (forward) / all-gather (backward) after the row-parallel one. The same bytes
    as one all-reduce (an all-reduce *is* a reduce-scatter plus an all-gather), but the activations outside the
    tensor-parallel region are ``tp`` times smaller. As in Megatron-LM, the LayerNorm output is stored sharded and
    all-gathered again in backward for the weight gradient of ``w1``, and the LayerNorm's weight gradients (partial
    sums over each rank's positions) are all-reduced.

    ``scheme`` (with sequence parallelism) chooses whose implementation the collectives follow:

    - ``"megatron"`` (Megatron-LM, the scheme Korthikanti's ``34/t`` activation formula assumes): the LayerNorm
      output is **saved sharded** and re-gathered in backward for ``dW1``; the bias of ``w2`` is added after the
      reduce-scatter, so its gradient, like the LayerNorm's, is a partial sum over each rank's positions, and all
      three are all-reduced in backward (Megatron marks them ``sequence_parallel`` and all-reduces them before the
      optimizer step);
    - ``"pytorch"`` (``SequenceParallel`` + ``ColwiseParallel(input_layouts=Shard(0))`` +
      ``RowwiseParallel(output_layouts=Shard(0))`` in torch 2.13): autograd **saves the all-gathered** LayerNorm
      output (the input of ``w1``), so there is no re-gather, but the saved tensor is ``tp`` times larger; the bias
      of ``w2`` is replicated and its gradient is computed from the all-gathered ``dY`` (no collective); the
      LayerNorm's gradients are left as DTensors with placement ``Partial(sum)`` and reduced only when the
      optimizer touches them (one all-reduce per tensor, phase ``"step"``). Source:
      ``torch/distributed/tensor/parallel/style.py`` (the styles) and ``torch/distributed/tensor/_redistribute.py``
      (Partial → Replicate is an all-reduce); the lab :mod:`distlearn.tensor_parallel.lab` counts them.

    ``local[r]`` also holds ``grad_gamma_partial`` / ``grad_beta_partial``: rank r's LayerNorm gradients before
    any reduction (what DTensor's ``to_local()`` of the ``Partial`` gradient holds).

    ``x``, ``grad_out``: full ``(s, b, h)`` arrays (sharded here). ``s`` must be divisible by ``tp`` when
    ``sequence_parallel`` (DistlearnValueError). ``result.output`` and ``grads["x"]`` are assembled full arrays.
    """
    tp = _check_tp(tp)
    _mlp_shapes(x, w1, b1, w2, b2, grad_out)
    h = x.shape[-1]
    _check_shapes(gamma=(np.shape(gamma), (h,)), beta=(np.shape(beta), (h,)))
    if x.ndim != 3:
        raise DistlearnValueError("x", f"x must have shape (s, b, h), got {x.shape}.",
                                  f"x 的形状必须是 (s, b, h)，收到 {x.shape}。")
    _check_split("ffn_hidden_size", w1.shape[1], tp, "MLP hidden features", "MLP 隐藏层特征")
    sp = check_bool("sequence_parallel", sequence_parallel)
    scheme = check_choice("scheme", scheme, SP_SCHEMES)
    if sp:
        _check_split("seq_len", x.shape[0], tp, "sequence positions", "序列位置")
    cluster, log = VirtualCluster(tp), []
    w1s, b1s, w2s = shard_columns(w1, tp, "ffn_hidden_size"), shard_columns(b1, tp, "ffn_hidden_size"), \
        shard_rows(w2, tp, "ffn_hidden_size")
    xs = np.split(x, tp, axis=0) if sp else [x] * tp
    gos = np.split(grad_out, tp, axis=0) if sp else [grad_out] * tp
    # forward
    lnc = [_layernorm(xi, gamma, beta) for xi in xs]
    ln = [c[0] for c in lnc]
    if sp:
        ln_full = _traced(cluster, log, "g forward: all-gather sequence", "forward", "all_gather", ln)
    else:
        ln_full = ln                                                        # f: identity
    z = column_parallel_forward(cluster, ln_full, w1s, b1s)
    a = [gelu(zi) for zi in z]
    y = row_parallel_forward(cluster, a, w2s, None, log=log, reduce="reduce_scatter" if sp else "all_reduce")
    out = [xi + yi + b2 for xi, yi in zip(xs, y)]                            # bias, dropout, residual: local
    # backward
    pytorch = sp and scheme == "pytorch"
    if sp:
        gy = _traced(cluster, log, "ḡ backward: all-gather dY", "backward", "all_gather", gos)
        if not pytorch:  # Megatron kept only the sharded LN output; PyTorch's autograd kept ln_full itself
            ln_full = _traced(cluster, log, "re-gather LN output for dW1", "backward", "all_gather", ln)
    else:
        gy = gos                                                            # g backward: identity
    # the bias of w2: Megatron adds it to the sharded output (partial gradient); PyTorch to the full-shape partial
    # sum before the reduce-scatter, so every rank computes the whole gradient from the gathered dY
    gb2 = [g.reshape(-1, g.shape[-1]).sum(0) for g in (gy if pytorch else gos)]
    da, gw2, _ = row_parallel_backward(cluster, a, w2s, gy)
    dz = [d * gelu_grad(zi) for d, zi in zip(da, z)]
    gw1 = [_wgrad(li, d) for li, d in zip(ln_full, dz)]
    gb1 = [d.reshape(-1, d.shape[-1]).sum(0) for d in dz]
    partial = [d @ w.T for d, w in zip(dz, w1s)]
    if sp:
        dln = _traced(cluster, log, "g backward: reduce-scatter dLN", "backward", "reduce_scatter", partial)
    else:
        dln = _traced(cluster, log, "f backward: all-reduce dX", "backward", "all_reduce", partial)
    lnb = [_layernorm_backward(d, gamma, c[1]) for d, c in zip(dln, lnc)]
    gx = [go + b[0] for go, b in zip(gos, lnb)]
    dgamma, dbeta, db2 = [b[1] for b in lnb], [b[2] for b in lnb], gb2
    partial_gamma, partial_beta = list(dgamma), list(dbeta)
    if pytorch:  # DTensor leaves them Partial(sum); the optimizer's first use reduces each tensor
        dgamma = _traced(cluster, log, "step: all-reduce Partial LN weight grad", "step", "all_reduce", dgamma)
        dbeta = _traced(cluster, log, "step: all-reduce Partial LN bias grad", "step", "all_reduce", dbeta)
    elif sp:  # replicated parameters used on different positions: their gradients are partial sums
        dgamma = _traced(cluster, log, "all-reduce LayerNorm and bias grads", "backward", "all_reduce",
                         [np.concatenate([g, bb, c]) for g, bb, c in zip(dgamma, dbeta, gb2)])
        h = x.shape[-1]
        dbeta, db2 = [g[h:2 * h] for g in dgamma], [g[2 * h:] for g in dgamma]
        dgamma = [g[:h] for g in dgamma]
    local = [{"w1": w1s[r], "b1": b1s[r], "w2": w2s[r], "x": xs[r], "output": out[r], "grad_w1": gw1[r],
              "grad_b1": gb1[r], "grad_w2": gw2[r], "grad_x": gx[r], "grad_gamma_partial": partial_gamma[r],
              "grad_beta_partial": partial_beta[r]} for r in range(tp)]
    grads = {"w1": np.concatenate(gw1, -1), "b1": np.concatenate(gb1, -1), "w2": np.concatenate(gw2, 0),
             "b2": db2[0], "gamma": dgamma[0], "beta": dbeta[0],
             "x": np.concatenate(gx, 0) if sp else gx[0]}
    return TPResult(np.concatenate(out, 0) if sp else out[0], grads, local, log, cluster.bytes_sent.copy())


# ---------------------------------------------------------------- closed forms: communication, weights, activations
def block_comm(*, seq_len: int, micro_batch_size: int, hidden_size: int, tp: int, sequence_parallel: bool = False,
               dtype_bytes: int = 2, regather_in_backward: bool = True,
               layernorm_grad_allreduce: bool = False) -> list[CommRecord]:
    """The collectives of one tensor-parallel block (attention or MLP: the same), bytes sent per rank (ring).

    With A = s·b·h·``dtype_bytes`` (the block's input = output activation) and t = ``tp``:

    - without SP: forward one all-reduce, backward one all-reduce, each 2(t−1)/t·A;
    - with SP: forward all-gather + reduce-scatter, backward all-gather + reduce-scatter, each (t−1)/t·A (the same
      total), plus, when ``regather_in_backward`` (Megatron-LM's choice, which the 34/t activation formula
      assumes), one more all-gather of the LayerNorm output in backward; ``layernorm_grad_allreduce`` adds the
      all-reduce of the replicated LayerNorm and bias gradients (3h values: tiny, done once per step in
      Megatron-LM, per block in :func:`sequence_parallel_mlp_block`).

    Sources: Shoeybi et al. 2019 §3; Korthikanti et al. 2022 §4.2.2; ring costs in :mod:`distlearn.core.comm`; the
    re-gather: Megatron-LM ``megatron/core/tensor_parallel/layers.py``,
    ``LinearWithGradAccumulationAndAsyncCommunication`` (forward saves the sequence-sharded input, backward
    all-gathers it again, overlapped with the input-gradient GEMM).
    """
    layernorm_grad_allreduce = check_bool("layernorm_grad_allreduce", layernorm_grad_allreduce)
    regather_in_backward = check_bool("regather_in_backward", regather_in_backward)
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    s = check_int("seq_len", seq_len)
    b = check_int("micro_batch_size", micro_batch_size)
    h = check_int("hidden_size", hidden_size)
    t = _check_tp(tp)
    nbytes = check_int("dtype_bytes", dtype_bytes, minimum=1, maximum=16)
    act = s * b * h * nbytes
    one = (t - 1) / t * act
    if not sequence_parallel:
        return [CommRecord("g forward: all-reduce partial sums", "all_reduce", "forward", round(2 * one)),
                CommRecord("f backward: all-reduce dX", "all_reduce", "backward", round(2 * one))]
    if s % t:
        _check_split("seq_len", s, t, "sequence positions", "序列位置")
    recs = [CommRecord("g forward: all-gather sequence", "all_gather", "forward", round(one)),
            CommRecord("ḡ forward: reduce-scatter", "reduce_scatter", "forward", round(one)),
            CommRecord("ḡ backward: all-gather dY", "all_gather", "backward", round(one))]
    if regather_in_backward:
        recs.append(CommRecord("re-gather LN output for dW1", "all_gather", "backward", round(one)))
    recs.append(CommRecord("g backward: reduce-scatter dLN", "reduce_scatter", "backward", round(one)))
    if layernorm_grad_allreduce:
        recs.append(CommRecord("all-reduce LayerNorm and bias grads", "all_reduce", "backward",
                               round(2 * (t - 1) / t * 3 * h * nbytes)))
    return recs


def layer_comm_bytes(*, seq_len: int, micro_batch_size: int, hidden_size: int, tp: int,
                     sequence_parallel: bool = False, dtype_bytes: int = 2, regather_in_backward: bool = True) -> dict:
    """Bytes each rank sends for one transformer layer (attention block + MLP block) and one micro-batch.

    Returns ``{"forward", "backward", "total", "num_collectives"}``. Without SP: 4 all-reduces, 8(t−1)/t·s·b·h·
    ``dtype_bytes`` bytes in total; with SP and no re-gather exactly the same; Megatron's re-gather adds
    2(t−1)/t·s·b·h·``dtype_bytes``. Zero for tp = 1. See :func:`block_comm`.
    """
    regather_in_backward = check_bool("regather_in_backward", regather_in_backward)
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    recs = block_comm(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size, tp=tp,
                      sequence_parallel=sequence_parallel, dtype_bytes=dtype_bytes,
                      regather_in_backward=regather_in_backward)
    fwd = 2 * sum(r.bytes_per_rank for r in recs if r.phase == "forward")
    bwd = 2 * sum(r.bytes_per_rank for r in recs if r.phase == "backward")
    return {"forward": fwd, "backward": bwd, "total": fwd + bwd, "num_collectives": 2 * len(recs) if tp > 1 else 0}


def layer_weight_bytes(*, hidden_size: int, tp: int, ffn_hidden_size: int | None = None, num_heads: int | None = None,
                       dtype_bytes: int = 2) -> dict:
    """Weight bytes per GPU of one GPT-style layer (biases, two LayerNorms) under tensor parallelism.

    QKV ``h×3h + 3h`` and fc1 ``h×f + f`` are column-parallel (÷t); the output projection ``h×h`` and fc2 ``f×h``
    are row-parallel (÷t) with their biases ``h`` replicated; the two LayerNorms (``2h`` each) are replicated.
    ``f`` defaults to 4h. Returns ``{"sharded", "replicated", "total", "params_per_rank"}`` (bytes, bytes, bytes,
    count). Raises DistlearnValueError when ``tp`` does not divide h, f or ``num_heads``.
    """
    h = check_int("hidden_size", hidden_size)
    t = _check_tp(tp)
    f = 4 * h if ffn_hidden_size is None else check_int("ffn_hidden_size", ffn_hidden_size)
    nbytes = check_int("dtype_bytes", dtype_bytes, minimum=1, maximum=16)
    _check_split("hidden_size", h, t, "attention projections", "注意力投影")
    _check_split("ffn_hidden_size", f, t, "MLP hidden features", "MLP 隐藏层特征")
    if num_heads is not None:
        _check_split("num_heads", check_int("num_heads", num_heads), t, "attention heads", "注意力头")
    sharded = (3 * h * h + 3 * h + h * h + h * f + f + f * h) // t
    replicated = h + h + 2 * h + 2 * h
    return {"sharded": sharded * nbytes, "replicated": replicated * nbytes, "total": (sharded + replicated) * nbytes,
            "params_per_rank": sharded + replicated}


def layer_activation_bytes(*, seq_len: int, micro_batch_size: int, hidden_size: int, num_heads: int, tp: int,
                           sequence_parallel: bool = False, sp_scheme: str = "megatron") -> float:
    """Activation bytes per GPU for one layer: :func:`distlearn.memory.formulas.activation_bytes_per_layer` (Korthikanti
    et al. 2022, Table 2: s·b·h·(10 + 24/t + 5as/(ht)) without SP, s·b·h·(34/t + 5as/(ht)) with SP).

    ``sp_scheme`` (with ``sequence_parallel``): ``"megatron"`` is the paper's scheme, where the inputs of the QKV
    and fc1 linears (the LayerNorm outputs, 2·sbh bytes each in 16-bit) are saved sequence-sharded and re-gathered
    in backward; ``"pytorch"`` is torch's ``SequenceParallel`` + ``ColwiseParallel`` plan, whose autograd saves
    those two inputs **all-gathered**, so they are not divided by t: s·b·h·(4 + 30/t + 5as/(ht)), i.e.
    ``(1 − 1/t)·4·sbh`` more than Megatron (measured on DTensor by :func:`distlearn.tensor_parallel.lab.tp_check`,
    see :func:`sp_saved_bytes`)."""
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    from distlearn.memory.formulas import activation_bytes_per_layer

    check_choice("sp_scheme", sp_scheme, SP_SCHEMES)
    base = activation_bytes_per_layer(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size,
                                      num_heads=num_heads, tp=tp, sequence_parallel=sequence_parallel)
    if not sequence_parallel or sp_scheme == "megatron":
        return base
    sbh = seq_len * micro_batch_size * hidden_size
    return base + (1 - 1 / tp) * 2 * (2 * sbh)   # two all-gathered 16-bit inputs kept whole instead of /t


def sp_saved_bytes(unsharded_bytes: int, *, tp: int, gathered_bytes: int, replicated_bytes: int = 0,
                   scheme: str = "megatron") -> float:
    """Bytes one rank saves for backward in a sequence-parallel transformer layer, predicted from the unsharded
    layer's saved bytes.

    Every saved activation of a TP + SP layer is either split by the sequence (LayerNorm and residual regions) or
    by heads / features (the tensor-parallel regions), so it is ``1/t`` of the unsharded one — except
    ``replicated_bytes`` (tensors every rank keeps whole, e.g. an s × s causal mask) and, in PyTorch's plan,
    ``gathered_bytes``: the all-gathered inputs of the column-parallel linears, which autograd saves whole.

    - ``"megatron"``: ``unsharded/t + (1 − 1/t)·replicated``;
    - ``"pytorch"``: ``unsharded/t + (1 − 1/t)·(replicated + gathered)``.

    ``gathered_bytes``: bytes of those inputs in the unsharded layer (QKV and fc1 inputs: 2 · s·b·h · dtype size).
    Raises DistlearnValueError for a bad ``tp`` or ``scheme`` or negative bytes.
    """
    t = _check_tp(tp)
    check_choice("scheme", scheme, SP_SCHEMES)
    u = check_int("unsharded_bytes", unsharded_bytes, minimum=0)
    g = check_int("gathered_bytes", gathered_bytes, minimum=0)
    r = check_int("replicated_bytes", replicated_bytes, minimum=0)
    kept_whole = r + (g if scheme == "pytorch" else 0)
    return u / t + (1 - 1 / t) * kept_whole

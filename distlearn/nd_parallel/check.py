"""Checkers for chapter 12 (parallelisms together). Expected values come from :mod:`distlearn.nd_parallel.simulation`, whose
groups the tests check against a loop reference and torch's own ``DeviceMesh``, and whose traffic counts against the
collectives a real dp × tp × pp run issues."""
from __future__ import annotations

from distlearn.core.check import Case, CheckFailed, verify  # CheckFailed: what a wrong answer raises
from distlearn.core.models import PRESETS
from distlearn.nd_parallel.simulation import TOY_MODEL, Layout, group_of, group_traffic, nodes_spanned


def _same_list(got, expected) -> bool:
    try:
        return [int(x) for x in got] == expected
    except (TypeError, ValueError):
        return False


def ex12_group_ranks(fn) -> None:
    """``fn(rank, shape, dim) -> list of ranks``: the ranks of ``rank``'s group along ``dim`` (one of "pp", "dp",
    "cp", "tp") on a mesh of ``shape = (pp, dp, cp, tp)``, row-major (tp fastest), in coordinate order."""
    cases = []
    for rank, shape, dim in [(5, (2, 2, 1, 2), "tp"), (5, (2, 2, 1, 2), "dp"), (5, (2, 2, 1, 2), "pp"),
                             (0, (1, 1, 1, 8), "tp"), (13, (2, 2, 2, 2), "cp"), (13, (2, 2, 2, 2), "pp"),
                             (7, (3, 2, 1, 2), "pp"), (3, (1, 4, 1, 1), "dp"), (4, (2, 3, 1, 1), "tp")]:
        cases.append(Case(args=(rank, shape, dim), expected=group_of(rank, shape, dim), compare=_same_list,
                          hint_en="Find the rank's coordinates first, innermost (tp) first, by repeated division and "
                                  "remainder. The group keeps every other coordinate and runs this one from 0 to its "
                                  "size − 1; turn each coordinate vector back into a rank (row-major, tp fastest).",
                          hint_zh="先求这个 rank 的坐标：从最内层（tp）开始，用逐次整除和取余。组内其余坐标不变，这一维从 0 "
                                  "取到其大小 − 1；再把每组坐标换回 rank（行优先，tp 变化最快）。"))
    verify("ex12_group_ranks", fn, cases)


def _tp_layer_bytes(model, layout, rank, seq_len, p) -> float:
    return sum(t.bytes_sent for t in group_traffic(model, layout, rank, seq_len=seq_len, activation_bytes=p)
               if t.dim == "tp" and t.what.startswith("activations"))


def ex12_tp_bytes(fn) -> None:
    """``fn(num_layers, num_microbatches, micro_batch_size, seq_len, hidden_size, tp, dtype_bytes) -> bytes``: the
    bytes one rank of a *middle* pipeline stage (no embedding, no head) sends per step over its tensor-parallel
    group for the activations of its ``num_layers`` layers, with sequence parallelism and ring collectives."""
    cases = []
    llama = PRESETS["llama3-70b"]
    for model, lay, seq, p in [
            (TOY_MODEL, Layout(pp=4, tp=2, micro_batch_size=1, num_microbatches=4), 16, 4),
            (TOY_MODEL, Layout(pp=4, tp=4, micro_batch_size=2, num_microbatches=3), 16, 4),
            (llama, Layout(pp=4, tp=8, micro_batch_size=1, num_microbatches=8), 8192, 2),
            (llama, Layout(pp=8, tp=4, micro_batch_size=2, num_microbatches=16), 4096, 2),
            (llama, Layout(pp=4, tp=1, micro_batch_size=1, num_microbatches=8), 8192, 2)]:
        rank = lay.tp   # pipeline stage 1: a middle stage
        layers = model.num_layers // lay.pp
        args = (layers, lay.num_microbatches, lay.micro_batch_size, seq, model.hidden_size, lay.tp, p)
        cases.append(Case(args=args, expected=_tp_layer_bytes(model, lay, rank, seq, p), rtol=1e-9,
                          hint_en="Count the tensor-parallel collectives of one layer and micro-batch with sequence "
                                  "parallelism, forward and backward (chapter section 2), and the size of the full "
                                  "activation each one moves; a ring all-gather or reduce-scatter of N bytes makes "
                                  "each rank send (tp − 1)/tp · N (chapter 02). tp = 1 sends nothing.",
                          hint_zh="数一数带序列并行时，一层、一个微批次在前向和反向中各有几次张量并行集合通信（本章第 2 节），"
                                  "以及每次搬运的完整激活值有多大；对 N 字节做环形 AllGather 或 ReduceScatter 时，每个 rank "
                                  "发送 (tp − 1)/tp · N（第 02 章）。tp = 1 时什么也不发送。"))
    verify("ex12_tp_bytes", fn, cases)


def ex12_nodes_spanned(fn) -> None:
    """``fn(shape, gpus_per_node) -> dict``: for each dimension of the mesh ``shape = (pp, dp, cp, tp)`` of size > 1,
    how many nodes one of its groups spans, when ranks fill nodes in order (node = rank // gpus_per_node)."""
    cases = []
    for shape, g in [((2, 2, 1, 2), 4), ((16, 64, 1, 8), 8), ((16, 8, 16, 8), 8), ((1, 4, 1, 8), 4),
                     ((2, 1, 1, 16), 8), ((1, 8, 1, 1), 8)]:
        dims = [d for d, n in zip(("pp", "dp", "cp", "tp"), shape) if n > 1]
        expected = {d: nodes_spanned(shape, d, g) for d in dims}
        cases.append(Case(args=(shape, g), expected=expected,
                          compare=lambda got, exp: isinstance(got, dict) and {k: int(v) for k, v in got.items()} == exp,
                          hint_en="List a group's ranks (exercise 1) and count the distinct rank // gpus_per_node. All "
                                  "groups of one dimension span the same number of nodes; leave out dimensions of "
                                  "size 1.",
                          hint_zh="列出一个组的 rank（练习 1），数一数 rank // gpus_per_node 有几个不同的值。同一维度的所有"
                                  "组跨越的节点数相同；大小为 1 的维度不要列出。"))
    verify("ex12_nodes_spanned", fn, cases)

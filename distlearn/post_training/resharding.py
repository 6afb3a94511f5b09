"""One model, two layouts (chapter 15): the bytes that move when a model's weights go from the trainer's FSDP shards
to the generator's tensor-parallel shards, directly or through an all-gather of the whole model.

**The layouts.** ``world_size`` = N ranks. Training (FSDP2, ``fully_shard``): every weight is ``Shard(0)`` over all N
ranks, rank r holding rows chunk r (``torch.chunk`` sizes: ``ceil(rows/N)``, the last chunks smaller or empty).
Generation: ``dp = N / tp`` replicas of a tensor-parallel group of ``tp`` ranks, rank ``r = i·tp + j`` being TP rank
``j`` of replica ``i`` (tp innermost, as chapter 12's mesh). A weight of ``nn.Linear`` shape (out, in) is
``"column"``-parallel (q, k, v, gate, up, the vocabulary-parallel embedding and LM head: rows chunk j of tp,
``Shard(0)``), ``"row"``-parallel (o, down: columns chunk j of tp, ``Shard(1)``) or ``"replicate"`` (norms: whole on
every rank). Sources: Megatron-LM (Shoeybi et al. 2019, §3) for the split; verl's 3D-HybridEngine (Sheng et al.
2024, "HybridFlow", §5) and OpenRLHF / vLLM's weight loading for the resharding between the two.

**Closed forms** (P elements in a weight, N and tp dividing its split dimension, per rank, counting what a rank
receives from the others; summed over the ranks, what is sent equals what is received):

- all-gather then slice (baseline: every rank first rebuilds the whole weight): ``(N − 1)/N · P``;
- direct, ``"row"`` (``Shard(0)`` → ``Shard(1)``): a rank needs P/tp, of which it holds P/(N·tp):
  ``(N − 1)/(N·tp) · P`` — tp times less than the baseline;
- direct, ``"column"`` (``Shard(0)`` over N → ``Shard(0)`` over tp): a rank needs rows chunk j of tp, dp of the N
  training chunks, and holds one of them exactly when its own chunk q = r falls in its TP chunk (``q // dp == q %
  tp``): ``P/tp − [q // dp == q % tp] · P/N``. With tp = N nothing moves; with tp = 1 it is the baseline.
- direct, ``"replicate"``: the baseline.

:func:`received` and :func:`sent` compute the same counts for any sizes from the intervals themselves, and
:func:`plan` lists every piece a rank sends (what :mod:`distlearn.post_training.lab_reshard` sends on real
processes, where the counts are measured).
"""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core.models import ModelConfig
from distlearn.core.records import MODEL
from distlearn.core.validate import DistlearnValueError, check_choice, check_int, checks, each, record

KINDS = ("column", "row", "replicate")


@dataclass(frozen=True)
class Weight:
    """One weight: ``name``, ``rows`` × ``cols`` (``nn.Linear`` shape (out, in); a norm is ``cols = 1``), its TP
    ``kind`` (:data:`KINDS`) and ``count`` (how many such weights the model has: one per layer …)."""

    name: str
    rows: int
    cols: int
    kind: str
    count: int = 1

    def __post_init__(self):
        check_int("rows", self.rows, minimum=1, maximum=10**9)
        check_int("cols", self.cols, minimum=1, maximum=10**9)
        check_choice("kind", self.kind, KINDS)
        check_int("count", self.count, minimum=1, maximum=10**6)

    @property
    def elements(self) -> int:
        return self.rows * self.cols


WEIGHT = record(Weight, "Weight('q', 16, 16, 'column')")


def chunk(size: int, parts: int, index: int) -> tuple[int, int]:
    """``[start, stop)`` of chunk ``index`` when ``size`` is cut into ``parts`` as ``torch.chunk`` and DTensor's
    ``Shard`` cut it: chunks of ``ceil(size/parts)``, the last ones smaller or empty. Raises DistlearnValueError for
    an index outside 0 … parts − 1."""
    size = check_int("size", size, minimum=0, maximum=10**12)
    parts = check_int("parts", parts, minimum=1, maximum=10**6)
    index = check_int("index", index, minimum=0, maximum=parts - 1)
    c = -(-size // parts)
    return min(index * c, size), min((index + 1) * c, size)


def _check_layout(world_size: int, tp: int) -> tuple[int, int]:
    n = check_int("world_size", world_size, minimum=1, maximum=65536)
    tp = check_int("tp", tp, minimum=1, maximum=n)
    if n % tp:
        raise DistlearnValueError("tp", f"tp = {tp} must divide world_size = {n}.",
                                  f"tp = {tp} 必须整除 world_size = {n}。")
    return n, tp


@checks(weight=WEIGHT)
def held(weight: Weight, world_size: int, rank: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(rows, cols) intervals rank ``rank`` holds under FSDP: rows chunk ``rank`` of N, every column. Raises
    DistlearnValueError for a rank outside 0 … world_size − 1."""
    world_size = check_int("world_size", world_size, minimum=1, maximum=65536)
    rank = check_int("rank", rank, minimum=0, maximum=world_size - 1)
    return chunk(weight.rows, world_size, rank), (0, weight.cols)


@checks(weight=WEIGHT)
def needed(weight: Weight, world_size: int, tp: int, rank: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(rows, cols) intervals rank ``rank`` needs for generation: its TP rank is ``rank % tp`` (module doc). Raises
    DistlearnValueError for tp not dividing world_size or a rank outside 0 … world_size − 1."""
    world_size, tp = _check_layout(world_size, tp)
    rank = check_int("rank", rank, minimum=0, maximum=world_size - 1)
    j = rank % tp
    if weight.kind == "column":
        return chunk(weight.rows, tp, j), (0, weight.cols)
    if weight.kind == "row":
        return (0, weight.rows), chunk(weight.cols, tp, j)
    return (0, weight.rows), (0, weight.cols)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, max(lo, hi))


def _area(rows: tuple[int, int], cols: tuple[int, int]) -> int:
    return (rows[1] - rows[0]) * (cols[1] - cols[0])


@dataclass(frozen=True)
class Piece:
    """A block ``rows`` × ``cols`` (intervals) of weight ``name`` that rank ``source`` sends to rank ``dest``."""

    name: str
    source: int
    dest: int
    rows: tuple[int, int]
    cols: tuple[int, int]

    @property
    def elements(self) -> int:
        return _area(self.rows, self.cols)


@checks(weights=each(WEIGHT))
def plan(weights: list[Weight], world_size: int, tp: int, source: int) -> list[Piece]:
    """Every non-empty block rank ``source`` sends, in the order (destination, weight): to each other rank, the part
    of its FSDP rows that the destination needs and does not hold (a rank never needs a block it holds from another
    rank, since FSDP shards do not overlap). Raises DistlearnValueError for tp not dividing world_size."""
    n, tp = _check_layout(world_size, tp)
    source = check_int("source", source, minimum=0, maximum=n - 1)
    out = []
    for dest in range(n):
        if dest == source:
            continue
        for w in weights:
            h_rows, h_cols = held(w, n, source)
            n_rows, n_cols = needed(w, n, tp, dest)
            rows, cols = _overlap(h_rows, n_rows), _overlap(h_cols, n_cols)
            if _area(rows, cols):
                out.append(Piece(w.name, source, dest, rows, cols))
    return out


@checks(weight=WEIGHT)
def received(weight: Weight, world_size: int, tp: int, rank: int) -> int:
    """Elements of ``weight`` rank ``rank`` receives: what it needs minus what it holds (interval arithmetic, any
    sizes). Raises DistlearnValueError for tp not dividing world_size."""
    n, tp = _check_layout(world_size, tp)
    rank = check_int("rank", rank, minimum=0, maximum=n - 1)
    h_rows, h_cols = held(weight, n, rank)
    n_rows, n_cols = needed(weight, n, tp, rank)
    return _area(n_rows, n_cols) - _area(_overlap(h_rows, n_rows), _overlap(h_cols, n_cols))


@checks(weight=WEIGHT)
def sent(weight: Weight, world_size: int, tp: int, rank: int) -> int:
    """Elements of ``weight`` rank ``rank`` sends to the others (the sum of its :func:`plan` pieces)."""
    return sum(p.elements for p in plan([weight], world_size, tp, rank))


@checks(weight=WEIGHT)
def closed_form_received(weight: Weight, world_size: int, tp: int, rank: int) -> float:
    """The module doc's closed forms for the elements rank ``rank`` receives (N and tp dividing the split
    dimension). Raises DistlearnValueError when they do not."""
    n, tp = _check_layout(world_size, tp)
    rank = check_int("rank", rank, minimum=0, maximum=n - 1)
    split = weight.cols if weight.kind == "row" else weight.rows
    if weight.rows % n or split % tp:
        raise DistlearnValueError("weight", f"the closed forms need rows divisible by {n} and the split dimension "
                                            f"by tp = {tp}; got {weight.rows} × {weight.cols}.",
                                  f"闭式公式要求行数能被 {n} 整除、切分的维度能被 tp = {tp} 整除；收到 "
                                  f"{weight.rows} × {weight.cols}。")
    P, dp = weight.elements, n // tp
    if weight.kind == "replicate":
        return (n - 1) / n * P
    if weight.kind == "row":
        return (n - 1) / (n * tp) * P
    return P / tp - (rank // dp == rank % tp) * P / n


@checks(weight=WEIGHT)
def all_gather_received(weight: Weight, world_size: int, rank: int = 0) -> int:
    """Elements rank ``rank`` receives when every rank all-gathers the whole weight: all but its own chunk."""
    n = check_int("world_size", world_size, minimum=1, maximum=65536)
    rank = check_int("rank", rank, minimum=0, maximum=n - 1)
    return weight.elements - _area(*held(weight, n, rank))


@checks(model=MODEL)
def model_weights(model: ModelConfig) -> list[Weight]:
    """The weights of a dense model preset as :class:`Weight` records with their TP kind (embedding and LM head
    vocabulary-parallel, i.e. ``"column"``; q, k, v, gate, up ``"column"``; o, down ``"row"``; norms
    ``"replicate"``); their elements sum to ``model.num_parameters()``. Raises DistlearnValueError for an MoE or
    MLA model, or for GPT's learned positions and biases (Llama-style presets only)."""
    if model.is_moe or model.mla is not None or model.arch != "llama":
        raise DistlearnValueError("model", f"{model.name}: resharding is tabulated for dense Llama-style models.",
                                  f"{model.name}：这里只列出稠密的 Llama 类模型的重新分片。")
    h, L, f, hd = model.hidden_size, model.num_layers, model.ffn_hidden_size, model.head_dim
    q, kv = model.num_heads * hd, model.kv_heads * hd
    out = [Weight("embed", model.vocab_size, h, "column")]
    out += [Weight("q", q, h, "column", L), Weight("k", kv, h, "column", L), Weight("v", kv, h, "column", L),
            Weight("o", h, q, "row", L), Weight("gate", f, h, "column", L), Weight("up", f, h, "column", L),
            Weight("down", h, f, "row", L), Weight("norm", h, 1, "replicate", 2 * L + 1)]
    if not model.tied_embeddings:
        out.append(Weight("lm_head", model.vocab_size, h, "column"))
    return out


@dataclass(frozen=True)
class Traffic:
    """Bytes one rank receives to go from FSDP shards to TP shards, the most over all ranks: ``direct`` and
    ``all_gather`` (the baseline), with ``world_size`` and ``tp``."""

    world_size: int
    tp: int
    direct: float
    all_gather: float

    @property
    def saving(self) -> float:
        """How many times fewer bytes the direct resharding moves."""
        return self.all_gather / self.direct if self.direct else float("inf")


@checks(model=MODEL)
def reshard_traffic(model: ModelConfig, world_size: int = 64, tp: int = 8, bytes_per_param: int = 2) -> Traffic:
    """Per-rank bytes received (the most over ranks) to reshard a dense model from FSDP over ``world_size`` ranks
    to ``world_size / tp`` TP groups of ``tp``, directly and by all-gather (:func:`model_weights`, interval
    counts of :func:`received`). Raises DistlearnValueError for a bad layout or a model :func:`model_weights`
    refuses."""
    n, tp = _check_layout(world_size, tp)
    b = check_int("bytes_per_param", bytes_per_param, minimum=1, maximum=8)
    weights = model_weights.unchecked(model)
    if n > 4096:
        raise DistlearnValueError("world_size", f"world_size = {n}: at most 4096 here.",
                                  f"world_size = {n}：这里最多 4096。")
    ranks = range(n)
    direct = max(sum(w.count * received(w, n, tp, r) for w in weights) for r in ranks)
    gather = max(sum(w.count * all_gather_received(w, n, r) for w in weights) for r in ranks)
    return Traffic(n, tp, direct * b, gather * b)

"""N-D parallelism (chapter 12): ranks on a device mesh, the groups each parallelism forms, what each group sends,
and the memory of one rank in a composed plan.

**The mesh.** ``world_size = pp · dp · cp · tp`` ranks are laid out as an array of that shape in row-major order
(the last dimension varies fastest), exactly what ``torch.distributed.device_mesh.init_device_mesh(device,
(pp, dp, cp, tp), mesh_dim_names=("pp", "dp", "cp", "tp"))`` builds: rank ``r`` has coordinates given by
``numpy.unravel_index(r, shape)``, and the group of dimension ``d`` that contains ``r`` holds the ranks whose
other coordinates equal ``r``'s. This is torchtitan's order (``pp``, data parallel, ``cp``, ``tp``) and Megatron-LM's
default (tensor parallel fastest, pipeline slowest): with 8 GPUs per node, ``tp`` ≤ 8 keeps every tensor-parallel
group inside one node, on NVLink — TP communicates in every layer, on the critical path. Llama 3 keeps tp
innermost too but puts FSDP outermost ([TP, CP, PP, DP] from the inside out, Dubey et al. 2024 §3.3.2), since FSDP
prefetches weights and reduces gradients asynchronously and tolerates the network's latency best.

**Traffic** (:func:`group_traffic`): per optimizer step, for each dimension, which collective a rank takes part in,
how big, how often, and the bytes it sends with ring algorithms (:func:`distlearn.core.comm.ring_bytes_per_rank`):

- ``tp`` with sequence parallelism (Korthikanti et al. 2022 §4.2.2): per layer and micro-batch, 2 all-gathers and
  2 reduce-scatters of the activations ``b·s·h`` (divided by ``cp``) in the forward, the same in the backward;
- ``cp`` (all-gather K/V, as Llama 3's context parallelism; Dubey et al. 2024 §3.3.2): per layer and micro-batch an
  all-gather of K and V in the forward, a reduce-scatter of their gradients in the backward;
- ``pp``: per micro-batch and stage boundary one activation forward and one gradient back, ``b·s·h/(tp·cp)``
  (each tensor-parallel rank sends its sequence shard: Narayanan et al. 2021 §4.1);
- ``dp`` (FSDP2 = ZeRO-3, over ``dp·cp`` ranks, since context-parallel ranks hold the same weights): per
  micro-batch an all-gather of the parameters in forward and in backward, a reduce-scatter of the gradients
  (:func:`distlearn.zero_fsdp.traffic.step_collectives`, engine ``"fsdp2"``; with pipeline parallelism only the last
  micro-batch reduces, torch's ``backward_maybe_with_nosync``).

**Memory** (:func:`predict_rank_memory`): parameters, gradients and Adam states of the rank's shard (counted from the
shapes: which tensors tensor parallelism splits and which it replicates), and the activations its pipeline stage
keeps at its peak (:func:`distlearn.activation_memory.formulas.config_layer_bytes` × layers × micro-batches in flight under 1F1B),
plus the terms by which PyTorch's DTensor sequence parallelism and the course's modules differ from Korthikanti's
accounting (:func:`activation_corrections`).

The toy model (:data:`TOY_MODEL`) and the toy GPU (:data:`TOY_GPU`, 200 kB of memory, 4 per node — **not a real
device**) make the planner's choice non-trivial at a size eight CPU processes train in seconds.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from distlearn.core.comm import ring_bytes_per_rank
from distlearn.core.hardware import GPU, Cluster
from distlearn.core.i18n import bi
from distlearn.core.models import ModelConfig
from distlearn.core.records import MODEL
from distlearn.core.validate import (MAX_STEPS, MAX_WORLD_SIZE, DistlearnValueError, check_bool, check_choice,
                                     check_int, check_text, checks, each, mapping, record)
from distlearn.planning.setting import Plan
from distlearn.core.guard import read_only

__all__ = ["DIMS", "TOY_MODEL", "TOY_GPU", "TOY_CLUSTER", "Layout", "coords", "rank_of", "groups", "group_of",
           "reference_groups", "nodes_spanned", "LLAMA3_405B_LAYOUTS", "llama3_layout", "stage_layers", "one_f_one_b_order",
           "fsdp_all_gathers", "stage_parameters", "GroupTraffic", "group_traffic",
           "bytes_sent_per_step", "calls_by_op", "toy_plan", "layout_from_plan", "predict_rank_memory", "activation_corrections", "RankMemory"]

DIMS = ("pp", "dp", "cp", "tp")   # outermost first: tp varies fastest

TOY_MODEL = ModelConfig("toy-nd", "llama", vocab_size=64, hidden_size=32, num_layers=4, num_heads=4,
                        ffn_hidden_size=64, max_seq_len=16)
TOY_GPU = GPU("toy-200kB", 200e3, 1e9, 10e9, 1e9, gpus_per_node=4, peak_flops_fp32=1e9,
              source="course toy preset, not a real GPU: 200 kB of memory, 1 GFLOP/s, NVLink 10 GB/s, network "
                     "1 GB/s, 4 per node, so that the toy model's layout matters (a real GPU fits it whole)")
TOY_CLUSTER = Cluster(TOY_GPU, 2)   # 8 toy GPUs, 2 nodes of 4


@dataclass(frozen=True)
class Layout:
    """A composed plan: degrees ``pp``, ``dp``, ``cp``, ``tp`` (world size = their product), ``zero_stage`` of
    the data-parallel dimension (3 = FSDP2 ``fully_shard``, 2 = FSDP2 without resharding after forward, 0 =
    replicated weights), ``micro_batch_size`` b and ``num_microbatches`` m per data-parallel replica, and
    ``sequence_parallel`` (with tp > 1). Raises DistlearnValueError for degrees < 1 or an unknown ZeRO stage."""

    pp: int = 1
    dp: int = 1
    cp: int = 1
    tp: int = 1
    zero_stage: int = 3
    micro_batch_size: int = 1
    num_microbatches: int = 1
    sequence_parallel: bool = True

    def __post_init__(self):
        for d in DIMS + ("micro_batch_size", "num_microbatches"):
            check_int(d, getattr(self, d), minimum=1, maximum=4096)
        check_choice("zero_stage", self.zero_stage, (0, 2, 3))

    @property
    def world_size(self) -> int:
        return self.pp * self.dp * self.cp * self.tp

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.pp, self.dp, self.cp, self.tp)

    @property
    def global_batch(self) -> int:
        return self.dp * self.micro_batch_size * self.num_microbatches

    def as_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        dims = " × ".join(f"{d} {getattr(self, d)}" for d in DIMS if getattr(self, d) > 1) or "1 rank"
        return f"{dims}, ZeRO-{self.zero_stage}, b={self.micro_batch_size}, m={self.num_microbatches}"


# ---------------------------------------------------------------------------------------------- mesh
#: A mesh: a :class:`Layout` or its shape, four sizes (pp, dp, cp, tp); a Layout only where the function needs more.
MESH = record((Layout, tuple, list), "Layout(pp=2, dp=2, cp=1, tp=2) or (2, 2, 1, 2)")
LAYOUT = record(Layout, "Layout(pp=2, dp=2, cp=1, tp=2)")


def _shape(layout: Layout | tuple) -> tuple[int, ...]:
    if isinstance(layout, Layout):
        return layout.shape
    if len(layout) != 4:
        raise DistlearnValueError("layout", f"layout must be a Layout or the four sizes (pp, dp, cp, tp), got "
                                            f"{tuple(layout)!r}.",
                                  f"layout 必须是 Layout 或四个维度大小 (pp, dp, cp, tp)，收到 {tuple(layout)!r}。")
    return tuple(check_int("mesh dimension", d) for d in layout)


@checks(layout=MESH)
def coords(rank: int, layout: Layout | tuple) -> dict[str, int]:
    """Coordinates of ``rank`` on the mesh: ``{"pp": …, "dp": …, "cp": …, "tp": …}`` (row-major, tp fastest).
    ``layout``: a :class:`Layout` or the mesh shape ``(pp, dp, cp, tp)``. Raises DistlearnValueError."""
    shape = _shape(layout)
    rank = check_int("rank", rank, minimum=0, maximum=int(np.prod(shape)) - 1)
    return dict(zip(DIMS, (int(c) for c in np.unravel_index(rank, shape))))


@checks(coordinates=mapping(numbers=False), layout=MESH)
def rank_of(coordinates: dict[str, int], layout: Layout | tuple) -> int:
    """The rank at ``coordinates`` (missing dimensions are 0): the inverse of :func:`coords`. Raises
    DistlearnValueError for a dimension not in pp, dp, cp, tp or a coordinate outside the mesh."""
    unknown = sorted(str(d) for d in coordinates if d not in DIMS)
    if unknown:
        raise DistlearnValueError("coordinates", f"coordinates has unknown dimensions {unknown}: use pp, dp, cp, tp.",
                                  f"coordinates 含未知维度 {unknown}：只能用 pp、dp、cp、tp。")
    shape = _shape(layout)
    idx = [check_int(d, coordinates.get(d, 0), minimum=0, maximum=n - 1) for d, n in zip(DIMS, shape)]
    return int(np.ravel_multi_index(idx, shape))


@checks(layout=MESH)
def groups(layout: Layout | tuple, dim: str) -> list[list[int]]:
    """Every group of dimension ``dim``: lists of ranks that differ only in their ``dim`` coordinate, in the order
    of their lowest rank. The ``tp`` groups of ``(2, 2, 1, 2)``: ``[[0, 1], [2, 3], [4, 5], [6, 7]]``."""
    check_choice("dim", dim, DIMS)
    shape = _shape(layout)
    ranks = np.arange(int(np.prod(shape))).reshape(shape)
    axis = DIMS.index(dim)
    moved = np.moveaxis(ranks, axis, -1).reshape(-1, shape[axis])
    return sorted(row.tolist() for row in moved)


@checks(layout=MESH)
def group_of(rank: int, layout: Layout | tuple, dim: str) -> list[int]:
    """The ranks of ``rank``'s group along ``dim`` (``rank`` included), in coordinate order."""
    check_choice("dim", dim, DIMS)
    c = coords(rank, layout)
    n = _shape(layout)[DIMS.index(dim)]
    return [rank_of({**c, dim: i}, layout) for i in range(n)]


def reference_groups(shape: tuple, dim: str) -> list[list[int]]:
    """:func:`groups` written with loops (the readable reference): walk every rank, compute its coordinates by
    repeated division (tp = rank mod tp, then cp, dp, pp), and put it in the group keyed by its *other* coordinates.
    Raises DistlearnValueError for an unknown ``dim``, a shape that is not four sizes ≥ 1, or more than
    :data:`~distlearn.core.validate.MAX_WORLD_SIZE` ranks (the loop walks every rank)."""
    check_choice("dim", dim, DIMS)
    if not isinstance(shape, (tuple, list)) or len(shape) != 4:
        raise DistlearnValueError("shape", f"shape must be the four sizes (pp, dp, cp, tp), got {shape!r}.",
                                  f"shape 必须是四个维度大小 (pp, dp, cp, tp)，收到 {shape!r}。")
    pp, dp, cp, tp = _shape(tuple(shape))
    check_int("world size (pp·dp·cp·tp)", pp * dp * cp * tp, maximum=MAX_WORLD_SIZE)
    found: dict[tuple, list[int]] = {}
    for rank in range(pp * dp * cp * tp):
        rest = rank
        t = rest % tp                 # innermost: neighbouring ranks differ in tp / 相邻 rank 的 tp 坐标不同
        rest //= tp
        c = rest % cp
        rest //= cp
        d = rest % dp
        p = rest // dp                # outermost / 最外层
        coord = {"pp": p, "dp": d, "cp": c, "tp": t}
        key = tuple(v for k, v in coord.items() if k != dim)   # the other coordinates / 其余坐标
        found.setdefault(key, []).append(rank)
    return sorted(found.values())


@checks(layout=MESH)
def nodes_spanned(layout: Layout | tuple, dim: str, gpus_per_node: int) -> int:
    """How many nodes one group of dimension ``dim`` spans when ranks fill nodes in order (rank // gpus_per_node
    is the node; the largest over all groups). With tp innermost and tp ≤ gpus_per_node, every tp group is one
    node (NVLink); outer dimensions cross the network."""
    n = check_int("gpus_per_node", gpus_per_node, minimum=1, maximum=1024)
    return max(len({r // n for r in g}) for g in groups(layout, dim))


#: Llama 3 405B's pre-training layouts, Dubey et al. 2024 ("The Llama 3 Herd of Models"), Table 4: GPUs, TP, CP,
#: PP, DP, sequence length, sequences per data-parallel replica and step (``batch_size_per_dp``), TFLOPs/GPU and
#: BF16 MFU; 8 GPUs per node (§3.3.1). Every row has 2**24 ≈ "16M" tokens per step (dp × batch × seq). The last row's
#: DP is 8 = 16,384 / (8·16·16): arXiv v1 of the paper prints DP 4, which gives neither 16,384 GPUs nor 16M tokens
#: (:data:`distlearn.context_parallel.simulation.LLAMA3_405B_LONG_CONTEXT`). Llama 3 itself orders the dimensions
#: [TP, CP, PP, DP] from innermost to outermost (§3.3.2, Figure 5): FSDP outermost, not pp as torchtitan and
#: Megatron-LM do; with tp = 8 = GPUs per node the node counts of :func:`nodes_spanned` are the same in both orders.
#: Its pipeline is interleaved (several stages per rank) with one transformer layer removed from the first and the
#: last stage (§3.3.2), not the plain 1F1B with equal stages this chapter models.
LLAMA3_405B_LAYOUTS = read_only((
    {"gpus": 8192, "tp": 8, "cp": 1, "pp": 16, "dp": 64, "seq_len": 8192, "batch_size_per_dp": 32,
     "tflops_per_gpu": 430, "bf16_mfu": 0.43},
    {"gpus": 16384, "tp": 8, "cp": 1, "pp": 16, "dp": 128, "seq_len": 8192, "batch_size_per_dp": 16,
     "tflops_per_gpu": 400, "bf16_mfu": 0.41},
    {"gpus": 16384, "tp": 8, "cp": 16, "pp": 16, "dp": 8, "seq_len": 131072, "batch_size_per_dp": 16,
     "tflops_per_gpu": 380, "bf16_mfu": 0.38},
))


@checks(row=mapping(("pp", "dp", "cp", "tp", "batch_size_per_dp"), numbers=False))
def llama3_layout(row: dict, zero_stage: int = 2) -> Layout:
    """The :class:`Layout` of a row of :data:`LLAMA3_405B_LAYOUTS` with one sequence per micro-batch, so that
    ``num_microbatches`` = the row's ``batch_size_per_dp`` (sequences per replica and step; Table 4 gives no
    micro-batch size). ``zero_stage`` 2 by default: Llama 3's FSDP does "not reshard after forward computation to
    avoid an extra all-gather communication during backward passes" (§3.3.2), i.e. ``reshard_after_forward=False``."""
    return Layout(pp=row["pp"], dp=row["dp"], cp=row["cp"], tp=row["tp"], zero_stage=zero_stage,
                  micro_batch_size=1, num_microbatches=row["batch_size_per_dp"])


# ---------------------------------------------------------------------------------------------- stages
def stage_layers(num_layers: int, pp: int, stage: int) -> tuple[int, int]:
    """Block range ``[first, last)`` of pipeline stage ``stage`` (:func:`distlearn.pipeline_parallel.schedules.partition_layers`)."""
    from distlearn.pipeline_parallel.schedules import partition_layers

    sizes = partition_layers(num_layers, pp)
    stage = check_int("stage", stage, minimum=0, maximum=pp - 1)
    first = sum(sizes[:stage])
    return first, first + sizes[stage]


def _llama_only(config: ModelConfig) -> None:
    if config.arch != "llama":
        raise DistlearnValueError("config", "the N-D counts follow the course's Llama block (no biases, RMSNorm, "
                                            f"SwiGLU); got arch={config.arch!r}.",
                                  f"N 维并行的计数按课程的 Llama 块（无偏置、RMSNorm、SwiGLU）；收到 arch={config.arch!r}。")


def stage_parameter_shapes(config: ModelConfig, pp: int, stage: int, tp: int = 1) -> list[tuple[str, tuple]]:
    """``(name, local shape)`` of every parameter of pipeline stage ``stage`` on one tensor-parallel rank, in the
    order of :class:`distlearn.nd_parallel.lab.Stage`. Tensor parallelism splits the embedding and the LM head by
    vocabulary rows, q / k / v / gate / up by output rows (column-wise), o / down by input columns (row-wise); the
    RMSNorm weights are replicated. Llama blocks only. Raises DistlearnValueError when tp does not divide the
    heads, the vocabulary or the MLP width."""
    _llama_only(config)
    tp = check_int("tp", tp)
    pp = check_int("pp", pp, maximum=config.num_layers)
    check_int("stage", stage, minimum=0, maximum=pp - 1)
    h, f, V = config.hidden_size, config.ffn_hidden_size, config.vocab_size
    kv = config.kv_heads * config.head_dim
    for name, n in (("num_heads", config.num_heads), ("num_kv_heads", config.kv_heads), ("vocab_size", V),
                    ("ffn_hidden_size", f)):
        if n % tp:
            raise DistlearnValueError("tp", f"tp = {tp} must divide {name} = {n}.", f"tp = {tp} 必须整除 {name} = {n}。")
    first, last = stage_layers(config.num_layers, pp, stage)
    out = [("embed.weight", (V // tp, h))] if stage == 0 else []
    for i in range(first, last):
        b = f"blocks.{i}."
        out += [(b + "norm1.weight", (h,)), (b + "attn.q.weight", (h // tp, h)), (b + "attn.k.weight", (kv // tp, h)),
                (b + "attn.v.weight", (kv // tp, h)), (b + "attn.o.weight", (h, h // tp)), (b + "norm2.weight", (h,)),
                (b + "mlp.gate.weight", (f // tp, h)), (b + "mlp.up.weight", (f // tp, h)),
                (b + "mlp.down.weight", (h, f // tp))]
    if stage == pp - 1:
        out += [("norm.weight", (h,)), ("lm_head.weight", (V // tp, h))]
    return out


def _chunk(n: int, parts: int, index: int) -> int:
    """Rows of part ``index`` when ``torch.chunk`` splits ``n`` rows into ``parts`` (FSDP2's dim-0 sharding)."""
    size = -(-n // parts)
    return max(0, min(size, n - index * size))


@checks(config=MODEL, layout=LAYOUT)
def stage_parameters(config: ModelConfig, layout: Layout, rank: int) -> int:
    """Parameters (elements) stored by ``rank``: its stage's tensor-parallel shards (:func:`stage_parameter_shapes`),
    sharded again on dim 0 over the ``dp·cp`` ranks by FSDP2 (ZeRO-2/3; ``torch.chunk`` sizes, so exact also when
    a dimension does not divide), whole for ZeRO-0."""
    c = coords(rank, layout)
    shards = layout.dp * layout.cp if layout.zero_stage in (2, 3) else 1
    index = c["dp"] * layout.cp + c["cp"]
    total = 0
    for _, shape in stage_parameter_shapes(config, layout.pp, c["pp"], layout.tp):
        rows = _chunk(shape[0], shards, index) if shards > 1 else shape[0]
        total += rows * int(np.prod(shape[1:], dtype=np.int64))
    return total


# ---------------------------------------------------------------------------------------------- traffic
def one_f_one_b_order(pp: int, stage: int, num_microbatches: int) -> str:
    """The order of forwards ("F") and backwards ("B") of ``stage`` under torch's ``Schedule1F1B``: ``min(m, pp −
    stage)`` forwards, then a backward and a forward in turn until every forward ran, then the remaining
    backwards (Narayanan et al. 2021 §2.2). ``(2, 0, 3)`` → ``"FFBFBB"``."""
    pp = check_int("pp", pp, minimum=1)
    stage = check_int("stage", stage, minimum=0, maximum=pp - 1)
    m = check_int("num_microbatches", num_microbatches, minimum=1, maximum=MAX_STEPS)
    warm = min(m, pp - stage)
    order, f, b = "F" * warm, warm, 0
    while f < m:
        order += "BF"
        f, b = f + 1, b + 1
    return order + "B" * (m - b)


def fsdp_all_gathers(order: str, zero_stage: int, pipelined: bool) -> int:
    """All-gathers of one FSDP2 parameter group over a step whose forwards and backwards run in ``order`` (a string
    of "F" and "B"). A pass gathers when the parameters are sharded; ZeRO-3 (``reshard_after_forward=True``) frees
    them after each forward, ZeRO-2 keeps them until the backward; after a backward they are freed, except under
    ``torch.distributed.pipelining``, which sets ``reshard_after_backward=False`` for every micro-batch
    (``PipelineStage.backward_maybe_with_nosync``) and reshards once at the end of the step. Raises
    DistlearnValueError for an ``order`` that is not a string of "F" and "B", a ZeRO stage other than 2 or 3, or a
    ``pipelined`` that is not a bool."""
    check_text("order", order)
    if set(order) - {"F", "B"}:
        raise DistlearnValueError("order", f'order must be a string of "F" and "B", got {order!r}.',
                                  f'order 必须是由 "F" 和 "B" 组成的字符串，收到 {order!r}。')
    check_choice("zero_stage", zero_stage, (2, 3))
    pipelined = check_bool("pipelined", pipelined)
    gathered, count = False, 0
    for op in order:
        if not gathered:
            count += 1
            gathered = True
        if op == "F" and zero_stage == 3:
            gathered = False
        if op == "B" and not pipelined:
            gathered = False
    return count


@dataclass(frozen=True)
class GroupTraffic:
    """One kind of collective a rank takes part in during one optimizer step: the mesh dimension ``dim`` (its
    group has ``group_size`` ranks), ``collective`` (``all_gather``, ``reduce_scatter``, ``all_reduce``,
    ``send``, ``recv``), ``what`` it moves, ``op`` (the torch operator it dispatches to, as
    :class:`distlearn.nd_parallel.lab.CollectiveCounter` names it), ``calls`` per step, ``bytes_per_call`` (the
    all-gather output, reduce-scatter input, all-reduce or point-to-point message) and ``bytes_sent`` (bytes this
    rank sends per step, ring algorithms: :func:`distlearn.core.comm.ring_bytes_per_rank`)."""

    dim: str
    group_size: int
    collective: str
    what: str
    op: str
    calls: int
    bytes_per_call: float
    bytes_sent: float

    def label(self) -> str:
        """``what`` in the reader's language (:data:`WHAT_ZH`, :func:`distlearn.core.i18n.bi`)."""
        return bi(self.what, WHAT_ZH[self.what])


WHAT_ZH = read_only({   # GroupTraffic.what in Chinese, for the chapter's tables
    "activations (sequence shards → full)": "激活值（序列分片 → 完整）",
    "logits (vocabulary shards → full)": "logits（词表分片 → 完整）",
    "activations (partial sums → sequence shards)": "激活值（部分和 → 序列分片）",
    "RMSNorm weight gradients": "RMSNorm 权重的梯度",
    "K and V (sequence chunks → full)": "K 和 V（序列块 → 完整）",
    "gradients of K and V": "K 和 V 的梯度",
    "activations to the next stage": "发往下一阶段的激活值",
    "their gradients back": "传回的梯度",
    "activations from the previous stage": "来自上一阶段的激活值",
    "parameters of one FSDP group": "一个 FSDP 参数组的参数",
    "gradients of one FSDP group": "一个 FSDP 参数组的梯度",
})


def _traffic(dim, n, collective, what, op, calls, nbytes) -> GroupTraffic:
    if collective in ("send", "recv"):
        sent = calls * nbytes if collective == "send" else 0.0
    else:
        sent = calls * ring_bytes_per_rank(collective, nbytes, n)
    return GroupTraffic(dim, n, collective, what, op, int(calls), float(nbytes), float(sent))


@checks(config=MODEL, layout=LAYOUT)
def group_traffic(config: ModelConfig, layout: Layout, rank: int, *, seq_len: int,
                  activation_bytes: int = 4) -> list[GroupTraffic]:
    """Every collective ``rank`` takes part in during one step of the lab's run
    (:func:`distlearn.nd_parallel.lab.nd_train`) with ``layout`` (ZeRO-2 or 3, sequence parallelism when tp > 1),
    ``p = activation_bytes`` per element (parameters too). s, b, h, V: sequence, micro-batch, hidden, vocabulary;
    ``c = s/cp`` the local sequence; L the stage's layers; m micro-batches; ``R`` = m FSDP reductions without
    pipeline, 1 with it (torch's pipelining reduces after the last micro-batch).

    - **tp** (torch's ``SequenceParallel`` + ``PrepareModuleInput``, Korthikanti et al. 2022 §4.2.2): per layer and
      micro-batch 2 all-gathers (attention and MLP inputs) and 2 reduce-scatters (o and down) of p·b·c·h in the
      forward, and the same again in the backward (each one's gradient is the other); the embedding's output
      reduce-scatter and its gradient's all-gather; at the head the final norm's all-gather (and its gradient's
      reduce-scatter) and the all-gather of the logits p·b·c·V; per FSDP reduction one all-reduce of p·h per RMSNorm
      weight (replicated over tp, its gradient is a partial sum over the sequence shards).
    - **cp**: per layer and micro-batch the all-gather of K and of V (output p·b·(k/t)·s·d each) and, in the
      backward, the reduce-scatter of their gradients.
    - **pp**: per micro-batch a send of the activations and a receive of their gradient (first stage), or the
      reverse (last), p·b·c·h/t each (the sequence shard); a middle stage does both.
    - **dp** (FSDP2 over dp·cp): per parameter group (each block, then the stage's own embedding / norm / head)
      :func:`fsdp_all_gathers` all-gathers and R reduce-scatters of the group's tensor-parallel shard
      (p × its elements, :func:`stage_parameter_shapes`).

    Returns the list (only dimensions of size > 1). Raises DistlearnValueError for ZeRO-0 (not modelled) or when
    tp > 1 without sequence parallelism."""
    _llama_only(config)
    if layout.zero_stage not in (2, 3):
        raise DistlearnValueError("layout", "group_traffic models FSDP2 (zero_stage 2 or 3).",
                                  "group_traffic 只建模 FSDP2（zero_stage 为 2 或 3）。")
    if layout.tp > 1 and not layout.sequence_parallel:
        raise DistlearnValueError("layout", "group_traffic models tp > 1 with sequence parallelism only.",
                                  "group_traffic 只建模带序列并行的 tp > 1。")
    p = check_int("activation_bytes", activation_bytes, minimum=1, maximum=8)
    seq_len = check_int("seq_len", seq_len)
    c = coords(rank, layout)
    pp, dp, cp, tp, m, b = layout.pp, layout.dp, layout.cp, layout.tp, layout.num_microbatches, layout.micro_batch_size
    h, V, s = config.hidden_size, config.vocab_size, seq_len
    cl = s // cp
    first, last = stage_layers(config.num_layers, pp, c["pp"])
    L = last - first
    is_first, is_last = c["pp"] == 0, c["pp"] == pp - 1
    reductions = 1 if pp > 1 else m
    out: list[GroupTraffic] = []
    if tp > 1:
        act = p * b * cl * h
        ag = 4 * L * m + (m if is_first else 0) + (2 * m if is_last else 0)
        rs = 4 * L * m + (m if is_first else 0) + (m if is_last else 0)
        out.append(_traffic("tp", tp, "all_gather", "activations (sequence shards → full)",
                            "c10d_functional.all_gather_into_tensor", ag - (m if is_last else 0), act))
        if is_last:
            out.append(_traffic("tp", tp, "all_gather", "logits (vocabulary shards → full)",
                                "c10d_functional.all_gather_into_tensor", m, p * b * cl * V))
        out.append(_traffic("tp", tp, "reduce_scatter", "activations (partial sums → sequence shards)",
                            "c10d_functional.reduce_scatter_tensor", rs, act))
        norms = 2 * L + (1 if is_last else 0)
        out.append(_traffic("tp", tp, "all_reduce", "RMSNorm weight gradients", "c10d_functional.all_reduce",
                            norms * reductions, p * h))
    if cp > 1:
        kv = p * b * (config.kv_heads // tp) * s * config.head_dim
        out.append(_traffic("cp", cp, "all_gather", "K and V (sequence chunks → full)", "c10d.allgather_",
                            2 * L * m, kv))
        out.append(_traffic("cp", cp, "reduce_scatter", "gradients of K and V", "c10d.reduce_scatter_",
                            2 * L * m, kv))
    if pp > 1:
        msg = p * b * cl * h / tp
        if not is_last:
            out.append(_traffic("pp", pp, "send", "activations to the next stage", "c10d.send", m, msg))
            out.append(_traffic("pp", pp, "recv", "their gradients back", "c10d.recv_", m, msg))
        if not is_first:
            out.append(_traffic("pp", pp, "recv", "activations from the previous stage", "c10d.recv_", m, msg))
            out.append(_traffic("pp", pp, "send", "their gradients back", "c10d.send", m, msg))
    n = dp * cp
    if n > 1:
        shapes = stage_parameter_shapes(config, pp, c["pp"], tp)
        block_elems: dict[str, int] = {}
        own = 0
        for name, shape in shapes:
            k = int(np.prod(shape))
            if name.startswith("blocks."):
                key = name.split(".")[1]
                block_elems[key] = block_elems.get(key, 0) + k
            else:
                own += k
        group_sizes = list(block_elems.values()) + ([own] if own else [])
        order = one_f_one_b_order(pp, c["pp"], m) if pp > 1 else "FB" * m
        gathers = fsdp_all_gathers(order, layout.zero_stage, pipelined=pp > 1)
        for elems in group_sizes:
            out.append(_traffic("dp", n, "all_gather", "parameters of one FSDP group", "c10d._allgather_base_",
                                gathers, p * elems))
            out.append(_traffic("dp", n, "reduce_scatter", "gradients of one FSDP group",
                                "c10d._reduce_scatter_base_", reductions, p * elems))
    return out


TRAFFIC = each(record(GroupTraffic, "group_traffic(...)[0]"), min_len=0)


@checks(traffic=TRAFFIC)
def bytes_sent_per_step(traffic: list[GroupTraffic]) -> dict[str, float]:
    """Bytes a rank sends per step, by mesh dimension, from :func:`group_traffic`."""
    out: dict[str, float] = {}
    for t in traffic:
        out[t.dim] = out.get(t.dim, 0.0) + t.bytes_sent
    return out


@checks(traffic=TRAFFIC)
def calls_by_op(traffic: list[GroupTraffic]) -> dict[str, int]:
    """Calls per torch operator (the names :class:`distlearn.nd_parallel.lab.CollectiveCounter` counts)."""
    out: dict[str, int] = {}
    for t in traffic:
        out[t.op] = out.get(t.op, 0) + t.calls
    return out


# ---------------------------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class RankMemory:
    """Predicted bytes of one rank: ``params``, ``grads``, ``optimizer`` (Adam's two moments), ``activations``
    (peak kept for backward), and ``terms``: the activation bytes by source (``"layers"`` = the course's formula,
    then each correction)."""

    params: int
    grads: int
    optimizer: int
    activations: float
    terms: dict

    @property
    def model_states(self) -> int:
        return self.params + self.grads + self.optimizer

    @property
    def total(self) -> float:
        return self.model_states + self.activations


@checks(config=MODEL)
def activation_corrections(config: ModelConfig, *, seq_len: int, micro_batch_size: int, tp: int,
                           sequence_parallel: bool, activation_bytes: int) -> dict[str, float]:
    """Bytes per layer and micro-batch that the lab's run keeps beyond :func:`distlearn.activation_memory.formulas.config_layer_bytes`
    (Korthikanti et al. 2022's accounting with Megatron-LM's sequence parallelism), each measured to the byte:

    - ``gathered_inputs``: PyTorch's ``SequenceParallel`` + ``PrepareModuleInput`` all-gather the normed input of
      the attention and of the MLP and the column-wise linears save that *gathered* tensor (s·b·h); Megatron saves
      the sequence shard (s·b·h/t) and all-gathers again in the backward. 2·p·s·b·h·(1 − 1/t).
    - ``rmsnorm_product``: the course's :class:`~distlearn.core.transformer.RMSNorm` is written out
      (``weight · x · rsqrt(mean(x²) + ε)``), so autograd keeps ``weight · x`` and the 1/rms column besides the
      input: 2 norms × p·(s·b·h + s·b), divided by t with sequence parallelism.
    - ``lse_dtype``: the CPU flash kernel keeps its log-sum-exp in the input dtype when it is wider than fp32
      (float64): a·s·b/t·(p − 4) when p > 4, else 0.

    Raises DistlearnValueError for sizes that are not integers ≥ 1, ``activation_bytes`` outside [1, 8] or a
    ``sequence_parallel`` that is not a bool.
    """
    s = check_int("seq_len", seq_len)
    b = check_int("micro_batch_size", micro_batch_size)
    tp = check_int("tp", tp)
    sequence_parallel = check_bool("sequence_parallel", sequence_parallel)
    p = check_int("activation_bytes", activation_bytes, minimum=1, maximum=8)
    h, a = config.hidden_size, config.num_heads
    split = tp if sequence_parallel else 1
    gathered = 2 * p * s * b * h * (1 - 1 / tp) if sequence_parallel and tp > 1 else 0.0
    return {"gathered_inputs": gathered, "rmsnorm_product": 2 * p * (s * b * h + s * b) / split,
            "lse_dtype": a * s * b / tp * max(0, p - 4)}


TERMS_ZH = read_only({  # RankMemory.terms in Chinese, for the chapter's listing (i18n.named)
    "layers": "各层，第 08 章的公式",
    "gathered_inputs": "收集后的输入",
    "rmsnorm_product": "RMSNorm 的 w·x 与 1/rms",
    "lse_dtype": "按输入精度保存的 log-sum-exp",
    "token_ids": "词元 ID",
    "head": "输出层",
    "logits": "输出层未归一化的分数",
    "targets_and_loss": "目标与损失",
})


@checks(config=MODEL, layout=LAYOUT)
def predict_rank_memory(config: ModelConfig, layout: Layout, rank: int, *, seq_len: int,
                        activation_bytes: int = 4, corrections: bool = True) -> RankMemory:
    """What the course's models predict for ``rank`` of the lab's run with ``layout`` (fp32: ``activation_bytes``
    4, float64: 8; parameters, gradients and activations in that dtype, Adam's two moments too).

    Model states: :func:`stage_parameters` × p bytes for the parameters and for the gradients, 2 × for Adam
    (:func:`distlearn.memory.formulas.model_state_bytes` with ZeRO-3 over dp·cp gives the same when everything divides).
    Activations at the peak of stage s under 1F1B (Narayanan et al. 2021 §2.2): ``min(pp − s, m)`` micro-batches in
    flight (1 without pipeline), each keeping, per layer, :func:`distlearn.activation_memory.formulas.config_layer_bytes` (Llama
    block, flash attention, sequence parallelism) plus :func:`activation_corrections` when ``corrections``; the
    first stage also keeps the token ids (8 bytes each) of the replica's b·m sequences (the micro-batches are views
    of one tensor); the last stage the final norm's input, ``weight · x`` and 1/rms (sequence shards), the LM
    head's gathered input (s·b·h), the log-softmax of the full logits (p·s·b·V: the head's output is replicated),
    the targets (8 bytes each, b·m sequences) and the loss's total weight (p bytes). Without ``corrections`` the
    last stage follows :func:`distlearn.activation_memory.formulas.model_activation_bytes` (two s·b·h/t inputs, logits /t).
    Context parallelism is not modelled (raises DistlearnValueError for cp > 1). Returns :class:`RankMemory`."""
    from distlearn.activation_memory.formulas import config_layer_bytes

    _llama_only(config)
    if layout.cp > 1:
        raise DistlearnValueError("layout", "predict_rank_memory does not model context parallelism (cp > 1).",
                                  "predict_rank_memory 不包含上下文并行（cp > 1）的模型。")
    p = check_int("activation_bytes", activation_bytes, minimum=1, maximum=8)
    corrections = check_bool("corrections", corrections)
    c = coords(rank, layout)
    n = stage_parameters(config, layout, rank)
    s, b, m, tp = seq_len, layout.micro_batch_size, layout.num_microbatches, layout.tp
    h, V = config.hidden_size, config.vocab_size
    sp = layout.sequence_parallel and tp > 1
    split = tp if sp else 1
    first, last = stage_layers(config.num_layers, layout.pp, c["pp"])
    inflight = min(layout.pp - c["pp"], m) if layout.pp > 1 else 1
    per_layer = config_layer_bytes(config, seq_len=s, micro_batch_size=b, tp=tp, sequence_parallel=sp,
                                   attention="flash", activation_bytes=p)
    terms = {"layers": per_layer * (last - first) * inflight}
    if corrections:
        for name, value in activation_corrections(config, seq_len=s, micro_batch_size=b, tp=tp,
                                                  sequence_parallel=sp, activation_bytes=p).items():
            terms[name] = value * (last - first) * inflight
    if c["pp"] == 0 and corrections:
        terms["token_ids"] = 8 * b * m * s
    if c["pp"] == layout.pp - 1:
        sbh = s * b * h
        if corrections:
            terms["head"] = (p * (2 * sbh + s * b) / split + p * sbh) * inflight
            terms["logits"] = p * s * b * V * inflight
            terms["targets_and_loss"] = 8 * b * m * s + p
        else:
            terms["head"] = 2 * p * sbh / split * inflight
            terms["logits"] = p * s * b * V / tp * inflight
    return RankMemory(params=n * p, grads=n * p, optimizer=2 * n * p, activations=float(sum(terms.values())),
                      terms=terms)


# ---------------------------------------------------------------------------------------------- plan → run
TOY_BATCH, TOY_SEQ = 4, 16   # the lab's global batch (sequences per step) and sequence length


def toy_plan():
    """The course planner's best plan (:func:`distlearn.planning.search`) for :data:`TOY_MODEL` on the 8 toy GPUs of
    :data:`TOY_CLUSTER`, global batch 4, sequence 16, fp32 with Adam, no reserve (a toy GPU has no CUDA context
    nor allocator slack), among those the lab runs (:func:`layout_from_plan`: no recomputation, one chunk per
    stage, ZeRO 0/2/3, 1F1B): returns its :class:`~distlearn.planning.Estimate`."""
    return next(e for e in toy_search().plans if _lab_runs(e.plan))


def toy_search():
    """Every plan of the course planner for :data:`TOY_MODEL` on :data:`TOY_CLUSTER` (global batch 4, sequence 16,
    fp32 with Adam, no reserve), ranked: its :class:`~distlearn.planning.SearchResult`."""
    from distlearn.planning import search

    return search(TOY_MODEL, global_batch=TOY_BATCH, seq_len=TOY_SEQ, cluster=TOY_CLUSTER, precision="fp32",
                  reserve_bytes=0, fragmentation=0)


def _lab_runs(plan) -> bool:
    """Whether the lab runs ``plan``: no recomputation, one chunk per stage, ZeRO 0/2/3, 1F1B."""
    return plan.recompute == "none" and plan.num_chunks == 1 and plan.zero_stage != 1 and plan.schedule == "1f1b"


@checks(plan=record(Plan, "distlearn.planning.search(...).best.plan"))
def layout_from_plan(plan) -> Layout:
    """The lab's :class:`Layout` for a planner :class:`~distlearn.planning.Plan` (cp = 1). Raises
    DistlearnValueError for what the lab does not run: recomputation, interleaved stages, ZeRO-1, a schedule other
    than 1F1B."""
    if not _lab_runs(plan):
        raise DistlearnValueError("plan", f"the lab runs no recomputation, one chunk per stage, ZeRO 0/2/3, 1F1B; "
                                          f"got {plan.describe()}.",
                                  f"实验只运行不重计算、每段一个块、ZeRO 0/2/3、1F1B 调度的方案；收到 {plan.describe()}。")
    return Layout(pp=plan.pp, dp=plan.dp, tp=plan.tp, zero_stage=plan.zero_stage,
                  micro_batch_size=plan.micro_batch_size, num_microbatches=plan.num_microbatches,
                  sequence_parallel=plan.sequence_parallel)

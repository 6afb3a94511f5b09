"""A virtual cluster: N simulated ranks holding real numpy arrays, with collectives and traffic accounting.

Each collective takes one array per rank (a list indexed by rank) and returns one array per rank. The ring
collectives really run the ring algorithm (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for
clusters of workstations"; Thakur, Rabenseifner & Gropp 2005, "Optimization of collective communication operations
in MPICH"), the one NCCL uses for large messages: data moves only between neighbours ``r → r+1 (mod n)``, one chunk
per rank per step. Every step is kept in :attr:`VirtualCluster.steps` (who sent which chunk to whom, and how many
ranks' data each rank's copy of each chunk already contains), so the algorithm can be drawn step by step.

Bytes each rank sends (message of ``M`` bytes, ``n`` ranks; equal chunks):

=================  =========================================================  ==========
all_reduce         n−1 reduce-scatter steps + n−1 all-gather steps            2(n−1)/n·M
all_gather         n−1 steps, ``M`` = output (all shards together)            (n−1)/n·M
reduce_scatter     n−1 steps, ``M`` = input                                   (n−1)/n·M
all_to_all         n−1 steps, ``M`` = input                                   (n−1)/n·M
broadcast          chain src → src+1 → …: every rank but the last sends once  M (or 0)
reduce             chain ending at dst: every rank but dst sends once         M (or 0)
=================  =========================================================  ==========

**Chunks.** ``all_reduce`` flattens the message and splits it into ``n`` chunks as :func:`numpy.array_split` does:
the first ``M mod n`` chunks have one element more, nothing is padded (chunks may be empty when the message has
fewer elements than ranks). Rank ``r`` then sends every chunk but ``r`` in the reduce-scatter phase and every chunk
but ``r+1`` in the all-gather phase, i.e. exactly ``2·M − |chunk r| − |chunk r+1|`` bytes; summed over ranks this is
exactly ``2(n−1)·M``, an average of ``2(n−1)/n·M`` per rank. ``reduce_scatter`` and ``all_to_all`` split axis 0 and
need it divisible by ``n`` (pad first, as FSDP does).

**Numbers.** ``sum`` and ``max`` are computed chunk by chunk around the ring, so the order of the additions
differs from ``numpy.sum`` over ranks: integers (and floats holding integers) match exactly, other floats to
rounding (≈1e-16 relative per addition). ``mean`` is NCCL's ``ncclAvg`` (``hostToDevRedOp`` in NCCL's
``src/enqueue.cc``): for floating-point arrays every rank's input is first **multiplied by 1/n** rounded to the
array's dtype (``float(1.0/n)`` for float32, via float for float16, ``1.0/n`` for float64), and the products are
summed around the ring (``ncclDevPreMulSum``) — so the mean of three float32 197.0 is 197.00002, not 197; for
integer arrays the ring sum is divided by n with C's truncation toward zero (``ncclDevSumPostDiv``). Gloo's
``ReduceOp.AVG`` and ``numpy.mean`` round differently; :func:`nccl_average` gives NCCL's result directly.
"""
from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from distlearn.core.validate import DistlearnValueError, check_array, check_choice, check_int, check_number

OPS = ("sum", "mean", "max")
OPERATIONS = ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@dataclass
class Transfer:
    """One message of one step: rank ``src`` sends chunk ``chunk`` (``nbytes`` bytes) to rank ``dst``."""

    src: int
    dst: int
    chunk: int
    nbytes: int


@dataclass
class Step:
    """One step of a collective.

    ``phase``: e.g. ``"reduce-scatter"`` or ``"all-gather"``; ``transfers``: the messages sent in this step;
    ``holdings``: int array (world_size, num_chunks) *after* the step: how many ranks' contributions rank ``r``'s
    copy of chunk ``c`` contains (0 = rank r does not have chunk c; world_size = complete).
    """

    phase: str
    transfers: list[Transfer] = field(default_factory=list)
    holdings: np.ndarray | None = None


def _combine(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    return np.maximum(a, b) if op == "max" else a + b


def _avg_scale(dtype: np.dtype, n: int):
    """NCCL's 1/n pre-multiplier for a floating dtype, rounded as ``hostToDevRedOp`` rounds it."""
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return np.float64(1.0 / n)
    return np.float32(1.0 / n).astype(dtype)        # float32 directly; float16 through float, as __float2half


def _pre_average(arrays: list[np.ndarray], n: int) -> list[np.ndarray]:
    """ncclAvg's pre-operation: floats multiplied by 1/n in their own dtype; integers unchanged."""
    if np.issubdtype(arrays[0].dtype, np.floating):
        scale = _avg_scale(arrays[0].dtype, n)
        return [(a * scale).astype(a.dtype) for a in arrays]
    return arrays


def _post_average(x: np.ndarray, n: int) -> np.ndarray:
    """ncclAvg's post-operation: integers divided by n, truncating toward zero as C does; floats unchanged."""
    if np.issubdtype(x.dtype, np.integer):
        return (np.sign(x) * (np.abs(x) // n)).astype(x.dtype)
    return x


def nccl_average(arrays, world_size: int | None = None) -> np.ndarray:
    """What NCCL's ``ReduceOp.AVG`` returns for one rank's ``arrays`` (one per rank, summed in rank order):
    pre-multiplied floats or a truncated integer quotient (see the module docstring). Same dtype as the inputs."""
    arrays = _check_rank_arrays(arrays)
    n = len(arrays) if world_size is None else check_int("world_size", world_size)
    acc = None
    for a in _pre_average(arrays, n):
        acc = a.copy() if acc is None else (acc + a).astype(a.dtype)
    return _post_average(acc, n)


class VirtualCluster:
    """``world_size`` simulated ranks. ``bytes_sent[r]`` / ``bytes_received[r]`` count each rank's traffic (bytes,
    int64, cumulative until :meth:`reset_traffic`); ``messages_sent[r]`` counts the point-to-point messages rank r
    sent with :meth:`send` (each costs one α in the α-β model); :attr:`steps` holds the steps of the last
    collective."""

    def __init__(self, world_size: int):
        self.world_size = check_int("world_size", world_size, minimum=1, maximum=4096)
        self.steps: list[Step] = []
        self._mailbox: dict[tuple[int, int], deque] = {}
        self.reset_traffic()

    def __repr__(self) -> str:
        return f"VirtualCluster(world_size={self.world_size})"

    def reset_traffic(self) -> None:
        """Zero the per-rank byte and message counters."""
        self.bytes_sent = np.zeros(self.world_size, dtype=np.int64)
        self.bytes_received = np.zeros(self.world_size, dtype=np.int64)
        self.messages_sent = np.zeros(self.world_size, dtype=np.int64)

    # ---------------------------------------------------------------- helpers
    def _per_rank(self, arrays, name: str = "arrays") -> list[np.ndarray]:
        if not isinstance(arrays, (list, tuple)) or len(arrays) != self.world_size:
            raise DistlearnValueError(
                name, f"{name} must be a list of one array per rank ({self.world_size}), got "
                      f"{type(arrays).__name__} of length {len(arrays) if hasattr(arrays, '__len__') else '?'}.",
                f"{name} 必须是每个 rank 一个数组的列表（共 {self.world_size} 个）。")
        out = [_as_numpy(a) for a in arrays]
        shapes = {a.shape for a in out}
        if len(shapes) != 1:
            raise DistlearnValueError(name, f"every rank's array must have the same shape, got {sorted(shapes)}.",
                                      f"每个 rank 的数组形状必须相同，收到 {sorted(shapes)}。")
        return out

    def _rank(self, name: str, value: int) -> int:
        return check_int(name, value, minimum=0, maximum=self.world_size - 1)

    def _transfer(self, step: Step, src: int, dst: int, chunk: int, nbytes: int) -> None:
        step.transfers.append(Transfer(src, dst, chunk, int(nbytes)))
        self.bytes_sent[src] += int(nbytes)
        self.bytes_received[dst] += int(nbytes)

    def _axis0_chunks(self, arrays, name="arrays") -> list[list[np.ndarray]]:
        n = self.world_size
        length = arrays[0].shape[0] if arrays[0].ndim else 1
        if arrays[0].ndim == 0 or length % n:
            raise DistlearnValueError(
                name, f"{name} needs axis 0 ({length}) divisible by world_size ({n}); pad first.",
                f"{name} 要求第 0 维（{length}）能被 world_size（{n}）整除；请先填充。")
        return [[c.copy() for c in np.split(a, n, axis=0)] for a in arrays]

    # ---------------------------------------------------------------- ring phases (run on chunk lists)
    def _ring_reduce_scatter(self, bufs: list[list[np.ndarray]], op: str, hold: np.ndarray) -> None:
        """n−1 steps; at step s rank r sends chunk (r−s−1) mod n to r+1, which combines it into its own copy.
        Afterwards rank r holds chunk r reduced over all ranks."""
        n = self.world_size
        for s in range(n - 1):
            step = Step("reduce-scatter")
            sent = [(r, (r - s - 1) % n, bufs[r][(r - s - 1) % n]) for r in range(n)]  # all send at once
            for r, c, data in sent:
                dst = (r + 1) % n
                self._transfer(step, r, dst, c, data.nbytes)
                bufs[dst][c] = _combine(bufs[dst][c], data, op)
                hold[dst, c] += hold[r, c]
            step.holdings = hold.copy()
            self.steps.append(step)

    def _ring_all_gather(self, bufs: list[list[np.ndarray | None]], hold: np.ndarray) -> None:
        """n−1 steps; at step s rank r forwards chunk (r−s) mod n (complete) to r+1, which stores it."""
        n = self.world_size
        for s in range(n - 1):
            step = Step("all-gather")
            sent = [(r, (r - s) % n, bufs[r][(r - s) % n]) for r in range(n)]
            for r, c, data in sent:
                dst = (r + 1) % n
                self._transfer(step, r, dst, c, data.nbytes)
                bufs[dst][c] = data.copy()
                hold[dst, c] = hold[r, c]
            step.holdings = hold.copy()
            self.steps.append(step)

    # ---------------------------------------------------------------- collectives
    def all_reduce(self, arrays, op: str = "sum") -> list[np.ndarray]:
        """Every rank gets the element-wise reduction (``sum``, ``mean`` or ``max``) of all ranks' arrays.

        Runs the ring algorithm (n−1 reduce-scatter steps, then n−1 all-gather steps) on the flattened message
        split into ``n`` chunks like ``np.array_split``. Shapes: each input any shape, all equal; each output the
        same shape. Raises DistlearnValueError for a bad ``op`` or mismatched shapes.
        """
        check_choice("op", op, OPS)
        arrays = self._per_rank(arrays)
        n, shape = self.world_size, arrays[0].shape
        self.steps = []
        data = _pre_average(arrays, n) if op == "mean" else arrays
        bufs = [[c.copy() for c in np.array_split(a.reshape(-1), n)] for a in data]
        hold = np.ones((n, n), dtype=np.int64)
        self.steps.append(Step("start", holdings=hold.copy()))
        self._ring_reduce_scatter(bufs, "max" if op == "max" else "sum", hold)
        self._ring_all_gather(bufs, hold)
        out = []
        for r in range(n):
            flat = np.concatenate(bufs[r]) if bufs[r] else np.zeros(0, arrays[0].dtype)
            if op == "mean":
                flat = _post_average(flat, n)
            out.append(flat.reshape(shape))
        return out

    def all_gather(self, shards) -> list[np.ndarray]:
        """Every rank gets all ranks' shards concatenated along axis 0, in rank order (ring, n−1 steps).

        Shapes: shards all equal, (k, ...) → output (n·k, ...); 0-d shards become (n,)."""
        shards = [np.atleast_1d(s) for s in self._per_rank(shards, "shards")]
        n = self.world_size
        self.steps = []
        bufs: list[list] = [[shards[r].copy() if c == r else None for c in range(n)] for r in range(n)]
        hold = np.eye(n, dtype=np.int64)
        self.steps.append(Step("start", holdings=hold.copy()))
        # rank r starts with chunk r, exactly the state all-reduce's gather phase starts from
        self._ring_all_gather(bufs, hold)
        return [np.concatenate(bufs[r], axis=0) for r in range(n)]

    def reduce_scatter(self, arrays, op: str = "sum") -> list[np.ndarray]:
        """Rank r gets chunk r (along axis 0) of the reduction (ring, n−1 steps).

        Axis 0 must be divisible by world_size (pad first). Shapes: input (n·k, ...) → output (k, ...)."""
        check_choice("op", op, OPS)
        arrays = self._per_rank(arrays)
        n = self.world_size
        bufs = self._axis0_chunks(_pre_average(arrays, n) if op == "mean" else arrays)
        self.steps = []
        hold = np.ones((n, n), dtype=np.int64)
        self.steps.append(Step("start", holdings=hold.copy()))
        self._ring_reduce_scatter(bufs, "max" if op == "max" else "sum", hold)
        return [_post_average(bufs[r][r], n) if op == "mean" else bufs[r][r] for r in range(n)]

    def broadcast(self, arrays, src: int = 0) -> list[np.ndarray]:
        """Every rank gets rank ``src``'s array (the other ranks' entries are ignored and may be None).

        Chain src → src+1 → … → src−1: n−1 steps, each rank but the last sends the whole message once (NCCL
        pipelines it in chunks along the same chain; the bytes are the same)."""
        n = self.world_size
        src = self._rank("src", src)
        if not isinstance(arrays, (list, tuple)) or len(arrays) != n:
            raise DistlearnValueError("arrays", f"arrays must be a list of {n} entries (one per rank).",
                                      f"arrays 必须是 {n} 个元素的列表（每个 rank 一个）。")
        data = _as_numpy(arrays[src])
        self.steps = []
        hold = np.zeros((n, 1), dtype=np.int64)
        hold[src, 0] = 1
        self.steps.append(Step("start", holdings=hold.copy()))
        for s in range(n - 1):
            step = Step("broadcast")
            a, b = (src + s) % n, (src + s + 1) % n
            self._transfer(step, a, b, 0, data.nbytes)
            hold[b, 0] = 1
            step.holdings = hold.copy()
            self.steps.append(step)
        return [data.copy() for _ in range(n)]

    def reduce(self, arrays, dst: int = 0, op: str = "sum") -> list[np.ndarray]:
        """Rank ``dst`` gets the reduction of all ranks' arrays; the other ranks keep their input (as in
        ``torch.distributed.reduce``, where their tensors are not meant to be read).

        Chain dst+1 → dst+2 → … → dst: n−1 steps, each rank but ``dst`` sends the whole message once."""
        check_choice("op", op, OPS)
        arrays = self._per_rank(arrays)
        n = self.world_size
        dst = self._rank("dst", dst)
        self.steps = []
        hold = np.ones((n, 1), dtype=np.int64)
        self.steps.append(Step("start", holdings=hold.copy()))
        data = _pre_average(arrays, n) if op == "mean" else arrays
        acc = data[(dst + 1) % n].copy()
        for s in range(n - 1):
            step = Step("reduce")
            a, b = (dst + 1 + s) % n, (dst + 2 + s) % n
            self._transfer(step, a, b, 0, acc.nbytes)
            acc = _combine(data[b], acc, "max" if op == "max" else "sum")
            hold[b, 0] += hold[a, 0]
            step.holdings = hold.copy()
            self.steps.append(step)
        if op == "mean":
            acc = _post_average(acc, n)
        return [acc if r == dst else arrays[r].copy() for r in range(n)]

    def all_to_all(self, arrays) -> list[np.ndarray]:
        """Rank ``i`` splits its array into n chunks along axis 0 and sends chunk ``j`` to rank ``j``; rank ``j``
        returns the chunks it received, concatenated in rank order (``torch.distributed.all_to_all_single``).

        n−1 steps; at step s rank r sends its chunk (r+s) mod n directly to rank (r+s) mod n. Axis 0 must be
        divisible by world_size. Shapes: (n·k, ...) → (n·k, ...)."""
        arrays = self._per_rank(arrays)
        n = self.world_size
        chunks = self._axis0_chunks(arrays)
        self.steps = []
        # holdings[r, c]: 1 once rank r holds its output slot c (chunk r of rank c)
        hold = np.eye(n, dtype=np.int64)
        self.steps.append(Step("start", holdings=hold.copy()))
        for s in range(1, n):
            step = Step("all-to-all")
            for r in range(n):
                d = (r + s) % n
                self._transfer(step, r, d, r, chunks[r][d].nbytes)
                hold[d, r] = 1
            step.holdings = hold.copy()
            self.steps.append(step)
        return [np.concatenate([chunks[i][j] for i in range(n)], axis=0) for j in range(n)]

    # ---------------------------------------------------------------- point to point
    def send(self, array, src: int, dst: int) -> None:
        """Rank ``src`` sends ``array`` to rank ``dst`` (queued until :meth:`recv`). Counts its bytes and one
        message."""
        src, dst = self._rank("src", src), self._rank("dst", dst)
        if src == dst:
            raise DistlearnValueError("dst", f"a rank cannot send to itself (src = dst = {src}).",
                                      f"rank 不能发送给自己（src = dst = {src}）。")
        data = _as_numpy(array).copy()
        self._mailbox.setdefault((src, dst), deque()).append(data)
        self.bytes_sent[src] += data.nbytes
        self.bytes_received[dst] += data.nbytes
        self.messages_sent[src] += 1

    def recv(self, src: int, dst: int) -> np.ndarray:
        """Rank ``dst`` receives the oldest message from rank ``src``. Raises DistlearnValueError if none is
        waiting (on a real cluster this recv would block forever: a deadlock)."""
        src, dst = self._rank("src", src), self._rank("dst", dst)
        queue = self._mailbox.get((src, dst))
        if not queue:
            raise DistlearnValueError(
                "src", f"no message from rank {src} to rank {dst} is waiting: on a real cluster this recv would "
                       "block forever (deadlock).",
                f"没有从 rank {src} 发往 rank {dst} 的消息：在真实集群上这个 recv 会永远阻塞（死锁）。")
        return queue.popleft()

    def run(self, operation: str, arrays, **kwargs) -> list[np.ndarray]:
        """Call the collective named ``operation`` (one of :data:`OPERATIONS`)."""
        check_choice("operation", operation, OPERATIONS)
        return getattr(self, operation)(arrays, **kwargs)


def reference_ring_all_reduce(arrays) -> list[np.ndarray]:
    """Ring all-reduce (sum) written as its two loops: n−1 reduce-scatter steps, then n−1 all-gather steps.

    The readable reference for :meth:`VirtualCluster.all_reduce` (which also records every step and counts bytes;
    a test checks both give the same arrays, bit for bit). ``arrays``: one array per rank, same shape; returns one
    array per rank, each the element-wise sum. Chunks as ``np.array_split`` of the flattened message. Source:
    Patarasuk & Yuan 2009.
    """
    n = len(arrays)
    # chunks[r][c]: rank r's copy of chunk c / rank r 手中第 c 块的副本
    chunks = [[c.copy() for c in np.array_split(np.asarray(a).reshape(-1), n)] for a in arrays]
    # reduce-scatter: at step s rank r sends chunk (r − s − 1) mod n to rank r + 1, which adds it to its copy
    # ReduceScatter：第 s 步 rank r 把第 (r − s − 1) mod n 块发给 rank r + 1，后者把它加到自己的副本上
    for s in range(n - 1):
        sent = [chunks[r][(r - s - 1) % n] for r in range(n)]        # all ranks send at once / 所有 rank 同时发送
        for r in range(n):
            c = (r - s - 1) % n
            chunks[(r + 1) % n][c] = chunks[(r + 1) % n][c] + sent[r]
    # now rank r holds chunk r summed over all ranks / 现在 rank r 持有求和完成的第 r 块
    # all-gather: at step s rank r passes its complete chunk (r − s) mod n on to rank r + 1, which keeps it
    # AllGather：第 s 步 rank r 把完整的第 (r − s) mod n 块传给 rank r + 1，后者保存它
    for s in range(n - 1):
        sent = [chunks[r][(r - s) % n] for r in range(n)]
        for r in range(n):
            chunks[(r + 1) % n][(r - s) % n] = sent[r].copy()
    return [np.concatenate(chunks[r]).reshape(np.shape(arrays[r])) for r in range(n)]


def _check_rank_arrays(arrays) -> list[np.ndarray]:
    """``arrays``: one numeric array per rank (a list, or an array whose first axis is the rank), at least one, of
    one shape; NaN and infinity pass (a collective moves whatever the ranks hold). Raises DistlearnValueError."""
    if arrays is None or isinstance(arrays, (str, bytes, dict)) or not hasattr(arrays, "__len__") or not len(arrays):
        raise DistlearnValueError("arrays", f"arrays must hold one numeric array per rank (at least one), got "
                                            f"{arrays!r:.60}.",
                                  f"arrays 必须为每个 rank 提供一个数值数组（至少一个），收到 {arrays!r:.60}。")
    out = [check_array(f"arrays[{r}]", a, finite=False) for r, a in enumerate(arrays)]
    if any(a.shape != out[0].shape for a in out):
        raise DistlearnValueError("arrays", f"every rank's array must have one shape; got "
                                            f"{sorted({a.shape for a in out})}.",
                                  f"每个 rank 的数组形状必须相同；收到 {sorted({a.shape for a in out})}。")
    return [np.asarray(a) for a in arrays]


def _checked_ring(loops):
    """:func:`reference_ring_all_reduce` with its ``arrays`` checked at the boundary (issue 33). A wrapper, not lines
    in the loops, so that the listing chapter 02 prints (``inspect.getsource`` follows ``__wrapped__``) stays the
    two loops it teaches."""
    @functools.wraps(loops)
    def checked(arrays):
        _check_rank_arrays(arrays)
        return loops(arrays)
    return checked


reference_ring_all_reduce = _checked_ring(reference_ring_all_reduce)


def _as_numpy(a) -> np.ndarray:
    if type(a).__module__.startswith("torch") and hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def ring_bytes_per_rank(operation: str, nbytes: float, world_size: int) -> float:
    """Average bytes each rank sends for ``operation`` on a message of ``nbytes`` bytes (see the table above).

    ``nbytes`` is the all-reduce / broadcast / reduce message, the all-gather *output*, the reduce-scatter and
    all-to-all *input*. Example: bf16 gradients of a 7e9-parameter model (14e9 bytes) all-reduced on 8 ranks:
    2·7/8·14e9 = 24.5e9 bytes (24.5 GB) per rank.
    """
    check_choice("operation", operation, OPERATIONS)
    n = check_int("world_size", world_size, minimum=1)
    nbytes = check_number("nbytes", nbytes, minimum=0)
    if operation == "all_reduce":
        return 2 * (n - 1) / n * nbytes
    if operation in ("broadcast", "reduce"):
        return (n - 1) / n * nbytes  # n−1 of the n ranks send the whole message once
    return (n - 1) / n * nbytes

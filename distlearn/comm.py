"""A virtual cluster: N simulated ranks holding real numpy arrays, with collectives and traffic accounting.

Each collective takes one array per rank (a list indexed by rank) and returns one array per rank, computing the
exact result, and adds to ``bytes_sent`` / ``bytes_received`` what each rank moves under the bandwidth-optimal
ring algorithm (Patarasuk & Yuan 2009; Thakur et al. 2005), the one NCCL uses for large messages:

=================  ======================================
all_gather         (n−1)/n × output bytes per rank
reduce_scatter     (n−1)/n × input bytes per rank
all_reduce         2(n−1)/n × bytes per rank (reduce-scatter + all-gather)
broadcast          pipelined chain: every rank but the last sends the whole message once
=================  ======================================
"""
from __future__ import annotations

import numpy as np

from .validate import DistlearnValueError, check_choice, check_int

OPS = ("sum", "mean", "max")


class VirtualCluster:
    """``world_size`` simulated ranks. ``bytes_sent[r]`` / ``bytes_received[r]`` count each rank's traffic."""

    def __init__(self, world_size: int):
        self.world_size = check_int("world_size", world_size, minimum=1, maximum=4096)
        self.reset_traffic()

    def reset_traffic(self) -> None:
        """Zero the per-rank byte counters."""
        self.bytes_sent = np.zeros(self.world_size, dtype=np.int64)
        self.bytes_received = np.zeros(self.world_size, dtype=np.int64)

    # ---------------------------------------------------------------- helpers
    def _per_rank(self, arrays, name: str = "arrays") -> list[np.ndarray]:
        if not isinstance(arrays, (list, tuple)) or len(arrays) != self.world_size:
            raise DistlearnValueError(
                name, f"{name} must be a list of one array per rank ({self.world_size}), got "
                      f"{type(arrays).__name__} of length {len(arrays) if hasattr(arrays, '__len__') else '?'}.",
                f"{name} 必须是每个 rank 一个数组的列表（共 {self.world_size} 个）。")
        out = [np.asarray(a) for a in arrays]
        shapes = {a.shape for a in out}
        if len(shapes) != 1:
            raise DistlearnValueError(name, f"every rank's array must have the same shape, got {sorted(shapes)}.",
                                      f"每个 rank 的数组形状必须相同，收到 {sorted(shapes)}。")
        return out

    def _count(self, sent_per_rank: float, received_per_rank: float | None = None) -> None:
        self.bytes_sent += int(round(sent_per_rank))
        self.bytes_received += int(round(sent_per_rank if received_per_rank is None else received_per_rank))

    @staticmethod
    def _reduce(stack: np.ndarray, op: str) -> np.ndarray:
        return {"sum": np.sum, "mean": np.mean, "max": np.max}[op](stack, axis=0)

    # ---------------------------------------------------------------- collectives
    def all_reduce(self, arrays, op: str = "sum") -> list[np.ndarray]:
        """Every rank gets the element-wise reduction (``sum``, ``mean`` or ``max``) of all ranks' arrays."""
        check_choice("op", op, OPS)
        arrays = self._per_rank(arrays)
        n = self.world_size
        self._count(2 * (n - 1) / n * arrays[0].nbytes)
        result = self._reduce(np.stack(arrays), op)
        return [result.copy() for _ in range(n)]

    def all_gather(self, shards) -> list[np.ndarray]:
        """Every rank gets all ranks' shards concatenated along axis 0, in rank order."""
        shards = self._per_rank(shards, "shards")
        n = self.world_size
        full = np.concatenate([np.atleast_1d(s) for s in shards], axis=0)
        self._count((n - 1) / n * full.nbytes)
        return [full.copy() for _ in range(n)]

    def reduce_scatter(self, arrays, op: str = "sum") -> list[np.ndarray]:
        """Rank r gets chunk r (along axis 0) of the reduction. Axis 0 must be divisible by world_size."""
        check_choice("op", op, OPS)
        arrays = self._per_rank(arrays)
        n = self.world_size
        length = arrays[0].shape[0] if arrays[0].ndim else 1
        if arrays[0].ndim == 0 or length % n:
            raise DistlearnValueError(
                "arrays", f"reduce_scatter needs axis 0 ({length}) divisible by world_size ({n}); pad first.",
                f"reduce_scatter 要求第 0 维（{length}）能被 world_size（{n}）整除；请先填充。")
        self._count((n - 1) / n * arrays[0].nbytes)
        reduced = self._reduce(np.stack(arrays), op)
        return [c.copy() for c in np.split(reduced, n, axis=0)]

    def broadcast(self, arrays, src: int = 0) -> list[np.ndarray]:
        """Every rank gets rank ``src``'s array (the other ranks' entries are ignored and may be None)."""
        n = self.world_size
        src = check_int("src", src, minimum=0, maximum=n - 1)
        if not isinstance(arrays, (list, tuple)) or len(arrays) != n:
            raise DistlearnValueError("arrays", f"arrays must be a list of {n} entries (one per rank).",
                                      f"arrays 必须是 {n} 个元素的列表（每个 rank 一个）。")
        data = np.asarray(arrays[src])
        sent = np.full(n, data.nbytes, dtype=np.int64)
        sent[(src - 1) % n] = 0  # chain src → src+1 → …: the last rank forwards nothing
        received = np.full(n, data.nbytes, dtype=np.int64)
        received[src] = 0
        if n > 1:
            self.bytes_sent += sent
            self.bytes_received += received
        return [data.copy() for _ in range(n)]

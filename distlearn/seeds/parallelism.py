"""The seed's parallelism simulations (seed A) and its FSDP classes (seed B), copied faithfully, mistakes included.

Each chapter's "common misconception / 常见误区" box runs one of these next to the corrected simulation of its topic
folder, and a test pins the difference. **Nothing here is a correct answer**; each docstring names the mistake and
the corrected version:

- chapter 03: :func:`seed_simulate_data_parallelism` (mean of per-shard means) — fix
  :func:`distlearn.data_parallel.simulation.simulate_data_parallelism`;
- chapter 04: :func:`seed_simulate_tensor_parallelism` (column split only, no communication counted) and its source
  (:func:`seed_source`) — fix :func:`distlearn.tensor_parallel.simulation.simulate_tensor_parallelism`;
- chapter 05: :func:`seed_simulate_pipeline_parallelism` (drops layers, backward = forward, GPipe only) — fix
  :func:`~distlearn.pipeline_parallel.schedules.partition_layers` and
  :func:`~distlearn.pipeline_parallel.schedules.simulate`;
- chapter 06: :class:`SeedFlatParamShard`, :func:`seed_fake_all_gather`, :class:`SeedFSDPCommunicationSim` — fix
  :mod:`distlearn.zero_fsdp.simulation`;
- chapter 07: :class:`SeedPrefetchSimulator` (forward only, prefetching looks free) — fix
  :func:`distlearn.overlap_prefetch.timeline.simulate`.

The seed's ``calc_memory`` is :func:`distlearn.seeds.functions.seed_calc_memory`; its activation-memory functions are in
:mod:`distlearn.seeds.activations`. Torch is imported lazily (only :class:`SeedFlatParamShard` needs it).
"""
from __future__ import annotations

import numpy as np

from distlearn.core.validate import check_int
from distlearn.data_parallel.simulation import shard_sizes

__all__ = ["seed_simulate_data_parallelism", "seed_simulate_tensor_parallelism", "seed_source",
           "seed_simulate_pipeline_parallelism", "SeedFlatParamShard", "seed_fake_all_gather",
           "SeedFSDPCommunicationSim", "SeedPrefetchSimulator"]


# ---------------------------------------------------------------- seed A · simulate_data_parallelism  (chapter 03)
def seed_simulate_data_parallelism(data: np.ndarray, world_size: int, model_fn) -> tuple[float, np.ndarray]:
    """The seed's version, kept to show its mistake: the plain mean of per-shard means (biased when shards are
    uneven; NaN-free only if no shard is empty). Returns (loss, grad)."""
    data = np.asarray(data)
    sizes = shard_sizes(len(data), check_int("world_size", world_size, minimum=1))
    offsets = np.cumsum([0] + sizes)
    results = [model_fn(data[offsets[r]:offsets[r + 1]]) for r in range(world_size)]
    return float(np.mean([l for l, _ in results])), np.mean([g for _, g in results], axis=0)


# ---------------------------------------------------------------- seed A · simulate_tensor_parallelism  (chapter 04)
def seed_simulate_tensor_parallelism(input_data, weight_matrix, num_gpus):
    """The seed's version, copied faithfully (seed-a, ``simulate_tensor_parallelism``). **Do not use.**

    It shows only the column split and counts no communication: the ``np.concatenate`` *is* an all-gather that
    moves (n−1)/n of the output to every rank, and the row split (the other half of every Megatron block) needs an
    all-reduce of partial sums. See :func:`distlearn.tensor_parallel.simulation.simulate_tensor_parallelism` for the
    corrected version.
    """
    d_in, d_out = weight_matrix.shape
    assert d_out % num_gpus == 0, f"d_out {d_out} not divisible by num_gpus {num_gpus}"
    shard_size = d_out // num_gpus

    partial_results = []
    for gpu_id in range(num_gpus):
        start = gpu_id * shard_size
        end = start + shard_size
        weight_shard = weight_matrix[:, start:end]

        partial = input_data @ weight_shard
        partial_results.append(partial)

    full_output = np.concatenate(partial_results, axis=-1)

    direct_output = input_data @ weight_matrix
    error = np.abs(full_output - direct_output).max()

    return full_output, error


def seed_source() -> str:
    """The source code of :func:`seed_simulate_tensor_parallelism` as the seed wrote it (our docstring left out)."""
    import inspect

    lines = inspect.getsource(seed_simulate_tensor_parallelism).splitlines()
    return "\n".join([lines[0]] + lines[lines.index('    """') + 1:])


# ---------------------------------------------------------------- seed A · simulate_pipeline_parallelism  (chapter 05)
def seed_simulate_pipeline_parallelism(num_layers, num_stages, num_microbatches):
    """A faithful copy of the seed's ``simulate_pipeline_parallelism`` (seed-a), kept to show its mistakes.

    Mistakes (course outline, seed mistake 6): ``num_layers // num_stages`` silently drops the remainder layers;
    backward costs the same as forward (it is about 2×); only GPipe is modelled (and it waits for *all* forwards
    before any backward). Do not use it: use :func:`distlearn.pipeline_parallel.schedules.partition_layers` and
    :func:`distlearn.pipeline_parallel.schedules.simulate`.
    """
    layers_per_stage = num_layers // num_stages

    timeline = {}
    clock = 0

    for mb in range(num_microbatches):
        for stage in range(num_stages):
            start_time = max(
                timeline.get((stage, mb - 1, "fwd"), (0, 0))[1] if mb > 0 else 0,
                timeline.get((stage - 1, mb, "fwd"), (0, 0))[1] if stage > 0 else 0,
            )
            end_time = start_time + layers_per_stage
            timeline[(stage, mb, "fwd")] = (start_time, end_time)

    last_fwd_end = max(v[1] for v in timeline.values())

    for mb in range(num_microbatches - 1, -1, -1):
        for stage in range(num_stages - 1, -1, -1):
            deps = [last_fwd_end]
            if mb < num_microbatches - 1 and (stage, mb + 1, "bwd") in timeline:
                deps.append(timeline[(stage, mb + 1, "bwd")][1])
            if stage < num_stages - 1 and (stage + 1, mb, "bwd") in timeline:
                deps.append(timeline[(stage + 1, mb, "bwd")][1])
            start_time = max(deps)
            end_time = start_time + layers_per_stage
            timeline[(stage, mb, "bwd")] = (start_time, end_time)

    total_time = max(v[1] for v in timeline.values())
    compute_time = num_microbatches * num_stages * layers_per_stage * 2
    bubble_fraction = 1.0 - compute_time / (total_time * num_stages)

    return timeline, total_time, bubble_fraction


# -------------------------------------- seed B · snippets 2 and 3: FlatParamShard, FSDPCommunicationSim  (chapter 06)
class SeedFlatParamShard:
    """The seed's ``FlatParamShard`` (seed-b snippet 2), kept to show its mistake (course seed mistake 8).

    Sharding is right (pad to a multiple of world_size, slice), but ``all_gather`` returns the *padded flat vector*:
    the padding stays and no parameter gets its shape back. Compare
    :meth:`distlearn.zero_fsdp.simulation.FlatParamShard.gather`.
    """

    def __init__(self, params, world_size, rank):
        import torch

        flat = torch.cat([torch.as_tensor(p).flatten() for p in params])
        self.total_size = flat.numel()
        self.shard_size = self.total_size // world_size
        if self.total_size % world_size != 0:
            pad = world_size - (self.total_size % world_size)
            flat = torch.nn.functional.pad(flat, (0, pad))
            self.total_size = flat.numel()
            self.shard_size = self.total_size // world_size
        start = rank * self.shard_size
        self.shard = flat[start:start + self.shard_size].clone()

    def all_gather(self, shards_list):
        import torch

        return torch.cat(shards_list)  # the mistake: padding kept, shapes lost


def seed_fake_all_gather(shard, world_size: int) -> np.ndarray:
    """The seed's ``FSDPCommunicationSim`` "all-gather" (seed-b snippet 3, course seed mistake 7): its own shard
    repeated ``world_size`` times. Right length, wrong values: every other rank's shard is missing."""
    return np.tile(np.asarray(shard), check_int("world_size", world_size, minimum=1))


class SeedFSDPCommunicationSim:
    """The seed's single-rank simulation, rewritten in numpy without the prints (seed mistake 7).

    ``forward_step`` "gathers" with :func:`seed_fake_all_gather`; ``backward_step`` keeps a slice of a gradient
    of ones, so no gradient ever comes from another rank (there is no reduction at all).
    """

    def __init__(self, param_size, world_size, rank, seed=0):
        self.world_size, self.rank = world_size, rank
        self.shard_size = param_size // world_size   # also drops param_size % world_size elements
        self.param_shard = np.random.default_rng(seed + rank).standard_normal(self.shard_size)

    def forward_step(self):
        return seed_fake_all_gather(self.param_shard, self.world_size)

    def backward_step(self):
        full_grad = np.ones(self.shard_size * self.world_size)
        return full_grad[self.rank * self.shard_size:(self.rank + 1) * self.shard_size]


# ---------------------------------------------------------------- seed B · snippet 5: PrefetchSimulator  (chapter 07)
class SeedPrefetchSimulator:
    """The seed's ``PrefetchSimulator`` (seed-b snippet 5), unchanged in behaviour (course seed mistake 14): forward
    only, identical units, and no memory cost — prefetching looks free."""

    def __init__(self, n_units, compute_time=0.1, comm_time=0.08):
        self.n_units, self.compute_time, self.comm_time = n_units, compute_time, comm_time

    def run_without_prefetch(self):
        return sum(self.comm_time + self.compute_time for _ in range(self.n_units))

    def run_with_prefetch(self):
        total = self.comm_time + self.compute_time
        for _ in range(1, self.n_units):
            total += max(self.comm_time, self.compute_time)
        return total


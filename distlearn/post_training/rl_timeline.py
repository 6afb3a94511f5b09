"""One RL post-training step on GPUs: generate rollouts, score them, train, bring the new weights to the generator.

Two placements are simulated, event by event, and given in closed form for the steady state:

- **colocated** (verl's 3D-HybridEngine, HybridFlow, arXiv 2409.19256; DeepSpeed-Chat's Hybrid Engine, arXiv
  2308.01320): every GPU generates, then every GPU trains. Between the phases the weights are **resharded** from the
  training layout (FSDP shards, 2Ψ/N bytes per GPU) to the generation layout (tensor-parallel shards, 2Ψ/t_g per
  GPU) and, if asked, the optimizer state is **offloaded** to the host for generation and **reloaded** for training.
  Rollouts are never stale: policy lag 0.
- **disaggregated** (OpenRLHF with vLLM engines, arXiv 2405.11143; AReaL, arXiv 2505.24298; torchtitan's RL
  experiments): ``gen_gpus`` GPUs only generate (and score), the other ``gpus − gen_gpus`` only train. After every
  update the trainer **broadcasts** the new weights (2Ψ bytes in bf16) to the generator, a collective both pools
  take part in. With ``staleness`` k = 0 the pools take turns (synchronous); with k ≥ 1 the generator may run ahead
  and generate batch i with weights as old as version i − k (asynchronous, AReaL's staleness bound η).

**Units and assumptions.** Times in seconds, bytes in bytes (GB = 1e9), bandwidths in GB/s per GPU and direction.
``gen_seconds`` and ``train_seconds`` are the two phases of one step on **all** ``gpus`` GPUs; on a pool of n GPUs a
phase takes (gpus / n) times as long (linear scaling), and the generator pool's per-GPU speed is
``gen_efficiency`` times the colocated one (a dedicated engine keeps its KV cache and runs larger decode batches;
1.0 = no advantage). Scoring (a rule-based reward on the host) leaves the GPUs of its pool idle.
Version v is the policy after v updates; batch i is trained by update i, so it is trained at version i, and its
**policy lag** is i − (the version it was generated with).

Event rules of the disaggregated placement (what :func:`simulate` does; the generator never interrupts a batch):

1. the generator, when free, first takes part in a pending weight broadcast (the trainer finished an update it has
   not received); else it starts batch i if it holds a version ≥ i − k; else it waits;
2. the trainer trains batch i once it is generated and scored and the previous broadcast is over, then waits for the
   generator to be free and broadcasts version i + 1 (``sync_seconds`` for both pools).

Closed forms of the steady step time P (checked against the simulation in tests/test_post_training_rl.py), with
g = G·N / (n_g·e) + R the generator's time per batch and t = T·N / n_t the trainer's:

- colocated: P = G + R + T + reshard + offload; lag 0;
- disaggregated, k = 0: P = g + t + S; lag 0;
- disaggregated, k ≥ 1: P = max(g, t) + S; lag 1 when the generator is the slower pool (g ≥ t), k when the trainer
  is (the generator runs ahead until the staleness bound stops it).

Overheads (:func:`overheads`): reshard = 2Ψ·(1/t_g − 1/N) bytes into each GPU over NVLink (every GPU already holds
its 1/N FSDP shard and gathers the rest of its tensor-parallel shard; HybridFlow §5 and Table 2 count the same
transition for Megatron layouts; verl's FSDP backend instead gathers every weight whole, 2Ψ·(N − 1)/N bytes, and
lets vLLM slice it, see resharding.py's all-gather baseline); offload = 2 × 12Ψ/N bytes over PCIe (fp32 master
weights and Adam's two moments, ZeRO's K = 12, out to the host before generation and back before training: verl's
``optimizer_offload``);
broadcast S = 2Ψ / network bandwidth (a pipelined broadcast takes about bytes / bandwidth whatever the number of
receivers).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from distlearn.core.validate import DistlearnValueError, check_bool, check_int, check_number, check_choice
from distlearn.core.guard import read_only

__all__ = ["RLSetup", "Phase", "RLTimeline", "Overheads", "PLACEMENTS", "overheads", "simulate",
           "steady_step_time", "policy_lag", "compare", "Comparison", "GEN_SHARE_OPENRLHF", "DEFAULTS_SOURCES"]

#: the placements :func:`simulate` knows
PLACEMENTS = ("colocated", "disaggregated")

#: "80 % of the time in RLHF training is spent on the sample generation stage" (OpenRLHF README and technical report,
#: arXiv 2405.11143); the vLLM blog on OpenRLHF (2025-04-23) gives "up to 90 %" for long chain-of-thought rollouts
GEN_SHARE_OPENRLHF = 0.8

#: where each default of :class:`RLSetup` comes from
DEFAULTS_SOURCES = read_only({
    "params_billion": "7B, the size of verl's and OpenRLHF's GRPO/PPO examples (Qwen2-7B, Llama-3-8B)",
    "gpus": "two 8-GPU nodes (illustrative)",
    "gen_gpus": "12 of 16: close to the 80 % generation share (illustrative)",
    "gen_seconds, train_seconds": "80 s and 20 s: the 80 % / 20 % split of OpenRLHF (arXiv 2405.11143); "
                                  "the 100 s total is illustrative",
    "score_seconds": "1 s: a rule-based reward on the host (illustrative)",
    "gen_tp": "2: rollout tensor_model_parallel_size=2 in verl's 7B GRPO example (examples/grpo_trainer/"
              "run_qwen2-7b.sh)",
    "offload": "True: verl's actor.fsdp_config.optimizer_offload=True, set in many of verl's example scripts (the 7B "
               "GRPO example above keeps it False); on here so that its cost shows",
    "nvlink_gbs, network_gbs": "450 and 50 GB/s: the course's H100 preset (distlearn.core.hardware: NVLink 900 GB/s "
                               "in both directions; one 400 Gb/s NIC per GPU in a DGX H100)",
    "host_gbs": "25 GB/s: chapter 08's effective PCIe 4.0 x16 figure (distlearn.activation_memory.formulas)",
    "gen_efficiency": "1.0: no per-GPU advantage for a dedicated generator (the neutral assumption)",
})


@dataclass(frozen=True)
class RLSetup:
    """One RL step's inputs, checked on construction (DistlearnValueError naming the field and its range).

    ``params_billion``: Ψ / 1e9, in (0, 10_000]. ``gpus``: N, 2–65,536. ``gen_gpus``: n_g of the disaggregated
    placement, 1 … N − 1 (the trainer pool is N − n_g). ``gen_seconds`` G, ``train_seconds`` T: the two phases of
    one step on all N GPUs, > 0. ``score_seconds`` R ≥ 0. ``gen_efficiency`` e in [0.25, 4]: per-GPU generation
    speed of the dedicated pool relative to colocated. ``gen_tp`` t_g: tensor-parallel degree of generation, 1 … N,
    dividing N. ``offload``: colocated offloads the optimizer state during generation. ``nvlink_gbs``,
    ``network_gbs``, ``host_gbs``: GB/s per GPU and direction, > 0. ``staleness`` k: 0 (synchronous) … 64.
    Defaults and their sources: :data:`DEFAULTS_SOURCES`."""

    params_billion: float = 7.0
    gpus: int = 16
    gen_gpus: int = 12
    gen_seconds: float = 80.0
    train_seconds: float = 20.0
    score_seconds: float = 1.0
    gen_efficiency: float = 1.0
    gen_tp: int = 2
    offload: bool = True
    nvlink_gbs: float = 450.0
    network_gbs: float = 50.0
    host_gbs: float = 25.0
    staleness: int = 0

    def __post_init__(self):
        check_number("params_billion", self.params_billion, minimum=0, maximum=10_000, strict_min=True)
        check_int("gpus", self.gpus, minimum=2, maximum=65_536)
        check_int("gen_gpus", self.gen_gpus, minimum=1, maximum=self.gpus - 1)
        for name in ("gen_seconds", "train_seconds"):
            check_number(name, getattr(self, name), minimum=0, maximum=1e7, strict_min=True)
        check_number("score_seconds", self.score_seconds, minimum=0, maximum=1e7)
        check_number("gen_efficiency", self.gen_efficiency, minimum=0.25, maximum=4.0)
        check_int("gen_tp", self.gen_tp, minimum=1, maximum=self.gpus)
        if self.gpus % self.gen_tp:
            raise DistlearnValueError("gen_tp", f"gen_tp = {self.gen_tp} must divide gpus = {self.gpus}.",
                                      f"gen_tp = {self.gen_tp} 必须整除 gpus = {self.gpus}。")
        check_bool("offload", self.offload)
        for name in ("nvlink_gbs", "network_gbs", "host_gbs"):
            check_number(name, getattr(self, name), minimum=0, maximum=1e5, strict_min=True)
        check_int("staleness", self.staleness, minimum=0, maximum=64)

    @property
    def train_gpus(self) -> int:
        """GPUs of the disaggregated trainer pool, N − n_g."""
        return self.gpus - self.gen_gpus

    @property
    def weight_bytes(self) -> float:
        """Bytes of the bf16 weights, 2Ψ."""
        return 2.0 * self.params_billion * 1e9


@dataclass(frozen=True)
class Overheads:
    """Seconds of each transfer of one step (:func:`overheads`): ``reshard`` (training → generation layout, colocated),
    ``offload`` (optimizer state out and back, colocated; 0 without offload), ``broadcast`` (weights trainer →
    generator, disaggregated), and the bytes per GPU of each."""

    reshard: float
    offload: float
    broadcast: float
    reshard_bytes: float
    offload_bytes: float
    broadcast_bytes: float


def overheads(setup: RLSetup) -> Overheads:
    """The transfers of one step for ``setup`` (formulas in the module docstring). Raises DistlearnValueError if
    ``setup`` is not an RLSetup."""
    _check_setup(setup)
    psi, n = setup.params_billion * 1e9, setup.gpus
    reshard_bytes = 2 * psi * (1 / setup.gen_tp - 1 / n)
    offload_bytes = 2 * 12 * psi / n if setup.offload else 0.0
    broadcast_bytes = setup.weight_bytes
    return Overheads(reshard=reshard_bytes / (setup.nvlink_gbs * 1e9), offload=offload_bytes / (setup.host_gbs * 1e9),
                     broadcast=broadcast_bytes / (setup.network_gbs * 1e9), reshard_bytes=reshard_bytes,
                     offload_bytes=offload_bytes, broadcast_bytes=broadcast_bytes)


@dataclass(frozen=True)
class Phase:
    """One bar of the timeline: ``pool`` ("all", "generator" or "trainer"), ``kind`` ("generate", "score",
    "reshard", "offload", "train", "sync"), the ``step`` (batch) it belongs to, ``start`` and ``end`` in seconds, and
    the weight ``version`` it used (generation) or made (training, sync)."""

    pool: str
    kind: str
    step: int
    start: float
    end: float
    version: int


@dataclass(frozen=True)
class RLTimeline:
    """What :func:`simulate` returns. ``phases``: every :class:`Phase`. ``step_ends``: when each update's weights
    are in place (the end of its broadcast, or of its training when colocated). ``step_time``: the steady step time,
    the last two ``step_ends`` apart. ``lags``: policy lag of each batch. ``idle``: fraction of the steady step each
    pool's GPUs do not compute, {pool: fraction}; ``idle_overall``: the same over all GPUs. ``overheads``: the
    transfers. ``setup``, ``placement``."""

    setup: RLSetup
    placement: str
    phases: tuple[Phase, ...]
    step_ends: tuple[float, ...]
    step_time: float
    lags: tuple[int, ...]
    idle: dict = field(default_factory=dict)
    idle_overall: float = 0.0
    overheads: Overheads | None = None

    @property
    def policy_lag(self) -> int:
        """The steady policy lag: that of the last batch."""
        return self.lags[-1]


def _check_setup(setup) -> None:
    if not isinstance(setup, RLSetup):
        raise DistlearnValueError("setup", f"setup must be an RLSetup, e.g. RLSetup(); got {setup!r}.",
                                  f"setup 必须是 RLSetup，例如 RLSetup()；收到 {setup!r}。")


def _pool_seconds(setup: RLSetup) -> tuple[float, float]:
    """(g, t): the generator pool's seconds per batch (generation + scoring) and the trainer pool's per update."""
    n = setup.gpus
    g = setup.gen_seconds * n / (setup.gen_gpus * setup.gen_efficiency) + setup.score_seconds
    t = setup.train_seconds * n / setup.train_gpus
    return g, t


def steady_step_time(setup: RLSetup, placement: str) -> float:
    """Closed-form steady step time in seconds of ``placement`` (module docstring). Raises DistlearnValueError."""
    _check_setup(setup)
    check_choice("placement", placement, PLACEMENTS)
    o = overheads(setup)
    if placement == "colocated":
        return setup.gen_seconds + setup.score_seconds + setup.train_seconds + o.reshard + o.offload
    g, t = _pool_seconds(setup)
    if setup.staleness == 0:
        return g + t + o.broadcast
    return max(g, t) + o.broadcast


def policy_lag(setup: RLSetup, placement: str) -> int:
    """Closed-form steady policy lag (versions) of ``placement``: 0 colocated or synchronous; with k ≥ 1, 1 when the
    generator pool is the slower one, else k. Raises DistlearnValueError."""
    _check_setup(setup)
    check_choice("placement", placement, PLACEMENTS)
    if placement == "colocated" or setup.staleness == 0:
        return 0
    g, t = _pool_seconds(setup)
    return 1 if g >= t else setup.staleness


def simulate(setup: RLSetup, placement: str, steps: int | None = None) -> RLTimeline:
    """Event simulation of ``steps`` RL steps of ``placement`` (default: enough to reach the steady state,
    max(8, 3k + 6)). Returns an :class:`RLTimeline`. Raises DistlearnValueError for a bad setup, placement or
    ``steps`` (2 … 1,000)."""
    _check_setup(setup)
    check_choice("placement", placement, PLACEMENTS)
    steps = max(8, 3 * setup.staleness + 6) if steps is None else check_int("steps", steps, minimum=2, maximum=1000)
    o = overheads(setup)
    if placement == "colocated":
        phases, ends, now = [], [], 0.0
        for i in range(steps):
            for kind, seconds in (("reshard", o.reshard), ("generate", setup.gen_seconds),
                                  ("score", setup.score_seconds), ("offload", o.offload),
                                  ("train", setup.train_seconds)):
                if seconds > 0:
                    phases.append(Phase("all", kind, i, now, now + seconds, i if kind != "train" else i + 1))
                now += seconds
            ends.append(now)
        lags = (0,) * steps
    else:
        phases, ends, lags = _simulate_disaggregated(setup, o.broadcast, steps)
    step_time = ends[-1] - ends[-2]
    idle, idle_overall = _idle(setup, placement, step_time)
    return RLTimeline(setup, placement, tuple(phases), tuple(ends), step_time, tuple(lags), idle, idle_overall, o)


def _simulate_disaggregated(setup: RLSetup, sync: float, steps: int):
    """The event rules of the module docstring; returns (phases, step_ends, lags)."""
    k = setup.staleness
    n = setup.gpus
    gen = setup.gen_seconds * n / (setup.gen_gpus * setup.gen_efficiency)
    score = setup.score_seconds
    train = setup.train_seconds * n / setup.train_gpus
    phases, ends = [], []
    gen_free, train_free = 0.0, 0.0       # when each pool is next free / 两个池下一次空闲的时刻
    held = 0                              # version the generator holds / 生成器持有的版本
    ready = {}                            # batch -> time it is scored / 批次 -> 打分完成的时刻
    used = {}                             # batch -> version it was generated with / 批次 -> 生成时用的版本
    trained_end = {}                      # update j -> end of its training / 第 j 次更新训练结束的时刻
    next_batch, next_update = 0, 0
    while next_update < steps:
        # the trainer: train batch next_update as soon as it is scored / 训练池：批次一打分完就训练
        j = next_update
        if j not in trained_end and j in ready:
            start = max(train_free, ready[j])
            trained_end[j] = start + train
            phases.append(Phase("trainer", "train", j, start, start + train, j + 1))
            train_free = start + train
        pending = j in trained_end          # update j waits for its broadcast / 第 j 次更新等待广播
        can_generate = next_batch <= held + k  # the generator never runs out of prompts / 生成器的提示词取之不尽
        # generator's next event: a broadcast if update j is done by the time it is free, else a batch
        if pending and (trained_end[j] <= gen_free or not can_generate):
            start = max(gen_free, trained_end[j])
            phases.append(Phase("generator", "sync", j, start, start + sync, j + 1))
            phases.append(Phase("trainer", "sync", j, start, start + sync, j + 1))
            gen_free = train_free = start + sync
            held = j + 1
            ends.append(gen_free)
            next_update += 1
        elif can_generate:
            i = next_batch
            phases.append(Phase("generator", "generate", i, gen_free, gen_free + gen, held))
            if score > 0:
                phases.append(Phase("generator", "score", i, gen_free + gen, gen_free + gen + score, held))
            used[i] = held
            ready[i] = gen_free + gen + score
            gen_free = ready[i]
            next_batch += 1
        else:  # pragma: no cover — the rules above always leave one move (a test drives every branch)
            raise RuntimeError("simulation stuck / 模拟卡住了")
    lags = [j - used[j] for j in range(steps)]
    return phases, ends, lags


def _idle(setup: RLSetup, placement: str, step: float) -> tuple[dict, float]:
    """Idle fraction of each pool's GPUs in a steady step of ``step`` seconds (1 − computing time / step)."""
    if placement == "colocated":
        busy = (setup.gen_seconds + setup.train_seconds) / step
        return {"all": 1 - busy}, 1 - busy
    n = setup.gpus
    gen = setup.gen_seconds * n / (setup.gen_gpus * setup.gen_efficiency)
    train = setup.train_seconds * n / setup.train_gpus
    idle = {"generator": 1 - gen / step, "trainer": 1 - train / step}
    overall = (idle["generator"] * setup.gen_gpus + idle["trainer"] * setup.train_gpus) / n
    return idle, overall


@dataclass(frozen=True)
class Comparison:
    """Both placements for one setup: ``colocated`` and ``disaggregated`` :class:`RLTimeline`, ``faster`` (the
    placement with the shorter steady step; "colocated" on a tie) and ``speedup`` (colocated step / disaggregated
    step)."""

    colocated: RLTimeline
    disaggregated: RLTimeline
    faster: str
    speedup: float


def compare(setup: RLSetup, steps: int | None = None) -> Comparison:
    """Simulate ``setup`` in both placements. Raises DistlearnValueError."""
    col, dis = simulate(setup, "colocated", steps), simulate(setup, "disaggregated", steps)
    return Comparison(col, dis, "disaggregated" if dis.step_time < col.step_time else "colocated",
                      col.step_time / dis.step_time)

"""Real distributed checkpoints (``torch.distributed.checkpoint``, DCP) and a real kill-and-restart, on gloo.

**DCP and resharding.** :func:`save_sharded` trains the tiny GPT of :mod:`distlearn.zero_fsdp.lab` (vocabulary 61, so
4 ranks hold 16, 16, 16 and 13 embedding rows) with FSDP2 ``fully_shard`` and AdamW, then saves model and
optimizer with ``dcp.save`` from every rank: each rank writes its own shards to ``__<rank>_0.distcp`` and rank 0
writes ``.metadata`` (global shapes, each shard's offsets, where its bytes are). With ``async_path`` it also calls
``dcp.async_save`` and keeps training while a background thread writes. :func:`load_resharded` loads the same
folder into a different number of ranks, :func:`load_single_process` into one process with no process group at
all. All three use ``torch.distributed.checkpoint.state_dict.get_state_dict`` / ``set_state_dict`` and return the
full (unsharded) state from :func:`full_state`, so callers can compare them with ``torch.equal``.

**Kill and restart.** :func:`train_job` is a short training loop (FSDP2 MLP with dropout, ``DistributedSampler``
with shuffling, AdamW, a step-dependent learning rate) that saves a DCP checkpoint every ``every`` steps and, at
start, resumes from the newest complete one: model, optimizer, sampler position (epoch, batch), every rank's RNG
state and the step. With ``kill_rank``/``kill_step`` that rank sends itself ``SIGKILL`` before that step in a run
that started fresh. Rank 0 appends one JSON line per event to a log file that outlives the processes
(:func:`read_log`). Run it with torchrun and ``--max-restarts`` (:func:`torchrun_command`, :func:`run_torchrun`)
or with :func:`distlearn.core.launch.run`. Alone::

    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 torchrun --standalone --nproc-per-node 2 --max-restarts 1 \\
        -m distlearn.fault_tolerance.lab --ckpt-dir /tmp/ckpt --job-log /tmp/ckpt/log.jsonl --kill-rank 1 --kill-step 7

``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``: with torch 2.13's default, the workers of every attempt use the agent's
own TCP store, which outlives them, with no per-attempt key prefix (``torch/distributed/rendezvous.py``), so gloo's
``init_process_group`` in a restarted worker can read a dead worker's old address ("Gloo connectFullMesh failed …
Connection refused", or a hang); see pytorch/pytorch#135712 and #167288. It is a race (about one restart in three
failed in our runs). Without sharing, rank 0 of each attempt hosts a fresh store (``dynamic_rendezvous.py``).
:func:`run_torchrun` sets it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

from distlearn.core.launch import device, torchrun_main
from distlearn.zero_fsdp.lab import make_batches, next_token_loss, sharded_tiny_gpt, tiny_config
from distlearn.core.models import build_model
from distlearn.fault_tolerance.resume import lr_at
from distlearn.core.validate import DistlearnValueError

GLOBAL_BATCH = 8


# ---------------------------------------------------------------- DCP: sharded save, resharded load
def _sharded_gpt(world_size: int, seed: int):
    model, _ = sharded_tiny_gpt(world_size, seed)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def _train_gpt(model, opt, rank, world_size, batches):
    b = GLOBAL_BATCH // world_size
    for tokens in batches:
        next_token_loss(model, tokens[rank * b:(rank + 1) * b].to(device())).backward()
        opt.step()
        opt.zero_grad()


def _full(t):
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().cpu().clone()


def full_state(model_sd: dict, optim_sd: dict) -> dict:
    """The unsharded state as one flat dict of tensors: ``model.<name>`` and ``optim.<name>.<step|exp_avg|
    exp_avg_sq>`` (DTensors are all-gathered with ``full_tensor()``: a collective, every rank must call it)."""
    out = {f"model.{k}": _full(v) for k, v in model_sd.items()}
    for name, st in optim_sd["state"].items():
        for k, v in st.items():
            out[f"optim.{name}.{k}"] = _full(v) if torch.is_tensor(v) else torch.tensor(v)
    return out


def states_equal(a: dict, b: dict) -> bool:
    """Same keys and every tensor ``torch.equal`` (same shape, dtype-compatible values, bit for bit)."""
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in a)


def _local_bytes(sd_values) -> int:
    total = 0
    for v in sd_values:
        if hasattr(v, "to_local"):
            v = v.to_local()
        if torch.is_tensor(v):
            total += v.numel() * v.element_size()
    return total


def save_sharded(rank: int, world_size: int, path: str, steps: int = 2, async_path: str | None = None,
                 seed: int = 0) -> dict:
    """Train ``steps`` AdamW steps with FSDP2 on ``world_size`` ranks, then ``dcp.save`` model and optimizer to
    ``path``. With ``async_path``: also ``dcp.async_save`` the same state there (on its own gloo process group),
    train 2 more steps while it is written, then wait for it.

    Returns a dict: ``full`` (rank 0 only: :func:`full_state` at the save), ``local_shapes`` (this rank's shard
    shape of every parameter), ``sharded_bytes`` (bytes of this rank's DTensor shards: parameters and both Adam
    moments), ``save_s`` (seconds in ``dcp.save``); with ``async_path`` also ``async_blocked_s`` (seconds until
    ``async_save`` returned), ``async_wait_s`` (seconds waiting for it after the 2 steps) and ``moved_on`` (the
    parameters changed after the save, so the async checkpoint must be the snapshot at the call)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model, opt = _sharded_gpt(world_size, seed)
    batches = make_batches(tiny_config(), steps + 2, GLOBAL_BATCH, seed)
    _train_gpt(model, opt, rank, world_size, batches[:steps])
    msd, osd = get_state_dict(model, opt)
    sharded = _local_bytes(list(msd.values()) + [t for st in osd["state"].values() for k, t in st.items()
                                                  if k != "step"])
    t0 = time.perf_counter()
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)
    out = {"rank": rank, "save_s": time.perf_counter() - t0, "sharded_bytes": sharded,
           "local_shapes": {k: tuple(v.to_local().shape) for k, v in msd.items()}}
    full = full_state(msd, osd)
    if async_path is not None:
        group = dist.new_group(backend="gloo")       # checkpoint collectives apart from training's
        t0 = time.perf_counter()
        future = dcp.async_save({"model": msd, "optim": osd}, checkpoint_id=async_path, process_group=group)
        out["async_blocked_s"] = time.perf_counter() - t0
        _train_gpt(model, opt, rank, world_size, batches[steps:])   # training goes on while it writes
        t0 = time.perf_counter()
        future.result()
        out["async_wait_s"] = time.perf_counter() - t0
        after = full_state(*get_state_dict(model, opt))
        out["moved_on"] = not states_equal(full, after)
        dist.barrier(group)
        dist.destroy_process_group(group)
    if rank == 0:
        out["full"] = full
    return out


def load_resharded(rank: int, world_size: int, path: str, seed: int = 123) -> dict:
    """Build the model afresh (another ``seed``, so nothing is left from training), shard it over
    ``world_size`` ranks, ``dcp.load`` the checkpoint at ``path`` into it and ``set_state_dict``. Returns
    ``full`` (rank 0: :func:`full_state` after loading) and ``local_shapes``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, opt = _sharded_gpt(world_size, seed)
    msd, osd = get_state_dict(model, opt)            # the target layout: this run's shards
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=path)              # reads the overlapping pieces of the saved shards
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    msd, osd = get_state_dict(model, opt)
    full = full_state(msd, osd)
    out = {"rank": rank, "local_shapes": {k: tuple(v.to_local().shape) for k, v in msd.items()}}
    if rank == 0:
        out["full"] = full
    return out


def load_single_process(path: str, seed: int = 7) -> dict:
    """Load the checkpoint at ``path`` into a plain (unsharded) model and AdamW in *this* process, with no process
    group (DCP then plans for one process: its warning saying so is silenced here). Returns :func:`full_state`."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    torch.manual_seed(seed)
    model = build_model(tiny_config(), device="cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*single process.*")
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=path)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        return full_state(*get_state_dict(model, opt))


@dataclass(frozen=True)
class FileRow:
    """One file of a DCP folder: its name, size in bytes, how many saved items it holds and their total length
    according to ``.metadata`` (equal to the size for the ``.distcp`` files)."""

    name: str
    bytes: int
    items: int
    item_bytes: int


def folder_report(path: str) -> list[FileRow]:
    """The files of a DCP checkpoint folder, with what ``.metadata`` says is stored in each."""
    from torch.distributed.checkpoint import FileSystemReader

    meta = FileSystemReader(path).read_metadata()
    per_file: dict[str, list[int]] = {}
    for info in meta.storage_data.values():
        per_file.setdefault(info.relative_path, []).append(info.length)
    rows = []
    for f in sorted(Path(path).iterdir()):
        lengths = per_file.get(f.name, [])
        rows.append(FileRow(f.name, f.stat().st_size, len(lengths), sum(lengths)))
    return rows


def saved_chunks(path: str, key: str) -> tuple[tuple, list[tuple[tuple, tuple]]]:
    """``(global shape, [(offsets, sizes) of each saved shard])`` of one entry of a DCP checkpoint, read from
    ``.metadata`` (e.g. ``key="model.embed.weight"``)."""
    from torch.distributed.checkpoint import FileSystemReader

    md = FileSystemReader(path).read_metadata().state_dict_metadata[key]
    return tuple(md.size), [(tuple(c.offsets), tuple(c.sizes)) for c in md.chunks]


# ---------------------------------------------------------------- kill and restart
NUM_SAMPLES, WIDTH, CLASSES, LOCAL_BATCH = 96, 8, 4, 4


def _job_data():
    g = torch.Generator().manual_seed(2024)
    return torch.randn(NUM_SAMPLES, WIDTH, generator=g), torch.randint(0, CLASSES, (NUM_SAMPLES,), generator=g)


def _job_model(world_size: int):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)                               # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(WIDTH, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(32, CLASSES)).to(device())
    mesh = init_device_mesh(device().type, (world_size,))
    fully_shard(model[0], mesh=mesh)
    fully_shard(model[3], mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _append(log_path: str, **event) -> None:
    """Append one JSON line with a single write (O_APPEND), so it survives a SIGKILL right after."""
    line = (json.dumps(event) + "\n").encode()
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def _rng_state(rank: int) -> dict:
    """This rank's random-number generators: the CPU one and, on a GPU, the CUDA one (which draws the dropout masks
    there). Each rank has its own key, so every rank restores its own stream."""
    out = {f"rng.rank{rank}": torch.get_rng_state()}
    if device().type == "cuda":
        out[f"cuda_rng.rank{rank}"] = torch.cuda.get_rng_state(device())
    return out


def _set_rng_state(state: dict, rank: int) -> None:
    torch.set_rng_state(state[f"rng.rank{rank}"])
    if f"cuda_rng.rank{rank}" in state:
        torch.cuda.set_rng_state(state[f"cuda_rng.rank{rank}"], device())


def latest_checkpoint(ckpt_dir: str) -> tuple[int, str | None]:
    """``(step, path)`` of the newest *complete* checkpoint in ``ckpt_dir`` (a ``step_NNNNNN`` folder holding
    ``.metadata``, which DCP writes last, via a temporary file and a rename), or ``(0, None)``."""
    best = (0, None)
    d = Path(ckpt_dir)
    if d.is_dir():
        for sub in d.iterdir():
            m = re.fullmatch(r"step_(\d+)", sub.name)
            if m and (sub / ".metadata").exists() and int(m.group(1)) > best[0]:
                best = (int(m.group(1)), str(sub))
    return best


def train_job(rank: int, world_size: int, ckpt_dir: str, log_path: str, steps: int = 16, every: int = 4,
              kill_rank: int | None = None, kill_step: int | None = None, final_path: str | None = None,
              omit: tuple = ()) -> dict:
    """A restartable training job (see the module docstring). Steps are numbered 1…``steps``; a checkpoint is
    written after every step divisible by ``every``. A run that starts fresh kills ``kill_rank`` with SIGKILL
    just before step ``kill_step``, after a barrier (so rank 0 has logged every step before it: without one, the
    launcher may kill rank 0 between its last all-reduce and that log line). Rank 0 logs ``start``, ``step``, ``checkpoint`` and ``done`` events; the
    killed rank logs ``kill``. ``final_path``: rank 0 saves :func:`full_state` there at the end (torch.save).
    ``omit``: items *not* restored on resume, among ``"rng"`` and ``"sampler"`` (to see an inexact resume).
    Returns ``{"rank", "pid", "resumed_from", "losses"}``."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    from torch.utils.data import DistributedSampler

    os.makedirs(ckpt_dir, exist_ok=True)
    x, y = _job_data()
    model = _job_model(world_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sampler = DistributedSampler(range(NUM_SAMPLES), num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    per_epoch = len(sampler) // LOCAL_BATCH
    torch.manual_seed(1000 + rank)                     # this rank's dropout stream (CPU and CUDA generators)
    sampler_state = {"epoch": 0, "batch": 0}
    step, resumed_path = latest_checkpoint(ckpt_dir)
    if resumed_path is not None:
        msd, osd = get_state_dict(model, opt)
        state = {"model": msd, "optim": osd, "sampler": dict(sampler_state), "step": 0, **_rng_state(rank)}
        dcp.load(state, checkpoint_id=resumed_path)
        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        if "rng" not in omit:
            _set_rng_state(state, rank)
        if "sampler" not in omit:
            sampler_state = dict(state["sampler"])
        if state["step"] != step:
            raise RuntimeError(f"checkpoint {resumed_path} holds step {state['step']}, expected {step}")
    pids = [None] * world_size
    dist.all_gather_object(pids, os.getpid())
    attempt = 0
    if rank == 0:
        if os.path.exists(log_path):
            attempt = sum(1 for line in open(log_path) if '"event": "start"' in line)
        _append(log_path, event="start", attempt=attempt, resumed_from=step, pids=pids,
                restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")))
    losses = []
    while step < steps:
        if kill_step is not None and resumed_path is None and step + 1 == kill_step:
            # every rank waits here until rank 0 has logged the step before, so the log never loses that line
            # to the race between rank 0's write and the launcher killing it once the other rank has died
            dist.barrier()
            if rank == kill_rank:
                _append(log_path, event="kill", rank=rank, step=step + 1, pid=os.getpid())
                os.kill(os.getpid(), signal.SIGKILL)
        sampler.set_epoch(sampler_state["epoch"])
        order = list(sampler)
        b = sampler_state["batch"]
        idx = torch.tensor(order[b * LOCAL_BATCH:(b + 1) * LOCAL_BATCH])
        for group in opt.param_groups:
            group["lr"] = lr_at(step, True, base_lr=1e-2)
        loss = F.cross_entropy(model(x[idx].to(device())), y[idx].to(device()))
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total)
        step += 1
        sampler_state = ({"epoch": sampler_state["epoch"] + 1, "batch": 0} if b + 1 == per_epoch
                         else {"epoch": sampler_state["epoch"], "batch": b + 1})
        losses.append(total.item() / world_size)
        if rank == 0:
            _append(log_path, event="step", attempt=attempt, step=step, loss=losses[-1])
        if step % every == 0:
            msd, osd = get_state_dict(model, opt)
            dcp.save({"model": msd, "optim": osd, "sampler": dict(sampler_state), "step": step, **_rng_state(rank)},
                     checkpoint_id=os.path.join(ckpt_dir, f"step_{step:06d}"))
            if rank == 0:
                _append(log_path, event="checkpoint", attempt=attempt, step=step)
    full = full_state(*get_state_dict(model, opt))
    if rank == 0:
        if final_path:
            torch.save(full, final_path)
        _append(log_path, event="done", attempt=attempt, step=step)
    return {"rank": rank, "pid": os.getpid(), "resumed_from": 0 if resumed_path is None else
            int(Path(resumed_path).name.split("_")[1]), "losses": losses}


def train_jobs(rank: int, world_size: int, jobs: list) -> list[dict]:
    """:func:`train_job` for each argument tuple of ``jobs`` (``(ckpt_dir, log_path, steps, every, kill_rank,
    kill_step, final_path, omit)``, trailing items optional) in turn, in one launch: one set of processes for
    several independent jobs. Each job builds its own model, optimizer and sampler, seeds its own RNG and resumes
    only from its own ``ckpt_dir``, so it computes what it would in a launch of its own. No job may kill a rank
    (a killed rank would end the launch). Returns the list of :func:`train_job` results."""
    out = []
    for job in jobs:
        if len(job) > 5 and job[5] is not None:
            raise DistlearnValueError("jobs", "train_jobs runs jobs that finish: run a job with kill_step alone.",
                                      "train_jobs 只运行会正常结束的作业：带 kill_step 的作业请单独运行。")
        out.append(train_job(rank, world_size, *job))
        dist.barrier()
    return out


@dataclass
class RunLog:
    """The events of a job's log file, in order (dicts with ``event`` = start, step, checkpoint, kill, done)."""

    events: list = field(default_factory=list)

    def of(self, kind: str) -> list:
        return [e for e in self.events if e["event"] == kind]

    def losses(self, attempt: int) -> dict:
        """{step: loss} logged by one attempt."""
        return {e["step"]: e["loss"] for e in self.of("step") if e["attempt"] == attempt}

    def curve(self) -> list:
        """The effective loss curve: for each step, the loss of the last attempt that computed it."""
        out = {}
        for e in self.of("step"):
            out[e["step"]] = e["loss"]
        return [out[s] for s in sorted(out)]

    def pids(self) -> list:
        """Every worker process id the job ever had (all attempts, all ranks)."""
        return [p for e in self.of("start") for p in e["pids"]]


def read_log(log_path: str) -> RunLog:
    """Parse a job log written by :func:`train_job`."""
    with open(log_path) as f:
        return RunLog([json.loads(line) for line in f if line.strip()])


def alive(pids) -> list:
    """The process ids among ``pids`` that still exist (zombies count as gone)."""
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    out.append(pid)
        except FileNotFoundError:
            pass
        except OSError:                                   # no /proc (macOS): ask the kernel
            try:
                os.kill(pid, 0)
                out.append(pid)
            except ProcessLookupError:
                pass
    return out


def torchrun_command(ckpt_dir: str, log_path: str, nproc: int = 2, max_restarts: int = 1, steps: int = 16,
                     every: int = 4, kill_rank: int | None = None, kill_step: int | None = None,
                     final_path: str | None = None) -> list[str]:
    """The torchrun command line (as ``python -m torch.distributed.run``, so it uses this Python) for
    :func:`train_job`. ``--standalone`` picks a free rendezvous port on this machine."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           f"--max-restarts={max_restarts}", "--monitor-interval=0.1", "-m", "distlearn.fault_tolerance.lab",
           "--ckpt-dir", ckpt_dir, "--job-log", log_path, "--steps", str(steps), "--every", str(every)]
    if kill_step is not None:
        cmd += ["--kill-rank", str(kill_rank if kill_rank is not None else 0), "--kill-step", str(kill_step)]
    if final_path:
        cmd += ["--final", final_path]
    return cmd


@dataclass(frozen=True)
class TorchrunResult:
    """``returncode`` of torchrun, the parsed ``log``, the agent's ``failure_lines`` (its messages about a failed
    worker and the restart, as torchrun printed them) and the ``final`` state rank 0 saved (or None)."""

    returncode: int
    log: RunLog
    failure_lines: list
    final: dict | None


def run_torchrun(workdir: str, nproc: int = 2, max_restarts: int = 1, steps: int = 16, every: int = 4,
                 kill_rank: int | None = None, kill_step: int | None = None, timeout: float = 180.0) -> TorchrunResult:
    """Run :func:`train_job` under torchrun in a subprocess with checkpoints and log under ``workdir`` (which must
    be empty or absent) and wait for it. Raises ``subprocess.TimeoutExpired`` after ``timeout`` seconds (the
    process group is killed first). ``--standalone`` picks its store's port by binding port 0 and closing it, so
    another process on the machine can take the port before the store binds it (EADDRINUSE, seen once in tests
    running side by side): then the whole run is started again once, in an emptied ``workdir``."""
    os.makedirs(workdir, exist_ok=True)
    log_path, final = os.path.join(workdir, "log.jsonl"), os.path.join(workdir, "final.pt")
    cmd = torchrun_command(os.path.join(workdir, "ckpt"), log_path, nproc, max_restarts, steps, every,
                           kill_rank, kill_step, final)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore",
           "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}      # a fresh store per restart (module docstring)
    for attempt in range(2):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
        if proc.returncode == 0 or attempt or not re.search(r"EADDRINUSE|address already in use", out + err, re.I):
            break
        shutil.rmtree(workdir)  # a port taken under it: not the job's doing; start clean
        os.makedirs(workdir)
    keep = re.compile(r"exitcode|failed|FAILED|restart|Signal|SIGKILL", re.I)
    lines = [ln.strip() for ln in (out + err).splitlines() if keep.search(ln)]
    state = torch.load(final) if os.path.exists(final) else None
    return TorchrunResult(proc.returncode, read_log(log_path) if os.path.exists(log_path) else RunLog(), lines,
                          state)


def _main(argv=None):
    p = argparse.ArgumentParser(description="restartable training job with DCP checkpoints")
    p.add_argument("--ckpt-dir", required=True)
    p.add_argument("--job-log", required=True)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--kill-rank", type=int, default=None)
    p.add_argument("--kill-step", type=int, default=None)
    p.add_argument("--final", default=None)
    a = p.parse_args(argv)
    torchrun_main(train_job, a.ckpt_dir, a.job_log, a.steps, a.every, a.kill_rank, a.kill_step, a.final)


if __name__ == "__main__":
    _main()

"""Fault-tolerant replica groups on real processes (gloo): kill one group, the others go on, a replacement heals
from a live peer and rejoins (chapter 13).

Why not torchft itself: ``pip download torchft`` finds a wheel for this platform (torchft 0.2.0,
manylinux x86_64, 2026-12), but it is a compiled extension (its lighthouse and manager are written in Rust) and it
pulls three OpenTelemetry packages; the course keeps its environment to pure-Python additions, so it runs the same
protocol with its own ~150 lines instead. What is the same: a coordinator (torchft's *lighthouse*) forms a quorum
of the live groups before every step; a new membership gets a new process group; gradients are all-reduced among
the members only and divided by their number; a replacement fetches the model **and** optimizer state from a live
peer before it computes. What differs, on purpose, to stay short: one process per group (torchft: any number of
ranks per group, with FSDP or DDP inside); the state travels through the coordinator's key-value store (torchft:
an HTTP or process-group transfer straight from the peer); the replacement heals at the start of its first step and
then takes part in it (torchft's default, the asynchronous quorum, lets it join the all-reduce with a zero gradient
and applies the fetched state at ``should_commit``); a group is killed between steps (torchft also survives a
death inside a collective: the process group's timeout turns it into an error, and that step is not committed).

Run: :func:`run_replica_groups` (the coordinator runs in the calling process). Every wait has a timeout: the
coordinator waits ``timeout`` seconds per step for the live groups, a group ``timeout`` seconds for the quorum,
each collective has the process group's timeout, and every process is killed when the call returns.
"""
from __future__ import annotations

import datetime
import io
import json
import os
import pickle
import signal
import time
from dataclasses import dataclass

import torch

from distlearn.core import launch
from distlearn.core.i18n import bi
from distlearn.core.validate import check_bool, check_number
from distlearn.fault_tolerance.diloco import make_data, make_model
from distlearn.fault_tolerance.lab_task import batch, flat_params, mse, set_grads
from distlearn.fault_tolerance.replicas import LR, Quorum, plan_timeline

WRONG_SEED = 999   # a replacement starts from other weights: only healing can make it right / 替换组从别的权重出发


def group_main(gid: int, groups: int, port: int, start_step: int, steps: int, kill_step: int, heal_optimizer: bool,
               seed: int, timeout: float, environ: dict) -> None:
    """One replica group (one process): for each step, report ready, wait for the quorum, heal if told to, compute
    the gradient of its own batch, all-reduce it among the members, divide by their number, AdamW step. Before
    ``kill_step`` it sends itself SIGKILL. Its final weights go to the store under ``final/<gid>``."""
    os.environ.clear()
    os.environ.update(environ)
    import torch.distributed as dist

    td = datetime.timedelta(seconds=timeout)
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=td)
    data = make_data(groups, seed)
    model = make_model(seed if start_step == 0 else WRONG_SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    pg, qid, log = None, None, []
    for s in range(start_step, steps):
        if s == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)                    # a real, silent death / 真实的、无声的死亡
        store.set(f"ready/{s}/{gid}", "1")
        q = json.loads(store.get(f"quorum/{s}"))                    # waits up to timeout / 最多等 timeout 秒
        members = q["members"]
        if q["quorum_id"] != qid:                                    # new membership, new group / 成员变了，建新组
            qid = q["quorum_id"]
            pg = dist.ProcessGroupGloo(dist.PrefixStore(f"pg/{qid}", store), members.index(gid), len(members), td)
        if q["source"] == gid and q["heal"]:                         # I am the live peer: send my state / 我来发送状态
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, buf)
            store.set(f"state/{s}", buf.getvalue())
        if gid in q["heal"]:                                         # fetch the current state / 取回当前状态
            state = torch.load(io.BytesIO(store.get(f"state/{s}")), weights_only=True)
            model.load_state_dict(state["model"])
            if heal_optimizer:
                opt.load_state_dict(state["optim"])
        opt.zero_grad()
        mse(model, batch(data.shards[gid], s)).backward()
        flat = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        pg.allreduce([flat]).wait(td)                                # among the members only / 只在成员之间
        set_grads(model, flat / len(members))
        opt.step()
        log.append(s)
    store.set(f"final/{gid}", pickle.dumps({"final": flat_params(model), "steps": log}))


@dataclass
class ReplicaRun:
    """What the coordinator saw: ``timeline`` (one :class:`~distlearn.fault_tolerance.replicas.Quorum` per step),
    ``finals`` (group id → final weights of the groups alive at the end), ``steps_done`` (group id → the steps each
    final process computed), ``exitcodes`` (group id → exit codes of its processes, in order: −9 = SIGKILL),
    ``seconds`` (wall time)."""
    timeline: list
    finals: dict
    steps_done: dict
    exitcodes: dict
    seconds: float


def run_replica_groups(groups: int = 3, steps: int = 12, kill_group: int = 1, kill_step: int = 4,
                       rejoin_step: int = 8, heal_optimizer: bool = True, seed: int = 0,
                       timeout: float = 60.0) -> ReplicaRun:
    """Start ``groups`` replica-group processes and coordinate ``steps`` steps: group ``kill_group`` kills itself
    before ``kill_step``, a fresh process replaces it at ``rejoin_step`` and heals from the lowest-numbered live
    group (model and, with ``heal_optimizer``, AdamW state). Returns a :class:`ReplicaRun`. Raises TimeoutError if
    the live groups do not all report within ``timeout`` seconds at some step, RuntimeError if a group other than
    the killed one dies; all processes are gone when it returns."""
    plan = plan_timeline(groups, steps, kill_group, kill_step, rejoin_step)   # validates the arguments
    check_bool("heal_optimizer", heal_optimizer)
    timeout = check_number("timeout", timeout, minimum=1, maximum=3600)
    from torch.distributed import TCPStore

    ctx, environ = launch.process_context(group_main)
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                     timeout=datetime.timedelta(seconds=timeout))
    procs: dict[int, list] = {}

    def start(gid, first):
        p = ctx.Process(target=group_main, daemon=True, name=f"distlearn-group{gid}",
                        args=(gid, groups, store.port, first, steps, kill_step if gid == kill_group else -1,
                              heal_optimizer, seed, timeout, environ))
        p.start()
        procs.setdefault(gid, []).append(p)

    t0, timeline, qid, prev = time.time(), [], 0, None
    try:
        for g in range(groups):
            start(g, 0)
        for s in range(steps):
            if s == rejoin_step:
                start(kill_group, s)                                  # the replacement / 替换组
            deadline = time.time() + timeout
            while True:                                               # the lighthouse waits / 协调者等待
                alive = [g for g, ps in procs.items() if ps[-1].exitcode is None]
                if all(store.check([f"ready/{s}/{g}"]) for g in alive):
                    break
                if time.time() > deadline:
                    raise TimeoutError(bi(f"step {s}: groups {alive} did not all report within {timeout:g} s",
                                          f"第 {s} 步：组 {alive} 没有在 {timeout:g} 秒内全部报到"))
                time.sleep(0.005)
            dead = tuple(sorted(g for g, ps in procs.items() if ps[-1].exitcode is not None))
            if set(dead) - {kill_group}:
                raise RuntimeError(bi(f"step {s}: group(s) {sorted(set(dead) - {kill_group})} died unexpectedly",
                                      f"第 {s} 步：组 {sorted(set(dead) - {kill_group})} 意外死亡"))
            members = tuple(sorted(alive))
            if members != prev:
                qid, prev = qid + 1, members
            heal = tuple(g for g in members if s > 0 and len(procs[g]) > 1 and s == rejoin_step)
            source = min(g for g in members if g not in heal) if heal else None
            q = Quorum(s, members, qid, heal, source, dead)
            store.set(f"quorum/{s}", json.dumps({"members": list(members), "quorum_id": qid, "heal": list(heal),
                                                 "source": source}))
            timeline.append(q)
        finals, done = {}, {}
        for g, ps in procs.items():
            ps[-1].join(timeout)
            if ps[-1].exitcode != 0:
                raise RuntimeError(bi(f"group {g} ended with exit code {ps[-1].exitcode}",
                                      f"组 {g} 以退出码 {ps[-1].exitcode} 结束"))
            out = pickle.loads(store.get(f"final/{g}"))
            finals[g], done[g] = out["final"], out["steps"]
        codes = {g: [p.exitcode for p in ps] for g, ps in procs.items()}
        if timeline != plan:
            raise RuntimeError(bi("the coordinator's quora differ from the plan", "协调者形成的法定成员组与计划不符"))
        return ReplicaRun(timeline, finals, done, codes, time.time() - t0)
    finally:
        for ps in procs.values():
            for p in ps:
                if p.is_alive():
                    p.kill()
                p.join(5)

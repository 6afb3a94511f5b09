"""Run real ``torch.distributed`` workers from a notebook or a script.

``run(fn, world_size, *args)`` starts ``world_size`` fresh processes, initializes the default process group in each
before calling ``fn(rank, world_size, *args)``, and destroys it after ``fn`` returns. It returns the per-rank results
in rank order.

- Start method: on Linux ``forkserver`` with torch (and the ``torch.distributed`` packages the labs use,
  :data:`FORKSERVER_PRELOAD`, plus what the first lab's module lists in its own ``FORKSERVER_PRELOAD``: DeepSpeed
  for the DeepSpeed labs, :func:`lab_preload`) preloaded in the server, so a worker is a fork of a clean process
  that has already imported torch (a 4-rank run starts in ~0.1 s instead of ~5 s on 2 cores: every spawned worker
  imports torch again); ``spawn`` elsewhere (macOS, Windows) or with ``DISTLEARN_START_METHOD=spawn``. Either way
  a worker starts from a fresh interpreter state (not a fork of the calling notebook), gets the caller's current
  environment variables, and imports ``fn``'s module itself.

- ``fn`` must be importable (a module-level function, e.g. a ``lab.py`` of a topic folder such as :mod:`distlearn.data_parallel.lab`): spawned processes import it
  by name, so a function defined in a notebook cannot work there.
- Each call starts its own rendezvous store in the calling process on a port the OS picks (127.0.0.1, port 0),
  so a second run in the same kernel, or two runs at once, never collide on a port.
- Gloo uses the loopback interface unless ``GLOO_SOCKET_IFNAME`` is set; ``OMP_NUM_THREADS=1`` unless set.
- A worker's exception is raised here as :class:`WorkerError` with its rank and the worker's traceback; the other
  workers are stopped. A worker that dies without a word (``SIGKILL``, a crash) is reported as the cause, with
  its exit code, even when its peers' broken connections reach us first. A run that outlasts ``timeout`` seconds
  (a collective waiting for a rank that never calls it, say) is stopped and raises :class:`TimeoutError`. No worker
  process outlives the call.
- On a machine shared by a classroom (:mod:`distlearn.core.limits`, set by the hub for every student): at most
  ``DISTLEARN_MAX_RANKS`` processes per lab, at most ``DISTLEARN_LAB_SLOTS`` lab processes at once on the machine
  (a lab waits, saying so, until enough are free), each lab process reniced by ``DISTLEARN_LAB_NICE``.

Labs are runnable unchanged with torchrun through :func:`torchrun_main`; with CUDA available they use NCCL and one
GPU per rank (:func:`device`).
"""
from __future__ import annotations

import datetime
import multiprocessing as mp
import os
import pickle
import signal
import socket
import sys
import time
import traceback
from multiprocessing.connection import wait
from typing import Any, Callable

from distlearn.core import limits
from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_positive
from distlearn.core.guard import read_only

__all__ = ["run", "WorkerError", "torchrun_main", "device", "default_backend"]


class WorkerError(RuntimeError):
    """A worker raised or died. ``rank``, ``exc_type`` (name; ``"ProcessExit"`` for a process that ended without a
    result, e.g. killed by a signal), ``message`` (the exception's own message) and ``remote_traceback`` describe
    what happened there; ``exitcode`` is the
    process's exit code for a ``ProcessExit`` (negative: the signal number, -9 = SIGKILL), else None."""

    def __init__(self, rank: int, exc_type: str, message: str, remote_traceback: str, exitcode: int | None = None,
                 message_zh: str | None = None):
        from distlearn.core.i18n import bi

        self.rank, self.exc_type, self.remote_traceback = rank, exc_type, remote_traceback
        self.message = message  # the worker's own words (PyTorch's error message, as it printed it)
        self.exitcode = exitcode  # set when the process ended without a word (killed, crashed): -9 for SIGKILL
        zh = message if message_zh is None else message_zh  # a worker's own error: already in the reader's language
        self.summary = bi(f"rank {rank} raised {exc_type}: {message}", f"rank {rank} 抛出了 {exc_type}：{zh}", sep="\n")
        super().__init__(self.summary + "\n\n" + bi(f"--- traceback on rank {rank} ---", f"--- rank {rank} 上的调用栈 ---")
                         + f"\n{remote_traceback}")


def default_backend() -> str:
    """``"nccl"`` when CUDA is available, else ``"gloo"``."""
    import torch

    return "nccl" if torch.cuda.is_available() else "gloo"


def device():
    """The device this rank should compute on: ``cuda:LOCAL_RANK`` under NCCL, else the CPU."""
    import torch
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", dist.get_rank())) % torch.cuda.device_count())
    return torch.device("cpu")


def _loopback_ifname() -> str:
    try:
        names = [name for _, name in socket.if_nameindex()]
    except (AttributeError, OSError):
        names = []
    for name in ("lo", "lo0"):
        if name in names:
            return name
    return "lo0" if sys.platform == "darwin" else "lo"


START_METHODS = ("forkserver", "spawn")
# What the forkserver imports once, so that no worker imports it again: torch, and the torch.distributed packages the
# labs use (DTensor and its debug mode, FSDP, DCP, pipelining, distributed optimizers). Without bytecode caches
# (PYTHONDONTWRITEBYTECODE, a read-only site-packages) the packages after torch.distributed cost a worker 3-4 s of
# CPU to import, more than most labs' work; with the caches ~1.1 s. Importing them starts no thread. The server
# pays that once, also where its workers need none of them (the collectives and DDP labs).
FORKSERVER_PRELOAD = read_only(["torch", "torch.distributed", "torch.distributed.device_mesh", "torch.distributed.tensor",
                      "torch.distributed.tensor.parallel", "torch.distributed.tensor.debug",
                      "torch.distributed.tensor.experimental", "torch.distributed.fsdp", "torch.distributed.checkpoint",
                      "torch.distributed.checkpoint.state_dict", "torch.distributed.pipelining",
                      "torch.distributed.optim"])


def lab_preload(fn) -> list[str]:
    """What ``fn``'s module adds to the forkserver's imports: its own ``FORKSERVER_PRELOAD`` list, if any (the
    DeepSpeed labs name :mod:`distlearn.deepspeed_fsdp.lab_preload`: DeepSpeed and the module it imports on every
    ``deepspeed.initialize`` with ZeRO, ~1.2 s of CPU in each worker otherwise). Not on a machine with CUDA:
    importing DeepSpeed probes the accelerator there, and a server that has initialised CUDA cannot fork workers
    that use it."""
    extra = list(getattr(sys.modules.get(getattr(fn, "__module__", None)), "FORKSERVER_PRELOAD", ()))
    if extra:
        import torch

        if torch.cuda.is_available():
            return []
    return extra


def _context(fn=None):
    """The multiprocessing context of the workers (see the module doc); ``DISTLEARN_START_METHOD`` overrides. The
    forkserver imports :data:`FORKSERVER_PRELOAD` and :func:`lab_preload` of the first ``fn`` a process runs: the
    server starts on a process's first launch and serves all its later ones (a later lab's own extra modules are
    then imported by its workers, as without a forkserver)."""
    default = "forkserver" if sys.platform.startswith("linux") else "spawn"
    method = check_choice("DISTLEARN_START_METHOD", os.environ.get("DISTLEARN_START_METHOD", default),
                          START_METHODS)
    ctx = mp.get_context(method)
    if method == "forkserver":
        extra = [] if fn is None else [m for m in lab_preload(fn) if m not in FORKSERVER_PRELOAD]
        ctx.set_forkserver_preload(FORKSERVER_PRELOAD + extra)  # takes effect when the server first starts
    return ctx


def _worker_environ() -> dict:
    """The caller's environment for a worker, with ``DISTLEARN_LANG`` set to the caller's current language (set by
    :func:`distlearn.set_language` after start-up, which a new process would not see): a worker's messages and
    errors are then in the reader's language too."""
    from distlearn.core.i18n import get_language

    return {**os.environ, "DISTLEARN_LANG": get_language()}


def _worker(fn, rank, world_size, args, backend, port, pg_timeout, conn, environ=None):
    """Entry point of one worker: take the caller's environment, set up the process group, run fn, send back the
    result or the error."""
    if environ is not None:  # a forkserver child inherits the server's environment, not the caller's current one
        os.environ.clear()
        os.environ.update(environ)
    nice = limits.lab_nice()  # a shared machine: lab processes yield the CPU to kernels and JupyterLab
    if nice:
        os.nice(nice)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size))
    import torch.distributed as dist

    try:
        try:
            import torch

            if backend == "nccl":
                torch.cuda.set_device(rank % torch.cuda.device_count())
            timeout = datetime.timedelta(seconds=pg_timeout)
            store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timeout)
            dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
            result = fn(rank, world_size, *args)
            if dist.is_initialized():
                dist.barrier()  # without it gloo sometimes aborts at exit (platform-notes.md)
            payload = ("ok", pickle.dumps(result))
        except BaseException as exc:  # noqa: BLE001 - everything must reach the parent
            # time.time() lets the parent tell the first failure from the ones it caused on other ranks
            payload = ("error", (time.time(), type(exc).__name__, str(exc), traceback.format_exc()))
        try:
            conn.send(payload)  # before destroying the group, so the root cause arrives first
        except Exception as exc:  # an unpicklable result, say
            conn.send(("error", (time.time(), type(exc).__name__, f"could not send the result back: {exc}",
                                 traceback.format_exc())))
        conn.close()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _check_importable(fn) -> None:
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not callable(fn) or module in (None, "__main__") or "<locals>" in qualname or "<lambda>" in qualname:
        raise DistlearnValueError(
            "fn",
            f"fn must be a module-level function in an importable module (e.g. distlearn.data_parallel.lab), got {fn!r}: "
            "spawned workers import it by name, and a function defined in a notebook or inside another function "
            "cannot be imported there.",
            f"fn 必须是可导入模块中的顶层函数（例如 distlearn.data_parallel.lab），收到 {fn!r}：新启动的进程按名称导入它，"
            "在笔记本里或函数内部定义的函数无法在那里导入。",
        )


def run(fn: Callable[..., Any], world_size: int, *args, backend: str = "gloo", timeout: float = 120.0) -> list:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` real processes; return the results in rank order.

    Parameters: ``world_size`` integer in [1, 64]; ``backend`` ``"gloo"`` (CPU) or ``"nccl"`` (one GPU per
    rank); ``timeout`` seconds (> 0) for the whole run. ``args`` and the results must be picklable.

    On a shared machine ``world_size`` is also capped, and the run may first wait for free lab slots
    (:mod:`distlearn.core.limits`).

    Raises: DistlearnValueError for bad arguments (``world_size`` above the machine's cap included); TimeoutError
    also after waiting ``DISTLEARN_LAB_WAIT`` seconds for lab slots; WorkerError if a worker raised (or died); TimeoutError if the
    run did not finish in ``timeout`` seconds. In every case all worker processes are gone when it returns.
    """
    _check_importable(fn)
    world_size = check_int("world_size", world_size, minimum=1, maximum=64)
    limits.check_world_size(world_size)  # a shared machine's cap (DISTLEARN_MAX_RANKS), if any
    limits.lab_nice()                    # a malformed DISTLEARN_LAB_NICE fails here, not in every worker
    check_choice("backend", backend, ("gloo", "nccl"))
    timeout = check_positive("timeout", timeout)
    if backend == "nccl":
        import torch

        if torch.cuda.device_count() < 1:
            raise DistlearnValueError("backend", "backend='nccl' needs a CUDA GPU; use backend='gloo' on CPU.",
                                      "backend='nccl' 需要 CUDA GPU；在 CPU 上请使用 backend='gloo'。")

    os.environ.setdefault("OMP_NUM_THREADS", "1")  # inherited by the workers; 8x faster on small CPUs
    if backend == "gloo":
        os.environ.setdefault("GLOO_SOCKET_IFNAME", _loopback_ifname())
    from torch.distributed import TCPStore

    ctx = _context(fn)
    # On a shared machine (a classroom hub): wait for world_size of the room's lab slots (DISTLEARN_LAB_SLOTS), held
    # until every worker is gone; the wait does not count against timeout. Nothing to wait for elsewhere.
    with limits.lab_slots(world_size):
        # The rendezvous store lives here, on a port the OS assigns: no race with other runs for a "free" port.
        store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                         timeout=datetime.timedelta(seconds=max(timeout, 1.0)))
        port = store.port
        procs, conns = [], {}
        try:
            for rank in range(world_size):
                parent_end, child_end = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_worker, name=f"distlearn-rank{rank}", daemon=True,
                                args=(fn, rank, world_size, args, backend, port, max(timeout, 1.0), child_end,
                                      _worker_environ()))
                p.start()
                child_end.close()
                procs.append(p)
                conns[parent_end] = rank
            return _collect(procs, conns, world_size, timeout)
        finally:
            _stop(procs)


def _collect(procs, conns, world_size, timeout):
    results: dict[int, Any] = {}
    deadline = time.monotonic() + timeout
    sentinels = {p.sentinel: rank for rank, p in enumerate(procs)}
    while len(results) < world_size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            waiting = sorted(set(range(world_size)) - set(results))
            raise TimeoutError(
                f"the distributed run did not finish within {timeout:g} s; ranks without a result: {waiting} "
                "(in fn, or in the closing barrier waiting for the others). Usually a collective is waiting for a "
                "rank that never calls it.\n"
                f"分布式运行在 {timeout:g} 秒内没有结束；尚未返回结果的 rank：{waiting}（仍在 fn 中，或在结束时的 barrier 中"
                "等待其他 rank）。通常是某个集合通信在等待一个永远不会调用它的 rank。")
        ready = wait(list(conns) + list(sentinels), timeout=remaining)
        for obj in ready:
            if obj in conns:
                rank = conns.pop(obj)
                try:
                    status, payload = obj.recv()
                except EOFError:                     # closed without a word: the process died
                    raise _death(rank, procs, conns) from None
                if status == "error":
                    raise _first_error(rank, payload, conns, procs)
                results[rank] = pickle.loads(payload)
            elif obj in sentinels:
                rank = sentinels.pop(obj)
                pending = [c for c, r in conns.items() if r == rank]
                if rank in results or (pending and pending[0].poll(1.0)):
                    continue  # finished normally, or its last message (or its EOF) is read in the next round
                raise _death(rank, procs, conns)
    return [results[r] for r in range(world_size)]


def _death(rank, procs, conns, grace: float = 1.0) -> WorkerError:
    """The error for a worker that ended without sending anything (killed by a signal, a crash in C++, an
    ``os._exit``): its exit code, and what the other ranks reported in the next ``grace`` seconds (usually
    broken connections, the consequence)."""
    procs[rank].join(grace)                          # reap it: exitcode is None until the process is waited for
    code = procs[rank].exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        how_en, how_zh = f"was killed by {name} (exit code {code})", f"被 {name} 杀死（退出码 {code}）"
    else:
        how_en, how_zh = f"exited with code {code}", f"以退出码 {code} 退出"
    others = []
    deadline = time.monotonic() + grace
    for conn, other in list(conns.items()):
        if other == rank:
            continue
        try:
            if conn.poll(max(0.0, deadline - time.monotonic())):
                status, data = conn.recv()
                if status == "error":
                    others.append(f"rank {other}: {data[1]}: {data[2].splitlines()[0][:160] if data[2] else ''}")
        except (EOFError, OSError):
            pass
    from distlearn.core.i18n import bi

    # What the peers said is a consequence (a broken connection, worded "reset" or "closed" by whichever socket
    # noticed first, and only from the peers that noticed within ``grace``): kept with the traceback, not in the
    # summary, so that the summary names the cause alone and reads the same on every run.
    after = ("\n" + bi("--- then, on the other ranks ---", "--- 随后，其他 rank 上 ---") + "\n" + "\n".join(others)
             if others else "")
    return WorkerError(rank, "ProcessExit", f"worker {how_en} without a result",
                       bi("(no Python traceback: the process was killed or crashed)",
                          "（没有 Python 调用栈：进程被杀死或崩溃）") + after,
                       exitcode=code, message_zh=f"worker {how_zh}，没有返回结果")


def _first_error(rank, payload, conns, procs, grace: float = 1.0) -> WorkerError:
    """The earliest error among those arriving within ``grace`` seconds: a rank that fails makes its peers fail
    too (closed connections), and the first failure is the one to show. A rank that died without a word in that
    time is the cause of the others' broken connections: it is reported instead."""
    errors = [(payload[0], rank, payload[1:])]
    deadline = time.monotonic() + grace
    for conn, other in list(conns.items()):
        try:
            if conn.poll(max(0.0, deadline - time.monotonic())):
                status, data = conn.recv()
                if status == "error":
                    errors.append((data[0], other, data[1:]))
        except EOFError:                             # died silently: the root cause
            conns.pop(conn, None)
            return _death(other, procs, conns, grace=0.2)
        except OSError:
            pass
    _, first_rank, (exc_type, message, tb) = min(errors)
    return WorkerError(first_rank, exc_type, message, tb)


def _stop(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
            p.join(timeout=5)


def torchrun_main(fn: Callable[..., Any], *args, backend: str | None = None) -> Any:
    """Run ``fn(rank, world_size, *args)`` in a process started by torchrun (env:// rendezvous).

    Picks NCCL and one GPU per rank when CUDA is available, else gloo on the loopback interface; ``backend="gloo"``
    keeps a lab that computes on the CPU on gloo even where GPUs are (chapter 15's RL loop, a 584-parameter
    policy). Rank 0 prints the result; every rank returns its own.
    """
    import torch
    import torch.distributed as dist

    backend = default_backend() if backend is None else check_choice("backend", backend, ("gloo", "nccl"))
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    else:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", _loopback_ifname())
    dist.init_process_group(backend)
    try:
        rank, world_size = dist.get_rank(), dist.get_world_size()
        result = fn(rank, world_size, *args)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    if rank == 0:
        print(result)
    return result


def process_context(fn) -> tuple:
    """For a lab that starts and stops its own processes (chapter 13's replica groups, where one process dies and a
    new one joins): the multiprocessing context :func:`run` would use for ``fn`` (forkserver with torch preloaded on
    Linux) and the environment to hand each process (the caller's, with its current language). Sets
    ``OMP_NUM_THREADS=1`` and the loopback interface for gloo unless already set, as :func:`run` does. Returns
    ``(context, environ)``."""
    _check_importable(fn)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", _loopback_ifname())
    return _context(fn), _worker_environ()

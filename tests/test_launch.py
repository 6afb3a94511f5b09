"""The real multi-process launcher: results, re-runs in one process, worker errors, hangs, no orphans."""
import multiprocessing as mp
import os
import sys
import time

import pytest

from distlearn.core.i18n import bi

from distlearn.core import launch
from distlearn.core import lab_smoke as smoke
from distlearn.core.validate import DistlearnValueError

pytestmark = pytest.mark.slow


def _no_children_left():
    deadline = time.time() + 5
    while mp.active_children() and time.time() < deadline:
        time.sleep(0.1)
    return not mp.active_children()


@pytest.mark.parametrize("world_size", [1, 2, 4])
def test_all_reduce_results_in_rank_order(world_size):
    assert launch.run(smoke.all_reduce_rank, world_size) == [world_size * (world_size + 1) / 2] * world_size


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_workers_get_the_callers_current_environment(monkeypatch, method):
    """A forkserver child inherits the server's environment: the launcher passes the caller's current one, so a
    variable set after an earlier run (which started the server) still reaches the workers, as with spawn."""
    if method == "forkserver" and not sys.platform.startswith("linux"):
        pytest.skip("forkserver is used on Linux only")
    monkeypatch.setenv("DISTLEARN_START_METHOD", method)
    if method == "forkserver":
        assert launch.run(smoke.all_reduce_rank, 2) == [3.0, 3.0]   # starts the server (if no earlier run did)
    monkeypatch.setenv("DISTLEARN_TEST_VAR", f"set later / 之后设置 {method}")
    out = launch.run(smoke.environment, 2, "DISTLEARN_TEST_VAR")
    assert [v for v, _, _ in out] == [f"set later / 之后设置 {method}"] * 2
    assert len({pid for _, pid, _ in out}) == 2 and all(pid != os.getpid() for _, pid, _ in out)
    monkeypatch.setenv("DISTLEARN_START_METHOD", "fork")      # fork of a notebook kernel: refused
    with pytest.raises(DistlearnValueError, match="DISTLEARN_START_METHOD"):
        launch.run(smoke.all_reduce_rank, 2)


def test_worker_exception_reraised_with_rank_and_traceback():
    with pytest.raises(launch.WorkerError) as info:
        launch.run(smoke.raise_on_rank, 2, 1, timeout=60)
    err = info.value
    assert err.rank == 1 and err.exc_type == "ValueError"
    assert "deliberate failure on rank 1" in str(err) and "raise_on_rank" in err.remote_traceback
    assert _no_children_left()


@pytest.mark.parametrize("bad_rank", [0, 1])
def test_sigkilled_rank_is_reported_as_the_cause(bad_rank):
    """A rank killed by SIGKILL sends nothing; its peers' broken connections must not be reported instead."""
    with pytest.raises(launch.WorkerError) as info:
        launch.run(smoke.sigkill_on_rank, 2, bad_rank, timeout=60)
    err = info.value
    assert err.rank == bad_rank and err.exc_type == "ProcessExit" and err.exitcode == -9
    assert "SIGKILL" in str(err)
    # The summary names the cause alone, the same on every run: the peers' broken connections (worded "reset" or
    # "closed" by whichever socket notices first, and only from peers that noticed in time) stay out of it.
    assert err.summary == bi(f"rank {bad_rank} raised ProcessExit: worker was killed by SIGKILL (exit code -9) "
                             "without a result",
                             f"rank {bad_rank} 抛出了 ProcessExit：worker 被 SIGKILL 杀死（退出码 -9），没有返回结果",
                             sep="\n")
    assert "gloo" not in err.summary
    assert _no_children_left()
    assert launch.run(smoke.all_reduce_rank, 2) == [3.0, 3.0]         # the next run in this process works


def test_hang_ends_at_timeout_without_orphans():
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="did not finish within 6 s"):
        launch.run(smoke.hang_on_rank, 2, 0, timeout=6)
    assert time.monotonic() - t0 < 20
    assert _no_children_left()


def _local_fn(rank, world_size):
    return rank


def test_non_importable_function_is_refused_clearly():
    with pytest.raises(DistlearnValueError, match="module-level"):
        launch.run(lambda r, w: r, 2)


@pytest.mark.parametrize("kwargs", [dict(world_size=0), dict(world_size=2.0), dict(world_size=2, backend="mpi"),
                                    dict(world_size=2, timeout=-1)])
def test_bad_arguments(kwargs):
    with pytest.raises(DistlearnValueError):
        launch.run(smoke.all_reduce_rank, **kwargs)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_workers_speak_the_callers_current_language(monkeypatch, lang):
    """set_language after start-up (a notebook's switch) reaches the workers: their DISTLEARN_LANG is the caller's
    current language, so what they print and raise is in it; a worker error's summary is in it too."""
    import distlearn

    monkeypatch.delenv("DISTLEARN_LANG", raising=False)
    distlearn.set_language(lang)
    try:
        out = launch.run(smoke.environment, 2, "DISTLEARN_LANG")
        assert [v for v, _, _ in out] == [lang] * 2
        err = launch.WorkerError(1, "ValueError", "bad", "tb")
        assert ("抛出了" in err.summary) == (lang == "zh") and ("raised" in err.summary) == (lang == "en")
    finally:
        distlearn.set_language("both")


def test_a_labs_own_forkserver_preload_is_added(monkeypatch):
    """The DeepSpeed labs add DeepSpeed to what the forkserver imports; other labs add nothing; a machine with CUDA
    adds nothing (the server must not initialise CUDA before it forks)."""
    import multiprocessing.forkserver as fs

    import torch

    from distlearn.deepspeed_fsdp import lab as deepspeed_zero
    from distlearn.zero_fsdp import lab_traffic as zero_comm

    monkeypatch.setattr(fs._forkserver, "_preload_modules", list(fs._forkserver._preload_modules))  # restored after
    monkeypatch.setenv("DISTLEARN_START_METHOD", "forkserver")  # the default on Linux
    for fn in (deepspeed_zero.train_stages, zero_comm.stages_and_grid):
        assert launch.lab_preload(fn) == ["distlearn.deepspeed_fsdp.lab_preload"]
        launch._context(fn)
        assert fs._forkserver._preload_modules == launch.FORKSERVER_PRELOAD + deepspeed_zero.FORKSERVER_PRELOAD
    assert launch.lab_preload(smoke.all_reduce_rank) == []
    launch._context(smoke.all_reduce_rank)
    assert fs._forkserver._preload_modules == launch.FORKSERVER_PRELOAD
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert launch.lab_preload(zero_comm.stages_and_grid) == []


def test_the_deepspeed_preload_does_nothing_where_there_is_cuda(monkeypatch):
    """Imported on a machine with CUDA (where lab_preload never names it, but a tool walking the package may import
    it), the preload neither picks DeepSpeed's CPU accelerator for the process nor imports DeepSpeed."""
    import importlib.util

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    spec = importlib.util.find_spec("distlearn.deepspeed_fsdp.lab_preload")
    module = importlib.util.module_from_spec(spec)
    imported = set(sys.modules)
    spec.loader.exec_module(module)
    assert "DS_ACCELERATOR" not in os.environ
    assert not {m for m in set(sys.modules) - imported if m.startswith("deepspeed")}

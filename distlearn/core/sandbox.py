"""Run a piece of a student's code where it can be stopped for real, with its printed output capped.

:mod:`distlearn.core.check` runs each hidden case of an exercise through :func:`run`. Limits and units:
``timeout`` is wall-clock seconds for the whole job (the student's call and the comparison of its answer);
``output_limit`` is characters (``len`` of the text) of stdout + stderr shown for the job, :data:`OUTPUT_LIMIT`
unless given; what is printed past it is counted, not kept, and one bilingual line says how much was cut.

Where ``os.fork`` exists (Linux, macOS) each job runs in a worker forked from the calling process (the notebook's
kernel). The worker sees the caller's memory as it was at the fork, so a function defined in a notebook needs no
pickling; whatever the job changes there (a course table, its arguments, a global) ends with the worker and never
reaches the kernel. At the limit the worker's process group gets SIGKILL, which stops it even inside a C call
(``time.sleep(3600)``, a long numpy or torch operation). ``os._exit`` or a crash in C code ends only the worker: the
caller gets :class:`Outcome` ``"ended"`` with the exit code. Only the job's return value travels back, pickled
through a pipe, with the printed text. A job costs 10–25 ms more than the call itself (measured on 2 cores: 21 ms
for a process holding 660 MB with torch, numpy and every chapter's checkers imported; about 150 ms for a 7-case check).

Where fork is missing (Windows) the job runs in the calling process instead: a Python loop is stopped by an
exception (:class:`Stopped`) injected at the limit, but a C call (``time.sleep(3600)``) is not; ``os._exit`` ends the
kernel; the module-level constant tables of ``distlearn`` (UPPER_CASE dicts, lists, sets and numpy arrays) are put
back as they were after each job.
"""
from __future__ import annotations

import builtins
import copy
import ctypes
import io
import os
import signal
import sys
import threading
import time
import warnings
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from multiprocessing.connection import Pipe
from typing import Any, Callable

from distlearn.core.i18n import bi

OUTPUT_LIMIT = 10_000           # characters of printed output shown (per job here; per check in distlearn.core.check)
FORK = hasattr(os, "fork")      # False: run in the calling process (Windows); tests set it to try that path
_POLL = 0.005                   # seconds between checks that a worker which closed its pipe has exited


class Stopped(BaseException):
    """Raised inside a job that ran past its limit when it runs in the calling process (no fork). A
    BaseException, so that an ``except Exception`` in the student's code cannot swallow it; a job that catches
    BaseException must re-raise this one."""


@dataclass
class Outcome:
    """How a job ended.

    ``status``: ``"returned"`` (``value`` is what the job returned), ``"timeout"`` (it ran past ``timeout``
    seconds and was stopped), ``"ended"`` (the worker process ended before returning: ``exit_code``, negative for
    a signal, e.g. −11 for SIGSEGV; None if unknown) or ``"failed"`` (the job raised or its value could not be
    pickled back: ``error`` says what). ``seconds``: wall-clock time the job took. ``shown``: characters of its
    printed output that were shown; ``cut``: whether some were not, ``hidden`` of them (None: unknown, the job
    was stopped before it could say).
    """

    status: str
    value: Any = None
    exit_code: int | None = None
    error: str = ""
    seconds: float = 0.0
    shown: int = 0
    cut: bool = False
    hidden: int | None = None


def run(job: Callable[[], Any], timeout: float, output_limit: int = OUTPUT_LIMIT, notice: bool = True) -> Outcome:
    """Run ``job()`` for at most ``timeout`` seconds, in a forked worker where possible (see the module's
    docstring); what it prints is shown on the caller's ``sys.stdout`` as it comes, up to ``output_limit``
    characters, then (``notice``) one bilingual line saying how much was cut (:func:`cut_notice`)."""
    outcome = None
    if FORK:
        try:
            outcome = _run_forked(job, timeout, output_limit)
        except OSError:   # no fork possible now (out of processes or memory): run here rather than not at all
            pass
    if outcome is None:
        outcome = _run_here(job, timeout, output_limit)
    if notice and outcome.cut:
        sys.stdout.write(cut_notice(outcome.hidden))
    return outcome


# ---------------------------------------------------------------- capped output
class _Capped(io.TextIOBase):
    """A text stream that passes on the first ``limit`` characters written to it (``emit``), counts the rest,
    and calls ``on_cut`` once when the limit is first passed."""

    encoding = "utf-8"

    def __init__(self, emit: Callable[[str], Any], on_cut: Callable[[], Any], limit: int):
        super().__init__()
        self.emit, self.on_cut, self.limit, self.total = emit, on_cut, limit, 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        room = self.limit - self.total
        if room > 0 and s:
            self.emit(s[:room])
        if self.total <= self.limit < self.total + len(s):
            self.on_cut()
        self.total += len(s)
        return len(s)


def cut_notice(hidden: int | None) -> str:
    """The line (ending in a newline) that ends cut output: ``hidden`` more characters were not shown (None:
    unknown, the job was stopped before it could say)."""
    if hidden is None:
        line = bi("… output cut (the rest was not shown)", "……输出已截断（其余部分未显示）")
    else:
        line = bi(f"… output cut: {hidden:,} more characters not shown", f"……输出已截断：另有 {hidden:,} 个字符未显示")
    return line + "\n"


class _Shown:
    """What the caller has shown of a job's output: how many characters, whether some were cut."""

    def __init__(self, write: Callable[[str], Any]):
        self.write, self.count, self.last, self.cut = write, 0, "", False

    def show(self, text: str) -> None:
        if text:
            self.write(text)
            self.count, self.last = self.count + len(text), text[-1]

    def end(self, outcome: Outcome, total: int | None, limit: int) -> Outcome:
        """``outcome`` with what was shown of the ``total`` characters printed (None: unknown), ``limit`` shown at
        most; cut output is ended with a newline, so that the notice after it starts a line."""
        outcome.shown, outcome.cut = self.count, self.cut
        outcome.hidden = None if total is None or not self.cut else max(total - limit, 0)
        if self.cut and self.last not in ("", "\n"):
            self.write("\n")
        return outcome


def _show(text: str) -> None:
    sys.stdout.write(text)


# ---------------------------------------------------------------- in a forked worker
def _run_forked(job: Callable[[], Any], timeout: float, output_limit: int) -> Outcome:
    reader, writer = Pipe(duplex=False)
    start = time.monotonic()
    with warnings.catch_warnings():   # Python 3.12+ warns that forking a threaded process (a kernel) may deadlock
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:   # the worker: never returns
        reader.close()
        _worker(job, writer, output_limit)
    writer.close()
    worker = _Worker(pid)
    try:
        outcome = _collect(worker, reader, start + timeout, output_limit)
    finally:
        reader.close()
        worker.end()
    outcome.seconds = time.monotonic() - start
    return outcome


def _worker(job: Callable[[], Any], conn, output_limit: int) -> None:
    """In the forked worker: run ``job`` with output sent through ``conn``, send its value, exit at once
    (``os._exit``: none of the kernel's exit handlers run here)."""
    code = 0
    try:
        _prepare_worker()
        out = _Capped(lambda s: conn.send(("out", s)), lambda: conn.send(("cut",)), output_limit)
        sys.stdout = sys.stderr = out
        try:
            message = ("returned", job(), out.total)
        except BaseException as exc:  # noqa: BLE001 — a job should catch the student's exceptions itself
            message = ("failed", describe(exc), out.total)
        try:
            conn.send(message)
        except Exception as exc:  # the value cannot be pickled
            conn.send(("failed", bi(f"its result could not be sent back ({describe(exc)})",
                                    f"结果无法传回（{describe(exc)}）"), out.total))
    except BaseException:  # noqa: BLE001 — the pipe is gone: the caller sees the exit code
        code = 70
    finally:
        os._exit(code)


def _prepare_worker() -> None:
    """Make the worker its own process group (so a kill also ends what it started), keep torch from waiting on
    the kernel's OpenMP threads (they do not exist after a fork: a matrix product would hang), and keep the
    kernel's stdin and crash handler out of it."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    import faulthandler

    faulthandler.disable()
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads"):
        torch.set_num_threads(1)
    builtins.input = _no_input


def _no_input(prompt: str = "") -> str:
    raise RuntimeError(bi("input() cannot be answered while a check runs your code",
                          "检查运行你的代码时无法回答 input()"))


def describe(exc: BaseException, limit: int = 300) -> str:
    """``Type: message``, the message cut to ``limit`` characters (a student's exception may carry megabytes)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 — a broken __str__
        text = "?"
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Worker:
    """The forked worker as the caller sees it: reaped at most once, killed with its process group."""

    def __init__(self, pid: int):
        self.pid, self.exit_code, self.reaped = pid, None, False
        try:
            os.setpgid(pid, pid)   # also in the worker: whichever runs first
        except OSError:
            pass

    def poll_exit(self) -> bool:
        """Whether the worker has exited (then ``exit_code`` is set; None if the system did not keep it)."""
        if self.reaped:
            return True
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:   # SIGCHLD ignored: already reaped by the system
            self.reaped = True
            return True
        if pid == 0:
            return False
        self.reaped, self.exit_code = True, os.waitstatus_to_exitcode(status)
        return True

    def wait_exit(self, deadline: float) -> bool:
        """Wait until the worker exits or ``deadline`` (time.monotonic) passes; whether it exited."""
        while not self.poll_exit():
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL)
        return True

    def end(self) -> None:
        """Kill the worker and anything it started (SIGKILL to its process group), and reap it."""
        if self.reaped:
            return
        for kill in (lambda: os.killpg(self.pid, signal.SIGKILL), lambda: os.kill(self.pid, signal.SIGKILL)):
            try:
                kill()
                break
            except OSError:
                continue
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        self.reaped = True


def _collect(worker: _Worker, reader, deadline: float, output_limit: int) -> Outcome:
    """Read the worker's messages until it returns, ends or passes ``deadline``, showing its output as it comes."""
    return _read(worker, reader, deadline, output_limit, _Shown(_show))


def _read(worker: _Worker, reader, deadline: float, output_limit: int, shown: _Shown) -> Outcome:
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not reader.poll(remaining):
            return shown.end(Outcome("timeout"), None, output_limit)
        try:
            message = reader.recv()
        except EOFError:   # the worker closed its pipe: it is ending (os._exit, a crash) or stopped talking
            if not worker.wait_exit(deadline):
                return shown.end(Outcome("timeout"), None, output_limit)
            return shown.end(Outcome("ended", exit_code=worker.exit_code), None, output_limit)
        if message[0] == "out":
            shown.show(message[1])
        elif message[0] == "cut":
            shown.cut = True
        else:
            status, value, total = message
            outcome = Outcome("failed", error=value) if status == "failed" else Outcome("returned", value=value)
            return shown.end(outcome, total, output_limit)


# ---------------------------------------------------------------- in the calling process (no fork)
def _run_here(job: Callable[[], Any], timeout: float, output_limit: int) -> Outcome:
    """The job in this process: stopped at the limit only while it runs Python code; tables restored after."""
    tables, shown = _Tables("distlearn"), _Shown(sys.stdout.write)
    out = _Capped(shown.show, lambda: setattr(shown, "cut", True), output_limit)
    start = time.monotonic()
    try:
        with redirect_stdout(out), redirect_stderr(out):
            value = _call_stopped(job, timeout)
        outcome = Outcome("returned", value=value)
    except Stopped:
        outcome = Outcome("timeout")
    except BaseException as exc:  # noqa: BLE001 — reported as the job failing, like in a worker
        outcome = Outcome("failed", error=describe(exc))
    finally:
        tables.restore()
    outcome.seconds = time.monotonic() - start
    return shown.end(outcome, out.total, output_limit)


def _call_stopped(job: Callable[[], Any], timeout: float):
    """``job()``, stopped with :class:`Stopped` after ``timeout`` seconds (raised in this thread as soon as it runs
    Python code again: a C call such as ``time.sleep`` runs on to its end)."""
    tid, lock, state = threading.get_ident(), threading.Lock(), {"running": True}

    def expire():
        with lock:
            if state["running"]:
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(tid), ctypes.py_object(Stopped))

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        return job()
    finally:
        with lock:
            state["running"] = False
        timer.cancel()


class _Tables:
    """The module-level constants (UPPER_CASE names) of the loaded modules of ``package``, so that :meth:`restore`
    can undo what a job did to them: rebinding any of them, or changing a table (dict, list, set, numpy array) in
    place. Tables that cannot be copied are guarded against rebinding only."""

    def __init__(self, package: str):
        import numpy as np

        self.bound, self.saved = [], []
        for name, module in list(sys.modules.items()):
            if module is None or not (name == package or name.startswith(package + ".")):
                continue
            for attr, value in list(vars(module).items()):
                if not attr.isupper():
                    continue
                self.bound.append((module, attr, value))
                if isinstance(value, (dict, list, set, np.ndarray)):
                    try:
                        self.saved.append((value, copy.deepcopy(value)))
                    except Exception:  # noqa: BLE001 — not copyable: guarded against rebinding only
                        pass

    def restore(self) -> None:
        for module, attr, value in self.bound:
            if vars(module).get(attr, _MISSING) is not value:
                vars(module)[attr] = value  # past distlearn.core.guard, which refuses a rebinding from outside
        for value, saved in self.saved:
            if not _equal(value, saved):
                _refill(value, copy.deepcopy(saved))


_MISSING = object()


def _equal(a, b) -> bool:
    import numpy as np

    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 — holds arrays: compare as changed
        return False


def _refill(value, saved) -> None:
    # the base class's methods, past a read-only table's refusal (distlearn.core.guard) / 用基类的方法，绕过只读表的拒绝
    if isinstance(value, dict):
        dict.clear(value)
        dict.update(value, saved)
    elif isinstance(value, list):
        list.__setitem__(value, slice(None), saved)
    elif isinstance(value, set):
        set.clear(value)
        set.update(value, saved)
    elif value.shape == saved.shape:   # a numpy array changed in place
        value[...] = saved

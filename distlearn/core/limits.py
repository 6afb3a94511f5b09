"""Limits on the labs' processes when many students share one machine (a classroom hub, ``make classroom``).

:func:`distlearn.core.launch.run` obeys these environment variables; the classroom's spawner
(:mod:`authoring.classroom`) sets them for every student's server, so every kernel and every lab inherits them.
Unset (a laptop, ``make lab``, the tests), nothing changes.

============================  =====================================================================================
``DISTLEARN_MAX_RANKS``       most processes one lab may start: ``world_size`` must lie in [1, this] (an integer
                              in [1, 64]); a larger lab fails at once with an error naming ``world_size``.
``DISTLEARN_LAB_SLOTS``       most lab processes running at once on the whole machine, every student together (an
                              integer in [1, 1024]). A lab takes ``world_size`` slots before it starts its
                              processes and gives them back when it ends; if too few are free it waits, printing
                              once what it waits for, up to ``DISTLEARN_LAB_WAIT`` seconds (default 900, in
                              (0, 86400]), then raises :class:`TimeoutError`.
``DISTLEARN_LAB_SLOTS_DIR``   the folder of the slot files the room shares (needed with ``DISTLEARN_LAB_SLOTS``).
``DISTLEARN_LAB_NICE``        niceness each lab process adds to itself (an integer in [0, 19]): the students'
                              kernels and JupyterLab stay responsive while labs compute.
============================  =====================================================================================

A slot is an exclusive ``fcntl.flock`` on one file ``slot-NNNN`` of that folder, held by the kernel that runs the
lab: the operating system releases it when the kernel ends for any reason (killed, crashed, restarted), so a slot is
never lost. A lab takes all its slots or none (under the folder's ``gate`` lock), so two labs never each hold half
of what they need. POSIX only (Linux, macOS); on Windows the room limit is not available and is ignored.
"""
from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from distlearn.core.validate import DistlearnValueError, check_int

__all__ = ["max_ranks", "lab_nice", "lab_slots", "check_world_size", "ENV_MAX_RANKS", "ENV_SLOTS", "ENV_SLOTS_DIR",
           "ENV_WAIT", "ENV_NICE"]

ENV_MAX_RANKS = "DISTLEARN_MAX_RANKS"
ENV_SLOTS = "DISTLEARN_LAB_SLOTS"
ENV_SLOTS_DIR = "DISTLEARN_LAB_SLOTS_DIR"
ENV_WAIT = "DISTLEARN_LAB_WAIT"
ENV_NICE = "DISTLEARN_LAB_NICE"
DEFAULT_WAIT = 900.0  # seconds / 秒
POLL = 0.5            # seconds between two tries for free slots / 两次尝试之间的秒数


def _env_int(name: str, minimum: int, maximum: int) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        value = raw  # check_int names the variable and the allowed range
    return check_int(name, value, minimum=minimum, maximum=maximum)


def max_ranks() -> int | None:
    """``DISTLEARN_MAX_RANKS`` as an int in [1, 64], or None when unset. Raises DistlearnValueError if malformed."""
    return _env_int(ENV_MAX_RANKS, 1, 64)


def lab_nice() -> int:
    """``DISTLEARN_LAB_NICE`` as an int in [0, 19] (0 when unset)."""
    return _env_int(ENV_NICE, 0, 19) or 0


def check_world_size(world_size: int) -> int:
    """``world_size`` if this machine's limits allow it (``DISTLEARN_MAX_RANKS`` and ``DISTLEARN_LAB_SLOTS``);
    else a DistlearnValueError naming ``world_size`` and the allowed range."""
    world_size = check_int("world_size", world_size, minimum=1)
    caps = [c for c in (max_ranks(), _env_int(ENV_SLOTS, 1, 1024)) if c is not None]
    if caps and world_size > min(caps):
        cap = min(caps)
        raise DistlearnValueError(
            "world_size",
            f"world_size must be an integer in [1, {cap}] on this shared machine, got {world_size}: the classroom "
            f"lets one lab start at most {cap} processes (set by the teacher, {ENV_MAX_RANKS}).",
            f"在这台共享机器上 world_size 必须是 [1, {cap}] 之间的整数，收到 {world_size}：课堂规定一个实验最多启动 "
            f"{cap} 个进程（由教师通过 {ENV_MAX_RANKS} 设置）。")
    return world_size


def _try_take(folder: Path, slots: int, n: int) -> list:
    """Exclusive locks on ``n`` of the ``slots`` slot files, or [] (none kept) when fewer are free."""
    import fcntl

    held = []
    for i in range(slots):
        f = open(folder / f"slot-{i:04d}", "a")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            continue
        held.append(f)
        if len(held) == n:
            return held
    for f in held:
        f.close()  # closing the file releases its lock
    return []


def lab_slots(n: int, log=None):
    """Hold ``n`` of the room's ``DISTLEARN_LAB_SLOTS`` lab slots while the block runs (nothing when unset or on
    Windows). Waits while fewer than ``n`` are free, printing once (``log``, default ``print``) how many the room
    allows and how long it will wait. Raises TimeoutError after ``DISTLEARN_LAB_WAIT`` seconds, DistlearnValueError
    for a malformed variable or ``n`` above the room's slots."""
    n = check_int("world_size", n, minimum=1)          # checked when called, not when entered / 调用时就检查
    return _lab_slots(n, log)


@contextlib.contextmanager
def _lab_slots(n: int, log=None):
    """The body of :func:`lab_slots` (``n`` already an int ≥ 1)."""
    slots = _env_int(ENV_SLOTS, 1, 1024)
    if slots is None or os.name != "posix":
        yield
        return
    import fcntl

    from distlearn.core.i18n import bi

    n = check_int("world_size", n, minimum=1, maximum=slots)
    folder = os.environ.get(ENV_SLOTS_DIR, "").strip()
    if not folder:
        raise DistlearnValueError(ENV_SLOTS_DIR, f"{ENV_SLOTS} is set, so {ENV_SLOTS_DIR} must name the room's "
                                  "folder of slot files (a folder every student's kernel can write).",
                                  f"已设置 {ENV_SLOTS}，所以 {ENV_SLOTS_DIR} 必须给出课堂共享的槽位文件夹"
                                  "（每位学生的内核都能写入的文件夹）。")
    wait = _wait_seconds()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    deadline, told = time.monotonic() + wait, False
    held: list = []
    while True:
        with open(folder / "gate", "a") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)  # one lab at a time takes slots: all it needs, or none
            held = _try_take(folder, slots, n)
        if held:
            break
        if time.monotonic() >= deadline:
            raise TimeoutError(bi(
                f"waited {wait:g} s for {n} free lab processes; the classroom runs at most {slots} at once and the "
                "others' labs still use them. Run the cell again later, or ask the teacher.",
                f"已等待 {wait:g} 秒，仍没有 {n} 个空闲的实验进程名额；课堂同时最多运行 {slots} 个实验进程，"
                "其他同学的实验仍在使用。请稍后重新运行这个单元格，或者询问教师。", sep="\n"))
        if not told:
            (log or _say)(bi(
                f"Waiting for {n} free lab processes: the classroom runs at most {slots} at once, and the others' "
                f"labs use them now. This lab starts by itself as soon as they end (at most {wait:g} s).",
                f"正在等待 {n} 个空闲的实验进程名额：课堂同时最多运行 {slots} 个实验进程，现在都被其他同学的实验"
                f"占用。它们一结束，这个实验就会自动开始（最多等 {wait:g} 秒）。", sep="\n"))
            told = True
        time.sleep(POLL)
    try:
        yield
    finally:
        for f in held:
            f.close()


def _say(text: str) -> None:
    print(text, flush=True)


def _wait_seconds() -> float:
    """``DISTLEARN_LAB_WAIT`` in seconds, a number in (0, 86400] (:data:`DEFAULT_WAIT` when unset)."""
    raw = os.environ.get(ENV_WAIT, "").strip()
    if not raw:
        return DEFAULT_WAIT
    try:
        value = float(raw)
    except ValueError:
        value = None
    if value is None or not (0 < value <= 86400):
        raise DistlearnValueError(ENV_WAIT, f"{ENV_WAIT} must be a number of seconds in (0, 86400], got {raw!r}.",
                                  f"{ENV_WAIT} 必须是 (0, 86400] 之间的秒数，收到 {raw!r}。")
    return value

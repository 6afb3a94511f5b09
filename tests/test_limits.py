"""The limits a classroom hub sets for every student's labs (distlearn.core.limits, obeyed by launch.run): at most
DISTLEARN_MAX_RANKS processes per lab, at most DISTLEARN_LAB_SLOTS lab processes at once on the machine (a lab waits
and says so), lab processes reniced. Unset, nothing changes (every other launcher test runs that way)."""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from distlearn.core import lab_smoke as smoke
from distlearn.core import launch, limits
from distlearn.core.validate import DistlearnValueError


@pytest.fixture
def room(tmp_path, monkeypatch):
    """A room of 3 lab slots in tmp_path; returns a function that holds n slots in a thread for some seconds."""
    monkeypatch.setenv(limits.ENV_SLOTS, "3")
    monkeypatch.setenv(limits.ENV_SLOTS_DIR, str(tmp_path))
    threads = []

    def hold(n: int, seconds: float) -> threading.Event:
        taken = threading.Event()

        def body():
            with limits.lab_slots(n):
                taken.set()
                time.sleep(seconds)

        t = threading.Thread(target=body)
        t.start()
        threads.append(t)
        assert taken.wait(10)
        return taken

    yield hold
    for t in threads:
        t.join()


def test_a_lab_above_the_cap_fails_at_once_naming_world_size(monkeypatch):
    monkeypatch.setenv(limits.ENV_MAX_RANKS, "2")
    monkeypatch.setenv("DISTLEARN_LANG", "both")
    t0 = time.monotonic()
    with pytest.raises(DistlearnValueError, match=r"world_size must be an integer in \[1, 2\]") as info:
        launch.run(smoke.all_reduce_rank, 3)
    assert info.value.param == "world_size" and "[1, 2]" in info.value.zh
    assert time.monotonic() - t0 < 5  # refused before any process started
    monkeypatch.setenv(limits.ENV_MAX_RANKS, "many")
    with pytest.raises(DistlearnValueError, match=limits.ENV_MAX_RANKS):
        limits.max_ranks()


def test_a_lab_waits_for_free_slots_and_says_so(room):
    room(2, 1.0)                      # another student's 2-process lab holds 2 of the room's 3 slots
    said = []
    t0 = time.monotonic()
    with limits.lab_slots(1, log=said.append):
        assert time.monotonic() - t0 < 0.5 and not said   # 1 slot is free: no wait
    with limits.lab_slots(2, log=said.append):
        waited = time.monotonic() - t0
    assert waited > 0.7, waited      # it started only after the other lab ended
    assert len(said) == 1 and "Waiting for 2 free lab processes" in said[0] and "at most 3" in said[0]


def test_a_lab_takes_all_its_slots_or_none(room):
    room(1, 1.5)                      # 2 free of 3
    order = []

    def big():                        # needs 3: must wait, and must not sit on the 2 free ones meanwhile
        with limits.lab_slots(3, log=lambda s: None):
            order.append("big")

    t = threading.Thread(target=big)
    t.start()
    time.sleep(0.3)
    with limits.lab_slots(2, log=lambda s: None):
        order.append("small")        # gets the 2 free slots at once
    t.join()
    assert order == ["small", "big"]


def test_waiting_ends_with_a_clear_timeout(room, monkeypatch):
    monkeypatch.setenv(limits.ENV_WAIT, "0.5")
    room(3, 1.5)
    with pytest.raises(TimeoutError, match="free lab processes"):
        with limits.lab_slots(1, log=lambda s: None):
            pass
    monkeypatch.setenv(limits.ENV_WAIT, "-1")
    with pytest.raises(DistlearnValueError, match=r"\(0, 86400\]"):
        limits._wait_seconds()


def test_a_killed_kernel_gives_its_slots_back(tmp_path, monkeypatch):
    monkeypatch.setenv(limits.ENV_SLOTS, "2")
    monkeypatch.setenv(limits.ENV_SLOTS_DIR, str(tmp_path))
    monkeypatch.setenv(limits.ENV_WAIT, "5")
    holder = subprocess.Popen([sys.executable, "-c", "from distlearn.core import limits\nimport time\n"
                               "with limits.lab_slots(2):\n    print('held', flush=True)\n    time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
        t0 = time.monotonic()
        with limits.lab_slots(2, log=lambda s: None):
            assert time.monotonic() - t0 < 2
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(5)


def test_lab_processes_are_reniced_and_hold_their_slots(room, monkeypatch):
    monkeypatch.setenv(limits.ENV_NICE, "7")
    base = os.nice(0)
    assert launch.run(smoke.niceness, 2) == [min(base + 7, 19)] * 2
    monkeypatch.setenv(limits.ENV_NICE, "30")
    with pytest.raises(DistlearnValueError, match=r"\[0, 19\]"):
        launch.run(smoke.niceness, 2)

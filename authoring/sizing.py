"""How many students a classroom server holds: measure every chapter's memory and CPU, and write the sizing table of
docs/teaching.md from the measurements.

``python -m authoring.sizing measure [CHAPTER ...]`` runs each chapter notebook (``notebooks/NN_*.ipynb``, 00-14)
top to bottom with nbclient, in a temporary copy (cwd = a temporary folder; the tracked notebooks are never
written), while a thread samples the kernel's whole process tree every ``--interval`` seconds (0.2 s): the kernel
and every descendant (the forkserver, the lab ranks, check workers). It writes the raw measurements to
``docs/sizing.json``: the date, the machine (CPU model, cores, load average before and after, memory), the torch,
Python and DeepSpeed versions, a JupyterLab server's own memory, and per chapter and cell

- ``peak_pss_bytes``: the highest total PSS of the tree in one sample (proportional set size: a page shared by k
  processes counts 1/k in each, so the sum over the tree is the memory the tree really takes; bytes);
- ``peak_procs`` / ``peak_busy`` / ``peak_running``: the most processes in the tree, the most of them busy (above
  50 % of one core over a sample interval) and the most of them in state R at a sample (running or waiting for a
  core: on a loaded machine a process that wants a whole core may get less than half of one, so ``peak_running``
  is the count that does not depend on the load);
- ``cpu_s``: CPU-seconds (user + system) the tree spent in the cell, children that ended included (the kernel and
  the forkserver reap their children, so their time moves into the parent's children times, which are counted);
- ``wall_s``: the cell's wall time.

``python -m authoring.sizing render`` rewrites the table between the ``sizing`` markers of docs/teaching.md from
``docs/sizing.json`` (no notebook runs); tests/test_sizing.py checks that the stored table is what this renders.

Units: bytes in the JSON; the table shows MiB (2**20 bytes); the server's memory is in GB (1e9 bytes), as sold.
Wall time depends on how busy the machine was (the load average is stored); CPU-seconds and PSS hardly do, so the
capacity (:func:`capacity`) uses only those. Linux only (PSS is read from ``/proc/<pid>/smaps_rollup`` by psutil).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat

from authoring.paths import ROOT

MIB = 2**20
GB = 10**9
JSON_PATH = ROOT / "docs" / "sizing.json"
GUIDE = ROOT / "docs" / "teaching.md"
BEGIN_MARK, END_MARK = "<!-- sizing-table:begin -->", "<!-- sizing-table:end -->"
BUSY = 0.5  # a process is busy when it used more than half a core over a sample interval


# --- sampling a process tree --------------------------------------------------------------------------------------

def _tree(root_pid: int):
    """The process ``root_pid`` and all its descendants (psutil.Process objects); [] if it has ended."""
    import psutil

    try:
        root = psutil.Process(root_pid)
        return [root] + root.children(recursive=True)
    except psutil.Error:
        return []


def tree_snapshot(root_pid: int) -> dict:
    """One look at the tree under ``root_pid``: ``{"t": monotonic s, "pss": total PSS bytes, "cpu": total
    CPU-seconds, "procs": {pid: (own CPU-s, create_time)}, "running": how many are running or waiting for a core
    (state R)}``. ``cpu`` sums, over the living processes, their own user
    + system time and their reaped children's: a child that ended and was waited for is still counted, in its
    parent. A process that ends between two looks loses at most one interval of its time to this sum only if its
    parent never waits for it."""
    import psutil

    pss = cpu = running = 0
    procs = {}
    for p in _tree(root_pid):
        try:
            with p.oneshot():
                t = p.cpu_times()
                own = t.user + t.system
                cpu += own + t.children_user + t.children_system
                procs[p.pid] = (own, p.create_time())
                running += p.status() == psutil.STATUS_RUNNING
                pss += p.memory_full_info().pss
        except psutil.Error:  # ended while we looked
            continue
    return {"t": time.monotonic(), "pss": pss, "cpu": cpu, "procs": procs, "running": running}


def busy_count(before: dict, after: dict, threshold: float = BUSY) -> int:
    """How many processes of ``after`` used more than ``threshold`` of a core since ``before`` (two
    :func:`tree_snapshot` results; a process new in ``after`` is measured since it started)."""
    n = 0
    dt = after["t"] - before["t"]
    for pid, (own, created) in after["procs"].items():
        prev = before["procs"].get(pid)
        if prev is not None and prev[1] == created:
            used, span = own - prev[0], dt
        else:
            used, span = own, max(time.time() - created, 1e-3)
        if span > 0 and used / span > threshold:
            n += 1
    return n


class Sampler(threading.Thread):
    """Samples the tree under ``root_pid`` every ``interval`` seconds and keeps, for the cell set by
    :meth:`begin`, the peak PSS, the peak process count and the peak number of busy processes."""

    def __init__(self, root_pid: int, interval: float = 0.2):
        super().__init__(daemon=True)
        self.root_pid, self.interval = root_pid, interval
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.last = tree_snapshot(root_pid)
        self.peaks = None
        self.samples = 0

    def begin(self) -> dict:
        snap = tree_snapshot(self.root_pid)
        with self.lock:
            self.peaks = {"pss": snap["pss"], "procs": len(snap["procs"]), "busy": 0, "running": 0}
            self.last = snap
        return snap

    def end(self) -> tuple[dict, dict]:
        snap = tree_snapshot(self.root_pid)
        with self.lock:
            self._add(snap)
            peaks, self.peaks = self.peaks, None
        return snap, peaks

    def _add(self, snap: dict) -> None:
        if self.peaks is not None:
            self.peaks["pss"] = max(self.peaks["pss"], snap["pss"])
            self.peaks["procs"] = max(self.peaks["procs"], len(snap["procs"]))
            self.peaks["busy"] = max(self.peaks["busy"], busy_count(self.last, snap))
            self.peaks["running"] = max(self.peaks["running"], snap["running"])
        self.last = snap
        self.samples += 1

    def run(self) -> None:
        while not self.stop_event.wait(self.interval):
            snap = tree_snapshot(self.root_pid)
            with self.lock:
                self._add(snap)

    def stop(self) -> None:
        self.stop_event.set()
        self.join()


# --- measuring a chapter -------------------------------------------------------------------------------------------

def first_line(source: str) -> str:
    """The first non-empty line of a cell's source, stripped."""
    return next((line.strip() for line in source.splitlines() if line.strip()), "")


def measure_notebook(path: Path, interval: float = 0.2, timeout: int = 900, settle: float = 1.0) -> dict:
    """Run the notebook ``path`` in a fresh kernel, in a temporary folder, sampling its process tree; return the
    chapter's record (see the module doc). ``baseline_pss_bytes``: the tree's PSS ``settle`` s after the first code
    cell (``import distlearn``: the kernel idle after import); ``end_pss_bytes``: the same after the last cell (what an
    idle kernel keeps once the chapter has run); ``peak_pss_bytes``: the chapter's highest sample. A kernel keeps
    most of what earlier cells allocated, so the heaviest cell by memory (``heaviest_by_pss``, an index into the
    notebook's cells) is the one whose peak rose most above the PSS at its start; by CPU (``heaviest_by_cpu``), the
    one with the most CPU-seconds. Raises nbclient's CellExecutionError if a cell fails."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    env = {k: v for k, v in os.environ.items() if k != "DISTLEARN_LANG"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    cells = []
    with tempfile.TemporaryDirectory(prefix="distlearn-sizing-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": tmp}})
        t_start = time.monotonic()
        with client.setup_kernel(env=env, cwd=tmp):
            pid = client.km.provisioner.process.pid
            sampler = Sampler(pid, interval)
            sampler.start()
            baseline = None
            try:
                for index, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    start = sampler.begin()
                    client.execute_cell(cell, index)
                    end, peaks = sampler.end()
                    cells.append({"index": index, "first_line": first_line(cell.source),
                                  "wall_s": round(end["t"] - start["t"], 3),
                                  "cpu_s": round(max(end["cpu"] - start["cpu"], 0.0), 3),
                                  "start_pss_bytes": start["pss"], "peak_pss_bytes": peaks["pss"],
                                  "peak_procs": peaks["procs"],
                                  "peak_busy": peaks["busy"], "peak_running": peaks["running"]})
                    if baseline is None:
                        time.sleep(settle)
                        baseline = tree_snapshot(pid)["pss"]
                time.sleep(settle)
                end_pss = tree_snapshot(pid)["pss"]
            finally:
                sampler.stop()
        wall = time.monotonic() - t_start
    by_pss = max(cells, key=lambda c: c["peak_pss_bytes"] - c["start_pss_bytes"])
    by_cpu = max(cells, key=lambda c: c["cpu_s"])
    return {"name": path.stem, "cells": cells, "baseline_pss_bytes": baseline, "end_pss_bytes": end_pss,
            "peak_pss_bytes": max(c["peak_pss_bytes"] for c in cells),
            "total_cpu_s": round(sum(c["cpu_s"] for c in cells), 3), "wall_s": round(wall, 1),
            "heaviest_by_pss": by_pss["index"], "heaviest_by_cpu": by_cpu["index"], "samples": sampler.samples}


def measure_server(timeout: float = 60.0, settle: float = 3.0) -> dict:
    """A JupyterLab server's own memory, without kernels: start ``jupyter lab`` on a free port in a temporary folder,
    load its page and its contents API once, wait ``settle`` s and read the PSS of its process tree (bytes). A
    single-user server of JupyterHub is this same process, so one student costs this plus their kernels."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory(prefix="distlearn-sizing-lab-") as tmp:
        env = dict(os.environ, JUPYTER_RUNTIME_DIR=tmp, JUPYTER_CONFIG_DIR=str(Path(tmp) / "config"))
        log = open(Path(tmp) / "lab.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
                                 "--ip=127.0.0.1", "--IdentityProvider.token=sizing", f"--ServerApp.root_dir={tmp}", "--allow-root"],
                                cwd=tmp, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    for url in ("api/status", "lab", "api/contents"):
                        urllib.request.urlopen(f"http://127.0.0.1:{port}/{url}?token=sizing", timeout=5).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        tail = (Path(tmp) / "lab.log").read_text(errors="replace")[-2000:]
                        raise RuntimeError(f"JupyterLab did not start / JupyterLab 未能启动:\n{tail}")
                    time.sleep(0.5)
            time.sleep(settle)
            snap = tree_snapshot(proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
    return {"pss_bytes": snap["pss"], "procs": len(snap["procs"])}


def machine() -> dict:
    """The machine the measurements ran on: CPU model, cores, memory (bytes), load average now."""
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import psutil

    return {"cpu_model": model, "cores": os.cpu_count(), "memory_bytes": psutil.virtual_memory().total,
            "load_average": [round(x, 2) for x in os.getloadavg()], "system": platform.platform()}


def versions() -> dict:
    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        from importlib.metadata import version

        out["deepspeed"] = version("deepspeed")
    except Exception:  # noqa: BLE001 - DeepSpeed is optional
        out["deepspeed"] = None
    return out


def chapter_notebooks(names: list[str] | None = None, root: Path = ROOT) -> list[Path]:
    """``notebooks/NN_*.ipynb`` (all, or those whose stem or number is in ``names``)."""
    paths = sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if names:
        paths = [p for p in paths if p.stem in names or p.stem[:2] in names]
    return paths


def measure(names: list[str] | None = None, interval: float = 0.2, out: Path = JSON_PATH, log=print) -> dict:
    """Measure the server and every chapter (or ``names``) and write the JSON to ``out`` after each chapter (a run
    stopped half-way keeps what it measured; chapters already in ``out`` and not measured again are kept)."""
    data = {"date": datetime.date.today().isoformat(), "interval_s": interval, "machine": machine(),
            "versions": versions(), "chapters": []}
    old = json.loads(out.read_text(encoding="utf-8")) if out.exists() and names else None
    data["server"] = measure_server()
    log(f"JupyterLab server: {data['server']['pss_bytes'] / MIB:.0f} MiB PSS")
    measured = {}
    for path in chapter_notebooks(names):
        rec = measure_notebook(path, interval)
        measured[rec["name"]] = rec
        keep = [c for c in (old or {}).get("chapters", []) if c["name"] not in measured]
        data["chapters"] = sorted(keep + list(measured.values()), key=lambda c: c["name"])
        data["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        log(f"{rec['name']}: peak {rec['peak_pss_bytes'] / MIB:.0f} MiB, {rec['total_cpu_s']:.1f} CPU-s, "
            f"{rec['wall_s']:.0f} s wall, load {os.getloadavg()[0]:.1f}")
    return data


# --- capacity ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Server:
    """The classroom server and the planning targets (see docs/teaching.md, "How many students a server holds").

    ``memory_bytes``: the server's memory (64 GB = 64e9 bytes); ``reserve_bytes``: what the OS, JupyterHub and its
    proxy and the page cache keep (bytes); ``cores``; ``utilisation``: the share of the cores the class may use on
    average (the rest absorbs bursts); ``reruns``: how many times a student runs each cell on average (reruns,
    explorers); ``burst_wait_s``: how long, at most, the last student may wait when the whole class presses Run on
    the chapter's most CPU-hungry cell in the same minute."""
    memory_bytes: float = 64 * GB
    reserve_bytes: float = 4 * GB
    cores: int = 16
    utilisation: float = 0.7
    reruns: float = 2.0
    burst_wait_s: float = 120.0


def capacity(peak_bytes: float, standing_bytes: float, server_bytes: float, chapter_cpu_s: float,
             heaviest_cpu_s: float, class_min: float, srv: Server = Server()) -> dict:
    """How many students ``srv`` holds for one chapter, by three limits (each an integer, floor):

    - ``memory``: every student's heaviest cell at the same moment must fit:
      ``N * (server_bytes + max(peak_bytes, standing_bytes)) <= memory_bytes - reserve_bytes``
      (memory is planned for the worst case: running out kills kernels);
    - ``cpu``: the chapter's CPU work, ``reruns`` times, spread over its class time ``class_min`` minutes, stays
      under ``utilisation`` of the cores: ``N * reruns * chapter_cpu_s <= utilisation * cores * 60 * class_min``;
    - ``burst``: the class presses Run on the most CPU-hungry cell in the same minute and the last result arrives
      within ``burst_wait_s``: ``N * heaviest_cpu_s <= cores * burst_wait_s``.

    ``peak_bytes``, ``standing_bytes`` (the idle kernel after the chapter), ``server_bytes`` (a JupyterLab server):
    bytes; CPU in CPU-seconds. Returns ``{"memory", "cpu", "burst", "students", "limit"}``: ``students`` the
    smallest of the three, ``limit`` which one it is. Raises ValueError on a non-positive input."""
    for name, value in (("peak_bytes", peak_bytes), ("standing_bytes", standing_bytes),
                        ("server_bytes", server_bytes), ("chapter_cpu_s", chapter_cpu_s),
                        ("heaviest_cpu_s", heaviest_cpu_s), ("class_min", class_min)):
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value!r} / {name} 必须大于 0，收到 {value!r}")
    limits = {
        "memory": math.floor((srv.memory_bytes - srv.reserve_bytes) / (server_bytes + max(peak_bytes, standing_bytes))),
        "cpu": math.floor(srv.utilisation * srv.cores * 60 * class_min / (srv.reruns * chapter_cpu_s)),
        "burst": math.floor(srv.cores * srv.burst_wait_s / heaviest_cpu_s),
    }
    limit = min(limits, key=limits.get)
    return {**limits, "students": limits[limit], "limit": limit}


def class_minutes(guide: str) -> dict[str, float]:
    """Each chapter's class time in minutes, read from the chapters table of docs/teaching.md: ``{"01": 75, ...}``."""
    out = {}
    for m in re.finditer(r"^\| (\d\d) \| [^|]+\| (\d+) min \|", guide, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


# --- the table -----------------------------------------------------------------------------------------------------

LIMIT_NAMES = {"memory": ("memory", "内存"), "cpu": ("CPU, average", "CPU 平均"),
               "burst": ("CPU, all at once", "CPU 同时运行")}


def _cell_label(rec: dict, index: int, width: int = 44) -> str:
    cell = next(c for c in rec["cells"] if c["index"] == index)
    line = cell["first_line"].replace("|", "\\|").replace("`", "'")
    if len(line) > width:
        line = line[: width - 1] + "…"
    return f"`{line}`"


def rows(data: dict, guide: str, srv: Server = Server()) -> list[dict]:
    """One row per measured chapter: the heaviest cell (by peak PSS, and by CPU-s when another), its numbers, the
    capacity (:func:`capacity`) and what limits it."""
    minutes = class_minutes(guide)
    server_bytes = data["server"]["pss_bytes"]
    out = []
    for rec in data["chapters"]:
        number = rec["name"][:2]
        by_pss = next(c for c in rec["cells"] if c["index"] == rec["heaviest_by_pss"])
        by_cpu = next(c for c in rec["cells"] if c["index"] == rec["heaviest_by_cpu"])
        cap = capacity(rec["peak_pss_bytes"], rec["end_pss_bytes"], server_bytes, rec["total_cpu_s"],
                       by_cpu["cpu_s"], minutes[number], srv)
        out.append({"number": number, "rec": rec, "by_pss": by_pss, "by_cpu": by_cpu, "cap": cap})
    return out


def render_table(data: dict, guide: str, srv: Server = Server()) -> str:
    """The bilingual sizing table of docs/teaching.md (Markdown, no trailing newline). Its rows start with the
    chapter's name (``| 12_nd_parallel |``), not its number, so that they are not taken for the chapters table."""
    lines = ["| Chapter / 章节 | Heaviest cell (memory; CPU) / 最重的单元格（内存；CPU） "
             "| Idle kernel after it, MiB / 运行后空闲内核 MiB | Peak MiB / 峰值 MiB "
             "| Processes (running at once) / 进程数（同时运行） | CPU-s, heaviest cell / 最重单元格 CPU 秒 "
             "| CPU-s, chapter / 整章 CPU 秒 | Students / 学生数 | Limited by / 限制因素 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows(data, guide, srv):
        rec = r["rec"]
        cell = _cell_label(rec, r["by_pss"]["index"])
        if r["by_cpu"]["index"] != r["by_pss"]["index"]:
            cell += "; " + _cell_label(rec, r["by_cpu"]["index"])
        en, zh = LIMIT_NAMES[r["cap"]["limit"]]
        procs = max(c["peak_procs"] for c in rec["cells"])
        running = max(c["peak_running"] for c in rec["cells"])
        lines.append(f"| {rec['name']} | {cell} | {rec['end_pss_bytes'] / MIB:.0f} "
                     f"| {rec['peak_pss_bytes'] / MIB:.0f} | {procs} ({running}) "
                     f"| {r['by_cpu']['cpu_s']:.1f} | {rec['total_cpu_s']:.1f} | {r['cap']['students']} "
                     f"| {en} / {zh} |")
    return "\n".join(lines)


def render_guide(guide: str, data: dict, srv: Server = Server()) -> str:
    """``guide`` with the table between the sizing markers replaced by :func:`render_table`. Raises ValueError if
    the markers are missing."""
    if BEGIN_MARK not in guide or END_MARK not in guide:
        raise ValueError(f"docs/teaching.md has no {BEGIN_MARK} … {END_MARK} / docs/teaching.md 缺少表格标记")
    head, rest = guide.split(BEGIN_MARK, 1)
    _, tail = rest.split(END_MARK, 1)
    return f"{head}{BEGIN_MARK}\n{render_table(data, guide, srv)}\n{END_MARK}{tail}"


def stored_table(guide: str) -> str:
    """The table stored between the sizing markers of ``guide``."""
    return guide.split(BEGIN_MARK, 1)[1].split(END_MARK, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m authoring.sizing", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="run the chapters and write docs/sizing.json")
    m.add_argument("chapters", nargs="*", help="e.g. 12 or 12_nd_parallel; none: all")
    m.add_argument("--interval", type=float, default=0.2, help="seconds between samples (0.2)")
    sub.add_parser("render", help="rewrite the table in docs/teaching.md from docs/sizing.json")
    args = parser.parse_args(argv)
    if args.command == "measure":
        measure(args.chapters or None, args.interval, log=lambda s: print(s, flush=True))
        return 0
    data = json.loads(JSON_PATH.read_text(encoding="utf-8"))
    GUIDE.write_text(render_guide(GUIDE.read_text(encoding="utf-8"), data), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Sizing a classroom server (issue 35): the table in docs/teaching.md is what authoring/sizing.py renders from the
measurements in docs/sizing.json, the capacity model gives what a hand computation gives, and the sampler measures
what a process tree really uses. Fast: no notebook runs (``python -m authoring.sizing measure`` does that)."""
import json
import math
import os
import re
import subprocess
import sys
import time

import pytest

from authoring import sizing
from authoring.paths import ROOT

GUIDE = ROOT / "docs" / "teaching.md"
DATA = ROOT / "docs" / "sizing.json"


def _data():
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_the_table_in_the_guide_is_the_one_rendered_from_the_measurements():
    guide = GUIDE.read_text(encoding="utf-8")
    assert sizing.stored_table(guide) == sizing.render_table(_data(), guide), \
        "run `python -m authoring.sizing render`"
    assert sizing.render_guide(guide, _data()) == guide
    # both languages: the section's heading, the headers and every "limited by" cell carry English and Chinese
    assert "## How many students a server holds / 一台服务器能容纳多少学生" in guide
    header = sizing.stored_table(guide).splitlines()[0]
    for en, zh in (("Heaviest cell", "最重的单元格"), ("Peak MiB", "峰值 MiB"), ("Students", "学生数")):
        assert en in header and zh in header


def test_every_chapter_is_measured_and_the_record_is_consistent():
    data = _data()
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [c["name"] for c in data["chapters"]] == chapters
    assert data["machine"]["cores"] >= 1 and data["machine"]["cpu_model"] and data["versions"]["torch"]
    assert len(data["machine"]["load_average"]) == 3 and data["server"]["pss_bytes"] > 10 * sizing.MIB
    for rec in data["chapters"]:
        cells = rec["cells"]
        assert cells and all(c["peak_pss_bytes"] >= c["start_pss_bytes"] > 0 for c in cells), rec["name"]
        assert rec["total_cpu_s"] == pytest.approx(sum(c["cpu_s"] for c in cells), abs=0.01)
        assert rec["peak_pss_bytes"] == max(c["peak_pss_bytes"] for c in cells)
        rise = {c["index"]: c["peak_pss_bytes"] - c["start_pss_bytes"] for c in cells}
        assert rise[rec["heaviest_by_pss"]] == max(rise.values())
        assert max(c["cpu_s"] for c in cells) == next(c["cpu_s"] for c in cells if c["index"] == rec["heaviest_by_cpu"])
        assert 0 < rec["baseline_pss_bytes"] <= rec["peak_pss_bytes"]
        assert all(c["peak_busy"] <= c["peak_procs"] and c["peak_running"] <= c["peak_procs"] for c in cells)


def test_the_known_chapter_12_lab_shows_its_eight_ranks():
    """Issue 35 measured the 8-process lab of chapter 12 at 825 MiB PSS across 11 processes: the sampler must see
    the ranks (a kernel-only measurement would show one process and a few hundred MiB)."""
    rec = next(c for c in _data()["chapters"] if c["name"].startswith("12_"))
    assert max(c["peak_procs"] for c in rec["cells"]) >= 9  # kernel + forkserver + 8 ranks at least
    assert rec["peak_pss_bytes"] > 500 * sizing.MIB


def test_capacity_against_a_hand_computation():
    srv = sizing.Server(memory_bytes=10e9, reserve_bytes=2e9, cores=4, utilisation=0.5, reruns=2.0, burst_wait_s=60)
    got = sizing.capacity(peak_bytes=0.9e9, standing_bytes=0.5e9, server_bytes=0.1e9, chapter_cpu_s=30,
                          heaviest_cpu_s=40, class_min=10, srv=srv)
    # memory: (10 - 2) GB / (0.1 + 0.9) GB = 8; cpu: 0.5 * 4 cores * 600 s / (2 * 30 CPU-s) = 20;
    # burst: 4 cores * 60 s / 40 CPU-s = 6 -> 6 students, limited by the burst
    assert got == {"memory": 8, "cpu": 20, "burst": 6, "students": 6, "limit": "burst"}
    # an idle kernel bigger than the peak counts as the peak; 8 GB / 1.7 GB = 4.7 -> 4, limited by memory
    got = sizing.capacity(peak_bytes=0.9e9, standing_bytes=1.6e9, server_bytes=0.1e9, chapter_cpu_s=30,
                          heaviest_cpu_s=4, class_min=10, srv=srv)
    assert (got["memory"], got["burst"], got["students"], got["limit"]) == (4, 60, 4, "memory")
    # the defaults: 64 GB, 4 GB kept, 16 cores at 70 %, two runs per cell, 2 minutes for everyone at once
    got = sizing.capacity(peak_bytes=2**30, standing_bytes=2**29, server_bytes=2**27, chapter_cpu_s=100,
                          heaviest_cpu_s=40, class_min=60)
    assert got["memory"] == math.floor(60e9 / (2**30 + 2**27))                 # 49
    assert got["cpu"] == math.floor(0.7 * 16 * 3600 / 200) and got["burst"] == 48  # 201, 16 * 120 / 40
    assert (got["students"], got["limit"]) == (48, "burst")
    with pytest.raises(ValueError, match="heaviest_cpu_s"):
        sizing.capacity(1e9, 1e9, 1e8, 10, 0, 60)


def test_class_minutes_come_from_the_chapters_table():
    minutes = sizing.class_minutes(GUIDE.read_text(encoding="utf-8"))
    assert sorted(minutes) == [f"{n:02d}" for n in range(16)]
    assert minutes["00"] == 20 and minutes["06"] == 90


def test_busy_count_on_made_up_snapshots():
    now = time.time()
    before = {"t": 10.0, "procs": {1: (5.0, 100.0), 2: (1.0, 100.0), 3: (2.0, 100.0)}}
    after = {"t": 10.2, "procs": {1: (5.15, 100.0),       # 0.15 CPU-s in 0.2 s: 75 % of a core -> busy
                                   2: (1.05, 100.0),       # 25 % -> not busy
                                   3: (0.05, now - 1.0),   # pid 3 reused: 0.05 CPU-s in its 1 s of life -> not busy
                                   4: (0.9, now - 1.0)}}   # new: 0.9 CPU-s in its 1 s of life -> busy
    assert sizing.busy_count(before, after) == 2
    assert sizing.busy_count(before, after, threshold=0.2) == 3


def test_the_sampler_sees_a_childs_memory_and_the_cpu_of_a_child_that_ended():
    """The tree's PSS includes a child holding 200 MiB; the CPU of a busy child that ended and was waited for is
    still counted (in its parent's children times)."""
    hold = subprocess.Popen([sys.executable, "-c", "import sys, time; b = bytearray(200 * 2**20); "
                             "b[::4096] = b'x' * len(b[::4096]); print('ok', flush=True); time.sleep(30)"],
                            stdout=subprocess.PIPE)
    try:
        assert hold.stdout.readline().strip() == b"ok"
        snap = sizing.tree_snapshot(hold.pid)
        assert 190 * sizing.MIB < snap["pss"] < 260 * sizing.MIB and len(snap["procs"]) == 1
    finally:
        hold.kill()
        hold.wait()
    before = sizing.tree_snapshot(os.getpid())
    subprocess.run([sys.executable, "-c", "import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.6: pass"], check=True)
    after = sizing.tree_snapshot(os.getpid())
    assert after["cpu"] - before["cpu"] >= 0.6


def _section():
    guide = GUIDE.read_text(encoding="utf-8")
    start = guide.index("## How many students a server holds")
    return guide[start:guide.index("\n## ", start + 1)]


def test_the_numbers_in_the_prose_are_the_measured_ones_in_both_languages():
    """Each number the section's English and Chinese text states, computed again from docs/sizing.json and the
    model's parameters (authoring.sizing.Server)."""
    data, text, srv = _data(), _section(), sizing.Server()
    mib = sizing.MIB
    machine, chapters = data["machine"], {c["name"][:2]: c for c in data["chapters"]}
    server = data["server"]["pss_bytes"]

    flat_en, flat_zh = re.sub(r"\s+", " ", text), re.sub(r"\s+", "", text)  # the lines are wrapped

    def both(en, zh):
        assert en in flat_en, en
        assert re.sub(r"\s+", "", zh) in flat_zh, zh

    both(f"{machine['cpu_model']} with {machine['cores']} cores", f"{machine['cpu_model']}，{machine['cores']} 个核")
    both(f"load average of {machine['load_average'][0]:.1f} when the run began and "
         f"{machine['load_average_end'][0]:.1f} when it ended",
         f"开始时负载均值为 {machine['load_average'][0]:.1f}，结束时为 {machine['load_average_end'][0]:.1f}")
    both(f"JupyterLab server ({server / mib:.0f} MiB measured)", f"JupyterLab 服务器（实测 {server / mib:.0f} MiB）")
    base = [c["baseline_pss_bytes"] / mib for c in data["chapters"]]
    both(f"takes {min(base):.0f}–{max(base):.0f} MiB", f"占 {min(base):.0f}–{max(base):.0f} MiB")
    end = [c["end_pss_bytes"] / mib for c in data["chapters"]]
    both(f"between {min(end):.0f} and {max(end):.0f} MiB", f"{min(end):.0f} 到 {max(end):.0f} MiB")
    # the model's parameters, as the prose states them
    assert (srv.memory_bytes, srv.reserve_bytes, srv.cores) == (64e9, 4e9, 16)
    assert (srv.utilisation, srv.reruns, srv.burst_wait_s) == (0.7, 2.0, 120.0)
    both("less 4 GB for the OS", "减去留给操作系统、JupyterHub 和文件缓存的 4 GB")
    both("under 70 % of the 16 cores", "低于 16 个核的 70%")
    both("runs the chapter about twice", "把整章运行两遍")
    both("within 2 minutes: students × CPU-seconds of the heaviest cell ≤ 16 cores × 120 s",
         "2 分钟内出来：学生数 × 最重单元格的 CPU 秒数 ≤ 16 个核 × 120 秒")
    # the two smallest classes, and that every chapter is limited by memory and holds a class of 40
    rows = sizing.rows(data, GUIDE.read_text(encoding="utf-8"))
    assert all(r["cap"]["limit"] == "memory" and r["cap"]["students"] >= 40 for r in rows)
    low = sorted(rows, key=lambda r: r["cap"]["students"])[:2]
    a, b = sorted(low, key=lambda r: r["number"])
    both(f"chapters are {a['number']} (DeepSpeed) and {b['number']} (failures and checkpoints), at "
         f"{a['cap']['students']} and {b['cap']['students']} students",
         f"第 {a['number']} 章（DeepSpeed）和第 {b['number']} 章（故障与检查点），分别能容纳 {a['cap']['students']} 和 "
         f"{b['cap']['students']} 位学生")
    # chapter 12's lab: its peak, processes, CPU-seconds, and 40 students at once on 16 cores
    ch12 = chapters["12"]
    lab = next(c for c in ch12["cells"] if c["index"] == ch12["heaviest_by_pss"])
    assert lab["index"] == ch12["heaviest_by_cpu"] and lab["peak_pss_bytes"] == ch12["peak_pss_bytes"]
    both(f"peaks at {lab['peak_pss_bytes'] / mib:.0f} MiB across {lab['peak_procs']} processes, "
         f"{lab['peak_running']} of them running, and uses {lab['cpu_s']:.1f} CPU-seconds",
         f"峰值是 {lab['peak_pss_bytes'] / mib:.0f} MiB，共 {lab['peak_procs']} 个进程，其中 {lab['peak_running']} 个同时运行，"
         f"一共用 {lab['cpu_s']:.1f} CPU 秒")
    both(f"about {40 * lab['cpu_s'] / srv.cores:.0f} s of all 16 cores", f"全部忙上约 {40 * lab['cpu_s'] / srv.cores:.0f} 秒")
    both(f"putting {40 * lab['peak_running']} ranks on 16 cores", f"让 {40 * lab['peak_running']} 个 rank 挤在 16 个核上")
    # Kubernetes: guarantee = server + largest idle kernel; limit >= server + highest peak (which chapter)
    top = max(data["chapters"], key=lambda c: c["peak_pss_bytes"])
    guarantee = round((server + max(c["end_pss_bytes"] for c in data["chapters"])) / mib)
    limit = math.ceil((server + top["peak_pss_bytes"]) / mib)
    both(f"memory guarantee of {guarantee} MiB", f"内存保证值取 {guarantee} MiB")
    both(f"at least {limit} MiB (the highest peak, chapter {top['name'][:2]}", f"至少取 {limit} MiB（最高峰值，即第 {top['name'][:2]} 章")

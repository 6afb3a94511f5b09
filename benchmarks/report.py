"""Turn pytest-benchmark's JSON into the table of ``benchmarks/README.md`` (``make bench`` runs it after pytest).

    python -m benchmarks.report benchmarks/.last-run.json   # writes benchmarks/results.json and README.md

Each row: what was measured, its goal, the measured value (median; CPU or wall-clock time, see
``benchmarks/conftest.py``), pass / FAIL, and the machine. A benchmark not run this time (``make test`` is timed
only with ``--with-make-test``; ``-k`` selects some) keeps its previous row from ``results.json``, with its date.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def machine(info: dict) -> str:
    """A short description of the machine from pytest-benchmark's ``machine_info``."""
    cpu = info.get("cpu", {}) or {}
    brand = cpu.get("brand_raw") or info.get("processor") or info.get("machine") or "?"
    cores = info.get("logical_cores") or cpu.get("count") or "?"
    return f"{brand}, {cores} cores"


def fmt(seconds) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


def measured(bench: dict) -> float | None:
    extra = bench.get("extra_info", {})
    if extra.get("measured_s") is not None:
        return extra["measured_s"]
    return (bench.get("stats") or {}).get("median")


def status(bench: dict) -> str:
    goal, value = bench.get("extra_info", {}).get("goal_s"), measured(bench)
    if bench.get("has_error"):
        return "error"
    if value is None:
        return "not measured"
    if goal is None:
        return "—"
    return "pass" if value < goal else "FAIL"


def row(bench: dict) -> str:
    extra = bench.get("extra_info", {})
    goal = extra.get("goal_s")
    value = fmt(measured(bench))
    timer = extra.get("timer")
    if timer == "cpu":
        value += " CPU" + (f" (wall {fmt(extra['wall_s'])})" if extra.get("wall_s") is not None else "")
    elif timer == "wall":
        value += " wall"
    if extra.get("kept_from"):
        value += f", measured {extra['kept_from']}"
    what = extra.get("what") or bench.get("name", "?")
    if extra.get("slowest_setting"):
        what += f"; slowest: {', '.join(f'{k}={v}' for k, v in extra['slowest_setting'].items())}"
    return (f"| {what} | {'< ' + fmt(goal) if goal is not None else '—'} | {value} | {status(bench)} | "
            f"{extra.get('machine', '?')} |")


def render(data: dict) -> str:
    """The README: how to run, then one table row per benchmark."""
    info = data.get("machine_info", {})
    lines = [
        "# Benchmarks / 性能基准",
        "",
        "Speed goals of the course, measured with [pytest-benchmark](https://pytest-benchmark.readthedocs.io) by",
        "`make bench`, which asserts every goal (a goal missed fails `make bench`) and then rewrites this file from",
        "pytest-benchmark's JSON (`benchmarks/results.json`). `make test` runs no benchmark. Options go in",
        "`BENCH_ARGS`: `make bench BENCH_ARGS=--with-make-test` also times the whole `make test`;",
        "`BENCH_ARGS=--full-grid` times the planner explorer at every slider setting instead of every 15th.",
        "",
        "课程的速度目标由 `make bench` 用 pytest-benchmark 测量：每个目标都在基准测试中断言（未达目标则 `make bench`",
        "失败），随后根据 pytest-benchmark 的 JSON（`benchmarks/results.json`）重写本文件。`make test` 不运行任何基准测试。",
        "选项放在 `BENCH_ARGS` 中：`--with-make-test` 同时测量整个 `make test`；`--full-grid` 测量规划器探索器的全部",
        "滑块组合，而不是每隔 15 种取一种。",
        "",
        f"- Date / 日期: {data.get('datetime', '?')}",
        f"- Machine / 机器: {machine(info)}; {info.get('system', '?')} {info.get('release', '')}; "
        f"Python {info.get('python_version', '?')}; torch {info.get('torch', '?')}",
        "",
        "| what / 测量内容 | goal / 目标 | measured / 实测 | result / 结果 | machine / 机器 |",
        "|---|---|---|---|---|",
    ]
    lines += [row(b) for b in data.get("benchmarks", [])]
    lines += [
        "",
        "Measured values are medians over pytest-benchmark's rounds (a sweep reports its slowest setting). \"CPU\" is",
        "the process's CPU time, the goal for in-process computation: on this shared machine the wall-clock time",
        "(shown beside it) also counts the waits for a core. Processes are timed by the wall clock.",
        "实测值为 pytest-benchmark 各轮的中位数（扫描类基准报告其中最慢的设置）。“CPU” 指进程的 CPU 时间，",
        "进程内计算以它为准：在这台共享机器上，墙钟时间（括号中）还包含等待 CPU 核的时间。启动进程的基准按墙钟计时。",
        "",
    ]
    return "\n".join(lines)


def existing_tests(directory: Path = HERE) -> set[str]:
    """Names of the benchmark functions defined in ``directory``'s ``bench_*.py`` files."""
    return {m.group(1) for f in directory.glob("bench_*.py")
            for m in re.finditer(r"^def (test_\w+)", f.read_text(encoding="utf-8"), re.M)}


def merge(new: dict, old: dict | None, tests: set[str]) -> dict:
    """``new`` with each benchmark's machine recorded (and its per-round times dropped), plus every row of ``old`` that ``new`` lacks and whose
    benchmark function still exists (in ``tests``), marked with its date: a partial run (``-k``, or ``make test``
    timed only on request) updates its own rows and keeps the others. Rows sorted by test id."""
    here = machine(new.get("machine_info", {}))
    for b in new.get("benchmarks", []):
        b.setdefault("extra_info", {})["machine"] = here
        (b.get("stats") or {}).pop("data", None)  # every round's time: megabytes, the summary suffices
    ids = {b.get("fullname") for b in new.get("benchmarks", [])}
    for b in (old or {}).get("benchmarks", []):
        if b.get("fullname") not in ids and b.get("name", "").split("[")[0] in tests:
            b.setdefault("extra_info", {}).setdefault("kept_from", (old.get("datetime") or "?")[:10])
            new.setdefault("benchmarks", []).append(b)
    new.get("benchmarks", []).sort(key=lambda b: b.get("fullname", ""))
    return new


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split("\n")[0])
    ap.add_argument("json", help="pytest-benchmark's --benchmark-json output")
    ap.add_argument("--results", default=str(HERE / "results.json"), help="merged JSON to write")
    ap.add_argument("--out", default=str(HERE / "README.md"), help="table to write")
    args = ap.parse_args(argv)
    try:
        new = json.loads(Path(args.json).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"no benchmark results in {args.json}: {exc}\n{args.json} 中没有基准测试结果：{exc}")
        return 1
    results = Path(args.results)
    try:
        old = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    data = merge(new, old, existing_tests())
    results.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    Path(args.out).write_text(render(data), encoding="utf-8")
    failed = [b for b in data.get("benchmarks", []) if status(b) in ("FAIL", "error")]
    print(f"wrote {args.out}: {len(data.get('benchmarks', []))} rows, {len(failed)} failed / 未达目标")
    return 0


if __name__ == "__main__":
    sys.exit(main())

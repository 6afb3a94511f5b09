"""Run every benchmark and rewrite ``benchmarks/README.md`` (``make bench``).

A benchmark is a module ``benchmarks/bench_<name>.py`` with ``main()`` (optionally ``main(quick=...)``) returning
``{row name: seconds}``. Its goal in seconds comes from the module's ``GOALS`` dict (per row), else its ``GOAL``,
else :data:`DEFAULT_GOALS` (per module). Benchmarks are measured and reported, never asserted in unit tests.

    python -m benchmarks.run                  # all benchmarks, rewrite benchmarks/README.md
    python -m benchmarks.run --with-make-test # also time the whole `make test` (long)
    python -m benchmarks.run --quick --out /tmp/bench.md --only explorers   # a fast smoke run

The time of ``make test`` is kept from the previous run (``benchmarks/results.json``) unless it is measured again.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib
import inspect
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_GOALS = {  # seconds, for modules that do not state their own goal
    "bench_pipeline": 0.100,  # pipeline simulator at p = 64, m = 1024, 4 chunks
    "bench_planner": 2.0,     # the planner's full search
    "bench_explorers": 0.050,
    "bench_lab": 15.0,
}
MAKE_TEST_NAME = "whole `make test`"
MAKE_TEST_GOAL = 15 * 60.0


@dataclass
class Row:
    module: str
    name: str
    goal_s: float | None
    measured_s: float | None
    error: str = ""
    note: str = ""

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if self.measured_s is None:
            return "not measured"
        if self.goal_s is None:
            return "—"
        return "pass" if self.measured_s < self.goal_s else "FAIL"


def discover(directory: Path = HERE) -> list[str]:
    """Module names of every ``bench_*.py`` in ``directory``, sorted."""
    return sorted(p.stem for p in directory.glob("bench_*.py"))


def _goal(mod, module: str, row: str) -> float | None:
    goals = getattr(mod, "GOALS", None)
    if isinstance(goals, dict) and row in goals:  # None: measured for information, no goal
        return None if goals[row] is None else float(goals[row])
    if getattr(mod, "GOAL", None) is not None:
        return float(mod.GOAL)
    return DEFAULT_GOALS.get(module)


def run_module(module: str, quick: bool = False, package: str = "benchmarks") -> list[Row]:
    """Import ``package.module``, call its ``main`` and turn the result into rows (an error becomes one row)."""
    try:
        mod = importlib.import_module(f"{package}.{module}")
        kwargs = {"quick": quick} if "quick" in inspect.signature(mod.main).parameters else {}
        results = mod.main(**kwargs)
        if not isinstance(results, dict):
            raise TypeError(f"{module}.main() must return a {{name: seconds}} dict, got {results!r}")
        return [Row(module, str(name), _goal(mod, module, name), float(sec)) for name, sec in results.items()]
    except Exception as exc:
        last = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return [Row(module, module, DEFAULT_GOALS.get(module), None, error=last)]


def time_make_test() -> Row:
    t0 = time.perf_counter()
    proc = subprocess.run(["make", "test"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    return Row("make", MAKE_TEST_NAME, MAKE_TEST_GOAL, seconds,
               error="" if proc.returncode == 0 else f"make test exited with {proc.returncode}")


def machine() -> dict:
    """CPU model, logical cores, OS, Python and torch versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        if sys.platform == "darwin":
            try:
                cpu = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True,
                                     text=True).stdout.strip() or cpu
            except OSError:
                pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    try:
        import torch
        torch_version = torch.__version__
    except Exception:
        torch_version = "not installed"
    return {"cpu": cpu, "cores": cores, "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(), "torch": torch_version}


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds >= 120:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.2f} s"


def render(rows: list[Row], info: dict, date: str) -> str:
    """The README text: how to run, the machine, then one table row per measurement."""
    lines = [
        "# Benchmarks / 性能基准",
        "",
        "Measured by `make bench` (`python -m benchmarks.run`), which rewrites this file; never asserted in unit tests.",
        "Add `--with-make-test` to also time the whole `make test`. A benchmark is a module `benchmarks/bench_*.py`",
        "whose `main()` returns `{name: seconds}`; goals are in the module (`GOAL` / `GOALS`) or in `run.py`.",
        "由 `make bench` 测量并重写本文件；单元测试不对这些时间做断言。加 `--with-make-test` 可同时测量整个",
        "`make test` 的耗时。",
        "",
        f"- Date / 日期: {date}",
        f"- Machine / 机器: {info['cpu']}, {info['cores']} logical cores / 逻辑核; {info['os']}; "
        f"Python {info['python']}; torch {info['torch']}",
        "",
        "| benchmark / 基准 | goal / 目标 | measured / 实测 | result / 结果 |",
        "|---|---|---|---|",
    ]
    for r in rows:
        goal = f"< {_fmt(r.goal_s)}" if r.goal_s is not None else "—"
        measured = _fmt(r.measured_s) + (f" ({r.note})" if r.note else "")
        status = r.status + (f": {r.error}" if r.error else "")
        lines.append(f"| {r.name} | {goal} | {measured} | {status} |")
    lines += ["", "Times are wall-clock seconds on the machine above; explorer rows are the median of 5 calls at the",
              "slowest of their extreme settings (`distlearn.widgets.base.extreme_settings`).",
              "时间为上述机器上的实际耗时；探索器一行取其各极端设置中最慢者，5 次调用的中位数。", ""]
    return "\n".join(lines)


def _previous_make_test(results_path: Path) -> Row | None:
    try:
        data = json.loads(results_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for r in data.get("rows", []):
        if r.get("name") == MAKE_TEST_NAME and r.get("measured_s") is not None:
            row = Row(**{k: r.get(k) for k in ("module", "name", "goal_s", "measured_s", "error")})
            row.note = f"measured {r.get('date') or data.get('date', '?')}"
            return row
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="one repetition, small lab: check the harness, not speed")
    ap.add_argument("--with-make-test", action="store_true", help="also time the whole `make test` (long)")
    ap.add_argument("--only", action="append", default=[], help="run only modules whose name contains this")
    ap.add_argument("--out", default=str(HERE / "README.md"), help="where to write the table")
    args = ap.parse_args(argv)

    out = Path(args.out)
    results_path = out.with_name("results.json") if out.name == "README.md" else out.with_suffix(".json")
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows: list[Row] = []
    for module in discover():
        if args.only and not any(o in module for o in args.only):
            continue
        print(f"running {module} ...", flush=True)
        rows += run_module(module, quick=args.quick)
    if not args.only:  # a benchmark the course expects but nobody has written yet shows as missing
        rows += [Row(m, m, DEFAULT_GOALS[m], None, note=f"benchmarks/{m}.py missing / 尚未编写")
                 for m in DEFAULT_GOALS if m not in discover()]
    if args.with_make_test:
        print("running make test (long) ...", flush=True)
        rows.append(time_make_test())
    elif not args.only:
        prev = _previous_make_test(results_path)
        rows.append(prev or Row("make", MAKE_TEST_NAME, MAKE_TEST_GOAL, None,
                                note="run `python -m benchmarks.run --with-make-test`"))
    info = machine()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(rows, info, date), encoding="utf-8")
    stored = [dict(asdict(r), date=(r.note[len("measured "):] if r.note.startswith("measured ") else date))
              for r in rows]
    results_path.write_text(json.dumps({"date": date, "machine": info, "rows": stored}, indent=1) + "\n",
                            encoding="utf-8")
    for r in rows:
        print(f"  {r.status:12s} {_fmt(r.measured_s):>10s}  (goal {_fmt(r.goal_s)})  {r.name}"
              + (f"  {r.error}" if r.error else ""))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

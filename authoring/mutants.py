"""Mutation testing of the simulation and calculator modules: does a test fail when the code is wrong?

``make mutants`` (``python -m authoring.mutants``) applies, one at a time, each one-line mistake listed in
``authoring/mutants.toml`` (an off-by-one in a bubble, n instead of n − 1 in ring traffic, GB for GiB, a ZeRO stage
that shards too much …) to a private copy of the package and runs the fast tests of that module's area. A mutant is
*killed* when a test fails or times out, and *survives* when every test passes: then either a test is missing, or the
mutant is *equivalent* (the same behaviour written differently), which the list must say with a reason. The run
prints the kill rate over the non-equivalent mutants and every survivor.

Each entry of the list names a module, the exact original text (it must occur exactly once in that module, so the
list cannot rot silently: the run and ``tests/test_mutants.py`` fail on a fragment that moved), its replacement, a
short description, and optionally ``equivalent = "why"``. Each module names its test selection once.

Options: ``--jobs N`` (2 by default: one worker copy of the repository per job), ``--only MODULE`` (a path or a
part of one), ``--list`` (print the mutants and exit), ``--propose MODULE`` (print candidate mutants for a module,
one per arithmetic or comparison line, to help write new entries), ``--timeout S`` per mutant (default 180 s).

Measured on this project's 2-core machine (2026-12-04): 107 mutants in 22 modules, 9.5 minutes with 2 jobs (the
budget is 30). The first run killed 100 (93.5 %); the 7 survivors (Adam's second moment in the FSDP simulation, the
output head × in-flight micro-batches, FSDP2 sharding over dp·cp, the block-wise margin, the 1×128 tile's fp32
scale, the serial closed form, exposed communication) each got a test in ``tests/test_mutant_survivors.py``; the
second run killed all 107 (100 %).
"""
from __future__ import annotations

import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from authoring.paths import ROOT

LIST = ROOT / "authoring" / "mutants.toml"
# What a worker copy needs to run the tests: the package, the tests and what they import or read.
COPIED = ("distlearn", "tests", "authoring", "pyproject.toml", "docs", "notebooks", "solutions", "exercises",
          "courses", "benchmarks")


@dataclass(frozen=True)
class Mutant:
    """One mistake: in ``module`` (a path relative to the repository), ``original`` becomes ``mutated``."""

    module: str
    original: str
    mutated: str
    description: str
    equivalent: str = ""

    @property
    def name(self) -> str:
        return f"{self.module}: {self.description}"


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    killed: bool
    how: str          # "failed", "timeout", "survived", "equivalent"
    seconds: float


def load(path: Path = LIST) -> tuple[list[Mutant], dict[str, list[str]]]:
    """The mutants of the list and each module's test selection (pytest arguments)."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    selections = {m: list(v["tests"]) for m, v in data["modules"].items()}
    mutants = [Mutant(**entry) for entry in data["mutant"]]
    return mutants, selections


def problems(mutants: list[Mutant], selections: dict[str, list[str]], root: Path = ROOT) -> list[str]:
    """Why the list cannot run as written: a module without a selection, a fragment that does not occur exactly
    once, a mutant equal to its original, a selection naming a test file that does not exist. Empty when sound."""
    found = []
    for m in mutants:
        path = root / m.module
        if m.module not in selections:
            found.append(f"{m.name}: no test selection for {m.module} under [modules]")
        if not path.exists():
            found.append(f"{m.name}: no such module")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            found.append(f"{m.name}: the original text occurs {count} times in {m.module} (must be exactly once)")
        if m.original == m.mutated:
            found.append(f"{m.name}: the mutant equals the original")
    for module, args in selections.items():
        for arg in args:
            file = arg.split("::")[0]
            if file.startswith("tests/") and not (root / file).exists():
                found.append(f"[modules.\"{module}\"]: no test file {file}")
    return found


def _worker_copy(root: Path, into: Path) -> Path:
    for name in COPIED:
        src = root / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints"))
        elif src.exists():
            shutil.copy2(src, into / name)
    return into


def _run(mutant: Mutant, selection: list[str], worker: Path, timeout: float) -> Outcome:
    if mutant.equivalent:
        return Outcome(mutant, False, "equivalent", 0.0)
    path = worker / mutant.module
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(mutant.original, mutant.mutated, 1), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(worker), "PYTHONDONTWRITEBYTECODE": "1", "DISTLEARN_LANG": "en"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow",
           "--no-header", "-o", "addopts=", *selection]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=worker, env=env, capture_output=True, text=True, timeout=timeout)
        how = "survived" if proc.returncode == 0 else "failed"
        if proc.returncode not in (0, 1):  # 2–5: pytest could not run the selection: a broken list, not a kill
            how = f"error (pytest exit {proc.returncode}): {proc.stdout[-300:]}"
    except subprocess.TimeoutExpired:
        how = "timeout"
    finally:
        path.write_text(text, encoding="utf-8")
    return Outcome(mutant, how in ("failed", "timeout"), how, time.perf_counter() - start)


def run(mutants: list[Mutant], selections: dict[str, list[str]], jobs: int = 2, timeout: float = 180.0,
        root: Path = ROOT, log=print) -> list[Outcome]:
    """Run every mutant in ``jobs`` worker copies of ``root``; print one line per mutant as it ends."""
    with tempfile.TemporaryDirectory(prefix="distlearn-mutants-") as tmp:
        workers = [_worker_copy(root, Path(tmp) / f"w{i}") for i in range(jobs)]
        for w in workers:
            w.mkdir(exist_ok=True)
        free = list(workers)
        outcomes = []

        def one(m: Mutant) -> Outcome:
            worker = free.pop()
            try:
                out = _run(m, selections[m.module], worker, timeout)
            finally:
                free.append(worker)
            mark = {"failed": "killed", "timeout": "killed (timeout)", "equivalent": "equivalent"}.get(out.how, out.how)
            log(f"  {mark:<18} {out.seconds:5.1f} s  {m.name}")
            return out

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            outcomes = list(pool.map(one, mutants))
    return outcomes


def report(outcomes: list[Outcome], seconds: float) -> tuple[str, float]:
    """The summary text and the kill rate over the non-equivalent mutants."""
    real = [o for o in outcomes if o.how != "equivalent"]
    killed = [o for o in real if o.killed]
    rate = len(killed) / len(real) if real else 1.0
    lines = [f"mutants: {len(outcomes)} ({len(real)} counted, {len(outcomes) - len(real)} equivalent); "
             f"killed {len(killed)}; kill rate {rate:.1%}; {seconds / 60:.1f} min"]
    survivors = [o for o in real if not o.killed]
    if survivors:
        lines.append("survivors (add a test that fails on each, or mark it equivalent with the reason):")
        lines += [f"  {o.mutant.name}  [{o.how}]\n      {o.mutant.original!r} → {o.mutant.mutated!r}" for o in survivors]
    equivalent = [o for o in outcomes if o.how == "equivalent"]
    if equivalent:
        lines.append("equivalent (not counted):")
        lines += [f"  {o.mutant.name}: {o.mutant.equivalent}" for o in equivalent]
    return "\n".join(lines), rate


# ---------------------------------------------------------------- proposing new entries
_SWAPS = {ast.Add: (" + ", " - "), ast.Sub: (" - ", " + "), ast.Mult: (" * ", " / "), ast.Div: (" / ", " * "),
          ast.Lt: (" < ", " <= "), ast.LtE: (" <= ", " < "), ast.Gt: (" > ", " >= "), ast.GtE: (" >= ", " > ")}


def propose(module: str, root: Path = ROOT) -> list[tuple[int, str]]:
    """Candidate one-line mutants of ``module``: for each line of a function body holding an arithmetic operator or
    a comparison, the line with its first such operator swapped (+/−, ×/÷, < / ≤ …). A starting point for
    writing entries by hand, not a list to run as it is."""
    text = (root / module).read_text(encoding="utf-8")
    lines = text.splitlines()
    seen, out = set(), []
    for node in ast.walk(ast.parse(text)):
        op = node.op if isinstance(node, ast.BinOp) else node.ops[0] if isinstance(node, ast.Compare) else None
        swap = _SWAPS.get(type(op))
        if swap is None or node.lineno in seen:
            continue
        line = lines[node.lineno - 1].strip()
        if line.startswith(("#", '"', "raise")) or swap[0] not in line:
            continue
        seen.add(node.lineno)
        out.append((node.lineno, line + "   →   " + line.replace(swap[0], swap[1], 1)))
    return sorted(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m authoring.mutants", description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", default="")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--propose", default="")
    args = parser.parse_args(argv)
    if args.propose:
        for lineno, text in propose(args.propose):
            print(f"{lineno:5}: {text}")
        return 0
    mutants, selections = load()
    wrong = problems(mutants, selections)
    if wrong:
        print("authoring/mutants.toml cannot run as written:", *wrong, sep="\n  ", file=sys.stderr)
        return 2
    chosen = [m for m in mutants if args.only in m.module]
    if args.list:
        for m in chosen:
            print(f"{'[equivalent] ' if m.equivalent else ''}{m.name}")
        print(f"{len(chosen)} mutants in {len({m.module for m in chosen})} modules")
        return 0
    start = time.perf_counter()
    outcomes = run(chosen, selections, jobs=args.jobs, timeout=args.timeout)
    text, rate = report(outcomes, time.perf_counter() - start)
    print(text)
    return 0 if rate >= 0.97 else 1


if __name__ == "__main__":
    raise SystemExit(main())

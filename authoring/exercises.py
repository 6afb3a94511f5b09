"""``exercises/`` from ``solutions/``: answer code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes
a bilingual ``raise NotImplementedError``; a cell tagged ``solution-only`` is left out."""
from __future__ import annotations

from pathlib import Path

import nbformat

from authoring.pairing import strip_volatile
from authoring.paths import BEGIN, END, NB_VERSION, PLACEHOLDER, ROOT

# ---------------------------------------------------------------- exercises
def strip_solutions(source: str) -> str:
    """Replace every BEGIN/END SOLUTION block by the placeholder, at the marker's indentation.

    Raises ValueError on an unmatched or nested marker.
    """
    out, inside, indent = [], False, ""
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError("nested BEGIN SOLUTION / 嵌套的 BEGIN SOLUTION")
            inside, indent = True, line[: len(line) - len(line.lstrip())]
            out.append(indent + PLACEHOLDER)
        elif stripped == END:
            if not inside:
                raise ValueError("END SOLUTION without BEGIN / 缺少 BEGIN SOLUTION")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError("BEGIN SOLUTION without END / 缺少 END SOLUTION")
    return "\n".join(out)


SOLUTION_ONLY = "solution-only"  # tag of a cell (e.g. a written answer) that exercises/ leave out


def exercise_from_solution(nb) -> nbformat.NotebookNode:
    """The exercise notebook for a solution notebook: answers stripped (code between the markers, cells tagged
    ``solution-only``), outputs cleared."""
    ex = nbformat.from_dict(nb)
    ex.cells = [c for c in ex.cells if SOLUTION_ONLY not in c.get("metadata", {}).get("tags", [])]
    for key in ("jupytext", "distlearn"):  # an exercise is neither paired with a source nor executed
        ex.metadata.pop(key, None)
    for cell in ex.cells:
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
            cell.outputs = []
            cell.execution_count = None
    strip_volatile(ex)
    return ex


def build_exercises(check: bool = False, root: Path = ROOT) -> list[str]:
    """Write ``exercises/`` from ``solutions/``; with ``check`` write nothing and return the stale files."""
    stale = []
    sol_dir, ex_dir = root / "solutions", root / "exercises"
    ex_dir.mkdir(exist_ok=True)
    wanted = set()
    for sol in sorted(sol_dir.glob("*.ipynb")):
        target = ex_dir / sol.name
        wanted.add(target.name)
        text = nbformat.writes(exercise_from_solution(nbformat.read(sol, as_version=NB_VERSION))) + "\n"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            stale.append(str(target.relative_to(root)))
            if not check:
                target.write_text(text, encoding="utf-8")
    for extra in sorted(ex_dir.glob("*.ipynb")):
        if extra.name not in wanted:
            stale.append(str(extra.relative_to(root)) + " (no solution / 没有对应的解答)")
    return stale

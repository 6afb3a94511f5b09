"""Hand out, collect and grade the exercises with nbgrader: the ``### BEGIN SOLUTION`` / ``### END SOLUTION``
markers of ``solutions/`` are nbgrader's own.

``python -m authoring.grading [--out DIR] [CHAPTER ...]`` writes an nbgrader course folder::

    DIR/nbgrader_config.py
    DIR/source/07_overlap_prefetch/07_overlap_prefetch.ipynb      (one assignment per chapter)

made from ``solutions/``: a code cell with the markers becomes a solution cell, each check cell
(``check.exNN_name(fn)``) an autograded test cell worth one point (it fails with ``CheckFailed`` when the answer is
wrong), every other cell a read-only cell; a cell tagged ``solution-only`` (a written answer) is left out. Then, in
``DIR`` (see docs/teaching.md)::

    nbgrader generate_assignment 07_overlap_prefetch   # release/: the answers replaced by the course's stub
    nbgrader autograde 07_overlap_prefetch             # submitted/<student>/07_overlap_prefetch/*.ipynb
    nbgrader export                                    # grades.csv

Needs nbgrader, in the course's venv (``.venv/bin/pip install -e '.[teach]'``), only for the nbgrader commands, not
to write the folder. tests/test_teaching.py runs the whole round on one chapter.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from authoring.exercises import SOLUTION_ONLY
from authoring.paths import BEGIN, PLACEHOLDER, ROOT

CHECK_CALL = re.compile(r"^\s*check\.ex\d\d_(\w+)\(", re.M)
# A check cell names the function it checks: check.ex07_prefetch_time(prefetch_time) / 检查单元格的参数就是被检查的函数
CHECKED = re.compile(r"^\s*check\.ex\d\d_(\w+)\(\s*(\w+)", re.M)
DEF = re.compile(r"^def (\w+)\(", re.M)
# For nbgrader 0.9 (pyproject's [teach]): CourseDirectory.root must be an absolute path (a relative one draws
# "root '.' is not absolute" on every command), so the config names its own folder; the assignments are not listed
# (0.9 has no db_assignments: generate_assignment adds each one to the gradebook).
CONFIG = '''# nbgrader settings for the distlearn exercises (written by python -m authoring.grading).
# Assignments ({assignments}) enter the gradebook with `nbgrader generate_assignment NAME`.
import os

c = get_config()  # noqa: F821
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))  # this folder, as an absolute path
c.ClearSolutions.begin_solution_delimeter = "BEGIN SOLUTION"
c.ClearSolutions.end_solution_delimeter = "END SOLUTION"
c.ClearSolutions.code_stub = {{"python": {stub!r}}}
c.Execute.timeout = 300
'''


def _meta(grade_id: str, *, solution: bool = False, grade: bool = False, points: int = 0) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def _answer_id(source: str, index: int) -> str:
    """An answer cell's grade id: ``answer-<the function it defines>``, the same in every language's copy."""
    match = DEF.search(source)
    return f"answer-{match.group(1)}" if match else f"answer-{index:02d}"


def nbgrader_source(solution: Path) -> nbformat.NotebookNode:
    """The nbgrader source notebook for one ``solutions/`` notebook (outputs cleared)."""
    nb = nbformat.read(solution, as_version=4)
    nb.cells = [c for c in nb.cells if SOLUTION_ONLY not in c.get("metadata", {}).get("tags", [])]
    for key in ("jupytext", "distlearn"):
        nb.metadata.pop(key, None)
    for i, cell in enumerate(nb.cells):
        check = CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
        if cell.cell_type == "code" and BEGIN in cell.source:
            meta = _meta(_answer_id(cell.source, i), solution=True)
        elif check:
            meta = _meta(f"check-{check.group(1)}", grade=True, points=1)
        else:
            meta = _meta(f"cell-{i:02d}")
        cell.metadata["nbgrader"] = meta
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def mark_for_grading(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Give a student's exercise notebook the nbgrader metadata of its graded cells, with the ids of
    :func:`nbgrader_source`, so that ``nbgrader autograde`` can score it. Works on any copy: ``exercises/``, a
    monolingual ``courses/<lang>/exercises/``, or what a student saved from one. Each check cell
    (``check.ex07_prefetch_time(prefetch_time)``) becomes a locked test cell worth one point, ``check-prefetch_time``.
    The answer it checks, the nearest cell above it that defines that function, becomes a solution cell,
    ``answer-prefetch_time``. Other cells get no metadata (the gradebook's read-only cells differ between the
    languages' copies; nbgrader grades without them). Cells with nbgrader metadata keep it, so marking twice
    changes nothing. Without this metadata nbgrader scores every check 0 and says nothing. Returns ``nb``,
    changed in place."""
    taken = {c.metadata["nbgrader"].get("grade_id") for c in nb.cells if "nbgrader" in c.get("metadata", {})}
    for i, cell in enumerate(nb.cells):
        check = CHECKED.search(cell.source) if cell.cell_type == "code" else None
        if not check or "nbgrader" in cell.metadata or f"check-{check.group(1)}" in taken:
            continue
        cell.metadata["nbgrader"] = _meta(f"check-{check.group(1)}", grade=True, points=1)
        taken.add(f"check-{check.group(1)}")
        defines = re.compile(rf"^def {re.escape(check.group(2))}\(", re.M)
        for above in reversed(nb.cells[:i]):
            if above.cell_type == "code" and defines.search(above.source):
                answer = f"answer-{check.group(2)}"
                if "nbgrader" not in above.metadata and answer not in taken:
                    above.metadata["nbgrader"] = _meta(answer, solution=True)
                    taken.add(answer)
                break
    return nb


def write_course(out: Path, chapters: list[str] | None = None, root: Path = ROOT) -> list[str]:
    """Write the nbgrader course folder ``out`` for ``chapters`` (stems such as ``07_overlap_prefetch``; default:
    every solution). Returns the assignment names."""
    solutions = sorted((root / "solutions").glob("*.ipynb"))
    if chapters:
        wanted = {Path(c).stem for c in chapters}
        unknown = wanted - {p.stem for p in solutions}
        if unknown:
            raise SystemExit(f"no solutions for {sorted(unknown)} / 没有这些章节的解答：{sorted(unknown)}")
        solutions = [p for p in solutions if p.stem in wanted]
    names = []
    for sol in solutions:
        target = out / "source" / sol.stem / sol.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbgrader_source(sol), target)
        names.append(sol.stem)
    (out / "nbgrader_config.py").write_text(
        CONFIG.format(assignments=", ".join(names) or "none", stub=PLACEHOLDER), encoding="utf-8")
    return names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m authoring.grading",
                                 description="Write an nbgrader course folder from solutions/ / "
                                             "由 solutions/ 生成 nbgrader 课程目录")
    ap.add_argument("chapters", nargs="*", help="e.g. 07_overlap_prefetch (default: all / 默认全部)")
    ap.add_argument("--out", default="nbgrader-course", help="folder to write (default: nbgrader-course)")
    args = ap.parse_args(argv)
    names = write_course(Path(args.out), args.chapters)
    print(f"wrote {len(names)} assignment(s) to {args.out}/source / 已写入 {len(names)} 个作业；"
          f"next / 下一步: cd {args.out} && nbgrader generate_assignment {names[0] if names else 'NAME'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Notebook tooling on nbformat/nbclient: build exercises from solutions, check bilingual parity, execute, split.

Command line::

    python -m distlearn.course build-exercises [--check]   # exercises/ from solutions/
    python -m distlearn.course parity                       # every prose cell has its en/zh partner
    python -m distlearn.course execute PATH...              # run notebooks in place and store outputs
    python -m distlearn.course split --lang zh|en [--out DIR]  # monolingual copies

Authoring helpers (:func:`pair`, :func:`code`, :func:`new_notebook`) build notebooks with nbformat, so nobody edits
notebook JSON by hand.

Conventions (see README "For authors"):
- Prose cells are markdown cells tagged ``lang-en`` or ``lang-zh``; each English cell is followed immediately by its
  Chinese partner, and their headings match in number and level.
- In ``solutions/``, answer code sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the exercise keeps
  the lines outside the markers and gets a bilingual ``raise NotImplementedError`` instead.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
PLACEHOLDER = 'raise NotImplementedError("Your code here / 在这里写你的代码")'
NB_VERSION = 4
_CJK = re.compile(r"[\u4e00-\u9fff]")
_HEADING = re.compile(r"^(#{1,6})\s", re.M)


# ---------------------------------------------------------------- authoring
def pair(en: str, zh: str) -> list:
    """Two markdown cells, English then Chinese, tagged ``lang-en`` / ``lang-zh``."""
    return [nbformat.v4.new_markdown_cell(en.strip("\n"), metadata={"tags": ["lang-en"]}),
            nbformat.v4.new_markdown_cell(zh.strip("\n"), metadata={"tags": ["lang-zh"]})]


def code(source: str, tags: list[str] | None = None):
    """A code cell; ``tags`` such as ``["exercise"]``."""
    md = {"tags": list(tags)} if tags else {}
    return nbformat.v4.new_code_cell(source.strip("\n"), metadata=md)


def new_notebook(cells: list) -> nbformat.NotebookNode:
    """A notebook with the course's kernel metadata. ``cells`` may contain lists (from :func:`pair`)."""
    flat = []
    for c in cells:
        flat.extend(c if isinstance(c, list) else [c])
    nb = nbformat.v4.new_notebook(cells=flat)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def execute(path: str | Path, timeout: int = 600) -> None:
    """Run a notebook top to bottom in a fresh kernel (cwd = its folder) and store its outputs in place."""
    from nbclient import NotebookClient

    path = Path(path)
    nb = nbformat.read(path, as_version=NB_VERSION)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    _strip_volatile(nb)
    nbformat.write(nb, path)


def _strip_volatile(nb) -> None:
    nb.metadata.pop("widgets", None)  # widget state differs run to run; the explorer is re-created on run
    for cell in nb.cells:
        cell.metadata.pop("execution", None)


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


def exercise_from_solution(nb) -> nbformat.NotebookNode:
    """The exercise notebook for a solution notebook: answers stripped, outputs cleared."""
    ex = nbformat.from_dict(nb)
    for cell in ex.cells:
        if cell.cell_type == "code":
            cell.source = strip_solutions(cell.source)
            cell.outputs = []
            cell.execution_count = None
    _strip_volatile(ex)
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


# ---------------------------------------------------------------- parity
def _lang(cell) -> str | None:
    tags = cell.get("metadata", {}).get("tags", [])
    return "en" if "lang-en" in tags else "zh" if "lang-zh" in tags else None


def parity_problems(nb, name: str = "") -> list[str]:
    """Bilingual problems in one notebook: unpaired prose cells, mismatched headings, missing Chinese."""
    problems = []
    cells = nb.cells
    i = 0
    while i < len(cells):
        cell = cells[i]
        if cell.cell_type != "markdown":
            i += 1
            continue
        lang = _lang(cell)
        where = f"{name} cell {i}"
        if lang != "en":
            problems.append(f"{where}: markdown cell must be tagged lang-en and come before its lang-zh partner "
                            f"/ markdown 单元格必须标记 lang-en 并位于其 lang-zh 对应单元格之前")
            i += 1
            continue
        partner = cells[i + 1] if i + 1 < len(cells) else None
        if partner is None or partner.cell_type != "markdown" or _lang(partner) != "zh":
            problems.append(f"{where}: English cell has no Chinese partner right after it / 英文单元格后缺少中文对应单元格")
            i += 1
            continue
        h_en = [len(h) for h in _HEADING.findall(_strip_code(cell.source))]
        h_zh = [len(h) for h in _HEADING.findall(_strip_code(partner.source))]
        if h_en != h_zh:
            problems.append(f"{where}: headings differ (en {h_en} vs zh {h_zh}) / 标题层级或数量不一致")
        if not _CJK.search(partner.source):
            problems.append(f"{name} cell {i + 1}: lang-zh cell has no Chinese text / lang-zh 单元格没有中文")
        i += 2
    return problems


def _strip_code(md: str) -> str:
    return re.sub(r"```.*?```", "", md, flags=re.S)


def course_notebooks(root: Path = ROOT) -> list[Path]:
    """Every notebook of the course: chapters, solutions and exercises."""
    return [p for d in ("notebooks", "solutions", "exercises") for p in sorted((root / d).glob("*.ipynb"))]


def parity(root: Path = ROOT) -> list[str]:
    problems = []
    for path in course_notebooks(root):
        problems += parity_problems(nbformat.read(path, as_version=NB_VERSION), str(path.relative_to(root)))
    return problems


# ---------------------------------------------------------------- split
def split(nb, lang: str) -> nbformat.NotebookNode:
    """A monolingual copy: keep the prose cells of ``lang`` (``"en"`` or ``"zh"``) and every code cell."""
    if lang not in ("en", "zh"):
        raise ValueError(f"lang must be 'en' or 'zh', got {lang!r} / lang 必须是 'en' 或 'zh'，收到 {lang!r}")
    out = nbformat.from_dict(nb)
    out.cells = [c for c in out.cells if c.cell_type != "markdown" or _lang(c) in (lang, None)]
    return out


# ---------------------------------------------------------------- CLI
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m distlearn.course", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build-exercises", help="write exercises/ from solutions/")
    b.add_argument("--check", action="store_true", help="write nothing; exit 1 if exercises/ is out of sync")
    sub.add_parser("parity", help="check English/中文 pairs in every notebook")
    e = sub.add_parser("execute", help="execute notebooks in place, storing outputs")
    e.add_argument("paths", nargs="+")
    s = sub.add_parser("split", help="write monolingual copies of the notebooks")
    s.add_argument("--lang", required=True, choices=["en", "zh"])
    s.add_argument("--out", default=None, help="output folder (default: translated/<lang>)")
    args = ap.parse_args(argv)

    if args.cmd == "build-exercises":
        stale = build_exercises(check=args.check)
        if args.check and stale:
            print("exercises/ is out of sync with solutions/ (run `make exercises`) / exercises/ 与 solutions/ 不一致：")
            print("\n".join("  " + s for s in stale))
            return 1
        print(f"{len(stale)} exercise notebook(s) {'stale' if args.check else 'written'} / 个练习笔记本"
              f"{'需要更新' if args.check else '已写入'}")
        return 0
    if args.cmd == "parity":
        problems = parity()
        for p in problems:
            print(p)
        n = len(course_notebooks())
        print(f"parity: {n} notebooks, {len(problems)} problem(s) / 双语检查：{n} 个笔记本，{len(problems)} 个问题")
        return 1 if problems else 0
    if args.cmd == "execute":
        for p in args.paths:
            print(f"executing {p} ...", flush=True)
            execute(p)
        return 0
    if args.cmd == "split":
        out_root = Path(args.out) if args.out else ROOT / "translated" / args.lang
        for path in course_notebooks():
            target = out_root / path.parent.name / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(split(nbformat.read(path, as_version=NB_VERSION), args.lang), target)
        print(f"wrote {out_root}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())

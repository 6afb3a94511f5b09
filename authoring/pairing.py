"""Each MyST source ``NN_slug.md`` and its stored, executed ``NN_slug.ipynb``: read MyST, sync a pair with jupytext,
fingerprint the code a notebook was executed from, find pairs out of sync or not fully executed, execute a notebook
with nbclient and store its outputs."""
from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat

from authoring.paths import MYST, NB_VERSION, PAIRED_DIRS, ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
HEADING = re.compile(r"^(#{1,6})\s", re.M)


def from_myst(text: str) -> nbformat.NotebookNode:
    """A notebook from MyST markdown text (jupytext's ``md:myst`` format), e.g. for small test notebooks."""
    import jupytext

    nb = jupytext.reads(text, fmt=MYST)
    nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                          "language": "python"})
    return nb


def source_of(ipynb: str | Path) -> Path:
    """The MyST source paired with ``ipynb`` (``notebooks/01_memory.ipynb`` → ``notebooks/01_memory.md``)."""
    return Path(ipynb).with_suffix(".md")


def paired_notebooks(root: Path = ROOT) -> list[Path]:
    """The stored, executed notebooks that have a MyST source: chapters and solutions (not exercises)."""
    return [p for d in PAIRED_DIRS for p in sorted((root / d).glob("*.ipynb"))]


def code_fingerprint(nb) -> str:
    """A hash of the notebook's code cells (sources, in order): what the stored outputs were computed from."""
    import hashlib

    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            h.update(cell.source.encode("utf-8") + b"\0")
    return h.hexdigest()[:16]


def cell_key(cell) -> tuple:
    meta = {k: v for k, v in cell.get("metadata", {}).items() if k not in ("execution", "jupyter")}
    return cell.cell_type, cell.source, meta


def sync_problems(ipynb: str | Path) -> list[str]:
    """Differences between a stored notebook and its MyST source: a missing source, or cells whose type, source,
    metadata (tags …) or order differ. Empty when they are in sync."""
    import jupytext

    ipynb = Path(ipynb)
    md = source_of(ipynb)
    if not md.exists():
        return [f"{ipynb.name}: no MyST source {md.name} / 缺少 MyST 源文件 {md.name}"]
    a = [cell_key(c) for c in nbformat.read(ipynb, as_version=NB_VERSION).cells]
    b = [cell_key(c) for c in jupytext.read(md).cells]
    if a == b:
        return []
    where, what, zh = first_difference(a, b)
    return [f"{ipynb.name} and {md.name} differ at cell {where} ({what}: {len(a)} vs {len(b)} cells); run "
            f"`make notebooks` / {ipynb.name} 与 {md.name} 在第 {where} 个单元格不一致（{zh}）；请运行 `make notebooks`"]


def first_difference(a: list[tuple], b: list[tuple]) -> tuple[int, str, str]:
    """Where two lists of :func:`_cell_key` first differ, and in what (English, Chinese)."""
    where = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    what = ("cell count" if where == min(len(a), len(b)) else
            "type" if a[where][0] != b[where][0] else "source" if a[where][1] != b[where][1] else "metadata/tags")
    zh = {"cell count": "单元格数量", "type": "类型", "source": "内容", "metadata/tags": "元数据/标签"}[what]
    return where, what, zh


def execution_problems(nb, name: str = "") -> list[str]:
    """Why a stored notebook is not a complete top-to-bottom run of its current code: a code cell never executed,
    execution counts not 1, 2, 3, … in order (cells re-run or skipped), or code changed after the run (the code
    fingerprint stored by :func:`execute` differs). Empty when the stored outputs are trustworthy."""
    problems = []
    counts = [c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    missing = sum(1 for n in counts if n is None)
    if missing:
        problems.append(f"{name}: {missing} code cell(s) never executed / {missing} 个代码单元格未执行")
    elif counts != list(range(1, len(counts) + 1)):
        problems.append(f"{name}: execution counts {counts[:8]}… are not 1, 2, 3, … (not one top-to-bottom run) / "
                        f"执行序号不是 1, 2, 3, …（不是一次从头到尾的运行）")
    stored = nb.metadata.get("distlearn", {}).get("executed_code")
    if stored != code_fingerprint(nb):
        problems.append(f"{name}: code changed since the stored run (fingerprint {stored} vs "
                        f"{code_fingerprint(nb)}); run `make notebooks` / 代码在保存的运行之后被修改；请运行 `make notebooks`")
    return problems


def new_sources(root: Path = ROOT) -> list[Path]:
    """MyST sources in ``notebooks/`` or ``solutions/`` that have no stored ``.ipynb`` yet."""
    return [md for d in PAIRED_DIRS for md in sorted((root / d).glob("*.md")) if not md.with_suffix(".ipynb").exists()]


def stored_problems(root: Path = ROOT) -> list[str]:
    """:func:`sync_problems` and :func:`execution_problems` for every paired notebook of the course, and every
    source with no stored notebook."""
    problems = [f"{md.relative_to(root)}: no stored notebook; run `make notebooks` / 没有对应的 .ipynb；请运行 "
                f"`make notebooks`" for md in new_sources(root)]
    for path in paired_notebooks(root):
        problems += sync_problems(path)
        problems += execution_problems(nbformat.read(path, as_version=NB_VERSION), str(path.relative_to(root)))
    return problems


def sync(path: str | Path) -> None:
    """Bring a notebook and its MyST source in line with whichever was edited last (``jupytext --sync``)."""
    from jupytext.cli import jupytext as jupytext_cli

    jupytext_cli(["--sync", "--quiet", str(path)])


def execute(path: str | Path, timeout: int = 600, env: dict | None = None) -> None:
    """Run a notebook top to bottom in a fresh kernel (cwd = its folder) and store its outputs in place, with the
    fingerprint of the code that produced them (see :func:`execution_problems`). The kernel gets this process's
    environment with ``DISTLEARN_LANG`` removed (stored chapters show both languages), then ``env`` on top."""
    from nbclient import NotebookClient

    path = Path(path).with_suffix(".ipynb")
    nb = nbformat.read(path, as_version=NB_VERSION)
    kernel_env = {k: v for k, v in os.environ.items() if k != "DISTLEARN_LANG"}
    kernel_env.update(env or {})
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute(env=kernel_env)
    strip_volatile(nb)
    nb.metadata.setdefault("distlearn", {})["executed_code"] = code_fingerprint(nb)
    nbformat.write(nb, path)




def strip_volatile(nb) -> None:
    nb.metadata.pop("widgets", None)  # widget state differs run to run; the explorer is re-created on run
    for cell in nb.cells:
        cell.metadata.pop("execution", None)

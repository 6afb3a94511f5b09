"""Where the course lives and how its notebooks are stored: the repository root, the paired folders, the
monolingual copies' folder and languages, the jupytext format, and the list of every notebook of the course."""
from __future__ import annotations

from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
PLACEHOLDER = 'raise NotImplementedError("Your code here / 在这里写你的代码")'
PLACEHOLDER_IN = {"en": 'raise NotImplementedError("Your code here")',
                  "zh": 'raise NotImplementedError("在这里写你的代码")'}
"""The exercise stub as a monolingual copy (courses/<lang>/exercises/) shows it: in its reader's language only."""
NB_VERSION = 4

PAIRED_DIRS = ("notebooks", "solutions")  # each NN_slug.ipynb has its MyST source NN_slug.md (jupytext pairing)
# The stored monolingual copies of the course, executed in their language (see update_copies): courses/en/, courses/zh/
COPIES_DIR = "courses"
COPY_LANGS = ("en", "zh")
MYST = "md:myst"
FORMATS = "ipynb," + MYST


def course_notebooks(root: Path = ROOT) -> list[Path]:
    """Every notebook of the course: chapters, solutions and exercises."""
    return [p for d in ("notebooks", "solutions", "exercises") for p in sorted((root / d).glob("*.ipynb"))]

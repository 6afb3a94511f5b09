"""Course tooling: exercises are in sync with solutions, every notebook is bilingual, markers are well formed."""
import nbformat
import pytest

from distlearn import course
from distlearn.course import ROOT


def test_exercises_in_sync_with_solutions():
    stale = course.build_exercises(check=True)
    assert not stale, f"run `make exercises`: {stale}"


def test_every_notebook_is_bilingual():
    problems = course.parity()
    assert not problems, "\n".join(problems)


def test_every_chapter_has_exercise_and_solution_pairs():
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    solutions = {p.stem[:2] for p in (ROOT / "solutions").glob("*.ipynb")}
    missing = [c for c in chapters if c[:2] not in solutions and c[:2] != "00"]
    assert not missing, f"chapters without solutions/: {missing}"


def test_strip_solutions_keeps_signature_and_indent():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n\nanswer = 1"
    out = course.strip_solutions(src)
    assert out == f"def f(x):\n    {course.PLACEHOLDER}\n\nanswer = 1"


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx", "x\n### END SOLUTION", "### BEGIN SOLUTION\n### BEGIN SOLUTION"])
def test_strip_solutions_rejects_bad_markers(src):
    with pytest.raises(ValueError):
        course.strip_solutions(src)


def test_parity_finds_a_missing_partner_and_heading_mismatch():
    nb = course.new_notebook([course.pair("# A\n## B", "# 甲"), course.code("1")])
    nb.cells.append(nbformat.v4.new_markdown_cell("orphan", metadata={"tags": ["lang-en"]}))
    problems = course.parity_problems(nb, "x")
    assert any("headings" in p for p in problems)
    assert any("no Chinese partner" in p for p in problems)


def test_split_keeps_one_language_and_all_code():
    nb = course.new_notebook([course.pair("Hello", "你好"), course.code("x = 1")])
    zh = course.split(nb, "zh")
    assert [c.source for c in zh.cells] == ["你好", "x = 1"]
    with pytest.raises(ValueError):
        course.split(nb, "fr")


def test_code_moves_nbval_markers_into_tags():
    cell = course.code("# NBVAL_IGNORE_OUTPUT\nfrom distlearn.widgets import memory\nmemory.explorer()", tags=["x"])
    assert cell.source == "from distlearn.widgets import memory\nmemory.explorer()"
    assert cell.metadata["tags"] == ["x", "nbval-ignore-output"]
    assert course.code("x = 1  # NBVAL_IGNORE_OUTPUT later is left alone").metadata == {}


def test_no_stored_notebook_shows_nbval_comments_to_students():
    for path in course.course_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            assert "# NBVAL_" not in cell.source, f"{path.name}: use the cell tag, not the comment"

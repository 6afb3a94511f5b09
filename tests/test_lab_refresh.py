"""`make lab-refresh`: a learner's copy of the course (build/course/) brought up to date with a newer course without
losing anything they typed (authoring/refresh.py states the rules; each test below breaks one if it is not kept).

A small course is written to a temporary root (notebooks/, exercises/), copied as `make lab` copies it, edited as a
learner would (an exercise answer, a prose note, a cell of their own, a deleted cell), then changed as an author
would; the refresh is checked rule by rule, and again for being idempotent."""
import subprocess
from pathlib import Path

import nbformat
import pytest

from authoring import course, lab, refresh

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = 'raise NotImplementedError("Your code here / 在这里写你的代码")'


def _cell(kind, source, cid, tags=()):
    cell = (nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell)(source)
    cell["id"] = cid
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def _write(path, cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _read(path):
    return nbformat.read(path, as_version=4)


def _by_id(nb):
    return {c["id"]: c for c in nb.cells}


@pytest.fixture
def course_root(tmp_path):
    root = tmp_path / "repo"
    _write(root / "notebooks" / "00_welcome.ipynb", [_cell("markdown", "# Welcome", "w1")])
    _write(root / "notebooks" / "01_x.ipynb", [
        _cell("markdown", "Intro.", "intro", ["lang-en"]),
        _cell("markdown", "A note to keep.", "note", ["lang-en"]),
        _cell("code", "x = 1", "setup"),
        _cell("code", "print(x)", "show"),
        _cell("code", "y = 2", "old"),
        _cell("markdown", "Ends here.", "end"),
    ])
    _write(root / "exercises" / "01_x.ipynb", [
        _cell("markdown", "Exercise 1: return twice n.", "ex-q"),
        _cell("code", f"def twice(n):\n    {PLACEHOLDER}", "ex-answer"),
        _cell("code", "check(twice)", "ex-check"),
    ])
    return root


def _learner_and_author(root):
    """Make the copy, edit it as a learner, then change the course as an author. Returns the copy's folder."""
    out = lab.open_lab("both", root=root, out_root=root / "build" / "course", start=False)
    assert (out / refresh.BASE_FILE).exists()
    assert lab._copy_is_stale(out, root) is False
    # the learner: an exercise answer, a prose note, a cell of their own, a deleted cell, a run (outputs)
    ex = _read(out / "exercises" / "01_x.ipynb")
    _by_id(ex)["ex-answer"].source = "def twice(n):\n    return 2 * n"
    nbformat.write(ex, out / "exercises" / "01_x.ipynb")
    ch = _read(out / "notebooks" / "01_x.ipynb")
    _by_id(ch)["note"].source = "A note to keep. My own remark: x is the batch."
    _by_id(ch)["intro"].source = "Intro, with my words."
    mine = _cell("code", "print('my experiment')", "mine")
    ch.cells.insert(3, mine)   # after "setup"
    ch.cells = [c for c in ch.cells if c["id"] != "end"]
    nbformat.write(ch, out / "notebooks" / "01_x.ipynb")
    # the author: a changed unedited cell, a changed cell the learner edited too, a new cell, a removed unedited
    # cell, a removed cell the learner edited, a change to the cell the learner deleted, a new notebook
    src = _read(root / "notebooks" / "01_x.ipynb")
    cells = _by_id(src)
    cells["show"].source = "print(x, 'fixed')"
    cells["show"].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1 fixed\n")]
    cells["note"].source = "A note to keep, corrected."
    cells["end"].source = "Ends here, reworded."
    new = _cell("code", "z = 3", "added")
    src.cells = [c for c in src.cells if c["id"] not in ("old", "intro")]
    src.cells.insert(src.cells.index(cells["show"]) + 1, new)
    nbformat.write(src, root / "notebooks" / "01_x.ipynb")
    _write(root / "notebooks" / "02_y.ipynb", [_cell("markdown", "Chapter two.", "two")])
    return out


def test_refresh_keeps_every_learner_edit_and_brings_every_course_change(course_root):
    out = _learner_and_author(course_root)
    assert lab._copy_is_stale(out, course_root) is True
    done = lab.refresh_lab("both", root=course_root, out_root=out, log=lambda *_: None)
    assert set(done) == {"notebooks/01_x.ipynb", "notebooks/02_y.ipynb"}  # the exercise: nothing changed there
    ch = _read(out / "notebooks" / "01_x.ipynb")
    ids = [c["id"] for c in ch.cells]
    cells = _by_id(ch)
    # rule 2: changed by the course, not by the learner -> the course's cell, its outputs included
    assert cells["show"].source == "print(x, 'fixed')" and cells["show"].outputs[0].text == "1 fixed\n"
    # rule 4: changed on both sides -> the learner's kept, the course's inserted right after, marked in both languages
    assert cells["note"].source == "A note to keep. My own remark: x is the batch."
    update = ch.cells[ids.index("note") + 1]
    assert update.source.endswith("A note to keep, corrected.") and refresh.UPDATE_TAG in update.metadata.tags
    assert "new version" in update.source and "新版本" in update.source and "lang-en" in update.metadata.tags
    assert done["notebooks/01_x.ipynb"].conflicts == ["note"]
    # rule 5: the new course cell at its place; the removed unedited cell gone; the removed edited cell kept
    assert ids.index("added") == ids.index("show") + 1
    assert "old" not in ids and cells["intro"].source == "Intro, with my words."
    # rule 6: the learner's own cell after the cell it followed; the deleted cell stays deleted
    assert ids.index("mine") == ids.index("setup") + 1 and "end" not in ids
    # rule 7: a new notebook appears; the exercise answer is untouched
    assert _read(out / "notebooks" / "02_y.ipynb").cells[0].source == "Chapter two."
    assert _by_id(_read(out / "exercises" / "01_x.ipynb"))["ex-answer"].source.endswith("return 2 * n")
    assert lab._copy_is_stale(out, course_root) is False


def test_refresh_twice_changes_nothing(course_root):
    out = _learner_and_author(course_root)
    lab.refresh_lab("both", root=course_root, out_root=out, log=lambda *_: None)
    before = {p: p.read_bytes() for p in out.rglob("*.ipynb")}
    assert lab.refresh_lab("both", root=course_root, out_root=out, log=lambda *_: None) == {}
    assert {p: p.read_bytes() for p in out.rglob("*.ipynb")} == before
    # an edit of the course's cell again: one more new version after the learner's, the earlier one kept as theirs
    src = _read(course_root / "notebooks" / "01_x.ipynb")
    _by_id(src)["note"].source = "A note to keep, corrected twice."
    nbformat.write(src, course_root / "notebooks" / "01_x.ipynb")
    lab.refresh_lab("both", root=course_root, out_root=out, log=lambda *_: None)
    updates = [c.source for c in _read(out / "notebooks" / "01_x.ipynb").cells
               if refresh.UPDATE_TAG in c.metadata.get("tags", [])]
    assert len(updates) == 2 and updates[0].endswith("corrected twice.") and updates[1].endswith("corrected.")


def test_a_copy_without_a_record_loses_nothing(course_root):
    """A copy made before refresh existed: a cell equal to the new course's is unedited, any other is kept with the
    course's version inserted after it."""
    out = _learner_and_author(course_root)
    (out / refresh.BASE_FILE).unlink()
    lab.refresh_lab("both", root=course_root, out_root=out, log=lambda *_: None)
    ch = _read(out / "notebooks" / "01_x.ipynb")
    cells = _by_id(ch)
    assert cells["note"].source.endswith("x is the batch.") and "mine" in cells and "intro" in cells
    assert cells["setup"].source == "x = 1" and "added" in cells
    marked = [c for c in ch.cells if refresh.UPDATE_TAG in c.metadata.get("tags", [])]
    assert {c.source.rstrip("`\n").splitlines()[-1] for c in marked} == {"print(x, 'fixed')",
                                                                        "A note to keep, corrected."}
    # a code cell's new version is shown, not run: Run All must not replace the learner's cell above
    code_update = [c for c in marked if "print(x, 'fixed')" in c.source][0]
    assert code_update.cell_type == "markdown" and "```python\nprint(x, 'fixed')\n```" in code_update.source
    ex = _by_id(_read(out / "exercises" / "01_x.ipynb"))
    assert ex["ex-answer"].source.endswith("return 2 * n")
    assert lab.refresh_lab("both", root=course_root, out_root=out, log=lambda *_: None) == {}


def test_the_mark_is_in_the_copys_language(course_root):
    out = course_root / "copy"
    src = course_root / "notebooks" / "01_x.ipynb"
    refresh.refresh_copy(out, {"notebooks/01_x.ipynb": src}, "zh", log=lambda *_: None)
    ch = _read(out / "notebooks" / "01_x.ipynb")
    _by_id(ch)["setup"].source = "x = 10"
    nbformat.write(ch, out / "notebooks" / "01_x.ipynb")
    course_nb = _read(src)
    _by_id(course_nb)["setup"].source = "x = 1  # one"
    nbformat.write(course_nb, src)
    refresh.refresh_copy(out, {"notebooks/01_x.ipynb": src}, "zh", log=lambda *_: None)
    (first_line, _) = [c.source.split("\n", 1) for c in _read(out / "notebooks" / "01_x.ipynb").cells
                       if refresh.UPDATE_TAG in c.metadata.get("tags", [])][0]
    assert first_line.startswith(f"> **{refresh._MARK['zh']}**") and "new version" not in first_line
    assert refresh._NOT_RUN["zh"] in first_line and "shown, not run" not in first_line


def test_the_stale_note_names_lab_refresh_and_no_copy_is_a_clear_error(course_root, capsys):
    out = _learner_and_author(course_root)
    lab.open_lab("both", root=course_root, out_root=out, start=False)
    note = capsys.readouterr().out
    assert "make lab-refresh" in note and "rm -r" not in note and "保留你的修改" in note
    with pytest.raises(FileNotFoundError, match="make lab COURSE_LANG=zh") as info:
        lab.refresh_lab("zh", root=course_root, log=lambda *_: None)
    assert "还没有课程副本" in str(info.value)


def test_make_lab_refresh_runs_the_refresh(monkeypatch):
    lines = subprocess.run(["make", "--no-print-directory", "-n", "lab-refresh", "COURSE_LANG=zh"], cwd=ROOT,
                           capture_output=True, text=True, check=True, timeout=60).stdout.splitlines()
    (line,) = [ln for ln in lines if "-m authoring.course refresh" in ln]
    assert "--lang 'zh'" in line
    seen = []
    monkeypatch.setattr(course, "refresh_lab", lambda lang: seen.append(lang))
    assert course.main(["refresh", "--lang", "zh"]) == 0 and seen == ["zh"]
    help_text = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=60).stdout
    assert "make lab-refresh" in help_text and "PORT=" in help_text and "make test-binder" in help_text

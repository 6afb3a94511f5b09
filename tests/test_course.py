"""Course tooling: each chapter's MyST source is in sync with its stored notebook, stored notebooks are complete
top-to-bottom runs of their current code, exercises are in sync with solutions, every notebook is bilingual — and
each of these checks fails when a copy is broken on purpose."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

from authoring import copies, exercises, lab, pairing, parity, paths, course
from authoring.paths import ROOT

PAIR = '+++ {{"tags": ["lang-en"]}}\n\n{en}\n\n+++ {{"tags": ["lang-zh"]}}\n\n{zh}\n\n'
CODE = "```{{code-cell}} ipython3\n{src}\n```\n\n"


# ------------------------------------------------------------------ the real course
def test_every_md_source_in_sync_and_every_notebook_fully_executed():
    problems = pairing.stored_problems()
    assert not problems, "\n".join(problems)


def test_every_stored_monolingual_copy_is_current():
    """courses/en/ and courses/zh/: one copy per chapter, solution and exercise, as split() makes it, executed in its
    language from the current code (`make notebooks` keeps them so)."""
    problems = copies.copy_problems()
    assert not problems, "\n".join(problems)


def test_every_chapter_and_solution_has_a_myst_source():
    stored = {p.with_suffix("").relative_to(ROOT) for p in pairing.paired_notebooks()}
    sources = {p.with_suffix("").relative_to(ROOT) for d in paths.PAIRED_DIRS for p in (ROOT / d).glob("*.md")}
    assert stored == sources
    assert not list((ROOT / "exercises").glob("*.md")), "exercises are generated: no .md sources there"


def test_exercises_in_sync_with_solutions():
    stale = exercises.build_exercises(check=True)
    assert not stale, f"run `make notebooks`: {stale}"


def test_exercises_are_not_paired_and_not_marked_executed():
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        meta = nbformat.read(path, as_version=4).metadata
        assert "jupytext" not in meta and "distlearn" not in meta, path.name


def test_every_notebook_is_bilingual():
    problems = parity.parity()
    assert not problems, "\n".join(problems)


def test_every_chapter_has_exercise_and_solution_pairs():
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))
    solutions = {p.stem[:2] for p in (ROOT / "solutions").glob("*.ipynb")}
    missing = [c for c in chapters if c[:2] not in solutions and c[:2] != "00"]
    assert not missing, f"chapters without solutions/: {missing}"


def test_no_stored_notebook_shows_nbval_comments_to_students():
    for path in paths.course_notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            assert "# NBVAL_" not in cell.source, f"{path.name}: use the cell tag, not the comment"


# ------------------------------------------------------------------ broken on purpose
@pytest.fixture
def pair_copy(tmp_path):
    """A copy of chapter 06's .md and stored .ipynb in a temporary folder."""
    for suffix in (".md", ".ipynb"):
        shutil.copy(ROOT / "notebooks" / f"06_zero_fsdp{suffix}", tmp_path / f"06_zero_fsdp{suffix}")
    return tmp_path / "06_zero_fsdp.ipynb"


def test_the_copy_is_clean(pair_copy):
    assert pairing.sync_problems(pair_copy) == []
    assert pairing.execution_problems(nbformat.read(pair_copy, as_version=4), "copy") == []


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]


def test_a_cell_never_executed_is_found(pair_copy):
    nb = nbformat.read(pair_copy, as_version=4)
    cell = _code_cells(nb)[3]
    cell.execution_count, cell.outputs = None, []
    assert any("never executed" in p for p in pairing.execution_problems(nb, "copy"))


def test_a_cell_rerun_out_of_order_is_found(pair_copy):
    nb = nbformat.read(pair_copy, as_version=4)
    _code_cells(nb)[2].execution_count = 40  # re-run by hand after the rest
    assert any("not 1, 2, 3" in p for p in pairing.execution_problems(nb, "copy"))


def test_code_changed_without_a_rerun_is_found(pair_copy):
    nb = nbformat.read(pair_copy, as_version=4)
    _code_cells(nb)[1].source += "\nprint('new')"
    assert any("code changed" in p for p in pairing.execution_problems(nb, "copy"))


def test_an_unexecuted_notebook_is_found(pair_copy):
    nb = nbformat.read(pair_copy, as_version=4)
    for c in nb.cells:
        if c.cell_type == "code":
            c.execution_count, c.outputs = None, []
    assert pairing.execution_problems(nb, "copy")


@pytest.mark.parametrize("edit, what", [
    (lambda t: t.replace("分片", "切片", 1), "source"),
    (lambda t: t.replace('+++ {"tags": ["lang-zh"]}', '+++ {"tags": ["lang-zh", "extra"]}', 1), "metadata/tags"),
    (lambda t: t.replace(':tags: [nbval-ignore-output]\n\n', '', 1), "metadata/tags"),
    (lambda t: t + "\n+++ {\"tags\": [\"lang-en\"]}\n\nOne more cell.\n", "cell count"),
])
def test_md_and_ipynb_out_of_sync_is_found(pair_copy, edit, what):
    md = pairing.source_of(pair_copy)
    text = md.read_text(encoding="utf-8")
    assert edit(text) != text, "the edit did not apply"
    md.write_text(edit(text), encoding="utf-8")
    problems = pairing.sync_problems(pair_copy)
    assert len(problems) == 1 and f"({what}" in problems[0], problems


def test_cells_swapped_are_found(pair_copy):
    nb = nbformat.read(pair_copy, as_version=4)
    nb.cells[0], nb.cells[1] = nb.cells[1], nb.cells[0]
    nbformat.write(nb, pair_copy)
    assert pairing.sync_problems(pair_copy)


def test_missing_md_source_is_found(pair_copy):
    pairing.source_of(pair_copy).unlink()
    assert "no MyST source" in pairing.sync_problems(pair_copy)[0]


def test_a_prose_fix_in_the_md_is_a_one_line_change_in_the_ipynb(pair_copy):
    """Edit one line of Chinese prose in the .md, run the sync that `make notebooks` runs: the .ipynb changes by
    exactly that line, keeps its outputs and cell ids, and needs no re-execution."""
    md = pairing.source_of(pair_copy)
    before_nb = pair_copy.read_text(encoding="utf-8").splitlines()
    old_nb = nbformat.read(pair_copy, as_version=4)
    text = md.read_text(encoding="utf-8")
    md.write_text(text.replace("单位：字节；", "单位为字节；", 1), encoding="utf-8")
    pairing.sync(md)
    after_nb = pair_copy.read_text(encoding="utf-8").splitlines()
    changed = [(a, b) for a, b in zip(before_nb, after_nb) if a != b]
    assert len(before_nb) == len(after_nb) and len(changed) == 1 and "单位为字节" in changed[0][1], changed
    new_nb = nbformat.read(pair_copy, as_version=4)
    assert [c.id for c in new_nb.cells] == [c.id for c in old_nb.cells]
    assert pairing.execution_problems(new_nb, "copy") == [] and pairing.sync_problems(pair_copy) == []


def test_cell_ids_survive_an_inserted_cell(pair_copy):
    md = pairing.source_of(pair_copy)
    old_ids = [c.id for c in nbformat.read(pair_copy, as_version=4).cells]
    text = md.read_text(encoding="utf-8")
    marker = "```{code-cell} ipython3"
    at = text.index(marker)
    md.write_text(text[:at] + CODE.format(src="x = 1") + text[at:], encoding="utf-8")
    pairing.sync(md)
    new_ids = [c.id for c in nbformat.read(pair_copy, as_version=4).cells]
    assert len(new_ids) == len(old_ids) + 1 and set(old_ids) <= set(new_ids)


@pytest.mark.slow
def test_nbval_fails_on_a_stored_number_that_no_longer_matches(tmp_path):
    """A printed number in a stored notebook that the package no longer computes is caught by nbval (``make
    test``'s notebook pass). Two copies of chapter 02 cut down to its imports and the cell that prints the ring's
    bytes per rank (so the check runs in seconds, not the chapter's minute): the untouched copy passes, the copy
    with one stored number changed fails — both in one nbval run."""
    nb = nbformat.read(ROOT / "notebooks" / "02_collectives.ipynb", as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    printing = next(c for c in code if "bytes_sent.tolist()" in c.source)
    assert "nbval-ignore-output" not in printing.metadata.get("tags", [])
    imports = [c for c in code[:code.index(printing)] if c.source.lstrip().startswith(("import ", "from "))]
    nb.cells = imports + [printing]
    nbformat.write(nb, tmp_path / "good.ipynb")
    out = printing.outputs[0]
    label = "bytes sent per rank / 每个 rank 发送的字节数: ["
    i = out.text.index(label) + len(label)          # the first digit of rank 0's byte count, computed by comm
    out.text = out.text[:i] + str((int(out.text[i]) + 1) % 10) + out.text[i + 1:]
    nbformat.write(nb, tmp_path / "bad.ipynb")
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", "-p", "no:cacheprovider", "-p", "nbval.plugin", "--nbval",
           "--nbval-current-env",
           "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), "-o", "addopts=",
           "--rootdir", str(tmp_path), "good.ipynb", "bad.ipynb"]
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # nbval alone (-p above): the other plugins cost ~1 s
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env)
    failed = [line for line in run.stdout.splitlines() if line.startswith("FAILED")]
    passed = 2 * len(nb.cells) - 1                  # every cell of both copies but the tampered one
    assert run.returncode == 1 and f"1 failed, {passed} passed" in run.stdout, run.stdout[-2000:]
    assert len(failed) == 1 and failed[0].startswith("FAILED bad.ipynb::"), run.stdout[-2000:]


# ------------------------------------------------------------------ stored monolingual copies, broken on purpose
COPIED = "06_zero_fsdp"


@pytest.fixture
def copies_root(tmp_path):
    """A course of one chapter (06, its solution and exercise) and its stored copies in both languages."""
    for d in ("notebooks", "solutions", "exercises"):
        rel = f"{d}/{COPIED}.ipynb"
        (tmp_path / d).mkdir()
        shutil.copy(ROOT / rel, tmp_path / rel)
        for lang in paths.COPY_LANGS:
            target = copies.copy_path(rel, lang, tmp_path)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(copies.copy_path(rel, lang), target)
    return tmp_path


def _edit(path, change):
    nb = nbformat.read(path, as_version=4)
    change(nb)
    nbformat.write(nb, path)


def _prose(nb, lang):
    return next(c for c in nb.cells if c.cell_type == "markdown" and f"lang-{lang}" in c.metadata.get("tags", []))


def test_the_copies_are_clean(copies_root):
    assert copies.copy_problems(copies_root) == []


def _untag(nb):
    cell = next(c for c in nb.cells if c.metadata.get("tags"))
    cell.metadata["tags"] = cell.metadata["tags"][1:]


@pytest.mark.parametrize("where, change, found", [
    ("copy", lambda nb: _prose(nb, "zh").__setitem__("source", _prose(nb, "zh").source + "\n手改。"), "(source"),
    ("source", lambda nb: _prose(nb, "zh").__setitem__("source", _prose(nb, "zh").source + "\n新句子。"), "(source"),
    ("copy", _untag, "(metadata/tags"),
    ("copy", lambda nb: nb.cells.pop(), "(cell count"),
    ("copy", lambda nb: _code_cells(nb)[3].__setitem__("execution_count", None), "never executed"),
    ("copy", lambda nb: _code_cells(nb)[2].__setitem__("execution_count", 40), "not 1, 2, 3"),
    ("copy", lambda nb: nb.metadata.distlearn.__setitem__("executed_code", "0" * 16), "code changed"),
    ("copy", lambda nb: nb.metadata.distlearn.__setitem__("language", "en"), "not marked"),
])
def test_a_copy_out_of_line_with_the_course_is_found(copies_root, where, change, found):
    rel = f"notebooks/{COPIED}.ipynb"
    _edit(copies_root / rel if where == "source" else copies.copy_path(rel, "zh", copies_root), change)
    problems = copies.copy_problems(copies_root)
    assert problems and all(f"courses/zh/{rel}" in p for p in problems), problems
    assert any(found in p for p in problems), problems


def test_a_missing_extra_or_executed_exercise_copy_is_found(copies_root):
    copies.copy_path(f"solutions/{COPIED}.ipynb", "en", copies_root).unlink()
    shutil.copy(copies.copy_path(f"notebooks/{COPIED}.ipynb", "en", copies_root),
                copies_root / "courses" / "en" / "notebooks" / "99_gone.ipynb")
    exercise = copies.copy_path(f"exercises/{COPIED}.ipynb", "zh", copies_root)
    _edit(exercise, lambda nb: _code_cells(nb)[0].__setitem__(
        "outputs", [nbformat.v4.new_output("stream", name="stdout", text="x\n")]))
    problems = copies.copy_problems(copies_root)
    assert len(problems) == 3, problems
    for found in ("no stored en copy", "stores outputs", "99_gone.ipynb: no such notebook"):
        assert sum(found in p for p in problems) == 1, (found, problems)


def test_a_prose_fix_updates_the_copies_without_executing(copies_root):
    """A Chinese prose edit (as `make notebooks` sees it after syncing the pair): the zh copies change by that
    prose only and keep their outputs, the en copies do not change at all, nothing is executed."""
    rel = f"notebooks/{COPIED}.ipynb"
    zh_copy, en_copy = (copies.copy_path(rel, lang, copies_root) for lang in ("zh", "en"))
    before_zh, before_en = zh_copy.read_text(encoding="utf-8"), en_copy.read_text(encoding="utf-8")
    _edit(copies_root / rel, lambda nb: _prose(nb, "zh").__setitem__("source", _prose(nb, "zh").source + "\n新句子。"))
    assert copies.copy_problems(copies_root)
    assert copies.update_copies(copies_root, log=lambda *_: None) == []
    assert copies.copy_problems(copies_root) == []
    assert en_copy.read_text(encoding="utf-8") == before_en
    import difflib

    diff = [ln for ln in difflib.unified_diff(before_zh.splitlines(), zh_copy.read_text(encoding="utf-8").splitlines(),
                                              lineterm="", n=0) if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
    # the cell's last source line gains its "\n" and the new line follows: nothing else of the copy changes
    assert len(diff) == 3 and "新句子" in diff[-1], diff
    assert pairing.execution_problems(nbformat.read(zh_copy, as_version=4), "copy") == []


def test_lab_in_one_language_opens_the_stored_copy_when_current(copies_root, monkeypatch):
    """`make lab COURSE_LANG=zh`: a current stored copy is copied to build/course-zh/ (no execution); a copy that is
    not current falls back to writing and executing the course in that language (split_course)."""
    executed = []
    monkeypatch.setattr(lab, "split_course", lambda lang, out, root, **kw: executed.append((lang, out)))
    out = lab.open_lab("zh", root=copies_root, start=False)
    assert out == copies_root / "build" / "course-zh" and executed == []
    for d in ("notebooks", "solutions", "exercises"):
        rel = f"{d}/{COPIED}.ipynb"
        assert (out / rel).read_bytes() == copies.copy_path(rel, "zh", copies_root).read_bytes()
    copies.copy_path(f"notebooks/{COPIED}.ipynb", "en", copies_root).unlink()  # the en copy is not current
    out_en = lab.open_lab("en", root=copies_root, start=False)
    assert executed == [("en", out_en)]


def test_lab_in_one_language_speaks_it_in_jupyterlabs_own_menus(tmp_path):
    """`make lab COURSE_LANG=zh` starts JupyterLab with its own settings folder in the copy, whose translation
    setting asks for the Chinese language pack (a dependency: its "Edit" menu is 编辑). The bilingual copy has its
    own settings folder too, with no locale until the reader chooses one in the language switch
    (tests/test_language_memory.py, and tests/test_browser.py in a real browser)."""
    import json

    from jupyterlab_server.translation_utils import get_language_pack

    env = lab.lab_environment("zh", tmp_path)
    settings = Path(env["JUPYTERLAB_SETTINGS_DIR"])
    assert settings == tmp_path / lab.LAB_SETTINGS_DIR and env["DISTLEARN_LANG"] == "zh"
    assert json.loads((settings / lab.TRANSLATION_SETTINGS).read_text()) == {"locale": "zh_CN"}
    assert get_language_pack("zh_CN")[0]["jupyterlab"]["Edit"] == ["编辑"]
    en = lab.lab_environment("en", tmp_path / "en")
    assert json.loads((Path(en["JUPYTERLAB_SETTINGS_DIR"]) / lab.TRANSLATION_SETTINGS).read_text()) == {
        "locale": "en"}
    both = lab.lab_environment("both", tmp_path / "both")
    assert both == {"DISTLEARN_LANG": "both", "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "both" / lab.LAB_SETTINGS_DIR),
                    "DISTLEARN_LAB_DIR": str(tmp_path / "both")}
    assert not (tmp_path / "both" / lab.LAB_SETTINGS_DIR / lab.TRANSLATION_SETTINGS).exists()
    assert lab.lab_options("zh", tmp_path) == [] and "--LabApp.custom_css=True" in lab.lab_options("both", tmp_path)


# ------------------------------------------------------------------ tools on small notebooks
def test_strip_solutions_keeps_signature_and_indent():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n\nanswer = 1"
    out = exercises.strip_solutions(src)
    assert out == f"def f(x):\n    {paths.PLACEHOLDER}\n\nanswer = 1"


@pytest.mark.parametrize("src", ["### BEGIN SOLUTION\nx", "x\n### END SOLUTION", "### BEGIN SOLUTION\n### BEGIN SOLUTION"])
def test_strip_solutions_rejects_bad_markers(src):
    with pytest.raises(ValueError):
        exercises.strip_solutions(src)


def test_parity_finds_a_missing_partner_and_heading_mismatch():
    nb = pairing.from_myst(PAIR.format(en="# A\n## B", zh="# 甲") + CODE.format(src="1")
                          + '+++ {"tags": ["lang-en"]}\n\norphan\n')
    problems = parity.parity_problems(nb, "x")
    assert any("headings" in p for p in problems)
    assert any("no Chinese partner" in p for p in problems)


def test_split_keeps_one_language_and_all_code():
    nb = pairing.from_myst(PAIR.format(en="Hello", zh="你好") + CODE.format(src="x = 1"))
    zh = copies.split(nb, "zh")
    assert [c.source for c in zh.cells] == ["你好", copies.language_cell_source("zh"), "x = 1"]
    assert zh.metadata["distlearn"]["language"] == "zh"
    assert copies.split(nb, "zh_CN").metadata["distlearn"]["language"] == "zh"  # as people write it
    with pytest.raises(ValueError):
        copies.split(nb, "fr")


def test_myst_keeps_tags_of_code_cells():
    nb = pairing.from_myst("```{code-cell} ipython3\n:tags: [nbval-ignore-output]\n\nx = 1\n```\n")
    assert nb.cells[0].metadata["tags"] == ["nbval-ignore-output"] and nb.cells[0].source == "x = 1"
    assert "nbval-ignore-output" in jupytext.writes(nb, fmt=paths.MYST)


def test_a_new_chapter_source_becomes_an_executed_notebook(tmp_path, monkeypatch):
    """`make notebooks` on a course with a new .md and no .ipynb: the check names it, then the tool creates the
    paired notebook, executes it, and the check is clean. Then which notebooks a second, a forced and a
    copies-only run execute (those runs record what they would execute instead of starting kernels)."""
    for d in ("notebooks", "solutions", "exercises"):
        (tmp_path / d).mkdir()
    md = tmp_path / "notebooks" / "99_new.md"
    md.write_text("---\njupytext:\n  formats: ipynb,md:myst\nkernelspec:\n  display_name: Python 3 (ipykernel)\n"
                  "  language: python\n  name: python3\n---\n\n" + PAIR.format(en="# New", zh="# 新")
                  + CODE.format(src="from distlearn.core.i18n import bi\nprint(bi('answer', '答案'), 6 * 7)"),
                  encoding="utf-8")
    assert any("no stored notebook" in p for p in pairing.stored_problems(tmp_path))
    ran = course.update_notebooks(root=tmp_path, log=lambda *_: None)
    rel = "notebooks/99_new.ipynb"
    assert ran == [tmp_path / rel] + [copies.copy_path(rel, lang, tmp_path) for lang in paths.COPY_LANGS]
    assert pairing.stored_problems(tmp_path) == [] and copies.copy_problems(tmp_path) == []
    nb = nbformat.read(ran[0], as_version=4)
    assert nb.cells[-1].outputs[0].text == "answer / 答案 42\n" and nb.metadata.jupytext.formats == paths.FORMATS
    for path, printed in zip(ran[1:], ("answer 42\n", "答案 42\n")):  # each copy executed in its own language
        assert nbformat.read(path, as_version=4).cells[-1].outputs[0].text == printed
    # From here on an "execution" records the path and puts back what the real one stored, as a re-run of
    # unchanged code would: each run must then execute exactly what it names, and nothing else is left to redo.
    stored = {p.resolve(): p.read_bytes() for p in ran}
    executed = []

    def fake(path, *args, **kwargs):
        executed.append(Path(path).resolve())
        Path(path).write_bytes(stored[Path(path).resolve()])

    monkeypatch.setattr(course, "execute", fake)
    monkeypatch.setattr(copies, "execute_copy", fake)
    resolved = list(stored)  # the paths of ran, resolved, in its order
    assert course.update_notebooks(root=tmp_path, log=lambda *_: None) == []  # nothing changed: nothing runs
    assert executed == []
    assert course.update_notebooks(root=tmp_path, force=["99_new"], log=lambda *_: None) == ran  # forced: copies too
    assert executed == resolved
    executed.clear()
    assert course.update_notebooks(root=tmp_path, log=lambda *_: None) == [] and executed == []
    assert course.update_notebooks(root=tmp_path, force_copies=["99_new"], log=lambda *_: None) == ran[1:]
    assert executed == resolved[1:]


@pytest.mark.parametrize("lab_args", ["--no-browser", "--no-browser --ip=0.0.0.0", ""])
def test_make_lab_in_one_language_passes_any_lab_args(monkeypatch, lab_args):
    """`make lab COURSE_LANG=zh LAB_ARGS=--no-browser`: one option alone must reach JupyterLab, not be taken by
    argparse for an option of its own (it was: "--lab-args: expected one argument")."""
    import shlex
    import subprocess

    lines = subprocess.run(["make", "--no-print-directory", "-n", "lab", "COURSE_LANG=zh", f"LAB_ARGS={lab_args}"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.splitlines()
    (out,) = [ln for ln in lines if "-m authoring.course lab" in ln]   # under `make test` make also says where it is
    argv = shlex.split(out)
    assert argv[1:3] == ["-m", "authoring.course"], out
    seen = {}
    monkeypatch.setattr(course, "open_lab", lambda lang, port, lab_args="": seen.update(lang=lang, lab_args=lab_args))
    assert course.main(argv[3:]) in (0, None)
    assert seen == {"lang": "zh", "lab_args": lab_args}


def test_a_port_in_lab_args_wins_over_make_labs_own(monkeypatch, tmp_path):
    """A new user ran `make lab LAB_ARGS="--no-browser --port 8892"` (the README's headless form with a port) and
    JupyterLab refused to start: "port only accepts one value, got 2". JupyterLab gets one port: LAB_ARGS's if it
    has one, else PORT."""
    from authoring import lab

    assert lab.port_given(["--no-browser", "--port", "8892"]) and lab.port_given(["--port=8892"])
    assert lab.port_given(["--ServerApp.port=8892"]) and not lab.port_given(["--no-browser", "--ip=0.0.0.0"])
    # open_lab sets the server's environment just before execv: keep it out of this test process
    monkeypatch.setattr(lab.os, "environ", dict(lab.os.environ))
    for args, ports in (("--no-browser --port 8892", ["8892"]), ("--no-browser", ["8888"])):
        seen = {}
        monkeypatch.setattr(lab.os, "execv", lambda exe, cmd: seen.update(cmd=cmd))
        lab.open_lab("both", 8888, out_root=tmp_path / "course", lab_args=args)
        cmd = seen["cmd"]
        assert [cmd[i + 1] for i, w in enumerate(cmd) if w == "--port"] == ports, cmd


def test_make_lab_in_both_languages_opens_a_copy_not_the_tracked_notebooks(tmp_path):
    """The README's promise: running the course never rewrites tracked notebooks. A new user found that the plain
    `make lab` opened notebooks/00_welcome.ipynb in the repository; it now opens a copy in build/course/."""
    from authoring import lab
    from authoring.paths import course_notebooks

    root = Path(__file__).resolve().parents[1]
    out = lab.open_lab("both", out_root=tmp_path / "course", start=False)
    assert out == tmp_path / "course"
    copied = sorted(p.relative_to(out) for p in out.glob("*/*.ipynb"))
    assert copied == sorted(p.relative_to(root) for p in course_notebooks(root))
    lines = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=root, capture_output=True, text=True,
                           timeout=60).stdout.splitlines()
    (line,) = [ln for ln in lines if "-m authoring.course lab" in ln]
    assert "--lang 'both'" in line

"""The monolingual copies ``courses/en/`` and ``courses/zh/``: :func:`split` keeps one language's prose, the copies
of chapters and solutions are executed in that language (:func:`update_copies`) and checked (:func:`copy_problems`);
:func:`split_course` writes a copy of the whole course elsewhere (``make split``)."""
from __future__ import annotations

from pathlib import Path

import nbformat

from authoring import lang_audit
from authoring.comments import code_in
from authoring.pairing import cell_key, code_fingerprint, execution_problems, first_difference, strip_volatile
from authoring.parity import cell_language
from authoring.paths import (COPIES_DIR, COPY_LANGS, NB_VERSION, PAIRED_DIRS, PLACEHOLDER, PLACEHOLDER_IN, ROOT,
                            course_notebooks)

# ---------------------------------------------------------------- split
SWITCH_CALL = "language_switch()"
LANGUAGE_CELL_ID = "distlearn-set-language"


def language_cell_source(lang: str) -> str:
    """The first code cell of a monolingual copy: it sets the copy's language for everything the code prints."""
    return f'import distlearn\n\ndistlearn.set_language("{lang}")'


def split(nb, lang: str) -> nbformat.NotebookNode:
    """A monolingual copy: the prose cells of ``lang`` (``"en"``, ``"zh"`` or any form :func:`distlearn.core.i18n.
    normalize_language` accepts) and every code cell, the chapter's language switch replaced by a cell that sets
    ``lang`` (inserted after the first prose cell when the notebook has no switch), stored outputs cleared (they
    were computed in both languages: :func:`split_course` re-executes the copy), and each bilingual code comment
    ``# English / 中文`` cut to ``lang``'s half (:func:`code_in`)."""
    from distlearn.core.i18n import normalize_language

    lang = normalize_language(lang)
    if lang not in ("en", "zh"):
        from distlearn.core.validate import DistlearnValueError

        raise DistlearnValueError("lang", f"a monolingual copy is in 'en' or 'zh', got {lang!r}",
                                  f"单语副本只能是 'en' 或 'zh'，收到 {lang!r}", bilingual=True)
    out = nbformat.from_dict(nb)
    out.cells = [c for c in out.cells if c.cell_type != "markdown" or cell_language(c) in (lang, None)]
    setter = nbformat.v4.new_code_cell(language_cell_source(lang))
    switch = next((i for i, c in enumerate(out.cells) if c.cell_type == "code" and SWITCH_CALL in c.source), None)
    if switch is not None:
        out.cells[switch] = setter
    else:
        first_prose = next((i for i, c in enumerate(out.cells) if c.cell_type == "markdown"), -1)
        out.cells.insert(first_prose + 1, setter)
    if out.get("nbformat_minor", 0) < 5:  # cells without ids: the new cell has none either
        setter.pop("id", None)
    else:  # the same id on every split: a stored copy does not change when nothing else did
        setter["id"] = LANGUAGE_CELL_ID
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.source = code_in(cell.source, lang).replace(PLACEHOLDER, PLACEHOLDER_IN[lang])
    out.metadata.pop("jupytext", None)  # a copy is not paired with the course's sources
    out.metadata.setdefault("distlearn", {}).pop("executed_code", None)
    out.metadata["distlearn"]["language"] = lang
    return out



# ---------------------------------------------------------------- stored monolingual copies (courses/<lang>/)
# courses/en/ and courses/zh/ hold, for every chapter, solution and exercise, the copy split() makes in that
# language; the chapters' and solutions' copies are executed under DISTLEARN_LANG=<lang>, so their stored outputs
# (printed lines, tables, figures, explorer pictures) are in that language. They are derived files, like exercises/:
# `make notebooks` keeps them current, `make check` reports one that is not. The website (authoring.website) shows
# them, `make lab COURSE_LANG=zh` opens them, and tests/test_language_outputs.py audits them without running them.
def copy_path(path: str | Path, lang: str, root: Path = ROOT) -> Path:
    """The stored ``lang`` copy of a course notebook: ``notebooks/05_x.ipynb`` → ``courses/zh/notebooks/05_x.ipynb``
    (``path`` absolute, under ``root``, or relative to it)."""
    path = Path(path)
    rel = path.relative_to(root) if path.is_absolute() else path
    return Path(root) / COPIES_DIR / lang / rel


def _is_exercise(path: Path) -> bool:
    return Path(path).parent.name not in PAIRED_DIRS


def _named(path: Path, root: Path, names) -> bool:
    rel = path.relative_to(root)
    return bool({path.stem, str(rel), rel.with_suffix("").as_posix()} & set(names or ()))


def execute_copy(target: str | Path, lang: str, timeout: int = 600):
    """Execute the monolingual copy at ``target`` top to bottom under ``DISTLEARN_LANG=lang`` and store it in place:
    its outputs, the fingerprint of its code (:func:`execution_problems`) and, in ``metadata.distlearn.shown``, what a
    reader sees that the stored outputs do not hold as text — every figure's texts (titles, labels, ticks, legends,
    recorded by :data:`authoring.lang_audit.KERNEL_HOOK`) and every widget's labels (from the widget state, which is
    not stored) — so that :func:`authoring.lang_audit.stored_report` audits the copy without running it.
    Returns the executed notebook."""

    target = Path(target)
    nb, records = lang_audit.execute_audited(target, lang, timeout=timeout, write=False)
    _store_copy(nb, records, target)
    return nb


def _store_copy(nb, records, target: Path) -> None:
    """Write an executed copy with what the audit needs and the fingerprint of the code it ran."""

    widgets = [[ln.where, ln.text] for ln in lang_audit.widget_lines(nb)]
    strip_volatile(nb)
    meta = nb.metadata.setdefault("distlearn", {})
    meta["executed_code"] = code_fingerprint(nb)
    meta["shown"] = {"plots": records, "widgets": widgets}
    nbformat.write(nb, target)


def carry_outputs(want, have) -> bool:
    """Give ``want`` (a fresh :func:`split` of the course notebook) the stored outputs of ``have`` (its stored copy)
    when ``have`` is a complete run of the same code (:func:`execution_problems` empty, same fingerprint): a prose,
    tag or metadata edit then updates the copy without executing it. Returns whether it did (``want`` is changed)."""
    meta = have.metadata.get("distlearn", {})
    if execution_problems(have) or meta.get("executed_code") != code_fingerprint(want):
        return False
    want_code = [c for c in want.cells if c.cell_type == "code"]
    have_code = [c for c in have.cells if c.cell_type == "code"]
    if len(want_code) != len(have_code):
        return False
    for w, h in zip(want_code, have_code):
        w.outputs, w.execution_count = h.get("outputs", []), h.get("execution_count")
    want.metadata["distlearn"] = {**meta, "language": want.metadata["distlearn"]["language"]}
    return True


def _write_if_changed(nb, path: Path) -> bool:
    text = nbformat.writes(nb)
    text += "" if text.endswith("\n") else "\n"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def update_copies(root: Path = ROOT, langs: tuple[str, ...] = COPY_LANGS, executed=(), force=(),
                  log=print, only=None) -> list[Path]:
    """Bring the stored copies ``courses/<lang>/`` in line with the course (what ``make notebooks`` does after the
    course itself): every copy is rewritten as :func:`split` makes it; a chapter's or solution's copy keeps its
    stored outputs when its code is unchanged and it is complete (:func:`carry_outputs`: a prose-only edit executes
    nothing), and is executed in its language (:func:`execute_copy`) when it is missing, incomplete, its code
    changed, or its course notebook is in ``executed`` (paths just re-executed) or named in ``force`` (stems or
    paths as for ``make notebooks``). Exercise copies are not executed. A copy whose course notebook is gone is
    deleted. ``only``: just the course notebooks with these stems or paths (nothing deleted). Returns the copies
    executed."""
    from distlearn.core.i18n import bi

    root = Path(root)
    executed = {Path(p).resolve() for p in executed}
    sources = [p for p in course_notebooks(root) if only is None or _named(p, root, only)]
    ran = []
    for lang in langs:
        wanted = set()
        for path in sources:
            target = copy_path(path, lang, root)
            wanted.add(target)
            target.parent.mkdir(parents=True, exist_ok=True)
            want = split(nbformat.read(path, as_version=NB_VERSION), lang)
            if _is_exercise(path):
                _write_if_changed(want, target)
                continue
            forced = path.resolve() in executed or _named(path, root, force)
            if not forced and target.exists() and carry_outputs(want, nbformat.read(target, as_version=NB_VERSION)):
                _write_if_changed(want, target)
                continue
            rel = target.relative_to(root)
            log(bi(f"executing {rel} in {lang} ...", f"正在以 {lang} 执行 {rel} ……"))
            nbformat.write(want, target)
            execute_copy(target, lang)
            ran.append(target)
        for extra in (_orphan_copies(root, lang, wanted) if only is None else []):
            log(bi(f"removing {extra.relative_to(root)} (no such notebook in the course)",
                   f"删除 {extra.relative_to(root)}（课程中已没有这个笔记本）"))
            extra.unlink()
    return ran


def _orphan_copies(root: Path, lang: str, wanted: set[Path]) -> list[Path]:
    """The stored ``lang`` copies that are not in ``wanted`` (their course notebook is gone)."""
    return [p for p in sorted((root / COPIES_DIR / lang).glob("*/*.ipynb")) if p not in wanted]


def copy_problems(root: Path = ROOT, langs: tuple[str, ...] = COPY_LANGS, paths=None) -> list[str]:
    """Why the stored copies ``courses/<lang>/`` are not current: a copy missing, one whose cells (type, source,
    tags and other metadata, order) differ from what :func:`split` makes of its course notebook, one not marked with
    its language, a chapter's or solution's copy that is not a complete run of its current code (the rule of
    :func:`execution_problems`), an exercise's copy with outputs, a copy with no course notebook. ``paths``: only
    these course notebooks (relative to ``root``), e.g. the pages of a website build. Empty when all are current."""
    root = Path(root)
    sources = course_notebooks(root) if paths is None else [root / p for p in paths]
    fix = "run `make notebooks` / 请运行 `make notebooks`"
    problems = []
    for lang in langs:
        for path in sources:
            target = copy_path(path, lang, root)
            rel = target.relative_to(root)
            if not target.exists():
                problems.append(f"{rel}: no stored {lang} copy of {path.relative_to(root)}; {fix}")
                continue
            have = nbformat.read(target, as_version=NB_VERSION)
            want = split(nbformat.read(path, as_version=NB_VERSION), lang)
            a, b = [cell_key(c) for c in have.cells], [cell_key(c) for c in want.cells]
            if a != b:
                where, what, zh = first_difference(a, b)
                problems.append(f"{rel}: not in sync with {path.relative_to(root)} at cell {where} ({what}; "
                                f"{len(a)} vs {len(b)} cells) / 与源笔记本在第 {where} 个单元格不一致（{zh}）; {fix}")
            if have.metadata.get("distlearn", {}).get("language") != lang:
                problems.append(f"{rel}: not marked as the {lang} copy (metadata distlearn.core.language) / "
                                f"未标记为 {lang} 副本; {fix}")
            if _is_exercise(path):
                if any(c.get("outputs") for c in have.cells if c.cell_type == "code"):
                    problems.append(f"{rel}: an exercise's copy stores outputs / 练习的副本不应保存输出; {fix}")
            else:
                problems += [f"{p}; {fix}" if "make notebooks" not in p else p
                             for p in execution_problems(have, str(rel))]
        if paths is None:
            wanted = {copy_path(p, lang, root) for p in sources}
            problems += [f"{extra.relative_to(root)}: no such notebook in the course / 课程中没有这个笔记本; {fix}"
                         for extra in _orphan_copies(root, lang, wanted)]
    return problems


def split_course(lang: str, out_root: Path, root: Path = ROOT, execute_copies: bool = True, log=print,
                 audit: list | None = None) -> list[Path]:
    """Write monolingual copies of every chapter, solution and exercise under ``out_root`` (same folders as the
    course, so links between them work) and, with ``execute_copies``, re-execute the chapters and solutions under
    ``DISTLEARN_LANG=lang`` so their stored outputs are in that language too (exercises have no outputs).

    Every execution is also audited (:mod:`authoring.lang_audit`: every printed line, plot text and widget label);
    pass a list as ``audit`` to receive the reports — one for each chapter and solution, and one for each exercise,
    run as shipped so its failing checks show their feedback (the exercise copy itself is written without outputs).
    Returns the paths written."""
    from distlearn.core.i18n import bi, normalize_language

    lang = normalize_language(lang)
    written = []
    for path in course_notebooks(root):
        target = Path(out_root) / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(split(nbformat.read(path, as_version=NB_VERSION), lang), target)
        written.append(target)
    if not execute_copies:
        return written
    for target in written:
        exercise = target.parent.name not in PAIRED_DIRS
        if exercise and audit is None:
            continue
        log(bi(f"executing {target} in {lang} ...", f"正在以 {lang} 执行 {target} ……"))
        nb, records = lang_audit.execute_audited(target, lang, write=False, allow_errors=exercise)
        if audit is not None:
            rel = target.relative_to(out_root).with_suffix("").as_posix()
            audit.append(lang_audit.Report(rel, lang, lang_audit.notebook_lines(nb, records)))
        if not exercise:  # stored as execute_copy stores a copy of courses/<lang>/
            _store_copy(nb, records, target)
    return written

"""JupyterLab on a copy of the course (``make lab``, ``make lab COURSE_LANG=zh``): its locale, its settings folder,
the server, and the refresh of a copy from a newer course (``make lab-refresh``, rules in :mod:`authoring.refresh`)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


from authoring.copies import copy_problems, split_course
from authoring.paths import COPIES_DIR, ROOT, course_notebooks
from authoring.refresh import copy_is_behind, record_copy, refresh_copy
from distlearn.core import i18n, language

def _copy_is_stale(out_root: Path, root: Path, lang: str = "both") -> bool:
    """Whether the course (for ``lang``: :func:`course_sources`) is newer than the copy ``out_root``: by the copy's
    record of what it was made from (:func:`authoring.refresh.copy_is_behind`), or, for a copy without one, by
    modification times."""
    behind = copy_is_behind(out_root, course_sources(lang, root))
    if behind is not None:
        return behind
    sources = [p for p in course_notebooks(root)]
    copies = [Path(out_root) / p.parent.name / p.name for p in sources]
    if not all(c.exists() for c in copies):
        return True
    return max(p.stat().st_mtime for p in sources) > min(c.stat().st_mtime for c in copies)


def course_sources(lang: str, root: Path = ROOT) -> dict[str, Path]:
    """What a learner's copy in ``lang`` is made and refreshed from: relative path in the copy → notebook; the
    course's notebooks for ``"both"``, the stored copies ``courses/<lang>/`` for ``"en"`` or ``"zh"``."""
    if lang not in ("en", "zh"):
        return {p.relative_to(root).as_posix(): p for p in course_notebooks(root)}
    stored = Path(root) / COPIES_DIR / lang
    return {p.relative_to(stored).as_posix(): p for p in sorted(stored.glob("*/*.ipynb"))}


def _note_if_stale(out_root: Path, root: Path, again: str, origin: tuple[str, str], lang: str = "both") -> None:
    """Say how to bring in the course's changes when the copy ``out_root`` (kept: it may hold the reader's edits) is
    older than the course: ``again`` is the command that opens it (``make lab ...``), whose refresh is
    ``make lab-refresh ...`` (:func:`refresh_lab`); ``origin`` is what it is refreshed from (English, Chinese)."""
    from distlearn.core.i18n import bi

    if _copy_is_stale(out_root, root, lang):
        refresh = again.replace("make lab", "make lab-refresh", 1)
        print(bi(f"Note: {out_root} is older than the course. To bring in the changes of {origin[0]} and keep "
                 f"your edits: {refresh}, then {again}",
                 f"注意：{out_root} 比课程本身旧。如需拿到{origin[1]}的更新并保留你的修改：先运行 {refresh}，"
                 f"再运行 {again}"), flush=True)


_LANG_ZH = {"en": "英文", "zh": "中文"}


# JupyterLab's own interface language: the language pack jupyterlab-language-pack-zh-CN (a dependency) and the
# translation extension's "locale" setting, in a settings folder of the copy's own (distlearn.core.language
# defines the layout: the bilingual copy's language switch writes there too)
LAB_LOCALES, LAB_SETTINGS_DIR, TRANSLATION_SETTINGS = language.LAB_LOCALES, language.LAB_SETTINGS_DIR, \
    language.TRANSLATION_SETTINGS


def lab_environment(lang: str, out_root: Path) -> dict[str, str]:
    """Environment variables JupyterLab starts with for the course in ``lang`` (``"en"``, ``"zh"`` or ``"both"``):
    ``DISTLEARN_LANG`` and ``JUPYTERLAB_SETTINGS_DIR`` = ``out_root/.jupyterlab-settings`` (your JupyterLab
    settings for that copy are kept there).

    For one language this writes the translation extension's setting ``{"locale": "zh_CN"}`` (or ``"en"``) there,
    so that JupyterLab's menus, dialogs and status bar speak the course's language too. For both languages it
    also sets ``DISTLEARN_LAB_DIR`` = ``out_root``, where the language switch remembers the reader's choice for
    the next page load (:func:`distlearn.core.language.remember`: the locale, and which prose a notebook opens
    with); before any choice (no ``out_root/.distlearn-language``) it writes the "both languages" state, and
    keeps the reader's choice otherwise."""
    settings = Path(out_root) / LAB_SETTINGS_DIR
    env = {"DISTLEARN_LANG": lang, "JUPYTERLAB_SETTINGS_DIR": str(settings)}
    if lang in LAB_LOCALES:
        path = settings / TRANSLATION_SETTINGS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"locale": LAB_LOCALES[lang]}, indent=2) + "\n", encoding="utf-8")
    else:
        env[i18n.LAB_DIR_ENV] = str(out_root)
        if not (Path(out_root) / i18n.CHOICE_FILE).is_file():
            language.write_lab_language("both", out_root)
    return env


def lab_options(lang: str, out_root: Path) -> list[str]:
    """JupyterLab options for the course in ``lang``: for both languages, load the copy's ``custom.css``
    (``out_root/.jupyterlab-custom/``, written by :func:`distlearn.core.language.write_lab_language`) in place of
    the one in your Jupyter config folder; none for one language."""
    if lang in LAB_LOCALES:
        return []
    return ["--LabApp.custom_css=True",
            f"--ServerApp.tornado_settings=static_custom_path={Path(out_root) / language.LAB_CUSTOM_DIR}"]


def port_given(args: list[str]) -> bool:
    """Whether JupyterLab options ``args`` set the port themselves (``--port 8892``, ``--port=8892``,
    ``--ServerApp.port=8892``)."""
    return any(a == "--port" or a.startswith(("--port=", "--ServerApp.port")) for a in args)


def _record(out_root: Path) -> None:
    """Record what the new copy ``out_root`` was made from (its notebooks as written), for :func:`refresh_lab`."""
    record_copy(out_root, {p.relative_to(out_root).as_posix(): p for p in sorted(Path(out_root).glob("*/*.ipynb"))})


def copy_folder(lang: str, root: Path = ROOT) -> Path:
    """Where ``make lab`` keeps the learner's copy: ``build/course/`` (``lang`` ``"both"``), ``build/course-<lang>/``."""
    return Path(root) / "build" / ("course" if lang not in ("en", "zh") else f"course-{lang}")


def refresh_lab(lang: str, root: Path = ROOT, out_root: Path | None = None, log=print) -> dict:
    """What ``make lab-refresh [COURSE_LANG=zh]`` runs: refresh the learner's copy (:func:`copy_folder`, or
    ``out_root``) from the current course — the course's notebooks for both languages, the stored copies
    ``courses/<lang>/`` for one — by the rules of :mod:`authoring.refresh` (cells the learner did not edit take the
    course's version, edited cells are kept, a cell changed on both sides is kept with the course's new version
    inserted after it, new cells and notebooks appear). Returns :func:`authoring.refresh.refresh_copy`'s report.
    Error: no copy yet (``make lab`` makes it) — a bilingual :class:`FileNotFoundError`."""
    from distlearn.core.i18n import bi, normalize_language

    lang = normalize_language(lang, "COURSE_LANG")
    lang = lang if lang in ("en", "zh") else "both"
    out_root = Path(out_root or copy_folder(lang, root))
    if not out_root.is_dir():
        again = "make lab" + (f" COURSE_LANG={lang}" if lang != "both" else "")
        raise FileNotFoundError(bi(f"No copy of the course in {out_root} to refresh: {again} makes one",
                                   f"{out_root} 中还没有课程副本，无需更新：运行 {again} 会创建它"))
    sources = course_sources(lang, root)
    if lang != "both":
        stored = Path(root) / COPIES_DIR / lang
        problems = copy_problems(root, (lang,))
        if problems:
            log(bi(f"Note: the stored {lang} copy {stored.relative_to(root)}/ is not current ({len(problems)} "
                   f"problem(s)); refreshing from it as it is (`make notebooks` brings it up to date)",
                   f"注意：保存的{_LANG_ZH[lang]}副本 {stored.relative_to(root)}/ 不是最新的（{len(problems)} 个问题）；"
                   f"仍按现有内容更新（`make notebooks` 可使它变为最新）"))
    done = refresh_copy(out_root, sources, lang, log=log)
    log(bi(f"{out_root}: {len(done)} notebook(s) refreshed from the course, your edits kept",
           f"{out_root}：已按课程更新 {len(done)} 个笔记本，你的修改都已保留"))
    return done


def open_lab(lang: str, port: int = 8888, root: Path = ROOT, out_root: Path | None = None,
             lab_args: str = "", start: bool = True) -> Path:
    """What ``make lab`` runs: start JupyterLab with ``DISTLEARN_LANG=<lang>`` on a copy of the course, in
    ``build/course/`` for both languages, ``build/course-<lang>/`` for one (your edits and runs stay there, out of
    the repository's files; the bilingual copy is a plain copy of the course's notebooks).

    If that folder is missing it is filled from the stored copy ``courses/<lang>/`` when that one is current
    (:func:`copy_problems` empty: a file copy, no execution), else by :func:`split_course` (written and executed in
    that language, a few minutes); what it was made from is recorded in it (:func:`authoring.refresh.record_copy`).
    An existing folder is kept (it may hold your own edits); when the course is newer a note names
    ``make lab-refresh``, which brings the course's changes in and keeps your edits (:func:`refresh_lab`). ``lab_args``: more JupyterLab options as one shell string
    (``make lab LAB_ARGS="--no-browser --ip=0.0.0.0"``). ``start=False``: prepare the folder, return it, start
    nothing (tests)."""
    import shlex
    import shutil

    from distlearn.core.i18n import bi, normalize_language

    lang = normalize_language(lang, "COURSE_LANG")
    if lang not in ("en", "zh"):  # both languages: a copy of the course's notebooks, so running never rewrites them
        out_root, lang_env = Path(out_root or copy_folder("both", root)), "both"
        if not (out_root / "notebooks" / "00_welcome.ipynb").exists():
            print(bi(f"Copying the course's notebooks to {out_root}, so that your edits and runs stay out of the "
                     f"repository ...", f"正在把课程的笔记本复制到 {out_root}，你的修改和运行结果不会改动仓库里的文件……"),
                  flush=True)
            for src in course_notebooks(root):
                dst = out_root / src.parent.name / src.name
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, dst)
            _record(out_root)
        else:
            _note_if_stale(out_root, root, "make lab", ("the course", "课程"))
    else:
        out_root, lang_env = Path(out_root or copy_folder(lang, root)), lang
        stored = Path(root) / COPIES_DIR / lang
        if not (out_root / "notebooks" / "00_welcome.ipynb").exists():
            problems = copy_problems(root, (lang,))
            if not problems:
                print(bi(f"Opening the stored {lang} copy of the course, {stored.relative_to(root)}/ (executed in "
                         f"{lang}), copied to {out_root} so that your edits stay out of the repository ...",
                         f"打开课程保存好的{_LANG_ZH[lang]}副本 {stored.relative_to(root)}/（已用{_LANG_ZH[lang]}"
                         f"执行），复制到 {out_root}，你的修改不会改动仓库里的文件……"), flush=True)
                shutil.copytree(stored, out_root, copy_function=shutil.copy, dirs_exist_ok=True)
            else:
                print(bi(f"The stored {lang} copy {stored.relative_to(root)}/ is not current ({len(problems)} "
                         f"problem(s); `make notebooks` refreshes it). Writing the {lang} copy of the course to "
                         f"{out_root} and executing it in {lang} (once, a few minutes) ...",
                         f"保存的{_LANG_ZH[lang]}副本 {stored.relative_to(root)}/ 不是最新的（{len(problems)} 个问题；"
                         f"`make notebooks` 可更新它）。正在把课程的{_LANG_ZH[lang]}副本写到 {out_root}，"
                         f"并用{_LANG_ZH[lang]}执行一遍（只需一次，几分钟）……"), flush=True)
                split_course(lang, out_root, root)
            _record(out_root)
        else:
            _note_if_stale(out_root, root, f"make lab COURSE_LANG={lang}", ("the stored copy", "保存的副本"), lang)
    env = lab_environment(lang_env, Path(out_root))
    if not start:
        return Path(out_root)
    extra = shlex.split(lab_args or "")
    # a --port in lab_args wins (JupyterLab refuses two ports: "port only accepts one value")
    own_port = [] if port_given(extra) else ["--port", str(port)]
    cmd = [sys.executable, "-m", "jupyterlab", *own_port, f"--ServerApp.root_dir={out_root}",
           *lab_options(lang_env, Path(out_root)), str(Path(out_root) / "notebooks" / "00_welcome.ipynb")]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    cmd += extra
    os.environ.update(env)
    os.execv(sys.executable, cmd)
    return Path(out_root)  # not reached

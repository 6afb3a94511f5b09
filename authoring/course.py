"""The command line of the notebook tooling (jupytext/nbformat/nbclient) and what ``make notebooks`` does
(:func:`update_notebooks`). Each job has its module: :mod:`authoring.pairing` (sync and execute),
:mod:`authoring.exercises`, :mod:`authoring.parity`, :mod:`authoring.copies` (one language), :mod:`authoring.lab`,
:mod:`authoring.lang_audit`; :mod:`authoring.paths` says where everything is.

Each chapter and solution is a MyST markdown source ``NN_slug.md`` paired by jupytext with its stored, executed
``NN_slug.ipynb`` (readers, Binder and nbval use the ``.ipynb``). Command line::

    python -m authoring.course notebooks [NAME ...]           # sync pairs, re-execute what changed, rebuild exercises
                                                              # and the monolingual copies courses/en/, courses/zh/
    python -m authoring.course check                          # pairs in sync, fully executed, exercises and copies up to date
    python -m authoring.course build-exercises [--check]      # exercises/ from solutions/
    python -m authoring.course parity                         # en/zh pairs, headings, glossary terms
    python -m authoring.course execute PATH...                # run notebooks in place and store outputs
    python -m authoring.course split --lang zh|en [--out DIR] [--root DIR] [--no-execute]  # monolingual copies
    python -m authoring.course audit-lang --lang zh|en [NAME ...]  # can a reader of one language read every output?
    python -m authoring.course lab --lang zh|en [--port N]   # JupyterLab on the monolingual copy (make lab COURSE_LANG=zh)
    python -m authoring.course refresh [--lang zh|en|both]   # your copy from the newer course, edits kept (make lab-refresh)

Conventions (see docs/authoring.md):
- Prose cells are markdown cells tagged ``lang-en`` or ``lang-zh``; each English cell is followed immediately by its
  Chinese partner, and their headings match in number and level.
- A glossary term (``docs/glossary.md``) used in an English cell appears with its Chinese term in the partner cell;
  see :func:`authoring.parity.glossary_terms` for the matching rule.
- In ``solutions/``, answer code sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the exercise keeps
  the lines outside the markers and gets a bilingual ``raise NotImplementedError`` instead. A cell tagged
  ``solution-only`` (a written answer) is left out of the exercise.
- A stored notebook records the fingerprint of the code it was executed from (:func:`authoring.pairing.code_fingerprint`); a test
  fails when its code changed without a re-run, when it is not one complete top-to-bottom run, or when it and its
  ``.md`` differ.
- ``courses/en/`` and ``courses/zh/`` store every notebook's monolingual copy (:func:`authoring.copies.split`), the chapters' and
  solutions' executed in that language (:func:`authoring.copies.update_copies`, :func:`authoring.copies.copy_problems`): derived files, like
  ``exercises/``, that the website shows and ``make lab COURSE_LANG=zh`` opens.
"""
from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # The command line only, before nbformat is first imported (below; set after it, this came too late and every
    # command still built the grammar): jsonschema (imported by nbformat) imports its optional IRI format checker
    # rfc3987_syntax when installed (jupyter-events requires it), and building that grammar takes ~1.8 s of CPU at
    # every command's start. No notebook schema uses an IRI format; without the module jsonschema skips that checker.
    sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402 - after the guard above / 须在上面的保护之后导入

from authoring.copies import copy_problems, split_course, update_copies
from authoring.exercises import build_exercises
from authoring.lab import open_lab, refresh_lab
from authoring.pairing import execute, execution_problems, new_sources, paired_notebooks, stored_problems, sync
from authoring.parity import parity
from authoring.paths import COPIES_DIR, COPY_LANGS, FORMATS, NB_VERSION, ROOT, course_notebooks



def update_notebooks(root: Path = ROOT, force: list[str] | None = None, log=print,
                     copies: tuple[str, ...] = COPY_LANGS, force_copies: list[str] | None = None) -> list[Path]:
    """What ``make notebooks`` does: sync every pair (``.md`` ↔ ``.ipynb``), then re-execute only the notebooks
    whose code changed since their stored run or that are not fully executed (and those named in ``force``), then
    rebuild ``exercises/``, then bring the monolingual copies ``courses/<lang>/`` of ``copies`` up to date
    (:func:`authoring.copies.update_copies`: the copies of the notebooks just executed are executed too, and the copies of those
    named in ``force_copies``, e.g. after merging a branch that re-executed the course notebooks but not their
    copies). Returns the notebooks executed, copies included. A prose-only edit executes nothing."""
    force = set(force or [])
    ran = []
    for md in new_sources(root):  # a new chapter: its .md exists, its .ipynb not yet
        import jupytext

        nb = jupytext.read(md)
        nb.metadata.setdefault("jupytext", {})["formats"] = FORMATS
        nbformat.write(nb, md.with_suffix(".ipynb"))
        sync(md)
    for path in paired_notebooks(root):
        sync(path)
        nb = nbformat.read(path, as_version=NB_VERSION)
        if path.stem in force or str(path.relative_to(root)) in force or execution_problems(nb):
            from distlearn.core.i18n import bi

            log(bi(f"executing {path.relative_to(root)} ...", f"正在执行 {path.relative_to(root)} ……"))
            execute(path)
            ran.append(path)
    build_exercises(root=root)
    if copies:
        ran += update_copies(root, copies, executed=ran, force=force_copies or (), log=log)
    return ran




def main(argv: list[str] | None = None) -> int:
    from distlearn.core.cli import ArgumentParser
    from distlearn.core.i18n import bi

    ap = ArgumentParser(prog="python -m authoring.course",
                        description=bi("Notebook tooling of the course: sync, execute, check, split.",
                                       "课程的笔记本工具：同步、执行、检查、拆分。"))
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                            title=bi("commands", "命令"))
    b = sub.add_parser("build-exercises", help=bi("write exercises/ from solutions/", "由 solutions/ 生成 exercises/"))
    b.add_argument("--check", action="store_true",
                   help=bi("write nothing; exit 1 if exercises/ is out of sync",
                           "不写文件；exercises/ 与 solutions/ 不一致时以状态 1 退出"))
    sub.add_parser("parity", help=bi("check English/Chinese pairs in every notebook", "检查每个笔记本的中英文单元格配对"))
    n = sub.add_parser("notebooks", help=bi("sync .md and .ipynb, re-execute the notebooks whose code changed, "
                                            "rebuild exercises/",
                                            "同步 .md 与 .ipynb，重新执行代码有改动的笔记本，重新生成 exercises/"))
    n.add_argument("names", nargs="*", help=bi("also re-execute these (e.g. 06_zero_fsdp or "
                                               "solutions/06_zero_fsdp.ipynb)",
                                               "同时重新执行这些（如 06_zero_fsdp 或 solutions/06_zero_fsdp.ipynb）"))
    n.add_argument("--copies-only", action="store_true",
                   help=bi("re-execute only the monolingual copies (courses/<lang>/) of the NAMES, not the notebooks "
                           "themselves (they are current, e.g. re-executed on a merged branch)",
                           "只重新执行 NAMES 的单语副本（courses/<lang>/），不重新执行笔记本本身（它们已是最新，"
                           "例如已在合并进来的分支上重新执行过）"))
    sub.add_parser("check", help=bi("every .md in sync with its .ipynb, every notebook fully executed from its "
                                    "current code, exercises/ up to date",
                                    "检查每个 .md 与其 .ipynb 同步、每个笔记本是当前代码的完整运行、exercises/ 为最新"))
    e = sub.add_parser("execute", help=bi("execute notebooks in place, storing outputs", "原地执行笔记本并保存输出"))
    e.add_argument("paths", nargs="+", help=bi("notebooks to execute", "要执行的笔记本"))
    s_ = sub.add_parser("split", help=bi("write monolingual copies of the course, executed in that language",
                                         "生成课程的单语副本，并用该语言执行"))
    s_.add_argument("--lang", required=True, help=bi("en or zh (also zh_CN, zh-CN, en_US …)",
                                                     "en 或 zh（也可写 zh_CN、zh-CN、en_US 等）"))
    s_.add_argument("--out", default=None, help=bi("output folder (default: build/course-<lang>)",
                                                   "输出目录（默认 build/course-<lang>）"))
    s_.add_argument("--root", default=None, help=bi("course folder to read (default: this repository)",
                                                    "要读取的课程目录（默认：本仓库）"))
    s_.add_argument("--no-execute", action="store_true",
                    help=bi("write the copies without executing them (no outputs)", "只写副本，不执行（没有输出）"))
    s_.add_argument("--report", default=None,
                    help=bi("also audit every output (exercises too) and write the reports to this JSON file",
                            "同时检查每一行输出（包括练习），并把报告写入这个 JSON 文件"))
    a = sub.add_parser("audit-lang", help=bi("execute notebooks in one language and list every printed line, plot "
                                             "text or widget label its reader cannot read",
                                             "用一种语言执行笔记本，列出读者读不懂的每一行输出、图中文字和控件标签"))
    a.add_argument("--lang", required=True, help=bi("en or zh", "en 或 zh"))
    a.add_argument("names", nargs="*", help=bi("notebooks (default: every chapter and solution)",
                                               "笔记本（默认：所有章节和解答）"))
    o = sub.add_parser("lab", help=bi("open JupyterLab on the course in one language (make lab COURSE_LANG=zh)",
                                      "用一种语言打开课程的 JupyterLab（make lab COURSE_LANG=zh）"))
    o.add_argument("--lang", required=True, help=bi("en, zh or both", "en、zh 或 both"))
    o.add_argument("--port", type=int, default=8888, help=bi("port of JupyterLab", "JupyterLab 的端口"))
    o.add_argument("--lab-args", default="", help=bi("more JupyterLab options, one string (make lab LAB_ARGS=...)",
                                                     "更多 JupyterLab 选项，写成一个字符串（make lab LAB_ARGS=...）"))
    r = sub.add_parser("refresh", help=bi("refresh your copy of the course (make lab) from the current course, "
                                          "keeping your edits (make lab-refresh)",
                                          "按当前课程更新你的课程副本（make lab），保留你的修改（make lab-refresh）"))
    r.add_argument("--lang", default="both", help=bi("en, zh or both (the copy make lab COURSE_LANG=... opened)",
                                                     "en、zh 或 both（make lab COURSE_LANG=... 打开的那份副本）"))
    args = ap.parse_args(argv)

    if args.cmd == "build-exercises":
        stale = build_exercises(check=args.check)
        if args.check and stale:
            print(bi("exercises/ is out of sync with solutions/ (run `make exercises`):",
                     "exercises/ 与 solutions/ 不一致（请运行 `make exercises`）："))
            print("\n".join("  " + s for s in stale))
            return 1
        print(bi(f"{len(stale)} exercise notebook(s) {'stale' if args.check else 'written'}",
                 f"{len(stale)} 个练习笔记本{'需要更新' if args.check else '已写入'}"))
        return 0
    if args.cmd == "parity":
        problems = parity()
        for p in problems:
            print(p)
        n = len(course_notebooks())
        print(bi(f"parity: {n} notebooks, {len(problems)} problem(s)", f"双语检查：{n} 个笔记本，{len(problems)} 个问题"))
        return 1 if problems else 0
    if args.cmd == "notebooks":
        ran = update_notebooks(force=[] if args.copies_only else args.names,
                               force_copies=args.names if args.copies_only else None,
                               log=lambda m: print(m, flush=True))
        print(bi(f"{len(ran)} notebook(s) executed", f"{len(ran)} 个笔记本已重新执行"))
        return 0
    if args.cmd == "check":
        problems = stored_problems() + [bi(f"{s}: out of sync with solutions/ (run `make notebooks`)",
                                           f"{s}：与 solutions/ 不一致（请运行 `make notebooks`）")
                                        for s in build_exercises(check=True)] + copy_problems()
        for p in problems:
            print(p)
        k, c = len(paired_notebooks()), len(course_notebooks()) * len(COPY_LANGS)
        print(bi(f"check: {k} paired notebooks, {c} stored copies in {COPIES_DIR}/{{{','.join(COPY_LANGS)}}}, "
                 f"{len(problems)} problem(s)",
                 f"检查：{k} 个成对笔记本，{COPIES_DIR}/ 中 {c} 个单语副本，{len(problems)} 个问题"))
        return 1 if problems else 0
    if args.cmd == "execute":
        for p in args.paths:
            print(bi(f"executing {p} ...", f"正在执行 {p} ……"), flush=True)
            execute(p)
        return 0
    if args.cmd == "split":
        from distlearn.core.i18n import normalize_language

        lang = normalize_language(args.lang, "--lang")
        root = Path(args.root) if args.root else ROOT
        out_root = Path(args.out) if args.out else root / "build" / f"course-{lang}"
        reports = [] if args.report else None
        written = split_course(lang, out_root, root, execute_copies=not args.no_execute, audit=reports)
        if args.report:
            import json

            from authoring.lang_audit import reports_to_json

            Path(args.report).write_text(json.dumps(reports_to_json(reports), ensure_ascii=False), encoding="utf-8")
            for r in reports:
                print(r.summary(limit=5))
        print(bi(f"wrote {len(written)} notebook(s) in {lang} to {out_root}",
                 f"已把 {len(written)} 个 {lang} 笔记本写到 {out_root}"))
        return 0
    if args.cmd == "audit-lang":
        from distlearn.core.i18n import normalize_language
        from authoring.lang_audit import audit_course

        reports = audit_course(normalize_language(args.lang, "--lang"), args.names or None)
        bad = sum(len(r.bad) for r in reports)
        print(bi(f"audit: {len(reports)} notebook(s), {bad} line(s) a {args.lang} reader cannot read",
                 f"语言检查：{len(reports)} 个笔记本，{bad} 行该语言的读者读不懂"))
        return 1 if bad else 0
    if args.cmd == "lab":
        open_lab(args.lang, args.port, lab_args=args.lab_args)
        return 0
    if args.cmd == "refresh":
        try:
            refresh_lab(args.lang)
        except FileNotFoundError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())

"""Notebook tooling on jupytext/nbformat/nbclient: keep MyST sources and stored notebooks in sync, execute what
changed, build exercises from solutions, check bilingual parity, split into one language.

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

Conventions (see docs/authoring.md):
- Prose cells are markdown cells tagged ``lang-en`` or ``lang-zh``; each English cell is followed immediately by its
  Chinese partner, and their headings match in number and level.
- A glossary term (``docs/glossary.md``) used in an English cell appears with its Chinese term in the partner cell;
  see :func:`glossary_terms` for the matching rule.
- In ``solutions/``, answer code sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the exercise keeps
  the lines outside the markers and gets a bilingual ``raise NotImplementedError`` instead. A cell tagged
  ``solution-only`` (a written answer) is left out of the exercise.
- A stored notebook records the fingerprint of the code it was executed from (:func:`code_fingerprint`); a test
  fails when its code changed without a re-run, when it is not one complete top-to-bottom run, or when it and its
  ``.md`` differ.
- ``courses/en/`` and ``courses/zh/`` store every notebook's monolingual copy (:func:`split`), the chapters' and
  solutions' executed in that language (:func:`update_copies`, :func:`copy_problems`): derived files, like
  ``exercises/``, that the website shows and ``make lab COURSE_LANG=zh`` opens.
"""
from __future__ import annotations

import functools
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if __name__ == "__main__":
    # The command line only: jsonschema (imported by nbformat) imports its optional IRI format checker
    # rfc3987_syntax when installed (jupyter-events requires it), and building that grammar takes ~1 s of every
    # command's start. No notebook schema uses an IRI format; without the module jsonschema skips that checker.
    sys.modules.setdefault("rfc3987_syntax", None)

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
PLACEHOLDER = 'raise NotImplementedError("Your code here / 在这里写你的代码")'
NB_VERSION = 4
_CJK = re.compile(r"[\u4e00-\u9fff]")
_HEADING = re.compile(r"^(#{1,6})\s", re.M)


# ---------------------------------------------------------------- sources and stored notebooks
PAIRED_DIRS = ("notebooks", "solutions")  # each NN_slug.ipynb has its MyST source NN_slug.md (jupytext pairing)
# The stored monolingual copies of the course, executed in their language (see update_copies): courses/en/, courses/zh/
COPIES_DIR = "courses"
COPY_LANGS = ("en", "zh")
MYST = "md:myst"
FORMATS = "ipynb," + MYST


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


def _cell_key(cell) -> tuple:
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
    a = [_cell_key(c) for c in nbformat.read(ipynb, as_version=NB_VERSION).cells]
    b = [_cell_key(c) for c in jupytext.read(md).cells]
    if a == b:
        return []
    where, what, zh = _first_difference(a, b)
    return [f"{ipynb.name} and {md.name} differ at cell {where} ({what}: {len(a)} vs {len(b)} cells); run "
            f"`make notebooks` / {ipynb.name} 与 {md.name} 在第 {where} 个单元格不一致（{zh}）；请运行 `make notebooks`"]


def _first_difference(a: list[tuple], b: list[tuple]) -> tuple[int, str, str]:
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
    _strip_volatile(nb)
    nb.metadata.setdefault("distlearn", {})["executed_code"] = code_fingerprint(nb)
    nbformat.write(nb, path)


def update_notebooks(root: Path = ROOT, force: list[str] | None = None, log=print,
                     copies: tuple[str, ...] = COPY_LANGS, force_copies: list[str] | None = None) -> list[Path]:
    """What ``make notebooks`` does: sync every pair (``.md`` ↔ ``.ipynb``), then re-execute only the notebooks
    whose code changed since their stored run or that are not fully executed (and those named in ``force``), then
    rebuild ``exercises/``, then bring the monolingual copies ``courses/<lang>/`` of ``copies`` up to date
    (:func:`update_copies`: the copies of the notebooks just executed are executed too, and the copies of those
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


SOLUTION_ONLY = "solution-only"  # tag of a cell (e.g. a written answer) that exercises/ leave out


def exercise_from_solution(nb) -> nbformat.NotebookNode:
    """The exercise notebook for a solution notebook: answers stripped (code between the markers, cells tagged
    ``solution-only``), outputs cleared."""
    ex = nbformat.from_dict(nb)
    ex.cells = [c for c in ex.cells if SOLUTION_ONLY not in c.get("metadata", {}).get("tags", [])]
    for key in ("jupytext", "distlearn"):  # an exercise is neither paired with a source nor executed
        ex.metadata.pop(key, None)
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


def parity_problems(nb, name: str = "", terms: list[Term] | None = None) -> list[str]:
    """Bilingual problems in one notebook: unpaired prose cells, mismatched headings, missing Chinese, glossary
    terms of an English cell missing from its Chinese partner (``terms``: default :func:`glossary_terms`)."""
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
        for term in glossary_problems(cell.source, partner.source, terms):
            problems.append(f"{name} cell {i + 1}: English uses glossary term {term.en!r} but the Chinese cell has "
                            f"none of {' / '.join(term.zh)} / 英文使用了术语 {term.en!r}，中文单元格中缺少对应译名")
        for found, rule in forbidden_problems(partner.source):
            problems.append(f"{name} cell {i + 1}: {found!r} is a form the glossary rules out; write {rule.use} "
                            f"({rule.why}) / 术语表不允许写 {found!r}，应写 {rule.use}")
        i += 2
    return problems


# ---------------------------------------------------------------- glossary
GLOSSARY = ROOT / "docs" / "glossary.md"
# Pragmatic additions to the glossary's Chinese forms, for usages that are correct but shorter or reordered.
ALSO_ACCEPT = {
    "activations": ("激活",),                       # 激活值; "激活" alone as in 激活显存
    "activation checkpointing": ("重计算", "检查点"),  # the row's two names are synonyms
    "recomputation": ("激活检查点", "检查点"),
    "peak memory": ("显存峰值",),
    "throughput": ("吞吐",),
    "latency": ("时延",),
    "bubble fraction": ("气泡占比", "气泡比例"),
    "pipeline stage": ("阶段",),
    "interleaved schedule": ("交错",),
    "cool-down phase": ("收尾",),
    "shard": ("切分",),                             # the verb: 切分 is as clear as 分片
    "token": ("词嵌入",),                           # "token embedding": 词嵌入 is the standard term
}
# English words that are also everyday words: matched only in the given case-sensitive form.
CASE_SENSITIVE = {"reduce": r"(?:(?<=[a-z,;] )|(?<=[(\[*\"“]))Reduce\b(?![-_ ]?[Ss]catter)",  # "a Reduce", not "Reduce memory."
                  # the noun, not the verb "ranks them / the plans"
                  "rank": r"(?<![\w-])[Rr]anks?(?![\w])(?!\s+(?:them|the|plans?|it|by|all)\b)"}
_PAREN = re.compile(r"\s*[(（]([^)）]*)[)）]")
_NOT_PROSE = [re.compile(p, re.S) for p in (r"```.*?```", r"`[^`]*`", r"\$\$.*?\$\$", r"\$[^$\n]*\$",
                                            r"\]\([^)]*\)", r"<[^>\n]*>", r"https?://\S+")]


@dataclass(frozen=True)
class Term:
    """One English glossary form, the regex that finds it in English prose and the Chinese forms accepted."""

    en: str
    pattern: re.Pattern
    zh: tuple[str, ...]


def _flex(form: str) -> str:
    """Regex for ``form`` where a space, hyphen or underscore between parts may be any of them or absent."""
    return r"[-\s_]?".join(re.escape(part) for part in re.split(r"[-\s_]+", form.strip()))


def _en_pattern(form: str) -> re.Pattern:
    if form in CASE_SENSITIVE:
        return re.compile(CASE_SENSITIVE[form])
    plural = "" if form.endswith("s") or form.isupper() else r"(?:s|es)?"
    flags = re.I if form == form.lower() else 0  # "ZeRO", "DeepSpeed", "TP": exactly as written
    return re.compile(r"(?<![\w-])" + _flex(form) + plural + r"(?![\w])", flags)


def _split(col: str) -> list[str]:
    return [p.strip() for p in col.split("/") if p.strip()]


@functools.lru_cache(maxsize=4)
def glossary_terms(path: Path = GLOSSARY) -> list[Term]:
    """The terms of the glossary table (``| English | 中文 | note |``) and how they are matched.

    Matching rule (documented in docs/glossary.md's header too):
    - English: each form of the English column — split on "/", a shared last word distributed ("weak / strong
      scaling" → "weak scaling", "strong scaling"), a parenthesised abbreviation or expansion such as "(DP)" a form
      of its own — is found as a whole word; all-lowercase forms ignore case; a space, hyphen or underscore may be
      any of them or absent ("all-reduce" finds "AllReduce", "all_reduce", "allreduce"); a plural "s"/"es" may follow.
      Forms with capitals ("ZeRO", "TP") match exactly. Inline code, code blocks, LaTeX, link targets and HTML
      tags are ignored. "reduce" counts only as the collective "Reduce" inside a sentence, "rank" only as a noun.
    - Chinese: any form of the Chinese column is accepted — split on "/", and both the text and what is in its
      parentheses ("AllReduce（全规约）" → "AllReduce" or "全规约"; the glossary keeps such names in English) —, plus
      the English form itself when it is an abbreviation or is kept in Chinese, plus :data:`ALSO_ACCEPT`. When the
      two columns have the same number of "/" parts, part i of the English is paired with part i of the Chinese
      ("bandwidth / latency" ↔ "带宽 / 延迟"). Matching ignores case and spacing ("3D 并行" = "3D并行").
    """
    terms = []
    in_table = False
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("## ") and in_table:  # the terms are the first table; later ones are other rules
            break
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cols) < 2 or set(cols[0]) <= set("-: ") or cols[0] == "English":
            continue
        in_table = True
        en_col, zh_col = cols[0], cols[1]
        # "(DP)", "(Zero Redundancy Optimizer)": another name of the term; "(causal mask)", "(measure word)": a note.
        en_extra = [x for x in _PAREN.findall(en_col) if any(c.isupper() for c in x)]
        en_parts = _split(_PAREN.sub("", en_col))
        last = en_parts[-1].split() if en_parts else []
        if len(en_parts) > 1 and len(last) > 1 and all(len(p.split()) == 1 and p != last[0] for p in en_parts[:-1]):
            en_parts = [f"{p} {last[-1]}" for p in en_parts[:-1]] + [en_parts[-1]]
        zh_extra = [x.strip() for x in _PAREN.findall(zh_col)]
        zh_parts = _split(_PAREN.sub("", zh_col))
        paired = len(zh_parts) == len(en_parts) > 1
        for k, form in enumerate(en_parts):
            accepted = ([zh_parts[k]] if paired else list(zh_parts)) + zh_extra + list(en_extra)
            if form.isupper() or form.lower() in zh_col.lower():
                accepted.append(form)
            accepted += ALSO_ACCEPT.get(form, ())
            terms.append(Term(form, _en_pattern(form), tuple(dict.fromkeys(accepted))))
        for extra in en_extra:  # "(DP)", "(Zero Redundancy Optimizer)": found like the main form
            terms.append(Term(extra, _en_pattern(extra), tuple(dict.fromkeys(zh_parts + zh_extra + [extra]))))
    return terms


@dataclass(frozen=True)
class Forbidden:
    """A form the glossary rules out (``docs/glossary.md``, "Forms not to use"): its regex, what to write, why."""

    pattern: re.Pattern
    use: str
    why: str


@functools.lru_cache(maxsize=4)
def forbidden_forms(path: Path = GLOSSARY) -> list[Forbidden]:
    """The rows of the glossary's "Forms not to use" table; a cell's ``\\|`` is a literal ``|`` (GitHub tables)."""
    rules, inside = [], False
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            inside = line.startswith("## Forms not to use")
            continue
        if not inside or not line.startswith("|"):
            continue
        cols = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if len(cols) < 3 or not cols[0].startswith("`"):
            continue
        rules.append(Forbidden(re.compile(cols[0].strip("`")), cols[1], cols[2]))
    return rules


def forbidden_problems(zh: str, rules: list[Forbidden] | None = None) -> list[tuple[str, Forbidden]]:
    """``(found, rule)`` for each form of ``zh`` (Chinese prose or a printed line) that the glossary rules out;
    inline code, code blocks, LaTeX and link targets are not looked at."""
    text = prose(zh)
    return [(m.group(0), rule) for rule in (forbidden_forms() if rules is None else rules)
            for m in rule.pattern.finditer(text)]


def prose(text: str) -> str:
    """``text`` without blockquote markers, inline code (also across a line break), code blocks, LaTeX, link
    targets, HTML tags and URLs."""
    text = re.sub(r"^[ \t]*>[ \t]?", "", text, flags=re.M)
    for pat in _NOT_PROSE:
        text = pat.sub(" ", text)
    return text


def _zh_has(zh_text: str, form: str) -> bool:
    compact = re.sub(r"\s+", "", zh_text).lower()
    return re.sub(r"[-\s_]+", "", form).lower() in re.sub(r"[-_]+", "", compact)


def glossary_problems(en: str, zh: str, terms: list[Term] | None = None) -> list[Term]:
    """Glossary terms found in English text ``en`` whose accepted Chinese forms are all missing from ``zh``."""
    terms = glossary_terms() if terms is None else terms
    en_p, zh_p = prose(en), prose(zh)
    missing, seen, claimed = [], set(), []
    # Longest forms first: "batch" inside "batch size", or "global batch size", is that longer term, not "batch".
    for term in sorted(terms, key=lambda t: -len(t.en)):
        spans = [m.span() for m in term.pattern.finditer(en_p)
                 if not any(a <= m.start() and m.end() <= b for a, b in claimed)]
        if not spans:
            continue
        claimed += spans
        if term.en in seen:
            continue
        seen.add(term.en)
        if not any(_zh_has(zh_p, form) for form in term.zh):
            missing.append(term)
    return missing


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
SWITCH_CALL = "language_switch()"
LANGUAGE_CELL_ID = "distlearn-set-language"


def language_cell_source(lang: str) -> str:
    """The first code cell of a monolingual copy: it sets the copy's language for everything the code prints."""
    return f'import distlearn\n\ndistlearn.set_language("{lang}")'


def split(nb, lang: str) -> nbformat.NotebookNode:
    """A monolingual copy: the prose cells of ``lang`` (``"en"``, ``"zh"`` or any form :func:`distlearn.core.i18n.
    normalize_language` accepts) and every code cell, the chapter's language switch replaced by a cell that sets
    ``lang`` (inserted after the first prose cell when the notebook has no switch), stored outputs cleared (they
    were computed in both languages: :func:`split_course` re-executes the copy)."""
    from distlearn.core.i18n import normalize_language

    lang = normalize_language(lang)
    if lang not in ("en", "zh"):
        from distlearn.core.validate import DistlearnValueError

        raise DistlearnValueError("lang", f"a monolingual copy is in 'en' or 'zh', got {lang!r}",
                                  f"单语副本只能是 'en' 或 'zh'，收到 {lang!r}", bilingual=True)
    out = nbformat.from_dict(nb)
    out.cells = [c for c in out.cells if c.cell_type != "markdown" or _lang(c) in (lang, None)]
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
    from authoring import lang_audit

    target = Path(target)
    nb, records = lang_audit.execute_audited(target, lang, timeout=timeout, write=False)
    _store_copy(nb, records, target)
    return nb


def _store_copy(nb, records, target: Path) -> None:
    """Write an executed copy with what the audit needs and the fingerprint of the code it ran."""
    from authoring import lang_audit

    widgets = [[ln.where, ln.text] for ln in lang_audit.widget_lines(nb)]
    _strip_volatile(nb)
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
            a, b = [_cell_key(c) for c in have.cells], [_cell_key(c) for c in want.cells]
            if a != b:
                where, what, zh = _first_difference(a, b)
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
    from authoring import lang_audit
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


# ---------------------------------------------------------------- CLI
def _copy_is_stale(out_root: Path, root: Path) -> bool:
    sources = [p for p in course_notebooks(root)]
    copies = [Path(out_root) / p.parent.name / p.name for p in sources]
    if not all(c.exists() for c in copies):
        return True
    return max(p.stat().st_mtime for p in sources) > min(c.stat().st_mtime for c in copies)


_LANG_ZH = {"en": "英文", "zh": "中文"}


# JupyterLab's own interface language for a course in one language: the language pack
# jupyterlab-language-pack-zh-CN (a dependency) and the translation extension's "locale" setting
LAB_LOCALES = {"en": "en", "zh": "zh_CN"}
LAB_SETTINGS_DIR = ".jupyterlab-settings"
TRANSLATION_SETTINGS = Path("@jupyterlab", "translation-extension", "plugin.jupyterlab-settings")


def lab_environment(lang: str, out_root: Path) -> dict[str, str]:
    """Environment variables JupyterLab starts with for the course in ``lang`` (``"en"``, ``"zh"`` or ``"both"``):
    ``DISTLEARN_LANG``; for one language also ``JUPYTERLAB_SETTINGS_DIR`` = ``out_root/.jupyterlab-settings``,
    where this writes the translation extension's setting ``{"locale": "zh_CN"}`` (or ``"en"``), so that
    JupyterLab's menus, dialogs and status bar speak the course's language too (the bilingual course keeps the
    user's own JupyterLab settings). Your other JupyterLab settings for that copy are kept there as well."""
    env = {"DISTLEARN_LANG": lang}
    if lang in LAB_LOCALES:
        settings = Path(out_root) / LAB_SETTINGS_DIR
        path = settings / TRANSLATION_SETTINGS
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"locale": LAB_LOCALES[lang]}, indent=2) + "\n", encoding="utf-8")
        env["JUPYTERLAB_SETTINGS_DIR"] = str(settings)
    return env


def open_lab(lang: str, port: int = 8888, root: Path = ROOT, out_root: Path | None = None,
             lab_args: str = "", start: bool = True) -> Path:
    """What ``make lab COURSE_LANG=zh`` runs: start JupyterLab with ``DISTLEARN_LANG=<lang>`` on the course in one
    language, in ``build/course-<lang>/`` (your edits and runs stay there, out of the repository's files).

    If that folder is missing it is filled from the stored copy ``courses/<lang>/`` when that one is current
    (:func:`copy_problems` empty: a file copy, no execution), else by :func:`split_course` (written and executed in
    that language, a few minutes). An existing folder is kept (it may hold your own edits); a note says how to
    refresh it when the course is newer. ``lab_args``: more JupyterLab options as one shell string
    (``make lab LAB_ARGS="--no-browser --ip=0.0.0.0"``). ``start=False``: prepare the folder, return it, start
    nothing (tests)."""
    import shlex
    import shutil

    from distlearn.core.i18n import bi, normalize_language

    lang = normalize_language(lang, "COURSE_LANG")
    if lang not in ("en", "zh"):  # both languages: the course itself
        out_root, lang_env = root, "both"
    else:
        out_root, lang_env = Path(out_root or root / "build" / f"course-{lang}"), lang
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
        elif _copy_is_stale(out_root, root):
            print(bi(f"Note: {out_root} is older than the course. To start again from the stored copy (this "
                     f"deletes your edits there): rm -r {out_root}, then make lab COURSE_LANG={lang}",
                     f"注意：{out_root} 比课程本身旧。如需从保存的副本重新开始（会删除你在其中的修改）：rm -r {out_root}，"
                     f"再运行 make lab COURSE_LANG={lang}"), flush=True)
    env = lab_environment(lang_env, Path(out_root))
    if not start:
        return Path(out_root)
    cmd = [sys.executable, "-m", "jupyterlab", "--port", str(port), f"--ServerApp.root_dir={out_root}",
           str(Path(out_root) / "notebooks" / "00_welcome.ipynb")]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    cmd += shlex.split(lab_args or "")
    os.environ.update(env)
    os.execv(sys.executable, cmd)
    return Path(out_root)  # not reached


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
    return 2


if __name__ == "__main__":
    sys.exit(main())

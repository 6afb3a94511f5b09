"""Bilingual parity: each English prose cell followed by its Chinese partner with matching headings, and each
glossary term (``docs/glossary.md``) used in English present in Chinese (:func:`glossary_terms`); forms the glossary
rules out in Chinese (:func:`forbidden_problems`)."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

from authoring.pairing import CJK, HEADING
from authoring.paths import NB_VERSION, ROOT, course_notebooks

# ---------------------------------------------------------------- parity
def cell_language(cell) -> str | None:
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
        lang = cell_language(cell)
        where = f"{name} cell {i}"
        if lang != "en":
            problems.append(f"{where}: markdown cell must be tagged lang-en and come before its lang-zh partner "
                            f"/ markdown 单元格必须标记 lang-en 并位于其 lang-zh 对应单元格之前")
            i += 1
            continue
        partner = cells[i + 1] if i + 1 < len(cells) else None
        if partner is None or partner.cell_type != "markdown" or cell_language(partner) != "zh":
            problems.append(f"{where}: English cell has no Chinese partner right after it / 英文单元格后缺少中文对应单元格")
            i += 1
            continue
        h_en = [len(h) for h in HEADING.findall(_strip_code(cell.source))]
        h_zh = [len(h) for h in HEADING.findall(_strip_code(partner.source))]
        if h_en != h_zh:
            problems.append(f"{where}: headings differ (en {h_en} vs zh {h_zh}) / 标题层级或数量不一致")
        if not CJK.search(partner.source):
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
    "ZeRO stage": ("级 ZeRO", "ZeRO 级别", "zero_stage"),  # the generic "which ZeRO stage": 哪一级 ZeRO
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




def parity(root: Path = ROOT) -> list[str]:
    problems = []
    for path in course_notebooks(root):
        problems += parity_problems(nbformat.read(path, as_version=NB_VERSION), str(path.relative_to(root)))
    return problems

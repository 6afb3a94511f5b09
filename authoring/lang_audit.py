"""Can a reader of one language read everything a chapter shows? Execute a notebook under ``DISTLEARN_LANG=zh``
(or ``en``) and check every printed line, every plot text and every widget label against the rule below.

The rule (also in README and docs/authoring.md):

- under ``en`` no line has a Chinese character (CJK ideographs or full-width CJK punctuation);
- under ``zh`` every line that has an English word also has Chinese, and a line with three or more English words
  of four letters or more has at least one Chinese character per four English letters (one Chinese character does
  not make an English sentence readable). Not English words: numbers, units (GB, GiB,
  ms, µs, FLOPs …), acronyms and names written with capitals (GPU, FSDP, ZeRO-3, AllReduce, DeepSpeed, Llama, Adam,
  True), identifiers with a digit, a dot or a slash (fp32, bf16, llama3-8b, authoring.course, notebooks/01.ipynb),
  code (a name followed by ``(`` or ``=``, a value right after ``=``, a ``--option``, anything in backticks), the parameter
  names the course teaches (:data:`IDENTIFIERS`), and the few words the glossary keeps in English (:data:`NEUTRAL`:
  rank, world size, gloo, tensor …). Identifiers made of English words with underscores (``softmax_dropout_mask``)
  are English;
- exempt under ``zh`` only: a printed Python listing or JSON document (the whole output parses as one), and a
  tool's own words quoted verbatim with :func:`distlearn.core.i18n.quote` (lines starting with ``│``, introduced by a
  line in the reader's language) — e.g. DeepSpeed's estimator table or PyTorch's error message, which a reader
  meets as they are.

What is checked, per code cell: stream output line by line; ``text/markdown``, ``text/html`` (tags removed) or
``text/plain`` of displayed results (not the text fallback of a widget or a figure, which a reader never sees);
``ename: evalue`` of errors; every code comment (a bilingual ``# English / 中文`` comment cut to the reader's half,
as the monolingual copies show it); every text artist of every figure drawn (titles, axis labels, tick labels, legends,
annotations), recorded in the kernel by :data:`KERNEL_HOOK` when the figure is rendered; and, from the widget state
nbclient stores, each widget's description, option labels, HTML/label value, tooltips and the outputs its Output
areas captured (an explorer's first render). The language switch itself is exempt: its buttons name each language in
that language.

Command line: ``python -m authoring.course audit-lang --lang zh [NAMES]`` (see :mod:`authoring.course`).

Without running anything: :func:`stored_report` audits a stored monolingual copy (``courses/<lang>/``) from the file —
its outputs, and the figure texts and widget labels its run recorded (:func:`authoring.copies.execute_copy`).
"""
from __future__ import annotations

import html
import json
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from authoring.comments import code_in, comments
from authoring.paths import ROOT, course_notebooks
from distlearn.core.i18n import QUOTE, normalize_language
from distlearn.core.language import SWITCH_CLASS

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
# Lowercase words a Chinese text keeps in English (glossary: rank, world size; library, backend and device names;
# units; math operators in formulas).
NEUTRAL = frozenset("""
rank ranks gloo nccl mpi cuda cpu gpu meta tensor tensors dtype torch numpy numpy's nn optim torchrun pytest pip
python jupyter jupyterlab ipywidgets matplotlib deepspeed distlearn jupytext nbval nbclient make mplfonts
kb mb gb tb pb kib mib gib tib ms us µs ns flop flops gflops tflops pflops gbps hz ghz tok params
max min sum mean log exp sqrt argmax softmax adam adamw sgd
""".split())
# Names with a capital letter that are not English words to a Chinese reader.
NAMES = frozenset("""
True False None Adam AdamW SGD Llama Megatron Rabenseifner Korthikanti GPipe PyTorch NumPy Python Jupyter JupyterLab
Binder Chromium Linux Darwin Windows Notebook Transformer LayerNorm RMSNorm GeLU SwiGLU Hopper Ampere Blackwell
""".split())
# Parameter and API names the course teaches; they may appear in Chinese text as they are.
IDENTIFIERS = frozenset("""
world_size micro_batch_size num_microbatches zero_stage all_gather reduce_scatter all_reduce all_to_all
bubble_fraction global_batch seq_len num_layers hidden_size num_heads send_recv jupyterlab_widgets
""".split())
_CODE = re.compile(r"`[^`]*`|https?://\S+")
_TOKEN = re.compile(r"[A-Za-zµ][A-Za-z0-9_.'/+\-]*")
_WORDED = re.compile(r"[A-Za-z\u4e00-\u9fff]")
_PHRASES = re.compile(r"\bworld[ _]size\b", re.I)


def english_words(line: str) -> list[str]:
    """The words of ``line`` that a Chinese reader would need English for (see the module doc)."""
    line = _PHRASES.sub(" ", _CODE.sub(" ", line))
    words = []
    for m in _TOKEN.finditer(line):
        if m.group(0).endswith("/"):  # a folder: solutions/, courses/zh/
            continue
        tok = m.group(0).rstrip(".'-/+")
        after = line[m.end():].lstrip()[:1]
        before = line[:m.start()].rstrip()[-1:]
        flag = line[max(0, m.start() - 1):m.start()] == "-"  # a command-line option: --global-batch
        if len(tok) < 2 or re.search(r"[0-9./+]", tok) or after in ("(", "=") or before == "=" or flag:
            continue
        if "_" in tok:  # an identifier: English unless taught (IDENTIFIERS) or a constant (SHARD_GRAD_OP)
            if tok.lower() not in IDENTIFIERS and not tok.isupper() and all(p.isalpha() for p in tok.split("_") if p):
                words.append(tok)
            continue
        parts = [p for p in tok.split("-") if p]
        if all(_neutral_word(p) for p in parts):
            continue
        words.append(tok)
    return words


def _neutral_word(w: str) -> bool:
    if len(w) < 2 or w.lower() in NEUTRAL or w in NAMES:
        return True
    if w.isupper():                      # GPU, FSDP, TP, MB
        return True
    if any(c.isupper() for c in w[1:]):  # AllReduce, DeepSpeed, ZeRO, LargeLM, ReduceScatter
        return True
    return False


def readable(line: str, lang: str) -> bool:
    """Whether a reader of ``lang`` (``"en"`` or ``"zh"``) can read ``line``: the rule of the module doc."""
    if lang == "en":
        return not CJK.search(line)
    if line.lstrip().startswith(QUOTE.strip()):
        return True
    words = english_words(line)
    if not words:
        return True
    chinese = len(CJK.findall(line))
    if not chinese:
        return False
    # One Chinese character does not make an English sentence Chinese (issue 34): a line with three or more English
    # words of four letters or more needs at least one Chinese character per four English letters.
    long_words = [w for w in words if len(w) >= 4]
    return len(long_words) < 3 or chinese * 4 >= sum(len(w) for w in words)


def split_listing(text: str) -> tuple[str, str, str]:
    """``text`` as (lines before, a Python listing or JSON document, lines after); the middle is empty when the
    output has neither. A listing starts at a line ``def``/``class`` and runs to the end; a JSON document starts at
    the first line that opens one and ends where it closes."""
    for m in re.finditer(r"^(?:@\w.*\n)*(?:def|class) ", text, re.M):
        lines = text[m.start():].split("\n")
        for end in range(len(lines), 0, -1):  # the longest run of lines from here that is Python source
            chunk = "\n".join(lines[:end])
            if chunk.strip() and is_listing(chunk):
                return text[:m.start()], chunk, text[m.start() + len(chunk):]
    m = re.search(r"^[{\[]", text, re.M)
    if m:
        try:
            _, end = json.JSONDecoder().raw_decode(text, m.start())
            return text[:m.start()], text[m.start():end], text[end:]
        except ValueError:
            pass
    return text, "", ""


def is_listing(text: str) -> bool:
    """Whether a whole printed output is a Python listing (a def or class) or a JSON document."""
    import ast

    stripped = text.strip()
    if stripped[:1] in "{[":
        try:
            json.loads(stripped)
            return True
        except ValueError:
            pass
    if re.match(r"(?:@\w+.*\n)*(?:def|class)\s", stripped):
        try:
            ast.parse(stripped)
            return True
        except SyntaxError:
            pass
    return False


# ---------------------------------------------------------------- what a notebook shows
@dataclass(frozen=True)
class Line:
    """One line a reader sees: where (``cell 12 stdout``, ``cell 12 plot``, ``widget Dropdown``) and its text."""

    where: str
    text: str


def _strip_html(s: str) -> str:
    s = re.sub(r"(?is)<(style|script)\b.*?</\1>", " ", s)
    s = re.sub(r"(?i)<br\s*/?>|</(p|div|tr|li|h\d)>", "\n", s)
    s = re.sub(r"(?i)</t[dh]>", "  ", s)
    return html.unescape(re.sub(r"<[^>]+>", "", s))


def _lines(where: str, text: str) -> list[Line]:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return [Line(where, ln.rstrip()) for ln in text.splitlines() if ln.strip()]


def merge_streams(outputs) -> list:
    """``outputs`` with each run of consecutive stream outputs of one name (stdout, stderr) joined into one, as
    Jupyter and the website show them: a kernel may flush one printed line in two pieces."""
    merged = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if (out.get("output_type") == "stream" and prev is not None and prev.get("output_type") == "stream"
                and prev.get("name") == out.get("name")):
            merged[-1] = {**prev, "text": _join(prev.get("text", "")) + _join(out.get("text", ""))}
        else:
            merged.append(out)
    return merged


def output_lines(outputs, where: str) -> list[Line]:
    """The lines a list of nbformat outputs shows (see the module doc for what counts); consecutive stream outputs
    of one name are read as one text (:func:`merge_streams`)."""
    found = []
    for out in merge_streams(outputs):
        kind = out.get("output_type")
        if kind == "stream":
            text = _join(out.get("text", ""))
            name = f"{where} {out.get('name', 'stream')}"
            while text:
                head, listing, text = split_listing(text)
                found += _lines(name, head) + _lines(name + " listing", listing)
                if not listing:
                    break
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if "application/vnd.jupyter.widget-view+json" in data:
                continue
            if "text/markdown" in data:
                found += _lines(f"{where} markdown", _join(data["text/markdown"]))
            elif "text/html" in data:
                found += _lines(f"{where} html", _strip_html(_join(data["text/html"])))
            elif "text/plain" in data and not any(k.startswith("image/") for k in data):
                found += _lines(f"{where} result", _join(data["text/plain"]))
        elif kind == "error":
            found += _lines(f"{where} error", f"{out.get('ename', '')}: {out.get('evalue', '')}")
    return found


def _join(x) -> str:
    return "".join(x) if isinstance(x, list) else str(x)


def widget_lines(nb) -> list[Line]:
    """Labels and captured outputs of every widget in the widget state nbclient stored in ``nb``'s metadata."""
    state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    found = []
    for model in state.values():
        s = model.get("state", {})
        name = model.get("model_name", "widget").replace("Model", "")
        if SWITCH_CLASS in s.get("_dom_classes", []):
            continue
        where = f"widget {name}"
        for key in ("description", "tooltip", "placeholder"):
            if isinstance(s.get(key), str) and s[key].strip():
                found += _lines(where, _strip_html(s[key]))
        for key in ("_options_labels", "tooltips"):
            for label in s.get(key) or []:
                found += _lines(where, str(label))
        if name in ("HTML", "Label", "HTMLMath", "Button", "Text", "Textarea") and isinstance(s.get("value"), str):
            found += _lines(where, _strip_html(s["value"]))
        if s.get("outputs"):
            found += output_lines(s["outputs"], f"{where} output")
    return found


def plot_lines(records: list[dict]) -> list[Line]:
    """Lines of the figure texts recorded by :data:`KERNEL_HOOK` (mathtext ``$…$`` removed)."""
    found = []
    for rec in records:
        for t in rec.get("texts", []):
            found += _lines(f"cell [{rec.get('cell')}] plot", re.sub(r"\$[^$]*\$", " ", t))
    return found


def comment_lines(nb, lang: str | None = None) -> list[Line]:
    """The code comments of ``nb`` as a reader of ``lang`` sees them: a bilingual comment ``# English / 中文`` cut to
    that language's half (:func:`authoring.comments.code_in`; a monolingual copy is cut already, ``lang=None``).
    The language switch's own cell is left out: every copy replaces it."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "language_switch()" in cell.source:
            continue
        source = code_in(cell.source, lang) if lang else cell.source
        found += [Line(f"cell {i} comment", c.lstrip("#").strip()) for c in comments(source)]
    return found


def notebook_lines(nb, plot_records: list[dict] = (), lang: str | None = None) -> list[Line]:
    """Everything a reader of the executed notebook ``nb`` sees besides its prose cells: outputs, widget labels,
    figure texts and code comments (:func:`comment_lines`, cut to ``lang`` when the notebook is bilingual)."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            found += output_lines(cell.get("outputs", []), f"cell {i}")
    return found + widget_lines(nb) + plot_lines(list(plot_records)) + comment_lines(nb, lang)


@dataclass
class Report:
    """The audit of one notebook under one language."""

    name: str
    lang: str
    lines: list[Line] = field(default_factory=list)

    @property
    def worded(self) -> list[Line]:
        """The lines with words (Latin letters or Chinese), the ones counted: numbers and rules are neutral."""
        return [ln for ln in self.lines if _WORDED.search(ln.text)]

    @property
    def bad(self) -> list[Line]:
        return [ln for ln in self.worded if not readable(ln.text, self.lang)
                and not (self.lang == "zh" and ln.where.endswith(" listing"))]

    @property
    def share(self) -> float:
        """Share of worded lines readable in ``lang`` (1.0 when nothing is shown)."""
        n = len(self.worded)
        return 1.0 - len(self.bad) / n if n else 1.0

    def summary(self, limit: int = 12) -> str:
        n = len(self.worded)
        head = f"{self.name} [{self.lang}]: {n - len(self.bad)}/{n} lines readable ({self.share:.1%})"
        return "\n".join([head] + [f"    {ln.where}: {ln.text[:150]}" for ln in self.bad[:limit]])


# ---------------------------------------------------------------- executing under a language
# Runs in the kernel at start (an IPython startup file): after every figure is rendered, append its visible texts
# to the file named by DISTLEARN_AUDIT_LOG, with the execution count of the cell that drew it.
KERNEL_HOOK = r'''
def _distlearn_audit_hook():
    import json, os
    path = os.environ.get("DISTLEARN_AUDIT_LOG")
    if not path:
        return
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.text import Text
    original = FigureCanvasBase.print_figure

    def print_figure(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        try:
            from IPython import get_ipython
            ip = get_ipython()
            texts = [t.get_text() for t in self.figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
            with open(path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"cell": getattr(ip, "execution_count", None), "texts": texts},
                                   ensure_ascii=False) + "\n")
        except Exception:
            pass
        return result

    FigureCanvasBase.print_figure = print_figure


_distlearn_audit_hook()
del _distlearn_audit_hook
'''


def execute_audited(path: str | Path, lang: str, timeout: int = 600, write: bool = True, allow_errors: bool = False):
    """Execute the notebook at ``path`` in a fresh kernel under ``DISTLEARN_LANG=lang``, recording plot texts; store
    its outputs in place when ``write``. Returns ``(nb, plot_records)``; ``nb`` keeps nbclient's widget state.
    ``allow_errors``: run on after a cell raises (an exercise as shipped: its checks fail)."""
    from nbclient import NotebookClient

    lang = normalize_language(lang)
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="distlearn-audit-") as tmp:
        startup = Path(tmp) / "ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True)
        (startup / "00-distlearn-audit.py").write_text(KERNEL_HOOK, encoding="utf-8")
        log = Path(tmp) / "plots.jsonl"
        env = dict(os.environ, DISTLEARN_LANG=lang, IPYTHONDIR=str(Path(tmp) / "ipython"),
                   DISTLEARN_AUDIT_LOG=str(log), MPLBACKEND="module://matplotlib_inline.backend_inline")
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=allow_errors,
                                resources={"metadata": {"path": str(path.parent)}})
        client.execute(env=env)
        records = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    if write:
        nbformat.write(nb, path)
    return nb, records


def audit(path: str | Path, lang: str, name: str | None = None, allow_errors: bool = False) -> Report:
    """Execute ``path`` under ``lang`` (nothing is written) and audit what it shows."""
    nb, records = execute_audited(path, lang, write=False, allow_errors=allow_errors)
    lang = normalize_language(lang)
    return Report(name or Path(path).stem, lang, notebook_lines(nb, records, lang if lang in ("en", "zh") else None))


def stored_lines(nb) -> list[Line]:
    """Everything a reader of a stored monolingual copy (``courses/<lang>/``, :func:`authoring.copies.execute_copy`)
    sees besides its prose, read from the file: the stored outputs, and the figure texts and widget labels its run
    recorded in ``metadata.distlearn.shown`` (the figures are stored as pictures, the widget state not at all)."""
    shown = nb.metadata.get("distlearn", {}).get("shown", {})
    return (notebook_lines(nb) + [Line(where, text) for where, text in shown.get("widgets", [])]
            + plot_lines(shown.get("plots", [])))


def stored_report(path: str | Path, lang: str | None = None, name: str | None = None) -> Report:
    """The audit of a stored monolingual copy without running it: :func:`stored_lines` checked under ``lang``
    (default: the copy's own language, ``metadata.distlearn.language``). Raises ValueError for a notebook that is
    not a stored copy (no language, or never executed as one: no ``shown`` record)."""
    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata.get("distlearn", {})
    if "shown" not in meta or not (lang or meta.get("language")):
        raise ValueError(f"{path} is not an executed monolingual copy (metadata distlearn.core.language / shown) / "
                         f"{path} 不是执行过的单语副本")
    lang = normalize_language(lang or meta["language"])
    return Report(name or path.stem, lang, stored_lines(nb))


def reports_to_json(reports: list[Report]) -> list[dict]:
    return [{"name": r.name, "lang": r.lang, "lines": [[ln.where, ln.text] for ln in r.lines]} for r in reports]


def reports_from_json(data: list[dict]) -> list[Report]:
    return [Report(d["name"], d["lang"], [Line(w, t) for w, t in d["lines"]]) for d in data]


def audit_course(lang: str, names: list[str] | None = None, root: Path | None = None, log=print) -> list[Report]:
    """:func:`audit` every chapter, solution and exercise notebook of the course (or those whose stem or relative
    path is in ``names``) under ``lang``; exercises run as shipped, so their checks fail and show their feedback.
    Notebooks run in their folder; the stored files are not changed."""

    root = Path(root or ROOT)
    reports = []
    for path in course_notebooks(root):
        rel = path.relative_to(root).with_suffix("").as_posix()
        if names and path.stem not in names and rel not in names and f"{rel}.ipynb" not in names:
            continue
        report = audit(path, lang, rel, allow_errors=path.parent.name == "exercises")
        log(report.summary())
        reports.append(report)
    return reports

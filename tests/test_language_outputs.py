"""A reader of one language can read everything the course shows (authoring.lang_audit, rule in README):

- the rule itself, on lines it must accept and lines it must refuse, and the kernel hook that records plot texts;
- every chapter, solution and exercise (exercises as shipped: their checks fail and print feedback), executed under
  ``zh`` and under ``en``: 100 % of printed lines, plot texts and widget labels readable, and no form the glossary
  rules out in the Chinese output. The executions are those of the monolingual copies (``split --report``), run for
  both languages at once in two processes, so the same runs also test that the copies are monolingual, set their
  own language and store outputs in it;
- the stored monolingual copies ``courses/en/`` and ``courses/zh/`` (what the website shows and ``make lab
  COURSE_LANG=zh`` opens), read without running anything (part of ``make test``, seconds): every stored output line,
  every figure text and widget label their run recorded is readable in the copy's language, by the same rule;
- command lines (``python -m authoring.course``, ``python -m distlearn plan``), argparse's own words included.

The executing tests (``make test-languages``, about 15 min) also cover the exercises run as shipped (their failing
checks' feedback), which no stored file holds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import nbformat
import pytest

from authoring import copies as copy_tools, lang_audit as A, pairing, parity, paths
from distlearn.core.i18n import QUOTE

CJK = A.CJK


# ------------------------------------------------------------------ the rule
@pytest.mark.parametrize("line", [
    "rank 0: [0 1 2 3]", "  ZeRO-3: 14.0 GB = 13.0 GiB", "dp=8 tp=8 pp=1 zero=1 recompute=selective b=1 m=64",
    "all_reduce_sum   gloo == 虚拟集群: True", "fp32  FSDP2 [4.3815 4.2251]", "llama3-8b · 64 × h100-80gb",
    "TransformerDecoderLayer: 12,600,320", "max |block(x) - x| = 0.0", QUOTE + "Check batch related parameters.",
    "Python                        3.11.7", "MFU 43.7%", "world_size = 4", "notebooks/01_memory.ipynb",
])
def test_lines_a_chinese_reader_can_read(line):
    assert A.readable(line, "zh"), A.english_words(line)


@pytest.mark.parametrize("line", [
    "params  grads  optim  total", "softmax_dropout_mask          384 MiB", "mixed               adam      2",
    "no plan fits", "seed code's loss", "Hint: the optimizer keeps a copy", "gpipe   4    8  1 |   33.00",
    "bucket_cap_mb  buckets  comm total (ms)",
])
def test_lines_a_chinese_reader_cannot_read(line):
    assert not A.readable(line, "zh")


def test_under_english_no_chinese_at_all():
    assert A.readable("precision  optimizer  params", "en")
    for line in ("精度", "rank 0：负责", "（GB）", "total / 合计"):
        assert not A.readable(line, "en"), line


def test_listings_are_code_not_prose():
    head, listing, tail = A.split_listing("heading\ndef f(x):\n    return x\n")
    assert head == "heading\n" and listing.startswith("def f") and not tail
    head, listing, tail = A.split_listing('{\n  "stage": 3\n}\nafter\n')
    assert listing.startswith("{") and tail.strip() == "after"
    assert A.split_listing("not code: def is a word\n")[1] == ""


def test_widget_state_and_outputs_are_read():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="params grads\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "<Figure size 640x480>", "image/png": "x"}),
        nbformat.v4.new_output("display_data", data={"text/html": "<b>no plan fits</b>", "text/plain": "x"}),
        nbformat.v4.new_output("error", ename="ValueError", evalue="bad value", traceback=[])])]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {
        "a": {"model_name": "DropdownModel", "state": {"description": "Operation", "_options_labels": ["broadcast"]}},
        "b": {"model_name": "ToggleButtonsModel", "state": {"_dom_classes": ["distlearn-language-switch"],
                                                            "_options_labels": ["English", "中文"]}},
        "c": {"model_name": "OutputModel", "state": {"outputs": [
            {"output_type": "stream", "name": "stdout", "text": "messages in this step\n"}]}}}}}
    texts = [ln.text for ln in A.notebook_lines(nb, [{"cell": 1, "texts": ["Bytes sent", "$10^{3}$"]}])]
    assert texts == ["params grads", "no plan fits", "ValueError: bad value", "Operation", "broadcast",
                     "messages in this step", "Bytes sent"]  # no figure repr, no switch, no mathtext


def test_a_line_printed_in_two_pieces_is_read_as_one():
    """A kernel may flush one printed line as two stream outputs ("标签：" then " {'bool': 1}"): the reader sees one
    line, and so does the audit."""
    outs = [nbformat.v4.new_output("stream", name="stdout", text="按数据类型统计的字节数："),
            nbformat.v4.new_output("stream", name="stdout", text=" {'bfloat16': 2, 'bool': 1}\nnext\n"),
            nbformat.v4.new_output("stream", name="stderr", text="warn\n")]
    assert [ln.text for ln in A.output_lines(outs, "c")] == ["按数据类型统计的字节数： {'bfloat16': 2, 'bool': 1}",
                                                             "next", "warn"]


@pytest.mark.slow
def test_the_audit_catches_english_in_zh_and_chinese_in_en(tmp_path):
    """A kernel really runs: the plot hook records titles and tick labels; a bad line is reported in each language."""
    code = ("import matplotlib.pyplot as plt\nfrom distlearn.core import plots\nfrom distlearn.core.i18n import bi\nprint(bi('total', '合计'))\n"
            "print('params grads')\nfig, ax = plt.subplots()\nax.set_title(bi('Memory', '显存'))\n"
            "ax.set_xlabel('seconds')\nplt.show()")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "demo.ipynb"
    nbformat.write(nb, path)
    zh, en = A.audit(path, "zh"), A.audit(path, "en")
    assert {ln.text for ln in zh.lines} >= {"合计", "params grads", "显存", "seconds"}
    assert [ln.text for ln in zh.bad] == ["params grads", "seconds"]
    assert {ln.text for ln in en.lines} >= {"total", "Memory", "seconds"} and not en.bad


# ------------------------------------------------------------------ every chapter, in each language
@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """``split --lang zh`` and ``split --lang en`` with ``--report``, run at the same time in two processes."""
    base = tmp_path_factory.mktemp("languages")
    env = {k: v for k, v in os.environ.items() if k != "DISTLEARN_LANG"}
    procs = {}
    for lang in ("zh", "en"):
        cmd = [sys.executable, "-m", "authoring.course", "split", "--lang", lang, "--out", str(base / lang),
               "--report", str(base / f"{lang}.json")]
        procs[lang] = subprocess.Popen(cmd, cwd=paths.ROOT, env=env, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
    out = {}
    for lang, proc in procs.items():
        log, _ = proc.communicate(timeout=1500)
        assert proc.returncode == 0, log[-3000:]
        reports = A.reports_from_json(json.loads((base / f"{lang}.json").read_text(encoding="utf-8")))
        out[lang] = (base / lang, reports)
    return out


@pytest.mark.slow
@pytest.mark.course_languages
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_every_chapter_is_readable_in_one_language(copies, lang):
    root, reports = copies[lang]
    names = {r.name for r in reports}
    assert {p.relative_to(paths.ROOT).with_suffix("").as_posix() for p in paths.course_notebooks()} == names
    bad = [r.summary(limit=20) for r in reports if r.bad]
    print("\n".join(f"{r.name} [{lang}]: {r.share:.1%} of {len(r.worded)} lines" for r in reports))
    assert not bad, "\n".join(bad)
    assert sum(len(r.worded) for r in reports) > 1000  # the audit saw the course, not an empty run


@pytest.mark.slow
@pytest.mark.course_languages
def test_chinese_output_uses_the_glossary_forms(copies):
    _, reports = copies["zh"]
    found = [f"{r.name} {ln.where}: {hit!r} → {rule.use}: {ln.text[:100]}"
             for r in reports for ln in r.lines for hit, rule in parity.forbidden_problems(ln.text)]
    assert not found, "\n".join(found)


@pytest.mark.slow
@pytest.mark.course_languages
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_monolingual_copies_set_their_language_and_store_its_outputs(copies, lang):
    root, _ = copies[lang]
    other = "en" if lang == "zh" else "zh"
    for src in paths.course_notebooks():
        copy = nbformat.read(root / src.parent.name / src.name, as_version=4)
        assert not [c for c in copy.cells if f"lang-{other}" in c.metadata.get("tags", [])], src
        first_code = next(c for c in copy.cells if c.cell_type == "code")
        assert first_code.source == copy_tools.language_cell_source(lang), src
        if src.parent.name == "exercises":
            assert all(not c.get("outputs") for c in copy.cells if c.cell_type == "code"), src
            continue
        assert pairing.execution_problems(copy, str(src)) == [], src
        if lang == "en":
            shown = [ln.text for ln in A.notebook_lines(copy)]
            assert not [t for t in shown if CJK.search(t)], src


# ------------------------------------------------------------------ the stored copies, without running them
STORED = [(lang, p.relative_to(paths.ROOT).with_suffix("").as_posix())
          for lang in paths.COPY_LANGS for p in pairing.paired_notebooks()]


@pytest.mark.parametrize("lang, name", STORED, ids=[f"{lang}:{name}" for lang, name in STORED])
def test_stored_copy_is_readable_in_its_language(lang, name):
    path = copy_tools.copy_path(f"{name}.ipynb", lang)
    assert path.exists(), f"no stored copy {path}: run `make notebooks`"
    report = A.stored_report(path, name=name)
    assert report.lang == lang
    assert not report.bad, report.summary(limit=40)
    if lang == "zh":
        found = [f"{ln.where}: {hit!r} → {rule.use}: {ln.text[:100]}"
                 for ln in report.lines for hit, rule in parity.forbidden_problems(ln.text)]
        assert not found, "\n".join(found)


@pytest.mark.parametrize("lang", paths.COPY_LANGS)
def test_the_stored_audit_sees_the_whole_course(lang):
    """Not an empty pass: the stored copies hold > 1000 worded lines, and a figure's texts for every figure stored
    as a picture (the run records them as it draws; explorers' pictures are drawn the same way)."""
    worded, missing = 0, []
    for p in pairing.paired_notebooks():
        copy = copy_tools.copy_path(p, lang)
        nb = nbformat.read(copy, as_version=4)
        worded += len(A.stored_report(copy).worded)
        pictures = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                       if "image/png" in o.get("data", {}))
        if len(nb.metadata.distlearn.shown["plots"]) < pictures:
            missing.append(f"{copy.name}: {pictures} figures, {len(nb.metadata.distlearn.shown['plots'])} recorded")
    assert worded > 1000 and not missing, (worded, missing)


def test_the_stored_audit_fails_on_a_copy_broken_on_purpose(tmp_path):
    """A Chinese line in an English copy's output, an English-only figure label or widget label in a Chinese copy:
    each is reported."""
    rel = "notebooks/13_fault_tolerance.ipynb"
    for lang, where, bad in (("en", "stdout", "故障率 0.43"), ("zh", "plots", "failures per day"),
                             ("zh", "widgets", "Checkpoint interval")):
        assert not A.stored_report(copy_tools.copy_path(rel, lang)).bad, "the unbroken copy must pass"
        nb = nbformat.read(copy_tools.copy_path(rel, lang), as_version=4)
        if where == "stdout":
            cell = next(c for c in nb.cells if c.cell_type == "code" and c.get("outputs"))
            cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=bad + "\n"))
        elif where == "plots":
            nb.metadata.distlearn.shown.plots.append({"cell": 3, "texts": [bad]})
        else:
            nb.metadata.distlearn.shown.widgets.append(["widget Dropdown", bad])
        path = tmp_path / f"{lang}-{where}.ipynb"
        nbformat.write(nb, path)
        assert [ln.text for ln in A.stored_report(path).bad] == [bad], (lang, where)
    nb = nbformat.read(paths.ROOT / rel, as_version=4)  # the bilingual notebook is no stored copy
    nbformat.write(nb, tmp_path / "both.ipynb")
    with pytest.raises(ValueError, match="not an executed monolingual copy"):
        A.stored_report(tmp_path / "both.ipynb")


# ------------------------------------------------------------------ command lines
def _run(args, lang):
    env = dict(os.environ, DISTLEARN_LANG=lang)
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, env=env, cwd=paths.ROOT)


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("args", [["authoring.course", "--help"], ["authoring.course", "split", "--help"],
                                  ["authoring.course", "split"], ["authoring.course", "bogus"],
                                  ["distlearn", "plan", "--help"], ["distlearn", "plan", "--gpus", "x"],
                                  ["distlearn", "compare", "--help"], ["distlearn", "compare", "missing.json"]])
def test_command_lines_speak_the_language(args, lang):
    r = _run(args, lang)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert lines, r
    bad = [ln for ln in lines if not A.readable(ln, lang)]
    assert not bad, "\n".join(bad)
    if args[-1] != "--help":
        assert r.returncode == 2 and ("错误" if lang == "zh" else "error") in r.stderr


def test_a_bad_language_on_the_command_line_is_a_bilingual_error():
    r = _run(["authoring.course", "split", "--lang", "klingon", "--no-execute", "--out", "/nonexistent"], "en")
    assert r.returncode != 0 and "not a language of this course" in r.stderr and "不是本课程支持的语言" in r.stderr

"""Bilingual consistency: glossary terms carry over from English to Chinese (cells and registered texts), every
explorer's labels follow the language switch, and monolingual copies of the notebooks are written correctly."""
from __future__ import annotations

import importlib
import os
import pkgutil
import re
import string
import subprocess
import sys

import nbformat
import pytest

import distlearn
from distlearn.core.explorer import explorer_modules
from authoring.comments import code_in
from authoring import copies, pairing, parity, paths, course
from distlearn.core import i18n

PAIR = '+++ {{"tags": ["lang-en"]}}\n\n{en}\n\n+++ {{"tags": ["lang-zh"]}}\n\n{zh}\n\n'  # one MyST prose pair

CJK = re.compile(r"[\u4e00-\u9fff]")
EXPLORERS = list(explorer_modules())


@pytest.fixture
def language():
    """Restore the language after a test that switches it."""
    before = i18n.get_language()
    yield distlearn.set_language
    distlearn.set_language(before)


def _import_everything():
    """Import every distlearn module, so every text() is registered (not the forkserver's DeepSpeed preload: it has
    no text and only imports DeepSpeed)."""
    for mod in pkgutil.walk_packages(distlearn.__path__, "distlearn."):
        if mod.name.endswith("__main__") or mod.name == "distlearn.deepspeed_fsdp.lab_preload":
            continue
        importlib.import_module(mod.name)


# ------------------------------------------------------------------ glossary parsing and matching
def test_glossary_is_parsed():
    terms = {t.en: t for t in parity.glossary_terms()}
    assert len(terms) >= 60
    assert {"AllReduce", "全规约"} <= set(terms["all-reduce"].zh)
    assert terms["weak scaling"].zh == ("弱扩展",) and terms["strong scaling"].zh == ("强扩展",)
    assert terms["bandwidth"].zh == ("带宽",) and "延迟" in terms["latency"].zh  # paired part by part
    assert "完全分片数据并行" in terms["FSDP"].zh and "FSDP" in terms["fully sharded data parallel"].zh
    assert {"rank", "进程编号"} <= set(terms["rank"].zh)
    assert terms["DeepSpeed"].zh == ("DeepSpeed",)


@pytest.mark.parametrize("en, zh", [
    ("We use data parallelism.", "我们使用数据并行。"),
    ("Data Parallelism scales.", "数据并行可以扩展。"),
    ("Each rank calls all_reduce, an AllReduce.", "每个 rank 调用 AllReduce（全规约）。"),
    ("An all-reduce sums.", "全规约求和。"),
    ("Split into micro-batches.", "切成微批次。"),
    ("Reduce memory with `zero_stage` and $p$ stages.", "用 `zero_stage` 减少显存。"),  # not the collective
    ("The planner ranks them and ranks the plans.", "规划器给方案排序。"),  # verb, not the noun
    ("Use 3D parallelism.", "使用 3D并行。"),  # spacing ignored
    ("See [the guide](https://example.com/all-reduce).", "见指南。"),  # link targets ignored
])
def test_glossary_match_accepts(en, zh):
    assert parity.glossary_problems(en, zh) == []


@pytest.mark.parametrize("en, zh, missing", [
    ("An all-reduce sums.", "求和。", "all-reduce"),
    ("Then a Reduce to rank 0.", "然后归约到 rank 0。", "reduce"),
    ("Bandwidth and latency.", "带宽。", "latency"),
    ("Pipeline bubbles waste time.", "气泡浪费时间。", "pipeline bubble"),
    ("ZeRO shards optimizer states.", "ZeRO 切分优化器的状态。", "optimizer states"),
    ("Use DeepSpeed.", "使用深度速度。", "DeepSpeed"),
    ("Every rank waits.", "每个进程都在等待。", "rank"),
])
def test_glossary_match_reports(en, zh, missing):
    assert missing in [t.en for t in parity.glossary_problems(en, zh)]


@pytest.mark.parametrize("zh, found", [
    ("原始示例代码的种子代码", "种子"), ("在 8 张 GPU 上", "8 张 GPU"), ("每卡 14 GB", "每卡"), ("稳定阶段结束", "稳定阶段"),
    ("迭代时间变长", "迭代时间"), ("步时 3 秒", "步时"), ("暴露的通信", "暴露的通信"), ("小了 8 倍", "小了 8 倍"), ("短了 v 倍", "短了 v 倍"), ("网络慢 9 倍", "慢 9 倍"),
    ("bf16 只有 8 位有效数字", "8 位有效数字"), ("Adam 的两个矩", "两个矩"), ("**下一章 / Next:**", "下一章 / Next"),
    ("见本地图", "本地图")])
def test_forbidden_forms_are_found(zh, found):
    assert found in [hit for hit, _ in parity.forbidden_problems(zh)]


@pytest.mark.parametrize("zh", ["随机种子 0", "每个 GPU 进程", "8 块 GPU", "每步时间", "未被隐藏的通信", "是原来的 8 倍",
                                "一阶矩和二阶矩", "预热期、稳定期和收尾期", "流水线阶段", "`seed_*` 函数",
                                "每个 rank 在开始一步时发出发送", "固定随机种子的生成器"])
def test_glossary_forms_are_allowed(zh):
    assert parity.forbidden_problems(zh) == []


def test_a_longer_term_is_matched_before_a_shorter_one():
    assert parity.glossary_problems("The batch size grows.", "批量大小变大。") == []  # not also "batch" → 批次
    assert "batch" in [t.en for t in parity.glossary_problems("Each batch is split.", "每个批量被切分。")]


def test_parity_reports_a_missing_glossary_term():
    nb = pairing.from_myst(PAIR.format(en="## Data parallelism\nEach GPU holds a copy.", zh="## 并行\n每块 GPU 一份副本。"))
    problems = parity.parity_problems(nb, "x")
    assert len(problems) == 1 and "data parallelism" in problems[0] and "数据并行" in problems[0]


# ------------------------------------------------------------------ registered texts
def test_every_registered_text_is_bilingual_and_consistent():
    _import_everything()
    fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f is not None}
    bad = []
    for key, t in sorted(i18n.REGISTRY.items()):
        if not t.en.strip():
            bad.append(f"{key}: empty English text")
        if CJK.search(t.en):
            bad.append(f"{key}: Chinese characters in the English text {t.en!r}")
        if not CJK.search(t.zh):
            bad.append(f"{key}: no Chinese in the zh text {t.zh!r}")
        if fields(t.en) != fields(t.zh):
            bad.append(f"{key}: placeholders differ: {sorted(fields(t.en))} vs {sorted(fields(t.zh))}")
        bad += [f"{key}: glossary term {g.en!r} has none of {g.zh} in {t.zh!r}"
                for g in parity.glossary_problems(t.en, t.zh)]
        bad += [f"{key}: {hit!r} is ruled out by the glossary, write {rule.use}: {t.zh!r}"
                for hit, rule in parity.forbidden_problems(t.zh)]
    assert not bad, "\n".join(bad)


# ------------------------------------------------------------------ language switch
@pytest.mark.parametrize("name", EXPLORERS)
def test_explorer_labels_follow_the_language(name, language):
    mod = importlib.import_module(explorer_modules()[name])
    labels = {}
    for lang in ("en", "zh", "both"):
        language(lang)
        labels[lang] = {k: c.description for k, c in mod.controls().items() if getattr(c, "description", "")}
    for key, both in labels["both"].items():
        en, zh = labels["en"][key], labels["zh"][key]
        assert not CJK.search(en), (key, en)
        assert CJK.search(zh), (key, zh)
        assert both == f"{en} / {zh}", (key, both)


def test_texts_plots_and_feedback_follow_the_language(language, capsys):
    import matplotlib
    matplotlib.use("Agg")
    from distlearn.core import check, plots

    t = i18n.Text("test.x", "world size {n}", "进程总数 {n}")
    language("en")
    assert t(n=4) == "world size 4" and i18n.bi("a", "甲") == "a"
    _, ax = plots.new_figure()
    plots.title(ax, "Memory", "显存")
    assert ax.get_title() == "Memory"
    with pytest.raises(check.CheckFailed):
        check.verify("ex_demo", lambda x: x, [check.Case((1,), expected=2, hint_en="double it", hint_zh="乘以二")])
    out = capsys.readouterr().out
    assert "ex_demo" in out and not CJK.search(out), out
    language("zh")
    assert t(n=4) == "进程总数 4" and i18n.bi("a", "甲") == "甲"
    plots.title(ax, "Memory", "显存")
    assert ax.get_title() == "显存"
    language("both")
    assert t(n=4) == "world size 4 / 进程总数 4"
    plots.title(ax, "Memory", "显存")
    assert ax.get_title() == "Memory\n显存"
    with pytest.raises(ValueError):
        distlearn.set_language("fr")


def test_errors_follow_the_language(language):
    from distlearn.core.validate import DistlearnValueError, check_int

    for lang in ("en", "zh", "both"):
        language(lang)
        with pytest.raises(DistlearnValueError) as exc:
            check_int("world_size", 0)
        msg = str(exc.value)
        assert "world_size" in msg
        assert bool(CJK.search(msg)) == (lang != "en"), (lang, msg)
        assert ("must be" in msg) == (lang != "zh"), (lang, msg)


@pytest.mark.parametrize("value, expected", [
    ("zh", "zh"), ("EN", "en"), ("both", "both"), ("zh_CN", "zh"), ("zh-CN", "zh"), ("zh_Hans", "zh"),
    ("zh_CN.UTF-8", "zh"), ("en_US", "en"), ("en-GB", "en"), ("English", "en"), ("中文", "zh"), ("", "both")])
def test_environment_variable_sets_the_language(value, expected):
    code = "import distlearn; print(distlearn.get_language())"
    env = dict(os.environ, DISTLEARN_LANG=value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == expected


@pytest.mark.parametrize("value", ["klingon", "fr", "C", "zhx", "en_zh_x_very_long_region"])
def test_a_bad_environment_variable_is_a_clear_bilingual_error(value):
    env = dict(os.environ, DISTLEARN_LANG=value)
    r = subprocess.run([sys.executable, "-c", "import distlearn"], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-2:]
    assert "DistlearnValueError: DISTLEARN_LANG" in last[0] and repr(value) in last[0], r.stderr
    assert "不是本课程支持的语言" in last[1], r.stderr


@pytest.mark.parametrize("value", ["fr", "de_DE", "C", "", None, 1, "en zh"])
def test_a_bad_language_is_a_clear_bilingual_error_in_every_language(value, language):
    from distlearn.core.validate import DistlearnValueError

    for lang in ("en", "zh"):
        language(lang)
        with pytest.raises(DistlearnValueError) as exc:
            distlearn.set_language(value)
        assert "not a language of this course" in str(exc.value) and "不是本课程支持的语言" in str(exc.value)
        assert distlearn.get_language() == lang  # unchanged


@pytest.mark.parametrize("value, expected", [
    ("zh", "zh"), ("ZH", "zh"), ("zh_CN", "zh"), ("zh-CN", "zh"), ("zh_Hans", "zh"), ("zh-Hans-CN", "zh"),
    ("zh_TW", "zh"), (" Chinese ", "zh"), ("简体中文", "zh"), ("en", "en"), ("en_US", "en"), ("en-GB", "en"),
    ("en_US.UTF-8", "en"), ("ENGLISH", "en"), ("英文", "en"), ("both", "both"), ("Bilingual", "both"),
    ("en+zh", "both"), ("双语", "both")])
def test_language_values_as_people_write_them(value, expected, language):
    assert distlearn.normalize_language(value) == expected
    language(value)
    assert distlearn.get_language() == expected


# ------------------------------------------------------------------ monolingual copies
def _split_cli(lang, out, root=None, subprocess_run=False):
    """``python -m authoring.course split``: through a real subprocess once (the command line itself), else the
    same ``course.main`` in this process (a new interpreter costs seconds per call)."""
    args = ["split", "--lang", lang, "--out", str(out), "--no-execute"] + (["--root", str(root)] if root else [])
    if subprocess_run:
        subprocess.run([sys.executable, "-m", "authoring.course", *args], check=True, capture_output=True,
                       cwd=paths.ROOT)
    else:
        assert course.main(args) in (0, None)


def _check_split(src_paths, out, lang):
    other = "zh" if lang == "en" else "en"
    for src in src_paths:
        original = nbformat.read(src, as_version=4)
        copy = nbformat.read(out / src.parent.name / src.name, as_version=4)
        tags = [t for c in copy.cells for t in c.metadata.get("tags", [])]
        assert f"lang-{other}" not in tags, src
        code = [c.source for c in original.cells if c.cell_type == "code"]
        setter = copies.language_cell_source(lang)
        # each bilingual comment cut to the copy's language, and the exercise stub in that language only
        code = [code_in(s, lang).replace(paths.PLACEHOLDER, paths.PLACEHOLDER_IN[lang]) for s in code]
        expected = ([setter if copies.SWITCH_CALL in s else s for s in code] if any(copies.SWITCH_CALL in s for s in code)
                    else [setter] + code)  # the switch becomes the copy's own language, or that cell is added
        assert [c.source for c in copy.cells if c.cell_type == "code"] == expected, src
        assert all(not c.get("outputs") for c in copy.cells if c.cell_type == "code"), src  # stored in both: cleared
        prose = [c.source for c in copy.cells if c.cell_type == "markdown"]
        assert len(prose) == sum(parity.cell_language(c) == lang for c in original.cells), src
        if lang == "zh":
            assert all(CJK.search(p) for p in prose), src


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_split_cli_on_the_real_notebooks(tmp_path, lang):
    _split_cli(lang, tmp_path, subprocess_run=lang == "zh")
    notebooks = paths.course_notebooks()
    _check_split(notebooks, tmp_path, lang)
    assert len(list(tmp_path.rglob("*.ipynb"))) == len(notebooks)


def test_split_cli_on_a_small_course(tmp_path):
    root = tmp_path / "course"
    (root / "notebooks").mkdir(parents=True)
    nb = pairing.from_myst(PAIR.format(en="# One\nData parallelism.", zh="# 一\n数据并行。") + "```{code-cell} ipython3\nx = 1\n```\n"
                          + PAIR.format(en="More.", zh="更多。"))
    nbformat.write(nb, root / "notebooks" / "01_x.ipynb")
    for lang in ("zh", "en"):
        _split_cli(lang, tmp_path / lang, root)
        _check_split([root / "notebooks" / "01_x.ipynb"], tmp_path / lang, lang)
    zh = nbformat.read(tmp_path / "zh" / "notebooks" / "01_x.ipynb", as_version=4)
    assert [c.source for c in zh.cells] == ["# 一\n数据并行。", copies.language_cell_source("zh"), "x = 1", "更多。"]


def test_the_chinese_readme_is_complete_and_linked():
    """README.md links README.zh-CN.md at its top; the Chinese README lists every chapter with its notebook and
    exercises, documents the language switch and the one-language course, and uses the glossary's forms."""
    readme, zh = (paths.ROOT / "README.md").read_text(encoding="utf-8"), \
        (paths.ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert "README.zh-CN.md" in "\n".join(readme.splitlines()[:6])
    chapters = sorted(p.name for p in (paths.ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    missing = [c for c in chapters if f"notebooks/{c}" not in zh]
    missing += [c for c in chapters[1:] if f"exercises/{c}" not in zh]
    assert not missing, missing
    for needed in ("set_language", "DISTLEARN_LANG", "COURSE_LANG=zh", "split", "docs/glossary.md", "docs/teaching.md"):
        assert needed in zh, needed
    assert parity.forbidden_problems(zh) == []


def test_chinese_string_literals_in_the_package_use_the_glossary_forms():
    """Every Chinese string written in distlearn/ (one-off bi(...) texts, f-strings, messages; not only registered
    texts) avoids the forms the glossary rules out: chapter 14's no-layout message once said "换一个 GPU 数"."""
    import ast

    found = []
    for path in sorted((paths.ROOT / "distlearn").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts joined, placeholders as "0"
                value = "".join(v.value if isinstance(v, ast.Constant) else "0" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                value = node.value
            else:
                continue
            if re.search(r"[\u4e00-\u9fff]", value):
                found += [f"{path.relative_to(paths.ROOT)}:{node.lineno}: {hit!r} → {rule.use}"
                          for hit, rule in parity.forbidden_problems(value)]
    assert not found, "\n".join(found)

"""``python -m distlearn compare``: a reviewer's own runs, written as JSON, are met exactly as the published runs
are (issue 38: "runs kept private by the project's reviewers are met the same way")."""
import json

import pytest

import distlearn.planning as P
from distlearn.__main__ import main
from distlearn.core.validate import DistlearnValueError
from distlearn.planning import run_files

EXAMPLE = "examples/private_run.json"
SAME_AS = {"gpt3-175b-by-hand": "megatron-gpt3-175b", "llama3-405b-16k-by-hand": "llama3-405b-16k-gpus"}


def test_the_example_file_reproduces_the_published_rows_exactly():
    """Written out by hand in JSON, two published runs get the same estimate and ratio as their rows in
    PUBLISHED_RUNS (the Python objects): the file path and the published path are one path."""
    runs = run_files.load_runs(EXAMPLE)
    assert set(runs) == set(SAME_AS)
    for name, published in SAME_AS.items():
        mine, theirs = P.compare_run(runs[name]), P.compare_published(published)
        assert mine["ratio"] == pytest.approx(theirs["ratio"], rel=1e-12), name
        assert mine["estimate"].time == pytest.approx(theirs["estimate"].time, rel=1e-12), name


def test_summary_is_chapter_14s_statistics():
    """summarize() of the out-of-sample published ratios gives validation_report's share, median and worst."""
    rep = P.calibration.validation_report()
    s = run_files.summarize(rep.ratios)
    assert (s.count, s.share_within, s.median_error, s.worst_error) == (
        len(rep.ratios), rep.share_within, rep.median_error, rep.worst_error)
    assert set(s.outside_wide) == set(rep.outside_wide)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_command_prints_each_run_and_the_summary(capsys, monkeypatch, lang):
    monkeypatch.setenv("DISTLEARN_LANG", lang)
    from distlearn.core import i18n
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        assert main(["compare", EXAMPLE]) == 0
    finally:
        i18n.set_language(old)
    out = capsys.readouterr().out
    ratios = {n: P.compare_published(p)["ratio"] for n, p in SAME_AS.items()}
    for name, ratio in ratios.items():
        assert f"{ratio:.3f}" in out and name in out
    lines = [line for line in out.splitlines() if line.strip()]
    if lang == "zh":
        assert all(any("\u4e00" <= c <= "\u9fff" for c in line) for line in lines), out
        assert "2 次运行" in out and "计算" in out
    else:
        assert "2 runs: 100% within ±10 %" in out and not any("\u4e00" <= c <= "\u9fff" for c in out)


def _write(tmp_path, obj, name="run.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj), encoding="utf-8")
    return str(path)


def _one_run(**changes):
    run = json.load(open(EXAMPLE, encoding="utf-8"))["runs"][0]
    run.update(changes)
    return run


@pytest.mark.parametrize("content, key, words", [
    ("{not json", "path", ("not valid JSON", "line 1")),
    (_one_run(publised_flops=1e12), "run", ("publised_flops", "unknown key")),
    (_one_run(model="gpt-5"), "model", ("gpt-5", "unknown preset")),
    (_one_run(gpu={"preset": "h100-80gb", "nvlink": 1}), "gpu", ("nvlink", "unknown field")),
    (_one_run(plan={"dp": 8, "tp": 8, "pp": 8}), "run['plan']", ("512", "1024")),
    (_one_run(plan={"dp": 8, "tp": 8, "pp": 16, "zero": 1}), "plan", ("zero", "unknown field")),
    (_one_run(published_step_seconds=32.0), "run", ("exactly one",)),
    (_one_run(options={"overlap": True}), "run['options']", ("overlap",)),
])
def test_a_bad_file_names_the_file_the_run_and_the_key(tmp_path, content, key, words):
    path = _write(tmp_path, content)
    with pytest.raises(DistlearnValueError) as info:
        run_files.load_runs(path)
    assert info.value.param == key
    for w in words:
        assert w in info.value.en, info.value.en
    assert "run.json" in info.value.en and "run.json" in info.value.zh
    assert any("\u4e00" <= c <= "\u9fff" for c in info.value.zh)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_compare_command_reports_a_bad_file_on_stderr_with_status_2(tmp_path, capsys, lang):
    from distlearn.core import i18n
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        assert main(["compare", str(tmp_path / "missing.json")]) == 2
        err = capsys.readouterr().err
        assert "missing.json" in err and (("无法读取" in err) == (lang == "zh"))
        assert main(["compare", _write(tmp_path, _one_run(model="gpt-5"))]) == 2
        assert "gpt-5" in capsys.readouterr().err
    finally:
        i18n.set_language(old)


@pytest.mark.parametrize("lang, expected", [
    ("both", ("the following arguments are required: FILE.json / 缺少必需的参数：FILE.json",
              "unrecognized arguments: --bogus / 无法识别的参数：--bogus")),
    ("en", ("the following arguments are required: FILE.json", "unrecognized arguments: --bogus")),
    ("zh", ("缺少必需的参数：FILE.json", "无法识别的参数：--bogus"))])
def test_argparse_messages_with_a_positional_placeholder_speak_every_language(capsys, lang, expected):
    """argparse's messages with a positional %s (a missing required argument, unrecognized options) in the reader's
    language: under "both" each language's form is filled (joined, they held two %s for one value: a TypeError)."""
    from distlearn.core import i18n
    old = i18n.get_language()
    i18n.set_language(lang)
    try:
        assert main(["compare"]) == 2
        assert expected[0] in capsys.readouterr().err
        assert main(["plan", "--bogus"]) == 2
        assert expected[1] in capsys.readouterr().err
    finally:
        i18n.set_language(old)


def test_run_names_are_never_dropped(tmp_path, capsys):
    """Two runs of one file with the same name are an error naming it; the same name in two files keeps both, the
    second named by its file (audit: one run silently replaced the other)."""
    run = _one_run(name="y")
    with pytest.raises(DistlearnValueError) as info:
        run_files.load_runs(_write(tmp_path, {"runs": [run, run]}))
    assert info.value.param == "name" and "y" in info.value.en and "名字" in info.value.zh
    a, b = _write(tmp_path, run, "a.json"), _write(tmp_path, run, "b.json")
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert "y:" in out and "b.json: y:" in out and "2 runs" in out


def test_a_gpu_with_changes_takes_part_of_a_node_like_a_preset(tmp_path):
    """{"preset": ..., changes} is a GPU object: 4 of a node's 8 GPUs make one smaller node, as the preset's name
    does (it failed with 'num_nodes must be ≥ 1'); 12 is refused naming num_gpus."""
    small = dict(model="llama3-8b", num_gpus=4, global_batch=16, seq_len=4096, precision="mixed",
                 count="model-causal", plan={"dp": 4, "tp": 1, "pp": 1, "zero_stage": 3, "num_microbatches": 4},
                 published_tokens_per_gpu=9000.0)
    by_name = run_files.run_from_json({**small, "gpu": "h100-80gb"})
    changed = run_files.run_from_json({**small, "gpu": {"preset": "h100-80gb", "network_bw": 25e9}})
    assert P.compare_run(by_name)["ratio"] == pytest.approx(P.compare_run(changed)["ratio"], rel=1e-12)
    with pytest.raises(DistlearnValueError) as info:
        P.compare_run(run_files.run_from_json({**small, "num_gpus": 12, "global_batch": 12, "plan": {"dp": 12, "tp": 1, "pp": 1},
                                               "gpu": {"preset": "h100-80gb"}}))
    assert info.value.param == "num_gpus"


def test_compare_builds_one_setting_per_run(capsys, monkeypatch):
    """`python -m distlearn compare` builds each run's Setting once: compare_run keeps the one it timed with, and the
    options that change nothing are read from that same Setting (it used to build a second one)."""
    from distlearn.planning import calibration as C
    real, calls = C.make_setting, []

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(C, "make_setting", counting)
    path = str(EXAMPLE)
    assert main(["compare", path]) == 0
    runs = run_files.load_runs(path)
    assert len(calls) == len(runs) >= 2
    r = C.compare_run(next(iter(runs.values())))
    assert r["setting"].B == next(iter(runs.values()))["global_batch"]

"""Binder's environment (binder/): what it installs, the measurement the READMEs quote, and the checks of
``make test-binder`` (tests/binder_build.py, which builds it for real and is not part of ``make test``)."""
import json
import re
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
import binder_build  # noqa: E402

MEASURED = json.loads((ROOT / "docs" / "binder-build.json").read_text(encoding="utf-8"))


def _requirements():
    lines = (ROOT / "binder" / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return [ln.split("#")[0].strip() for ln in lines if ln.split("#")[0].strip()]


def test_binder_installs_cpu_torch_the_chinese_language_pack_and_the_pinned_deepspeed():
    reqs = _requirements()
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in reqs
    assert "jupyterlab-language-pack-zh-CN>=4,<5" in reqs
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pinned = [d.split("#")[0].strip() for d in pyproject["project"]["optional-dependencies"]["test"]]
    assert "deepspeed==0.19.8" in pinned and "deepspeed==0.19.8" in reqs       # the version chapter 09 is written for
    constraints = (ROOT / "constraints.txt").read_text(encoding="utf-8")
    torch = re.search(r"^torch==(\S+)", constraints, re.M).group(1)
    assert f"torch=={torch}" in reqs
    # every runtime dependency of distlearn is in Binder's list (postBuild installs distlearn with --no-deps)
    names = {re.split(r"[<>=!;\[ ]", r)[0].lower().replace("_", "-") for r in reqs if not r.startswith("-")}
    needed = {re.split(r"[<>=!;\[ ]", d)[0].lower().replace("_", "-") for d in pyproject["project"]["dependencies"]}
    assert needed - {"nbformat", "nbclient"} <= names, needed - names   # nbformat, nbclient: JupyterLab brings them


def test_post_build_keeps_the_font_the_plots_use():
    post = (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    plots = (ROOT / "distlearn" / "core" / "plots.py").read_text(encoding="utf-8")
    kept = re.search(r"! -name '([^']+)'", post).group(1)
    assert f'"{kept}"' in plots
    assert "pip install --no-cache-dir --no-deps -e ." in post


def test_the_readmes_quote_the_measured_build():
    """Both READMEs give the build time and size measured by `make test-binder` (docs/binder-build.json), old and
    new, with the date and the machine."""
    new, old = MEASURED["new"], MEASURED["old"]
    for name in ("README.md", "README.zh-CN.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        for run in (new, old):
            assert f"{run['seconds']:.0f} s" in text, (name, run["seconds"])
            assert f"{run['GB']:.2f} GB" in text, (name, run["GB"])
        assert MEASURED["date"] in text and "make test-binder" in text, name
    assert new["GB"] < old["GB"] and new["GB"] < 1.5 and new["seconds"] < 500
    assert new["language_packs"]["listed"] == ["en", "zh_CN"] and old["language_packs"]["listed"] == ["en"]
    assert new["notebook"]["ok"] and new["deepspeed"] == "0.19.8"


def _report(**over):
    report = {"GB": 1.2, "seconds": 300, "notebook": {"ok": True, "tail": []}, "deepspeed": "0.19.8",
              "labextensions": ["@jupyter-widgets/jupyterlab-manager", "jupyterlab-celltagsclasses"],
              "language_packs": {"listed": ["en", "zh_CN"], "zh_CN_domains": 3, "zh_CN_edit_menu": ["文件"]}}
    report.update(over)
    return report


@pytest.mark.parametrize("over, problem", [
    ({}, None),
    ({"GB": 1.6}, "size"),
    ({"seconds": 600}, "build"),
    ({"notebook": {"ok": False, "tail": ["boom"]}}, "failed"),
    ({"language_packs": {"listed": ["en"], "zh_CN_domains": 0, "zh_CN_edit_menu": ""}}, "Chinese language pack"),
    ({"labextensions": ["jupyterlab-celltagsclasses"]}, "jupyterlab-manager"),
    ({"deepspeed": "not installed"}, "DeepSpeed"),
])
def test_binder_build_reports_each_missed_goal(over, problem):
    args = binder_build.argparse.Namespace(max_gb=1.5, max_seconds=500, notebook="notebooks/01_memory.ipynb",
                                           require_deepspeed=True)
    found = binder_build.problems(_report(**over), args)
    assert (found == []) if problem is None else (len(found) == 1 and problem in found[0]), found


def test_torch_from_a_folder_replaces_the_index_lines(tmp_path):
    (tmp_path / "binder").mkdir()
    (tmp_path / "binder" / "requirements.txt").write_text("--extra-index-url https://x/cpu\ntorch==2.13.0\nnumpy\n")
    same, notes = binder_build.requirements_for(tmp_path, None)
    assert same == tmp_path / "binder" / "requirements.txt" and notes == []
    changed, notes = binder_build.requirements_for(tmp_path, "/opt/wheels")
    assert changed.read_text().splitlines() == ["--find-links /opt/wheels", "torch==2.13.0", "numpy"] and notes

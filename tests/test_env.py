"""distlearn.core.env: the environment report and the widgets front-end logic (fed synthetic situations)."""
import pytest

from distlearn.core import env

GOOD = {"ipywidgets": "8.1.5", "jupyterlab_widgets": "3.0.13"}
EXT = ["/venv/share/jupyter/labextensions/@jupyter-widgets/jupyterlab-manager"]


def test_good_environment_is_ok_and_has_no_fix():
    s = env.widgets_frontend_status(GOOD, EXT, "/venv/bin", "/venv/bin")
    assert s.ok and s.fix == ""


@pytest.mark.parametrize("versions,extensions,needle_en,needle_zh", [
    ({**GOOD, "jupyterlab_widgets": None}, [], "jupyterlab_widgets (the JupyterLab front end", "没有安装 jupyterlab_widgets"),
    ({**GOOD, "jupyterlab_widgets": "1.1.1"}, EXT, "needs jupyterlab_widgets 3", "需要 jupyterlab_widgets 3"),
    ({**GOOD, "ipywidgets": "7.8.1"}, EXT, "needs ipywidgets 8", "需要 ipywidgets 8"),
    ({**GOOD, "ipywidgets": None}, EXT, "ipywidgets is not installed", "没有安装 ipywidgets"),
    (GOOD, [], "was not found", "找不到其扩展目录"),
])
def test_each_problem_gives_a_bilingual_fix(versions, extensions, needle_en, needle_zh):
    s = env.widgets_frontend_status(versions, extensions)
    assert not s.ok
    assert needle_en in s.fix and needle_zh in s.fix
    assert env.FIX_COMMAND in s.fix and "JupyterLab" in s.fix and "重启 JupyterLab" in s.fix


def test_lab_in_another_environment_is_reported():
    s = env.widgets_frontend_status(GOOD, EXT, kernel_env="/proj/.venv/bin", lab_env="/usr/bin")
    assert not s.ok and "/usr/bin" in s.fix and "运行 JupyterLab 的环境" in s.fix


def test_report_with_missing_frontend_shows_fix(monkeypatch):
    real = env.package_version
    monkeypatch.setattr(env, "package_version", lambda name: None if name == "jupyterlab_widgets" else real(name))
    report = env.environment_report()
    assert not report.widgets.ok
    text = str(report)
    assert "jupyterlab_widgets" in text and "未安装" in text and env.FIX_COMMAND in text


def test_report_in_this_environment():
    import torch

    r = env.environment_report()
    assert r.versions["torch"] == torch.__version__.split("+")[0] or r.versions["torch"] == torch.__version__
    assert set(r.versions) == set(env.PACKAGES)
    # the course's own set-up installs the front end in the same .venv
    assert r.versions["jupyterlab_widgets"] and r.versions["jupyterlab_widgets"].startswith("3.")
    assert env.labextension_dirs(), "jupyterlab_widgets 3 installed but its labextension folder is missing"


def test_lab_bin_dir_reads_parent_command_line(monkeypatch, tmp_path):
    fake = tmp_path / "proc"
    (fake / "42").mkdir(parents=True)
    (fake / "42" / "cmdline").write_bytes(b"/opt/lab/bin/python3\0/opt/lab/bin/jupyter-lab\0--port\0")
    monkeypatch.setattr(env.os, "getppid", lambda: 42)
    real_path = env.Path
    monkeypatch.setattr(env, "Path", lambda p, *a: real_path(str(p).replace("/proc", str(fake), 1), *a))
    assert env.lab_bin_dir() == str(real_path("/opt/lab/bin").resolve())

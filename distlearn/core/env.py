"""Environment check for chapter 00: versions, CPU count, CUDA, and whether ipywidgets can render in JupyterLab.

Interactive explorers need two halves that live in *different* places:

- the **kernel** half, ``ipywidgets`` 8, in the Python environment that runs the notebook's kernel;
- the **front-end** half, the JupyterLab extension ``@jupyter-widgets/jupyterlab-manager`` shipped by the pip
  package ``jupyterlab_widgets`` 3, which must be installed in the environment that runs the **JupyterLab server**
  (JupyterLab looks for prebuilt extensions in its own ``share/jupyter/labextensions`` folders).

When the kernel runs in one environment and JupyterLab in another (a common set-up: a system JupyterLab with a
project kernel), ``import ipywidgets`` works but sliders show as the text ``IntSlider(value=…)``.
:func:`widgets_frontend_status` decides from plain facts (package versions, extension folders found, the Python
that started the kernel's parent process) so tests can feed it any situation.

Usage::

    from distlearn.core.env import environment_report
    print(environment_report())
"""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from distlearn.core.i18n import bi

PACKAGES = ("numpy", "torch", "matplotlib", "ipywidgets", "jupyterlab", "jupyterlab_widgets")
# The JupyterLab extension folder that jupyterlab_widgets installs (share/jupyter/labextensions/<this>).
LABEXTENSION = ("@jupyter-widgets", "jupyterlab-manager")
FIX_COMMAND = "python -m pip install 'ipywidgets>=8,<9' 'jupyterlab_widgets>=3,<4'"


def package_version(name: str) -> str | None:
    """Installed version of distribution ``name`` in *this* Python environment, or None when absent."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _major(version: str | None) -> int | None:
    if not version:
        return None
    try:
        return int(version.split(".")[0])
    except ValueError:
        return None


def labextension_dirs() -> list[str]:
    """Folders where a JupyterLab started from this environment finds ``@jupyter-widgets/jupyterlab-manager``.

    Searches ``jupyter_core.paths.jupyter_path("labextensions")`` (user, ``sys.prefix`` and system folders).
    """
    try:
        from jupyter_core.paths import jupyter_path
        roots = jupyter_path("labextensions")
    except ImportError:  # jupyter_core comes with jupyterlab; without it there is no JupyterLab here
        roots = [str(Path(sys.prefix) / "share" / "jupyter" / "labextensions")]
    return [str(Path(r, *LABEXTENSION)) for r in roots if Path(r, *LABEXTENSION).is_dir()]


def lab_bin_dir() -> str | None:
    """The ``bin`` folder of the environment whose JupyterLab / Jupyter server started this kernel (Linux only).

    Read from the parent process's command line (``…/bin/jupyter-lab`` or ``…/bin/python -m jupyterlab``).
    Returns None when unknown: not Linux, not started by a Jupyter server, or not readable.
    """
    try:
        argv = [a.decode(errors="replace") for a in
                Path(f"/proc/{os.getppid()}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return None
    if not any("jupyter" in a for a in argv):
        return None
    for a in argv[1:] + argv[:1]:  # the jupyter script first, else the interpreter itself
        if os.path.isabs(a) and ("jupyter" in os.path.basename(a) or os.path.basename(a).startswith("python")):
            return str(Path(a).parent.resolve())
    return None


def kernel_bin_dir() -> str:
    """The ``bin`` folder of this kernel's environment (a venv's own folder, symlinks of the folder resolved)."""
    return str(Path(sys.executable).parent.resolve())


@dataclass
class WidgetsStatus:
    """Whether explorers will render, and what to do if not. ``problems_en``/``problems_zh`` are parallel lists."""

    ok: bool
    problems_en: list[str] = field(default_factory=list)
    problems_zh: list[str] = field(default_factory=list)

    @property
    def fix(self) -> str:
        """Advice in the current language (both on two lines under "both"; empty when ``ok``)."""
        if self.ok:
            return ""
        en = ("Explorers will not render as widgets. " + " ".join(self.problems_en)
              + f" Fix: in the environment that runs JupyterLab, run `{FIX_COMMAND}`, then restart JupyterLab "
              "(not only the kernel) and reload the browser tab. With `make lab` both are the course's .venv.")
        zh = ("交互式探索器无法以控件形式显示。" + "".join(self.problems_zh)
              + f"修复方法：在运行 JupyterLab 的那个环境中执行 `{FIX_COMMAND}`，然后重启 JupyterLab（不只是重启内核）"
              "并刷新浏览器页面。使用 `make lab` 时，两者都是课程的 .venv 环境。")
        return bi(en, zh, sep="\n")


def widgets_frontend_status(versions: dict[str, str | None], extension_dirs: list[str],
                            kernel_env: str | None = None, lab_env: str | None = None) -> WidgetsStatus:
    """Decide whether ipywidgets 8 can render, from facts about the environment.

    Parameters
    ----------
    versions : installed versions in the kernel's environment (None = absent), keys as in :data:`PACKAGES`.
    extension_dirs : ``@jupyter-widgets/jupyterlab-manager`` folders found (see :func:`labextension_dirs`).
    kernel_env, lab_env : ``bin`` folders of the kernel's environment and of the one running JupyterLab
        (None = unknown; then the check assumes they are the same environment).

    Rules: ipywidgets must be 8.x; jupyterlab_widgets 3.x must be installed and its extension folder present; if
    JupyterLab runs from another Python, its environment must hold jupyterlab_widgets 3 (which we cannot see
    from here, so we say so).
    """
    en, zh = [], []
    ipw, jlw = versions.get("ipywidgets"), versions.get("jupyterlab_widgets")
    if ipw is None:
        en.append("ipywidgets is not installed in the kernel's environment.")
        zh.append("内核所在环境中没有安装 ipywidgets。")
    elif _major(ipw) != 8:
        en.append(f"ipywidgets {ipw} is installed; the course needs ipywidgets 8.")
        zh.append(f"已安装 ipywidgets {ipw}；本课程需要 ipywidgets 8。")
    if jlw is None:
        en.append("jupyterlab_widgets (the JupyterLab front end of ipywidgets) is not installed.")
        zh.append("没有安装 jupyterlab_widgets（ipywidgets 在 JupyterLab 中的前端扩展）。")
    elif _major(jlw) != 3:
        en.append(f"jupyterlab_widgets {jlw} is installed; ipywidgets 8 needs jupyterlab_widgets 3.")
        zh.append(f"已安装 jupyterlab_widgets {jlw}；ipywidgets 8 需要 jupyterlab_widgets 3。")
    elif not extension_dirs:
        en.append("jupyterlab_widgets is installed but its extension folder "
                  "@jupyter-widgets/jupyterlab-manager was not found (a broken install).")
        zh.append("已安装 jupyterlab_widgets，但找不到其扩展目录 @jupyter-widgets/jupyterlab-manager（安装不完整）。")
    if lab_env and kernel_env and lab_env != kernel_env:
        en.append(f"JupyterLab runs from another environment ({lab_env}) than this kernel ({kernel_env}); the "
                  "front end must be installed in JupyterLab's environment, which this kernel cannot inspect.")
        zh.append(f"JupyterLab 所在环境（{lab_env}）与本内核所在环境（{kernel_env}）不同；前端扩展必须安装在"
                  "运行 JupyterLab 的环境中，而本内核无法检查那个环境。")
    return WidgetsStatus(ok=not en, problems_en=en, problems_zh=zh)


def _display_width(s: str) -> int:
    """Columns a string takes in a monospace font (CJK characters take two)."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in s)


@dataclass
class EnvironmentReport:
    """What :func:`environment_report` found. ``str(report)`` is a bilingual table."""

    python: str
    platform: str
    cpu_count: int
    cuda_available: bool
    cuda_devices: list[str]
    versions: dict[str, str | None]
    widgets: WidgetsStatus

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs in display order."""
        rows = [("Python", self.python), (bi("platform", "平台"), self.platform),
                (bi("CPU cores", "CPU 核数"), str(self.cpu_count)),
                (bi("CUDA available", "CUDA 可用"), bi("yes", "是") if self.cuda_available else bi("no", "否"))]
        rows += [(f"  GPU {i}", name) for i, name in enumerate(self.cuda_devices)]
        rows += [(name, v or bi("not installed", "未安装")) for name, v in self.versions.items()]
        rows.append((bi("widgets front end", "控件前端"), bi("OK", "正常") if self.widgets.ok
                     else bi("NOT WORKING", "不可用")))
        return rows

    def __str__(self) -> str:
        rows = self.rows()
        width = max(_display_width(k) for k, _ in rows)
        lines = [k + " " * (width - _display_width(k) + 2) + v for k, v in rows]
        if not self.widgets.ok:
            lines += ["", self.widgets.fix]
        return "\n".join(lines)


def environment_report() -> EnvironmentReport:
    """Python, platform, CPU count, CUDA, versions of :data:`PACKAGES`, and the widgets front-end status.

    Imports torch (about a second). Never raises for a missing package: it reports it.
    """
    versions = {name: package_version(name) for name in PACKAGES}
    cuda, devices = False, []
    try:
        import torch
        cuda = bool(torch.cuda.is_available())
        devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    except ImportError:
        pass
    widgets = widgets_frontend_status(versions, labextension_dirs(), kernel_bin_dir(), lab_bin_dir())
    return EnvironmentReport(python=platform.python_version(), platform=f"{platform.system()} {platform.machine()}",
                             cpu_count=os.cpu_count() or 1, cuda_available=cuda, cuda_devices=devices,
                             versions=versions, widgets=widgets)

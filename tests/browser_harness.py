"""Open notebooks in JupyterLab in a real headless Chromium and check that every explorer works for a person.

For each notebook: open it in Lab as stored (not run), check that each explorer cell shows its static picture
("Run this cell" with the first view's text and figures, not the text fallback ``VBox(children=(…``) and that no "Jupyter news" pop-up
asks anything; clear the outputs, run the explorer cells (a code cell calling ``….explorer()``; each is
self-contained by the authoring rules, and nbval runs every cell anyway) — or every cell with Lab's "Run All"
command when ``DISTLEARN_BROWSER_RUN_ALL=1`` or when an explorer cell fails alone — then for each explorer check that

1. a real widget rendered: a slider handle (``.noUi-handle``) or a ``<select>`` in the cell's output, and not the
   plain-text fallback that a kernel without a widget front end shows;
2. after ``presses`` (5) moves spread over its controls — arrow keys on sliders, a neighbouring option picked in
   drop-downs — sent without waiting for the kernel, the output area shows exactly what ``render(compute(**values))`` shows offline for the values the
   controls now show: the same text and, pixel for pixel, the same figures (:class:`OfflineRenderer`, one kernel
   of its own); and that it changed from the first view;

and save a screenshot of an explorer under ``build/screenshots/`` when it fails its check, or of every explorer
with ``Session(screenshots=True)`` (``DISTLEARN_BROWSER_SCREENSHOTS=1``; ``--screenshot`` of the script). A
screenshot waits for two equal pictures of the cell: about 0.6 s of the browser's time per explorer.

The server (``python -m jupyterlab`` on 127.0.0.1, a random token, a free port, a fresh user's temporary
settings, workspace and runtime folders: only the course's ``overrides.json`` switches the news pop-up off) and
Chromium (Debian's ``chromium``, driven over the DevTools protocol by Playwright's Python package — never
``playwright install``) are started as child processes and stopped by their process ids; :meth:`Session.close`
checks that no process they started is left. One server, one browser and one page serve every notebook.

Used by ``tests/test_browser.py``; also a script, e.g. to refresh the README's screenshot::

    python tests/browser_harness.py --screenshot docs/img/explorer.png notebooks/05_pipeline_parallel.ipynb
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
# Complete, steady rendering for screenshots in containers (small /dev/shm) and in the background.
RENDER_FLAGS = ["--disable-dev-shm-usage", "--disable-renderer-backgrounding", "--disable-background-timer-throttling",
                "--disable-backgrounding-occluded-windows", "--force-color-profile=srgb", "--hide-scrollbars",
                "--disable-checker-imaging"]
HOW_TO_GET_CHROMIUM = ("Chromium not found. Install it with `sudo apt-get install chromium` (Debian/Ubuntu), "
                       "or set DISTLEARN_CHROMIUM=/path/to/chromium. / 未找到 Chromium：请运行 "
                       "`sudo apt-get install chromium`，或设置 DISTLEARN_CHROMIUM。")
# A code cell is an explorer cell when it calls `<something>.explorer()` or `explorer()`.
EXPLORER_CALL = re.compile(r"(?<!def )\bexplorer\s*\(\s*\)")
# What a kernel prints for a widget when no widget front end is there, e.g. "VBox(children=(IntSlider(value=4, …".
WIDGET_REPR = re.compile(r"\b(VBox|HBox|Box|IntSlider|FloatSlider|SelectionSlider|Dropdown|Checkbox|Output)"
                         r"\((children|value|options|description|layout|outputs)=")
CONTROL_SELECTOR = ".jupyter-widgets .noUi-handle, .jupyter-widgets select"


def find_chromium() -> str | None:
    """Path of a Chromium binary: ``$DISTLEARN_CHROMIUM``, ``chromium`` on PATH or /usr/bin/chromium."""
    for cand in (os.environ.get("DISTLEARN_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium",
                 shutil.which("chromium-browser")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def explorer_cells(path: Path) -> list[int]:
    """Indices (in the notebook's cell list) of the code cells that build an explorer."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        if cell.get("cell_type") == "code" and EXPLORER_CALL.search(src):
            out.append(i)
    return out


def cells_with_outputs(path: Path, cells: list[int]) -> list[int]:
    """Those of ``cells`` that have stored outputs in the notebook file (only these can show a static picture)."""
    stored = json.loads(Path(path).read_text(encoding="utf-8")).get("cells", [])
    return [i for i in cells if stored[i].get("outputs")]


# Each chapter's core-idea diagram (issue 34: "the idea in one picture", drawn by code in the reader's language):
# a piece of the one code cell that draws it. Checked in every stored notebook (tests/test_diagrams_shown.py), on
# the website's pages (tests/test_website.py) and in JupyterLab (tests/test_browser.py).
CORE_DIAGRAMS = {
    "01_memory": "memory_plots.bytes_per_parameter(",
    "02_collectives": "collectives_plots.ring_all_reduce(",
    "03_data_parallel": "dp_plots.ddp_overlap(",
    "04_tensor_parallel": "tp_plots.mlp_split(",
    "05_pipeline_parallel": 'PP.gantt(P.simulate("gpipe", 4, 4))',
    "06_zero_fsdp": "zplots.zero_stages(",
    "07_overlap_prefetch": "plots_overlap.prefetch_picture(",
    "08_activation_memory": "aplots.recompute_picture(",
    "09_deepspeed_fsdp": "hierarchy_diagram()",
    "10_context_parallel": "ring_diagram(4)",
    "11_experts": "plots_experts.dispatch_picture(",
    "12_nd_parallel": "nd_plots.mesh_picture(",
    "13_fault_tolerance": "ft_plots.timeline_diagram(",
    "14_planning": "plan_diagram(PRESETS",
    "15_post_training": "pt_plots.two_layouts(",
}


def diagram_cell(nb, stem: str) -> int:
    """The index of the one code cell of notebook ``nb`` (chapter ``stem``) that draws its core-idea diagram."""
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and CORE_DIAGRAMS[stem] in c.source]
    if len(found) != 1:
        raise LookupError(f"{stem}: {len(found)} cells draw {CORE_DIAGRAMS[stem]!r}, not one")
    return found[0]


def chapter_notebooks(root: Path = ROOT) -> list[Path]:
    """The chapter notebooks (``notebooks/*.ipynb``) that contain at least one explorer cell."""
    return [p for p in sorted((root / "notebooks").glob("*.ipynb")) if explorer_cells(p)]


@dataclass
class ExplorerResult:
    """One explorer: did real controls render, did ``changes`` rapid key presses change its output, and is the
    final output (text and every figure) the one its final control ``values`` render offline (``complete``)?"""
    cell: int
    rendered: bool = False
    control: str = ""
    changed: bool = False
    screenshot: str = ""
    problem: str = ""
    module: str = ""
    changes: int = 0
    values: dict = field(default_factory=dict)
    complete: bool = False
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.rendered and self.changed and self.complete and not self.problem


@dataclass
class NotebookResult:
    path: str
    seconds: float = 0.0
    cell_errors: list[str] = field(default_factory=list)
    explorers: list[ExplorerResult] = field(default_factory=list)
    problem: str = ""
    mode: str = ""
    static_problems: list[str] = field(default_factory=list)  # explorer cells without a static picture
    news: str = ""                                           # text of a "Jupyter news" pop-up, if one showed

    @property
    def ok(self) -> bool:
        return not self.problem and not self.cell_errors and bool(self.explorers) and all(
            e.ok for e in self.explorers) and not self.static_problems and not self.news

    def summary(self) -> str:
        lines = [f"{self.path}: {'ok' if self.ok else 'FAILED'} in {self.seconds:.1f} s ({self.mode or '-'} run)"]
        if self.problem:
            lines.append(f"  problem: {self.problem}")
        for err in self.cell_errors:
            lines.append(f"  cell error: {err}")
        for p in self.static_problems:
            lines.append(f"  before running: {p}")
        if self.news:
            lines.append(f"  news pop-up: {self.news[:120]}")
        for e in self.explorers:
            lines.append(f"  explorer in cell {e.cell} ({e.module or '?'}, {e.seconds:.1f} s): rendered={e.rendered} "
                         f"changes={e.changes} changed={e.changed} complete={e.complete} "
                         f"screenshot={e.screenshot or '-'}"
                         + (f" problem: {e.problem}" if e.problem else ""))
        return "\n".join(lines)


def in_ci() -> bool:
    """Whether the tests run under CI (environment variable ``CI`` = 1, true or yes, any case), where a missing tool
    is a failure, not a skip."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require(ok: bool, how: str) -> None:
    """Go on when ``ok``; otherwise fail under CI (:func:`in_ci`) and skip elsewhere, saying ``how`` to get what is
    missing (Chromium, the .[site] extra, ...). Every test that needs an optional tool calls this one gate."""
    import pytest  # the harness also runs as a script, without pytest

    if not ok:
        if in_ci():
            pytest.fail(how)
        pytest.skip(how)


def _env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is set to anything but empty or "0"."""
    return os.environ.get(name, "") not in ("", "0")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _descendants(pid: int) -> list:
    """psutil.Process objects of every descendant of ``pid`` (empty if psutil is missing or pid is gone)."""
    try:
        import psutil
        return psutil.Process(pid).children(recursive=True)
    except Exception:
        return []


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop ``proc`` by its pid: SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


# JavaScript run in the page. `window.jupyterapp` exists because the server runs with expose_app_in_browser.
_JS_READY = """(path) => { const app = window.jupyterapp; if (!app || !app.shell) return false;
  const w = window.dlPanel || app.shell.currentWidget; return !!(w && w.context && w.context.path === path && w.content); }"""
_JS_RUN = """async ([cells, runAll]) => {
  const app = window.jupyterapp; const panel = window.dlPanel || app.shell.currentWidget;
  app.shell.activateById(panel.id);
  await panel.context.ready; await panel.sessionContext.ready;
  await app.commands.execute('notebook:clear-all-cell-outputs');
  if (runAll) { await app.commands.execute('notebook:run-all-cells'); }
  else { for (const i of cells) { panel.content.activeCellIndex = i; await app.commands.execute('notebook:run-cell'); } }
  cells.forEach((i, k) => panel.content.widgets[i].node.setAttribute('data-dl-explorer', String(k)));
  return true; }"""
_JS_IDLE = """() => { const p = (window.dlPanel || window.jupyterapp.shell.currentWidget); const k = p.sessionContext.session &&
  p.sessionContext.session.kernel; return !!k && k.status === 'idle' &&
  !Array.from(p.content.node.querySelectorAll('.jp-InputPrompt')).some(e => e.textContent.includes('*')); }"""
_JS_ERRORS = """() => { const p = (window.dlPanel || window.jupyterapp.shell.currentWidget); const out = [];
  p.content.widgets.forEach((c, i) => { if (c.model.type !== 'code') return;
    for (const o of c.model.outputs.toJSON()) if (o.output_type === 'error') out.push(`cell ${i}: ${o.ename}: ${o.evalue}`); });
  return out; }"""
_JS_OPEN = """async (path) => { const app = window.jupyterapp;
  const w = await app.commands.execute('docmanager:open', {path, factory: 'Notebook', activate: true});
  window.dlPanel = w; app.shell.activateById(w.id); await w.context.ready; return true; }"""
_JS_CLOSE = """async () => { const p = (window.dlPanel || window.jupyterapp.shell.currentWidget); if (!p || !p.context) return true;
  if (p.sessionContext) { await p.sessionContext.shutdown(); }
  p.context.model.dirty = false; p.close(); window.dlPanel = null; return true; }"""
# What a stored (not run) explorer cell shows: its output's text, how many images, whether the widget view is live.
_JS_STATIC = """(cells) => { const p = (window.dlPanel || window.jupyterapp.shell.currentWidget);
  return cells.map(i => { const c = p.content.widgets[i]; const o = c.node.querySelector('.jp-Cell-outputWrapper');
    return {text: o ? o.innerText : '', images: o ? o.querySelectorAll('img').length : 0,
            widget: !!(o && o.querySelector('.jupyter-widgets.widget-vbox'))}; }); }"""
# A pop-up (toast) asking about Jupyter news, if any.
_JS_NEWS = """() => Array.from(document.querySelectorAll('.Toastify__toast, .jp-Notification-Toast, .jp-toast-message'))
  .map(t => t.innerText).filter(t => /news/i.test(t)).join(' | ')"""
_JS_SHUTDOWN = """async () => { const p = (window.dlPanel || window.jupyterapp.shell.currentWidget);
  if (p && p.sessionContext) { await p.sessionContext.shutdown(); } return true; }"""
# What the explorer's output area shows: its text and a fingerprint of each image.
_JS_OUTPUT_STATE = """(el) => { const o = el.querySelector('.widget-output') || el; const imgs = Array.from(o.querySelectorAll('img'));
  return o.innerText + '|' + imgs.map(i => i.src.length + ':' + i.src.slice(-80)).join(','); }"""


# ---------------------------------------------------------------- what an explorer should show
# Every control of an explorer in DOM order (the order of ``controls()``): its label and what it shows.
_JS_CONTROLS = """(el) => Array.from(el.querySelectorAll('.widget-slider, .widget-dropdown, .widget-checkbox')).map(w => {
  const text = (e) => e ? e.textContent.replace(/\\s+/g, ' ').trim() : '';
  if (w.classList.contains('widget-checkbox')) { const i = w.querySelector('input');
    return {kind: 'checkbox', label: text(w.querySelector('.widget-label-basic span')) || text(w.querySelector('.widget-label')),
            checked: i.checked, disabled: i.disabled}; }
  const label = text(w.querySelector('.widget-label'));
  if (w.classList.contains('widget-dropdown')) { const s = w.querySelector('select');
    return {kind: 'dropdown', label, text: s.selectedIndex >= 0 ? s.options[s.selectedIndex].value : null,
            index: s.selectedIndex, count: s.options.length, disabled: s.disabled}; }
  const h = w.querySelector('.noUi-handle');
  return {kind: 'slider', label, text: text(w.querySelector('.widget-readout')),
          now: Number(h.getAttribute('aria-valuenow')), min: Number(h.getAttribute('aria-valuemin')),
          max: Number(h.getAttribute('aria-valuemax')), disabled: w.querySelector('.noUi-target').hasAttribute('disabled')}; })"""
# The explorer's output area: its text (images left out) and the PNG of each image, in order.
_JS_OUTPUT = """(el) => { const o = el.querySelector('.widget-output'); if (!o) return null;
  const imgs = Array.from(o.querySelectorAll('img'));
  return {text: o.innerText.replace(/\\s+/g, ' ').trim(), pngs: imgs.map(i => i.src.startsWith('data:image/png;base64,')
          ? i.src.slice('data:image/png;base64,'.length) : i.src), pending: !!el.querySelector('.dl-pending')}; }"""


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def explorer_module(labels: list[str], extra: tuple[str, ...] = ()) -> str | None:
    """The module (``distlearn.core.explorer.<name>``, or one of ``extra``) whose ``controls()`` have exactly these labels,
    in this order."""
    import importlib
    import pkgutil

    from distlearn.core.explorer import explorer_modules

    names = list(explorer_modules().values())
    for name in names + list(extra):
        mod = importlib.import_module(name)
        if hasattr(mod, "controls") and [_norm(c.description) for c in mod.controls().values()] == labels:
            return name
    return None


def values_from_dom(module: str, dom: list[dict]) -> dict:
    """``compute``'s keyword arguments for what the browser shows: each control's readout, selected option or
    check mark, read back through the module's own ``controls()`` (labels → values)."""
    import importlib

    import ipywidgets as W

    controls = importlib.import_module(module).controls()
    values = {}
    for (name, c), d in zip(controls.items(), dom):
        if isinstance(c, W.Checkbox):
            values[name] = bool(d["checked"])
        elif isinstance(c, W.Dropdown):
            labels = [_norm(x) for x in c._options_labels]
            values[name] = c._options_values[labels.index(_norm(d["text"]))]
        elif isinstance(c, W.SelectionSlider):
            values[name] = c._options_values[int(round(d["now"]))]
        elif isinstance(c, W.IntSlider):
            values[name] = int(d["text"])
        elif isinstance(c, W.FloatSlider):  # the readout has 2 decimals: snap to the slider's grid
            k = round((float(d["text"]) - c.min) / c.step)
            values[name] = round(c.min + k * c.step, 10)
        else:
            raise TypeError(f"unsupported control {name}: {type(c).__name__}")
    return values


@dataclass
class Rendered:
    """What ``render(compute(**values))`` shows: its text (whitespace collapsed) and its PNGs (base64)."""
    text: str
    pngs: list[str]


class OfflineRenderer:
    """One Jupyter kernel, started like the server's kernels (same Python, both languages, the default inline
    backend), that renders an explorer's result for given values outside any widget: what the browser must show."""

    def __init__(self, root: Path = ROOT, paths: tuple[str, ...] = ()):
        self.root = root
        self.paths = list(paths)  # folders to import explorer modules from, besides the installed distlearn
        self.km = self.kc = None

    def __enter__(self) -> "OfflineRenderer":
        from jupyter_client import KernelManager

        env = dict(os.environ)
        for name in ("DISTLEARN_LANG", "MPLBACKEND"):
            env.pop(name, None)
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env=env, cwd=str(self.root))
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=120)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.kc is not None:
            self.kc.stop_channels()
        if self.km is not None and self.km.has_kernel:
            self.km.shutdown_kernel(now=True)
        self.km = self.kc = None

    def render(self, module: str, values: dict, timeout: float = 120.0) -> Rendered:
        code = (f"import importlib, sys\nsys.path[:0] = [p for p in {self.paths!r} if p not in sys.path]\n"
                f"_m = importlib.import_module({module!r})\n"
                f"_m.render(_m.compute(**{values!r}))")
        msg_id = self.kc.execute(code, store_history=False)
        text, pngs = [], []
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind in ("display_data", "execute_result"):
                if "image/png" in content["data"]:
                    pngs.append(content["data"]["image/png"].replace("\n", ""))
                elif "text/plain" in content["data"]:
                    text.append(content["data"]["text/plain"])
            elif kind == "error":
                text.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "status" and content["execution_state"] == "idle":
                break
        return Rendered(_norm("".join(text)), pngs)


def _compare(got: dict | None, want: Rendered) -> str:
    """Why the browser's output ``got`` (from ``_JS_OUTPUT``) is not ``want``; empty when it is."""
    if got is None:
        return "no output area"
    if got["text"] != want.text:
        return f"text {got['text'][:160]!r} instead of {want.text[:160]!r}"
    if len(got["pngs"]) != len(want.pngs):
        return f"{len(got['pngs'])} figure(s) instead of {len(want.pngs)}"
    for i, (a, b) in enumerate(zip(got["pngs"], want.pngs)):
        same, why = same_picture(a, b)
        if not same:
            return f"figure {i + 1} is not the offline one ({why})"
    return ""


def same_picture(a_b64: str, b_b64: str, tolerance: float = 0.002) -> tuple[bool, str]:
    """Whether two PNGs (base64) show the same picture: equal bytes, or equal size with at most ``tolerance`` of
    the pixels differing. Returns (same, why not)."""
    import base64
    import io

    if a_b64 == b_b64:
        return True, ""
    from matplotlib import image as mpimg
    import numpy as np

    try:
        a = mpimg.imread(io.BytesIO(base64.b64decode(a_b64)), format="png")
        b = mpimg.imread(io.BytesIO(base64.b64decode(b_b64)), format="png")
    except Exception as exc:  # not a PNG at all
        return False, f"not a PNG: {type(exc).__name__}"
    if a.shape != b.shape:
        return False, f"size {a.shape[1]}×{a.shape[0]} px, offline {b.shape[1]}×{b.shape[0]} px"
    differing = float(np.mean(np.any(np.abs(a - b) > 1 / 255, axis=-1)))
    return differing <= tolerance, f"{differing:.1%} of the pixels differ"


# What Playwright says when the page reloaded under an evaluate or a wait.
RELOADED = re.compile(r"garbage collected|context was destroyed|navigat|frame was detached", re.I)
_JS_APP = ("() => !!(window.jupyterapp && window.jupyterapp.shell && "
           "window.jupyterapp.commands.hasCommand('docmanager:open'))")


def wait_for_app(page, tries: int = 3, timeout_ms: int = 90_000) -> None:
    """Wait until JupyterLab in ``page`` has started and restored its layout, through up to ``tries`` - 1 reloads
    of the page while it starts."""
    for attempt in range(tries):
        try:
            page.wait_for_function(_JS_APP, timeout=timeout_ms)
            page.evaluate("async () => { await window.jupyterapp.restored; return true; }")
            return
        except Exception as exc:
            if attempt == tries - 1 or not RELOADED.search(str(exc)):
                raise
            page.wait_for_load_state("domcontentloaded")


class Session:
    """One JupyterLab server over ``root`` and one headless Chromium; use as a context manager."""

    def __init__(self, root: Path = ROOT, chromium: str | None = None, width: int = 1200, height: int = 1600,
                 render_timeout: float = 20.0, run_all: bool | None = None, presses: int = 5,
                 final_timeout: float = 20.0, screenshots: bool | None = None, lab_env: dict | None = None,
                 lab_args: tuple[str, ...] = (), browser_of: "Session | None" = None):
        self.root = Path(root).resolve()
        self.browser_of = browser_of  # a second server in another session's browser (a context of its own)
        # JupyterLab as `make lab` starts it (authoring.lab.lab_environment / lab_options): these replace the
        # harness's own environment variables (a settings folder of the copy's own) and add to its options
        self.lab_env, self.lab_args = dict(lab_env or {}), tuple(lab_args)
        # Run every cell (Lab's "Run All"), or by default only the explorer cells — each is self-contained by the
        # authoring rules, and nbval already runs every cell — falling back to Run All if one of them fails.
        self.run_all = _env_flag("DISTLEARN_BROWSER_RUN_ALL") if run_all is None else run_all
        self.render_timeout = render_timeout  # seconds an explorer may take to show its controls
        self.presses = presses                # rapid key presses per explorer (each one changes a control)
        self.final_timeout = final_timeout    # seconds the final output may take to match the offline render
        # a screenshot of every explorer, or (default) only of one that fails its check
        self.screenshots = _env_flag("DISTLEARN_BROWSER_SCREENSHOTS") if screenshots is None else screenshots
        self.offline: OfflineRenderer | None = None  # started on first use
        self._page = None
        self.sessions_ended: list[str] = []  # notebooks whose kernel the harness had to end through the server
        self.module_paths: list[str] = []  # extra folders with explorer modules (the self-test's)
        self.extra_modules: tuple[str, ...] = ()
        self.chromium = chromium or find_chromium() or (browser_of.chromium if browser_of else None)
        if self.chromium is None:
            raise FileNotFoundError(HOW_TO_GET_CHROMIUM)
        self.width, self.height = width, height
        self.tmp = Path(tempfile.mkdtemp(prefix="distlearn-browser-"))
        self.token = secrets.token_hex(16)
        self.port = _free_port()
        self.server: subprocess.Popen | None = None
        self.browser_proc: subprocess.Popen | None = None
        self._pw = self._browser = self._context = None
        self._children: list = []
        self.leftover: list[str] = []  # "pid name" of processes still alive after close() (then killed)
        self.stopped_pids: list[int] = []

    # ------------------------------------------------------------ start / stop
    def __enter__(self) -> "Session":
        try:
            self._start_server()
            if self.browser_of is not None:  # Playwright's sync API runs once per thread: share its browser
                self._context = self.browser_of._browser.new_context(
                    viewport={"width": self.width, "height": self.height})
            else:
                self._start_browser()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _start_server(self) -> None:
        settings = self.tmp / "lab-settings"
        # A fresh user's settings (so the course's own overrides.json decides about the news pop-up; see
        # jupyter-settings/), except every cell attached to the DOM (no windowing) for the checks.
        _write_json(settings / "@jupyterlab/notebook-extension/tracker.jupyterlab-settings",
                    {"windowingMode": "none"})
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.tmp / "workspaces"),
                   JUPYTER_CONFIG_DIR=str(self.tmp / "config"), JUPYTER_RUNTIME_DIR=str(self.tmp / "runtime"),
                   PYDEVD_DISABLE_FILE_VALIDATION="1")
        for name in ("DISTLEARN_LANG", "MPLBACKEND"):  # kernels as a person gets them: both languages, inline plots
            env.pop(name, None)
        env.update(self.lab_env)
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--ServerApp.terminals_enabled=False", "--LabApp.expose_app_in_browser=True", *self.lab_args]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.server_log = open(self.tmp / "server.log", "wb")
        self.server = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=self.server_log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError("JupyterLab exited early:\n" + self.server_log_text())
            try:
                with urllib.request.urlopen(f"{self.base_url}/api/status?token={self.token}", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("JupyterLab did not start within 90 s:\n" + self.server_log_text())

    def server_log_text(self) -> str:
        try:
            return (self.tmp / "server.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def _start_browser(self) -> None:
        from playwright.sync_api import sync_playwright

        profile = self.tmp / "chromium-profile"
        cmd = [self.chromium, *CHROMIUM_FLAGS, *RENDER_FLAGS, "--remote-debugging-address=127.0.0.1",
               "--remote-debugging-port=0",
               f"--user-data-dir={profile}", f"--window-size={self.width},{self.height}", "about:blank"]
        self.browser_log = open(self.tmp / "chromium.log", "wb")
        self.browser_proc = subprocess.Popen(cmd, stdout=self.browser_log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, env=self._font_env())
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.browser_proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("Chromium did not start:\n" +
                                   (self.tmp / "chromium.log").read_text(errors="replace")[-3000:])
            time.sleep(0.1)
        cdp_port = int(port_file.read_text().split()[0])
        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.connect_over_cdp(f"http://127.0.0.1:{cdp_port}")
        self._context = self._browser.new_context(viewport={"width": self.width, "height": self.height})

    def _font_env(self) -> dict:
        """Chromium's environment: fontconfig also sees the Noto Sans CJK font that ``mplfonts`` ships (a
        dependency of distlearn), so Chinese labels render on machines without CJK system fonts."""
        env = dict(os.environ)
        try:
            import importlib.util
            spec = importlib.util.find_spec("mplfonts")
            font_dir = Path(list(spec.submodule_search_locations)[0]) / "fonts"
        except Exception:
            return env
        conf = self.tmp / "fonts.conf"
        conf.write_text(
            '<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n'
            '  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>\n'
            f'  <dir>{font_dir}</dir>\n  <cachedir>{ROOT / "build" / "fontconfig-cache"}</cachedir>\n</fontconfig>\n',
            encoding="utf-8")
        env["FONTCONFIG_FILE"] = str(conf)
        return env

    def kernels(self) -> list:
        """The kernels the server has running (REST /api/kernels)."""
        with urllib.request.urlopen(f"{self.base_url}/api/kernels?token={self.token}", timeout=5) as r:
            return json.loads(r.read())

    def close(self) -> None:
        """Stop browser and server by their pids, then any process they started that is still there."""
        if self.offline is not None:
            try:
                self.offline.close()
            except Exception:
                pass
            self.offline = None
        for proc in (self.server, self.browser_proc):
            if proc is not None and proc.poll() is None:
                self._children += _descendants(proc.pid)
        for step in (lambda: self._context and self._context.close(),
                     lambda: self._browser and self._browser.close(),
                     lambda: self._pw and self._pw.stop()):
            try:
                step()
            except Exception:
                pass
        self._pw = self._browser = self._context = None
        for proc in (self.browser_proc, self.server):
            if proc is not None:
                _stop(proc)
                self.stopped_pids.append(proc.pid)
        self.browser_proc = self.server = None
        time.sleep(0.2)
        self.leftover = []
        for child in self._children:
            try:
                if child.is_running() and child.status() != "zombie":
                    self.leftover.append(f"{child.pid} {child.name()}")
                    child.kill()
            except Exception:
                pass
        self._children = []
        for f in ("server_log", "browser_log"):
            if getattr(self, f, None):
                getattr(self, f).close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------ one notebook
    def check_notebook(self, path: Path, screenshots: Path = SCREENSHOTS, timeout: float = 180.0,
                       run: bool = True) -> NotebookResult:
        """Open ``path`` (under the server's root), run its explorer cells (or all cells), check every explorer;
        see the module doc. ``run=False``: only what the stored notebook shows (static pictures, news pop-up).
        Never raises for a broken notebook: problems are in the result."""
        path = Path(path).resolve()
        rel = path.relative_to(self.root).as_posix()
        result = NotebookResult(rel)
        cells = explorer_cells(path)
        screenshots.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        page = self._lab_page()
        try:
            self._open(page, rel)
            page.wait_for_function(_JS_READY, arg=rel, timeout=60_000)
            result.static_problems = self._static_problems(page, cells, cells_with_outputs(path, cells))
            result.news = page.evaluate(_JS_NEWS)
            if not run:
                result.mode = "not"
                return result
            run_all = self.run_all
            page.evaluate(_JS_RUN, [cells, run_all])
            page.wait_for_function(_JS_IDLE, timeout=timeout * 1000)
            result.cell_errors = page.evaluate(_JS_ERRORS)
            if result.cell_errors and not run_all:  # an explorer that needs earlier cells: run them all
                run_all = True
                page.evaluate(_JS_RUN, [cells, True])
                page.wait_for_function(_JS_IDLE, timeout=timeout * 1000)
                result.cell_errors = page.evaluate(_JS_ERRORS)
            result.mode = "all cells" if run_all else "explorer cells"
            for k, cell_index in enumerate(cells):
                result.explorers.append(self._check_explorer(page, k, cell_index, Path(rel).stem, screenshots))
            result.news = result.news or page.evaluate(_JS_NEWS)
        except Exception as exc:  # report, do not raise: the other notebooks still get checked
            result.problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            try:
                page.screenshot(path=str(screenshots / f"{Path(rel).stem}-failure.png"), full_page=True)
            except Exception:
                pass
        finally:
            try:
                page.evaluate(_JS_CLOSE)
            except Exception:  # a page in a bad state: the next notebook gets a fresh one
                self._page = None
                page.close()
            self.sessions_ended += [rel] * self._end_sessions(rel)
            result.seconds = time.monotonic() - t0
        return result

    def _end_sessions(self, rel: str) -> int:
        """End, through the server's REST API (what JupyterLab's shutdown calls), every session of notebook ``rel``
        still running after its page closed it (a page in a bad state closes without shutting its kernel down;
        seen once under load). Returns how many it ended; ``sessions_ended`` lists them for the run's summary."""
        url = f"{self.base_url}/api/sessions"
        with urllib.request.urlopen(f"{url}?token={self.token}", timeout=5) as r:
            left = [x["id"] for x in json.loads(r.read()) if x.get("path") == rel]
        for sid in left:
            req = urllib.request.Request(f"{url}/{sid}?token={self.token}", method="DELETE")
            urllib.request.urlopen(req, timeout=30).close()
        return len(left)

    def _open(self, page, rel: str) -> None:
        """Open notebook ``rel`` in ``page``. JupyterLab may reload the page once while it
        starts (its ``?reset`` route reloads when it runs a second time; seen under load on the first notebook of
        a run): Playwright then drops the evaluate ("Resulting promise was garbage collected"); wait for the
        reloaded app and open the notebook again, once."""
        try:
            page.evaluate(_JS_OPEN, rel)
        except Exception as exc:
            if not RELOADED.search(str(exc)):
                raise
            wait_for_app(page)
            page.evaluate(_JS_OPEN, rel)

    def _lab_page(self):
        """The one JupyterLab page every notebook is opened in (loaded once: a page load costs seconds)."""
        if self._page is None:
            self._page = self._context.new_page()
            self._page.goto(f"{self.base_url}/lab?token={self.token}&reset", wait_until="domcontentloaded")
            wait_for_app(self._page)
        return self._page

    def _static_problems(self, page, cells: list[int], stored: list[int]) -> list[str]:
        """Explorer cells of the stored notebook that do not show their static picture (issue 14, item 2).
        ``stored``: the cells whose file has outputs, waited for until the page shows them (a cell stored
        without outputs never shows any: waiting for it would only cost the timeout)."""
        try:
            page.wait_for_function("(cells) => { const p = (window.dlPanel || window.jupyterapp.shell.currentWidget); return cells.every("
                                   "i => p.content.widgets[i].node.querySelector('.jp-OutputArea-output')); }",
                                   arg=stored, timeout=20_000)
        except Exception:
            pass
        problems = []
        for i, shown in zip(cells, page.evaluate(_JS_STATIC, cells)):
            if not shown["text"].strip() and not shown["images"]:
                continue  # never run: nothing shown (make check refuses such a chapter)
            if WIDGET_REPR.search(shown["text"]):
                problems.append(f"cell {i} shows the widget's text fallback: {shown['text'][:80]!r}")
            elif not shown["widget"] and "Run this cell" not in shown["text"]:
                problems.append(f"cell {i} shows neither a static picture nor a 'Run this cell' note: "
                                f"{shown['text'][:80]!r}")
        return problems

    def _check_explorer(self, page, k: int, cell_index: int, stem: str, screenshots: Path) -> ExplorerResult:
        res = ExplorerResult(cell_index)
        t0 = time.monotonic()
        cell = page.locator(f'[data-dl-explorer="{k}"]')
        cell.scroll_into_view_if_needed()
        try:
            cell.locator(CONTROL_SELECTOR).first.wait_for(state="visible", timeout=self.render_timeout * 1000)
            res.rendered = True
        except Exception:
            text = cell.locator(".jp-Cell-outputWrapper").inner_text() if cell.count() else ""
            res.problem = ("widget shown as text, no widget front end: " + text[:120] if WIDGET_REPR.search(text)
                           else "no slider or drop-down rendered in the cell's output: " + text[:120])
            return res
        handle = cell.element_handle()
        try:  # the explorer's first render has arrived
            page.wait_for_function("(el) => { const o = el.querySelector('.widget-output'); "
                                   "return !!o && o.querySelector('.jp-OutputArea-output') !== null; }",
                                   arg=handle, timeout=20_000)
        except Exception:
            pass
        self._wait_quiet(page, handle)
        dom = page.evaluate(_JS_CONTROLS, handle)
        for p in self.module_paths:
            if p not in sys.path:
                sys.path.insert(0, p)
        res.module = explorer_module([d["label"] for d in dom], self.extra_modules) or ""
        first = page.evaluate(_JS_OUTPUT, handle)
        res.changes = self._rapid_changes(page, cell, self.presses, random.Random(f"{stem}-{k}"))
        res.control = f"{res.changes} moves"
        self._wait_quiet(page, handle)
        final = self._final_output(page, handle, res)
        res.changed = bool(final and first and (final["text"], final["pngs"]) != (first["text"], first["pngs"]))
        if not res.changed and not res.problem:
            res.problem = "moving the controls by keyboard did not change the output"
        if self.screenshots or res.problem:
            self._screenshot(page, cell, handle, screenshots / f"{stem}-explorer{k}.png", res)
        res.seconds = time.monotonic() - t0
        return res

    def _final_output(self, page, handle, res: ExplorerResult) -> dict | None:
        """Compare what the explorer shows now with what ``render(compute(**values))`` shows offline for the values
        its controls show; poll a while (a render may still be on its way). Sets ``res.complete``/``problem``."""
        if not res.module:
            res.problem = "could not tell which distlearn.core.explorer module this explorer is"
            return page.evaluate(_JS_OUTPUT, handle)
        if self.offline is None:
            self.offline = OfflineRenderer(self.root, tuple(self.module_paths)).__enter__()
        # The controls are read again on every poll: a move the browser sent just before the kernel went idle may
        # still be on its way (seen under load in CI: the kernel had set k = 2 by a link and gone idle, the browser
        # showed 2, then the key press's k = 7 arrived and both showed 7), so one early reading of them is not final.
        deadline = time.monotonic() + self.final_timeout
        values, want, why = None, None, ""
        while True:
            now = values_from_dom(res.module, page.evaluate(_JS_CONTROLS, handle))
            if now != values:
                values, want = now, self.offline.render(res.module, now)
            got = page.evaluate(_JS_OUTPUT, handle)
            why = _compare(got, want)
            if not why or time.monotonic() > deadline:
                break
            page.wait_for_timeout(300)
        res.values = values
        res.complete = not why
        if why and got and got.get("pngs") and want.pngs:  # keep both pictures to look at
            import base64
            for tag, data in (("shown", got["pngs"][0]), ("offline", want.pngs[0])):
                (SCREENSHOTS / f"mismatch-{res.module}-{tag}.png").write_bytes(base64.b64decode(data))
        if why:
            res.problem = f"final output differs from the offline render of {values}: {why}"
        return got

    @staticmethod
    def _wait_quiet(page, handle) -> None:
        """Wait until the kernel is idle and no explorer update is pending (``dl-pending``), then the images decode."""
        try:
            page.wait_for_function(_JS_IDLE, timeout=60_000)
            page.wait_for_function("(el) => !el.querySelector('.dl-pending')", arg=handle, timeout=60_000)
            page.wait_for_function(_JS_IDLE, timeout=60_000)
            page.evaluate("async (el) => { await Promise.all(Array.from(el.querySelectorAll('img'))"
                          ".map(i => i.decode().catch(() => null))); }", handle)
        except Exception:
            pass

    @staticmethod
    def _rapid_changes(page, cell, presses: int, rng: random.Random) -> int:
        """Move the explorer's controls ``presses`` times in all, without waiting for the kernel in between: each
        move steps a random enabled slider by an arrow key (away from its end), or picks the neighbouring option
        of a drop-down as a mouse does (JupyterLab takes a closed drop-down's arrow keys for itself: ipywidgets
        #3912). Keeps going until the controls differ from where they started. Returns the moves that changed a
        control."""
        controls = cell.locator(CONTROL_SELECTOR)
        # every control's state in one round trip (each move is then one key press and one read-back)
        states = """(cell, selector) => Array.from(cell.querySelectorAll(selector)).map(el => el.tagName === 'SELECT'
            ? {select: true, at_start: el.selectedIndex <= 0, at_end: el.selectedIndex >= el.options.length - 1,
               off: el.disabled || el.options.length < 2, v: el.selectedIndex}
            : {select: false, at_start: Number(el.getAttribute('aria-valuenow')) <= Number(el.getAttribute('aria-valuemin')),
               at_end: Number(el.getAttribute('aria-valuenow')) >= Number(el.getAttribute('aria-valuemax')),
               off: el.closest('.noUi-target').hasAttribute('disabled') ||
                    el.getAttribute('aria-valuemin') === el.getAttribute('aria-valuemax'),
               v: el.getAttribute('aria-valuenow')})"""
        now = cell.evaluate(states, CONTROL_SELECTOR)
        n = len(now)
        start = [info["v"] for info in now]
        changed, tries = 0, 0
        while n and tries < 6 * presses and (changed < presses or [info["v"] for info in now] == start):
            tries += 1
            i = rng.randrange(n)
            info = now[i]
            if info["off"]:
                continue
            up = (not info["at_end"]) and (info["at_start"] or rng.random() < 0.6)
            control = controls.nth(i)
            if info["select"]:
                control.select_option(index=info["v"] + (1 if up else -1))
            else:  # focus and key press in one round trip
                control.press("ArrowRight" if up else "ArrowLeft")
            now = cell.evaluate(states, CONTROL_SELECTOR)  # (a greyed-out control changes the others' "off" too)
            if len(now) != n:
                n = len(now)
                continue
            if now[i]["v"] != info["v"]:
                changed += 1
        return changed

    def _screenshot(self, page, cell, handle, shot: Path, res: ExplorerResult) -> None:
        previous = None
        for _ in range(20):  # a busy machine paints a large plot in steps: wait for two equal pictures
            picture = cell.screenshot(path=str(shot), animations="disabled", caret="hide")
            if picture == previous:
                break
            previous = picture
            page.wait_for_timeout(300)
        res.screenshot = str(shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot)

    @staticmethod
    def _settle(page, handle, quiet_ms: int = 800, limit_s: float = 15.0) -> None:
        """Wait until the explorer's output has not changed for ``quiet_ms`` and its images are loaded."""
        deadline = time.monotonic() + limit_s
        last = page.evaluate(_JS_OUTPUT_STATE, handle)
        while time.monotonic() < deadline:
            page.wait_for_timeout(quiet_ms)
            now = page.evaluate(_JS_OUTPUT_STATE, handle)
            loaded = page.evaluate("(el) => Array.from(el.querySelectorAll('img'))"
                                   ".every(i => i.complete && i.naturalHeight > 0)", handle)
            if now == last and loaded:
                return
            last = now


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Check explorers in a real browser; optionally save a screenshot.")
    ap.add_argument("notebooks", nargs="*", help="default: every notebooks/*.ipynb with an explorer cell")
    ap.add_argument("--screenshot", help="copy the first explorer's screenshot here (e.g. docs/img/explorer.png)")
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.notebooks] or chapter_notebooks()
    if args.screenshot and not args.notebooks:
        paths = paths[:1]
    if not paths:
        print("no notebook with an explorer cell / 没有包含探索器的笔记本")
        return 1
    ok = True
    with Session(screenshots=True if args.screenshot else None) as s:
        for p in paths:
            r = s.check_notebook(p)
            print(r.summary(), flush=True)
            ok &= r.ok
            if args.screenshot and r.explorers and r.explorers[0].screenshot:
                target = Path(args.screenshot)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(ROOT / r.explorers[0].screenshot, target)
                print(f"wrote {target}")
                args.screenshot = None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Open notebooks in JupyterLab in a real headless Chromium and check that every explorer works for a person.

For each notebook: open it in Lab, clear its stored outputs, run its explorer cells (a code cell calling
``….explorer()``; each is self-contained by the authoring rules, and nbval runs every cell anyway) — or every cell
with Lab's "Run All" command when ``DISTLEARN_BROWSER_RUN_ALL=1`` or when an explorer cell fails alone — then for
each explorer cell check that

1. a real widget rendered: a slider handle (``.noUi-handle``) or a ``<select>`` in the cell's output, and not the
   plain-text fallback ``VBox(children=(IntSlider(value=…` that a kernel without a widget front end shows;
2. moving one control *by keyboard* (arrow key on a focused slider handle or drop-down) changes what the
   explorer's output area shows (text or plot);

and save a screenshot of the explorer under ``build/screenshots/``.

The server (``python -m jupyterlab`` on 127.0.0.1, a random token, a free port, its own temporary settings,
workspace and runtime folders, the news pop-up switched off) and Chromium (Debian's ``chromium``, driven over the
DevTools protocol by Playwright's Python package — never ``playwright install``) are started as child processes and
stopped by their process ids; :meth:`Session.close` checks that no process they started is left.

Used by ``tests/test_browser.py``; also a script, e.g. to refresh the README's screenshot::

    python tests/browser_harness.py --screenshot docs/img/explorer.png notebooks/05_pipeline_parallel.ipynb
"""
from __future__ import annotations

import argparse
import json
import os
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


def chapter_notebooks(root: Path = ROOT) -> list[Path]:
    """The chapter notebooks (``notebooks/*.ipynb``) that contain at least one explorer cell."""
    return [p for p in sorted((root / "notebooks").glob("*.ipynb")) if explorer_cells(p)]


@dataclass
class ExplorerResult:
    cell: int
    rendered: bool = False
    control: str = ""
    changed: bool = False
    screenshot: str = ""
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.rendered and self.changed and not self.problem


@dataclass
class NotebookResult:
    path: str
    seconds: float = 0.0
    cell_errors: list[str] = field(default_factory=list)
    explorers: list[ExplorerResult] = field(default_factory=list)
    problem: str = ""
    mode: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem and not self.cell_errors and bool(self.explorers) and all(
            e.ok for e in self.explorers)

    def summary(self) -> str:
        lines = [f"{self.path}: {'ok' if self.ok else 'FAILED'} in {self.seconds:.1f} s ({self.mode or '-'} run)"]
        if self.problem:
            lines.append(f"  problem: {self.problem}")
        for err in self.cell_errors:
            lines.append(f"  cell error: {err}")
        for e in self.explorers:
            lines.append(f"  explorer in cell {e.cell}: rendered={e.rendered} control={e.control or '-'} "
                         f"changed={e.changed} screenshot={e.screenshot or '-'}"
                         + (f" problem: {e.problem}" if e.problem else ""))
        return "\n".join(lines)


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
  const w = app.shell.currentWidget; return !!(w && w.context && w.context.path === path && w.content); }"""
_JS_RUN = """async ([cells, runAll]) => {
  const app = window.jupyterapp; const panel = app.shell.currentWidget;
  await panel.context.ready; await panel.sessionContext.ready;
  await app.commands.execute('notebook:clear-all-cell-outputs');
  if (runAll) { await app.commands.execute('notebook:run-all-cells'); }
  else { for (const i of cells) { panel.content.activeCellIndex = i; await app.commands.execute('notebook:run-cell'); } }
  cells.forEach((i, k) => panel.content.widgets[i].node.setAttribute('data-dl-explorer', String(k)));
  return true; }"""
_JS_IDLE = """() => { const p = window.jupyterapp.shell.currentWidget; const k = p.sessionContext.session &&
  p.sessionContext.session.kernel; return !!k && k.status === 'idle' &&
  !Array.from(p.content.node.querySelectorAll('.jp-InputPrompt')).some(e => e.textContent.includes('*')); }"""
_JS_ERRORS = """() => { const p = window.jupyterapp.shell.currentWidget; const out = [];
  p.content.widgets.forEach((c, i) => { if (c.model.type !== 'code') return;
    for (const o of c.model.outputs.toJSON()) if (o.output_type === 'error') out.push(`cell ${i}: ${o.ename}: ${o.evalue}`); });
  return out; }"""
_JS_SHUTDOWN = """async () => { const p = window.jupyterapp.shell.currentWidget;
  if (p && p.sessionContext) { await p.sessionContext.shutdown(); } return true; }"""
# What the explorer's output area shows: its text and a fingerprint of each image.
_JS_OUTPUT_STATE = """(el) => { const o = el.querySelector('.widget-output') || el; const imgs = Array.from(o.querySelectorAll('img'));
  return o.innerText + '|' + imgs.map(i => i.src.length + ':' + i.src.slice(-80)).join(','); }"""


class Session:
    """One JupyterLab server over ``root`` and one headless Chromium; use as a context manager."""

    def __init__(self, root: Path = ROOT, chromium: str | None = None, width: int = 1200, height: int = 1600,
                 render_timeout: float = 20.0, run_all: bool | None = None):
        self.root = Path(root).resolve()
        # Run every cell (Lab's "Run All"), or by default only the explorer cells — each is self-contained by the
        # authoring rules, and nbval already runs every cell — falling back to Run All if one of them fails.
        self.run_all = (os.environ.get("DISTLEARN_BROWSER_RUN_ALL", "") not in ("", "0")) if run_all is None \
            else run_all
        self.render_timeout = render_timeout  # seconds an explorer may take to show its controls
        self.chromium = chromium or find_chromium()
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
        # No "would you like news?" pop-up, no update check; every cell attached to the DOM (no windowing).
        _write_json(settings / "@jupyterlab/apputils-extension/notification.jupyterlab-settings",
                    {"fetchNews": "false", "checkForUpdates": False})
        _write_json(settings / "@jupyterlab/notebook-extension/tracker.jupyterlab-settings",
                    {"windowingMode": "none"})
        _write_json(self.tmp / "config" / "labconfig" / "page_config.json",
                    {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
        env = dict(os.environ, JUPYTERLAB_SETTINGS_DIR=str(settings),
                   JUPYTERLAB_WORKSPACES_DIR=str(self.tmp / "workspaces"),
                   JUPYTER_CONFIG_DIR=str(self.tmp / "config"), JUPYTER_RUNTIME_DIR=str(self.tmp / "runtime"),
                   PYDEVD_DISABLE_FILE_VALIDATION="1")
        for name in ("DISTLEARN_LANG", "MPLBACKEND"):  # kernels as a person gets them: both languages, inline plots
            env.pop(name, None)
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
               f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--ServerApp.terminals_enabled=False", "--LabApp.expose_app_in_browser=True",
               "--LabApp.news_url=None"]
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
            f'  <dir>{font_dir}</dir>\n  <cachedir>{self.tmp / "fontconfig-cache"}</cachedir>\n</fontconfig>\n',
            encoding="utf-8")
        env["FONTCONFIG_FILE"] = str(conf)
        return env

    def kernels(self) -> list:
        """The kernels the server has running (REST /api/kernels)."""
        with urllib.request.urlopen(f"{self.base_url}/api/kernels?token={self.token}", timeout=5) as r:
            return json.loads(r.read())

    def close(self) -> None:
        """Stop browser and server by their pids, then any process they started that is still there."""
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
    def check_notebook(self, path: Path, screenshots: Path = SCREENSHOTS, timeout: float = 180.0) -> NotebookResult:
        """Open ``path`` (under the server's root), run its explorer cells (or all cells), check every explorer;
        see the module doc. Never raises for a broken notebook: problems are in the result."""
        path = Path(path).resolve()
        rel = path.relative_to(self.root).as_posix()
        result = NotebookResult(rel)
        cells = explorer_cells(path)
        screenshots.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        page = self._context.new_page()
        try:
            page.goto(f"{self.base_url}/lab/tree/{rel}?token={self.token}&reset", wait_until="domcontentloaded")
            page.wait_for_function(_JS_READY, arg=rel, timeout=60_000)
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
        except Exception as exc:  # report, do not raise: the other notebooks still get checked
            result.problem = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            try:
                page.screenshot(path=str(screenshots / f"{Path(rel).stem}-failure.png"), full_page=True)
            except Exception:
                pass
        finally:
            try:
                page.evaluate(_JS_SHUTDOWN)
            except Exception:
                pass
            page.close()
        result.seconds = time.monotonic() - t0
        return result

    def _check_explorer(self, page, k: int, cell_index: int, stem: str, screenshots: Path) -> ExplorerResult:
        res = ExplorerResult(cell_index)
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
        output = cell.locator(".jupyter-widgets.widget-output, .widget-output").first
        try:  # the explorer's first render has arrived
            page.wait_for_function("(el) => el.querySelector('.jp-OutputArea-output') !== null",
                                   arg=output.element_handle(), timeout=20_000)
        except Exception:
            pass
        handle = cell.element_handle()
        # Sliders first (arrow keys move a focused handle everywhere); a drop-down's arrow key may open its list.
        sliders, selects = cell.locator(".jupyter-widgets .noUi-handle"), cell.locator(".jupyter-widgets select")
        candidates = [sliders.nth(i) for i in range(min(sliders.count(), 3))] + \
                     [selects.nth(i) for i in range(min(selects.count(), 1))]
        for control in candidates:
            before = page.evaluate(_JS_OUTPUT_STATE, handle)
            key, label = self._press(control)
            try:
                page.wait_for_function(f"(args) => ({_JS_OUTPUT_STATE})(args[0]) !== args[1]",
                                       arg=[handle, before], timeout=15_000)
            except Exception:
                continue
            res.control, res.changed = label + " " + key, True
            break
        if not res.changed:
            res.problem = "moving a control by keyboard did not change the output"
        try:
            page.wait_for_function(_JS_IDLE, timeout=30_000)
            self._settle(page, handle)  # the last output message has arrived; then every plot image decodes
            page.evaluate("async (el) => { await Promise.all(Array.from(el.querySelectorAll('img'))"
                          ".map(i => i.decode().catch(() => null))); "
                          "await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); }", handle)
        except Exception:
            pass
        shot = screenshots / f"{stem}-explorer{k}.png"
        previous = None
        for _ in range(20):  # a busy machine paints a large plot in steps: wait for two equal pictures
            picture = cell.screenshot(path=str(shot), animations="disabled", caret="hide")
            if picture == previous:
                break
            previous = picture
            page.wait_for_timeout(500)
        res.screenshot = str(shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot)
        return res

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

    @staticmethod
    def _press(control) -> tuple[str, str]:
        """Focus ``control`` and press the arrow key that moves it away from its current end."""
        info = control.evaluate("""(el) => el.tagName === 'SELECT'
            ? {kind: 'select', at_end: el.selectedIndex >= el.options.length - 1}
            : {kind: 'slider', at_end: Number(el.getAttribute('aria-valuenow')) >= Number(el.getAttribute('aria-valuemax'))}""")
        control.focus()
        if info["kind"] == "select":
            key = "ArrowUp" if info["at_end"] else "ArrowDown"
        else:
            key = "ArrowLeft" if info["at_end"] else "ArrowRight"
        control.press(key)
        return key, info["kind"]


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
    with Session() as s:
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

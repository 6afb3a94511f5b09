"""A classroom on one machine (authoring/classroom.py, ``make classroom``): three students at once in a real
JupyterHub, each in headless Chromium, each isolated.

The hub starts on 127.0.0.1 (free ports) with alice (English copy of the course), bob (Chinese) and carol (both
languages). Each logs in with their own password, gets their own JupyterLab server and copy of the course, opens
chapter 02 and — all three at the same time — runs its 4-process lab (``launch.run(lab.run_collectives, 4, …)``)
and an exercise check with an answer of their own (bob's is wrong). Then:

- each notebook shows its own student's results only: the lab's output, ✓ for alice and carol, ✗ for bob, in
  that student's language, and the room's limits in the kernel's environment;
- each answer is saved in its student's copy only: no file of another home contains it, and the course's own
  notebooks are unchanged;
- each server runs its student's kernel only, and refuses another student's requests (403).

Also, without the hub: the per-student copy keeps a student's changed files when the course is newer, the students
file is checked, a wrong password is refused. Without Chromium the browser test is skipped with instructions, except
in CI (``CI=true``) where it fails; without JupyterHub (the .[classroom] extra, which make test installs) it is
skipped the same way.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import browser_harness as bh
from authoring import classroom as C
from distlearn.core.validate import DistlearnValueError

ROOT = Path(__file__).resolve().parent.parent
STUDENTS = {"alice": "en", "bob": "zh", "carol": "both"}
CHAPTER = "notebooks/02_collectives.ipynb"
LAB_CALL = "launch.run(lab.run_collectives"
LIMITS = C.Limits(memory_gib=3.0, cpus=2.0, max_ranks=4, lab_slots=8, nice=5)
HOW_TO_GET_HUB = ("JupyterHub not found: .venv/bin/pip install -e '.[classroom]' (make test does this) / "
                  "未找到 JupyterHub：请运行 .venv/bin/pip install -e '.[classroom]'（make test 会自动安装）")
CORRECT = "2 * (world_size - 1) / world_size * nbytes"


def answer(name: str, token: str) -> str:
    """The exercise cell a student types: an answer of their own (bob's is wrong), marked with their tag."""
    body = CORRECT if name != "bob" else "nbytes"
    return (f'TAG = "answer of {name} {token}"\n'
            "import os\n"
            "from distlearn.collectives import check\n\n"
            f"def all_reduce_bytes(nbytes, world_size):\n    return {body}  # {name}\n\n"
            'print(TAG, "limits", os.environ["DISTLEARN_MAX_RANKS"], os.environ["DISTLEARN_LAB_SLOTS"])\n'
            "check.ex02_all_reduce_bytes(all_reduce_bytes)")


# ---------------------------------------------------------------- without the hub
def test_students_file_is_checked_naming_the_line():
    assert C.read_students("# my class\nalice en\nbob zh  # Chinese\ncarol\n") == STUDENTS
    for text, where in (("Alice en", "line 1"), ("alice fr", "line 1"), ("alice\nalice zh", "line 2"), ("", "no student")):
        with pytest.raises(DistlearnValueError, match=where) as info:
            C.read_students(text)
        assert info.value.param == "students" and info.value.zh


def test_passwords_are_made_once_per_student_and_kept(tmp_path):
    first = C.passwords(tmp_path, ["alice", "bob"])
    assert len(set(first.values())) == 2 and all(len(p) >= 12 for p in first.values())
    assert C.passwords(tmp_path, ["alice", "bob", "carol"]) == {**first, "carol": C.passwords(tmp_path, [])["carol"]}
    assert oct((tmp_path / "passwords.txt").stat().st_mode & 0o777) == "0o600"


def _nb(text: str) -> str:
    """A one-cell notebook's text (an exercise is handed out with nbgrader's metadata, so it must be a notebook)."""
    import nbformat

    return nbformat.writes(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(text)]))


def _said(path: Path) -> str:
    return "".join(json.loads(path.read_text())["cells"][0]["source"])


def test_a_newer_course_never_overwrites_a_students_work(tmp_path):
    course, home = tmp_path / "course", tmp_path / "home"
    for d in ("notebooks", "exercises"):
        (course / d).mkdir(parents=True)
    (course / "notebooks" / "01_a.ipynb").write_text("v1 chapter")
    (course / "exercises" / "01_a.ipynb").write_text(_nb("v1 exercise"))
    assert C.hand_out(home, "both", course)["copied"] == ["notebooks/01_a.ipynb", "exercises/01_a.ipynb"]
    assert C.hand_out(home, "both", course) == {"copied": [], "updated": [], "kept": []}   # nothing new
    (home / "exercises" / "01_a.ipynb").write_text(_nb("v1 exercise + my answer"))       # the student works
    (course / "notebooks" / "01_a.ipynb").write_text("v2 chapter")                       # a newer course
    (course / "exercises" / "01_a.ipynb").write_text(_nb("v2 exercise"))
    (course / "exercises" / "02_b.ipynb").write_text(_nb("v2 new exercise"))
    done = C.hand_out(home, "both", course)
    assert done == {"copied": ["exercises/02_b.ipynb"], "updated": ["notebooks/01_a.ipynb"],
                    "kept": ["exercises/01_a.ipynb"]}
    assert (home / "notebooks" / "01_a.ipynb").read_text() == "v2 chapter"                # untouched: refreshed
    assert _said(home / "exercises" / "01_a.ipynb") == "v1 exercise + my answer"         # the answer stays
    assert _said(home / "exercises" / "01_a.course-update.ipynb") == "v2 exercise"
    assert not (home / "solutions").exists()


def test_a_student_gets_the_course_in_their_language_without_solutions():
    for lang, marker in (("en", "set_language(\\\"en\\\")"), ("zh", "set_language(\\\"zh\\\")"),
                         ("both", "language_switch()")):
        files = C.course_files(lang)
        assert sorted({k.split("/")[0] for k in files}) == ["exercises", "notebooks"]
        assert marker in files[CHAPTER].read_text(encoding="utf-8")


def test_handed_out_exercises_can_be_graded_and_chapters_are_copied_as_they_are(tmp_path):
    """An exercise reaches the student with nbgrader's metadata on its check and answer cells (without it nbgrader
    scored a perfect answer 0), a chapter byte for byte; handing out again changes nothing."""
    import nbformat

    C.hand_out(tmp_path, "zh")
    ex = nbformat.read(tmp_path / "exercises" / "07_overlap_prefetch.ipynb", as_version=4)
    ids = [c.metadata["nbgrader"]["grade_id"] for c in ex.cells if "nbgrader" in c.metadata]
    assert ids == ["answer-prefetch_time", "check-prefetch_time", "answer-peak_units", "check-peak_units",
                   "answer-serial_step_time", "check-serial_step_time"]
    assert "练习" in ex.cells[0].source
    chapter = "notebooks/07_overlap_prefetch.ipynb"
    assert (tmp_path / chapter).read_bytes() == C.course_files("zh")[chapter].read_bytes()
    assert C.hand_out(tmp_path, "zh") == {"copied": [], "updated": [], "kept": []}


def _classroom_with_work(tmp_path):
    """A classroom folder (no hub): alice saved an answer in a copy handed out before exercises were marked, bob
    never touched his, carol deleted hers."""
    import nbformat

    folder = tmp_path / "classroom"
    C.prepare(folder, STUDENTS, ip="127.0.0.1", port=8765)
    for name, lang in STUDENTS.items():
        C.hand_out(folder / "home" / name, lang)
    ex = folder / "home" / "alice" / "exercises" / "07_overlap_prefetch.ipynb"
    nb = nbformat.read(ex, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
        if cell.source.startswith("def prefetch_time("):
            cell.source = "def prefetch_time(num_units, compute, comm):\n    return 42  # alice\n"
    nbformat.write(nb, ex)
    os.utime(ex, (1_800_000_000, 1_800_000_000))   # saved at 2027-01-15 08:00:00 UTC
    (folder / "home" / "carol" / "exercises" / "07_overlap_prefetch.ipynb").unlink()
    return folder


def test_collect_puts_every_students_work_where_nbgrader_grades_it(tmp_path):
    import nbformat
    from authoring import grading

    folder, course, name = _classroom_with_work(tmp_path), tmp_path / "my-course", "07_overlap_prefetch"
    grading.write_course(course, [name])
    assert C.collect(course, [name], folder) == {"alice": {name: "collected"}, "bob": {name: "unchanged"},
                                                 "carol": {name: "missing"}}
    got = course / "submitted" / "alice" / name
    nb = nbformat.read(got / f"{name}.ipynb", as_version=4)
    assert "return 42  # alice" in "".join(c.source for c in nb.cells)
    marked = {c.metadata["nbgrader"]["grade_id"] for c in nb.cells if "nbgrader" in c.metadata}
    assert marked == {m.metadata["nbgrader"]["grade_id"] for m in grading.nbgrader_source(ROOT / "solutions" / f"{name}.ipynb").cells
                      if m.metadata["nbgrader"]["solution"] or m.metadata["nbgrader"]["grade"]}
    assert (got / "timestamp.txt").read_text() == "2027-01-15 08:00:00.000000 UTC"
    bob = nbformat.read(course / "submitted" / "bob" / name / f"{name}.ipynb", as_version=4)
    assert 'set_language("zh")' in "".join(c.source for c in bob.cells)
    assert not (course / "submitted" / "carol").exists()
    for bad, param in (({"course": tmp_path / "nowhere"}, "course"), ({"folder": tmp_path / "nowhere"}, "dir")):
        args = {"course": course, "folder": folder, **bad}
        with pytest.raises(DistlearnValueError, match=param) as info:
            C.collect(args["course"], [name], args["folder"])
        assert info.value.param == param and info.value.zh


def test_collect_on_the_command_line_says_what_it_did_in_both_languages(tmp_path, capsys):
    from authoring import grading

    folder, course, name = _classroom_with_work(tmp_path), tmp_path / "c", "07_overlap_prefetch"
    grading.write_course(course, [name])
    assert C.main(["collect", "--course", str(course), "--dir", str(folder), name]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"alice\s+{name}\s+collected / 已收取", out)
    assert re.search(rf"bob\s+{name}\s+collected, never changed: scores 0 / 已收取，但从未改动：得 0 分", out)
    assert re.search(rf"carol\s+{name}\s+no file: not collected / 没有这个文件：未收取", out)
    assert f"nbgrader autograde {name}" in out


def test_the_hubs_internal_ports_are_free_ones_not_jupyterhubs_defaults(tmp_path, monkeypatch):
    """JupyterHub's own API (8081) and the proxy's (8001) clashed when a second hub, or anything else, used them."""
    hub, api = C.internal_ports(8000)
    assert len({hub, api, 8000, 8081, 8001}) == 5
    for port in (hub, api):  # free: we can listen there
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
    assert C.internal_ports(8000, 9001, 9002) == (9001, 9002)
    for kwargs, param in (({"hub_port": 8000}, "hub_port"), ({"hub_port": 9001, "proxy_api_port": 9001}, "proxy_api_port"),
                          ({"hub_port": 70000}, "hub_port"), ({"proxy_api_port": -1}, "proxy_api_port")):
        with pytest.raises(DistlearnValueError, match=param) as info:
            C.internal_ports(8000, **kwargs)
        assert info.value.param == param and info.value.zh
    # make classroom → python -m authoring.classroom start: the ports reach classroom.json, which the hub reads
    started = []
    monkeypatch.setattr(os, "execve", lambda *a: started.append(a))
    monkeypatch.setattr(os, "chdir", lambda *a: None)
    (tmp_path / "students.txt").write_text("alice en\n")
    for extra, want in (([], None), (["--hub-port", "9101", "--proxy-api-port", "9102"], (9101, 9102))):
        C.main(["start", "--students", str(tmp_path / "students.txt"), "--dir", str(tmp_path / "room"),
                "--port", "8765", *extra])
        s = C.Settings.load(tmp_path / "room" / "classroom.json")
        assert (s.hub_port, s.proxy_api_port) == want if want else len({s.hub_port, s.proxy_api_port, 8765, 8081, 8001}) == 5
    assert len(started) == 2 and started[0][1][-2:] == ["-f", str((tmp_path / "room" / "jupyterhub_config.py").resolve())]


def test_students_see_no_teachers_nbgrader_menu(tmp_path):
    """nbgrader's server parts are off in the students' servers, and so is its JupyterLab part: it showed each
    student a "Nbgrader" menu, a "Create Assignment" panel and a "Validate" button that could only fail."""
    C.prepare(tmp_path, {"alice": "en"}, ip="127.0.0.1", port=8765)
    page = json.loads((tmp_path / "jupyter-config" / "labconfig" / "page_config.json").read_text())
    assert page == {"disabledExtensions": {"@jupyter/nbgrader": True}}
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        return  # nothing to switch off / 没有要关闭的扩展
    installed = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / C.NBGRADER_LAB_EXTENSION / "package.json"
    assert json.loads(installed.read_text())["name"] == C.NBGRADER_LAB_EXTENSION  # the name JupyterLab knows


def test_limits_are_checked():
    assert C.Limits(max_ranks=4, lab_slots=0).checked().lab_slots >= 4
    with pytest.raises(DistlearnValueError, match="lab_slots"):
        C.Limits(max_ranks=8, lab_slots=4).checked()   # a lab of 8 could never start


# ---------------------------------------------------------------- the hub
def _get(url: str, timeout: float = 5.0) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:  # not listening yet / 还没有开始监听
        return 0


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    try:
        import jupyterhub  # noqa: F401
        import configurable_http_proxy  # noqa: F401
    except ImportError:
        bh.require(False, HOW_TO_GET_HUB)
    folder = tmp_path_factory.mktemp("classroom")
    port = C.free_port()
    config = C.prepare(folder, STUDENTS, ip="127.0.0.1", port=port, limits=LIMITS,
                       hub_port=C.free_port(), proxy_api_port=C.free_port(),
                       server_args=["--LabApp.expose_app_in_browser=True"])  # window.jupyterapp, for the test
    cmd, env = C.hub_command(config)
    log = open(folder / "hub.log", "wb")
    proc = subprocess.Popen(cmd, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while _get(f"{base}/hub/api/") != 200:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the hub did not start:\n" + (folder / "hub.log").read_text(errors="replace")[-3000:])
        time.sleep(0.3)
    try:
        yield {"base": base, "folder": folder, "passwords": C.passwords(folder, []), "proc": proc, "port": port}
    finally:
        import psutil

        started = bh._descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)  # the hub stops every student's server and the proxy
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        time.sleep(1)
        left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        info = [(p.pid, " ".join(p.cmdline())[:120]) for p in left]
        for p in left:
            p.kill()
        log.close()
        assert not left, f"processes left by the hub: {info}"
        assert not list(Path(C.CGROUP_ROOT).glob(f"*/distlearn-classroom-{port}")), "cgroups left"


JS_START = """async ([code, needle]) => { const app = window.jupyterapp; const p = window.dlPanel;
  await p.context.ready; await p.sessionContext.ready; const nb = p.content;
  const src = (c) => c.model.sharedModel.getSource();
  const first = nb.widgets.findIndex(c => c.model.type === 'code');
  const imports = nb.widgets.findIndex(c => c.model.type === 'code' && src(c).includes('from distlearn.core import cost, launch'));
  const lab = nb.widgets.findIndex(c => c.model.type === 'code' && src(c).includes(needle));
  nb.activeCellIndex = nb.widgets.length - 1;
  await app.commands.execute('notebook:insert-cell-below');
  nb.activeCell.model.sharedModel.setSource(code);
  const cells = [first, imports, lab, nb.activeCellIndex];
  window.dlDone = null;
  (async () => { try { for (const i of cells) { nb.activeCellIndex = i; await app.commands.execute('notebook:run-cell'); }
                      await p.context.save(); window.dlDone = 'ok'; } catch (e) { window.dlDone = 'error: ' + e; } })();
  return cells; }"""
JS_OUTPUTS = """(cells) => { const nb = window.dlPanel.content; return cells.map(i => nb.widgets[i].model.outputs.toJSON()
  .map(o => o.output_type === 'error' ? `${o.ename}: ${o.evalue}` : (o.text || (o.data && o.data['text/plain']) || ''))
  .join('\\n')); }"""


def _text(x) -> str:
    return "".join(x) if isinstance(x, list) else str(x)


@pytest.mark.slow
@pytest.mark.classroom
def test_three_students_at_once_each_in_their_own_server_copy_and_kernel(hub):
    chromium = bh.find_chromium()
    bh.require(chromium is not None, bh.HOW_TO_GET_CHROMIUM)
    from playwright.sync_api import sync_playwright

    t0 = time.monotonic()
    times = {}
    tokens = {name: hashlib.sha256(f"{name}{time.time()}".encode()).hexdigest()[:10] for name in STUDENTS}
    before = hashlib.sha256((ROOT / CHAPTER).read_bytes()).hexdigest()
    profile = hub["folder"] / "chromium-profile"
    browser_proc = subprocess.Popen([chromium, *bh.CHROMIUM_FLAGS, "--disable-dev-shm-usage",
                                     "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
                                     f"--user-data-dir={profile}", "about:blank"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    pw = None
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert browser_proc.poll() is None and time.monotonic() < deadline, "Chromium did not start"
            time.sleep(0.1)
        pw = sync_playwright().start()
        browser = pw.chromium.connect_over_cdp(f"http://127.0.0.1:{int(port_file.read_text().split()[0])}")
        pages = {}
        for name in STUDENTS:  # one browser context per student: their own cookies, as on their own laptop
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.goto(f"{hub['base']}/hub/login", wait_until="domcontentloaded")
            page.fill("#username_input", name)
            page.fill("#password_input", hub["passwords"][name] + ("-wrong" if name == "bob" else ""))
            page.click("#login_submit")
            if name == "bob":  # a wrong password is refused, then the right one works
                page.wait_for_selector("text=Invalid username or password", timeout=30_000)
                page.fill("#username_input", name)
                page.fill("#password_input", hub["passwords"][name])
                page.click("#login_submit")
            pages[name] = page
        for name, page in pages.items():  # the three servers start at once
            page.wait_for_url(re.compile(rf"/user/{name}/lab"), timeout=180_000)
            bh.wait_for_app(page, timeout_ms=120_000)
        times["log in, servers and JupyterLab"] = time.monotonic() - t0
        cells = {}
        for name, page in pages.items():
            page.evaluate(bh._JS_OPEN, CHAPTER)
        for name, page in pages.items():  # all three start their lab and their check without waiting
            cells[name] = page.evaluate(JS_START, [answer(name, tokens[name]), LAB_CALL])
        for name, page in pages.items():
            page.wait_for_function("() => window.dlDone !== null", timeout=240_000)
            assert page.evaluate("() => window.dlDone") == "ok", name
        times["run lab and check, all at once"] = time.monotonic() - t0 - times["log in, servers and JupyterLab"]
        outputs = {name: page.evaluate(JS_OUTPUTS, cells[name]) for name, page in pages.items()}
        # what each server runs and lets whom see, asked with each student's own cookies
        api = {}
        for name, page in pages.items():
            xsrf = next((c["value"] for c in page.context.cookies() if c["name"] == "_xsrf"), "")
            for other in STUDENTS:
                r = page.request.get(f"{hub['base']}/user/{other}/api/kernels", headers={"X-XSRFToken": xsrf},
                                     max_redirects=0)
                api[name, other] = (r.status, r.json() if r.status == 200 else None)
    finally:
        if pw is not None:
            pw.stop()
        bh._stop(browser_proc)
    print(f"\nclassroom test times (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))

    for name, lang in STUDENTS.items():
        lab_out, check_out = outputs[name][2], outputs[name][3]
        assert "Error" not in lab_out and lab_out.strip(), (name, lab_out)
        assert f"answer of {name} {tokens[name]} limits {LIMITS.max_ranks} {LIMITS.lab_slots}" in check_out
        mark = "✗ ex02_all_reduce_bytes" if name == "bob" else "✓ ex02_all_reduce_bytes"
        assert mark in check_out, (name, check_out[:500])
        assert ("CheckFailed" in check_out) == (name == "bob")
        zh = "隐藏测试用例" in check_out
        assert zh == (lang in ("zh", "both")), (name, check_out[:300])   # each in their own language
        for other in STUDENTS:
            if other != name:
                assert tokens[other] not in "".join(outputs[name]), (name, other)
    homes = hub["folder"] / "home"
    for name in STUDENTS:
        saved = json.loads((homes / name / CHAPTER).read_text(encoding="utf-8"))
        assert any(tokens[name] in _text(c["source"]) for c in saved["cells"]), f"{name}'s answer was not saved"
        for path in homes.rglob("*"):  # every file of every home: the tag is in its owner's home only
            if path.is_file() and tokens[name].encode() in path.read_bytes():
                assert path.relative_to(homes).parts[0] == name, f"{name}'s answer found in {path}"
    assert hashlib.sha256((ROOT / CHAPTER).read_bytes()).hexdigest() == before, "the course's own notebook changed"
    for name in STUDENTS:
        for other in STUDENTS:
            status, kernels = api[name, other]
            if other == name:
                assert status == 200 and len(kernels) == 1, (name, status, kernels)  # their one kernel
            else:
                assert status in (302, 403), (name, other, status)                    # not another's
    print("classroom test total (s): %.1f" % (time.monotonic() - t0))

"""The website's live explorers (issue 39, :mod:`authoring.web_explorers`, ``website/_static/distlearn-explorer.js``).

Fast (make test): every explorer's web controls are a valid grid (values the notebook control offers, the default
among them, within the size limits); the data written for a sample of settings is what ``render(compute(**values))``
shows when called directly, in each language, and a data file changed on purpose (one number, one SVG path) is
caught; the data round-trips through its ``.js`` file; the site's own JS, CSS and the data reference no external
URL; a chapter page's explorer output is wrapped for the live view.

Extended (make test-extended): the whole site is built with live explorers and opened in headless Chromium; on every
explorer of every chapter page, in both languages, every control is moved through every value it offers (the others
at their defaults) and the text and figure shown are compared with Python's for that setting; the redraw time
(input event → DOM updated and laid out) and the page weight each chapter adds are measured and bounded, and no
request leaves the site.
"""
from __future__ import annotations

import importlib.util
import json
import re
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import browser_harness as bh
from authoring import web_explorers as wx, website
from distlearn.core.explorer import explorer_modules

ROOT = bh.ROOT
EXTERNAL = re.compile(r"""(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|"""
                      r"""\bimport\s*\(\s*["'](?:https?:)?//|fetch\(\s*["'](?:https?:)?//""", re.I)
MAX_REDRAW_MS = 50
MAX_CHAPTER_BYTES = 1.5e6
SAMPLE = [("memory", "en"), ("memory", "zh"), ("precision.fp8", "zh")]  # explorer, language


def external_references(text: str) -> list[str]:
    """What in ``text`` (HTML, JS, CSS or SVG) would make a browser load something from outside the site: an
    ``src=`` / ``href=`` / ``url(…)`` / ``import(…)`` / ``fetch(…)`` of an absolute ``http(s)://`` or ``//`` URL.
    A link the reader may follow (``<a href="https://…">``) is not a request, and neither is an XML namespace."""
    text = re.sub(r"<a\b[^>]*>", "", text)
    return [text[max(0, m.start() - 40): m.end() + 40] for m in EXTERNAL.finditer(text)]


def test_external_reference_check_catches_what_it_must():
    assert external_references('<script src="https://cdn.example.org/d3.js"></script>') != []
    assert external_references("@font-face { src: url(//fonts.example.org/a.woff2) }") != []
    assert external_references('fetch("https://example.org/data.json")') != []
    assert external_references('<a href="https://mybinder.org/v2/gh/x">Binder</a>') == []
    assert external_references('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">') == []


def test_site_static_files_reference_nothing_outside_the_site():
    files = [p for p in (ROOT / "website").rglob("*") if p.suffix in (".js", ".css", ".html", ".py")]
    assert (ROOT / "website" / "_static" / "distlearn-explorer.js") in files
    for p in files:
        assert external_references(p.read_text(encoding="utf-8")) == [], p


def test_every_explorer_has_a_valid_web_grid(monkeypatch):
    """Every explorer is converted: its web controls offer values of the notebook control, the default among them,
    and the grid stays within the limits (MAX_SETTINGS settings; MAX_RENDERS is checked when the data is made)."""
    assert wx.live_names(log=lambda *a: None) == list(explorer_modules())   # (web_grid of each one)
    for name in ("memory", "pipeline_parallel", "planning"):
        grid = wx.web_grid(name, wx.module_of(name).controls())
        assert all(len(v) >= 1 for v in grid.values())
        assert sum(len(v) > 1 for v in grid.values()) >= min(2, len(grid)), name  # a live explorer moves
    for spec, error in (({"dp": [3, 8]}, "not options"), ({"dp": [1, 2]}, "default"),
                        ({"zoom": [1]}, "names no control"), ({"custom_billions": list(range(1, 13))}, "not options")):
        monkeypatch.setattr(wx, "WEB_OPTIONS", {**wx.WEB_OPTIONS, "memory": spec})
        with pytest.raises(ValueError, match=error):
            wx.web_grid("memory", wx.module_of("memory").controls())
    monkeypatch.setattr(wx, "WEB_OPTIONS", {**wx.WEB_OPTIONS, "memory": {}})   # the whole grid: 1,372,800
    with pytest.raises(ValueError, match="settings >"):
        wx.web_grid("memory", wx.module_of("memory").controls())


def _sample_keys(name: str) -> set[str]:
    """Two settings of explorer ``name``: the defaults and every control at its last offered value."""
    grid = wx.web_grid(name, wx.module_of(name).controls())
    controls = wx.module_of(name).controls()
    default = ".".join(str(grid[n].index(c.value)) for n, c in controls.items())
    return {default, ".".join(str(len(v) - 1) for v in grid.values())}


@pytest.mark.parametrize("name, lang", SAMPLE)
def test_data_of_a_sample_equals_what_python_shows(name, lang):
    keys = _sample_keys(name)
    data = wx.from_js(wx.to_js(wx.explorer_data(name, lang, only=keys)))
    assert set(data["settings"]) == keys
    assert wx.data_problems(data, keys) == []
    shown = wx.decode(data, sorted(keys)[0])
    assert any(kind == "svg" and "<svg" in text for kind, text in shown.parts)   # the figure, as matplotlib's SVG
    texts = "".join(text for kind, text in shown.parts if kind != "svg")
    assert bool(re.search(r"[\u4e00-\u9fff]", texts)) == (lang == "zh")            # printed in the page's language
    labels = " ".join(c["label"] for c in data["controls"])
    assert bool(re.search(r"[\u4e00-\u9fff]", labels)) == (lang == "zh")


def test_a_wrong_data_file_is_caught():
    """One number of a printed line, one coordinate of a figure's path, and a greyed-out control changed in the
    data: each is reported."""
    keys = {max(_sample_keys("memory"))}   # one setting (ZeRO-3 with offload: a CPU line, parameter offload active)
    good = wx.explorer_data("memory", "en", only=keys)
    assert wx.data_problems(good, keys) == []

    def changed(edit):
        data = wx.from_js(wx.to_js(good))
        edit(data)
        return wx.data_problems(data, keys)

    def number(data):
        i = next(i for i, line in enumerate(data["pool"]) if re.search(r"[1-9]\.\d\d GB", line))
        data["pool"][i] = re.sub(r"[1-9](?=\.\d\d GB)", lambda m: str(int(m.group()) % 9 + 1), data["pool"][i], 1)

    def path(data):
        i = next(i for i, line in enumerate(data["pool"]) if re.search(r'<path d="M \d', line))
        data["pool"][i] = re.sub(r'(<path d="M )(\d)', lambda m: m.group(1) + str((int(m.group(2)) + 1) % 10),
                                 data["pool"][i], 1)

    def greyed(data):
        for entry in data["settings"].values():
            entry[1] = [] if entry[1] else [0]

    for edit, what in ((number, "stdout"), (path, "svg"), (greyed, "greyed out")):
        problems = changed(edit)
        assert problems and what in problems[0], (what, problems)


def test_a_chapter_page_wraps_its_explorer_for_the_live_view():
    import nbformat

    nb = nbformat.read(ROOT / "courses" / "en" / "notebooks" / "01_memory.ipynb", as_version=4)
    page = website.monolingual(nb, "en", "notebooks/01_memory", {"notebooks/01_memory"},
                               live=frozenset({"memory", "precision.fp8"}))
    wrapped = [o["data"]["text/html"] for c in page.cells if c.cell_type == "code" for o in c.outputs
               if "data-distlearn-explorer" in "".join(o.get("data", {}).get("text/html", ""))]
    assert [re.search(r'data-distlearn-explorer="([\w.]+)"', h).group(1) for h in wrapped] == ["memory", "precision.fp8"]
    assert all("distlearn-explorer-static" in h for h in wrapped)   # the static picture stays, for no JavaScript
    assert website.explorer_in_cell("from distlearn.precision import explorer_blocks\nexplorer_blocks.explorer()") \
        == "precision.blocks"
    assert website.explorer_in_cell("from distlearn.memory import explorer as m\nm.compute()") is None


# ---------------------------------------------------------------- controls that move together (issue 39 leftovers)
def _key(data: dict, **values) -> str:
    """The setting key of ``values`` (the others at their defaults)."""
    return ".".join(str(c["values"].index(values[c["name"]]) if c["name"] in values else c["default"])
                    for c in data["controls"])


def test_web_data_carries_the_model_links_and_the_step_limits():
    """Choosing Mixtral on the web sets E = 8, k = 2 and an EP degree that divides 8, as in the notebook; the Step
    slider of chapter 02 ends at the operation's last step, and a step past it comes back to it."""
    from distlearn.collectives import explorer as coll

    exp = wx.explorer_data("experts", "en", only=set())
    mixtral = next(c for c in exp["controls"] if c["name"] == "model")["values"].index("mixtral-8x7b")
    start = [c["default"] for c in exp["controls"]]
    moved = wx.setting_values(exp, ".".join(map(str, wx.move(exp, start, 0, mixtral))))
    assert (moved["num_experts"], moved["k"], moved["ep"]) == (8, 2, 8), moved
    assert wx.setting_values(exp, ".".join(map(str, wx.move(exp, start, 1, 0))))["k"] == 8   # E alone: no link

    empty = wx.explorer_data("collectives", "en", only=set())
    col = wx.explorer_data("collectives", "en", only={_key(empty, **v) for v in (
        {"world_size": 8, "step": 14}, {"world_size": 8, "step": 7, "operation": "broadcast"},
        {"world_size": 8, "operation": "broadcast"}, {"world_size": 8, "step": 14, "operation": "broadcast"})})
    assert wx.data_problems(col, list(col["settings"])) == []
    at14 = [int(x) for x in _key(col, world_size=8, step=14).split(".")]
    after = wx.setting_values(col, ".".join(map(str, wx.move(col, at14, 0, 0))))       # → broadcast
    assert (after["operation"], after["step"]) == ("broadcast", coll.num_steps("broadcast", 8)) == ("broadcast", 7)
    labels = next(c for c in col["controls"] if c["name"] == "operation")["labels"]
    assert "all-reduce" in labels and not any("_" in x for x in labels), labels


def test_a_wrong_link_or_limit_is_caught(monkeypatch):
    """A data file whose link or slider end differs from Python's is reported; a link to a value the web control
    does not offer is refused when the grid is made."""
    col = wx.explorer_data("collectives", "en", only={"0.1.0.0"})
    assert wx.data_problems(col, ["0.1.0.0"]) == []
    col["settings"]["0.1.0.0"][2][0][1] += 1
    assert any("slider ends" in p for p in wx.data_problems(col, ["0.1.0.0"]))
    exp = wx.explorer_data("experts", "en", only=set())
    exp["controls"][0]["links"][0] = []
    assert any("links" in p for p in wx.data_problems(exp, []))
    monkeypatch.setattr(wx, "WEB_OPTIONS", {**wx.WEB_OPTIONS, "experts": {**wx.WEB_OPTIONS["experts"],
                                                                           "num_experts": [256]}})
    with pytest.raises(ValueError, match="sets num_experts=8"):
        wx.web_grid("experts", wx.module_of("experts").controls())


JS_STATE = """(host) => Array.from(host.querySelectorAll('.distlearn-live-row')).map(r => {
  const i = r.querySelector('input, select');
  return [r.dataset.control, i.type === 'checkbox' ? (i.checked ? 1 : 0) : +i.value, i.type === 'range' ? +i.max : -1];
})"""


def write_page(path: Path, datas: list[dict], lang: str = "en") -> None:
    """A bare page at ``path`` with the site's explorer script and the explorers of ``datas`` (web data), each
    inline: the script's behaviour without building the site."""
    script = (ROOT / "website" / "_static" / "distlearn-explorer.js").read_text(encoding="utf-8")
    path.write_text(f"<!doctype html><html lang='{lang}'><head><meta charset='utf-8'></head><body>"
                    + "".join(f'<div data-distlearn-explorer="{d["name"]}" data-lang="{lang}"></div>' for d in datas)
                    + "".join(f"<script>{wx.to_js(d)}</script>" for d in datas) + f"<script>{script}</script>"
                    + "</body></html>", encoding="utf-8")


@pytest.mark.slow
def test_page_script_applies_links_and_limits_as_python_does(tmp_path):
    """The site's own script in headless Chromium, on a page with two explorers' data (a few settings): choosing
    Mixtral moves the E, k and ep controls to the setting :func:`move` gives, and the Step slider's end follows
    the operation (a step past it is brought back, as shown)."""
    if bh.find_chromium() is None:
        pytest.skip("needs Chromium")
    from playwright.sync_api import sync_playwright

    exp = wx.explorer_data("experts", "en", only=set())
    start = [c["default"] for c in exp["controls"]]
    mixtral = exp["controls"][0]["values"].index("mixtral-8x7b")
    want = wx.move(exp, start, 0, mixtral)
    exp = wx.explorer_data("experts", "en", only={".".join(map(str, start)), ".".join(map(str, want))})
    empty = wx.explorer_data("collectives", "en", only=set())
    keys = {_key(empty, world_size=8, step=s, operation=op) for s in (0, 7, 14) for op in ("broadcast", "all_reduce")}
    keys |= {_key(empty, world_size=4, step=s) for s in range(7)}
    col = wx.explorer_data("collectives", "en", only=keys)
    write_page(tmp_path / "page.html", [exp, col])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=bh.find_chromium(), args=bh.CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((tmp_path / "page.html").as_uri(), wait_until="load")
            page.wait_for_function("document.querySelectorAll('.distlearn-live-ready').length === 2", timeout=30000)
            ex, co = '[data-distlearn-explorer="experts"]', '[data-distlearn-explorer="collectives"]'
            res = _move(page, ex, exp["controls"][0], mixtral)
            assert [int(x) for x in res["key"].split(".")] == want and res["parts"], res["key"]
            shown = {n: v for n, v, _ in page.evaluate(JS_STATE, page.query_selector(ex))}
            assert [shown[c["name"]] for c in exp["controls"] if c["kind"] != "checkbox"] == want
            state = {n: (v, hi) for n, v, hi in page.evaluate(JS_STATE, page.query_selector(co))}
            assert state["step"] == (0, 6)                                   # all-reduce on 4 ranks: 6 steps
            ctl = {c["name"]: c for c in col["controls"]}
            _move(page, co, ctl["world_size"], ctl["world_size"]["values"].index(8))
            _move(page, co, ctl["step"], 14)
            res = _move(page, co, ctl["operation"], ctl["operation"]["values"].index("broadcast"))
            assert wx.setting_values(col, res["key"])["step"] == 7, res["key"]
            state = {n: (v, hi) for n, v, hi in page.evaluate(JS_STATE, page.query_selector(co))}
            assert state["step"] == (7, 7) and not errors, (state, errors)
            with wx.language("en"):
                python = wx.render_setting(wx.module_of("collectives"), wx.setting_values(col, res["key"]))
            assert normalised(res["parts"]) == normalised(python_view(python))   # broadcast's step 7 of 7, shown

            res = _move(page, co, ctl["operation"], ctl["operation"]["values"].index("all_reduce"))
            state = {n: (v, hi) for n, v, hi in page.evaluate(JS_STATE, page.query_selector(co))}
            assert state["step"] == (7, 14) and wx.setting_values(col, res["key"])["step"] == 7
        finally:
            browser.close()


# ---------------------------------------------------------------- the built site in headless Chromium (extended)
OUT = ROOT / "build" / "site-explorers-test"

JS_CONTROLS = """(host) => Array.from(host.querySelectorAll('.distlearn-live-row')).map(r => {
  const i = r.querySelector('input, select');
  return {name: r.dataset.control, tag: i.tagName.toLowerCase(), type: i.type || '', disabled: i.disabled,
          n: i.tagName === 'SELECT' ? i.options.length : (i.type === 'range' ? (+i.max + 1) : 2)};
})"""

# Move control ``name`` of explorer host ``sel`` to option ``k``; return the time from the event to the updated,
# laid-out output (ms), and what it shows: each part's text, or each SVG's drawing primitives.
JS_MOVE = """([sel, name, k]) => {
  const host = document.querySelector(sel);
  const input = host.querySelector(`.distlearn-live-row[data-control="${name}"] input, ` +
                                   `.distlearn-live-row[data-control="${name}"] select`);
  const t0 = performance.now();
  if (input.type === 'checkbox') { if (input.checked !== (k === 1)) input.click(); }
  else { input.value = String(k); input.dispatchEvent(new Event(input.tagName === 'SELECT' ? 'change' : 'input')); }
  void host.querySelector('.distlearn-live-output').getBoundingClientRect().height;  // layout done
  const ms = performance.now() - t0;
  const parts = Array.from(host.querySelector('.distlearn-live-output').children).map(e => {
    if (e.tagName === 'PRE') return ['text', e.textContent];
    const svg = e.querySelector('svg');
    return ['svg', Array.from(svg.querySelectorAll('path, use, text, rect, circle, line, polyline, polygon, image'))
      .map(n => [n.tagName, n.getAttribute('d') || '', n.getAttribute('xlink:href') || n.getAttribute('href') || '',
                 n.getAttribute('x') || '', n.getAttribute('y') || '', n.getAttribute('transform') || '',
                 n.getAttribute('style') || ''])];
  });
  const off = Array.from(host.querySelectorAll('.distlearn-live-row'))
    .filter(r => r.querySelector('input, select').disabled && !r.classList.contains('distlearn-live-fixed'))
    .map(r => r.dataset.control).sort();
  return {ms, key: host.dataset.setting, parts, off};
}"""

SVG_TAGS = ("path", "use", "text", "rect", "circle", "line", "polyline", "polygon", "image")


def svg_primitives(svg: str) -> list:
    """The drawing elements of an SVG as the browser's JS_MOVE lists them."""
    xlink = "{http://www.w3.org/1999/xlink}href"
    out = []
    for e in ET.fromstring(svg).iter():
        tag = e.tag.split("}")[-1]
        if tag in SVG_TAGS:
            out.append([tag, e.get("d", ""), e.get(xlink, e.get("href", "")), e.get("x", ""), e.get("y", ""),
                        e.get("transform", ""), e.get("style", "")])
    return out


def python_view(shown: wx.Shown) -> list:
    return [["svg", svg_primitives(t)] if k == "svg" else ["text", t] for k, t in shown.parts]


def normalised(view: list) -> list:
    """A view with the whitespace inside SVG attribute values made single spaces (an XML parser turns a path's
    line breaks into spaces, the HTML parser keeps them)."""
    return [[k, [[" ".join(a.split()) for a in e] for e in v]] if k == "svg" else [k, v] for k, v in view]


def _chapters() -> list[str] | None:
    """The chapters to build: every one, or those named in ``DISTLEARN_SITE_CHAPTERS`` (space-separated stems,
    to look at one chapter while working on it)."""
    import os

    return os.environ.get("DISTLEARN_SITE_CHAPTERS", "").split() or None


def chapters_with_explorers() -> list[str]:
    """The chapter notebooks (stems, of :func:`_chapters`) with a cell that shows an explorer."""
    import nbformat

    out = []
    for p in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if _chapters() and p.stem not in _chapters():
            continue
        cells = nbformat.read(p, as_version=4).cells
        if any(c.cell_type == "code" and website.explorer_in_cell(c.source) for c in cells):
            out.append(p.stem)
    return out


def _move(page, sel: str, control: dict, k: int) -> dict:
    """Move ``control`` of the explorer at ``sel`` to its option ``k``; JS_MOVE's answer."""
    target = int(control["values"][k] is True) if control["kind"] == "checkbox" else k
    return page.evaluate(JS_MOVE, [sel, control["name"], target])


def _go_to(page, sel: str, data: dict, target: list[int]) -> None:
    """Move the explorer's controls, as a reader would, to the option indices ``target``: one control that is not
    greyed out at a time (the one that enables another first)."""
    for _ in range(3 * len(target)):
        key = page.evaluate("(s) => document.querySelector(s).dataset.setting", sel)
        current = [int(x) for x in key.split(".")]
        if current == target:
            return
        off = set(data["settings"][key][1])
        movable = [i for i, c in enumerate(data["controls"]) if current[i] != target[i] and i not in off]
        if not movable:
            return
        _move(page, sel, data["controls"][movable[0]], target[movable[0]])


def sweep(page, sel: str, data: dict, module, rel: str, timings: list) -> list[str]:
    """Move every control of the explorer at ``sel`` through every value it offers, the others at their defaults
    (a control greyed out there: at the nearest setting where it applies), and compare what the page shows each
    time with Python's ``render(compute(**values))`` and ``active``; append each move's redraw time to
    ``timings``. Returns the problems."""
    problems = []
    name = data["name"]
    defaults = [c["default"] for c in data["controls"]]
    default_key = ".".join(map(str, defaults))
    for i, c in enumerate(data["controls"]):
        row_disabled = page.evaluate(JS_CONTROLS, page.query_selector(sel))[i]["disabled"]
        if len(c["values"]) < 2:  # shown fixed, disabled
            if not row_disabled:
                problems.append(f"{rel} {name}.{c['name']}: one value offered, but the control moves")
            continue
        base = list(defaults)
        if i in data["settings"][default_key][1]:  # greyed out at the defaults
            live = [[int(x) for x in k.split(".")] for k, v in data["settings"].items() if i not in v[1]]
            base = min(live, key=lambda idx: sum(a != b for a, b in zip(idx, defaults)))
        _go_to(page, sel, data, base)
        base = [int(x) for x in page.evaluate("(s) => document.querySelector(s).dataset.setting", sel).split(".")]
        # a limited slider offers its options up to its setting's end only (chapter 02's step)
        entry = data["settings"][".".join(map(str, base))]
        high = dict(map(tuple, entry[2] if len(entry) > 2 else [])).get(i, len(c["values"]) - 1)
        if page.evaluate(JS_CONTROLS, page.query_selector(sel))[i]["n"] != high + 1:
            problems.append(f"{rel} {name}.{c['name']}: the slider offers options past its end {high}")
        for k in list(range(high + 1)) + [base[i]]:
            res = _move(page, sel, c, k)
            index = wx.move(data, base, i, k)   # links of the new value and slider ends, as the page applies them
            key = ".".join(map(str, index))
            timings.append(res["ms"])
            if res["key"] != key:
                problems.append(f"{rel} {name}.{c['name']}={c['values'][k]}: shows setting {res['key']}, not {key}")
                continue
            base = index                        # (a link may have moved other controls: the next move starts here)
            values = wx.setting_values(data, key)
            shown = wx.render_setting(module, values)
            if normalised(res["parts"]) != normalised(python_view(shown)):
                problems.append(f"{rel} {name} {values}: shown output is not Python's")
            movable = [n for n in shown.inactive if len(next(x for x in data["controls"] if x["name"] == n)["values"]) > 1]
            if res["off"] != movable:
                problems.append(f"{rel} {name} {values}: greyed out {res['off']} != {movable}")
        _go_to(page, sel, data, defaults)
    return problems


@pytest.fixture(scope="module")
def live_site():
    if importlib.util.find_spec("sphinx") is None or bh.find_chromium() is None:
        pytest.skip("needs Sphinx and Chromium (see tests/test_website.py)")
    res = website.build(OUT, chapters=_chapters(), solutions=False, jobs=1, log=print)
    assert not any(res.warnings.values()), res.warnings
    return res


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.timeout(3600)  # the module's site build renders every explorer setting: ~20-30 min on 2 cores, once
def test_every_control_of_every_live_explorer_in_chromium(live_site):
    from playwright.sync_api import sync_playwright

    problems, timings, weights, requests = [], [], {}, []
    with website.serve(live_site.out) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=bh.find_chromium(),
                                     args=[a for a in bh.CHROMIUM_FLAGS if a != "--headless"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
        for lang in ("en", "zh"):
            with wx.language(lang):
                for html_file in sorted((live_site.out / lang / "notebooks").glob("*.html")):
                    rel = html_file.relative_to(live_site.out).as_posix()
                    hosts = re.findall(r'data-distlearn-explorer="([\w.]+)"', html_file.read_text(encoding="utf-8"))
                    if not hosts:
                        continue
                    requests.clear()
                    page.goto(f"{base}/{rel}", wait_until="load")
                    page.wait_for_function(f"document.querySelectorAll('.distlearn-live-ready').length === {len(hosts)}",
                                           timeout=30000)
                    weight = sum((live_site.out / lang / "_static" / "explorers" / f"{n}.js").stat().st_size
                                 for n in set(hosts))
                    weight += sum((live_site.out / lang / "_static" / f).stat().st_size
                                  for f in ("distlearn-explorer.js", "distlearn-explorer.css"))
                    weights[rel] = weight
                    for name in hosts:
                        sel = f'[data-distlearn-explorer="{name}"]'
                        module = wx.module_of(name)
                        data = wx.from_js((live_site.out / lang / "_static" / "explorers" / f"{name}.js")
                                          .read_text(encoding="utf-8"))
                        ctl = page.evaluate(JS_CONTROLS, page.query_selector(sel))
                        assert [c["name"] for c in ctl] == [c["name"] for c in data["controls"]]
                        problems += sweep(page, sel, data, module, rel, timings)
                    outside = [u for u in requests if not u.startswith(base) and not u.startswith("data:")]
                    problems += [f"{rel}: external request {u}" for u in outside]
        # Without JavaScript the static picture shows, as before.
        still = browser.new_context(java_script_enabled=False).new_page()
        for rel in list(weights)[:1] + [w for w in weights if w.startswith("zh/")][:1]:
            still.goto(f"{base}/{rel}", wait_until="load")
            if not still.evaluate("() => { const s = document.querySelector('[data-distlearn-explorer] "
                                  ".distlearn-explorer-static'); return !!s && s.offsetHeight > 0 && "
                                  "!document.querySelector('.distlearn-live'); }"):
                problems.append(f"{rel}: no static picture without JavaScript")
        browser.close()
    timings.sort()
    p95 = timings[int(0.95 * (len(timings) - 1))]
    print(f"\n{len(timings)} moves: redraw median {statistics.median(timings):.1f} ms, p95 {p95:.1f} ms, "
          f"max {timings[-1]:.1f} ms; added page weight per chapter: max {max(weights.values()) / 1e6:.2f} MB "
          f"({max(weights, key=weights.get)})")
    print(json.dumps({k: round(v / 1e3) for k, v in sorted(weights.items())}))
    assert problems == []
    assert sorted(weights) == sorted(f"{lang}/notebooks/{stem}.html" for lang in ("en", "zh")
                                     for stem in chapters_with_explorers())
    assert p95 < MAX_REDRAW_MS, timings[-20:]
    assert max(weights.values()) < MAX_CHAPTER_BYTES, weights


@pytest.mark.extended
@pytest.mark.slow
@pytest.mark.timeout(3600)  # the module's site build renders every explorer setting: ~20-30 min on 2 cores, once
def test_built_site_loads_nothing_from_outside(live_site):
    for p in live_site.out.rglob("*"):
        if p.suffix in (".html", ".js", ".css", ".svg"):
            refs = external_references(p.read_text(encoding="utf-8", errors="replace"))
            assert refs == [], (p, refs[:3])

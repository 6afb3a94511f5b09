"""Live explorers on the course website: each explorer's own Python, run at site-build time over the settings its
web controls offer, written as data that ``website/_static/distlearn-explorer.js`` reads (issue 39).

Why this design. The notebooks' explorers are numpy + matplotlib; running them in the browser (Pyodide,
JupyterLite) needs wasm wheels from a CDN at run time, and the site must work offline. Porting 18 explorers'
formulas and figures to JavaScript would be a second implementation to keep equal to the first. So the site shows
what Python showed: for every setting the web controls offer, :func:`render_setting` calls the explorer's
``render(compute(**values))`` in the page's language exactly as the notebook does (through
:func:`distlearn.core.explorer.capture`) and keeps the printed text as it is and every figure as matplotlib's own
SVG (``svg.fonttype = "path"``: the glyphs are paths, so the picture does not depend on the reader's fonts, Chinese
included). Nothing is recomputed in the browser: moving a control looks the setting up.

Which settings. An explorer's whole grid is the product of its controls' options (a float slider's every step):
from 72 settings (chapter 08's FP8 explorer) to 7.7 × 10⁹ (chapter 03). A control keeps all its options while the
product stays small; otherwise :data:`WEB_OPTIONS` names the values its web control offers (the notebook's default
always among them), and the web control offers exactly those, so every setting offered on the web is exact. The
limit is page weight (< 1.5 MB added per chapter) and build time, see :data:`MAX_SETTINGS` and
:data:`MAX_RENDERS`. Settings whose ``compute`` results are equal (a greyed-out control) are drawn once.

Size. Figures of neighbouring settings share most of their SVG (axes, ticks, legend, glyph definitions), so each
explorer's data is one pool of distinct SVG / text lines plus, per setting, the list of its line numbers; the JSON is
gzipped and base64-encoded into a ``.js`` file (a ``<script>`` loads over ``file://`` too, where a ``fetch`` would
be refused) that the page decompresses with the browser's ``DecompressionStream``. Without JavaScript (or without
``DecompressionStream``) the page keeps the stored static picture.

Controls that move together (:mod:`distlearn.core.explorer`'s module doc): an explorer's ``LINKS`` table (choosing a
model sets its number of experts) goes into the data as, per offered value of the linking control, the option indices
each linked control may keep (the first is taken otherwise); its ``limits`` (the last step of the chosen collective)
as, per setting, the index of each limited slider's last offered value. The page applies both exactly as the
notebook does (:func:`move` is the same rule in Python, for tests); every value a link or a limit can reach must be
offered on the web (:func:`web_grid`, :func:`explorer_data` check it).

Files: ``<site>/<lang>/_static/explorers/<name>.js`` for each explorer ``name`` of
:func:`distlearn.core.explorer.explorer_modules`; results are cached under ``build/web-explorers-cache/`` keyed on
the source of ``distlearn/``, matplotlib's and numpy's versions, the spec and the language, so a rebuild with unchanged
code renders nothing.

Measured (2026-12-04, headless Chromium, all 18 explorers in both languages, 858 control moves): redraw from the
input event to the laid-out output 7.8 ms median, 17.3 ms p95, 28.9 ms at most; data added per chapter 12 kB
(chapter 03) to 1.40 MB (chapter 05 in Chinese, 324 pipeline schedules). A first build runs 5,309 settings per
language (3,446 distinct outputs): about 30 min on a busy 2-core machine.

Command line (:func:`authoring.website.build` calls :func:`write_data` after Sphinx)::

    python -m authoring.web_explorers [--names memory precision] [--lang en zh] [--out build/site]
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import gzip
import hashlib
import importlib
import io
import itertools
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from authoring import paths

ROOT = paths.ROOT
CACHE = ROOT / "build" / "web-explorers-cache"
STATIC = "_static/explorers"
MAX_SETTINGS = 1000     # settings per explorer (a settings table of ~20 bytes each)
MAX_RENDERS = 400       # distinct compute() results per explorer: ~0.2 s of matplotlib each, ~0.5 kB of data
FORMAT = 3              # the data layout and SVG processing: raise it when they change (cache key)

# The values each web control offers, where an explorer's whole grid is too large (see the module doc). A control
# not named keeps every option of its notebook control; the notebook default must be among the values given.
WEB_OPTIONS: dict[str, dict[str, list]] = {
    "activation_memory": {"model": ["llama2-7b", "llama3-70b"], "seq_len": [4096, 16384], "micro_batch_size": [1, 4],
                          "tp": [1, 8], "attention": ["default", "materialised"], "dp": [8], "zero_stage": [3],
                          "offload": ["none"], "gpu_gb": [24, 80]},
    "collectives": {"world_size": [4, 8], "message_mb": [64, 1024]},
    "context_parallel": {"model": ["llama3-8b", "llama3-70b"], "seq_len": [32768, 131072, 1048576], "cp": [1, 8, 32],
                         "tp": [1], "gpu": ["h100-80gb"]},
    "data_parallel": {"world_size": [1, 2, 3, 4, 8], "batch_size": [10, 64, 100], "params_b": [7.0, 70.0],
                      "bandwidth_gbs": [25.0, 100.0]},
    "deepspeed_fsdp": {"model": ["gpt2-xl", "llama2-7b", "llama2-70b"], "gpus_per_node": [4, 8],
                       "num_nodes": [1, 4, 16]},
    "experts": {"num_experts": [8, 256], "k": [1, 2, 8], "capacity_factor": [1.0, 1.25, 0.0], "ep": [1, 8, 64],
                "skew": [0.0, 0.25, 1.0], "dp": [2048]},
    "fault_tolerance": {"num_gpus": [1024, 16384, 131072], "checkpoint_s": [10.0, 60.0, 300.0],
                        "restart_min": [2.0, 10.0], "interval_min": [10.0, 30.0, 120.0]},
    "memory": {"model": ["custom", "llama3-8b", "llama3-70b"], "custom_billions": [7, 70], "precision": ["fp32", "mixed"],
               "optimizer": ["adam"], "dp": [1, 8, 64], "gpu": ["A100 80GB"]},
    "nd_parallel": {"model": ["toy-nd", "llama3-8b"], "tp": [1, 2], "cp": [1, 2], "pp": [1, 2], "dp": [1, 2],
                    "rank": [0, 1, 3, 7], "num_microbatches": [2]},
    "overlap_prefetch": {"ratio": [0.3, 0.6, 1.5], "depth": [0, 1, 2, 4], "units": [2, 6, 16]},
    "pipeline_parallel": {"num_stages": [2, 4, 8], "num_microbatches": [4, 8, 16], "num_chunks": [1, 2],
                          "bwd_ratio": [2.0], "p2p_time": [0.0, 0.1], "wgrad_share": [0.5]},
    "planning": {"model": ["llama3-8b", "llama3-70b", "deepseek-v3"], "gpu": ["h100-80gb", "b200"],
                 "num_gpus": [8, 16, 256], "seq_len": [4096], "global_batch": [256], "precision": ["mixed", "te-fp8"],
                 "cp": [1, 2], "ep": [1, 8], "rank": [1, 2]},
    "post_training": {"params_billion": [7, 70], "gpus": [16, 64], "pool_share": [0.5, 0.75, 0.9],
                      "gen_share": [0.5, 0.8], "network_gbs": [12.5, 50], "gen_efficiency": [0.5, 1.0],
                      "staleness": [0, 1, 2]},
    "precision.fp8": {"dp": [1, 8, 64, 512]},
    "tensor_parallel": {"tp": [1, 2, 4, 8], "hidden_size": [4096, 8192], "seq_len": [2048, 8192],
                        "micro_batch_size": [1, 4]},
    "zero_fsdp": {"model": ["llama2-7b", "llama2-70b"], "dp": [8, 64], "blocks_per_unit": [1],
                  "prefetch": [0, 1, 2], "num_microbatches": [1, 4]},
}


# ---------------------------------------------------------------- the grid
def control_options(control) -> list:
    """Every value a notebook control can send: a check box False/True, an integer slider each step, a float slider
    each step (rounded to 10 decimals, as ipywidgets shows them), a drop-down's or selection slider's options."""
    import ipywidgets as W

    if isinstance(control, W.Checkbox):
        return [False, True]
    if isinstance(control, W.IntSlider):
        return list(range(control.min, control.max + 1, control.step))
    if isinstance(control, W.FloatSlider):
        n = round((control.max - control.min) / control.step)
        return [round(control.min + i * control.step, 10) for i in range(n + 1)]
    if hasattr(control, "options"):
        return list(dict.fromkeys(o[1] if isinstance(o, tuple) else o for o in control.options))
    return [control.value]


def option_labels(control, values: list) -> list[str]:
    """What the web control shows for each of ``values``, in the current language: a drop-down's option label, a
    slider's value as the notebook slider prints it."""
    import ipywidgets as W

    from distlearn.core import explorer as base

    if isinstance(control, W.Checkbox):
        return ["" for _ in values]
    if hasattr(control, "_distlearn_options") or isinstance(control, (W.Dropdown, W.SelectionSlider)):
        raw = getattr(control, "_distlearn_options", None) or list(control.options)
        names = {}
        for o in raw:
            if isinstance(o, tuple):
                names.setdefault(o[1], base.render_label(o[0]))
            else:
                names.setdefault(o, str(o))
        return [names[v] for v in values]
    if isinstance(control, W.FloatSlider):
        digits = max(0, -int(f"{control.step:e}".split("e")[1]))
        return [f"{v:.{digits}f}" for v in values]
    return [str(v) for v in values]


def kind_of(control) -> str:
    """``"checkbox"``, ``"select"`` (a drop-down) or ``"slider"`` (any slider: the web slider moves over the offered
    values in order)."""
    import ipywidgets as W

    if isinstance(control, W.Checkbox):
        return "checkbox"
    if isinstance(control, W.Dropdown):
        return "select"
    return "slider"


def web_grid(name: str, controls: dict) -> dict[str, list]:
    """The values each web control of explorer ``name`` offers: :data:`WEB_OPTIONS` where given, else every
    option. Raises ValueError if a given value is not one the notebook control offers, if the default is missing,
    or if the grid has more than :data:`MAX_SETTINGS` settings."""
    spec = WEB_OPTIONS.get(name, {})
    unknown = set(spec) - set(controls)
    if unknown:
        raise ValueError(f"WEB_OPTIONS[{name!r}] names no control {sorted(unknown)} (controls: {list(controls)})")
    grid = {}
    for cname, control in controls.items():
        full = control_options(control)
        values = list(spec.get(cname, full))
        bad = [v for v in values if v not in full]
        if bad:
            raise ValueError(f"{name}.{cname}: {bad} are not options of the notebook control ({full})")
        if control.value not in values:
            raise ValueError(f"{name}.{cname}: the notebook default {control.value!r} must be offered ({values})")
        grid[cname] = [v for v in full if v in values]  # in the control's order
    web_links(name, controls, grid)  # (raises if a link reaches a value not offered)
    size = 1
    for v in grid.values():
        size *= len(v)
    if size > MAX_SETTINGS:
        raise ValueError(f"{name}: {size} settings > {MAX_SETTINGS}; name fewer values in WEB_OPTIONS[{name!r}] "
                         f"({ {k: len(v) for k, v in grid.items()} })")
    return grid


def links_of(module) -> dict:
    """The explorer's ``LINKS`` table (``{}`` without one)."""
    return getattr(module, "LINKS", None) or {}


def web_links(name: str, controls: dict, grid: dict[str, list], links: dict | None = None) -> dict[str, list]:
    """Explorer ``name``'s ``LINKS`` (or ``links``) in web form: for each linking control, per offered value (in
    order), the list of ``[j, [k, ...]]``: linked control number ``j`` (in control order) keeps its option index
    if it is one of the ``k``, else takes the first. Raises ValueError if the table names no control, or if what a
    link sets (a plain value, or a tuple's first) is not offered on the web."""
    if links is None:
        links = links_of(module_of(name))
    names = list(controls)
    out = {}
    for cname, table in links.items():
        unknown = ({cname} | {o for rule in table.values() for o in rule}) - set(controls)
        if unknown:
            raise ValueError(f"{name}.LINKS names no control {sorted(unknown)} (controls: {names})")
        rules = []
        for value in grid[cname]:
            rule = []
            for other, want in table.get(value, {}).items():
                allowed = want if isinstance(want, tuple) else (want,)
                if allowed[0] not in grid[other]:
                    raise ValueError(f"{name}.LINKS: {cname}={value!r} sets {other}={allowed[0]!r}, which the web "
                                     f"control does not offer ({grid[other]}); add it to WEB_OPTIONS[{name!r}]")
                rule.append([names.index(other), [grid[other].index(v) for v in allowed if v in grid[other]]])
            rules.append(rule)
        out[cname] = rules
    return out


def limits_of(module, values: dict) -> tuple:
    """The explorer's ``limits(values)`` as sorted ``(name, largest value)`` pairs (none without ``limits``)."""
    if not hasattr(module, "limits"):
        return ()
    return tuple(sorted(module.limits(dict(values)).items()))


def move(data: dict, index: list[int], i: int, k: int) -> list[int]:
    """The option indices the page shows after the reader moves control ``i`` to option ``k`` from ``index``: what
    ``distlearn-explorer.js`` does, in Python (for tests). The links of control ``i``'s new value first (a linked
    control keeps its index if allowed, else takes the first allowed), then each limited slider brought down to the
    last option its setting offers."""
    index = list(index)
    index[i] = k
    rules = data["controls"][i].get("links")
    for j, allowed in (rules[k] if rules else []):
        if index[j] not in allowed:
            index[j] = allowed[0]
    entry = data["settings"].get(".".join(map(str, index)))
    for j, high in (entry[2] if entry and len(entry) > 2 else []):
        index[j] = min(index[j], high)
    return index


def settings(grid: dict[str, list]):
    """Every setting of ``grid`` with its key: ``("0.2.1", {name: value, ...})``, the key being each control's
    option index, in control order."""
    names = list(grid)
    for idx in itertools.product(*(range(len(grid[n])) for n in names)):
        yield ".".join(map(str, idx)), {n: grid[n][i] for n, i in zip(names, idx)}


# ---------------------------------------------------------------- one setting, as Python shows it
@dataclass(frozen=True)
class Shown:
    """What an explorer shows for one setting: ``parts``, in order, each ``("stdout" | "stderr", text)`` or
    ``("svg", svg_text)``; ``inactive``: the controls greyed out (its ``active``); ``limits``: each limited slider's
    last value (its ``limits``, :func:`limits_of`)."""

    parts: tuple
    inactive: tuple
    limits: tuple = ()


_SVG_HEAD = re.compile(r"\A.*?(?=<svg\b)", re.S)
_SVG_META = re.compile(r"\s*<metadata>.*?</metadata>", re.S)


# matplotlib's SVG carries this style sheet. Inside an HTML page it would apply to the whole page, and inserting a
# <style> element makes the browser restyle the whole page (50-90 ms on a chapter page, measured), so it is left
# out and website/_static/distlearn-explorer.css applies the same rule to the figure's elements only.
SVG_STYLE = '<style type="text/css">*{stroke-linejoin: round; stroke-linecap: butt}</style>'


def figure_svg(fig) -> str:
    """matplotlib's SVG of ``fig``, without the XML declaration, doctype, metadata (a date) and its one style sheet
    (:data:`SVG_STYLE`), glyphs as paths; deterministic (``svg.hashsalt``). Raises ValueError if matplotlib wrote
    another style sheet (the page's CSS would not match it)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "distlearn"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    svg = _SVG_META.sub("", _SVG_HEAD.sub("", buf.getvalue()), count=1).replace(SVG_STYLE, "", 1)
    if "<style" in svg:
        raise ValueError("matplotlib's SVG has a style sheet that distlearn-explorer.css does not apply")
    return svg


def render_setting(module, values: dict, result=None) -> Shown:
    """``module.render(module.compute(**values))`` captured in the current language: its printed text and each
    figure it drew, as :class:`Shown`. ``result``: ``compute``'s result for ``values`` if already computed."""
    from distlearn.core import explorer as base

    if result is None:
        result = module.compute(**values)
    svgs: list[str] = []
    outputs = base.capture(lambda: module.render(result), on_figure=lambda f: svgs.append(figure_svg(f)))
    parts = [(o["name"], o["text"]) for o in outputs if o["output_type"] == "stream"]
    parts += [("svg", s) for s in svgs]
    return Shown(tuple(parts), inactive_controls(module, values), limits_of(module, values))


def inactive_controls(module, values: dict) -> tuple:
    """The controls that ``module.active`` greys out for ``values`` (sorted names; none without ``active``)."""
    if not hasattr(module, "active"):
        return ()
    return tuple(sorted(k for k, on in module.active(dict(values)).items() if not on))


def _result_key(result) -> bytes | None:
    """``compute``'s result as bytes (pickle: a numpy array with its every element), so that two settings with
    the same result are drawn once (``render`` is a function of the result alone); None if it cannot be pickled."""
    import pickle

    try:
        return pickle.dumps(result, protocol=4)
    except Exception:  # noqa: BLE001 - an unpicklable result is simply drawn again
        return None


# ---------------------------------------------------------------- one explorer's data
@contextlib.contextmanager
def language(lang: str):
    """Run the block with the course in ``lang`` (``distlearn.set_language``), then put back the language it had."""
    import distlearn
    from distlearn.core.current_language import get_language

    before = get_language()
    distlearn.set_language(lang)
    try:
        yield
    finally:
        distlearn.set_language(before)



def module_of(name: str):
    from distlearn.core.explorer import explorer_modules

    return importlib.import_module(explorer_modules()[name])


def title_of(module) -> str:
    """The explorer's title in the current language (from a built explorer's header; "" without one)."""
    ex = module.explorer()
    try:
        return ex.title
    finally:
        ex.close()


def explorer_data(name: str, lang: str, log=None, only: set | None = None) -> dict:
    """Explorer ``name``'s web data in ``lang``: its controls (label, kind, offered values and their labels, the
    default's index), a pool of distinct lines and, per setting key, what it shows as line numbers (see
    :func:`decode`). ``only``: the setting keys to include (a sample, for tests); default every one."""
    with language(lang):
        return _explorer_data(name, lang, log, only)


def _explorer_data(name: str, lang: str, log, only) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    module = module_of(name)
    controls = module.controls()
    grid = web_grid(name, controls)
    from distlearn.core import explorer as base

    ctl = []
    for cname, control in controls.items():
        values = grid[cname]
        label = base.render_label(control._distlearn_label) if hasattr(control, "_distlearn_label") else \
            control.description
        ctl.append({"name": cname, "label": label, "kind": kind_of(control), "values": values,
                    "labels": option_labels(control, values), "default": values.index(control.value)})
    for cname, rules in web_links(name, controls, grid, links_of(module)).items():
        ctl[list(controls).index(cname)]["links"] = rules
    pool: dict[str, int] = {}
    outputs: dict[str, int] = {}
    out_list, table = [], {}

    def lines(text: str) -> list[int]:
        return [pool.setdefault(line, len(pool)) for line in text.split("\n")]

    t0 = time.perf_counter()
    drawn: dict[bytes, tuple] = {}
    for n, (key, values) in enumerate(settings(grid)):
        if only is not None and key not in only:
            continue
        result = module.compute(**values)
        rkey = _result_key(result)
        if rkey is None or rkey not in drawn:
            parts = render_setting(module, values, result).parts
            if rkey is not None:
                drawn[rkey] = parts
            if len(drawn) > MAX_RENDERS:
                raise ValueError(f"{name}: more than {MAX_RENDERS} distinct results; name fewer values in "
                                 f"WEB_OPTIONS[{name!r}]")
        else:
            parts = drawn[rkey]
        enc = json.dumps([[kind, lines(text)] for kind, text in parts])
        if enc not in outputs:
            outputs[enc] = len(out_list)
            out_list.append(json.loads(enc))
        table[key] = [outputs[enc], [list(controls).index(c) for c in inactive_controls(module, values)]]
        if hasattr(module, "limits"):
            table[key].append([[list(controls).index(c), _offered_index(name, grid, c, high)]
                               for c, high in limits_of(module, values)])
        if log and n % 100 == 99:
            log(f"  {name} [{lang}]: {n + 1} settings, {len(drawn)} drawn, {time.perf_counter() - t0:.0f} s")
    reduced = any(len(grid[c]) < len(control_options(controls[c])) for c in controls)
    return {"format": FORMAT, "name": name, "lang": lang, "title": title_of(module), "controls": ctl, "reduced": reduced,
            "pool": list(pool), "outputs": out_list, "settings": table}


def _offered_index(name: str, grid: dict, control: str, value) -> int:
    """The index of ``value`` among control ``control``'s offered values. Raises ValueError if it is not offered (a
    limit the web slider could not show)."""
    if value not in grid[control]:
        raise ValueError(f"{name}.limits: {control} ends at {value!r}, which the web control does not offer "
                         f"({grid[control]}); offer it in WEB_OPTIONS[{name!r}]")
    return grid[control].index(value)


def decode(data: dict, key: str) -> Shown:
    """What setting ``key`` shows, read back from ``data`` (what the page's JavaScript does)."""
    out, inactive, *rest = data["settings"][key]
    parts = tuple((kind, "\n".join(data["pool"][i] for i in idx)) for kind, idx in data["outputs"][out])
    limits = tuple(sorted((data["controls"][j]["name"], data["controls"][j]["values"][k]) for j, k in
                          (rest[0] if rest else [])))
    return Shown(parts, tuple(sorted(data["controls"][i]["name"] for i in inactive)), limits)


def setting_values(data: dict, key: str) -> dict:
    """The control values of setting ``key`` of ``data`` (``"0.2.1"`` → ``{"model": ..., ...}``)."""
    idx = [int(i) for i in key.split(".")]
    return {c["name"]: c["values"][i] for c, i in zip(data["controls"], idx)}


def _first_difference(got: str, want: str) -> str:
    """The first line where ``got`` differs from ``want``, both shown."""
    g, w = got.split("\n"), want.split("\n")
    for i, (a, b) in enumerate(zip(g, w)):
        if a != b:
            return f"line {i + 1}: {a[:100]!r} != Python's {b[:100]!r}"
    return f"{len(g)} lines != Python's {len(w)}"


def data_problems(data: dict, keys=None) -> list[str]:
    """How ``data`` (one explorer's web data) differs from what its Python shows now: for each setting in ``keys``
    (default: every one), the text and SVG figures of ``render(compute(**values))`` and the greyed-out controls,
    run afresh in the data's language; also the controls' labels and offered values (:func:`web_grid`), and that
    the data has a setting for each key of the grid. Empty when they agree."""
    with language(data["lang"]):
        return _data_problems(data, keys)


def _data_problems(data: dict, keys) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    module = module_of(data["name"])
    controls = module.controls()
    problems = []
    grid = web_grid(data["name"], controls)
    if [c["name"] for c in data["controls"]] != list(grid):
        problems.append(f"controls {[c['name'] for c in data['controls']]} != {list(grid)}")
        return problems
    links = web_links(data["name"], controls, grid, links_of(module))
    for c in data["controls"]:
        control = controls[c["name"]]
        if c["values"] != grid[c["name"]] or c["labels"] != option_labels(control, grid[c["name"]]):
            problems.append(f"{c['name']}: offered {c['values']} {c['labels']}")
        if c.get("links") != links.get(c["name"]):
            problems.append(f"{c['name']}: links {c.get('links')} != {links.get(c['name'])}")
    for key in (data["settings"] if keys is None else keys):
        if key not in data["settings"]:
            problems.append(f"setting {key} missing")
            continue
        values = setting_values(data, key)
        want, got = render_setting(module, values), decode(data, key)
        if want != got:
            diff = next((f"part {i} ({w[0]}): {_first_difference(g[1], w[1])}" for i, (w, g) in
                         enumerate(zip(want.parts, got.parts)) if w != g), f"{len(got.parts)} parts != {len(want.parts)}")
            if want.inactive != got.inactive:
                diff = f"greyed out {got.inactive} != {want.inactive}"
            elif want.limits != got.limits:
                diff = f"slider ends {got.limits} != {want.limits}"
            problems.append(f"{data['name']} [{data['lang']}] {values}: {diff}")
    return problems


def to_js(data: dict) -> str:
    """The ``.js`` file of one explorer's data: gzipped JSON in base64, registered under its name."""
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    b64 = base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode()
    return ("(window.distlearnExplorerData = window.distlearnExplorerData || {})"
            f"[{json.dumps(data['name'])}] = \"{b64}\";\n")


def from_js(js: str) -> dict:
    """The data of a ``.js`` file written by :func:`to_js`."""
    b64 = re.search(r'= "([A-Za-z0-9+/=]+)";', js).group(1)
    return json.loads(gzip.decompress(base64.b64decode(b64)))


# ---------------------------------------------------------------- cache and files
def source_hash(name: str) -> str:
    """A hash of what explorer ``name``'s output can depend on: every ``.py`` of ``distlearn/`` (an explorer calls
    into other topics' formulas), the installed matplotlib and numpy, the spec and :data:`FORMAT` (raise it when
    :func:`render_setting` or the data layout changes)."""
    import matplotlib
    import numpy

    h = hashlib.sha256()
    for p in sorted((ROOT / "distlearn").rglob("*.py")):
        h.update(p.relative_to(ROOT).as_posix().encode() + p.read_bytes())
    h.update(f"{matplotlib.__version__} {numpy.__version__}".encode())
    h.update(json.dumps([name, WEB_OPTIONS.get(name), MAX_SETTINGS, MAX_RENDERS, FORMAT], default=str).encode())
    return h.hexdigest()[:20]


def live_names(log=print) -> list[str]:
    """The explorers shown live: every one whose web controls' grid is valid (:func:`web_grid`); one that is not
    (a control renamed since :data:`WEB_OPTIONS` was written, say) keeps its static picture, and is named."""
    from distlearn.core.explorer import explorer_modules

    names = []
    for name in explorer_modules():
        try:
            web_grid(name, module_of(name).controls())
            names.append(name)
        except ValueError as err:
            log(f"web explorers: {name} keeps its static picture / 保留静态图: {err}")
    return names


def _one(job: tuple) -> tuple[str, str, str]:
    name, lang, digest = job
    cached = CACHE / f"{name}.{lang}.{digest}.js"
    if not cached.exists():
        js = to_js(explorer_data(name, lang, log=lambda m: print(m, flush=True)))
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(".tmp")
        tmp.write_text(js, encoding="utf-8")
        tmp.replace(cached)
    return name, lang, str(cached)


def write_data(out: Path, languages=("en", "zh"), names: list[str] | None = None, jobs: int = 2,
               log=print) -> dict[tuple[str, str], Path]:
    """Write every explorer's data file into ``out/<lang>/_static/explorers/`` (rendering only what the cache lacks,
    ``jobs`` processes); returns ``{(name, lang): path}``."""
    from concurrent.futures import ProcessPoolExecutor

    from distlearn.core.explorer import explorer_modules

    names = list(names or explorer_modules())
    todo = [(n, lang, source_hash(n)) for n in names for lang in languages]
    t0 = time.perf_counter()
    if jobs > 1 and len(todo) > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_one, todo))
    else:
        done = [_one(j) for j in todo]
    written = {}
    for name, lang, cached in done:
        target = Path(out) / lang / STATIC / f"{name}.js"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(Path(cached).read_bytes())
        written[(name, lang)] = target
    log(f"web explorers: {len(names)} × {len(languages)} data files in {time.perf_counter() - t0:.0f} s / "
        f"网页探索器数据文件已写出")
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m authoring.web_explorers", description=__doc__.split("\n")[0])
    ap.add_argument("--names", nargs="*", default=None)
    ap.add_argument("--lang", nargs="*", default=["en", "zh"])
    ap.add_argument("--out", default=str(ROOT / "build" / "site"))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        write_data(Path(args.out), tuple(args.lang), args.names, args.jobs)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

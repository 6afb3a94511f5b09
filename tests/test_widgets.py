"""Every explorer: compute() never crashes at its controls' extremes; every control, moved through its range (min,
middle, max), changes what the explorer shows and never errors; controls are labelled in both languages; the widget
builds, updates one render at a time and shows a static picture where no widget front end is there.

The range check is tested on explorers broken on purpose (a compute that ignores a control, a render that raises),
and the update rules on the bug they fix (issue 14, item 1: renders from two threads at once)."""
import hashlib
import importlib
import json
import pkgutil
import threading
import time
import types

import ipywidgets as W
import matplotlib
import pytest

matplotlib.use("Agg")

from distlearn.core import explorer as base  # noqa: E402
from distlearn.core.explorer import control_range, explorer_modules, extreme_settings  # noqa: E402

MODULES = list(explorer_modules())

# A control whose every value shows the same at the other controls' defaults, because it only matters together with
# another setting: (module, control) → the other values under which it must change the output.
CONTEXT = {
    ("memory", "custom_billions"): {"model": "custom"},               # used only for a custom-size model
    ("memory", "offload_params"): {"zero_stage": 3},                  # parameter offload needs ZeRO-3
    ("memory", "dp"): {"zero_stage": 1},                              # ZeRO-0 replicates: dp changes no byte
    ("pipeline_parallel", "num_chunks"): {"schedule": "interleaved-1f1b"},     # chunks exist only in interleaved 1F1B
    ("pipeline_parallel", "wgrad_share"): {"schedule": "zb-h1"},               # W's share matters only when B is split
    ("activation_memory", "sequence_parallel"): {"tp": 2},                  # SP splits across tensor-parallel ranks
    ("collectives", "step"): {"world_size": 8},                       # 14 steps only with 8 ranks (4 ranks: 6)
    ("overlap_prefetch", "limit"): {"depth": 4},                               # a limit binds only above the depth
    ("planning", "ep"): {"model": "deepseek-v3", "num_gpus": 256},      # expert parallelism needs an MoE model
    ("post_training", "staleness"): {"pool_share": 0.9},   # k > 1 shows only when the trainer pool is the slower one
}


# Two values of a control that legitimately show the same at the other controls' defaults: (module, control) →
# the pair, with the reason.
SAME = {
    ("activation_memory", "attention"): ("default", "flash"),   # Llama 2 7B is trained with flash attention
}


def figure_fingerprint(fig) -> str:
    """A hash of what a figure shows, without drawing it: every axes' titles, labels and limits, and every artist's
    text, geometry, data and colour."""
    import numpy as np
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.text import Text

    def arr(x):
        return np.round(np.asarray(x, dtype=float), 6).tobytes()

    h = hashlib.sha256()
    for t in fig.texts:
        h.update(t.get_text().encode())
    for ax in fig.axes:
        h.update(repr((ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), ax.get_xlim(), ax.get_ylim())).encode())
        for axis in (ax.xaxis, ax.yaxis):  # tick labels, categorical ones included (they exist only once drawn)
            h.update(repr(axis.get_major_formatter().format_ticks(axis.get_majorticklocs())).encode())
        for a in ax.get_children():
            if a is ax.patch:
                continue
            if isinstance(a, Text):
                h.update(repr((a.get_text(), a.get_position(), a.get_color())).encode())
            elif isinstance(a, Line2D):
                h.update(arr(a.get_xydata()))
            elif isinstance(a, Patch):
                h.update(arr(a.get_path().transformed(a.get_patch_transform()).vertices) + arr(a.get_facecolor()))
            elif isinstance(a, Collection):
                for p in a.get_paths():
                    h.update(arr(p.vertices))
                h.update(arr(a.get_offsets()) + arr(a.get_facecolor()))
            elif hasattr(a, "get_array") and a.get_array() is not None:
                h.update(arr(a.get_array()))
            elif hasattr(a, "get_texts"):  # a legend
                h.update(repr([t.get_text() for t in a.get_texts()]).encode())
    return h.hexdigest()[:16]


def shown(mod, values: dict) -> tuple[str, tuple, str]:
    """What ``mod``'s explorer shows for ``values``: (printed text, figure fingerprints, errors)."""
    figures = []
    outputs = base.capture(lambda: mod.render(mod.compute(**values)),
                           on_figure=lambda f: figures.append(figure_fingerprint(f)))
    text = "".join(o["text"] for o in outputs if o.get("name") == "stdout")
    errors = "".join(o["text"] for o in outputs if o.get("name") == "stderr")
    return text, tuple(figures), errors


def unresponsive_controls(mod, context: dict | None = None, same: dict | None = None) -> list[str]:
    """Problems found by moving each control of ``mod`` through :func:`control_range` with the others at their
    defaults (plus ``context[name]``): an error while drawing, or two positions that show the same (unless
    ``same[name]`` is that pair)."""
    context, same = context or {}, same or {}
    controls = mod.controls()
    defaults = {n: c.value for n, c in controls.items()}
    problems = []
    for name, control in controls.items():
        setting = {**defaults, **context.get(name, {})}
        seen = {}
        for value in control_range(control):
            text, figures, errors = shown(mod, {**setting, name: value})
            if errors:
                problems.append(f"{name}={value!r}: {errors.strip()}")
                continue
            if (text, figures) in seen and {seen[(text, figures)], value} != set(same.get(name, ())):
                problems.append(f"{name}: {seen[(text, figures)]!r} and {value!r} show the same")
            seen.setdefault((text, figures), value)
    return problems


@pytest.mark.parametrize("name", MODULES)
def test_compute_at_every_extreme(name):
    mod = importlib.import_module(explorer_modules()[name])
    for values in extreme_settings(mod.controls()):
        result = mod.compute(**values)
        assert isinstance(result, dict), values


@pytest.mark.parametrize("name", MODULES)
def test_every_control_changes_what_the_explorer_shows(name):
    mod = importlib.import_module(explorer_modules()[name])
    context = {c: v for (m, c), v in CONTEXT.items() if m == name}
    same = {c: v for (m, c), v in SAME.items() if m == name}
    assert set(context) | set(same) <= set(mod.controls()), "CONTEXT/SAME name a control the explorer lacks"
    assert unresponsive_controls(mod, context, same) == []


def _toy(ignore: str = "", fail_at: int | None = None):
    """A small explorer, broken on purpose when asked: ``ignore`` a control, or raise at n = ``fail_at``."""
    def controls():
        return {"n": base.int_slider("n / 数", 2, 1, 9), "kind": base.dropdown("kind / 种类", ["a", "b"], "a"),
                "square": base.checkbox("square / 平方", False)}

    def compute(n, kind, square):
        if n == fail_at:
            raise ValueError("broken on purpose")
        values = {"n": n, "kind": kind, "square": square}
        values[ignore] = None  # a compute that forgets this control
        return values

    def render(r):
        import matplotlib.pyplot as plt
        print(r["kind"], r["n"])
        _, ax = plt.subplots()
        ax.bar([0], [r["n"] ** 2 if r["square"] else r["n"]])
        plt.show()

    return types.SimpleNamespace(controls=controls, compute=compute, render=render)


def test_range_check_catches_an_explorer_broken_on_purpose():
    assert unresponsive_controls(_toy()) == []
    assert unresponsive_controls(_toy(ignore="square")) == ["square: False and True show the same"]
    problems = unresponsive_controls(_toy(ignore="kind"))
    assert problems == ["kind: 'a' and 'b' show the same"]
    (problem,) = unresponsive_controls(_toy(fail_at=9))
    assert problem.startswith("n=9: ") and "broken on purpose" in problem


def test_range_check_needs_the_context_where_a_control_matters():
    mod = importlib.import_module("distlearn.memory.explorer")
    without = unresponsive_controls(mod)
    assert any(p.startswith("custom_billions:") for p in without), without


@pytest.mark.parametrize("name", MODULES)
def test_controls_are_bilingual_and_not_continuous(name):
    mod = importlib.import_module(explorer_modules()[name])
    for key, c in mod.controls().items():
        if hasattr(c, "continuous_update"):
            assert c.continuous_update is False, key
        assert " / " in c.description and any("\u4e00" <= ch <= "\u9fff" for ch in c.description), (key, c.description)


@pytest.mark.parametrize("name", MODULES)
def test_numeric_choices_are_sliders(name):
    """A closed drop-down in JupyterLab does not take arrow keys (Lab moves between cells, ipywidgets #3912):
    numbers are chosen with sliders, drop-downs hold names."""
    mod = importlib.import_module(explorer_modules()[name])
    for key, c in mod.controls().items():
        if isinstance(c, W.Dropdown):
            values = [o[1] if isinstance(o, tuple) else o for o in c.options]
            assert not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values), key


@pytest.mark.parametrize("name", MODULES)
def test_explorer_builds_and_updates(name, monkeypatch):
    mod = importlib.import_module(explorer_modules()[name])
    calls = []
    real = mod.compute
    monkeypatch.setattr(mod, "compute", lambda **kw: calls.append(kw) or real(**kw))
    box = mod.explorer()
    assert isinstance(box, base.Explorer) and box.renders == 1 and calls
    first = box.output.outputs
    assert first and not any(o.get("name") == "stderr" for o in first), first
    name0, control = next((n, c) for n, c in box.controls.items() if len(control_range(c)) > 1)
    control.value = [v for v in control_range(control) if v != control.value][0]
    assert box.renders == 2 and calls[-1][name0] == control.value


def test_explorer_shows_a_static_picture_without_a_widget_front_end():
    """Issue 14, item 2: a stored notebook's explorer output carries an HTML picture of the first render and a
    "run this cell" note, not ``VBox(children=(…``."""
    import matplotlib_inline.backend_inline  # noqa: F401  (the kernel's backend draws PNGs in notebooks)

    box = _build_toy()
    bundle = box._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "VBox(" not in bundle["text/plain"] and "run this cell" in bundle["text/plain"]
    html = bundle["text/html"]
    assert "Run this cell" in html and "运行本单元格" in html and "a 2" in html


def _build_toy(**kw):
    toy = _toy(**kw)
    return base.build(toy.controls(), toy.compute, toy.render, title="toy / 玩具")


def test_render_error_is_a_short_message_and_leaves_no_figure_open():
    import matplotlib.pyplot as plt

    box = _build_toy(fail_at=5)
    before = plt.get_fignums()
    box.controls["n"].value = 5
    (out,) = box.output.outputs
    assert out["name"] == "stderr" and "broken on purpose" in out["text"] and "Traceback" not in out["text"]
    assert plt.get_fignums() == before


def test_updates_from_two_threads_never_overlap():
    """JupyterLab 4.6 sends widget messages to a kernel subshell, which ipykernel 7 handles in its own thread,
    while the first ones still reach the main thread: renders ran at once and drew into each other's figures.
    Renders now run one at a time, and the last shows the final values."""
    active, overlaps, done = [0], [], []

    def render(r):
        active[0] += 1
        if active[0] > 1:
            overlaps.append(r)
        time.sleep(0.01)
        print(r["n"], r["kind"])
        active[0] -= 1
        done.append(r)

    toy = _toy()
    controls = toy.controls()
    box = base.build(controls, toy.compute, render)
    n, kind = controls["n"], controls["kind"]
    threads = [threading.Thread(target=lambda: [setattr(n, "value", v) for v in (3, 4, 5, 6)]),
               threading.Thread(target=lambda: [setattr(kind, "value", v) for v in ("b", "a", "b")])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == []
    assert box.output.outputs[0]["text"] == "6 b\n"


KERNEL_SETUP = '''
import time
from distlearn.core import explorer as base
from distlearn.pipeline_parallel import explorer as mod
state = {"active": 0, "overlaps": 0}
def render(r):
    state["active"] += 1
    state["overlaps"] += state["active"] > 1
    time.sleep(0.1)
    mod.render(r)
    state["active"] -= 1
controls = mod.controls()
box = base.build(controls, mod.compute, render)
print("IDS", controls["num_stages"].comm.comm_id, controls["num_microbatches"].comm.comm_id)
'''
KERNEL_RESULT = '''
from IPython.utils.capture import capture_output
values = {n: c.value for n, c in controls.items()}
with capture_output() as expected:
    mod.render(mod.compute(**values))
shown = box.children[-1].outputs
print(state["overlaps"], values["num_stages"], values["num_microbatches"],
      "".join(o.get("text", "") for o in shown) == expected.stdout,
      sum(o["output_type"] == "display_data" for o in shown) == len(expected.outputs),
      "dl-pending" in box.children[-1]._dom_classes)
'''


class _Kernel:
    """A real ipykernel (as JupyterLab starts it: inline plots) with a subshell, driven like a front end."""

    def __enter__(self):
        import os

        from jupyter_client import KernelManager

        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(env={k: v for k, v in os.environ.items() if k != "MPLBACKEND"})
        self.kc = self.km.client()
        self.kc.start_channels()
        try:
            self.kc.wait_for_ready(timeout=120)
            self.kc.control_channel.send(self.kc.session.msg("create_subshell_request", {}))
            self.subshell = self.kc.control_channel.get_msg(timeout=30)["content"]["subshell_id"]
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def run(self, code: str) -> str:
        """Execute ``code`` on the main shell and return what it printed."""
        msg_id, out = self.kc.execute(code), []
        while True:
            m = self.kc.get_iopub_msg(timeout=120)
            if m["parent_header"].get("msg_id") != msg_id:
                continue
            if m["msg_type"] == "stream":
                out.append(m["content"]["text"])
            elif m["msg_type"] == "error":
                raise AssertionError("\n".join(m["content"]["traceback"]))
            elif m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return "".join(out)

    def send(self, comm_id: str, value, subshell: bool = False) -> None:
        """A front end's widget update (a comm message) to the main shell or to the subshell."""
        msg = self.kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {
            "method": "update", "state": {"value": value}, "buffer_paths": []}})
        if subshell:
            msg["header"]["subshell_id"] = self.subshell
        self.kc.shell_channel.send(msg)


@pytest.mark.slow
def test_kernel_handles_widget_messages_from_main_shell_and_subshell():
    """The bug of issue 14 item 1 without a browser: a real ipykernel gets slider updates on its main shell and on
    a subshell (as JupyterLab 4.6 sends them) at once; renders must not overlap and the output must end as the
    final values render it, every figure included."""
    with _Kernel() as k:
        stages_id, mb_id = k.run(KERNEL_SETUP).split("IDS ")[-1].split()
        # ipykernel 7.4 routes a front-end comm message to the subshell its comm last published from
        # (ipykernel/comm/comm.py, _reply_subshell_for): a comm's first message reaches the main shell, later ones
        # the subshell, as in JupyterLab. One message each, then a burst: stages on the main thread, micro-batches
        # on the subshell's thread, interleaved, no waiting.
        k.send(stages_id, 2)
        k.send(mb_id, 4, subshell=True)
        k.run("pass")
        for i in range(1, 10):
            k.send(stages_id, 2 + i)
            k.send(mb_id, 4 + 3 * i, subshell=True)
        deadline = time.monotonic() + 60
        while True:  # every message handled and the last refresh done (run() queues behind the main shell)
            overlaps, stages, mbs, same_text, same_count, pending = k.run(KERNEL_RESULT).split()[-6:]
            if (stages, mbs, pending) == ("11", "31", "False") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert (overlaps, stages, mbs, same_text, same_count, pending) == ("0", "11", "31", "True", "True", "False")


FLUSH_SETUP = '''
import threading, time
import matplotlib.pyplot as plt
from matplotlib.backends import backend_agg
from distlearn.core import explorer as base
printed_by = []  # the thread of every PNG the kernel draws (Agg's print_png draws through _print_pil)
_print = backend_agg.FigureCanvasAgg._print_pil
def _recorded(self, *args, **kwargs):
    printed_by.append(threading.current_thread().name)
    return _print(self, *args, **kwargs)
backend_agg.FigureCanvasAgg._print_pil = _recorded
drawn_by = []  # the thread of every Agg draw (pyplot's own post_execute hook draws with draw_idle, no PNG)
_draw = backend_agg.FigureCanvasAgg.draw
def _drawn(self, *args, **kwargs):
    drawn_by.append(threading.current_thread().name)
    return _draw(self, *args, **kwargs)
backend_agg.FigureCanvasAgg.draw = _drawn
captures = []
_capture = base.capture
def _kept(*args, **kwargs):
    captures.append(_capture(*args, **kwargs))
    return captures[-1]
base.capture = _kept
def render(r):  # a figure that stays open a while, as a large one does on a busy machine
    print("n", r["n"])
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar([0, 1], [r["n"], r["n"] ** 2])
    time.sleep(0.15)
    plt.show()
n = base.int_slider("n / 数", 1, 1, 30)
box = base.build({"n": n}, lambda n: {"n": n}, render)
print("ID", n.comm.comm_id)
'''
FLUSH_RESULT = '''
import base64, io, json
from IPython.utils.capture import capture_output
from matplotlib import image as mpimg
with capture_output() as expected:
    render({"n": n.value})
def pngs(outputs):
    return [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
want = expected.outputs[0].data["image/png"]
want = want if isinstance(want, str) else base64.b64encode(want).decode()
blank = [i for i, c in enumerate(captures)
         if any(mpimg.imread(io.BytesIO(base64.b64decode(p)), format="png")[..., 3].max() == 0 for p in pngs(c))]
print("RESULT", json.dumps({"value": n.value, "pending": "dl-pending" in box.children[-1]._dom_classes,
                            "threads": sorted(set(printed_by)), "drawn": sorted(set(drawn_by)),
                            "figures": [len(pngs(c)) for c in captures],
                            "blank": blank, "final": pngs(box.children[-1].outputs) == [want]}))
'''


@pytest.mark.slow
def test_kernel_subshell_never_draws_a_figure_of_a_render():
    """``comm`` triggers ``post_execute`` around every widget message, in the subshell's thread, and
    matplotlib-inline's hook there displays and closes every open figure, and pyplot's own hook draws every open
    figure: the one a render was drawing on the main thread too. Printed or drawn by two threads at once, its PNG
    came out fully transparent or half drawn, or the render lost its figure.
    Here each render keeps its figure open 0.15 s while updates keep arriving on the subshell: no figure may be
    printed outside the main thread, and every render must show exactly its one figure."""
    with _Kernel() as k:
        (comm_id,) = k.run(FLUSH_SETUP).split("ID ")[-1].split()
        k.send(comm_id, 2)
        k.run("pass")
        for v in range(3, 31):
            k.send(comm_id, v, subshell=True)
            time.sleep(0.03)
        deadline = time.monotonic() + 60
        while True:
            r = json.loads(k.run(FLUSH_RESULT).split("RESULT ")[-1])
            if (r["value"], r["pending"]) == (30, False) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert (r["value"], r["pending"]) == (30, False), r
    assert r["threads"] == ["MainThread"], f"figures printed by {r['threads']}"
    assert r["drawn"] == ["MainThread"], f"figures drawn by {r['drawn']}"
    assert set(r["figures"]) == {1} and r["blank"] == [] and r["final"], r


def test_custom_size_is_greyed_out_unless_the_model_is_custom():
    from distlearn.memory import explorer as memory

    box = memory.explorer()
    size, model = box.controls["custom_billions"], box.controls["model"]
    assert size.disabled and model.value != "custom"
    model.value = "custom"
    assert not size.disabled
    model.value = "gpt2-small"
    assert size.disabled


class _LaterLoop:
    """Stands in for the kernel's main-thread IO loop: callbacks wait until the test runs them, as they wait for a
    busy kernel."""

    def __init__(self):
        self.callbacks = []

    def add_callback(self, fn):
        self.callbacks.append(fn)

    def run(self):
        while self.callbacks:
            self.callbacks.pop(0)()


def _shows_updating(box) -> bool:
    return box.pending and "updating" in box.status.value and "更新中" in box.status.value


def test_a_change_shows_updating_until_the_newest_values_are_drawn(monkeypatch):
    """Under load a render waits for the kernel: from the change until the render of the newest values has
    finished, the explorer says so ("updating… / 更新中…", output dimmed), then the note goes."""
    loop = _LaterLoop()
    monkeypatch.setattr(base, "_main_loop", lambda: loop)
    box = _build_toy()
    assert not box.pending and box.status.value == ""
    box.controls["n"].value = 3
    assert _shows_updating(box) and box.output.outputs[0]["text"] == "a 2\n"    # old output, marked as old
    loop.run()
    assert not box.pending and box.status.value == "" and box.output.outputs[0]["text"] == "a 3\n"


def test_a_change_during_a_render_keeps_updating_until_its_own_render(monkeypatch):
    loop = _LaterLoop()
    monkeypatch.setattr(base, "_main_loop", lambda: loop)
    toy, seen = _toy(), []
    controls = toy.controls()

    def render(r):
        if r["n"] == 3 and not seen:          # while drawing n = 3, the student moves the slider on
            controls["n"].value = 4
        seen.append((r["n"], box.pending))
        toy.render(r)

    box = base.build(controls, toy.compute, render)
    seen.clear()
    controls["n"].value = 3
    loop.callbacks.pop(0)()                    # the render of n = 3, during which n becomes 4
    assert seen == [(3, True)] and _shows_updating(box), "cleared while a newer value waits"
    loop.run()
    assert seen[-1] == (4, True) and not box.pending and box.status.value == ""
    assert box.output.outputs[0]["text"] == "a 4\n"


def test_updating_note_follows_the_language(monkeypatch):
    from distlearn.core import i18n

    loop = _LaterLoop()
    monkeypatch.setattr(base, "_main_loop", lambda: loop)
    box, before = _build_toy(), i18n.get_language()
    try:
        i18n.set_language("zh")
        box.controls["n"].value = 5
        assert "更新中" in box.status.value and "updating" not in box.status.value
        loop.run()
        assert box.status.value == ""
    finally:
        i18n.set_language(before)
        loop.run()


def test_custom_size_greys_out_at_once_not_after_a_slow_render(monkeypatch):
    """Under load the render comes seconds later: the custom size must not look live with a preset selected."""
    from distlearn.memory import explorer as memory

    loop = _LaterLoop()
    monkeypatch.setattr(base, "_main_loop", lambda: loop)
    box = memory.explorer()
    size, model = box.controls["custom_billions"], box.controls["model"]
    model.value = "custom"
    assert not size.disabled and loop.callbacks
    model.value = "gpt2-small"
    assert size.disabled
    loop.run()
    assert size.disabled and not box.pending


def test_heat_map_digits_stay_readable_on_dark_cells():
    """Issue 14 item 6: a finished all-reduce (every cell = world size, navy) printed black digits."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import to_rgb

    from distlearn.collectives import explorer as collectives

    fig, ax = plt.subplots()
    collectives.draw_holdings(ax, np.array([[4, 1], [0, 4]]), vmax=4)
    colours = {t.get_text(): to_rgb(t.get_color()) for t in ax.texts}
    plt.close(fig)
    assert colours["4"] == (1.0, 1.0, 1.0) and colours["0"] == (0.0, 0.0, 0.0)
    assert all(t.get_fontsize() >= 9 for t in ax.texts)


def test_small_totals_are_labelled_on_the_bar():
    """gpt2-small's 2 GB vanish against an 80 GB axis unless the total is written on the bar."""
    import matplotlib.pyplot as plt

    from distlearn.memory import explorer as memory

    r = memory.compute(model="gpt2-small", dp=1)
    ax = memory.plot_states([r], ["gpt2-small"])
    texts = [t.get_text() for t in ax.texts]
    plt.close(ax.figure)
    assert f"{r['total_gb']:.3g} GB" in texts, texts


def test_explorer_tables_put_chinese_labels_last():
    """Chinese glyphs are not two monospace columns wide in a browser: labels go after the numbers."""
    from distlearn.memory import explorer as memory

    outputs = base.capture(lambda: memory.render(memory.compute()))
    lines = [x for x in outputs[0]["text"].splitlines() if " GiB" in x and "GB" in x and "→" not in x]
    assert len(lines) == 4 and len({x.index("GiB") for x in lines}) == 1, lines


def test_stored_explorers_carry_a_static_picture_and_no_warning():
    """Issue 14 item 2, as stored: every explorer cell of every chapter keeps, beside the widget view, an HTML
    picture of its first render with a "run this cell" note (what an unexecuted or untrusted notebook shows), and
    that first render printed no warning."""
    import json
    import re

    from authoring.paths import ROOT

    found = 0
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or not re.search(r"\bexplorer\(\)", src):
                continue
            found += 1
            (out,) = [o for o in cell["outputs"] if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
            html = "".join(out["data"].get("text/html", ""))
            assert "<img src=\"data:image/png;base64," in html or "<pre>" in html, path.name
            assert "Run this cell" in html and "运行本单元格" in html, path.name
            assert "VBox(" not in "".join(out["data"]["text/plain"]), path.name
            assert "findfont" not in html and "Warning" not in html, (path.name, "a warning in the first render")
    assert found >= 11


def test_explorer_relabels_and_renders_again_after_a_language_change():
    """set_language: every label, option label and the title switch language live, values are kept, the output is
    rendered again once (relabelling a drop-down's options must not trigger renders of its own)."""
    import distlearn
    from distlearn.core.i18n import Text

    seen = []
    controls = {"n": base.int_slider(Text("t.n", "units", "单元数"), 3, 1, 8),
                "mode": base.dropdown(("mode", "模式"), [(("fast", "快"), "fast"), (("slow", "慢"), "slow")], "slow"),
                "size": base.selection_slider(("size", "大小"), [(("small", "小"), 1), (("large", "大"), 2)], 2)}
    box = base.build(controls, lambda **kw: kw, lambda r: seen.append(dict(r)) or print(distlearn.core.i18n.bi("hi", "你好")),
                     title=("Title", "标题"))
    try:
        distlearn.set_language("zh")
        assert controls["n"].description == "单元数" and controls["mode"].description == "模式"
        assert [o[0] for o in controls["mode"].options] == ["快", "慢"] and controls["mode"].value == "slow"
        assert [o[0] for o in controls["size"].options] == ["小", "大"] and controls["size"].value == 2
        assert box.title == "标题" and "标题" in box.children[0].value
        assert box.renders == 2 and len(seen) == 2 and "你好" in box.output.outputs[0]["text"]
        assert "hi" not in box.output.outputs[0]["text"]
        distlearn.set_language("en")
        assert controls["mode"].description == "mode" and [o[0] for o in controls["mode"].options] == ["fast", "slow"]
        assert box.title == "Title" and box.renders == 3
        box.close()
        distlearn.set_language("zh")
        assert box.renders == 3  # a closed explorer no longer follows
    finally:
        distlearn.set_language("both")


def test_checked_raises_the_error_of_a_setting_compute_cannot_compute():
    from distlearn.core.validate import DistlearnValueError
    from distlearn.core.explorer import SettingsError, checked
    from distlearn.memory import explorer as memory

    good = memory.compute(dp=8)
    assert checked(good) is good
    with pytest.raises(DistlearnValueError, match=r"dp must be an integer in \[1, 65536\]") as info:
        checked(memory.compute(dp=0))
    assert isinstance(info.value, SettingsError)
    shown = "\n".join(info.value._render_traceback_())
    assert shown.count("dp must be an integer") == 1 and "KeyError" not in shown


def _code_cells(md: str) -> list[str]:
    import re
    return re.findall(r"```\{code-cell\} ipython3\n(.*?)```", md, flags=re.S)


def test_chapter_00_example_with_dp_0_shows_why_not_a_key_error():
    """A new user changed dp=8 to dp=0 in chapter 00's example and got ``KeyError: 'num_params'``."""
    from pathlib import Path

    from distlearn.core.validate import DistlearnValueError

    md = (Path(__file__).resolve().parents[1] / "notebooks" / "00_welcome.md").read_text(encoding="utf-8")
    (cell,) = [c for c in _code_cells(md) if "memory.compute(" in c]
    assert "dp=8" in cell
    code = "\n".join(line for line in cell.replace("dp=8", "dp=0").splitlines() if not line.startswith(":tags:"))
    with pytest.raises(DistlearnValueError, match=r"dp must be an integer in \[1, 65536\]"):
        exec(code, {"memory": importlib.import_module("distlearn.memory.explorer")})


def test_chapter_cells_that_read_a_compute_result_check_it_first():
    """Every chapter cell that calls an explorer's ``compute`` reads it through ``checked(...)``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    unchecked = []
    for md in sorted([*root.glob("notebooks/*.md"), *root.glob("solutions/*.md")]):
        for cell in _code_cells(md.read_text(encoding="utf-8")):
            for call in re.finditer(r"(\w+)\.compute\(", cell):
                if call.group(1) in MODULES and not cell[:call.start()].rstrip().endswith("checked("):
                    unchecked.append(f"{md.name}: {cell[call.start():call.start() + 60]}")
    assert unchecked == []


# ---------------------------------------------------------------- controls that move together (issue 39 leftovers)
def control_options(control) -> list:
    """Every value ``control`` can show: an integer slider's every step, a drop-down's or slider's options."""
    if isinstance(control, W.IntSlider):
        return list(range(control.min, control.max + 1, control.step))
    return [o[1] if isinstance(o, tuple) else o for o in control.options]


@pytest.mark.parametrize("name", [n for n in MODULES if getattr(importlib.import_module(explorer_modules()[n]),
                                                                "LINKS", None)])
def test_every_link_sets_values_its_controls_offer_and_computes(name):
    """A LINKS table reaches only values its controls can show (a tuple's every value), and the setting a link
    makes from the defaults computes without an error."""
    mod = importlib.import_module(explorer_modules()[name])
    controls = mod.controls()
    defaults = {n: c.value for n, c in controls.items()}
    for cname, table in mod.LINKS.items():
        for value, rule in table.items():
            assert base.control_problem(cname, controls[cname], value) is None, (cname, value)
            for other, want in rule.items():
                for v in (want if isinstance(want, tuple) else (want,)):
                    assert v in control_options(controls[other]), (other, v)
            values = {**defaults, cname: value}
            values.update(base.linked_values(mod.LINKS, cname, value, values))
            assert "error" not in mod.compute(**values), values


def test_choosing_mixtral_sets_its_experts_and_k_in_one_render():
    """Issue 39 leftovers, item 1: "mixtral-8x7b" kept DeepSeek-V3's 256 experts and k = 8. The model's own E and k
    (MOE_PRESETS), an EP degree that divides E, one render; the reader may move them afterwards."""
    from distlearn.core.models import MOE_PRESETS
    from distlearn.experts import explorer as experts

    box = experts.explorer()
    c = box.controls
    c["model"].value = "mixtral-8x7b"
    mixtral = MOE_PRESETS["mixtral-8x7b"]
    assert (c["num_experts"].value, c["k"].value) == (mixtral.num_experts, mixtral.experts_per_token) == (8, 2)
    assert c["ep"].value == 8 and box.renders == 2
    assert "error" not in experts.compute(**box.values())
    assert "k = 2 →" in box.output.outputs[0]["text"]
    c["k"].value = 1                                   # still the reader's to move
    c["ep"].value = 2
    assert box.values()["k"] == 1 and c["model"].value == "mixtral-8x7b"
    c["model"].value = "deepseek-v3"                   # ep = 2 still divides 256: kept
    assert (c["num_experts"].value, c["k"].value, c["ep"].value) == (256, 8, 2)


def test_a_link_keeps_a_value_still_allowed_and_replaces_one_that_is_not():
    links = {"model": {"a": {"n": 8, "ep": (8, 4, 2, 1)}}}
    assert base.linked_values(links, "model", "a", {"n": 256, "ep": 2}) == {"n": 8}
    assert base.linked_values(links, "model", "a", {"n": 256, "ep": 64}) == {"n": 8, "ep": 8}
    assert base.linked_values(links, "model", "b", {"n": 256, "ep": 64}) == {}
    assert base.linked_values(links, "ep", 4, {"n": 256, "ep": 64}) == {}


def test_pipeline_chunks_grey_out_unless_the_schedule_interleaves_and_schedules_are_named():
    """Issue 39 leftovers, item 2: with DualPipe the chunks v stayed live and the note said "dualpipe"."""
    from distlearn.core import i18n
    from distlearn.pipeline_parallel import explorer as pipeline

    box = pipeline.explorer()
    v, w, schedule = box.controls["num_chunks"], box.controls["wgrad_share"], box.controls["schedule"]
    assert v.disabled and w.disabled                        # 1F1B: one chunk per stage, no split backward
    for name, chunks, split in (("dualpipe", False, True), ("interleaved-1f1b", True, False),
                                ("interleaved-zb", True, True), ("zbv", False, True), ("gpipe", False, False)):
        schedule.value = name
        assert (not v.disabled, not w.disabled) == (chunks, split), name
    before = i18n.get_language()
    try:
        for lang, label in (("en", "DualPipe has a fixed layout"), ("zh", "DualPipe 的布局是固定的")):
            i18n.set_language(lang)
            text_, _, _ = shown(pipeline, {**box.values(), "schedule": "dualpipe", "num_chunks": 2})
            assert label in text_ and "dualpipe" not in text_, text_
    finally:
        i18n.set_language(before)


def test_collective_step_slider_ends_at_the_operations_last_step():
    """Issue 39 leftovers, item 3: the Step slider ran 0–14 whatever the operation. Its end is now the operation's
    own last step, which compute (the VirtualCluster run) confirms: the end shows a step of its own, one past it
    shows the same (compute clamps), and a value past a new end comes back to it."""
    from distlearn.collectives import explorer as coll
    from distlearn.core.comm import OPERATIONS

    for op in OPERATIONS:
        for ws in range(2, coll.MAX_WS + 1):
            high = coll.limits({"operation": op, "world_size": ws})["step"]
            assert coll.compute(operation=op, world_size=ws, step=high)["step"] == high
            assert coll.compute(operation=op, world_size=ws, step=high + 1)["step"] == high
            assert coll.compute(operation=op, world_size=ws, step=high - 1)["step"] == high - 1
            assert high == (2 * (ws - 1) if op == "all_reduce" else ws - 1)      # ring / chain closed forms
    box = coll.explorer()
    c = box.controls
    assert c["step"].max == 6                                  # all-reduce on 4 ranks
    c["world_size"].value = 8
    c["step"].value = 14
    c["operation"].value = "broadcast"
    assert (c["step"].max, c["step"].value) == (7, 7) and box.renders == 4
    c["operation"].value = "all_reduce"
    assert (c["step"].max, c["step"].value) == (14, 7)


def test_collective_names_in_the_english_explorer_are_labels_not_identifiers():
    from distlearn.collectives import explorer as coll
    from distlearn.core import i18n

    before = i18n.get_language()
    try:
        i18n.set_language("en")
        box = coll.explorer()
        labels = [o[0] for o in box.controls["operation"].options]
        assert "all-reduce" in labels and not any("_" in label for label in labels), labels
        import matplotlib.pyplot as plt
        titles = []
        base.capture(lambda: coll.render(coll.compute(operation="reduce_scatter")),
                     on_figure=lambda f: titles.extend(ax.get_title() for ax in f.axes))
        assert titles[0].startswith("reduce-scatter: step 0/3"), titles
        plt.close("all")
    finally:
        i18n.set_language(before)

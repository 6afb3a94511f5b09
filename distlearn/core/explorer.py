"""The common shape of every explorer: controls → pure ``compute`` → ``render`` into an output area.

How an update works, and why (issue 14, item 1). JupyterLab ≥ 4.4 sends widget messages to a kernel *subshell*
(setting ``commsOverSubshells``, default ``perCommTarget``), and ipykernel ≥ 7 handles a subshell's messages in
its own thread: the first messages of a new widget still reach the main shell before its subshell exists, so two
threads ran ``render`` at once. pyplot is not thread-safe and the ipywidgets ``Output`` context routes outputs by
the message being handled, so overlapping renders drew into each other's figures (one thread's ``plt.show()``
saved and closed the other's half-drawn figure: a clipped title and one grey bar) and lost or mixed outputs
(the final picture was that of earlier values). Seen in a real browser (``tests/browser_harness.py``, 20 key
presses per explorer, output compared with an offline render of the final values): renders of one explorer ran in
two kernel threads at once, and 2 of 23 explorer runs ended on an earlier setting's output (chapter 06 both
times); ``tests/test_widgets.py`` replays the two threads in a bare kernel: 17 overlapping renders of 20 before,
0 after.

So an explorer never renders in a message handler. A control change only marks the explorer *pending*
(CSS class ``dl-pending`` on the output area, dimmed, and a status line "⏳ updating… / 更新中…" above it, so that
controls and output never disagree silently under load), greys out at once the controls that no longer apply, and
asks the kernel's main thread to refresh it (``io_loop.add_callback``, safe from any
thread). The refresh runs on the main thread, one at a time, with the controls' values *at that moment* (a burst of
changes gives one or two renders, the last with the final values), captures everything ``render`` prints and
displays, and replaces the output area's content in one assignment (``Output.outputs``), so the front end never
sees half an update. The pending mark is cleared when a render of the newest values has finished: a change that
arrives while a render runs keeps it until the render it queued is done. Without a kernel (tests, scripts) the
refresh is immediate.

A comm message's handler is not the only thing a subshell runs: ``comm`` (0.2, ``BaseComm.handle_msg``) triggers
IPython's ``pre_execute`` / ``post_execute`` events around every widget message, in the thread that handles it, and
matplotlib-inline's ``post_execute`` hook (``flush_figures``) then displays and closes *every* open figure. When that
happened on a subshell while the main thread was drawing a render's figure, both threads printed the same figure
at once: one cleared the shared Agg buffer of the other, which sent a fully transparent PNG of the right size (seen
in the browser harness under load: "figure 1 is not the offline one (45.1% of the pixels differ)"), or the figure
was closed before the render showed it; a figure that a cell was drawing could be stolen the same way. So once an
explorer exists that hook runs only in the kernel's main thread, where cells and explorer renders draw, and under
the render lock (:func:`_guard_inline_flush`); after a widget message on a subshell it does nothing (figures a
widget callback there leaves open are shown after the next cell, as any cell's are). pyplot registers a second
``post_execute`` hook in interactive mode (``_draw_all_if_interactive``: ``draw_idle`` of every open figure), which
drew a render's half-built figure on the subshell the same way (a picture with its title, legend and upper ticks
missing, 31 % of the pixels off, again under load); it is guarded the same way.

Before the chapter is run (issue 14, item 2), a stored notebook shows the explorer's text fallback; so an explorer
also offers a static picture of its first render (``text/html`` with a "run this cell" note, the printed text and
the figures) next to the live widget view: JupyterLab shows the widget when the kernel has it, the picture
otherwise (an untrusted notebook never renders widget views, whatever the kernel).

Tests call ``compute`` at every control's extremes through :func:`extreme_settings` and move every control
through its range through :func:`range_settings` (``tests/test_widgets.py``).

Controls that move together (issue 39 leftovers). An explorer may give ``links``, a table "when control X takes
value v, set these controls": ``{"model": {"mixtral-8x7b": {"num_experts": 8, "k": 2, "ep": (8, 4, 2, 1)}}}``. A
plain value is set; a tuple means "keep the current value if it is one of these, else take the first" (an EP degree
that still divides the new number of experts stays). It applies when the reader changes X, never at start-up, and
the reader may move the other controls afterwards. An explorer may also give ``limits(values) -> {name: max}``: the
largest value an integer slider offers under the other values (chapter 02's step slider: each collective has its
own number of steps); the slider's end follows at once and a value beyond it is brought back to it. The website's
explorers (``authoring/web_explorers.py``, ``website/_static/distlearn-explorer.js``) honour both, from the same
``LINKS`` table and ``limits`` function.

Labels (a control's description, a drop-down's or slider's option labels, the title) may be a
:class:`~distlearn.core.i18n.Text`, an ``(en, zh)`` pair or a plain string; the first two follow the language switch
live: after :func:`distlearn.set_language` every explorer on screen relabels its controls (keeping their values)
and renders again, on the kernel's main thread like any other refresh.
"""
from __future__ import annotations

import base64
import html
import sys
import threading
from typing import Callable, Union

import ipywidgets as W

from distlearn.core import i18n
from distlearn.core.i18n import Text, bi
from distlearn.core.validate import DistlearnValueError
from distlearn.core.guard import read_only

Label = Union[Text, tuple, str]

STYLE = read_only({"description_width": "initial"})  # the bilingual label takes the width it needs ...
LAYOUT = W.Layout(width="700px")           # ... and the control gets the rest: wide enough for "English / 中文"
PENDING = "dl-pending"                    # CSS class of an explorer's output area while a refresh is on its way
# What the status line shows while an explorer is pending: the output area dimmed (the style lives only as long as
# the status line shows it) and a note, in the reader's language.
PENDING_STYLE = "<style>.distlearn-explorer .dl-pending {opacity: 0.45; transition: opacity 0.2s;}</style>"
_RENDER_LOCK = threading.RLock()          # pyplot and the captured streams are process-wide: one render at a time


def render_label(label: Label) -> str:
    """``label`` in the current language: a Text, an ``(en, zh)`` pair (joined like :func:`~distlearn.core.i18n.bi`),
    or a string as it is."""
    if isinstance(label, Text):
        return label.render()
    if isinstance(label, tuple):
        return i18n.bi(*label)
    return str(label)


def _labelled(control: W.Widget, label: Label, options=None) -> W.Widget:
    control._distlearn_label = label  # relabelled by the explorer when the language changes
    if options is not None:
        control._distlearn_options = list(options)
    return control


def _option_labels(options) -> list:
    """``options`` with each ``(label, value)`` pair's label rendered in the current language."""
    return [(render_label(o[0]), o[1]) if isinstance(o, tuple) else o for o in options]


def int_slider(label: Label, value: int, min: int, max: int, step: int = 1, exact: bool = False) -> W.IntSlider:
    """An integer slider that updates on release. ``exact=True``: its range is the whole range of the value (a ZeRO
    stage 0–3), so ``compute`` called by hand accepts no value beyond it (see :func:`control_problem`)."""
    slider = _labelled(W.IntSlider(value=value, min=min, max=max, step=step, description=render_label(label),
                                   continuous_update=False, style=STYLE, layout=LAYOUT), label)
    slider._distlearn_exact = bool(exact)
    return slider


def float_slider(label: Label, value: float, min: float, max: float, step: float) -> W.FloatSlider:
    """A float slider that updates on release."""
    return _labelled(W.FloatSlider(value=value, min=min, max=max, step=step, description=render_label(label),
                                   continuous_update=False, style=STYLE, layout=LAYOUT), label)


def selection_slider(label: Label, options, value) -> W.SelectionSlider:
    """A slider over ``options`` (values, or (label, value) pairs whose label may be a Text or an ``(en, zh)``
    pair) that updates on release. Sliders take arrow keys in JupyterLab; a closed drop-down does not (Lab moves
    between cells instead, ipywidgets issue #3912), so numeric choices are sliders."""
    return _labelled(W.SelectionSlider(options=_option_labels(options), value=value, description=render_label(label),
                                       continuous_update=False, style=STYLE, layout=LAYOUT), label, options)


def log2_slider(label: Label, value: int, min: int, max: int) -> W.SelectionSlider:
    """A slider over powers of two from ``min`` to ``max`` (1, 2, 4, …)."""
    options, v = [], min
    while v <= max:
        options.append(v)
        v *= 2
    return selection_slider(label, options, value)


def dropdown(label: Label, options, value) -> W.Dropdown:
    """A drop-down; ``options`` is a list of values or of ``(label, value)`` pairs, where a label may be a Text or
    an ``(en, zh)`` pair that follows the language."""
    return _labelled(W.Dropdown(options=_option_labels(options), value=value, description=render_label(label),
                                style=STYLE, layout=LAYOUT), label, options)


def checkbox(label: Label, value: bool) -> W.Checkbox:
    return _labelled(W.Checkbox(value=value, description=render_label(label), style=STYLE, indent=False,
                                layout=LAYOUT), label)


def relabel(controls: dict[str, W.Widget]) -> None:
    """Render every control's label and option labels again in the current language, keeping its value."""
    for c in controls.values():
        if hasattr(c, "_distlearn_label"):
            c.description = render_label(c._distlearn_label)
        if hasattr(c, "_distlearn_options"):
            value = c.value
            c.options = _option_labels(c._distlearn_options)
            c.value = value


# ---------------------------------------------------------------- reading a compute() result in a cell
class SettingsError(DistlearnValueError):
    """An explorer's ``compute`` could not compute these settings. Its message (``compute``'s ``"error"``) is
    already in the reader's language, so it is shown once, as it is, above the reader's line that asked for it."""

    def __init__(self, message: str):
        ValueError.__init__(self, message)
        self.param, self.en, self.zh, self.bilingual = "settings", message, message, False

    def _render_traceback_(self) -> list[str]:
        name = type(self).__name__
        first, *rest = str(self).splitlines() or [""]
        where = [line for line in super()._render_traceback_()   # the reader's line and the function called,
                 if line.startswith(("  → ", "    ("))]              # as a parent shows them
        return [f"\x1b[0;31m{name}\x1b[0m: {first}", *(f"{' ' * len(name)}  {line}" for line in rest), *where]


def checked(result: dict) -> dict:
    """``result`` of an explorer's ``compute`` as it is, or its ``"error"`` raised as :class:`SettingsError`
    (a :class:`~distlearn.core.validate.DistlearnValueError`), so that a cell reading ``result["total_gb"]`` shows the
    reason ("dp must be an integer in [1, 65536] …") instead of ``KeyError: 'total_gb'``::

        r = checked(memory.compute(dp=0))      # SettingsError: dp must be an integer in [1, 65536] …
    """
    if isinstance(result, dict) and "error" in result:
        raise SettingsError(str(result["error"]))
    return result


# ---------------------------------------------------------------- compute() called by hand
BEYOND = 64   # how far past a slider's end compute() accepts a value typed by hand


def _check_whole(name: str, value, low: int, high: int) -> None:
    """A slider of whole numbers: from 1 when its range is positive (else from its minimum), at most BEYOND × its
    maximum."""
    from distlearn.core.validate import check_int

    check_int(name, value, minimum=1 if low > 0 else low, maximum=high * BEYOND)


def _check_float(name: str, value, low: float, high: float) -> None:
    """A slider of real numbers: a positive range accepts any positive value (a model of 10⁻⁹ B parameters is a
    formula's business, not the slider's), otherwise from the slider's minimum; at most BEYOND × its maximum."""
    from distlearn.core.validate import check_number

    if low > 0:
        check_number(name, value, minimum=0, strict_min=True, maximum=high * BEYOND)
    else:
        check_number(name, value, minimum=low, maximum=high * BEYOND)


def control_problem(name: str, control, value) -> str | None:
    """Why ``value`` is not something ``control`` could send (``None`` when it could), in the reader's language.

    A check box sends True or False; a drop-down or a slider of named options one of its options; an integer or
    float slider, or a slider of numeric options (a log₂ slider), a number of the same kind from its minimum up to
    :data:`BEYOND` times its maximum (a slider's end is a teaching range, not a limit of the formula, but a typo
    such as 10**12 must not start an endless computation)."""
    from distlearn.core.validate import check_bool, check_choice, check_int

    try:
        if isinstance(control, W.Checkbox):
            check_bool(name, value)
        elif isinstance(control, W.IntSlider) and getattr(control, "_distlearn_exact", False):
            check_int(name, value, minimum=control.min, maximum=control.max)
        elif isinstance(control, W.IntSlider):
            _check_whole(name, value, control.min, control.max)
        elif isinstance(control, W.FloatSlider):
            _check_float(name, value, control.min, control.max)
        elif isinstance(control, (W.SelectionSlider, W.Dropdown, W.ToggleButtons, W.RadioButtons)):
            options = _options(control)
            numeric = all(isinstance(o, (int, float)) and not isinstance(o, bool) for o in options)
            if numeric and all(isinstance(o, int) for o in options):
                _check_whole(name, value, min(options), max(options))
            elif numeric:
                _check_float(name, value, min(options), max(options))
            else:
                check_choice(name, value, options)
    except DistlearnValueError as e:
        return str(e)
    return None


def _call_problem(sig, args: tuple, kwargs: dict) -> str:
    """Why ``compute(*args, **kwargs)`` does not fit ``sig`` (an unknown keyword, too many positional values), in
    the reader's language, naming the accepted parameters."""
    accepted = ", ".join(sig.parameters)
    unknown = [k for k in kwargs if k not in sig.parameters]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        return bi(f"unknown parameter {names}; this explorer's compute accepts: {accepted}.",
                  f"未知的参数 {names}；此探索器的 compute 接受：{accepted}。")
    return bi(f"compute takes at most {len(sig.parameters)} values ({accepted}); got {len(args)} positional and "
              f"{len(kwargs)} named ({', '.join(map(repr, kwargs))}), or a parameter given twice.",
              f"compute 至多接受 {len(sig.parameters)} 个值（{accepted}）；收到 {len(args)} 个位置参数和 "
              f"{len(kwargs)} 个关键字参数（{', '.join(map(repr, kwargs))}），或某个参数给了两次。")


def within_controls(controls: Callable[[], dict]):
    """Decorate an explorer's ``compute``: a value that none of its controls could send (a typo, ``None``, a
    string for a number, 0 where the slider starts at 1, a model that is not in the list …) returns ``{"error":
    message}`` — what the explorer shows in place of its plot — before ``compute`` runs (issue 33). ``controls``:
    the module's ``controls`` function (read once, on the first call)."""
    import functools
    import inspect

    def wrap(compute):
        sig = inspect.signature(compute)
        cache: dict = {}

        @functools.wraps(compute)
        def inner(*args, **kwargs):
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError:
                return {"error": _call_problem(sig, args, kwargs)}
            if "controls" not in cache:
                cache["controls"] = controls()
            for name, value in bound.arguments.items():
                control = cache["controls"].get(name)
                problem = control_problem(name, control, value) if control is not None else None
                if problem:
                    return {"error": problem}
            return compute(*args, **kwargs)

        return inner

    return wrap


# ---------------------------------------------------------------- capturing what render shows
class _Stream:
    """A file-like object that appends what is written to ``outputs`` as stream outputs (merging neighbours)."""

    def __init__(self, outputs: list, name: str):
        self.outputs, self.name = outputs, name

    def write(self, text: str) -> int:
        if text:
            last = self.outputs[-1] if self.outputs else None
            if last and last["output_type"] == "stream" and last["name"] == self.name:
                last["text"] += text
            else:
                self.outputs.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class _Display:
    """Collects each display (e.g. an inline plot) as a display_data output."""

    def __init__(self, outputs: list):
        self.outputs = outputs

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        data = {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in data.items()}
        self.outputs.append({"output_type": "display_data", "data": data, "metadata": dict(metadata or {})})

    def clear_output(self, wait=False):
        self.outputs.clear()


class _ThreadRouter:
    """Stands in for a process-wide object (``sys.stdout``, IPython's display publisher) while one thread captures:
    that thread's calls go to the capture (for the methods it has), every other thread's — a kernel subshell
    handling widget messages, say — to the original, untouched."""

    def __init__(self, original, capture):
        self.__dict__.update(_original=original, _capture=capture, _thread=threading.get_ident())

    def release(self) -> None:
        self.__dict__["_thread"] = None  # a reference kept somewhere now only reaches the original

    def __getattr__(self, name):
        if threading.get_ident() == self._thread and hasattr(self._capture, name):
            return getattr(self._capture, name)
        return getattr(self._original, name)


def capture(fn: Callable[[], None], on_figure: Callable | None = None) -> tuple[dict, ...]:
    """Run ``fn`` and return what it printed and displayed, in order, as notebook outputs (stream /
    display_data dicts). Inside IPython, ``plt.show()`` under the inline backend displays a PNG, which is captured.
    Only the calling thread is captured (see :class:`_ThreadRouter`). A figure ``fn`` leaves open (no inline
    backend, or an error half-way) is passed to ``on_figure`` (tests fingerprint it) and closed, never shown
    later. An exception becomes a short bilingual stderr line, not a traceback through the explorer's internals."""
    import matplotlib.pyplot as plt

    outputs: list = []
    try:
        from IPython import get_ipython
        shell = get_ipython()
    except ImportError:
        shell = None
    routers = {"stdout": _ThreadRouter(sys.stdout, _Stream(outputs, "stdout")),
               "stderr": _ThreadRouter(sys.stderr, _Stream(outputs, "stderr"))}
    old_out, old_err = sys.stdout, sys.stderr
    old_pub = getattr(shell, "display_pub", None)
    open_before = set(plt.get_fignums())
    sys.stdout, sys.stderr = routers["stdout"], routers["stderr"]
    if shell is not None:
        routers["display"] = _ThreadRouter(old_pub, _Display(outputs))
        shell.display_pub = routers["display"]
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - a student must see what went wrong, the explorer must stay alive
        print(bi(f"This setting could not be drawn: {type(exc).__name__}: {exc}",
                 f"这组设置无法绘制：{type(exc).__name__}：{exc}"), file=sys.stderr)
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        if shell is not None:
            shell.display_pub = old_pub
        for r in routers.values():
            r.release()
        for num in sorted(set(plt.get_fignums()) - open_before):
            if on_figure is not None:
                on_figure(plt.figure(num))
            plt.close(num)
    return tuple(outputs)


class _MainThreadFlush:
    """matplotlib-inline's ``flush_figures`` hook, run only in ``thread`` (the kernel's main thread) and under
    :data:`_RENDER_LOCK` (see the module doc). It compares equal to the hook it wraps, so IPython's
    ``events.register`` / ``unregister`` of the original (matplotlib-inline does both when the backend is switched)
    still find it."""

    def __init__(self, flush: Callable[[], None], thread: int):
        self.flush, self.thread = flush, thread

    def __call__(self, *args, **kwargs):
        if threading.get_ident() != self.thread:  # post_execute of a widget message handled on a subshell
            return None
        with _RENDER_LOCK:
            return self.flush(*args, **kwargs)

    def __eq__(self, other) -> bool:
        return other is self or other is self.flush

    def __hash__(self) -> int:
        return hash(self.flush)


def _guard_inline_flush() -> None:
    """Wrap matplotlib-inline's ``post_execute`` hook in the running IPython so that it runs only in the calling
    thread (explorers render in the kernel's main thread) and never overlaps a render. Idempotent; a no-op outside
    IPython or before the inline backend has registered its hook (on the first figure)."""
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import flush_figures
    except ImportError:
        return
    import matplotlib.pyplot as plt

    # matplotlib-inline's hook, and pyplot's own (registered by plt.install_repl_displayhook in interactive mode:
    # it draws every open figure, draw_idle → Agg draw, so on a subshell it drew a render's figure into the same
    # Agg buffer at once: a PNG with the title, legend and upper ticks missing, 31-45 % of the pixels off, seen in
    # the browser harness under load)
    hooks = [flush_figures] + [h for h in (getattr(plt, "_draw_all_if_interactive", None),) if h is not None]
    callbacks = getattr(getattr(get_ipython(), "events", None), "callbacks", {}).get("post_execute", [])
    for i, hook in enumerate(callbacks):
        if any(hook is h for h in hooks):  # identity: a wrapper compares equal to it
            callbacks[i] = _MainThreadFlush(hook, threading.get_ident())


# ---------------------------------------------------------------- controls that move together
def linked_values(links: dict | None, name: str, value, values: dict) -> dict:
    """The controls that change when control ``name`` takes ``value`` (the others at ``values``), by the explorer's
    ``links`` table (see the module doc): ``{other: new value}``, only those whose value changes. A plain value in
    the table is taken; a tuple keeps the current value if it is in the tuple, else takes the tuple's first."""
    out = {}
    for other, want in ((links or {}).get(name, {}).get(value, {})).items():
        allowed = want if isinstance(want, tuple) else (want,)
        if values.get(other) not in allowed:
            out[other] = allowed[0]
    return out


def limited_values(limits: Callable[[dict], dict] | None, values: dict) -> dict:
    """``values`` with each slider that ``limits(values)`` bounds brought back to at most its bound (a new dict)."""
    out = dict(values)
    for name, high in (limits(dict(values)) if limits else {}).items():
        if out[name] > high:
            out[name] = high
    return out


# ---------------------------------------------------------------- the explorer
def _main_loop():
    """The running kernel's main-thread IO loop (tornado), or None outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    kernel = getattr(get_ipython(), "kernel", None)
    return getattr(kernel, "io_loop", None)


class Explorer(W.VBox):
    """Controls above an output area that shows ``render(compute(**values))``; see the module doc for how updates
    run. ``controls`` maps ``compute``'s parameter names to widgets; ``active(values)`` (optional) says which
    controls matter for ``values`` (``{name: bool}``): the others are greyed out. ``links`` (optional): the
    controls a control's new value sets (:func:`linked_values`); ``limits(values)`` (optional): the largest value
    of integer sliders under the other values (:func:`limited_values`)."""

    def __init__(self, controls: dict[str, W.Widget], compute: Callable[..., dict], render: Callable[[dict], None],
                 title: Label | None = None, active: Callable[[dict], dict] | None = None,
                 links: dict | None = None, limits: Callable[[dict], dict] | None = None):
        self.controls, self._compute, self._render, self._active = controls, compute, render, active
        self._links, self._limits = links, limits
        self._adjusting = False              # set while links or limits move controls: their changes are ours
        self.output = W.Output()
        self.status = W.HTML("")             # "⏳ updating… / 更新中…" while pending, empty otherwise
        self.renders = 0                     # how many times the output area was filled
        self._lock = threading.Lock()
        self._queued = False
        self._relabelling = False
        self._title = title
        self._header = W.HTML(self._header_html()) if title else None
        super().__init__(([self._header] if self._header else []) + [W.VBox(list(controls.values())), self.status,
                                                                      self.output])
        self.add_class("distlearn-explorer")
        self._adjust()
        for c in controls.values():
            c.observe(self._changed, names="value")
        self.refresh()
        self.first_outputs = self.output.outputs
        self._forget_language = i18n.on_change(self._language_changed)

    @property
    def title(self) -> str:
        """The title in the current language ("" without one)."""
        return render_label(self._title) if self._title else ""

    def _header_html(self) -> str:
        return f"<b>{html.escape(self.title)}</b>"

    def values(self) -> dict:
        return {name: c.value for name, c in self.controls.items()}

    @property
    def pending(self) -> bool:
        """Whether the output area is marked as not yet showing the controls' values."""
        return PENDING in self.output._dom_classes

    def _mark_pending(self) -> None:
        """Dim the output area and show "updating…" (call with ``self._lock`` held)."""
        self.output.add_class(PENDING)
        note = bi("⏳ updating…", "⏳ 更新中…")
        self.status.value = f'{PENDING_STYLE}<span style="color:#b35900">{html.escape(note)}</span>'

    def _clear_pending(self) -> None:
        """The output shows the newest values again (call with ``self._lock`` held)."""
        self.output.remove_class(PENDING)
        self.status.value = ""

    def _adjust(self, change=None) -> None:
        """Set the controls that ``change`` (a control's value change) links to, then bring every limited slider's
        end (and value) to what the other values allow; the value changes this makes trigger nothing."""
        self._adjusting = True
        try:
            if change is not None and self._links:
                name = next((n for n, c in self.controls.items() if c is change["owner"]), None)
                for other, value in linked_values(self._links, name, change["new"], self.values()).items():
                    self.controls[other].value = value
            if self._limits is not None:
                for name, high in self._limits(self.values()).items():
                    self.controls[name].max = high   # ipywidgets brings a value above it down to it
        finally:
            self._adjusting = False

    def _apply_active(self, values: dict) -> None:
        """Grey out the controls that do not matter for ``values``."""
        if self._active is not None:
            for name, on in self._active(values).items():
                self.controls[name].disabled = not on

    def refresh(self) -> None:
        """Render the current values into the output area, in one assignment (call on the kernel's main thread)."""
        with self._lock:
            self._queued = False
        with _RENDER_LOCK:
            _guard_inline_flush()  # the inline backend registers its hook on the first figure: check each time
            values = self.values()
            self._apply_active(values)
            self.output.outputs = capture(lambda: self._render(self._compute(**values)))
            _guard_inline_flush()
            self.renders += 1
        with self._lock:
            if not self._queued:  # a change during the render queued another: its render clears the mark
                self._clear_pending()

    def relabel(self) -> None:
        """Labels, option labels and title in the current language (values kept), then a refresh. Runs on the
        kernel's main thread; the value changes that relabelling a drop-down makes trigger nothing."""
        with _RENDER_LOCK:
            self._relabelling = True
            try:
                relabel(self.controls)
                if self._header is not None:
                    self._header.value = self._header_html()
            finally:
                self._relabelling = False
        self.refresh()

    def _language_changed(self, _lang: str) -> None:
        loop = _main_loop()
        if loop is None:
            self.relabel()
        else:  # set_language may run in a subshell thread (the switch's button): relabel on the main thread
            with self._lock:
                self._mark_pending()
            loop.add_callback(self.relabel)

    def close(self) -> None:
        self._forget_language()
        super().close()

    def _changed(self, change=None) -> None:
        if self._relabelling or self._adjusting:
            return
        self._adjust(change)               # linked controls and slider ends first: one render of the outcome
        self._apply_active(self.values())  # at once: a control that no longer applies must not look live
        loop = _main_loop()
        if loop is None:  # plain Python: no threads, no front end to race with
            with self._lock:
                self._mark_pending()
            self.refresh()
            return
        with self._lock:
            self._mark_pending()  # (again: a render that finished meanwhile may have cleared it)
            if self._queued:  # a refresh is on its way and will read the newest values
                return
            self._queued = True
        loop.add_callback(self.refresh)

    # -------------------------------------------------------- what a notebook shows without a live kernel
    def static_html(self) -> str:
        """A picture of the first render: a "run this cell" note, the printed text and every figure."""
        note = bi("Static picture of the explorer's first view. Run this cell (and the cells above it) to move "
                  "its controls.", "这是探索器初始状态的静态图。运行本单元格（及其上方的单元格）即可拖动控件。")
        parts = [f'<div class="distlearn-explorer-static"><p><b>{html.escape(self.title)}</b></p>',
                 f'<p style="color:#b35900">▶ {html.escape(note)}</p>']
        for o in self.first_outputs:
            if o["output_type"] == "stream":
                parts.append(f'<pre>{html.escape(o["text"])}</pre>')
            elif "image/png" in o.get("data", {}):
                png = o["data"]["image/png"]
                png = png if isinstance(png, str) else base64.b64encode(png).decode()
                parts.append(f'<img src="data:image/png;base64,{png.strip()}"/>')
        return "\n".join(parts) + "</div>"

    def static_text(self) -> str:
        return bi(f"{self.title} — interactive explorer: run this cell in Jupyter to use it.",
                  f"{self.title}——交互式探索器：在 Jupyter 中运行本单元格即可使用。")

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = self.static_text()
        bundle["text/html"] = self.static_html()
        return bundle


def build(controls: dict[str, W.Widget], compute: Callable[..., dict], render: Callable[[dict], None],
          title: Label | None = None, active: Callable[[dict], dict] | None = None, links: dict | None = None,
          limits: Callable[[dict], dict] | None = None) -> Explorer:
    """Lay out ``controls`` above an output area that shows ``render(compute(**values))`` after every change, and
    again, relabelled, after every language change (:func:`distlearn.set_language`). ``active``, ``links`` and
    ``limits``: see :class:`Explorer` and the module doc."""
    return Explorer(controls, compute, render, title=title, active=active, links=links, limits=limits)


# ---------------------------------------------------------------- values for tests
def _options(control) -> list:
    return list(dict.fromkeys(o[1] if isinstance(o, tuple) else o for o in control.options))


def _extremes(control) -> list:
    if isinstance(control, (W.IntSlider, W.FloatSlider)):
        return [control.min, control.max]
    if isinstance(control, (W.SelectionSlider, W.Dropdown, W.ToggleButtons, W.RadioButtons)):
        return _options(control)  # every option: there are few
    if isinstance(control, W.Checkbox):
        return [False, True]
    return [control.value]


def extreme_settings(controls: dict[str, W.Widget]) -> list[dict]:
    """Value sets for testing: the defaults, then each control at each extreme (or option) with the others at
    their defaults, then every control at its minimum and every control at its maximum together."""
    defaults = {n: c.value for n, c in controls.items()}
    settings = [dict(defaults)]
    for name, control in controls.items():
        for v in _extremes(control):
            settings.append({**defaults, name: v})
    settings.append({n: _extremes(c)[0] for n, c in controls.items()})
    settings.append({n: _extremes(c)[-1] for n, c in controls.items()})
    return settings


def control_range(control) -> list:
    """Minimum, middle and maximum of a control (the distinct ones, in order); a drop-down's or check box's every
    option."""
    if isinstance(control, W.IntSlider):
        lo, hi = control.min, control.max
        mid = lo + ((hi - lo) // 2 // control.step) * control.step
        return list(dict.fromkeys([lo, mid, hi]))
    if isinstance(control, W.FloatSlider):
        lo, hi, step = control.min, control.max, control.step
        mid = round(lo + round((hi - lo) / 2 / step) * step, 10)
        return list(dict.fromkeys([lo, mid, hi]))
    if isinstance(control, W.SelectionSlider):
        opts = _options(control)
        return list(dict.fromkeys([opts[0], opts[len(opts) // 2], opts[-1]]))
    return _extremes(control)


def explorer_modules() -> dict[str, str]:
    """Every chapter explorer of the package: ``{name: module}``, e.g. ``{"pipeline_parallel":
    "distlearn.pipeline_parallel.explorer", "precision.fp8": "distlearn.precision.explorer_fp8", …}``.

    A topic folder's ``explorer.py`` is named after the folder; an ``explorer_<x>.py`` beside it is ``<folder>.<x>``.
    Found by walking the folders (nothing is imported), so a new topic's explorer is listed without editing this.
    """
    import pkgutil

    import distlearn

    found = {}
    for topic in pkgutil.iter_modules(distlearn.__path__):
        if not topic.ispkg:
            continue
        pkg_path = [str(p) for p in distlearn.__path__]
        for sub in pkgutil.iter_modules([f"{p}/{topic.name}" for p in pkg_path]):
            if sub.name == "explorer" and topic.name != "core":
                found[topic.name] = f"distlearn.{topic.name}.explorer"
            elif sub.name.startswith("explorer_"):
                found[f"{topic.name}.{sub.name[len('explorer_'):]}"] = f"distlearn.{topic.name}.{sub.name}"
    return dict(sorted(found.items()))

"""The live language switch: one control at the top of every chapter that shows only the English prose, only the
Chinese, or both, in JupyterLab 4, Notebook 7 and on Binder — and makes outputs, plots, explorers, errors and checker
feedback follow (:func:`distlearn.set_language`).

How it works, with no front-end code of the course's own:

- the JupyterLab 4 extension ``jupyterlab-celltagsclasses`` (a dependency; Notebook 7 loads JupyterLab extensions)
  gives every cell tagged ``lang-en`` the CSS class ``cell-tag-lang-en`` (``lang-zh``: ``cell-tag-lang-zh``);
- the switch is an ipywidgets ``ToggleButtons`` next to a tiny ``HTML`` widget holding one CSS rule, e.g. for
  Chinese ``.jp-Notebook:has(.distlearn-lang-zh) .jp-Cell.cell-tag-lang-en {display: none}``. The marker class
  sits in the widget's own output, so the rule applies to that notebook only, not to others open beside it;
- both widgets are single models shared by every view (every switch on the page, and the output of each
  ``set_language`` call), so all views always show the same choice and there is only ever one rule.

Choosing a language in the switch calls :func:`distlearn.set_language`; calling ``set_language`` in a cell moves the
switch, through the listener this module registers with :func:`distlearn.core.i18n.on_change` when it is imported
(``import distlearn`` imports it), so that i18n never imports this module. Without a kernel (a stored notebook just opened) both languages show until the first cell runs; ``make lab
COURSE_LANG=zh`` and the monolingual copies (``python -m authoring.course split``) open in one language from the start.

In the bilingual copy ``make lab`` opens (``build/course/``, started with ``DISTLEARN_LAB_DIR`` set to it) the switch
also remembers the choice for the next page load (:func:`remember`): JupyterLab's own menus follow (its locale
setting) and every notebook opens with only the chosen language's prose, its title first, before any cell runs (a
``custom.css`` the server loads). Both need a reload of the page; the switch says so.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from distlearn.core import i18n
from distlearn.core.guard import read_only

SWITCH_CLASS = "distlearn-language-switch"  # on the switch's widgets (the output audit skips them: see lang_audit)
OPTIONS = (("English", "en"), ("中文", "zh"), ("English + 中文", "both"))
HIDDEN = read_only({"en": "zh", "zh": "en"})  # the language whose prose cells are hidden


def css(lang: str) -> str:
    """The ``<style>`` (plus its marker) that shows only ``lang``'s prose cells; no rule for ``"both"``."""
    lang = i18n.normalize_language(lang)
    marker = f'<span class="distlearn-lang-{lang}"></span>'
    if lang == "both":
        return marker
    hide = HIDDEN[lang]
    rule = f".jp-Notebook:has(.distlearn-lang-{lang}) .jp-Cell.cell-tag-lang-{hide} {{display: none !important;}}"
    return f"<style>{rule}</style>{marker}"


# JupyterLab's own interface language: the translation extension's "locale" setting, read from
# <settings dir>/@jupyterlab/translation-extension/plugin.jupyterlab-settings (the language pack
# jupyterlab-language-pack-zh-CN is a dependency). authoring.lab writes it for `make lab`, this module when the
# reader chooses a language in the bilingual copy.
LAB_LOCALES = read_only({"en": "en", "zh": "zh_CN"})
LAB_SETTINGS_DIR = ".jupyterlab-settings"    # a copy's JupyterLab settings (JUPYTERLAB_SETTINGS_DIR)
LAB_CUSTOM_DIR = ".jupyterlab-custom"        # a copy's custom.css (JupyterLab's --custom-css)
TRANSLATION_SETTINGS = Path("@jupyterlab", "translation-extension", "plugin.jupyterlab-settings")


def opening_css(lang: str) -> str:
    """The ``custom.css`` of the bilingual copy for a reader who chose ``lang``: a page loaded after the choice
    hides the other language's prose cells in every notebook before its kernel runs, so that a notebook opens
    with its title in ``lang``. A notebook whose switch shows another choice (its marker
    ``distlearn-lang-<other>`` or ``distlearn-lang-both``) follows its switch instead. ``"both"``: no rule."""
    lang = i18n.normalize_language(lang)
    if lang == "both":
        return "/* distlearn: every notebook opens in both languages */\n"
    hide = HIDDEN[lang]
    return (f"/* distlearn: notebooks open in {lang} (the language switch writes this file) */\n"
            f".jp-Notebook:not(:has(.distlearn-lang-{hide}, .distlearn-lang-both)) .jp-Cell.cell-tag-lang-{hide} "
            f"{{display: none !important;}}\n")


def write_lab_language(lang: str, lab_dir) -> list[Path]:
    """Make the bilingual copy ``lab_dir`` open in ``lang`` (``"en"``, ``"zh"`` or ``"both"``) at the next page
    load: the kernels' starting language (``.distlearn-language``, read by
    :func:`~distlearn.core.i18n.remembered_language`), the opening CSS (:func:`opening_css`) and, for one
    language, JupyterLab's locale (``"zh_CN"`` or ``"en"``; ``"both"`` leaves it). Returns the files written."""
    lang = i18n.normalize_language(lang)
    lab_dir = Path(lab_dir)
    files = {lab_dir / i18n.CHOICE_FILE: lang + "\n", lab_dir / LAB_CUSTOM_DIR / "custom.css": opening_css(lang)}
    if lang in LAB_LOCALES:
        files[lab_dir / LAB_SETTINGS_DIR / TRANSLATION_SETTINGS] = json.dumps(
            {"locale": LAB_LOCALES[lang]}, indent=2) + "\n"
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    return list(files)


def reload_note(lang: str) -> str:
    """What the switch says after a choice in the bilingual copy (in ``lang``, the language just chosen)."""
    return {"en": "Reload the page (F5): JupyterLab's menus will then be in English too, and every notebook "
                  "opens in English.",
            "zh": "刷新页面（F5）后，JupyterLab 的菜单也会变成中文，每个笔记本打开时都只显示中文。",
            "both": "Reload the page (F5): every notebook then opens in both languages. / "
                    "刷新页面（F5）后，每个笔记本打开时都显示中英两种语言。"}[i18n.normalize_language(lang)]


_toggle = None   # the one ToggleButtons model of this kernel
_style = None    # the one HTML model holding the rule
_note = None     # the one HTML model saying a reload is needed (bilingual copy of make lab only)
_busy = False    # set while the toggle itself calls set_language


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


# What a notebook shows in place of a widget whose state it does not hold (opened, not yet run): the widget's
# text/plain, by default its repr ("HBox(children=(ToggleButtons(…" , "HTML(value='<style>…"), the first thing a
# reader would see. The switch says what it is; the rule's widget shows nothing.
UNRUN_SWITCH_TEXT = "language switch: run this cell / 语言切换：运行本单元格后显示"


@functools.lru_cache(maxsize=None)
def _widget_classes():
    import ipywidgets as W

    class Style(W.HTML):
        def __repr__(self):
            return ""

    class SwitchBox(W.HBox):
        def __repr__(self):
            return UNRUN_SWITCH_TEXT

    return Style, SwitchBox


def _widgets():
    global _toggle, _style
    if _toggle is None:
        import ipywidgets as W

        Style, _ = _widget_classes()
        _style = Style(css(i18n.get_language()), layout=W.Layout(height="0px", margin="0px"))
        _style.add_class(SWITCH_CLASS)
        _toggle = W.ToggleButtons(options=list(OPTIONS), value=i18n.get_language(), description="",
                                  tooltips=["English only", "只看中文", "English and 中文 / 中英双语"],
                                  style={"button_width": "auto"})
        _toggle.add_class(SWITCH_CLASS)
        _toggle.observe(_on_toggle, names="value")
    return _toggle, _style


def _lab_dir() -> Path | None:
    folder = os.environ.get(i18n.LAB_DIR_ENV, "").strip()
    return Path(folder) if folder else None


def _note_widget():
    """The switch's note (empty until a choice in the bilingual copy of ``make lab``), or None elsewhere."""
    global _note
    if _note is None and _lab_dir() is not None:
        import ipywidgets as W

        _note = W.HTML("")
        _note.add_class(SWITCH_CLASS)
    return _note


def remember(lang: str) -> bool:
    """In the bilingual copy of ``make lab`` (``DISTLEARN_LAB_DIR`` set): store ``lang`` for the next page load
    (:func:`write_lab_language`) if it is not the stored choice already, and say in the switch that a reload is
    needed. Returns whether it wrote; elsewhere does nothing and returns False."""
    lab_dir = _lab_dir()
    if lab_dir is None or i18n.remembered_language() == i18n.normalize_language(lang):
        return False
    write_lab_language(lang, lab_dir)
    note = _note_widget()
    if note is not None:
        note.value = f'<span class="distlearn-reload-note">{reload_note(lang)}</span>'
    return True


def _on_toggle(change) -> None:
    global _busy
    if change["new"] == i18n.get_language():  # moved by set_language itself
        return
    _busy = True
    try:
        i18n.set_language(change["new"])
    finally:
        _busy = False


def on_set_language(lang: str) -> None:
    """Called after every :func:`distlearn.set_language` (an :func:`~distlearn.core.i18n.on_change` listener,
    registered below) with the new ``lang`` (``"en"``, ``"zh"`` or ``"both"``): move the switch and the CSS rule to
    it; in a notebook cell (not from the switch itself) also show the rule in the cell's output, so prose follows
    even with no switch on the page. Does nothing outside a Jupyter kernel."""
    if not _in_kernel():
        return
    toggle, style = _widgets()
    if toggle.value != lang:
        toggle.value = lang
    style.value = css(lang)
    remember(lang)
    if not _busy:
        from IPython.display import display

        display(style)


i18n.on_change(on_set_language)


def switch():
    """The language switch (English / 中文 / English + 中文), set to the current language. Display it in a
    notebook cell; see the module doc."""
    import ipywidgets as W

    toggle, style = _widgets()
    if toggle.value != i18n.get_language():
        toggle.value = i18n.get_language()
    style.value = css(i18n.get_language())
    _, SwitchBox = _widget_classes()
    note = _note_widget()
    box = SwitchBox([toggle, style] + ([note] if note is not None else []))
    box.add_class(SWITCH_CLASS)
    return box

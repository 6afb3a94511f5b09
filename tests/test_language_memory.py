"""The bilingual copy of ``make lab`` remembers the reader's choice in the language switch (issue 34): the next
page load opens every notebook with only the chosen language's prose (its title first) and JupyterLab's menus in
that language. What the files say is checked here; ``tests/test_browser.py`` checks the page in Chromium."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from authoring import lab
from distlearn.core import i18n, language
from distlearn.core.validate import DistlearnValueError

ROOT = Path(__file__).resolve().parents[1]


def test_make_lab_starts_the_bilingual_copy_in_both_languages_and_keeps_a_later_choice(tmp_path):
    env = lab.lab_environment("both", tmp_path)
    assert (tmp_path / i18n.CHOICE_FILE).read_text() == "both\n"
    assert "display" not in (tmp_path / language.LAB_CUSTOM_DIR / "custom.css").read_text()
    assert f"static_custom_path={tmp_path / language.LAB_CUSTOM_DIR}" in " ".join(lab.lab_options("both", tmp_path))
    language.write_lab_language("中文", tmp_path)
    assert lab.lab_environment("both", tmp_path) == env and (tmp_path / i18n.CHOICE_FILE).read_text() == "zh\n"


@pytest.mark.parametrize("lang, hidden, locale", [("zh", "en", "zh_CN"), ("en_US", "zh", "en")])
def test_a_choice_writes_the_opening_css_and_the_locale(tmp_path, lang, hidden, locale):
    written = language.write_lab_language(lang, tmp_path)
    css = (tmp_path / language.LAB_CUSTOM_DIR / "custom.css").read_text()
    assert f".jp-Cell.cell-tag-lang-{hidden} {{display: none !important;}}" in css
    # a notebook whose switch shows the other language or both follows its switch
    assert f":not(:has(.distlearn-lang-{hidden}, .distlearn-lang-both))" in css
    settings = tmp_path / language.LAB_SETTINGS_DIR / language.TRANSLATION_SETTINGS
    assert json.loads(settings.read_text()) == {"locale": locale} and settings in written
    language.write_lab_language("both", tmp_path)  # both: no rule, the locale stays as it was
    assert "display" not in (tmp_path / language.LAB_CUSTOM_DIR / "custom.css").read_text()
    assert json.loads(settings.read_text()) == {"locale": locale}


def _kernel_language(env: dict) -> str:
    code = "import distlearn; print(distlearn.get_language())"
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    return r.stdout.strip() or r.stderr


def test_a_kernel_of_the_copy_starts_in_the_language_chosen_last(tmp_path):
    env = {"DISTLEARN_LANG": "both", i18n.LAB_DIR_ENV: str(tmp_path)}
    assert _kernel_language(env) == "both"  # no choice yet
    language.write_lab_language("zh", tmp_path)
    assert _kernel_language(env) == "zh"
    assert _kernel_language({"DISTLEARN_LANG": "en"}) == "en"  # outside the copy: DISTLEARN_LANG
    (tmp_path / i18n.CHOICE_FILE).write_text("klingon\n")
    err = _kernel_language(env)  # a short bilingual error naming the file
    assert "DistlearnValueError" in err and f"{i18n.CHOICE_FILE} = 'klingon' is not a language" in err
    assert "不是本课程支持的语言" in err


def test_remember_writes_only_in_the_copy_and_only_a_new_choice(tmp_path, monkeypatch):
    monkeypatch.delenv(i18n.LAB_DIR_ENV, raising=False)
    assert language.remember("zh") is False and not list(tmp_path.iterdir())
    monkeypatch.setenv(i18n.LAB_DIR_ENV, str(tmp_path))
    assert language.remember("zh") is True and i18n.remembered_language() == "zh"
    assert language.remember("zh_CN") is False  # already the stored choice
    assert language.remember("en") is True and i18n.remembered_language() == "en"
    with pytest.raises(DistlearnValueError, match="lang"):
        language.remember("fr")


def test_reload_note_is_in_the_language_chosen():
    assert "刷新页面" in language.reload_note("zh") and not i18n._CJK.search(language.reload_note("en"))
    assert "Reload" in language.reload_note("both") and "刷新" in language.reload_note("both")

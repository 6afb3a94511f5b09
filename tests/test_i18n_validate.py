import pytest

import distlearn
from distlearn.core import i18n
from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_number


def test_language_switch():
    t = i18n.text("test.hello", "Hello", "你好")
    try:
        for lang, expected in [("en", "Hello"), ("zh", "你好"), ("both", "Hello / 你好")]:
            distlearn.set_language(lang)
            assert str(t) == expected
        with pytest.raises(ValueError, match="lang"):
            distlearn.set_language("fr")
    finally:
        distlearn.set_language("both")


def test_text_requires_chinese():
    with pytest.raises(ValueError):
        i18n.text("test.bad", "Hello", "Hello")


@pytest.mark.parametrize("value", [0, -3, 2.5, 2.0, "4", True, None])
def test_check_int_names_parameter_and_range_in_both_languages(value):
    with pytest.raises(DistlearnValueError) as info:
        check_int("world_size", value, minimum=1)
    msg = str(info.value)
    assert "world_size" in msg and "≥ 1" in msg and "必须" in msg
    assert info.value.param == "world_size"


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_check_number_refuses_nonfinite_and_out_of_range(value):
    with pytest.raises(DistlearnValueError):
        check_number("bandwidth", value, minimum=0, strict_min=True)


def test_check_choice_lists_choices():
    with pytest.raises(DistlearnValueError, match="'a', 'b'"):
        check_choice("mode", "c", ["a", "b"])



def test_columns_align_by_display_width():
    from distlearn.core.i18n import columns, display_width

    assert display_width("GPU 数") == 6 and display_width("ab") == 2
    en, zh = columns(("GPUs", "MTBF (h)"), (8, 12)), columns(("GPU 数", "MTBF（小时）"), (8, 12))
    assert display_width(en) == display_width(zh) == 21
    assert columns(("x", "y"), (-3, 3)) == "x     y"


def test_an_unrun_switch_shows_what_it_is_not_its_repr():
    """A stored notebook opened without its widget state shows each widget's text/plain: the switch must say what it
    is, and the widget holding the CSS rule nothing — not "HBox(children=(ToggleButtons(…" or "HTML(value='<style>…"."""
    from distlearn.core import language

    Style, SwitchBox = language._widget_classes()
    box = SwitchBox([Style(language.css("zh"))])
    assert box._repr_mimebundle_()["text/plain"] == language.UNRUN_SWITCH_TEXT
    assert "switch" in language.UNRUN_SWITCH_TEXT and "语言切换" in language.UNRUN_SWITCH_TEXT
    assert Style(language.css("zh"))._repr_mimebundle_()["text/plain"] == ""
    assert isinstance(box, __import__("ipywidgets").HBox)          # still the widget the front end draws


def test_source_listing_drops_a_docstring_not_in_the_readers_language():
    from distlearn.core import i18n
    from distlearn.pipeline_parallel import schedules as P

    doc = "The 1F1B order of one stage"
    try:
        i18n.set_language("zh")
        zh = i18n.source(P.reference_1f1b_order)
        i18n.set_language("en")
        en = i18n.source(P.reference_1f1b_order)
        i18n.set_language("both")
        both = i18n.source(P.reference_1f1b_order)
    finally:
        i18n.set_language("both")
    assert doc not in zh and "预热期" in zh and "warmup = min(p - stage - 1, m)" in zh
    assert doc in en and "预热期" not in en and doc in both and "预热期" in both
    compile(zh.replace("\n", "\n"), "<zh listing>", "exec")                # still valid Python without it


def test_yes_no_says_a_truth_value_in_the_readers_language():
    """Chapter 08's seed grid printed Python's True/False under zh (issue 34)."""
    import numpy as np

    try:
        for lang, yes, no in [("en", "yes", "no"), ("zh", "是", "否"), ("both", "yes / 是", "no / 否")]:
            i18n.set_language(lang)
            assert (i18n.yes_no(True), i18n.yes_no(False)) == (yes, no)
            assert i18n.yes_no(np.float64(1.0) < 2.0) == yes          # a NumPy boolean reads the same
        for bad in (1, 0, "True", None, np.array([True, False])):
            with pytest.raises(DistlearnValueError, match="flag"):
                i18n.yes_no(bad)
    finally:
        i18n.set_language("both")

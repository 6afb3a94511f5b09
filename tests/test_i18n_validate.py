import pytest

import distlearn
from distlearn import i18n
from distlearn.validate import DistlearnValueError, check_choice, check_int, check_number


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
    from distlearn.i18n import columns, display_width

    assert display_width("GPU 数") == 6 and display_width("ab") == 2
    en, zh = columns(("GPUs", "MTBF (h)"), (8, 12)), columns(("GPU 数", "MTBF（小时）"), (8, 12))
    assert display_width(en) == display_width(zh) == 21
    assert columns(("x", "y"), (-3, 3)) == "x     y"

"""Exact parameter counts: closed form == the real module on the meta device == published totals."""
import pytest

from distlearn.models import PRESETS, ModelConfig, build_model, count_parameters, get_preset
from distlearn.validate import DistlearnValueError

PUBLISHED = {  # from the model cards / HF configs (sum of parameter tensors)
    "gpt2-small": 124_439_808,
    "gpt2-xl": 1_557_611_200,
    "llama2-7b": 6_738_415_616,
    "llama2-13b": 13_015_864_320,
    "llama2-70b": 68_976_648_192,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3.1-405b": 405_853_388_800,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_counts(name):
    assert PRESETS[name].num_parameters() == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_meta_module_matches_closed_form(name):
    model = build_model(PRESETS[name])  # meta device: no memory
    assert next(model.parameters()).is_meta
    assert count_parameters(model) == PRESETS[name].num_parameters()


def test_gpt3_is_about_175b():
    assert 174e9 < PRESETS["gpt3-175b"].num_parameters() < 176e9


def test_tied_head_is_counted_once():
    c = PRESETS["gpt2-small"]
    assert c.with_(tied_embeddings=False).num_parameters() - c.num_parameters() == c.vocab_size * c.hidden_size


@pytest.mark.parametrize("changes", [dict(hidden_size=0), dict(num_heads=7), dict(num_kv_heads=5),
                                     dict(arch="rnn"), dict(num_layers=2.5)])
def test_bad_configs_raise_bilingual(changes):
    with pytest.raises(DistlearnValueError):
        PRESETS["llama3-8b"].with_(**changes)


def test_unknown_preset():
    with pytest.raises(DistlearnValueError, match="llama3-8b"):
        get_preset("llama9")


def test_small_model_runs_forward_on_cpu():
    import torch
    c = ModelConfig("tiny", "llama", 64, 32, 2, 4, 64, 16, num_kv_heads=2)
    torch.manual_seed(0)
    model = build_model(c, device="cpu")
    out = model(torch.randint(0, 64, (2, 8)))
    assert out.shape == (2, 8, 64)

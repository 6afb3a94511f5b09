"""Exact parameter counts: closed form == the real module on the meta device == published totals."""
import pytest

from distlearn.core.models import MOE_PRESETS, PRESETS, ModelConfig, build_model, count_parameters, get_preset

ALL_PRESETS = {**PRESETS, **MOE_PRESETS}
from distlearn.core.validate import DistlearnValueError

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


@pytest.mark.parametrize("name", sorted(ALL_PRESETS))
def test_meta_module_matches_closed_form(name):
    model = build_model(ALL_PRESETS[name])  # meta device: no memory
    assert next(model.parameters()).is_meta
    assert count_parameters(model) == ALL_PRESETS[name].num_parameters()


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


# ---------------------------------------------------------------- the torch modules are ordinary classes
TORCH_CLASSES = [("distlearn.core.models", n) for n in ("RMSNorm", "Attention", "MLAttention", "MLP", "GroupedExperts", "MoE",
                                                   "MTPModule", "Block", "TransformerLM")] + [
    ("distlearn.seeds.functions", n) for n in ("SeedTransformerBlock", "TransformerBlock", "LargeLM")]


@pytest.mark.parametrize("module, name", TORCH_CLASSES)
def test_torch_classes_are_top_level_and_documented(module, name):
    import importlib
    import inspect
    import pydoc

    mod = importlib.import_module(module)
    cls = getattr(mod, name)                     # lazy re-export, same object as the defining module's class
    assert cls.__qualname__ == name              # not a class defined inside a function (<locals>)
    assert getattr(importlib.import_module(cls.__module__), name) is cls
    assert f"class {name}(" in inspect.getsource(cls)
    assert name in dir(mod)
    assert f"class {name}(" in pydoc.render_doc(mod, renderer=pydoc.plaintext)  # help(module) lists it


def test_from_import_works():
    from distlearn.core.models import Block, TransformerLM
    from distlearn.seeds.functions import LargeLM
    from distlearn.core import transformer
    from distlearn.seeds import models as seed_models

    assert (TransformerLM, Block, LargeLM) == (transformer.TransformerLM, transformer.Block, seed_models.LargeLM)
    with pytest.raises(ImportError):
        from distlearn.core.models import NoSuchModule  # noqa: F401


def _roundtrip(model, x):
    import pickle
    import torch

    clone = pickle.loads(pickle.dumps(model))
    assert type(clone) is type(model)
    assert clone is not model
    sd, sd2 = model.state_dict(), clone.state_dict()
    assert sd.keys() == sd2.keys() and all(torch.equal(sd[k], sd2[k]) for k in sd)
    assert torch.equal(model(x), clone(x))
    return clone


@pytest.mark.parametrize("arch, tied", [("gpt", True), ("llama", False)])
def test_transformer_lm_pickles(arch, tied):
    import torch

    c = ModelConfig("tiny", arch, 64, 32, 2, 4, 64, 16, num_kv_heads=2, tied_embeddings=tied)
    torch.manual_seed(0)
    model = build_model(c, device="cpu").eval()
    clone = _roundtrip(model, torch.randint(0, 64, (2, 8)))
    assert clone.config == c
    assert (clone.lm_head.weight is clone.embed.weight) == tied   # tying survives the round trip


@pytest.mark.parametrize("fixed", [True, False])
def test_seed_large_lm_pickles(fixed):
    import torch
    from distlearn.seeds import functions as seeds

    torch.manual_seed(0)
    model = seeds.build_large_lm(device="cpu", fixed=fixed, vocab_size=50, d_model=16, n_layers=2, nhead=4,
                                 dim_ff=32).eval()
    _roundtrip(model, torch.randint(0, 50, (2, 5)))


def test_importing_distlearn_does_not_import_torch():
    """The lazy re-exports keep ``import distlearn`` (and the torch-free modules, the planner and its
    ``python -m distlearn plan`` among them) from importing torch (~1 s); the first use of a torch class imports it (which shows the check can see torch being imported)."""
    import subprocess
    import sys

    code = ("import sys, distlearn, distlearn.core.models, distlearn.seeds.functions, distlearn.overlap_prefetch.timeline, distlearn.pipeline_parallel.schedules, "
            "distlearn.core.comm, distlearn.planning, distlearn.precision.fp8_recipes, distlearn.precision.formats; "
            "print('torch' in sys.modules); "
            "from distlearn.core.models import TransformerLM; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]

"""Without DeepSpeed installed, the functions that run its code raise a clear bilingual ImportError with the install
command (not a bare ModuleNotFoundError). DeepSpeed's absence is simulated: ``sys.modules["deepspeed"] = None``
makes every ``import deepspeed`` (and ``import deepspeed.x``) fail, as it does when the package is missing."""
import sys

import pytest

from distlearn.deepspeed_fsdp import deepspeed as D


@pytest.fixture
def no_deepspeed(monkeypatch):
    for name in [m for m in sys.modules if m == "deepspeed" or m.startswith("deepspeed.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "deepspeed", None)


@pytest.mark.parametrize("call", [
    lambda: D.verify_claims(),
    lambda: D.validate_config(D.deepspeed_config(micro_batch_size=1, dp=2), dp=2),
    lambda: D.deepspeed_estimate_output(10**9, 10**7, zero_stage=3),
    lambda: D.deepspeed_estimate_output(10**9, zero_stage=2),
])
def test_missing_deepspeed_gives_bilingual_install_hint(no_deepspeed, call):
    with pytest.raises(D.DeepSpeedMissingError) as info:
        call()
    msg = str(info.value)
    assert isinstance(info.value, ImportError)
    assert "pip install deepspeed==0.19.8" in msg and "make lab" in msg
    assert "DeepSpeed is not installed" in msg and "未安装 DeepSpeed" in msg


def test_formulas_and_versions_work_without_deepspeed(no_deepspeed):
    assert D.installed_versions()["deepspeed"] == "not installed"
    assert D.zero2_model_states_mem_needs(10**9, 8, 1, cpu_offload=False)[1] > 0

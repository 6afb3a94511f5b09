"""Records a student builds check their fields when built (issue 33): ``planner.Plan(dp=True, zero_stage=9)`` was
built and refused only by ``evaluate``. Each input record's ``__post_init__`` raises the course's bilingual error
naming the field and its allowed range, as torchtitan's ParallelDims does; the search builds its own plans unchecked
(``Plan.unchecked``), so its inner loop stays arithmetic."""
import dataclasses

import numpy as np
import pytest

from distlearn import planning as P
from distlearn.core.validate import DistlearnValueError
from distlearn.experts.simulation import MoEWeights, RouterSpec
from distlearn.overlap_prefetch.timeline import PREFETCH_MODES, PrefetchMode
from distlearn.planning import setting as SET
from distlearn.precision.formats import FORMATS, FloatFormat
from tests.i18n_helpers import language

BASE = dict(dp=8, tp=1, pp=1)


@pytest.mark.parametrize("field, value, allowed", [
    ("dp", True, "[1, 1048576]"), ("dp", 0, "[1, 1048576]"), ("tp", "2", "[1, 1048576]"), ("pp", 2.0, "[1, 1048576]"),
    ("cp", 10 ** 12, "[1, 1048576]"), ("ep", -1, "[1, 1048576]"), ("zero_stage", 9, "[0, 3]"),
    ("micro_batch_size", None, "[1, 1048576]"), ("num_microbatches", 0, "[1, 1048576]"), ("num_chunks", 0, "[1, 1024]"),
    ("recompute", "some", "'none', 'selective', 'full', 'norm-act'"), ("sequence_parallel", "False", "True or False"),
    ("schedule", "gpipe", "'1f1b', 'zb-h1'"), ("stage_layers", (4, "4"), "tuple of whole numbers"),
    ("stage_layers", 8, "tuple of whole numbers"), ("stage_layers", (), "tuple of whole numbers"),
])
def test_a_plan_checks_every_field_when_built(field, value, allowed):
    with language("en"), pytest.raises(DistlearnValueError) as en:
        P.Plan(**{**BASE, field: value})
    assert en.value.param == field and allowed in str(en.value), str(en.value)
    with language("zh"), pytest.raises(DistlearnValueError) as zh:
        P.Plan(**{**BASE, field: value})
    assert str(zh.value).startswith(field) and any("\u4e00" <= c <= "\u9fff" for c in str(zh.value)), str(zh.value)


def test_the_issues_plan_is_refused_at_once():
    with pytest.raises(DistlearnValueError) as info:
        P.Plan(dp=True, tp=1, pp=1, zero_stage=9)
    assert info.value.param == "dp"
    with pytest.raises(DistlearnValueError) as info:
        P.Plan(dp=8, tp=1, pp=1, zero_stage=9)
    assert info.value.param == "zero_stage" and "[0, 3]" in info.value.en and "范围 [0, 3]" in info.value.zh


def test_a_valid_plan_is_unchanged_and_a_list_of_stage_layers_becomes_a_tuple():
    p = P.Plan(dp=2, tp=2, pp=4, zero_stage=1, recompute="selective", micro_batch_size=2, num_microbatches=8,
               num_chunks=2, stage_layers=[7, 9, 9, 7])
    assert p.stage_layers == (7, 9, 9, 7) and hash(p) == hash(dataclasses.replace(p))
    assert P.Plan.unchecked(*dataclasses.astuple(p)) == p   # the search's plans equal the checked ones
    assert P.Plan.unchecked(0, "x", None, 9, *dataclasses.astuple(p)[4:]).dp == 0   # and are not checked


def test_the_search_still_finds_plans_and_its_plans_pass_the_checks():
    r = P.search("llama3-8b", global_batch=64, seq_len=2048, gpu="h100-80gb", num_gpus=16)
    assert r.plans
    for e in r.plans[:50]:
        SET.check_plan_fields(e.plan)


@pytest.mark.parametrize("make, field", [
    (lambda: FloatFormat("x", 1, 3), "exponent_bits"), (lambda: FloatFormat("x", 4, 0), "mantissa_bits"),
    (lambda: FloatFormat("x", 4, 3, finite_only="yes"), "finite_only"), (lambda: FloatFormat(None, 4, 3), "name"),
    (lambda: FloatFormat("x", 4, 3, storage_bits=4), "storage_bits"),
    (lambda: RouterSpec("softmx", 2), "score"), (lambda: RouterSpec("softmax", 0), "k"),
    (lambda: RouterSpec("softmax", 2, normalize="True"), "normalize"),
    (lambda: RouterSpec("softmax", 2, scale=float("nan")), "scale"),
    (lambda: RouterSpec("sigmoid", 8, True, 2.5, 8, 9), "groups_per_token"),
    (lambda: PrefetchMode(-1, 1, None, "a", "b"), "forward"), (lambda: PrefetchMode(1, 1, 0, "a", "b"), "max_inflight"),
    (lambda: PrefetchMode(1, 1, None, "a", None), "zh"),
])
def test_other_input_records_check_their_fields(make, field):
    with pytest.raises(DistlearnValueError) as info:
        make()
    assert info.value.param == field


def test_the_course_records_still_build():
    assert FORMATS["e4m3"].max == 448 and FORMATS["tf32"].nbytes == 4
    assert RouterSpec("sigmoid", 8, True, 2.5, 8, 4).kwargs()["groups_per_token"] == 4
    assert PREFETCH_MODES


def test_moe_weights_check_shapes_and_values():
    w = MoEWeights.random(4, 8, 16, shared_ffn=4)
    fields = {f.name: getattr(w, f.name) for f in dataclasses.fields(w)}
    same = MoEWeights(**{k: (v.tolist() if v is not None else None) for k, v in fields.items()})  # nested lists too
    assert all(np.array_equal(getattr(same, k), v) for k, v in fields.items() if v is not None)
    for change, field in [({"router": None}, "router"), ({"w_up": np.zeros((4, 16, 9))}, "w_up"),
                          ({"w_down": np.zeros((4, 16, 8))}, "w_down"), ({"shared_up": None}, "shared_gate"),
                          ({"router": np.full((4, 8), np.nan)}, "router"), ({"w_gate": "abc"}, "w_gate"),
                          ({"shared_down": np.zeros((8, 5))}, "shared_down")]:
        with pytest.raises(DistlearnValueError) as info:
            MoEWeights(**{**fields, **change})
        assert info.value.param == field, (change, info.value)

"""Issue 32, fourth audit (chapter 03, "Empty ranks"): an empty rank's mean loss is NaN but autograd's gradient is
zero, so real DDP, which averages over all ranks, silently halves the step with shards 1, 1, 0, 0; a sum loss
divided by the global count (times world_size, to undo DDP's average) gives the one-process gradient.

Every expected number here comes from one process of plain torch autograd, computed in this file: no DDP, no
distlearn arithmetic. The chapter runs ``lab.empty_rank_lab`` on 4 ranks with shards 1, 1, 0, 0 and prints it;
its stored output is checked here (``tests/stored_outputs.py``), and the lab runs once more on another split
(3 ranks, 2, 0, 1) so that a broken lab fails without re-executing the chapter (docs/authoring.md: each lab and
world size once)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch import nn

from distlearn.core import launch
from distlearn.core.validate import DistlearnValueError
from distlearn.data_parallel import lab
from distlearn.data_parallel import simulation as dp


def one_process(sizes, seed=0):
    """Plain torch on one process: (per-shard mean losses, per-shard gradients, whole-batch gradient), the shards
    being consecutive rows of ``lab.make_batch(sum(sizes), seed)``; gradients as name → numpy array."""
    x, y = lab.make_batch(sum(sizes), seed)

    def run(rows):
        model = lab.make_model(seed)
        loss = nn.functional.mse_loss(model(x[rows]), y[rows])
        loss.backward()
        return loss.item(), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}

    starts = np.cumsum([0, *sizes])
    shards = [run(slice(int(a), int(b))) for a, b in zip(starts[:-1], starts[1:])]
    return [l for l, _ in shards], [g for _, g in shards], run(slice(None))[1]


# ---------------------------------------------------------------- the numpy model on an empty batch
def test_linear_mse_model_on_an_empty_batch_equals_autograd():
    rng = np.random.default_rng(3)
    for weight in (rng.standard_normal((5, 3)), rng.standard_normal(5)):
        for batch in (np.zeros((0, 5)), rng.standard_normal((4, 5))):
            w = torch.tensor(weight, requires_grad=True)
            loss_t = (torch.tensor(batch) @ w).pow(2).mean()
            loss_t.backward()
            loss, grad = dp.linear_mse_model(weight)(batch)
            assert grad.shape == w.grad.shape
            np.testing.assert_allclose(grad, w.grad.numpy(), rtol=1e-12, atol=1e-15)
            if len(batch):
                assert loss == pytest.approx(loss_t.item(), rel=1e-12)
            else:
                assert np.isnan(loss) and np.isnan(loss_t.item())
                assert np.all(grad == 0) and np.all(np.isfinite(grad))   # zeros, not 0/0


# ---------------------------------------------------------------- real DDP, another split than the chapter's
def check_lab(per_rank, sizes, tol=1e-6):
    """What is wrong in ``lab.empty_rank_lab``'s results for ``sizes`` against one torch process; [] if nothing."""
    losses, shard_grads, full = one_process(sizes)
    world = len(sizes)
    problems = []
    for r, out in enumerate(per_rank):
        if out["n"] != sizes[r] or out["global_count"] != sum(sizes):
            problems.append(f"rank {r}: n {out['n']}, N {out['global_count']}")
        if sizes[r] == 0 and not np.isnan(out["loss_mean"]):
            problems.append(f"rank {r}: empty, loss {out['loss_mean']} is not NaN")
        if sizes[r] and abs(out["loss_mean"] - losses[r]) > tol:
            problems.append(f"rank {r}: loss {out['loss_mean']} != {losses[r]}")
        for k in full:
            if np.abs(out["local_mean"][k] - shard_grads[r][k]).max() > tol:
                problems.append(f"rank {r}: own gradient of {k}")
            averaged = sum(g[k] for g in shard_grads) / world            # DDP: the sum over ranks / world_size
            if np.abs(out["ddp_mean"][k] - averaged).max() > tol:
                problems.append(f"rank {r}: DDP's mean-loss gradient of {k} is not the average over ranks")
            if np.abs(out["ddp_fix"][k] - full[k]).max() > tol:
                problems.append(f"rank {r}: the fix's gradient of {k} is not the one-process gradient")
    return problems


def test_empty_rank_lab_on_three_ranks_with_shards_2_0_1():
    sizes = (2, 0, 1)
    per_rank = launch.run(lab.empty_rank_lab, 3, sizes)
    assert check_lab(per_rank, sizes) == []
    _, _, full = one_process(sizes)
    g = per_rank[0]["local_mean"]
    assert all(np.all(per_rank[1]["local_mean"][k] == 0) for k in full)      # the empty rank's gradient: zeros
    # without the fix the step is not the one-process step: (g0 + g2) / 3 ≠ (2·g0 + g2) / 3
    assert max(np.abs(per_rank[0]["ddp_mean"][k] - full[k]).max() for k in g) > 1e-3


def test_check_lab_names_a_broken_result():
    sizes = (1, 1, 0, 0)
    _, shard_grads, full = one_process(sizes)
    good = [{"n": n, "global_count": 2, "loss_mean": l, "local_mean": g,
             "ddp_mean": {k: (shard_grads[0][k] + shard_grads[1][k]) / 4 for k in full}, "ddp_fix": full}
            for n, l, g in zip(sizes, one_process(sizes)[0], shard_grads)]
    assert check_lab(good, sizes) == []
    broken = [dict(o, ddp_fix={k: v / 4 for k, v in full.items()}) for o in good]     # fix without × world_size
    assert any("the fix" in p for p in check_lab(broken, sizes))


def test_reference_shard_gradients_equal_plain_torch():
    sizes = (1, 1, 0, 0)
    _, shard_grads, full = one_process(sizes)
    ref = lab.reference_shard_gradients(sizes)
    for k in full:
        np.testing.assert_array_equal(ref["full"][k], full[k])
        for r in range(4):
            np.testing.assert_array_equal(ref["shards"][r][k], shard_grads[r][k])


@pytest.mark.parametrize("sizes", [(1, 1), (1, 1, 0, -1), (0, 0, 0, 0)])
def test_empty_rank_lab_rejects_sizes_that_do_not_fit(sizes):
    with pytest.raises(DistlearnValueError) as err:
        lab.empty_rank_lab(0, 4, sizes)
    assert err.value.param == "sizes" and "sizes" in err.value.en and "sizes" in err.value.zh


# ---------------------------------------------------------------- what chapter 03 stores (4 ranks, 1, 1, 0, 0)
ROW = re.compile(r"^(\d)\s+(\d)\s+(\S+)\s+(\S+)\s*$", re.M)


def chapter_problems(text: str) -> list[str]:
    """What is wrong in chapter 03's printed empty-rank run against one torch process; [] if nothing."""
    sizes = (1, 1, 0, 0)
    losses, shard_grads, full = one_process(sizes)
    rows = ROW.findall(text)
    problems = []
    if [int(r) for r, *_ in rows] != [0, 1, 2, 3]:
        return [f"rows for ranks {[r for r, *_ in rows]}, not 0-3"]
    for r, n, loss, gmax in rows:
        r = int(r)
        want_loss = "NaN" if sizes[r] == 0 else f"{losses[r]:.4f}"
        want_gmax = f"{max(np.abs(g).max() for g in shard_grads[r].values()):.4f}"
        if (int(n), loss, gmax) != (sizes[r], want_loss, want_gmax):
            problems.append(f"rank {r}: printed {n} {loss} {gmax}, torch gives {sizes[r]} {want_loss} {want_gmax}")
    # DDP's gradient with the mean loss is (g_0 + g_1 + 0 + 0) / 4 / DDP 的梯度是 (g_0 + g_1 + 0 + 0) / 4
    ratio = np.concatenate([((shard_grads[0][k] + shard_grads[1][k]) / 4 / full[k]).ravel() for k in full])
    if f"= {np.median(ratio):.4f} (all {ratio.size} entries within 1e-4 of 0.5: True)" not in text:
        problems.append(f"no 'DDP gradient / one-process gradient = {np.median(ratio):.4f}' over {ratio.size} "
                        f"entries, all within 1e-4 of 0.5")
    if "N = 2: max |DDP gradient − one-process gradient| < 1e-6: True" not in text:
        problems.append("the fix is not printed equal to the one-process gradient")
    return problems


def test_chapter03_stores_the_empty_rank_run_torch_computes():
    from stored_outputs import stored_text

    text = stored_text("03_data_parallel", "lab.empty_rank_lab")
    assert chapter_problems(text) == []
    broken = text.replace("0.2658", "0.1329")
    assert any("rank 0" in p for p in chapter_problems(broken))
    assert chapter_problems(text.replace("N = 2: max", "N = 4: max"))

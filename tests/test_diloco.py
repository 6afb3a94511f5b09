"""DiLoCo / local SGD (chapter 13, issue 36): the one-process simulation equals real gloo processes; with H = 1, plain
SGD inside and SGD with lr 1 and no momentum outside it *is* synchronous data parallelism (and with the paper's
outer optimizer it is not); the bytes counted equal P · 8 per all-reduce, every step for DDP (counted by a
communication hook inside torch's DDP) and every H steps for DiLoCo; the chapter's convergence claims; the
exercise checker accepts an independent numpy answer and rejects the typical mistakes."""
import numpy as np
import pytest
import torch

from distlearn.core import check, launch
from distlearn.core.validate import DistlearnValueError
from distlearn.fault_tolerance import check as ch13, diloco as d, lab_diloco as L

P = 8 * 32 + 32 + 32 + 1


def test_parameter_count():
    assert d.num_params() == P == 321


def test_h1_sgd_outer_lr1_is_data_parallelism():
    a = d.simulate(4, 1, 40, "sgd", 0.05, outer_lr=1.0, outer_momentum=0.0)
    b = d.simulate_ddp(4, 40, "sgd", 0.05)
    assert torch.allclose(a.final, b.final, rtol=0, atol=1e-13)
    assert np.allclose(a.eval_loss, b.eval_loss, rtol=1e-12)
    # the check can fail: the paper's outer optimizer, or AdamW inside, is no longer DDP
    c = d.simulate(4, 1, 40, "sgd", 0.05)  # outer Nesterov 0.7 / 0.9
    assert (c.final - b.final).abs().max() > 1e-3
    e = d.simulate(4, 1, 40, "adamw", 0.01, outer_lr=1.0, outer_momentum=0.0)   # averages AdamW *updates*
    f = d.simulate_ddp(4, 40, "adamw", 0.01)                                    # AdamW of the averaged gradient
    assert (e.final - f.final).abs().max() > 1e-3


def test_one_replica_one_round_by_hand():
    """R = 1, H = 3, inner SGD: the pseudo-gradient is η·(g1 + g2 + g3); the outer Nesterov step from a zero buffer
    moves θ by lr·(1 + μ)·Δ. Written without the simulation's loop."""
    data = d.make_data(1)
    m = d.make_model()
    theta0 = torch.nn.utils.parameters_to_vector(m.parameters()).detach().clone()
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        x, y = data.shards[0][0][16 * step:16 * step + 16], data.shards[0][1][16 * step:16 * step + 16]
        torch.mean((m(x) - y) ** 2).backward()
        opt.step()
    delta = theta0 - torch.nn.utils.parameters_to_vector(m.parameters()).detach()
    want = theta0 - 0.7 * (1 + 0.9) * delta
    got = d.simulate(1, 3, 3, "sgd", 0.05).final
    assert torch.allclose(got, want, rtol=0, atol=1e-14)


def test_bytes_counted_in_the_simulation():
    for h in (1, 5, 20):
        run = d.simulate(2, h, 60)
        assert run.sent_bytes[-1] == 60 // h * P * 8
    assert d.simulate_ddp(2, 60).sent_bytes[-1] == 60 * P * 8


def test_bytes_per_step_formula():
    assert d.bytes_per_step(10 ** 9, 2, 8) == pytest.approx(3.5e9)
    assert d.bytes_per_step(10 ** 9, 2, 8, 500) == pytest.approx(7e6)
    assert d.bytes_per_step(P, 8, 4, 20) == pytest.approx(2 * 3 / 4 * P * 8 / 20)
    assert d.bytes_per_step(100, 4, 1) == 0


def test_convergence_claims_of_the_chapter():
    """300 inner steps, 4 replicas, inner AdamW lr 0.01, the paper's outer Nesterov (0.7, 0.9)."""
    ddp = d.simulate_ddp(4, 300, eval_every=20)
    runs = {h: d.simulate(4, h, 300) for h in (1, 5, 20)}
    start = ddp.eval_loss[0]
    assert ddp.eval_loss[-1] < start / 5
    assert runs[20].eval_loss[-1] < 1.1 * ddp.eval_loss[-1]          # matches DDP …
    assert runs[20].sent_bytes[-1] * 20 == ddp.sent_bytes[-1]        # … with 20× fewer bytes
    assert runs[1].eval_loss[-1] > start                             # H = 1 with the paper's outer step diverges
    assert runs[5].eval_loss[-1] > 2 * ddp.eval_loss[-1]


@pytest.mark.parametrize("kwargs", [dict(replicas=0), dict(sync_every=7, steps=20), dict(inner="adam"),
                                    dict(outer_lr=0.0), dict(outer_momentum=1.0), dict(steps=10 ** 6)])
def test_bad_input_names_the_parameter(kwargs):
    with pytest.raises(DistlearnValueError) as err:
        d.simulate(**kwargs)
    assert err.value.param in kwargs


@pytest.mark.slow
def test_gloo_equals_simulation_and_ddp_counts_its_bytes():
    steps = 60
    real = launch.run(L.lab_diloco, 4, 20, steps, timeout=120)
    sim = d.simulate(4, 20, steps)
    for r in real:
        assert torch.allclose(r["final"], sim.final, rtol=0, atol=1e-13)
        assert torch.equal(r["final"], real[0]["final"])
        assert r["calls"] == steps // 20 and r["sent_bytes"] == steps // 20 * P * 8
    ddp = launch.run(L.lab_ddp, 4, steps, timeout=120)
    ddp_sim = d.simulate_ddp(4, steps)
    assert torch.allclose(ddp[0]["final"], ddp_sim.final, rtol=0, atol=1e-13)
    assert ddp[0]["calls"] == steps and ddp[0]["sent_bytes"] == steps * P * 8   # one bucket per step
    # H = 1, SGD inside, SGD lr 1 outside: real DiLoCo processes equal real torch DDP
    a = launch.run(L.lab_diloco, 4, 1, 30, "sgd", 0.05, 1.0, 0.0, timeout=120)
    b = launch.run(L.lab_ddp, 4, 30, "sgd", 0.05, timeout=120)
    assert torch.allclose(a[0]["final"], b[0]["final"], rtol=0, atol=1e-13)


# ---------------------------------------------------------------- the exercise
def _numpy_outer_step(global_params, local_params, momentum_buffer, lr, momentum):
    delta = (global_params - np.asarray(local_params)).mean(axis=0)
    buf = momentum * momentum_buffer + delta
    return global_params - lr * (delta + momentum * buf), buf


def test_checker_accepts_an_independent_answer(capsys):
    ch13.ex13_outer_step(_numpy_outer_step)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [
    lambda g, l, b, lr, mu: _numpy_outer_step(g, 2 * g - np.asarray(l), b, lr, mu),                # local − global
    lambda g, l, b, lr, mu: (g - lr * (mu * b + (g - np.asarray(l)).mean(0)), mu * b + (g - np.asarray(l)).mean(0)),  # no Nesterov
    lambda g, l, b, lr, mu: _numpy_outer_step(g, l, b, lr, mu)[0],                                # buffer missing
    lambda g, l, b, lr, mu: _numpy_outer_step(g, np.asarray(l).sum(0, keepdims=True), b, lr, mu),  # sum, not mean
])
def test_checker_rejects_typical_mistakes(wrong):
    with pytest.raises(check.CheckFailed):
        ch13.ex13_outer_step(wrong)

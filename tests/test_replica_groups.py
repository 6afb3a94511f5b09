"""Fault-tolerant replica groups (chapter 13, issue 36): the planned quora; the one-process replay equals plain data
parallelism when nobody dies; the real run on gloo (a group SIGKILLed, a replacement healed from a live peer) ends
with every group holding the replay's weights, and healing without the optimizer state is caught."""
import pytest
import torch

from distlearn.core.validate import DistlearnValueError
from distlearn.fault_tolerance import diloco, lab_replicas, replicas
from distlearn.fault_tolerance.replicas import Quorum, plan_timeline, replay


def test_planned_quora():
    tl = plan_timeline(3, 12, 1, 4, 8)
    assert [q.members for q in tl] == [(0, 1, 2)] * 4 + [(0, 2)] * 4 + [(0, 1, 2)] * 4
    assert [q.quorum_id for q in tl] == [1] * 4 + [2] * 4 + [3] * 4   # the same members again: still a new quorum
    assert [(q.step, q.heal, q.source) for q in tl if q.heal] == [(8, (1,), 0)]
    assert [q.step for q in tl if q.dead] == [4, 5, 6, 7]
    assert sum(16 * len(q.members) for q in tl) == 16 * (3 * 8 + 2 * 4)  # samples seen: the batch shrinks
    never = plan_timeline(3, 6, 0, 2, 6)                              # rejoin at the end: never
    assert [q.members for q in never][-1] == (1, 2) and not any(q.heal for q in never)
    assert never[-1].source is None


def test_replay_without_failures_is_data_parallelism():
    full = [Quorum(s, (0, 1, 2), 1) for s in range(10)]
    assert torch.allclose(replay(full), diloco.simulate_ddp(3, 10, "adamw", replicas.LR).final, rtol=0, atol=1e-14)
    # the check can fail: a run with a dead group is a different run
    assert (replay(plan_timeline(3, 10, 1, 3, 7)) - replay(full)).abs().max() > 1e-4


@pytest.mark.parametrize("kwargs", [dict(groups=1), dict(kill_group=3), dict(kill_step=0), dict(rejoin_step=4),
                                    dict(rejoin_step=13), dict(steps=10 ** 6)])
def test_bad_plans_name_the_parameter(kwargs):
    with pytest.raises(DistlearnValueError) as err:
        plan_timeline(**kwargs)
    assert err.value.param in kwargs


def test_replay_refuses_what_is_not_a_timeline():
    for bad in ([], [1, 2], "plan"):
        with pytest.raises(DistlearnValueError) as err:
            replay(bad)
        assert err.value.param == "timeline"


@pytest.mark.slow
def test_real_groups_survive_a_kill_and_heal_to_the_replay():
    run = lab_replicas.run_replica_groups(3, 10, 1, 3, 6, timeout=60)
    assert run.timeline == plan_timeline(3, 10, 1, 3, 6)
    assert run.exitcodes == {0: [0], 1: [-9, 0], 2: [0]}              # a real SIGKILL, then a clean replacement
    assert run.steps_done[1] == list(range(6, 10)) and run.steps_done[0] == list(range(10))
    ref = replay(run.timeline)
    for g, final in run.finals.items():
        assert torch.allclose(final, ref, rtol=0, atol=1e-13), g
    # healing the weights but not AdamW's state: the groups drift apart, silently
    bad = lab_replicas.run_replica_groups(3, 10, 1, 3, 6, heal_optimizer=False, timeout=60)
    assert (bad.finals[1] - bad.finals[0]).abs().max() > 1e-4
    assert (bad.finals[0] - ref).abs().max() > 1e-5


# ---------------------------------------------------------------- the exercise
def _by_hand(groups, steps, kill_group, kill_step, rejoin_step):
    out = []
    for s in range(steps):
        members = tuple(g for g in range(groups) if g != kill_group or not kill_step <= s < rejoin_step)
        out.append((members, 16 * len(members)))
    return out


def test_quorum_checker_accepts_an_independent_answer(capsys):
    from distlearn.fault_tolerance import check as ch13

    ch13.ex13_quorum_plan(_by_hand)
    ch13.ex13_quorum_plan(lambda *a: [(list(m), b) for m, b in _by_hand(*a)])   # lists for tuples are fine
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [
    lambda g, n, k, ks, rs: _by_hand(g, n, k, ks + 1, rs),              # dies after the step, not before
    lambda g, n, k, ks, rs: _by_hand(g, n, k, ks, rs + 1),              # rejoins a step late
    lambda g, n, k, ks, rs: [(m, 16 * g) for m, _ in _by_hand(g, n, k, ks, rs)],   # the batch never shrinks
    lambda g, n, k, ks, rs: _by_hand(g, n, k, ks, n),                  # never rejoins
])
def test_quorum_checker_rejects_typical_mistakes(wrong):
    from distlearn.core import check
    from distlearn.fault_tolerance import check as ch13

    with pytest.raises(check.CheckFailed):
        ch13.ex13_quorum_plan(wrong)

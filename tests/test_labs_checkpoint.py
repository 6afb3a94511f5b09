"""Real DCP on gloo: an FSDP2 checkpoint saved from 4 ranks loads exactly into 2 ranks and into one process; bytes
per rank and the folder's metadata; async_save writes the state of the moment it was called. Real kill and
restart: torchrun --max-restarts and distlearn.core.launch both resume a SIGKILLed job from its last checkpoint, and the
losses equal the uninterrupted run's; leaving the RNG or sampler out of the resume is caught.

The torchrun kill and restart is chapter 13's own run (16 steps, rank 1 killed before step 7,
``--max-restarts=1``), checked as the chapter stores it in ``tests/test_stored_runs.py`` rather than started a
second time here."""
import multiprocessing as mp
import shutil

import pytest
import torch

from distlearn.zero_fsdp import simulation as fsdp
from distlearn.core import launch
from distlearn.fault_tolerance import lab
from distlearn.zero_fsdp.lab import tiny_config
from distlearn.core.models import build_model

pytestmark = pytest.mark.slow
# a checkpoint at step 4, the kill before step 7 (steps 5-6 are lost and recomputed), steps 5-8 after the restart:
# every property of the chapter's 16-step run (kill_step 7) with half the steps
STEPS, EVERY, KILL_STEP = 8, 4, 7


@pytest.fixture(scope="module")
def dcp_runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("dcp")
    path, apath = str(d / "ckpt"), str(d / "ckpt_async")
    saved = launch.run(lab.save_sharded, 4, path, 2, apath, timeout=300)
    loaded2 = launch.run(lab.load_resharded, 2, path, timeout=300)
    return {"path": path, "apath": apath, "saved": saved, "loaded2": loaded2,
            "loaded1": lab.load_single_process(path), "loaded1_async": lab.load_single_process(apath)}


def test_reshard_4_to_2_and_to_1_is_exact(dcp_runs):
    full = dcp_runs["saved"][0]["full"]
    assert any(k.startswith("optim.") and k.endswith("exp_avg_sq") for k in full)
    assert lab.states_equal(full, dcp_runs["loaded2"][0]["full"])
    assert lab.states_equal(full, dcp_runs["loaded1"])


def test_equality_check_can_fail(dcp_runs):
    full = dcp_runs["saved"][0]["full"]
    broken = {k: v.clone() for k, v in full.items()}
    w = broken["model.embed.weight"]
    w[3, 5] = torch.nextafter(w[3, 5], torch.tensor(float("inf")))        # one ulp
    assert not lab.states_equal(full, broken)
    fresh = lab.full_state(*_plain_state())
    assert fresh.keys() == full.keys() and not lab.states_equal(full, fresh)


def _plain_state():
    from torch.distributed.checkpoint.state_dict import get_state_dict

    torch.manual_seed(0)
    model = build_model(tiny_config(), device="cpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return get_state_dict(model, opt)


def test_local_shards_follow_dim0_chunking(dcp_runs):
    meta = dict(build_model(tiny_config()).named_parameters())
    for runs, ws in ((dcp_runs["saved"], 4), (dcp_runs["loaded2"], 2)):
        for r in runs:
            assert all(s == fsdp.fsdp2_local_shape(meta[n].shape, ws, r["rank"]) for n, s in r["local_shapes"].items())


def test_bytes_per_rank_and_folder(dcp_runs):
    meta = dict(build_model(tiny_config()).named_parameters())
    rows = {row.name: row for row in lab.folder_report(dcp_runs["path"])}
    assert set(rows) == {".metadata"} | {f"__{r}_0.distcp" for r in range(4)}
    for r in dcp_runs["saved"]:
        expected = sum(3 * 4 * torch.Size(fsdp.fsdp2_local_shape(p.shape, 4, r["rank"])).numel()
                       for p in meta.values())                      # fp32 parameter + two Adam moments
        assert r["sharded_bytes"] == expected
        row = rows[f"__{r['rank']}_0.distcp"]
        assert row.bytes == row.item_bytes > r["sharded_bytes"]      # torch.save framing around each item
    # the chapter's numbers: rank 0 holds only its own shards (37 parameters × parameter and two Adam moments);
    # the replicated items (step counters, parameter groups) were deduplicated onto ranks 1–3; ~1.5 kB per item
    n_params = len(meta)
    assert n_params == 37 and rows["__0_0.distcp"].items == 3 * n_params
    assert all(rows[f"__{r}_0.distcp"].items > 3 * n_params for r in (1, 2, 3))
    framing = (rows["__0_0.distcp"].bytes - dcp_runs["saved"][0]["sharded_bytes"]) / rows["__0_0.distcp"].items
    assert 1400 < framing < 1700
    shape, chunks = lab.saved_chunks(dcp_runs["path"], "model.embed.weight")
    assert shape == (61, 16)
    assert chunks == [((0, 0), (16, 16)), ((16, 0), (16, 16)), ((32, 0), (16, 16)), ((48, 0), (13, 16))]


def test_async_save_is_a_snapshot(dcp_runs):
    r0 = dcp_runs["saved"][0]
    assert all(r["moved_on"] for r in dcp_runs["saved"])                # training changed the weights meanwhile
    assert lab.states_equal(r0["full"], dcp_runs["loaded1_async"])     # the async checkpoint did not


# ---------------------------------------------------------------- kill and restart
@pytest.fixture(scope="module")
def restart_runs(tmp_path_factory):
    """The killed launch.run job first, then one launch running the uninterrupted reference, the rerun of the killed
    job and the two inexact resumes (lab.train_jobs: independent jobs one after another)."""
    d = tmp_path_factory.mktemp("restart")
    ref_final = str(_mk(d / "ref") / "final.pt")
    job = _mk(d / "launch")
    args = (str(job / "ckpt"), str(job / "log.jsonl"), STEPS, EVERY)
    with pytest.raises(launch.WorkerError) as info:
        launch.run(lab.train_job, 2, *args, 1, KILL_STEP, timeout=300)
    crash_log = lab.read_log(str(job / "log.jsonl"))
    orphans = lab.alive(crash_log.pids())
    shutil.copytree(job / "ckpt", d / "omit" / "ckpt")
    shutil.copytree(job / "ckpt", d / "omit_sampler" / "ckpt")
    jobs = [(str(d / "ref" / "ckpt"), str(d / "ref" / "log.jsonl"), STEPS, EVERY, None, None, ref_final),
            args,
            (str(d / "omit" / "ckpt"), str(d / "omit" / "log.jsonl"), STEPS, EVERY, None, None, None, ("rng",)),
            (str(d / "omit_sampler" / "ckpt"), str(d / "omit_sampler" / "log.jsonl"), STEPS, EVERY, None, None,
             None, ("sampler",))]
    per_rank = launch.run(lab.train_jobs, 2, jobs, timeout=300)
    ref, again, omit, omit_sampler = ([r[i] for r in per_rank] for i in range(len(jobs)))
    return {"ref": ref, "ref_final": torch.load(ref_final), "error": info.value, "orphans": orphans,
            "again": again, "omit": omit, "omit_sampler": omit_sampler,
            "launch_log": lab.read_log(str(job / "log.jsonl"))}


def _mk(p):
    p.mkdir(parents=True, exist_ok=True)
    return p


def test_launch_reports_the_killed_rank_leaves_no_orphans_and_reruns(restart_runs):
    err = restart_runs["error"]
    assert err.rank == 1 and err.exc_type == "ProcessExit" and err.exitcode == -9 and "SIGKILL" in str(err)
    assert restart_runs["orphans"] == [] and not mp.active_children()
    again = restart_runs["again"]
    assert [r["resumed_from"] for r in again] == [4, 4]
    assert again[0]["losses"] == restart_runs["ref"][0]["losses"][4:]
    assert restart_runs["launch_log"].curve() == restart_runs["ref"][0]["losses"]


@pytest.mark.parametrize("key", ["omit", "omit_sampler"])
def test_a_resume_without_the_rng_or_the_sampler_is_caught(restart_runs, key):
    ref = restart_runs["ref"][0]["losses"]
    omit = restart_runs[key][0]
    assert omit["resumed_from"] == 4 and len(omit["losses"]) == STEPS - 4
    assert omit["losses"] != ref[4:]


def test_latest_checkpoint_needs_metadata(tmp_path):
    (tmp_path / "step_000008").mkdir()                                  # written by a run killed mid-save
    (tmp_path / "step_000004").mkdir()
    (tmp_path / "step_000004" / ".metadata").write_bytes(b"")
    assert lab.latest_checkpoint(str(tmp_path)) == (4, str(tmp_path / "step_000004"))
    assert lab.latest_checkpoint(str(tmp_path / "none")) == (0, None)

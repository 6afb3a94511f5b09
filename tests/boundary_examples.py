"""One valid call for each public function whose required parameters are arrays, tensors, modules or records
(the property run in tests/test_boundaries.py cannot build those from a parameter's name). Each entry builds
fresh arguments on every call, so a function that changes its input cannot spoil the next call.

The property run then passes each scalar parameter of the call the values a student might type by mistake, as it
does for every other function. Small shapes: the run makes thousands of calls on 2 cores.
"""
from __future__ import annotations

import numpy as np


def _rng(seed: int = 0):
    return np.random.default_rng(seed)


def _qkv(b=1, a=2, s=8, d=4):
    r = _rng()
    return {name: r.standard_normal((b, a, s, d)) for name in ("q", "k", "v")}


def _topo():
    from distlearn.core.topology import make_topology

    return make_topology("h100-80gb")


def _setting():
    from distlearn.core.hardware import make_cluster
    from distlearn.core.models import get_preset
    from distlearn.planning.setting import make_setting

    return make_setting(get_preset("llama3-8b"), make_cluster("h100-80gb", 8), global_batch=8, seq_len=2048)


def _plan(**change):
    from distlearn.planning.setting import Plan

    return Plan(**{"dp": 2, "tp": 2, "pp": 2, "zero_stage": 1, "recompute": "selective", "micro_batch_size": 1,
                   "num_microbatches": 4, **change})


def _quora():
    from distlearn.fault_tolerance.replicas import plan_timeline

    return plan_timeline(groups=3, steps=4, kill_group=1, kill_step=1, rejoin_step=3)


def _sp(**extra):
    return {"st": _setting(), "p": _plan(), **extra}


def _sp_zb():
    return _sp(p=_plan(schedule="zb-h1"))


def _layout():
    from distlearn.nd_parallel.simulation import Layout

    return Layout(pp=2, dp=2, cp=1, tp=2)


def _model():
    from distlearn.core.models import get_preset

    return get_preset("llama3-8b")


def _moe_model():
    from distlearn.core.models import get_moe_preset, MOE_PRESETS

    return get_moe_preset(next(iter(MOE_PRESETS)))


def _torch_mlp():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _gpu():
    from distlearn.core.hardware import get_gpu

    return get_gpu("h100-80gb")


def _fmt():
    from distlearn.precision.formats import get_format

    return get_format("e4m3")


def _t(*shape, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float32)


def _moe_weights():
    from distlearn.experts.simulation import MoEWeights

    return MoEWeights.random(num_experts=4, hidden_size=8, ffn_hidden_size=16)


def _routing():
    from distlearn.experts.simulation import route

    return route(_rng().standard_normal((16, 4)), 2)


def _layer_cost():
    from distlearn.experts.simulation import ep_layer_cost

    return ep_layer_cost(tokens_per_gpu=64, hidden_size=64, expert_ffn_hidden_size=128, k=2, ep=4)


def _overlap():
    from distlearn.overlap_prefetch.timeline import simulate

    return simulate([1.0, 1.0, 1.0], [0.5, 0.5, 0.5])


def _units():
    from distlearn.zero_fsdp.simulation import wrap_units

    return wrap_units(_torch_mlp(), policy="module")


def _traffic():
    from distlearn.nd_parallel.simulation import group_traffic

    return group_traffic(_model(), _layout(), 0, seq_len=2048)


def _shards(tp=2):
    r = _rng()
    x = r.standard_normal((4, 6))
    w = r.standard_normal((6, 8))
    return x, w


def _mlp_args(ndim=2):
    r = _rng()
    h, f, s = 4, 8, 6
    shape = (s, h) if ndim == 2 else (s, 1, h)
    return {"x": r.standard_normal(shape), "w1": r.standard_normal((h, f)), "b1": r.standard_normal(f),
            "w2": r.standard_normal((f, h)), "b2": r.standard_normal(h), "grad_out": r.standard_normal(shape)}


def _attn_args():
    r = _rng()
    h, s = 8, 6
    return {"x": r.standard_normal((s, 1, h)), "wq": r.standard_normal((h, h)), "wk": r.standard_normal((h, h)),
            "wv": r.standard_normal((h, h)), "wo": r.standard_normal((h, h)), "num_heads": 2,
            "grad_out": r.standard_normal((s, 1, h))}


def _vcluster(n=2):
    from distlearn.core.comm import VirtualCluster

    return VirtualCluster(n)


def _col_fwd():
    from distlearn.tensor_parallel.simulation import shard_columns

    x, w = _shards()
    return {"cluster": _vcluster(), "x": [x, x], "w_shards": shard_columns(w, 2)}


def _row_fwd():
    from distlearn.tensor_parallel.simulation import shard_columns, shard_rows

    x, w = _shards()
    return {"cluster": _vcluster(), "x_shards": shard_columns(x, 2, name="d_in"), "w_shards": shard_rows(w, 2)}


CP = "distlearn.context_parallel.simulation"
CPK = "distlearn.context_parallel.packed"
TP = "distlearn.tensor_parallel.simulation"
EX = "distlearn.experts.simulation"
ZF = "distlearn.zero_fsdp.simulation"
MU = "distlearn.zero_fsdp.muon"
ND = "distlearn.nd_parallel.simulation"
DP = "distlearn.data_parallel.simulation"
PS = "distlearn.precision.scaling"
ST = "distlearn.planning.step_time"
PM = "distlearn.planning.memory"
CALLS = {
    "distlearn.precision.measured.probe_products": lambda: {"big_exponent": 14, "K": 4096},
    # ------------------------------------------------------------------ context parallelism (chapter 10)
    f"{CP}.causal_mask": lambda: {"q_pos": np.arange(4), "k_pos": np.arange(4)},
    f"{CPK}.document_ids": lambda: {"lengths": [3, 5]},
    f"{CPK}.document_mask": lambda: {"q_pos": np.arange(4, 8), "k_pos": np.arange(4), "documents": np.repeat([0, 1], 4)},
    f"{CPK}.packed_positions": lambda: {"lengths": [4, 4], "cp": 2},
    f"{CPK}.chunk_mask": lambda: {"q_pos": np.arange(4, 8), "k_pos": np.arange(4), "lengths": [3, 5]},
    f"{CPK}.per_document_attention": lambda: {**_qkv(), "lengths": [4, 4]},
    f"{CPK}.packed_ring_attention": lambda: {**_qkv(), "lengths": [4, 4], "cp": 2},
    f"{CPK}.packed_allgather_attention": lambda: {**_qkv(), "lengths": [4, 4], "cp": 2},
    f"{CPK}.effective_mask": lambda: {"lengths": [4, 4], "cp": 2},
    f"{CPK}.document_work": lambda: {"lengths": [4, 4], "cp": 2},
    f"{CP}.block_attention": lambda: _qkv(),
    f"{CP}.full_attention": lambda: _qkv(),
    f"{CP}.reference_online_attention": lambda: _qkv(),
    f"{CP}.merge_blocks": lambda: {"out_a": np.ones((1, 2, 4, 4)), "lse_a": np.zeros((1, 2, 4)),
                                   "out_b": np.zeros((1, 2, 4, 4)), "lse_b": np.zeros((1, 2, 4))},
    f"{CP}.averaging_merge": lambda: {"out_a": np.ones((1, 2, 4, 4)), "lse_a": np.zeros((1, 2, 4)),
                                      "out_b": np.zeros((1, 2, 4, 4)), "lse_b": np.zeros((1, 2, 4))},
    f"{CP}.layout_chunks": lambda: {"cp": 2, "layout": "zigzag"},
    f"{CP}.ring_attention_forward": lambda: {**_qkv(), "cp": 2},
    f"{CP}.ring_attention_backward": lambda: {**_qkv(), "dout": _rng(1).standard_normal((1, 2, 8, 4)), "cp": 2},
    f"{CP}.ulysses_attention": lambda: {**_qkv(), "cp": 2},
    f"{CP}.attention_flops": lambda: {"pairs": 64, "num_heads": 2, "head_dim": 4},
    f"{CP}.ring_timeline": lambda: {"compute_s": np.ones((2, 2)), "comm_s": 0.5},
    f"{CP}.ring_overlap": lambda: {"tokens_per_rank": 1024, "num_heads": 8, "num_kv_heads": 8, "head_dim": 64,
                                   "flops": 1e14, "bandwidth": 1e11},
    f"{CP}.cp_comm_bytes": lambda: {"variant": "ring", "seq_len": 1024, "num_heads": 8, "num_kv_heads": 8,
                                    "head_dim": 64, "cp": 2},
    f"{CP}.cp_layer_activation_bytes": lambda: {"config": _model(), "seq_len": 2048, "micro_batch_size": 1},
    f"{CP}.cp_model_activation_bytes": lambda: {"config": _model(), "seq_len": 2048, "micro_batch_size": 1},
    f"{CP}.attention_buffer_bytes": lambda: {"variant": "ring", "seq_len": 1024, "num_heads": 8,
                                             "num_kv_heads": 8, "head_dim": 64, "cp": 2},
    f"{CP}.ulysses_extra_bytes": lambda: {"seq_len": 1024, "num_heads": 8, "num_kv_heads": 8, "head_dim": 64,
                                          "cp": 2},
    f"{CP}.attention_cost": lambda: {"variant": "ring", "seq_len": 1024, "num_heads": 8, "num_kv_heads": 8,
                                     "head_dim": 64, "cp": 2, "flops": 1e14, "bandwidth": 1e11},
    # ------------------------------------------------------------------ core
    "distlearn.core.topology.collective_cost": lambda: {"topo": _topo(), "operation": "all_reduce", "nbytes": 1e6,
                                                        "group": 16},
    "distlearn.core.topology.group_placement": lambda: {"topo": _topo(), "ranks": [0, 8]},
    "distlearn.core.topology.per_domain": lambda: {"topo": _topo(), "size": 64, "stride": 1},
    "distlearn.core.topology.best_collective": lambda: {"topo": _topo(), "operation": "all_reduce", "nbytes": 1e6,
                                                        "group": 16},
    "distlearn.core.topology.dispatch_cost": lambda: {"topo": _topo(), "nbytes": 1e6, "copies": 8, "group": 64,
                                                      "max_domains": 4},
    "distlearn.core.topology.placement": lambda: {"topo": _topo(), "model": "llama3-8b", "tp": 2, "dp": 2},
    "distlearn.collectives.hierarchical.simulate_hierarchical_all_reduce": lambda: {
        "arrays": [np.arange(4.0) + r for r in range(4)], "gpus_per_domain": 2},
    "distlearn.core.comm.nccl_average": lambda: {"arrays": [np.ones(4), np.zeros(4)]},
    "distlearn.core.comm.reference_ring_all_reduce": lambda: {"arrays": [np.ones(4), np.arange(4.0)]},
    "distlearn.core.comm.ring_bytes_per_rank": lambda: {"operation": "all_reduce", "nbytes": 1e6, "world_size": 4},
    "distlearn.core.cost.coefficients": lambda: {"algorithm": "ring_all_reduce", "world_size": 4},
    "distlearn.core.cost.collective_time": lambda: {"algorithm": "ring_all_reduce", "nbytes": 1e6,
                                                    "world_size": 4, "alpha": 1e-5, "bandwidth": 1e10},
    "distlearn.core.cost.busbw_factor": lambda: {"operation": "all_reduce", "world_size": 4},
    "distlearn.core.cost.busbw": lambda: {"operation": "all_reduce", "nbytes": 1e6, "seconds": 1e-3,
                                          "world_size": 4},
    "distlearn.core.cost.fit_alpha_beta": lambda: _fit_data(),
    "distlearn.core.cost.fit_two_regime": lambda: _fit_data(),
    "distlearn.core.cost.compare_fits": lambda: _fit_data(),
    "distlearn.core.cost.relative_errors": lambda: _relative_errors(),
    "distlearn.core.hardware.get_gpu": lambda: {"name": "h100-80gb"},
    "distlearn.core.hardware.make_cluster": lambda: {"gpu": "h100-80gb", "num_gpus": 8},
    "distlearn.core.models.get_moe_preset": lambda: {"name": _moe_name()},
    "distlearn.core.models.count_parameters": lambda: {"module": _torch_mlp()},
    "distlearn.core.moe.route": lambda: {"logits": _t(16, 4), "k": 2},
    # ------------------------------------------------------------------ data parallelism (chapter 03)
    f"{DP}.linear_mse_model": lambda: {"weight": np.ones(3)},
    f"{DP}.simulate_data_parallelism": lambda: _dp_data(),
    f"{DP}.data_parallel_loss": lambda: _dp_data(),
    f"{DP}.ddp_gradient": lambda: {"per_sample_grads": _rng().standard_normal((8, 3)), "world_size": 2},
    f"{DP}.sampler_accuracy": lambda: {"correct": [1, 0, 1, 1, 0], "world_size": 2},
    f"{DP}.sync_batchnorm": lambda: {"shards": [_rng(0).standard_normal((4, 3)), _rng(1).standard_normal((4, 3))]},
    f"{DP}.bucket_assignment": lambda: {"param_bytes": [4_000_000, 2_000_000, 1_000_000]},
    f"{DP}.ddp_buckets": lambda: {"param_bytes": [4_000_000, 2_000_000, 1_000_000], "ready_order": [2, 1, 0]},
    # "*": the positional arguments of a function with *args
    f"{DP}.gradient_ready_order": lambda: {"*": (_torch_mlp(), _t(2, 4))},
    f"{DP}.gradient_schedule": lambda: {"*": (_torch_mlp(), _t(2, 4)), "backward_seconds": 1e-3},
    f"{DP}.overlap_timeline": lambda: {"param_bytes": [4_000_000, 2_000_000], "backward_times": [1e-3, 1e-3],
                                       "world_size": 2},
    # ------------------------------------------------------------------ DeepSpeed (chapter 09)
    "distlearn.deepspeed_fsdp.deepspeed.validate_config": lambda: {
        "config": {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1},
        "dp": 2},
    "distlearn.deepspeed_fsdp.deepspeed.zero3_model_states_mem_needs": lambda: {
        "total_params": 1_000_000, "largest_layer_params": 100_000},
    "distlearn.deepspeed_fsdp.deepspeed.estimator_rows": lambda: {"total_params": 1_000_000,
                                                                  "largest_layer_params": 100_000},
    "distlearn.deepspeed_fsdp.deepspeed.deepspeed_estimate_output": lambda: {"total_params": 1_000_000,
                                                                             "largest_layer_params": 100_000},
    "distlearn.deepspeed_fsdp.deepspeed.format_rows": lambda: {"rows": _ds_rows()},
    "distlearn.deepspeed_fsdp.deepspeed.printed_numbers": lambda: {"text": "per CPU  |  per GPU | 1.50GB 0.25GB"},
    "distlearn.deepspeed_fsdp.deepspeed.largest_layer_params": lambda: {"module": _torch_mlp()},
    # ------------------------------------------------------------------ experts (chapter 11)
    f"{EX}.router_spec": lambda: {"config": _moe_model()},
    f"{EX}.limit_groups": lambda: {"scores": _rng().random((8, 4)), "num_groups": 2, "groups_per_token": 1},
    f"{EX}.top_k": lambda: {"scores": _rng().random((8, 4)), "k": 2},
    f"{EX}.keep_within_capacity": lambda: {"index": np.array([[0, 1], [0, 2], [0, 3], [1, 2]]), "num_experts": 4,
                                           "cap": 2, "tokens_per_group": 4},
    f"{EX}.route": lambda: {"logits": _rng().standard_normal((16, 4)), "k": 2},
    f"{EX}.reference_route": lambda: {"logits": _rng().standard_normal((8, 4)).tolist(), "k": 2},
    f"{EX}.swiglu": lambda: {"x": _rng().standard_normal((4, 8)), "w_gate": _rng(1).standard_normal((16, 8)),
                             "w_up": _rng(2).standard_normal((16, 8)), "w_down": _rng(3).standard_normal((8, 16))},
    f"{EX}.moe_forward": lambda: {"x": _rng().standard_normal((16, 8)), "w": _moe_weights(), "routing": _routing()},
    f"{EX}.aux_loss": lambda: _aux(),
    f"{EX}.update_bias": lambda: {"bias": np.zeros(4), "load": np.array([4, 2, 1, 1]), "gamma": 0.01},
    f"{EX}.expert_owner": lambda: {"expert": 3, "num_experts": 8, "ep": 4},
    f"{EX}.split_sizes": lambda: {"routings": [_routing(), _routing()], "num_experts": 4, "ep": 2},
    f"{EX}.simulate_expert_parallel": lambda: {"xs": [_rng(0).standard_normal((8, 8)),
                                                      _rng(1).standard_normal((8, 8))], "w": _moe_weights(), "k": 2},
    f"{EX}.ep_layer_cost": lambda: {"tokens_per_gpu": 64, "hidden_size": 64, "expert_ffn_hidden_size": 128, "k": 2,
                                    "ep": 4},
    f"{EX}.all_to_all_seconds": lambda: {"nbytes": 1e6, "cost": _layer_cost(), "gpu": _gpu()},
    f"{EX}.comm_compute_ratio": lambda: {"cost": _layer_cost(), "gpu": _gpu()},
    f"{EX}.nodes_per_token": lambda: {"routing": _routing(), "experts_per_node": 2},
    f"{EX}.straggler_factor": lambda: {"received": [4, 2, 1, 1]},
    f"{EX}.gpu_loads": lambda: {"load": np.array([4, 2, 1, 1]), "ep": 2},
    f"{EX}.ep_model_state_bytes": lambda: {"config": _moe_model(), "ep": 2, "dp": 2},
    f"{EX}.routed_activation_bytes": lambda: {"received_rows": 64.0, "hidden_size": 64,
                                              "expert_ffn_hidden_size": 128},
    # ------------------------------------------------------------------ fault tolerance (chapter 13)
    "distlearn.fault_tolerance.goodput.rate_per_unit_day": lambda: {"failures": 3, "days": 10.0, "num_units": 8},
    "distlearn.fault_tolerance.goodput.expected_wall_time": lambda: {"work": 10.0, "interval": 1.0,
                                                                     "checkpoint_time": 0.1, "restart_time": 0.1,
                                                                     "mtbf": 10.0},
    "distlearn.fault_tolerance.goodput.simulate_run": lambda: {"work": 10.0, "interval": 1.0, "checkpoint_time": 0.1,
                                                               "restart_time": 0.1, "mtbf": 10.0, "rng": _rng()},
    "distlearn.fault_tolerance.goodput.simulate_goodput": lambda: {"work": 10.0, "interval": 1.0,
                                                                   "checkpoint_time": 0.1, "restart_time": 0.1,
                                                                   "mtbf": 10.0, "runs": 5},
    "distlearn.fault_tolerance.resume.lr_at": lambda: {"step": 2, "lr_schedule": True},
    "distlearn.fault_tolerance.replicas.replay": lambda: {"timeline": _quora()},
    "distlearn.fault_tolerance.diloco.make_data": lambda: {"replicas": 2},
    "distlearn.fault_tolerance.diloco.simulate": lambda: {"replicas": 2, "sync_every": 2, "steps": 4},
    "distlearn.fault_tolerance.diloco.simulate_ddp": lambda: {"replicas": 2, "steps": 4},
    "distlearn.fault_tolerance.diloco.bytes_per_step": lambda: {"num_params": 321, "bytes_per_value": 8,
                                                                "replicas": 4, "sync_every": 20},
    # ------------------------------------------------------------------ memory (chapter 01)
    "distlearn.memory.formulas.to_gb": lambda: {"num_bytes": 2e9},
    "distlearn.memory.formulas.to_gib": lambda: {"num_bytes": 2 ** 31},
    "distlearn.activation_memory.formulas.term_source": lambda: {"name": _term_name()},
    "distlearn.activation_memory.formulas.estimate_memory": lambda: {
        "config": _model(), "seq_len": 2048, "n_gpus": 8, "use_bf16": True, "use_offload": False,
        "use_ckpt": False},
    # ------------------------------------------------------------------ N-D parallelism (chapter 12)
    f"{ND}.coords": lambda: {"rank": 3, "layout": _layout()},
    f"{ND}.rank_of": lambda: {"coordinates": {"pp": 0, "dp": 1, "cp": 0, "tp": 1}, "layout": _layout()},
    f"{ND}.groups": lambda: {"layout": _layout(), "dim": "tp"},
    f"{ND}.group_of": lambda: {"rank": 3, "layout": _layout(), "dim": "dp"},
    f"{ND}.reference_groups": lambda: {"shape": (2, 2, 1, 2), "dim": "tp"},
    f"{ND}.nodes_spanned": lambda: {"layout": _layout(), "dim": "dp", "gpus_per_node": 4},
    f"{ND}.llama3_layout": lambda: {"row": _llama3_row()},
    f"{ND}.stage_parameters": lambda: {"config": _model(), "layout": _layout(), "rank": 0},
    f"{ND}.fsdp_all_gathers": lambda: {"order": "FFFFBBBB", "zero_stage": 3, "pipelined": True},
    f"{ND}.group_traffic": lambda: {"config": _model(), "layout": _layout(), "rank": 0, "seq_len": 2048},
    f"{ND}.bytes_sent_per_step": lambda: {"traffic": _traffic()},
    f"{ND}.calls_by_op": lambda: {"traffic": _traffic()},
    f"{ND}.activation_corrections": lambda: {"config": _model(), "seq_len": 2048, "micro_batch_size": 1, "tp": 2,
                                             "sequence_parallel": True, "activation_bytes": 2},
    f"{ND}.predict_rank_memory": lambda: {"config": _model(), "layout": _layout(), "rank": 0, "seq_len": 2048},
    f"{ND}.layout_from_plan": lambda: {"plan": _plan(zero_stage=2, recompute="none")},
    # ------------------------------------------------------------------ RL post-training (chapter 15)
    "distlearn.post_training.rl_timeline.overheads": lambda: {"setup": _rl_setup()},
    "distlearn.post_training.rl_timeline.steady_step_time": lambda: {"setup": _rl_setup(), "placement": "colocated"},
    "distlearn.post_training.rl_timeline.policy_lag": lambda: {"setup": _rl_setup(), "placement": "disaggregated"},
    "distlearn.post_training.rl_timeline.simulate": lambda: {"setup": _rl_setup(), "placement": "disaggregated"},
    "distlearn.post_training.rl_timeline.compare": lambda: {"setup": _rl_setup()},
    # ------------------------------------------------------------------ overlap and prefetch (chapter 07)
    "distlearn.overlap_prefetch.timeline.simulate": lambda: {"forward": [1.0, 1.0, 1.0],
                                                             "all_gather": [0.5, 0.5, 0.5]},
    "distlearn.overlap_prefetch.timeline.issue_order": lambda: {"result": _overlap()},
    "distlearn.overlap_prefetch.timeline.fsdp2_issue_order": lambda: {"result": _overlap()},
    "distlearn.overlap_prefetch.timeline.issue_order_text": lambda: {
        "events": __import__("distlearn.overlap_prefetch.timeline", fromlist=["x"]).fsdp2_issue_order(_overlap())},
    # ------------------------------------------------------------------ pipeline parallelism (chapter 05)
    "distlearn.pipeline_parallel.schedules.partition_by_cost": lambda: {"layer_costs": [1.0, 2.0, 1.0, 1.0],
                                                                        "num_stages": 2},
    "distlearn.pipeline_parallel.schedules.stage_costs": lambda: {"layer_costs": [1.0, 2.0, 1.0, 1.0],
                                                                  "sizes": [2, 2]},
    "distlearn.pipeline_parallel.schedules.split_microbatches": lambda: {"batch": list(range(8)),
                                                                         "num_microbatches": 4},
    "distlearn.pipeline_parallel.schedules.microbatch_loss": lambda: {"per_sample_losses": [1.0, 2.0, 3.0, 4.0],
                                                                      "num_microbatches": 2},
    "distlearn.pipeline_parallel.schedules.peak_inflight_weighted": lambda: {
        "schedule": "1f1b", "num_stages": 2, "num_microbatches": 4, "chunk_weights": [[1.0], [1.0]]},
    "distlearn.pipeline_parallel.schedules.microbatch_tradeoff": lambda: {
        "global_batch": 16, "num_stages": 2, "num_microbatches_options": [2, 4, 8]},
    "distlearn.pipeline_parallel.timeline.per_stage_costs": lambda: {"name": "forward", "value": 1.0, "p": 4},
    "distlearn.pipeline_parallel.zero_bubble.chunks_per_rank": lambda: {"schedule": "zb-h1"},
    "distlearn.pipeline_parallel.zero_bubble.time_divisor": lambda: {"schedule": "zb-h1"},
    "distlearn.pipeline_parallel.zero_bubble.virtual_stage": lambda: {"schedule": "zb-h1", "rank": 1, "chunk": 0,
                                                                      "num_ranks": 4},
    "distlearn.pipeline_parallel.zero_bubble.rank_ops": lambda: {"schedule": "zb-h1", "rank": 0, "num_stages": 4,
                                                                 "num_microbatches": 8},
    "distlearn.pipeline_parallel.zero_bubble.greedy_orders": lambda: {"num_stages": 4, "num_microbatches": 8,
                                                                      "fwd_time": 1.0, "input_time": 1.0,
                                                                      "wgrad_time": 1.0},
    "distlearn.pipeline_parallel.zero_bubble.check_costs": lambda: {"fwd_time": 1.0, "bwd_time": 2.0,
                                                                    "wgrad_time": None, "overlap_time": None,
                                                                    "p": 4},
    "distlearn.pipeline_parallel.zero_bubble.simulate": lambda: {"schedule": "zb-h1", "num_stages": 4,
                                                                 "num_microbatches": 8},
    "distlearn.pipeline_parallel.zero_bubble.simulate_steps": lambda: {"schedule": "zb-h1", "num_stages": 4,
                                                                       "num_microbatches": 8},
    "distlearn.pipeline_parallel.zero_bubble.step_time_closed_form": lambda: {
        "schedule": "zb-h1", "num_stages": 4, "num_microbatches": 8, "optimizer_sync": True},
    # ------------------------------------------------------------------ the planner (chapter 14)
    "distlearn.planning.command_line.display_width": lambda: {"text": "数据 parallel"},
    "distlearn.planning.command_line.share": lambda: {"text": "0.4"},
    "distlearn.planning.command_line.recompute_modes": lambda: {"text": "full,selective"},
    "distlearn.planning.command_line.overlap_flags": lambda: {"text": "tp_comm,grad_reduce"},
    "distlearn.planning.run_files.load_runs": lambda: {"path": "examples/private_run.json"},
    "distlearn.planning.run_files.run_from_json": lambda: {"obj": {
        "model": "llama3-8b", "gpu": "h100-80gb", "num_gpus": 8, "global_batch": 64, "seq_len": 4096,
        "precision": "mixed", "count": "model-causal", "plan": {"dp": 8, "tp": 1, "pp": 1},
        "published_tokens_per_gpu": 8000.0}, "where": "run"},
    "distlearn.planning.run_files.summarize": lambda: {"ratios": {"a": 1.02, "b": 0.85}},
    "distlearn.planning.calibration.median_error": lambda: {"ratios": [1.02, 0.85, 1.1]},
    "distlearn.planning.run_files.parser": lambda: {},
    "distlearn.planning.run_files.cli": lambda: {"argv": ["examples/private_run.json"]},
    "distlearn.planning.command_line.format_table": lambda: {"plans": _plans()},
    "distlearn.planning.command_line.cli": lambda: {"argv": ["--model", "llama3-8b", "--gpus", "8", "--top", "1"]},
    "distlearn.planning.evaluation.estimate": lambda: _sp(),
    "distlearn.planning.evaluation.evaluate": lambda: {"model": "llama3-8b", "plan": _plan(), "global_batch": 8,
                                                       "seq_len": 2048, "gpu": "h100-80gb"},
    "distlearn.planning.evaluation.validate_plan": lambda: _validate_plan_args(),
    "distlearn.planning.evaluation.validate_plan_layout": lambda: _validate_plan_args(),
    "distlearn.planning.evaluation.validate_plan_fields": lambda: {"p": _plan()},
    "distlearn.planning.flops.forward_flops": lambda: {"model": _model(), "num_sequences": 1, "seq_len": 256},
    "distlearn.planning.flops.step_flops": lambda: {"model": _model(), "num_sequences": 1, "seq_len": 256},
    "distlearn.planning.measured.predicted_seconds": lambda: {"m": 4096, "n": 1280, "k": 8192, "kind": "bf16"},
    "distlearn.planning.measured.gemm_table": lambda: {"kind": "fp8_rowwise_fast", "square": True},
    "distlearn.planning.measured.layer_curve": lambda: {"model": "llama3-8b", "kind": "bf16"},
    "distlearn.planning.measured.best_share": lambda: {"kind": "bf16"},
    "distlearn.planning.measured.peak": lambda: {"kind": "fp8_tensorwise"},
    "distlearn.planning.measured.block_comparison": lambda: {"name": "8b s4096"},
    "distlearn.planning.flops.measured_flops": lambda: {"model": _tiny_model(), "num_sequences": 1, "seq_len": 16},
    "distlearn.planning.flops.megatron_flops": lambda: {"model": _model(), "batch": 1, "seq_len": 256},
    "distlearn.planning.flops.flops_of_step": lambda: {
        "forward": __import__("distlearn.planning.flops", fromlist=["x"]).forward_flops(_model(), 1, 256),
        "recompute": "full"},
    "distlearn.planning.flops.compute_peak": lambda: {"gpu": _gpu(), "precision": "mixed"},
    "distlearn.planning.flops.matmul_peak": lambda: {"gpu": _gpu(), "precision": "mixed"},
    "distlearn.planning.kernels.gpu_family": lambda: {"gpu": _gpu()},
    "distlearn.planning.kernels.gemm_seconds": lambda: {"g": _gemm(), "peak": 1e15, "ceiling": 0.8,
                                                        "hbm_bw": 3e12},
    "distlearn.planning.kernels.attention_gemms": lambda: {"model": _model(), "micro_batch": 1, "seq_len": 2048,
                                                           "tp": 2},
    "distlearn.planning.kernels.elementwise_ops": lambda: {"model": _model(), "micro_batch": 1, "tokens": 2048.0,
                                                           "tp": 2, "sequence_parallel": True,
                                                           "attention": "materialised", "seq_len": 2048},
    "distlearn.planning.kernels.layer_seconds": lambda: {"model": _model(), "gpu": _gpu(), "micro_batch": 1,
                                                         "seq_len": 2048, "tp": 2, "gemm_peak": 7e14, "peak": 9e14},
    "distlearn.planning.kernels.logits_seconds": lambda: {"model": _model(), "gpu": _gpu(), "tokens": 2048.0,
                                                          "tp": 2, "peak": 9e14},
    f"{PM}.chunk_layers": lambda: {"stage_layers": (4, 4), "num_chunks": 2},
    f"{PM}.stage_peak_layers": lambda: {"pp": 2, "num_microbatches": 4, "num_chunks": 1, "stage_layers": (4, 4)},
    f"{PM}.candidate_stages": lambda: {"sizes": [16, 16]},
    f"{PM}.candidate_rows": lambda: _sp(),
    f"{PM}.stage_states": lambda: _sp(stages=_candidate_rows()),
    f"{PM}.stage_activations": lambda: _sp(stages=_candidate_rows()),
    f"{PM}.stage_inflight": lambda: _sp(row=_candidate_rows()[0], peaks=_peaks),  # peaks(): a function
    f"{PM}.held_zero_stage": lambda: _sp(),
    f"{PM}.memory_parts": lambda: _sp(),
    f"{PM}.plan_memory": lambda: _sp(),
    f"{PM}.memory_total": lambda: _sp(),
    "distlearn.planning.published.run_cluster": lambda: {"run": _published_run()},
    "distlearn.planning.published.compare_published": lambda: {"name": _published_name()},
    "distlearn.planning.published.run_source": lambda: {"name": _published_name()},
    "distlearn.planning.published.run_reading": lambda: {"name": _published_name()},
    "distlearn.planning.published.memory_readings": lambda: {"name": "llama3-405b-8k-gpus"},
    "distlearn.planning.calibration.compare_run": lambda: {"run": _published_run()},
    "distlearn.planning.calibration.check_run": lambda: {"run": _published_run()},
    "distlearn.planning.calibration.run_options": lambda: {"run": _published_run()},
    "distlearn.planning.calibration.run_model": lambda: {"run": _published_run()},
    "distlearn.planning.calibration.run_setting": lambda: {"run": _published_run()},
    "distlearn.planning.calibration.calibrate": lambda: {"runs": ("megatron-gpt-1.7b",)},
    "distlearn.planning.calibration.family": lambda: {"name": "megatron-gpt-7.5b"},
    "distlearn.planning.calibration.with_end_to_end": lambda: {"value": 0.8},
    "distlearn.planning.kernels.end_to_end_as": lambda: {"value": 0.8},
    "distlearn.planning.rooflines.link_bandwidth": lambda: {"gpu": "h100-80gb", "link": "nvlink"},
    "distlearn.planning.rooflines.roofline": lambda: {"kind": "tp", "gpu": "h100-80gb", "model": _model()},
    "distlearn.planning.setting.stage_starts": lambda: {"sizes": [4, 4]},
    "distlearn.planning.setting.resolve": lambda: {"model": "llama3-8b", "gpu": "h100-80gb", "num_gpus": 8,
                                                   "cluster": None},
    "distlearn.planning.setting.check_plan_fields": lambda: {"p": _plan()},
    "distlearn.planning.setting.check_setting_plan": lambda: _sp(),
    f"{ST}.plan_bubble": lambda: {"p": _plan(num_chunks=1)},
    f"{ST}.schedule_costs": lambda: {"st": _setting(), "recompute": "selective"},
    f"{ST}.stage_kinds": lambda: {"st": _setting(), "sizes": [16, 16]},
    f"{ST}.layer_parts": lambda: {"ls": _layer_seconds(), "n": 4, "recompute": "selective"},
    f"{ST}.with_unmodelled": lambda: {"parts": {"compute": 1.0, "tp": 0.1}},
    f"{ST}.partial_sum": lambda: {"terms": {"compute": 1.0, "tp": 0.1}},
    f"{ST}.schedule_simulation": _sp_zb,
    # cp_seconds returns 0 for cp = 1 before it calls this one
    f"{ST}.cp_layer_seconds": lambda: _sp(p=_plan(dp=1, cp=2)),
    f"{ST}.all_to_all_bytes": lambda: {"st": _setting()},
    f"{ST}.kernel_model": lambda: {"st": _setting()},
    f"{ST}.tp_exposed_seconds": lambda: {**_sp(), "t_ar": 1e-3, "layers": 4},
    **{f"{ST}.{name}": _sp for name in (
        "bubble_share", "zero_bubble_terms", "schedule_bubble_ratio",
        "microbatch_compute_seconds", "tp_overlap_seconds", "layer_units", "kernel_stage_parts", "logit_seconds",
        "dense_stage_parts",
        "moe_stage_parts", "flat_compute_seconds", "ep_seconds", "cp_seconds",
        "microbatch_terms", "microbatch_lower_bound", "pipeline_terms", "microbatch_seconds", "one_f_one_b_terms",
        "step_seconds_lower_bound", "plan_time", "plan_seconds", "dp_term", "dp_seconds", "ineffective_options")},
    # ------------------------------------------------------------------ precision (chapter 01's formats, 08)
    "distlearn.precision.formats.get_format": lambda: {"name": "e4m3"},
    "distlearn.precision.formats.reference_decode": lambda: {"fmt": _fmt(), "code": 0x38},
    "distlearn.precision.formats.decode_all": lambda: {"fmt": _fmt()},
    "distlearn.precision.fp8_recipes.dtype_bytes": lambda: {"dtype": "bf16"},
    "distlearn.precision.fp8_recipes.get_recipe": lambda: {"key": _recipe_key()},
    "distlearn.precision.fp8_recipes.bytes_per_param": lambda: {"recipe": _recipe_key()},
    "distlearn.precision.fp8_recipes.fp8_transpose_kept": lambda: {"gpu_name": "b200"},
    "distlearn.precision.fp8_recipes.recipe_state_bytes": lambda: {"recipe": _recipe_key(), "num_params": 1_000_000},
    "distlearn.precision.fp8_recipes.fp8_activation_table": lambda: {"recipe": _recipe_key(), "seq_len": 2048,
                                                                     "micro_batch_size": 1, "hidden_size": 1024,
                                                                     "num_heads": 16},
    "distlearn.precision.fp8_recipes.config_layer_fp8_bytes": lambda: {"config": _model(), "recipe": _recipe_key(),
                                                                       "seq_len": 2048, "micro_batch_size": 1},
    **{f"distlearn.precision.block_scaled.{name}": (lambda: {"x": _rng().standard_normal((2, 32))}) for name in (
        "quantize_mx", "quantize_nvfp4", "error_vs_block_size")},
    **{f"distlearn.precision.block_scaled.{name}": (lambda: {"x": _rng().standard_normal(32)}) for name in (
        "encode", "round_to", "nvfp4_tensor_scale", "float32_values")},   # any shape
    "distlearn.precision.block_scaled.quantize_fp8": lambda: {"x": _rng().standard_normal((2, 128))},
    "distlearn.precision.block_scaled.error_point": lambda: {"x": _rng().standard_normal((2, 32)), "scheme": "nvfp4"},
    "distlearn.precision.block_scaled.bits_per_element": lambda: {"scheme": "mxfp8"},
    "distlearn.precision.block_scaled.get_format_recipe": lambda: {"key": "mxfp8"},
    "distlearn.precision.block_scaled.layer_bytes": lambda: {"recipe": "nvfp4"},
    "distlearn.precision.block_scaled.quantize": lambda: {"x": _rng().standard_normal((2, 32)), "scheme": "mxfp8"},
    "distlearn.precision.block_scaled.decode": lambda: {"codes": np.arange(16, dtype=np.uint8)},
    "distlearn.precision.block_scaled.mx_scale_exponent": lambda: {"amax": np.array([1.0, 448.0])},
    "distlearn.precision.block_scaled.mx_scale_exponent_rceil": lambda: {"amax": np.array([1.0, 448.0])},
    "distlearn.precision.block_scaled.accumulate": lambda: {"products": _rng().standard_normal((2, 16)),
                                                            "promote_every": 4},
    "distlearn.precision.pictures.block_row_picture": lambda: {"row": _rng().standard_normal(64)},
    "distlearn.precision.block_scaled.e8m0_code": lambda: {"exponent": np.array([-3, 0, 4])},
    "distlearn.precision.block_scaled.relative_error": lambda: (lambda x: {"x": x, "q": __import__(
        "distlearn.precision.block_scaled", fromlist=["quantize_mx"]).quantize_mx(x)})(_rng().standard_normal((2, 32))),
    f"{PS}.torch_decode_all": lambda: {"fmt": _fmt()},
    f"{PS}.finfo_comparison": lambda: {"fmt": _fmt()},
    f"{PS}.round_mantissa": lambda: {"x": _t(8), "mantissa_bits": 3},
    f"{PS}.fp8_dtype": lambda: {"fmt": "e4m3"},
    f"{PS}.cast_saturated": lambda: {"x": _t(8), "scale": __import__("torch").tensor(1.0)},
    f"{PS}.quantize_tensorwise": lambda: {"x": _t(4, 8)},
    f"{PS}.quantize_blockwise": lambda: {"x": _t(4, 8), "block": (1, 4)},
    f"{PS}.reference_quantize_blockwise": lambda: {"x": _t(4, 8), "block": (1, 4)},
    f"{PS}.quantize_operands": lambda: {"x": _t(4, 8), "w": _t(8, 8, seed=1), "scheme": "tensorwise"},
    f"{PS}.gemm_error": lambda: {"x": _t(4, 8), "w": _t(8, 8, seed=1), "scheme": "tensorwise"},
    f"{PS}.gemm_errors": lambda: {"x": _t(4, 8), "w": _t(8, 8, seed=1), "schemes": ("bf16", "tensorwise")},
    f"{PS}.compare_scaling_over_steps": lambda: {"tensors": [_t(8, seed=i) for i in range(3)]},
    f"{PS}.update_scale": lambda: {"scale": 1024.0, "growth_tracker": 0, "found_inf": False},
    f"{PS}.scale_sequence": lambda: {"found_inf": [False, True, False]},
    f"{PS}.fp16_gradients": lambda: {"grad": _t(8), "scale": 1024.0},
    f"{PS}.simulate_loss_scaling": lambda: {"grads": [_t(8, seed=i) for i in range(3)]},
    f"{PS}.run_gradscaler": lambda: {"grads": [_t(8, seed=i) for i in range(3)]},
    # ------------------------------------------------------------------ tensor parallelism (chapter 04)
    f"{TP}.comm_counts": lambda: {"records": _tp_records()},
    f"{TP}.comm_text": lambda: {"counts": __import__(TP, fromlist=["x"]).comm_counts(_tp_records())},
    f"{TP}.shard_columns": lambda: {"w": np.ones((4, 8)), "tp": 2},
    f"{TP}.shard_rows": lambda: {"w": np.ones((8, 4)), "tp": 2},
    f"{TP}.column_parallel_forward": _col_fwd,
    f"{TP}.column_parallel_backward": lambda: {**_col_fwd(), "grad_out": [np.ones((4, 4)), np.ones((4, 4))]},
    f"{TP}.row_parallel_forward": _row_fwd,
    f"{TP}.row_parallel_backward": lambda: {**_row_fwd(), "grad_out": [np.ones((4, 8)), np.ones((4, 8))]},
    f"{TP}.simulate_tensor_parallelism": lambda: {"input_data": np.ones((4, 6)), "weight_matrix": np.ones((6, 8)),
                                                  "tp": 2},
    f"{TP}.reference_mlp": _mlp_args,
    f"{TP}.megatron_mlp": lambda: {**_mlp_args(), "tp": 2},
    f"{TP}.reference_attention": _attn_args,
    f"{TP}.parallel_attention": lambda: {**_attn_args(), "tp": 2},
    f"{TP}.reference_mlp_block": lambda: {**_mlp_args(3), "gamma": np.ones(4), "beta": np.zeros(4)},
    f"{TP}.sequence_parallel_mlp_block": lambda: {**_mlp_args(3), "gamma": np.ones(4), "beta": np.zeros(4), "tp": 2},
    f"{TP}.sp_saved_bytes": lambda: {"unsharded_bytes": 1000, "tp": 2, "gathered_bytes": 200},
    # ------------------------------------------------------------------ ZeRO and FSDP (chapter 06)
    f"{ZF}.flatten_and_shard": lambda: {"params": [np.ones((2, 3)), np.ones(5)], "world_size": 2},
    f"{ZF}.reference_flat_shard": lambda: {"params": [_t(2, 3), _t(5)], "world_size": 2, "rank": 0},
    f"{ZF}.gather_flat": lambda: _flat_shards(),
    f"{ZF}.reference_flat_gather": lambda: _flat_shards(torch=True),
    f"{ZF}.fsdp2_local_shape": lambda: {"shape": (5, 3), "world_size": 2, "rank": 1},
    f"{ZF}.fsdp2_local_numel": lambda: {"module": _torch_mlp(), "world_size": 2, "rank": 1},
    f"{ZF}.wrap_units": lambda: {"model": _torch_mlp()},
    f"{ZF}.unit_table": lambda: {"units": _units(), "world_size": 2},
    f"{ZF}.peak_unsharded_bytes": lambda: {"units": _units()},
    f"{ZF}.tied_parameter_splits": lambda: {"model": _torch_mlp(), "units": _units()},
    f"{ZF}.train_unsharded": lambda: {"model": _mlp_units(), "xs": [[_rng(i).standard_normal((4, 4))] for i in range(2)],
                                      "ys": [[_rng(9 + i).standard_normal((4, 2))] for i in range(2)], "steps": 2},
    "distlearn.zero_fsdp.traffic.element_differences": lambda: {"measured": {"all_gather": 10},
                                                                "predicted": {"all_gather": 10}},
    "distlearn.zero_fsdp.traffic.verdict": lambda: {"measured": {"all_gather": 10}, "predicted": {"all_gather": 10}},
    # chapter 15: generation and resharding
    "distlearn.post_training.generation.decode_intensity": lambda: {"num_params": 1e9, "batch": 8, "context_len": 128,
                                                                    "kv_bytes_per_token": 1024.0},
    "distlearn.post_training.kv_cache.generate": lambda: {"model": _tiny_lm(), "prompt": _tokens(), "new_tokens": 2},
    "distlearn.post_training.resharding.chunk": lambda: {"size": 16, "parts": 4, "index": 1},
    "distlearn.post_training.resharding.held": lambda: {"weight": _weight(), "world_size": 4, "rank": 1},
    "distlearn.post_training.resharding.needed": lambda: {"weight": _weight(), "world_size": 4, "tp": 2, "rank": 1},
    "distlearn.post_training.resharding.plan": lambda: {"weights": [_weight(), _weight("row")], "world_size": 4,
                                                        "tp": 2, "source": 1},
    "distlearn.post_training.resharding.received": lambda: {"weight": _weight(), "world_size": 4, "tp": 2, "rank": 1},
    "distlearn.post_training.resharding.sent": lambda: {"weight": _weight("row"), "world_size": 4, "tp": 2, "rank": 1},
    "distlearn.post_training.resharding.closed_form_received": lambda: {"weight": _weight(), "world_size": 4, "tp": 2,
                                                                        "rank": 1},
    "distlearn.post_training.resharding.all_gather_received": lambda: {"weight": _weight(), "world_size": 4,
                                                                       "rank": 1},
    # ------------------------------------------------------------------ Muon (chapter 06)
    f"{MU}.newton_schulz": lambda: {"g": _rng().standard_normal((4, 3))},
    f"{MU}.newton_schulz_torch": lambda: {"g": _t(4, 3)},
    f"{MU}.ns_polynomial": lambda: {"x": np.linspace(0.01, 1.0, 5)},
    f"{MU}.ns_output_range": lambda: {"lo": 0.01, "steps": 5, "points": 101},
    f"{MU}.update_scale": lambda: {"rows": 40, "cols": 16, "rule": "moonlight"},
    f"{MU}.muon_update": lambda: {"grad": np.ones((3, 2)), "momentum": np.zeros((3, 2))},
    f"{MU}.shardwise_newton_schulz": lambda: {"g": _rng().standard_normal((5, 3)), "world_size": 2},
    f"{MU}.owner_of": lambda: {"index": 5, "world_size": 4},
    f"{MU}.step_traffic": lambda: {"shapes": [(5, 3), (4, 4)], "world_size": 2, "rank": 1, "form": "owner"},
    f"{MU}.ns_flops": lambda: {"rows": 40, "cols": 16},
    f"{MU}.compute_per_rank": lambda: {"shapes": [(5, 3), (4, 4)], "world_size": 2, "form": "owner"},
    f"{MU}.optimizer_state_bytes": lambda: {"muon_shapes": [(5, 3)], "adamw_shapes": [(5,)], "world_size": 2,
                                            "rank": 1},
    f"{MU}.bf16_ulp": lambda: {"x": 1.0},
    f"{MU}.split_parameters": lambda: {"config": __import__("distlearn.core.models", fromlist=["x"]).get_preset(
        "llama3-8b")},
    f"{MU}.bf16_stagnates": lambda: {"w": 1.0, "delta": -1e-3},
}


def _tiny_lm():
    from distlearn.core.models import ModelConfig, build_model

    return build_model(ModelConfig("tiny", "llama", 17, 16, 1, 4, 32, 16, num_kv_heads=2), "cpu")


def _tokens():
    import torch

    return torch.zeros(1, 3, dtype=torch.long)


def _weight(kind="column"):
    from distlearn.post_training.resharding import Weight

    return Weight("w", 16, 16, kind)


# ---------------------------------------------------------------------- helpers the table uses
def _fit_data():
    sizes = np.array([1e3, 1e4, 1e5, 1e6, 1e7, 1e8])
    return {"nbytes": sizes, "seconds": 1e-5 + 1.5 * sizes / 1e10, "world_size": 4}


def _relative_errors():
    from distlearn.core.cost import fit_alpha_beta

    d = _fit_data()
    return {"fit": fit_alpha_beta(**d), "nbytes": d["nbytes"], "seconds": d["seconds"]}


def _moe_name():
    from distlearn.core.models import MOE_PRESETS

    return next(iter(MOE_PRESETS))


def _dp_data():
    from distlearn.data_parallel.simulation import linear_mse_model

    return {"data": _rng().standard_normal((8, 4)), "world_size": 2, "model_fn": linear_mse_model(np.ones(4))}


def _ds_rows():
    from distlearn.deepspeed_fsdp.deepspeed import estimator_rows

    return estimator_rows(1_000_000, 100_000)


def _aux():
    p = _rng().random((8, 4))
    p /= p.sum(1, keepdims=True)
    return {"probs": p, "index": np.argsort(-p, axis=1)[:, :2]}


def _term_name():
    from distlearn.activation_memory.formulas import TERM_SOURCES

    return next(iter(TERM_SOURCES))


def _llama3_row():
    from distlearn.nd_parallel.simulation import LLAMA3_405B_LAYOUTS

    return dict(LLAMA3_405B_LAYOUTS[0])


def _plans():
    from distlearn.planning.plan_search import search

    return search("llama3-8b", num_gpus=8, gpu="h100-80gb", global_batch=8, seq_len=2048, top=2)


def _validate_plan_args():
    from distlearn.core.hardware import make_cluster

    return {"model": _model(), "cluster": make_cluster("h100-80gb", 8), "p": _plan(), "global_batch": 8,
            "seq_len": 2048}


def _tiny_model():
    from distlearn.core.models import ModelConfig

    return ModelConfig(name="tiny", arch="llama", num_layers=2, hidden_size=32, num_heads=4, ffn_hidden_size=64,
                       vocab_size=64, max_seq_len=16)


def _gemm():
    from distlearn.planning.kernels import Gemm

    return Gemm("qkv", 2048.0, 1024.0, 4096.0)


def _candidate_rows():
    from distlearn.planning.memory import candidate_rows

    return candidate_rows(_setting(), _plan())


def _peaks():
    from distlearn.planning.memory import stage_peak_layers

    return stage_peak_layers(2, 4, 1, (16, 16))


def _published_name():
    from distlearn.planning.published import PUBLISHED_RUNS

    return next(iter(PUBLISHED_RUNS))


def _published_run():
    from distlearn.planning.published import PUBLISHED_RUNS

    return PUBLISHED_RUNS[_published_name()]


def _recipe_key():
    from distlearn.precision.fp8_recipes import RECIPES

    return next(iter(RECIPES))


def _layer_seconds():
    from distlearn.planning.kernels import layer_seconds

    return layer_seconds(_model(), _gpu(), micro_batch=1, seq_len=2048, tp=2, gemm_peak=7e14, peak=9e14)


def _tp_records():
    from distlearn.tensor_parallel.simulation import megatron_mlp

    return megatron_mlp(**_mlp_args(), tp=2).comm


def _flat_shards(torch=False):
    from distlearn.zero_fsdp.simulation import flatten_and_shard, reference_flat_shard

    params = [np.ones((2, 3)), np.arange(5.0)]
    if torch:
        tensors = [_t(2, 3), _t(5)]
        return {"shards": [reference_flat_shard(tensors, 2, r) for r in range(2)], "shapes": [(2, 3), (5,)]}
    flat = flatten_and_shard(params, 2)
    return {"shards": flat.shards, "shapes": [p.shape for p in params]}


def _rl_setup():
    from distlearn.post_training.rl_timeline import RLSetup

    return RLSetup(staleness=1)


def _mlp_units():
    from distlearn.zero_fsdp.simulation import MLPUnits

    return MLPUnits([4, 8, 2])

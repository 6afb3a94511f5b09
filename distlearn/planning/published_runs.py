"""The published training runs the planner meets, each read as its source writes it (issue 38): the data.

Every run is a dict of one format (:func:`distlearn.planning.calibration.compare_run` takes any dict in it, so a
reviewer's private run is met the same way):

- ``model`` (:class:`~distlearn.core.models.ModelConfig`), ``gpu`` (a preset name or a :class:`GPU`),
  ``num_gpus``, ``global_batch`` (sequences), ``seq_len`` (tokens), ``precision`` (one of
  :data:`~distlearn.planning.flops.PLANNER_PRECISIONS`), ``plan`` (:class:`~distlearn.planning.setting.Plan`);
- the published figure, exactly one of ``published_flops`` (FLOP/s per GPU, counted the ``count`` way:
  ``"megatron"`` = Narayanan et al. 2021 eq. 3 with recomputation, ``"model"`` = model FLOPs without
  recomputation, attention without the causal mask, ``"model-causal"`` = the same with half the attention
  scores), ``published_tokens_per_gpu`` (tokens/s per GPU) or ``published_step_seconds`` (seconds per step);
  optional ``published_mfu`` (as printed, for the tests);
- ``source`` / ``source_zh`` (where layout and figure come from, with section or table), ``reading`` /
  ``reading_zh`` (what the source leaves open and we chose), optional ``options`` (keyword options of
  :func:`~distlearn.planning.evaluation.evaluate` that the run needs, e.g. ``{"causal": True}``, the overlap flags
  of :data:`distlearn.planning.calibration.OVERLAP_OPTIONS` and ``max_nodes_per_token``; an unknown name is
  refused), optional
  ``not_modelled`` / ``not_modelled_zh`` (why the planner cannot express the run: it is then shown but kept out
  of the validation score).

Sources (each row's ``source`` names its table or section):

- Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM"
  (arXiv 2104.04473), §5.1 and Table 1: ten GPT models, vocabulary 51,200, sequence 2048, A100 80 GB, "we use the
  interleaved pipeline schedule with the scatter/gather optimization enabled"; FLOP/s counted with eq. 3.
- Megatron-LM README of January 2021 (commit 152aab3) and ``examples/pretrain_gpt3_175B.sh``: GPT-3 175B, TP 8 ×
  PP 16, micro-batch 1, batch 1536, fp16, ``--checkpoint-activations``, no interleaving flag; "each iteration takes
  around 32 seconds resulting in 138 teraFLOPs per GPU".
- Megatron-LM of 2021 (``megatron/arguments.py``: ``--DDP-impl`` defaults to ``local``; ``megatron/training.py``,
  ``train_step``: ``model.allreduce_gradients()`` after ``forward_backward_func``): the gradient all-reduce after the
  whole backward, exposed even without pipelining (the rows' ``ddp_impl_local`` option).
- BLOOM (BigScience 2022, §3.4; throughput from the BigScience model card and Bekman's blog), Llama 3 (Dubey et al. 2024, Table 4, §3.3.2), DeepSeek-V3 (DeepSeek-AI 2024):
  as before (see :mod:`distlearn.planning.published`).
- MegaScale (Jiang et al. 2024, arXiv 2402.15627, §6.1, Tables 1 and 2): 175B GPT (128 heads, hidden 12288, 96
  layers, TP 8 × PP 8), interleaved with six chunks, sequence 2048, vocabulary 64,000, Ampere GPUs; the
  Megatron-LM baseline rows (commit 285068c8) and MegaScale's own 12,288-GPU row (55.2 % MFU).
- Megatron-Core scaling table (Megatron-LM README "Performance Benchmarking", ``images/model_table.png`` of July
  2024, Megatron-Core r0.8.0; the table is an image, read here cell by cell): GPT models 1.7B–462B, vocabulary
  131,072, sequence 4096, H100, DP 48, with DP/TP/PP overlap flags.
- Nemotron-4 340B (NVIDIA 2024, arXiv 2406.11704, §2.3 and Table 2): 6,144 H100, TP 8 × PP 12 × DP 64, batch
  2304, 8.0 s per iteration at the end of the batch ramp.
- Nemotron-4 15B (Parmar et al. 2024, arXiv 2402.16819, §2.3 and Table 2): TP 8 × DP 96 / 192 / 288 over the
  batch ramp (384, 768, 1152), 0.57 / 0.58 / 0.64 s per iteration, MFU 34.3 / 33.3 / 30.5 %.
- torchtitan (pytorch/torchtitan ``benchmarks/llama3_h100_202412_torchtitan.md``, Dec 2024): Llama 3.1 8B / 70B /
  405B on H100 96 GB HBM2e at 500 W, tokens/s per GPU.
- picotron (huggingface/picotron README): "38% MFU on a LLaMA-2-7B model using 64 H100 GPUs" (no layout given).
- Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990): 105 layers, hidden 20480, 128 heads, sequence 2048,
  batch 1920, TP 8 × PP 35 (DeepSpeed's pipeline and data parallelism with Megatron's tensor slicing), bf16 mixed
  precision on Selene (§2.3: 8 A100 80 GB per DGX A100, 8 × 200 Gb/s HDR InfiniBand); §2.4: 280 / 350 / 420 servers,
  60.1 / 50.2 / 44.4 s per iteration, 126 / 121 / 113 TFLOP/s per GPU (eq. 3 of the iteration time: 125.7 / 120.4 /
  113.5). DeepSpeed's pipeline engine runs 1F1B only (DeepSpeed issue #1110) and splits the activations it sends
  between stages over the tensor-parallel ranks (``deepspeed/runtime/pipe/engine.py``, ``is_pipe_partitioned``).
- Megatron-Bridge performance summary (NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` and
  ``docs/performance-summary-archive.md``): the dense Llama 3 8B / 70B / 3.1 405B pre-training rows of the NeMo
  25.09, 25.11 and 26.02 containers on DGX-H100, DGX-B200 and DGX-GB200, tokens/s per GPU at sequence 8192, each
  read with the settings of its release's ``scripts/performance/`` recipe (:data:`MBRIDGE_RELEASES`); the printed
  model TFLOP/s are Megatron's causal count (tests/test_published_runs.py). NVFP4 rows and GB300 / B300 systems are
  left out (no planner recipe or preset).
"""
from __future__ import annotations

from distlearn.core.hardware import GB_S, GPUS
from distlearn.core.models import MOE_PRESETS, ModelConfig, get_preset
from distlearn.core.guard import read_only
from distlearn.planning.plan_search import balanced_stages
from distlearn.planning.setting import Plan


def _gpt(name: str, vocab: int, hidden: int, layers: int, heads: int, seq: int, tied: bool = True) -> ModelConfig:
    """A GPT of the Megatron papers: 4h GELU MLP, learned positions, the given vocabulary and sequence."""
    return ModelConfig(name, "gpt", vocab, hidden, layers, heads, 4 * hidden, seq, tied_embeddings=tied)


def _megatron_gpt(name: str, hidden: int, layers: int, heads: int) -> ModelConfig:
    """A GPT of Narayanan et al. 2021 Table 1: vocabulary 51,200, sequence 2048, 4h MLP, tied embeddings."""
    return _gpt(name, 51200, hidden, layers, heads, 2048)


# Narayanan et al. 2021 Table 1: (parameters B, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s, % of peak)
MEGATRON_TABLE1 = read_only({
    "1.7b": (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 44), "3.6b": (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 44),
    "7.5b": (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 46), "18.4b": (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 43),
    "39.1b": (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 44), "76.1b": (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 45),
    "145.6b": (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 47),
    "310.1b": (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 50),
    "529.6b": (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 52),
    "1t": (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 52)})
MEGATRON_MODELS = read_only({k: _megatron_gpt(f"gpt-{k}-megatron", r[2], r[3], r[1])
                             for k, r in MEGATRON_TABLE1.items()})
GPT_1_7B_MEGATRON = MEGATRON_MODELS["1.7b"]
GPT_18B_MEGATRON = MEGATRON_MODELS["18.4b"]
GPT_146B_MEGATRON = MEGATRON_MODELS["145.6b"]
GPT_1T_MEGATRON = MEGATRON_MODELS["1t"]
GPT3_175B_MEGATRON = _megatron_gpt("gpt3-175b-megatron", 12288, 96, 96)
# Megatron-Turing NLG 530B (arXiv 2201.11990 §3.2: 105 layers, hidden 20480, 128 heads, sequence 2048): the model of
# Narayanan et al.'s 529.6B row; GPT-2's 50,257 tokens padded by Megatron to 51,200 (a multiple of 128 · TP), tied
MT_NLG_530B = _megatron_gpt("mt-nlg-530b", 20480, 105, 128)
# BLOOM-176B (HF bigscience/bloom config.json: n_embed 14336, n_layer 70, n_head 112, vocab 250880; ALiBi: the
# learned-position table our GPT blocks add is 0.02 % of the parameters)
BLOOM_176B = ModelConfig("bloom-176b", "gpt", 250880, 14336, 70, 112, 4 * 14336, 2048, tied_embeddings=True)
# MegaScale Table 1 / §6.1: 175B, 128 heads, hidden 12288, 96 layers, vocabulary 64,000, sequence 2048 (tied: the
# Megatron-LM default)
GPT_175B_MEGASCALE = _gpt("gpt-175b-megascale", 64000, 12288, 96, 128, 2048)
# Megatron-Core's scaling table (README, images/model_table.png): (name, heads, hidden, layers, TP, PP, GPUs, batch,
# TFLOP/s per GPU, MFU %); vocabulary 131,072, sequence 4096, DP 48 on every row. Untied embeddings: the parameter
# counts it prints (1.7B … 462B) need them (e.g. 12·24·2048² + 2·131072·2048 = 1.75B)
MCORE_TABLE = read_only({
    "1.7b": (16, 2048, 24, 1, 1, 48, 192, 408.8, 41), "7.1b": (32, 4096, 30, 2, 1, 96, 192, 465.9, 47),
    "16b": (48, 6144, 32, 4, 1, 192, 192, 489.1, 49), "32b": (56, 7168, 48, 8, 1, 384, 192, 459.6, 46),
    "70b": (64, 8192, 84, 8, 2, 768, 384, 419.7, 42), "119b": (80, 10240, 92, 8, 4, 1536, 768, 420.5, 43),
    "177b": (96, 12288, 96, 8, 6, 2304, 1152, 432.8, 44), "314b": (128, 16384, 96, 8, 8, 3072, 1536, 474.4, 48),
    "462b": (144, 18432, 112, 8, 16, 6144, 3072, 459.9, 47)})
MCORE_MODELS = read_only({k: _gpt(f"gpt-{k}-mcore", 131072, r[1], r[2], r[0], 4096, tied=False)
                          for k, r in MCORE_TABLE.items()})
# Nemotron-4 340B (arXiv 2406.11704 §2.1: 96 layers, hidden 18432, 96 heads, 8 KV heads, squared-ReLU MLP of 73,728,
# vocabulary 256,000, untied, RoPE, no biases). The planner has no squared-ReLU MLP: a SwiGLU of 49,152 has the same
# two-matrix FLOPs and parameters (3 × 49,152 = 2 × 73,728), named in the row's reading
NEMOTRON4_340B = ModelConfig("nemotron-4-340b", "llama", 256000, 18432, 96, 96, 49152, 4096, num_kv_heads=8)
# Nemotron-4 15B (arXiv 2402.16819 §2.1: 32 layers, hidden 6144, 48 heads, 8 KV heads, squared-ReLU MLP of 4h =
# 24,576, vocabulary 256,000, untied): the same stand-in, a SwiGLU of 16,384 (3 × 16,384 = 2 × 24,576)
NEMOTRON4_15B = ModelConfig("nemotron-4-15b", "llama", 256000, 6144, 32, 48, 16384, 4096, num_kv_heads=8)

JEAN_ZAY_A100 = GPUS["a100-80gb"].with_(
    name="a100-80gb-jean-zay", network_bw=4 * 100e9 / 8 / 8,
    source="BLOOM paper §3.4.1: 8 A100 80GB per node (NVLink), 4 x 100 Gb/s Omni-Path per node")
H800 = GPUS["h100-80gb"].with_(
    name="h800", nvlink_bw=160 * GB_S, network_bw=50 * GB_S,
    source="DeepSeek-V3 report §3.2.2: NVLink 160 GB/s, IB 50 GB/s; tensor-core peaks of the H100 SXM")
# torchtitan's benchmark GPUs: "96GB HBM2e with 2.4 TB/sec", 500 W; "the actual peak TFLOPs number is between SXM and
# NVL, and we don't know its exact value" — the SXM peak here is an upper bound, hence not_modelled on those rows
H100_96GB_500W = GPUS["h100-80gb"].with_(
    name="h100-96gb-hbm2e-500w", memory_bytes=96e9, hbm_bw=2400 * GB_S,
    source="torchtitan benchmarks/llama3_h100_202412_torchtitan.md: Grand Teton, 8 H100 96GB HBM2e per host "
           "(2.4 TB/s), 400 Gb/s per GPU, 500 W power limit; peak between H100 SXM and NVL (unknown): SXM's used")
LLAMA3_405B_STAGES = (7,) + (8,) * 14 + (7,)  # Llama 3 §3.3.2: one layer fewer on the first and the last stage


# Megatron-LM's scripts for Table 1 (examples/sc21/run_table_1.sh and CONFIG.sh, Aug 2021): per row the micro-batch
# size, --DDP-impl ("torch": PyTorch DDP, its all-reduce overlapped with the backward; "local": after the whole
# backward) and --num-layers-per-virtual-pipeline-stage (0: the flag is absent, no interleaving). CONFIG.sh passes
# --fp16 and no --accumulate-allreduce-grads-in-fp32: fp16 gradients, all-reduced in fp16 (megatron/arguments.py
# turns fp32 accumulation on only for --bf16; local DDP without contiguous buffers, which CONFIG.sh does not ask for,
# coalesces and all-reduces each parameter's fp16 .grad: megatron/model/distributed.py, allreduce_gradients; PyTorch
# DDP reduces the fp16 .grad too). The optimizer's fp32 copy of the gradients (optimizer.py,
# _copy_model_grads_to_main_grads, 4 B per parameter) lives from the step to the next zero_grad, after the
# activations are freed: the "mixed" recipe counts the forward/backward peak, not the step's
MEGATRON_TABLE1_SCRIPT = read_only({
    "1.7b": (16, "torch", 0), "3.6b": (16, "torch", 0), "7.5b": (16, "torch", 0), "18.4b": (8, "torch", 0),
    "39.1b": (4, "local", 0), "76.1b": (2, "local", 5), "145.6b": (2, "local", 5), "310.1b": (1, "local", 3),
    "529.6b": (1, "local", 1), "1t": (1, "local", 0)})


def _megatron_row(key: str) -> dict:
    """Narayanan et al. 2021 Table 1, row ``key``, with the micro-batch size, data-parallel implementation and
    interleaving of Megatron-LM's script for that row (:data:`MEGATRON_TABLE1_SCRIPT`), in fp16 as the script runs it."""
    params, heads, hidden, layers, tp, pp, gpus, batch, tflops, peak = MEGATRON_TABLE1[key]
    mbs, ddp, chunk_layers = MEGATRON_TABLE1_SCRIPT[key]
    dp = gpus // (tp * pp)
    v = layers // pp // chunk_layers if chunk_layers else 1
    if v > 1:
        chunks = f"v = {v} chunks of {chunk_layers} layers (--num-layers-per-virtual-pipeline-stage {chunk_layers})"
        chunks_zh = f"每个 rank {v} 个模型块，每块 {chunk_layers} 层（--num-layers-per-virtual-pipeline-stage {chunk_layers}）"
    elif pp > 1:
        chunks = ("no interleaving: the script sets no --num-layers-per-virtual-pipeline-stage for this row, though "
                  "§5.1 says every run interleaved (we follow the script)"
                  + ("; Megatron-LM 2021 refuses interleaving at PP 2 (megatron/arguments.py asserts a pipeline size "
                     "> 2)" if pp == 2 else ""))
        chunks_zh = ("不交错：脚本没有为这一行设 --num-layers-per-virtual-pipeline-stage，尽管 §5.1 说每次训练都用了交错"
                     "调度（我们按脚本）"
                     + ("；而且 Megatron-LM 2021 不允许 PP 2 交错（megatron/arguments.py 断言流水线并行数 > 2）"
                        if pp == 2 else ""))
    else:
        chunks, chunks_zh = "no pipeline, so no interleaving", "没有流水线，也就谈不上交错"
    return dict(model=MEGATRON_MODELS[key], gpu="a100-80gb", num_gpus=gpus, global_batch=batch, seq_len=2048,
                precision="mixed", count="megatron",
                plan=Plan(dp=dp, tp=tp, pp=pp, recompute="full", micro_batch_size=mbs,
                          num_microbatches=batch // (dp * mbs), num_chunks=v, sequence_parallel=False),
                published_flops=tflops * 1e12, published_mfu=peak / 100,
                source=f"Narayanan et al. 2021 (arXiv 2104.04473) §5.1, Table 1 ({params} B: TP {tp} × PP {pp}, "
                       f"{gpus} A100, batch {batch}, {tflops} TFLOP/s = {peak} % of peak)",
                source_zh=f"Narayanan 等 2021（arXiv 2104.04473）§5.1，表 1（{params} B：TP {tp} × PP {pp}，"
                          f"{gpus} 块 A100，全局批量 {batch}，{tflops} TFLOP/s，峰值的 {peak} %）",
                options={"ddp_impl_local": True} if ddp == "local" else {},
                reading=f"micro-batch {mbs}, --DDP-impl {ddp} and the interleaving as Megatron-LM's script for this "
                        f"row sets them (examples/sc21/run_table_1.sh; the paper gives none of them): {chunks}; full "
                        f"recomputation (eq. 3 counts it); no sequence parallelism (2021); "
                        + ("--DDP-impl local: the gradient all-reduce after the whole backward, exposed "
                           "(megatron/training.py, train_step)" if ddp == "local" else
                           "--DDP-impl torch: PyTorch DDP all-reduces the gradients during the backward")
                        + "; fp16 gradients, all-reduced in fp16 (the script's CONFIG.sh passes --fp16 without "
                          "--accumulate-allreduce-grads-in-fp32); the optimizer's fp32 copy of the gradients exists "
                          "only from the step to the next zero_grad, so it is not counted; fp16 timed at the bf16 "
                          "peak (the same on an A100)",
                reading_zh=f"微批次大小 {mbs}、--DDP-impl {ddp} 和交错方式都按 Megatron-LM 为这一行写的脚本"
                           f"（examples/sc21/run_table_1.sh；论文一样也没给）：{chunks_zh}；完全重计算（公式 3 把它算在内）；"
                           f"不用序列并行（2021 年）；"
                           + ("--DDP-impl local：整个反向结束后才 all-reduce 梯度，不被隐藏（megatron/training.py 的 "
                              "train_step）" if ddp == "local" else
                              "--DDP-impl torch：PyTorch DDP 在反向传播过程中 all-reduce 梯度")
                           + "；梯度为 fp16，也按 fp16 做 all-reduce（脚本的 CONFIG.sh 传了 --fp16，没有传 "
                             "--accumulate-allreduce-grads-in-fp32）；优化器把梯度拷成 fp32 的副本只存在于优化器更新到下一次"
                             " zero_grad 之间，所以不计；fp16 按 bf16 的峰值计时（A100 上两者相同）")


# Smith et al. 2022 §2.4: DGX A100 servers → (seconds per iteration, TFLOP/s per GPU as printed)
MT_NLG_TABLE = read_only({280: (60.1, 126), 350: (50.2, 121), 420: (44.4, 113)})


def _mtnlg_row(servers: int) -> dict:
    """Megatron-Turing NLG 530B on ``servers`` DGX A100 (Smith et al. 2022 §2.4): TP 8 × PP 35 × DP, batch 1920."""
    seconds, tflops = MT_NLG_TABLE[servers]
    gpus = 8 * servers
    dp = gpus // (8 * 35)
    return dict(model=MT_NLG_530B, gpu="a100-80gb", num_gpus=gpus, global_batch=1920, seq_len=2048,
                precision="mixed-fp32-grads", count="megatron",
                plan=Plan(dp=dp, tp=8, pp=35, zero_stage=0, recompute="full", micro_batch_size=1,
                          num_microbatches=1920 // dp, sequence_parallel=False),
                published_step_seconds=seconds, printed_flops=tflops * 1e12,
                source=f"Megatron-Turing NLG 530B (Smith et al. 2022, arXiv 2201.11990) §2.4: {servers} DGX A100 "
                       f"servers ({gpus} A100 80 GB, §2.3), batch 1920, {seconds} s per iteration, {tflops} TFLOP/s "
                       f"per GPU; §3.2: 105 layers, hidden 20480, 128 heads, sequence 2048, 8-way tensor and 35-way "
                       f"pipeline parallelism",
                source_zh=f"Megatron-Turing NLG 530B（Smith 等 2022，arXiv 2201.11990）§2.4：{servers} 台 DGX A100 "
                          f"服务器（{gpus} 块 A100 80 GB，§2.3），全局批量 1920，每步 {seconds} 秒，每块 GPU {tflops} "
                          f"TFLOP/s；§3.2：105 层，hidden 20480，128 个头，序列长度 2048，8 路张量并行、35 路流水线并行",
                reading="micro-batch 1 (the paper does not say; Megatron-LM's sc21 script for Table 1's 530B row uses 1, "
                        "§2.1.1's gradient-accumulation example counts micro-batches of one sample, an illustration; "
                        "2 would double the bubble); DeepSpeed's pipeline engine: 1F1B, no "
                        "interleaving (its only schedule), the activations between stages split over the 8 tensor "
                        "ranks (engine.py, is_pipe_partitioned: Megatron's scatter/gather); full recomputation of "
                        "every transformer block (§2.1 stores only the blocks' inputs; the printed TFLOP/s are eq. 3, "
                        "which counts the recomputation: 125.7 / 120.4 / 113.5 from the iteration times); plain data "
                        "parallelism, no ZeRO (the paper names none for this run; ZeRO-1-style sharding would change the step by about "
                        "0.1–0.2 s), "
                        "the gradient all-reduce after the pipeline flush, exposed; gradients all-reduced in fp32 (a "
                        "reading without a source: §2.3 says bf16 mixed precision and no more; Megatron-LM's 2021 "
                        "rule for --bf16 is fp32 accumulation and all-reduce, but MT-NLG's data parallelism ran in "
                        "DeepSpeed, whose public engine of late 2021 reduced bf16 gradients in bf16 "
                        "(communication_data_type, DeepSpeed #1487); bf16 would halve the bytes, 0.3 s of the step, "
                        "and widen the per-micro-batch gap of KNOWN_MISSES by about one percentage point); vocabulary 51,200 (GPT-2's 50,257 padded by Megatron to a multiple of "
                        "128 · TP), tied embeddings; Selene's 8 × 200 Gb/s HDR InfiniBand per node (§2.3)",
                reading_zh="微批次大小 1（论文没说；Megatron-LM 的 sc21 脚本跑表 1 的 530B 那一行时用 1，§2.1.1 讲梯度累积的例子"
                           "也按每个微批次一个样本算，但那只是示例；取 2 则气泡加倍）；DeepSpeed 的流水线引擎：1F1B，不交错（它只有这一种调度），阶段之间传递的激活按 8 个"
                           "张量并行 rank 切分（engine.py 的 is_pipe_partitioned，即 Megatron 的 scatter/gather）；每个 "
                           "Transformer 块完全重计算（§2.1 只保存各块的输入；公布的 TFLOP/s 按公式 3 计，公式 3 把重计算算在"
                           "内：由每步时间算得 125.7 / 120.4 / 113.5）；普通数据并行，不用 ZeRO（论文没有为这次训练提到 "
                           "ZeRO；按 ZeRO-1 的方式分片，每步大约差 0.1–0.2 秒），梯度在流水线排空之后 all-reduce，不被隐藏；梯度按 fp32 做 "
                           "all-reduce（这是没有出处的读法：§2.3 只说 bf16 混合精度；Megatron-LM 2021 年的规则是设了 --bf16 "
                           "就用 fp32 累加并 all-reduce 梯度，但 MT-NLG 的数据并行由 DeepSpeed 完成，2021 年底公开版 DeepSpeed "
                           "对 bf16 梯度按 bf16 归约（communication_data_type，DeepSpeed #1487）；按 bf16 字节数减半，每步少 0.3 秒，"
                           "KNOWN_MISSES 里每个微批次的差距再大约一个百分点）；词表 51,200"
                           "（GPT-2 的 50,257 由 Megatron 补齐到 128 · TP 的倍数），输入输出嵌入共享；Selene 每节点 "
                           "8 × 200 Gb/s HDR InfiniBand（§2.3）")

def _llama3(num_gpus, dp, cp, seq_len, published, mfu):
    """Llama 3 405B, Table 4 row: FP32 gradient accumulation and reduce-scatter (§3.3.2)."""
    batch = 16 * 2 ** 20 // seq_len  # 16M tokens per step
    row = dict(model=get_preset("llama3.1-405b"), gpu="h100-80gb", num_gpus=num_gpus, global_batch=batch,
               seq_len=seq_len, precision="mixed-fp32-grads", count="model-causal",
               plan=Plan(dp=dp, tp=8, pp=16, cp=cp, zero_stage=2, recompute="norm-act", micro_batch_size=1,
                         num_microbatches=batch // dp, num_chunks=8, stage_layers=LLAMA3_405B_STAGES),
               published_flops=published, published_mfu=mfu,
               source=f"Llama 3 paper (Dubey et al. 2024), Table 4: {num_gpus} H100, TP 8 × CP {cp} × PP 16 × "
                      f"DP {dp}, seq {seq_len}, {published / 1e12:.0f} TFLOP/s, BF16 MFU {mfu:.0%}; §3.3.2: FP32 "
                      f"gradient accumulation and FP32 reduce-scatter",
               source_zh=f"Llama 3 论文（Dubey 等 2024）表 4：{num_gpus} 块 H100，TP 8 × CP {cp} × PP 16 × "
                         f"DP {dp}，序列长度 {seq_len}，{published / 1e12:.0f} TFLOP/s，BF16 MFU {mfu:.0%}；"
                         f"§3.3.2：梯度按 FP32 累加，FP32 做 reduce-scatter",
               reading="micro-batch 1, v = 8 chunks; the norms' and SwiGLU's outputs recomputed, not stored "
                       "(norm-act: the paper says 'without activation checkpointing', but with every tensor "
                       "stored the layout does not fit, chapter 14); FSDP sharding gradients and optimizer "
                       "state, weights not resharded after forward = ZeRO-2; pipeline warm-up depth N = p "
                       "(Megatron's; §3.3.2 makes N tunable)",
               reading_zh="微批次大小 1，每个 rank 8 个模型块（v = 8）；归一化层和 SwiGLU 的输出不保存，反向时重计算"
                          "（norm-act。论文说“不使用激活检查点”，但把所有张量都存下来时这个布局放不下，见第 14 章）；"
                          "FSDP 对梯度和优化器状态分片，前向之后不再对权重重新分片，即 ZeRO-2；流水线预热深度 N = p"
                          "（Megatron 的取法；§3.3.2 说 N 可调）")
    row["reading"] += ("; gradients reduce-scattered after every micro-batch into the sharded FP32 accumulator "
                       "(grad_sync='per_microbatch')")
    row["reading_zh"] += "；每个微批次的反向之后就把梯度 reduce-scatter 到分片的 FP32 累加缓冲区（grad_sync='per_microbatch'）"
    # §3.3.2: FSDP shards the gradients and accumulates them in FP32 over the micro-batches, reduce-scattered in
    # FP32: a sharded FP32 accumulator is only filled by a reduce-scatter after each micro-batch's backward, so
    # per_microbatch (per_step would hold the stage's gradients unsharded: +6.4 GB per GPU, and the 8K-GPU layout
    # would not fit the 80 GB it ran on)
    row["options"] = {"grad_sync": "per_microbatch", "causal": True}
    # one counting convention for the whole of Table 4 (one table, one count): the causal one, as the kernel
    row["reading"] += ("; causal attention kernel (FlashAttention skips the masked blocks) and, for all three rows "
                       "of Table 4 alike, the FLOPs counted the same way, half the attention scores (the paper does "
                       "not say how it counts); ranks ordered [tp, cp, dp, pp] where §3.3.2 orders [TP, CP, PP, DP] "
                       "(the same groups inside an 8-GPU node)")
    row["reading_zh"] += ("；注意力核按因果掩码计（FlashAttention 跳过被掩掉的块），表 4 的三行一律按同样的口径统计 FLOPs，"
                          "只算一半注意力分数（论文没说它怎么数）；rank 按 [tp, cp, dp, pp] 排列，而 §3.3.2 是 "
                          "[TP, CP, PP, DP]（8 块 GPU 的节点内，各组相同）")
    return row


def _megascale_baseline(gpus, batch, tokens_per_s, mfu):
    """MegaScale Table 2, a Megatron-LM row (commit 285068c8): 175B, TP 8 × PP 8, six interleaved chunks."""
    dp = gpus // 64
    return dict(model=GPT_175B_MEGASCALE, gpu="a100-80gb", num_gpus=gpus, global_batch=batch, seq_len=2048,
                precision="mixed-fp32-grads", count="model",
                plan=Plan(dp=dp, tp=8, pp=8, recompute="selective", micro_batch_size=1,
                          num_microbatches=batch // dp, num_chunks=6, sequence_parallel=True),
                published_tokens_per_gpu=tokens_per_s / gpus, published_mfu=mfu,
                source=f"MegaScale (Jiang et al. 2024, arXiv 2402.15627) §6.1, Tables 1–2, Megatron-LM row: 175B, "
                       f"TP 8 × PP 8, v = 6, {gpus} GPUs, batch {batch}, {tokens_per_s / 1e3:.1f}k tokens/s, "
                       f"MFU {mfu:.1%}",
                source_zh=f"MegaScale（Jiang 等 2024，arXiv 2402.15627）§6.1，表 1–2 的 Megatron-LM 行：175B，"
                          f"TP 8 × PP 8，v = 6，{gpus} 块 GPU，全局批量 {batch}，每秒 {tokens_per_s / 1e3:.1f}k 个"
                          f"词元，MFU {mfu:.1%}",
                reading="A100 80 GB with 8 × 200 Gb/s per node (the paper says 'Ampere GPUs'); micro-batch 1; "
                        "selective recomputation and sequence parallelism (Megatron-LM's 2023 defaults); tied "
                        "embeddings; fp32 gradient buffer, no distributed optimizer",
                reading_zh="A100 80 GB，每节点 8 × 200 Gb/s（论文只说“Ampere GPU”）；微批次大小 1；选择性重计算加序列"
                           "并行（2023 年 Megatron-LM 的默认做法）；输入输出嵌入共享；梯度缓冲区为 fp32，不用分布式优化器")


def _mcore_row(key: str, recompute: str) -> dict:
    """Megatron-Core's scaling table, row ``key`` (README image, read cell by cell)."""
    heads, hidden, layers, tp, pp, gpus, batch, tflops, mfu = MCORE_TABLE[key]
    return dict(model=MCORE_MODELS[key], gpu="h100-80gb", num_gpus=gpus, global_batch=batch, seq_len=4096,
                precision="mixed-fp32-grads", count="model",
                plan=Plan(dp=48, tp=tp, pp=pp, zero_stage=1, recompute=recompute, micro_batch_size=1,
                          num_microbatches=batch // 48, sequence_parallel=tp > 1),
                published_flops=tflops * 1e12, published_mfu=mfu / 100, options={"attention": "flash", **MEGATRON_OVERLAPS},
                source=f"Megatron-LM README, 'Performance Benchmarking' table (images/model_table.png, Jul 2024, "
                       f"Megatron-Core r0.8.0): {key.upper()}, TP {tp} × PP {pp} × DP 48, {gpus} H100, batch "
                       f"{batch}, {tflops} TFLOP/s, MFU {mfu} %",
                source_zh=f"Megatron-LM README 的“Performance Benchmarking”表（images/model_table.png，2024 年七月，"
                          f"Megatron-Core r0.8.0）：{key.upper()}，TP {tp} × PP {pp} × DP 48，{gpus} 块 H100，全局批量"
                          f" {batch}，{tflops} TFLOP/s，MFU {mfu} %",
                reading=f"micro-batch 1, no interleaving; Transformer Engine's fused attention (cuDNN's on H100), timed as "
                        f"FlashAttention (kernels.FLASH_SHARE); {recompute} "
                        f"recomputation (the least that fits: the table does not say); sequence parallelism with TP; distributed optimizer = ZeRO-1 "
                        f"(--overlap-param-gather needs it); FP32 gradients (Megatron-Core r0.8.0 turns "
                        f"accumulate_allreduce_grads_in_fp32 on with --bf16); GELU MLP of 4h, untied embeddings (the "
                        f"parameter counts need them)",
                reading_zh=f"微批次大小 1，不用交错调度；Transformer Engine 的融合注意力（H100 上是 cuDNN 的实现），按 FlashAttention "
                           f"计时（kernels.FLASH_SHARE）；重计算取 {recompute}（放得下的最少重计算：表中没说）；TP 时用"
                           f"序列并行；分布式优化器即 ZeRO-1（--overlap-param-gather 需要它）；梯度为 FP32（Megatron-Core r0.8.0 在 --bf16 下打开 "
                           f"accumulate_allreduce_grads_in_fp32）；MLP 为 4h 的 GELU，"
                           f"输入输出嵌入不共享（表中的参数量要求如此）")


# the overlap flags of Megatron-Core's README benchmark command (--tp-comm-overlap, --overlap-grad-reduce,
# --overlap-param-gather) and of NeMo's Nemotron-4 recipes (tp_comm_overlap, overlap_grad_sync,
# overlap_param_sync: the same Megatron-Core code), timed by distlearn.planning.setting.Overlap
MEGATRON_OVERLAPS = read_only({"tp_comm_overlap": True, "overlap_grad_reduce": True, "overlap_param_gather": True})


def _nemotron15b(dp, seconds, mfu, batch):
    """Nemotron-4 15B, Table 2 row (the batch ramp): TP 8 × DP, distributed optimizer."""
    gpus = 8 * dp
    return dict(model=NEMOTRON4_15B, gpu="h100-80gb", num_gpus=gpus, global_batch=batch, seq_len=4096,
                precision="mixed-fp32-grads", count="model",
                plan=Plan(dp=dp, tp=8, pp=1, zero_stage=1, recompute="none", micro_batch_size=1,
                          num_microbatches=batch // dp, sequence_parallel=True),
                published_step_seconds=seconds, published_mfu=mfu,
                source=f"Nemotron-4 15B report (Parmar et al. 2024, arXiv 2402.16819) §2.3, Table 2: {gpus} H100, "
                       f"TP 8 × DP {dp}, distributed optimizer, batch {batch}, {seconds} s per iteration, MFU "
                       f"{mfu:.1%}",
                source_zh=f"Nemotron-4 15B 技术报告（Parmar 等 2024，arXiv 2402.16819）§2.3，表 2：{gpus} 块 H100，"
                          f"TP 8 × DP {dp}，分布式优化器，全局批量 {batch}，每步 {seconds} 秒，MFU {mfu:.1%}",
                reading="micro-batch 1; no recomputation (the least that fits); sequence parallelism; distributed "
                        "optimizer = ZeRO-1; the squared-ReLU MLP timed as a SwiGLU of the same matrix FLOPs",
                reading_zh="微批次大小 1；不重计算（放得下的最少重计算）；序列并行；分布式优化器即 ZeRO-1；平方 ReLU 的 "
                           "MLP 按矩阵 FLOPs 相同的 SwiGLU 计时",
                options=dict(MEGATRON_OVERLAPS))


_TORCHTITAN_GPU = ("the GPU's peak is unknown: H100 96 GB HBM2e held at 500 W, 'between SXM and NVL', the source "
                   "says, and the planner times it with the 700 W SXM peaks (the row's reading was checked against "
                   "the file: local batch, sequence 8192, activation checkpointing, Float8 and torch.compile as "
                   "given)",
                   "GPU 峰值未知：限制在 500 W 的 H100 96 GB HBM2e，原文说“介于 SXM 和 NVL 之间”，而规划器按 700 W SXM "
                   "的峰值计时（本行的读法已对照原文核过：本地批量、序列长度 8192、激活检查点、Float8 和 torch.compile）")


def _torchtitan(model, gpus, batch, seq_len, plan, tps, table, setup, setup_zh, precision="mixed", extra=("", ""),
                options=None):
    """A torchtitan benchmark row (Dec 2024): tokens/s per GPU on H100 96 GB HBM2e at 500 W."""
    return dict(model=get_preset(model), gpu=H100_96GB_500W, num_gpus=gpus, global_batch=batch, seq_len=seq_len,
                precision=precision, count="model", plan=plan, published_tokens_per_gpu=tps,
                options={"grad_sync": "per_step", **(options or {})},
                source=f"torchtitan benchmarks/llama3_h100_202412_torchtitan.md, Table {table}: {setup}, {tps:,} "
                       f"tokens/s per GPU",
                source_zh=f"torchtitan benchmarks/llama3_h100_202412_torchtitan.md，表 {table}：{setup_zh}，每块 GPU"
                          f"每秒 {tps:,} 个词元",
                reading="sequence 8192 (torchtitan's Llama 3 default); FSDP2 = ZeRO-3; micro-batch = the local batch"
                        + extra[0],
                reading_zh="序列长度 8192（torchtitan 的 Llama 3 默认值）；FSDP2 即 ZeRO-3；微批次 = 本地批量" + extra[1],
                not_modelled=_TORCHTITAN_GPU[0] + (extra[2] if len(extra) > 2 else ""),
                not_modelled_zh=_TORCHTITAN_GPU[1] + (extra[3] if len(extra) > 3 else ""))


PUBLISHED_RUNS = read_only({
    **{f"megatron-gpt-{k}": _megatron_row(k) for k in MEGATRON_TABLE1},
    "megatron-gpt3-175b": dict(
        model=GPT3_175B_MEGATRON, gpu="a100-80gb", num_gpus=1024, global_batch=1536, seq_len=2048,
        precision="mixed", count="megatron",
        plan=Plan(dp=8, tp=8, pp=16, recompute="full", micro_batch_size=1, num_microbatches=192,
                  sequence_parallel=False),
        published_flops=138e12, printed_step_seconds=32,
        source="Megatron-LM README (Jan 2021) and examples/pretrain_gpt3_175B.sh: GPT-3 175B, TP 8 × PP 16, "
               "micro-batch 1, batch 1536, 1024 A100, ~32 s per iteration, 138 TFLOP/s",
        source_zh="Megatron-LM README（2021 年一月）与 examples/pretrain_gpt3_175B.sh：GPT-3 175B，TP 8 × PP 16，"
                  "微批次大小 1，全局批量 1536，1024 块 A100，每步约 32 秒，138 TFLOP/s",
        options={"ddp_impl_local": True},
        reading="no interleaving (the script sets none); full recomputation (--checkpoint-activations); fp16 timed "
                "at the bf16 peak (the same on an A100); fp16 gradients, all-reduced in fp16 (the script sets "
                "neither --accumulate-allreduce-grads-in-fp32 nor --fp32-allreduce, and Megatron-LM's local DDP then "
                "reduces in the parameters' dtype); not counted: the fp32 copy of the gradients that Megatron-LM's "
                "optimizer of January 2021 kept between steps (optimizer.py: zero_grad did not free it until July "
                "2021), 4 B per parameter, 44.3 GB per GPU instead of 38.5 (it fits either way); --DDP-impl local "
                "(the default): the all-reduce after the pipeline flush",
        reading_zh="不用交错调度（脚本没有设置）；完全重计算（--checkpoint-activations）；fp16 按 bf16 的峰值计时（A100 上"
                   "两者相同）；梯度为 fp16，也按 fp16 做 all-reduce（脚本既没设 --accumulate-allreduce-grads-in-fp32 "
                   "也没设 --fp32-allreduce，Megatron-LM 的 local DDP 于是按参数的类型归约）；没有计入：2021 年一月的 "
                   "Megatron-LM 优化器在两步之间一直留着梯度的 fp32 副本（optimizer.py 的 zero_grad 直到 2021 年七月才释放它），"
                   "每个参数 4 字节，每块 GPU 是 44.3 GB 而不是 38.5 GB（两种都放得下）；--DDP-impl local（默认值）："
                   "流水线排空之后才 all-reduce"),
    "bloom-176b": dict(model=BLOOM_176B, gpu=JEAN_ZAY_A100, num_gpus=384, global_batch=2048, seq_len=2048,
                       precision="mixed-fp32-grads", count="megatron",
                       plan=Plan(dp=8, tp=4, pp=12, zero_stage=1, recompute="full", micro_batch_size=2,
                                 num_microbatches=128, sequence_parallel=False),
                       published_flops=150e12,
                       source="BLOOM paper §3.4 (BigScience 2022): 384 A100, TP 4 × PP 12 × DP 8, ZeRO-1, "
                              "micro-batch 2, batch 2048; the throughput ~150 TFLOP/s of the BigScience model card "
                              "and Bekman's blog (2022) over the training run",
                       source_zh="BLOOM 论文 §3.4（BigScience 2022）：384 块 A100，TP 4 × PP 12 × DP 8，ZeRO-1，"
                                 "微批次大小 2，全局批量 2048；吞吐量取 BigScience 模型卡与 Bekman 博客（2022）给出的"
                                 "整个训练期间约 150 TFLOP/s",
                       reading="no interleaving; fp32 gradient buffer (Megatron-DeepSpeed bf16); the paper's own "
                               "figure is 156 TFLOP/s 'in our fastest configuration' (§3.4): with it the ratio is "
                               "× 150/156 = 0.96 of the one shown",
                       reading_zh="不用交错调度；梯度缓冲区为 fp32（Megatron-DeepSpeed 的 bf16 训练就是这样）；论文自己"
                                  "给的是“最快配置下”156 TFLOP/s（§3.4）：用它的话比值是这里的 150/156 = 0.96 倍"),
    "deepseek-v3": dict(model=MOE_PRESETS["deepseek-v3"], gpu=H800, num_gpus=2048, global_batch=15360,
                        seq_len=4096, precision="deepseek-v3", count="model",
                        plan=Plan(dp=128, tp=1, pp=16, ep=64, zero_stage=1, recompute="norm-act", micro_batch_size=1,
                                  num_microbatches=120, sequence_parallel=False,
                                  stage_layers=balanced_stages(61, 16)),
                        published_tokens_per_gpu=1e12 / (180e3 * 3600),
                        source="DeepSeek-V3 report: 2048 H800, PP 16 × EP 64 × ZeRO-1 DP (§3.2), FP8 (§3.3), "
                               "180K GPU hours per 10^12 tokens (§1) = 1,543 tokens/s per GPU, a whole-run average "
                               "(batch ramp 3072 → 15360 over the first 469B tokens, §4.2)",
                        source_zh="DeepSeek-V3 技术报告：2048 块 H800，PP 16 × EP 64 × ZeRO-1 数据并行（§3.2），"
                                  "FP8（§3.3），每 10^12 个词元 18 万 GPU 小时（§1）= 每块 GPU 每秒 1,543 个词元，"
                                  "这是整个训练的平均值（前 469B 个词元里批量从 3072 增加到 15360，§4.2）",
                        reading="micro-batch 1, 1F1B instead of DualPipe, all-to-all exposed; RMSNorm outputs "
                                "recomputed (§3.2.3) and the MoE SwiGLU output recomputed from its cached input "
                                "(§3.3.3) = norm-act; the linear layers' inputs and the SwiGLU input cached in FP8 with "
                                "1×128 tiles, the attention output in E5M6 (§3.3.3, "
                                "distlearn.precision.fp8_recipes.fp8_activation_table; MLA's up-projection "
                                "recomputation is not modelled); each token's experts on at most 4 nodes (§3.2.2); "
                                "the TFLOP/s shown count 281 GFLOP per token (attention without the causal mask, "
                                "the MTP module included): display only, the ratio of token rates does not depend "
                                "on it",
                        reading_zh="微批次大小 1，用 1F1B 代替 DualPipe，AllToAll 全部算作未被隐藏的通信；RMSNorm 的输出"
                                   "在反向时重计算（§3.2.3），MoE 中 SwiGLU 的输出由缓存的输入重计算（§3.3.3），即 norm-act；"
                                   "线性层的输入和 SwiGLU 的输入按 1×128 分块以 FP8 缓存，注意力输出用 E5M6（§3.3.3，"
                                   "distlearn.precision.fp8_recipes.fp8_activation_table；MLA 上投影的重计算没有建模）；每个词元的专家最多分布在"
                                   " 4 个节点上（§3.2.2）；显示的 TFLOP/s 按每个词元 281 GFLOP 计（注意力不加因果掩码，"
                                   "含 MTP 模块）：只用于显示，词元速率之比与它无关",
                        options={"max_nodes_per_token": 4},
                        not_modelled="DualPipe overlaps the expert all-to-alls with the other micro-batch's compute "
                                     "(§3.2.1), a schedule the planner does not have (see deepseek_steps)",
                        not_modelled_zh="DualPipe 让专家 AllToAll 与另一个微批次的计算重叠（§3.2.1），规划器没有这种调度"
                                        "（见 deepseek_steps）"),
    "llama3-405b-8k-gpus": _llama3(8192, 64, 1, 8192, 430e12, 0.43),
    "llama3-405b-16k-gpus": _llama3(16384, 128, 1, 8192, 400e12, 0.41),
    "llama3-405b-16k-gpus-cp16": _llama3(16384, 8, 16, 131072, 380e12, 0.38),
    **{f"megascale-baseline-{g}": _megascale_baseline(g, b, t, m) for g, b, t, m in (
        (256, 768, 39.3e3, .530), (512, 768, 74.1e3, .499), (768, 768, 103.8e3, .467), (1024, 768, 132.7e3, .447),
        (3072, 6144, 433.6e3, .487), (6144, 6144, 851.6e3, .478), (8192, 6144, 1027.9e3, .433),
        (12288, 6144, 1466.8e3, .412))},
    "megascale-12288": {**_megascale_baseline(12288, 6144, 1984.0e3, .552),
                        "source": "MegaScale (Jiang et al. 2024, arXiv 2402.15627) §6.1, Table 2, MegaScale row: 175B,"
                                  " TP 8 × PP 8, v = 6, 12,288 GPUs, batch 6144, 1984.0k tokens/s, MFU 55.2 %",
                        "source_zh": "MegaScale（Jiang 等 2024，arXiv 2402.15627）§6.1，表 2 的 MegaScale 行：175B，"
                                     "TP 8 × PP 8，v = 6，12,288 块 GPU，全局批量 6144，每秒 1984.0k 个词元，MFU 55.2 %",
                        "not_modelled": "parallel transformer block, sliding-window attention, LAMB and overlapped "
                                        "TP/PP/DP communication (Table 3: +17.6 % MFU on 256 GPUs): a different model "
                                        "and schedule from the one timed. Its tokens/s counted with full attention "
                                        "make 174 TFLOP/s = 55.8 % of the peak; the printed 55.2 % counts the "
                                        "sliding window's fewer FLOPs (display only: the ratio compares token rates)",
                        "not_modelled_zh": "并行 Transformer 块、滑动窗口注意力、LAMB 以及 TP/PP/DP 通信重叠（表 3：256 块"
                                           " GPU 上 MFU 提高 17.6 %）：与规划器计时的模型和调度不同。它的词元速率按完整注意力"
                                           "折算是 174 TFLOP/s，即峰值的 55.8 %；印出的 55.2 % 按滑动窗口较少的 FLOPs 计"
                                           "（只影响显示：比值比较的是词元速率）"},
    **{f"mcore-{k}": _mcore_row(k, rc) for k, rc in (
        ("1.7b", "none"), ("7.1b", "none"), ("16b", "none"), ("32b", "none"), ("70b", "none"),
        ("119b", "none"), ("177b", "none"), ("314b", "none"), ("462b", "none"))},
    "nemotron4-340b": dict(
        model=NEMOTRON4_340B, gpu="h100-80gb", num_gpus=6144, global_batch=2304, seq_len=4096,
        precision="mixed-fp32-grads", count="model",
        plan=Plan(dp=64, tp=8, pp=12, zero_stage=1, recompute="selective", micro_batch_size=1, num_microbatches=36,
                  num_chunks=8, sequence_parallel=True),
        published_step_seconds=8.0, published_mfu=0.41, options=dict(MEGATRON_OVERLAPS),
        source="Nemotron-4 340B report (NVIDIA 2024, arXiv 2406.11704) §2.3, Table 2: 6,144 H100, TP 8 × PP 12 × "
               "DP 64, batch 2304, 8.0 s per iteration (MFU 41 %), the last stage of the batch ramp",
        source_zh="Nemotron-4 340B 技术报告（NVIDIA 2024，arXiv 2406.11704）§2.3，表 2：6,144 块 H100，TP 8 × PP 12 × "
                  "DP 64，全局批量 2304，每步 8.0 秒（MFU 41 %），批量递增的最后一段",
        reading="micro-batch 1, v = 8 chunks of one layer (NVIDIA's own recipe for this model interleaves one layer "
                "per chunk); selective recomputation; distributed optimizer = ZeRO-1; the squared-ReLU MLP timed as "
                "a SwiGLU of the same matrix FLOPs (3 × 49,152 = 2 × 73,728)",
        reading_zh="微批次大小 1，每个 rank 8 个模型块、每块一层（NVIDIA 为这个模型给出的配置就是每块一层）；选择性重计算；"
                   "分布式优化器即 ZeRO-1；平方 ReLU 的 MLP 按矩阵 FLOPs 相同的 SwiGLU 计时（3 × 49,152 = 2 × 73,728）"),
    **{f"nemotron4-15b-{8 * dp}": _nemotron15b(dp, t, m, b) for dp, t, m, b in (
        (96, 0.57, .343, 384), (192, 0.58, .333, 768), (288, 0.64, .305, 1152))},
    "torchtitan-llama3.1-8b-128": _torchtitan(
        "llama3-8b", 128, 256, 8192, Plan(dp=128, tp=1, pp=1, zero_stage=3, recompute="selective",
                                          micro_batch_size=2, num_microbatches=1), 5605, 3,
        "Llama 3.1 8B, FSDP on 128 GPUs, local batch 2, selective AC, no compile, bf16",
        "Llama 3.1 8B，128 块 GPU 上 FSDP，本地批量 2，选择性激活检查点，不用 torch.compile，bf16",
        extra=("", "", "; torchtitan's selective AC checkpoints whole layers or chosen ops, not the planner's "
                       "'selective' (the attention core): in the planner's memory model the layout does not fit. "
                       "Neither reason sizes the gap (published 2.92 s per step, predicted 1.74 s): the likely one is "
                       "FSDP's all-gathers and reduce-scatter over 400 Gb/s per GPU, which the planner hides behind "
                       "compute (dp_comm 0) but which at a local batch of 2 have only 1.7 s of compute to hide behind "
                       "(two bf16 all-gathers and an fp32 reduce-scatter of 8 B parameters at 50 GB/s: about 1.3 s)",
               "；torchtitan 的选择性激活检查点按整层或按算子选择，不是规划器的 selective（只重计算注意力核心）："
               "按规划器的显存模型这个布局放不下。这两条原因都说明不了差距有多大（公布每步 2.92 秒，预测 1.74 秒）："
               "更可能的原因是 FSDP 在每块 GPU 400 Gb/s 上的 all-gather 和 reduce-scatter，规划器把它们藏在计算后面"
               "（dp_comm 为 0），可本地批量只有 2 时只有 1.7 秒计算可藏（80 亿参数两次 bf16 all-gather 加一次 fp32 "
               "reduce-scatter，按 50 GB/s 约 1.3 秒）")),
    "torchtitan-llama3.1-70b-256": _torchtitan(
        "llama3-70b", 256, 512, 8192, Plan(dp=32, tp=8, pp=1, zero_stage=3, recompute="full", micro_batch_size=16,
                                           num_microbatches=1), 829, 4,
        "Llama 3.1 70B, FSDP 32 × TP 8, local batch 16, full AC, torch.compile + Float8", 
        "Llama 3.1 70B，FSDP 32 × TP 8，本地批量 16，完全激活检查点，torch.compile 加 Float8",
        precision="torchao-fsdp2-float8",
        extra=("; Float8 (tensorwise) linears with torch.compile", "；线性层用 Float8（按张量缩放）并用 torch.compile",
               "; torch.compile's fusions are not modelled. These reasons do not size the gap (published 19.8 s "
               "per step, predicted 14.3 s, of which 4.0 s exposed TP communication): not explained",
               "；torch.compile 的算子融合没有建模。这些原因说明不了差距有多大（公布每步 19.8 秒，预测 14.3 秒，其中 "
               "4.0 秒是未隐藏的 TP 通信）：尚未解释")),
    "torchtitan-llama3.1-405b-512": _torchtitan(
        "llama3.1-405b", 512, 256, 8192, Plan(dp=8, tp=8, pp=8, zero_stage=3, recompute="full", micro_batch_size=1,
                                              num_microbatches=32, num_chunks=2,
                                              stage_layers=balanced_stages(126, 8)), 128, 5,
        "Llama 3.1 405B, FSDP 8 × TP 8 × PP 8, interleaved 1F1B, local batch 32, full AC, compile + Float8 + "
        "async TP", "Llama 3.1 405B，FSDP 8 × TP 8 × PP 8，交错 1F1B，本地批量 32，完全激活检查点，compile 加 Float8 "
        "加异步 TP", precision="torchao-fsdp2-float8", options={"tp_comm_overlap": True},
        extra=("; micro-batch 1, v = 2 chunks (the source gives neither)", "；微批次大小 1，v = 2（原文都没给）",
               "; torch.compile's fusions are not modelled (async TP is: tp_comm_overlap)",
               "；torch.compile 的算子融合没有建模（异步 TP 已建模：tp_comm_overlap）")),
    **{f"mtnlg-530b-{8 * n}": _mtnlg_row(n) for n in MT_NLG_TABLE},
})
# Published figures the planner cannot evaluate at all: no layout, batch or sequence is given.
UNEVALUATED_RUNS = read_only({
    "picotron-llama2-7b-64": dict(
        published_mfu=0.38, num_gpus=64, gpu="h100-80gb",
        source="huggingface/picotron README: 'We observed 38% MFU on a LLaMA-2-7B model using 64 H100 GPUs'",
        source_zh="huggingface/picotron 的 README：“在 64 块 H100 上训练 LLaMA-2-7B，MFU 为 38%”",
        reason="no layout, batch, sequence or recomputation published: nothing to evaluate",
        reason_zh="没有公布并行布局、批量、序列长度和重计算方式：无从评估"),
    "mcore-gpt3-175b-strong-scaling": dict(
        published_mfu=(0.47, 0.42), num_gpus=(96, 4608), gpu="h100-80gb",
        source="Megatron-LM README, 'Strong Scaling Results': GPT-3 175B from 96 to 4,608 H100 at batch 1,152, "
               "'a reduction in MFU from 47% to 42%' (the layouts are only in a plot)",
        source_zh="Megatron-LM README 的“Strong Scaling Results”：GPT-3 175B，从 96 块到 4,608 块 H100，全局批量 1,152，"
                  "“MFU 从 47% 降到 42%”（布局只画在图里）",
        reason="no layout printed for either end", reason_zh="两端都没有印出并行布局"),
})


# ---------------------------------------------------------------- Megatron-Bridge performance summary (NeMo containers)
# NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md and docs/performance-summary-archive.md, the dense Llama
# pre-training rows on DGX-H100, DGX-B200 and DGX-GB200 of the NeMo 25.09, 25.11 and 26.02 containers. Each container
# runs one Megatron-Bridge release (docs/releases/software-versions.md: 25.09 = 0.1.0rc3, 25.11 = 0.2.0, 26.02 =
# 0.3.0), whose scripts/performance/ recipe gives the row's settings; the table commit that first printed each
# container's rows (25.09: #915; 25.11: #1669, whose values #1678's typo fixes leave as they are; 26.02: #2492), the
# release tag's commit, and where the release sets the FP8 recipe and the gradient-reduction dtype:
MBRIDGE_RELEASES = read_only({
    "25.09": dict(bridge="0.1.0rc3", tag_commit="bf71eba07bae8d36f08b796c106d1197d46ad541",
                  table_commit="ea29906309181eeb508a1dd66dd076e87af1a376",
                  precision_at="utils/helpers.py get_precision_config",
                  grad_reduce_at=("the yaml's mixed_precision grad_reduce_in_fp32: false",
                                  "yaml 的 mixed_precision 中 grad_reduce_in_fp32: false"),
                  recipes=("scripts/performance/configs/llama3/llama3_{8b,70b}_llm_pretrain.yaml, "
                           "configs/llama31/llama31_405b_llm_pretrain.yaml, utils/helpers.py, run_script.py")),
    "25.11": dict(bridge="0.2.0", tag_commit="7af9601c9da746d21481194356295bfe23df3737",
                  table_commit="1804c076fee2ff3e7df66f08f855f7b81007b340",
                  precision_at="utils/helpers.py get_precision_config",
                  grad_reduce_at=("{fn} in configs/{d}/{d}_llm_pretrain.py: grad_reduce_in_fp32 = False",
                                  "configs/{d}/{d}_llm_pretrain.py 的 {fn}：grad_reduce_in_fp32 = False"),
                  recipes="scripts/performance/configs/llama3/workload_base_configs.py, "
                          "configs/llama31/workload_base_configs.py"),
    "26.02": dict(bridge="0.3.0", tag_commit="21b02e0cfb2f8ff907e0d8baee0c5205876c6812",
                  table_commit="c0b9a00031b79b731ccefb56d0aba9629b4dd01b",
                  precision_at="utils/precision.py get_precision_config",
                  grad_reduce_at=("{fn} in configs/llama/{d}_llm_pretrain.py: grad_reduce_in_fp32 = False",
                                  "configs/llama/{d}_llm_pretrain.py 的 {fn}：grad_reduce_in_fp32 = False"),
                  recipes="scripts/performance/configs/llama/llama3_workload_base_configs.py, "
                          "llama31_workload_base_configs.py (the _V2 presets)"),
})
# DGX-GB200 runs of 128 and 256 GPUs are not whole 72-GPU NVLink domains: read as 64-GPU NVLink partitions of NVL72
# racks (16 of the 18 compute trays, 4 GPUs each, the recipes' num_gpus_per_node: 4), a reading: the source does not say
GB200_NVL72_AS_64 = GPUS["gb200-nvl72"].with_(
    name="gb200-nvl72-64", gpus_per_node=64,
    source=GPUS["gb200-nvl72"].source + "; read as 64-GPU NVLink partitions (Megatron-Bridge's 128- and 256-GPU runs)")
_MB_MODELS = read_only({"8b": "llama3-8b", "70b": "llama3-70b", "405b": "llama3.1-405b"})
_MB_GPUS = read_only({"h100": ("h100-80gb", "DGX-H100"), "b200": ("b200", "DGX-B200"),
                      "gb200": ("gb200-nvl72", "DGX-GB200")})
# each printed row: (container, system, model, precision as printed, GPUs, GBS, MBS, FSDP, TP, PP, CP, VP, GA,
# tokens/s/GPU, model TFLOP/s/GPU), each cell as the release's table commit prints it (FSDP = 1 means "use FSDP":
# the sharding-group sizes 64 and 8 of five 25.09 / 25.11 rows appear only in the later
# docs/performance-summary-archive.md, e.g. at 93ae2a0dc; 26.02 prints 64 itself); the 26.02 table has no GA column
# (None: GBS / (DP · MBS) is derived); the 25.09 table prints no precision column: its main figures are the recipes'
# fp8_cs runs and its figures in parentheses the fp8_mx runs (its footnote: "different quantization granularities
# ... 32×32 for both weights and activations" on GB200 and B200), written here as "(FP8-CS)" and "(FP8-MX)"
MBRIDGE_TABLE = read_only({
    "2509-gb200-8b-cs": ("25.09", "gb200", "8b", "(FP8-CS)", 8, 128, 2, 0, 1, 1, 1, None, 8, 31357, 1614),
    "2509-gb200-8b-mx": ("25.09", "gb200", "8b", "(FP8-MX)", 8, 128, 2, 0, 1, 1, 1, None, 8, 29925, 1540),
    "2509-gb200-70b-cs": ("25.09", "gb200", "70b", "(FP8-CS)", 64, 128, 2, 1, 1, 1, 1, 1, 1, 3986, 1791),
    "2509-gb200-70b-mx": ("25.09", "gb200", "70b", "(FP8-MX)", 64, 128, 2, 0, 2, 4, 1, 5, 16, 3546, 1593),
    "2509-gb200-405b-cs": ("25.09", "gb200", "405b", "(FP8-CS)", 128, 64, 1, 1, 2, 1, 1, 1, 1, 729, 1840),
    "2509-gb200-405b-mx": ("25.09", "gb200", "405b", "(FP8-MX)", 128, 64, 1, 0, 4, 8, 2, 8, 32, 578, 1458),
    "2509-b200-8b-cs": ("25.09", "b200", "8b", "(FP8-CS)", 8, 128, 2, 0, 1, 1, 1, None, 8, 29994, 1544),
    "2509-b200-8b-mx": ("25.09", "b200", "8b", "(FP8-MX)", 8, 128, 2, 0, 1, 1, 1, None, 8, 29388, 1513),
    "2509-b200-405b-cs": ("25.09", "b200", "405b", "(FP8-CS)", 128, 64, 1, 0, 4, 8, 2, 8, 32, 664, 1676),
    "2509-b200-405b-mx": ("25.09", "b200", "405b", "(FP8-MX)", 128, 64, 1, 0, 4, 8, 2, 8, 32, 622, 1569),
    "2509-h100-8b-cs": ("25.09", "h100", "8b", "(FP8-CS)", 8, 128, 1, 1, 1, 1, 1, None, 16, 14079, 725),
    "2509-h100-70b-cs": ("25.09", "h100", "70b", "(FP8-CS)", 64, 128, 1, 0, 4, 8, 1, 5, 64, 1619, 727),
    "2509-h100-405b-cs": ("25.09", "h100", "405b", "(FP8-CS)", 1024, 512, 1, 0, 8, 8, 2, 8, 64, 302, 763),
    "2511-gb200-8b-cs": ("25.11", "gb200", "8b", "FP8-CS", 8, 128, 2, 0, 1, 1, 1, None, 8, 31508, 1622),
    "2511-gb200-8b-mx": ("25.11", "gb200", "8b", "FP8-MX", 8, 128, 2, 0, 1, 1, 1, None, 8, 29789, 1533),
    "2511-gb200-70b-cs": ("25.11", "gb200", "70b", "FP8-CS", 64, 256, 2, 1, 1, 1, 1, 1, 2, 4312, 1937),
    "2511-gb200-405b-cs": ("25.11", "gb200", "405b", "FP8-CS", 256, 1536, 1, 0, 4, 16, 1, 4, 384, 813, 2053),
    "2511-b200-8b-cs": ("25.11", "b200", "8b", "FP8-CS", 8, 128, 2, 0, 1, 1, 1, None, 8, 30624, 1576),
    "2511-b200-8b-mx": ("25.11", "b200", "8b", "FP8-MX", 8, 128, 2, 0, 1, 1, 1, None, 8, 29521, 1519),
    "2511-b200-405b-cs": ("25.11", "b200", "405b", "FP8-CS", 128, 64, 1, 0, 4, 8, 2, 8, 32, 661, 1667),
    "2511-b200-405b-mx": ("25.11", "b200", "405b", "FP8-MX", 128, 64, 1, 0, 4, 8, 2, 8, 32, 624, 1576),
    "2511-h100-8b-cs": ("25.11", "h100", "8b", "FP8-CS", 8, 128, 1, 1, 1, 1, 1, None, 16, 14451, 744),
    "2511-h100-70b-cs": ("25.11", "h100", "70b", "FP8-CS", 64, 128, 1, 0, 4, 8, 1, 5, 64, 1602, 719),
    "2511-h100-405b-cs": ("25.11", "h100", "405b", "FP8-CS", 1024, 512, 1, 0, 8, 8, 2, 8, 64, 292, 737),
    "2602-gb200-70b-mx": ("26.02", "gb200", "70b", "MXFP8", 64, 256, 1, 0, 2, 4, 1, 5, None, 3613, 1623),
    "2602-gb200-70b-cs": ("26.02", "gb200", "70b", "FP8", 64, 256, 2, 64, 1, 1, 1, None, None, 4040, 1815),
    "2602-h100-70b-cs": ("26.02", "h100", "70b", "FP8", 64, 256, 1, 0, 4, 8, 1, 5, None, 1621, 728),
    "2602-gb200-405b-mx": ("26.02", "gb200", "405b", "MXFP8", 256, 1536, 1, 0, 4, 16, 1, 8, None, 786, 1983),
    "2602-gb200-405b-cs": ("26.02", "gb200", "405b", "FP8", 256, 1536, 1, 0, 4, 16, 1, 4, None, 793, 2004),
    "2602-h100-405b-cs": ("26.02", "h100", "405b", "FP8", 1024, 1536, 1, 0, 8, 8, 2, 8, None, 311, 784),
})
# what the row's recipe sets beyond the table's cells (read from the release's scripts/performance/): CUDA graphs,
# activation offloading to the CPU (cpu_offloading_num_layers) and partial full recomputation (recompute_num_layers)
MBRIDGE_RECIPE_EXTRAS = read_only({
    "2509-gb200-8b-cs": "cuda_graphs: true", "2509-b200-8b-cs": "cuda_graphs: true",
    "2509-gb200-70b-cs": "cpu_offloading_num_layers: 40", "2509-gb200-405b-cs": "cpu_offloading_num_layers: 95",
    "2509-h100-8b-cs": "use_megatron_fsdp: true",
    "2511-gb200-8b-cs": "cuda_graph_impl='local', cuda_graph_scope='full_iteration'",
    "2511-b200-8b-cs": "cuda_graph_impl='local', cuda_graph_scope='full_iteration'",
    "2511-gb200-70b-cs": "cpu_offloading_num_layers=40", "2511-h100-8b-cs": "recompute_num_layers=5",
    "2602-gb200-70b-cs": "cpu_offloading_num_layers=40",
})
# what a row's sources say beyond its cells, where the release's recipe and the table part ways (English, Chinese)
MBRIDGE_ROW_NOTES = read_only({
    "2509-h100-8b-cs": (
        "the yaml's fp8_cs entry also carries nccl_ub: true and keep_fp8_transpose_cache_when_using_custom_fsdp: "
        "true, but nothing in the release reads those two keys, and helpers.set_megatron_fsdp_overrides sets "
        "ddp.keep_fp8_transpose_cache=False",
        "yaml 的 fp8_cs 条目里还有 nccl_ub: true 和 keep_fp8_transpose_cache_when_using_custom_fsdp: true，但该版本"
        "没有任何代码读这两个键，而 helpers.set_megatron_fsdp_overrides 把 ddp.keep_fp8_transpose_cache 设为 False"),
    "2511-h100-8b-cs": (
        "the release's LLAMA3_8B_H100_FP8_CS_BASE_CONFIG never sets use_megatron_fsdp (so the FSDP branch of "
        "llama3_8b_h100_config does not run and the recipe is the distributed optimizer), while the table prints "
        "FSDP 1: the two sources disagree, and this row follows the table",
        "该版本的 LLAMA3_8B_H100_FP8_CS_BASE_CONFIG 从未设置 use_megatron_fsdp（所以 llama3_8b_h100_config 里的 "
        "FSDP 分支不会执行，配置用的是分布式优化器），而表格印的是 FSDP 1：两个来源互相矛盾，这一行以表格为准"),
    "2511-gb200-70b-cs": (
        "the release's own recipe differs from the table: v0.2.0's LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG runs "
        "GBS 128 (the table prints 256); cited instead is v0.3.0's LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2 "
        "(configs/llama/llama3_workload_base_configs.py: GBS 256, MBS 2, Megatron-FSDP, "
        "cpu_offloading_num_layers=40), first in commit e940d997d (2026-01-12), a month after the table's "
        "1804c076f (2025-12-09), which matches every printed cell",
        "该版本自己的配置与表格不符：v0.2.0 的 LLAMA3_70B_GB200_FP8_CS_BASE_CONFIG 用 GBS 128（表格印的是 256）；"
        "这里改引 v0.3.0 的 LLAMA3_70B_PRETRAIN_CONFIG_GB200_FP8_CS_V2（configs/llama/llama3_workload_base_configs.py："
        "GBS 256、MBS 2、Megatron-FSDP、cpu_offloading_num_layers=40），它最早出现在提交 e940d997d（2026-01-12），"
        "比表格的 1804c076f（2025-12-09）晚一个月，与表格印出的每一格都相符"),
    "2511-gb200-405b-cs": (
        "the release's own recipe differs from the table: v0.2.0's LLAMA31_405B_GB200_FP8_CS_BASE_CONFIG runs "
        "128 GPUs, TP 2, Megatron-FSDP, cpu_offloading_num_layers=92, GBS 64; cited instead is v0.3.0's "
        "LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2 (configs/llama/llama31_workload_base_configs.py: 256 GPUs, "
        "TP 4, PP 16, CP 1, VP 4, GBS 1536, no FSDP, no offloading), first in commit d419154f3 (2026-01-09), a "
        "month after the table's 1804c076f (2025-12-09), which matches every printed cell",
        "该版本自己的配置与表格不符：v0.2.0 的 LLAMA31_405B_GB200_FP8_CS_BASE_CONFIG 是 128 块 GPU、TP 2、"
        "Megatron-FSDP、cpu_offloading_num_layers=92、GBS 64；这里改引 v0.3.0 的 "
        "LLAMA31_405B_PRETRAIN_CONFIG_GB200_FP8_CS_V2（configs/llama/llama31_workload_base_configs.py：256 块 GPU、"
        "TP 4、PP 16、CP 1、VP 4、GBS 1536、不用 FSDP、不卸载），它最早出现在提交 d419154f3（2026-01-09），"
        "比表格的 1804c076f（2025-12-09）晚一个月，与表格印出的每一格都相符"),
})
# rows whose release recipe turns overlap_param_gather off: v0.2.0 llama31_llm_pretrain.py llama31_405b_b200_config,
# for fp8_mx ("keeping this eanbled causes NaN grad norm"); v0.2.0 does the same for 70B GB200 / B200 fp8_mx (no
# row here) but not for 8B, and v0.1.0rc3 and v0.3.0 do not for Llama pre-training
MBRIDGE_NO_PARAM_GATHER_OVERLAP = frozenset({"2511-b200-405b-mx"})
# the 25.09 GB200 70B row prints one MBS cell (2) for both figures; its MXFP8 figure's layout in parentheses (TP 2,
# PP 4, GA 16: DP 8, 128 / (8 · 16) = 1) and the recipe's gb200 fp8_mx entry (mbs: 1) give micro-batch 1
MBRIDGE_RECIPE_MBS = read_only({"2509-gb200-70b-mx": 1})
_MB_OFFLOAD = ("the recipe offloads activations to the CPU ({x}: Megatron-Core cpu_offloading of that many layers' "
               "activations over the Grace–Blackwell NVLink-C2C link), which the planner cannot express (it has no "
               "activation offloading)",
               "配置用 Megatron-Core 的 cpu_offloading 把激活值卸载到 CPU，经 Grace 与 Blackwell 之间的 NVLink-C2C "
               "链路，卸载的层数见 {x}。规划器无法表达这一点，它没有激活值卸载")
_MB_MXFP8 = ("MXFP8 (one E8M0 scale per 32 elements, Blackwell's block-scaled tensor cores): the planner has no "
             "MXFP8 recipe (distlearn.precision.fp8_recipes); its nearest, megatron-fp8-cs, keeps per-tensor scales (0 B per "
             "parameter) where MXFP8 keeps 1/32 B per element in each of the row- and column-wise copies of every "
             "weight and cached activation, and its GEMM ceiling is that of per-tensor FP8, not of block-scaled MMA "
             "(unmeasured): neither the same memory nor the same arithmetic. Timed as megatron-fp8-cs for display only",
             "MXFP8（每 32 个元素一个 E8M0 缩放因子，Blackwell 的分块缩放张量核）：规划器没有 MXFP8 方案"
             "（distlearn.precision.fp8_recipes）；最接近的 megatron-fp8-cs 按整张量缩放（每个参数 0 字节），而 MXFP8 对每个权重"
             "和缓存激活的按行、按列两份副本各多存每元素 1/32 字节，它的 GEMM 上限也是整张量 FP8 的，不是分块缩放 MMA 的"
             "（未实测）：显存和算术都不相同。按 megatron-fp8-cs 计时，仅供显示")
_MB_RECOMPUTE5 = ("recompute_num_layers=5 (recompute_granularity 'full', method 'block': 5 of the 32 layers "
                  "recomputed whole, the other 27 storing everything): the planner recomputes all layers alike or "
                  "none, so it cannot express this row",
                  "recompute_num_layers=5（recompute_granularity 为 'full'，method 为 'block'：32 层中只有 5 层整层重计算，"
                  "其余 27 层全部保存）：规划器只能让所有层同样重计算或都不重计算，表达不了这一行")


def _mb_stage_layers(model: str, pp: int, vp: int | None):
    """Layers per pipeline stage of a Megatron-Bridge Llama recipe: 405B sets account_for_embedding_in_pipeline_split
    and account_for_loss_in_pipeline_split (the embedding and the loss each count as a layer: 126 + 2 = 128 split
    evenly over pp · vp chunks, so the first and the last stage hold one layer fewer); 8B and 70B split evenly."""
    if model != "405b" or pp == 1:
        return None
    per = 128 // pp
    return (per - 1,) + (per,) * (pp - 2) + (per - 1,)


def _mbridge_row(key: str) -> dict:
    """The Megatron-Bridge performance-summary row ``key`` of :data:`MBRIDGE_TABLE`, with the settings of the
    release's performance recipe (:data:`MBRIDGE_RELEASES`)."""
    (container, system, size, printed, gpus, gbs, mbs, fsdp, tp, pp, cp, vp, ga, tps, tflops) = MBRIDGE_TABLE[key]
    rel = MBRIDGE_RELEASES[container]
    gpu, dgx = _MB_GPUS[system]
    if gpu == "gb200-nvl72" and gpus > 72:
        gpu = GB200_NVL72_AS_64
    dp = gpus // (tp * pp * cp)
    run_mbs = MBRIDGE_RECIPE_MBS.get(key, mbs)
    chunks = vp if vp else 1
    fp8 = "MX" not in printed
    plan = Plan(dp=dp, tp=tp, pp=pp, cp=cp, zero_stage=3 if fsdp else 1, recompute="none", micro_batch_size=run_mbs,
                num_microbatches=gbs // (dp * run_mbs), num_chunks=chunks, sequence_parallel=tp > 1,
                stage_layers=_mb_stage_layers(size, pp, vp))
    param_overlap = key not in MBRIDGE_NO_PARAM_GATHER_OVERLAP
    options = {"attention": "flash", "causal": True, "swiglu": "fused", "overlap_grad_reduce": True,
               "overlap_param_gather": param_overlap}
    if tp > 1:
        options["tp_comm_overlap"] = True
    extras = MBRIDGE_RECIPE_EXTRAS.get(key, "")
    note, note_zh = MBRIDGE_ROW_NOTES.get(key, ("", ""))
    recompute = "recompute_num_layers" in extras
    d, fn = ("llama31", "set_llama31_common_configs") if size == "405b" else ("llama3", "set_llama3_common_configs")
    grad_at, grad_at_zh = (t.format(d=d, fn=fn) for t in rel["grad_reduce_at"])
    derived_ga = gbs // (dp * run_mbs)
    ga_cell, ga_cell_zh = ((f"GA {ga}", f"GA {ga}") if ga is not None else
                           (f"no GA column (GBS / (DP × MBS) = {derived_ga}, derived)",
                            f"没有 GA 列（GBS / (DP × MBS) = {derived_ga}，推算）"))
    cells = (f"{dgx}, {_MB_MODELS[size]}, {gpus} GPUs, {printed}, GBS {gbs}, MBS {mbs}, seq 8192, FSDP {fsdp}, TP {tp}, "
             f"PP {pp}, CP {cp}, VP {vp or 'n/a'}, {{ga}}, {tps} tokens/s/GPU, {tflops} model TFLOP/s/GPU")
    row = dict(model=get_preset(_MB_MODELS[size]), gpu=gpu, num_gpus=gpus, global_batch=gbs, seq_len=8192,
               precision="megatron-fp8-cs", count="model-causal", plan=plan, published_tokens_per_gpu=tps,
               printed_flops=tflops * 1e12, printed_cells=(printed, gpus, gbs, mbs, fsdp, tp, pp, cp, vp, ga, tps,
                                                           tflops),
               options=options,
               source=f"Megatron-Bridge performance summary, NeMo {container} container (Megatron-Bridge "
                      f"{rel['bridge']}; docs/performance-summary.md at {rel['table_commit'][:9]}, kept in "
                      f"docs/performance-summary-archive.md): {cells.format(ga=ga_cell)}; settings from the release's "
                      f"recipe ({rel['recipes']} at tag v{rel['bridge']}, commit {rel['tag_commit'][:9]})"
                      + (f": {extras}" if extras else "") + (f"; {note}" if note else ""),
               source_zh=f"Megatron-Bridge 性能汇总，NeMo {container} 容器（Megatron-Bridge {rel['bridge']}；"
                         f"docs/performance-summary.md 于 {rel['table_commit'][:9]}，另见 "
                         f"docs/performance-summary-archive.md）：{cells.format(ga=ga_cell_zh)}；设置取自该版本的性能配置"
                         f"（{rel['recipes']}，标签 v{rel['bridge']}，提交 {rel['tag_commit'][:9]}）"
                         + (f"：{extras}" if extras else "") + (f"；{note_zh}" if note_zh else ""),
               reading=("layout and batch read from v0.3.0's _V2 preset, not from this release's own recipe, which "
                        "differs (see the source); " if key in ("2511-gb200-70b-cs", "2511-gb200-405b-cs") else "")
                       + ("FP8 current scaling (fp8 'hybrid', recipe 'tensorwise', first and last layers not kept in "
                          f"BF16: {rel['precision_at']})" if fp8 else
                          f"MXFP8 (recipe 'mxfp8': {rel['precision_at']}, bf16_with_mxfp8_mixed)")
                       + f" with FP8 primary weights (fp8_param_gather=True) and "
                       f"gradients reduced in BF16 ({grad_at}): "
                       + ("" if fp8 else "not scored; timed with its nearest recipe, ")
                       + "the planner's megatron-fp8-cs recipe (per-tensor FP8 GEMMs, "
                       + ("15 B per parameter: on Blackwell TE keeps one FP8 buffer for both layouts, no transposed "
                          "copy" if system != "h100" else "16 B per parameter with TE's transposed FP8 copy")
                       + ("" if fp8 else "; MXFP8 itself keeps a row-wise and a column-wise FP8 copy of each weight, "
                          "each with one scale per 32 values")
                       + ("; under Megatron-FSDP the recipe frees each unit's transposed copy after use "
                          "(keep_fp8_transpose_cache off), so the planner's 1 B per parameter for it is an overcount"
                          if fsdp and system == "h100" else "")
                       + ", the data-parallel all-gather in FP8 and the reduce-scatter in BF16; "
                       + ("both overlapped here); " if param_overlap else "only the gradients overlapped here); ")
                       + ("timed without recomputation, though the recipe recomputes (recompute_num_layers=5, "
                          "not modelled); " if recompute else "no recomputation (the recipe sets none); ")
                       + ("Megatron-FSDP, optim_grads_params = ZeRO-3"
                          + (" (the table's FSDP cell; the release's recipe sets none)"
                             if key == "2511-h100-8b-cs" else "") + "; " if fsdp else
                          "distributed optimizer = ZeRO-1; ")
                       + ("overlap_grad_reduce and overlap_param_gather (the recipes' DistributedDataParallelConfig)"
                          if param_overlap else
                          "overlap_grad_reduce only: the recipe turns overlap_param_gather off for fp8_mx (its "
                          "comment: it \"causes NaN grad norm\")")
                       + ("; TP communication overlap (userbuffers, the recipe's tp_comm_overlap_cfg) and sequence "
                          "parallelism (tp > 1)" if tp > 1 else "")
                       + (f"; v = {vp} interleaved chunks" if vp and vp > 1 else "")
                       + ("; 128 = 126 layers + embedding + loss split over the pipeline "
                          "(account_for_embedding/loss_in_pipeline_split): the first and last stage one layer fewer"
                          if size == "405b" and pp > 1 else "")
                       + ("; the NVLink domain read as a 64-GPU partition of an NVL72 rack (the source does not say)"
                          if gpu is GB200_NVL72_AS_64 else "")
                       + "; a causal attention kernel (no recipe sets an attention backend: the planner reads a "
                         "causal kernel, a reading)"
                       + f"; SwiGLU fused (models/llama/llama_provider.py at the tag: LlamaModelProvider sets "
                         f"bias_activation_fusion = True, so Megatron-Core's MLP runs bias_swiglu_impl, which keeps "
                         f"only its input for backward: megatron/core/fusions/fused_bias_swiglu.py)"
                       + ("; CUDA graphs are not modelled (launch gaps are in END_TO_END)" if "cuda_graph" in extras
                          else ""),
               reading_zh=("布局和批量取自 v0.3.0 的 _V2 预设，而不是该版本自己的配置（两者不同，见出处）；"
                           if key in ("2511-gb200-70b-cs", "2511-gb200-405b-cs") else "")
                          + (f"FP8 当前缩放（fp8 为 'hybrid'，recipe 为 'tensorwise'，首尾两层不保留 BF16："
                             f"{rel['precision_at']}）" if fp8 else
                             f"MXFP8（recipe 为 'mxfp8'：{rel['precision_at']}，bf16_with_mxfp8_mixed）")
                          + f"，主权重存为 FP8（fp8_param_gather=True），梯度按 BF16 归约"
                          f"（{grad_at_zh}）："
                          + ("即" if fp8 else "不计分；按最接近的方案计时，即")
                          + "规划器的 megatron-fp8-cs 方案（整张量 FP8 GEMM，"
                          + ("每个参数 15 字节：Blackwell 上 TE 对两种布局只存一份 FP8 缓冲区，不另存转置副本"
                             if system != "h100" else "每个参数 16 字节，含 TE 的 FP8 转置副本")
                          + ("" if fp8 else "；MXFP8 本身对每个权重存按行、按列两份 FP8，每 32 个值一个缩放因子")
                          + ("；用 Megatron-FSDP 时，配置在每个单元用完转置副本后就释放（keep_fp8_transpose_cache 关闭），"
                             "所以规划器为它计的每个参数 1 字节是多算的" if fsdp and system == "h100" else "") + "，"
                          "数据并行的 AllGather 用 FP8，ReduceScatter 用 BF16；"
                          + ("这里两者都被重叠）；" if param_overlap else "这里只有梯度被重叠）；")
                          + ("按不重计算计时，但配置会重计算（recompute_num_layers=5，未建模）；" if recompute
                             else "不重计算（配置没有设）；")
                          + ("Megatron-FSDP，optim_grads_params 即 ZeRO-3"
                             + ("（依表格的 FSDP 一格；该版本的配置没有设）" if key == "2511-h100-8b-cs" else "")
                             + "；" if fsdp else "分布式优化器即 ZeRO-1；")
                          + ("overlap_grad_reduce 和 overlap_param_gather（配置的 DistributedDataParallelConfig）"
                             if param_overlap else
                             "只有 overlap_grad_reduce：配置对 fp8_mx 关掉了 overlap_param_gather（注释说开着会"
                             "“causes NaN grad norm”，即梯度范数出现 NaN）")
                          + ("；TP 通信重叠（userbuffers，配置的 tp_comm_overlap_cfg）和序列并行（tp > 1）"
                             if tp > 1 else "")
                          + (f"；每个 rank {vp} 个交错模型块" if vp and vp > 1 else "")
                          + ("；126 层加嵌入层和损失层共 128 份在流水线上均分（account_for_embedding/loss_in_pipeline_split）："
                             "首尾两个阶段各少一层" if size == "405b" and pp > 1 else "")
                          + ("；NVLink 域按 NVL72 机柜中 64 块 GPU 的分区计（原文没说）" if gpu is GB200_NVL72_AS_64 else "")
                          + "；注意力核按因果掩码计（配置都没有指定注意力后端：规划器按因果算子计，这是读法）"
                          + "；SwiGLU 按融合算子计（该标签下 models/llama/llama_provider.py 的 LlamaModelProvider 设 "
                            "bias_activation_fusion = True，于是 Megatron-Core 的 MLP 调用 bias_swiglu_impl，反向只保存"
                            "它的输入：megatron/core/fusions/fused_bias_swiglu.py）"
                          + ("；CUDA graph 没有建模（启动间隙算在 END_TO_END 里）" if "cuda_graph" in extras else ""))
    if not fp8:
        row["not_modelled"], row["not_modelled_zh"] = _MB_MXFP8
    elif "cpu_offloading" in extras:
        row["not_modelled"], row["not_modelled_zh"] = (s.format(x=extras) for s in _MB_OFFLOAD)
    elif "recompute_num_layers" in extras:
        row["not_modelled"], row["not_modelled_zh"] = _MB_RECOMPUTE5
    return row


PUBLISHED_RUNS = read_only({**PUBLISHED_RUNS, **{f"mbridge-{k}": _mbridge_row(k) for k in MBRIDGE_TABLE}})

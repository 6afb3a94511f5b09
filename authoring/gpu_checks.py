"""The course's GPU checks, prepared to run in one go on a machine with CUDA (one GPU is enough).

    python3 -m authoring.gpu_checks --out DIR        # writes DIR/gpu_checks.json and DIR/gpu_checks.log

CI has no GPU, so nothing here runs in ``make test``; a session lent a GPU runs this once and records what it saw
(``docs/gpu-runs/``). What it does, each step in its own processes with a time limit, results written as it goes:

1. ``nccl_duplicate``: two NCCL ranks on one GPU, as ``torchrun`` starts them: NCCL refuses ("Duplicate GPU
   detected"). The steps below avoid that by giving every rank its own ``NCCL_HOSTID`` and ``LOCAL_RANK=0``: NCCL then
   treats the ranks as separate hosts and talks over its socket transport (slow, but the same collectives and the
   same CUDA kernels). On a machine with one GPU per rank the labs need none of this.
2. ``labs``: every lab module's ``torchrun`` entry point (``python -m distlearn.<topic>.lab``) on NCCL with 2 and 4
   ranks: the labs' promise that they "run unchanged with torchrun on a GPU cluster".
3. ``context_parallel``: :mod:`distlearn.context_parallel.lab_gpu_check` on 2 and 4 ranks: our ring attention and
   PyTorch's own ``context_parallel`` (CUDA SDPA kernels) against single-GPU SDPA, plus the case broken on purpose.
4. ``measure``: numbers the chapters quote, measured: HBM copy bandwidth; a bf16 matrix product ``[B, d] @ [d, d]``
   over the token count B (decode is bandwidth-bound until B reaches the ridge point); FP8 ``torch._scaled_mm``
   accumulation error with and without ``use_fast_accum`` and with DeepSeek-V3's promotion to FP32 every 128
   elements (§3.3.2 of arXiv 2412.19437), and a probe of how many bits the FP8 accumulator keeps.
5. ``planner_measure`` (issue 38): what chapter 14's planner assumes, measured — bf16 and FP8 GEMM seconds over the
   planner's own shapes (Llama 3 8B / 70B / 405B linear layers at tensor parallelism 8, m = 256 … 16384 tokens, and
   square products), and the bytes one Llama block saves for backward with FlashAttention (saved-tensor hooks and
   the allocator). Also written to ``DIR/planner_measure.json``; :mod:`distlearn.planning.measured` compares it with
   the planner. Run it alone, about a minute on an H200::

       python3 -m authoring.gpu_checks --out DIR --only planner_measure
       python3 -m authoring.gpu_checks --out DIR --only planner_measure --dry-run   # tiny shapes on the CPU
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LABS = ["distlearn.core.lab_smoke", "distlearn.collectives.lab", "distlearn.data_parallel.lab",
        "distlearn.tensor_parallel.lab", "distlearn.tensor_parallel.lab_fg", "distlearn.pipeline_parallel.lab",
        "distlearn.pipeline_parallel.lab_1f1b", "distlearn.pipeline_parallel.lab_zero_bubble",
        "distlearn.zero_fsdp.lab", "distlearn.memory.lab",
        "distlearn.context_parallel.lab", "distlearn.experts.lab", "distlearn.nd_parallel.lab",
        "distlearn.post_training.lab_reshard", "distlearn.post_training.lab_rl", "distlearn.zero_fsdp.lab_muon"]
"""Lab modules with a ``torchrun`` entry point (``deepspeed_fsdp.lab`` and ``zero_fsdp.lab_traffic`` run DeepSpeed,
absent on the GPU image;
``fault_tolerance.lab`` is started by its own torchrun driver)."""


def _record(out: str, results: dict) -> None:
    with open(os.path.join(out, "gpu_checks.json"), "w") as f:
        json.dump(results, f, indent=1)


def _torchrun(module: str, nproc: int, timeout: float, own_host: bool = True) -> dict:
    """Run ``python -m module`` under torchrun with ``nproc`` ranks on this machine's one GPU."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="2", NCCL_SOCKET_IFNAME="lo", NCCL_IB_DISABLE="1",
               PYTHONUNBUFFERED="1")
    per_rank = "export LOCAL_RANK=0 LOCAL_WORLD_SIZE=1" + (" NCCL_HOSTID=distlearn-$RANK" if own_host else "")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "--no-python", "bash", "-c", f"{per_rank}; exec {sys.executable} -m {module}"]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = "timeout", ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes)
                               else (e.stdout or "")) + ((e.stderr or b"").decode(errors="replace")
                                                         if isinstance(e.stderr, bytes) else (e.stderr or ""))
    return {"module": module, "nproc": nproc, "rc": rc, "seconds": round(time.time() - t0, 1),
            "tail": text[-2500:]}


def measure() -> dict:
    """Bandwidth, the bf16 product over B, and FP8 accumulation on this GPU (CUDA events, medians)."""
    import torch

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    res: dict = {"gpu": props.name, "sm_count": props.multi_processor_count,
                 "memory_bytes": props.total_memory, "torch": torch.__version__, "cuda": torch.version.cuda}

    def timed(fn, reps=30, warm=5):
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
        times.sort()
        return times[len(times) // 2]

    # HBM: copy 4 GiB (read 4 GiB + write 4 GiB)
    n = 1 << 31
    src = torch.empty(n, dtype=torch.bfloat16, device=dev)
    dst = torch.empty_like(src)
    s = timed(lambda: dst.copy_(src), reps=10)
    res["copy"] = {"bytes_moved": 2 * src.numel() * 2, "seconds": s, "bytes_per_second": 2 * src.numel() * 2 / s}
    del src, dst

    # bf16 product [B, d] @ [d, d]: FLOPs 2·B·d², bytes 2·(d² + 2·B·d)
    d = 8192
    w = torch.randn(d, d, device=dev, dtype=torch.bfloat16)
    rows = []
    for B in [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]:
        x = torch.randn(B, d, device=dev, dtype=torch.bfloat16)
        s = timed(lambda: x @ w)
        flops, nbytes = 2 * B * d * d, 2 * (d * d + 2 * B * d)
        rows.append({"tokens": B, "seconds": s, "flop_per_second": flops / s, "bytes_per_second": nbytes / s,
                     "flop_per_byte": flops / nbytes})
    res["bf16_gemm_d8192"] = rows
    del w

    # chapter 15's roofline: a bf16 batch of B rows times Llama 3 70B's 8,192 × 28,672 up-projection
    w = torch.randn(8192, 28672, device=dev, dtype=torch.bfloat16)
    rows = []
    for B in [1, 2, 4, 8, 16, 32, 64, 96, 128, 160, 192, 256, 384, 512, 1024, 2048, 4096]:
        x = torch.randn(B, 8192, device=dev, dtype=torch.bfloat16)
        s = timed(lambda: x @ w, reps=20)
        flops, nbytes = 2 * B * w.numel(), 2 * (w.numel() + B * (8192 + 28672))
        rows.append({"tokens": B, "seconds": s, "flop_per_second": flops / s, "bytes_per_second": nbytes / s,
                     "flop_per_byte": flops / nbytes})
    res["bf16_gemm_8192x28672"] = rows
    del w

    # FP8 accumulation: E4M3 inputs (exact), float64 reference on the same values
    torch.manual_seed(0)
    one = torch.tensor(1.0, device=dev)
    acc = []
    for K in [128, 512, 2048, 4096, 8192, 16384]:
        M = N = 256
        a = torch.randn(M, K, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(N, K, device=dev).to(torch.float8_e4m3fn)
        ref = a.double() @ b.double().t()
        mag = a.double().abs() @ b.double().abs().t()

        def err(out):
            r = ((out.double() - ref).abs() / mag).flatten()
            return {"median": float(r.median()), "max": float(r.max())}

        row = {"K": K}
        for fast in (False, True):
            out = torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)
            row["fast_accum" if fast else "default"] = err(out)
        parts = [torch._scaled_mm(a[:, i:i + 128].contiguous(), b[:, i:i + 128].contiguous().t(), scale_a=one,
                                  scale_b=one, out_dtype=torch.float32, use_fast_accum=True)
                 for i in range(0, K, 128)]
        row["fast_accum_promote_every_128"] = err(torch.stack(parts).sum(0))
        row["bf16_matmul"] = err((a.to(torch.bfloat16) @ b.to(torch.bfloat16).t()).float())
        row["fp32_matmul"] = err(a.float() @ b.float().t())
        acc.append(row)
    res["fp8_accumulation"] = acc

    # How many bits does the accumulator keep? One product of 2**e, then K−1 products of 1: count the ones kept.
    probe = []
    K = 4096
    for e in range(8, 19):
        a = torch.ones(16, K, device=dev)
        b = torch.ones(16, K, device=dev)
        a[:, 0] = 2.0 ** (e // 2)
        b[:, 0] = 2.0 ** (e - e // 2)
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        row = {"big_exponent": e, "K": K}
        for fast in (False, True):
            out = torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32,
                                   use_fast_accum=fast)
            row["ones_kept_fast" if fast else "ones_kept_default"] = float(out[0, 0]) - 2.0 ** e
        probe.append(row)
    res["fp8_accumulator_probe"] = probe

    # Chapter 08's own cell, on the hardware: 64 dot products of length 4096, |N(0,1)| rounded to E4M3 (numpy's
    # default_rng(0), as the chapter draws them); the diagonal of a @ wᵀ is the 64 row-by-row dot products
    import numpy as np

    rng = np.random.default_rng(0)
    a_np, w_np = np.abs(rng.standard_normal((64, 4096))), np.abs(rng.standard_normal((64, 4096)))
    a8 = torch.tensor(a_np, dtype=torch.float32).to(torch.float8_e4m3fn).to(dev)
    w8 = torch.tensor(w_np, dtype=torch.float32).to(torch.float8_e4m3fn).to(dev)
    exact = (a8.double() * w8.double()).sum(1)
    dots = {"exact": exact.cpu().tolist()}
    for fast in (False, True):
        out = torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)
        dots["fast_accum" if fast else "default"] = out.diagonal().double().cpu().tolist()
    res["ch08_dot_products"] = dots

    # Decode attention reads the KV cache: one query token per sequence, GQA 32 query / 8 KV heads, head_dim 128, bf16
    import torch.nn.functional as F

    rows = []
    for batch, length in [(8, 1024), (8, 4096), (8, 16384), (8, 65536), (32, 16384), (1, 131072)]:
        q = torch.randn(batch, 32, 1, 128, device=dev, dtype=torch.bfloat16)
        k = torch.randn(batch, 8, length, 128, device=dev, dtype=torch.bfloat16)
        v = torch.randn_like(k)
        s = timed(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
        kv = 2 * k.numel() * 2
        rows.append({"batch": batch, "kv_len": length, "kv_bytes": kv, "seconds": s, "bytes_per_second": kv / s})
        del q, k, v
    res["decode_attention"] = rows
    return res


# ---------------------------------------------------------------- planner_measure (issue 38)
PLANNER_GEMMS = (
    ("llama3-8b", "qkv", 768, 4096), ("llama3-8b", "attention out", 4096, 512),
    ("llama3-8b", "mlp gate+up", 3584, 4096), ("llama3-8b", "mlp down", 4096, 1792),
    ("llama3-70b", "qkv", 1280, 8192), ("llama3-70b", "attention out", 8192, 1024),
    ("llama3-70b", "mlp gate+up", 7168, 8192), ("llama3-70b", "mlp down", 8192, 3584),
    ("llama3.1-405b", "qkv", 2304, 16384), ("llama3.1-405b", "attention out", 16384, 2048),
    ("llama3.1-405b", "mlp gate+up", 13312, 16384), ("llama3.1-405b", "mlp down", 16384, 6656))
"""(model preset, GEMM, n, k) of each linear layer of a Llama 3 layer after tensor parallelism of 8, as the planner
times them (:func:`distlearn.planning.kernels.layer_gemms`; tests/test_h200_planner.py checks this table)."""
PLANNER_TOKENS = (256, 512, 1024, 2048, 4096, 8192, 16384)
"""m: the tokens one GPU's micro-batch holds (b·s/cp)."""
SQUARE = (1024, 2048, 4096, 8192, 16384)
"""Square products m = n = k."""
GEMM_KINDS = ("bf16", "fp8_tensorwise", "fp8_tensorwise_fast", "fp8_rowwise_fast", "fp8_blockwise")
"""bf16 ``x @ wᵀ`` (``torch.mm``, as ``F.linear`` runs it); E4M3 ``torch._scaled_mm`` with one scale per tensor
(cuBLAS's default accumulation, and ``use_fast_accum=True``), one per row of x and column of wᵀ (fast
accumulation), and DeepSeek-V3's blocks (1 × 128 for x, 128 × 128 for w; cuBLAS ≥ 12.9). Output bf16."""
BLOCKS = (
    # name, (h, heads, kv heads, f), seq_len, micro-batch, norm_impl, swiglu, recompute, backend, timed
    ("8b s2048", (4096, 32, 8, 14336), 2048, 1, "fused", "unfused", "none", "flash", False),
    ("8b s4096", (4096, 32, 8, 14336), 4096, 1, "fused", "unfused", "none", "flash", False),
    ("8b s8192", (4096, 32, 8, 14336), 8192, 1, "fused", "unfused", "none", "flash", False),
    ("8b s4096 b2", (4096, 32, 8, 14336), 4096, 2, "fused", "unfused", "none", "flash", False),
    ("70b s4096", (8192, 64, 8, 28672), 4096, 1, "fused", "unfused", "none", "flash", False),
    ("8b s4096 torch rms_norm", (4096, 32, 8, 14336), 4096, 1, "torch", "unfused", "none", "flash", True),
    ("8b s4096 fused swiglu", (4096, 32, 8, 14336), 4096, 1, "fused", "fused", "none", "flash", False),
    ("8b s4096 selective", (4096, 32, 8, 14336), 4096, 1, "fused", "unfused", "selective", "flash", False),
    ("8b s4096 norm-act", (4096, 32, 8, 14336), 4096, 1, "fused", "unfused", "norm-act", "flash", False),
    ("8b s4096 default backend", (4096, 32, 8, 14336), 4096, 1, "torch", "unfused", "none", "default", False))
"""The Llama blocks whose saved bytes are counted: Llama 3 8B (and one 70B) layers at tensor parallelism 1,
:class:`distlearn.activation_memory.measure.LlamaBlock` in bf16, attention forced to PyTorch's FlashAttention
kernel (``"default"``: whichever kernel PyTorch picks). ``norm_impl="fused"`` keeps what CUDA's fused RMSNorm
keeps (through PyTorch's reference of it); ``"torch"`` runs ``F.rms_norm`` itself."""
DRY_GEMMS = (("tiny", "qkv", 96, 256), ("tiny", "mlp down", 256, 128))
DRY_BLOCKS = (("tiny s64", (64, 4, 2, 224), 64, 2, "fused", "unfused", "none", "flash", True),
              ("tiny s64 fused swiglu", (64, 4, 2, 224), 64, 1, "fused", "fused", "none", "flash", False))


def _median(xs: list) -> float:
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


class _Timer:
    """Median seconds of one call, on CUDA (events around a CUDA graph of ``inner`` calls, replayed ``reps`` times;
    without graphs, the same calls launched one by one) or on the CPU (``time.perf_counter``, dry run)."""

    def __init__(self, torch, cuda: bool, reps: int = 10, min_seconds: float = 2e-3):
        self.torch, self.cuda, self.reps, self.min_seconds = torch, cuda, reps, min_seconds
        self.no_graphs: set = set()   # kinds whose capture failed once: launched one by one from then on

    def __call__(self, calls: list, out_bytes: int, kind: str = "") -> dict:
        torch = self.torch
        if not self.cuda:
            for f in calls[:2]:
                f()
            times = []
            for i in range(self.reps):
                t0 = time.perf_counter()
                calls[i % len(calls)]()
                times.append(time.perf_counter() - t0)
            return {"seconds": _median(times), "inner": 1, "method": "cpu perf_counter", "reps": self.reps}
        for f in calls[:2]:
            f()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for f in calls:
            f()
        b.record()
        b.synchronize()
        estimate = max(a.elapsed_time(b) / 1e3 / len(calls), 1e-7)
        inner = int(min(max(1, -(-self.min_seconds // estimate)), 256, max(1, (2 << 30) // max(out_bytes, 1))))
        method, graph = "eager", None
        if kind not in self.no_graphs:
            try:
                graph = torch.cuda.CUDAGraph()
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for f in calls:
                        f()
                torch.cuda.current_stream().wait_stream(side)
                with torch.cuda.graph(graph):
                    for i in range(inner):
                        calls[i % len(calls)]()
                method = "cuda graph"
            except Exception as exc:  # launch them one by one, and stop trying graphs
                graph = None
                self.no_graphs.add(kind)
                method = f"eager (graph failed: {exc!r:.200})"
                _settle(torch)

        def run():
            if graph is not None:
                graph.replay()
            else:
                for i in range(inner):
                    calls[i % len(calls)]()

        run()
        run()
        times = []
        for _ in range(self.reps):
            a.record()
            run()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) / 1e3 / inner)
        del graph
        return {"seconds": _median(times), "min_seconds": min(times), "max_seconds": max(times), "inner": inner,
                "method": method, "reps": self.reps}


def _gemm_calls(torch, kind: str, m: int, n: int, k: int, dev, sets: int) -> list:
    """``sets`` independent operand pairs (x: m × k, w: n × k, as ``F.linear`` holds them) and one call of ``kind``
    on each: rotating through them keeps small operands from being served by the L2 cache."""
    calls = []
    e4m3 = torch.float8_e4m3fn
    for _ in range(sets):
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        if kind == "bf16":
            calls.append(lambda x=x, w=w: torch.mm(x, w.t()))
            continue
        x8, w8 = x.to(e4m3), w.to(e4m3)
        del x, w
        if kind.startswith("fp8_tensorwise"):
            one = torch.tensor(1.0, device=dev)
            sa, sb, fast = one, one, kind.endswith("fast")
        elif kind == "fp8_rowwise_fast":
            sa = torch.ones(m, 1, device=dev, dtype=torch.float32)
            sb = torch.ones(1, n, device=dev, dtype=torch.float32)
            fast = True
        else:  # 1 × 128 blocks of x (scales outer-dim-major), 128 × 128 blocks of w, as PyTorch's own tests lay them
            sa = torch.ones(k // 128, m, device=dev, dtype=torch.float32).t()
            sb = torch.ones(n // 128, k // 128, device=dev, dtype=torch.float32).t()
            fast = False
        calls.append(lambda x8=x8, w8=w8, sa=sa, sb=sb, fast=fast: torch._scaled_mm(
            x8, w8.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=fast))
    return calls


def _gemm_row(torch, timer, kind: str, m: int, n: int, k: int, dev) -> dict:
    """One timed GEMM of ``kind``: seconds, TFLOP/s (2·m·n·k FLOPs), or the error it raised."""
    in_bytes = 2 if kind == "bf16" else 1
    one_set = (m * k + n * k) * in_bytes + m * n * 2
    sets = int(min(16, max(1, -(-(256 << 20) // one_set)))) if timer.cuda else 1
    try:
        calls = _gemm_calls(torch, kind, m, n, k, dev, sets)
        row = timer(calls, m * n * 2, kind)
        row["tflops"] = 2 * m * n * k / row["seconds"] / 1e12
        row["operand_sets"] = sets
    except Exception as exc:
        row = {"error": f"{exc!r:.400}"}
    finally:
        calls = None
        if timer.cuda:
            _settle(torch)
    return row


def _settle(torch) -> None:
    """Wait for the GPU and hand cached memory back; an error here (a kernel that failed) is left to the next
    measurement, which records its own."""
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:
        pass


def _attention_kernels(out) -> list:
    """Names of the attention backward nodes in ``out``'s graph (which SDPA kernel ran)."""
    names, stack, seen, keep = set(), [out.grad_fn], set(), []
    while stack:
        fn = stack.pop()
        if fn is None or id(fn) in seen:
            continue
        keep.append(fn)  # a node's Python object can die once popped, and a new one take its id
        seen.add(id(fn))
        if "Attention" in type(fn).__name__ or "ScaledDotProduct" in type(fn).__name__:
            names.add(type(fn).__name__)
        stack.extend(f for f, _ in fn.next_functions)
    return sorted(names)


def _block_row(torch, case: tuple, dev, timed_reps: int = 5) -> dict:
    """Saved-for-backward bytes of one :class:`~distlearn.activation_memory.measure.LlamaBlock` (counted by storage
    with saved-tensor hooks, parameters and buffers left out), the allocator's growth across the forward, and
    (``timed``) the forward and backward seconds."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel

    from distlearn.activation_memory.measure import LlamaBlock, saved_tensor_bytes

    name, (h, a, kv, f), s, b, norm_impl, swiglu, recompute, backend, timed = case
    cuda = dev.type == "cuda"
    row: dict = {"name": name, "hidden_size": h, "num_heads": a, "num_kv_heads": kv, "ffn_hidden_size": f,
                 "seq_len": s, "micro_batch_size": b, "norm_impl": norm_impl, "swiglu": swiglu,
                 "recompute": recompute, "backend": backend, "dtype": "bf16"}
    torch.manual_seed(0)
    with torch.device(dev):
        block = LlamaBlock(h, a, kv, f, attention="flash", recompute=recompute, norm_impl=norm_impl, swiglu=swiglu,
                           max_seq_len=s)
    block = block.to(torch.bfloat16).train()
    x = torch.randn(b, s, h, device=dev, dtype=torch.bfloat16, requires_grad=True)
    exclude = list(block.parameters()) + list(block.buffers())
    ctx = sdpa_kernel(SDPBackend.FLASH_ATTENTION) if backend == "flash" else contextlib.nullcontext()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with ctx:
        block(x).float().sum().backward()          # warm-up: kernels, cuBLAS workspaces
        x.grad = None
        block.zero_grad(set_to_none=True)
        sync()
        before = torch.cuda.memory_allocated() if cuda else None
        out, saved = saved_tensor_bytes(block, x, exclude=exclude)
        sync()
        if cuda:
            row["allocated_bytes"] = torch.cuda.memory_allocated() - before
        row["saved_bytes"] = saved.total
        row["storages"] = [[nbytes, dtype, list(shape)] for nbytes, dtype, shape in saved.storages]
        row["input_bytes"] = x.untyped_storage().nbytes()
        row["output_bytes"] = out.untyped_storage().nbytes()
        row["attention_kernels"] = _attention_kernels(out)
        out.backward(torch.ones_like(out))
        sync()
        try:  # the attention operators the forward called, as PyTorch's profiler names them
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                y = block(x)
            del y
            row["attention_ops"] = sorted({e.name for e in prof.events() if "attention" in e.name.lower()})
        except Exception as exc:
            row["attention_ops"] = f"{exc!r:.200}"
        x.grad = None
        block.zero_grad(set_to_none=True)
        sync()
        if timed:
            fwd, bwd = [], []
            for _ in range(timed_reps):
                x.grad = None
                block.zero_grad(set_to_none=True)
                t0 = time.perf_counter()
                y = block(x)
                sync()
                t1 = time.perf_counter()
                y.backward(torch.ones_like(y))
                sync()
                fwd.append(t1 - t0)
                bwd.append(time.perf_counter() - t1)
            row["forward_seconds"], row["backward_seconds"] = _median(fwd), _median(bwd)
    return row


def planner_measure(dry_run: bool = False, save=None, gemm_budget_s: float = 60.0,
                    block_budget_s: float = 40.0) -> dict:
    """What the planner (chapter 14) assumes, measured on this GPU (issue 38): GEMM seconds and TFLOP/s of
    :data:`PLANNER_GEMMS` × :data:`PLANNER_TOKENS` and :data:`SQUARE` in each of :data:`GEMM_KINDS`, and the
    saved-for-backward bytes of the Llama blocks of :data:`BLOCKS`. ``dry_run``: tiny shapes on the CPU (a check of
    this code before a GPU runs it). ``save(result)`` is called after each shape. Each measurement records its
    error instead of stopping the others; a part stops starting new ones after its budget (seconds)."""
    import torch

    cuda = torch.cuda.is_available() and not dry_run
    dev = torch.device("cuda" if cuda else "cpu")
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "dry_run": not cuda, "torch": torch.__version__,
                 "cuda": torch.version.cuda, "gemm": [], "square": [], "blocks": [], "skipped": []}
    save = save or (lambda r: None)
    if cuda:
        props = torch.cuda.get_device_properties(dev)
        res.update(gpu=props.name, sm_count=props.multi_processor_count, memory_bytes=props.total_memory,
                   capability=list(torch.cuda.get_device_capability(dev)),
                   cudnn=torch.backends.cudnn.version(), cublas_blockwise_needs="CUDA >= 12.9")
        for key, fn in (("clock_mhz", torch.cuda.clock_rate), ("power_mw", torch.cuda.power_draw)):
            try:
                res[f"{key}_before"] = fn()
            except Exception as exc:
                res[f"{key}_before"] = f"{exc!r:.100}"
    else:
        res["gpu"] = "cpu (dry run)"
    timer = _Timer(torch, cuda)

    def sensors(tag) -> dict:
        """SM clock (MHz), board power (mW) and temperature (°C) now, through NVML."""
        out = {"at": tag}
        for key, name in (("clock_mhz", "clock_rate"), ("power_mw", "power_draw"), ("temperature_c", "temperature")):
            try:
                out[key] = getattr(torch.cuda, name)()
            except Exception as exc:
                out[key] = f"{exc!r:.100}"
        return out

    res["sensors"] = []
    reference = 8192 if cuda else 128   # the same square bf16 product first (cold) and last (after the sweep)
    res["reference_start"] = _gemm_row(torch, timer, "bf16", reference, reference, reference, dev)
    res["sensors"].append(sensors("after the cold reference"))
    gemms = PLANNER_GEMMS if cuda else DRY_GEMMS
    tokens = PLANNER_TOKENS if cuda else (16, 32)
    square = SQUARE if cuda else (128, 256)
    t0 = time.time()
    for m in tokens:
        for model, name, n, k in gemms:
            row = {"model": model, "name": name, "m": m, "n": n, "k": k}
            for kind in GEMM_KINDS:
                if time.time() - t0 > gemm_budget_s:
                    res["skipped"].append(f"{model} {name} m={m} {kind}: over the GEMM budget")
                    continue
                row[kind] = _gemm_row(torch, timer, kind, m, n, k, dev)
            res["gemm"].append(row)
        res["sensors"].append(sensors(f"after m = {m}"))
        save(res)
    for n in square:
        row = {"m": n, "n": n, "k": n}
        for kind in GEMM_KINDS:
            if time.time() - t0 > gemm_budget_s:
                res["skipped"].append(f"square {n} {kind}: over the GEMM budget")
                continue
            row[kind] = _gemm_row(torch, timer, kind, n, n, n, dev)
        res["square"].append(row)
    res["reference_end"] = _gemm_row(torch, timer, "bf16", reference, reference, reference, dev)
    res["sensors"].append(sensors("after the hot reference"))
    res["gemm_seconds"] = round(time.time() - t0, 1)
    res["timing"] = ("CUDA events around a CUDA graph of `inner` calls (each on its own operands, rotating through "
                     "`operand_sets` pairs), replayed `reps` times; median per call" if cuda else
                     "dry run: time.perf_counter, one call each")
    save(res)
    t1 = time.time()
    for case in (BLOCKS if cuda else DRY_BLOCKS):
        if time.time() - t1 > block_budget_s:
            res["skipped"].append(f"block {case[0]}: over the block budget")
            continue
        try:
            res["blocks"].append(_block_row(torch, case, dev))
        except Exception as exc:
            error = f"{exc!r:.600}"
            if case[4] == "fused":  # PyTorch's reference of the fused RMSNorm missing: F.rms_norm instead
                if cuda:
                    _settle(torch)
                try:
                    row = _block_row(torch, case[:4] + ("torch",) + case[5:], dev)
                    row["name"], row["fused_norm_error"] = case[0], error
                    res["blocks"].append(row)
                    continue
                except Exception as exc2:
                    error += f" | with F.rms_norm: {exc2!r:.400}"
            res["blocks"].append({"name": case[0], "error": error})
        finally:
            if cuda:
                _settle(torch)
        save(res)
    res["block_seconds"] = round(time.time() - t1, 1)
    if cuda:
        for key, fn in (("clock_mhz", torch.cuda.clock_rate), ("power_mw", torch.cuda.power_draw)):
            try:
                res[f"{key}_after"] = fn()
            except Exception as exc:
                res[f"{key}_after"] = f"{exc!r:.100}"
    return res


def _summary(r: dict) -> str:
    """A few lines of a planner_measure result, for the log (the JSON holds everything)."""
    lines = [f"{r.get('gpu')} torch {r.get('torch')} cuda {r.get('cuda')} gemm {r.get('gemm_seconds')} s "
             f"blocks {r.get('block_seconds')} s skipped {len(r.get('skipped', []))} error {str(r.get('error'))[-500:]}"]
    for row in r.get("gemm", []) + r.get("square", []):
        cells = []
        for kind in GEMM_KINDS:
            c = row.get(kind, {})
            cells.append(f"{kind} {c['tflops']:.0f}" if "tflops" in c else f"{kind} ERR {c.get('error', 'skipped')[:80]}")
        lines.append(f"{row.get('model', 'square')} {row.get('name', '')} m={row['m']} n={row['n']} k={row['k']}: "
                     + ", ".join(cells))
    for b in r.get("blocks", []):
        lines.append(f"block {b.get('name')}: saved {b.get('saved_bytes')} allocated {b.get('allocated_bytes')} "
                     f"kernels {b.get('attention_kernels')} fwd {b.get('forward_seconds')} bwd "
                     f"{b.get('backward_seconds')} {b.get('error', '')[:300]}")
    return "\n".join(lines)


STEPS = ("measure", "planner_measure", "nccl_duplicate", "context_parallel", "labs")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: " + ",".join(STEPS))
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--labs", default="", help="comma-separated lab modules to run (default: every one of LABS)")
    ap.add_argument("--only", default="", help="comma-separated steps to run, the others skipped: " + ",".join(STEPS))
    ap.add_argument("--dry-run", action="store_true", help="planner_measure on tiny shapes on the CPU")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
    only = set(filter(None, a.only.split(",")))
    if only - set(STEPS) or skip - set(STEPS):
        ap.error(f"unknown step in --only / --skip: {sorted((only | skip) - set(STEPS))}; steps: {', '.join(STEPS)}")
    if only:
        skip |= set(STEPS) - only
    results: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    log = open(os.path.join(a.out, "gpu_checks.log"), "w")

    def say(*parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    try:
        import torch
        results["env"] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                          "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
                          "gpus": torch.cuda.device_count()}
        say("env", results["env"])
        _record(a.out, results)
        if "measure" not in skip:
            t0 = time.time()
            try:
                results["measure"] = measure()
            except Exception as exc:  # record and go on
                results["measure"] = {"error": repr(exc)}
            say("measure", round(time.time() - t0, 1), "s", json.dumps(results["measure"])[:3000])
            _record(a.out, results)
        if "planner_measure" not in skip:
            t0 = time.time()

            def save(r):
                results["planner_measure"] = r
                _record(a.out, results)
                with open(os.path.join(a.out, "planner_measure.json"), "w") as f:
                    json.dump(r, f, indent=1)

            try:
                save(planner_measure(dry_run=a.dry_run, save=save))
            except Exception as exc:  # record and go on
                import traceback

                results.setdefault("planner_measure", {})["error"] = traceback.format_exc()[-3000:]
                save(results["planner_measure"])
            say("planner_measure", round(time.time() - t0, 1), "s")
            say(_summary(results["planner_measure"]))
        if "nccl_duplicate" not in skip:
            r = _torchrun("distlearn.core.lab_smoke", 2, 90, own_host=False)
            results["nccl_duplicate"] = r
            say("nccl_duplicate rc", r["rc"], r["tail"][-600:])
            _record(a.out, results)
        if "context_parallel" not in skip:
            results["context_parallel"] = []
            for n in (2, 4):
                r = _torchrun("distlearn.context_parallel.lab_gpu_check", n, 200)
                results["context_parallel"].append(r)
                say("context_parallel", n, "rc", r["rc"], r["seconds"], "s\n", r["tail"][-2000:])
                _record(a.out, results)
        if "labs" not in skip:
            results["labs"] = []
            jobs = [(m, n) for n in (2, 4) for m in (a.labs.split(",") if a.labs else LABS)]
            with cf.ThreadPoolExecutor(a.jobs) as ex:
                for r in ex.map(lambda job: _torchrun(job[0], job[1], 180), jobs):
                    results["labs"].append(r)
                    say("lab", r["module"], r["nproc"], "rc", r["rc"], r["seconds"], "s")
                    if r["rc"] != 0:
                        say(r["tail"][-1200:])
                    _record(a.out, results)
    finally:
        results["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
        _record(a.out, results)
        log.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

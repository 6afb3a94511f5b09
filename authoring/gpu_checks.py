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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip", default="", help="comma-separated steps to skip: nccl_duplicate,labs,context_parallel,"
                    "measure")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--labs", default="", help="comma-separated lab modules to run (default: every one of LABS)")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
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

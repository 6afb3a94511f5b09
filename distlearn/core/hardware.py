"""GPU and cluster presets with their published figures, for the planner (chapter 14) and chapter 10.

Units: memory in **bytes** (datasheet "GB" are 1e9 bytes), compute in FLOP/s, bandwidth in **bytes/s per GPU and
per direction** (the "bus bandwidth" a ring collective can use; NVIDIA quotes NVLink as the bidirectional total,
so we halve it, and network cards in bits/s, so we divide by 8).

Figures and sources (dense = without 2:4 sparsity; the sparse figure NVIDIA also prints is twice these):

=============  ==========  ==================  ===================  ========================  ==================  ==========
GPU            memory      peak dense 16-bit   peak dense fp32      NVLink per direction      inter-node GPU/dir  HBM
=============  ==========  ==================  ===================  ========================  ==================  ==========
V100-32GB      32 GB       125 TFLOP/s (fp16)  15.7 TFLOP/s (FP32)  150 GB/s (300 GB/s tot.)  6.25 GB/s (DGX-2)   900 GB/s
A100-80GB      80 GB       312 TFLOP/s (bf16)  156 TFLOP/s (TF32)   300 GB/s (600 GB/s tot.)  25 GB/s (DGX A100)  2,039 GB/s
H100-80GB      80 GB       989 TFLOP/s (bf16)  494.5 TFLOP/s (TF32) 450 GB/s (900 GB/s tot.)  50 GB/s (DGX H100)  3.35 TB/s
H200           141 GB      989 TFLOP/s (bf16)  494.5 TFLOP/s (TF32) 450 GB/s (900 GB/s tot.)  50 GB/s (DGX H200)  4.8 TB/s
H800           80 GB       989 TFLOP/s (bf16)  494.5 TFLOP/s (TF32) 200 GB/s (400 GB/s tot.)  50 GB/s (DeepSeek)  3.35 TB/s
B200           180 GB      2,250 TFLOP/s bf16  1,125 TFLOP/s (TF32) 900 GB/s (1.8 TB/s tot.)  50 GB/s (DGX B200)  8 TB/s
GB200 NVL72    186 GB (?)  2,500 TFLOP/s bf16  1,250 TFLOP/s (TF32) 900 GB/s (1.8 TB/s tot.)  50 GB/s (?)         8 TB/s
MI300X         192 GB      1,307.4 TFLOP/s     653.7 TFLOP/s (TF32) 448 GB/s (IF, 896 tot.)   50 GB/s (?)         5.3 TB/s
=============  ==========  ==================  ===================  ========================  ==================  ==========

(?) marks a figure that is uncertain; the notes below say why. "IF" is AMD's Infinity Fabric, which stands where
NVLink stands on the NVIDIA GPUs.

The fp32 column is what fp32 training's matrix multiplies run at: TF32 tensor cores where the GPU has them
(A100 and later; PyTorch uses them after ``torch.backends.cuda.matmul.allow_tf32 = True`` or
``torch.set_float32_matmul_precision("high")``), FP32 CUDA cores on the V100, which has no TF32. Without TF32 an
A100 multiplies fp32 matrices at 19.5 TFLOP/s and an H100 / H200 at 67 TFLOP/s (same datasheets, "FP32" row).

- V100: NVIDIA Tesla V100 datasheet (SXM2: 125 TFLOPS tensor, 15.7 TFLOPS single-precision, 32 GB HBM2, NVLink
  300 GB/s); DGX-2 (16 GPUs, 8 × 100 Gb/s EDR InfiniBand), the cluster of the ZeRO paper (Rajbhandari et al.
  2020, §10.1).
- A100: NVIDIA A100 Tensor Core GPU datasheet (80GB SXM: BF16 312 TFLOPS, TF32 156 TFLOPS dense (312 with
  sparsity), FP32 19.5 TFLOPS, NVLink 600 GB/s); DGX A100 user guide (8 × 200 Gb/s HDR InfiniBand for compute),
  the Selene nodes of Narayanan et al. 2021 (§5).
- H100: NVIDIA H100 Tensor Core GPU datasheet (SXM: BF16 1,979 TFLOPS *with sparsity* → 989 dense; TF32 989 TFLOPS
  with sparsity → 494.5 dense; FP32 67 TFLOPS; NVLink 900 GB/s); DGX H100 (8 × 400 Gb/s ConnectX-7 NDR).
- H200: NVIDIA H200 Tensor Core GPU datasheet (SXM: 141 GB HBM3e, BF16 1,979 TFLOPS with sparsity → 989 dense,
  TF32 989 with sparsity → 494.5 dense, FP32 67 TFLOPS, NVLink 900 GB/s); DGX H200 (8 × 400 Gb/s ConnectX-7).
- H800: NVIDIA H800 Tensor Core GPU datasheet (SXM: the H100 SXM's tensor cores, 80 GB HBM3 at 3.35 TB/s, but
  NVLink cut to 400 GB/s bidirectional); the GPU DeepSeek-V3 was trained on (DeepSeek-V3 technical report, §3.1:
  2048 H800s, 8 per node, InfiniBand between nodes). Its network figure is the report's (§3.2.2: "IB (50 GB/s)" per
  GPU). The same paragraph gives the NVLink bandwidth DeepSeek achieves, 160 GB/s, "roughly 3.2 times that of IB":
  :data:`H800_NVLINK_ACHIEVED_DEEPSEEK_V3`. The preset keeps the datasheet's nominal 200 GB/s per direction, like
  every other row.
- B200: NVIDIA DGX B200 datasheet and HGX B200 specification (8 GPUs: 1,440 GB HBM3e in all → 180 GB each, 64 TB/s
  in all → 8 TB/s each; FP8 72 PFLOPS, BF16 36 PFLOPS, TF32 18 PFLOPS for 8 GPUs *with sparsity*, so per GPU dense
  4.5 PFLOP/s FP8, 2.25 PFLOP/s BF16, 1.125 PFLOP/s TF32; fifth-generation NVLink 1.8 TB/s per GPU); DGX B200:
  8 × 400 Gb/s ConnectX-7, one per GPU. The JAX scaling book's GPU chapter (Austin et al. 2025, "How to Think About
  GPUs") uses the same 2.25e15 FLOP/s, 8e12 B/s HBM and 900 GB/s NVLink per direction.
- GB200 NVL72: NVIDIA GB200 NVL72 datasheet (72 Blackwell GPUs in one NVLink domain of 18 NVLink Switch chips;
  FP8 720 PFLOPS, BF16 360 PFLOPS, TF32 180 PFLOPS for 72 GPUs with sparsity → per GPU dense 5, 2.5 and 1.25
  PFLOP/s; HBM3e 576 TB/s in all → 8 TB/s per GPU; NVLink 130 TB/s in all → 1.8 TB/s per GPU, 900 GB/s per
  direction). **Uncertain:** the memory per GPU, 186 GB = "up to 13.4 TB" / 72 in the current datasheet (earlier
  material said 13.5 TB, and 192 GB per GPU); and the network per GPU, 50 GB/s = one 400 Gb/s ConnectX-7 per GPU
  in NVIDIA's DGX GB200 SuperPOD compute fabric (4 per 4-GPU compute tray); later systems (GB300) have 800 Gb/s.
  The preset's ``gpus_per_node`` is the NVLink domain, 72, as the planner reads it: the host (a compute tray)
  holds only 4 GPUs, but every GPU reaches the other 71 over NVLink (the scaling book's footnote on the two
  meanings of "node").
- MI300X: AMD Instinct MI300X datasheet (192 GB HBM3 at 5.3 TB/s; BF16 1,307.4 TFLOPS dense (2,614.9 with
  sparsity); FP8 2,614.9 dense; TF32 653.7 dense; FP32 matrix 163.4). Between GPUs: AMD Infinity Fabric, 7 links of
  128 GB/s (bidirectional) to the 7 other GPUs of an 8-GPU platform, 896 GB/s in all → 448 GB/s per direction.
  **Uncertain, and unlike NVLink:** this is a full mesh, not a switch; one peer gets only one link (64 GB/s per
  direction), and a collective reaches 448 GB/s only when it drives all 7 links at once (RCCL runs several rings).
  The network figure, 50 GB/s, is one 400 Gb/s NIC per GPU as in Microsoft Azure's ND MI300X v5 (8 × 400 Gb/s
  InfiniBand per 8-GPU VM); AMD's platform leaves the NIC to the system builder.

FP8 dense peak (``peak_fp8_flops``, used by FP8 recipes, :mod:`distlearn.precision.fp8_recipes`): H100 SXM and H200 SXM
datasheets print "FP8 Tensor Core 3,958 TFLOPS*" with the footnote "* With sparsity" (the H100 datasheet:
"Specifications 1/2 lower without sparsity"), so **1,979 TFLOP/s dense**, twice their dense bf16 989. B200,
GB200 and MI300X also run FP8 at twice their dense bf16 (4,500, 5,000 and 2,614.9 TFLOP/s, datasheets above). V100
and A100 have no FP8 tensor cores: 0 (:func:`peak_flops` refuses ``"fp8"`` for them).

The memory figure is the datasheet's, in GB (1e9 bytes): one convention for every chapter, explorer and the
planner (the chapter 01 explorer reads these same numbers). The card itself shows a little more: ``nvidia-smi``
reports an "80GB" A100's memory.total as 81920 MiB = 85.9e9 bytes; CUDA's total, which
``torch.cuda.mem_get_info()`` returns as ``(free, total)`` in bytes (``cudaMemGetInfo``), is slightly less
(81,049 MiB = 85.0e9 bytes on an A100 80GB PCIe, ekondis/mixbench issue #47), and ``free`` is less again once the
CUDA context, NCCL buffers and the allocator's cache take their share. The datasheet figure is the conservative
choice, and the planner keeps a stated reserve on top, see ``distlearn.planning``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_number, check_positive
from distlearn.core.guard import read_only

GB_S = 1e9  # 1 GB/s in bytes/s
TFLOPS = 1e12

#: NVLink bandwidth per H800 that DeepSeek reports achieving, bytes/s (DeepSeek-V3 technical report, §3.2.2:
#: "NVLink offers a bandwidth of 160 GB/s, roughly 3.2 times that of IB (50 GB/s)"). Below the datasheet's 200 GB/s
#: per direction that the ``"h800"`` preset keeps.
H800_NVLINK_ACHIEVED_DEEPSEEK_V3 = 160 * GB_S


@dataclass(frozen=True)
class GPU:
    """One accelerator: ``memory_bytes`` (bytes), ``peak_flops`` (dense 16-bit FLOP/s), ``nvlink_bw`` (intra-node
    bytes/s per direction), ``network_bw`` (inter-node bytes/s per GPU per direction), ``source`` (where from),
    ``peak_flops_fp32`` (dense FLOP/s of fp32 matrix multiplies: TF32 tensor cores where the GPU has them, else
    FP32 CUDA cores; ``None`` when unknown, and then the planner refuses ``precision="fp32"``),
    ``peak_fp8_flops`` (dense FP8 FLOP/s; 0 where the GPU has no FP8 tensor cores), ``hbm_bw`` (bytes/s of the
    device memory, the datasheet's; ``None`` when unknown, and then the planner times this GPU with its flat
    one-constant model, :data:`distlearn.planning.COMPUTE_EFFICIENCY`, instead of its kernel model)."""

    name: str
    memory_bytes: float
    peak_flops: float
    nvlink_bw: float
    network_bw: float
    gpus_per_node: int = 8
    source: str = ""
    peak_flops_fp32: float | None = None
    peak_fp8_flops: float = 0.0
    hbm_bw: float | None = None

    def __post_init__(self):
        for field in ("memory_bytes", "peak_flops", "nvlink_bw", "network_bw"):
            check_positive(field, getattr(self, field))
        if self.peak_flops_fp32 is not None:
            check_positive("peak_flops_fp32", self.peak_flops_fp32)
        check_int("gpus_per_node", self.gpus_per_node, minimum=1)
        check_number("peak_fp8_flops", self.peak_fp8_flops, minimum=0)
        if self.hbm_bw is not None:
            check_positive("hbm_bw", self.hbm_bw)

    def with_(self, **changes) -> "GPU":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


GPUS: dict[str, GPU] = read_only({g.name: g for g in [
    GPU("v100-32gb", 32e9, 125 * TFLOPS, 150 * GB_S, 100e9 / 8 * 8 / 16, gpus_per_node=16,
        peak_flops_fp32=15.7 * TFLOPS, hbm_bw=900 * GB_S,
        source="NVIDIA V100 datasheet (SXM2; FP32 15.7 TFLOPS, no TF32; HBM2 900 GB/s); DGX-2: 16 GPUs, "
               "8x100 Gb/s EDR IB"),
    GPU("a100-80gb", 80e9, 312 * TFLOPS, 300 * GB_S, 200e9 / 8, peak_flops_fp32=156 * TFLOPS,
        hbm_bw=2039 * GB_S,
        source="NVIDIA A100 datasheet (80GB SXM; TF32 156 TFLOPS dense; HBM2e 2,039 GB/s); DGX A100: 8x200 Gb/s "
               "HDR IB"),
    GPU("h100-80gb", 80e9, 989 * TFLOPS, 450 * GB_S, 400e9 / 8, peak_flops_fp32=494.5 * TFLOPS,
        source="NVIDIA H100 datasheet (SXM, 1979 TFLOPS BF16 and 989 TF32 sparse, / 2 dense); "
               "DGX H100: 8x400 Gb/s NDR; FP8 3958 sparse / 2; HBM3 3.35 TB/s", peak_fp8_flops=1979 * TFLOPS,
        hbm_bw=3350 * GB_S),
    GPU("h200", 141e9, 989 * TFLOPS, 450 * GB_S, 400e9 / 8, peak_flops_fp32=494.5 * TFLOPS,
        source="NVIDIA H200 datasheet (SXM, 141 GB HBM3e; 989 TF32 sparse, / 2 dense); DGX H200: 8x400 Gb/s NDR; "
               "FP8 3958 sparse / 2; HBM3e 4.8 TB/s", peak_fp8_flops=1979 * TFLOPS, hbm_bw=4800 * GB_S),
    GPU("h800", 80e9, 989 * TFLOPS, 200 * GB_S, 50 * GB_S, peak_flops_fp32=494.5 * TFLOPS,
        source="NVIDIA H800 datasheet (SXM, as H100 SXM: 1979 TFLOPS BF16 and 989 TF32 sparse, / 2 dense; FP8 3958 "
               "sparse / 2; HBM3 3.35 TB/s; NVLink 400 GB/s total); network: DeepSeek-V3 report §3.2.2, IB 50 GB/s "
               "per GPU", peak_fp8_flops=1979 * TFLOPS, hbm_bw=3350 * GB_S),
    GPU("b200", 180e9, 2250 * TFLOPS, 900 * GB_S, 400e9 / 8, peak_flops_fp32=1125 * TFLOPS,
        peak_fp8_flops=4500 * TFLOPS, hbm_bw=8000 * GB_S,
        source="NVIDIA DGX B200 datasheet / HGX B200 spec (8 GPUs: 1,440 GB HBM3e, 64 TB/s; FP8 72, BF16 36, TF32 "
               "18 PFLOPS sparse, / 8 / 2 dense; NVLink 5 1.8 TB/s per GPU); DGX B200: 8x400 Gb/s ConnectX-7"),
    GPU("gb200-nvl72", 186e9, 2500 * TFLOPS, 900 * GB_S, 400e9 / 8, gpus_per_node=72,
        peak_flops_fp32=1250 * TFLOPS, peak_fp8_flops=5000 * TFLOPS, hbm_bw=8000 * GB_S,
        source="NVIDIA GB200 NVL72 datasheet (72 GPUs: FP8 720, BF16 360, TF32 180 PFLOPS sparse, / 72 / 2 dense; "
               "HBM3e up to 13.4 TB (memory per GPU uncertain), 576 TB/s; NVLink 130 TB/s); network uncertain: "
               "1x400 Gb/s ConnectX-7 per GPU (DGX GB200 SuperPOD); node = the 72-GPU NVLink domain"),
    GPU("mi300x", 192e9, 1307.4 * TFLOPS, 7 * 128 * GB_S / 2, 400e9 / 8, peak_flops_fp32=653.7 * TFLOPS,
        peak_fp8_flops=2614.9 * TFLOPS, hbm_bw=5300 * GB_S,
        source="AMD Instinct MI300X datasheet (192 GB HBM3, 5.3 TB/s; BF16 1,307.4, FP8 2,614.9, TF32 653.7 TFLOPS "
               "dense; Infinity Fabric 7 links x 128 GB/s, a full mesh, uncertain as one figure); network "
               "uncertain: 1x400 Gb/s per GPU as Azure ND MI300X v5"),
]})

PEAK_DTYPES = ("bf16", "fp32", "fp8")


def peak_flops(gpu: str | GPU, dtype: str = "bf16") -> float:
    """Dense peak FLOP/s of ``gpu`` (a preset name or a :class:`GPU`) for GEMMs in ``dtype``: ``"bf16"`` (the
    16-bit tensor-core peak, ``GPU.peak_flops``), ``"fp32"`` (``GPU.peak_flops_fp32``) or ``"fp8"``
    (``GPU.peak_fp8_flops``: 1979e12 for the H100 and H200 presets). Raises DistlearnValueError for an unknown
    dtype, for FP8 on a GPU without FP8 tensor cores, or for fp32 where the figure is unknown."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    dtype = check_choice("dtype", dtype, PEAK_DTYPES)
    if dtype == "bf16":
        return g.peak_flops
    if dtype == "fp32":
        if g.peak_flops_fp32 is None:
            raise DistlearnValueError("dtype", f"{g.name} has no known fp32 matrix-multiply peak.",
                                      f"{g.name} 没有已知的 fp32 矩阵乘峰值。")
        return g.peak_flops_fp32
    if not g.peak_fp8_flops:
        raise DistlearnValueError("dtype", f"{g.name} has no FP8 tensor cores (FP8 needs Hopper or newer).",
                                  f"{g.name} 没有 FP8 Tensor Core（FP8 需要 Hopper 或更新的架构）。")
    return g.peak_fp8_flops


def get_gpu(name: str) -> GPU:
    """The preset called ``name`` (case-insensitive). Raises DistlearnValueError listing the known names."""
    key = name.lower() if isinstance(name, str) else name
    return GPUS[check_choice("gpu", key, tuple(GPUS))]


@dataclass(frozen=True)
class Cluster:
    """``num_nodes`` nodes of ``gpu.gpus_per_node`` GPUs each. ``world_size`` = all GPUs."""

    gpu: GPU
    num_nodes: int

    def __post_init__(self):
        check_int("num_nodes", self.num_nodes, minimum=1)

    @property
    def gpus_per_node(self) -> int:
        return self.gpu.gpus_per_node

    @property
    def world_size(self) -> int:
        return self.num_nodes * self.gpu.gpus_per_node


def make_cluster(gpu: str | GPU, num_gpus: int) -> Cluster:
    """A cluster of ``num_gpus`` GPUs of type ``gpu`` (a preset name or a :class:`GPU`).

    ``num_gpus`` must be ≤ one node or a whole number of nodes. Raises DistlearnValueError (bilingual) otherwise.
    A cluster smaller than a node is a node with fewer GPUs.
    """
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    n = check_int("num_gpus", num_gpus, minimum=1)
    if n < g.gpus_per_node:
        return Cluster(g.with_(gpus_per_node=n), 1)
    if n % g.gpus_per_node:
        raise DistlearnValueError(
            "num_gpus", f"num_gpus = {n} must be a whole number of nodes of {g.gpus_per_node} GPUs "
                        f"(e.g. {n // g.gpus_per_node * g.gpus_per_node} or {(n // g.gpus_per_node + 1) * g.gpus_per_node}).",
            f"num_gpus = {n} 必须是整数个节点（每节点 {g.gpus_per_node} 块 GPU），"
            f"例如 {n // g.gpus_per_node * g.gpus_per_node} 或 {(n // g.gpus_per_node + 1) * g.gpus_per_node}。")
    return Cluster(g, n // g.gpus_per_node)

"""The planner's table and its command line, ``python -m distlearn plan`` (bilingual, like every message here)."""
from __future__ import annotations

import argparse
import sys
import unicodedata

from ..hardware import GPUS, get_gpu
from ..memory import GB
from ..models import PRESETS
from ..validate import DistlearnValueError
from .formulas import (COMPUTE_EFFICIENCY, FP8_PRECISIONS, FRAGMENTATION, PLANNER_PRECISIONS, RESERVE_BYTES,
                       Estimate, compute_peak)
from .plan_search import search

HEADER = ("#", "dp", "tp", "pp", "v", "ZeRO", "recompute", "b", "m", "mem GB", "step s", "tokens/s", "MFU",
          "bubble", "comm")
HEADER_ZH = ("#", "数据", "张量", "流水", "交错", "ZeRO", "重计算", "微批次", "微批数", "显存 GB", "步时/秒", "词元/秒",
             "MFU", "气泡率", "通信")
WIDTHS = (2, 4, 4, 4, 4, 4, 9, 6, 6, 9, 7, 9, 6, 6, 5)   # display columns: the table is under 100 wide

LEGEND_EN = ("tp \"8c16\": tensor parallelism 8 with context parallelism cp = 16;\n"
             "bubble: idle share of the pipeline's time, (p−1)/(v·m+p−1), chapter 05's bubble_fraction;\n"
             "comm: exposed communication share of the step; mem GB: used / capacity;\n"
             "MFU: model FLOPs / (step time × GPUs × the GPU's 16-bit peak)")
LEGEND_ZH = ("张量一栏的 \"8c16\"：张量并行 8，上下文并行 cp = 16；\n"
             "气泡率：流水线时间中的空闲占比 (p−1)/(v·m+p−1)，即第 05 章的 bubble_fraction；通信：每步中未被\n"
             "隐藏的通信所占比例；MFU：模型 FLOPs /（步时 × GPU 数 × GPU 的 16 位峰值算力）；显存 GB：用量 / 容量")


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or notebook: East Asian wide / full-width characters count 2."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def format_table(plans: list[Estimate], limit: int = 10) -> str:
    """Plain-text table of the first ``limit`` plans, with an English and a Chinese header line, right-aligned by
    display width (a Chinese character takes two columns) so that every line is under 100 columns. The columns are
    explained by :func:`table_legend`."""
    rows = [HEADER, HEADER_ZH]
    for i, e in enumerate(plans[:limit], 1):
        p = e.plan
        tp = f"{p.tp}c{p.cp}" if p.cp > 1 else str(p.tp)  # context parallelism shown with tp: "8c16"
        rows.append((str(i), str(p.dp), tp, str(p.pp), str(p.num_chunks), str(p.zero_stage), p.recompute,
                     str(p.micro_batch_size), str(p.num_microbatches),
                     f"{e.memory['total'] / GB:.1f}/{e.capacity / GB:.0f}", f"{e.time['total']:.2f}",
                     f"{e.tokens_per_s:,.0f}", f"{e.mfu:.1%}", f"{e.bubble_fraction:.1%}", f"{e.comm_fraction:.0%}"))
    return "\n".join(" ".join(" " * max(0, w - display_width(c)) + c for c, w in zip(r, WIDTHS)) for r in rows)


def table_legend() -> str:
    """What the table's less obvious columns mean, in English then Chinese (lines under 100 columns)."""
    return LEGEND_EN + "\n" + LEGEND_ZH


# ---------------------------------------------------------------- command line
def positive_int(name: str):
    """An argparse ``type`` for an integer ≥ 1 whose error (ArgumentTypeError) is in both languages."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < 1:
            raise argparse.ArgumentTypeError(f"must be a whole number ≥ 1, got {text!r}\n"
                                             f"{name} 必须是 ≥ 1 的整数，收到 {text!r}")
        return value
    parse.__name__ = name  # argparse names the type in some messages
    return parse


def share(text: str) -> float:
    """An argparse ``type`` for a share of peak in (0, 1], with a bilingual ArgumentTypeError."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], e.g. 0.55; got {text!r}\n"
                                         f"efficiency 必须是 (0, 1] 之间的数，例如 0.55；收到 {text!r}")
    return value


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, labelled in both languages."""

    def _get_help_string(self, action):
        return super()._get_help_string(action).replace("(default: %(default)s)", "(default / 默认: %(default)s)")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error line is labelled in both languages (the message itself comes from the type
    functions above, already bilingual)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error / 错误: {message}\n")


DESCRIPTION_EN = ("search the parallel plans (dp × tp × pp × ZeRO × recomputation × micro-batching) that fit in GPU "
                  "memory and rank them by throughput (chapter 14)")
DESCRIPTION_ZH = "搜索能放进显存的并行方案（dp × tp × pp × ZeRO × 重计算 × 微批次），按吞吐量排序（第 14 章）"


def parser() -> argparse.ArgumentParser:
    """The ``plan`` command's argument parser (defaults shown by ``--help``)."""
    ap = _Parser(prog="python -m distlearn plan", formatter_class=_HelpFormatter,
                 description=f"{DESCRIPTION_EN}.\n{DESCRIPTION_ZH}。")
    ap.add_argument("--model", default="llama3-8b", help=f"preset / 预设模型: {', '.join(PRESETS)}")
    ap.add_argument("--gpus", type=positive_int("--gpus"), default=8,
                    help="number of GPUs: at most one node, or whole nodes / GPU 数：不超过一个节点，或整数个节点")
    ap.add_argument("--gpu", default="h100-80gb", help=f"GPU preset / GPU 型号: {', '.join(GPUS)}")
    ap.add_argument("--seq-len", type=positive_int("--seq-len"), default=4096, help="sequence length / 序列长度")
    ap.add_argument("--global-batch", type=positive_int("--global-batch"), default=512,
                    help="sequences per step / 全局批量大小（序列数）")
    ap.add_argument("--top", type=positive_int("--top"), default=10, help="plans to show / 显示的方案数")
    ap.add_argument("--efficiency", type=share, default=COMPUTE_EFFICIENCY,
                    help="share of peak FLOP/s the kernels reach / 算子达到的峰值算力比例")
    ap.add_argument("--precision", default="mixed",
                    help=f"recipe / 精度方案: {' | '.join(PLANNER_PRECISIONS)} (fp32: matrix multiplies at the "
                         f"fp32/TF32 peak, FP8 recipes: linear layers at the FP8 peak / fp32 时矩阵乘法按 fp32/TF32 "
                         f"峰值计，FP8 方案的线性层按 FP8 峰值计)")
    return ap


def cli(argv: list[str]) -> int:
    """``python -m distlearn plan --model llama3-70b --gpus 64 --gpu h100-80gb --seq-len 8192 --global-batch 512``

    Prints the best plans as a table with its legend; returns 0, 1 when no plan fits (with the smallest change that
    would, or why no plan can be formed), 2 on bad input (with the bilingual message). ``--help`` returns 0.
    """
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a bad option already reported: return its status, do not exit Python
        return exc.code or 0
    try:
        res = search(args.model, global_batch=args.global_batch, seq_len=args.seq_len, gpu=args.gpu,
                     num_gpus=args.gpus, precision=args.precision, efficiency=args.efficiency)
    except DistlearnValueError as exc:
        print(str(exc))
        return 2
    g = get_gpu(args.gpu)
    print(f"{args.model} · {args.gpus} × {g.name} · seq {args.seq_len} · batch {args.global_batch} · "
          f"{args.precision}")
    if res.num_evaluated == 0:
        print(res.message)
        return 1
    print(f"{len(res.plans)} of {res.num_evaluated} plans fit / {res.num_evaluated} 个方案中 {len(res.plans)} 个放得下")
    if not res.plans:
        print(res.message)
        print(res.suggestion["message"])
        return 1
    print(format_table(res.plans, args.top))
    print(table_legend())
    peak = compute_peak(g, args.precision) / 1e12
    kind, kind_zh = ("fp32/TF32", "fp32/TF32 ") if args.precision == "fp32" else (
        ("FP8 (linear layers)", "FP8（线性层）") if args.precision in FP8_PRECISIONS else ("16-bit", "16 位"))
    print(f"matrix multiplies at {args.efficiency:.0%} of the {kind} peak, {peak:g} TFLOP/s; reserve "
          f"{RESERVE_BYTES / GB:.0f} GB + {FRAGMENTATION:.0%}; memory in GB (1e9 bytes)\n"
          f"矩阵乘法按 {kind_zh}峰值 {peak:g} TFLOP/s 的 {args.efficiency:.0%} 计；预留 {RESERVE_BYTES / GB:.0f} GB + "
          f"{FRAGMENTATION:.0%}；显存单位 GB（1e9 字节）")
    return 0

"""The planner's table and its command line, ``python -m distlearn plan``, in the reader's language
(:func:`distlearn.set_language` / ``DISTLEARN_LANG``; both languages by default), argparse's own words included."""
from __future__ import annotations

import argparse
import dataclasses
import sys
import unicodedata

from distlearn.core.cli import ArgumentParser, WideHelpFormatter, translate
from distlearn.activation_memory.formulas import RECOMPUTE_MODES
from distlearn.core.hardware import GPUS, get_gpu
from distlearn.core.i18n import bi, get_language
from distlearn.memory.formulas import GB, PRECISION_LABELS
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError, check_choice, check_int, check_text, each, record
from distlearn.planning.flops import FP8_PRECISIONS, PLANNER_PRECISIONS, compute_peak
from distlearn.planning.kernels import END_TO_END, GEMM_CEILING, gpu_family
from distlearn.planning.evaluation import Estimate
from distlearn.planning.plan_search import search
from distlearn.planning.setting import FRAGMENTATION, GRAD_SYNCS, RESERVE_BYTES, Overlap, make_setting, resolve
from distlearn.planning.step_time import ineffective_options
from distlearn.precision.fp8_recipes import RECIPES
from distlearn.core.guard import read_only

HEADER = ("#", "dp", "tp", "pp", "v", "ZeRO", "recompute", "b", "m", "mem GB", "step s", "tokens/s", "MFU",
          "bubble", "comm")
HEADER_ZH = ("#", "数据", "张量", "流水", "交错", "ZeRO", "重计算", "b", "m", "显存 GB", "每步/秒", "词元/秒",
             "MFU", "气泡率", "通信")
WIDTHS = (2, 4, 4, 4, 4, 4, 9, 6, 6, 9, 7, 9, 6, 6, 5)   # display columns: the table is under 100 wide

LEGEND_EN = ("b: micro-batch size; m: micro-batches per step;\n"
             "tp \"8c16\": tensor parallelism 8 with context parallelism cp = 16; v \"1zb\": the ZB-H1 schedule;\n"
             "bubble: idle share of the pipeline's time, (p−1)/(v·m+p−1), chapter 05's bubble_fraction;\n"
             "comm: exposed communication share of the step; mem GB: used / capacity;\n"
             "recompute norm-act: only the norms and the MLP activation, their outputs discarded (chapter 14);\n"
             "MFU: model FLOPs / (step time × GPUs × the GPU's 16-bit peak)")
LEGEND_ZH = ("b：微批次大小；m：每步的微批次数；\n"
             "张量一栏的“8c16”：张量并行 8，上下文并行 cp = 16；交错一栏的“1zb”：ZB-H1 调度；\n"
             "气泡率：流水线时间中的空闲占比 (p−1)/(v·m+p−1)，即第 05 章的 bubble_fraction；\n"
             "通信：每步中未被隐藏的通信所占比例；显存 GB：用量 / 容量；\n"
             "重计算一栏的“归一+激活”即 norm-act：只重计算归一化层和 MLP 的激活函数，不存其输出（第 14 章）；\n"
             "MFU：模型 FLOPs /（每步时间 × GPU 数 × GPU 的 16 位峰值算力）")
RECOMPUTE_ZH = read_only({"none": "不重计算", "selective": "选择性", "full": "完全",
                "norm-act": "归一+激活"})   # the recompute column under zh


def precision_label(precision: str) -> tuple[str, str]:
    """``(en, zh)`` label of a planner precision (:data:`PLANNER_PRECISIONS`): chapter 01's bytes per parameter for
    the 16/32-bit ones (:data:`distlearn.memory.formulas.PRECISION_LABELS`), the recipe's own title for the FP8 ones
    (:data:`distlearn.precision.fp8_recipes.RECIPES`). The explorer's drop-down and the command line's title use it."""
    check_choice("precision", precision, PLANNER_PRECISIONS)
    if precision in PRECISION_LABELS:
        return PRECISION_LABELS[precision]
    return RECIPES[precision].title_en, RECIPES[precision].title_zh


def display_width(text: str) -> int:
    """Columns ``text`` takes in a terminal or notebook: East Asian wide / full-width characters count 2. Raises
    DistlearnValueError for a ``text`` that is not a string."""
    text = check_text("text", text)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def format_table(plans, limit: int = 10) -> str:
    """Plain-text table of the first ``limit`` plans (a list of Estimates, or a search's result), with a header line
    in the reader's language (under ``both``: an English and a Chinese line), right-aligned by display width (a
    Chinese character takes two columns) so that every line is under 100 columns. The columns are explained by
    :func:`table_legend`. Raises DistlearnValueError for a ``limit`` that is not an integer ≥ 1."""
    limit = check_int("limit", limit, minimum=1)
    plans = getattr(plans, "plans", plans)  # planner.search(...) itself, or its .plans
    each(record(Estimate, "planner.search('llama3-8b', global_batch=512, seq_len=4096).plans[0]"),
         min_len=0).check("plans", plans, {})
    lang = get_language()
    rows = {"en": [HEADER], "zh": [HEADER_ZH]}.get(lang, [HEADER, HEADER_ZH])
    for i, e in enumerate(plans[:limit], 1):
        p = e.plan
        tp = f"{p.tp}c{p.cp}" if p.cp > 1 else str(p.tp)  # context parallelism shown with tp: "8c16"
        recompute = RECOMPUTE_ZH.get(p.recompute, p.recompute) if lang == "zh" else p.recompute
        v = f"{p.num_chunks}zb" if p.schedule == "zb-h1" else str(p.num_chunks)  # ZB-H1 (chapter 05)
        rows.append((str(i), str(p.dp), tp, str(p.pp), v, str(p.zero_stage), recompute,
                     str(p.micro_batch_size), str(p.num_microbatches),
                     f"{e.memory['total'] / GB:.1f}/{e.capacity / GB:.0f}", f"{e.time['total']:.2f}",
                     f"{e.tokens_per_s:,.0f}", f"{e.mfu:.1%}", f"{e.bubble_fraction:.1%}", f"{e.comm_fraction:.0%}"))
    return "\n".join(" ".join(" " * max(0, w - display_width(c)) + c for c, w in zip(r, WIDTHS)) for r in rows)


def table_legend() -> str:
    """What the table's less obvious columns mean, in the reader's language (both: English then Chinese; lines
    under 100 columns)."""
    return bi(LEGEND_EN, LEGEND_ZH, sep="\n")


# ---------------------------------------------------------------- command line
def positive_int(name: str):
    """An argparse ``type`` for an integer ≥ 1 whose error (ArgumentTypeError) is in the reader's language.
    ``name``: the option's name, shown in the error. Raises DistlearnValueError for a ``name`` that is not a string."""
    check_text("name", name)
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < 1:
            raise argparse.ArgumentTypeError(bi(f"must be a whole number ≥ 1, got {text!r}",
                                                f"{name} 必须是 ≥ 1 的整数，收到 {text!r}", sep="\n"))
        return value
    parse.__name__ = name  # argparse names the type in some messages
    return parse


def share(text: str) -> float:
    """An argparse ``type`` for a share of peak in (0, 1], with an ArgumentTypeError in the reader's language.
    Raises DistlearnValueError for a ``text`` that is not a string (argparse always passes one)."""
    text = check_text("text", text)
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(bi(f"must be a number in (0, 1], e.g. 0.55; got {text!r}",
                                            f"efficiency 必须是 (0, 1] 之间的数，例如 0.55；收到 {text!r}", sep="\n"))
    return value


DEFAULT = read_only({"en": " (default: %(default)s)", "zh": "（默认：%(default)s）", "both": " (default / 默认: %(default)s)"})


class _HelpFormatter(WideHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The course's help layout (:mod:`distlearn.core.cli`), with every option's default labelled in the reader's
    language."""

    def _get_help_string(self, action):
        if "(default:" in (action.help or "") or "默认" in (action.help or ""):  # the help names its default itself
            return action.help
        return super()._get_help_string(action).replace(" (default: %(default)s)", DEFAULT[get_language()])


DESCRIPTION_EN = ("search the parallel plans (dp × tp × pp × ZeRO × recomputation × micro-batching) that fit in GPU "
                  "memory and rank them by throughput (chapter 14)")
DESCRIPTION_ZH = "搜索能放进显存的并行方案（dp × tp × pp × ZeRO × 重计算 × 微批次），按吞吐量排序（第 14 章）"


def parser() -> argparse.ArgumentParser:
    """The ``plan`` command's argument parser (defaults shown by ``--help``), in the reader's language."""
    ap = ArgumentParser(prog="python -m distlearn plan", formatter_class=_HelpFormatter,
                        description=bi(f"{DESCRIPTION_EN}.", f"{DESCRIPTION_ZH}。", sep="\n"))
    ap.add_argument("--model", default="llama3-8b", help=bi("preset", "预设模型") + f": {', '.join(PRESETS)}")
    ap.add_argument("--gpus", type=positive_int("--gpus"), default=8,
                    help=bi("number of GPUs: at most one node, or whole nodes", "GPU 数：不超过一个节点，或整数个节点"))
    ap.add_argument("--gpu", default="h100-80gb", help=bi("GPU preset", "GPU 型号") + f": {', '.join(GPUS)}")
    ap.add_argument("--seq-len", type=positive_int("--seq-len"), default=4096, help=bi("sequence length", "序列长度"))
    ap.add_argument("--global-batch", type=positive_int("--global-batch"), default=512,
                    help=bi("sequences per step", "全局批量大小（序列数）"))
    ap.add_argument("--top", type=positive_int("--top"), default=10, help=bi("plans to show", "显示的方案数"))
    ap.add_argument("--efficiency", type=share, default=None,
                    help=bi("flat time model: every FLOP at this share of the peak (default: the kernel model, "
                            "GEMM rooflines + attention + memory-bound work)",
                            "平坦时间模型：所有 FLOPs 都按这个峰值比例计（默认用算子模型：GEMM 屋顶线 + 注意力 + "
                            "访存受限的逐元素运算）"))
    ap.add_argument("--precision", default="mixed",
                    help=bi(f"recipe: {' | '.join(PLANNER_PRECISIONS)} (fp32: matrix multiplies at the fp32/TF32 "
                            f"peak; FP8 recipes: linear layers at the FP8 peak)",
                            f"精度方案：{' | '.join(PLANNER_PRECISIONS)}（fp32 时矩阵乘法按 fp32/TF32 峰值计，FP8 方案的线性层"
                            f"按 FP8 峰值计）"))
    ap.add_argument("--recompute", type=recompute_modes, default=",".join(RECOMPUTE_MODES),
                    help=bi("recomputation modes to search, comma-separated (norm-act: chapter 14)",
                            "要搜索的重计算方式，用逗号分隔（norm-act 见第 14 章）"))
    ap.add_argument("--grad-sync", default="per_step", choices=GRAD_SYNCS, metavar="GRAD_SYNC",
                    help=bi("when ZeRO 2/3 reduce-scatter gradients under pipeline parallelism: per_step, once per "
                            "step (torch's pipelining), or per_microbatch (Llama 3's FSDP, as we read it)",
                            "流水线并行下 ZeRO 2/3 何时 reduce-scatter 梯度：per_step 为每步一次（torch 的 pipelining），"
                            "per_microbatch 为每个微批次一次（我们对 Llama 3 的 FSDP 的读法）"))
    ap.add_argument("--overlap", type=overlap_flags, default=Overlap(),
                    help=bi(f"communication the framework overlaps, comma-separated: {', '.join(CLI_OVERLAPS)} "
                            f"(Megatron-Core's --tp-comm-overlap, --overlap-grad-reduce, --overlap-param-gather; "
                            f"default: none of these; the planner always hides the gradient reduction behind the "
                            f"last backward when pp = 1, as DDP's buckets do, and ZeRO-3's prefetched gathers)",
                            f"框架重叠的通信，用逗号分隔：{'、'.join(CLI_OVERLAPS)}（即 Megatron-Core 的 "
                            f"--tp-comm-overlap、--overlap-grad-reduce、--overlap-param-gather；默认这三项都不重叠；"
                            f"pp = 1 时梯度归约总是与最后一次反向传播重叠（同 DDP 的分桶），ZeRO-3 预取的 all-gather "
                            f"也总是被掩盖）"))
    return ap


CLI_OVERLAPS = ("tp_comm", "grad_reduce", "param_gather")
"""``--overlap``'s names: fields of :class:`~distlearn.planning.setting.Overlap`."""


def overlap_flags(text: str) -> Overlap:
    """``--overlap``'s value: names of :data:`CLI_OVERLAPS`, comma-separated, as an
    :class:`~distlearn.planning.setting.Overlap` with those fields on (an empty text: none). argparse turns the
    ArgumentTypeError raised for an unknown name into its usage error. Raises DistlearnValueError for a ``text``
    that is not a string (argparse always passes one)."""
    text = check_text("text", text)
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in CLI_OVERLAPS]
    if bad:
        raise argparse.ArgumentTypeError(bi(
            f"must be comma-separated names from {', '.join(CLI_OVERLAPS)}; got {text!r}",
            f"必须是用逗号分隔的名称，可选 {'、'.join(CLI_OVERLAPS)}；收到 {text!r}", sep="\n"))
    return Overlap(**{n: True for n in names})


def recompute_modes(text: str) -> tuple[str, ...]:
    """``--recompute``'s value: modes of :data:`distlearn.activation_memory.formulas.RECOMPUTE_MODES`, comma-separated.
    Raises DistlearnValueError for a ``text`` that is not a string (argparse always passes one)."""
    text = check_text("text", text)
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in RECOMPUTE_MODES]
    if not modes or bad:
        raise argparse.ArgumentTypeError(bi(
            f"must be comma-separated modes from {', '.join(RECOMPUTE_MODES)}; got {text!r}",
            f"必须是用逗号分隔的重计算方式，可选 {'、'.join(RECOMPUTE_MODES)}；收到 {text!r}", sep="\n"))
    return modes


def _ineffective_notes(args, plans) -> str | None:
    """One line per option of the command (``--grad-sync``, ``--overlap``) that changes nothing in any of the
    ``plans`` shown, with the reasons :func:`~distlearn.planning.step_time.ineffective_options` gives for them
    (issue 38 audit); ``None`` when every option set changes some plan shown, or none is set."""
    if args.grad_sync == "per_step" and args.overlap == Overlap():
        return None
    st = make_setting(*resolve(args.model, args.gpu, args.gpus, None), args.global_batch, args.seq_len,
                      args.precision, efficiency=args.efficiency, grad_sync=args.grad_sync, overlap=args.overlap)
    found = [{x.option: x for x in ineffective_options(st, e.plan)} for e in plans]
    en, zh, n = [], [], len(plans)
    flags = {"grad_sync"} | {f.name for f in dataclasses.fields(Overlap)}  # what the command's options set
    for option in found[0]:
        if option not in flags or not all(option in f for f in found):  # a model's own field is not a flag
            continue
        label = f"--grad-sync {args.grad_sync}" if option == "grad_sync" else f"--overlap {option}"
        why_en = "; ".join(dict.fromkeys(f[option].why_en for f in found))
        why_zh = "；".join(dict.fromkeys(f[option].why_zh for f in found))
        shown_en = "the plan shown" if n == 1 else f"any of the {n} plans shown"
        en.append(f"{label} changes nothing in {shown_en}: {why_en}")
        zh.append(f"{label} 不影响显示的{'' if n == 1 else f' {n} 个'}方案的预测：{why_zh}")
    return bi("\n".join(en), "\n".join(zh), sep="\n") if en else None


def cli(argv: list[str]) -> int:
    """``python -m distlearn plan --model llama3-70b --gpus 64 --gpu h100-80gb --seq-len 8192 --global-batch 512``

    Prints the best plans as a table, a note on each ``--grad-sync`` / ``--overlap`` option that changes none of
    the plans shown, and the table's legend; returns 0, 1 when no plan fits (with the smallest change that
    would, or why no plan can be formed), 2 on bad input (with the message in the reader's language). ``--help``
    returns 0.
    """
    each(record(str, "'--gpus'"), min_len=0, max_len=100).check("argv", argv, {})  # None would read sys.argv
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a bad option already reported: return its status, do not exit Python
        return exc.code or 0
    try:
        res = search(args.model, global_batch=args.global_batch, seq_len=args.seq_len, gpu=args.gpu,
                     num_gpus=args.gpus, precision=args.precision, efficiency=args.efficiency,
                     recompute=args.recompute, grad_sync=args.grad_sync, overlap=args.overlap)
    except DistlearnValueError as exc:  # argparse's convention: the error on stderr, exit status 2
        # argparse's own line for an error, in the reader's language (Chinese: full-width colons, 'plan：错误：')
        print(translate("%(prog)s: error: %(message)s\n") % {"prog": "python -m distlearn plan", "message": exc},
              file=sys.stderr, end="")
        return 2
    g = get_gpu(args.gpu)
    print(bi(f"{args.model} · {args.gpus} × {g.name} · seq {args.seq_len} · batch {args.global_batch} · "
             f"{args.precision}", f"{args.model} · {args.gpus} × {g.name} · 序列长度 {args.seq_len} · 全局批量大小 "
             f"{args.global_batch} · {precision_label(args.precision)[1]}", sep="\n"))
    on = [n for n in CLI_OVERLAPS if getattr(args.overlap, n)]
    if args.grad_sync != "per_step" or on:
        print(bi(f"gradient sync {args.grad_sync} · overlapped: {', '.join(on) or 'nothing'}",
                 f"梯度同步 {args.grad_sync} · 重叠的通信：{'、'.join(on) or '无'}", sep="\n"))
    if res.num_evaluated == 0:
        print(res.message)
        return 1
    print(bi(f"{len(res.plans)} of {res.num_evaluated} plans fit",
             f"{res.num_evaluated} 个方案中 {len(res.plans)} 个放得下"))
    if not res.plans:
        print(res.message)
        print(res.suggestion["message"])
        return 1
    print(format_table(res.plans, args.top))
    notes = _ineffective_notes(args, res.plans[:args.top])
    if notes:
        print(notes)
    print(table_legend())
    peak = compute_peak(g, args.precision) / 1e12
    kind, kind_zh = ("fp32/TF32", "fp32/TF32 ") if args.precision == "fp32" else (
        ("FP8 (linear layers)", "FP8（线性层）") if args.precision in FP8_PRECISIONS else ("16-bit", "16 位"))
    if args.efficiency is None:
        e = GEMM_CEILING[gpu_family(g)]
        print(bi(f"kernel model: GEMMs as rooflines at {e:.1%} of the {kind} peak ({peak:g} TFLOP/s) or the HBM "
                 f"bandwidth, attention, memory-bound work; × {END_TO_END:.0%} end to end; reserve "
                 f"{RESERVE_BYTES / GB:.0f} GB + {FRAGMENTATION:.0%}; memory in GB (1e9 bytes)",
                 f"算子模型：GEMM 按屋顶线计，{kind_zh}峰值 {peak:g} TFLOP/s 的 {e:.1%} 或显存带宽，加上注意力和访存受限的"
                 f"运算；端到端再乘 {END_TO_END:.0%}；预留 {RESERVE_BYTES / GB:.0f} GB + {FRAGMENTATION:.0%}；"
                 f"显存单位 GB（1e9 字节）", sep="\n"))
    else:
        print(bi(f"matrix multiplies at {args.efficiency:.0%} of the {kind} peak, {peak:g} TFLOP/s; reserve "
                 f"{RESERVE_BYTES / GB:.0f} GB + {FRAGMENTATION:.0%}; memory in GB (1e9 bytes)",
                 f"矩阵乘法按 {kind_zh}峰值 {peak:g} TFLOP/s 的 {args.efficiency:.0%} 计；预留 {RESERVE_BYTES / GB:.0f} GB + "
                 f"{FRAGMENTATION:.0%}；显存单位 GB（1e9 字节）", sep="\n"))
    return 0

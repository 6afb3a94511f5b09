"""Explorer for chapter 04: tensor-parallel degree, model width, sequence, batch, sequence parallelism →
per-GPU weight memory, activation memory and communication per layer, and which rank holds which block of each
weight matrix."""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi, text
from distlearn.tensor_parallel.simulation import layer_activation_bytes, layer_comm_bytes, layer_weight_bytes
from distlearn.core.validate import DistlearnValueError
from distlearn.core import explorer as base
from distlearn.core.guard import read_only

HEAD_DIM = 128
L_TP = text("tp_widget.tp", "TP degree", "张量并行度")
L_H = text("tp_widget.hidden", "hidden size h", "隐藏维度 h")
L_S = text("tp_widget.seq", "sequence length s", "序列长度 s")
L_B = text("tp_widget.batch", "micro-batch size b", "微批次大小 b")
L_SP = text("tp_widget.sp", "sequence parallelism (SP)", "序列并行 (SP)")
L_SCHEME = text("tp_widget.scheme", "SP implementation", "SP 的实现")
SCHEMES = read_only([(("Megatron-LM (saves sharded, re-gathers)", "Megatron-LM（分片保存、反向重新收集）"), "megatron"),
           (("PyTorch DTensor (saves all-gathered)", "PyTorch DTensor（保存收集后的完整输入）"), "pytorch")])
TITLE = text("tp_widget.title", "Tensor parallelism: one transformer layer per GPU",
             "张量并行：每块 GPU 上的一个 Transformer 层")


@base.within_controls(lambda: controls())
def compute(tp: int = 4, hidden_size: int = 4096, seq_len: int = 2048, micro_batch_size: int = 1,
            sequence_parallel: bool = True, sp_scheme: str = "megatron") -> dict:
    """Per-GPU bytes for one GPT-style layer (heads of width 128, ffn = 4h, bf16 weights and activations).

    ``sp_scheme``: ``"megatron"`` (LN outputs saved sharded, re-gathered in backward: 34/t) or ``"pytorch"``
    (torch's SequenceParallel + ColwiseParallel plan saves the all-gathered inputs, no re-gather: 4 + 30/t); see
    :func:`distlearn.tensor_parallel.simulation.layer_activation_bytes`.

    Returns ``{"weights", "activations", "activations_no_sp", "comm", "num_heads", ...}`` in bytes, or
    ``{"error": message}`` when tp does not divide the heads.
    """
    heads = max(1, hidden_size // HEAD_DIM)
    try:
        w = layer_weight_bytes(hidden_size=hidden_size, tp=tp, num_heads=heads)
        act = layer_activation_bytes(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size,
                                     num_heads=heads, tp=tp, sequence_parallel=sequence_parallel,
                                     sp_scheme=sp_scheme)
        act_no = layer_activation_bytes(seq_len=seq_len, micro_batch_size=micro_batch_size,
                                        hidden_size=hidden_size, num_heads=heads, tp=tp, sequence_parallel=False)
        comm = layer_comm_bytes(seq_len=seq_len, micro_batch_size=micro_batch_size, hidden_size=hidden_size, tp=tp,
                                sequence_parallel=sequence_parallel, regather_in_backward=sp_scheme == "megatron")
    except DistlearnValueError as exc:
        return {"error": str(exc)}
    return {"tp": tp, "num_heads": heads, "weights": w["total"], "activations": act, "activations_no_sp": act_no,
            "comm": comm["total"], "comm_forward": comm["forward"], "comm_backward": comm["backward"],
            "num_collectives": comm["num_collectives"], "sequence_parallel": sequence_parallel,
            "sp_scheme": sp_scheme}


def controls() -> dict:
    return {
        "tp": base.log2_slider(L_TP, 4, 1, 16),
        "hidden_size": base.selection_slider(L_H, [1024, 2048, 4096, 8192, 12288], 4096),
        "seq_len": base.log2_slider(L_S, 2048, 256, 32768),
        "micro_batch_size": base.log2_slider(L_B, 1, 1, 16),
        "sequence_parallel": base.checkbox(L_SP, True),
        "sp_scheme": base.dropdown(L_SCHEME, SCHEMES, "megatron"),
    }


def draw_blocks(tp: int, ax=None):
    """Draw the weight matrices of a layer (``W`` of shape (d_in, d_out), one unit = h), coloured by the rank that
    holds each block: W_q, W_k, W_v and W_fc1 split by columns (output features; for Q, K, V that is by heads),
    W_o and W_fc2 by rows (input features)."""
    if ax is None:
        _, ax = plots.new_figure(9, 3.2)
    cmap = plt.get_cmap("tab10" if tp <= 10 else "tab20")
    mats = [("W_q", 1, 1, "col"), ("W_k", 1, 1, "col"), ("W_v", 1, 1, "col"), ("W_o", 1, 1, "row"),
            ("W_fc1", 1, 4, "col"), ("W_fc2", 4, 1, "row")]
    x0, gap = 0.0, 0.45
    for name, rows, cols, how in mats:
        for r in range(tp):
            if how == "col":
                rect = Rectangle((x0 + r * cols / tp, 0), cols / tp, rows, color=cmap(r % cmap.N))
            else:
                rect = Rectangle((x0, rows - (r + 1) * rows / tp), cols, rows / tp, color=cmap(r % cmap.N))
            ax.add_patch(rect)
        ax.add_patch(Rectangle((x0, 0), cols, rows, fill=False, lw=1.2))
        ax.text(x0 + cols / 2, -0.12, "$W_{\\mathrm{" + name[2:] + "}}$", ha="center", va="top", fontsize=9)
        ax.text(x0 + cols / 2, -0.45, bi("cols", "列") if how == "col" else bi("rows", "行"), ha="center",
                va="top", fontsize=7, color="#555555")
        x0 += cols + gap
    for r in range(min(tp, 16)):
        y = 4 - 0.25 * (r + 1)
        ax.add_patch(Rectangle((x0 + 0.2, y), 0.18, 0.18, color=cmap(r % cmap.N)))
        ax.text(x0 + 0.5, y + 0.09, f"rank {r}", va="center", fontsize=7)
    ax.set_xlim(-0.2, x0 + 1.6)
    ax.set_ylim(-0.9, 4.1)
    ax.set_aspect("equal")
    ax.axis("off")
    plots.title(ax, f"Which rank holds which block of each weight (tp = {tp})",
                f"每个 rank 持有每个权重矩阵的哪一块（tp = {tp}）")
    return ax


def render(result: dict) -> None:
    if "error" in result:
        print(result["error"])
        return
    mib = 2 ** 20
    sp = result["sequence_parallel"]
    print(bi(f"heads a = {result['num_heads']} (head dim 128), ffn = 4h, bf16",
             f"注意力头 a = {result['num_heads']}（每头 128 维），ffn = 4h，bf16"))
    print(bi(f"weights per GPU:      {result['weights'] / mib:10.1f} MiB", f"每块 GPU 的权重：{result['weights'] / mib:10.1f} MiB"))
    print(bi(f"activations per GPU:  {result['activations'] / mib:10.1f} MiB"
             + (f" (without SP {result['activations_no_sp'] / mib:.1f} MiB)" if sp else ""),
             f"每块 GPU 的激活值：{result['activations'] / mib:10.1f} MiB"
             + (f"（无 SP 时 {result['activations_no_sp'] / mib:.1f} MiB）" if sp else "")))
    print(bi(f"sent per GPU per layer: {result['comm'] / mib:8.1f} MiB (forward {result['comm_forward'] / mib:.1f}, "
             f"backward {result['comm_backward'] / mib:.1f}; {result['num_collectives']} collectives)",
             f"每层每块 GPU 发送：{result['comm'] / mib:8.1f} MiB（前向 {result['comm_forward'] / mib:.1f}，"
             f"反向 {result['comm_backward'] / mib:.1f}；{result['num_collectives']} 次集合通信）"))
    draw_blocks(result["tp"])
    plt.show()


def explorer():
    """The chapter-04 explorer widget."""
    return base.build(controls(), compute, render, title=TITLE)

"""Figures of chapter 06: what each rank holds under DDP and ZeRO-1/2/3, and the life of FSDP units in one step.

Both figures are drawn from the package's own numbers, not from hand-placed boxes: the bytes per parameter and the
per-rank totals come from :func:`distlearn.memory.formulas.model_state_bytes`, and the order of the lifecycle's
collectives is the order :class:`distlearn.zero_fsdp.simulation.ShardedTrainer` runs them (a test compares the two).
Every label goes through :mod:`distlearn.core.i18n`, so the figure is drawn in the reader's language.
"""
from __future__ import annotations

from matplotlib.patches import Rectangle

from distlearn.core import plots
from distlearn.core.i18n import bi
from distlearn.memory.formulas import bytes_per_param, model_state_bytes
from distlearn.core.guard import read_only
from distlearn.zero_fsdp.muon import compute_per_rank, owner_of, step_traffic

__all__ = ["zero_stages", "lifecycle_events", "fsdp_lifecycle", "muon_forms", "STATE_NAMES", "STAGE_NAMES",
           "EVENT_NAMES", "MUON_FORM_NAMES"]

STATE_NAMES = read_only({"params": ("parameters", "参数"), "grads": ("gradients", "梯度"),
               "optimizer": ("optimizer states", "优化器状态")})
STAGE_NAMES = read_only({0: ("DDP", "DDP"), 1: ("ZeRO-1", "ZeRO-1"), 2: ("ZeRO-2", "ZeRO-2"), 3: ("ZeRO-3", "ZeRO-3")})
EVENT_NAMES = read_only({"all_gather": ("all-gather", "AllGather"), "forward": ("forward", "前向"),
               "backward": ("backward", "反向"), "reduce_scatter": ("reduce-scatter", "ReduceScatter"),
               "step": ("optimizer step on the shard", "在分片上更新")})
EVENT_COLORS = read_only({"all_gather": plots.COLORS["comm"], "forward": plots.COLORS["forward"],
                "backward": plots.COLORS["backward"], "reduce_scatter": "#C44E52", "step": "#8172B3"})
EVENT_SHORT = read_only({"all_gather": "AG", "forward": "F", "backward": "B", "reduce_scatter": "RS", "step": "S"})


def _name(pair) -> str:
    return bi(pair[0], pair[1])


def zero_stages(dp: int = 4, ax=None, precision: str = "mixed"):
    """One row per stage (DDP, ZeRO-1, ZeRO-2, ZeRO-3), one box per rank. In each box three bars, as long as the
    bytes per parameter of parameters, gradients and optimizer states (2, 2 and 12 for mixed-precision Adam). A
    replicated state is a full bar; a sharded one is an empty outline with only this rank's 1/dp filled. Right of
    each row: the bytes per rank in units of Ψ, from :func:`model_state_bytes`. Returns the axes."""
    if ax is None:
        _, ax = plots.new_figure(9.0, 6.0)
    per = bytes_per_param(precision, "adam")
    kinds = ("params", "grads", "optimizer")
    longest = max(per[k] for k in kinds)
    box_w, gap, bar_h = 1.0, 0.18, 0.2
    for row, stage in enumerate(range(4)):
        y0 = (3 - row) * 1.25
        sharded = {"params": stage >= 3, "grads": stage >= 2, "optimizer": stage >= 1}
        for r in range(dp):
            x0 = r * (box_w + gap)
            ax.add_patch(Rectangle((x0, y0), box_w, 1.0, fill=False, ec="#555555", lw=1))
            ax.text(x0 + box_w / 2, y0 + 1.04, f"rank {r}", ha="center", va="bottom", fontsize=7)
            for k, kind in enumerate(kinds):
                y = y0 + 0.72 - k * 0.3
                length = 0.9 * box_w * per[kind] / longest
                bx = x0 + 0.05 * box_w
                if sharded[kind]:
                    ax.add_patch(Rectangle((bx, y), length, bar_h, fill=False, ec=plots.COLORS[kind], lw=0.8,
                                           ls="--"))
                    ax.add_patch(Rectangle((bx + r * length / dp, y), length / dp, bar_h, color=plots.COLORS[kind]))
                else:
                    ax.add_patch(Rectangle((bx, y), length, bar_h, color=plots.COLORS[kind]))
        total = model_state_bytes(1, dp=dp, zero_stage=stage, precision=precision).total
        ax.text(-0.15, y0 + 0.5, _name(STAGE_NAMES[stage]), ha="right", va="center", fontsize=10)
        ax.text(dp * (box_w + gap) - gap + 0.15, y0 + 0.5, bi(f"{total:g}Ψ bytes", f"{total:g}Ψ 字节"), ha="left", va="center", fontsize=10)
    for kind in kinds:
        ax.bar(0, 0, color=plots.COLORS[kind], label=bi(f"{STATE_NAMES[kind][0]} ({per[kind]:g} bytes per parameter)",
                                                     f"{STATE_NAMES[kind][1]}（每个参数 {per[kind]:g} 字节）"))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncols=1, fontsize=8, frameon=False)
    ax.set_xlim(-1.3, dp * (box_w + gap) + 1.0)
    ax.set_ylim(-0.1, 4 * 1.25 + 0.1)
    ax.set_axis_off()
    plots.title(ax, f"What each of {dp} ranks holds\n(dashed: sharded, the rank keeps 1/{dp}; right: bytes per rank)",
                f"{dp} 个 rank 各自保存什么\n（虚线框表示已分片，每个 rank 只留 1/{dp}；右侧为每个 rank 的字节数）")
    return ax


def lifecycle_events(num_units: int = 3) -> list[tuple[str, int, str]]:
    """``(phase, unit, event)`` in the order :class:`ShardedTrainer` runs one step: forward unit by unit
    (all-gather, forward, then the unit is freed); backward from the last unit (all-gather, backward,
    reduce-scatter, optimizer step on the shard, freed). Events: ``all_gather``, ``forward``, ``backward``,
    ``reduce_scatter``, ``step``."""
    events = []
    for i in range(num_units):
        events += [("forward", i, "all_gather"), ("forward", i, "forward")]
    for i in reversed(range(num_units)):
        events += [("backward", i, "all_gather"), ("backward", i, "backward"), ("backward", i, "reduce_scatter"),
                   ("backward", i, "step")]
    return events


def fsdp_lifecycle(num_units: int = 3, ax=None):
    """One lane per FSDP unit over one training step. A thin grey bar is the shard the rank always keeps; a tall
    coloured block is the time the unit is whole: gathered (AG), computing (F or B), reduce-scattered (RS), then
    freed. The last block of a unit's backward is the optimizer step on its shard (S). Returns the axes."""
    if ax is None:
        _, ax = plots.new_figure(8.0, 0.9 + 0.6 * num_units)
    events = lifecycle_events(num_units)
    for i in range(num_units):
        ax.add_patch(Rectangle((0, i - 0.06), len(events), 0.12, color=plots.COLORS["idle"]))
    for t, (_, unit, event) in enumerate(events):
        tall = event != "step"
        h = 0.7 if tall else 0.3
        ax.add_patch(Rectangle((t + 0.04, unit - h / 2), 0.92, h, color=EVENT_COLORS[event]))
        ax.text(t + 0.5, unit, EVENT_SHORT[event], ha="center", va="center", fontsize=8, color="white")
    mid = 2 * num_units
    ax.axvline(mid, color="#333333", lw=0.8, ls=":")
    ax.text(mid / 2, -0.75, bi("forward →", "前向 →"), ha="center", va="center", fontsize=9)
    ax.text(mid + (len(events) - mid) / 2, -0.75, bi("← backward", "← 反向"), ha="center", va="center", fontsize=9)
    ax.set_yticks(range(num_units), [bi(f"unit {i}", f"单元 {i}") for i in range(num_units)])
    ax.set_xticks([])
    ax.set_xlim(-0.2, len(events) + 0.2)
    ax.set_ylim(num_units - 0.4, -1.05)
    for side in ("top", "right", "bottom"):
        ax.spines[side].set_visible(False)
    for event in ("all_gather", "forward", "backward", "reduce_scatter", "step"):
        ax.bar(0, 0, color=EVENT_COLORS[event], label=f"{EVENT_SHORT[event]} = {_name(EVENT_NAMES[event])}")
    ax.bar(0, 0, color=plots.COLORS["idle"], label=bi("the rank's shard (always kept)", "本 rank 的分片（一直保留）"))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncols=3, fontsize=8, frameon=False)
    plots.title(ax, "One FSDP step: each unit is whole only while it computes (tall block), then freed",
                "FSDP 的一步：每个单元只在计算时是完整的（高块），算完就释放")
    return ax


MUON_FORM_NAMES = read_only({
    "local": ("Newton–Schulz on each rank's rows (wrong)", "每个 rank 只对自己的行做 Newton–Schulz（错误）"),
    "all_gather": ("(1) all-gather: every rank computes every matrix", "(1) AllGather：每个 rank 都算每个矩阵"),
    "owner": ("(2) owner: matrix i on rank i mod W", "(2) 持有者：矩阵 i 由 rank i mod W 计算"),
})


def muon_forms(world_size: int = 4, num_matrices: int = 3, rows: int = 8, cols: int = 8, ax=None):
    """Three rows (the wrong shardwise Newton–Schulz, the all-gather form, the owner form), one box per rank. In each
    box one small matrix per Muon matrix, cut into ``world_size`` row bands: the rank's own band is dark, rows it
    gathered from other ranks are light, rows it never sees are an outline. "NS" marks the rows Newton–Schulz runs
    on in that box (only the own band in the wrong form). Right of each row: the Newton–Schulz count of the busiest
    rank and the elements one rank sends per step, from :func:`distlearn.zero_fsdp.muon.compute_per_rank` and
    :func:`distlearn.zero_fsdp.muon.step_traffic` for ``num_matrices`` matrices of (rows, cols). Returns the axes."""
    if ax is None:
        _, ax = plots.new_figure(10.0, 5.6)
    shapes = [(rows, cols)] * num_matrices
    box_w, gap, mat_w, row_h = 1.0 + 0.02, 0.25, 0.26, 1.5
    band = 0.8 / world_size
    own, got, none = plots.COLORS["params"], "#A9C1E3", "white"
    for row, form in enumerate(("local", "all_gather", "owner")):
        y0 = (2 - row) * row_h
        for r in range(world_size):
            x0 = r * (box_w + gap)
            ax.add_patch(Rectangle((x0, y0), box_w, 1.05, fill=False, ec="#555555", lw=1))
            ax.text(x0 + box_w / 2, y0 + 1.08, f"rank {r}", ha="center", va="bottom", fontsize=7)
            for i in range(num_matrices):
                mx = x0 + 0.08 + i * (mat_w + 0.06)
                whole = form == "all_gather" or (form == "owner" and owner_of(i, world_size) == r)
                for b in range(world_size):
                    by = y0 + 0.9 - (b + 1) * band
                    color = own if b == r else got if whole else none
                    ax.add_patch(Rectangle((mx, by), mat_w, band, facecolor=color, ec="#777777", lw=0.5))
                if whole or form == "local":
                    ny = y0 + 0.9 - (r + 0.5) * band if form == "local" else y0 + 0.5
                    ax.text(mx + mat_w / 2, ny, "NS", ha="center", va="center", fontsize=6,
                            color="white" if form == "local" else "#222222")
        ax.text(-0.1, y0 + 1.32, _name(MUON_FORM_NAMES[form]), ha="left", va="bottom", fontsize=9)
        if form == "local":
            right = bi("no traffic,\nbut not Muon", "没有通信，\n但已不是 Muon")
        else:
            busiest = max(compute_per_rank(shapes, world_size, form)) // compute_per_rank(shapes[:1], 1, form)[0]
            sent = max(step_traffic(shapes, world_size, r, form).sent for r in range(world_size))
            right = bi(f"busiest rank: {busiest} NS\nsends ≤ {sent} elements",
                       f"最忙的 rank：{busiest} 次 NS\n最多发送 {sent} 个元素")
        ax.text(world_size * (box_w + gap) - gap + 0.15, y0 + 0.5, right, ha="left", va="center", fontsize=8)
    for color, en, zh in ((own, "the rank's own rows (FSDP2 shard)", "本 rank 自己的行（FSDP2 分片）"),
                          (got, "rows gathered from other ranks", "从其他 rank 收集来的行")):
        ax.bar(0, 0, color=color, label=bi(en, zh))
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.01), ncols=2, fontsize=8, frameon=False)
    ax.set_xlim(-0.2, world_size * (box_w + gap) + 1.9)
    ax.set_ylim(-0.1, 3 * row_h + 0.2)
    ax.set_axis_off()
    plots.title(ax, f"Who runs Newton–Schulz on {num_matrices} matrices sharded by rows over {world_size} ranks",
                f"{num_matrices} 个按行分片到 {world_size} 个 rank 上的矩阵：谁来做 Newton–Schulz")
    return ax

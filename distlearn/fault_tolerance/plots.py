"""The picture of chapter 13: a training run's timeline with checkpoints, failures, lost work and restarts.

:func:`timeline` lays the run out (pure arithmetic, tested); :func:`timeline_diagram` draws it, every label in the
course language (:mod:`distlearn.core.i18n`)."""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language
from distlearn.core.guard import read_only

KINDS = read_only({  # kind: (colour, English label, Chinese label)
    "work": ("#4C72B0", "work kept", "保留下来的计算"),
    "checkpoint": ("#55A868", "checkpoint δ", "写检查点 δ"),
    "lost": ("#C44E52", "lost work", "丢失的计算"),
    "restart": ("#BBBBBB", "restart R", "重启 R"),
})


@dataclass(frozen=True)
class Piece:
    """One stretch of wall time: ``kind`` in :data:`KINDS`, from ``start`` to ``end`` (same unit as the inputs)."""
    kind: str
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start


def timeline(work: float, interval: float, checkpoint_time: float, restart_time: float,
             failures: tuple[float, ...] = ()) -> list[Piece]:
    """The run as a list of :class:`Piece`: compute ``interval`` τ, write a checkpoint for ``checkpoint_time`` δ,
    and repeat until ``work`` is done. A failure at wall time ``f`` (``failures``, sorted) turns everything since
    the last *completed* checkpoint into lost work (a half-written checkpoint included), then the restart takes
    ``restart_time`` R. Failures that fall inside a restart or after the end are ignored (the picture keeps them
    out; :func:`distlearn.fault_tolerance.goodput.simulate_run` handles them)."""
    pieces: list[Piece] = []
    pending = sorted(failures)
    t, done = 0.0, 0.0
    while done < work - 1e-12:
        seg = min(interval, work - done)
        end = t + seg + checkpoint_time
        hit = next((f for f in pending if t <= f < end), None)
        pending = [f for f in pending if f > (hit if hit is not None else end)]
        if hit is None:
            pieces += [Piece("work", t, t + seg), Piece("checkpoint", t + seg, end)]
            done, t = done + seg, end
        else:
            pieces += [Piece("lost", t, hit), Piece("restart", hit, hit + restart_time)]
            t = hit + restart_time
            pending = [f for f in pending if f >= t]
    return pieces


def tally(pieces: list[Piece]) -> dict[str, float]:
    """Total wall time per kind, plus ``"wall"`` (the end of the run) and ``"goodput"`` (work kept / wall time)."""
    out = {k: sum(p.length for p in pieces if p.kind == k) for k in KINDS}
    out["wall"] = pieces[-1].end if pieces else 0.0
    out["goodput"] = out["work"] / out["wall"] if out["wall"] else 0.0
    return out


def timeline_diagram(work: float = 16.0, interval: float = 4.0, checkpoint_time: float = 1.0,
                     restart_time: float = 2.0, failures: tuple[float, ...] = (12.5, 24.0)):
    """Two runs of the same ``work`` as bars over wall time: one that never fails, one hit by ``failures``
    (red marks). Blue: work kept; green: checkpoints; red: work lost since the last completed checkpoint; grey:
    restarts. Each bar carries its kind as ``gid``. Returns the figure."""
    from matplotlib.patches import Patch, Rectangle

    rows = [(bi("no failure", "没有故障"), timeline(work, interval, checkpoint_time, restart_time)),
            (bi(f"{len(failures)} failures", f"{len(failures)} 次故障"),
             timeline(work, interval, checkpoint_time, restart_time, failures))]
    wall = max(p.end for _, pieces in rows for p in pieces)
    fig, ax = plots.new_figure(9, 3.6 if get_language() == "both" else 3.3)
    for y, (name, pieces) in enumerate(rows):
        for p in pieces:
            colour = KINDS[p.kind][0]
            ax.add_patch(Rectangle((p.start, -y - 0.32), p.length, 0.64, facecolor=colour, edgecolor="white", lw=1,
                                   hatch="//" if p.kind == "lost" else None, gid=p.kind))
        g = tally(pieces)["goodput"]
        ax.text(pieces[-1].end + 0.3, -y, bi(f"goodput {g:.0%}", f"有效训练时间占比 {g:.0%}"), va="center", fontsize=8)
    for f in failures:   # a failure: a red arrow under the bar / 故障：条形下方的红色箭头
        ax.annotate(bi("failure", "故障"), xy=(f, -1 - 0.34), xytext=(f, -1 - 0.8), ha="center", va="top", fontsize=8,
                    color="#C44E52", arrowprops=dict(arrowstyle="-|>", color="#C44E52", lw=1.2))
    first = rows[0][1]   # label τ and δ on the first segment of the failure-free run / 在无故障运行的第一段上标出 τ 和 δ
    ax.text((first[0].start + first[0].end) / 2, 0.42, "τ", ha="center", fontsize=10)
    ax.text((first[1].start + first[1].end) / 2, 0.42, "δ", ha="center", fontsize=10)
    ax.set_xlim(0, wall * 1.22)
    ax.set_ylim(-2.0, 0.7)
    ax.set_yticks([0, -1], [name for name, _ in rows])
    ax.set_xlabel(bi("wall time", "墙钟时间"))
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.legend(handles=[Patch(facecolor=c, hatch="//" if k == "lost" else None, label=bi(en, zh))
                        for k, (c, en, zh) in KINDS.items()],
               loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    plots.title(ax, "A run's timeline: a failure loses the work since the last checkpoint, then the job restarts",
                "一次训练的时间线：故障丢掉上个检查点之后的计算，然后作业重启")
    return fig


def diloco_diagram(replicas: int = 3, steps: int = 10, sync_every: int = 5):
    """Who talks when: ``replicas`` rows of ``steps`` inner steps (blue boxes) for synchronous data parallelism
    (top block: an all-reduce, orange, after every step) and for DiLoCo (bottom block: one all-reduce of the
    pseudo-gradient after every ``sync_every`` = H steps, then the outer step). Each box carries ``gid`` "step" or
    "allreduce". Returns the figure."""
    from matplotlib.patches import Patch, Rectangle

    from distlearn.core.validate import check_int

    r = check_int("replicas", replicas, minimum=1, maximum=8)
    n = check_int("steps", steps, minimum=1, maximum=40)
    h = check_int("sync_every", sync_every, minimum=1, maximum=n)
    blue, orange, gap = "#4C72B0", "#DD8452", 0.35
    fig, ax = plots.new_figure(9, 3.9 if get_language() == "both" else 3.6)
    labels, y = [], 0.0
    for name, every in (("DDP", 1), (f"DiLoCo H = {h}", h)):
        for rank in range(r):
            x = 0.0
            for step in range(n):
                ax.add_patch(Rectangle((x, -y - 0.35), 1.0, 0.7, facecolor=blue, edgecolor="white", gid="step"))
                x += 1.0
                if (step + 1) % every == 0:   # all-reduce: every rank waits for every other / 所有 rank 互相等待
                    ax.add_patch(Rectangle((x, -y - 0.35), gap, 0.7, facecolor=orange, edgecolor="white",
                                           gid="allreduce"))
                    x += gap
            labels.append((-y, f"{name} · rank {rank}"))
            y += 1.0
        y += 0.6
    ax.set_yticks([t for t, _ in labels], [s for _, s in labels], fontsize=8)
    ax.set_xlim(0, n * (1 + gap) + 0.5)
    ax.set_ylim(-y + 0.3, 0.6)
    ax.set_xlabel(bi("time (inner steps)", "时间（内层步数）"))
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.legend(handles=[Patch(facecolor=blue, label=bi("one inner step on the replica's own batch",
                                                        "副本在自己的批次上走一步")),
                        Patch(facecolor=orange, label=bi("all-reduce (all P parameters)", "all-reduce（全部 P 个参数）"))],
               loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    plots.title(ax, f"DDP all-reduces after every step; DiLoCo once every {h} steps",
                f"DDP 每一步后都做 all-reduce；DiLoCo 每 {h} 步才做一次")
    return fig


def diloco_curves(runs: dict):
    """Held-out loss against inner steps (left) and against bytes one replica handed to all-reduces (right, log
    scale). ``runs`` maps a label (already in the reader's language) to a
    :class:`distlearn.fault_tolerance.diloco.Run`. Returns the figure."""
    fig, (left, right) = plots.new_figure(10, 3.8, ncols=2)
    for name, run in runs.items():
        left.plot(run.eval_steps, run.eval_loss, label=name, marker="." if len(run.eval_steps) < 80 else None)
        right.plot(run.sent_bytes[1:], run.eval_loss[1:], label=name,   # from the first all-reduce on / 从第一次 all-reduce 起
                   marker="." if len(run.eval_steps) < 80 else None)
    for ax in (left, right):
        ax.set_yscale("log")
        ax.set_ylabel(bi("held-out MSE", "留出集 MSE"))
        ax.grid(alpha=0.3)
    left.set_xlabel(bi("inner steps", "内层步数"))
    right.set_xscale("log")
    right.set_xlabel(bi("bytes all-reduced per replica", "每个副本 all-reduce 的字节数"))
    left.legend(fontsize=8)
    plots.title(left, "Loss per step", "每一步的损失")
    plots.title(right, "Loss per byte communicated", "每通信一个字节换来的损失")
    return fig


def quorum_diagram(timeline: list, groups: int = 3):
    """The quora of a replica-group run: one row per group, one column per step. Blue: the group computes and
    all-reduces in this step's quorum; grey, hatched: dead; green: the replacement heals (an arrow from the live
    peer it copies the state from), then computes. Under each column: the global batch, 16 samples per member.
    ``timeline``: a list of :class:`distlearn.fault_tolerance.replicas.Quorum` (from ``plan_timeline`` or a real
    run). Each cell carries ``gid`` "member", "dead" or "heal". Returns the figure."""
    from matplotlib.patches import Patch, Rectangle

    colours = {"member": "#4C72B0", "dead": "#BBBBBB", "heal": "#55A868"}
    steps = len(timeline)
    fig, ax = plots.new_figure(9, 1.2 + 0.55 * groups + (0.3 if get_language() == "both" else 0))
    for q in timeline:
        for g in range(groups):
            kind = "heal" if g in q.heal else "member" if g in q.members else "dead" if g in q.dead else None
            if kind is None:
                continue
            ax.add_patch(Rectangle((q.step, -g - 0.4), 0.92, 0.8, facecolor=colours[kind], edgecolor="white",
                                   hatch="xx" if kind == "dead" else None, gid=kind))
        for g in q.heal:   # the state travels from the live peer / 状态从存活的同伴传过来
            ax.annotate("", xy=(q.step + 0.46, -g), xytext=(q.step + 0.46, -q.source),
                        arrowprops=dict(arrowstyle="-|>", color="white", lw=2))
        ax.text(q.step + 0.46, -groups + 0.3, str(16 * len(q.members)), ha="center", va="center", fontsize=8)
    changes = [q for i, q in enumerate(timeline) if i == 0 or q.quorum_id != timeline[i - 1].quorum_id]
    for q in changes:   # a new quorum, a new process group / 新的法定成员组，新的进程组
        ax.axvline(q.step - 0.04, color="black", lw=0.8, ls=":")
        ax.text(q.step, 0.62, bi(f"quorum {q.quorum_id}", f"第 {q.quorum_id} 组成员"), fontsize=8)
    ax.set_yticks([-g for g in range(groups)] + [-groups + 0.3],
                  [bi(f"group {g}", f"组 {g}") for g in range(groups)] + [bi("global batch", "全局批量")], fontsize=8)
    ax.set_xticks([s + 0.46 for s in range(steps)], [str(s) for s in range(steps)], fontsize=8)
    ax.set_xlim(-0.1, steps + 0.1)
    ax.set_ylim(-groups - 0.1, 1.0)
    ax.set_xlabel(bi("step", "步"))
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    fig.legend(handles=[Patch(facecolor=colours["member"], label=bi("in the quorum", "在法定成员组中")),
                        Patch(facecolor=colours["dead"], hatch="xx", label=bi("dead", "已死亡")),
                        Patch(facecolor=colours["heal"], label=bi("heals from a live peer, then computes",
                                                                  "从存活的同伴处恢复状态，再参与计算"))],
               loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    plots.title(ax, "One group dies; the others continue; its replacement heals and rejoins",
                "一个组死掉，其余组继续训练；替换组恢复状态后重新加入")
    return fig

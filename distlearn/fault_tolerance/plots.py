"""The picture of chapter 13: a training run's timeline with checkpoints, failures, lost work and restarts.

:func:`timeline` lays the run out (pure arithmetic, tested); :func:`timeline_diagram` draws it, every label in the
course language (:mod:`distlearn.core.i18n`)."""
from __future__ import annotations

from dataclasses import dataclass

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language

KINDS = {  # kind: (colour, English label, Chinese label)
    "work": ("#4C72B0", "work kept", "保留下来的计算"),
    "checkpoint": ("#55A868", "checkpoint δ", "写检查点 δ"),
    "lost": ("#C44E52", "lost work", "丢失的计算"),
    "restart": ("#BBBBBB", "restart R", "重启 R"),
}


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

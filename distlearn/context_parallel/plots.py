"""Figures of chapter 10: the idea of ring attention (ranks, blocks, messages) and of DeepSpeed-Ulysses (the two
all-to-alls between sequence shards and head shards), attention work per rank under each sequence layout, and a ring
schedule in time."""
from __future__ import annotations

import re

import numpy as np

from distlearn.core import plots
from distlearn.core.i18n import bi, get_language
from distlearn.core.guard import read_only

LAYOUT_COLORS = read_only({"contiguous": "#C44E52", "zigzag": "#4C72B0", "striped": "#55A868"})
LAYOUT_NAMES = read_only({"contiguous": ("contiguous", "连续切分"), "zigzag": ("zig-zag", "之字形切分"),
                "striped": ("striped", "条带切分"), "all-to-all": ("all-to-all (Ulysses)", "AllToAll（Ulysses）")})


def layout_label(layout: str) -> str:
    en, zh = LAYOUT_NAMES[layout]
    return bi(en, zh)


def _setup(setup) -> tuple[str, str]:
    """``setup`` = ``(en, zh)`` describing what a figure shows (model, sizes, hardware), appended to its title."""
    return ("", "") if setup is None else (f"\n{setup[0]}", f"\n{setup[1]}")


def _fit_title(ax, text: str, share: float = 0.92) -> None:
    """Set ``text`` as the title of ``ax``, each line broken (at spaces, commas and semicolons) so that no line is
    wider than ``share`` of the axes. Side-by-side subplots with long titles (the setup of each case) otherwise
    print their titles over each other."""
    renderer = ax.figure.canvas.get_renderer()
    limit = share * ax.get_window_extent(renderer).width

    def width(line: str) -> float:
        ax.set_title(line)
        return ax.title.get_window_extent(renderer).width

    out = []
    for line in text.split("\n"):
        tokens = re.findall(r"[^\s,，;；]+[,，;；]?\s*|[,，;；]\s*|\s+", line)
        current = ""
        for tok in tokens:
            if current.strip() and width((current + tok).rstrip()) > limit:
                out.append(current.rstrip())
                current = tok.lstrip()
            else:
                current += tok
        out.append(current.rstrip())
    ax.set_title("\n".join(out))


def work_bars(work_by_layout: dict, ax=None, *, unit: float = 1.0, ylabel: str | None = None, setup=None):
    """Grouped bars: for each layout (``{"contiguous": per-rank array, ...}``) the work of every rank, with the
    average as a dashed line. ``unit`` divides the values (e.g. the average of one layout); ``setup`` ``(en, zh)``
    states the case in the title (sequence length, source of the numbers)."""
    if ax is None:
        _, ax = plots.new_figure(7.5, 3.2)
    layouts = list(work_by_layout)
    cp = len(next(iter(work_by_layout.values())))
    width = 0.8 / len(layouts)
    for i, layout in enumerate(layouts):
        w = np.asarray(work_by_layout[layout], dtype=float) / unit
        ax.bar(np.arange(cp) + (i - (len(layouts) - 1) / 2) * width, w, width,
               color=LAYOUT_COLORS.get(layout, "#8172B3"), label=layout_label(layout))
    mean = np.mean(np.asarray(next(iter(work_by_layout.values())), dtype=float)) / unit
    ax.axhline(mean, ls="--", lw=1, color="#333333", label=bi("average", "平均"))
    ax.set_xticks(range(cp), [f"rank {r}" for r in range(cp)])
    ax.set_ylabel(ylabel or bi("work / average", "工作量 / 平均"))
    ax.legend(fontsize=8, ncols=2)
    en, zh = _setup(setup)
    plots.title(ax, f"Causal attention work per rank (cp = {cp}){en}", f"因果注意力下每个 rank 的工作量（cp = {cp}）{zh}")
    return ax


def ring_gantt(timeline, ax=None, *, unit: float = 1e-3, label: str = "ms", setup=None):
    """One bar per (rank, step) of a :class:`distlearn.context_parallel.simulation.Timeline`: compute in colour; in grey the
    time a rank waits — for the next block, or at the end for the slowest rank. ``setup`` ``(en, zh)`` states the
    case in the title (model, sequence, GPU, link)."""
    if ax is None:
        _, ax = plots.new_figure(7.5, 0.5 + 0.45 * timeline.start.shape[0])
    cp = timeline.start.shape[0]
    for r in range(cp):
        prev_end = 0.0
        for t in range(cp):
            s, e = timeline.start[r, t] / unit, timeline.end[r, t] / unit
            if s > prev_end:
                ax.barh(r, s - prev_end, left=prev_end, color=plots.COLORS["idle"], edgecolor="white")
            ax.barh(r, e - s, left=s, color=plots.COLORS["compute"], edgecolor="white")
            if e - s > 0:
                ax.text((s + e) / 2, r, str(t), ha="center", va="center", fontsize=7, color="white")
            prev_end = e
        if timeline.makespan / unit > prev_end:         # done early: idle until the slowest rank finishes
            ax.barh(r, timeline.makespan / unit - prev_end, left=prev_end, color=plots.COLORS["idle"],
                    edgecolor="white")
    ax.set_yticks(range(cp), [f"rank {r}" for r in range(cp)])
    ax.invert_yaxis()
    ax.set_xlabel(label)
    en, zh = _setup(setup)
    _fit_title(ax, bi(f"Ring steps in time (number = step; grey = idle){en}",
                      f"环形各步的时间线（数字为步序；灰色为空闲）{zh}", sep="\n"))
    return ax


RANK_COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


def ring_diagram(cp: int = 4, steps: int | None = None):
    """The idea of ring attention in one picture: one panel per step; in each, the ``cp`` ranks as boxes, each
    holding its own queries (a bar that never moves) and one K/V block (a bar coloured by the rank it came from),
    with arrows for the messages of that step, rank r → rank r+1. Every label follows the course language.
    Returns the figure."""
    from matplotlib.patches import FancyBboxPatch, Rectangle

    steps = cp if steps is None else steps
    fig, axes = plots.plt.subplots(1, steps, figsize=(2.35 * steps, 0.62 * cp + 1.3), layout="constrained")
    axes = np.atleast_1d(axes)
    for t, ax in enumerate(axes):
        ax.set_xlim(0, 10)
        ax.set_ylim(-0.8, cp - 0.2)
        ax.invert_yaxis()
        ax.axis("off")
        for r in range(cp):
            src = (r - t) % cp
            ax.add_patch(FancyBboxPatch((0.2, r - 0.38), 7.3, 0.76, boxstyle="round,pad=0.02,rounding_size=0.12",
                                        facecolor="#F4F4F4", edgecolor="#555555", lw=1))
            ax.text(0.45, r, f"rank {r}", va="center", ha="left", fontsize=8)
            ax.add_patch(Rectangle((3.0, r - 0.22), 1.9, 0.44, color=RANK_COLORS[r % len(RANK_COLORS)], alpha=0.45))
            ax.text(3.95, r, f"Q{r}", va="center", ha="center", fontsize=8)
            ax.add_patch(Rectangle((5.2, r - 0.22), 2.0, 0.44, color=RANK_COLORS[src % len(RANK_COLORS)]))
            ax.text(6.2, r, f"K/V{src}", va="center", ha="center", fontsize=8, color="white")
            if t < cp - 1:   # this step's message: the held block goes on to rank r+1 / 这一步的消息：把持有的块传给 rank r+1
                dst = (r + 1) % cp
                ax.annotate("", xy=(7.6, dst), xytext=(7.6, r),
                            arrowprops=dict(arrowstyle="->", color="#333333", lw=1.1, shrinkA=1, shrinkB=1,
                                            connectionstyle=f"arc3,rad={0.45 if dst > r else 0.22}"))
        plots.title(ax, f"step {t}", f"第 {t} 步")
    fig.supxlabel(bi("Q: the rank's own queries, never sent. K/V j: the block of rank j. "
                     "Arrow: a message of that step, rank r → rank r+1.",
                     "Q：本 rank 自己的查询，从不发送。K/V j：rank j 的 K/V 块。箭头：这一步的消息，rank r → rank r+1。"),
                  fontsize=8)
    fig.suptitle(bi("Ring attention: the queries stay, the K/V blocks rotate (cp = {})".format(cp),
                    "环形注意力：查询留在本地，K/V 块沿环轮转（cp = {}）".format(cp), sep="\n"))
    return fig


def ulysses_diagram(cp: int = 4, num_heads: int = 8):
    """The idea of DeepSpeed-Ulysses in one picture (Jacobs et al. 2023), ranks as rows, in three panels.

    1. Sequence shards: rank r holds its ``s/cp`` tokens (sequence chunk r) for all ``num_heads`` heads.
    2. After one all-to-all (for each of Q, K and V): rank r holds all ``s`` tokens for ``num_heads/cp`` heads, and
       runs ordinary attention on them.
    3. After the all-to-all back (the output O): sequence shards again.

    Each cell is one (sequence chunk, head) piece of a tensor: its colour is the sequence chunk (the colours of
    :func:`ring_diagram`, chunk j starting on rank j), its number the head. Each line between panels is one
    message of the all-to-all, coloured by the sequence chunk it carries; rank r sends head group g to rank g. What
    each rank holds is not drawn by hand: it is read from the course's own all-to-alls
    (:mod:`distlearn.context_parallel.simulation`, the ones :func:`~distlearn.context_parallel.simulation.ulysses_attention`
    runs) applied to a tensor of (head, sequence chunk) labels.

    ``cp``: 2 … 8 ranks; ``num_heads``: 1 … 16 heads, a multiple of ``cp`` (raises DistlearnValueError naming the
    parameter otherwise). Cells carry ``gid`` ``"cell:panel:rank:head:chunk"``, lines ``"a2a:k:src:dst"``
    (k = 0 in, 1 back). Returns the figure.
    """
    from matplotlib.patches import FancyBboxPatch, Rectangle

    from distlearn.context_parallel.simulation import ulysses_heads, ulysses_holdings

    held = ulysses_holdings(cp, num_heads)               # validates cp and num_heads / 检查 cp 与 num_heads
    cp, a = int(cp), int(num_heads)
    group = ulysses_heads(a, a, cp).q_heads              # heads per rank after the all-to-all / 交换后每个 rank 的头数
    panels = (held.before, held.middle, held.after)

    pw, gap, wire, x_rank = 4.2, 0.14, 1.9, 1.15     # panel width, gap between groups, wiring width, label column
    x0s = [x_rank, x_rank + pw + wire, x_rank + 2 * (pw + wire)]
    cw = (pw - 0.2 - (cp - 1) * gap) / a              # cell width / 单元宽度
    fig, ax = plots.plt.subplots(figsize=(12.5, 0.62 * cp + 2.4), layout="constrained")
    ax.set_axis_off()

    def cell_x(panel, k):    # left edge of the k-th cell of a row: cp groups of a/cp cells / 每行第 k 个单元的左边
        return x0s[panel] + 0.1 + k * cw + (k // group) * gap

    for panel, rows in enumerate(panels):
        for r, row in enumerate(rows):
            ax.add_patch(FancyBboxPatch((x0s[panel], r - 0.38), pw, 0.76, boxstyle="round,pad=0.02,rounding_size=0.1",
                                        facecolor="#F4F4F4", edgecolor="#555555", lw=1))
            for k, (h, blk) in enumerate(row):
                x = cell_x(panel, k)
                ax.add_patch(Rectangle((x, r - 0.24), cw * 0.92, 0.48, color=RANK_COLORS[blk % len(RANK_COLORS)],
                                       gid=f"cell:{panel}:{r}:{h}:{blk}"))
                ax.text(x + cw * 0.46, r, str(h), ha="center", va="center", fontsize=6 if a > 8 else 8, color="white")
    for r in range(cp):
        ax.text(0.05, r, f"rank {r}", ha="left", va="center", fontsize=9)
    # The messages, read from the panels: a piece of block j in row g of the next panel came from rank j (in) or
    # goes back to rank j (out). 消息从各面板读出：下一面板第 g 行中片段 j 的块来自 rank j，或回到 rank j。
    for k, (left, right) in enumerate(((0, 1), (1, 2))):
        xa, xb = x0s[left] + pw + 0.05, x0s[right] - 0.05
        for src in range(cp):
            for dst in range(cp):
                if k == 0:
                    blocks = {blk for h, blk in panels[1][dst] if blk == src}
                else:
                    blocks = {blk for h, blk in panels[1][src] if blk == dst}
                if not blocks:
                    continue
                blk = blocks.pop()
                ya = src + (dst - (cp - 1) / 2) * 0.6 / cp
                yb = dst + (src - (cp - 1) / 2) * 0.6 / cp
                ax.annotate("", xy=(xb, yb), xytext=(xa, ya), gid=f"a2a:{k}:{src}:{dst}",
                            arrowprops=dict(arrowstyle="-|>", color=RANK_COLORS[blk % len(RANK_COLORS)], lw=1.0,
                                            mutation_scale=7, shrinkA=0, shrinkB=0))
    top = -0.5
    heads = ((("1. Sequence shards", "1. 序列分片"),
              ("each rank: s/cp tokens, all a heads", "每个 rank：s/cp 个词元，全部 a 个头")),
             (("2. Head shards: attention", "2. 头分片：计算注意力"),
              (f"each rank: all s tokens, a/cp = {group} heads", f"每个 rank：全部 s 个词元，a/cp = {group} 个头")),
             (("3. Sequence shards again", "3. 回到序列分片"),
              ("the output O: s/cp tokens, all heads", "输出 O：s/cp 个词元，全部的头")))
    lines = 2 if get_language() == "both" else 1      # both languages: one above the other / 双语时上下排列
    for x0, (h1, h2) in zip(x0s, heads):
        ax.text(x0 + pw / 2, top, bi(*h2, sep="\n"), ha="center", va="bottom", fontsize=8)
        ax.annotate(bi(*h1, sep="\n"), xy=(x0 + pw / 2, top), xytext=(0, 11 * lines + 4), textcoords="offset points",
                    ha="center", va="bottom", fontsize=10)
    for k, name in enumerate((("all-to-all\n(Q, K, V)", "AllToAll\n（Q、K、V）"),
                              ("all-to-all\nback (O)", "反方向的\nAllToAll（O）"))):
        ax.text(x0s[k] + pw + wire / 2, top, bi(*name, sep="\n"), ha="center", va="bottom", fontsize=8)
    ax.text(x_rank, cp - 0.35, bi(
        "Colour: sequence chunk (chunk j starts on rank j). Number: head. "
        "Each line is one message: rank r sends head group g to rank g, in the colour of the chunk it carries.",
        "颜色：序列片段（片段 j 最初在 rank j 上）。数字：头的编号。每条线是一条消息：rank r 把第 g 组头发给 rank g，"
        "线的颜色就是它携带的片段的颜色。", sep="\n"), ha="left", va="top", fontsize=8, color="#444444")
    ax.set_xlim(0, x0s[2] + pw + 0.1)
    ax.set_ylim(cp + 0.1, top)
    fig.suptitle(bi(f"DeepSpeed-Ulysses: two all-to-alls turn sequence shards into head shards and back (cp = {cp}, "
                    f"a = {a} heads)",
                    f"DeepSpeed-Ulysses：两次 AllToAll 把序列分片变成头分片，再变回来（cp = {cp}，a = {a} 个头）",
                    sep="\n"))
    return fig


MODE_NAMES = read_only({"global": ("document mask from global ids", "按全局编号构造的文档掩码"),
              "causal-only": ("causal only: documents ignored", "只有因果掩码：忽略文档边界"),
              "local": ("ids and positions from the chunk alone", "只按本片段计算编号和位置"),
              "unrestored": ("positions not restored after re-ordering", "重排后没有还原位置")})


def packed_mask_diagram(lengths, cp: int = 2, panels=(("contiguous", "global"), ("zigzag", "global"),
                                                      ("zigzag", "causal-only"))):
    """A packed sequence's attention mask as the ranks hold it, one panel per ``(layout, mode)`` of ``panels``.

    Rows are queries and columns keys, both in the order the ranks store their tokens
    (:func:`distlearn.context_parallel.packed.packed_positions`), so rank r's rows are the r-th horizontal band and
    the key chunk it receives from rank j the j-th cell of that band; lines separate the ranks. A pair the mask
    lets through is drawn in the colour of its document; a pair that ``mode`` lets through but the document mask
    forbids (a query attending to another document, or to a later token) is red. Every label follows the course
    language. ``lengths``: document lengths; ``cp``: 2 … 8. Returns the figure."""
    from matplotlib.colors import to_rgb
    from matplotlib.patches import Patch

    from distlearn.context_parallel.packed import document_ids, effective_mask, packed_positions
    from distlearn.core.validate import check_int

    cp = check_int("cp", cp, maximum=8)
    docs = document_ids(lengths)
    s = len(docs)
    fig, axes = plots.plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.9), layout="constrained")
    axes = np.atleast_1d(axes)
    doc_rgb = np.array([to_rgb(RANK_COLORS[(d + 4) % len(RANK_COLORS)]) for d in range(int(docs.max()) + 1)])
    wrong_rgb = np.array(to_rgb("#D62728"))
    right = effective_mask(lengths, 1, layout="contiguous", mode="global")
    for ax, (layout, mode) in zip(axes, panels):
        order = np.concatenate(packed_positions(lengths, cp, layout))
        mask = effective_mask(lengths, cp, layout=layout, mode=mode)[np.ix_(order, order)]
        ok = right[np.ix_(order, order)]
        img = np.ones((s, s, 3))
        img[mask & ok] = doc_rgb[docs[order]][:, None, :].repeat(s, axis=1)[mask & ok]
        img[mask & ~ok] = wrong_rgb
        ax.imshow(img, interpolation="nearest")
        n = s // cp
        for r in range(1, cp):
            ax.axhline(r * n - 0.5, color="#333333", lw=1.2)
            ax.axvline(r * n - 0.5, color="#333333", lw=1.2)
        ticks = [r * n + (n - 1) / 2 for r in range(cp)]
        ax.set_yticks(ticks, [f"rank {r}" for r in range(cp)], fontsize=8)
        ax.set_xticks(ticks, [f"K/V{r}" for r in range(cp)], fontsize=8)
        ax.tick_params(length=0)
        name_en, name_zh = LAYOUT_NAMES.get(layout, (layout, layout)) if layout != "document-zigzag" else \
            ("per-document zig-zag", "按文档之字形切分")
        mode_en, mode_zh = MODE_NAMES[mode]
        _fit_title(ax, bi(f"{name_en}:\n{mode_en}", f"{name_zh}：\n{mode_zh}", sep="\n"))
    handles = [Patch(color=doc_rgb[d], label=bi(f"document {d}", f"文档 {d}")) for d in range(len(doc_rgb))]
    handles.append(Patch(color=wrong_rgb, label=bi("forbidden: another document or a later token",
                                                   "不该放行：别的文档或更晚的词元")))
    fig.legend(handles=handles, loc="outside lower center", fontsize=8, frameon=False,
               ncols=3 if get_language() == "both" else len(handles))     # both languages: two rows / 双语时分两行
    fig.suptitle(bi(f"A packed sequence of {len(doc_rgb)} documents ({s} tokens) on cp = {cp} ranks: rows = queries, "
                    "columns = keys, in the order the ranks hold them",
                    f"{len(doc_rgb)} 个文档拼成的序列（{s} 个词元）分到 cp = {cp} 个 rank 上：行是查询，列是键，"
                    "按各 rank 持有的顺序排列", sep="\n"), fontsize=10)
    return fig

"""Builds solutions/02_collectives.ipynb with nbformat. Run: .venv/bin/python scripts/notebooks/02_collectives_solutions.py, then
.venv/bin/python -m distlearn.course execute solutions/02_collectives.ipynb and python -m distlearn.course build-exercises"""
from pathlib import Path

import nbformat

from distlearn.course import code, new_notebook, pair

HERE = Path(__file__).resolve().parents[2] / "solutions"

cells = [
    pair(r"""
# 02 · Exercises: collective communication

Complete each function, then run the check cell below it: it runs hidden cases and prints ✓ or ✗ with a hint.
Units: bytes and seconds (GB = 10⁹ bytes).
""", r"""
# 02 · 练习：集合通信

补全每个函数，然后运行其下方的检查单元格：它会运行隐藏的测试用例，打印 ✓ 或 ✗ 并给出提示。单位：字节和秒
（GB = 10⁹ 字节）。
"""),
    code("""
import numpy as np

from distlearn import check
from distlearn.comm import VirtualCluster
from distlearn.i18n import bi
"""),
    pair(r"""
## Exercise 1: ring all-reduce on the virtual cluster

Implement ring all-reduce (sum) using only `cluster.send(array, src, dst)` and `cluster.recv(src, dst)`.
`arrays` holds one 1-D array per rank; return one array per rank, each the element-wise sum. Split every array
into `n = cluster.world_size` chunks with `np.array_split` (so any length works), run n−1 reduce-scatter steps
and n−1 all-gather steps, every message going from rank r to rank r+1 (mod n). The check also verifies each
rank's bytes sent, so gathering everything on one rank does not pass.
""", r"""
## 练习 1：在虚拟集群上实现环形 AllReduce

只用 `cluster.send(array, src, dst)` 和 `cluster.recv(src, dst)` 实现环形 AllReduce（求和）。`arrays` 中每个 rank 一个
一维数组；返回每个 rank 一个数组，都等于逐元素之和。用 `np.array_split` 把每个数组切成 `n = cluster.world_size` 块
（这样任意长度都可以），执行 n−1 步 reduce-scatter 和 n−1 步 all-gather，每条消息都从 rank r 发往 rank r+1（mod n）。
检查还会核对每个 rank 发送的字节数，所以把所有数据收集到一个 rank 上是通不过的。
"""),
    code("""
def ring_all_reduce(cluster, arrays):
    ### BEGIN SOLUTION
    n = cluster.world_size
    chunks = [[c.copy() for c in np.array_split(np.asarray(a, dtype=float), n)] for a in arrays]
    for s in range(n - 1):                      # reduce-scatter
        for r in range(n):
            cluster.send(chunks[r][(r - s - 1) % n], r, (r + 1) % n)
        for r in range(n):
            src = (r - 1) % n
            c = (src - s - 1) % n
            chunks[r][c] = chunks[r][c] + cluster.recv(src, r)
    for s in range(n - 1):                      # all-gather
        for r in range(n):
            cluster.send(chunks[r][(r - s) % n], r, (r + 1) % n)
        for r in range(n):
            src = (r - 1) % n
            chunks[r][(src - s) % n] = cluster.recv(src, r)
    return [np.concatenate(c) for c in chunks]
    ### END SOLUTION
"""),
    code("""
check.ex02_ring_all_reduce(ring_all_reduce)
"""),
    code("""
demo = VirtualCluster(4)   # try it: 6 elements on 4 ranks (chunks of 2, 2, 1, 1)
try:
    out = ring_all_reduce(demo, [np.arange(6.0) * (r + 1) for r in range(4)])
    print(bi("rank 0 gets", "rank 0 得到"), out[0])
    print(bi("bytes sent per rank", "每个 rank 发送的字节数"), demo.bytes_sent)
except NotImplementedError:
    print(bi("Solve exercise 1 above first; this demo then runs your ring_all_reduce.",
             "请先完成上面的练习 1；之后这里会运行你的 ring_all_reduce。"))
"""),
    pair(r"""
## Exercise 2: bytes per rank

Return the bytes each rank sends in a ring all-reduce of a message of `nbytes` bytes on `world_size` ranks.
""", r"""
## 练习 2：每个 rank 的字节数

返回在 `world_size` 个 rank 上对 `nbytes` 字节的消息做环形 AllReduce 时，每个 rank 发送的字节数。
"""),
    code("""
def all_reduce_bytes(nbytes, world_size):
    ### BEGIN SOLUTION
    return 2 * (world_size - 1) / world_size * nbytes
    ### END SOLUTION
"""),
    code("""
check.ex02_all_reduce_bytes(all_reduce_bytes)
"""),
    code("""
try:
    gb = all_reduce_bytes(7e9 * 2, 8) / 1e9
    print(bi(f"bf16 gradients of a 7B model on 8 ranks: {gb} GB per rank",
             f"7B 模型的 bf16 梯度在 8 个 rank 上：每个 rank {gb} GB"))
except NotImplementedError:
    print(bi("Solve exercise 2 above first.", "请先完成上面的练习 2。"))
"""),
    pair(r"""
## Exercise 3: bus bandwidth

An all-reduce of `nbytes` bytes on `world_size` ranks took `seconds`. Return the bus bandwidth in bytes per
second as nccl-tests reports it.
""", r"""
## 练习 3：总线带宽

在 `world_size` 个 rank 上对 `nbytes` 字节做 AllReduce 用时 `seconds` 秒。按 nccl-tests 的定义返回总线带宽（字节/秒）。
"""),
    code("""
def bus_bandwidth(nbytes, seconds, world_size):
    ### BEGIN SOLUTION
    return nbytes / seconds * 2 * (world_size - 1) / world_size
    ### END SOLUTION
"""),
    code("""
check.ex02_bus_bandwidth(bus_bandwidth)
"""),
    pair(r"""
## Exercise 4: α-β time of a ring all-reduce

Return the time in seconds of a ring all-reduce of `nbytes` bytes on `world_size` ranks, with latency `alpha`
seconds per message and link `bandwidth` in bytes per second.
""", r"""
## 练习 4：环形 AllReduce 的 α-β 时间

返回在 `world_size` 个 rank 上对 `nbytes` 字节做环形 AllReduce 的时间（秒），每条消息的延迟为 `alpha` 秒，链路带宽为
`bandwidth` 字节/秒。
"""),
    code("""
def ring_all_reduce_time(nbytes, world_size, alpha, bandwidth):
    ### BEGIN SOLUTION
    return 2 * (world_size - 1) * alpha + 2 * (world_size - 1) / world_size * nbytes / bandwidth
    ### END SOLUTION
"""),
    code("""
check.ex02_ring_time(ring_all_reduce_time)
"""),
]

nb = new_notebook(cells)
nbformat.write(nb, HERE / "02_collectives.ipynb")

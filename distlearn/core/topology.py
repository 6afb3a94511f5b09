"""Where the bytes travel: NVLink domains, the network, rails, and what a collective costs on each (chapter 02; the
planner, chapter 14, reads the same model).

**The model.** GPUs sit in *NVLink domains* of ``gpus_per_domain`` GPUs: every GPU of a domain reaches every other
through NVSwitch at ``intra_bw`` bytes/s per direction (8 GPUs in a DGX H100 / B200 node, 72 in a GB200 NVL72
rack). Between domains each GPU has its own network card (NIC) at ``network_bw`` bytes/s per direction (one
400 Gb/s card per GPU = 50 GB/s). NVLink does *not* run between nodes of 8 GPUs: their traffic goes through the NICs
(NVIDIA DGX H100 user guide; the question is stas00/ml-engineering issue #120). A GB200 NVL72 rack is the exception
the name says: its 18 trays of 4 GPUs share one NVLink domain of 72 (NVIDIA GB200 NVL72 datasheet).

**Rails.** In a *rail-optimized* fabric NIC i of every node plugs into leaf switch i (rail i), so GPU i of one
node reaches GPU i of any node of the same scalable unit through one switch; GPUs on different rails need leaf →
spine → leaf, three switches (NVIDIA DGX SuperPOD reference architecture, H100, "compute fabric"). The
hierarchical algorithm below only ever pairs GPUs of the same local index across domains, so its network step
stays on one rail. :meth:`Topology.switch_hops` counts the switches.

**α-β times** (seconds; ``M`` bytes; a group of ``g`` GPUs placed ``k`` per domain in ``d = g/k`` domains; α per
message, β = 1/bandwidth; the ring formulas of :mod:`distlearn.core.cost`, Thakur et al. 2005, Patarasuk & Yuan
2009). ``c`` is the ring's share: ``2(g−1)/g`` for all-reduce, ``(g−1)/g`` for all-gather (``M`` = output) and
reduce-scatter (``M`` = input).

==========================  ============================================================================
inside one domain (d = 1)   steps·α_intra + c·M / intra_bw                     steps = 2(g−1) or g−1
flat ring across domains    steps·α_net + c·M / min(r·network_bw, intra_bw)   r = rings ≤ k, one NIC each
hierarchical all-reduce     ① reduce-scatter inside (k): (k−1)/k·M over NVLink
                            ② all-reduce across (d), on M/k:  2(d−1)/d·M/k over the network
                            ③ all-gather inside (k): (k−1)/k·M over NVLink                 (times add up)
hierarchical all-gather     ① across (d), output M/k: (d−1)/d·M/k; ② inside (k), output M: (k−1)/k·M
hierarchical reduce-scatter ① inside (k), input M: (k−1)/k·M; ② across (d), input M/k: (d−1)/d·M/k
all-to-all (direct)         (g−1)·α + max((k−1)/g·M / intra_bw, (g−k)/g·M / network_bw)
==========================  ============================================================================

A single ring across domains moves everything through one NIC per domain boundary: 2(g−1)/g·M at 50 GB/s. The
hierarchical all-reduce sends only 2(d−1)/d·M/k per NIC, and all k NICs of a domain work at once, one per rail:
k times less network traffic per card. NCCL's tree algorithm is built the same way, a chain inside each node and
a tree between nodes (Jeaugey 2019, "Massively Scale Your Deep Learning Training with NCCL 2.4", NVIDIA blog);
Horovod offers the three steps as ``HOROVOD_HIERARCHICAL_ALLREDUCE``; the JAX scaling book's GPU chapter (Austin et
al. 2025, "cross-node collectives") puts the cost beyond the node at about B / W_node egress. NCCL runs ``r`` rings at once, one per NIC: the flat ring's bandwidth term with
``rings = k`` is 2(g−1)/g·M / (k·network_bw), about the hierarchical network term; the model keeps ``rings = 1``
as the textbook ring unless asked. The three hierarchical stages are added here; NCCL pipelines them in chunks, so
a real run can be faster than the sum (never faster than the largest stage). In-network reduction (SHARP, NVLS) is
left out.

Units: bytes, seconds, bytes per second (GB/s = 1e9 B/s).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from distlearn.core.hardware import GPU, get_gpu
from distlearn.core.validate import (DistlearnValueError, check_bool, check_record, check_choice, check_int, check_number,
                                     check_positive)

NODE_KINDS = ("auto", "8-gpu", "nvl72")
OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
ALGORITHMS = ("ring", "hierarchical", "direct")


@dataclass(frozen=True)
class Topology:
    """A cluster's shape as collectives see it.

    ``gpus_per_domain``: GPUs of one NVLink domain (8 for DGX H100, 72 for GB200 NVL72); ``intra_bw``: bytes/s per
    GPU per direction inside the domain; ``network_bw``: bytes/s per GPU per direction between domains (its NIC);
    ``gpus_per_host``: GPUs one host or tray holds (8 for DGX, 4 for a GB200 compute tray), whose NICs are
    numbered 0 … ``nics_per_host`` − 1 and sit on rails 0 … ``nics_per_host`` − 1; ``rail_optimized``: NIC i of
    every host on leaf switch i; ``alpha_intra`` / ``alpha_network``: seconds per message (0 unless given: the
    course times large messages by their bandwidth term). Raises DistlearnValueError for values out of range."""

    name: str
    gpus_per_domain: int
    intra_bw: float
    network_bw: float
    gpus_per_host: int = 8
    nics_per_host: int = 8
    rail_optimized: bool = True
    alpha_intra: float = 0.0
    alpha_network: float = 0.0
    source: str = field(default="", compare=False)

    def __post_init__(self):
        check_int("gpus_per_domain", self.gpus_per_domain, minimum=1)
        check_positive("intra_bw", self.intra_bw)
        check_positive("network_bw", self.network_bw)
        check_int("gpus_per_host", self.gpus_per_host, minimum=1, maximum=self.gpus_per_domain)
        check_int("nics_per_host", self.nics_per_host, minimum=1, maximum=self.gpus_per_host)
        if self.gpus_per_domain % self.gpus_per_host or self.gpus_per_host % self.nics_per_host:
            raise DistlearnValueError(
                "gpus_per_host", f"gpus_per_host = {self.gpus_per_host} must divide gpus_per_domain = "
                                 f"{self.gpus_per_domain}, and nics_per_host = {self.nics_per_host} must divide it.",
                f"gpus_per_host = {self.gpus_per_host} 必须整除 gpus_per_domain = {self.gpus_per_domain}，"
                f"nics_per_host = {self.nics_per_host} 也必须整除 gpus_per_host。")
        check_bool("rail_optimized", self.rail_optimized)
        check_number("alpha_intra", self.alpha_intra, minimum=0)
        check_number("alpha_network", self.alpha_network, minimum=0)

    def with_(self, **changes) -> "Topology":
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def domain_of(self, rank: int) -> int:
        """The NVLink domain of global ``rank`` (ranks numbered domain by domain)."""
        return check_int("rank", rank, minimum=0) // self.gpus_per_domain

    def rail_of(self, rank: int) -> int:
        """The rail (NIC index within its host) of global ``rank``'s network card."""
        local = check_int("rank", rank, minimum=0) % self.gpus_per_host
        return local // (self.gpus_per_host // self.nics_per_host)

    def switch_hops(self, a: int, b: int) -> int:
        """Switches a message from rank ``a`` to rank ``b`` crosses: 0 to itself, 1 inside a domain (NVSwitch), 1
        between domains on the same rail of a rail-optimized fabric (the rail's leaf), else 3 (leaf, spine, leaf)."""
        if a == b:
            return 0
        if self.domain_of(a) == self.domain_of(b):
            return 1
        return 1 if self.rail_optimized and self.rail_of(a) == self.rail_of(b) else 3


def make_topology(gpu: str | GPU = "h100-80gb", node: str = "auto", *, gpus_per_domain: int | None = None,
                  rail_optimized: bool = True, alpha_intra: float = 0.0, alpha_network: float = 0.0) -> Topology:
    """The topology of ``gpu`` (a preset of :mod:`distlearn.core.hardware` or a :class:`GPU`) in ``node`` kind:

    ``"8-gpu"`` (DGX/HGX H100, H200, B200, an MI300X platform: one host = one domain of 8, 8 NICs, one per GPU),
    ``"nvl72"`` (GB200 NVL72: a domain of 72 GPUs, hosts of 4 GPUs with 4 NICs), ``"auto"`` (``"nvl72"`` for the
    ``gb200-nvl72`` preset, else ``"8-gpu"``). ``gpus_per_domain`` shrinks the domain for a small example (2
    nodes × 4 GPUs); hosts and NICs shrink with it. Bandwidths come from the preset: ``intra_bw = gpu.nvlink_bw``,
    ``network_bw = gpu.network_bw``. Raises DistlearnValueError for an unknown GPU or node kind."""
    g = get_gpu(gpu) if isinstance(gpu, str) else gpu
    if not isinstance(g, GPU):
        raise DistlearnValueError("gpu", f"gpu must be a preset name or a GPU; got {gpu!r}.",
                                  f"gpu 必须是预设名称或 GPU 对象；收到 {gpu!r}。")
    kind = check_choice("node", node, NODE_KINDS)
    if kind == "auto":
        kind = "nvl72" if g.gpus_per_node == 72 else "8-gpu"
    domain, host = (72, 4) if kind == "nvl72" else (8, 8)
    if gpus_per_domain is not None:
        domain = check_int("gpus_per_domain", gpus_per_domain, minimum=1, maximum=domain)
        host = min(host, domain)
        while domain % host:
            host -= 1
    return Topology(f"{g.name} ({kind})", domain, g.nvlink_bw, g.network_bw, gpus_per_host=host, nics_per_host=host,
                    rail_optimized=rail_optimized, alpha_intra=alpha_intra, alpha_network=alpha_network,
                    source=g.source)


@dataclass(frozen=True)
class Level:
    """One stage of a collective: ``name`` (e.g. ``"reduce_scatter inside"``), ``link`` (``"intra"`` or
    ``"network"``), ``group`` (ranks in each of its groups), ``nbytes`` (bytes each GPU sends over ``link`` in this
    stage), ``seconds`` (its α-β time)."""

    name: str
    link: str
    group: int
    nbytes: float
    seconds: float


@dataclass(frozen=True)
class CollectiveCost:
    """The α-β time of one collective on a :class:`Topology`: ``seconds`` (sum of the levels), ``levels`` (tuple of
    :class:`Level`), and the bytes each GPU sends over NVLink (``intra_bytes``) and over its NIC
    (``network_bytes``): for a ring across domains, the NIC of a GPU at a domain boundary, the busiest one."""

    operation: str
    algorithm: str
    group: int
    per_domain: int
    nbytes: float
    levels: tuple

    @property
    def seconds(self) -> float:
        return sum(lv.seconds for lv in self.levels)

    @property
    def intra_bytes(self) -> float:
        return sum(lv.nbytes for lv in self.levels if lv.link == "intra")

    @property
    def network_bytes(self) -> float:
        return sum(lv.nbytes for lv in self.levels if lv.link == "network")

    @property
    def domains(self) -> int:
        return self.group // self.per_domain


def _share(operation: str, n: int) -> float:
    """The ring's bytes per rank as a fraction of M (2(n−1)/n for all-reduce, (n−1)/n otherwise)."""
    return (2 if operation == "all_reduce" else 1) * (n - 1) / n


def _steps(operation: str, n: int) -> int:
    return (2 if operation == "all_reduce" else 1) * (n - 1)


def _level(topo: Topology, name: str, link: str, operation: str, n: int, nbytes: float, bw: float | None = None
           ) -> Level:
    """A ring ``operation`` on ``n`` ranks of ``nbytes`` over ``link``."""
    alpha = topo.alpha_intra if link == "intra" else topo.alpha_network
    bw = bw if bw is not None else (topo.intra_bw if link == "intra" else topo.network_bw)
    sent = _share(operation, n) * nbytes
    return Level(name, link, n, sent, _steps(operation, n) * alpha + sent / bw)


def collective_cost(topo: Topology, operation: str, nbytes: float, group: int, per_domain: int | None = None,
                    algorithm: str = "ring", rings: int = 1) -> CollectiveCost:
    """α-β cost of ``operation`` on ``nbytes`` bytes for ``group`` GPUs placed ``per_domain`` to a domain
    (default: as many as fit, ``min(group, topo.gpus_per_domain)``), by ``algorithm`` (module table):

    ``"ring"`` (one ring, or ``rings`` rings on their own NICs, ``rings ≤ per_domain``), ``"hierarchical"``
    (all-reduce, all-gather, reduce-scatter: inside, across, inside), ``"direct"`` (all-to-all: every GPU sends
    each other GPU its M/g bytes at once). ``nbytes``: the all-reduce buffer, the all-gather output, the
    reduce-scatter input, the all-to-all input per GPU. Example: all-reduce of 1 GB on 16 H100s in 2 nodes: one
    ring 2·15/16·1e9 / 50e9 = 37.5 ms; hierarchical 2·7/8·1e9/450e9 + 2·(1/2)·1e9/8/50e9 = 3.89 + 2.5 = 6.39 ms.
    Raises DistlearnValueError for a bad operation, algorithm or placement."""
    if not isinstance(topo, Topology):
        raise DistlearnValueError("topo", "topo must be a Topology (make_topology(...)).",
                                  "topo 必须是 Topology 对象（用 make_topology(...) 构造）。")
    operation = check_choice("operation", operation, OPERATIONS)
    algorithm = check_choice("algorithm", algorithm, ALGORITHMS)
    nbytes = check_number("nbytes", nbytes, minimum=0)
    g = check_int("group", group, minimum=1)
    k = min(g, topo.gpus_per_domain) if per_domain is None else check_int(
        "per_domain", per_domain, minimum=1, maximum=min(g, topo.gpus_per_domain))
    if g % k:
        raise DistlearnValueError("per_domain", f"per_domain = {k} must divide group = {g} (equal parts per domain).",
                                  f"per_domain = {k} 必须整除 group = {g}（每个域放同样多的 GPU）。")
    r = check_int("rings", rings, minimum=1, maximum=k)
    d = g // k
    if (operation == "all_to_all") != (algorithm == "direct"):
        raise DistlearnValueError(
            "algorithm", "all_to_all takes algorithm 'direct'; the other operations take 'ring' or 'hierarchical'.",
            "all_to_all 只能用 algorithm 'direct'；其他操作用 'ring' 或 'hierarchical'。")
    return _collective_cost(topo, operation, nbytes, g, k, algorithm, r)


def _collective_cost(topo: Topology, operation: str, nbytes: float, g: int, k: int, algorithm: str,
                     r: int) -> CollectiveCost:
    """:func:`collective_cost` of checked arguments (``k`` = per_domain, ``r`` = rings)."""
    d = g // k
    levels: list[Level] = []
    if g == 1:
        pass
    elif operation == "all_to_all":
        inside = (k - 1) / g * nbytes
        across = (g - k) / g * nbytes
        alpha = topo.alpha_network if d > 1 else topo.alpha_intra
        t_in, t_out = inside / topo.intra_bw, across / topo.network_bw
        levels.append(Level("all_to_all inside", "intra", k, inside, (g - 1) * alpha + max(t_in, t_out)))
        if d > 1:   # the network part runs at the same time; its time is already in the max above
            levels.append(Level("all_to_all across", "network", d, across, 0.0))
    elif d == 1:
        levels.append(_level(topo, f"{operation} inside", "intra", operation, g, nbytes))
    elif algorithm == "ring":
        bw = min(r * topo.network_bw, topo.intra_bw)
        ring = _level(topo, f"{operation} ring across", "network", operation, g, nbytes, bw)
        # r rings share the data: the GPU at a domain boundary of one ring sends c·M/r through its NIC
        # r 个环分担数据：在某个环上处于域边界的 GPU 经网卡发送 c·M/r
        levels.append(Level(ring.name, "network", g, ring.nbytes / r, ring.seconds))
    elif operation == "all_reduce":
        levels += [_level(topo, "reduce_scatter inside", "intra", "reduce_scatter", k, nbytes),
                   _level(topo, "all_reduce across", "network", "all_reduce", d, nbytes / k),
                   _level(topo, "all_gather inside", "intra", "all_gather", k, nbytes)]
    elif operation == "all_gather":
        levels += [_level(topo, "all_gather across", "network", "all_gather", d, nbytes / k),
                   _level(topo, "all_gather inside", "intra", "all_gather", k, nbytes)]
    else:
        levels += [_level(topo, "reduce_scatter inside", "intra", "reduce_scatter", k, nbytes),
                   _level(topo, "reduce_scatter across", "network", "reduce_scatter", d, nbytes / k)]
    return CollectiveCost(operation, algorithm, g, k, nbytes, tuple(levels))


def per_domain(topo: Topology, size: int, stride: int) -> int:
    """GPUs of one group that share an NVLink domain: a group of ``size`` ranks spaced ``stride`` apart (ranks
    numbered domain by domain, the group starting on a domain boundary, as Megatron-LM orders tp, cp, ep, dp, pp).
    ``stride ≥ gpus_per_domain``: one per domain; else the largest divisor of ``size`` that is at most
    ``gpus_per_domain // stride`` (a group the domain size does not divide is counted as the even placement just
    below it). Example: EP 64 with stride 1 on domains of 8: 8 per domain, 8 domains; DP 64 with stride 8 (TP 8):
    1 per domain. Raises DistlearnValueError unless ``size`` and ``stride`` are integers ≥ 1
    (``per_domain.unchecked`` skips the checks)."""
    topo = check_record("topo", topo, Topology, "make_topology('h100-80gb')")
    return _per_domain(topo, check_int("size", size, minimum=1), check_int("stride", stride, minimum=1))


def _per_domain(topo: Topology, size: int, stride: int) -> int:
    """:func:`per_domain` of checked arguments (``per_domain.unchecked``)."""
    fit = min(size, topo.gpus_per_domain // stride)
    while fit > 1 and size % fit:
        fit -= 1
    return max(fit, 1)


per_domain.unchecked = _per_domain


def best_collective(topo: Topology, operation: str, nbytes: float, group: int,
                    per_domain: int | None = None) -> CollectiveCost:
    """The :func:`collective_cost` NCCL's choice comes to for this placement: the direct all-to-all; inside one
    domain the ring; across domains the faster of the ring on ``per_domain`` rings (NCCL runs one ring per NIC,
    its channels, Jeaugey 2019) and the hierarchical algorithm (NCCL's tree: a chain inside the node, a tree
    between nodes, which NCCL's tuner prefers at scale and for large messages across many nodes). Arguments and
    errors as :func:`collective_cost`'s. ``best_collective.unchecked(topo, operation, nbytes, group, per_domain)``
    skips the checks (for the planner, which checked its inputs once; ``per_domain`` then required)."""
    topo = check_record("topo", topo, Topology, "make_topology('h100-80gb')")
    operation = check_choice("operation", operation, OPERATIONS)
    nbytes = check_number("nbytes", nbytes, minimum=0)
    g = check_int("group", group, minimum=1)
    k = min(g, topo.gpus_per_domain) if per_domain is None else check_int(
        "per_domain", per_domain, minimum=1, maximum=min(g, topo.gpus_per_domain))
    if g % k:
        raise DistlearnValueError("per_domain", f"per_domain = {k} must divide group = {g} (equal parts per domain).",
                                  f"per_domain = {k} 必须整除 group = {g}（每个域放同样多的 GPU）。")
    return _best_collective(topo, operation, nbytes, g, k)


def _best_collective(topo: Topology, operation: str, nbytes: float, g: int, k: int) -> CollectiveCost:
    """:func:`best_collective` of checked arguments."""
    if operation == "all_to_all":
        return _collective_cost(topo, operation, nbytes, g, k, "direct", 1)
    ring = _collective_cost(topo, operation, nbytes, g, k, "ring", k)
    if g == k:
        return ring
    tree = _collective_cost(topo, operation, nbytes, g, k, "hierarchical", 1)
    return tree if tree.seconds < ring.seconds else ring


best_collective.unchecked = _best_collective


def dispatch_cost(topo: Topology, nbytes: float, copies: int, group: int, per_domain: int | None = None,
                  max_domains: int | None = None) -> CollectiveCost:
    """α-β cost of one expert-parallel all-to-all that sends each of a GPU's tokens to ``copies`` experts (top-k)
    spread evenly over the ``group`` GPUs (``per_domain`` to a domain, d = group/per_domain domains). ``nbytes``:
    bytes of the GPU's tokens, one copy each (tokens × h × bytes per value).

    - ``max_domains=None``: every copy is its own message, the direct all-to-all of :func:`collective_cost` on
      ``copies × nbytes`` bytes (k − 1 of g − 1 peers on NVLink);
    - ``max_domains=M`` (node-limited routing, DeepSeek-V3 §2.1.2: each token's experts on at most M = 4 nodes;
      §3.2.2: a token crosses InfiniBand once per target node, to the GPU of the same local index, which forwards
      it over NVLink to the GPUs of its experts there): per token, M' = min(M, d, ``copies``) target domains (a
      token with k experts reaches at most k domains) of which
      M'·(d − 1)/d are remote (the targets uniform over the d domains) cross the network once each, and each of
      the ``copies`` travels over NVLink once unless it lands on the GPU it arrived at (1 in ``per_domain``):
      network bytes M'·(d − 1)/d·``nbytes``, NVLink bytes copies·(k − 1)/k·``nbytes``, time
      (g − 1)·α + max(network bytes / network_bw, NVLink bytes / intra_bw) (the two overlap, §3.2.2). Two experts
      of one token on one GPU are counted as two copies (an upper bound).

    The combine all-to-all (and the backward ones) move the same bytes the other way. Raises DistlearnValueError
    for a bad ``nbytes``, ``copies`` or ``max_domains`` (integers ≥ 1) or placement.
    ``dispatch_cost.unchecked(topo, nbytes, copies, group, per_domain, max_domains)`` skips the checks."""
    topo = check_record("topo", topo, Topology, "make_topology('h100-80gb')")
    nbytes = check_number("nbytes", nbytes, minimum=0)
    copies = check_int("copies", copies, minimum=1)
    m = None if max_domains is None else check_int("max_domains", max_domains, minimum=1)
    g = check_int("group", group, minimum=1)
    k = min(g, topo.gpus_per_domain) if per_domain is None else check_int(
        "per_domain", per_domain, minimum=1, maximum=min(g, topo.gpus_per_domain))
    if g % k:
        raise DistlearnValueError("per_domain", f"per_domain = {k} must divide group = {g} (equal parts per domain).",
                                  f"per_domain = {k} 必须整除 group = {g}（每个域放同样多的 GPU）。")
    return _dispatch_cost(topo, nbytes, copies, g, k, m)


def _dispatch_cost(topo: Topology, nbytes: float, copies: int, g: int, k: int, m: int | None) -> CollectiveCost:
    """:func:`dispatch_cost` of checked arguments."""
    if m is None:
        return _collective_cost(topo, "all_to_all", copies * nbytes, g, k, "direct", 1)
    d = g // k
    if g == 1:
        return CollectiveCost("all_to_all", "node-limited", g, k, nbytes, ())
    reach = min(m, d, copies)  # target domains per token: the limit, the domains there are, its experts
    across = reach * (d - 1) / d * nbytes
    inside = copies * (k - 1) / k * nbytes
    alpha = topo.alpha_network if d > 1 else topo.alpha_intra
    seconds = (g - 1) * alpha + max(inside / topo.intra_bw, across / topo.network_bw)
    levels = [Level("dispatch inside (NVLink forwarding)", "intra", k, inside, seconds)]
    if d > 1:   # runs at the same time as the NVLink part: its time is in the max above
        levels.append(Level(f"dispatch across (at most {reach} domains per token)", "network", d, across, 0.0))
    return CollectiveCost("all_to_all", "node-limited", g, k, nbytes, tuple(levels))


dispatch_cost.unchecked = _dispatch_cost


def group_placement(topo: Topology, ranks) -> tuple[int, int]:
    """``(domains, per_domain)`` of a group of global ``ranks``: how many NVLink domains it touches and how many
    of its GPUs sit in each. Raises DistlearnValueError when the ranks are not distinct non-negative integers or the
    domains hold unequal numbers of them."""
    topo = check_record("topo", topo, Topology, "make_topology('h100-80gb')")
    if not isinstance(ranks, (list, tuple, range)) or not ranks:
        raise DistlearnValueError("ranks", "ranks must be a non-empty list of ranks.",
                                  "ranks 必须是非空的 rank 列表。")
    rs = [check_int("ranks", r, minimum=0) for r in ranks]
    if len(set(rs)) != len(rs):
        raise DistlearnValueError("ranks", f"ranks must be distinct; got {rs}.", f"ranks 不能重复；收到 {rs}。")
    counts: dict[int, int] = {}
    for r in rs:
        counts[topo.domain_of(r)] = counts.get(topo.domain_of(r), 0) + 1
    if len(set(counts.values())) != 1:
        raise DistlearnValueError("ranks", f"the group's GPUs must be spread evenly over domains; got {counts}.",
                                  f"组内 GPU 必须在各域间均匀分布；实际为 {counts}。")
    return len(counts), next(iter(counts.values()))


# ---------------------------------------------------------------------------------------------------- placement
PARALLELISMS = ("tp", "cp", "ep", "dp", "pp")


@dataclass(frozen=True)
class PlacementRow:
    """What one parallelism costs per training step on a :class:`Topology` (:func:`placement`).

    ``name`` (``"tp"`` …), ``size`` (GPUs in its group), ``stride`` (rank distance between group members),
    ``domains`` / ``per_domain`` (how the group of rank 0 sits), ``operation`` (the collective), ``calls`` (per
    step), ``nbytes`` (bytes per call, as :func:`collective_cost` reads them), ``seconds`` (per step, as placed:
    the better of ``rings = per_domain`` rings and the hierarchical algorithm when it spans domains),
    ``seconds_inside`` (per step were the same group inside one domain; ``None`` when it does not fit in one),
    ``slowdown`` (seconds / seconds_inside, or ``None``)."""

    name: str
    size: int
    stride: int
    domains: int
    per_domain: int
    operation: str
    calls: int
    nbytes: float
    seconds: float
    seconds_inside: float | None

    @property
    def inside(self) -> bool:
        return self.domains == 1

    @property
    def slowdown(self) -> float | None:
        return None if not self.seconds_inside else self.seconds / self.seconds_inside


def _best(topo: Topology, operation: str, nbytes: float, g: int, k: int) -> float:
    """Seconds of the better algorithm NCCL could pick for this placement (:func:`best_collective`)."""
    return best_collective(topo, operation, nbytes, g, k).seconds


def placement(topo: Topology, model, *, tp: int = 1, cp: int = 1, ep: int = 1, dp: int = 1, pp: int = 1,
              order: str = "tp-cp-ep-dp-pp", seq_len: int = 8192, micro_batch_size: int = 1,
              num_microbatches: int = 8, bytes_per_value: int = 2) -> list[PlacementRow]:
    """Where each parallelism of a layout lands on ``topo`` and what its communication costs per step.

    ``order``: the dimensions from innermost (consecutive ranks) to outermost, Megatron-Core's default
    ``"tp-cp-ep-dp-pp"``; a dimension's stride is the product of the sizes before it. ``model``: a
    :class:`distlearn.core.models.ModelConfig` (or preset name). Per step and per GPU, in bf16 (``bytes_per_value``
    = 2), for ``m = num_microbatches`` micro-batches of ``b = micro_batch_size`` sequences of ``s = seq_len`` tokens
    (s/cp per CP rank), L/pp layers per stage, hidden size h (Megatron-LM without sequence parallelism, Shoeybi et
    al. 2019 §3; Korthikanti et al. 2022):

    - **tp**: 4 all-reduces per layer per micro-batch (2 forward, 2 backward) of b·(s/cp)·h values;
    - **cp**: per layer per micro-batch, an all-gather of K and V (2·b·s·h_kv/tp values, the output) forward and a
      reduce-scatter of their gradients backward (counted as 2 all-gathers of that size: the same cost);
    - **ep** (MoE models only): 4 all-to-alls per MoE layer per micro-batch (dispatch and combine, forward and
      backward) of b·(s/cp)·h·top_k values;
    - **dp**: one all-reduce of the bf16 gradients of this GPU's parameters, P/(tp·pp), over the ranks with the same
      tp and pp coordinates (dp·cp·ep of them; experts reduced like the rest, a simplification);
    - **pp**: 2 sends per micro-batch (activation forward, its gradient backward) of b·(s/cp)·h values between
      neighbouring stages, at the slower link of rank 0's pipeline.

    The group of rank 0 stands for all groups. Raises DistlearnValueError for a bad layout, order or a group that
    sits unevenly on the domains (e.g. stride 3 on domains of 8)."""
    from distlearn.core.models import ModelConfig, get_preset
    if not isinstance(topo, Topology):
        raise DistlearnValueError("topo", "topo must be a Topology (make_topology(...)).",
                                  "topo 必须是 Topology 对象（用 make_topology(...) 构造）。")
    m = get_preset(model) if isinstance(model, str) else model
    if not isinstance(m, ModelConfig):
        raise DistlearnValueError("model", "model must be a ModelConfig or a preset name.",
                                  "model 必须是 ModelConfig 或预设名称。")
    sizes = {"tp": check_int("tp", tp, minimum=1, maximum=4096), "cp": check_int("cp", cp, minimum=1, maximum=4096),
             "ep": check_int("ep", ep, minimum=1, maximum=4096), "dp": check_int("dp", dp, minimum=1, maximum=1 << 20),
             "pp": check_int("pp", pp, minimum=1, maximum=4096)}
    names = tuple(order.split("-")) if isinstance(order, str) else ()
    if sorted(names) != sorted(PARALLELISMS):
        raise DistlearnValueError("order", f"order must name tp, cp, ep, dp, pp once each, joined by '-'; got "
                                           f"{order!r}.",
                                  f"order 必须把 tp、cp、ep、dp、pp 各写一次，用 '-' 连接；收到 {order!r}。")
    s = check_int("seq_len", seq_len, minimum=1, maximum=1 << 24)
    b = check_int("micro_batch_size", micro_batch_size, minimum=1, maximum=1 << 16)
    mb = check_int("num_microbatches", num_microbatches, minimum=1, maximum=1 << 16)
    v = check_int("bytes_per_value", bytes_per_value, minimum=1, maximum=8)
    if sizes["ep"] > 1 and not m.is_moe:
        raise DistlearnValueError("ep", f"ep = {ep} needs a mixture-of-experts model; {m.name} is dense.",
                                  f"ep = {ep} 需要混合专家 (MoE) 模型；{m.name} 是稠密模型。")
    if m.num_layers % sizes["pp"] or s % sizes["cp"] or m.kv_heads % sizes["tp"] and m.num_heads % sizes["tp"]:
        raise DistlearnValueError("tp", f"pp must divide the {m.num_layers} layers, cp the sequence ({s}), tp the "
                                        f"{m.num_heads} heads.",
                                  f"pp 必须整除层数 {m.num_layers}，cp 必须整除序列长度 {s}，tp 必须整除头数 "
                                  f"{m.num_heads}。")
    world = 1
    stride = {}
    for n in names:
        stride[n] = world
        world *= sizes[n]
    h, layers = m.hidden_size, m.num_layers // sizes["pp"]
    moe_layers = sum(m.is_moe_layer(i) for i in range(m.num_layers)) // sizes["pp"] if m.is_moe else 0
    tokens = b * s // sizes["cp"]
    params = sum(m.layer_parameters(i) for i in range(m.num_layers)) + m.embedding_parameters() \
        + m.lm_head_parameters()
    kv_dim = m.kv_heads * m.head_dim
    work = {   # name → (operation, calls per step, bytes per call) / 名称 → (操作, 每步调用次数, 每次字节数)
        "tp": ("all_reduce", 4 * layers * mb, tokens * h * v),
        "cp": ("all_gather", 2 * layers * mb, 2 * b * s * kv_dim / sizes["tp"] * v),
        "ep": ("all_to_all", 4 * moe_layers * mb, tokens * h * max(m.experts_per_token, 1) * v),
        "dp": ("all_reduce", 1, params / (sizes["tp"] * sizes["pp"]) * v),
        "pp": ("send", 2 * mb, tokens * h * v),
    }
    rows = []
    for n in names:
        size, op, (_, calls, nbytes) = sizes[n], work[n][0], work[n]
        if n == "dp":   # the gradient group: same tp and pp coordinates / 梯度组：tp 与 pp 坐标相同的 rank
            members = sorted({r for r in range(world) if all((r // stride[x]) % sizes[x] == 0 for x in ("tp", "pp"))})
            size = len(members)
        else:
            members = [i * stride[n] for i in range(size)]
        domains, k = group_placement(topo, members)
        if size == 1:
            seconds, inside = 0.0, 0.0
        elif n == "pp":
            across = any(topo.domain_of(a) != topo.domain_of(c) for a, c in zip(members, members[1:]))
            bw = topo.network_bw if across else topo.intra_bw
            alpha = topo.alpha_network if across else topo.alpha_intra
            seconds = calls * (alpha + nbytes / bw)
            inside = calls * (topo.alpha_intra + nbytes / topo.intra_bw)
        else:
            seconds = calls * _best(topo, op, nbytes, size, k)
            inside = calls * _best(topo, op, nbytes, size, size) if size <= topo.gpus_per_domain else None
        rows.append(PlacementRow(n, size, stride[n], domains, k, op, calls, nbytes, seconds, inside))
    return rows

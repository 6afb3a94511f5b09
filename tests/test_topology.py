"""Issue 36, the hardware and topology: the new GPU presets (B200, GB200 NVL72, MI300X), the topology model's α-β
times against closed forms and hand computations, the hierarchical all-reduce (simulated and on real gloo
processes), placement of each parallelism, and the HSDP lab."""
from __future__ import annotations

import pytest

from distlearn.core.hardware import GPUS, get_gpu, make_cluster, peak_flops
from distlearn.core.validate import DistlearnValueError


# ---------------------------------------------------------------- 1. presets
@pytest.mark.parametrize("name, memory, bf16, fp8, tf32, nvlink, network, hbm, node", [
    # datasheet figures, per GPU, dense (sparse / 2), per direction (bidirectional / 2), 400 Gb/s = 50 GB/s
    ("b200", 1440e9 / 8, 36e15 / 8 / 2, 72e15 / 8 / 2, 18e15 / 8 / 2, 1.8e12 / 2, 50e9, 64e12 / 8, 8),
    ("gb200-nvl72", 186e9, 360e15 / 72 / 2, 720e15 / 72 / 2, 180e15 / 72 / 2, 1.8e12 / 2, 50e9, 576e12 / 72, 72),
    # (130 TB/s of NVLink in all is 72 × 1.8 TB/s = 129.6 rounded)
    ("mi300x", 192e9, 1307.4e12, 5229.8e12 / 2, 1307.4e12 / 2, 7 * 128e9 / 2, 50e9, 5.3e12, 8),
])
def test_new_presets_carry_their_datasheet_figures(name, memory, bf16, fp8, tf32, nvlink, network, hbm, node):
    g = get_gpu(name)
    assert g.memory_bytes == pytest.approx(memory, rel=2e-3)   # 13.4 TB / 72 = 186.1 GB
    assert peak_flops(g, "bf16") == pytest.approx(bf16)
    assert peak_flops(g, "fp8") == pytest.approx(fp8)
    assert peak_flops(g, "fp32") == pytest.approx(tf32)
    assert g.nvlink_bw == pytest.approx(nvlink) and g.network_bw == pytest.approx(network)
    assert g.hbm_bw == pytest.approx(hbm) and g.gpus_per_node == node
    assert "datasheet" in g.source


def test_uncertain_figures_say_so_and_the_docstring_table_lists_every_preset():
    import distlearn.core.hardware as hw
    assert "uncertain" in GPUS["gb200-nvl72"].source and "uncertain" in GPUS["mi300x"].source
    for label in ("B200", "GB200 NVL72", "MI300X"):
        assert any(line.startswith(label + " ") for line in hw.__doc__.splitlines())


def test_a_gb200_cluster_is_whole_72_gpu_domains():
    assert make_cluster("gb200-nvl72", 144).num_nodes == 2
    assert make_cluster("gb200-nvl72", 64).gpus_per_node == 64
    with pytest.raises(DistlearnValueError) as e:
        make_cluster("gb200-nvl72", 256)
    assert e.value.param == "num_gpus" and "216" in str(e.value) and "288" in str(e.value)

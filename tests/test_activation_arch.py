"""Architecture-aware activation memory (issue 13, item 7): the per-layer formula for GPT and Llama blocks, with
attention scores materialised or a flash kernel, equals what a real PyTorch block saves for backward, to the byte
(plus named small terms), and the Korthikanti GPT formula is *not* what a Llama block keeps."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F

from distlearn.activation_memory import formulas as A
from distlearn.activation_memory.measure import FusedRMSNorm, FusedSwiGLU, extra_terms, measure_block
from distlearn.memory.formulas import activation_bytes_per_layer
from distlearn.core.models import PRESETS
from distlearn.core.validate import DistlearnValueError

LLAMA = [(32, 2, 64, 4, 2, 96), (24, 1, 96, 6, 6, 160), (16, 3, 128, 8, 1, 352)]   # s, b, h, a, kv, f


def _check(arch, attention, recompute, dtype, shape, **extra):
    s, b, h, a, kv, f = shape
    p = 2 if dtype == "bf16" else 4
    lay = dict(arch=arch, attention=attention)
    if arch == "llama":
        lay.update(num_kv_heads=kv, ffn_hidden_size=f, swiglu=extra.get("swiglu", "unfused"))
    kw = dict(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a)
    measured = measure_block(**kw, dtype=dtype, recompute=recompute, norm_impl=extra.get("norm_impl", "fused"),
                             **lay)
    formula = A.layer_activation_bytes(**kw, recompute=recompute, activation_bytes=p, **lay)
    named = extra_terms(seq_len=s, micro_batch_size=b, dtype=dtype, recompute=recompute, arch=arch,
                        attention=attention, norm_impl=extra.get("norm_impl", "fused"), hidden_size=h)
    return measured, formula, named


@pytest.mark.parametrize("shape", LLAMA)
@pytest.mark.parametrize("attention", ["flash", "materialised"])
@pytest.mark.parametrize("recompute", ["none", "selective", "full", "norm-act"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("swiglu", ["unfused", "fused"])
def test_llama_block_measured_equals_formula_to_the_byte(shape, attention, recompute, dtype, swiglu):
    measured, formula, named = _check("llama", attention, recompute, dtype, shape, swiglu=swiglu)
    assert measured.total == formula + named["total"]
    assert named["total"] <= 0.02 * formula + shape[0] ** 2      # the named terms are small (rstd, causal mask)


@pytest.mark.parametrize("recompute", ["none", "selective", "full", "norm-act"])
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_gpt_block_with_flash_attention_measured_equals_formula(recompute, dtype):
    measured, formula, named = _check("gpt", "flash", recompute, dtype, (64, 2, 64, 4, 4, 256))
    assert measured.total == formula + named["total"]
    if recompute == "none":   # Korthikanti's 34 sbh stay, the 5as²b scores become a fp32 log-sum-exp
        s, b, h, a = 64, 2, 64, 4
        p = 2 if dtype == "bf16" else 4
        assert formula == (16 * p + 2) * s * b * h + 4 * a * s * b


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_cpu_rms_norm_composite_is_a_named_term(dtype):
    """torch 2.13's CPU F.rms_norm keeps two fp32 copies of the input instead of the input: named, not hidden."""
    measured, formula, named = _check("llama", "flash", "none", dtype, LLAMA[0], norm_impl="torch")
    assert measured.total == formula + named["total"]
    s, b, h = LLAMA[0][:3]
    assert named["cpu_rms_norm_composite"] == 2 * (8 - (2 if dtype == "bf16" else 4)) * s * b * h


def test_korthikanti_formula_is_not_what_a_llama_block_keeps():
    """The old behaviour (GPT formula on a Llama shape) fails against the measurement, both attentions."""
    s, b, h, a, kv, f = LLAMA[0]
    kw = dict(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a)
    for attention in ("flash", "materialised"):
        m = measure_block(**kw, arch="llama", num_kv_heads=kv, ffn_hidden_size=f, attention=attention)
        named = extra_terms(seq_len=s, micro_batch_size=b, arch="llama", attention=attention)["total"]
        assert m.total - named != activation_bytes_per_layer(**kw)
    # and a wrong Llama count (ignoring GQA: K and V at full width with flash) is caught too
    m = measure_block(**kw, arch="llama", num_kv_heads=kv, ffn_hidden_size=f, attention="flash")
    wrong = A.layer_activation_bytes(**kw, arch="llama", num_kv_heads=a, ffn_hidden_size=f, attention="flash")
    assert m.total - extra_terms(seq_len=s, micro_batch_size=b, arch="llama", attention="flash")["total"] != wrong


def test_fused_functions_give_pytorch_gradients():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16, dtype=torch.float64, requires_grad=True)
    w = torch.randn(16, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 5, 16, dtype=torch.float64)
    ref = torch.autograd.grad(F.rms_norm(x, (16,), w, 1e-5), (x, w), g)
    got = torch.autograd.grad(FusedRMSNorm.apply(x, w, 1e-5), (x, w), g)
    assert all(torch.allclose(r, o, atol=1e-12) for r, o in zip(ref, got))
    y = torch.randn(4, 7, 2 * 9, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 7, 9, dtype=torch.float64)
    gate, up = y.chunk(2, dim=-1)
    ref = torch.autograd.grad(F.silu(gate) * up, y, g)[0]
    assert torch.allclose(torch.autograd.grad(FusedSwiGLU.apply(y), y, g)[0], ref, atol=1e-12)


def test_gpt_defaults_are_korthikanti_table_2():
    for s, b, h, a, t, sp, rc in itertools.product([128, 2048], [1, 4], [768, 12288], [12, 96], [1, 4], [False, True],
                                                   ["none", "selective", "full"]):
        kw = dict(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, tp=t, sequence_parallel=sp,
                  recompute=rc)
        assert math.isclose(A.layer_activation_bytes(**kw), activation_bytes_per_layer(**kw), rel_tol=1e-12)
    assert A.config_layer_bytes(PRESETS["gpt3-175b"], seq_len=2048, micro_batch_size=1) / 2**20 == 2736


def test_llama3_8b_closed_forms():
    c = PRESETS["llama3-8b"]
    s, sbh = 8192, 8192 * 4096
    flash = A.config_layer_bytes(c, seq_len=s, micro_batch_size=1)
    assert A.default_attention(c) == "flash" and A.default_attention(PRESETS["gpt3-175b"]) == "materialised"
    # 2·sbh·(6 + 2·8/32 + 4·14336/4096) + 4·a·s·b = 41 sbh + 4·32·8192
    assert flash == 41 * sbh + 4 * 32 * s
    mat = A.config_layer_bytes(c, seq_len=s, micro_batch_size=1, attention="materialised")
    assert mat == 2 * sbh * (8 + 4 * 3.5) + 2 * 32 * s * s          # K, V repeated; probabilities kept once
    kort = activation_bytes_per_layer(seq_len=s, micro_batch_size=1, hidden_size=4096, num_heads=32)
    assert kort / flash > 8.5                                            # the old number, 8.6× too high
    fused = A.config_layer_bytes(c, seq_len=s, micro_batch_size=1, swiglu="fused")
    assert flash - fused == 2 * s * 14336                                # fused SwiGLU keeps f·sb less


def test_tensor_and_sequence_parallel_split_for_llama():
    c = PRESETS["llama3-70b"]
    kw = dict(seq_len=4096, micro_batch_size=1)
    base = A.layer_activation_table(**kw, **A.layer_shape(c), attention="flash")
    t8 = A.layer_activation_table(**kw, **A.layer_shape(c), attention="flash", tp=8)
    t8sp = A.layer_activation_table(**kw, **A.layer_shape(c), attention="flash", tp=8, sequence_parallel=True)
    for x, y, z in zip(base, t8, t8sp):
        assert x.name == y.name == z.name and x.split == y.split
        assert y.nbytes == (x.nbytes / 8 if x.split == "tp" else x.nbytes)
        assert z.nbytes == pytest.approx(x.nbytes / 8)
        assert x.source
    with pytest.raises(DistlearnValueError):   # 8 kv heads cannot be split over 16 ranks
        A.layer_activation_bytes(**kw, **A.layer_shape(c), tp=16)


def test_model_activation_bytes_uses_the_architecture():
    c = PRESETS["llama2-7b"]
    act = A.model_activation_bytes(c, seq_len=4096, micro_batch_size=1)
    assert act.embedding == 0                                 # Llama has no embedding dropout
    per = A.config_layer_bytes(c, seq_len=4096, micro_batch_size=1)
    assert act.layers == 32 * per
    old = 32 * activation_bytes_per_layer(seq_len=4096, micro_batch_size=1, hidden_size=4096, num_heads=32)
    assert act.layers < old / 4


# ---------------------------------------------------------------- norm-act: output-discarding recomputation
@pytest.mark.parametrize("arch,kw", [("llama", dict(swiglu="unfused")), ("llama", dict(swiglu="fused")),
                                     ("gpt", dict(attention="materialised")), ("gpt", dict(attention="flash"))])
def test_norm_act_gradients_equal_storing_every_tensor_to_the_bit(arch, kw):
    """DiscardOutput frees the norms' and the activation's outputs and recomputes them in backward: the same
    computation on the same inputs, so every gradient is bitwise the one of the block that stores them."""
    from distlearn.activation_memory.measure import KorthikantiBlock, LlamaBlock

    grads = {}
    for rc in ("none", "norm-act"):
        torch.manual_seed(0)
        block = (LlamaBlock(32, 4, 2, 48, recompute=rc, max_seq_len=16, **kw) if arch == "llama"
                 else KorthikantiBlock(32, 4, dropout=0.0, recompute=rc, **kw))
        x = torch.randn(2, 16, 32, requires_grad=True)
        block(x).square().sum().backward()
        grads[rc] = [x.grad] + [p.grad for p in block.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(grads["none"], grads["norm-act"]))


def test_a_broken_discard_is_caught(monkeypatch):
    """Both checks can fail: a DiscardOutput that never frees the output keeps more bytes than the formula says,
    and one that does not refill the freed storage breaks the backward."""
    from distlearn.activation_memory import measure as am

    kw = dict(seq_len=16, micro_batch_size=2, hidden_size=32, num_heads=4, arch="llama", num_kv_heads=2,
              ffn_hidden_size=48, attention="flash", recompute="norm-act")
    formula = A.layer_activation_bytes(seq_len=16, micro_batch_size=2, hidden_size=32, num_heads=4, arch="llama",
                                       num_kv_heads=2, ffn_hidden_size=48, attention="flash", recompute="norm-act")
    assert measure_block(**kw).total == formula
    real_discard = am.DiscardOutput.discard
    monkeypatch.setattr(am.DiscardOutput, "discard", lambda self, *outs: None)
    assert measure_block(**kw).total > formula
    monkeypatch.setattr(am.DiscardOutput, "discard", real_discard)

    def no_refill(self):  # recomputes, but never copies the result back into the freed storage
        if not self.done:
            self.done, ctx = True, self.ctx
            ctx.detached = tuple(t.detach().requires_grad_(t.requires_grad) for t in ctx.saved_tensors)
            with torch.enable_grad():
                ctx.outputs = self.fn(*ctx.detached)

    monkeypatch.setattr(am.DiscardOutput, "recompute", no_refill)
    with pytest.raises(RuntimeError):   # the next layer's backward reads a storage of 0 bytes
        measure_block(**kw)


def test_norm_act_on_a_llama3_405b_shaped_block():
    """Chapter 14: a layer shaped like Llama 3 405B's (k/a = 1/16, f = 3.25 h, flash, fused SwiGLU) keeps 15.875
    units of s·b·h 16-bit values with every tensor stored and 10.625 with norm-act, measured (+ the fp32
    log-sum-exp, 1/8 unit here, and the RMSNorms' 1/rms rows when they are stored)."""
    s, b, h, a = 64, 1, 256, 16
    unit = 2 * s * b * h
    kw = dict(seq_len=s, micro_batch_size=b, hidden_size=h, num_heads=a, arch="llama", num_kv_heads=1,
              ffn_hidden_size=int(3.25 * h), attention="flash", swiglu="fused")
    lse = 4 * a * s * b
    for rc, units in (("none", 15.875), ("norm-act", 10.625)):
        named = extra_terms(seq_len=s, micro_batch_size=b, recompute=rc, arch="llama", attention="flash")["total"]
        assert (measure_block(**kw, recompute=rc).total - named - lse) / unit == units

"""Faithful re-implementations of the seed documents' code, mistakes included, to show beside the correct version.

The course grew out of two seed documents (``seed-a-scaling-simulations``, ``seed-b-fsdp-notes``). A chapter's
"common misconception / 常见误区" box runs the seed's idea from here next to the corrected ``distlearn`` code, and a
test pins the difference. **Nothing here is a correct answer**: every ``seed_*`` function reproduces the seed's
arithmetic exactly (same inputs, same outputs), and its docstring names what is wrong and where the fix lives.

Organized by seed snippet; a chapter that needs another seed function adds it under its snippet's heading.
Torch is imported lazily, so importing this module is cheap; the seed's modules are ordinary classes of
:mod:`distlearn.seeds.models`, re-exported here on first use.
"""
from __future__ import annotations
from distlearn.core.guard import read_only

# ============================================================================ seed A: scaling simulations
# ---------------------------------------------------------------- seed A · memory_calculator  (chapter 01)


def seed_memory_calculator(params_billions, precision_bytes=2, optimizer="adam", num_gpus=1, sharding="none",
                           sequence_length=2048, batch_size_per_gpu=1, hidden_dim=None, num_layers=None) -> dict:
    """Seed A's ``memory_calculator``, unchanged. Sizes in GB (1e9 bytes).

    What is wrong (course-outline mistakes 2 and 3), corrected by :func:`distlearn.memory.formulas.model_state_bytes` and
    :func:`distlearn.activation_memory.formulas.config_layer_bytes`:

    - Adam state is 8 B/param with 16-bit weights: the fp32 **master weights** (4 B/param) are missing, so
      mixed-precision model states come out 12 B/param instead of 16;
    - without ``hidden_dim``/``num_layers`` activations are ``0.5 × params × bytes``: an invented constant
      (activations depend on sequence length, batch and width, not on the parameter count);
    - with them, activations are ``4·s·b·h·bytes`` per layer: a Llama 2 7B layer keeps 37.5·s·b·h bytes with flash
      attention (4.7× more; more with the attention scores stored), a GPT layer ``s·b·h·(34 + 5·a·s/h)``
      (Korthikanti et al. 2022);
    - ZeRO/FSDP divide by ``num_gpus``; they divide by the data-parallel degree, which is smaller than the number
      of GPUs whenever tensor or pipeline parallelism is used;
    - activations are never sharded, yet ``total_across_gpus_gb`` multiplies everything by ``num_gpus``;
    - ``fits_on_80gb`` compares GB (1e9) with an "80 GB" card and ignores the CUDA context, the allocator's cache
      and temporary buffers.
    """
    params = params_billions * 1e9
    weight_memory = params * precision_bytes
    if optimizer == "adam":
        optimizer_memory = params * 4 * 2
    elif optimizer == "sgd":
        optimizer_memory = params * 4
    else:
        optimizer_memory = 0
    gradient_memory = params * precision_bytes
    if hidden_dim and num_layers:
        activation_per_layer = sequence_length * batch_size_per_gpu * hidden_dim * precision_bytes * 4
        activation_memory = activation_per_layer * num_layers
    else:
        activation_memory = params * precision_bytes * 0.5
    if sharding == "fsdp" or sharding == "zero3":
        weight_memory /= num_gpus
        optimizer_memory /= num_gpus
        gradient_memory /= num_gpus
    elif sharding == "zero2":
        optimizer_memory /= num_gpus
        gradient_memory /= num_gpus
    elif sharding == "zero1":
        optimizer_memory /= num_gpus
    per_gpu_total = weight_memory + optimizer_memory + gradient_memory + activation_memory
    return {
        "params_billions": params_billions,
        "weights_gb": weight_memory / 1e9,
        "optimizer_gb": optimizer_memory / 1e9,
        "gradients_gb": gradient_memory / 1e9,
        "activations_gb": activation_memory / 1e9,
        "per_gpu_total_gb": per_gpu_total / 1e9,
        "total_across_gpus_gb": per_gpu_total * num_gpus / 1e9,
        "fits_on_80gb": per_gpu_total / 1e9 <= 80,
        "num_gpus": num_gpus,
        "sharding": sharding,
    }


# ---------------------------------------------------------------- seed A · mixed_precision_comparison  (chapter 01)


def seed_mixed_precision_comparison(params_billions) -> dict:
    """Seed A's ``mixed_precision_comparison``, unchanged. Sizes in GB (1e9 bytes).

    What is wrong (course-outline mistake 1): its "mixed bf16" recipe keeps 2 B weights + 2 B gradients + 8 B Adam
    moments = 12 B/param and claims 25 % savings over fp32 (16 B/param). Mixed-precision Adam keeps an fp32
    **master copy** of the weights (4 B/param), because bf16 cannot represent small updates ``lr·m/√v`` added to
    a weight; with it, model states are 2 + 2 + 12 = 16 B/param (ZeRO paper), or 18 B/param when gradients are
    accumulated in fp32 (Megatron-LM's ``main_grad``). The same function's ``fp16_with_master_gb``
    (2 + 4 + 8 + 2 = 16 B) is right and contradicts its own "mixed" number. Mixed precision saves activation memory and time, not
    model-state memory. Correct: ``distlearn.memory.formulas.bytes_per_param("mixed")``.
    """
    params = params_billions * 1e9
    fp32_weights = params * 4
    fp32_optimizer = params * 4 * 2
    fp32_gradients = params * 4
    fp32_total = fp32_weights + fp32_optimizer + fp32_gradients
    fp16_weights = params * 2
    fp16_master = params * 4
    fp16_optimizer = params * 4 * 2
    fp16_gradients = params * 2
    fp16_total = fp16_weights + fp16_master + fp16_optimizer + fp16_gradients
    mixed_weights = params * 2
    mixed_optimizer = params * 4 * 2
    mixed_gradients = params * 2
    mixed_total = mixed_weights + mixed_optimizer + mixed_gradients
    return {
        "fp32_total_gb": fp32_total / 1e9,
        "fp16_with_master_gb": fp16_total / 1e9,
        "mixed_bf16_gb": mixed_total / 1e9,
        "savings_vs_fp32": 1 - mixed_total / fp32_total,
    }


# ============================================================================ seed B: FSDP notes
# ---------------------------------------------------------------- seed B · snippet 1: calc_memory  (chapters 01, 06)


def seed_calc_memory(params_billion, n_gpus, mode="ddp"):
    """Seed B snippet 1 ``calc_memory``, unchanged: fp32 Adam (4 + 4 + 8 B/param) in GB, FSDP dividing by ``n_gpus``.

    The 16 B/param is right for fp32 Adam. Wrong: FSDP shards over the data-parallel degree, not the GPU count
    (mistake 3), and any other ``mode`` silently returns None. Correct: ``model_state_bytes(..., zero_stage=3,
    dp=...)``.
    """
    params = params_billion * 1e9
    param_mem = params * 4 / 1e9
    grad_mem = params * 4 / 1e9
    optim_mem = params * 8 / 1e9
    if mode == "ddp":
        total = param_mem + grad_mem + optim_mem
    elif mode == "fsdp":
        total = (param_mem + grad_mem + optim_mem) / n_gpus
    else:  # the seed leaves ``total`` unbound here (UnboundLocalError); we make that explicit
        raise UnboundLocalError("seed calc_memory: unknown mode leaves `total` unassigned")
    return total


# ---------------------------------------------------------------- seed B · snippet 4: TransformerDecoderLayer  (ch 01)


def seed_decoder_layer(d_model: int = 1024, nhead: int = 8, device: str = "meta"):
    """The seed's building block: ``nn.TransformerDecoderLayer(d_model, nhead=8)`` (defaults: dim_feedforward 2048).

    What is wrong (mistake 11): a decoder layer of the encoder–decoder Transformer has a *cross-attention* to an
    encoder output, so ``forward(tgt, memory)`` requires ``memory`` (calling it with one tensor raises TypeError)
    and it carries a cross-attention's parameters (4·d² + 4·d) and a third LayerNorm (2·d) that a decoder-only
    LM does not have. A decoder-only (GPT/Llama) block is causally masked *self*-attention + MLP: see
    :func:`decoder_only_layer` or ``distlearn.core.models.Block``.
    """
    import torch
    from torch import nn

    with torch.device(device):
        return nn.TransformerDecoderLayer(d_model, nhead=nhead)


def decoder_only_layer(d_model: int = 1024, nhead: int = 8, dim_feedforward: int = 2048, device: str = "meta"):
    """What the seed meant: a pre-norm, causally masked self-attention block from PyTorch's own modules.

    ``nn.TransformerEncoderLayer`` is exactly "self-attention + MLP"; it becomes a decoder-only block when called
    with a causal mask: ``layer(x, src_mask=nn.Transformer.generate_square_subsequent_mask(s), is_causal=True)``.
    Same shapes as the seed's decoder layer minus cross-attention and one norm.
    """
    import torch
    from torch import nn

    with torch.device(device):
        return nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, batch_first=True, norm_first=True)


# ---------------------------------------------------------------- seed B · snippet 8: LargeLM, analyze_memory  (ch 01)


def large_lm_parameters(vocab_size: int, d_model: int, n_layers: int, dim_ff: int) -> int:
    """Closed-form parameter count of the seed's ``LargeLM`` (independent of torch).

    Embedding V·d; per block: MultiheadAttention 4·d² + 4·d (in-projection 3·d² + 3·d, out-projection d² + d),
    MLP 2·d·f + f + d, two LayerNorms 4·d; LM head with bias d·V + V. Seed sizes → 6,853,804,880.
    """
    from distlearn.core.validate import check_int

    v, d = check_int("vocab_size", vocab_size), check_int("d_model", d_model)
    n, f = check_int("n_layers", n_layers), check_int("dim_ff", dim_ff)
    block = (4 * d * d + 4 * d) + (2 * d * f + f + d) + 4 * d
    return v * d + n * block + (d * v + v)


SEED_LARGE_LM = read_only(dict(vocab_size=50000, d_model=4096, n_layers=32, nhead=32, dim_ff=16384))


# The seed's modules (SeedTransformerBlock, TransformerBlock, LargeLM) live in distlearn.seeds.models, which imports
# torch; they are re-exported here lazily so that importing this module stays cheap.
SEED_MODULES = ("SeedTransformerBlock", "TransformerBlock", "LargeLM")
__all__ = ["seed_memory_calculator", "seed_mixed_precision_comparison", "seed_calc_memory", "seed_decoder_layer",
           "decoder_only_layer", "large_lm_parameters", "SEED_LARGE_LM", "build_large_lm", "transformer_blocks",
           "zero_residual_branches", "seed_analyze_memory", *SEED_MODULES]


def __getattr__(name):
    if name in SEED_MODULES:
        from distlearn.seeds import models as seed_models

        return getattr(seed_models, name)
    raise AttributeError(f"module 'distlearn.seeds.functions' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(SEED_MODULES))


def build_large_lm(device: str = "meta", fixed: bool = True, **sizes):
    """Build the seed's ``LargeLM`` (default: its own sizes, ~6.85 B parameters) on ``device``.

    On ``"meta"`` (the default) no memory is allocated: the seed built it on the CPU in fp32, 27.4 GB of RAM.
    ``fixed=False`` uses the seed's buggy block (same parameters).
    """
    import torch

    from distlearn.seeds.models import LargeLM

    kw = {**SEED_LARGE_LM, **sizes}
    with torch.device(device):
        return LargeLM(fixed=fixed, **kw)


def transformer_blocks():
    """``(SeedTransformerBlock, TransformerBlock)``: the seed's buggy block and the fixed one."""
    from distlearn.seeds.models import SeedTransformerBlock, TransformerBlock

    return SeedTransformerBlock, TransformerBlock


def zero_residual_branches(block):
    """Zero the last linear layer of both branches of a (seed or fixed) block, in place; returns the block.

    A residual block whose branches output zero must be the identity, ``block(x) == x``: the fixed block is, the
    seed's block returns ``norm2(x)`` instead, which exposes its bug.
    """
    import torch

    with torch.no_grad():
        for lin in (block.attn.out_proj, block.ffn[2]):
            lin.weight.zero_()
            lin.bias.zero_()
    return block


def seed_analyze_memory(model, n_gpus, mode="fsdp", use_bf16=False):
    """Seed B snippet 8 ``analyze_memory``, unchanged. GB (1e9 bytes) per GPU.

    What is wrong: with ``use_bf16`` it counts 2 + 2 + 8 = 12 B/param (no fp32 master weights, mistake 1);
    FSDP divides by ``n_gpus`` rather than the data-parallel degree (mistake 3). Correct:
    ``model_state_bytes(count_parameters(model), dp=..., zero_stage=3, precision="mixed")``.
    """
    params = sum(p.numel() for p in model.parameters())
    bpp = 2 if use_bf16 else 4
    param_mem = params * bpp / 1e9
    grad_mem = params * bpp / 1e9
    optim_mem = params * 8 / 1e9
    if mode == "ddp":
        return param_mem + grad_mem + optim_mem
    elif mode == "fsdp":
        return (param_mem + grad_mem + optim_mem) / n_gpus

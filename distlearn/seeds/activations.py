"""The seed's activation-memory arithmetic, copied faithfully to be criticised (chapter 08), and its grid redone.

- :func:`seed_activation_bytes`: the activation part of seed A's ``memory_calculator`` (seed mistake 2);
- :func:`seed_estimate_memory`: seed B snippet 6 ``estimate_memory`` (seed mistake 9);
- :func:`seed_grid`: the seed's 8-row grid (bf16 × offload × checkpointing), the seed's number beside the real one
  from :func:`distlearn.activation_memory.formulas.estimate_memory`; drawn by
  :func:`distlearn.activation_memory.plots.seed_grid_figure`.

**Nothing here is a correct answer** except the ``real`` half of :func:`seed_grid`'s rows. Units as the seed: GB
(1e9 bytes), except :func:`seed_activation_bytes` (bytes).
"""
from __future__ import annotations

from distlearn.activation_memory.formulas import estimate_memory
from distlearn.core.models import ModelConfig
from distlearn.memory.formulas import GB

__all__ = ["seed_activation_bytes", "seed_estimate_memory", "seed_grid"]


# ---------------------------------------------------------- seed A · memory_calculator, activation part  (chapter 08)
def seed_activation_bytes(params_billions: float, precision_bytes: int = 2, sequence_length: int = 2048,
                          batch_size_per_gpu: int = 1, hidden_dim: int | None = None,
                          num_layers: int | None = None) -> float:
    """The activation part of seed-a's ``memory_calculator`` (seed mistake 2), copied to be criticised.

    With ``hidden_dim`` and ``num_layers``: ``s·b·h·bytes·4`` per layer (an undercount: Korthikanti's layer keeps
    ``34·s·b·h + 5·a·s²·b`` bytes); without them an invented ``0.5 × params × bytes``. Returns bytes.
    """
    if hidden_dim and num_layers:
        return sequence_length * batch_size_per_gpu * hidden_dim * precision_bytes * 4 * num_layers
    return params_billions * 1e9 * precision_bytes * 0.5



# ---------------------------------------------------------------- seed B · snippet 6: estimate_memory  (chapter 08)
def seed_estimate_memory(params_b, seq_len, n_layers, n_gpus, use_bf16=False, use_offload=False, use_ckpt=False):
    """The seed's ``estimate_memory`` (seed-b snippet 6), copied faithfully *to be criticised* (seed mistake 9).

    Returns its "GB per GPU". What is wrong: bf16 model states are ``2 + 2 + 4`` B/param (one Adam moment and the
    fp32 master weights are missing: the real recipe is 2 + 2 + 12 = 16 B); ``d_model = 4096`` is fixed whatever
    the model; activations are ``s·h·L·4·2`` bytes (no micro-batch, no attention scores, no layer-internal
    tensors; see Korthikanti); checkpointing is an invented ``× 0.1`` and offload an invented ``− 30 %``.
    """
    params = params_b * 1e9
    if use_bf16:
        base = (params * 2 + params * 2 + params * 4) / n_gpus / 1e9
    else:
        base = (params * 4 + params * 4 + params * 8) / n_gpus / 1e9
    d_model = 4096
    activation = seq_len * d_model * n_layers * 4 * 2 / 1e9
    if use_ckpt:
        activation *= 0.1
    offload_save = base * 0.3 if use_offload else 0
    return base + activation - offload_save



def seed_grid(config: ModelConfig, *, seq_len: int = 2048, n_gpus: int = 8, seed_layers: int = 128,
              params_b: float = 70.0) -> list[dict]:
    """The 8 rows of the seed's grid (bf16 × offload × checkpointing): the seed's GB beside the real GB.

    Each row: ``bf16, offload, ckpt, seed_gb`` (the seed's function, its own arguments) and ``real_gb`` (from
    :func:`~distlearn.activation_memory.formulas.estimate_memory` with ``config``, GB = 1e9 bytes like the seed),
    plus ``real`` (the dict of bytes).
    """
    rows = []
    for bf16 in (False, True):
        for offload in (False, True):
            for ckpt in (False, True):
                real = estimate_memory(config, seq_len=seq_len, n_gpus=n_gpus, use_bf16=bf16, use_offload=offload,
                                       use_ckpt=ckpt)
                rows.append({"bf16": bf16, "offload": offload, "ckpt": ckpt,
                             "seed_gb": seed_estimate_memory(params_b, seq_len, seed_layers, n_gpus, bf16, offload,
                                                             ckpt),
                             "real_gb": real["total"] / GB, "real": real})
    return rows


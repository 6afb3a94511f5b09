"""Chapter 01 lab: ZeRO stage 1 on real processes. Each rank trains the same tiny model with PyTorch's
``ZeroRedundancyOptimizer`` (AdamW inside), which keeps Adam's state only for the parameters this rank owns, and
reports the bytes of optimizer state it really holds.

Run it alone: ``torchrun --nproc-per-node 2 -m distlearn.labs.memory_states``.
"""
import torch
import torch.distributed as dist
import torch.nn.functional as F

from distlearn.launch import device, torchrun_main
from distlearn.memory_measure import TINY, tensor_bytes
from distlearn.models import build_model


def zero1_adam_state_bytes(rank: int, world_size: int, seed: int = 0) -> dict:
    """One fp32 AdamW step under ``ZeroRedundancyOptimizer``; returns this rank's bytes.

    Keys: ``rank``; ``owned_params`` (number of parameters whose optimizer state this rank keeps);
    ``state_bytes`` (bytes of per-element Adam state on this rank: ``exp_avg`` + ``exp_avg_sq``);
    ``full_state_bytes`` (what plain AdamW would keep on every rank: 8 B × Ψ); ``num_params`` (Ψ);
    ``max_param_diff`` (largest difference of the updated parameters from rank 0's, after the all-gather of
    updates: 0.0 when the ranks agree).
    All ranks use the same seed and batch, so their gradients are equal without an all-reduce.
    """
    from torch.distributed.optim import ZeroRedundancyOptimizer

    torch.manual_seed(seed)
    model = build_model(TINY, device=str(device()))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-2)
    tokens = torch.randint(0, TINY.vocab_size, (2, 17), device=device())
    loss = F.cross_entropy(model(tokens[:, :-1]).reshape(-1, TINY.vocab_size), tokens[:, 1:].reshape(-1))
    loss.backward()
    opt.step()

    local = opt.optim  # the AdamW that holds only this rank's partition
    owned = [p for g in local.param_groups for p in g["params"]]
    state_bytes = sum(tensor_bytes(v) for p in owned for v in local.state.get(p, {}).values()
                      if torch.is_tensor(v) and v.shape == p.shape)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ref = flat.clone()
    dist.broadcast(ref, src=0)
    num_params = sum(p.numel() for p in model.parameters())
    dist.barrier()
    return {"rank": rank, "owned_params": sum(p.numel() for p in owned), "state_bytes": state_bytes,
            "full_state_bytes": 8 * num_params, "num_params": num_params,
            "max_param_diff": float((flat - ref).abs().max())}


if __name__ == "__main__":
    torchrun_main(zero1_adam_state_bytes)

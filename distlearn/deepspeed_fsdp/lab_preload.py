"""What :mod:`distlearn.core.launch`'s forkserver imports for the DeepSpeed labs (their ``FORKSERVER_PRELOAD``; on a
machine without CUDA only, :func:`distlearn.core.launch.lab_preload`), once in the server instead of in every worker:

- DeepSpeed, told to use its CPU accelerator as the labs tell it (``DS_ACCELERATOR=cpu`` unless set: the labs run
  on gloo there, and without it DeepSpeed prints a warning on import and caches whatever accelerator it detects);
- the Muon optimizer module that every ``deepspeed.initialize`` with ZeRO imports
  (``deepspeed/runtime/zero/utils.py``, ``is_zero_supported_optimizer``); it calls ``torch.compile`` at import.

Together ~1.2 s of CPU per worker on 2 cores (DeepSpeed 0.3 s, the Muon module 0.9 s). A DeepSpeed that is missing
or fails to import is left for the workers to meet and report (bilingually, with the install hint): the server
itself must start, and the forkserver would only pass over an ImportError. Imported anywhere else on a machine
with CUDA it does nothing (DeepSpeed must find the GPU there).
"""
import torch

from distlearn.deepspeed_fsdp.deepspeed import prepare_deepspeed

if not torch.cuda.is_available():
    prepare_deepspeed()
    try:
        import deepspeed  # noqa: F401
        import deepspeed.runtime.zero.muon.muon_optimizer  # noqa: F401
    except Exception:  # noqa: BLE001 - see the module doc
        pass

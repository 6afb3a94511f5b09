"""Real-engine workers: each lab is importable (for :func:`distlearn.launch.run`) and runnable with torchrun."""

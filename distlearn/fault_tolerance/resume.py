"""Which state must a checkpoint hold so that a restarted run continues *exactly* as if nothing had happened?

A small, real experiment in one process (torch, CPU, milliseconds): train a tiny MLP for ``steps`` steps; in a
second run, stop after ``crash_at`` steps, keep a checkpoint, build everything again from scratch as a restarted
process would (same code, same seed), restore the checkpoint *except* the items in ``omit``, and train the remaining
steps. The resume is exact when the losses after the restart equal the uninterrupted run's bit for bit.

The default crash comes one step into the second epoch (step 7 of 16, with 6 batches per epoch), so every part of
the sampler's state is read after the restart: the current permutation at once, the shuffle generator at the start
of the third epoch (step 13). A crash inside the first epoch could not tell whether either was restored.

The five items (:data:`ITEMS`):

- ``"model"``: the parameters (``model.state_dict()``);
- ``"optimizer"``: the optimizer's state (momentum buffers; Adam's two moments and its step count);
- ``"sampler"``: where the data order is: the epoch, the position in it, this epoch's permutation and the
  shuffle generator's state (a fresh sampler starts at epoch 0, position 0);
- ``"rng"``: the global random-number generator that draws dropout masks (``torch.get_rng_state()``);
- ``"step"``: the step counter, from which the learning-rate schedule is computed.

``omit`` also accepts ``"sampler.generator"`` (:data:`PARTS`): restore the sampler's epoch, position and
permutation, but not its shuffle generator. The next epoch then repeats a permutation already used.

:func:`required_state` states the rule; the tests run :func:`resume_experiment` for every setup and every omitted
item and check that the losses differ exactly when the rule says the item is required.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch

from distlearn.core.validate import DistlearnValueError, check_bool, check_choice, check_int, check_number, check_seed

ITEMS = ("model", "optimizer", "sampler", "rng", "step")
PARTS = ("sampler.generator",)                         # a part of an item that omit can leave out on its own
OPTIMIZERS = ("sgd", "momentum", "adamw")
NUM_SAMPLES, BATCH, WIDTH, CLASSES = 48, 8, 6, 3     # 6 batches per epoch


@dataclass(frozen=True)
class Setup:
    """A training setup. ``optimizer``: ``"sgd"`` (plain, no state), ``"momentum"`` (SGD with momentum 0.9) or
    ``"adamw"``; ``dropout``: a dropout layer (p = 0.3) in the model; ``lr_schedule``: a warm-up-then-decay
    learning rate that depends on the step; ``full_batch``: every step uses the whole data set (no sampler)."""

    optimizer: str = "adamw"
    dropout: bool = True
    lr_schedule: bool = True
    full_batch: bool = False

    def __post_init__(self):
        check_choice("optimizer", self.optimizer, OPTIMIZERS)


def required_state(optimizer: str = "adamw", dropout: bool = True, lr_schedule: bool = True,
                   full_batch: bool = False) -> set[str]:
    """The items a checkpoint must hold for an exact resume of this setup: the model always; the optimizer when
    it has state (not plain SGD); the sampler unless every step sees the whole data set; the RNG when dropout draws
    from it; the step when the learning rate depends on it."""
    check_choice("optimizer", optimizer, OPTIMIZERS)
    dropout, lr_schedule = check_bool("dropout", dropout), check_bool("lr_schedule", lr_schedule)
    full_batch = check_bool("full_batch", full_batch)
    need = {"model"}
    if optimizer != "sgd":
        need.add("optimizer")
    if not full_batch:
        need.add("sampler")
    if dropout:
        need.add("rng")
    if lr_schedule:
        need.add("step")
    return need


def _data():
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(NUM_SAMPLES, WIDTH, generator=g)
    y = torch.randint(0, CLASSES, (NUM_SAMPLES,), generator=g)
    return x, y


def lr_at(step: int, lr_schedule: bool, base_lr: float = 0.05, warmup: int = 3) -> float:
    """Learning rate of step ``step`` (0-based): linear warm-up over ``warmup`` steps, then 1/sqrt decay; constant
    ``base_lr`` without a schedule."""
    step, warmup = check_int("step", step, minimum=0), check_int("warmup", warmup)
    base_lr = check_number("base_lr", base_lr, minimum=0, strict_min=True)
    if not check_bool("lr_schedule", lr_schedule):
        return base_lr
    return base_lr * min((step + 1) / warmup, math.sqrt(warmup / (step + 1)))


class Trainer:
    """Model, optimizer, sampler, RNG and step counter of one (restartable) training process."""

    def __init__(self, setup: Setup, seed: int = 0):
        self.setup = setup
        torch.manual_seed(seed)                          # what every (re)started process does first
        layers = [torch.nn.Linear(WIDTH, 16), torch.nn.ReLU()]
        if setup.dropout:
            layers.append(torch.nn.Dropout(0.3))
        layers.append(torch.nn.Linear(16, CLASSES))
        self.model = torch.nn.Sequential(*layers)
        params = self.model.parameters()
        if setup.optimizer == "adamw":
            self.opt = torch.optim.AdamW(params, lr=0.05)
        else:
            self.opt = torch.optim.SGD(params, lr=0.05, momentum=0.9 if setup.optimizer == "momentum" else 0.0)
        self.x, self.y = _data()
        self.gen = torch.Generator().manual_seed(seed + 1)   # the sampler's own shuffle generator
        self.epoch, self.pos = 0, 0
        self.order = torch.randperm(NUM_SAMPLES, generator=self.gen)
        self.step = 0

    def _batch(self):
        if self.setup.full_batch:
            return self.x, self.y
        if self.pos * BATCH >= NUM_SAMPLES:              # next epoch: a new permutation
            self.epoch, self.pos = self.epoch + 1, 0
            self.order = torch.randperm(NUM_SAMPLES, generator=self.gen)
        idx = self.order[self.pos * BATCH:(self.pos + 1) * BATCH]
        self.pos += 1
        return self.x[idx], self.y[idx]

    def train_step(self) -> float:
        """One step; returns its loss."""
        for group in self.opt.param_groups:
            group["lr"] = lr_at(self.step, self.setup.lr_schedule)
        x, y = self._batch()
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad()
        self.step += 1
        return loss.item()

    def state(self) -> dict:
        """A checkpoint: a deep copy of each of the five :data:`ITEMS`."""
        return {"model": copy.deepcopy(self.model.state_dict()),
                "optimizer": copy.deepcopy(self.opt.state_dict()),
                "sampler": {"epoch": self.epoch, "pos": self.pos, "order": self.order.clone(),
                            "generator": self.gen.get_state()},
                "rng": torch.get_rng_state(),
                "step": self.step}

    def load(self, state: dict, items=ITEMS, sampler_generator: bool = True) -> None:
        """Restore ``items`` from a checkpoint made by :meth:`state`; the others stay as built fresh.
        ``sampler_generator=False``: restore the sampler's epoch, position and permutation but leave its shuffle
        generator as built fresh."""
        for item in items:
            check_choice("item", item, ITEMS)
        if "model" in items:
            self.model.load_state_dict(state["model"])
        if "optimizer" in items:
            self.opt.load_state_dict(state["optimizer"])
        if "sampler" in items:
            s = state["sampler"]
            self.epoch, self.pos, self.order = s["epoch"], s["pos"], s["order"].clone()
            if sampler_generator:
                self.gen.set_state(s["generator"])
        if "rng" in items:
            torch.set_rng_state(state["rng"])
        if "step" in items:
            self.step = state["step"]


@dataclass(frozen=True)
class ResumeResult:
    """``reference``: losses of the uninterrupted run (steps 1…steps); ``resumed``: losses of steps
    crash_at+1…steps after the restart; ``max_abs_diff``: their largest difference; ``exact``: bit-for-bit equal;
    ``first_diff``: the first step (counted from 1 at the start of training) whose loss differs, None if none."""

    omit: tuple
    reference: list
    resumed: list
    max_abs_diff: float
    exact: bool
    first_diff: int | None = None


def resume_experiment(setup: Setup = Setup(), omit=(), steps: int = 16, crash_at: int = 7,
                      seed: int = 0) -> ResumeResult:
    """Uninterrupted run versus a run restarted after ``crash_at`` steps from a checkpoint missing ``omit`` (items of
    :data:`ITEMS` or :data:`PARTS`).

    The defaults crash one step into the second epoch (6 batches per epoch) and train into the third: by the crash
    the sampler's shuffle generator has drawn two permutations, a fresh one only one, so a restart that forgets the
    generator repeats an old order at step 13. A crash inside the first epoch could not tell (issue 32, item 7).
    Runs on one CPU thread: for a model this small, a second thread's start and wait cost more than it saves."""
    steps = check_int("steps", steps, minimum=2, maximum=1000)
    seed = check_seed("seed", seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _resume_experiment(setup, omit, steps, crash_at, seed)
    finally:
        torch.set_num_threads(threads)


def _resume_experiment(setup, omit, steps, crash_at, seed) -> ResumeResult:
    crash_at = check_int("crash_at", crash_at, minimum=1, maximum=steps - 1)
    omit = tuple(omit)
    for item in omit:
        check_choice("omit", item, ITEMS + PARTS)
    ref = Trainer(setup, seed)
    reference = [ref.train_step() for _ in range(steps)]
    first = Trainer(setup, seed)
    for _ in range(crash_at):
        first.train_step()
    checkpoint = first.state()
    del first                                            # the crash: everything in memory is gone
    again = Trainer(setup, seed)                         # the restarted process
    again.load(checkpoint, [i for i in ITEMS if i not in omit], sampler_generator="sampler.generator" not in omit)
    resumed = [again.train_step() for _ in range(steps - crash_at)]
    diff = max(abs(a - b) for a, b in zip(resumed, reference[crash_at:]))
    first = next((crash_at + 1 + i for i, (a, b) in enumerate(zip(resumed, reference[crash_at:])) if a != b), None)
    return ResumeResult(omit, reference, resumed, diff, resumed == reference[crash_at:], first)


def omission_table(setup: Setup = Setup(), **kwargs) -> list[ResumeResult]:
    """:func:`resume_experiment` with nothing omitted, then with each item omitted in turn, the sampler's shuffle
    generator alone right after the whole sampler."""
    if kwargs.get("omit"):
        raise DistlearnValueError("omit", "omission_table omits each item in turn; do not pass omit.",
                                  "omission_table 会依次省略每一项，不要传入 omit。")
    omits = [()]
    for item in ITEMS:
        omits += [(item,)] + [(p,) for p in PARTS if p.split(".")[0] == item]
    return [resume_experiment(setup, omit, **kwargs) for omit in omits]

"""The optimizer: AdamW (Loshchilov & Hutter 2019) after global-norm gradient clipping, on a warmup schedule.

    tx = clip_by_global_norm(grad_clip_norm)  then  adamw(schedule, b1, b2, eps, weight_decay, mask)

Schedules (`config.optim.schedule`), both with a linear warmup from 0 over `warmup_steps` updates:
  warmup_cosine    then cosine decay to `learning_rate * end_lr_fraction` at `train.steps`
  warmup_constant  then constant (`warmup_steps = 0` gives plain constant-rate Adam, as in Ruoss et al.)

Weight decay applies to matrices only (ndim >= 2): decaying biases and normalisation scales pulls them
to zero, which is not the regularisation intended (the usual GPT / big_vision choice). With
`weight_decay = 0` this is exactly Adam.
"""

from __future__ import annotations

import dataclasses

import jax
import optax


@dataclasses.dataclass(frozen=True)
class OptimizerSpec:
  """The optimizer of a run as hashable data (`config.optim` and the step count), so that jitted train
  steps can be cached per optimizer: two runs of one setup (seeds, resumes) compile the step once."""

  learning_rate: float
  schedule: str
  warmup_steps: int
  end_lr_fraction: float
  weight_decay: float
  b1: float
  b2: float
  eps: float
  grad_clip_norm: float | None
  total_steps: int

  @classmethod
  def from_config(cls, config) -> 'OptimizerSpec':
    """From a run config (its `optim` section and `train.steps`)."""
    o = config.optim
    return cls(
        learning_rate=float(o.learning_rate),
        schedule=str(o.schedule),
        warmup_steps=int(o.warmup_steps),
        end_lr_fraction=float(o.end_lr_fraction),
        weight_decay=float(o.weight_decay),
        b1=float(o.b1),
        b2=float(o.b2),
        eps=float(o.eps),
        grad_clip_norm=None if o.grad_clip_norm is None else float(o.grad_clip_norm),
        total_steps=int(config.train.steps),
    )

  def schedule_fn(self) -> optax.Schedule:
    """The learning rate as a function of the update count (0 for the first update)."""
    peak, warmup = self.learning_rate, self.warmup_steps
    if self.schedule == 'warmup_cosine':
      # optax counts decay_steps from 0 including the warmup: the rate reaches its end value at total_steps.
      return optax.warmup_cosine_decay_schedule(
          init_value=0.0,
          peak_value=peak,
          warmup_steps=warmup,
          decay_steps=max(self.total_steps, warmup + 1),
          end_value=peak * self.end_lr_fraction,
      )
    if self.schedule == 'warmup_constant':
      if warmup == 0:
        return optax.constant_schedule(peak)
      return optax.join_schedules(
          [optax.linear_schedule(0.0, peak, warmup), optax.constant_schedule(peak)], boundaries=[warmup]
      )
    raise ValueError(
        f'config.optim.schedule={self.schedule!r} is invalid; allowed: ' "'warmup_cosine', 'warmup_constant'."
    )

  def build(self) -> optax.GradientTransformation:
    """clip_by_global_norm -> adamw (see the module docstring)."""
    parts = []
    if self.grad_clip_norm is not None:
      parts.append(optax.clip_by_global_norm(self.grad_clip_norm))
    parts.append(
        optax.adamw(
            self.schedule_fn(), b1=self.b1, b2=self.b2, eps=self.eps, weight_decay=self.weight_decay, mask=decay_mask
        )
    )
    return optax.chain(*parts)


def decay_mask(params):
  """True for the leaves weight decay applies to: matrices (kernels, embeddings, tables), not vectors."""
  return jax.tree.map(lambda p: getattr(p, 'ndim', 0) >= 2, params)

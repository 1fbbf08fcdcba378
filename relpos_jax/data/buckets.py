"""Length bucketing: train on lengths uniform in ``min_length..max_length`` with few XLA compilations.

Ruoss et al. 2023 (and Delétang et al. 2023) draw ONE input length ``n ~ U{1..N}`` per training step and
sample the whole batch at that length. Under ``jax.jit`` every distinct total length ``T = total_length(n)``
would be a new shape and a new compilation (N of them). Here each batch is right-padded to the smallest
bucket ``>= T``, so a training loop compiles at most ``num_buckets`` shapes.

Bucket scheme: the buckets are quantiles of the *achievable* totals ``{total_length(n) : n in
min_length..max_length}`` (``length_buckets`` does the same over the integer range ``min_total_len ..
max_total_len``): bucket ``i`` (1-based, of k) is the ``ceil(i * M / k)``-th smallest of the M achievable
totals. Since ``n`` is uniform and ``T`` increases with ``n``, each bucket receives about the same share of
batches, the largest bucket is exactly ``total_length(max_length)`` (no padding at the longest length),
and every bucket is a length that really occurs (e.g. multiples of 3 for ``duplicate_string``).
Linear rather than geometric spacing: lengths are uniform, so the expected padding is about half a
bucket width for every bucket.

Padding is on the RIGHT (after the placeholders / answer), so real tokens keep their positions.
Padded positions have ``inputs = task.pad_id``, ``targets = 0``, ``loss_mask = accuracy_mask = 0`` and
``padding_mask = False``. A model must mask padded KEYS in attention (``padding_mask``); then an
encoder's outputs at real positions equal those of the unpadded sequence (for causal decoders this holds
even without the mask, since padding only follows the real tokens). Position schemes that depend on the
sequence length itself (e.g. Ruoss et al.'s randomized positions, drawn for length T) should take the
real length from ``padding_mask.sum(-1)`` or ``input_length`` rather than from the array shape.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

import numpy as np

from relpos_jax import validation
from relpos_jax.data.tasks.base import Batch, Task

__all__ = [
    'BatchSpec',
    'bucket_for',
    'length_buckets',
    'pad_batch',
    'pad_to_bucket',
    'quantile_buckets',
    'sample_bucketed',
    'task_buckets',
]


def quantile_buckets(values: Iterable[int], num_buckets: int) -> tuple[int, ...]:
  """``num_buckets`` (or fewer, if fewer distinct values) quantiles of the distinct ``values``; the last is max."""
  num_buckets = validation.positive_int('buckets', 'num_buckets', num_buckets)
  vals = sorted(set(int(v) for v in values))
  if not vals:
    raise ValueError('quantile_buckets needs at least one value, got none')
  m = len(vals)
  return tuple(sorted({vals[math.ceil(i * m / num_buckets) - 1] for i in range(1, num_buckets + 1)}))


def length_buckets(max_total_len: int, num_buckets: int, min_total_len: int = 1) -> tuple[int, ...]:
  """Evenly spaced bucket sizes covering ``min_total_len .. max_total_len``; the last equals
  ``max_total_len``. E.g. ``length_buckets(120, 4) == (30, 60, 90, 120)``."""
  max_total_len = validation.positive_int('buckets', 'max_total_len', max_total_len)
  min_total_len = validation.positive_int('buckets', 'min_total_len', min_total_len)
  if min_total_len > max_total_len:
    raise ValueError(f'min_total_len={min_total_len} exceeds max_total_len={max_total_len}')
  return quantile_buckets(range(min_total_len, max_total_len + 1), num_buckets)


def task_buckets(task: Task, max_length: int, num_buckets: int, min_length: int = 1) -> tuple[int, ...]:
  """Buckets over the totals ``task.total_length(n)`` achievable for ``n in min_length..max_length``."""
  max_length = validation.positive_int('buckets', 'max_length', max_length)
  min_length = validation.positive_int('buckets', 'min_length', min_length)
  if min_length > max_length:
    raise ValueError(f'min_length={min_length} exceeds max_length={max_length}')
  return quantile_buckets((task.total_length(n) for n in range(min_length, max_length + 1)), num_buckets)


def bucket_for(total_len: int, buckets: Sequence[int]) -> int:
  """The smallest bucket ``>= total_len``; ValueError if ``total_len`` exceeds the largest bucket."""
  for b in sorted(buckets):
    if b >= total_len:
      return int(b)
  raise ValueError(f'total length {total_len} exceeds the largest bucket {max(buckets)} (buckets {tuple(buckets)})')


def pad_batch(batch: Batch, target_len: int, pad_id: int) -> Batch:
  """Right-pad every (B, T) array of ``batch`` to (B, target_len) and add ``padding_mask`` (True = real)."""
  b, t = batch['inputs'].shape
  if target_len < t:
    raise ValueError(f'target_len={target_len} is shorter than the batch length {t}')
  extra = target_len - t
  out = {}
  for key, arr in batch.items():
    if arr.ndim >= 2 and arr.shape[:2] == (b, t):
      fill = pad_id if key == 'inputs' else 0
      pad = [(0, 0), (0, extra)] + [(0, 0)] * (arr.ndim - 2)
      out[key] = np.pad(arr, pad, constant_values=np.asarray(fill, arr.dtype))
    else:
      out[key] = arr
  mask = np.zeros((b, target_len), dtype=bool)
  mask[:, :t] = True
  out['padding_mask'] = mask if 'padding_mask' not in batch else out['padding_mask'] & mask
  return out


def pad_to_bucket(batch: Batch, buckets: Sequence[int], pad_id: int) -> Batch:
  """``pad_batch`` to ``bucket_for(T, buckets)``."""
  return pad_batch(batch, bucket_for(batch['inputs'].shape[1], buckets), pad_id)


@dataclasses.dataclass(frozen=True)
class BatchSpec:
  """How training batches are drawn: ``n ~ U{min_length..max_length}`` once per batch, bucketed."""

  batch_size: int
  max_length: int
  num_buckets: int
  min_length: int = 1

  def __post_init__(self):
    for name in ('batch_size', 'max_length', 'num_buckets', 'min_length'):
      validation.positive_int('buckets', name, getattr(self, name))
    if self.min_length > self.max_length:
      raise ValueError(f'min_length={self.min_length} exceeds max_length={self.max_length}')

  def buckets(self, task: Task) -> tuple[int, ...]:
    return task_buckets(task, self.max_length, self.num_buckets, self.min_length)


def sample_bucketed(task: Task, rng: np.random.Generator, spec: BatchSpec, length: int | None = None) -> Batch:
  """One training batch: draws ``n`` (unless ``length`` is given) then ``task.sample(rng, B, n)``, padded
  to its bucket. Adds ``padding_mask`` (B, T_bucket) bool and ``input_length`` (B,) int32 (= n).
  Everything comes from ``rng`` (first the length, then the task's draws), so a seed reproduces the stream.
  """
  validation.generator('buckets', rng)
  if length is None:
    n = int(rng.integers(spec.min_length, spec.max_length + 1))
  else:
    n = validation.positive_int('buckets', 'length', length)
  batch = task.sample(rng, spec.batch_size, n)
  out = pad_to_bucket(batch, spec.buckets(task), task.pad_id)
  out['input_length'] = np.full((spec.batch_size,), n, dtype=np.int32)
  return out

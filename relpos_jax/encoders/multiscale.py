"""Multi-scale relative position bias: several tables, each at its own granularity (the lecture's section 5b).

Scale s reads relative position d = j - i at a resolution of s distances per bucket, in its own table of
2k + 1 entries (k = buckets_per_side):

    bucket_s(d) = clip(trunc(d / s), -k, k) + k          trunc rounds toward zero

    b_h(d) = reduce_s table_s[bucket_s(d), h]            reduce = mean (the lecture) or sum

Scale 1 is Shaw's clipped table (exact to |d| = k); scale s saturates from |d| >= k * s, so fine scales tell
near distances apart and coarse scales still separate far ones. The defaults, scales (1, 4, 16) with k = 8,
saturate at 8, 32 and 128 tokens: exact like T5's 8 exact buckets near, and the coarsest scale reaching
T5's max_distance of 128, in 3 * 17 = 51 parameters per head.

How this differs from the lecture's code, `d // (s // 2) + s // 2` into a table of s entries:
  * the lecture ties the table size to the granularity (scale s has s entries and step s // 2); here the
    scale is the granularity alone and every table has 2k + 1 entries, so scales are comparable;
  * its map divides by zero for s = 1 (s // 2 = 0) and has step 1 for s = 2 and 3; here s = 1 is exact;
  * it never clips, so any |d| beyond about s * s / 4 indexes outside the table (an IndexError in torch,
    a silent NaN fill in JAX); here each scale saturates at its edge rows;
  * floor division is asymmetric (-1 // 2 = -1 but 1 // 2 = 0: the key just behind shares a bucket with a
    key two behind, the key just ahead with the query itself); trunc makes bucket_s(-d) mirror bucket_s(d).
    The price of that symmetry: the middle bucket of scale s holds the 2s - 1 distances |d| < s, the
    others s each.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register

REDUCTIONS = ('mean', 'sum')


def scale_bucket(rel: jax.Array, scale: int, buckets_per_side: int) -> jax.Array:
  """Row of relative position rel in the (2k + 1)-entry table of granularity s: clip(trunc(rel / s)) + k."""
  # lax.div on integers rounds toward zero (C semantics), unlike jnp.floor_divide.
  quotient = jax.lax.div(jnp.asarray(rel, jnp.int32), jnp.int32(scale))
  return jnp.clip(quotient, -buckets_per_side, buckets_per_side) + buckets_per_side


@register('multiscale')
@dataclasses.dataclass(frozen=True)
class MultiScale(contract.ScalarBiasEncoder):
  """b_h(j - i) = mean (or sum) over scales s of table_s[bucket_s(j - i), h]; see the module docstring."""

  scales: tuple[int, ...] = (1, 4, 16)
  buckets_per_side: int = 8
  reduction: str = 'mean'

  # As TableBiasEncoder: the tables start close to "no position bias" and learn their shape.
  table_init_stddev = 0.02

  def __post_init__(self):
    scales = self.scales
    if isinstance(scales, list):  # A list (e.g. from a config) would make the encoder unhashable.
      scales = tuple(scales)
      object.__setattr__(self, 'scales', scales)
    validation.require(
        isinstance(scales, tuple) and len(scales) >= 1,
        self.name,
        'scales',
        self.scales,
        'a non-empty tuple of ints >= 1',
    )
    for scale in scales:
      validation.positive_int(self.name, 'scales', scale)
    validation.require(
        len(set(scales)) == len(scales),
        self.name,
        'scales',
        self.scales,
        'distinct ints (a repeated scale only duplicates a table)',
    )
    validation.positive_int(self.name, 'buckets_per_side', self.buckets_per_side, maximum=validation.MAX_TABLE_ROWS)
    validation.choice(self.name, 'reduction', self.reduction, REDUCTIONS)

  @property
  def table_size(self) -> int:
    return 2 * self.buckets_per_side + 1

  def init_params(self, rng, dims_):
    init = jax.nn.initializers.normal(self.table_init_stddev)
    return {'tables': init(rng, (len(self.scales), self.table_size, dims_.num_heads), jnp.float32)}

  def buckets(self, rel: jax.Array) -> jax.Array:
    """The per-scale bucket maps: int (num_scales,) + rel.shape, row s indexing table s (for plotting too)."""
    return jnp.stack([scale_bucket(rel, s, self.buckets_per_side) for s in self.scales])

  def bias(self, params, rel):
    rel = jnp.asarray(rel, jnp.int32)
    index = self.buckets(rel)
    which = jnp.arange(len(self.scales)).reshape((-1,) + (1,) * rel.ndim)
    per_scale = params['tables'][which, index]  # (num_scales,) + rel.shape + (num_heads,)
    if self.reduction == 'mean':
      return jnp.mean(per_scale, axis=0)
    return jnp.sum(per_scale, axis=0)

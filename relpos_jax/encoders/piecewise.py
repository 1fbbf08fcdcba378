"""Piecewise-linear range extension: exact near, linearly compressed far, saturated beyond a range.

The lecture's section 5a extends a clipped table (Shaw et al. 2018) to any length with "a piecewise linear
function or logarithmic scaling of large distances". T5 (`t5.py`) is the logarithmic instance; this is the
piecewise-linear one. With n = |j - i| and e = exact_distance, c = compression, M = max_distance:

    g(n) = n                          for n <= e        one bucket per distance (slope 1)
    g(n) = e + (n - e) // c           for e <= n <= M   c distances per bucket   (slope 1 / c)
    g(n) = e + (M - e) // c           for n >= M        one shared saturated bucket (slope 0)

i.e. g(n) = floor of the piecewise-linear function with slopes 1, 1/c, 0 and knees at e and M. M - e must be
a multiple of c, so every compressed bucket holds exactly c distances and saturation starts exactly at M.
Per side there are P = e + (M - e) / c + 1 buckets, all reachable.

  bidirectional: bucket(rel) = (P - 1) + sign(rel) * g(|rel|)   2P - 1 buckets, monotone in rel, rel = 0 in
                 the middle (as Shaw's clip(rel) + k: with c = 1 and e = M = k this IS Shaw's table).
                 Unlike T5's layout, no bucket is wasted on "rel > 0 at distance 0".
  causal:        bucket(rel) = g(max(-rel, 0))                  P buckets; every key ahead (rel > 0) shares
                 bucket 0 with rel = 0, as in T5's decoder (a causal mask hides them anyway).

Defaults: exact_distance = 8 and max_distance = 128 are T5's published max_exact and max_distance, and
compression = 15 gives 8 compressed buckets over 8..127 (120 / 15), so per side 8 exact + 8 compressed + 1
saturated = 17 buckets against T5's 8 exact + 8 logarithmic. The two encoders then spend the same table on
the same range and differ only in the shape of the compression, which is what a length-generalization
comparison of "piecewise-linear vs logarithmic" wants to isolate.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def piecewise_distance_bucket(n: jax.Array, *, exact_distance: int, compression: int, max_distance: int) -> jax.Array:
  """g(n) above for non-negative int distances n: exact to e, c per bucket to M, saturated from M."""
  n = jnp.asarray(n, jnp.int32)
  exact = jnp.minimum(n, exact_distance)
  compressed = (jnp.clip(n, exact_distance, max_distance) - exact_distance) // compression
  return exact + compressed


@register('piecewise')
@dataclasses.dataclass(frozen=True)
class Piecewise(contract.TableBiasEncoder):
  """b_h(j - i) = table[bucket(j - i), h] with the piecewise-linear bucket map of the module docstring."""

  exact_distance: int = 8
  compression: int = 15
  max_distance: int = 128
  bidirectional: bool = True

  def __post_init__(self):
    # exact_distance >= 1: distance 0 (a token and itself) must keep its own bucket.
    validation.positive_int(self.name, 'exact_distance', self.exact_distance, minimum=1)
    validation.positive_int(self.name, 'compression', self.compression, minimum=1)
    validation.positive_int(self.name, 'max_distance', self.max_distance, minimum=1, maximum=validation.MAX_TABLE_ROWS)
    # Exact buckets past the saturation point could never be filled: distances >= M share one bucket.
    validation.require(
        self.exact_distance <= self.max_distance,
        self.name,
        'exact_distance',
        self.exact_distance,
        f'<= max_distance={self.max_distance} (exact buckets beyond the saturation distance ' f'would never be filled)',
    )
    span = self.max_distance - self.exact_distance
    nearest = self.exact_distance + self.compression * -(-span // self.compression)
    validation.require(
        span % self.compression == 0,
        self.name,
        'compression',
        self.compression,
        f'a divisor of max_distance - exact_distance = {span}, so that every compressed bucket '
        f'holds exactly `compression` distances and saturation starts at max_distance '
        f'(e.g. max_distance={nearest})',
    )

  @property
  def buckets_per_side(self) -> int:
    """P: the buckets g(n) takes for n >= 0, the saturated one included."""
    return self.exact_distance + (self.max_distance - self.exact_distance) // self.compression + 1

  @property
  def num_buckets(self) -> int:
    p = self.buckets_per_side
    return 2 * p - 1 if self.bidirectional else p

  def distance_bucket(self, n: jax.Array) -> jax.Array:
    """g(n) for distances n >= 0."""
    return piecewise_distance_bucket(
        n, exact_distance=self.exact_distance, compression=self.compression, max_distance=self.max_distance
    )

  def bucket(self, rel: jax.Array) -> jax.Array:
    """The table row of relative position rel = j - i (int array of any shape), in 0..num_buckets - 1."""
    # g saturates at max_distance, so clipping first changes nothing and keeps |rel| clear of int32 overflow.
    rel = jnp.clip(jnp.asarray(rel, jnp.int32), -self.max_distance, self.max_distance)
    if self.bidirectional:
      return (self.buckets_per_side - 1) + jnp.sign(rel) * self.distance_bucket(jnp.abs(rel))
    return self.distance_bucket(jnp.maximum(-rel, 0))

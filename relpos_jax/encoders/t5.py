"""T5 relative position buckets (Raffel et al. 2020), the best-known logarithmic range extension.

The lecture's section 5a (extend the range by logarithmic scaling: exact near, coarser far). With
n = -(j - i) (how far back the key is):

  bidirectional: half the buckets for each sign; n < 0 (keys ahead) adds num_buckets / 2; n = |n|
  causal:        n = max(n, 0) (every key ahead shares bucket 0)
  then with N the buckets left and max_exact = N // 2:
    bucket = n                                                                  if n < max_exact
    bucket = min(N - 1, max_exact + int(log(n / max_exact) / log(max_distance / max_exact) * (N - max_exact)))

Every distance >= max_distance lands in the last bucket. Published defaults: num_buckets = 32,
max_distance = 128, bidirectional in the encoder and causal in the decoder. This follows the reference
implementation (mesh_tensorflow / t5x `_relative_position_bucket`) to the bit, float32 epsilon included.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def t5_bucket(rel, *, bidirectional: bool, num_buckets: int, max_distance: int):
  """The T5 bucket of relative position rel = j - i (int array of any shape)."""
  n = -jnp.asarray(rel, jnp.int32)
  ret = jnp.zeros_like(n)
  if bidirectional:
    num_buckets //= 2
    ret += (n < 0).astype(jnp.int32) * num_buckets
    n = jnp.abs(n)
  else:
    n = jnp.maximum(n, 0)
  max_exact = num_buckets // 2
  is_small = n < max_exact
  # Clamp before the log so n = 0 (masked by is_small anyway) gives no -inf under jit.
  n_large = jnp.maximum(n, max_exact).astype(jnp.float32)
  val_if_large = max_exact + (
      jnp.log(n_large / max_exact + np.finfo(np.float32).eps)
      / np.log(max_distance / max_exact)
      * (num_buckets - max_exact)
  ).astype(jnp.int32)
  val_if_large = jnp.minimum(val_if_large, num_buckets - 1)
  return ret + jnp.where(is_small, n, val_if_large)


@register('t5')
@dataclasses.dataclass(frozen=True)
class T5(contract.TableBiasEncoder):
  num_buckets: int = 32
  max_distance: int = 128
  bidirectional: bool = True

  def __post_init__(self):
    validation.positive_int(
        self.name,
        'num_buckets',
        self.num_buckets,
        minimum=4 if self.bidirectional else 2,
        maximum=validation.MAX_TABLE_ROWS,
    )
    validation.require(
        not self.bidirectional or self.num_buckets % 2 == 0,
        self.name,
        'num_buckets',
        self.num_buckets,
        'an even number in bidirectional mode (half the buckets per direction)',
    )
    validation.positive_int(self.name, 'max_distance', self.max_distance, minimum=1, maximum=validation.MAX_TABLE_ROWS)
    max_exact = (self.num_buckets // 2 if self.bidirectional else self.num_buckets) // 2
    validation.require(
        self.max_distance > max_exact,
        self.name,
        'max_distance',
        self.max_distance,
        f'> {max_exact} (the exact range of num_buckets={self.num_buckets}) so the logarithmic '
        'buckets have a range to cover',
    )
    missing = self.unreachable_buckets()
    validation.require(
        not missing,
        self.name,
        'num_buckets',
        self.num_buckets,
        f'no more buckets than distances up to max_distance={self.max_distance} can fill; buckets '
        f'{missing} would never be reached (lower num_buckets or raise max_distance)',
    )

  def unreachable_buckets(self) -> list[int]:
    """Buckets no relative position reaches, besides bucket num_buckets // 2 in bidirectional mode.

    That one is unreachable in the reference implementation too (rel = 0 lands in bucket 0 and every
    key ahead gets num_buckets // 2 + n with n >= 1); we keep the published layout bit for bit.
    """
    rel = np.arange(-(self.max_distance + 1), self.max_distance + 2)
    reached = set(np.asarray(self.bucket(rel)).tolist())
    expected = set(range(self.num_buckets)) - ({self.num_buckets // 2} if self.bidirectional else set())
    return sorted(expected - reached)

  def bucket(self, rel):
    return t5_bucket(
        rel, bidirectional=self.bidirectional, num_buckets=self.num_buckets, max_distance=self.max_distance
    )

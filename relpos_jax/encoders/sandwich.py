"""Sandwich (Chi, Fan, Rudnicky & Ramadge 2023, "Dissecting Transformer Length Extrapolation via the Lens of
Receptive Field Analysis", ACL 2023): a parameter-free bias from sinusoidal position embeddings.

The inner product of two sinusoidal embeddings of dimension D (Vaswani et al. 2017) depends only on
d = j - i:  p_i . p_j = sum_{k=1}^{D/2} cos(d / 10000^(2k/D)).  Sandwich keeps that term alone (no
content-position cross terms), shifts it so distance 0 gets 0, and compresses it per head like ALiBi's
slopes:

    b_h(d) = ( sum_{k=1}^{D/2} cos(d * w_k) - D/2 ) / r_h,    w_k = 10000^(-2k/D),   r_h = 8h/H, h = 1..H

So b_h(0) = 0 and b_h(d) <= 0. The terms with d * w_k >> 1 average out, those with d * w_k << 1 stay near 1,
so for 1 << |d| << 10000 the bias falls roughly like -(D/2) log|d| / log(10000) / r_h, then oscillates
around -(D/2) / r_h: the logarithmic decay KERPLE-log and T5 learn. Head 1 has the steepest bias.

What exactly is implemented, from the reference implementation as ported to NVIDIA NeMo
(`SandwichRelativePositionEmbedding`, "Based on https://arxiv.org/abs/2212.10356"): frequencies indexed
k = 1..D/2 (not 0..D/2-1), the shift by D/2, and division by r_h = 8h/H for head h = 1..H. Causal form
(default): future keys (d > 0) get the distance-0 value 0, as the reference's `tril` of the distances does;
`bidirectional=True` evaluates the formula at every d (it is even in d). `dim` is D, the sandwich dimension;
the NeMo port sets it to the per-head hidden size, so the default here is 128, a common head size.

The sum is evaluated as -2 sum_k sin^2(d w_k / 2) (= sum_k (cos(d w_k) - 1)): the same value without the
cancellation of subtracting D/2 from a sum close to D/2, which at small d would leave float32 rounding noise
as large as the bias itself.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def sandwich_frequencies(dim: int) -> np.ndarray:
  """w_k = 10000^(-2k/D) for k = 1..D/2, float64 (D/2,)."""
  k = np.arange(1, dim // 2 + 1, dtype=np.float64)
  return 10000.0 ** (-2.0 * k / dim)


def compression_ratios(num_heads: int) -> np.ndarray:
  """r_h = 8h/H for h = 1..H, float64 (H,): head h's bias is divided by r_h."""
  return 8.0 * np.arange(1, num_heads + 1, dtype=np.float64) / num_heads


@register('sandwich')
@dataclasses.dataclass(frozen=True)
class Sandwich(contract.ScalarBiasEncoder):
  dim: int = 128
  bidirectional: bool = False

  def __post_init__(self):
    ok = validation.is_int(self.dim) and 2 <= self.dim <= validation.MAX_TABLE_ROWS and self.dim % 2 == 0
    validation.require(ok, self.name, 'dim', self.dim, 'an even int >= 2 (pairs of sin/cos dimensions)')

  def bias(self, params, rel):
    rel = jnp.asarray(rel, jnp.float32)
    if not self.bidirectional:
      rel = jnp.minimum(rel, 0.0)
    half_angles = rel[..., None] * jnp.asarray(sandwich_frequencies(self.dim) / 2, jnp.float32)
    inner_product_minus_dim = -2.0 * jnp.sum(jnp.square(jnp.sin(half_angles)), axis=-1)
    ratios = jnp.asarray(compression_ratios(contract.dims(params).num_heads), jnp.float32)
    return inner_product_minus_dim[..., None] / ratios

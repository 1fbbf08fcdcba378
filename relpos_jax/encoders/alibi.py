"""ALiBi, attention with linear biases (Press, Smith & Lewis 2022, "Train Short, Test Long: Attention with
Linear Biases Enables Input Length Extrapolation", ICLR 2022).

With d = j - i (key minus query) and one slope m_h per head:

    causal (the paper):   b_h(d) = m_h * d          for d <= 0, i.e. -m_h * (i - j)
                          b_h(d) = 0                for d > 0  (future keys, removed by the causal mask)
    bidirectional:        b_h(d) = -m_h * |d|

The paper defines the bias only for keys at or before the query. For d > 0 we return the distance-0 value,
as the KERPLE and Sandwich reference code do (they build the distance matrix with `tril`): the bias stays
finite and <= 0, so using the causal form without a causal mask by mistake never rewards far-future keys.

Slopes (the reference code, ofirpress/attention_with_linear_biases, `get_slopes`): for a power of two H,
the geometric sequence m_h = 2^(-8h/H), h = 1..H (H = 8: 1/2, 1/4, ..., 1/256). For any other H, with
P = 2^floor(log2 H): the P slopes of P heads, then every other slope of 2P heads, starting with the first
(2^(-8k/2P) for k = 1, 3, 5, ...), which fall between the first ones, until there are H. E.g. H = 6: the
slopes of 4, [1/4, 1/16, 1/64, 1/256], then 2^(-1), 2^(-3) from the slopes of 8: [..., 1/2, 1/8].

Published defaults: fixed (not learned) slopes, causal. `learnable_slopes=True` learns them, as log-slopes
(m_h = exp(theta_h) stays positive for any theta) initialised at the paper's values.

Asymmetric (`bidirectional=True, asymmetric=True, learnable_slopes=True`): separate slopes for the past
(d < 0) and the future (d > 0), b_h(d) = m^past_h d for d <= 0 and -m^future_h d for d > 0, both learned
and initialised at the paper's slopes (so training starts from the symmetric form): a bidirectional model
can then weigh context before and after a token differently per head.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


def _power_of_two_slopes(n: int) -> list[float]:
  return [2.0 ** (-8.0 * k / n) for k in range(1, n + 1)]


def alibi_slopes(num_heads: int) -> np.ndarray:
  """The paper's slopes for `num_heads` heads, float64 (num_heads,), in head order."""
  validation.positive_int('alibi', 'num_heads', num_heads)
  closest = 2 ** int(math.floor(math.log2(num_heads)))
  slopes = _power_of_two_slopes(closest)
  # Every other slope of twice as many heads interleaves with the slopes above (the reference's rule).
  slopes += _power_of_two_slopes(2 * closest)[0::2][: num_heads - closest]
  return np.asarray(slopes, np.float64)


@register('alibi')
@dataclasses.dataclass(frozen=True)
class ALiBi(contract.ScalarBiasEncoder):
  bidirectional: bool = False
  learnable_slopes: bool = False
  asymmetric: bool = False

  def __post_init__(self):
    if self.asymmetric:
      validation.require(
          self.bidirectional and self.learnable_slopes,
          self.name,
          'asymmetric',
          self.asymmetric,
          'False unless bidirectional=True and learnable_slopes=True (past and future slopes '
          "are learned from the paper's; a causal bias has no future)",
      )

  def init_params(self, rng, dims_):
    del rng
    if not self.learnable_slopes:
      return {}
    log_slopes = jnp.asarray(np.log(alibi_slopes(dims_.num_heads)), jnp.float32)
    if self.asymmetric:
      return {'log_slopes': log_slopes, 'log_future_slopes': log_slopes}
    return {'log_slopes': log_slopes}

  def slopes(self, params) -> jnp.ndarray:
    """The (num_heads,) slopes in use: the paper's, or the learned ones."""
    if self.learnable_slopes:
      return jnp.exp(params['log_slopes'])
    return jnp.asarray(alibi_slopes(contract.dims(params).num_heads), jnp.float32)

  def bias(self, params, rel):
    rel = jnp.asarray(rel, jnp.float32)[..., None]
    if self.asymmetric:
      future = jnp.exp(params['log_future_slopes'])
      return self.slopes(params) * jnp.minimum(rel, 0.0) - future * jnp.maximum(rel, 0.0)
    distance = -jnp.abs(rel) if self.bidirectional else jnp.minimum(rel, 0.0)
    return self.slopes(params) * distance

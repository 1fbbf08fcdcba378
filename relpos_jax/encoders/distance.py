"""The plain relative distance as a bias: the lecture's R[i, j] = j - i, made usable.

    signed:    b_h(j - i) = slope_h * (j - i)
    absolute:  b_h(j - i) = -slope_h * |j - i|

The lecture (section 2; also Press et al. 2022 in the absolute form with fixed geometric slopes) adds the
raw distance matrix to the scores. One slope per head lets heads choose how fast attention decays with
distance; slopes start at `slope` and are learned when `learnable`.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.encoders.registry import register


@register('distance')
@dataclasses.dataclass(frozen=True)
class Distance(contract.ScalarBiasEncoder):
  mode: str = 'absolute'
  slope: float = 1.0
  learnable: bool = True

  def __post_init__(self):
    validation.choice(self.name, 'mode', self.mode, ('absolute', 'signed'))
    validation.number(self.name, 'slope', self.slope)

  def init_params(self, rng, dims_):
    del rng
    if not self.learnable:
      return {}
    return {'slopes': jnp.full((dims_.num_heads,), self.slope, jnp.float32)}

  def slopes(self, params):
    if self.learnable:
      return params['slopes']
    return jnp.full((contract.dims(params).num_heads,), self.slope, jnp.float32)

  def bias(self, params, rel):
    rel = jnp.asarray(rel, jnp.float32)[..., None]
    if self.mode == 'absolute':
      return -self.slopes(params) * jnp.abs(rel)
    return self.slopes(params) * rel

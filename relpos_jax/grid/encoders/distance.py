"""The lecture's relative distance on a grid: b_h(p_i - p_j) = -slope_h * d(p_i, p_j).

    metric 'l1':         d = sum_a |delta_a|               (the city-block distance between two patches)
    metric 'euclidean':  d = sqrt(sum_a delta_a^2)

The 1-D `distance` encoder (relpos_jax/encoders/distance.py, the lecture's R[i, j] = j - i made usable, section
2) with the grid's two natural norms; one slope per head, learned when `learnable` (initial value `slope`).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.encoders import contract
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.registry import register

METRICS = ('l1', 'euclidean')


def grid_distance(delta, metric: str):
  """|delta|_1 or |delta|_2 of offsets (..., axes), float32 (...)."""
  d = jnp.asarray(delta, jnp.float32)
  if metric == 'l1':
    return jnp.sum(jnp.abs(d), axis=-1)
  # sqrt with a zero-safe gradient: d/dx sqrt(x) at 0 is inf, and 0 * inf is NaN in a learned slope's gradient.
  squared = jnp.sum(d * d, axis=-1)
  safe = jnp.where(squared > 0, squared, 1.0)
  return jnp.where(squared > 0, jnp.sqrt(safe), 0.0)


@register('distance2d')
@dataclasses.dataclass(frozen=True)
class Distance2D(GridBiasEncoder):
  metric: str = 'euclidean'
  slope: float = 1.0
  learnable: bool = True

  def __post_init__(self):
    super().__post_init__()
    validation.choice(self.name, 'metric', self.metric, METRICS)
    validation.number(self.name, 'slope', self.slope)

  def init_params(self, rng, dims_):
    del rng
    return {'slopes': jnp.full((dims_.num_heads,), self.slope, jnp.float32)} if self.learnable else {}

  def slopes(self, params):
    if self.learnable:
      return params['slopes']
    return jnp.full((contract.dims(params).num_heads,), self.slope, jnp.float32)

  def bias(self, params, delta):
    return -self.slopes(params) * grid_distance(delta, self.metric)[..., None]

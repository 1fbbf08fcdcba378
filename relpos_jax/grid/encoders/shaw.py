"""Shaw's clipped table per axis (Shaw, Uszkoreit & Vaswani 2018, one table per coordinate axis, summed):

    b_h(delta) = sum_a w^a_h[clip(delta_a, -k, k) + k]        k = max_distance, w^a of shape (2k + 1, H)

The 1-D scalar form (relpos_jax/encoders/shaw.py: clip(j - i) indexes a (2k + 1) table) applied per axis, as
iRPE's "cross" method sums a row and a column encoding (Wu et al. 2021, section 3.2). The grid offsets are
p_i - p_j (positions.py), so row k + d holds offset d = p_i - p_j. Beyond k all offsets share the edge rows: it
takes any grid. Float coordinates are read at the nearest integer offset (a table has integer rows). Tables start at N(0, 0.02) like the 1-D tables.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax import validation
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.registry import register


@register('shaw2d')
@dataclasses.dataclass(frozen=True)
class Shaw2D(GridBiasEncoder):
  max_distance: int = 16

  def __post_init__(self):
    super().__post_init__()
    validation.positive_int(self.name, 'max_distance', self.max_distance, minimum=0, maximum=2**16)

  def init_params(self, rng, dims_):
    shape = (self.axes, 2 * self.max_distance + 1, dims_.num_heads)
    return {'tables': jax.nn.initializers.normal(0.02)(rng, shape, jnp.float32)}

  def bias(self, params, delta):
    d = jnp.asarray(delta)
    k = self.max_distance
    total = 0.0
    for a in range(self.axes):
      index = jnp.clip(jnp.round(d[..., a]).astype(jnp.int32), -k, k) + k
      total = total + jnp.take(params['tables'][a], index, axis=0)
    return total

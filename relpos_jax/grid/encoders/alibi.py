"""2-D ALiBi: b_h(p_i - p_j) = -m_h * |p_i - p_j|_2, ALiBi's slopes on the Euclidean distance between patches.

The 2-D form of Press et al. 2022 used by CROMA (Fuller, Millard & Green 2023, "CROMA: Remote Sensing
Representations with Contrastive Radar-Optical Masked Autoencoders", antofuller/CROMA `get_2dalibi`: the
Euclidean distance between patch coordinates times the per-head ALiBi slopes, negated). Slopes: ALiBi's
reference `get_slopes` (relpos_jax.encoders.alibi.alibi_slopes), fixed. Symmetric, so it is bidirectional; any
grid size. Classes tokens get 0 (CROMA has none).
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax.encoders import contract
from relpos_jax.encoders.alibi import alibi_slopes
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.encoders.distance import grid_distance
from relpos_jax.grid.registry import register


@register('alibi2d')
@dataclasses.dataclass(frozen=True)
class ALiBi2D(GridBiasEncoder):

  def slopes(self, params):
    return jnp.asarray(alibi_slopes(contract.dims(params).num_heads), jnp.float32)

  def bias(self, params, delta):
    return -self.slopes(params) * grid_distance(delta, 'euclidean')[..., None]

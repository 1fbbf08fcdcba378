"""2-D KERPLE, the log kernel on the Euclidean distance: b_h(p_i - p_j) = -r1_h * log(1 + r2_h * |p_i - p_j|_2).

KERPLE's logarithmic variant (Chi et al. 2022, chijames/KERPLE ParallelKerpleLog: -r1 log(1 + r2 |i - j|))
with the 1-D distance replaced by the distance between patches. Parameters as the 1-D `kerple_log`
(relpos_jax/encoders/kerple.py): r1 = eps + softplus(theta_1), r2 = eps + softplus(theta_2), eps = 0.01, drawn
at the reference's initialisation r1 ~ U(0, 2), r2 ~ U(0, 1).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from relpos_jax.encoders import kerple
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.encoders.distance import grid_distance
from relpos_jax.grid.registry import register


@register('kerple2d')
@dataclasses.dataclass(frozen=True)
class Kerple2D(GridBiasEncoder):

  def init_params(self, rng, dims_):
    rng1, rng2 = jax.random.split(rng)
    shape = (dims_.num_heads,)
    return {
        'r1_raw': kerple.positive_raw_uniform(rng1, shape, 2.0),
        'r2_raw': kerple.positive_raw_uniform(rng2, shape, 1.0),
    }

  def coefficients(self, params):
    return kerple.positive(params['r1_raw']), kerple.positive(params['r2_raw'])

  def bias(self, params, delta):
    r1, r2 = self.coefficients(params)
    return -r1 * jnp.log1p(r2 * grid_distance(delta, 'euclidean')[..., None])

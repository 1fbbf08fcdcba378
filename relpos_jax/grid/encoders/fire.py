"""2-D FIRE: FIRE's MLP on the Euclidean distance, progressively interpolated by the query's distance to the
origin of the grid:

    b(i, j) = f_theta( psi(|p_i - p_j|_2) / psi(max(|p_i|_2, L)) ),     psi(x) = log(|c| x + 1)

FIRE (Li et al. 2024, relpos_jax/encoders/fire.py, the paper's appendix code) normalises psi(i - j) by
psi(max(i, L)), i the query's position: the distance to the first token, so that every query maps the keys it
can see (causally, those within i) into [0, 1]. Adapted here (our choice; the paper is 1-D and causal): the
distance is |p_i - p_j|_2 and the query's "position" is its distance to the grid's origin, |p_i|_2 (p = (0, 0),
the top-left patch, is where raster order starts), so the normaliser still grows with the query's place in the
grid and a larger grid is mapped into the MLP's trained range. Keys farther than |p_i| (the grid is not causal)
give ratios above 1, where the MLP extrapolates, as the 1-D encoder's bidirectional extension does.

Not translation invariant (the normaliser reads p_i): `is_toeplitz = False`, evaluated per pair, the MLP as its
linear pieces (`mlp.apply_scalar_mlp`, as the 1-D encoder). Parameters as FIRE's: f_theta = Linear(1, 32) ->
ReLU -> Linear(32, H) (PyTorch default init), c = 0.1, L = |multiplier| * init_threshold. init_threshold
defaults to 2 (not FIRE's 512 tokens): a quarter of the largest distance to the origin on the 7 x 7 grids the
resolution study trains at (|(6, 6)|_2 = 8.5), FIRE's ratio of L to its training length. The class token gets 0.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from relpos_jax.encoders import fire
from relpos_jax.encoders.mlp import apply_scalar_mlp
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.encoders.distance import grid_distance
from relpos_jax.grid.registry import register


@register('fire2d')
@dataclasses.dataclass(frozen=True)
class FIRE2D(GridBiasEncoder):
  is_toeplitz = False
  is_relative = False

  mlp_width: int = 32
  init_c: float = 0.1
  init_threshold: float = 2.0
  eps: float = 1e-6

  def __post_init__(self):
    super().__post_init__()
    fire.check_fields(self)

  def init_params(self, rng, dims_):
    return fire.init_fire_params(self, rng, dims_.num_heads)

  def normalized_distance(self, params, q_pos, k_pos):
    distance = grid_distance(jnp.asarray(q_pos) - jnp.asarray(k_pos), 'euclidean')
    return fire.normalize(self, params, distance, grid_distance(jnp.asarray(q_pos), 'euclidean'))

  def query_bias(self, params, q_pos, k_pos):
    return apply_scalar_mlp(params['mlp'], self.normalized_distance(params, q_pos, k_pos))

  def bias(self, params, delta):
    raise ValueError(
        'fire2d: the bias depends on the query coordinates as well as on p_i - p_j (it is normalised by '
        'psi(max(|p_i|, L))); use pair_bias(params, q_pos, k_pos) or grid_bias_matrix.'
    )

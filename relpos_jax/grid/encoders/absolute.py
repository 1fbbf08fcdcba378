"""MAE's fixed 2-D sin-cos absolute embedding (He et al. 2022; reference facebookresearch/mae util/pos_embed.py
`get_2d_sincos_pos_embed`): half the model dimensions encode the column, half the row, each with the 1-D
Transformer sinusoids omega_k = 1 / 10000^(k / (D/4)), k < D/4, as [sin(x omega), cos(x omega)]:

    e(row, col) = [sin(col omega), cos(col omega), sin(row omega), cos(row omega)]

(MAE's `grid = meshgrid(grid_w, grid_h)` puts the column first: `emb_h` reads grid[0], the column). The class
token's embedding is zeros, as MAE's. Added at the input (kind ABSOLUTE): it is not relative, the foil of the
translation-invariance test. Any grid (sinusoids extrapolate); model_dim must be a multiple of 4.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.grid import positions as positions_lib
from relpos_jax.grid.contract import GridAbsoluteEncoder
from relpos_jax.grid.registry import register


@register('sincos2d')
@dataclasses.dataclass(frozen=True)
class SinCos2D(GridAbsoluteEncoder):

  def __post_init__(self):
    super().__post_init__()
    validation.require(self.axes == 2, self.name, 'axes', self.axes, '2 (MAE embeds rows and columns)')

  def check_dims(self, dims_):
    validation.require(dims_.model_dim % 4 == 0, self.name, 'model_dim', dims_.model_dim, 'a multiple of 4')

  def embed(self, params, positions):
    coords = self.coordinates(positions)
    d = params['dims'].model_dim
    omega = 1.0 / 10000 ** (np.arange(d // 4, dtype=np.float64) / (d / 4.0))
    cls = positions_lib.is_class_token(coords)
    p = jnp.where(cls[..., None], 0, coords).astype(jnp.float32)

    def one(x):
      out = x[..., None] * jnp.asarray(omega, jnp.float32)
      return jnp.concatenate([jnp.sin(out), jnp.cos(out)], axis=-1)

    emb = jnp.concatenate([one(p[..., 1]), one(p[..., 0])], axis=-1)
    return jnp.where(cls[..., None], 0.0, emb)

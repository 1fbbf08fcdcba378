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
from relpos_jax.grid import resize as resize_lib
from relpos_jax.grid.contract import GridAbsoluteEncoder
from relpos_jax.grid.registry import register


@register('sincos2d')
@dataclasses.dataclass(frozen=True)
class SinCos2D(GridAbsoluteEncoder):
  """`sincos2d`: the sinusoids at every grid's own coordinates (they extrapolate); `sincos2d(resize=bicubic,
  size=7)`: the table of the size x size training grid, resized to the grid met by bicubic interpolation
  (relpos_jax.grid.resize), as MAE / DeiT fine-tune their position table at a new resolution (`embed_grid`;
  explicit coordinates read the sinusoids)."""

  resize: str | None = None
  size: int | None = None

  def __post_init__(self):
    super().__post_init__()
    validation.require(self.axes == 2, self.name, 'axes', self.axes, '2 (MAE embeds rows and columns)')
    if self.resize is None:
      validation.require(
          self.size is None, self.name, 'size', self.size, 'None without resize (the grid it resizes from)'
      )
    else:
      resize_lib.check_method(self.name, self.resize)
      validation.require(
          self.size is not None, self.name, 'size', self.size, 'the training grid side the table is resized from'
      )
      validation.positive_int(self.name, 'size', self.size, maximum=1024)

  def embed_grid(self, params, shape, *, class_token: bool = False):
    if self.resize is None:
      return super().embed_grid(params, shape, class_token=class_token)
    return _resized_embedding(self, params, (self.size, self.size), shape, class_token)

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


@register('learned2d')
@dataclasses.dataclass(frozen=True)
class Learned2D(GridAbsoluteEncoder):
  """ViT's learned absolute position embedding (Dosovitskiy et al. 2021, google-research/vision_transformer
  `AddPositionEmbs`: a (1, N, D) parameter, normal(std=0.02)), as a table of max_size^axes rows read at the
  token's coordinates (row-major), so a grid smaller than the table reads its top-left corner. It cannot
  extrapolate: a grid with a side above max_size is refused by name (`check_grid`), concrete coordinates
  outside [0, max_size) too, and traced ones there give NaN. The class token's embedding is zeros (ViT learns
  the class token itself instead)."""

  any_size = False

  max_size: int = 16
  resize: str | None = None

  def __post_init__(self):
    super().__post_init__()
    validation.positive_int(self.name, 'max_size', self.max_size, maximum=1024)
    if self.resize is not None:
      resize_lib.check_method(self.name, self.resize)

  def embed_grid(self, params, shape, *, class_token: bool = False):
    """With `resize` (learned2d(max_size=7, resize=bicubic)): the max_size^axes table resized to the grid `shape` by
    bicubic interpolation (relpos_jax.grid.resize), ViT's "2D interpolation of the pre-trained position embeddings"
    at a new resolution (larger or smaller; the table itself at its own grid). Without: the table read at the
    grid's coordinates (its top-left corner; a side above max_size refused)."""
    if self.resize is None:
      return super().embed_grid(params, shape, class_token=class_token)
    return _resized_embedding(self, params, (self.max_size,) * self.axes, shape, class_token)

  @property
  def max_length(self):
    return self.max_size**self.axes

  def check_grid(self, shape) -> None:
    shape = positions_lib.check_shape(self.name, shape)
    if self.resize is not None:  # resized to any grid (`embed_grid`)
      resize_lib.check_grid_shape(self.name, 'grid shape', shape, axes=self.axes)
      return
    if max(shape) > self.max_size:
      raise ValueError(
          f'{self.name}: the grid {shape} has a side above the learned table of max_size={self.max_size} per axis; '
          'a learned absolute table cannot extrapolate. Use a grid of side <= max_size or a larger max_size.'
      )

  def init_params(self, rng, dims_):
    import jax

    return {'table': 0.02 * jax.random.normal(rng, (self.max_length, dims_.model_dim), jnp.float32)}

  def embed(self, params, positions):
    coords = self.coordinates(positions)
    cls = positions_lib.is_class_token(coords)
    c = jnp.where(cls[..., None], 0, jnp.round(coords).astype(jnp.int32))
    values = validation.concrete(c)
    if values is not None and values.size and (values.min() < 0 or values.max() >= self.max_size):
      raise ValueError(
          f'{self.name}: coordinates up to {values.max()} (min {values.min()}) are outside the learned table '
          f'[0, {self.max_size}) per axis; a learned absolute table cannot extrapolate.'
      )
    inside = jnp.all((c >= 0) & (c < self.max_size), axis=-1)
    index = jnp.zeros(c.shape[:-1], jnp.int32)
    for a in range(self.axes):
      index = index * self.max_size + jnp.clip(c[..., a], 0, self.max_size - 1)
    emb = jnp.take(params['table'], index, axis=0)
    emb = jnp.where(inside[..., None], emb, jnp.nan)  # traced coordinates beyond the table: NaN, not a clip
    return jnp.where(cls[..., None], 0.0, emb)


def _resized_embedding(encoder, params, from_shape, shape, class_token):
  """(N, D): the encoder's table on the grid `from_shape` (its `embed` there) resized to the grid `shape`, in
  raster order; a class token's row (zeros, as `embed` gives it) first."""
  shape = resize_lib.check_grid_shape(encoder.name, 'shape', shape, axes=encoder.axes)
  table = encoder.embed(params, positions_lib.grid_positions(from_shape))
  out = resize_lib.resize_table(table, from_shape, shape, encoder.resize, who=encoder.name)
  if class_token:
    out = jnp.concatenate([jnp.zeros((1, out.shape[1]), out.dtype), out], axis=0)
  return out

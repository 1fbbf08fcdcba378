"""Swin Transformer's relative position biases (Liu et al. 2021, 2022; reference code microsoft/Swin-Transformer,
models/swin_transformer.py and models/swin_transformer_v2.py, `WindowAttention`).

swin (v1): a learned table B of (2M - 1)^2 x H entries for a window of M x M tokens, read at

    index(delta) = (delta_row + M - 1) * (2M - 1) + (delta_col + M - 1),      delta = p_i - p_j

(the reference's `relative_position_index`, built from `coords_flatten[:, :, None] - coords_flatten[:, None, :]`),
initialised trunc_normal(std=0.02). A table has integer rows: float coordinates are read at the nearest integer
offset (integral ones exactly). It covers |delta_a| <= M - 1 only: a grid of side > M is refused by name
(`check_grid`), and an offset beyond the table at traced coordinates gives NaN, never a clipped value. axes = 3
is Video Swin's (2T - 1)(2M - 1)^2 table with the same window on every axis.

swin_v2_cpb (v2's continuous position bias): an MLP on log-spaced offsets,

    t_a = 8 * delta_a / (M_pre - 1)                                (the reference divides by pretrained_window - 1)
    x_a = sign(t_a) * log2(|t_a| + 1) / log2(8)
    B_h(delta) = 16 * sigmoid(MLP(x)_h),   MLP = Linear(axes, 512) -> ReLU -> Linear(512, H, no bias)

(`relative_coords_table`, `cpb_mlp`, `16 * torch.sigmoid(...)`), PyTorch's default Linear initialisation. M_pre
= `pretrained_window`, the grid side trained at (7 in Swin v2's ImageNet-1k models), fixes the normalisation so
the function of delta is the same at every grid size; the log spacing is what lets a larger grid reuse it. The
reference divides by the current window when no pretrained window is given; here it is always given (a
normaliser that moves with the grid would change the function under the resolution study). Swin v2 adds the
bias to cosine attention scores scaled by a learned logit scale; here it is added to the layer's scaled dot
product, like every scalar bias. The class token gets 0 (Swin has none).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation
from relpos_jax.grid import positions as positions_lib
from relpos_jax.grid import resize as resize_lib
from relpos_jax.grid.contract import GridBiasEncoder
from relpos_jax.grid.registry import register


@register('swin')
@dataclasses.dataclass(frozen=True)
class Swin(GridBiasEncoder):
  """`swin(window=7)`; `swin(window=7, resize=bicubic)`: at a grid of sides n_a the table, (2M - 1) rows per axis,
  is resized to (2 n_a - 1) rows per axis by bicubic interpolation (relpos_jax.grid.resize), as Swin v1 fine-tunes
  at a new window ("bi-cubic interpolation" of the relative position bias, Liu et al. 2021, section 4.1). The
  grid is the one the layer is given (`grid_shape`, the ViT's patch grid); at the window's own grid the table is
  itself. Explicit coordinates (`pair_bias`, `bias`) read the unresized table, within the window."""

  any_size = False

  window: int = 7
  resize: str | None = None

  def __post_init__(self):
    super().__post_init__()
    validation.positive_int(self.name, 'window', self.window, maximum=1024)
    if self.resize is not None:
      resize_lib.check_method(self.name, self.resize)

  def max_offset(self):
    return self.window - 1

  def check_grid(self, shape) -> None:
    if self.resize is None:
      return super().check_grid(shape)
    shape = positions_lib.check_shape(self.name, shape)
    validation.require(
        len(shape) == self.axes, self.name, 'grid shape', shape, f'{self.axes} axes (the encoder has axes={self.axes})'
    )
    resize_lib.check_grid_shape(self.name, 'grid shape', tuple(2 * n - 1 for n in shape), axes=self.axes)

  def grid_offset_bias(self, params, shape):
    """(P, H) at the distinct offsets of `shape`: the table resized to (2 n_a - 1) rows per axis (`resize`), or
    read at the offsets (no `resize`: the window's table, which refuses offsets beyond it)."""
    if self.resize is None:
      return super().grid_offset_bias(params, shape)
    self.check_grid(shape)
    window = (2 * self.window - 1,) * self.axes
    return resize_lib.resize_table(params['table'], window, tuple(2 * n - 1 for n in shape), self.resize, who=self.name)

  def init_params(self, rng, dims_):
    size = (2 * self.window - 1) ** self.axes
    table = 0.02 * jax.random.truncated_normal(rng, -2.0 / 0.02, 2.0 / 0.02, (size, dims_.num_heads), jnp.float32)
    return {'table': table}

  def index(self, delta):
    """Int32 (...): the table row of offsets delta (..., axes), and bool (...): whether the table covers it."""
    d = jnp.round(jnp.asarray(delta)).astype(jnp.int32)
    m = self.window
    inside = jnp.all(jnp.abs(d) <= m - 1, axis=-1)
    index = jnp.zeros(d.shape[:-1], jnp.int32)
    for a in range(self.axes):
      index = index * (2 * m - 1) + (d[..., a] + m - 1)
    return jnp.where(inside, index, 0), inside

  def bias(self, params, delta):
    values = validation.concrete(delta)
    if values is not None and values.size and np.abs(values).max() > self.window - 1:
      raise ValueError(
          f'{self.name}: offsets up to {np.abs(values).max()} per axis, beyond the learned table, which covers '
          f'|p_i - p_j| <= {self.window - 1} (window={self.window}); a learned table cannot extrapolate. Use a grid '
          f'of side <= {self.window}, a larger window, or an encoder that extrapolates.'
      )
    index, inside = self.index(delta)
    out = jnp.take(params['table'], index, axis=0)
    return jnp.where(inside[..., None], out, jnp.nan)  # traced coordinates beyond the table: NaN, not a clip


@register('swin_v2_cpb')
@dataclasses.dataclass(frozen=True)
class SwinV2CPB(GridBiasEncoder):
  pretrained_window: int = 7
  mlp_width: int = 512

  def __post_init__(self):
    super().__post_init__()
    validation.positive_int(self.name, 'pretrained_window', self.pretrained_window, minimum=2, maximum=2**16)
    validation.positive_int(self.name, 'mlp_width', self.mlp_width, maximum=2**16)

  def init_params(self, rng, dims_):
    k1, k2, k3 = jax.random.split(rng, 3)
    b1, b2 = 1.0 / math.sqrt(self.axes), 1.0 / math.sqrt(self.mlp_width)
    return {
        'hidden_kernel': jax.random.uniform(k1, (self.axes, self.mlp_width), jnp.float32, -b1, b1),
        'hidden_bias': jax.random.uniform(k2, (self.mlp_width,), jnp.float32, -b1, b1),
        'out_kernel': jax.random.uniform(k3, (self.mlp_width, dims_.num_heads), jnp.float32, -b2, b2),
    }

  def log_coordinates(self, delta):
    """The MLP's input: sign(t) log2(|t| + 1) / log2(8), t = 8 delta / (pretrained_window - 1)."""
    t = jnp.asarray(delta, jnp.float32) / (self.pretrained_window - 1) * 8.0
    return jnp.sign(t) * jnp.log2(jnp.abs(t) + 1.0) / np.log2(8.0)

  def bias(self, params, delta):
    hidden = jax.nn.relu(self.log_coordinates(delta) @ params['hidden_kernel'] + params['hidden_bias'])
    return 16.0 * jax.nn.sigmoid(hidden @ params['out_kernel'])

"""A learned grid table resized to another grid by bicubic interpolation, as ViTs are fine-tuned at a new resolution.

    table = resize_table(table, (7, 7), (14, 14))            # (49, D) -> (196, D), jax.image.resize per axis
    grid.make('learned2d', max_size=7, resize='bicubic')     # ViT's absolute table, resized to the grid it meets
    grid.make('sincos2d', resize='bicubic', size=7)          # MAE's table of the 7 x 7 grid, resized the same way
    grid.make('swin', window=7, resize='bicubic')            # Swin v1's (2M - 1)^2 table resized to (2n - 1)^2

The practice this reproduces: a ViT fine-tuned or evaluated at a resolution other than its training one reads its
absolute position table resized to the new patch grid (Dosovitskiy et al. 2021, section 3.2, "2D interpolation of
the pre-trained position embeddings"; DeiT / MAE / timm `resample_abs_pos_embed`: bicubic), and Swin v1 resizes its
relative position bias table, (2M - 1)^2 rows, to the new window's (2n - 1)^2 rows by bicubic interpolation (Liu et
al. 2021, section 4.1, fine-tuning at 384^2). The rows are laid out row-major on the grid (axis 0 slowest), so the
table reshapes to (n_0, n_1, ..., D) and jax.image.resize interpolates the grid axes only (the D channels are never
mixed). An equal grid is the table itself, bit for bit (jax.image.resize skips every axis of scale 1).

Methods: 'bicubic' is jax.image.resize's 'cubic' (Keys' kernel, a = -0.5, half-pixel centres, the border weights
renormalised); 'cubic_pytorch' is PyTorch's F.interpolate(mode='bicubic', align_corners=False) that timm and
Swin's code call (a = -0.75, the border replicated). Upsampling only in the resolution study; downsampling is
antialiased (jax.image.resize's default), as timm's `antialias=True`.

Refused up front, naming the key: a method not among RESIZE_METHODS, a table whose rows are not the grid's cells
(`from_shape`), and a size to interpolate to that is not a grid (`to_shape`: a tuple of as many ints >= 1 as the
table's grid has axes, at most MAX_RESIZED_SIDE per axis).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from relpos_jax import validation

RESIZE_METHODS = ('bicubic', 'cubic_pytorch')
_JAX_METHOD = {'bicubic': 'cubic', 'cubic_pytorch': 'cubic_pytorch'}
# The largest side a table is resized to: a (2 * 1024 - 1)-row relative table per axis covers a 1,024-token side,
# the resolution study's MAX_SIDE.
MAX_RESIZED_SIDE = 2 * 1024 - 1


def check_method(who: str, method) -> str:
  """`resize`: one of RESIZE_METHODS (ValueError naming the key and the allowed values)."""
  validation.choice(who, 'resize', method, RESIZE_METHODS)
  return method


def check_grid_shape(who: str, field: str, shape, axes: int | None = None) -> tuple[int, ...]:
  """A grid to interpolate to (or from): a tuple of `axes` ints in [1, MAX_RESIZED_SIDE]."""
  ok = (
      isinstance(shape, (tuple, list))
      and len(shape) >= 1
      and (axes is None or len(shape) == axes)
      and all(validation.is_int(n) and 1 <= n <= MAX_RESIZED_SIDE for n in shape)
  )
  axes_text = f'{axes} ' if axes is not None else ''
  validation.require(
      ok, who, field, shape, f'a grid: a tuple of {axes_text}ints in [1, {MAX_RESIZED_SIDE}] (one side per axis)'
  )
  return tuple(int(n) for n in shape)


def resize_table(table, from_shape, to_shape, method: str = 'bicubic', *, who: str = 'resize_table') -> jax.Array:
  """(prod(from_shape), D) rows of a grid (row-major) -> (prod(to_shape), D) float32, interpolated per grid axis."""
  check_method(who, method)
  from_shape = check_grid_shape(who, 'from_shape', from_shape)
  to_shape = check_grid_shape(who, 'to_shape', to_shape, axes=len(from_shape))
  table = jnp.asarray(table, jnp.float32)
  validation.require(
      table.ndim == 2 and table.shape[0] == math.prod(from_shape),
      who,
      'table',
      f'<shape {tuple(table.shape)}>',
      f'(prod(from_shape) = {math.prod(from_shape)}, D): one row per cell of the grid {from_shape}',
  )
  if to_shape == from_shape:
    return table
  grid = table.reshape(from_shape + (table.shape[1],))
  out = jax.image.resize(grid, to_shape + (table.shape[1],), method=_JAX_METHOD[method])
  return out.reshape(math.prod(to_shape), table.shape[1])

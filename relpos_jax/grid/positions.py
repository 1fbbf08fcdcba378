"""Coordinates as positions: grids of tokens, offsets, and the block-Toeplitz expansion of a grid bias.

A token on a grid has a coordinate vector: (row, column) on an H x W image, (frame, row, column) on a T x H x W
video. Positions are arrays (..., axes), integer or float; the 1-D package is the case axes = 1 written without
the trailing axis (relpos_jax.positions).

Sign convention of the grid encoders (relpos_jax/grid): the offset of key j seen from query i is, per axis,

    delta[i, j] = p_i - p_j            (query minus key)

as the grid references write it (iRPE's `diff = pos1 - pos2`, Swin's `coords[:, :, None] - coords[:, None, :]`,
and the README's "Positions on a grid"). It is the opposite sign of the 1-D package's rel = j - i; the
encoders that are symmetric (distances, ALiBi, KERPLE, FIRE) do not see the difference, the tables and iRPE's
product method do (their index is the reference's).

Raster order. `grid_positions(shape)` lists the tokens row-major (the last axis fastest), as a patch embedding
flattens an image; with `class_token=True` the class token comes first. The class token takes no position: its
coordinates are the sentinel CLASS_TOKEN in every axis, which no grid encoder reads as a place (`is_class_token`):
the scalar biases give its pairs their class bias (iRPE: its own learned bucket, as the reference's `skip` token;
encoders whose reference has no class token: 0), the rotary encoders leave it unrotated (rope-vit rotates x[:, 1:]).

Built from distinct offsets. A relative bias over an H x W grid depends on (p_i - p_j) only, which takes
(2H - 1)(2W - 1) values: `distinct_offsets` lists them and `block_toeplitz_index` says which one each pair
(i, j) reads, so an encoder is evaluated on the distinct offsets once and gathered (`block_toeplitz`): Toeplitz
blocks (along the columns) in a Toeplitz pattern (along the rows), the 1-D construction one level up.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from relpos_jax import validation

# The coordinates of a class token (every axis): a value no grid coordinate takes (real coordinates must be
# > CLASS_TOKEN / 2), exactly representable in float32 so float coordinates can carry it too.
CLASS_TOKEN = -(2**24)
# Real coordinates are bounded so that an offset of two of them stays far from the sentinel.
MAX_COORDINATE = 2**22


def check_shape(who: str, shape) -> tuple[int, ...]:
  """A grid shape: a tuple of 2 or 3 ints >= 1 (H x W, or T x H x W)."""
  ok = isinstance(shape, (tuple, list)) and len(shape) in (2, 3) and all(validation.is_int(n) and n >= 1 for n in shape)
  validation.require(ok, who, 'shape', shape, 'a tuple of 2 or 3 ints >= 1 (H, W) or (T, H, W)')
  size = math.prod(int(n) for n in shape)
  validation.require(
      size <= validation.MAX_TABLE_ROWS, who, 'shape', shape, f'at most {validation.MAX_TABLE_ROWS} tokens'
  )
  return tuple(int(n) for n in shape)


def grid_positions(shape, *, class_token: bool = False) -> jax.Array:
  """Int32 (N, axes) coordinates of the tokens of a grid in raster order (N = prod(shape), + 1 with a class
  token first, whose coordinates are CLASS_TOKEN)."""
  shape = check_shape('grid_positions', shape)
  class_token = validation.boolean('grid_positions', 'class_token', class_token)
  mesh = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing='ij'), axis=-1).reshape(-1, len(shape))
  if class_token:
    mesh = np.concatenate([np.full((1, len(shape)), CLASS_TOKEN), mesh], axis=0)
  return jnp.asarray(mesh, jnp.int32)


def is_class_token(positions) -> jax.Array:
  """Bool (...,): which tokens of positions (..., axes) are class tokens (every coordinate CLASS_TOKEN)."""
  return jnp.all(jnp.asarray(positions) == CLASS_TOKEN, axis=-1)


def check_coordinates(who: str, positions, axes: int, field: str = 'positions') -> jax.Array:
  """Coordinates (..., axes), integer (-> int32) or float (-> float32), checked where they meet an encoder.

  Refused, naming `who` and the shape: a rank-0 array, a trailing axis other than `axes` (1-D positions given to
  a grid encoder included), bool or complex values, and, when the values are concrete, non-finite floats or
  coordinates of magnitude > MAX_COORDINATE that are not the class token's.
  """
  arr = positions if isinstance(positions, jax.Array) else np.asarray(positions)
  shape = tuple(arr.shape)
  if arr.ndim < 1 or shape[-1] != axes:
    raise ValueError(
        f'{who}: {field} must be coordinates with a trailing axis of {axes} (..., {axes}) (e.g. (batch, length, '
        f'{axes}); relpos_jax.grid.grid_positions builds them), got shape {shape}. A grid encoder reads one '
        f'coordinate per axis; 1-D positions (batch, length) are for the 1-D encoders.'
    )
  integer = jnp.issubdtype(arr.dtype, jnp.integer)
  if not integer and not jnp.issubdtype(arr.dtype, jnp.floating):
    raise ValueError(f'{who}: {field} must be int or float coordinates, got {arr.dtype} {shape}.')
  values = validation.concrete(arr)
  if values is not None and values.size:
    if not integer and not np.isfinite(values).all():
      bad = values[~np.isfinite(values)].reshape(-1)[0]
      raise ValueError(f'{who}: {field} holds a non-finite coordinate ({bad}); allowed: finite coordinates.')
    real = values[~np.all(values == CLASS_TOKEN, axis=-1)]
    if real.size and np.abs(real).max() > MAX_COORDINATE:
      raise ValueError(
          f'{who}: {field} holds a coordinate of magnitude {np.abs(real).max()}, beyond the supported '
          f'{MAX_COORDINATE} (2^22; the class token is marked by {CLASS_TOKEN}).'
      )
  return jnp.asarray(arr, jnp.int32 if integer else jnp.float32)


def offsets(q_pos, k_pos) -> jax.Array:
  """delta = q_pos - k_pos per axis, broadcast over the leading axes: (..., axes) of the coordinates' type."""
  return jnp.asarray(q_pos) - jnp.asarray(k_pos)


def distinct_offsets(shape) -> jax.Array:
  """Int32 (P, axes), P = prod(2 n - 1): every offset p_i - p_j of two tokens of the grid, in raster order of
  the per-axis offsets -(n - 1) .. n - 1 (entry of offset d: sum_a (d_a + n_a - 1) * stride_a)."""
  shape = check_shape('distinct_offsets', shape)
  axes = [np.arange(-(n - 1), n) for n in shape]
  return jnp.asarray(np.stack(np.meshgrid(*axes, indexing='ij'), axis=-1).reshape(-1, len(shape)), jnp.int32)


def num_distinct_offsets(shape) -> int:
  return math.prod(2 * n - 1 for n in check_shape('num_distinct_offsets', shape))


def block_toeplitz_index(shape, *, class_token: bool = False) -> np.ndarray:
  """Int32 (N, N): entry (i, j) = the row of `distinct_offsets(shape)` holding p_i - p_j (raster order). With a
  class token (first row and column), its pairs read row P, one past the distinct offsets (its bucket)."""
  shape = check_shape('block_toeplitz_index', shape)
  coords = np.stack(np.meshgrid(*[np.arange(n) for n in shape], indexing='ij'), axis=-1).reshape(-1, len(shape))
  coords = coords.astype(np.int32)
  strides = np.cumprod([1] + [2 * n - 1 for n in shape[::-1]][:-1])[::-1]
  # One axis at a time into one int32 (N, N): the output is the only N x N array (an (N, N, axes) int64
  # intermediate would be 4 GiB at 128 x 128).
  index = np.zeros((coords.shape[0],) * 2, np.int32)
  for axis, (n, stride) in enumerate(zip(shape, strides)):
    column = coords[:, axis]
    index += (column[:, None] - column[None, :] + np.int32(n - 1)) * np.int32(stride)
  if class_token:
    p = math.prod(2 * n - 1 for n in shape)
    index = np.pad(index, ((1, 0), (1, 0)), constant_values=p)
  return index.astype(np.int32)


def block_toeplitz(values: jax.Array, shape, *, class_token: bool = False) -> jax.Array:
  """Expands (..., P) values at the distinct offsets (+ 1 class-token value last, with `class_token`) into the
  (..., N, N) matrix of every pair: out[..., i, j] = values[..., index of p_i - p_j]. One gather."""
  shape = check_shape('block_toeplitz', shape)
  expected = num_distinct_offsets(shape) + int(class_token)
  if values.shape[-1] != expected:
    raise ValueError(
        f'block_toeplitz: values has {values.shape[-1]} entries on its last axis; the grid {shape} has '
        f'prod(2n - 1) = {num_distinct_offsets(shape)} distinct offsets'
        + (' + 1 class-token value' if class_token else '')
        + f' = {expected}.'
    )
  return jnp.take(values, jnp.asarray(block_toeplitz_index(shape, class_token=class_token)), axis=-1)

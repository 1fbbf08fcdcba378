"""The (H, N, N) bias of a grid bias encoder: from its prod(2n - 1) distinct offsets when it is relative.

`grid_bias_matrix(encoder, params, shape)` evaluates `encoder.bias` on `positions.distinct_offsets(shape)` only
((2H - 1)(2W - 1) offsets for H x W, instead of (HW)^2 pairs: what makes Swin v2's MLP affordable, as its
reference evaluates the MLP on the (2M - 1)^2 table and gathers) and expands them with `positions.block_toeplitz`;
a query-dependent encoder (FIRE-2D, is_toeplitz False) takes `pair_bias` on every pair of the grid.
`grid_bias_at_positions` evaluates every pair of arbitrary (batch, length, axes) coordinates. `grid_bias_table` is
the (H, P) table of distinct values alone, which the blockwise attention path gathers per tile.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relpos_jax import checks, validation
from relpos_jax.encoders import contract
from relpos_jax.grid import contract as grid_contract
from relpos_jax.grid import positions as positions_lib


def _check_encoder(who, encoder):
  name = getattr(encoder, 'name', None) or type(encoder).__name__
  validation.require(
      grid_contract.is_grid(encoder) and encoder.kind is contract.Kind.SCALAR_BIAS,
      who,
      'encoder',
      name,
      'a grid bias encoder (relpos_jax.grid.make(...), e.g. alibi2d); a 1-D encoder reads positions (batch, length), '
      'not coordinates: use relpos_jax.bias_matrix for it',
  )


def grid_bias_matrix(encoder, params, shape, *, class_token: bool = False) -> jax.Array:
  """The (num_heads, N, N) bias over the grid `shape` in raster order (N = prod(shape), + 1 with a class token
  first). Relative encoders: evaluated on the distinct offsets and gathered (block-Toeplitz)."""
  _check_encoder('grid_bias_matrix', encoder)
  shape = positions_lib.check_shape('grid_bias_matrix', shape)
  contract.check_params(encoder, params)
  encoder.check_grid(shape)
  if encoder.is_toeplitz:
    out = positions_lib.block_toeplitz(_table(encoder, params, shape, class_token), shape, class_token=class_token)
  else:
    coords = positions_lib.grid_positions(shape, class_token=class_token)
    out = jnp.moveaxis(encoder.pair_bias(params, coords[:, None], coords[None, :]), -1, 0)
  n = out.shape[-1]
  checks.assert_bias_shape(out, q_len=n, k_len=n)
  return out


def _table(encoder, params, shape, class_token):
  # (P, H) at the distinct offsets; a table resized to the grid (swin's `resize`) builds them itself.
  at_grid = getattr(encoder, 'grid_offset_bias', None)
  values = (
      at_grid(params, shape) if at_grid is not None else encoder.bias(params, positions_lib.distinct_offsets(shape))
  )
  values = jnp.asarray(values, jnp.float32)
  checks.assert_bias_values(values, positions_lib.num_distinct_offsets(shape))
  if class_token:
    values = jnp.concatenate([values, encoder.class_bias(params)[None]], axis=0)
  return values.T


def grid_bias_table(encoder, params, shape, *, class_token: bool = False) -> jax.Array:
  """(num_heads, P) float32: a relative grid bias at the P = prod(2n - 1) distinct offsets of the grid `shape`
  (`positions.distinct_offsets` order), + its class-token value last with `class_token`. What the blockwise
  path gathers per tile (relpos_jax.nn.terms.grid.GridTableBias, whose `prepare` this is) instead of the (H, N, N) matrix; ValueError for a
  query-dependent encoder (is_toeplitz False: no table of offsets)."""
  _check_encoder('grid_bias_table', encoder)
  shape = positions_lib.check_shape('grid_bias_table', shape)
  contract.check_params(encoder, params)
  encoder.check_grid(shape)
  name = getattr(encoder, 'name', None) or type(encoder).__name__
  validation.require(
      encoder.is_toeplitz,
      'grid_bias_table',
      'encoder',
      name,
      'a relative grid bias (a function of p_i - p_j); a query-dependent one (fire2d) has no table: use '
      'grid_bias_matrix',
  )
  return _table(encoder, params, shape, class_token)


def grid_bias_at_positions(encoder, params, q_positions, k_positions) -> jax.Array:
  """The (..., num_heads, Lq, Lk) bias for coordinates q (..., Lq, axes) and k (..., Lk, axes): every pair."""
  _check_encoder('grid_bias_at_positions', encoder)
  contract.check_params(encoder, params)
  q = encoder.coordinates(q_positions, 'q_positions')
  k = encoder.coordinates(k_positions, 'k_positions')
  return jnp.moveaxis(encoder.pair_bias(params, q[..., :, None, :], k[..., None, :, :]), -1, -3)

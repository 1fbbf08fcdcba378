"""The block-Toeplitz assertion: a grid bias that depends on p_i - p_j only, checked on concrete arrays.

Like `relpos_jax.checks.assert_toeplitz` one level up: on an H x W grid in raster order, the (HW, HW) matrix of a
relative bias is made of H x H blocks of W x W; each block is Toeplitz (it depends on the column offset) and the
blocks repeat along the block diagonals (they depend on the row offset). Both at once is "entry (i, j) depends on
p_i - p_j only", which is what is checked (any number of axes): every entry equals the first entry of its offset.
"""

from __future__ import annotations

import numpy as np

from relpos_jax.grid import positions as grid_positions_lib


def first_non_block_toeplitz(x, shape, *, class_token: bool = False, atol: float = 1e-6, rtol: float = 1e-6):
  """None if x (..., N, N) depends on p_i - p_j only over the grid `shape`, else (offset, (i, j), value, (i0, j0),
  reference, lead): the first pair that differs from the first pair (i0, j0) of its offset. With a class token
  (first row and column) its pairs must all hold one value per slice (its bucket)."""
  x = np.asarray(x)
  index = grid_positions_lib.block_toeplitz_index(shape, class_token=class_token)
  n = index.shape[0]
  if x.ndim < 2 or x.shape[-2:] != (n, n):
    raise ValueError(f'assert_block_toeplitz: x must be (..., {n}, {n}) for the grid {tuple(shape)}, got {x.shape}.')
  flat_index = index.reshape(-1)
  _, first = np.unique(flat_index, return_index=True)
  lead_shape = x.shape[:-2]
  flat = x.reshape(lead_shape + (n * n,))
  reference = flat[..., first[np.searchsorted(np.unique(flat_index), flat_index)]]
  bad = ~np.isclose(flat, reference, atol=atol, rtol=rtol, equal_nan=True)
  if not bad.any():
    return None
  where = np.argwhere(bad)[0]
  lead, pair = tuple(int(v) for v in where[:-1]), int(where[-1])
  i, j = divmod(pair, n)
  i0, j0 = divmod(int(first[np.searchsorted(np.unique(flat_index), flat_index[pair])]), n)
  coords = np.asarray(grid_positions_lib.grid_positions(shape, class_token=class_token))
  offset = 'class token' if (class_token and (i == 0 or j == 0)) else tuple(int(v) for v in coords[i] - coords[j])
  return offset, (i, j), flat[lead + (pair,)], (i0, j0), reference[lead + (pair,)], lead


def assert_block_toeplitz(x, shape, *, class_token: bool = False, atol: float = 1e-6, rtol: float = 1e-6) -> None:
  """Asserts x (..., N, N) over the grid `shape` (raster order) depends on the offset p_i - p_j only.

  Raises AssertionError naming the first offset whose entries differ, with the two entries.
  """
  found = first_non_block_toeplitz(x, shape, class_token=class_token, atol=atol, rtol=rtol)
  if found is not None:
    offset, (i, j), value, (i0, j0), reference, lead = found
    where = f' in slice {lead}' if lead else ''
    raise AssertionError(
        f'not block-Toeplitz over the grid {tuple(shape)}: offset p_i - p_j = {offset} is not constant{where}: entry '
        f'(i={i}, j={j}) = {float(value):.6g} differs from entry (i={i0}, j={j0}) = {float(reference):.6g}.'
    )

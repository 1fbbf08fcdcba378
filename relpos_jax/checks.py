"""Assertions used where shapes meet: lengths, attention inputs, biases, and the Toeplitz structure.

The shape checks are chex assertions, so they run at trace time under `jax.jit` at no run-time cost.
`assert_toeplitz` inspects values: call it on concrete arrays (tests, notebooks, debug mode of the layer,
which runs it through `jax.debug.callback`).
"""

from __future__ import annotations

import chex
import jax
import numpy as np


def assert_bias_values(values: jax.Array, num_positions: int) -> None:
  """A scalar encoder's output for `num_positions` relative positions: (num_positions, num_heads)."""
  chex.assert_rank(values, 2)
  chex.assert_axis_dimension(values, 0, num_positions)


def assert_bias_shape(bias: jax.Array, *, q_len: int, k_len: int, num_heads: int | None = None) -> None:
  """An attention bias: (..., num_heads, q_len, k_len)."""
  chex.assert_rank(bias, {3, 4})
  chex.assert_axis_dimension(bias, -2, q_len)
  chex.assert_axis_dimension(bias, -1, k_len)
  if num_heads is not None:
    chex.assert_axis_dimension(bias, -3, num_heads)


def assert_qkv_shapes(query: jax.Array, key: jax.Array, value: jax.Array) -> None:
  """Queries (B, Lq, H, D), keys (B, Lk, H, D) and values (B, Lk, H, Dv) with matching batch and heads.

  Dv = D except after an encoder that maps q and k to another size (PoPE's polar form doubles it).
  """
  chex.assert_rank([query, key, value], 4)
  chex.assert_equal_shape_prefix([key, value], 3)
  chex.assert_equal_shape_prefix([query, key], 1)
  chex.assert_equal_shape_suffix([query, key], 2)


def first_non_toeplitz_diagonal(x, atol: float = 1e-6, rtol: float = 1e-6):
  """Returns None if x (..., M, N) is Toeplitz, else (d, (i, j), value, (i0, j0), reference, lead).

  d = j - i names the diagonal, (i, j) its first entry that differs from the diagonal's first entry (i0, j0),
  and lead the index of the (M, N) slice it is in (empty for a 2-D x).
  """
  x = np.asarray(x)
  if x.ndim < 2:
    raise ValueError(f'assert_toeplitz needs an array of rank >= 2, got shape {x.shape}.')
  m, n = x.shape[-2:]
  # Fast path: exactly Toeplitz iff each entry equals its upper-left neighbour (a gathered bias is).
  if np.array_equal(x[..., 1:, 1:], x[..., :-1, :-1], equal_nan=True):
    return None
  for d in range(-(m - 1), n):
    diag = np.diagonal(x, offset=d, axis1=-2, axis2=-1)  # (..., len)
    ref = diag[..., :1]
    bad = ~np.isclose(diag, ref, atol=atol, rtol=rtol, equal_nan=True)
    if bad.any():
      where = np.argwhere(bad)[0]
      lead, t = tuple(int(v) for v in where[:-1]), int(where[-1])
      i0, j0 = (0, d) if d >= 0 else (-d, 0)
      return d, (i0 + t, j0 + t), diag[lead + (t,)], (i0, j0), diag[lead + (0,)], lead
  return None


def assert_toeplitz(x, atol: float = 1e-6, rtol: float = 1e-6) -> None:
  """Asserts every diagonal of the last two axes of x is constant.

  Raises AssertionError naming the first diagonal d = j - i that is not, with the offending entries.
  """
  found = first_non_toeplitz_diagonal(x, atol=atol, rtol=rtol)
  if found is not None:
    d, (i, j), value, (i0, j0), reference, lead = found
    where = f' in slice {lead}' if lead else ''
    raise AssertionError(
        f'not Toeplitz: diagonal j - i = {d} is not constant{where}: entry (i={i}, j={j}) = {float(value):.6g} '
        f'differs from entry (i={i0}, j={j0}) = {float(reference):.6g}.'
    )

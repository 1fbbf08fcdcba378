"""Relative positions and the Toeplitz expansion of a relative bias.

Sign convention (kept everywhere in relpos_jax): the relative position of key j seen from query i is

    rel[i, j] = j - i

so keys in the past have negative relative positions, as in the lecture's R[i, j] = j - i (section 2; what the
lecture is: `relpos_jax`'s docstring).

A bias that depends only on j - i is a Toeplitz matrix: constant along every diagonal. For q_len queries and
k_len keys it has exactly q_len + k_len - 1 distinct values, so `relpos_jax.bias_matrix` evaluates an encoder
on those values only and expands them here (`toeplitz`, one gather), instead of evaluating it on all
q_len * k_len pairs. This module is the ground floor of the package: it knows positions, never encoders.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relpos_jax import validation


def check_lengths(who: str, q_len, k_len, q_offset=0):
  """Lengths fix array shapes (Python ints >= 1); q_offset is an integer (static or traced) in range."""
  return (
      validation.positive_int(who, 'q_len', q_len),
      validation.positive_int(who, 'k_len', k_len),
      validation.offset(who, q_offset),
  )


def toeplitz_index(q_len: int, k_len: int) -> jax.Array:
  """Int32 (q_len, k_len): entry (i, j) = j - i + q_len - 1, the row of diagonal j - i in the layout of
  `distinct_relative_positions` (an iota expression XLA fuses into the gather that reads it)."""
  return jnp.arange(k_len, dtype=jnp.int32)[None, :] - jnp.arange(q_len, dtype=jnp.int32)[:, None] + (q_len - 1)


def relative_positions(q_len: int, k_len: int, q_offset=0) -> jax.Array:
  """Int32 (q_len, k_len) with entry (i, j) = j - (i + q_offset).

  `q_offset` places the queries at positions q_offset .. q_offset + q_len - 1 while the keys sit at
  0 .. k_len - 1: the layout of cached decoding, where the queries are the last positions.
  """
  q_len, k_len, q_offset = check_lengths('relative_positions', q_len, k_len, q_offset)
  q = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
  k = jnp.arange(k_len, dtype=jnp.int32)
  return k[None, :] - q[:, None]


def distinct_relative_positions(q_len: int, k_len: int, q_offset=0) -> jax.Array:
  """The q_len + k_len - 1 values taken by `relative_positions`, ascending.

  Entry n holds the relative position n - (q_len - 1) - q_offset, so diagonal j - i = d of the full matrix
  reads entry d + q_len - 1 (see `toeplitz`).
  """
  q_len, k_len, q_offset = check_lengths('distinct_relative_positions', q_len, k_len, q_offset)
  return jnp.arange(q_len + k_len - 1, dtype=jnp.int32) - (q_len - 1) - jnp.asarray(q_offset, jnp.int32)


def toeplitz(values: jax.Array, q_len: int, k_len: int) -> jax.Array:
  """Expands (..., q_len + k_len - 1) diagonal values into (..., q_len, k_len).

  out[..., i, j] = values[..., j - i + q_len - 1], i.e. the layout of `distinct_relative_positions`.
  The index matrix is an iota expression XLA fuses into the gather; no encoder work is repeated.
  """
  q_len, k_len, _ = check_lengths('toeplitz', q_len, k_len)
  if values.shape[-1] != q_len + k_len - 1:
    raise ValueError(
        f'toeplitz: values has {values.shape[-1]} diagonals on its last axis; q_len={q_len} and '
        f'k_len={k_len} need q_len + k_len - 1 = {q_len + k_len - 1}.'
    )
  return jnp.take(values, toeplitz_index(q_len, k_len), axis=-1)

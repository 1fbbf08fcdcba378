"""The (H, Lq, Lk) bias of a scalar-bias encoder: from its Lq + Lk - 1 distinct values when it is Toeplitz.

`bias_matrix(encoder, params, q_len, k_len)` evaluates `encoder.bias` on the distinct relative positions only
and expands them with `relpos_jax.positions.toeplitz`; an encoder whose bias also reads the query position
(FIRE) takes `encoder.pair_bias` on the position grid. `bias_at_positions` evaluates every pair at arbitrary
(e.g. randomized) positions. It sits above `positions` (which knows no encoder) and the encoders' contract.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from relpos_jax import checks, validation
from relpos_jax.encoders import contract
from relpos_jax.positions import check_lengths, distinct_relative_positions, toeplitz


def bias_matrix(encoder, params, q_len: int, k_len: int, q_offset=0) -> jax.Array:
  """The (num_heads, q_len, k_len) attention bias of a scalar-bias encoder.

  Toeplitz encoders (`encoder.is_toeplitz`) are evaluated on the q_len + k_len - 1 distinct relative
  positions only and expanded with `toeplitz`. Encoders whose bias also depends on the query position
  (FIRE) are not Toeplitz; they take their own path, `encoder.pair_bias` on the position grid.
  """
  if encoder.kind is not contract.Kind.SCALAR_BIAS:
    raise ValueError(
        f'bias_matrix needs a scalar-bias encoder; {type(encoder).__name__} is of kind '
        f'{encoder.kind.value!r}. Rotary, vector-relative and absolute encoders act inside the '
        f'attention layer (relpos_jax.nn) instead.'
    )
  q_len, k_len, q_offset = check_lengths('bias_matrix', q_len, k_len, q_offset)
  contract.check_params(encoder, params)
  if encoder.is_toeplitz:
    rel = distinct_relative_positions(q_len, k_len, q_offset)
    values = encoder.bias(params, rel)  # (q_len + k_len - 1, H)
    checks.assert_bias_values(values, rel.shape[0])
    out = toeplitz(values.T, q_len, k_len)
  else:
    q_pos = jnp.arange(q_len, dtype=jnp.int32) + jnp.asarray(q_offset, jnp.int32)
    k_pos = jnp.arange(k_len, dtype=jnp.int32)
    out = jnp.moveaxis(encoder.pair_bias(params, q_pos[:, None], k_pos[None, :]), -1, 0)
  checks.assert_bias_shape(out, q_len=q_len, k_len=k_len)
  return out


def bias_at_positions(encoder, params, q_positions: jax.Array, k_positions: jax.Array) -> jax.Array:
  """The (..., num_heads, q_len, k_len) bias for arbitrary (e.g. randomized) integer positions.

  With non-contiguous positions the bias is no longer Toeplitz in the index space, so every pair is
  evaluated: `q_positions` (..., q_len) and `k_positions` (..., k_len) broadcast over leading axes.
  """
  contract.check_params(encoder, params)
  q = validation.int_array('bias_at_positions', 'q_positions', q_positions)[..., :, None]
  k = validation.int_array('bias_at_positions', 'k_positions', k_positions)[..., None, :]
  return jnp.moveaxis(encoder.pair_bias(params, q, k), -1, -3)

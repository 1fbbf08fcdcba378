"""jax.nn.dot_product_attention (bias + mask) == the explicit einsum path, for every scalar-bias and rotary
encoder case, in float32 and bfloat16."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.encoders import contract
from relpos_jax.nn import RelativeMultiHeadAttention

B, L, DIM, HEADS = 2, 7, 16, 2

_forward = nnx.jit(lambda layer, x, padding_mask, positions: layer(x, padding_mask=padding_mask, positions=positions))


def _pair(encoder, causal, dtype='float32'):
  return [
      RelativeMultiHeadAttention(
          HEADS, DIM, encoder, causal=causal, dtype=dtype, implementation=implementation, rngs=nnx.Rngs(0)
      )
      for implementation in ('xla', 'einsum')
  ]


def test_dot_product_attention_path_equals_einsum_path(scalar_or_rotary_case):
  """Bidirectional (causal for causal-only encoders), with a padding mask and explicit positions."""
  _, encoder = scalar_or_rotary_case
  causal = any(p.requires_causal for p in contract.leaves(encoder))
  x = jax.random.normal(jax.random.key(1), (B, L, DIM))
  padding = jnp.array([[True] * L, [True] * (L - 2) + [False] * 2])
  positions = jnp.broadcast_to(jnp.arange(L, dtype=jnp.int32) * 2 + 3, (B, L))
  fast, slow = _pair(encoder, causal)
  np.testing.assert_allclose(
      _forward(fast, x, padding, positions), _forward(slow, x, padding, positions), atol=2e-5, rtol=1e-5
  )


@pytest.mark.parametrize('name', ['t5', 'rope', 'fire'])
@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])
def test_paths_agree_causally_and_in_bfloat16(name, dtype):
  x = jax.random.normal(jax.random.key(1), (B, L, DIM)).astype(dtype)
  padding = jnp.array([[False] * 2 + [True] * (L - 2), [True] * L])  # Left padding: empty causal rows.
  fast, slow = _pair(encoders.make(name), True, dtype)
  a, b = _forward(fast, x, padding, None), _forward(slow, x, padding, None)
  tol = 2e-5 if dtype == 'float32' else 2e-2
  np.testing.assert_allclose(a.astype(jnp.float32), b.astype(jnp.float32), atol=tol, rtol=tol)

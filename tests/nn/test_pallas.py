"""implementation='pallas' (the Pallas kernel, interpret mode on CPU) == the explicit path, outputs and
gradients, for the kinds it covers; the kinds it does not cover are clear errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import RelativeMultiHeadAttention, functional, terms
from relpos_jax.nn import call

B, L, DIM, HEADS = 2, 11, 16, 2
BLOCK = (4, 3)
TOL = dict(atol=1e-4, rtol=1e-4)


def _layer(encoder, impl, causal=True):
  return RelativeMultiHeadAttention(
      HEADS,
      DIM,
      encoder,
      causal=causal,
      implementation=impl,
      block_size=BLOCK if impl == 'pallas' else None,
      rngs=nnx.Rngs(0),
  )


@nnx.jit
def _value_and_grads(layer, x, cotangent, padding_mask):
  def loss(layer, x):
    return jnp.sum(layer(x, padding_mask=padding_mask) * cotangent)

  return nnx.value_and_grad(loss, argnums=(0, 1))(layer, x)


@pytest.mark.parametrize(
    'name,causal',
    [('alibi', True), ('t5', True), ('rope', False), ('nope', True), ('kerple_log + rope', True), ('shaw', False)],
)
def test_pallas_equals_explicit(name, causal):
  encoder = encoders.from_spec(name)
  x = jax.random.normal(jax.random.key(1), (B, L, DIM))
  cotangent = jax.random.normal(jax.random.key(2), x.shape)
  padding = jnp.array([[False] * 2 + [True] * (L - 2), [True] * (L - 3) + [False] * 3])
  fast = _value_and_grads(_layer(encoder, 'pallas', causal), x, cotangent, padding)
  slow = _value_and_grads(_layer(encoder, 'einsum', causal), x, cotangent, padding)
  (v1, (g1, gx1)), (v2, (g2, gx2)) = fast, slow
  np.testing.assert_allclose(v1, v2, **TOL)
  np.testing.assert_allclose(gx1, gx2, **TOL)
  for a, b in zip(jax.tree.leaves(nnx.state(g1)), jax.tree.leaves(nnx.state(g2))):
    np.testing.assert_allclose(a, b, **TOL)


def test_pallas_cached_decoding_equals_explicit_forward():
  encoder = encoders.make('t5')
  fast, slow = _layer(encoder, 'pallas'), _layer(encoder, 'einsum')
  x = jax.random.normal(jax.random.key(1), (B, L, DIM))
  cache, outs, start = fast.init_cache(B, L + 1), [], 0
  for size in (6, 1, 4):
    y, cache = fast.decode(x[:, start : start + size], cache)
    outs.append(y)
    start += size
  np.testing.assert_allclose(jnp.concatenate(outs, axis=1), slow(x), **TOL)


@pytest.mark.parametrize('name', ['fire', 'shaw_vector', 'transformer_xl'])
def test_kinds_without_an_in_kernel_form_name_the_encoder(name):
  encoder = encoders.from_spec(name)
  parts = terms.parts.attention_parts(encoder)
  params = terms.parts.init_params(parts, jax.random.key(0), num_heads=HEADS, head_dim=8, model_dim=16)
  q = jnp.ones((1, 4, HEADS, 8))
  with pytest.raises(ValueError, match=f"pallas.*'{name}'.*blockwise"):
    functional.attend(
        call.AttentionInputs.checked(q, q, q), parts, params, call.AttentionSettings.checked(implementation='pallas')
    )

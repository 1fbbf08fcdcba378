"""L = 4096: the layer compiles under jax.jit of jax.vmap, with finite values and gradients in float32 and
bfloat16, for one encoder of each attention path (vector-relative included: no (L, L, head_dim) tensor)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import RelativeMultiHeadAttention

LENGTH, DIM, HEADS = 4096, 8, 2  # head_dim 4: fast, yet every path is exercised at full length.


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])
@pytest.mark.parametrize(
    'name,causal', [('t5', True), ('rope', False), ('shaw_vector', True), ('transformer_xl', False)]
)
def test_long_sequence_values_and_gradients_are_finite(name, causal, dtype):
  layer = RelativeMultiHeadAttention(HEADS, DIM, encoders.make(name), causal=causal, dtype=dtype, rngs=nnx.Rngs(0))
  graphdef, params, rest = nnx.split(layer, nnx.Param, ...)
  x = jax.random.normal(jax.random.key(1), (1, LENGTH, DIM)).astype(dtype)  # vmapped axis of size 1

  def loss(params, example):  # One example (L, D); the batch axis comes from vmap.
    y = nnx.merge(graphdef, params, rest)(example[None])[0]
    return jnp.mean(y.astype(jnp.float32) ** 2)

  def batch_loss(params, x):
    return jnp.mean(jax.vmap(loss, in_axes=(None, 0))(params, x))

  value, grads = jax.jit(jax.value_and_grad(batch_loss))(params, x)
  assert bool(jnp.isfinite(value)) and float(value) > 0
  leaves = jax.tree.leaves(grads)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  assert all(float(jnp.max(jnp.abs(g.astype(jnp.float32)))) > 0 for g in leaves)

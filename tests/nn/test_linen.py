"""The Linen twin inside a small Linen model (init, apply, grad), and agreement with the NNX layer."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from relpos_jax import encoders
from relpos_jax.nn import RelativeMultiHeadAttention
from relpos_jax.nn import linen as relpos_linen

B, L, DIM, HEADS, VOCAB = 2, 7, 16, 2, 13


class TinyLinenLM(nn.Module):
  """A t5x-style Linen model: embed -> pre-norm attention block -> logits."""

  encoder: encoders.Encoder
  causal: bool = True

  @nn.compact
  def __call__(self, tokens, positions=None, padding_mask=None):
    x = nn.Embed(VOCAB, DIM)(tokens)
    h = relpos_linen.RelativeMultiHeadAttention(
        num_heads=HEADS, encoder=self.encoder, causal=self.causal, name='attention'
    )(nn.RMSNorm()(x), positions=positions, padding_mask=padding_mask)
    return nn.Dense(VOCAB)(x + h)


@pytest.mark.parametrize('name', ['t5', 'shaw_vector', 'rope', 'transformer_xl', 'fire', 'alibi'])
def test_linen_model_init_apply_grad(name):
  model = TinyLinenLM(encoders.make(name))
  tokens = jax.random.randint(jax.random.key(0), (B, L), 0, VOCAB)
  variables = model.init(jax.random.key(1), tokens)
  params = variables['params']
  assert set(params['attention']) >= {'query', 'key', 'value', 'out'}
  logits = jax.jit(model.apply)(variables, tokens)
  assert logits.shape == (B, L, VOCAB) and bool(jnp.all(jnp.isfinite(logits)))

  def loss(params):
    logits = model.apply({'params': params}, tokens[:, :-1])
    return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

  value, grads = jax.jit(jax.value_and_grad(loss))(params)
  assert bool(jnp.isfinite(value))
  leaves = jax.tree.leaves(grads)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  for part, part_grads in grads['attention'].items():
    if part.startswith('position_'):  # The encoder's own params are trained too.
      assert any(float(jnp.max(jnp.abs(g))) > 0 for g in jax.tree.leaves(part_grads)), part


@pytest.mark.parametrize(
    'name',
    [
        't5',
        'shaw_vector',
        'rope',
        'transformer_xl',
        'absolute_score',
        'xpos',
        'nope',
        'cope + alibi',
        'fox + rope',
        'path',
        'stick_breaking',
        'dape(kerple_log, version=2)',
        'rope + ssmax',
        'logn(train_length=4)',
    ],
)
def test_linen_twin_matches_the_nnx_layer_given_the_same_weights(name):
  encoder = encoders.from_spec(name)
  layer = RelativeMultiHeadAttention(HEADS, DIM, encoder, causal=True, rngs=nnx.Rngs(0))
  twin = relpos_linen.RelativeMultiHeadAttention(num_heads=HEADS, encoder=encoder, causal=True)
  x = jax.random.normal(jax.random.key(2), (B, L, DIM))
  params = relpos_linen.params_from_nnx(layer)
  # The converted tree has exactly the structure the twin initialises.
  init_params = twin.init(jax.random.key(3), x)['params']
  assert jax.tree.structure(init_params) == jax.tree.structure(params)
  assert jax.tree.map(jnp.shape, init_params) == jax.tree.map(jnp.shape, params)
  positions = jnp.broadcast_to(jnp.arange(L, dtype=jnp.int32) * 3 + 5, (B, L))
  padding = jnp.array([[True] * L, [False] + [True] * (L - 1)])
  for kw in ({}, {'positions': positions, 'padding_mask': padding}):
    np.testing.assert_allclose(twin.apply({'params': params}, x, **kw), layer(x, **kw), atol=1e-6)


def test_linen_twin_validates_like_the_layer():
  twin = relpos_linen.RelativeMultiHeadAttention(num_heads=3, encoder=encoders.make('t5'))
  with pytest.raises(ValueError, match='model_dim=16 is not divisible by num_heads=3'):
    twin.init(jax.random.key(0), jnp.ones((1, 4, DIM)))
  bad = relpos_linen.RelativeMultiHeadAttention(num_heads=2, encoder=encoders.make('t5'), implementation='x')
  with pytest.raises(ValueError, match="implementation='x'"):
    bad.init(jax.random.key(0), jnp.ones((1, 4, DIM)))
  xpos = relpos_linen.RelativeMultiHeadAttention(num_heads=2, encoder=encoders.make('xpos'))
  with pytest.raises(ValueError, match='causal-only'):
    xpos.init(jax.random.key(0), jnp.ones((1, 4, DIM)))


def test_flat_params_round_trip():
  encoder = encoders.spec.from_spec('absolute_score + shaw_vector')
  params = encoder.init(jax.random.key(0), 2, head_dim=4, model_dim=8)
  flat = relpos_linen.flatten_params(params)
  assert all(isinstance(k, str) for k in flat)
  back = relpos_linen.unflatten_params(params, flat)
  assert jax.tree.structure(back) == jax.tree.structure(params)
  for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(params)):
    np.testing.assert_array_equal(a, b)

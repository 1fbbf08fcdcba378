"""The Linen twin inside a small Linen model (init, apply, grad), and agreement with the NNX layer."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from relpos_jax import encoders, grid
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


# ---- positions on a grid: coordinates (B, L, axes) or a static grid_shape, the NNX layer's grid path

GRID_SPECS = ['alibi2d', 'rope_axial', "irpe(mode='contextual')", 'fire2d', 'swin_v2_cpb + rope_axial']


def _grid_pair(spec, **kw):
  """An NNX layer with a grid encoder (its position params randomised: learned tables start at zero) and its Linen
  twin holding the same weights."""
  encoder = grid.from_spec(spec)
  layer = RelativeMultiHeadAttention(HEADS, DIM, encoder, rngs=nnx.Rngs(0), **kw)
  for i, p in enumerate(layer.position_params):
    for j, var in enumerate(jax.tree.leaves(p, is_leaf=lambda v: isinstance(v, nnx.Variable))):
      var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(10 * i + j), var[...].shape)
  twin = relpos_linen.RelativeMultiHeadAttention(num_heads=HEADS, encoder=encoder, **kw)
  return layer, twin, relpos_linen.params_from_nnx(layer)


@pytest.mark.parametrize('spec', GRID_SPECS)
@pytest.mark.parametrize('implementation', ['einsum', 'blockwise'])
def test_linen_twin_matches_the_nnx_layer_on_a_grid(spec, implementation):
  """Same weights, same outputs: a grid_shape with a class token and a padding mask, and explicit coordinates
  (float, shifted) without; the twin's init builds the converted tree's structure."""
  kw = dict(implementation=implementation, block_size=(5, 3) if implementation == 'blockwise' else None)
  layer, twin, params = _grid_pair(spec, **kw)
  x = jax.random.normal(jax.random.key(2), (B, 13, DIM))
  init_params = twin.init(jax.random.key(3), x, grid_shape=(3, 4), class_token=True)['params']
  assert jax.tree.map(jnp.shape, init_params) == jax.tree.map(jnp.shape, params)
  mask = jnp.arange(13)[None, :] < jnp.asarray([[13], [10]])
  coords = jnp.broadcast_to(grid.grid_positions((3, 4)).astype(jnp.float32) + 2.5, (B, 12, 2))
  for x_, kw_ in [
      (x, dict(grid_shape=(3, 4), class_token=True, padding_mask=mask)),
      (x[:, 1:], dict(positions=coords)),
  ]:
    np.testing.assert_allclose(twin.apply({'params': params}, x_, **kw_), layer(x_, **kw_), rtol=1e-5, atol=1e-5)


def test_linen_grid_model_gradients_match_the_nnx_layer():
  """The twin's gradients w.r.t. every param (projections and fire2d + alibi2d + rope_axial's) equal the NNX
  layer's, through the blockwise path with fire2d evaluated per tile."""
  layer, twin, params = _grid_pair('fire2d + alibi2d + rope_axial', implementation='blockwise', block_size=4)
  x = jax.random.normal(jax.random.key(2), (B, 12, DIM))
  loss_linen = lambda p: jnp.sum(jnp.sin(twin.apply({'params': p}, x, grid_shape=(3, 4))))
  grads = jax.grad(loss_linen)(params)
  graphdef, state = nnx.split(layer)
  loss_nnx = lambda state: jnp.sum(jnp.sin(nnx.merge(graphdef, state)(x, grid_shape=(3, 4))))
  # The NNX gradient in the Linen tree's layout: a module holding the gradients, converted as its weights are.
  nnx_grads = relpos_linen.params_from_nnx(nnx.merge(graphdef, jax.grad(loss_nnx)(state)))
  assert jax.tree.structure(grads) == jax.tree.structure(nnx_grads)
  for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(nnx_grads)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
  assert float(jnp.max(jnp.abs(grads['position_0']['mlp/0/kernel']))) > 1e-6  # fire2d's MLP is trained


def test_linen_grid_refusals_name_the_layer():
  x = jnp.ones((1, 12, DIM))
  bad = [
      ('alibi2d', {}, {}, r'linen.RelativeMultiHeadAttention: the grid encoder\(s\) \[.alibi2d.\] read coordinates'),
      (
          't5',
          {},
          dict(grid_shape=(3, 4)),
          r"linen.RelativeMultiHeadAttention.*encoder.*\['t5'\] read 1-D positions",
      ),
      ('alibi2d', {}, dict(grid_shape=(3, 5)), 'grid_shape.*a grid of length - class token = 12 tokens'),
      (
          'alibi2d',
          {},
          dict(grid_shape=(3, 4), positions=jnp.zeros((1, 12, 2), jnp.int32)),
          'grid_shape.*None when positions are given',
      ),
      ('rope_axial', dict(window=2), dict(grid_shape=(3, 4)), 'window=2.*None with grid encoders'),
      ('alibi2d', {}, dict(positions=jnp.zeros((1, 12, 3), jnp.int32)), 'alibi2d'),
  ]
  for spec, module_kw, call_kw, match in bad:
    encoder = grid.from_spec(spec) if spec != 't5' else encoders.make('t5')
    twin = relpos_linen.RelativeMultiHeadAttention(num_heads=HEADS, encoder=encoder, **module_kw)
    with pytest.raises(ValueError, match=match):
      twin.init(jax.random.key(0), x, **call_kw)

"""The attention layer on a grid: coordinates (batch, length, axes) or a static grid shape, every grid kind,
translation invariance, and the refusals by name (relpos_jax/nn/attention.py's grid path)."""

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from relpos_jax import encoders, grid
from relpos_jax.nn import RelativeMultiHeadAttention

DIM, HEADS = 32, 4
SHAPE = (3, 4)
SLOW = pytest.mark.slow
# Each kind once in the default run; the other encoders of a kind take the same path (marked slow, as the 1-D
# registry sweeps are: `pytest -m slow` runs them).
RELATIVE = ['irpe', 'swin_v2_cpb', 'rope_axial', 'rope_mixed', 'alibi2d + rope_axial'] + [
    pytest.param(s, marks=SLOW) for s in ['distance2d', 'shaw2d', "irpe(method='cross')", 'swin', 'alibi2d', 'kerple2d']
]


def _layer(spec, **kw):
  enc = grid.from_spec(spec) if isinstance(spec, str) else spec
  layer = RelativeMultiHeadAttention(HEADS, DIM, enc, rngs=nnx.Rngs(0), **kw)
  # Learned tables start at zero or near it: randomise every position parameter so the tests can fail.
  if layer.position_params is not None:
    for i, p in enumerate(layer.position_params):
      leaves = jax.tree.leaves(p, is_leaf=lambda v: isinstance(v, nnx.Variable))
      for j, var in enumerate(leaves):
        var[...] = var[...] + 0.5 * jax.random.normal(jax.random.key(10 * i + j), var[...].shape)
  return layer


def _x(length, batch=2, seed=0):
  return jax.random.normal(jax.random.key(seed), (batch, length, DIM))


def _coords(shape=SHAPE, batch=2, class_token=False):
  c = grid.grid_positions(shape, class_token=class_token)
  return jnp.broadcast_to(c, (batch,) + c.shape)


@pytest.mark.parametrize('spec', RELATIVE + [pytest.param('fire2d', marks=SLOW)])
def test_grid_shape_equals_explicit_coordinates(spec):
  """The block-Toeplitz construction (grid_shape) and every pair (explicit coordinates) give the same layer."""
  layer = _layer(spec)
  x = _x(13)
  a = layer(x, grid_shape=SHAPE, class_token=True)
  b = layer(x, positions=_coords(class_token=True))
  np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize('spec', RELATIVE)
@hypothesis.given(shift=st.tuples(st.integers(-40, 40), st.integers(-40, 40)))
@hypothesis.settings(max_examples=3)
def test_relative_grid_encoders_are_translation_invariant(spec, shift):
  layer = _layer(spec)
  x = _x(12)
  c = _coords()
  base = layer(x, positions=c)
  moved = layer(x, positions=c + jnp.asarray(shift, jnp.int32))
  np.testing.assert_allclose(base, moved, rtol=2e-4, atol=2e-4)


def test_query_dependent_and_absolute_encoders_are_not_translation_invariant():
  x = _x(12)
  c = _coords()
  layer = _layer('fire2d')
  assert not np.allclose(layer(x, positions=c), layer(x, positions=c + 3), atol=1e-4)
  # The absolute embedding is added at the input (the model's business): shifted coordinates change it.
  enc = grid.make('sincos2d')
  p = enc.init(jax.random.key(0), HEADS, model_dim=DIM)
  plain = _layer('rope_axial')
  a = plain(x + enc.embed(p, c), positions=c)
  b = plain(x + enc.embed(p, c + 3), positions=c + 3)
  assert not np.allclose(a, b, atol=1e-4)


def test_float_coordinates_equal_integer_ones():
  for spec in ['alibi2d', 'rope_axial', 'swin_v2_cpb', 'irpe']:
    layer = _layer(spec)
    x = _x(12)
    np.testing.assert_allclose(
        layer(x, positions=_coords()), layer(x, positions=_coords().astype(jnp.float32)), rtol=1e-5, atol=1e-5
    )


@SLOW
def test_three_axes_and_mrope():
  x = _x(12)
  for spec in ['alibi2d(axes=3)', 'rope_axial(axes=3)', 'mrope', 'irpe(axes=3)']:
    layer = (
        _layer(spec)
        if 'rope_axial' not in spec
        else RelativeMultiHeadAttention(HEADS, 48, grid.from_spec(spec), rngs=nnx.Rngs(0))
    )
    xs = x if 'rope_axial' not in spec else jax.random.normal(jax.random.key(0), (2, 12, 48))
    a = layer(xs, grid_shape=(2, 2, 3))
    b = layer(xs, positions=_coords((2, 2, 3)))
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    'spec', ['irpe + rope_axial', pytest.param('swin_v2_cpb', marks=SLOW), pytest.param('fire2d', marks=SLOW)]
)
def test_blockwise_equals_explicit_in_outputs_and_gradients(spec):
  explicit = _layer(spec, implementation='einsum')
  tiled = _layer(spec, implementation='blockwise', block_size=4)
  x = _x(13)

  def loss(layer, x):
    return jnp.sum(jnp.sin(layer(x, grid_shape=SHAPE, class_token=True)))

  np.testing.assert_allclose(
      explicit(x, grid_shape=SHAPE, class_token=True),
      tiled(x, grid_shape=SHAPE, class_token=True),
      rtol=1e-5,
      atol=1e-5,
  )
  g1 = nnx.grad(loss)(explicit, x)
  g2 = nnx.grad(loss)(tiled, x)
  for a, b in zip(jax.tree.leaves(nnx.state(g1)), jax.tree.leaves(nnx.state(g2))):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_attention_weights_reproduce_the_output():
  for spec, kw in [('irpe + rope_axial', dict(grid_shape=SHAPE, class_token=True)), ('rope_mixed', {})]:
    layer = _layer(spec)
    x = _x(13)
    kw = kw or dict(positions=_coords(class_token=True))
    w = layer.attention_weights(x, **kw)
    assert w.shape == (2, HEADS, 13, 13)
    np.testing.assert_allclose(jnp.sum(w, -1), 1.0, rtol=1e-5)
    _, _, v = layer._project(x)
    out = layer.out(jnp.einsum('bhij,bjhd->bihd', w, v).reshape(2, 13, DIM))
    np.testing.assert_allclose(out, layer(x, **kw), rtol=1e-4, atol=1e-5)


def test_one_d_layer_unchanged_and_weights_for_one_d():
  layer = RelativeMultiHeadAttention(HEADS, DIM, encoders.make('alibi', bidirectional=True), rngs=nnx.Rngs(0))
  x = _x(9)
  w = layer.attention_weights(x)
  _, _, v = layer._project(x)
  out = layer.out(jnp.einsum('bhij,bjhd->bihd', w, v).reshape(2, 9, DIM))
  np.testing.assert_allclose(out, layer(x), rtol=1e-4, atol=1e-5)


def test_refusals_name_the_encoder_and_the_shape():
  x = _x(12)
  one_d = RelativeMultiHeadAttention(HEADS, DIM, encoders.make('alibi', bidirectional=True), rngs=nnx.Rngs(0))
  with pytest.raises(ValueError, match=r"alibi.*\(2, 12, 2\).*\['alibi'\] read 1-D positions"):
    one_d(x, positions=_coords())
  with pytest.raises(ValueError, match=r'alibi.*grid_shape=\(3, 4\)'):
    one_d(x, grid_shape=SHAPE)
  layer = _layer('rope_axial')
  with pytest.raises(ValueError, match=r"\['rope_axial'\] read coordinates.*got positions of shape \(2, 12\)"):
    layer(x, positions=jnp.broadcast_to(jnp.arange(12), (2, 12)))
  with pytest.raises(ValueError, match=r"\['rope_axial'\] read coordinates.*got neither"):
    layer(x)
  with pytest.raises(ValueError, match=r'rope_axial.*trailing axis of 2.*\(2, 12, 3\)'):
    layer(x, positions=jnp.zeros((2, 12, 3), jnp.int32))
  with pytest.raises(ValueError, match=r'got positions of shape \(2, 12, 2, 1\)'):
    layer(x, positions=jnp.zeros((2, 12, 2, 1), jnp.int32))
  with pytest.raises(ValueError, match='non-finite'):
    layer(x, positions=_coords().astype(jnp.float32).at[0, 3, 1].set(jnp.nan))
  with pytest.raises(ValueError, match='grid_shape'):
    layer(x, grid_shape=(3, 3))
  with pytest.raises(ValueError, match='swin.*beyond the learned table.*cannot extrapolate'):
    _layer('swin(window=3)')(x, grid_shape=SHAPE)
  with pytest.raises(ValueError, match='swin.*beyond the learned table'):
    _layer('swin(window=3)')(x, positions=_coords())
  with pytest.raises(ValueError, match='pallas'):
    _layer('alibi2d', implementation='pallas')(x, grid_shape=SHAPE)
  with pytest.raises(ValueError, match='window'):
    _layer('alibi2d', window=3)(x, grid_shape=SHAPE)
  causal = _layer('alibi2d', causal=True)
  with pytest.raises(ValueError, match="decode.*grid encoders \\(\\['alibi2d'\\]\\)"):
    causal.decode(x[:, :1], causal.init_cache(2, 4))


def test_grid_under_jit():
  layer = _layer('irpe + rope_axial')
  x = _x(12)
  f = nnx.jit(lambda m, x, c: m(x, positions=c))
  np.testing.assert_allclose(f(layer, x, _coords()), layer(x, grid_shape=SHAPE), rtol=2e-5, atol=2e-5)


def test_irpe_contextual_in_the_layer_is_translation_invariant_and_matches_explicit():
  layer = _layer("irpe(mode='contextual', rpe_on='qk')")
  x = _x(13)
  a = layer(x, grid_shape=SHAPE, class_token=True)
  np.testing.assert_allclose(a, layer(x, positions=_coords(class_token=True)), rtol=2e-5, atol=2e-5)
  c = _coords()
  np.testing.assert_allclose(layer(x[:, :12], positions=c), layer(x[:, :12], positions=c + 7), rtol=2e-5, atol=2e-5)
  w = layer.attention_weights(x, grid_shape=SHAPE, class_token=True)
  _, _, v = layer._project(x)
  out = layer.out(jnp.einsum('bhij,bjhd->bihd', w, v).reshape(2, 13, DIM))
  np.testing.assert_allclose(out, a, rtol=1e-4, atol=1e-5)


def test_dot_product_attention_path_takes_the_grid_bias():
  """implementation='xla' (jax.nn.dot_product_attention, the default on accelerators) gets the grid bias as its
  precomputed bias: the same outputs as the explicit path, for the (H, L, L) and the (B, H, L, L) forms."""
  x = _x(13)
  for spec in ['irpe + rope_axial', "irpe(mode='contextual')"]:
    a = _layer(spec, implementation='einsum')
    b = _layer(spec, implementation='xla')
    np.testing.assert_allclose(
        a(x, grid_shape=SHAPE, class_token=True), b(x, grid_shape=SHAPE, class_token=True), rtol=1e-5, atol=1e-5
    )
    c = _coords(class_token=True)
    np.testing.assert_allclose(a(x, positions=c), b(x, positions=c), rtol=1e-5, atol=1e-5)

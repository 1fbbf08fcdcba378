"""`mlp.apply_scalar_mlp`: FIRE's MLP of one scalar evaluated as its linear pieces equals the MLP, in value and
gradient, whatever the kinks (flat units, equal kinks, kinks far away), and refuses an MLP it cannot read."""

from __future__ import annotations

import hypothesis
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relpos_jax.encoders import mlp


def _layers(w1, b1, w2, b2):
  return [
      {'kernel': jnp.asarray(w1, jnp.float32)[None], 'bias': jnp.asarray(b1, jnp.float32)},
      {'kernel': jnp.asarray(w2, jnp.float32), 'bias': jnp.asarray(b2, jnp.float32)},
  ]


def _reference(layers, x):
  """The MLP in float64 numpy: b2 + relu(x w1 + b1) @ w2."""
  first, second = [{k: np.asarray(v, np.float64) for k, v in layer.items()} for layer in layers]
  hidden = np.maximum(np.asarray(x, np.float64)[..., None] * first['kernel'][0] + first['bias'], 0.0)
  return hidden @ second['kernel'] + second['bias']


def test_hand_values():
  # f(x) = 0.5 + 2 relu(x) + 3 relu(1 - x): 6.5 at -1, 3.5 at 0, 3.0 at 0.5, 2.5 at 1, 4.5 at 2.
  layers = _layers([1.0, -1.0], [0.0, 1.0], [[2.0], [3.0]], [0.5])
  out = mlp.apply_scalar_mlp(layers, jnp.array([-1.0, 0.0, 0.5, 1.0, 2.0]))
  np.testing.assert_allclose(out[:, 0], [6.5, 3.5, 3.0, 2.5, 4.5], rtol=1e-6)


def test_flat_equal_and_distant_kinks():
  rng = np.random.default_rng(0)
  w1, b1 = rng.uniform(-1, 1, 16), rng.uniform(-1, 1, 16)
  w1[:3] = 0.0  # flat units: on everywhere (b1 > 0) or nowhere
  b1[:3] = [0.7, -0.2, 0.0]
  w1[3], b1[3] = 2 * w1[4], 2 * b1[4]  # the same kink twice
  w1[5] = 1e-30  # a kink near -1e30: every x here is on one side of it
  w1[6], b1[6] = 1e-3, 5.0  # a kink at -5000
  layers = _layers(w1, b1, rng.normal(size=(16, 4)), rng.normal(size=4))
  x = np.concatenate([np.linspace(-6000, 6000, 2001), np.linspace(-3, 3, 2001), -b1[7:] / w1[7:]])
  np.testing.assert_allclose(
      mlp.apply_scalar_mlp(layers, jnp.asarray(x, jnp.float32)), _reference(layers, x), rtol=1e-5, atol=1e-3
  )


@hypothesis.settings(max_examples=40, deadline=None)
@hypothesis.given(
    weights=hnp.arrays(np.float32, (4, 8), elements=st.floats(-2, 2, width=32)),
    x=hnp.arrays(np.float32, (12,), elements=st.floats(-4, 4, width=32)),
)
def test_equals_the_mlp(weights, x):
  w1, b1, w2, b2 = weights[0], weights[1], weights[2:].T, weights[3, :2]
  layers = _layers(w1, b1, w2, b2)
  expected = _reference(layers, x)
  scale = 1.0 + np.abs(expected).max() + np.abs(w2).sum() * (1 + 4 * np.abs(w1).max() + np.abs(b1).max())
  np.testing.assert_allclose(mlp.apply_scalar_mlp(layers, jnp.asarray(x)), expected, rtol=0, atol=1e-6 * scale)


def test_gradients_equal_the_mlps():
  layers = mlp.init_mlp(jax.random.key(3), (1, 32, 8), torch_default=True)
  x = jax.random.uniform(jax.random.key(4), (64, 48), minval=-0.5, maxval=1.5)
  weight = jnp.cos(3 * x)[..., None] * jnp.arange(1.0, 9.0)

  def loss(f):
    return jax.grad(lambda layers, x: jnp.sum(f(layers, x) * weight), argnums=(0, 1))

  by_pieces = loss(mlp.apply_scalar_mlp)(layers, x)
  by_units = loss(lambda layers, x: mlp.apply_mlp(layers, x[..., None]))(layers, x)
  for a, b in zip(jax.tree.leaves(by_pieces), jax.tree.leaves(by_units)):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * float(jnp.abs(b).max()))


@pytest.mark.parametrize('sizes', [(2, 8, 4), (1, 8, 8, 4), (1, 4)])
def test_refuses_other_shapes(sizes):
  layers = mlp.init_mlp(jax.random.key(0), sizes)
  with pytest.raises(ValueError, match=r'apply_scalar_mlp: layers of sizes \[.*\]; allowed: one input and one hidden'):
    mlp.apply_scalar_mlp(layers, jnp.zeros((3,)))

"""The learned continuous bias: shapes, both input transforms, the MLP it evaluates."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import make, mlp


def _mlp_numpy(layers, x):
  h = np.asarray(x, np.float64)[..., None]
  for n, layer in enumerate(layers):
    if n:
      h = np.maximum(h, 0)
    h = h @ np.asarray(layer['kernel'], np.float64) + np.asarray(layer['bias'], np.float64)
  return h


@pytest.mark.parametrize('depth', [1, 3])
def test_shapes(depth):
  enc = make('mlp', hidden_dim=16, depth=depth)
  params = enc.init(jax.random.key(0), 5)
  shapes = [layer['kernel'].shape for layer in params['mlp']]
  assert shapes == [(1, 16)] + [(16, 16)] * (depth - 1) + [(16, 5)]
  assert enc.bias(params, jnp.zeros((3, 7), jnp.int32)).shape == (3, 7, 5)
  bias = relpos_jax.bias_matrix(enc, params, 6, 9)
  assert bias.shape == (5, 6, 9) and bias.dtype == jnp.float32
  checks.assert_toeplitz(np.asarray(bias))


def test_transforms():
  rel = jnp.array([-1000, -3, -1, 0, 1, 3])
  np.testing.assert_array_equal(make('mlp', input_transform='linear').features(rel)[:, 0], [-1000, -3, -1, 0, 1, 3])
  # sign(d) log(1 + |d|): log 1001 = 6.90875477931522, log 4 = 1.3862943611198906, log 2 = 0.6931471805599453.
  np.testing.assert_allclose(
      make('mlp', input_transform='log').features(rel)[:, 0],
      [-6.90875477931522, -1.3862943611198906, -0.6931471805599453, 0, 0.6931471805599453, 1.3862943611198906],
      rtol=1e-6,
  )


@pytest.mark.parametrize('transform', ['linear', 'log'])
def test_bias_is_the_mlp_of_the_transformed_distance(transform):
  enc = make('mlp', hidden_dim=8, depth=2, input_transform=transform)
  params = enc.init(jax.random.key(3), 3)
  d = np.arange(-50, 51)
  x = d if transform == 'linear' else np.sign(d) * np.log1p(np.abs(d))
  np.testing.assert_allclose(enc.bias(params, jnp.asarray(d)), _mlp_numpy(params['mlp'], x), rtol=1e-4, atol=1e-5)


def test_defaults_are_swin_v2s_meta_network():
  enc = make('mlp')
  assert (enc.hidden_dim, enc.depth, enc.input_transform) == (512, 1, 'log')


def test_torch_default_init_bounds():
  layers = mlp.init_mlp(jax.random.key(0), (1, 32, 4), torch_default=True)
  assert np.all(np.abs(layers[0]['kernel']) <= 1.0) and np.all(np.abs(layers[0]['bias']) <= 1.0)
  bound = 1 / np.sqrt(32)
  assert np.all(np.abs(layers[1]['kernel']) <= bound) and np.abs(layers[1]['kernel']).max() > 0.8 * bound
  assert np.any(layers[1]['bias'] != 0)

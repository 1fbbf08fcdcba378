"""FIRE: query-dependent (not Toeplitz), a function of (i, j - i) only, length-robust normalisation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import make


@pytest.fixture(scope='module')
def fire():
  enc = make('fire')
  return enc, enc.init(jax.random.key(0), 4)


def _mlp_numpy(layers, x):
  """f_theta written out: Linear -> ReLU -> Linear, in float64."""
  w1, b1 = np.asarray(layers[0]['kernel'], np.float64), np.asarray(layers[0]['bias'], np.float64)
  w2, b2 = np.asarray(layers[1]['kernel'], np.float64), np.asarray(layers[1]['bias'], np.float64)
  return np.maximum(np.asarray(x, np.float64)[..., None] @ w1 + b1, 0) @ w2 + b2


def test_is_not_toeplitz(fire):
  enc, params = fire
  assert not enc.is_toeplitz
  # Queries at 1000..1011, beyond the threshold L = 512, each normalised by its own psi(i).
  bias = np.asarray(relpos_jax.bias_matrix(enc, params, 12, 1012, q_offset=1000))
  assert bias.shape == (4, 12, 1012)
  with pytest.raises(AssertionError, match='not Toeplitz'):
    checks.assert_toeplitz(bias)


def test_is_toeplitz_below_the_threshold(fire):
  # For i < L the normaliser is the constant psi(L): FIRE is then a function of |j - i| alone.
  enc, params = fire
  checks.assert_toeplitz(np.asarray(relpos_jax.bias_matrix(enc, params, 16, 16)), atol=1e-6)


def test_depends_only_on_query_and_relative_position(fire):
  enc, params = fire
  q = jnp.arange(0, 2000, 37)[:, None]
  k = jnp.arange(0, 2100, 53)[None, :]
  grid = np.asarray(enc.pair_bias(params, q, k))  # (len(q), len(k), H)
  # The same (i, j - i) pairs built the other way: flat, as i and i + (j - i).
  qq, kk = np.broadcast_arrays(np.asarray(q), np.asarray(k))
  rel = kk - qq
  flat = np.asarray(enc.pair_bias(params, jnp.asarray(qq.ravel()), jnp.asarray(qq.ravel() + rel.ravel())))
  # (Equal up to float32 matmul rounding, which differs with the batch shape XLA sees.)
  np.testing.assert_allclose(flat.reshape(grid.shape), grid, rtol=1e-6, atol=1e-6)
  # And through bias_at_positions with a batch axis.
  batched = relpos_jax.bias_at_positions(enc, params, jnp.stack([q[:, 0]] * 2), jnp.stack([k[0]] * 2))
  np.testing.assert_allclose(np.asarray(batched[1]), np.moveaxis(grid, -1, 0), rtol=1e-6, atol=1e-6)


def test_normalisation_follows_psi_ratio_beyond_the_threshold(fire):
  enc, params = fire
  c, eps = 0.1, 1e-6
  for i in (512, 700, 5000, 100_000):
    d = np.array([0, 1, 7, 100, i // 2, i])
    expected = np.log1p(c * d) / (np.log1p(c * i) + eps)
    np.testing.assert_allclose(enc.normalized_distance(params, i, i - d), expected, rtol=1e-5)
    np.testing.assert_allclose(
        enc.pair_bias(params, i, jnp.asarray(i - d)), _mlp_numpy(params['mlp'], expected), rtol=1e-4, atol=1e-6
    )


def test_farthest_key_gets_the_same_bias_at_every_length(fire):
  # Progressive interpolation: for i >= L the first key (j = 0) always maps to psi(i) / psi(i) ~ 1.
  enc, params = fire
  lengths = jnp.array([512, 2048, 65_536, 1_000_000])
  first_key = np.asarray(enc.pair_bias(params, lengths, jnp.zeros_like(lengths)))
  np.testing.assert_allclose(first_key, np.broadcast_to(first_key[0], first_key.shape), atol=1e-5)
  # A fixed distance, by contrast, moves towards the near end as the context grows.
  fixed = np.asarray(enc.normalized_distance(params, lengths, lengths - 100))
  assert np.all(np.diff(fixed) < 0)


def test_finite_at_the_first_position_and_degenerate_parameters(fire):
  enc, params = fire
  q = jnp.array([0, 0, 0, 3])[:, None]
  k = jnp.array([0, 1, 1000, 0])[None, :]
  assert np.all(np.isfinite(enc.pair_bias(params, q, k)))
  degenerate = [
      {**params, 'c': jnp.float32(0.0)},
      {**params, 'threshold_multiplier': jnp.float32(0.0)},
      {**params, 'c': jnp.float32(-5.0), 'threshold_multiplier': jnp.float32(0.0)},
  ]
  for p in degenerate:
    assert np.all(np.isfinite(enc.pair_bias(p, q, k)))


def test_bidirectional_extension_is_symmetric_in_distance(fire):
  enc, params = fire
  i = jnp.array([600, 600, 10])
  d = jnp.array([5, 200, 3])
  np.testing.assert_allclose(enc.pair_bias(params, i, i - d), enc.pair_bias(params, i, i + d), atol=1e-7)


def test_bias_from_relative_positions_alone_raises(fire):
  enc, params = fire
  with pytest.raises(ValueError, match='pair_bias'):
    enc.bias(params, jnp.arange(-3, 4))


def test_published_defaults(fire):
  enc, params = fire
  assert (enc.mlp_width, enc.init_c, enc.init_threshold) == (32, 0.1, 512.0)
  assert [layer['kernel'].shape for layer in params['mlp']] == [(1, 32), (32, 4)]
  assert float(enc.scale(params)) == pytest.approx(0.1)
  assert float(enc.threshold(params)) == 512.0

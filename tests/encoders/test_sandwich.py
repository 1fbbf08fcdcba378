"""Sandwich: hand-computed values of the shifted, compressed sinusoidal inner product."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import make, sandwich

# D = 4: frequencies w_k = 10000^(-2k/4), k = 1, 2: w = 0.01, 0.0001. Two heads: r_h = 8h/2 = 4, 8.
#   d = -1:    cos(0.01) + cos(0.0001) - 2 = -5.0004583334706254e-05
#   d = -100:  cos(1)    + cos(0.01)   - 2 = -0.45974769371519497
#   d = -1000: cos(10)   + cos(0.1)    - 2 = -1.8440673637984266
_SUMS = {-1: -5.0004583334706254e-05, -100: -0.45974769371519497, -1000: -1.8440673637984266}


def test_frequencies_and_ratios():
  np.testing.assert_allclose(sandwich.sandwich_frequencies(4), [0.01, 0.0001], rtol=1e-15)
  np.testing.assert_allclose(sandwich.compression_ratios(4), [2.0, 4.0, 6.0, 8.0], rtol=1e-15)


def test_hand_values():
  enc = make('sandwich', dim=4)
  params = enc.init(jax.random.key(0), 2)
  rel = jnp.array([0, -1, -100, -1000])
  expected = [[0.0, 0.0]] + [[_SUMS[d] / 4, _SUMS[d] / 8] for d in (-1, -100, -1000)]
  np.testing.assert_allclose(enc.bias(params, rel), expected, rtol=1e-5)


def test_causal_future_is_zero_and_bidirectional_is_even():
  causal = make('sandwich', dim=4)
  both = make('sandwich', dim=4, bidirectional=True)
  params = causal.init(jax.random.key(0), 2)
  rel = jnp.array([1, 100, 1000])
  np.testing.assert_array_equal(causal.bias(params, rel), np.zeros((3, 2)))
  np.testing.assert_allclose(
      both.bias(params, rel), [[_SUMS[-d] / 4, _SUMS[-d] / 8] for d in (1, 100, 1000)], rtol=1e-5
  )


def test_default_is_nonpositive_zero_at_zero_and_parameter_free():
  enc = make('sandwich')
  assert enc.dim == 128
  params = enc.init(jax.random.key(0), 8)
  assert jax.tree_util.tree_leaves(params) == []
  bias = np.asarray(relpos_jax.bias_matrix(enc, params, 40, 40))
  checks.assert_toeplitz(bias)
  assert np.all(bias <= 0) and np.all(np.diagonal(bias, axis1=1, axis2=2) == 0)
  # Head 1 is compressed least (r_1 = 8/H), so it is the steepest.
  assert np.all(bias[0, 39, :39] < bias[-1, 39, :39])


def test_default_decays_logarithmically_over_mid_distances():
  # For 1 << d << 10000 the bias is about -(D/2) log d / log 10000 / r_h: ratios of it at d and d^2 ~ 1/2.
  enc = make('sandwich', bidirectional=True)
  params = enc.init(jax.random.key(0), 1)  # r = 8
  b = np.asarray(enc.bias(params, jnp.array([10, 100])))[:, 0]
  assert b[1] / b[0] == pytest.approx(2.0, rel=0.25)
  assert b[1] == pytest.approx(-64 * np.log(100) / np.log(10000) / 8, rel=0.25)

"""ALiBi: the paper's slopes for every head count, and the causal and bidirectional biases."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import alibi, make

# Derived by hand from the reference rule (ofirpress/attention_with_linear_biases, get_slopes):
#   a power of two n gives 2^(-8k/n), k = 1..n;
#   any other H takes the P = 2^floor(log2 H) slopes of P, then slopes(2P)[0::2][:H - P], i.e.
#   2^(-8k/2P) = 2^(-4k/P) for k = 1, 3, 5, ...
EXPECTED_SLOPES = {
    1: [1 / 256],  # 2^-8
    2: [1 / 16, 1 / 256],  # 2^-4, 2^-8
    # P = 2: [2^-4, 2^-8]; slopes(4) = [2^-2, 2^-4, 2^-6, 2^-8], [0::2] = [2^-2, 2^-6], first 1: 2^-2.
    3: [1 / 16, 1 / 256, 1 / 4],
    4: [1 / 4, 1 / 16, 1 / 64, 1 / 256],  # 2^-2k
    # P = 4: [2^-2, 2^-4, 2^-6, 2^-8]; slopes(8) = 2^-1..2^-8, [0::2] = [2^-1, 2^-3, 2^-5, 2^-7], first 2.
    6: [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8],
    8: [1 / 2, 1 / 4, 1 / 8, 1 / 16, 1 / 32, 1 / 64, 1 / 128, 1 / 256],
    # P = 8: 2^-1..2^-8; slopes(16) = 2^(-k/2), k = 1..16, [0::2] = 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5, ...
    12: [
        1 / 2,
        1 / 4,
        1 / 8,
        1 / 16,
        1 / 32,
        1 / 64,
        1 / 128,
        1 / 256,
        0.7071067811865476,
        0.3535533905932738,
        0.1767766952966369,
        0.08838834764831845,
    ],
    # 2^(-k/2), k = 1..16.
    16: [
        0.7071067811865476,
        0.5,
        0.3535533905932738,
        0.25,
        0.1767766952966369,
        0.125,
        0.08838834764831845,
        0.0625,
        0.04419417382415922,
        0.03125,
        0.02209708691207961,
        0.015625,
        0.011048543456039806,
        0.0078125,
        0.005524271728019903,
        0.00390625,
    ],
}


@pytest.mark.parametrize('num_heads', sorted(EXPECTED_SLOPES))
def test_slopes_match_the_paper(num_heads):
  np.testing.assert_allclose(alibi.alibi_slopes(num_heads), EXPECTED_SLOPES[num_heads], rtol=1e-15)


@pytest.mark.parametrize('num_heads', [1, 3, 8, 12])
def test_encoder_uses_the_paper_slopes(num_heads):
  enc = make('alibi')
  params = enc.init(jax.random.key(0), num_heads)
  np.testing.assert_allclose(enc.slopes(params), EXPECTED_SLOPES[num_heads], rtol=1e-6)


@pytest.mark.parametrize('bad', [0, -2, 2.0, True, None])
def test_slopes_reject_bad_head_counts(bad):
  with pytest.raises(ValueError, match=f'num_heads={bad!r}'):
    alibi.alibi_slopes(bad)


def test_causal_bias_values():
  enc = make('alibi')
  params = enc.init(jax.random.key(0), 2)  # slopes 1/16, 1/256
  rel = jnp.array([-3, -1, 0, 1, 5])
  expected = np.array(
      [[-3 / 16, -3 / 256], [-1 / 16, -1 / 256], [0, 0], [0, 0], [0, 0]]
  )  # future keys (masked) get the distance-0 value
  np.testing.assert_allclose(enc.bias(params, rel), expected, rtol=1e-6)


def test_bidirectional_bias_values():
  enc = make('alibi', bidirectional=True)
  params = enc.init(jax.random.key(0), 2)
  rel = jnp.array([-3, -1, 0, 1, 5])
  expected = -np.abs(np.array([-3, -1, 0, 1, 5]))[:, None] * np.array([1 / 16, 1 / 256])
  np.testing.assert_allclose(enc.bias(params, rel), expected, rtol=1e-6)


def test_causal_matrix_is_minus_slope_times_distance_below_the_diagonal():
  enc = make('alibi')
  params = enc.init(jax.random.key(0), 4)
  bias = np.asarray(relpos_jax.bias_matrix(enc, params, 6, 6))
  checks.assert_toeplitz(bias)
  i, j = np.meshgrid(np.arange(6), np.arange(6), indexing='ij')
  for h, m in enumerate(EXPECTED_SLOPES[4]):
    np.testing.assert_allclose(bias[h][i >= j], (-m * (i - j))[i >= j], rtol=1e-6)
    assert np.all(bias[h][i < j] == 0)


def test_learnable_slopes_start_at_the_paper_values_and_stay_positive():
  enc = make('alibi', learnable_slopes=True)
  params = enc.init(jax.random.key(0), 6)
  np.testing.assert_allclose(enc.slopes(params), EXPECTED_SLOPES[6], rtol=1e-6)
  raw = {**params, 'log_slopes': jnp.array([-30.0, -5.0, 0.0, 3.0, 30.0, 80.0])}
  slopes = enc.slopes(raw)
  assert np.all(np.asarray(slopes) > 0) and np.all(np.isfinite(slopes))


def test_learnable_slope_gradient_is_the_distance_term():
  enc = make('alibi', learnable_slopes=True)
  params = enc.init(jax.random.key(0), 2)
  grad = jax.grad(lambda p: enc.bias(p, jnp.array([-4])).sum())(params)
  # d/dtheta (m * -4) with m = exp(theta): -4 m.
  np.testing.assert_allclose(grad['log_slopes'], [-4 / 16, -4 / 256], rtol=1e-6)


def test_fixed_slopes_have_no_parameters():
  params = make('alibi').init(jax.random.key(0), 8)
  assert jax.tree_util.tree_leaves(params) == []


def test_asymmetric_alibi_has_separate_learned_past_and_future_slopes():
  encoder = make('alibi', bidirectional=True, learnable_slopes=True, asymmetric=True)
  params = encoder.init(jax.random.PRNGKey(0), 4)
  rel = jnp.arange(-5, 6)
  paper = alibi.alibi_slopes(4)
  # Initialised at the paper's slopes: the symmetric bidirectional form.
  np.testing.assert_allclose(encoder.bias(params, rel), -np.abs(np.asarray(rel))[:, None] * paper, rtol=1e-6)
  params = dict(params, log_future_slopes=params['log_future_slopes'] + jnp.log(3.0))
  got = np.asarray(encoder.bias(params, rel))
  want = np.where(
      np.asarray(rel)[:, None] <= 0, np.asarray(rel)[:, None] * paper, -3.0 * np.asarray(rel)[:, None] * paper
  )
  np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize(
    'kw',
    [
        dict(asymmetric=True),
        dict(asymmetric=True, bidirectional=True),
        dict(asymmetric=True, learnable_slopes=True),
        dict(asymmetric=1),
    ],
)
def test_asymmetric_needs_bidirectional_learned_slopes(kw):
  with pytest.raises(ValueError, match='asymmetric'):
    make('alibi', **kw)

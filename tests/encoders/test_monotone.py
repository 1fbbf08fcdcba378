"""monotone(base): the lecture's tables as knots of a monotone bias in log-distance with a continuing tail."""

from __future__ import annotations

import math

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks, encoders
from relpos_jax.encoders import from_spec, make, to_spec
from relpos_jax.encoders.monotone import Monotone, knot_distances

# Knots 0, 1, 2, 4: exact to 2, then two distances per bucket, saturated from 4 (piecewise, causal).
SMALL_CAUSAL = make('piecewise', bidirectional=False, exact_distance=2, compression=2, max_distance=4)


def _params(enc, near, increments, num_heads=1):
  """Params whose knot values are `near` followed by near[-1] - cumsum(increments) (one side, one head)."""
  params = enc.init(jax.random.key(0), num_heads)
  inc = np.asarray(increments, np.float64)
  return {
      **params,
      'near': jnp.asarray(np.asarray(near, np.float32).reshape(1, -1, 1)),
      'decrements_raw': jnp.asarray(np.log(np.expm1(inc)), jnp.float32).reshape(1, -1, 1),
  }


def test_knots_are_the_first_distance_of_each_bucket():
  assert knot_distances(SMALL_CAUSAL, -1).tolist() == [0, 1, 2, 4]
  t5_32 = make('t5', bidirectional=False, num_buckets=16, max_distance=32)
  assert knot_distances(t5_32, -1).tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 23, 27]
  # T5's published causal layout trained at length 64: the bucket starting at 67 is the first one no
  # distance < 64 reaches (docs/lecture_variants.md's diagnosis: untrained far buckets).
  published = knot_distances(make('t5', bidirectional=False), -1).tolist()
  assert published[-7:] == [52, 59, 67, 77, 87, 99, 113]
  assert [k for k in published if k >= 64][0] == 67
  assert Monotone(make('shaw', max_distance=3)).knots().tolist() == [[0, 1, 2, 3], [0, 1, 2, 3]]
  # Multiscale: every distance where any scale changes bucket (scale 1 to 2, scale 3 at 3 and 6).
  multi = make('multiscale', scales=(1, 3), buckets_per_side=2)
  assert knot_distances(multi, -1).tolist() == [0, 1, 2, 3, 6]


def test_formula_by_hand_causal():
  enc = Monotone(SMALL_CAUSAL)  # window 1: v = 0.5, then decrements 1, 2, 0.5
  params = _params(enc, [0.5], [1.0, 2.0, 0.5])
  np.testing.assert_allclose(np.asarray(enc.knot_values(params))[0, :, 0], [0.5, -0.5, -2.5, -3.0], atol=1e-6)
  rel = jnp.array([0, -1, -2, -3, -4, -10, 5])
  log = math.log
  expected = [
      0.5,
      -0.5,
      -2.5,
      -2.5 + (log(4) - log(3)) / (log(5) - log(3)) * -0.5,  # between knots 2 and 4, linear in log(1+n)
      -3.0,
      -2.5 + (log(11) - log(3)) / (log(5) - log(3)) * -0.5,  # the tail continues the last segment
      0.5,
  ]  # keys ahead of a causal base: distance 0
  np.testing.assert_allclose(np.asarray(enc.bias(params, rel))[:, 0], expected, rtol=1e-5, atol=1e-6)


def test_window_keeps_near_values_free():
  enc = Monotone(SMALL_CAUSAL, window=2)
  params = _params(enc, [-1.0, 2.0], [0.25, 0.5])  # v = -1, 2 (free, rising), 1.75, 1.25
  np.testing.assert_allclose(
      np.asarray(enc.bias(params, jnp.array([0, -1, -2, -4])))[:, 0], [-1.0, 2.0, 1.75, 1.25], atol=1e-6
  )


def test_bidirectional_sides_have_their_own_values():
  enc = Monotone(make('shaw', max_distance=2))
  params = enc.init(jax.random.key(0), 1)
  params = {
      **params,
      'near': jnp.array([[[0.0]], [[1.0]]]),
      'decrements_raw': jnp.log(jnp.expm1(jnp.array([[[1.0], [1.0]], [[2.0], [2.0]]]))),
  }
  got = np.asarray(enc.bias(params, jnp.array([-2, -1, 0, 1, 2])))[:, 0]
  np.testing.assert_allclose(got, [-2.0, -1.0, 0.0, -1.0, -3.0], atol=1e-6)  # rel = 0 reads the side behind


def test_init_is_a_log_decay_with_spread_rates():
  enc = Monotone(make('t5', bidirectional=False, num_buckets=16, max_distance=32), init_slope=2.0)
  params = enc.init(jax.random.key(0), 4)
  rates = np.array([2.0, 1.0, 0.5, 0.25])  # 2 * 8^(-h / 3)
  np.testing.assert_allclose(enc.head_rates(4), rates)
  rel = -np.arange(0, 200)
  expected = -np.log1p(-rel)[:, None] * rates
  knots = enc.knots()[0]
  got = np.asarray(enc.bias(params, jnp.asarray(rel)))
  np.testing.assert_allclose(got[knots], expected[knots], rtol=1e-5, atol=1e-5)
  # Between and beyond the knots the interpolation in log(1 + n) reproduces the log decay too.
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_linear_init_is_the_distance_bias_at_the_knots_with_a_log_tail():
  enc = Monotone(make('t5', bidirectional=False, num_buckets=16, max_distance=32), window=8, init_decay='linear')
  params = enc.init(jax.random.key(0), 4)
  rates = np.array([1.0, 0.5, 0.25, 0.125])
  knots = enc.knots()[0]
  assert list(knots) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 23, 27]
  got = np.asarray(enc.bias(params, jnp.asarray(-np.arange(0, 2000))))
  # -r_h n exactly at the knots (and at every distance of the exact buckets 0..8).
  np.testing.assert_allclose(got[knots], -knots[:, None] * rates, rtol=1e-5, atol=1e-5)
  # Between knots 23 and 27 the interpolation is linear in log(1 + n): at n = 25, t = log(26/24) / log(28/24).
  t = np.log(26 / 24) / np.log(28 / 24)
  np.testing.assert_allclose(got[25], -(23 + t * 4) * rates, rtol=1e-5)
  # Beyond 27 the last segment's slope in log(1 + n) continues: 4 r_h / log(28 / 24) per unit of log(1 + n).
  np.testing.assert_allclose(got[1000], -(27 + 4 * np.log(1001 / 28) / np.log(28 / 24)) * rates, rtol=1e-4)


@pytest.mark.parametrize(
    'base', ['t5(bidirectional=False, num_buckets=16, max_distance=32)', 't5', 'shaw', 'piecewise', 'multiscale']
)
def test_toeplitz_and_finite_at_a_million(base):
  enc = from_spec(f'monotone({base})')
  params = enc.init(jax.random.key(0), 3)
  bias = relpos_jax.bias_matrix(enc, params, q_len=40, k_len=40)
  checks.assert_toeplitz(bias)
  far = np.asarray(enc.bias(params, jnp.array([-(10**6), 10**6, -(2**31) + 1, 2**31 - 1])))
  assert np.all(np.isfinite(far))
  assert np.all(far[0] < np.asarray(enc.bias(params, jnp.array([-1000])))[0])  # still falling at 10^6


_MONOTONE = {w: Monotone(make('t5', num_buckets=32, max_distance=64), window=w) for w in (1, 8)}
# Distances from 1 to 10^6: every integer to 300, then log-spaced.
_N = np.unique(np.concatenate([np.arange(1, 300), np.geomspace(300, 10**6, 50).astype(int)]))


@jax.jit
def _both_sides(params_w1, params_w8):
  rel = jnp.concatenate([-jnp.asarray(_N), jnp.asarray(_N)])
  return _MONOTONE[1].bias(params_w1, rel), _MONOTONE[8].bias(params_w8, rel)


@hypothesis.settings(deadline=None, max_examples=10)
@hypothesis.given(st.integers(0, 2**16 - 1))
def test_monotone_beyond_the_window_for_any_parameters(seed):
  rng = np.random.default_rng(seed)
  params = []
  for enc in _MONOTONE.values():
    p = enc.init(jax.random.key(0), 2)
    params.append(
        {**p, **{k: jnp.asarray(rng.normal(0, 3, p[k].shape), jnp.float32) for k in ('near', 'decrements_raw')}}
    )
  for (window, enc), bias in zip(_MONOTONE.items(), _both_sides(*params)):
    start = int(enc.knots()[0][window - 1])
    for side, b in zip(('behind', 'ahead'), np.split(np.asarray(bias), 2)):
      b = b[_N >= start]
      assert np.all(np.diff(b, axis=0) <= 1e-5), f'window {window}, keys {side}'


def test_every_parameter_is_trained_within_the_base_range():
  enc = from_spec('monotone(t5(bidirectional=False, num_buckets=16, max_distance=32), window=4)')
  params = enc.init(jax.random.key(0), 2)
  grads = jax.grad(lambda p: jnp.sum(enc.bias(p, -jnp.arange(64))))(params)
  for key in ('near', 'decrements_raw'):
    assert np.all(np.asarray(grads[key]) != 0), key


def test_spec_round_trip_and_registry():
  spec = (
      'monotone(t5(num_buckets=16, max_distance=32, bidirectional=False), window=4, init_slope=2.0, '
      "init_decay='linear')"
  )
  enc = from_spec(spec)
  assert to_spec(enc) == spec and from_spec(to_spec(enc)) == enc
  assert 'monotone' in encoders.names() and enc.kind is encoders.Kind.SCALAR_BIAS
  assert to_spec(from_spec('monotone(shaw)')) == 'monotone(shaw)'


@pytest.mark.parametrize(
    'hparams, match',
    [
        (dict(base=make('alibi')), 'base='),
        (dict(base='t5'), 'base='),
        (dict(base=make('shaw', max_distance=3), window=4), 'window=4'),
        (dict(base=make('shaw'), window=0), 'window=0'),
        (dict(base=make('shaw'), init_slope=0.0), 'init_slope=0.0'),
        (dict(base=make('shaw'), init_slope=float('nan')), 'init_slope=nan'),
        (dict(base=make('shaw'), init_slope=True), 'init_slope=True'),
        (dict(base=make('shaw'), init_decay='cubic'), "init_decay='cubic'.*'log', 'linear'"),
    ],
)
def test_bad_hyperparameters_are_named(hparams, match):
  with pytest.raises(ValueError, match=match):
    make('monotone', **hparams)

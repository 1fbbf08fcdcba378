"""GGD-BAM: the reference code's formula by hand, its initial values (ALiBi's prior), Toeplitz structure,
causality in the layer, gradients to every learned parameter, and refusals that name the hyperparameter."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import alibi, from_spec, ggd_bam, make
from relpos_jax.nn import RelativeMultiHeadAttention


def _params(enc, num_heads, *, multiplier=None, beta=None, loc_raw=None):
  params = enc.init(jax.random.key(0), num_heads)
  if multiplier is not None:
    params['log_scale'] = jnp.log(jnp.asarray(multiplier, jnp.float32))
  if beta is not None:
    params['shape'] = jnp.asarray(beta, jnp.float32)
  if loc_raw is not None:
    params['loc'] = jnp.asarray(loc_raw, jnp.float32)
  return params


def test_hand_values_of_the_reference_formula():
  # -e^a (|d - mu| + 1e-5)^beta, head 0: e^a = 0.5, beta = 2, mu = 0; head 1: e^a = 2, beta = 0.5, mu = 0.
  enc = make('ggd_bam')
  params = _params(enc, 2, multiplier=[0.5, 2.0], beta=[2.0, 0.5])
  rel = jnp.array([-3, 0, 4])
  eps = ggd_bam.EPS
  expected = [
      [-0.5 * (3 + eps) ** 2, -2.0 * (3 + eps) ** 0.5],
      [-0.5 * eps**2, -2.0 * eps**0.5],  # not exactly 0: eps sits inside the power, as in the reference
      [-0.5 * (4 + eps) ** 2, -2.0 * (4 + eps) ** 0.5],
  ]
  np.testing.assert_allclose(enc.bias(params, rel), expected, rtol=1e-6)


def test_location_is_two_sinh_of_its_raw_parameter_and_shifts_the_peak():
  enc = make('ggd_bam', learn_loc=True)
  # l = asinh(1.5) -> mu = 2 sinh(l) = 3: the prior peaks at d = 3 and is symmetric about it.
  params = _params(enc, 1, multiplier=[1.0], beta=[1.0], loc_raw=[math.asinh(1.5)])
  np.testing.assert_allclose(ggd_bam.location(params['loc']), [3.0], rtol=1e-6)
  bias = np.asarray(enc.bias(params, jnp.arange(-2, 9)))[:, 0]  # d = -2 .. 8
  assert int(np.argmax(bias)) == 5  # d = 3
  # (mu = 3 up to float32 rounding of sinh: atol covers it at d = mu.)
  np.testing.assert_allclose(bias, -(np.abs(np.arange(-2, 9) - 3.0) + ggd_bam.EPS), rtol=1e-5, atol=1e-6)
  # init_loc is mu in positions, stored as asinh(mu / 2).
  params = make('ggd_bam', learn_loc=True, init_loc=-5.0).init(jax.random.key(0), 2)
  np.testing.assert_allclose(ggd_bam.location(params['loc']), [-5.0, -5.0], rtol=1e-6)


def test_published_defaults_start_from_alibi():
  enc = make('ggd_bam')
  assert (enc.init_shape, enc.init_loc, enc.learn_shape, enc.learn_scale, enc.learn_loc) == (
      1.0,
      0.0,
      True,
      True,
      False,
  )
  params = enc.init(jax.random.key(0), 8)
  assert sorted(k for k in params if k != 'dims') == ['log_scale', 'shape']  # the location is not learned
  np.testing.assert_allclose(jnp.exp(params['log_scale']), alibi.alibi_slopes(8), rtol=1e-6)
  np.testing.assert_array_equal(params['shape'], np.ones(8))
  # The causal side equals ALiBi's bias up to eps * slope.
  rel = jnp.arange(-50, 1)
  reference = make('alibi').bias(make('alibi').init(jax.random.key(0), 8), rel)
  np.testing.assert_allclose(enc.bias(params, rel), reference, atol=1e-5)
  # The published model adds Scalable-Softmax with s initialised at 1, the reference code's `seq_scale`.
  paper = from_spec('ggd_bam + ssmax(init_s=1.0)')
  assert [part.name for part in paper.parts] == ['ggd_bam', 'ssmax']


def test_fixed_parameters_are_not_learned_and_take_their_initial_values():
  enc = make('ggd_bam', learn_shape=False, learn_scale=False, init_shape=2.0)
  params = enc.init(jax.random.key(0), 4)
  assert [k for k in params if k != 'dims'] == []
  multiplier, beta, mu = enc.effective_params(params)
  np.testing.assert_allclose(multiplier, alibi.alibi_slopes(4), rtol=1e-6)
  np.testing.assert_array_equal(beta, [2.0] * 4)
  np.testing.assert_array_equal(mu, [0.0] * 4)


def test_bias_matrix_is_toeplitz_and_decays_from_the_diagonal():
  enc = make('ggd_bam', learn_loc=True, init_loc=1.5)
  params = enc.init(jax.random.key(0), 3)
  matrix = np.asarray(relpos_jax.bias_matrix(enc, params, 6, 11, q_offset=3))
  assert matrix.shape == (3, 6, 11)
  checks.assert_toeplitz(matrix)
  # Row 0 is query 3; with mu = 1.5 the prior peaks between keys 4 and 5 and falls off both ways.
  row = matrix[0, 0]
  assert np.all(np.diff(row[:5]) > 0) and np.all(np.diff(row[5:]) < 0)
  assert row[4] == pytest.approx(row[5], rel=1e-6)


def test_layer_is_causal():
  layer = RelativeMultiHeadAttention(
      2, 16, make('ggd_bam', learn_loc=True, init_loc=-2.0), causal=True, rngs=nnx.Rngs(0)
  )
  x = jax.random.normal(jax.random.key(1), (2, 7, 16))
  full = layer(x)
  assert bool(jnp.all(jnp.isfinite(full)))
  t = 4
  np.testing.assert_array_equal(layer(x.at[:, t].add(3.0))[:, :t], full[:, :t])
  assert not np.allclose(layer(x.at[:, t].add(3.0))[:, t:], full[:, t:])


def test_gradients_reach_the_scale_shape_and_location():
  enc = make('ggd_bam', learn_loc=True, init_loc=0.5)
  params = enc.init(jax.random.key(0), 4)
  weights = jax.random.normal(jax.random.key(2), (4, 9, 9))
  grads = jax.grad(lambda p: jnp.sum(relpos_jax.bias_matrix(enc, p, 9, 9) * weights))(params)
  for key in ('log_scale', 'shape', 'loc'):
    assert np.all(np.isfinite(grads[key])) and np.all(np.asarray(grads[key]) != 0), key
  # At distance mu exactly (d = 0, mu = 0) the shape's gradient is finite: eps keeps log|z| finite.
  enc = make('ggd_bam')
  params = enc.init(jax.random.key(0), 2)
  grad = jax.grad(lambda p: jnp.sum(enc.bias(p, jnp.array([0]))))(params)
  assert np.all(np.isfinite(grad['shape'])) and np.all(np.isfinite(grad['log_scale']))
  # d/da of -e^a |d|^beta at beta = 1, d = -3 is the bias itself.
  grad = jax.grad(lambda p: jnp.sum(enc.bias(p, jnp.array([-3]))))(params)
  np.testing.assert_allclose(grad['log_scale'], -alibi.alibi_slopes(2) * (3 + ggd_bam.EPS), rtol=1e-5)


def test_far_distances_stay_finite_up_to_the_largest_initial_shape():
  enc = make('ggd_bam', init_shape=ggd_bam.MAX_INIT_SHAPE)
  params = enc.init(jax.random.key(0), 8)
  out = enc.bias(params, jnp.array([-(2**31 - 1), -(10**6), 0, 10**6, 2**31 - 1]))
  assert np.all(np.isfinite(out)) and np.all(np.asarray(out) < 0)


@pytest.mark.parametrize(
    'field, value',
    [
        ('init_shape', 0.0),
        ('init_shape', -1.0),
        ('init_shape', 2.5),
        ('init_shape', float('nan')),
        ('init_loc', float('inf')),
        ('learn_loc', 1),
        ('learn_shape', 'yes'),
    ],
)
def test_bad_hyperparameters_are_refused_by_name(field, value):
  with pytest.raises(ValueError, match=re.escape(f'{field}={value!r}')):
    make('ggd_bam', **{field: value})

"""Absolute encodings and their sum with relative ones: sinusoidal, learned, absolute_score, combine."""

from __future__ import annotations

import dataclasses
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import Kind, contract, make
from relpos_jax.encoders.combine import combine

# --- sinusoidal: Vaswani et al. 2017, section 3.5 --------------------------------------------------


def test_sinusoidal_position_zero_is_sin0_cos0():
  enc = make('sinusoidal')
  params = enc.init(jax.random.key(0), 1, model_dim=8)
  np.testing.assert_array_equal(enc.embed(params, jnp.array(0)), [0, 1, 0, 1, 0, 1, 0, 1])


def test_sinusoidal_position_one_by_hand():
  # d = 4: the wavelength factors are 10000^(0/4) = 1 and 10000^(2/4) = 100, so
  # PE(1) = [sin 1, cos 1, sin 0.01, cos 0.01].
  enc = make('sinusoidal')
  params = enc.init(jax.random.key(0), 1, model_dim=4)
  np.testing.assert_allclose(
      enc.embed(params, jnp.array([1]))[0],
      [0.8414709848078965, 0.5403023058681398, 0.009999833334166664, 0.9999500004166653],
      rtol=1e-6,
  )


def test_sinusoidal_odd_model_dim_keeps_the_formula_for_every_index():
  # d = 5: indices 0..3 as for pairs i = 0, 1 with 10000^(2i/5), and index 4 = sin(pos / 10000^(4/5)).
  enc = make('sinusoidal')
  params = enc.init(jax.random.key(0), 1, model_dim=5)
  out = np.asarray(enc.embed(params, jnp.array([1])))[0]
  assert out.shape == (5,)
  np.testing.assert_allclose(out[4], math.sin(1 / 10000**0.8), rtol=1e-5)  # 10000^0.8 = 1584.89
  np.testing.assert_allclose(out[2:4], [math.sin(1 / 10000**0.4), math.cos(1 / 10000**0.4)], rtol=1e-6)


def test_sinusoidal_matches_the_paper_formula_in_a_loop():
  d, wavelength = 6, 50.0
  enc = make('sinusoidal', max_wavelength=wavelength)
  params = enc.init(jax.random.key(0), 1, model_dim=d)
  positions = np.array([[0, 3], [17, 250]])
  expected = np.zeros(positions.shape + (d,))
  for idx, pos in np.ndenumerate(positions):
    for i in range(d // 2):
      expected[idx + (2 * i,)] = math.sin(pos / wavelength ** (2 * i / d))
      expected[idx + (2 * i + 1,)] = math.cos(pos / wavelength ** (2 * i / d))
  np.testing.assert_allclose(enc.embed(params, jnp.asarray(positions)), expected, rtol=1e-5, atol=1e-5)


def test_sinusoidal_needs_model_dim():
  with pytest.raises(ValueError, match='model_dim=None'):
    make('sinusoidal').init(jax.random.key(0), 1)


# --- learned: a (max_length, model_dim) table that never clips ----------------------------------------


def test_learned_reads_its_rows():
  enc = make('learned', max_length=8)
  params = enc.init(jax.random.key(0), 1, model_dim=3)
  assert params['table'].shape == (8, 3)
  np.testing.assert_array_equal(enc.embed(params, jnp.array([[7, 0]])), params['table'][jnp.array([[7, 0]])])
  assert make('learned').max_length == 2048


def test_learned_beyond_its_range_raises():
  enc = make('learned', max_length=8)
  params = enc.init(jax.random.key(0), 1, model_dim=3)
  enc.check_positions(8)  # positions 0..7: fine
  with pytest.raises(ValueError, match=re.escape('position 8 is beyond the table of max_length=8')):
    enc.check_positions(9)
  with pytest.raises(ValueError, match=re.escape('position 12 is beyond the table of max_length=8')):
    enc.embed(params, jnp.array([0, 12, 3]))
  with pytest.raises(ValueError, match='position -1 is negative'):
    enc.embed(params, np.array([-1, 2]))


def test_learned_under_jit_reads_nan_never_a_clipped_row():
  # Traced positions cannot be checked at trace time: an out-of-range one must be loud, not row 7.
  enc = make('learned', max_length=8)
  params = enc.init(jax.random.key(0), 1, model_dim=3)
  out = jax.jit(enc.embed)(params, jnp.array([7, 8]))
  assert np.isfinite(out[0]).all() and np.isnan(out[1]).all()


# --- absolute_score: TUPE's P_ij = (p_i U^Q)(p_j U^K) / sqrt(2 d) -----------------------------------


def test_absolute_score_shape_formula_and_not_toeplitz():
  enc = make('absolute_score')
  assert enc.kind is Kind.SCALAR_BIAS and not enc.is_toeplitz and not enc.is_relative
  params = enc.init(jax.random.key(0), 3, head_dim=4, model_dim=8)
  assert params['query_proj'].shape == params['key_proj'].shape == (8, 3, 4)
  out = relpos_jax.bias_matrix(enc, params, 5, 6)
  assert out.shape == (3, 5, 6)

  # The formula in numpy, sinusoids from the paper's definition.
  def pe(pos):
    i = np.arange(4)
    angle = pos / 10000.0 ** (2 * i / 8)
    return np.stack([np.sin(angle), np.cos(angle)], -1).reshape(8)

  p_q = np.stack([pe(i) for i in range(5)])
  p_k = np.stack([pe(j) for j in range(6)])
  q = np.einsum('im,mhd->ihd', p_q, np.asarray(params['query_proj'], np.float64))
  k = np.einsum('jm,mhd->jhd', p_k, np.asarray(params['key_proj'], np.float64))
  expected = np.einsum('ihd,jhd->hij', q, k) / np.sqrt(2 * 4)
  np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-6)
  with pytest.raises(AssertionError, match='not Toeplitz'):
    checks.assert_toeplitz(out)
  # q_offset moves the queries: the offset matrix is the last rows of the full one.
  np.testing.assert_allclose(relpos_jax.bias_matrix(enc, params, 2, 6, q_offset=3), out[:, 3:5], rtol=1e-5, atol=1e-6)


def test_absolute_score_has_no_relative_bias():
  enc = make('absolute_score')
  params = enc.init(jax.random.key(0), 1, head_dim=2, model_dim=4)
  with pytest.raises(ValueError, match='depends on the absolute positions'):
    enc.bias(params, jnp.arange(3))


def test_absolute_score_needs_both_dims_and_an_absolute_base():
  with pytest.raises(ValueError, match='head_dim=None'):
    make('absolute_score').init(jax.random.key(0), 2, model_dim=8)
  with pytest.raises(ValueError, match='model_dim=None'):
    make('absolute_score').init(jax.random.key(0), 2, head_dim=8)
  with pytest.raises(ValueError, match=re.escape('base=t5 is invalid')):
    make('absolute_score', base=make('t5'))


def test_absolute_score_with_a_learned_base_trains_and_checks_its_range():
  enc = make('absolute_score', base=make('learned', max_length=6))
  params = enc.init(jax.random.key(0), 2, head_dim=4, model_dim=8)
  assert params['base']['table'].shape == (6, 8)
  with pytest.raises(ValueError, match='max_length=6'):
    enc.check_positions(7)
  with pytest.raises(ValueError, match='max_length=6'):
    relpos_jax.bias_matrix(enc, params, 7, 7)
  grads = jax.grad(lambda p: jnp.sum(relpos_jax.bias_matrix(enc, p, 6, 6) ** 2))(params)
  assert np.abs(np.asarray(grads['base']['table'])).sum() > 0


# --- combine: the lecture's absolute + relative ---------------------------------------------------


def test_combine_inits_each_part_with_its_own_rng():
  enc = combine(make('t5'), make('t5'))
  params = enc.init(jax.random.key(0), 2)
  assert set(params) == {'dims', 'parts'} and len(params['parts']) == 2
  assert params['dims'].num_heads == 2
  assert not np.allclose(params['parts'][0]['table'], params['parts'][1]['table'])


def test_combine_passes_head_and_model_dims_to_the_parts():
  enc = combine(make('sinusoidal'), make('absolute_score'), make('shaw'))
  params = enc.init(jax.random.key(0), 2, head_dim=4, model_dim=8)
  assert [p['dims'] for p in params['parts']] == [contract.Dims(2, 4, 8)] * 3
  terms = enc.terms(params)
  assert [type(part).__name__ for part, _ in terms] == ['Sinusoidal', 'AbsoluteScore', 'Shaw']


def test_combine_flattens_nested_sums():
  a, b, c = make('sinusoidal'), make('t5'), make('shaw')
  assert combine(a, combine(b, c)) == combine(combine(a, b), c) == combine(a, b, c)
  assert combine(a, combine(b, c)).parts == (a, b, c)
  assert hash(combine(a, combine(b, c))) == hash(combine(a, b, c))


def test_combine_flags():
  sinusoidal_t5 = combine(make('sinusoidal'), make('t5'))
  assert sinusoidal_t5.kind is Kind.COMBINED
  assert sinusoidal_t5.carries_position and not sinusoidal_t5.is_relative
  assert combine(make('t5'), make('shaw')).is_relative
  assert combine(make('nope'), make('t5')).carries_position
  assert not combine(make('nope'), make('nope')).carries_position


@dataclasses.dataclass(frozen=True)
class _Sampling(contract.ScalarBiasEncoder):
  """Unregistered: a bias that samples its training positions, like the randomized wrapper."""

  train_position_limit = 12

  def bias(self, params, rel):
    return jnp.zeros(jnp.shape(rel) + (contract.dims(params).num_heads,))

  def train_positions(self, rng, batch, length):
    return jnp.broadcast_to(jnp.arange(length) * 3, (batch, length))


def test_train_positions_come_from_the_part_that_samples():
  assert contract.train_positions(combine(make('t5'), make('shaw')), jax.random.key(0), 2, 4) is None
  positions = contract.train_positions(combine(make('t5'), _Sampling()), jax.random.key(0), 2, 4)
  np.testing.assert_array_equal(positions, [[0, 3, 6, 9]] * 2)


@pytest.mark.parametrize(
    'parts,match',
    [
        ((), 'at least two encoders'),
        (('t5',), 'at least two encoders'),
        (('sinusoidal', 'learned'), 'at most one absolute part'),
        (('t5', 'not an encoder'), "parts='not an encoder'"),
    ],
)
def test_combine_validates_its_parts(parts, match):
  encoders_ = tuple(make(p) if p in ('t5', 'sinusoidal', 'learned') else p for p in parts)
  with pytest.raises(ValueError, match=match):
    combine(*encoders_)


def _is_wrapper(name):
  """Whether the encoder `name` wraps another (randomized, monotone, ...): it has no all-default form."""
  return any(
      f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
      for f in dataclasses.fields(relpos_jax.encoders.encoder_class(name))
  )


def test_combine_rejects_two_rotary_parts():
  rotary = [
      n for n in relpos_jax.encoders.names() if not _is_wrapper(n) and relpos_jax.encoders.make(n).kind is Kind.ROTARY
  ]
  if not rotary:
    pytest.skip('no rotary encoder registered yet')
  with pytest.raises(ValueError, match='at most one rotary part'):
    combine(make(rotary[0]), make('t5'), make(rotary[0]))


def test_combine_checks_the_range_of_a_learned_part():
  enc = combine(make('learned', max_length=16), make('t5'))
  enc.check_positions(16)
  with pytest.raises(ValueError, match='max_length=16'):
    enc.check_positions(17)

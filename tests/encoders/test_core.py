"""The encoder core: relative positions, the Toeplitz expansion, bias_matrix, assert_toeplitz, validation."""

from __future__ import annotations

import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax import checks
from relpos_jax.encoders import distance, make

# --- relative_positions -----------------------------------------------------------------------------


def test_relative_positions_is_key_minus_query():
  # The lecture's R[i, j] = j - i for L = 5 (its printout shows the transpose, i - j; we keep j - i).
  expected = np.array([[0, 1, 2, 3, 4], [-1, 0, 1, 2, 3], [-2, -1, 0, 1, 2], [-3, -2, -1, 0, 1], [-4, -3, -2, -1, 0]])
  rel = relpos_jax.relative_positions(5, 5)
  assert rel.dtype == jnp.int32
  np.testing.assert_array_equal(rel, expected)


@pytest.mark.parametrize('q_len,k_len,q_offset', [(1, 1, 0), (3, 7, 0), (7, 3, 0), (2, 6, 4), (4, 4, 9)])
def test_relative_positions_matches_a_loop(q_len, k_len, q_offset):
  expected = np.zeros((q_len, k_len), np.int64)
  for i in range(q_len):
    for j in range(k_len):
      expected[i, j] = j - (i + q_offset)
  rel = relpos_jax.relative_positions(q_len, k_len, q_offset)
  assert rel.shape == (q_len, k_len) and rel.dtype == jnp.int32
  np.testing.assert_array_equal(rel, expected)


def test_relative_positions_q_offset_is_the_cached_decoding_layout():
  # Queries at positions 4, 5 against keys 0..5: the last two rows of the 6 x 6 matrix.
  np.testing.assert_array_equal(
      relpos_jax.relative_positions(2, 6, q_offset=4), relpos_jax.relative_positions(6, 6)[4:]
  )


def test_relative_positions_traced_offset_under_jit():
  f = jax.jit(relpos_jax.relative_positions, static_argnums=(0, 1))
  np.testing.assert_array_equal(f(2, 3, jnp.int32(5)), [[-5, -4, -3], [-6, -5, -4]])


@pytest.mark.parametrize('bad', [0, -1, 2.0, True, None])
def test_relative_positions_rejects_bad_lengths(bad):
  with pytest.raises(ValueError, match=re.escape(f'q_len={bad!r}')):
    relpos_jax.relative_positions(bad, 3)


def test_distinct_relative_positions_ascend_through_every_diagonal():
  np.testing.assert_array_equal(relpos_jax.distinct_relative_positions(3, 4), [-2, -1, 0, 1, 2, 3])
  np.testing.assert_array_equal(relpos_jax.distinct_relative_positions(3, 4, q_offset=2), [-4, -3, -2, -1, 0, 1])


# --- toeplitz expansion -----------------------------------------------------------------------------


@pytest.mark.parametrize('q_len,k_len', [(1, 1), (1, 5), (5, 1), (4, 6), (6, 4)])
def test_toeplitz_matches_an_explicit_loop(q_len, k_len):
  values = np.random.default_rng(0).normal(size=(3, q_len + k_len - 1)).astype(np.float32)
  expected = np.zeros((3, q_len, k_len), np.float32)
  for h in range(3):
    for i in range(q_len):
      for j in range(k_len):
        expected[h, i, j] = values[h, j - i + q_len - 1]
  np.testing.assert_array_equal(relpos_jax.toeplitz(jnp.asarray(values), q_len, k_len), expected)


def test_toeplitz_rejects_the_wrong_number_of_diagonals():
  with pytest.raises(ValueError, match='values has 5 diagonals.*q_len \\+ k_len - 1 = 6'):
    relpos_jax.toeplitz(jnp.zeros((2, 5)), 3, 4)


# --- bias_matrix evaluates only the q_len + k_len - 1 distinct relative positions -------------------

_SPY_CALLS: list = []


@dataclasses.dataclass(frozen=True)
class _SpyDistance(distance.Distance):
  """Distance that records the relative positions it is evaluated on (unregistered)."""

  def bias(self, params, rel):
    _SPY_CALLS.append((tuple(rel.shape), None if isinstance(rel, jax.core.Tracer) else np.asarray(rel).copy()))
    return super().bias(params, rel)


@pytest.mark.parametrize('q_len,k_len,q_offset', [(5, 7, 0), (7, 5, 0), (3, 9, 6), (1, 1, 0)])
def test_bias_matrix_evaluates_the_encoder_on_distinct_positions_only(q_len, k_len, q_offset):
  spy = _SpyDistance(mode='signed')
  params = spy.init(jax.random.key(0), 2)
  _SPY_CALLS.clear()
  out = relpos_jax.bias_matrix(spy, params, q_len, k_len, q_offset)
  assert len(_SPY_CALLS) == 1
  shape, values = _SPY_CALLS[0]
  assert shape == (q_len + k_len - 1,)
  # Every diagonal once, ascending: j - i from -(q_len - 1) - q_offset to k_len - 1 - q_offset.
  np.testing.assert_array_equal(values, np.arange(-(q_len - 1), k_len) - q_offset)
  # ... and the expansion still gives the full matrix (signed distance, slope 1: the value is j - i).
  expected = np.broadcast_to(relpos_jax.relative_positions(q_len, k_len, q_offset), (2, q_len, k_len))
  np.testing.assert_array_equal(out, expected)


def test_bias_matrix_under_jit_traces_the_encoder_once_on_distinct_positions():
  spy = _SpyDistance()
  params = spy.init(jax.random.key(0), 3)
  _SPY_CALLS.clear()
  f = jax.jit(relpos_jax.bias_matrix, static_argnums=(0, 2, 3))
  out = f(spy, params, 6, 10, 4)
  assert [shape for shape, _ in _SPY_CALLS] == [(15,)]
  np.testing.assert_allclose(out, -np.abs(relpos_jax.relative_positions(6, 10, 4))[None].repeat(3, 0))


def test_bias_matrix_rejects_other_kinds():
  enc = make('sinusoidal')
  with pytest.raises(ValueError, match="kind 'absolute'"):
    relpos_jax.bias_matrix(enc, enc.init(jax.random.key(0), 1, model_dim=4), 3, 3)


def test_bias_at_positions_handles_non_contiguous_positions():
  enc = make('distance', mode='signed')
  params = enc.init(jax.random.key(0), 2)
  q = jnp.array([[3, 10]])  # (batch 1, q_len 2)
  k = jnp.array([[0, 7, 20]])
  out = relpos_jax.bias_at_positions(enc, params, q, k)
  assert out.shape == (1, 2, 2, 3)
  np.testing.assert_array_equal(out[0, 0], [[-3, 4, 17], [-10, -3, 10]])


# --- checks.assert_toeplitz -------------------------------------------------------------------------


def _toeplitz_example(m=4, n=5):
  values = np.arange(m + n - 1, dtype=np.float32) * 1.5
  return np.array(relpos_jax.toeplitz(jnp.asarray(values), m, n))  # A writable copy.


def test_assert_toeplitz_accepts_toeplitz_matrices():
  x = _toeplitz_example()
  checks.assert_toeplitz(x)
  checks.assert_toeplitz(np.stack([x, 2 * x, -x]))  # (H, L, L) batched
  checks.assert_toeplitz(np.ones((1, 7)))  # a single row is trivially Toeplitz


def test_assert_toeplitz_names_the_broken_diagonal():
  x = _toeplitz_example()
  x[2, 3] += 1.0  # diagonal j - i = 1
  with pytest.raises(AssertionError, match=re.escape('diagonal j - i = 1 is not constant: entry (i=2, j=3)')):
    checks.assert_toeplitz(x)


def test_assert_toeplitz_names_the_diagonal_in_a_batch():
  x = np.stack([_toeplitz_example(), _toeplitz_example()])
  x[1, 3, 1] = -7.0  # head 1, diagonal j - i = -2, whose first entry is (2, 0)
  with pytest.raises(AssertionError, match=re.escape('diagonal j - i = -2 is not constant in slice (')):
    checks.assert_toeplitz(x)
  with pytest.raises(AssertionError, match=re.escape(': entry (i=3, j=1) = -7 differs from entry (i=2, j=0) = 1.5.')):
    checks.assert_toeplitz(x)


def test_assert_toeplitz_prints_the_slice_as_plain_ints():
  x = np.stack([_toeplitz_example(), _toeplitz_example()])
  x[1, 3, 1] = -7.0
  with pytest.raises(AssertionError, match=re.escape('in slice (1,): entry')):
    checks.assert_toeplitz(x)


def test_assert_toeplitz_tolerates_float_noise_only():
  x = _toeplitz_example()
  x[1, 1] += 1e-8
  checks.assert_toeplitz(x)
  x[1, 1] += 1e-3
  with pytest.raises(AssertionError, match='diagonal j - i = 0'):
    checks.assert_toeplitz(x)


# --- invalid hyperparameters and names -------------------------------------------------------------


@pytest.mark.parametrize(
    'name,hparams,named',
    [
        ('shaw', {'max_distance': -1}, 'max_distance=-1'),
        ('t5', {'max_distance': -5}, 'max_distance=-5'),
        ('piecewise', {'max_distance': -3}, 'max_distance=-3'),
        ('t5', {'num_buckets': 0}, 'num_buckets=0'),
        ('multiscale', {'buckets_per_side': 0}, 'buckets_per_side=0'),
        ('piecewise', {'compression': 0}, 'compression=0'),
        # More buckets than distances can fill.
        ('t5', {'num_buckets': 64, 'max_distance': 16}, 'max_distance=16'),
        ('piecewise', {'exact_distance': 200}, 'exact_distance=200'),
        ('piecewise', {'compression': 7}, 'compression=7'),  # 7 does not divide 128 - 8: a short last bucket
        ('multiscale', {'scales': (1, 0)}, 'scales=0'),
        ('multiscale', {'scales': (4, 4)}, 'scales=(4, 4)'),
        ('multiscale', {'reduction': 'max'}, "reduction='max'"),
        ('sinusoidal', {'max_wavelength': -1.0}, 'max_wavelength=-1.0'),
        ('learned', {'max_length': 0}, 'max_length=0'),
    ],
)
def test_invalid_hyperparameters_raise_naming_the_value(name, hparams, named):
  with pytest.raises(ValueError, match=re.escape(named)):
    make(name, **hparams)


def test_unknown_encoder_name_raises_listing_the_names():
  with pytest.raises(ValueError, match="unknown encoder 'no_such_encoder'; allowed: .*t5"):
    make('no_such_encoder')


def test_unknown_hyperparameter_raises_naming_it():
  with pytest.raises(ValueError, match=re.escape("t5: unknown hyperparameter(s) ['num_bukets']")):
    make('t5', num_bukets=32)

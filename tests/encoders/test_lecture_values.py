"""Hand-computed values of the lecture's relative encoders: distance, shaw, t5, piecewise, multiscale.

Expected numbers are written out literally, derived by hand from the published formulas (derivations in
the comments), never computed with the implementation under test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import relpos_jax
from relpos_jax.encoders import make
from relpos_jax.encoders.multiscale import scale_bucket


def _with_table(enc, table):
  """Params of a table encoder with a known table (num_buckets, H)."""
  params = enc.init(jax.random.key(0), table.shape[1])
  assert params['table'].shape == table.shape
  return {**params, 'table': jnp.asarray(table, jnp.float32)}


# --- distance: the lecture's R[i, j] = j - i as a bias -------------------------------------------


def test_distance_signed_is_slope_times_j_minus_i():
  enc = make('distance', mode='signed')
  params = {**enc.init(jax.random.key(0), 2), 'slopes': jnp.array([1.0, 0.5])}
  np.testing.assert_array_equal(enc.bias(params, jnp.array([-3, 0, 2])), [[-3.0, -1.5], [0.0, 0.0], [2.0, 1.0]])
  # The lecture's L = 5 example with slope 1: the bias matrix is R itself.
  out = relpos_jax.bias_matrix(enc, enc.init(jax.random.key(0), 1), 5, 5)
  np.testing.assert_array_equal(
      out[0], [[0, 1, 2, 3, 4], [-1, 0, 1, 2, 3], [-2, -1, 0, 1, 2], [-3, -2, -1, 0, 1], [-4, -3, -2, -1, 0]]
  )


def test_distance_absolute_is_minus_slope_times_abs_distance():
  enc = make('distance')
  params = {**enc.init(jax.random.key(0), 2), 'slopes': jnp.array([1.0, 0.25])}
  np.testing.assert_array_equal(enc.bias(params, jnp.array([-4, 0, 3])), [[-4.0, -1.0], [0.0, 0.0], [-3.0, -0.75]])


def test_distance_fixed_slope_has_no_parameters():
  enc = make('distance', slope=2.0, learnable=False)
  params = enc.init(jax.random.key(0), 3)
  assert jax.tree.leaves(params) == []
  np.testing.assert_array_equal(enc.bias(params, jnp.array([-1, 2])), [[-2.0] * 3, [-4.0] * 3])


# --- shaw: clip(j - i, -k, k) + k -----------------------------------------------------------------


def test_shaw_clips_at_plus_minus_k_and_reads_exact_rows():
  enc = make('shaw', max_distance=2)  # 2k + 1 = 5 rows for rel = -2, -1, 0, 1, 2
  table = np.array([[10.0, -10.0], [11.0, -11.0], [12.0, -12.0], [13.0, -13.0], [14.0, -14.0]])
  params = _with_table(enc, table)
  rel = jnp.array([-1000, -3, -2, -1, 0, 1, 2, 3, 1000])
  np.testing.assert_array_equal(enc.bucket(rel), [0, 0, 0, 1, 2, 3, 4, 4, 4])
  np.testing.assert_array_equal(enc.bias(params, rel), table[[0, 0, 0, 1, 2, 3, 4, 4, 4]])


def test_shaw_default_is_the_paper_k16():
  assert make('shaw').num_buckets == 33


# --- t5: Raffel et al. 2020, reference _relative_position_bucket -------------------------------------
#
# n = -(j - i) = -rel. Bidirectional, num_buckets = 32, max_distance = 128: N = 32 // 2 = 16 per side,
# rel > 0 (n < 0) adds 16, then n = |n|; max_exact = N // 2 = 8.
#   n < 8:  bucket = n.
#   n >= 8: bucket = min(15, 8 + floor(log(n / 8) / log(128 / 8) * (16 - 8)))
#                  = min(15, 8 + floor(8 log16(n / 8)))
#     n = 8:    log16(1) = 0                                   -> 8
#     n = 15:   8 * ln(1.875) / ln(16) = 8 * 0.62861 / 2.77259 = 1.8138   -> 8 + 1 = 9
#     n = 16:   8 * log16(2) = 8 * 1/4 = 2 (exactly; t5x's +eps keeps it from rounding down) -> 10
#     n = 64:   8 * log16(8) = 8 * 3/4 = 6                     -> 14
#     n = 127:  8 * ln(15.875) / ln(16) = 8 * 2.76474 / 2.77259 = 7.977 -> 15
#     n = 128:  8 * log16(16) = 8                              -> min(15, 16) = 15
#     n = 1000: 8 * ln(125) / ln(16) = 13.93                   -> 15
# Causal, num_buckets = 32: n = max(-rel, 0) (every rel > 0 is 0), N = 32, max_exact = 16:
#   n < 16:  bucket = n (so n = 1, 7, 8, 15 -> 1, 7, 8, 15).
#   n >= 16: bucket = min(31, 16 + floor(log(n / 16) / log(128 / 16) * 16))
#                   = min(31, 16 + floor(16 log8(n / 16)))
#     n = 16:   0                                                -> 16
#     n = 64:   16 * log8(4) = 16 * 2/3 = 10.67                  -> 26
#     n = 127:  16 * ln(7.9375) / ln(8) = 16 * 2.07157 / 2.07944 = 15.94 -> 31
#     n = 128:  16 * log8(8) = 16                                -> min(31, 32) = 31
#     n = 1000: 16 * ln(62.5) / ln(8) = 31.8                     -> 31
T5_REL = [0, -1, 1, -7, 7, -8, 8, -15, 15, -16, 16, -64, 64, -127, 127, -128, 128, -1000, 1000]
T5_BIDIRECTIONAL = [0, 1, 17, 7, 23, 8, 24, 9, 25, 10, 26, 14, 30, 15, 31, 15, 31, 15, 31]
T5_CAUSAL = [0, 1, 0, 7, 0, 8, 0, 15, 0, 16, 0, 26, 0, 31, 0, 31, 0, 31, 0]


@pytest.mark.parametrize('bidirectional,expected', [(True, T5_BIDIRECTIONAL), (False, T5_CAUSAL)])
def test_t5_buckets_match_the_published_formula(bidirectional, expected):
  enc = make('t5', bidirectional=bidirectional)
  np.testing.assert_array_equal(enc.bucket(jnp.array(T5_REL)), expected)
  np.testing.assert_array_equal(jax.jit(enc.bucket)(jnp.array(T5_REL)), expected)


def test_t5_bias_reads_the_table_at_the_bucket():
  enc = make('t5')
  table = np.arange(32 * 2, dtype=np.float32).reshape(32, 2)
  params = _with_table(enc, table)
  np.testing.assert_array_equal(enc.bias(params, jnp.array(T5_REL)), table[T5_BIDIRECTIONAL])


# --- piecewise ----------------------------------------------------------------------------------------
#
# Defaults e = 8, c = 15, M = 128. g(n) = n for n <= 8; 8 + (n - 8) // 15 for 8 <= n <= 128; g(128) after.
# Per side P = 8 + 120 / 15 + 1 = 17 buckets. Bidirectional: bucket = 16 + sign(rel) * g(|rel|), 33 rows.
#   |rel| = 0 -> g = 0;  1 -> 1;  7 -> 7;  8 -> 8 + 0 = 8;  22 -> 8 + 14 // 15 = 8;  23 -> 8 + 15 // 15 = 9;
#   127 -> 8 + 119 // 15 = 8 + 7 = 15;  128 -> 8 + 120 // 15 = 16;  1000 -> 16 (saturated).
PIECEWISE_REL = [0, -1, 1, -7, 7, -8, 8, -22, 22, -23, 23, -127, 127, -128, 128, -1000, 1000]
PIECEWISE_G = [0, 1, 1, 7, 7, 8, 8, 8, 8, 9, 9, 15, 15, 16, 16, 16, 16]
PIECEWISE_BIDIRECTIONAL = [16, 15, 17, 9, 23, 8, 24, 8, 24, 7, 25, 1, 31, 0, 32, 0, 32]
# Causal: bucket = g(max(-rel, 0)); every key ahead shares bucket 0 with rel = 0. 17 rows.
PIECEWISE_CAUSAL = [0, 1, 0, 7, 0, 8, 0, 8, 0, 9, 0, 15, 0, 16, 0, 16, 0]


@pytest.mark.parametrize(
    'bidirectional,expected,num_buckets', [(True, PIECEWISE_BIDIRECTIONAL, 33), (False, PIECEWISE_CAUSAL, 17)]
)
def test_piecewise_buckets_by_hand(bidirectional, expected, num_buckets):
  enc = make('piecewise', bidirectional=bidirectional)
  assert enc.num_buckets == num_buckets
  np.testing.assert_array_equal(enc.bucket(jnp.array(PIECEWISE_REL)), expected)
  np.testing.assert_array_equal(enc.distance_bucket(jnp.abs(jnp.array(PIECEWISE_REL))), PIECEWISE_G)


def test_piecewise_small_config_by_hand():
  # e = 2, c = 3, M = 8: g = 0, 1, 2 | 2, 2, 2 (n = 2..4) | 3, 3, 3 (n = 5..7) | 4 (n >= 8). P = 5, 9 rows.
  enc = make('piecewise', exact_distance=2, compression=3, max_distance=8)
  rel = jnp.arange(-10, 11)
  g = np.array([0, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4])  # g(0) .. g(10)
  expected = 4 + np.sign(np.arange(-10, 11)) * g[np.abs(np.arange(-10, 11))]
  np.testing.assert_array_equal(enc.bucket(rel), expected)
  table = np.arange(9 * 3, dtype=np.float32).reshape(9, 3)
  np.testing.assert_array_equal(enc.bias(_with_table(enc, table), rel), table[expected])


@pytest.mark.parametrize(
    'hparams',
    [
        {},
        {'bidirectional': False},
        {'exact_distance': 4, 'compression': 4, 'max_distance': 64},
        {'exact_distance': 16, 'compression': 1, 'max_distance': 16},
    ],
)
def test_piecewise_reaches_every_bucket_monotonically(hparams):
  enc = make('piecewise', **hparams)
  rel = np.arange(-3 * enc.max_distance, 3 * enc.max_distance + 1)
  buckets = np.asarray(enc.bucket(jnp.asarray(rel)))
  assert set(buckets.tolist()) == set(range(enc.num_buckets))
  assert (np.diff(buckets) >= 0).all() if enc.bidirectional else (np.diff(buckets) <= 0).all()


def test_piecewise_with_unit_compression_is_shaw():
  piecewise = make('piecewise', exact_distance=5, compression=1, max_distance=5)
  rel = jnp.arange(-40, 41)
  np.testing.assert_array_equal(piecewise.bucket(rel), make('shaw', max_distance=5).bucket(rel))


# --- multiscale -------------------------------------------------------------------------------------
#
# Defaults: scales (1, 4, 16), k = 8, so bucket_s(d) = clip(trunc(d / s), -8, 8) + 8 in 17-row tables.
#   d = 0:     (0, 0, 0) + 8                                  -> (8, 8, 8)
#   d = -1:    trunc(-1) = -1, trunc(-0.25) = 0, trunc(-1/16) = 0 -> (7, 8, 8)
#              (floor division would give quotients -1, -1, -1: the asymmetry trunc removes)
#   d = 5:     5, trunc(1.25) = 1, trunc(0.3125) = 0            -> (13, 9, 8)
#   d = -5:    -5, -1, 0                                        -> (3, 7, 8)    (mirror of d = 5)
#   d = 9:     clip(9) = 8, trunc(2.25) = 2, 0                  -> (16, 10, 8)
#   d = -33:   clip(-33) = -8, clip(trunc(-8.25) = -8), trunc(-2.06) = -2 -> (0, 0, 6)
#   d = 200:   8, clip(50) = 8, clip(trunc(12.5) = 12) = 8      -> (16, 16, 16)
#   d = -10^6: -8 at every scale                                -> (0, 0, 0)
MULTISCALE_REL = [0, -1, 5, -5, 9, -33, 200, -(10**6)]
MULTISCALE_BUCKETS = [[8, 7, 13, 3, 16, 0, 16, 0], [8, 8, 9, 7, 10, 0, 16, 0], [8, 8, 8, 8, 8, 6, 16, 0]]


def test_multiscale_bucket_maps_by_hand():
  enc = make('multiscale')
  np.testing.assert_array_equal(enc.buckets(jnp.array(MULTISCALE_REL)), MULTISCALE_BUCKETS)
  for scale, row in zip((1, 4, 16), MULTISCALE_BUCKETS):
    np.testing.assert_array_equal(scale_bucket(jnp.array(MULTISCALE_REL), scale, 8), row)


def test_multiscale_maps_are_symmetric_and_scale_one_is_exact():
  rel = jnp.arange(-100, 101)
  for scale in (1, 2, 3, 4, 16):
    b = np.asarray(scale_bucket(rel, scale, 8)) - 8
    np.testing.assert_array_equal(b, -b[::-1])  # trunc toward zero: bucket(-d) mirrors bucket(d)
  np.testing.assert_array_equal(scale_bucket(jnp.arange(-8, 9), 1, 8), np.arange(17))


@pytest.mark.parametrize(
    'reduction,expected',
    [
        # tables[s, b, 0] = 100 s + b and tables[s, b, 1] = -b: at d = -5 the buckets are (3, 7, 8), so
        # head 0 reads 3, 107, 208 and head 1 reads -3, -7, -8.
        ('sum', [318.0, -18.0]),
        ('mean', [106.0, -6.0]),
    ],
)
def test_multiscale_combines_the_scales(reduction, expected):
  enc = make('multiscale', reduction=reduction)
  params = enc.init(jax.random.key(0), 2)
  assert params['tables'].shape == (3, 17, 2)
  s = np.arange(3)[:, None]
  b = np.arange(17)[None, :]
  tables = np.stack([100.0 * s + b, -b + 0.0 * s], axis=-1)
  params = {**params, 'tables': jnp.asarray(tables, jnp.float32)}
  np.testing.assert_allclose(enc.bias(params, jnp.array([-5])), [expected])
  np.testing.assert_allclose(enc.bias(params, jnp.array([[-5, -5]]))[0, 1], expected)


def test_multiscale_accepts_a_list_of_scales_and_stays_hashable():
  enc = make('multiscale', scales=[1, 2])
  assert enc.scales == (1, 2) and hash(enc) == hash(make('multiscale', scales=(1, 2)))

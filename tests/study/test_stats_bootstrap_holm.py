"""The document bootstrap, the paired t test's p-value and Holm's correction, against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relpos_jax.study import stats


def test_paired_p_value_by_hand():
  # d = (0.1, 0.2, 0.3): mean 0.2, std 0.1, t = 0.2 / (0.1 / sqrt 3) = sqrt 12 on 2 degrees of freedom, where
  # P(T > t) = (1 - t / sqrt(t^2 + 2)) / 2 in closed form, so p = 1 - sqrt(12 / 14).
  p = stats.paired_p_value([1.1, 1.2, 1.3], [1.0, 1.0, 1.0])
  assert p == pytest.approx(1 - math.sqrt(12 / 14), rel=1e-9)
  assert stats.paired_p_value([1.0], [2.0]) is None
  assert stats.paired_p_value([1.0, 2.0], [1.0, 2.0]) == 1.0
  # The t interval excludes zero exactly when p < 0.05.
  a, b = [2.0, 2.1, 2.3, 2.2], [2.2, 2.2, 2.6, 2.25]
  assert stats.paired_difference(a, b)['resolved'] == (stats.paired_p_value(a, b) < 0.05)


def test_holm_by_hand():
  # Sorted: 0.005 (x4 = 0.02), 0.01 (x3 = 0.03), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04, raised to 0.06).
  out = stats.holm([0.01, 0.04, 0.03, 0.005])
  assert out['adjusted'] == pytest.approx([0.03, 0.06, 0.06, 0.02])
  assert out['resolved'] == [True, False, False, True]
  assert out['levels'] == pytest.approx([1 - 0.05 / 3, 0.95, 0.975, 1 - 0.05 / 4])
  assert out['m'] == 4
  # A comparison without a p-value is outside the family: m = 2 here.
  partial = stats.holm([None, 0.02, 0.5])
  assert partial['adjusted'][0] is None and partial['adjusted'][1:] == pytest.approx([0.04, 0.5])
  assert partial['resolved'] == [False, True, False] and partial['m'] == 2
  assert stats.holm([0.3, 0.8])['adjusted'] == pytest.approx([0.6, 0.8])
  assert stats.holm([0.9, 0.8])['adjusted'] == pytest.approx([1.0, 1.0])  # 2 x 0.8 capped at 1, then monotone
  with pytest.raises(ValueError, match=r'p_values\[1\]=1.5'):
    stats.holm([0.1, 1.5])


def test_bootstrap_is_the_hand_loop_with_the_same_draws():
  rng = np.random.default_rng(3)
  n = 7
  chars = rng.integers(100, 1000, n).astype(float)
  a_bits = chars * rng.uniform(1.0, 2.0, n)
  b_bits = chars * rng.uniform(1.0, 2.0, n)
  out = stats.document_bootstrap(a_bits, chars, b_bits, chars, num_resamples=500, seed=11)
  draws = np.random.default_rng(11).integers(0, n, size=(500, n))
  replicates = []
  for row in draws:
    a = sum(a_bits[i] for i in row) / sum(chars[i] for i in row)
    b = sum(b_bits[i] for i in row) / sum(chars[i] for i in row)
    replicates.append(a - b)
  replicates = sorted(replicates)

  # numpy's linear quantile at q: position q (N - 1) between the sorted replicates.
  def quantile(q):
    pos = q * (len(replicates) - 1)
    lo = math.floor(pos)
    return replicates[lo] + (pos - lo) * (replicates[min(lo + 1, len(replicates) - 1)] - replicates[lo])

  assert out['low'] == pytest.approx(quantile(0.025)) and out['high'] == pytest.approx(quantile(0.975))
  assert out['mean'] == pytest.approx(a_bits.sum() / chars.sum() - b_bits.sum() / chars.sum())
  assert out == stats.document_bootstrap(a_bits, chars, b_bits, chars, num_resamples=500, seed=11)  # deterministic


def test_bootstrap_of_two_documents_matches_the_exact_distribution():
  # Documents of 1 character each; A - B is 0 on the first and 1 on the second. A resample holds the second
  # 0, 1 or 2 times with probabilities 1/4, 1/2, 1/4: differences 0, 0.5, 1. The 95% interval is [0, 1]
  # (2.5% and 97.5% fall inside the end masses), not resolved, and P*(d <= 0) = 1/4 gives p = 1/2.
  out = stats.document_bootstrap([1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], num_resamples=20_000, seed=0)
  assert (out['low'], out['high']) == (0.0, 1.0) and not out['resolved']
  assert out['p_value'] == pytest.approx(0.5, abs=0.02) and out['mean'] == 0.5


def test_bootstrap_weights_documents_by_characters_and_resolves_a_constant_gap():
  # Bits per character is total bits over total characters: 110 / 100 - 100 / 100 = 0.1, not the mean of the
  # per-document differences (1.0 and 0.0).
  out = stats.document_bootstrap([20.0, 90.0], [10.0, 90.0], [10.0, 90.0], [10.0, 90.0], num_resamples=200)
  assert out['mean'] == pytest.approx(0.1)
  # The same gap per character on every document: every resample gives it, so the interval is that point.
  chars = np.array([50.0, 80.0, 120.0, 30.0])
  same = stats.document_bootstrap(1.25 * chars, chars, 1.0 * chars, chars, num_resamples=300)
  assert same['low'] == pytest.approx(0.25) and same['high'] == pytest.approx(0.25)
  assert same['resolved'] and same['p_value'] == 0.0


def test_documents_without_scored_characters_are_left_out():
  with_empty = stats.document_bootstrap([1.0, 0.0, 2.0], [1.0, 0.0, 1.0], [1.0, 0.0, 1.0], [1.0, 0.0, 1.0], seed=4)
  without = stats.document_bootstrap([1.0, 2.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], seed=4)
  assert with_empty == without and without['n_documents'] == 2
  with pytest.raises(ValueError, match=r'at least 2 scored documents'):
    stats.document_bootstrap([1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [1.0, 0.0])


def test_bootstrap_bad_input_names_what_is_wrong():
  with pytest.raises(ValueError, match=r'a_bits=2, a_chars=3'):
    stats.document_bootstrap([1, 2], [1, 2, 3], [1, 2], [1, 2])
  with pytest.raises(ValueError, match=r'at least 2 documents, got 1'):
    stats.document_bootstrap([1], [1], [1], [1])
  with pytest.raises(ValueError, match=r'num_resamples=0'):
    stats.document_bootstrap([1, 2], [1, 2], [1, 2], [1, 2], num_resamples=0)
  with pytest.raises(ValueError, match=r'finite, non-negative'):
    stats.document_bootstrap([1, float('nan')], [1, 2], [1, 2], [1, 2])

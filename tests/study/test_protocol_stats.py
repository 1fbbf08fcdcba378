"""stats.py (the one ± and the paired interval) and the report's paired-difference table, by hand."""

from __future__ import annotations

import math

import pytest

from relpos_jax.study import report, stats


def test_mean_and_sample_std_by_hand():
  assert stats.mean([1.0, 2.0, 4.0]) == pytest.approx(7 / 3)
  # deviations -4/3, -1/3, 5/3: squares sum to 42/9 = 14/3; / (n - 1) = 7/3
  assert stats.std([1.0, 2.0, 4.0]) == pytest.approx(math.sqrt(7 / 3))
  assert stats.std([2.0]) is None and stats.mean([]) is None and stats.mean([None, 3.0]) == 3.0


def test_paired_interval_by_hand():
  # d = a - b = (-0.2, -0.1, -0.3): mean -0.2, sample sd 0.1, t(0.975, 2) = 4.302653 (tables),
  # half width 4.302653 * 0.1 / sqrt(3) = 0.248414: [-0.448414, 0.048414] holds 0, so not resolved.
  d = stats.paired_difference([2.0, 2.1, 2.3], [2.2, 2.2, 2.6])
  assert d['n'] == 3 and d['mean'] == pytest.approx(-0.2) and d['std'] == pytest.approx(0.1)
  assert d['half_width'] == pytest.approx(0.248414, abs=1e-6)
  assert (d['low'], d['high']) == (pytest.approx(-0.448414, abs=1e-6), pytest.approx(0.048414, abs=1e-6))
  assert d['resolved'] is False
  # d = (1, 2, 3, 2, 2): mean 2, sd sqrt(0.5), t(0.975, 4) = 2.776445: 2 ± 0.877989 excludes 0.
  d = stats.paired_difference([3.0, 4.0, 5.0, 4.0, 4.0], [2.0, 2.0, 2.0, 2.0, 2.0])
  assert d['half_width'] == pytest.approx(2.776445 * math.sqrt(0.5) / math.sqrt(5), abs=1e-6)
  assert d['resolved'] is True and d['low'] == pytest.approx(2 - 0.877989, abs=1e-5)


def test_paired_interval_leaves_out_missing_pairs_and_needs_two():
  d = stats.paired_difference([1.0, None, 3.0], [0.5, 1.0, None])
  assert d['n'] == 1 and d['mean'] == pytest.approx(0.5) and d['low'] is None and d['resolved'] is False
  with pytest.raises(ValueError, match='one value per seed'):
    stats.paired_difference([1.0], [1.0, 2.0])


def _results():
  return {
      'metric': 'bits_per_char',
      'lower_is_better': True,
      'train_length': 8,
      'eval_lengths': [8, 16, 32],
      'seeds': [0, 1, 2],
      'comparison_requests': [{'a': 'x', 'b': 'y', 'statistics': ['train', 'ood', 32]}],
      'runs': [
          {
              'name': 'x',
              'spec': 'x',
              'seeds': [0, 1, 2],
              'by_length': {},
              'by_length_per_seed': {'8': [2.0, 2.1, 2.3], '16': [2.5, 2.6, 2.4], '32': [3.0, 3.2, 2.9]},
          },
          {
              'name': 'y',
              'spec': 'y',
              'seeds': [0, 1, 2],
              'by_length': {},
              'by_length_per_seed': {'8': [2.2, 2.2, 2.6], '16': [2.6, 2.7, 2.5], '32': [3.4, 3.5, 3.3]},
              'diverged_seeds': {'2': {'step': 3}},
          },
      ],
  }


def test_report_comparisons_pair_seeds_and_leave_out_diverged_ones():
  found = report.comparisons(_results())
  assert [c['statistic'] for c in found] == ['train', 'ood', 32]
  train, ood, longest = found
  # y's seed 2 diverged: the pairs are seeds 0 and 1 only.
  assert train['seeds'] == [0, 1] and train['n'] == 2
  assert train['mean'] == pytest.approx(((2.0 - 2.2) + (2.1 - 2.2)) / 2)
  # ood: per seed the mean of 16 and 32 -> x (2.75, 2.9), y (3.0, 3.1): differences -0.25, -0.2
  assert ood['mean'] == pytest.approx(-0.225) and ood['std'] == pytest.approx(math.sqrt(2) * 0.025)
  assert longest['mean'] == pytest.approx(-0.35) and longest['a_mean'] == pytest.approx(3.1)
  table = report.comparisons_table(_results())
  assert '| x | y | train length 8 | 2 |' in table and 'sample standard deviation' in table


def test_a_clean_run_bounds_the_error_rate_by_the_rule_of_three():
  # 30,000 reads without a glitch: below 0.1 per thousand; 1,363 (the committed sparse set): 2.2 per thousand.
  assert 1000 * stats.clean_run_bound(30_000) == pytest.approx(0.1)
  assert 1000 * stats.clean_run_bound(1_363) == pytest.approx(2.201, abs=1e-3)
  # The rule of three is the exact one-sided 95% bound 1 - 0.05^(1/N) to within 0.2% (slightly conservative).
  exact = 1 - 0.05 ** (1 / 30_000)
  assert exact < stats.clean_run_bound(30_000) < 1.002 * exact
  for bad in (0, -5, True, None):
    with pytest.raises(ValueError, match=f'trials={bad!r}'):
      stats.clean_run_bound(bad)

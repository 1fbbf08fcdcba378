"""The document bootstrap, the paired t test's p-value and Holm's correction, against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from relpos_jax.study import report, stats


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


def _family(**runs_more):
  """x - y per seed at 8, 16, 32: (1, 1.1, 0.9), (1, 1.3, 0.7), (1, 2, 3): three comparisons of three seeds."""
  results = {
      'metric': 'bits_per_char',
      'lower_is_better': True,
      'train_length': 8,
      'eval_lengths': [8, 16, 32],
      'seeds': [0, 1, 2],
      'comparison_requests': [{'a': 'x', 'b': 'y', 'statistics': [8, 16, 32]}],
      'runs': [
          {
              'name': 'x',
              'spec': 'x',
              'seeds': [0, 1, 2],
              'by_length': {},
              'by_length_per_seed': {'8': [3.0, 3.1, 2.9], '16': [3.0, 3.3, 2.7], '32': [3.0, 4.0, 5.0]},
          },
          {
              'name': 'y',
              'spec': 'y',
              'seeds': [0, 1, 2],
              'by_length': {},
              'by_length_per_seed': {'8': [2.0, 2.0, 2.0], '16': [2.0, 2.0, 2.0], '32': [2.0, 2.0, 2.0]},
          },
      ],
  }
  for run in results['runs']:
    run.update(runs_more.get(run['name'], {}))
  return results


def test_report_comparisons_adjust_the_seed_p_values_by_holm_by_hand():
  # Student t with 2 degrees of freedom: 2 P(T >= t) = 1 - t / sqrt(t^2 + 2). With mean 1 and sd s over three
  # seeds, t^2 = 3 / s^2: at 8 (s 0.1) t^2 = 300, at 16 (s 0.3) t^2 = 100/3; at 32 (mean 2, sd 1) t^2 = 12.
  p = [1 - math.sqrt(300 / 302), 1 - math.sqrt(100 / 106), 1 - math.sqrt(12 / 14)]  # .003317, .028714, .074180
  # Holm, m = 3: 3 p_8 = .009950; max(that, 2 p_16) = .057428; max(that, p_32) = .074180.
  adjusted = [3 * p[0], 2 * p[1], p[2]]
  found = report.comparisons(_family())
  for c, raw, adj in zip(found, p, adjusted):
    assert c['p_value'] == pytest.approx(raw, rel=1e-9) and c['p_holm'] == pytest.approx(adj, rel=1e-9)
    assert c['holm_family'] == 3 and 'bootstrap' not in c and 'bootstrap_missing' not in c  # no totals
  # 16 is resolved by its own seed interval (p .029) but not after Holm (.057); 8 is resolved by both.
  assert [c['resolved'] for c in found] == [True, True, False]
  assert [c['resolved_holm'] for c in found] == [True, False, False]
  table = report.comparisons_table({**_family(), 'comparisons': found})
  assert '| A | B | at | seeds | A | B | A − B | 95% interval | resolved | p (Holm) | resolved (Holm) |' in table
  assert '| 0.00995 | yes |' in table and '| 0.0574 | no |' in table and 'bootstrap' not in table


def test_old_comparisons_and_one_seed_render_as_before():
  """Comparisons stored before Holm and the bootstrap (every committed study) render the nine columns they did;
  a one-seed study has no p-value, so no Holm column either."""
  old = [
      {k: v for k, v in c.items() if k not in ('p_value', 'p_holm', 'resolved_holm', 'holm_family')}
      for c in report.comparisons(_family())
  ]
  table = report.comparisons_table({**_family(), 'comparisons': old})
  assert (
      '| A | B | at | seeds | A | B | A − B | 95% interval | resolved |\n|---|---|---|---|---|---|---|---|---|\n'
      in table
  )
  assert 'Holm' not in table and 'bootstrap' not in table
  one = _family()
  for run in one['runs']:
    run['seeds'], run['by_length_per_seed'] = [0], {n: v[:1] for n, v in run['by_length_per_seed'].items()}
  found = report.comparisons(one)
  assert all(c['p_value'] is None and 'p_holm' not in c for c in found)
  assert 'Holm' not in report.comparisons_table({**one, 'comparisons': found})


def _totals(bits, characters):
  """Sparse totals as a run stores them: documents 0..n-1 of a 5-document split, all scored."""
  return {'num_documents': 5, 'documents': list(range(len(bits))), 'bits': bits, 'characters': characters}


def test_report_bootstrap_pools_the_seeds_by_summing_document_totals():
  # Two documents of 10 and 30 characters, the same for every seed. Per seed, bits per char at 32 must match
  # the table's values (x: 3, 4, 5; y: 2): x seed s puts b_s bits on each document, b_s = 10 v_s and 30 v_s.
  chars = [10.0, 30.0]
  x = {str(s): {'32': _totals([10 * v, 30 * v], chars)} for s, v in zip([0, 1, 2], [3.0, 4.0, 5.0])}
  # y: 2 bits per char overall, but 1.0 on document 0 and 7/3 on document 1 (10 + 70 bits over 40 characters).
  y = {str(s): {'32': _totals([10.0, 70.0], chars)} for s in [0, 1, 2]}
  results = _family(x={'document_totals_per_seed': x}, y={'document_totals_per_seed': y})
  by_statistic = {c['statistic']: c for c in report.comparisons(results)}
  assert by_statistic[8]['bootstrap_missing'] == 'no totals' and by_statistic[16]['bootstrap_missing'] == 'no totals'
  boot = by_statistic[32]['bootstrap']
  # Pooled over the seeds: x (10 * 12, 30 * 12) bits over (30, 90) chars (3 + 4 + 5 = 12); y (30, 210) over (30, 90).
  expected = stats.document_bootstrap(
      [120.0, 360.0, 0, 0, 0], [30.0, 90.0, 0, 0, 0], [30.0, 210.0, 0, 0, 0], [30.0, 90.0, 0, 0, 0]
  )
  assert boot == expected and boot['n_documents'] == 2
  # The point estimate is the seed mean difference, 4 - 2 = 2; the resamples: both documents of 0 (4 - 1 = 3),
  # of 1 (4 - 7/3 = 5/3), or one of each (2).
  assert boot['mean'] == pytest.approx(by_statistic[32]['mean']) == pytest.approx(2.0)
  assert boot['low'] == pytest.approx(5 / 3) and boot['high'] == pytest.approx(3.0) and boot['resolved']
  table = report.comparisons_table({**results, 'comparisons': list(by_statistic.values())})
  assert '| 2 | [+1.667, +3.000] |' in table and '| — | — (no totals) |' in table
  # A seed missing on one side: no bootstrap over seeds that do not pair.
  del x['2']
  assert report.comparisons(results)[2]['bootstrap_missing'] == 'no totals'

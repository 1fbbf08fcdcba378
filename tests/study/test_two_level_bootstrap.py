"""The seed x document bootstrap (stats.two_level_bootstrap): a hand loop over the same draws, its two limits
(identical seeds: the document bootstrap; alike documents: a seed bootstrap), bad input named, and the report's
column, in the committed reports that store document totals (via `rereport`)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from relpos_jax.study import report, rereport, stats
from relpos_jax.train import config as config_lib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _seeds_by_documents(seeds=3, documents=5, seed=0):
  rng = np.random.default_rng(seed)
  chars = rng.integers(100, 1000, (seeds, documents)).astype(float)
  return chars * rng.uniform(1.0, 2.0, chars.shape), chars, chars * rng.uniform(1.0, 2.0, chars.shape), chars


def test_it_is_the_hand_loop_with_the_same_draws():
  a_bits, a_chars, b_bits, b_chars = _seeds_by_documents()
  out = stats.two_level_bootstrap(a_bits, a_chars, b_bits, b_chars, num_resamples=400, seed=5)
  rng = np.random.default_rng(5)
  documents, seeds = rng.integers(0, 5, size=(400, 5)), rng.integers(0, 3, size=(400, 3))
  replicates = []
  for docs, drawn in zip(documents, seeds):
    cells = [(s, d) for s in drawn for d in docs]  # every drawn seed reads the same drawn documents
    a = sum(a_bits[s, d] for s, d in cells) / sum(a_chars[s, d] for s, d in cells)
    b = sum(b_bits[s, d] for s, d in cells) / sum(b_chars[s, d] for s, d in cells)
    replicates.append(a - b)
  low, high = np.quantile(replicates, [0.025, 0.975])
  assert out['low'] == pytest.approx(low, rel=1e-12) and out['high'] == pytest.approx(high, rel=1e-12)
  assert out['mean'] == pytest.approx(a_bits.sum() / a_chars.sum() - b_bits.sum() / b_chars.sum())
  assert (out['n_seeds'], out['n_documents'], out['num_resamples'], out['seed']) == (3, 5, 400, 5)


def test_identical_seeds_give_the_document_bootstrap_and_alike_documents_a_seed_bootstrap():
  a_bits, a_chars, b_bits, b_chars = _seeds_by_documents(seeds=1, documents=6)
  copies = [np.repeat(x, 4, axis=0) for x in (a_bits, a_chars, b_bits, b_chars)]
  two_level = stats.two_level_bootstrap(*copies, num_resamples=300, seed=2)
  documents = stats.document_bootstrap(*(x[0] for x in (a_bits, a_chars, b_bits, b_chars)), num_resamples=300, seed=2)
  for key in ('mean', 'low', 'high', 'p_value'):
    assert two_level[key] == pytest.approx(documents[key], rel=1e-12), key
  # Every document of a seed at that seed's bits per character (A: 2 + s / 10, B: 2), equal characters: the
  # replicate is the mean of the drawn seeds' differences s / 10, so the interval is a bootstrap of the seeds.
  chars = np.full((4, 6), 50.0)
  per_seed = np.array([0.0, 0.1, 0.2, 0.3])
  out = stats.two_level_bootstrap(chars * (2 + per_seed[:, None]), chars, chars * 2, chars, num_resamples=300, seed=2)
  rng = np.random.default_rng(2)
  rng.integers(0, 6, size=(300, 6))  # the document draw, which changes nothing here
  seed_means = per_seed[rng.integers(0, 4, size=(300, 4))].mean(1)
  assert [out['low'], out['high']] == pytest.approx(list(np.quantile(seed_means, [0.025, 0.975])), rel=1e-9)


def test_it_is_wider_than_either_interval_alone_on_spread_seeds_and_documents():
  a_bits, a_chars, b_bits, b_chars = _seeds_by_documents(seeds=5, documents=40, seed=7)
  a_bits = a_bits * np.linspace(0.95, 1.05, 5)[:, None]  # seeds that disagree
  both = stats.two_level_bootstrap(a_bits, a_chars, b_bits, b_chars, num_resamples=2000)
  text = stats.document_bootstrap(*(x.sum(0) for x in (a_bits, a_chars, b_bits, b_chars)), num_resamples=2000)
  assert both['half_width'] > text['half_width']
  assert both['low'] < both['mean'] < both['high']


def test_bad_input_is_named():
  a_bits, a_chars, b_bits, b_chars = _seeds_by_documents()
  with pytest.raises(ValueError, match=r'shape \(seeds, documents\).*b_bits=\(3, 4\)'):
    stats.two_level_bootstrap(a_bits, a_chars, b_bits[:, :4], b_chars)
  with pytest.raises(ValueError, match='at least 2 seeds, got 1'):
    stats.two_level_bootstrap(a_bits[:1], a_chars[:1], b_bits[:1], b_chars[:1])
  with pytest.raises(ValueError, match='finite, non-negative'):
    stats.two_level_bootstrap(-a_bits, a_chars, b_bits, b_chars)
  with pytest.raises(ValueError, match='num_resamples=0'):
    stats.two_level_bootstrap(a_bits, a_chars, b_bits, b_chars, num_resamples=0)
  with pytest.raises(ValueError, match='confidence=1.5'):
    stats.two_level_bootstrap(a_bits, a_chars, b_bits, b_chars, confidence=1.5)
  empty = np.zeros_like(a_chars)
  empty[:, 0] = 10.0  # one scored document only
  with pytest.raises(ValueError, match='2 scored documents'):
    stats.two_level_bootstrap(a_bits, empty, b_bits, empty)


def _totals(bits, characters):
  return {'num_documents': 3, 'documents': [0, 1, 2], 'bits': list(bits), 'characters': list(characters)}


def test_the_report_puts_it_beside_the_document_bootstrap():
  chars = [10.0, 20.0, 30.0]
  a = {str(s): {'8': _totals([v * c for c in chars], chars)} for s, v in enumerate([3.0, 3.2, 2.9])}
  b = {str(s): {'8': _totals([2.0 * c for c in chars], chars)} for s in range(3)}
  per_seed = {'8': [3.0, 3.2, 2.9], '16': [3.0, 3.0, 3.0]}
  results = {
      'metric': 'bits_per_char',
      'train_length': 8,
      'eval_lengths': [8, 16],
      'seeds': [0, 1, 2],
      'comparison_requests': [{'a': 'a', 'b': 'b', 'statistics': [8, 'ood']}],
      'runs': [
          {'name': 'a', 'seeds': [0, 1, 2], 'by_length_per_seed': per_seed, 'document_totals_per_seed': a},
          {
              'name': 'b',
              'seeds': [0, 1, 2],
              'by_length_per_seed': {'8': [2.0] * 3, '16': [2.0] * 3},
              'document_totals_per_seed': b,
          },
      ],
  }
  at8, ood = report.comparisons(results)
  assert at8['two_level'] == stats.two_level_bootstrap(
      [[v * c for c in chars] for v in (3.0, 3.2, 2.9)], [chars] * 3, [[2.0 * c for c in chars]] * 3, [chars] * 3
  )
  assert at8['two_level']['mean'] == pytest.approx(at8['mean'])  # the seed table's mean difference, 1.0333
  assert ood['two_level_missing'] == 'several lengths' and ood['bootstrap_missing'] == 'several lengths'
  table = report.comparisons_table({**results, 'comparisons': [at8, ood]})
  t = at8['two_level']
  # Documents alike within each seed: the document bootstrap has no width, the seeds' spread is all there is.
  assert f'| 3 | [+1.033, +1.033] | [{t["low"]:+.3f}, {t["high"]:+.3f}] |' in table and t['high'] - t['low'] > 0.2
  assert '| — | — (several lengths) | — (several lengths) |' in table
  assert 'seed × document bootstrap 95% |' in table and 'pigeonhole' in table
  # A study with one seed: the document bootstrap, and no seeds to resample.
  for run in results['runs']:
    run['seeds'], run['by_length_per_seed'] = [0], {n: v[:1] for n, v in run['by_length_per_seed'].items()}
  one = report.comparisons(results)[0]
  assert 'bootstrap' in one and one['two_level_missing'] == 'one seed'
  # Comparisons stored before it render without its column.
  old = [{k: v for k, v in c.items() if not k.startswith('two_level')} for c in (at8, ood)]
  assert 'seed × document' not in report.comparisons_table({**results, 'comparisons': old})


STUDIES_WITH_TOTALS = ('study_python', 'study_english', 'study_english_bpe', 'study_python_lecture')


@pytest.mark.parametrize('study', STUDIES_WITH_TOTALS)
def test_the_committed_reports_with_document_totals_carry_it_as_the_report_computes_it(study):
  """docs/<study>/results.json is what `rereport` writes from it: its comparisons (the seed x document bootstrap
  among them) are today's `report.comparisons` of its stored values, and results.md its rendering."""
  folder = os.path.join(REPO, 'docs', study)
  committed = report.load_json(os.path.join(folder, 'results.json'))
  assert any('two_level' in c for c in committed['comparisons']), f'docs/{study}: run the rereport command'
  again = json.loads(json.dumps(report.comparisons(committed)))
  assert again == committed['comparisons'], f'docs/{study}: stale; `python -m relpos_jax.study.rereport docs/{study}`'
  with open(os.path.join(folder, 'results.md'), encoding='utf-8') as f:
    assert report.comparisons_table(committed) in f.read()


def test_rereport_rewrites_a_copy_and_names_a_folder_without_results(tmp_path, capsys):
  source = os.path.join(REPO, 'docs', 'study_python_lecture', 'results.json')
  results = report.load_json(source)
  for c in results['comparisons']:  # a report from before the two-level bootstrap
    c.pop('two_level', None), c.pop('two_level_missing', None)
  report.write_json(results, str(tmp_path / 'results.json'))
  assert rereport.main(['rereport', str(tmp_path)]) == 0
  again = report.load_json(str(tmp_path / 'results.json'))
  assert again['comparisons'] == report.load_json(source)['comparisons'] and again['runs'] == results['runs']
  assert (tmp_path / 'results.md').exists() and not (tmp_path / 'results.png').exists()
  assert rereport.main(['rereport', str(tmp_path / 'nowhere')]) == 2
  assert 'usage: python -m relpos_jax.study.rereport' in capsys.readouterr().err
  with pytest.raises(config_lib.ConfigError, match='nowhere/results.json does not exist'):
    rereport.rereport(str(tmp_path / 'nowhere'))

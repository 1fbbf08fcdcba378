"""The cross-corpus tables: ranks, paired intervals and verdicts computed from per-seed values, by hand."""

from __future__ import annotations

import json
import math

import pytest

from relpos_jax.study import cross_corpus

LENGTHS = [8, 16]


def _results(per_seed: dict[str, list[float]]) -> dict:
  """A study whose every encoder reads `per_seed[name]` (one value a seed) at the longest length, 5 seeds."""
  seeds = [0, 1, 2, 3, 4]
  runs = []
  for name, values in per_seed.items():
    runs.append(
        {
            'name': name,
            'seeds': seeds,
            'by_length': {'8': 1.0, '16': sum(values) / len(values)},
            'by_length_per_seed': {'8': [1.0] * 5, '16': values},
        }
    )
  return {'runs': runs, 'seeds': seeds, 'eval_lengths': LENGTHS, 'train_length': 8}


# A beats B by exactly 0.1 on every seed of corpus one (a resolved difference); on corpus two by 0.1 on average
# with a spread that the interval cannot separate from zero.
ONE = _results({'a': [2.0, 2.1, 2.2, 2.3, 2.4], 'b': [2.1, 2.2, 2.3, 2.4, 2.5], 'c': [3.0] * 5})
TWO = _results({'a': [2.0, 2.5, 2.0, 2.5, 2.0], 'b': [2.4, 2.0, 2.4, 2.0, 2.4], 'c': [1.0] * 5})


def test_the_findings_are_paired_differences_over_seeds_with_holm():
  rows = cross_corpus.findings(ONE, ['a vs b', 'b vs a', 'a vs nobody'])
  assert set(rows) == {'a vs b', 'b vs a'}  # an encoder the study did not run: no row
  row = rows['a vs b']
  assert row['mean'] == pytest.approx(-0.1) and row['n'] == 5
  # Identical differences: zero spread, an interval of width zero at -0.1, resolved after Holm.
  assert row['low'] == pytest.approx(-0.1) and row['high'] == pytest.approx(-0.1) and row['resolved_holm']
  two = cross_corpus.findings(TWO, ['a vs b'])['a vs b']
  diffs = [-0.4, 0.5, -0.4, 0.5, -0.4]
  mean = sum(diffs) / 5
  std = math.sqrt(sum((d - mean) ** 2 for d in diffs) / 4)
  half = 2.7764451051977987 * std / math.sqrt(5)  # t(0.975, 4)
  assert two['mean'] == pytest.approx(mean) and two['high'] - two['low'] == pytest.approx(2 * half)
  assert not two['resolved_holm']


def test_verdicts_by_hand():
  resolved_minus = {'mean': -0.1, 'resolved_holm': True}
  resolved_plus = {'mean': +0.1, 'resolved_holm': True}
  unresolved = {'mean': -0.1, 'resolved_holm': False}
  assert cross_corpus.verdict([resolved_minus, resolved_minus]) == 'holds on every corpus'
  assert cross_corpus.verdict([resolved_minus, resolved_plus]) == 'differs'
  assert cross_corpus.verdict([resolved_minus, unresolved]) == 'not resolved everywhere'
  assert cross_corpus.verdict([resolved_minus, None]) == 'not resolved everywhere'  # not run on a corpus


def test_tables_rank_the_shared_encoders_per_corpus_and_say_the_verdict():
  studies = {'one': ONE, 'two': {**TWO, 'runs': TWO['runs'] + [{**TWO['runs'][0], 'name': 'only_two'}]}}
  table = cross_corpus.encoder_table(studies)
  assert 'only_two' not in table  # ranked among the encoders every study ran
  assert '| c | 3.000 ± 0.000 (3) | 1.000 ± 0.000 (1) |' in table
  assert '| a | 2.200 ± 0.158 (1) |' in table
  findings = cross_corpus.findings_table(studies, ['a vs b'])
  assert '| a vs b | -0.100 [-0.100, -0.100] ✓ (n=5) |' in findings and findings.rstrip().endswith(
      '| not resolved everywhere |'
  )


def _docs(tmp_path, studies=(ONE, TWO, ONE)):
  """A docs folder with a report per corpus of CORPORA (None: that corpus's folder left out) and a findings page."""
  for (_, folder), results in zip(cross_corpus.CORPORA, studies):
    if results is not None:
      (tmp_path / folder).mkdir()
      (tmp_path / folder / 'results.json').write_text(json.dumps(results))
  readme = tmp_path / cross_corpus.FINDINGS_FILE
  readme.write_text(f'intro\n{cross_corpus.TABLE_MARKER}\nold table\n{cross_corpus.TABLE_END}\nrest\n')
  return readme


def test_write_reads_the_folders_and_refreshes_the_findings_block(tmp_path):
  readme = _docs(tmp_path)
  path = cross_corpus.write(str(tmp_path), str(readme))
  text = open(path).read()
  assert all(f'{label} at 16 (rank)' in text for label, _ in cross_corpus.CORPORA)
  refreshed = readme.read_text()
  assert 'old table' not in refreshed and refreshed.startswith('intro\n') and refreshed.endswith('rest\n')
  assert (
      '| finding (A − B at the longest length) | Python bytes | English bytes | English BPE | across corpora |'
      in refreshed
  )
  readme.write_text('no block here\n')
  with pytest.raises(ValueError, match='cross-corpus-table'):
    cross_corpus.write(str(tmp_path), str(readme))


def test_no_study_at_all_is_a_clear_error(tmp_path):
  with pytest.raises(
      ValueError, match=r'study_python/results.json, .*study_english_bpe/results.json missing: the tables compare'
  ):
    cross_corpus.write(str(tmp_path))


def test_a_missing_corpus_is_refused_by_name_and_nothing_is_rewritten(tmp_path, capsys):
  """With one corpus's report absent the findings would be judged on the others alone (the README once said 6
  of 6 findings hold on every corpus from the Python column): refused, naming it, the README left as it was."""
  readme = _docs(tmp_path, (ONE, None, ONE))
  before = readme.read_text()
  with pytest.raises(ValueError, match=r'study_english/results.json missing: the tables compare every corpus'):
    cross_corpus.write(str(tmp_path), str(readme))
  assert readme.read_text() == before and not (tmp_path / cross_corpus.OUT_FILE).exists()
  with pytest.raises(SystemExit, match=r'^ConfigError: cross_corpus: .*study_english/results.json missing'):
    cross_corpus.main(['cross_corpus', str(tmp_path)])
  assert readme.read_text() == before


@pytest.mark.parametrize(
    'text, found', [('[1, 2]', 'list'), ('{"seeds": [0]}', r"\['seeds'\]"), ('{"runs": [], "eval_la', 'not valid JSON')]
)
def test_a_report_that_is_no_study_report_is_refused_by_name(tmp_path, text, found):
  _docs(tmp_path)
  (tmp_path / 'study_english' / 'results.json').write_text(text)
  with pytest.raises(ValueError, match=rf'study_english/results.json .*{found}'):
    cross_corpus.load(str(tmp_path))

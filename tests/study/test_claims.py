"""Claims sized to their evidence: each verdict computed from the reports by one rule (relpos_jax.study.claims),
checked on hand-made reports, and docs/claims.md the generator's output from the committed ones."""

from __future__ import annotations

import os

import pytest

from relpos_jax.study import claims, suite_summary

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(name, per_length, exact=None, seeds=(0, 1, 2)):
  """A study entry with per-seed accuracy {length: [one per seed]} (and exact match)."""
  run = {'name': name, 'seeds': list(seeds), 'by_length_per_seed': {str(n): v for n, v in per_length.items()}}
  if exact is not None:
    run['exact_match_by_length_per_seed'] = {str(n): v for n, v in exact.items()}
  return run


def _report(tasks: dict) -> dict:
  """{'summary', 'results'} from {task: [runs]}: trained on 1..8, evaluated at 8 (within), 16 and 32 (beyond);
  'learned' from the mean over seeds of the accuracy at 8, as the suite computes it."""
  summary = {'tasks': list(tasks), 'cells': {}, 'held_out': {}}
  results = {}
  for task, runs in tasks.items():
    results[task] = {
        'eval_lengths': [8, 16, 32],
        'train_length': 8,
        'meta': {'data': {'train_lengths': [1, 8]}},
        'runs': runs,
    }
    for run in runs:
      within = [v for v in run['by_length_per_seed']['8'] if v is not None]
      mean = sum(within) / len(within)
      summary['cells'][f'{task}/{run["name"]}'] = {'learned': mean >= suite_summary.ID_LEARNED, 'in_distribution': mean}
  return {'summary': summary, 'results': results}


def _claim(**kwargs):
  defaults = dict(paper='P', claim='c', report='r', kind='compare', tasks=('t',), encoders=('a',), baselines=('b',))
  return claims.Claim(**{**defaults, **kwargs})


def test_a_comparison_reproduces_only_where_both_learn_and_the_paired_interval_excludes_zero():
  report = _report(
      {
          't': [
              # a - b beyond: at 16 the differences 0.30, 0.32, 0.34 (mean 0.32, sd 0.02, t_2 4.303: half width
              # 4.303 * 0.02 / sqrt(3) = 0.0497); at 32 0.1, -0.1, 0.3 (sd 0.2: the interval holds zero).
              _run('a', {8: [1.0, 1.0, 1.0], 16: [0.90, 0.92, 0.94], 32: [0.6, 0.4, 0.8]}),
              _run('b', {8: [1.0, 0.98, 0.96], 16: [0.60, 0.60, 0.60], 32: [0.5, 0.5, 0.5]}),
              _run('worse', {8: [1.0, 1.0, 1.0], 16: [0.99, 0.99, 0.99], 32: [0.9, 0.9, 0.9]}),
              _run('unlearned', {8: [0.9, 0.9, 0.8], 16: [0.1, 0.1, 0.1], 32: [0.1, 0.1, 0.1]}),
          ]
      }
  )
  judged = claims.judge(_claim(), {'r': report})
  by_where = {c['where']: c for c in judged['cells']}
  assert list(by_where) == ['16 (2x)', '32 (4x)']
  at16 = by_where['16 (2x)']
  assert at16['status'] == 'reproduced' and at16['diff']['mean'] == pytest.approx(0.32)
  assert at16['diff']['low'] == pytest.approx(0.32 - 4.302653 * 0.02 / 3**0.5, abs=1e-6)
  assert by_where['32 (4x)']['status'] == 'not resolved'
  assert judged['verdict'] == 'partly reproduced'
  assert claims.where_text(judged) == 'reproduced: t (a vs b at 2x). not resolved: t (a vs b at 4x)'
  # the other side of zero contradicts; a side below the threshold (mean 0.867 < 0.9) is not tested
  # (a - worse at 16: -0.09, -0.07, -0.05, so the interval [-0.120, -0.020] is below zero)
  worse = claims.judge(_claim(baselines=('worse',)), {'r': report})
  assert [c['status'] for c in worse['cells']] == ['contradicted', 'not resolved'] and worse['verdict'] == (
      'not reproduced'
  )
  untested = claims.judge(_claim(baselines=('unlearned',)), {'r': report})
  assert [c['status'] for c in untested['cells']] == ['not tested', 'not tested']
  assert untested['cells'][0]['why'] == 'unlearned 0.867' and untested['verdict'] == 'not tested at this scale'
  # the mean over the lengths beyond (the papers' statistic): at 16 and 32 averaged per seed, then paired
  mean = claims.judge(_claim(per_length=False), {'r': report})['cells']
  assert [c['where'] for c in mean] == ['beyond 8'] and mean[0]['diff']['mean'] == pytest.approx(0.21)
  # a task or encoder the report does not have is named, never guessed
  missing = claims.judge(_claim(tasks=('t', 'absent'), baselines=('b', 'nobody')), {'r': report})
  assert [c['status'] for c in missing['cells'] if c['task'] == 'absent'] == ['no result', 'no result']
  assert claims.judge(_claim(report='elsewhere'), {'r': report})['verdict'] == claims.REPORT_ABSENT


def test_seeds_are_paired_by_id_and_a_diverged_seed_is_left_out():
  report = _report(
      {
          't': [
              _run('a', {8: [1.0, 1.0, 1.0], 16: [0.9, None, 0.9], 32: [0.9, 0.9, 0.9]}),
              _run('b', {8: [1.0, 1.0], 16: [0.5, 0.5], 32: [0.5, 0.5]}, seeds=(2, 0)),
          ]
      }
  )
  cells = claims.judge(_claim(), {'r': report})['cells']
  assert [(c['seeds'], round(c['diff']['mean'], 6)) for c in cells] == [(2, 0.4), (2, 0.4)]


def test_holds_and_fails_read_the_accuracy_against_the_suites_threshold():
  report = _report(
      {
          't': [
              _run('a', {8: [1.0, 1.0, 1.0], 16: [0.95, 0.96, 0.97], 32: [0.5, 0.6, 0.7]}),
              _run('b', {8: [0.5, 0.5, 0.5], 16: [0.5, 0.5, 0.5], 32: [0.5, 0.5, 0.5]}),
          ]
      }
  )
  holds = claims.judge(_claim(kind='holds', baselines=(), encoders=('a', 'b')), {'r': report})
  statuses = [(c['who'], c['where'], c['status']) for c in holds['cells']]
  assert statuses == [
      ('a', '16 (2x)', 'reproduced'),
      ('a', '32 (4x)', 'contradicted'),
      ('b', '16 (2x)', 'not tested'),
      ('b', '32 (4x)', 'not tested'),
  ]
  mean, low, high = holds['cells'][0]['accuracy']
  assert mean == pytest.approx(0.96) and low == pytest.approx(0.96 - 4.302653 * 0.01 / 3**0.5, abs=1e-6)
  fails = claims.judge(_claim(kind='fails', baselines=(), encoders=('a',), per_length=False), {'r': report})
  assert [c['status'] for c in fails['cells']] == ['not resolved']  # 0.5, 0.6, 0.7 and 0.95..0.97: mean 0.78
  assert fails['cells'][0]['accuracy'][0] == pytest.approx(0.78)


def test_exact_match_and_per_token_tasks():
  report = _report(
      {
          't': [
              _run(
                  'a', {8: [1.0] * 3, 16: [0.9] * 3, 32: [0.9] * 3}, exact={8: [1.0] * 3, 16: [1.0] * 3, 32: [1.0] * 3}
              ),
              _run(
                  'b', {8: [1.0] * 3, 16: [0.9] * 3, 32: [0.9] * 3}, exact={8: [1.0] * 3, 16: [0.0] * 3, 32: [0.0] * 3}
              ),
          ]
      }
  )
  assert claims.judge(_claim(level='sequence'), {'r': report})['verdict'] == 'reproduced'
  same = claims.judge(_claim(level='sequence', token_tasks=('t',)), {'r': report})  # per token: equal
  assert [c['status'] for c in same['cells']] == ['not resolved', 'not resolved']


def test_glitches_need_an_error_in_every_seed_and_a_clean_run_states_its_bound():
  report = _report(
      {'flip_flop': [_run(e, {8: [1.0, 1.0], 16: [1.0, 1.0], 32: [1.0, 1.0]}, seeds=(0, 1)) for e in 'ab']}
  )
  report['summary']['cells']['flip_flop/c'] = {'learned': False, 'in_distribution': 0.7}

  def held(rates, reads):
    return {'32': {'per_seed': rates, 'scored_tokens': reads}}

  report['summary']['held_out'] = {
      'flip_flop': {
          'a': {'dense': held([1.5, 0.5], [30_000.0, 30_000.0]), 'sparse': held([0.0, 0.0], [1_363.0, 1_363.0])},
          'b': {'dense': held([0.0, 0.0], [30_000.0, 30_000.0]), 'sparse': held([0.0, 0.7], [1_363.0, 1_363.0])},
          'c': {'dense': held([5.0, 5.0], [30_000.0, 30_000.0])},
      }
  }
  judged = claims.judge(
      _claim(kind='glitches', tasks=('flip_flop',), encoders=('a', 'b', 'c'), baselines=()), {'r': report}
  )
  cells = {(c['who'], c['where']): c for c in judged['cells']}
  assert cells[('a', 'dense')]['status'] == 'reproduced'
  assert cells[('a', 'sparse')]['status'] == 'contradicted'
  assert cells[('a', 'sparse')]['bound'] == pytest.approx(3000 / 1363)
  assert cells[('b', 'dense')]['bound'] == pytest.approx(0.1)  # 30,000 clean reads: below 0.1 per 1,000
  assert cells[('b', 'sparse')]['status'] == 'not resolved'
  assert cells[('c', 'dense')]['status'] == 'not tested'  # c did not learn flip-flop
  assert judged['verdict'] == 'partly reproduced'
  assert claims.where_text(judged) == (
      'reproduced (a glitch in every seed): flip_flop (a on dense). no glitch in any seed: flip_flop (a on sparse; '
      'b on dense). glitches in some seeds only: flip_flop (b on sparse)'
  )
  text = claims.markdown([judged])
  assert 'no glitch in any seed: flip_flop a sparse (0 in every seed: below 2.2 per 1,000)' in text
  assert 'flip_flop b dense (0 in every seed: below 0.1 per 1,000)' in text
  assert 'reproduced (a glitch in every seed): flip_flop a dense (1.50, 0.50 per 1,000)' in text


def test_verdicts_from_cells():
  cell = lambda status: {'status': status}
  assert claims.verdict([cell('reproduced'), cell('reproduced')]) == 'reproduced'
  assert claims.verdict([cell('reproduced'), cell('not tested'), cell('no result')]) == 'reproduced where tested'
  assert claims.verdict([cell('reproduced'), cell('not resolved')]) == 'partly reproduced'
  assert claims.verdict([cell('contradicted'), cell('not resolved')]) == 'not reproduced'
  assert claims.verdict([cell('not tested'), cell('no result')]) == 'not tested at this scale'
  assert claims.verdict([]) == 'not tested at this scale'


def test_a_bad_claim_is_named():
  with pytest.raises(ValueError, match="kind='beats'.*allowed"):
    _claim(kind='beats')
  with pytest.raises(ValueError, match="level='best'"):
    _claim(level='best')
  with pytest.raises(ValueError, match=r"baselines=\(\).*'compare'"):
    _claim(baselines=())
  with pytest.raises(ValueError, match='tasks=()'):
    _claim(tasks=())


def test_every_claim_reads_encoders_and_tasks_its_report_has_or_names_them_missing():
  reports = claims.load_reports(os.path.join(REPO, 'docs'))
  assert set(reports) == {c.report for c in claims.CLAIMS}
  for claim in claims.CLAIMS:
    summary = reports[claim.report]['summary']
    known = {e.partition('/')[2] for e in summary['cells']}
    assert set(claim.encoders) | set(claim.baselines) <= known, claim.paper


def test_the_committed_claims_table_is_the_generators_output(tmp_path):
  with open(os.path.join(REPO, 'docs', claims.CLAIMS_FILE), encoding='utf-8') as f:
    committed = f.read()
  assert committed == claims.render(
      os.path.join(REPO, 'docs')
  ), 'docs/claims.md is stale: run `python -m relpos_jax.study.claims docs/`'
  # The command writes the same file into any docs directory.
  docs = tmp_path / 'docs'
  (docs / 'suite_abacus' / 'addition_abacus').mkdir(parents=True)
  for name in ('summary.json', 'addition_abacus/results.json'):
    with open(os.path.join(REPO, 'docs', 'suite_abacus', name), encoding='utf-8') as f:
      (docs / 'suite_abacus' / name).write_text(f.read(), encoding='utf-8')
  assert claims.main(['claims', str(docs)]) == 0
  text = (docs / claims.CLAIMS_FILE).read_text(encoding='utf-8')
  assert '**McLeish et al. 2024 (Abacus)** (not tested at this scale)' in text
  assert '[docs/suite_ruoss](suite_ruoss/README.md) (absent)' in text  # links beside docs/claims.md
  assert '[docs/suite_abacus](docs/suite_abacus/README.md)' in claims.render(str(docs), link_prefix='docs/')
  assert claims.main(['claims', str(tmp_path / 'nowhere')]) == 2


@pytest.mark.parametrize('page, prefix', [('docs/findings.md', ''), ('docs/suite/README.md', '../')])
def test_the_pages_verdict_tables_are_the_generators_output(page, prefix):
  """docs/findings.md's and docs/suite's claims tables are `summary_table` of the committed reports, between the
  markers (regenerate with `python -m relpos_jax.study.claims docs/`)."""
  text = open(os.path.join(REPO, page), encoding='utf-8').read()
  assert claims.TABLE_MARKER in text and claims.TABLE_END in text, f'{page} lost its claims-table markers'
  assert text == claims.with_summary_table(
      text, os.path.join(REPO, 'docs'), prefix
  ), f'{page}: the claims table is stale: run `python -m relpos_jax.study.claims docs/`'

"""Claims sized to their evidence: each verdict computed from the reports by one rule (relpos_jax.study.claims),
checked on hand-made reports, and docs/claims.md the generator's output from the committed ones."""

from __future__ import annotations

import os

import pytest

from scipy import stats as scipy_stats

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


def test_a_comparison_reproduces_only_where_both_learn_and_holms_adjusted_p_value_is_below_005():
  report = _report(
      {
          't': [
              # a - b beyond: at 16 the differences 0.30, 0.32, 0.34 (mean 0.32, sd 0.02, t_2 4.303: half width
              # 4.303 * 0.02 / sqrt(3) = 0.0497); at 32 0.1, -0.1, 0.3 (sd 0.2: the interval holds zero).
              _run('a', {8: [1.0, 1.0, 1.0], 16: [0.90, 0.92, 0.94], 32: [0.6, 0.4, 0.8]}),
              _run('b', {8: [1.0, 0.98, 0.96], 16: [0.60, 0.60, 0.60], 32: [0.5, 0.5, 0.5]}),
              _run('worse', {8: [1.0, 1.0, 1.0], 16: [0.99, 0.99, 0.99], 32: [0.9, 0.9, 0.9]}),
              _run('perfect', {8: [1.0, 1.0, 1.0], 16: [1.0, 1.0, 1.0], 32: [1.0, 1.0, 1.0]}),
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
  # Holm over the claim's two tested cells: the smaller p-value (t = 0.32 / (0.02 / sqrt 3) = 27.7, df 2)
  # doubled, the larger one (t = 1.73) kept, as it is above the first's adjusted value.
  p16, p32 = (2 * scipy_stats.t.sf(t, 2) for t in (0.32 / (0.02 / 3**0.5), 0.1 / (0.2 / 3**0.5)))
  assert at16['p_holm'] == pytest.approx(2 * p16) and by_where['32 (4x)']['p_holm'] == pytest.approx(p32)
  assert judged['verdict'] == 'mixed'  # 1 reproduced, 1 not resolved: neither more than half
  assert claims.counts_text(judged) == '1 reproduced, 0 contradicted, 1 not resolved'
  assert claims.where_text(judged) == 'reproduced: t (a vs b at 2x). not resolved: t (a vs b at 4x)'
  # Holm decides, not the uncorrected interval: a - worse at 16 is -0.09, -0.07, -0.05 (its interval
  # [-0.120, -0.020] excludes zero, p = 0.026), but doubled over the family of 2 that p-value is 0.052.
  worse = claims.judge(_claim(baselines=('worse',)), {'r': report})
  assert worse['cells'][0]['diff']['high'] < 0 and worse['cells'][0]['p_holm'] == pytest.approx(0.0521, abs=1e-3)
  assert [c['status'] for c in worse['cells']] == ['not resolved', 'not resolved']
  assert worse['verdict'] == 'not resolved'
  # the other side of zero contradicts (a - perfect at 16: -0.10, -0.08, -0.06, p 0.013, 0.026 after Holm)
  perfect = claims.judge(_claim(baselines=('perfect',)), {'r': report})
  assert [c['status'] for c in perfect['cells']] == ['contradicted', 'not resolved'] and perfect['verdict'] == 'mixed'
  # a side below the threshold (mean 0.867 < 0.9) is not tested
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
  _exact_summary(report)
  assert claims.judge(_claim(level='sequence'), {'r': report})['verdict'] == 'reproduced'
  same = claims.judge(_claim(level='sequence', token_tasks=('t',)), {'r': report})  # per token: equal
  assert [c['status'] for c in same['cells']] == ['not resolved', 'not resolved'] and same['verdict'] == (
      'not resolved'
  )


def _exact_summary(report: dict) -> None:
  """The suite summary's exact-match cell ('sequence') of every run, from its exact match at 8 (in place)."""
  for task, results in report['results'].items():
    for run in results['runs']:
      within = run['exact_match_by_length_per_seed']['8']
      report['summary']['cells'][f'{task}/{run["name"]}']['sequence'] = {
          'in_distribution': {'mean': sum(within) / len(within)}
      }


def test_the_learned_gate_reads_the_claims_own_metric():
  """Right on every token in distribution is not learned for a sequence-level claim unless whole answers are:
  b is 0.99 per token at 8 but exact on 0.5 of the sequences, so an exact-match claim does not test it."""
  exact = {8: [1.0] * 3, 16: [1.0] * 3, 32: [1.0] * 3}
  report = _report(
      {
          't': [
              _run('a', {8: [1.0] * 3, 16: [0.9] * 3, 32: [0.9] * 3}, exact=exact),
              _run('b', {8: [0.99] * 3, 16: [0.5] * 3, 32: [0.5] * 3}, exact={**exact, 8: [0.5] * 3}),
          ]
      }
  )
  _exact_summary(report)
  by_sequence = claims.judge(_claim(level='sequence'), {'r': report})
  assert [c['status'] for c in by_sequence['cells']] == ['not tested', 'not tested']
  assert by_sequence['cells'][0]['why'] == 'b 0.500 exact' and by_sequence['verdict'] == 'not tested at this scale'
  by_token = claims.judge(_claim(), {'r': report})  # per token b learned it (0.99), and a - b is +0.4 everywhere
  assert [c['status'] for c in by_token['cells']] == ['reproduced', 'reproduced']
  # a run that stored no exact match is not learned by it
  del report['summary']['cells']['t/a']['sequence']
  assert claims.judge(_claim(level='sequence'), {'r': report})['cells'][0]['why'] == 'a —, b 0.500 exact'


def test_glitches_need_a_rare_error_in_every_seed_and_a_clean_run_states_its_bound():
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
          # 1% of reads or more in a seed is failure, not a glitch (a 9.99 seed beside it does not save it)
          'd': {'dense': held([10.0, 9.99], [30_000.0, 30_000.0])},
      }
  }
  report['summary']['cells']['flip_flop/d'] = {'learned': True, 'in_distribution': 0.97}
  judged = claims.judge(
      _claim(kind='glitches', tasks=('flip_flop',), encoders=('a', 'b', 'c', 'd'), baselines=()), {'r': report}
  )
  cells = {(c['who'], c['where']): c for c in judged['cells']}
  assert cells[('a', 'dense')]['status'] == 'reproduced'
  assert cells[('a', 'sparse')]['status'] == 'contradicted'
  assert cells[('a', 'sparse')]['bound'] == pytest.approx(3000 / 1363)
  assert cells[('b', 'dense')]['bound'] == pytest.approx(0.1)  # 30,000 clean reads: below 0.1 per 1,000
  assert cells[('b', 'sparse')]['status'] == 'not resolved'
  assert cells[('c', 'dense')]['status'] == 'not tested'  # c did not learn flip-flop
  assert cells[('d', 'dense')]['status'] == 'not tested' and claims.GLITCH_RARE == 0.01
  assert judged['verdict'] == 'mixed'  # 1 reproduced, 2 contradicted, 1 not resolved of 4: none more than half
  assert claims.counts_text(judged) == '1 reproduced, 2 contradicted, 1 not resolved; 2 not tested'
  assert claims.where_text(judged) == (
      'reproduced (a glitch in every seed): flip_flop (a on dense). no glitch in any seed: flip_flop (a on sparse; '
      'b on dense). glitches in some seeds only: flip_flop (b on sparse). errors not rare (≥ 10 per 1,000 in a '
      'seed): flip_flop (d on dense)'
  )
  text = claims.markdown([judged])
  assert 'no glitch in any seed: flip_flop a sparse (0 in every seed: below 2.2 per 1,000)' in text
  assert 'flip_flop b dense (0 in every seed: below 0.1 per 1,000)' in text
  assert 'reproduced (a glitch in every seed): flip_flop a dense (1.50, 0.50 per 1,000)' in text
  assert 'flip_flop d dense (10.00, 9.99 per 1,000: not rare, a seed at 10 or more)' in text


def test_verdicts_from_the_counts_of_tested_cells():
  def verdict(*statuses):
    return claims.verdict([{'status': s} for s in statuses])

  assert verdict('reproduced', 'reproduced') == 'reproduced'
  assert verdict('reproduced', 'not tested', 'no result') == 'reproduced where tested'
  assert verdict('contradicted', 'contradicted') == 'contradicted'
  assert verdict('contradicted', 'not tested') == 'contradicted where tested'
  assert verdict('not resolved', 'not tested') == 'not resolved'
  # More than half of the tested cells decides; "mostly reproduced" and "mostly contradicted" never share a
  # word, whatever the untested cells.
  assert verdict('reproduced', 'reproduced', 'contradicted', 'not tested', 'not tested') == 'mostly reproduced'
  assert verdict('reproduced', 'contradicted', 'contradicted', 'not resolved', 'contradicted') == (
      'mostly contradicted'
  )
  assert verdict('reproduced', 'not resolved', 'not resolved') == 'mostly not resolved'
  assert verdict('reproduced', 'contradicted') == 'mixed'
  assert verdict('reproduced', 'not resolved') == 'mixed'  # half is not more than half
  assert verdict('not tested', 'no result') == 'not tested at this scale'
  assert verdict() == 'not tested at this scale'


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
  assert '**McLeish et al. 2024 (Abacus)** (not tested at this scale: 0 reproduced' in text
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

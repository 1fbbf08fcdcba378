"""The grid claims rule (relpos_jax.study.grid_claims): hand-computed cells, the learned gate, claims not tested as
stated, Holm within a claim, best against runner-up, and the committed page recomputed from its results."""

import math
import os
import subprocess
import sys

import pytest

from relpos_jax.study import grid_claims

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUDY = os.path.join(REPO, 'docs', 'resolution_study')


def _row(name: str, per_side: dict) -> dict:
  """A results row: per_side {side: [accuracy per seed]} over seeds 0, 1, 2."""
  per_seed = {str(side): list(values) for side, values in per_side.items()}
  return {
      'name': name,
      'seeds': [0, 1, 2],
      'accuracy_per_seed': per_seed,
      'accuracy': {side: sum(v) / len(v) for side, v in per_seed.items()},
  }


def _results(rows, *, task='life', floor=0.5, family_tasks=None, extra_tasks=()) -> dict:
  tasks = {task: {'runs': rows, 'majority_baseline': {'7': floor}}}
  for name in extra_tasks:
    tasks[name] = {'runs': rows, 'majority_baseline': {'7': floor}}
  protocol = {} if family_tasks is None else {'family_tasks': list(family_tasks)}
  return {
      'train_side': 7,
      'eval_sides': [7, 14, 28],
      'seeds': [0, 1, 2],
      'task_order': list(tasks),
      'tasks': tasks,
      'protocol': protocol,
  }


A_AHEAD = [0.1, 0.2, 0.3]  # A - B per seed: mean 0.2, std 0.1, t = 0.2 / (0.1 / sqrt 3) = 2 sqrt 3, df 2
# The t distribution with 2 degrees of freedom has the closed form P(T >= t) = (1 - t / sqrt(t^2 + 2)) / 2.
P_A_AHEAD = 1 - 2 * math.sqrt(3) / math.sqrt(12 + 2)


def _claim(**overrides) -> grid_claims.GridClaim:
  fields = dict(paper='P', claim='A beats B', protocol='p', encoders=('a',), baselines=('b',))
  return grid_claims.GridClaim(**{**fields, **overrides})


def test_a_cell_is_the_paired_t_test_with_holm_within_the_claim():
  b = {7: [0.9, 0.9, 0.9], 14: [0.5, 0.5, 0.5], 28: [0.5, 0.5, 0.5]}
  a = {7: [0.9, 0.9, 0.9], 14: [0.5 + d for d in A_AHEAD], 28: [0.5 - d for d in A_AHEAD]}
  judged = grid_claims.judge(_claim(), _results([_row('a', a), _row('b', b)]))
  cells = {c['where']: c for c in judged['cells']}
  assert set(cells) == {'14x14', '28x28'}
  for where in cells:
    assert cells[where]['p_value'] == pytest.approx(P_A_AHEAD, rel=1e-9)
    assert cells[where]['p_holm'] == pytest.approx(2 * P_A_AHEAD, rel=1e-9)  # Holm over the claim's two cells
  assert cells['14x14']['diff']['mean'] == pytest.approx(0.2)
  # 2 x 0.074 = 0.148: neither cell resolves after Holm, though each alone is p 0.074.
  assert [c['status'] for c in judged['cells']] == ['not resolved', 'not resolved']
  assert judged['verdict'] == 'not resolved'


def test_a_consistent_gain_reproduces_and_a_consistent_loss_contradicts():
  a = {7: [0.9] * 3, 14: [0.8, 0.81, 0.8], 28: [0.3, 0.31, 0.3]}
  b = {7: [0.9] * 3, 14: [0.5, 0.5, 0.5], 28: [0.6, 0.6, 0.6]}
  judged = grid_claims.judge(_claim(), _results([_row('a', a), _row('b', b)]))
  assert [c['status'] for c in judged['cells']] == ['reproduced', 'contradicted']
  assert judged['verdict'] == 'mixed'
  assert judged['counts']['reproduced'] == 1 and judged['counts']['contradicted'] == 1


def test_max_multiple_keeps_the_sides_the_paper_tested():
  a = {7: [0.9] * 3, 14: [0.8, 0.81, 0.8], 28: [0.3, 0.31, 0.3]}
  b = {7: [0.9] * 3, 14: [0.5, 0.5, 0.5], 28: [0.6, 0.6, 0.6]}
  judged = grid_claims.judge(_claim(max_multiple=2), _results([_row('a', a), _row('b', b)]))
  assert [c['where'] for c in judged['cells']] == ['14x14']
  assert judged['verdict'] == 'reproduced'


def test_a_row_that_did_not_learn_the_task_leaves_the_cell_untested():
  # floor 0.5: learned means at least 0.75 at the training side; b's 0.7 is not.
  a = {7: [0.9] * 3, 14: [0.8] * 3, 28: [0.8] * 3}
  b = {7: [0.7] * 3, 14: [0.5] * 3, 28: [0.5] * 3}
  results = _results([_row('a', a), _row('b', b)])
  assert grid_claims.learned_threshold(results, 'life') == pytest.approx(0.75)
  judged = grid_claims.judge(_claim(), results)
  assert {c['status'] for c in judged['cells']} == {'not tested'}
  assert judged['cells'][0]['why'] == 'b 0.700'
  assert judged['verdict'] == 'not tested at this scale'


def test_a_claim_is_never_judged_against_a_stand_in():
  rows = [
      _row('a', {7: [0.9] * 3, 14: [0.8] * 3, 28: [0.8] * 3}),
      _row('c', {7: [0.9] * 3, 14: [0.1] * 3, 28: [0.1] * 3}),
  ]
  judged = grid_claims.judge(_claim(), _results(rows))
  assert judged['not_run'] == ['b']
  assert judged['verdict'] == 'not tested as stated (b not run)'
  assert 'not run: b' in grid_claims.markdown(_results(rows), [_claim()])


def test_claims_read_the_position_tasks_only():
  rows = [
      _row('a', {7: [0.9] * 3, 14: [0.8] * 3, 28: [0.8] * 3}),
      _row('b', {7: [0.9] * 3, 14: [0.5] * 3, 28: [0.5] * 3}),
  ]
  canvas = _results(rows, extra_tasks=('fashion_mnist_canvas',))
  assert grid_claims.claim_tasks(canvas) == ['life']
  family = _results(rows, family_tasks=('direction',), extra_tasks=('direction',))
  assert grid_claims.claim_tasks(family) == ['direction']


def test_the_first_row_is_called_best_only_when_it_beats_the_runner_up_after_holm():
  rows = [
      _row('a', {7: [0.9] * 3, 14: [0.9, 0.91, 0.9], 28: [0.60 + d for d in A_AHEAD]}),
      _row('b', {7: [0.9] * 3, 14: [0.5, 0.5, 0.5], 28: [0.60] * 3}),
      _row('c', {7: [0.9] * 3, 14: [0.1] * 3, 28: [0.1] * 3}),
  ]
  table = grid_claims.best_and_runner_up(_results(rows))
  assert [(r['side'], r['best'], r['runner_up']) for r in table] == [(14, 'a', 'b'), (28, 'a', 'b')]
  assert table[0]['separated'] and not table[1]['separated']
  # Holm's step-down: the larger of two p-values is multiplied by 1 (the smaller, 14x14's, by 2).
  assert table[1]['p_holm'] == pytest.approx(P_A_AHEAD, rel=1e-9)


@pytest.mark.parametrize(
    'overrides, message',
    [
        (dict(baselines=()), 'needs encoders and baselines'),
        (dict(max_multiple=1), 'max_multiple=1 is invalid'),
    ],
)
def test_a_malformed_claim_is_refused(overrides, message):
  with pytest.raises(ValueError, match=message):
    _claim(**overrides)


def test_the_committed_page_is_the_rule_applied_to_its_results():
  from relpos_jax.study import report

  table = grid_claims.markdown(report.load_json(os.path.join(STUDY, 'results.json')))
  with open(os.path.join(STUDY, grid_claims.CLAIMS_FILE), encoding='utf-8') as f:
    assert f.read() == table, 'rerun: python -m relpos_jax.study.grid_claims docs/resolution_study'
  with open(os.path.join(STUDY, 'README.md'), encoding='utf-8') as f:
    page = f.read()
  assert grid_claims.with_table(page, table, 'docs/resolution_study') == page
  assert table in page


def test_the_command_refuses_a_folder_without_results(tmp_path):
  result = subprocess.run(
      [sys.executable, '-m', 'relpos_jax.study.grid_claims', str(tmp_path)],
      capture_output=True,
      text=True,
      check=False,
      cwd=REPO,
  )
  assert result.returncode == 1
  assert 'results.json does not exist' in result.stderr and 'Traceback' not in result.stderr

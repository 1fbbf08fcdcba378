"""The one loop over (entry, seed) (`relpos_jax.study.engine`): the grid's choice and the reuse of its run, as the LM
studies and the grid study both read them."""

from __future__ import annotations

import math

from relpos_jax.study import engine
from relpos_jax.study import record as record_lib


def _loss(run: dict) -> float:
  return math.inf if run.get('diverged') else run['loss']


def test_the_lowest_selection_loss_wins_and_a_tie_goes_to_the_first_rate():
  runs = {1e-3: {'loss': 0.5}, 3e-3: {'loss': 0.25}, 1e-2: {'loss': 0.25}}
  choice = engine.choose_rate(tuple(runs), runs.get, _loss)
  assert (choice.value, choice.how, dict(choice.trials)) == (3e-3, 'grid', runs)


def test_a_diverged_run_never_wins_and_records_no_loss():
  runs = {1e-3: {'loss': 0.5}, 1e-2: {'diverged': {'step': 3}}}
  choice = engine.choose_rate(tuple(runs), runs.get, _loss)
  assert choice.value == 1e-3
  assert engine.grid_losses(choice.trials, _loss) == {'0.001': 0.5, '0.01': None}


def test_an_unfinished_grid_chooses_nothing_yet():
  asked = []
  runs = {1e-3: {'loss': 0.5}, 1e-2: None}  # finished_only: the second run has not finished

  def obtain(rate):
    asked.append(rate)
    return runs[rate]

  assert engine.choose_rate((1e-3, 1e-2), obtain, _loss) is None and asked == [1e-3, 1e-2]


def test_the_chosen_grid_run_is_its_seeds_run_and_the_others_are_obtained():
  choice = engine.RateChoice(1e-2, 'grid', {1e-3: {'seed': 0, 'lr': 1e-3}, 1e-2: {'seed': 0, 'lr': 1e-2}})
  asked = []

  def obtain(seed):
    asked.append(seed)
    return {'seed': seed, 'lr': 1e-2}

  runs = engine.seed_runs((0, 1, 2), obtain, choice, grid_seed=0)
  assert runs[0] is choice.trials[1e-2] and asked == [1, 2]
  # A grid trained at a selection seed outside the reported ones: every reported seed is obtained.
  asked.clear()
  assert [r['seed'] for r in engine.seed_runs((0, 1), obtain, choice, grid_seed=None)] == [0, 1] and asked == [0, 1]
  # No grid (a fixed or committed rate, a re-evaluation): every seed is obtained; None where it has not finished.
  assert engine.seed_runs((0, 1), lambda seed: None if seed else {'seed': 0}) == [{'seed': 0}, None]


def test_a_run_is_read_back_where_reused_else_computed_and_written(tmp_path):
  path = str(tmp_path / 'runs' / 'a' / 'seed0' / record_lib.RESULT_FILE)
  computed = record_lib.RunRecord(record_lib.LM_LAYOUT, 0, {'k': 1}, 2.0, {'name': 'a'}, num_params=5)
  calls = []

  def compute():
    calls.append('compute')
    return computed

  # finished_only (no way to compute) with nothing saved: not finished.
  assert engine.obtain_run(path, record_lib.LM_LAYOUT, lambda saved: saved.to_json(), None) is None
  assert engine.obtain_run(path, record_lib.LM_LAYOUT, lambda saved: saved.to_json(), compute) == computed.to_json()
  assert calls == ['compute'] and record_lib.RunRecord.read(path, record_lib.LM_LAYOUT) == computed
  # Saved and accepted: read back, nothing computed.
  assert engine.obtain_run(path, record_lib.LM_LAYOUT, lambda saved: saved.to_json(), compute) == computed.to_json()
  assert calls == ['compute']
  # Saved but not accepted (a re-evaluation that asked otherwise): computed anew, over it.
  assert engine.obtain_run(path, record_lib.LM_LAYOUT, lambda saved: None, compute) == computed.to_json()
  assert calls == ['compute', 'compute']

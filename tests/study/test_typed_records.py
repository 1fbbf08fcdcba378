"""A study's records from the typed Config are the records the ConfigDict code wrote, up to the optional keys the
ConfigDict left out: a finished result written before the study derived its runs from the typed Config is reused,
and any real difference is still refused."""

from __future__ import annotations

import json

import ml_collections
import pytest

from relpos_jax.study import record as record_lib
from relpos_jax.study import runner
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files

# Only records are built here (nothing trains): the default study, with the study keys these tests name.
OVERRIDES = {
    'study.encoders': ('alibi', 'r: rope'),
    'study.default_learning_rates': (),
    'study.comparisons': (),
}


def _old_record(config: ml_collections.ConfigDict, encoder: str, seed: int, learning_rate: float) -> dict:
  """A run's config as the study recorded it before the typed Config: the ConfigDict, copied and changed."""
  old = ml_collections.ConfigDict(config.to_dict())
  del old['study']
  old.model.encoder, old.seed, old.optim.learning_rate = encoder, seed, learning_rate
  return json.loads(old.to_json_best_effort())


def test_a_result_recorded_from_the_config_dict_is_the_same_run(tmp_path):
  config = config_files.load_config('configs/lm.py:study', OVERRIDES, validate_config=False)
  base, _ = runner.split_study_config(config)
  old = _old_record(config, 'rope', 3, 0.01)
  new = json.loads(json.dumps(runner.run_config(base, runner.Entry('r', 'rope'), 3, 0.01).to_dict()))
  assert old != new and set(old['data']) < set(new['data'])  # the typed record holds every key, defaults too
  assert config_lib.with_defaults(old) == config_lib.with_defaults(new)
  runner._check_saved({'config': old, 'data': {'d': 1}}, str(tmp_path), new, {'d': 1}, None)  # reused
  for changed in (
      runner.run_config(base, runner.Entry('r', 'rope'), 4, 0.01),
      runner.run_config(base, runner.Entry('r', 'rope'), 3, 0.02),
      runner.run_config(base, runner.Entry('a', 'alibi'), 3, 0.01),
      runner.run_config(base, runner.Entry('r', 'rope'), 3, 0.01).derive(eval={'position_draws': 2}),
  ):
    with pytest.raises(config_lib.ConfigError, match='another config'):
      runner._check_saved(
          {'config': old, 'data': {'d': 1}}, str(tmp_path), json.loads(json.dumps(changed.to_dict())), {'d': 1}, None
      )


def test_a_reevaluation_record_is_read_in_the_one_key_set(tmp_path):
  """Re-evaluations once wrote `trained_spec` and an absolute `trained_in`; run_study writes `train_spec` and a
  path relative to its workdir. A record of either shape reads back in the second, the shape both now write."""
  workdir = tmp_path / 'ext'
  old = {'name': 'yarn', 'trained_spec': 'rope', 'trained_in': str(tmp_path / 'trained' / 'runs' / 'rope' / 'seed0')}
  assert record_lib.in_current_keys(old, str(workdir)) == {
      'name': 'yarn',
      'train_spec': 'rope',
      'trained_in': '../trained/runs/rope/seed0',
  }
  current = {'name': 'yarn', 'train_spec': 'rope', 'trained_in': 'runs/rope/seed0'}
  assert record_lib.in_current_keys(current, str(workdir)) == current
  assert 'trained_spec' in old  # the caller's record is left as it was

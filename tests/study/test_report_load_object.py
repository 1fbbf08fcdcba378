"""report.load_object: a report or record read where it is used must be the object it should be (a damaged or
foreign file is a one-line ConfigError naming it, never a KeyError in the code that reads it); the suite summary's
reader of its tasks' reports goes through it."""

from __future__ import annotations

import json

import pytest

from relpos_jax.study import report, suite_summary
from relpos_jax.train import config as config_lib


def test_load_object_names_the_file_what_it_should_be_and_what_it_holds(tmp_path):
  path = tmp_path / 'results.json'
  path.write_text(json.dumps({'runs': [], 'eval_lengths': [8]}))
  assert report.load_object(str(path), ('runs',), 'a study report') == {'runs': [], 'eval_lengths': [8]}
  path.write_text(json.dumps({'seeds': [0]}))
  with pytest.raises(
      config_lib.ConfigError,
      match=rf"^{path} is not a study report: expected an object with \['runs'\], found \['seeds'\]. Rerun it.$",
  ):
    report.load_object(str(path), ('runs',), 'a study report', 'Rerun it.')
  path.write_text('"text"')
  with pytest.raises(config_lib.ConfigError, match=r'is not a study report: .*found str\.$'):
    report.load_object(str(path), ('runs',), 'a study report')


def test_a_suite_task_report_without_runs_is_refused_naming_it(tmp_path):
  (tmp_path / 'parity_check').mkdir()
  (tmp_path / 'parity_check' / 'results.json').write_text(json.dumps({'title': 'a report cut to its title'}))
  with pytest.raises(config_lib.ConfigError, match=r"parity_check/results.json is not a study report .*\['title'\]"):
    suite_summary.load_results(str(tmp_path), ['parity_check', 'even_pairs'])

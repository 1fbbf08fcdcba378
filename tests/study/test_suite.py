"""The suite: per-task study configs from the protocols, up-front validation, resume, and the summary."""

from __future__ import annotations

import importlib.util
import json
import os

import ml_collections
import pytest

from relpos_jax.study import suite
from relpos_jax.train import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _algorithmic(arg):
  spec = importlib.util.spec_from_file_location(
      '_algorithmic_for_suite', os.path.join(ROOT, 'configs', 'algorithmic.py')
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(arg)


def tiny_suite(tasks=('even_pairs', 'flip_flop')) -> ml_collections.ConfigDict:
  config = _algorithmic('suite')
  config.model.num_layers, config.model.model_dim, config.model.num_heads = 1, 16, 2
  config.train.steps, config.train.batch_size, config.train.checkpoint_every = 3, 4, 3
  config.train.log_every = 3
  config.optim.warmup_steps = 1
  config.eval.num_examples, config.eval.batch_size = 8, 8
  config.suite.tasks = tasks
  config.suite.encoders = ('nope', 'alibi: alibi(bidirectional=True)')
  config.suite.seeds = (0, 1)
  return config


def test_the_presets_cover_every_suite_task_and_validate():
  for arg, tasks in (('suite', 20), ('published,suite', 21)):  # the CPU grid leaves passkey out (cost)
    config = _algorithmic(arg)
    assert len(config.suite.tasks) == tasks and len(config.suite.encoders) >= 6
    assert set(config.suite.protocols) == set(_algorithmic('published,suite').suite.tasks)
    studies = suite.validate_suite(config)
    assert [t for t, _ in studies] == list(config.suite.tasks)
  published = dict(suite.validate_suite(_algorithmic('published,suite')))['reverse_string']
  assert published.data.max_length == 40 and max(published.eval.lengths) == 491
  assert published.model.num_layers == 5 and published.train.batch_size == 128


def test_study_config_applies_the_protocol():
  config = tiny_suite()
  base, section, protocols = suite.split_config(config)
  study = suite.study_config(base, section, 'flip_flop', protocols['flip_flop'])
  assert study.data.task == 'flip_flop' and study.data.max_length == 32
  assert tuple(study.eval.lengths) == (16, 32, 64, 128) and tuple(study.study.seeds) == (0, 1)


def test_bad_suite_sections_are_named_before_training():
  config = tiny_suite()
  config.suite.tasks = ('even_pairs', 'no_such_task')
  with pytest.raises(ValueError, match='no_such_task.*without a protocol'):
    suite.validate_suite(config)
  config = tiny_suite()
  config.suite.protocols.even_pairs.max_length = 0
  with pytest.raises(ValueError, match='config.suite.protocols.even_pairs.max_length=0'):
    suite.validate_suite(config)
  config = tiny_suite()
  config.suite.encoders = ('short: learned(max_length=8)',)
  with pytest.raises(ValueError, match="task 'even_pairs'.*entry 'short'"):
    suite.validate_suite(config)


def _fake_results(task, train_length, values):
  lengths = sorted({int(n) for run in values.values() for n in run})
  config = {
      'data': {'min_length': 1, 'max_length': train_length, 'task_kwargs': {'num_keys': 8}},
      'train': {'steps': 250, 'batch_size': 4},
      'optim': {'learning_rate': 1e-3},
      'model': {'num_layers': 2, 'model_dim': 16, 'num_heads': 2, 'mlp_ratio': 4, 'dropout_rate': 0.0},
  }
  return {
      'metric': 'accuracy',
      'lower_is_better': False,
      'train_length': train_length,
      'eval_lengths': lengths,
      'runs': [
          {
              'name': name,
              'spec': name,
              'by_length': {str(n): sum(v) / len(v) for n, v in run.items()},
              'by_length_per_seed': {str(n): v for n, v in run.items()},
          }
          for name, run in values.items()
      ],
      'meta': {'title': task, 'config': config},
  }


def _two_tasks():
  return {
      'learned': _fake_results(
          'learned',
          10,
          {
              'a': {10: [1.0, 1.0], 20: [0.8, 0.6], 40: [0.6, 0.4]},
              'b': {10: [0.9, 0.8], 20: [0.5, 0.5], 40: [0.5, 0.5]},
          },
      ),
      'hard': _fake_results('hard', 10, {'a': {10: [0.6, 0.5], 20: [0.5, 0.5], 40: [0.5, 0.5]}}),
  }


def test_summary_means_over_seeds_and_flags_what_was_not_learned(tmp_path):
  summary = suite.summarize(_two_tasks(), title='tiny')
  cell = summary['cells']['learned/a']
  assert cell['in_distribution'] == pytest.approx(1.0) and cell['out_of_distribution'] == pytest.approx(0.6)
  assert (
      cell['out_of_distribution_std'] == pytest.approx(0.1 * 2**0.5) and cell['seeds'] == 2
  )  # seeds 0.7, 0.5: sample std
  # b's in-distribution mean is 0.85 < ID_LEARNED: its cell is marked even though the task was learned by a.
  assert cell['learned'] and not summary['cells']['learned/b']['learned']
  assert summary['learned_in_distribution'] == {'learned': True, 'hard': False}
  assert summary['encoders'] == ['a', 'b'] and 'hard/b' not in summary['cells']
  table = suite.markdown(summary)
  assert '| learned | 0.60 ± 0.14 (1.00) | 0.50 ± 0.00 (0.85) ✗ |' in table
  assert '| hard (not learned) | 0.50 ± 0.00 (0.55) ✗ | — |' in table
  assert table.rstrip().endswith('| *learned in distribution (of 2)* | 1 | 0 |')
  paths = suite.write_summary(summary, str(tmp_path))
  assert os.path.getsize(paths['heatmap']) > 0 and json.load(open(paths['json']))['tasks'] == ['learned', 'hard']


def test_the_readme_states_the_protocol_that_ran_and_keeps_hand_written_notes(tmp_path):
  summary = suite.summarize(_two_tasks(), title='tiny')
  path = suite.write_summary(summary, str(tmp_path))['markdown']
  text = open(path).read()
  assert text.startswith('# tiny\n') and '| learned | 1..10 | 10, 20, 40 | 250 | num_keys=8 |' in text
  assert 'Model: 2 layers, model_dim 16, 2 heads' in text and text.rstrip().endswith(suite.NOTES_MARKER)
  with open(path, 'a') as f:
    f.write('\nFindings written by hand.\n')
  suite.write_summary(suite.summarize(_two_tasks(), title='tiny, rerun'), str(tmp_path))
  text = open(path).read()
  assert text.startswith('# tiny, rerun\n') and text.endswith(suite.NOTES_MARKER + '\n\nFindings written by hand.\n')
  assert text.count(suite.NOTES_MARKER) == 1


@pytest.mark.slow
def test_a_tiny_suite_runs_resumes_and_summarizes(tmp_path):
  config = tiny_suite()
  summary = suite.run_suite(config, tmp_path, tasks=['even_pairs'])
  assert summary['tasks'] == ['even_pairs'] and set(summary['encoders']) == {'nope', 'alibi'}
  assert summary['cells']['even_pairs/alibi']['seeds'] == 2
  calls = []
  again = suite.run_suite(
      config, tmp_path, tasks=['even_pairs'], train_fn=lambda *a, **k: calls.append(a)
  )  # everything is reused
  assert not calls and again == summary
  with pytest.raises(config_lib.ConfigError, match='not in config.suite.tasks'):
    suite.run_suite(config, tmp_path, tasks=['parity_check'])

"""Every (task, encoder) pair of a suite or study is checked before the first run starts: a causal-only encoder for a
bidirectional task, differing per-layer randomized settings and a transfer to another encoder fail in seconds,
not after the encoders before them have trained."""

from __future__ import annotations

import importlib.util
import os

import pytest

from relpos_jax.study import runner, suite
from relpos_jax.train import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _algorithmic(arg: str):
  """configs/algorithmic.py's config, shrunk to a 1-layer model of 3 steps."""
  spec = importlib.util.spec_from_file_location(
      '_algorithmic_prevalidation', os.path.join(ROOT, 'configs', 'algorithmic.py')
  )
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config(arg)
  config.model.num_layers, config.model.model_dim, config.model.num_heads = 1, 16, 2
  config.train.steps, config.train.batch_size = 3, 4
  config.optim.warmup_steps = 1
  return config


def _never(*args, **kwargs):
  raise AssertionError('a run started before the whole suite or study was validated')


@pytest.mark.parametrize('encoder', ['cope', 'fox', 'stick_breaking', 'path', 'xpos', 'rerope(alibi)'])
def test_a_causal_only_encoder_for_a_bidirectional_task_is_refused_before_any_run(tmp_path, encoder):
  config = _algorithmic('suite')
  config.suite.tasks = ('even_pairs', 'flip_flop')
  config.suite.encoders = ('alibi: alibi(bidirectional=True)', f'late: {encoder}')
  with pytest.raises(config_lib.ConfigError, match=r"config.suite task 'even_pairs'.*entry 'late'.*causal"):
    suite.run_suite(config, tmp_path, train_fn=_never)
  assert not os.listdir(tmp_path)


def _validate_two_layers(encoder: str):
  """config_lib.validate of a 2-layer bidirectional task model with per-layer `encoder`."""
  config = _algorithmic('')
  config.model.num_layers = 2
  config.model.encoder = encoder
  return config_lib.validate(config)


def test_a_causal_only_encoder_in_one_layer_of_a_bidirectional_model_is_refused():
  with pytest.raises(config_lib.ConfigError, match=r"config.model.encoder='\(rope, cope\)' is invalid.*\['cope'\]"):
    _validate_two_layers('(rope, cope)')


def test_differing_randomized_settings_per_layer_are_refused():
  with pytest.raises(config_lib.ConfigError, match=r'one randomized max_position for the whole model.*\[32, 4096\]'):
    _validate_two_layers('(randomized(rope, max_position=32), randomized(alibi, max_position=4096))')
  with pytest.raises(config_lib.ConfigError, match='randomized max_position=64 <= 32, the max_length of learned'):
    _validate_two_layers('(randomized(rope, max_position=64), absolute_score(learned(max_length=32)))')
  _validate_two_layers('(randomized(rope, max_position=64), randomized(alibi, max_position=64))')


def test_a_transfer_to_another_encoder_is_refused_before_any_training(tmp_path):
  config = _algorithmic('study')
  config.study.encoders = ('alibi', 'swap: alibi -> rope')
  with pytest.raises(config_lib.ConfigError, match=r"entry 'swap'.*not an inference-time extension"):
    runner.run_study(config, tmp_path, train_fn=_never)

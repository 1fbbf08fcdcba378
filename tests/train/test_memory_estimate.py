"""The run's memory estimate counts what it left out (issue 53): the position encoders' parameters (a learned table
of 2^20 rows x 4096 passed validation) and a task's evaluation set, drawn whole (eval.num_examples=10^12 passed,
trained, then asked for 14.6 TiB)."""

from __future__ import annotations

import re

import pytest

from relpos_jax.train import config as config_lib

GIB = 2**30


@pytest.fixture
def machine_of(monkeypatch):
  """`machine_of(gib)`: validation sees a device of that many GiB (the test's verdicts do not depend on the host)."""
  return lambda gib: monkeypatch.setattr(config_lib, 'available_memory', lambda num_devices: gib * GIB)


def test_a_learned_table_counts_its_rows(task_config, machine_of):
  machine_of(32)
  config = task_config()
  config.model.model_dim, config.model.num_heads = 4096, 2
  config.model.encoder = 'learned(max_length=1048576)'  # 2^32 parameters: 64 GiB with gradient and Adam's moments
  with pytest.raises(
      config_lib.ConfigError,
      match=r'needs at least 66\.0 GiB per device \(parameters and optimizer state: 66\.0 GiB, set by .*'
      + re.escape("encoder='learned(max_length=1048576)'"),
  ):
    config_lib.validate(config)
  config.model.encoder = 'learned(max_length=64)'
  config_lib.validate(config)  # the same model with a small table fits


@pytest.mark.parametrize(
    'encoder, expected',
    [
        ('rope', 0),
        ('learned(max_length=64)', 64 * 32),
        ('learned(max_length=64) + t5(num_buckets=8)', 64 * 32 + 8 * 2),
        # one encoder for every layer, written as a per-layer pattern: one table counted (shared or not)
        ('(learned(max_length=64), learned(max_length=64))', 64 * 32),
    ],
)
def test_position_parameters_are_counted_from_their_shapes(task_config, encoder, expected):
  config = task_config()
  config.model.encoder, config.model.num_layers = encoder, 2
  assert config_lib.position_parameters(config_lib.parse(config)) == expected


def test_eval_num_examples_has_an_upper_bound_named_with_the_key(task_config):
  config = task_config()
  config.eval.num_examples = 10**12
  with pytest.raises(
      config_lib.ConfigError,
      match=rf'^config.eval.num_examples=1000000000000 is invalid: allowed: an int >= 1 and <= {2**24}',
  ):
    config_lib.validate(config)


def test_a_tasks_evaluation_set_is_counted(task_config, machine_of):
  machine_of(8)
  config = task_config()
  config.eval.num_examples, config.eval.lengths = 2**24, (4, 100)
  with pytest.raises(config_lib.ConfigError, match=r'needs at least .* GiB per device \(evaluation set at length 100'):
    config_lib.validate(config)

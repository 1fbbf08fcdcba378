"""A task's own positions are held to the encoder before any run (a learned
table read past its end used to end as a DivergedError telling the user to lower the learning rate), and
positions that would wrap in int32 are refused when the task is built (max_offset=3e9 trained with exit 0)."""

from __future__ import annotations

import os

import ml_collections
import numpy as np
import pytest

from relpos_jax import validation
from relpos_jax.data import tasks
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train.config import ConfigError, validate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _task_config(task, task_kwargs, encoder, max_length=8, lengths=(8, 16)):
  config = config_files.load_config(os.path.join(REPO, 'configs', 'algorithmic.py'), validate_config=False)
  config.unlock()
  config.data.task = task
  config.data.task_kwargs = ml_collections.ConfigDict(task_kwargs)
  config.data.max_length = max_length
  config.eval.lengths = lengths
  config.model.encoder = encoder
  return config


@pytest.mark.parametrize(
    'task, task_kwargs, reach',
    [
        ('addition_coupled', {'max_position': 300}, 300),  # positions 1 .. max_position
        ('addition_abacus', {'max_offset': 300}, 300 + 16 + 1),  # offset + n + 1, at every length (no eval reset)
    ],
)
def test_task_positions_are_held_to_the_encoders_table(task, task_kwargs, reach):
  """The sequences (3 x 16 + 2 tokens) fit a 200-row table, the task's positions do not: refused by name."""
  config = _task_config(task, task_kwargs, 'learned(max_length=200) + fire')
  assert config_lib.task_position_bound(config_lib.parse(config)) == reach + 1
  with pytest.raises(ConfigError, match=rf"task's positions, up to {reach} .*max_length=200"):
    validate(config, num_devices=1)
  config.model.encoder = f'learned(max_length={reach + 1}) + fire'
  assert validate(config, num_devices=1) == []
  config.model.encoder = 'rope'  # relative: any position
  assert validate(config, num_devices=1) == []


def test_task_positions_bound_is_none_for_tasks_without_positions():
  config = _task_config('addition', {}, 'rope')
  assert config_lib.task_position_bound(config_lib.parse(config)) is None
  as_input = _task_config('addition_abacus', {'max_offset': 40, 'as_input': True}, 'learned(max_length=64) + fire')
  assert (
      config_lib.task_position_bound(config_lib.parse(as_input)) is None
  )  # its positions are input positions, checked apart


@pytest.mark.parametrize(
    'task, field, value',
    [
        ('addition_abacus', 'max_offset', 3_000_000_000),
        ('addition_abacus', 'max_offset', 3e9),
        ('addition_coupled', 'max_position', 3_000_000_000),
    ],
)
def test_positions_that_would_wrap_in_int32_are_refused(task, field, value):
  """max_offset=3e9 wrapped to negative int32 positions and trained with exit 0."""
  with pytest.raises(
      ValueError, match=rf'{field}={value!r} is invalid; allowed: an int >= \d and <= {validation.MAX_POSITION}'
  ):
    tasks.make_task(task, **{field: value})


def test_the_largest_allowed_offset_samples_positions_in_range():
  task = tasks.make_task('addition_abacus', max_offset=validation.MAX_POSITION - 64)
  batch = task.sample(np.random.default_rng(0), 4, 8)
  assert batch['positions'].dtype == np.int32
  assert 0 <= batch['positions'].min() and batch['positions'].max() <= validation.MAX_POSITION
  assert task.max_given_position(8) <= validation.MAX_POSITION


# ---------------------------------------------------------------------------------------------------------
# Item 3: randomized positions on a task that hands its own (the task's replace the random ones: the run was
# its base exactly, recorded as "random positions, 4 draws" with an @0..L-1 row).


@pytest.mark.parametrize(
    'task, task_kwargs',
    [('addition_coupled', {'max_position': 300}), ('addition_abacus', {'max_offset': 30})],
)
def test_randomized_positions_on_a_task_with_its_own_positions_are_refused(task, task_kwargs):
  config = _task_config(task, task_kwargs, 'randomized(rope, max_position=2048)')
  with pytest.raises(
      ConfigError,
      match=rf"config.model.encoder='randomized\(rope, max_position=2048\)' is invalid for this run: task '{task}' "
      r"hands the model its own positions .*allowed: the base encoder itself \(e.g. 'rope'\)",
  ):
    validate(config, num_devices=1)
  config.model.encoder = '(randomized(rope, max_position=2048), rope)'  # per layer: the same
  with pytest.raises(ConfigError, match=r'hands the model its own positions'):
    validate(config, num_devices=1)
  config.model.encoder = 'rope'
  assert validate(config, num_devices=1) == []


def test_the_suite_leaves_randomized_entries_out_of_tasks_with_their_own_positions():
  """The CPU suite trains 'rope+randomized' on every task: on addition_coupled / addition_abacus it ran as
  RoPE exactly. Those entries are left out of those tasks' studies, and the study says so."""
  import importlib.util

  from relpos_jax.study import suite
  from relpos_jax.study.runner import parse_entries

  spec = importlib.util.spec_from_file_location('_algorithmic_config', os.path.join(REPO, 'configs', 'algorithmic.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  base, section, protocols = suite.split_config(module.get_config('suite'))
  for task in ('addition_coupled', 'addition_abacus', 'addition'):
    study = suite.study_config(base, section, task, protocols[task])
    labels = [e.label for e in parse_entries(study.study.encoders)]
    assert 'rope' in labels
    if task == 'addition':
      assert 'rope+randomized' in labels
    else:
      assert 'rope+randomized' not in labels
      assert "left out: 'rope+randomized'" in study.study.description

"""The resolution study's config, checked before anything trains: each check names its key (issue 53).

With the real ViT (relpos_jax.nn.vit) at toy sizes: every case here is refused (or parsed) before a training
step, so no case compiles a training program."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from relpos_jax import resources
from relpos_jax.study import resolution
from relpos_jax.train import config as config_lib

resolution_config = resources.config_module('studies/resolution')

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tiny(**overrides):
  config = resolution_config.get_config()
  config.encoders, config.tasks, config.comparisons = ('nope',), ('count',), ()
  config.train_side, config.eval_sides = 5, (5, 8)
  config.steps, config.warmup_steps, config.batch_size = 2, 0, 4
  config.seeds, config.lr_grid = (0,), None
  config.eval_examples, config.eval_batch_size, config.entropy_examples = 4, 4, 4
  config.model.model_dim, config.model.num_heads, config.model.mlp_ratio = 8, 2, 1
  for k, v in overrides.items():
    config[k] = v
  return config


def _refused(tmp_path, config, message):
  with pytest.raises(config_lib.ConfigError, match=message):
    resolution.run_resolution_study(config, tmp_path / 'w')
  assert not (tmp_path / 'w').exists()  # refused before anything is written


@pytest.mark.parametrize(
    'overrides, message',
    [
        ({'seeds': (2**32,)}, r'config.seeds=\(4294967296,\) is invalid: allowed: .*< 4294967296'),
        ({'data_seed': 2**32}, r'config.data_seed=4294967296 is invalid: allowed: .*< 4294967296'),
    ],
)
def test_seeds_are_held_below_two_to_the_32(tmp_path, overrides, message):
  """jax.random.key(2**32) is key(0): seed 2^32 would build seed 0's model under another name."""
  _refused(tmp_path, _tiny(**overrides), message)


def test_an_x_to_y_entry_is_refused_by_name(tmp_path):
  """'X -> Y' trained and evaluated X under Y's label; the study evaluates in the run that trains."""
  _refused(
      tmp_path,
      _tiny(encoders=('nope', 'swap: nope -> alibi2d')),
      r"config.encoders entry 'swap' \(nope -> alibi2d\) is invalid: .*allowed: 'label: spec' or a bare spec",
  )


def test_a_bad_label_names_this_studys_key(tmp_path):
  _refused(tmp_path, _tiny(encoders=('a b: nope',)), r"^config.encoders entry 'a b: nope' has label 'a b'")


@pytest.mark.parametrize('lr_grid', [None, (), (None,), [None]])
def test_the_fixed_rate_parses_from_every_way_of_writing_it(lr_grid):
  assert resolution.parse_config(_tiny(lr_grid=lr_grid)).lr_grid is None


def test_the_fixed_rate_can_be_asked_for_on_the_command_line(tmp_path):
  """--config.lr_grid=None reaches the parser as (None,) (ml_collections keeps a tuple key a tuple): it was refused,
  so the fixed-rate protocol could only be asked for by editing a file."""
  command = [
      sys.executable, '-m', 'experiments.resolution', '--finished_only', f'--workdir={tmp_path / "w"}',
      "--config.encoders=('nope',)", "--config.tasks=('count',)", '--config.comparisons=()',
      '--config.model.model_dim=8', '--config.model.num_heads=2',
  ]  # fmt: skip
  done = subprocess.run(
      command + ['--config.lr_grid=None'], cwd=REPO, capture_output=True, text=True, timeout=300,
      env={**os.environ, 'PYTHONPATH': REPO},
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-2000:]
  assert 'Learning rate: fixed.' in done.stdout


def test_a_learned_table_smaller_than_an_evaluation_side_is_refused_before_training(tmp_path):
  """learned2d(max_size=6) covers the training side 5 but not the evaluation side 8: found after training before."""
  _refused(
      tmp_path,
      _tiny(encoders=('table: learned2d(max_size=6)',)),
      r"config.encoders entry 'table' .*cannot be evaluated at config.eval_sides side 8 .*max_size=6",
  )


@pytest.mark.parametrize(
    'overrides, message',
    [
        ({'eval_sides': (5, 4096)}, r'config.eval_sides=\(5, 4096\) is invalid: allowed: .*<= 1024'),
        ({'eval_batch_size': 2**21}, r'config.eval_batch_size=2097152 is invalid: allowed: .*<= 1048576'),
        ({'batch_size': 2**21}, r'config.batch_size=2097152 is invalid: allowed: .*<= 1048576'),
        ({'eval_examples': 10**12}, r'config.eval_examples=1000000000000 is invalid: allowed: .*<= 1048576'),
        # Under the bounds, beyond memory: the evaluation's attention weights at 1024^2 tokens (4 TiB a row).
        ({'eval_sides': (5, 1024)}, r"task 'count': a run needs at least .* GiB \(attention weights of one evaluation"),
        (
            {'batch_size': 2**20, 'train_side': 32, 'eval_sides': (32,)},
            r"task 'count': a run needs at least .*activations of one training batch",
        ),
    ],
)
def test_sizes_are_bounded_before_anything_runs(tmp_path, overrides, message):
  _refused(tmp_path, _tiny(**overrides), message)


def test_the_model_bounds_are_the_runs(tmp_path):
  config = _tiny()
  config.model.mlp_ratio = 2**14
  _refused(tmp_path, config, r'config.model.mlp_ratio=16384 is invalid: allowed: .*<= 64')


def test_the_model_check_allocates_no_parameters(tmp_path, monkeypatch):
  """The up-front check builds each model abstractly: a model of 1.6e9 parameters (6 GiB) is refused by the memory
  estimate in a second, with its size, instead of being initialised to check its logits' shape."""
  config = _tiny()
  config.model.model_dim, config.model.mlp_ratio, config.model.num_layers = 4096, 4, 8
  monkeypatch.setattr(config_lib, 'available_memory', lambda num_devices: 2**30)
  _refused(tmp_path, config, r"task 'count': a run needs at least .* GiB \(parameters and optimizer state")

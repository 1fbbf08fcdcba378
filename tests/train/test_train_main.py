"""The entry point `python -m experiments.train`: absl flags, config overrides, outputs in the workdir."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest
from absl import flags

from relpos_jax.train import loop
from relpos_jax.train.metrics import read_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG_FILE = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""


def test_main_in_process_trains_the_configured_run(tmp_path, monkeypatch, reference_lm_run, lm_config):
  """`main` with --config/--workdir and an override: the run of that config, bit for bit."""
  from experiments import train as train_main

  config_file = tmp_path / 'tiny.py'
  config_file.write_text(CONFIG_FILE.format(text=lm_config().to_json()))
  workdir = str(tmp_path / 'run')
  argv = ['train', f'--config={config_file}', f'--workdir={workdir}', '--config.train.log_every=6']
  monkeypatch.setattr(sys, 'argv', argv)  # config_flags reads the overrides from sys.argv
  try:
    remaining = flags.FLAGS(argv)
    train_main.main(remaining)
  finally:
    flags.FLAGS.unparse_flags()
  records = read_metrics(workdir)
  assert [r['step'] for r in records if 'loss' in r] == [6, 12, 18, 24]
  assert json.load(open(os.path.join(workdir, 'config.json')))['train']['log_every'] == 6
  model, _ = loop.load_model(workdir)
  for x, y in zip(
      jax.tree.leaves(jax.device_get(loop.split_model(model)[1])),
      jax.tree.leaves(jax.device_get(reference_lm_run.params)),
  ):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


TINY_OVERRIDES = [
    '--config.train.steps=6',
    '--config.train.batch_size=8',
    '--config.train.log_every=2',
    '--config.train.checkpoint_every=3',
    '--config.model.num_layers=1',
    '--config.model.model_dim=32',
    '--config.model.num_heads=2',
    '--config.data.train_length=16',
    '--config.data.max_train_bytes=1000000',
    '--config.eval.every=0',
    '--config.eval.lengths=(16,32)',
    '--config.eval.batch_size=8',
    '--config.eval.num_examples=8',
    '--config.optim.warmup_steps=2',
]


@pytest.mark.slow
def test_command_line_end_to_end(tmp_path):
  workdir = str(tmp_path / 'run')
  command = [
      sys.executable,
      '-m',
      'experiments.train',
      '--config=configs/lm.py',
      f'--workdir={workdir}',
      *TINY_OVERRIDES,
  ]
  env = {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}  # one CPU device, as a user gets
  done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
  assert done.returncode == 0, done.stderr[-3000:]
  assert 'step 6/6 | loss' in done.stderr and 'tok/s' in done.stderr
  records = read_metrics(workdir)
  training = [r for r in records if 'loss' in r]
  assert [r['step'] for r in training] == [2, 4, 6]
  assert all({'loss', 'lr', 'tokens_per_sec', 'bits_per_char'} <= set(r) for r in training)
  assert {'eval/16/bits_per_char', 'eval/32/bits_per_char'} <= set(records[-1])
  assert sorted(os.listdir(os.path.join(workdir, 'checkpoints'))) == ['3', '6']
  assert json.load(open(os.path.join(workdir, 'config.json')))['model']['num_layers'] == 1

  bad = subprocess.run(
      command + ['--config.model.num_head=2'], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
  )
  assert bad.returncode != 0 and 'num_head' in bad.stderr


@pytest.mark.parametrize(
    'module,args,expected',
    [
        # The documented optional keys are settable on configs/lm.py (the run then stops at train.steps=0).
        (
            'experiments.train',
            [
                '--config=configs/lm.py',
                '--config.eval.num_tokens=640',
                '--config.eval.max_tokens_per_batch=1024',
                '--config.train.steps=0',
            ],
            'config.train.steps=0 is invalid',
        ),
        # The study's default config (no --config): an unknown key is named, with the keys allowed there.
        (
            'experiments.length_generalization',
            ['--config.study.foo=1'],
            'config.study.foo: unknown key; allowed in config.study: comparisons, default_learning_rates, description, encoders, learning_rates, lr_grid, seeds, selection_seed, sequential_positions, split, title',
        ),
    ],
)
def test_entry_points_report_config_errors_in_one_line(tmp_path, module, args, expected):
  env = {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}
  done = subprocess.run(
      [sys.executable, '-m', module, f'--workdir={tmp_path}', *args],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=120,
  )
  assert done.returncode != 0 and expected in done.stderr, done.stderr[-3000:]
  assert 'AttributeError' not in done.stderr

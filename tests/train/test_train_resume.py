"""Checkpoints: an interrupted run, restarted, ends exactly where an uninterrupted run ends; keep-last-N."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from relpos_jax.train import loop, tensorboard
from relpos_jax.train.checkpoint import Checkpoints
from relpos_jax.train.config import ConfigError
from relpos_jax.train.metrics import read_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Killed(Exception):
  pass


def _kill_after(step):
  def hook(done, state, metrics):
    if done == step:
      raise Killed(f'killed after update {step}')

  return hook


def _assert_same_params(result, reference):
  a = jax.tree.leaves(jax.device_get(result.params))
  b = jax.tree.leaves(jax.device_get(reference.params))
  assert len(a) == len(b) > 0
  for x, y in zip(a, b):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_interrupted_run_resumes_to_the_uninterrupted_parameters(
    tmp_path, reference_lm_run, lm_config, lm_data, without_time
):
  config = lm_config()  # 24 updates, a checkpoint every 5, keep the last 2
  data = lm_data(config)
  workdir = str(tmp_path / 'run')

  # Killed after update 8: checkpoint 5 is on disk, updates 6..8 are lost.
  with pytest.raises(Killed):
    loop.train(config, workdir, hooks=[_kill_after(8)], data=data)
  assert Checkpoints(workdir, keep=2).all_steps() == [5]
  assert [r['step'] for r in read_metrics(workdir)] == [4, 8]

  # Restarted, then stopped again after update 13 (between checkpoints 10 and 15).
  partial = loop.train(config, workdir, stop_after=13, data=data)
  assert partial.step == 13
  assert Checkpoints(workdir, keep=2).all_steps() == [5, 10]

  # Restarted with the same command: runs 11..24.
  final = loop.train(config, workdir, data=data)
  assert final.step == 24
  _assert_same_params(final, reference_lm_run)
  # The records read as one uninterrupted run (those of the lost updates were dropped on resume).
  assert without_time(read_metrics(workdir)) == without_time(reference_lm_run.history)
  assert final.final_metrics['eval/32/loss'] == reference_lm_run.final_metrics['eval/32/loss']
  # TensorBoard shows the same records: the events the interrupted attempts wrote after their checkpoints
  # (steps 8 and 12) are hidden by the restarts' purge marks, so every step appears once, with its value.
  events = tensorboard.read_scalars(workdir)
  for key in ('loss', 'lr', 'tokens_per_sec', 'grad_norm', 'bits_per_char'):
    np.testing.assert_allclose(
        events[f'train/{key}'], [(r['step'], r[key]) for r in read_metrics(workdir) if key in r], rtol=1e-6
    )
  assert [s for s, _ in events['eval/16/bits_per_char']] == [12, 24]
  # Keep-last-N: saves at 5, 10, 15, 20, 24; the 2 most recent remain.
  assert sorted(os.listdir(os.path.join(workdir, 'checkpoints'))) == ['20', '24']

  # A finished run restarted does nothing more, and a notebook can load its model.
  again = loop.train(config, workdir, data=data)
  assert again.step == 24 and again.final_metrics['eval/32/loss'] == final.final_metrics['eval/32/loss']
  model, _ = loop.load_model(workdir, config)
  leaves = jax.tree.leaves(jax.device_get(loop.split_model(model)[1]))
  for x, y in zip(leaves, jax.tree.leaves(jax.device_get(final.params))):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_resuming_with_another_config_is_refused(tmp_path, lm_config, lm_data):
  config = lm_config()
  workdir = str(tmp_path / 'run')
  loop.train(config, workdir, stop_after=2, data=lm_data(config))
  other = lm_config()
  other.optim.learning_rate = 5e-3
  with pytest.raises(ConfigError, match=r'config\.optim\.learning_rate'):
    loop.train(other, workdir, data=lm_data(other))


KILLED_RUN = """
import json, os, sys
import ml_collections
from relpos_jax.train import loop

config = ml_collections.ConfigDict(json.load(open(sys.argv[1])))
def kill(step, state, metrics):
  if step == int(sys.argv[3]):
    os._exit(17)  # no finally, no atexit: the process vanishes as under SIGKILL
loop.train(config, sys.argv[2], hooks=[kill])
"""


@pytest.mark.slow
def test_killed_process_resumes_to_the_uninterrupted_parameters(tmp_path, reference_lm_run, lm_config, lm_data):
  config = lm_config()
  config_path, script = tmp_path / 'config.json', tmp_path / 'killed.py'
  config_path.write_text(config.to_json())
  script.write_text(KILLED_RUN)
  workdir = str(tmp_path / 'run')
  env = {**os.environ, 'PYTHONPATH': REPO + os.pathsep + os.environ.get('PYTHONPATH', '')}
  # Killed right after checkpoint 10 was requested: its asynchronous save is most likely still in flight.
  done = subprocess.run(
      [sys.executable, str(script), str(config_path), workdir, '10'],
      cwd=REPO,
      env=env,
      capture_output=True,
      text=True,
      timeout=240,
  )
  assert done.returncode == 17, done.stderr[-3000:]
  saved = Checkpoints(workdir, keep=2).all_steps()
  assert set(saved) <= {5, 10} and 5 in saved
  result = loop.train(config, workdir, data=lm_data(config))
  _assert_same_params(result, reference_lm_run)
  # A save cut short leaves only a temporary directory, never read and removed on restart.
  assert sorted(os.listdir(os.path.join(workdir, 'checkpoints'))) == ['20', '24']
  json.dumps(result.final_metrics)  # JSON-friendly

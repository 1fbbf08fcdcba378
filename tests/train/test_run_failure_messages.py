"""A training run's failures are one message naming their cause: a failed background checkpoint save, Ctrl-C
during a compile, --multihost without a cluster, a read-only directory, orbax's errors, and a causal-form bias in
a bidirectional task model.

Each test failed on the code before its fix (issue 36, part A)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import ml_collections
import orbax.checkpoint as ocp
import pytest

from relpos_jax.train import loop
from relpos_jax.train.checkpoint import CheckpointWriteError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_failed_background_save_is_named_by_its_own_step(tmp_path, lm_config, lm_data, monkeypatch):
  """orbax's save() first waits for the save in flight and raises its error: that error is the earlier step's
  (5), not the step being saved (10)."""
  original = ocp.CheckpointManager.wait_until_finished

  def wait(self):
    original(self)
    if self.all_steps():  # the background write of step 5 failed after its save call returned
      raise OSError(errno.ENOSPC, 'No space left on device')

  monkeypatch.setattr(ocp.CheckpointManager, 'wait_until_finished', wait)
  config = lm_config()
  with pytest.raises(CheckpointWriteError, match=r'could not save step 5 to .*No space left on device') as info:
    loop.train(config, str(tmp_path / 'run'), data=lm_data(config))
  assert 'step 10' not in str(info.value)


CONFIG_FILE = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""


@pytest.mark.parametrize('module', ['experiments.length_generalization', 'experiments.suite'])
def test_ctrl_c_during_a_study_or_suite_compile_exits_at_once_with_a_message(
    tmp_path, task_config, module, interrupt_when
):
  config = task_config()
  if module == 'experiments.suite':
    config.suite = ml_collections.ConfigDict(
        dict(encoders=('rope',), seeds=(0,), tasks=('even_pairs',),
             protocols={'even_pairs': {'min_length': 1, 'max_length': 4, 'eval_lengths': (5,)}})
    )  # fmt: skip
  else:
    config.study = ml_collections.ConfigDict(dict(encoders=('rope',), title='tiny'))
  config_file = tmp_path / 'tiny.py'
  config_file.write_text(CONFIG_FILE.format(text=config.to_json()))
  status, stderr = interrupt_when(  # as the first run starts compiling (the loop logs 'training ... parameters')
      [sys.executable, '-m', module, f'--config={config_file}', f'--workdir={tmp_path / "run"}'],
      lambda line: 'training ' in line and 'parameters' in line,
      cwd=REPO,
  )
  assert status == 128 + signal.SIGINT, stderr[-3000:]
  assert 'interrupted (finished runs are kept' in stderr
  assert 'Traceback' not in stderr and 'Segmentation' not in stderr


@pytest.mark.parametrize('spec', ['alibi', 'sandwich', 't5(bidirectional=False)', 'randomized(alibi, max_position=64)'])
def test_a_causal_form_bias_in_a_bidirectional_task_model_is_not_silent(task_config, spec):
  from relpos_jax.train import config as config_lib

  config = task_config()
  config.model.encoder = spec
  with pytest.warns(UserWarning, match=r'config.model.encoder=.* causal form .*bidirectional=True'):
    config_lib.validate(config)


def test_the_bidirectional_form_in_a_bidirectional_task_model_is_quiet(task_config):
  import warnings

  from relpos_jax.train import config as config_lib

  config = task_config()
  config.model.encoder = 'alibi(bidirectional=True) + t5'
  with warnings.catch_warnings():
    warnings.simplefilter('error')
    config_lib.validate(config)


@pytest.mark.parametrize(
    'module,args',
    [
        ('experiments.train', ['--config=configs/algorithmic.py', '--multihost']),
        ('experiments.length_generalization', ['--multihost']),
        # The study command had no way to name the cluster where JAX cannot find it.
        ('experiments.length_generalization', ['--multihost', '--num_processes=2']),
    ],
)
def test_multihost_without_a_cluster_is_one_message(tmp_path, module, args):
  env = {k: v for k, v in os.environ.items() if k not in ('XLA_FLAGS', 'JAX_COORDINATOR_ADDRESS')}
  done = subprocess.run(
      [sys.executable, '-m', module, f'--workdir={tmp_path / "run"}', *args],
      cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert done.returncode == 1, done.stderr[-3000:]
  assert 'Traceback' not in done.stderr, done.stderr[-3000:]
  assert '--coordinator_address' in done.stderr and '--num_processes' in done.stderr, done.stderr[-3000:]
  assert not os.path.exists(tmp_path / 'run')


def test_a_finished_run_in_a_read_only_directory_is_one_message(tmp_path, monkeypatch):
  """Root reads and writes whatever the mode says, so the read-only file system is simulated at os.open."""
  from relpos_jax.train import workdir_lock

  original = os.open

  def read_only(path, flags, *args, **kwargs):
    if str(path).endswith(workdir_lock.LOCK_FILE):
      raise OSError(errno.EROFS, 'Read-only file system', str(path))
    return original(path, flags, *args, **kwargs)

  (tmp_path / 'run').mkdir()
  monkeypatch.setattr(os, 'open', read_only)
  with pytest.raises(
      workdir_lock.WorkdirBusyError, match=r'cannot take the lock of .*run .*Read-only file system.*finished_only'
  ):
    with workdir_lock.held(tmp_path / 'run'):
      pass


def test_orbax_errors_are_one_line_each_not_a_traceback():
  """A full disk: orbax logs the same ENOSPC from four threads, each with a traceback (330 lines of stderr
  around the one CheckpointWriteError line, measured on a 600 KiB tmpfs)."""
  import logging as python_logging

  from relpos_jax.train import metrics

  metrics.quiet_checkpoint_logs()
  logger = python_logging.getLogger('absl')
  lines = []

  class Capture(python_logging.Handler):

    def emit(self, record):
      lines.extend(self.format(record).splitlines())

  capture = Capture()
  logger.addHandler(capture)
  try:
    try:
      raise ValueError('RESOURCE_EXHAUSTED: Error writing ...: No space left on device\n<details>')
    except ValueError:
      record = logger.makeRecord(
          'absl', python_logging.ERROR, '/site-packages/orbax/checkpoint/future.py', 387,
          'thread raised an exception: %s', ('RESOURCE_EXHAUSTED: No space left on device\nmore',), sys.exc_info(),
      )  # fmt: skip
    logger.handle(record)
  finally:
    logger.removeHandler(capture)
  assert lines == ['thread raised an exception: RESOURCE_EXHAUSTED: No space left on device'], lines

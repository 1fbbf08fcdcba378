"""One writer per workdir: a second `train` (or study) on a directory being written is refused, and a lock left by
a dead process is no lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import ml_collections
import pytest

from relpos_jax.study import runner
from relpos_jax.train import loop, workdir_lock
from relpos_jax.train.metrics import read_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG_FILE = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""

# Holds the lock of argv[1], says so, and waits to be killed.
HOLDER = """
import sys, time
from relpos_jax.train import workdir_lock
with workdir_lock.held(sys.argv[1]):
  print('held', flush=True)
  time.sleep(600)
"""


def _env():
  return {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}  # one CPU device, as a user gets


def test_two_train_processes_on_one_workdir_one_runs_one_is_refused(tmp_path, task_config):
  """Both started together on one fresh workdir: exactly one trains, the other exits 1 at once naming the
  workdir and the holder, and the workdir holds one run's records (each step logged once)."""
  config = task_config()
  config.train.steps = 40  # Long enough that the loser arrives while the winner runs.
  config.train.log_every = 4
  config_file = tmp_path / 'tiny.py'
  config_file.write_text(CONFIG_FILE.format(text=config.to_json()))
  workdir = str(tmp_path / 'run')
  command = [sys.executable, '-m', 'experiments.train', f'--config={config_file}', f'--workdir={workdir}']
  procs = [
      subprocess.Popen(command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
      for _ in range(2)
  ]
  try:
    outs = [p.communicate(timeout=240) for p in procs]
  finally:
    for p in procs:
      p.kill()
  codes = sorted(p.returncode for p in procs)
  assert codes == [0, 1], [err[-2000:] for _, err in outs]
  loser = next(err for p, (_, err) in zip(procs, outs) if p.returncode == 1)
  assert f'{workdir} is being written by another run (pid ' in loser, loser[-2000:]
  assert 'Traceback' not in loser
  steps = [r['step'] for r in read_metrics(workdir) if 'loss' in r]
  assert steps == list(range(4, 41, 4))
  assert json.load(open(os.path.join(workdir, loop.CONFIG_FILE)))['train']['steps'] == 40


def test_a_lock_left_by_a_killed_process_is_no_lock(tmp_path):
  workdir = str(tmp_path / 'run')
  holder = subprocess.Popen(
      [sys.executable, '-c', HOLDER, workdir], cwd=REPO, env=_env(), stdout=subprocess.PIPE, text=True
  )
  try:
    assert holder.stdout.readline().strip() == 'held'
    with pytest.raises(workdir_lock.WorkdirBusyError, match=f'pid {holder.pid} on host '):
      with workdir_lock.held(workdir):
        pass
  finally:
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
  with workdir_lock.held(workdir):  # The OS released the dead process's lock.
    recorded = json.load(open(os.path.join(workdir, workdir_lock.LOCK_FILE)))
    assert recorded['pid'] == os.getpid()


def test_a_second_call_in_one_process_is_refused_and_the_lock_is_released_after(tmp_path, task_config):
  workdir = str(tmp_path / 'run')
  with workdir_lock.held(workdir):
    with pytest.raises(workdir_lock.WorkdirBusyError, match=f'pid {os.getpid()} '):
      loop.train(task_config(), workdir)
    assert not os.path.exists(os.path.join(workdir, loop.CONFIG_FILE))  # Refused before anything was written.
  started = time.perf_counter()
  with workdir_lock.held(workdir):
    pass
  assert time.perf_counter() - started < 5


def test_a_study_directory_has_one_writer_and_a_report_only_reads(tmp_path, task_config):
  config = task_config()
  config.study = ml_collections.ConfigDict(dict(encoders=('rope',), title='tiny'))
  with workdir_lock.held(tmp_path):
    with pytest.raises(workdir_lock.WorkdirBusyError, match=str(tmp_path)):
      runner.run_study(config, tmp_path)
    assert not os.path.exists(tmp_path / 'results.json')
    runner.run_study(config, tmp_path, finished_only=True)  # Reports (nothing finished yet) beside the writer.

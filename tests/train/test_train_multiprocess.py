"""Data parallelism over two processes, actually run: two local CPU processes (2 devices each) joined by
`jax.distributed.initialize` on a loopback port, with gloo collectives, train the tiny LM config feeding
their own rows of every batch and checkpoint with orbax from both; the metrics and the parameters equal
those of the same run in one process of 4 devices. One process is then killed mid-run, and both resume.

Every process is started with a timeout and killed at the end whatever happens, so a hang fails the test
instead of stalling the suite.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest

from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs, loop, sharding
from relpos_jax.train.checkpoint import Checkpoints
from relpos_jax.train.metrics import read_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM_PROCESSES = 2
RUN_TIMEOUT_S = 240  # one launch of both processes (a few seconds of work, plus compilation)
ABANDONED_TIMEOUT_S = 5  # the survivor of a kill: it stops on the broken collective, or we kill it

# A process that joins the group, trains, and (process 1 only) vanishes after update `kill_at`.
DRIVER = """
import json, os, sys
from relpos_jax.train import sharding
address, process_id, config_path, workdir, kill_at = sys.argv[1:]
sharding.initialize_distributed(address, 2, int(process_id), initialization_timeout=60)
import ml_collections
from relpos_jax.train import loop
config = ml_collections.ConfigDict(json.load(open(config_path)))
def kill(step, state, metrics):
  if step == int(kill_at) and int(process_id) == 1:
    os._exit(17)  # no finally, no atexit: the process vanishes as under SIGKILL
loop.train(config, workdir, hooks=[kill])
"""

CONFIG_FILE = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""


def _free_port() -> int:
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


def _env() -> dict:
  env = {k: v for k, v in os.environ.items() if k not in ('XLA_FLAGS', 'JAX_NUM_CPU_DEVICES')}
  env.update(
      PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
      JAX_PLATFORMS='cpu',
      XLA_FLAGS='--xla_force_host_platform_device_count=2',  # 2 processes x 2 = the 4 devices here
      JAX_DEFAULT_MATMUL_PRECISION='highest',
  )  # as tests/conftest.py sets in-process
  return env


def _launch(argv_of, tmp_path, name):
  procs = []
  for i in range(NUM_PROCESSES):
    with open(tmp_path / f'{name}.{i}.log', 'w') as log:  # the child keeps its own copy of the file
      procs.append(subprocess.Popen(argv_of(i), cwd=REPO, env=_env(), stdout=log, stderr=subprocess.STDOUT))
  return procs


def _log(tmp_path, name) -> str:
  return '\n'.join(
      f'--- process {i}:\n' + (tmp_path / f'{name}.{i}.log').read_text()[-3000:] for i in range(NUM_PROCESSES)
  )


def _kill_all(procs):
  for p in procs:
    if p.poll() is None:
      p.kill()
    p.wait(timeout=30)


def _assert_close_records(got, expected):
  """metrics.jsonl records of both runs: the same steps and keys, values to float tolerance."""
  strip = lambda rs: [{k: v for k, v in r.items() if k != 'tokens_per_sec'} for r in rs]
  got, expected = strip(got), strip(expected)
  assert [sorted(r) for r in got] == [sorted(r) for r in expected]
  for a, b in zip(got, expected):
    for k in a:
      np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=f'step {a["step"]}: {k}')


@pytest.mark.slow
def test_two_processes_train_like_one_and_resume_after_a_kill(tmp_path, reference_lm_run, lm_config):
  config = lm_config()  # 24 updates, checkpoints every 5 (the last 2 kept), evaluation at 12 and 24
  text = config.to_json()
  config_json, config_py = tmp_path / 'config.json', tmp_path / 'config_file.py'
  config_json.write_text(text)
  config_py.write_text(CONFIG_FILE.format(text=text))
  (tmp_path / 'driver.py').write_text(DRIVER)
  workdir = str(tmp_path / 'run')

  # 1. Both processes train; process 1 vanishes after update 13 (checkpoint 10 was requested at 10).
  address = f'localhost:{_free_port()}'
  procs = _launch(
      lambda i: [sys.executable, str(tmp_path / 'driver.py'), address, str(i), str(config_json), workdir, '13'],
      tmp_path,
      'killed',
  )
  try:
    assert procs[1].wait(timeout=RUN_TIMEOUT_S) == 17, _log(tmp_path, 'killed')
    try:  # The survivor waits in the next all-reduce (until JAX's heartbeat timeout): it cannot go on alone.
      assert procs[0].wait(timeout=ABANDONED_TIMEOUT_S) != 0, _log(tmp_path, 'killed')
    except subprocess.TimeoutExpired:
      pass
  finally:
    _kill_all(procs)
  # Until the kill, the two processes computed what one process computes: loss, gradient norm,
  # learning rate at steps 4, 8, 12, and the evaluation at step 12.
  records = read_metrics(workdir)
  assert [r['step'] for r in records] == [4, 8, 12, 12], _log(tmp_path, 'killed')
  _assert_close_records(records, [r for r in reference_lm_run.history if r['step'] <= 12])
  saved = Checkpoints(workdir, keep=2).all_steps()
  assert 5 in saved and set(saved) <= {5, 10}, saved

  # 2. The same two processes restarted with the command line of a multi-host run: they resume from the
  # latest checkpoint both wrote and finish; the result is the one-process run's.
  address = f'localhost:{_free_port()}'
  procs = _launch(
      lambda i: [
          sys.executable,
          '-m',
          'experiments.train',
          f'--config={config_py}',
          f'--workdir={workdir}',
          '--multihost',
          f'--coordinator_address={address}',
          f'--num_processes={NUM_PROCESSES}',
          f'--process_id={i}',
      ],
      tmp_path,
      'resumed',
  )
  try:
    for p in procs:
      assert p.wait(timeout=RUN_TIMEOUT_S) == 0, _log(tmp_path, 'resumed')
  finally:
    _kill_all(procs)
  resumed_from = max(saved)
  assert 'resumed from' in _log(tmp_path, 'resumed') and f'at step {resumed_from}' in _log(tmp_path, 'resumed')
  _assert_close_records(read_metrics(workdir), reference_lm_run.history)
  assert Checkpoints(workdir, keep=2).all_steps() == [20, 24]
  model, _ = loop.load_model(workdir, config)  # here, in one process: whatever mesh wrote it
  got = jax.tree.leaves(jax.device_get(loop.split_model(model)[1]))
  expected = jax.tree.leaves(jax.device_get(reference_lm_run.params))
  assert len(got) == len(expected) > 0
  for a, b in zip(got, expected):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_local_rows_and_shard_local_batch_in_one_process():
  mesh = sharding.make_mesh()  # the 4 fake CPU devices of this process
  assert sharding.local_rows(mesh, 8) == slice(0, 8)
  batch = {'inputs': np.arange(16).reshape(8, 2)}
  arrays = sharding.shard_local_batch(batch, mesh, 8)
  np.testing.assert_array_equal(np.asarray(arrays['inputs']), batch['inputs'])
  assert [s.data.shape for s in arrays['inputs'].addressable_shards] == [(2, 2)] * 4
  with pytest.raises(ValueError, match='cannot be split evenly over the 4 devices'):
    sharding.local_rows(mesh, 6)
  with pytest.raises(ValueError, match=r"batch\['inputs'\] has 4 rows, but this process feeds rows 0..7"):
    sharding.shard_local_batch({'inputs': np.zeros((4, 2))}, mesh, 8)


def test_each_process_builds_its_rows_of_the_same_batch(lm_config, lm_data, task_config):
  for data in (lm_data(lm_config()), inputs.TaskData(config_lib.parse(task_config()))):
    whole = data.train_batch(3)
    for rows in (slice(0, 4), slice(4, 8)):
      part = data.train_batch(3, rows)
      assert sorted(part) == sorted(whole)
      for key in whole:
        np.testing.assert_array_equal(part[key], whole[key][rows])


def test_initialize_distributed_rejects_a_partial_launch_spec(monkeypatch):
  monkeypatch.delenv('JAX_COORDINATOR_ADDRESS', raising=False)
  with pytest.raises(ValueError, match='missing: process_id'):
    sharding.initialize_distributed('localhost:1234', 2)
  with pytest.raises(ValueError, match='missing: coordinator_address'):
    sharding.initialize_distributed(num_processes=2, process_id=0)
  with pytest.raises(ValueError, match=r'process_id must be an int in \[0, num_processes=2\), got 2'):
    sharding.initialize_distributed('localhost:1234', 2, 2)
  with pytest.raises(ValueError, match='num_processes must be an int >= 1'):
    sharding.initialize_distributed('localhost:1234', 0, 0)

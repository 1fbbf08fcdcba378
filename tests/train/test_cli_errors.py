"""The entry points under a careless or unlucky user: errors the user can fix are one
message and exit status 1, without a traceback; Ctrl-C before the first training step exits at once, cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFIG_FILE = """
import json
import ml_collections

def get_config():
  return ml_collections.ConfigDict(json.loads({text!r}))
"""


def _env():
  return {k: v for k, v in os.environ.items() if k != 'XLA_FLAGS'}  # one CPU device, as a user gets


def _run(module, *args):
  return subprocess.run(
      [sys.executable, '-m', module, *args], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=300
  )


@pytest.mark.parametrize(
    'module,args,expected',
    [
        # Refused by the config check inside train(): a traceback of ~20 lines came first.
        (
            'experiments.train',
            ['--config=configs/algorithmic.py', '--config.model.encoder=cope'],
            "ConfigError: config.model.encoder='cope' is invalid",
        ),
        # JAX's bare IndexError before.
        (
            'experiments.train',
            ['--config=configs/algorithmic.py', '--multihost', '--coordinator_address=foo', '--num_processes=1'],
            "coordinator_address='foo' (the flag --coordinator_address",
        ),
        # Trained nothing and exited 0 before.
        ('experiments.suite', ['--tasks='], 'tasks=[] names no task'),
    ],
)
def test_errors_the_user_can_fix_are_one_message_and_exit_status_1(tmp_path, module, args, expected):
  done = _run(module, f'--workdir={tmp_path / "run"}', *args)
  assert done.returncode == 1, done.stderr[-3000:]
  assert expected in done.stderr, done.stderr[-3000:]
  assert 'Traceback' not in done.stderr
  assert 'coordinator' not in expected or 'allowed: host:port of process 0' in done.stderr


def test_ctrl_c_during_the_first_compilation_exits_at_once_with_a_message(tmp_path, task_config, interrupt_when):
  """SIGINT as the first step starts compiling (the loop logs 'training ...' just before), a few times: each
  exits with status 130 and the message, never a crash, a traceback or status 0."""
  config = task_config()
  config_file = tmp_path / 'tiny.py'
  config_file.write_text(CONFIG_FILE.format(text=config.to_json()))
  for attempt in range(3):
    command = [
        sys.executable,
        '-m',
        'experiments.train',
        f'--config={config_file}',
        f'--workdir={tmp_path / f"run{attempt}"}',
    ]
    status, stderr = interrupt_when(command, lambda line: 'training ' in line and 'parameters' in line, cwd=REPO)
    assert status == 128 + signal.SIGINT, stderr[-3000:]
    assert 'interrupted before the first training step' in stderr
    assert 'Traceback' not in stderr and 'Segmentation' not in stderr

"""Ctrl-C in the resolution study: exit status 130 at once, a message that says what is kept (issue 53).

It segfaulted in 3 of 4 tries (a KeyboardInterrupt unwinding through JAX) and printed "resumes from the last
checkpoint" for a study that keeps none. Each case sends SIGINT when a run starts (its training compiles then)."""

from __future__ import annotations

import os
import signal
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMAND = [
    sys.executable, '-m', 'experiments.resolution', "--config.encoders=('nope',)", "--config.tasks=('count',)",
    '--config.comparisons=()', '--config.model.model_dim=8', '--config.model.num_heads=2', '--config.steps=3',
    '--config.warmup_steps=0', '--config.train_side=5', '--config.eval_sides=(5,)', '--config.eval_examples=8',
    '--config.eval_batch_size=8', '--config.entropy_examples=8', '--config.lr_grid=(1e-3,3e-3)',
    '--config.seeds=(0,)',
]  # fmt: skip


@pytest.mark.parametrize('at_run', [1, 2])  # the first run's compilation; the second, one run finished
def test_ctrl_c_exits_at_once_and_says_what_is_kept(tmp_path, at_run, interrupt_when):
  workdir = tmp_path / 'w'
  started = []

  def when(line):
    started.append('resolution study: count / nope' in line)
    return sum(started) == at_run

  status, stderr = interrupt_when(COMMAND + [f'--workdir={workdir}'], when, cwd=REPO)
  assert status == 128 + signal.SIGINT, stderr[-3000:]
  assert "interrupted (finished runs are kept under the workdir's runs/; the run in progress is lost" in stderr
  assert 'checkpoint' not in stderr and 'Traceback' not in stderr and 'Segmentation' not in stderr
  assert len(list(workdir.glob('runs/**/result.json'))) == at_run - 1

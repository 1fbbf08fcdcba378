"""Issue 36, part A, the training side: what a hostile probe found in checkpoint writes and the entry points.

Each test failed on the code before its fix (the issue's item number is in the test's name)."""

from __future__ import annotations

import errno

import orbax.checkpoint as ocp
import pytest

from relpos_jax.train import loop
from relpos_jax.train.checkpoint import CheckpointWriteError


def test_item12_a_failed_background_save_is_named_by_its_own_step(tmp_path, lm_config, lm_data, monkeypatch):
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

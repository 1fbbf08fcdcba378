"""Checkpoints of the train state with orbax (`ocp.CheckpointManager`): periodic, keep-last-N, resumable.

Layout: `<workdir>/checkpoints/<step>/` holds the TrainState after `step` updates. Saves are asynchronous
(training continues while the arrays are written) and atomic: orbax writes into a temporary directory and
renames it only once everything is on disk, so a run killed mid-save leaves the previous checkpoint as
the latest one and never a half-written step (temporary directories are ignored, then cleaned up).
`close()` (also on exceptions: the loop's `finally`) waits for a save in flight to finish.

Restoring takes a TrainState to imitate (`like`): the restored arrays get its shapes, dtypes and
shardings (replicated over the mesh of the resumed run, whatever mesh wrote them).
"""

from __future__ import annotations

import os

import jax
import orbax.checkpoint as ocp
from etils import epath

from relpos_jax.train.state import TrainState

CHECKPOINT_DIR = 'checkpoints'


def run_path(workdir: str | os.PathLike) -> epath.Path:
  """A run directory as an absolute epath: local, or in the cloud (gs://...) as orbax takes it."""
  text = os.fspath(workdir)
  return epath.Path(text if '://' in text else os.path.abspath(text))


def abstract_like(tree):
  """ShapeDtypeStructs (with sharding) of every array of `tree`: the restore target."""
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), tree)


class Checkpoints:
  """The checkpoints of one run directory; keeps the `keep` most recent steps."""

  def __init__(self, workdir: str | os.PathLike, *, keep: int, async_save: bool = True):
    self.directory = run_path(workdir) / CHECKPOINT_DIR
    options = ocp.CheckpointManagerOptions(
        preservation_policy=ocp.checkpoint_managers.LatestN(n=int(keep)),
        enable_async_checkpointing=async_save,
        cleanup_tmp_directories=True,  # leftovers of a save interrupted by a kill
        create=True)
    self.manager = ocp.CheckpointManager(self.directory, options=options)

  def save(self, state: TrainState) -> bool:
    """Saves `state` under its step (asynchronously); False if that step is already saved."""
    step = int(jax.device_get(state.step))
    if step in self.manager.all_steps():
      return False
    return self.manager.save(step, args=ocp.args.StandardSave(state), force=True)

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def restore(self, like: TrainState, step: int | None = None) -> TrainState:
    """The saved state at `step` (default: the latest), shaped and sharded like `like`."""
    step = self.latest_step() if step is None else step
    if step is None:
      raise ValueError(f'no checkpoint to restore in {self.directory}.')
    return self.manager.restore(step, args=ocp.args.StandardRestore(abstract_like(like)))

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def close(self) -> None:
    """Waits for the save in flight (if any), then releases the manager."""
    self.manager.close()

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

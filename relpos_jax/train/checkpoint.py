"""Checkpoints of the train state with orbax (`ocp.CheckpointManager`): periodic, keep-last-N, resumable.

Layout: `<workdir>/checkpoints/<step>/` holds the TrainState after `step` updates. Saves are asynchronous
(training continues while the arrays are written) and atomic: orbax writes into a temporary directory and
renames it only once everything is on disk, so a run killed mid-save leaves the previous checkpoint as
the latest one and never a half-written step (temporary directories are ignored, then cleaned up).
`close()` (also on exceptions: the loop's `finally`) waits for a save in flight to finish.

Restoring takes a TrainState to imitate (`like`): the restored arrays get its shapes, dtypes and
shardings (replicated over the mesh of the resumed run, whatever mesh wrote them).

Damage: `restore_latest_intact` reads the newest step that restores, warns naming every newer step that
did not (a truncated or zeroed data file, a deleted manifest, a stray empty step directory) and, when
asked, moves those aside to `<workdir>/broken_checkpoints/<step>` so that the run can save that step
again; with no readable step it raises `CheckpointError` naming the steps and what to delete. A failed
write (a full disk: `RESOURCE_EXHAUSTED`, `ENOSPC`) raises one `CheckpointWriteError` (an OSError) at the
next save or at `close()`, naming the step, the directory and the cause.
"""

from __future__ import annotations

import os
import warnings

import jax
import orbax.checkpoint as ocp
from etils import epath

from relpos_jax.train.state import TrainState

CHECKPOINT_DIR = 'checkpoints'
BROKEN_DIR = 'broken_checkpoints'


class CheckpointError(RuntimeError):
  """A checkpoint of a run directory cannot be read; `cause` says why, in one line."""

  def __init__(self, message: str, cause: str = ''):
    super().__init__(message)
    self.cause = cause


class CheckpointWriteError(OSError):
  """A checkpoint could not be written (e.g. the disk is full)."""


def _cause(error: BaseException, limit: int = 300) -> str:
  """`Type: first line of the message`, short: the part of an orbax / tensorstore error that says why."""
  lines = [line.strip() for line in str(error).splitlines() if line.strip()]
  text = lines[0] if lines else ''
  return f'{type(error).__name__}: {text[:limit]}{"..." if len(text) > limit else ""}'


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
        create=True,
    )
    # One item (the TrainState) declared up front: otherwise orbax infers the layout from the newest step
    # directory, and a stray empty one makes every step unreadable.
    self.manager = ocp.CheckpointManager(self.directory, options=options, item_handlers=ocp.StandardCheckpointHandler())
    # The step whose asynchronous save was started last: a background failure is that step's, whenever it
    # surfaces (at the next save, at a check, at close).
    self.in_flight: int | None = None

  def save(self, state: TrainState) -> bool:
    """Saves `state` under its step (asynchronously); False if that step is already saved.

    Raises CheckpointWriteError if this save cannot start or an earlier asynchronous one failed."""
    step = int(jax.device_get(state.step))
    self.check_for_errors()
    if step in self.manager.all_steps():
      return False
    try:  # What orbax's save() does first: an error here is the save in flight's, not this step's.
      self.manager.wait_until_finished()
    except Exception as e:
      raise self._write_error(e, self.in_flight) from None
    try:
      saved = self.manager.save(step, args=ocp.args.StandardSave(state), force=True)
    except Exception as e:  # orbax / tensorstore raise many types for one cause (a full disk, a lost mount)
      raise self._write_error(e, step) from None
    self.in_flight = step
    return saved

  def check_for_errors(self) -> None:
    """Raises CheckpointWriteError if an asynchronous save has failed since the last check."""
    try:
      self.manager.check_for_errors()
    except Exception as e:
      raise self._write_error(e, self.in_flight) from None

  def _write_error(self, error: BaseException, step: int | None = None) -> CheckpointWriteError:
    what = f'step {step}' if step is not None else 'a checkpoint'
    latest = [s for s in self.all_steps() if s != step]
    resume = (
        f'rerun the same command to resume from step {latest[-1]}, the latest complete checkpoint'
        if latest
        else 'rerun the same command to start again'
    )
    return CheckpointWriteError(
        f'could not save {what} to {self.directory} ({_cause(error)}); training stopped. Free disk space '
        f'(or fix the storage), then {resume}.'
    )

  def latest_step(self) -> int | None:
    return self.manager.latest_step()

  def all_steps(self) -> list[int]:
    return sorted(self.manager.all_steps())

  def restore(self, like: TrainState, step: int | None = None) -> TrainState:
    """The saved state at `step` (default: the latest), shaped and sharded like `like`.

    Raises CheckpointError naming the step if it cannot be read."""
    step = self.latest_step() if step is None else step
    if step is None:
      raise ValueError(f'no checkpoint to restore in {self.directory}.')
    try:
      return self.manager.restore(step, args=ocp.args.StandardRestore(abstract_like(like)))
    except Exception as e:
      cause = _cause(e)
      raise CheckpointError(
          f'checkpoint step {step} in {self.directory} cannot be read ({cause}); '
          f'delete {self.directory / str(step)} to resume from an earlier step.',
          cause,
      ) from None

  def restore_latest_intact(self, like: TrainState, *, set_aside: bool = False) -> TrainState | None:
    """The newest state that restores (None if there are no checkpoints).

    Every newer step that cannot be read is named in a warning and, with `set_aside`, moved to
    `<workdir>/broken_checkpoints/<step>` (so that the resumed run can save that step again). Raises
    CheckpointError if no step can be read."""
    broken = []
    for step in reversed(self.all_steps()):
      try:
        state = self.restore(like, step)
      except CheckpointError as e:
        broken.append((step, e.cause))
        continue
      if broken:
        self._report_broken(broken, step, set_aside)
      return state
    if broken:
      listed = '; '.join(f'step {s}: {why}' for s, why in broken)
      raise CheckpointError(
          f'no checkpoint in {self.directory} can be read ({listed}). Delete the broken step '
          f'directories ({", ".join(str(self.directory / str(s)) for s, _ in broken)}), or the whole '
          'run directory to start fresh.'
      )
    return None

  def _report_broken(self, broken, step: int, set_aside: bool) -> None:
    moved = ''
    if set_aside:
      target_root = self.directory.parent / BROKEN_DIR
      target_root.mkdir(parents=True, exist_ok=True)
      targets = []
      for s, _ in broken:
        target, n = target_root / str(s), 1
        while target.exists():
          target, n = target_root / f'{s}.{n}', n + 1
        (self.directory / str(s)).rename(target)
        targets.append(str(target))
      self.manager.reload()
      moved = f' Moved to {", ".join(targets)}.'
    warnings.warn(
        f'checkpoint(s) in {self.directory} cannot be read: '
        + '; '.join(f'step {s} ({why})' for s, why in broken)
        + f'. Using step {step}, the newest intact one.{moved}',
        UserWarning,
        stacklevel=3,
    )

  def wait(self) -> None:
    self.manager.wait_until_finished()

  def close(self, *, quiet: bool = False) -> None:
    """Waits for the save in flight (if any), then releases the manager. Raises CheckpointWriteError if a
    save failed; `quiet` only logs it (while another error is already on its way up)."""
    try:
      self.manager.close()
    except Exception as e:
      error = self._write_error(e, self.in_flight)
      if not quiet:
        raise error from None
      from absl import logging

      logging.error('%s', error)

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

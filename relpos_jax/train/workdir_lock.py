"""One writer per run directory: an exclusive OS file lock held for the life of a run (or a study, a suite).

Two processes writing one workdir interleave their metrics, overwrite each other's config.json and checkpoints,
and the loser fails with a misleading error. So `train`, `run_study` and `run_suite` take the lock of their
directory before they read or write anything in it, and a second writer is refused with `WorkdirBusyError`,
which names the directory and the holder (pid, host, start time).

The lock is `fcntl.flock(LOCK_EX | LOCK_NB)` on `<workdir>/.writer.lock`. The OS releases it when the holding
process exits, however it exits (SIGKILL included), so a lock left by a dead process is no lock: the next
writer takes it at once. The file itself stays (it records the last holder; deleting it would let a third
process lock a fresh file while a second still holds the old one). flock belongs to an open file, so two
calls (or threads) of one process contend as two processes do. A lock file that is a symbolic link (or not a
regular file) is refused, never followed: taking it would truncate its target. A workdir where the lock file
cannot be made (a read-only directory) is refused with one message (`LockFileError`).

Not covered: paths with a scheme (gs://, s3://), which have no OS locks (a warning says so), and in a
multi-process run every process but process 0 (`jax.process_index() == 0` holds the lock; the others write
nothing to the workdir).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import functools
import inspect
import json
import os
import socket
import stat
from typing import Callable

from absl import logging

LOCK_FILE = '.writer.lock'


class WorkdirBusyError(RuntimeError):
  """Another live process (or another call of this one) is writing the directory."""


class LockFileError(WorkdirBusyError):
  """The lock file is not a regular file of its own (a symbolic link, a FIFO, a directory): locking it would
  truncate and overwrite whatever it points to, so no writer may take it until it is removed."""


def _holder_text(path: str) -> str:
  try:
    with open(path, encoding='utf-8') as f:
      holder = json.load(f)
    return f'pid {holder["pid"]} on host {holder["host"]}, started {holder["started"]}'
  except (OSError, ValueError, KeyError, TypeError):
    return 'a process that has not yet recorded itself'


def _acquire(workdir: str) -> int:
  """Takes the lock of `workdir` (made if missing); returns the descriptor whose closing releases it."""
  path = os.path.join(workdir, LOCK_FILE)
  try:  # O_NOFOLLOW: a symbolic link is refused, never followed (its target would be truncated below).
    os.makedirs(workdir, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
  except OSError as e:
    if os.path.islink(path) or os.path.exists(path) and not os.path.isfile(path):
      raise _not_a_lock_file(path) from None
    raise LockFileError(
        f'cannot take the lock of {workdir} ({e.strerror or e}: {path}): a run, a study and a suite write their '
        'workdir, so it must be writable; allowed: a writable --workdir (copy a finished run or study there to '
        'resume it). To read a finished study without writing: --finished_only; a finished run: '
        'relpos_jax.train.loop.load_model.'
    ) from None
  if not stat.S_ISREG(os.fstat(fd).st_mode):
    os.close(fd)
    raise _not_a_lock_file(path)
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    os.close(fd)
    raise WorkdirBusyError(
        f'{workdir} is being written by another run ({_holder_text(path)}; lock file {path}). A workdir has one '
        'writer: wait for that run to finish, stop it, or use another workdir.'
    ) from None
  except BaseException:
    os.close(fd)
    raise
  holder = {
      'pid': os.getpid(),
      'host': socket.gethostname(),
      'started': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
  }
  os.ftruncate(fd, 0)
  os.pwrite(fd, json.dumps(holder).encode(), 0)
  return fd


def _not_a_lock_file(path: str) -> LockFileError:
  what = f'a symbolic link (to {os.readlink(path)!r})' if os.path.islink(path) else 'not a regular file'
  return LockFileError(
      f'{path} is {what}: the lock file must be a regular file, which the lock truncates and writes its holder '
      'into (a link would have its target overwritten); allowed: no file there, or the regular file a run left. '
      'Check what it points to, remove it, and rerun.'
  )


@contextlib.contextmanager
def held(workdir: str | os.PathLike | None, *, enabled: bool = True):
  """Holds the lock of `workdir` for the `with` block; no-op for None, for `enabled=False` and for a URL."""
  if workdir is None or not enabled:
    yield
    return
  workdir = os.fspath(workdir)
  if '://' in workdir:
    logging.warning('%s has no OS file locks: one writer per workdir is not enforced there.', workdir)
    yield
    return
  fd = _acquire(workdir)
  try:
    yield
  finally:
    os.close(fd)  # Closing the descriptor releases the flock.


def _is_process_zero() -> bool:
  import jax  # Here, not at import: a multi-process entry point must call jax.distributed.initialize() first.

  return jax.process_index() == 0


def one_writer(argument: str = 'workdir', *, unless: str | None = None) -> Callable:
  """Decorator: each call holds the lock of the directory passed as `argument` (in process 0 only).

  `unless`: a bool argument that, when true, marks a read-only call (it takes no lock).
  """

  def wrap(fn):
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def locked(*args, **kwargs):
      bound = signature.bind(*args, **kwargs)
      bound.apply_defaults()
      reading = unless is not None and bool(bound.arguments[unless])
      workdir = bound.arguments[argument]
      with held(workdir, enabled=workdir is not None and not reading and _is_process_zero()):
        return fn(*args, **kwargs)

    return locked

  return wrap

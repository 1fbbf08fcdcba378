"""The command line of the entry points: `--config=<file>[:variants]` plus `--config.<key>=<value>` overrides.

ml_collections' `config_flags.DEFINE_config_file` does the loading and the overrides; `parse_flags`, given to
`absl.app.run(main, flags_parser=parse_flags)`, first checks what it reports badly, each with one message:

  * a config file that does not exist is named (config_flags defers that error to the first use),
  * an override of a key the config does not have names the key and the keys allowed there (config_flags
    raises a bare AttributeError),
  * an override given twice is refused: for a tuple key config_flags would concatenate the values
    (`--config.eval.lengths='(128,)' --config.eval.lengths='(64,)'` gives (128, 64)), for any other key
    the last would silently win. Write a tuple once: `--config.eval.lengths='(64, 128)'`.

After parsing, the entry points run under `errors_in_one_line` (an error the user can fix: its message and
exit status 1, no traceback) and the training entry point under `interrupt_exits_before_first_step`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
from typing import Sequence

from absl import app

from relpos_jax import validation
from relpos_jax.train import checkpoint
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import loop, workdir_lock


def _flag_token(arg: str) -> tuple[str, str | None] | None:
  """('name', value or None) of a '--name=value' / '--name' / '-name' argument; None for anything else."""
  if not arg.startswith('-') or arg in ('-', '--'):
    return None
  name, sep, value = arg.lstrip('-').partition('=')
  return name, (value if sep else None)


def check_command_line(argv: Sequence[str], *, name: str = 'config', default: str | None = None) -> None:
  """Raises ConfigError for a missing config file, an unknown override key or a repeated override."""
  path, overrides = default, []
  args = list(argv[1:])
  if '--' in args:
    args = args[: args.index('--')]
  for i, arg in enumerate(args):
    token = _flag_token(arg)
    if token is None:
      continue
    flag, value = token
    if flag == name:
      path = value if value is not None else (args[i + 1] if i + 1 < len(args) else None)
    elif flag.startswith(name + '.') or flag.startswith(f'no{name}.'):
      overrides.append(flag.split('.', 1)[1])
  repeated = sorted({k for k in overrides if overrides.count(k) > 1})
  if repeated:
    raise config_lib.ConfigError(
        f'--{name}.{repeated[0]} is given {overrides.count(repeated[0])} times; give each override once '
        f"(a tuple as one value: --{name}.eval.lengths='(64, 128)')."
    )
  if path is None or not overrides and path == default:
    return
  config = config_files.config_from_file(path)  # Names a file that does not exist.
  for key in overrides:
    config_files.override(config, key, dataclasses.MISSING)  # Names an unknown key and the allowed ones.


def parse_flags(argv: Sequence[str], *, name: str = 'config', default: str | None = None) -> list[str]:
  """absl's flag parsing after `check_command_line` (its error printed as absl prints flag errors).

  `default`: the config used when the command line names none (define the flag without a default:
  config_flags would load a default at import, overrides included, before any check could run).
  """
  argv = list(argv)
  try:
    check_command_line(argv, name=name, default=default)
  except config_lib.ConfigError as e:
    print(f'FATAL Flags parsing error: {e}', file=sys.stderr)
    sys.exit(1)
  if default is not None and not any((_flag_token(a) or ('',))[0] == name for a in argv[1:]):
    argv.insert(1, f'--{name}={default}')
  return app.parse_flags_with_usage(argv)


def _user_errors() -> tuple[type[BaseException], ...]:
  """Errors whose message says what to do. Their modules are imported with this one: importing them runs no JAX
  computation, so a multi-process entry point still calls jax.distributed.initialize() after importing this
  module (tests/test_code_health.py pins that importing the entry points' modules initializes no backend)."""
  return (
      config_lib.ConfigError,
      validation.InvalidValue,
      loop.DivergedError,
      checkpoint.CheckpointError,
      checkpoint.CheckpointWriteError,
      workdir_lock.WorkdirBusyError,
  )


@contextlib.contextmanager
def errors_in_one_line():
  """A bad config, a busy workdir, a diverged run, an unreadable checkpoint: `ErrorName: message` and exit
  status 1, without the traceback that would bury the message; Ctrl-C (KeyboardInterrupt): a line and exit
  status 130. Anything else (a bug) keeps its traceback."""
  try:
    yield
  except KeyboardInterrupt:  # Ctrl-C during training steps, after the loop has let a save in flight finish.
    print('\ninterrupted (the same command resumes from the last checkpoint)', file=sys.stderr)
    raise SystemExit(INTERRUPTED_EXIT_STATUS) from None
  except Exception as e:  # pylint: disable=broad-except
    if isinstance(e, _user_errors()):
      raise SystemExit(f'{type(e).__name__}: {e}') from None
    raise


INTERRUPTED_EXIT_STATUS = 128 + signal.SIGINT  # What a shell reports for a process ended by Ctrl-C.


INTERRUPTED_MESSAGE = (
    'interrupted before the first training step (nothing was trained; the same command starts again, or '
    'resumes from the last checkpoint)'
)
STUDY_INTERRUPTED_MESSAGE = (
    'interrupted (finished runs are kept, an unfinished one resumes from its last checkpoint: rerun the same '
    'command)'
)

# The resolution study keeps no checkpoint: a run is saved once it has trained and been evaluated.
RESOLUTION_INTERRUPTED_MESSAGE = (
    "interrupted (finished runs are kept under the workdir's runs/; the run in progress is lost and trains again "
    'from its start: rerun the same command)'
)


class ExitOnInterrupt:
  """While armed, Ctrl-C ends the process at once: a message, exit status 130, `os._exit`.

  XLA's compilation takes the time before a run's first training step (and before each evaluation), and a
  KeyboardInterrupt unwinding through JAX's C++ there (or the interpreter's teardown racing XLA's threads)
  crashed the process about half the time. So while armed the interrupt is taken by a thread woken through
  `signal.set_wakeup_fd`, at once even while the main thread is inside the compiler, which writes the message
  and leaves with `os._exit`: no unwinding, no teardown (the workdir lock goes with the process; records
  written so far are complete files, written atomically). `disarm()` (e.g. a training hook: from the first
  step on) gives Ctrl-C back to Python, as a KeyboardInterrupt (the loop lets a checkpoint save in flight
  finish); `arm()` takes it again. Main thread only; elsewhere a no-op.
  """

  def __init__(self, message: str = INTERRUPTED_MESSAGE):
    self.message = ('\n' + message + '\n').encode()
    self.active = self.armed = False

  def __enter__(self) -> 'ExitOnInterrupt':
    if threading.current_thread() is not threading.main_thread():
      return self
    self.active = True
    self._read_end, self._write_end = os.pipe()
    os.set_blocking(self._write_end, False)
    threading.Thread(target=self._watch, name='exit-on-interrupt', daemon=True).start()
    self.arm()
    return self

  def __exit__(self, *exc) -> None:
    if self.active:
      self.disarm()
      self.active = False
      os.close(self._write_end)  # the watcher reads b'' and ends

  def _leave(self, *args) -> None:
    del args
    if self.armed:
      os.write(2, self.message)
      os._exit(INTERRUPTED_EXIT_STATUS)  # pylint: disable=protected-access

  def _watch(self) -> None:
    while signal_number := os.read(self._read_end, 1):  # b'' once the write end is closed
      if signal_number[0] == signal.SIGINT:  # The fd wakes for every signal Python handles.
        self._leave()
    os.close(self._read_end)

  def arm(self) -> None:
    if self.active and not self.armed:
      self._previous = signal.signal(signal.SIGINT, self._leave)
      self._previous_fd = signal.set_wakeup_fd(self._write_end, warn_on_full_buffer=False)
      self.armed = True

  def disarm(self, *args) -> None:
    """Ctrl-C is Python's again (takes and ignores a training hook's arguments)."""
    del args
    if self.armed:
      self.armed = False
      signal.signal(signal.SIGINT, self._previous)
      signal.set_wakeup_fd(self._previous_fd)


@contextlib.contextmanager
def interrupt_exits_before_first_step():
  """Ctrl-C before the first training step ends the process at once: a message, exit status 130
  (`ExitOnInterrupt`). Yields the hook to pass to `train(hooks=[...])`; from the first step on, Ctrl-C raises
  KeyboardInterrupt as usual (the loop lets a checkpoint save in flight finish)."""
  with ExitOnInterrupt() as guard:
    yield guard.disarm


def guarded_train(guard: ExitOnInterrupt):
  """`train_fn` of a study or suite under `guard`: each run's compilation (before its first step) and everything
  between runs (evaluations, their compilations) exit at once on Ctrl-C; its training steps take Ctrl-C as
  the train command's do."""

  def train(config, workdir=None, **kwargs):
    guard.arm()
    try:
      return loop.train(config, workdir, hooks=[*kwargs.pop('hooks', ()), guard.disarm], **kwargs)
    finally:
      guard.arm()

  return train

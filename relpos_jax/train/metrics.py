"""Metrics of a run: JSON lines in `<workdir>/metrics.jsonl`, a progress line, and a throughput meter.

One record per logged step: `{"step": 100, "loss": 2.31, "lr": 0.001, "tokens_per_sec": 51234.0, ...}`;
evaluation records carry `eval/<length>/<metric>` keys (e.g. `eval/128/bits_per_char`). `step` counts
the updates applied (the record of step 100 describes the 100th update and the params after it).

When a run resumes from the checkpoint of step k, records of steps after k (written by the interrupted
attempt) are dropped first, so the file reads as one uninterrupted run.

Progress goes through absl logging (no extra dependency, one line per `train.log_every` steps, visible in
the terminal, in a notebook and in the logs of a cluster job alike).
"""

from __future__ import annotations

import json
import logging as python_logging
import math
import os
import time
import warnings
from typing import Iterable

import numpy as np
from etils import epath

from relpos_jax import files
from relpos_jax.train import tensorboard

METRICS_FILE = 'metrics.jsonl'


def to_python(value):
  """JSON-friendly scalars (numpy / jax scalars -> float or int; NaN and inf kept as strings)."""
  if isinstance(value, dict):
    return {k: to_python(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [to_python(v) for v in value]
  if hasattr(value, 'shape') and getattr(value, 'shape', None) == ():
    value = np.asarray(value).item()
  if isinstance(value, float) and not math.isfinite(value):
    return str(value)
  return value


class MetricsWriter:
  """Appends records to `<workdir>/metrics.jsonl` (or only keeps them in memory when workdir is None), and
  with `tensorboard=True` the same records as TensorBoard scalars in `<workdir>` (`train.tensorboard`).

  The workdir may be local or a cloud path (`gs://...`, through etils.epath, as orbax uses)."""

  def __init__(self, workdir: str | os.PathLike | None, *, enabled: bool = True, tensorboard: bool = False):
    self.path = epath.Path(workdir) / METRICS_FILE if workdir is not None else None
    self.enabled = enabled and self.path is not None
    self.tensorboard = tensorboard and self.enabled
    self.history: list[dict] = []
    self._events = None

  def truncate_after(self, step: int) -> None:
    """Keeps the records of steps <= `step` (in memory and on disk): the state a resume starts from.

    Every process of a multi-process run reads the file (they all need the history); only the writing one
    rewrites it, atomically, so the others never read it half-written."""
    records = read_metrics(self.path) if self.path is not None and self.path.exists() else []
    self.history = [r for r in records if r.get('step', 0) <= step]
    if self.enabled:
      files.write_text_atomic(self.path, ''.join(json.dumps(record) + '\n' for record in self.history))
    if self.tensorboard and self._events is None:  # A resumed run hides the lost steps' events too.
      self._events = tensorboard.open_writer(self.path.parent, purge_step=step + 1 if step else None)

  def write(self, record: dict) -> dict:
    record = to_python(record)
    self.history.append(record)
    if self.enabled:
      with self.path.open('a') as f:
        f.write(json.dumps(record) + '\n')
    if self._events is not None:
      tensorboard.write_record(self._events, record)
    return record

  def close(self) -> None:
    """Flushes and closes the TensorBoard writer (metrics.jsonl is written record by record)."""
    if self._events is not None:
      self._events.close()
      self._events = None


def read_metrics(path: str | os.PathLike) -> list[dict]:
  """The records of a metrics.jsonl file (or of the workdir holding one).

  A torn last line (a write cut short by a kill or a full disk) is skipped with a warning; any other line
  that is not a JSON record raises ValueError naming the file and the line."""
  path = epath.Path(path)
  if path.is_dir():
    path = path / METRICS_FILE
  lines = path.read_text().splitlines()
  last = max((n for n, line in enumerate(lines) if line.strip()), default=-1)
  records = []
  for n, line in enumerate(lines):
    if not line.strip():
      continue
    try:
      record = json.loads(line)
    except json.JSONDecodeError as e:
      if n == last:
        warnings.warn(
            f'{path}: line {n + 1} (the last) is torn ({e.msg}); skipped it: {line[:80]!r}', UserWarning, stacklevel=2
        )
        continue
      raise ValueError(
          f'{path}: line {n + 1} is not a JSON record ({e.msg}): {line[:80]!r}; repair or ' 'delete that line.'
      ) from None
    if not isinstance(record, dict):
      raise ValueError(f'{path}: line {n + 1} is not a JSON object: {line[:80]!r}; repair or delete that ' 'line.')
    records.append(record)
  return records


class Throughput:
  """Training tokens per second between two `rate()` calls: wall-clock time (call `rate` once the device
  work is done), less the time spent in evaluation and checkpointing (`exclude`). The first interval
  includes the compilations of the train step."""

  def __init__(self):
    self.tokens = 0
    self.start = time.perf_counter()

  def add(self, tokens: int) -> None:
    self.tokens += int(tokens)

  def exclude(self, seconds: float) -> None:
    """Leaves `seconds` (evaluation, checkpointing) out of the current interval."""
    self.start += seconds

  def rate(self) -> float:
    now = time.perf_counter()
    rate = self.tokens / max(now - self.start, 1e-9)
    self.tokens, self.start = 0, now
    return rate


def eval_record(results: dict[int, dict]) -> dict:
  """`{length: {metric: v}}` -> `{'eval/<length>/<metric>': v}`."""
  return {f'eval/{length}/{name}': value for length, metrics in results.items() for name, value in metrics.items()}


def eval_summary(results: dict[int, dict], max_listed: int = 6) -> str:
  """Every metric at each length, or (for many lengths) each metric's mean over them."""
  if len(results) <= max_listed:
    return ', '.join(f'{n}: ' + ' '.join(f'{k} {v:.4f}' for k, v in m.items()) for n, m in results.items())
  names = list(next(iter(results.values())))
  means = {k: float(np.mean([m[k] for m in results.values()])) for k in names}
  return f'mean over {len(results)} lengths ({min(results)}..{max(results)}): ' + ' '.join(
      f'{k} {v:.4f}' for k, v in means.items()
  )


def progress_line(step: int, total: int, record: dict, keys: Iterable[str] = ()) -> str:
  """`step 100/500 | loss 2.3100 | lr 1.00e-03 | 51,234 tok/s | accuracy 0.7500`."""
  parts = [f'step {step}/{total}']
  if 'loss' in record:
    parts.append(f'loss {record["loss"]:.4f}')
  if 'lr' in record:
    parts.append(f'lr {record["lr"]:.2e}')
  if 'tokens_per_sec' in record:
    parts.append(f'{record["tokens_per_sec"]:,.0f} tok/s')
  for key in keys:
    if key in record and isinstance(record[key], (int, float)):
      parts.append(f'{key} {record[key]:.4f}')
  return ' | '.join(parts)


class _BelowWarningFrom(python_logging.Filter):

  def __init__(self, fragment: str):
    super().__init__()
    self.fragment = fragment

  def filter(self, record: python_logging.LogRecord) -> bool:
    if self.fragment not in record.pathname:
      return True
    if record.levelno < python_logging.WARNING:
      return False
    # One line, no traceback: a full disk made orbax log one ENOSPC from four threads, each with its traceback
    # (330 lines around the one CheckpointWriteError line that says what happened and what to do).
    lines = record.getMessage().strip().splitlines() or ['']
    record.msg, record.args = lines[0][:ONE_LINE], ()
    record.exc_info = record.exc_text = record.stack_info = None
    return True


ONE_LINE = 500  # characters of an orbax warning or error kept by `quiet_checkpoint_logs`


def quiet_checkpoint_logs() -> None:
  """Drops orbax's INFO records (about twenty per save) from absl logging; warnings and errors stay, as one
  line each (their first, without the traceback).

  For entry points that log at INFO: the progress line is then not buried. Idempotent.
  """
  logger = python_logging.getLogger('absl')
  if not any(isinstance(f, _BelowWarningFrom) for f in logger.filters):
    logger.addFilter(_BelowWarningFrom(f'{os.sep}orbax{os.sep}'))

"""TensorBoard scalars beside metrics.jsonl: `tensorboard --logdir=<workdir>` (or a study's workdir).

Optional: `pip install 'relpos_jax[tensorboard]'` installs tensorboardX. `config.train.tensorboard`: True
writes (an error at config validation if tensorboardX is missing), False does not, absent or None means "if
tensorboardX is installed", decided where the events are written (`enabled`), so that a config file reads the
same on every machine (the shipped configs set it to None, a bool placeholder the command line can override).

Why tensorboardX: it writes the standard event files TensorBoard reads, in pure Python, with what a JAX
install already has (numpy, protobuf, packaging) — no TensorFlow, which tf.summary and clu's metric writers
would pull in. It is maintained (2.6.x) and small.

What is written (the record keys of metrics.jsonl, as scalars against the step):
  * training records: `train/loss`, `train/lr`, `train/tokens_per_sec`, `train/grad_norm` and the
    objective's metrics (`train/bits_per_char` or `train/accuracy`);
  * evaluation records: `eval/<length>/<metric>` (e.g. `eval/128/bits_per_char`), one chart per length;
  * a study (`write_study`): `length_generalization/<encoder>` with the metric against the evaluation
    *length* on the x axis (TensorBoard calls it "step"), one chart per encoder, in the study's workdir;
    each encoder's own run keeps its training charts in `runs/<label>/`.

A run resumed from the checkpoint of step k opens its writer with `purge_step=k + 1`: TensorBoard hides the
events the interrupted attempt wrote after step k, as metrics.jsonl drops those records.
"""

from __future__ import annotations

import glob
import importlib.util
import math
import numbers
import os
import struct
import time
from typing import Any, Mapping

EVENTS_PATTERN = 'events.out.tfevents.*'
STUDY_TAG = 'length_generalization'
INSTALL_HINT = "pip install 'relpos_jax[tensorboard]' (tensorboardX)"


def available() -> bool:
  """Whether tensorboardX is installed."""
  return importlib.util.find_spec('tensorboardX') is not None


def enabled(train_config) -> bool:
  """`config.train.tensorboard` (the typed `train` section), or (None) whether tensorboardX is installed."""
  value = train_config.tensorboard
  return available() if value is None else bool(value)


def open_writer(logdir: str | os.PathLike, *, purge_step: int | None = None):
  """A tensorboardX SummaryWriter on `logdir` (a local or cloud path); `purge_step`: hide events >= it."""
  if not available():
    raise ImportError(f'TensorBoard event files need tensorboardX: {INSTALL_HINT}.')
  from tensorboardX import SummaryWriter
  # tensorboardX names files by the second and the host; the nanoseconds keep a quick restart's file apart
  # (and after the first, in name order).
  return SummaryWriter(
      logdir=os.fspath(logdir), purge_step=purge_step, flush_secs=30, filename_suffix=f'.{time.time_ns()}'
  )


def _number(value) -> float | None:
  if isinstance(value, bool):
    return None
  if isinstance(value, numbers.Real):
    return float(value)
  if isinstance(value, str) and value.lower() in ('nan', 'inf', '-inf'):  # how metrics.jsonl keeps them
    return float(value)
  return None


def scalars(record: Mapping[str, Any]) -> dict[str, float]:
  """The TensorBoard tags and values of one metrics record (see the module docstring); `step` excluded."""
  out = {}
  for key, value in record.items():
    number = _number(value)
    if key == 'step' or number is None:
      continue
    out[key if key.startswith('eval/') else f'train/{key}'] = number
  return out


def write_record(writer, record: Mapping[str, Any]) -> None:
  """Writes the scalars of one metrics record at its step."""
  step = int(record['step'])
  for tag, value in scalars(record).items():
    writer.add_scalar(tag, value, global_step=step)


def write_study(results: Mapping[str, Any], workdir: str | os.PathLike) -> str:
  """The study's per-length results as one chart per encoder (`length_generalization/<label>`, the metric
  against the evaluation length) in `workdir`, replacing the study's earlier event files; returns the
  workdir. NaN results (a diverged run) are written as NaN."""
  workdir = os.fspath(workdir)
  for old in glob.glob(os.path.join(workdir, EVENTS_PATTERN)):  # the study's own, from the previous call
    os.remove(old)
  writer = open_writer(workdir)
  try:
    for run in results['runs']:
      for length, value in sorted(run['by_length'].items(), key=lambda item: int(item[0])):
        number = _number(value)
        writer.add_scalar(f'{STUDY_TAG}/{run["name"]}', math.nan if number is None else number, global_step=int(length))
  finally:
    writer.close()
  return workdir


def read_scalars(logdir: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
  """`{tag: [(step, value), ...]}` as TensorBoard shows the event files directly in `logdir`: files in
  name (time) order, and a restart's purge marker (a session START at step s) drops the earlier events of
  steps >= s. For tests and notebooks; reads the TFRecord framing itself (tensorboardX has no reader)."""
  from tensorboardX.proto import event_pb2

  out: dict[str, list[tuple[int, float]]] = {}
  for path in sorted(glob.glob(os.path.join(os.fspath(logdir), EVENTS_PATTERN))):
    with open(path, 'rb') as f:
      data = f.read()
    offset = 0
    while offset + 12 <= len(data):  # record: uint64 length, uint32 crc, payload, uint32 crc
      (length,) = struct.unpack('<Q', data[offset : offset + 8])
      event = event_pb2.Event.FromString(data[offset + 12 : offset + 12 + length])
      offset += 12 + length + 4
      if event.HasField('session_log') and event.session_log.status == event_pb2.SessionLog.START:
        out = {tag: [(s, v) for s, v in points if s < event.step] for tag, points in out.items()}
      for value in event.summary.value:
        out.setdefault(value.tag, []).append((int(event.step), float(value.simple_value)))
  return out

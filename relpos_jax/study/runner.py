"""The length-generalization study: train each encoder on the same work, evaluate it at longer lengths.

    results = run_study(config, workdir)        # config: a training config plus a `study` section

For every encoder of `config.study.encoders` the study trains the run that `config` describes with that
encoder (`relpos_jax.train.loop.train`, same data stream, same seed, same steps), evaluates it at every
length of `config.eval.lengths`, and writes, after each encoder:

    <workdir>/results.json      everything, with the config, corpus fingerprint, versions and device
    <workdir>/results.md        encoder x evaluation length table
    <workdir>/results.png       metric against evaluation length
    <workdir>/runs/<label>/     the encoder's own run directory (config.json, metrics.jsonl, checkpoints)

Nothing saved is lost on interruption: a finished encoder's result is kept (`runs/<label>/result.json`) and
skipped on the next call, and an unfinished one resumes from its latest checkpoint. A finished result is
reused only for the same config and the same data (corpus fingerprint, or task): otherwise the study
stops and names the run directory to remove.

An encoder whose training diverges (`relpos_jax.train.loop.DivergedError`: non-finite updates) is recorded
as diverged (`'diverged': {'step': ..., 'message': ...}`, no metric values) and shown so in the table; the
study goes on with the next encoder.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import os
import platform
import re
import time
import warnings
from typing import Callable, Sequence

import jax
import ml_collections
from absl import logging

from relpos_jax.study import report
from relpos_jax.train import config as config_lib
from relpos_jax.train import inputs, loop

RESULT_FILE = 'result.json'
_LABEL = re.compile(r'^[A-Za-z0-9_.+-]+$')


@dataclasses.dataclass(frozen=True)
class Study:
  """The `study` section of a study config (a training config plus this section)."""
  encoders: tuple[str, ...] = config_lib.key()   # 'label: spec' entries, or bare specs (see parse_entries)
  title: str = config_lib.key('Length generalization')
  description: str = config_lib.key('')
  # Another study's workdir: evaluate its trained runs at this config's lengths, no training (`reevaluate`).
  trained_workdir: str = config_lib.key('')


@dataclasses.dataclass(frozen=True)
class Entry:
  """One encoder of the study: a label (a directory name and a legend entry) and its spec string."""
  label: str
  spec: str


def parse_entries(encoders: Sequence[str]) -> list[Entry]:
  """`'label: spec'` or a bare spec whose label is the spec itself (if it is a valid directory name)."""
  if isinstance(encoders, str) or not encoders:
    raise config_lib.ConfigError(
        f'config.study.encoders={encoders!r} is invalid: allowed: a non-empty tuple of encoder specs, each '
        "'label: spec' or a bare spec such as 'alibi'.")
  entries = []
  for item in encoders:
    label, sep, spec = str(item).partition(':')
    label, spec = (label.strip(), spec.strip()) if sep else (item.strip(), item.strip())
    if not _LABEL.match(label) or not label.strip('.'):
      raise config_lib.ConfigError(
          f'config.study.encoders entry {item!r} has label {label!r}; allowed: letters, digits, _ . + - '
          "and not only dots (the label names the run's directory under runs/; write 'label: spec' for "
          'specs with other characters).')
    entries.append(Entry(label, spec))
  labels = [e.label for e in entries]
  duplicated = sorted({x for x in labels if labels.count(x) > 1})
  if duplicated:
    raise config_lib.ConfigError(f'config.study.encoders repeats label(s) {duplicated}; each must be unique.')
  return entries


def split_config(config) -> tuple[ml_collections.ConfigDict, Study]:
  """(the training config shared by every encoder, the `study` section)."""
  if 'study' not in config:
    raise config_lib.ConfigError('missing key config.study: a study config is a training config plus a '
                                 "study section (see the 'study' variant of configs/lm.py).")
  as_dict = config.to_dict()
  study = as_dict.pop('study')
  if isinstance(study, dict) and 'encoders' in study:
    parse_entries(study['encoders'])  # A bare string, no entry, a bad label: the entries' own message.
  return ml_collections.ConfigDict(as_dict), config_lib.parse_section(Study, 'study', study)


def run_config(base: ml_collections.ConfigDict, entry: Entry) -> ml_collections.ConfigDict:
  config = copy.deepcopy(base)
  config.model.encoder = entry.spec
  return config


def validate_study(config) -> tuple[ml_collections.ConfigDict, list[Entry]]:
  """Checks the whole study up front (every encoder's run config), so a bad entry fails in seconds,
  not after an hour of training the entries before it."""
  base, study = split_config(config)
  entries = parse_entries(study.encoders)
  if not base.eval.lengths:
    raise config_lib.ConfigError('config.eval.lengths=() is invalid for a study: allowed: the lengths '
                                 'to evaluate every encoder at, e.g. (64, 128, 256, 512, 1024).')
  for entry in entries:
    try:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # Each run warns again when it starts; here only errors count.
        config_lib.validate(run_config(base, entry))
    except ValueError as e:
      raise config_lib.ConfigError(f'config.study.encoders entry {entry.label!r}: {e}') from None
  return base, entries


def load_config(path, overrides=None) -> ml_collections.ConfigDict:
  """A study config file (`configs/lm.py:study`) with dotted-key overrides, checked as `run_study` checks it."""
  config = config_lib.load_config(path, overrides, validate_config=False)
  validate_study(config)
  return config


def metric_name(base) -> tuple[str, bool]:
  """(metric, lower_is_better) of a run: bits per character for the corpus, accuracy for tasks."""
  if base.data.source == 'corpus':
    return 'bits_per_char', True
  return 'accuracy', False


def train_length(base) -> int:
  """The longest training length (the reference point of every ratio)."""
  return int(base.data.train_length if base.data.source == 'corpus' else base.data.max_length)


def _environment() -> dict:
  device = jax.devices()[0]
  return {'jax_version': jax.__version__, 'device': f'{jax.device_count()} x {device.device_kind}',
          'platform': platform.platform(), 'python': platform.python_version(),
          'date': datetime.date.today().isoformat()}


def _run_entry(base, entry: Entry, workdir: str, train_fn: Callable, metric: str, data) -> dict:
  from relpos_jax.train import loop

  run_dir = os.path.join(workdir, 'runs', entry.label)
  result_path = os.path.join(run_dir, RESULT_FILE)
  config = run_config(base, entry)
  data_id = loop.data_identity(data.describe())
  if os.path.exists(result_path):
    saved = report.load_json(result_path)
    if saved.get('config') != json.loads(config.to_json_best_effort()):
      raise config_lib.ConfigError(
          f'{run_dir} holds a finished run of another config; use a new workdir or remove that directory.')
    if saved.get('data') != data_id:
      raise config_lib.ConfigError(
          f'{run_dir} holds a finished run on other data ({saved.get("data")} there, {data_id} now: the '
          'corpus or the task changed), so its result does not belong in this study. Use a new workdir, or '
          'remove that directory to train it again on this data.')
    logging.info('study: %s already done, reusing %s', entry.label, result_path)
    return saved
  started = time.perf_counter()
  run = {'name': entry.label, 'spec': entry.spec, 'config': json.loads(config.to_json_best_effort()),
         'data': data_id}
  os.makedirs(run_dir, exist_ok=True)
  try:
    result = train_fn(config, run_dir, data=data)
  except loop.DivergedError as e:
    logging.warning('study: %s diverged: %s', entry.label, e)
    run.update({'by_length': {str(n): None for n in base.eval.lengths}, 'train_metric': None,
                'train_loss': None, 'steps': e.step, 'diverged': {'step': e.step, 'message': str(e)},
                'train_seconds': round(time.perf_counter() - started, 1)})
    report.write_json(run, result_path)
    return run
  metrics = result.final_metrics
  by_length = {str(n): metrics.get(f'eval/{n}/{metric}') for n in base.eval.lengths}
  missing = [n for n, v in by_length.items() if v is None]
  if missing:
    raise RuntimeError(f'study: the run of {entry.label} reported no {metric} at lengths {missing}.')
  run.update({'by_length': by_length, 'train_metric': metrics.get(metric), 'train_loss': metrics.get('loss'),
              'steps': result.step, 'train_seconds': round(time.perf_counter() - started, 1),
              'num_params': int(sum(x.size for x in jax.tree.leaves(result.params)))})
  report.write_json(run, result_path)
  return run


def run_study(config, workdir: str | os.PathLike, *, train_fn: Callable | None = None,
              on_result: Callable[[dict], None] | None = None) -> dict:
  """Runs (or resumes) the study of `config` in `workdir`; returns the results dict (see `report`).

  Args:
    config: a training config with a `study` section: `study.encoders` (specs, or 'label: spec'),
      optional `study.title` / `study.description`.
    workdir: where results and the runs go; calling again resumes.
    train_fn: `train_fn(config, workdir, data=...) -> TrainResult` (default `relpos_jax.train.loop.train`).
    on_result: called with the results dict after each encoder (e.g. to re-plot in a notebook).
  """
  base, entries = validate_study(config)
  _, study = split_config(config)
  train_fn = loop.train if train_fn is None else train_fn
  workdir = os.fspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  metric, lower_is_better = metric_name(base)
  data = inputs.build_data(base)  # One corpus load (or task) shared by every encoder's run.
  results = {
      'metric': metric, 'lower_is_better': lower_is_better, 'train_length': train_length(base),
      'eval_lengths': [int(n) for n in base.eval.lengths], 'runs': [],
      'meta': {'title': study.title, 'description': study.description,
               'data': data.describe(), 'corpus_fingerprint': data.describe().get('fingerprint'),
               'config': json.loads(base.to_json_best_effort()), **_environment()},
  }
  started = time.perf_counter()
  for n, entry in enumerate(entries):
    logging.info('study: encoder %d/%d: %s (%s)', n + 1, len(entries), entry.label, entry.spec)
    results['runs'].append(_run_entry(base, entry, workdir, train_fn, metric, data))
    results['meta']['wall_seconds'] = round(time.perf_counter() - started, 1)
    write_outputs(results, workdir)
    if on_result is not None:
      on_result(results)
  return results


def write_outputs(results: dict, workdir: str) -> dict[str, str]:
  """results.json, results.md and results.png in `workdir`; returns their paths."""
  return {'json': report.write_json(results, os.path.join(workdir, 'results.json')),
          'markdown': report.write_markdown(results, os.path.join(workdir, 'results.md')),
          'plot': report.plot(results, os.path.join(workdir, 'results.png'))}

"""The length-generalization study: train each encoder on the same work, evaluate it at longer lengths.

    results = run_study(config, workdir)        # config: a training config plus a `study` section

For every encoder of `config.study.encoders` and every seed of `config.study.seeds` (default: the
config's own `seed`) the study trains the run that `config` describes with that encoder and seed
(`relpos_jax.train.loop.train`: the seed sets the initialisation, the data order and the dropout streams;
every encoder sees the same data stream for one seed), evaluates it at every length of `config.eval.lengths`,
and writes, after each encoder:

    <workdir>/results.json      everything, with the config, corpus fingerprint, versions and device
    <workdir>/results.md        encoder x evaluation length table (mean ± standard deviation over seeds)
    <workdir>/results.png       metric against evaluation length (mean, and a ± std band over seeds)
    <workdir>/runs/<label>/seed<s>/   the run of one encoder and seed (config.json, metrics.jsonl, checkpoints)
    <workdir>/events.out.tfevents.*   with TensorBoard on (config.train.tensorboard): one chart per encoder,
                                the metric against the evaluation length (`tensorboard --logdir=<workdir>`)

Nothing saved is lost on interruption: a finished (encoder, seed) keeps its result
(`runs/<label>/seed<s>/result.json`) and is skipped on the next call, an unfinished one resumes from its
latest checkpoint. Adding seeds to a finished study trains only the new ones. A finished result is reused
only for the same config and the same data (corpus fingerprint, or task): otherwise the study stops and
names the run directory to remove.

A run whose training diverges (`relpos_jax.train.loop.DivergedError`: non-finite updates) is recorded as
diverged (`'diverged': {'step': ..., 'message': ...}`, no metric values) and the study goes on. An encoder
keeps its diverged seeds in `diverged_seeds` ({seed: marker}); its means are over the other seeds, and
when every seed diverged it carries `diverged` itself and the table says so instead of numbers.

Train with X, evaluate with Y: an entry `'label: X -> Y'` evaluates the runs trained with X using encoder Y
(an inference-time scaling or remap of X, with the same parameters: `relpos_jax.train.transfer`). The runs
trained with X are trained once per seed and shared: they are those of the plain entry with spec X if the
study has one, else `runs/<label of the first X -> ... entry>.trained/seed<s>`. Its result reports `spec` Y and
`train_spec` X.
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
from relpos_jax.train import inputs, loop, tensorboard, transfer, workdir_lock

RESULT_FILE = 'result.json'
_LABEL = re.compile(r'^[A-Za-z0-9_.+-]+$')


@dataclasses.dataclass(frozen=True)
class Study:
  """The `study` section of a study config (a training config plus this section)."""

  encoders: tuple[str, ...] = config_lib.key()  # 'label: spec' entries, or bare specs (see parse_entries)
  title: str = config_lib.key('Length generalization')
  description: str = config_lib.key('')
  seeds: tuple[int, ...] | None = config_lib.key(None, ge=0)  # every encoder trained once per seed
  # Another study's workdir: evaluate its trained runs at this config's lengths, no training (`reevaluate`).
  trained_workdir: str = config_lib.key('')


@dataclasses.dataclass(frozen=True)
class Entry:
  """One encoder of the study: a label (a directory name and a legend entry), the spec it trains with and,
  for 'label: X -> Y', the spec it is evaluated with (None: the training one)."""

  label: str
  spec: str
  eval_spec: str | None = None

  @property
  def reported_spec(self) -> str:
    return self.spec if self.eval_spec is None else self.eval_spec


def parse_entries(encoders: Sequence[str]) -> list[Entry]:
  """`'label: spec'` or a bare spec whose label is the spec itself (if it is a valid directory name)."""
  if isinstance(encoders, str) or not encoders:
    raise config_lib.ConfigError(
        f'config.study.encoders={encoders!r} is invalid: allowed: a non-empty tuple of encoder specs, each '
        "'label: spec' or a bare spec such as 'alibi'."
    )
  entries = []
  for item in encoders:
    label, sep, spec = str(item).partition(':')
    label, spec = (label.strip(), spec.strip()) if sep else (item.strip(), item.strip())
    if not _LABEL.match(label) or not label.strip('.'):
      raise config_lib.ConfigError(
          f'config.study.encoders entry {item!r} has label {label!r}; allowed: letters, digits, _ . + - '
          "and not only dots (the label names the run's directory under runs/; write 'label: spec' for "
          'specs with other characters).'
      )
    train_spec, arrow, eval_spec = spec.partition('->')
    if arrow:
      if not train_spec.strip() or not eval_spec.strip() or '->' in eval_spec:
        raise config_lib.ConfigError(
            f"config.study.encoders entry {item!r}: allowed: 'label: train_spec -> eval_spec' with one "
            'arrow and a spec on each side.'
        )
      entries.append(Entry(label, train_spec.strip(), eval_spec.strip()))
      continue
    entries.append(Entry(label, spec))
  labels = [e.label for e in entries]
  duplicated = sorted({x for x in labels if labels.count(x) > 1})
  if duplicated:
    raise config_lib.ConfigError(f'config.study.encoders repeats label(s) {duplicated}; each must be unique.')
  return entries


def split_config(config) -> tuple[ml_collections.ConfigDict, Study]:
  """(the training config shared by every encoder, the `study` section)."""
  if 'study' not in config:
    raise config_lib.ConfigError(
        'missing key config.study: a study config is a training config plus a '
        "study section (see the 'study' variant of configs/lm.py)."
    )
  as_dict = config.to_dict()
  study = as_dict.pop('study')
  if isinstance(study, dict) and 'encoders' in study:
    parse_entries(study['encoders'])  # A bare string, no entry, a bad label: the entries' own message.
  return ml_collections.ConfigDict(as_dict), config_lib.parse_section(Study, 'study', study)


def parse_seeds(study: Study, base) -> tuple[int, ...]:
  """`config.study.seeds`: a non-empty tuple of distinct ints >= 0; None (absent), the config's own `seed`."""
  seeds = study.seeds
  if seeds is None:
    return (int(base.seed),)
  if not seeds or len(set(seeds)) != len(seeds):
    raise config_lib.ConfigError(
        f'config.study.seeds={seeds!r} is invalid: allowed: a non-empty tuple of distinct ints >= 0, '
        "e.g. (0,) or (0, 1, 2) (on the command line: --config.study.seeds='(0,1,2)')."
    )
  return tuple(int(s) for s in seeds)


def run_config(base: ml_collections.ConfigDict, entry: Entry, seed: int | None = None) -> ml_collections.ConfigDict:
  config = copy.deepcopy(base)
  config.model.encoder = entry.spec
  if seed is not None:
    config.seed = int(seed)
  return config


def validate_study(config) -> tuple[ml_collections.ConfigDict, list[Entry]]:
  """Checks the whole study up front (every encoder's run config), so a bad entry fails in seconds,
  not after an hour of training the entries before it."""
  base, study = split_config(config)
  entries = parse_entries(study.encoders)
  parse_seeds(study, base)
  if not base.eval.lengths:
    raise config_lib.ConfigError(
        'config.eval.lengths=() is invalid for a study: allowed: the lengths '
        'to evaluate every encoder at, e.g. (64, 128, 256, 512, 1024).'
    )
  for entry in entries:
    try:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # Each run warns again when it starts; here only errors count.
        config_lib.validate(run_config(base, entry))
        if entry.eval_spec is not None:
          config_lib.validate(transfer.eval_config(run_config(base, entry), entry.eval_spec))
    except ValueError as e:
      raise config_lib.ConfigError(f'config.study.encoders entry {entry.label!r}: {e}') from None
  return base, entries


def check_transfers(base, entries: Sequence[Entry]) -> None:
  """Every 'X -> Y' entry's Y takes X's parameters (checked on freshly built models, before any training)."""
  for entry in entries:
    if entry.eval_spec is None:
      continue
    config = run_config(base, entry)
    try:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        transfer.check_compatible(
            transfer.param_shapes(config),
            transfer.param_shapes(transfer.eval_config(config, entry.eval_spec)),
            train_spec=entry.spec,
            eval_spec=entry.eval_spec,
        )
    except ValueError as e:
      raise config_lib.ConfigError(f'config.study.encoders entry {entry.label!r}: {e}') from None


def training_dirs(workdir: str, entries: Sequence[Entry]) -> dict[str, str]:
  """Training spec -> the run directory that trains it (shared by its 'X -> Y' entries)."""
  dirs = {}
  for entry in entries:
    if entry.eval_spec is None:
      dirs.setdefault(entry.spec, os.path.join(workdir, 'runs', entry.label))
  for entry in entries:
    if entry.eval_spec is not None:
      dirs.setdefault(entry.spec, os.path.join(workdir, 'runs', f'{entry.label}.trained'))
  return dirs


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
  return {
      'jax_version': jax.__version__,
      'device': f'{jax.device_count()} x {device.device_kind}',
      'platform': platform.platform(),
      'python': platform.python_version(),
      'date': datetime.date.today().isoformat(),
  }


def _run_seed(
    base,
    entry: Entry,
    seed: int,
    workdir: str,
    train_fn: Callable | None,
    metric: str,
    data,
    train_dir: str | None = None,
) -> dict | None:
  """One (encoder, seed): trained and evaluated, or read back from its result.json (train_fn None: only
  read back; None if it has not finished). An 'X -> Y' entry trains X in `train_dir` (or finds it trained
  there) and evaluates its parameters with encoder Y."""
  run_dir = os.path.join(workdir, 'runs', entry.label, f'seed{seed}')
  result_path = os.path.join(run_dir, RESULT_FILE)
  config = run_config(base, entry, seed)
  transferred = entry.eval_spec is not None
  # What the result records (and is checked against on reuse): the config it was evaluated with.
  recorded = transfer.eval_config(config, entry.eval_spec) if transferred else config
  config_json = json.loads(recorded.to_json_best_effort())
  data_id = loop.data_identity(data.describe())
  if os.path.exists(result_path):
    saved = report.load_json(result_path)
    _check_saved(saved, run_dir, config_json, data_id, entry.spec if transferred else None)
    logging.info('study: %s seed %d already done, reusing %s', entry.label, seed, result_path)
    return saved
  if train_fn is None:
    return None
  started = time.perf_counter()
  run = {'name': entry.label, 'spec': entry.reported_spec, 'seed': seed, 'config': config_json, 'data': data_id}
  if transferred:
    run.update({'train_spec': entry.spec, 'trained_in': os.path.relpath(train_dir, workdir)})
  os.makedirs(run_dir, exist_ok=True)
  try:
    # A transferred entry's training resumes, or returns at once when the shared run is already trained.
    result = train_fn(config, train_dir if transferred else run_dir, data=data)
  except loop.DivergedError as e:
    logging.warning('study: %s (trained with %s) seed %d diverged: %s', entry.label, entry.spec, seed, e)
    run.update(
        {
            'by_length': {str(n): None for n in base.eval.lengths},
            'train_metric': None,
            'train_loss': None,
            'steps': e.step,
            'diverged': {'step': e.step, 'message': str(e)},
            'train_seconds': round(time.perf_counter() - started, 1),
        }
    )
    report.write_json(run, result_path)
    return run
  metrics = result.final_metrics
  if transferred:
    model = transfer.with_encoder(result.model, config, entry.eval_spec)
    evaluation = loop.evaluate_lengths(model, data, [int(n) for n in base.eval.lengths])
    by_length = {str(n): evaluation[int(n)].get(metric) for n in base.eval.lengths}
  else:
    by_length = {str(n): metrics.get(f'eval/{n}/{metric}') for n in base.eval.lengths}
  missing = [n for n, v in by_length.items() if v is None]
  if missing:
    raise RuntimeError(f'study: the run of {entry.label} (seed {seed}) reported no {metric} at lengths ' f'{missing}.')
  # train_seconds: this run's own time (for 'X -> Y', its evaluation, plus X's training if it was not
  # trained before).
  run.update(
      {
          'by_length': by_length,
          'train_metric': metrics.get(metric),
          'train_loss': metrics.get('loss'),
          'steps': result.step,
          'train_seconds': round(time.perf_counter() - started, 1),
          'num_params': int(sum(x.size for x in jax.tree.leaves(result.params))),
      }
  )
  report.write_json(run, result_path)
  return run


def _check_saved(saved: dict, run_dir: str, config_json, data_id: dict, train_spec: str | None) -> None:
  """A finished result is reused only for the same config (and, for 'X -> Y', the same X) and data."""
  if saved.get('config') != config_json or saved.get('train_spec') != train_spec:
    raise config_lib.ConfigError(
        f'{run_dir} holds a finished run of another config; use a new workdir or remove that directory.'
    )
  if saved.get('data') != data_id:
    raise config_lib.ConfigError(
        f'{run_dir} holds a finished run on other data ({saved.get("data")} there, {data_id} now: the '
        'corpus or the task changed), so its result does not belong in this study. Use a new workdir, or '
        'remove that directory to train it again on this data.'
    )


def _mean(values):
  return None if not values or any(v is None for v in values) else sum(values) / len(values)


def merge_seeds(entry: Entry, per_seed: Sequence[dict]) -> dict:
  """One encoder's study entry from its per-seed results: `by_length` is the mean over the seeds that did
  not diverge, `by_length_per_seed` keeps every value ({length: [one per seed]}, in the order of `seeds`;
  None for a diverged seed). Diverged seeds are listed in `diverged_seeds` ({seed: marker}); when every
  seed diverged the entry carries `diverged` (the first seed's marker) and no values."""
  lengths = list(per_seed[0]['by_length'])
  finite = [r for r in per_seed if not r.get('diverged')]
  first = finite[0] if finite else per_seed[0]
  config = dict(first['config'])
  config.pop('seed', None)  # The seed is per run: `seeds` lists them.
  merged = {
      'name': entry.label,
      'spec': entry.reported_spec,
      'seeds': [r['seed'] for r in per_seed],
      'by_length': {n: _mean([r['by_length'][n] for r in finite]) for n in lengths},
      'by_length_per_seed': {n: [r['by_length'][n] for r in per_seed] for n in lengths},
      'train_metric': _mean([r['train_metric'] for r in finite]),
      'train_loss': _mean([r['train_loss'] for r in finite]),
      'steps': first['steps'],
      'train_seconds': round(sum(r['train_seconds'] for r in per_seed), 1),
      'num_params': first.get('num_params'),
      'config': config,
      'data': first.get('data'),
  }
  if entry.eval_spec is not None:
    merged['train_spec'] = entry.spec
    merged['trained_in'] = [r.get('trained_in') for r in per_seed]
  diverged = {str(r['seed']): r['diverged'] for r in per_seed if r.get('diverged')}
  if diverged:
    merged['diverged_seeds'] = diverged
  if not finite:
    merged['diverged'] = per_seed[0]['diverged']
  return merged


def _run_entry(
    base,
    entry: Entry,
    seeds: Sequence[int],
    workdir: str,
    train_fn: Callable | None,
    metric: str,
    data,
    train_dir: str | None = None,
) -> dict | None:
  per_seed = [
      _run_seed(
          base,
          entry,
          seed,
          workdir,
          train_fn,
          metric,
          data,
          None if train_dir is None else os.path.join(train_dir, f'seed{seed}'),
      )
      for seed in seeds
  ]
  per_seed = [r for r in per_seed if r is not None]
  return merge_seeds(entry, per_seed) if per_seed else None


@workdir_lock.one_writer(unless='finished_only')  # One writer per study directory; a report only reads.
def run_study(
    config,
    workdir: str | os.PathLike,
    *,
    train_fn: Callable | None = None,
    on_result: Callable[[dict], None] | None = None,
    finished_only: bool = False,
) -> dict:
  """Runs (or resumes) the study of `config` in `workdir`; returns the results dict (see `report`).

  Args:
    config: a training config with a `study` section: `study.encoders` (specs, or 'label: spec'),
      optional `study.seeds` (every encoder is trained once per seed; default: `config.seed`),
      `study.title` / `study.description`.
    workdir: where results and the runs go; calling again resumes.
    train_fn: `train_fn(config, workdir, data=...) -> TrainResult` (default `relpos_jax.train.loop.train`).
    on_result: called with the results dict after each encoder (e.g. to re-plot in a notebook).
    finished_only: train nothing; report the (encoder, seed) runs that have finished so far (each run
      lists its own `seeds`; encoders with none are left out), e.g. while a long study is under way.
  """
  base, entries = validate_study(config)
  _, study = split_config(config)
  seeds = parse_seeds(study, base)
  train_fn = None if finished_only else (loop.train if train_fn is None else train_fn)
  workdir = os.fspath(workdir)
  os.makedirs(workdir, exist_ok=True)
  metric, lower_is_better = metric_name(base)
  data = inputs.build_data(base)  # One corpus load (or task) shared by every encoder's run.
  check_transfers(base, entries)
  train_dirs = training_dirs(workdir, entries)
  results = {
      'metric': metric,
      'lower_is_better': lower_is_better,
      'train_length': train_length(base),
      'eval_lengths': [int(n) for n in base.eval.lengths],
      'seeds': list(seeds),
      'runs': [],
      'meta': {
          'title': study.title,
          'description': study.description,
          'data': data.describe(),
          'corpus_fingerprint': data.describe().get('fingerprint'),
          'config': json.loads(base.to_json_best_effort()),
          **_environment(),
      },
  }
  if finished_only:
    results['meta']['finished_only'] = True
  started = time.perf_counter()
  for n, entry in enumerate(entries):
    logging.info('study: encoder %d/%d: %s (%s)', n + 1, len(entries), entry.label, entry.reported_spec)
    run = _run_entry(base, entry, seeds, workdir, train_fn, metric, data, train_dirs[entry.spec])
    if run is None:
      continue
    results['runs'].append(run)
    if not finished_only:  # Reporting finished runs takes seconds: their train_seconds say what they took.
      results['meta']['wall_seconds'] = round(time.perf_counter() - started, 1)
    write_outputs(results, workdir)
    # One chart per encoder, the metric against the evaluation length; by one process of a multi-process run.
    if tensorboard.enabled(base.train) and jax.process_index() == 0:
      tensorboard.write_study(results, workdir)
    if on_result is not None:
      on_result(results)
  return results


def write_outputs(results: dict, workdir: str) -> dict[str, str]:
  """results.json, results.md and results.png in `workdir`; returns their paths."""
  return {
      'json': report.write_json(results, os.path.join(workdir, 'results.json')),
      'markdown': report.write_markdown(results, os.path.join(workdir, 'results.md')),
      'plot': report.plot(results, os.path.join(workdir, 'results.png')),
  }

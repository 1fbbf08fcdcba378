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

Protocol (`relpos_jax.study.protocol`): every length scores the same target bytes (windows ending at common
anchors, scored tail `config.eval.scored_tail`; each length's scored set fingerprinted in results.json), the
table reports `config.study.split` ('test' by default) while every choice is made on 'validation' at the
training length, randomized encoders are evaluated at random positions as published (`config.eval.
position_draws` draws; with `config.study.sequential_positions` also at 0..L-1, a second row named
'<label>@0..L-1'), and each run records its loss against position at the longest length.

Learning rates (per encoder, at equal budget): `config.study.learning_rates=('label: lr', ...)` commits an
encoder's rate (recorded 'committed'; a config file's own commitments are `config.study.default_learning_rates`,
applied to the labels the study has); else with `config.study.lr_grid=(1e-3, 3e-3, 1e-2)` the encoder is
trained at every rate of the grid at the first seed, the rate with the lowest validation loss at the training
length is chosen ('grid'; that run is the first seed's run) and the other seeds train with it; with
`config.study.selection_seed` the grid trains at that seed instead, outside the reported seeds, and its runs
are scored on validation at the training length only, so the choice does not bias the reported mean; else
`config.optim.learning_rate` ('fixed'). A chosen rate's runs live in `runs/<label>/lr<rate>/seed<s>/`, a
fixed one's in `runs/<label>/seed<s>/`. `config.study.comparisons=('A vs B', 'A vs B at 1024', ...)`: paired
differences over seeds with 95% t intervals in results.md / results.json (`relpos_jax.study.stats`), the paired
t test's p-values Holm-adjusted over the study's comparisons, and, where both sides stored per-document totals, a
document-bootstrap interval of the difference (`report.comparisons`). A corpus study's run evaluated at
positions 0..L-1 stores its per-document bits and characters on the reported split at the training and the
longest length in its result.json ('document_totals', `document_totals_record`); a task study, an encoder
evaluated at random positions and a run finished before this was recorded store none, and stay valid.

Nothing saved is lost on interruption: a finished (encoder, seed) keeps its result
(`runs/<label>/seed<s>/result.json`) and is skipped on the next call, an unfinished one resumes from its
latest checkpoint. Adding seeds to a finished study trains only the new ones. A finished result is reused
only for the same config and the same data (corpus fingerprint, or task): otherwise the study stops and
names the run directory to remove; and only for the split it was evaluated on (`config.study.split`): a
workdir holding results of another split is refused before anything is written. `finished_only` reads and
writes nothing.

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

import dataclasses
import json
import math
import os
import time
import warnings
from typing import Callable, Sequence

import jax
from absl import logging

from relpos_jax.study import documents, engine, plan, protocol, reevaluate, report, stats

# The plan and the record are shared with `reevaluate` (which this module calls), so they live in rooms below
# both; their names stay importable from here.
from relpos_jax.study.plan import (
    Entry,
    Study,
    StudyConfig,
    check_protocol,
    check_selection_seed,
    committed_learning_rates,
    metric_name,
    parse_comparisons,
    parse_entries,
    parse_seeds,
    split_study_config,
    train_length,
)
from relpos_jax.study.record import LM_LAYOUT, RESULT_FILE, RunRecord, merge_seeds, new_results, write_outputs
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files
from relpos_jax.train import data_sources, loop, tensorboard, transfer, workdir_lock

SEQUENTIAL_SUFFIX = plan.SEQUENTIAL_SUFFIX  # The name of a randomized entry's 0..L-1 row (read from here).


@dataclasses.dataclass(frozen=True)
class LearningRate:
  """The peak learning rate of an encoder's runs and how it was chosen: 'fixed' (config.optim.learning_rate),
  'committed' (config.study.learning_rates) or 'grid' (lowest validation loss at the training length)."""

  value: float
  how: str

  @property
  def directory(self) -> str:
    """The runs' directory part under runs/<label>/ ('' for the fixed rate: the layout of older studies)."""
    return '' if self.how == 'fixed' else f'lr{plan.rate_name(self.value)}'  # exact: rates never share one


def run_config(
    base: config_lib.Config, entry: Entry, seed: int | None = None, learning_rate: float | None = None
) -> config_lib.Config:
  """The run of `entry` (its training encoder) at `seed` and `learning_rate` (None: the base's), derived from
  the study's base and checked."""
  return base.derive(
      encoder=entry.spec,
      seed=None if seed is None else int(seed),
      learning_rate=None if learning_rate is None else float(learning_rate),
  )


def validate_study(config) -> tuple[config_lib.Config, list[Entry]]:
  """Parses a study config (a ConfigDict, the entry point's) and checks the whole study up front (`check_study`);
  returns (the parsed base, the entries)."""
  base, study = split_study_config(config)
  return base, check_study(base, study)


def check_study(base: config_lib.Config, study: Study) -> list[Entry]:
  """Checks the whole study up front (every encoder's run config), so a bad entry fails in seconds,
  not after an hour of training the entries before it."""
  entries = parse_entries(study.encoders)
  check_selection_seed(study, parse_seeds(study, base))
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
          config_lib.validate(transfer.with_eval_encoder(run_config(base, entry), entry.eval_spec))
    except ValueError as e:
      if 'config.model' not in str(e):  # A key every run shares (config.eval...): named as it is.
        raise config_lib.ConfigError(str(e)) from None
      raise config_lib.ConfigError(f'config.study.encoders entry {entry.label!r}: {e}') from None
  check_protocol(study, entries, [int(n) for n in base.eval.lengths])
  plan.check_random_positions(base, entries)
  rates = [*committed_learning_rates(study, entries).values(), *(study.lr_grid or ())]
  for rate in dict.fromkeys(rates):  # Every rate a run will use passes the optimizer's own checks.
    try:
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        config_lib.validate(run_config(base, entries[0], learning_rate=rate))
    except ValueError as e:
      raise config_lib.ConfigError(f'config.study learning rate {rate!r}: {e}') from None
  return entries


def check_transfers(base: config_lib.Config, entries: Sequence[Entry]) -> None:
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
            transfer.param_shapes(transfer.with_eval_encoder(config, entry.eval_spec)),
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


def load_study_config(path, overrides=None):
  """A study config file (`configs/studies/study.py`) with dotted-key overrides, checked as `run_study` checks it."""
  config = config_files.load_config(path, overrides, validate_config=False)  # the user's file: a ConfigDict
  validate_study(config)
  return config


@dataclasses.dataclass(frozen=True)
class _StudyContext:
  """What every run of one study shares."""

  base: config_lib.Config
  study: Study
  workdir: str
  train_fn: Callable | None
  metric: str
  data: object

  @property
  def lengths(self) -> list[int]:
    return [int(n) for n in self.base.eval.lengths]


def run_dir(workdir: str, label: str, seed: int, learning_rate: LearningRate) -> str:
  return os.path.join(workdir, 'runs', label, learning_rate.directory, f'seed{seed}')


def _training_config(config: config_lib.Config) -> config_lib.Config:
  """The run's config as training gets it: no evaluation of its own (the study evaluates, by its protocol)."""
  return config.derive(eval={'every': 0, 'lengths': ()})


def _run_seed(
    ctx: _StudyContext,
    entry: Entry,
    seed: int,
    learning_rate: LearningRate,
    train_dir: str | None = None,
    *,
    selection_only: bool = False,
) -> dict | None:
  """One (encoder, seed): trained and evaluated, or read back from its result.json (train_fn None: only
  read back; None if it has not finished). An 'X -> Y' entry trains X in `train_dir` (or finds it trained
  there) and evaluates its parameters with encoder Y. `selection_only`: a run of the selection seed, scored on
  validation at the training length and nowhere else (nothing it records is reported)."""
  base, data = ctx.base, ctx.data
  directory = run_dir(ctx.workdir, entry.label, seed, learning_rate)
  result_path = os.path.join(directory, RESULT_FILE)
  config = run_config(base, entry, seed, learning_rate.value)
  transferred = entry.eval_spec is not None
  # What the result records (and is checked against on reuse): the config it was evaluated with.
  recorded = transfer.with_eval_encoder(config, entry.eval_spec) if transferred else config
  config_json = json.loads(json.dumps(recorded.to_dict()))
  data_id = loop.data_identity(data.describe())

  def reuse(saved: RunRecord) -> dict:
    saved = saved.to_json()
    _check_saved(saved, directory, config_json, data_id, entry.spec if transferred else None)
    logging.info('study: %s seed %d already done, reusing %s', entry.label, seed, result_path)
    return saved

  def train() -> RunRecord:
    started = time.perf_counter()
    run = {  # the study's own keys of the record (RunRecord's values)
        'name': entry.label,
        'spec': entry.reported_spec,
        'data': data_id,
        'learning_rate': learning_rate.value,
        'split': ctx.study.split,
        'run_dir': os.path.relpath(directory, ctx.workdir),
    }
    if transferred:
      run.update({'train_spec': entry.spec, 'trained_in': os.path.relpath(train_dir, ctx.workdir)})
    os.makedirs(directory, exist_ok=True)
    try:
      # A transferred entry's training resumes, or returns at once when the shared run is already trained.
      result = ctx.train_fn(_training_config(config), train_dir if transferred else directory, data=data)
    except loop.DivergedError as e:
      logging.warning('study: %s (trained with %s) seed %d diverged: %s', entry.label, entry.spec, seed, e)
      run.update(
          {
              'by_length': {str(n): None for n in ctx.lengths},
              'train_metric': None,
              'train_loss': None,
              'steps': e.step,
              'finished': True,
          }
      )
      return _lm_record(seed, config_json, started, run, diverged={'step': e.step, 'message': str(e)})
    model = transfer.with_encoder(result.model, config, entry.eval_spec) if transferred else result.model
    evaluation_started = time.perf_counter()
    if selection_only:
      run['selection_only'] = True
      run.update(
          protocol.evaluate_selection(
              model,
              data,
              train_length=train_length(base),
              metric=ctx.metric,
              seed=seed,
              draws=data.eval_section.position_draws,
          )
      )
    else:
      token_nll = {}  # the reported pass's per-target losses at the lengths the document totals need
      run.update(
          protocol.evaluate_run(
              model,
              data,
              lengths=ctx.lengths,
              split=ctx.study.split,
              train_length=train_length(base),
              metric=ctx.metric,
              seed=seed,
              draws=data.eval_section.position_draws,
              sequential_row=ctx.study.sequential_positions,
              keep_token_losses=document_totals_lengths(ctx.base) if ctx.data.has_documents else (),
              token_losses_out=token_nll,
          )
      )
      totals = document_totals_record(ctx, model, token_nll)
      if totals is not None:
        run['document_totals'] = totals
    metrics = result.final_metrics
    # train_seconds: this run's own time (for 'X -> Y', its evaluation, plus X's training if it was not
    # trained before), evaluation included.
    run.update(
        {
            'train_metric': metrics.get(ctx.metric),
            'train_loss': metrics.get('loss'),
            'steps': result.step,
            'finished': True,
        }
    )
    marker = protocol.diverged_marker(
        run,
        num_classes=data.num_classes,
        every_length=data.diverged_at_every_length,
        train_length=train_length(base),
        step=result.step,
    )
    if marker:
      logging.warning('study: %s seed %d: %s', entry.label, seed, marker['message'])
    return _lm_record(
        seed,
        config_json,
        started,
        run,
        num_params=int(sum(x.size for x in jax.tree.leaves(result.params))),
        eval_seconds=round(time.perf_counter() - evaluation_started, 1),
        diverged=marker,
    )

  return engine.obtain_run(result_path, LM_LAYOUT, reuse, None if ctx.train_fn is None else train)


def _lm_record(seed: int, config_json, started: float, run: dict, **extra) -> RunRecord:
  """An LM run's record, its training time counted from `started` (time.perf_counter)."""
  return RunRecord(
      LM_LAYOUT, seed, config_json, train_seconds=round(time.perf_counter() - started, 1), values=run, **extra
  )


def document_totals_lengths(base: config_lib.Config) -> list[int]:
  """The lengths a run's per-document totals are stored at: the longest evaluation length and, when it is
  evaluated, the training length (the ones the comparisons 'longest' and 'train' read; 'train' over a study that
  does not evaluate its training length is the in-distribution mean, several lengths, with no bootstrap)."""
  lengths = [int(n) for n in base.eval.lengths]
  return sorted({max(lengths), *([train_length(base)] if train_length(base) in lengths else [])})


def document_totals_record(ctx: _StudyContext, model, token_nll: dict | None = None) -> dict | None:
  """{str(length): `documents.sparse_totals`} of a trained model on the reported split, the input of the report's
  document bootstrap; None (nothing stored) for a task study (no documents) and for an encoder evaluated at
  random positions (`documents.document_totals` scores 0..L-1 only; the report says so). Computed from the
  study's own data object: a data object rebuilt from the run's config.json would lack the study's evaluation
  lengths. `token_nll` ({length: per-batch losses} of the reported evaluation, `protocol.evaluate_run`'s
  token_losses_out): the totals sum those; a length it lacks costs one more evaluation pass."""
  if not ctx.data.has_documents or not documents.sequential_positions(model):
    return None
  token_nll = token_nll or {}
  return {
      str(n): documents.sparse_totals(
          documents.document_totals(model, ctx.data, n, ctx.study.split, nats_by_batch=token_nll.get(n))
      )
      for n in document_totals_lengths(ctx.base)
  }


# What a finished result.json records of the study's protocol that changes its numbers and is not in its run
# config (which `_check_saved` compares): the split its values were read on.
PROTOCOL_KEYS = ('split',)


def check_finished_protocol(workdir: str, study: Study) -> None:
  """Every finished result in `workdir` was evaluated by this study's protocol (`PROTOCOL_KEYS`), else
  ConfigError naming the key, both values and what is allowed, before anything is written: a study run on
  'validation' and resumed on 'test' would otherwise report validation numbers labelled test."""
  runs = os.path.join(workdir, 'runs')
  for root, dirs, names in os.walk(runs):
    dirs[:] = sorted(d for d in dirs if d not in ('checkpoints', 'broken_checkpoints'))
    if RESULT_FILE not in names:
      continue
    path = os.path.join(root, RESULT_FILE)
    saved = report.load_json(path)
    for key in PROTOCOL_KEYS:
      recorded, wanted = saved.get(key), getattr(study, key)
      if recorded is not None and recorded != wanted:
        raise config_lib.ConfigError(
            f'config.study.{key}={wanted!r} is invalid for this workdir: {path} was evaluated with '
            f'{key}={recorded!r}, and a finished result is reused only with the protocol its numbers were read '
            f'by; allowed: config.study.{key}={recorded!r} here, or another --workdir for {key}={wanted!r} '
            f'(config.study.trained_workdir={workdir!r} evaluates these trained runs there).'
        )


def _computed(config_json):
  """A run's config less `train.tensorboard`: where its events go is not what it computes (and results written
  before the shipped configs left that key None hold the machine's True or False). Its optional keys at their
  defaults (`config.with_defaults`): a result written from a ConfigDict that left them out is the same run."""
  if not isinstance(config_json, dict):
    return config_json
  config_json = config_lib.with_defaults(config_json)
  return {**config_json, 'train': {k: v for k, v in (config_json.get('train') or {}).items() if k != 'tensorboard'}}


def _check_saved(saved: dict, run_dir: str, config_json, data_id: dict, train_spec: str | None) -> None:
  """A finished result is reused only for the same config (and, for 'X -> Y', the same X) and data."""
  if _computed(saved.get('config')) != _computed(config_json) or saved.get('train_spec') != train_spec:
    raise config_lib.ConfigError(
        f'{run_dir} holds a finished run of another config; use a new workdir or remove that directory.'
    )
  if saved.get('data') != data_id:
    raise config_lib.ConfigError(
        f'{run_dir} holds a finished run on other data ({saved.get("data")} there, {data_id} now: the '
        'corpus or the task changed), so its result does not belong in this study. Use a new workdir, or '
        'remove that directory to train it again on this data.'
    )


def _selection_loss(run: dict | None) -> float:
  if run is None or run.get('diverged') or 'selection' not in run:
    return math.inf
  return float(run['selection']['loss'])


class _LearningRates:
  """Each entry's learning rate: committed, chosen on a grid (training the grid's runs), or fixed."""

  def __init__(self, ctx: _StudyContext, entries: Sequence[Entry], seeds: Sequence[int], train_dirs: dict[str, str]):
    self.ctx, self.entries, self.seeds, self.train_dirs = ctx, list(entries), list(seeds), train_dirs
    self.committed = committed_learning_rates(ctx.study, entries)
    self.chosen: dict[str, engine.RateChoice | None] = {}

  def of(self, entry: Entry) -> engine.RateChoice | None:
    """The learning rate of `entry`, with its grid's runs (None: its grid has not finished, finished_only)."""
    if entry.label not in self.chosen:
      self.chosen[entry.label] = self._choose(entry)
    return self.chosen[entry.label]

  def _choose(self, entry: Entry):
    if entry.label in self.committed:
      return engine.RateChoice(self.committed[entry.label], 'committed')
    if entry.eval_spec is not None:  # 'X -> Y': the rate X's own entry trains with, if the study has one
      owner = next((e for e in self.entries if e.eval_spec is None and e.spec == entry.spec), None)
      if owner is not None:
        return self.of(owner)
      return engine.RateChoice(float(self.ctx.base.optim.learning_rate), 'fixed')
    if self.ctx.study.lr_grid is None:
      return engine.RateChoice(float(self.ctx.base.optim.learning_rate), 'fixed')
    selection_seed = self.ctx.study.selection_seed
    seed = self.seeds[0] if selection_seed is None else int(selection_seed)

    def trial(value: float) -> dict | None:
      logging.info('study: %s learning-rate grid: %g at seed %d', entry.label, value, seed)
      return _run_seed(
          self.ctx, entry, seed, LearningRate(float(value), 'grid'), selection_only=selection_seed is not None
      )

    choice = engine.choose_rate(self.ctx.study.lr_grid, trial, _selection_loss)
    return None if choice is None else dataclasses.replace(choice, value=float(choice.value))

  def train_dir(self, entry: Entry, seed: int, learning_rate: LearningRate) -> str:
    return os.path.join(self.train_dirs[entry.spec], learning_rate.directory, f'seed{seed}')


def _run_entry(ctx: _StudyContext, entry: Entry, seeds: Sequence[int], rates: _LearningRates) -> list[dict] | None:
  """The study rows of one entry (its own, and its 0..L-1 row when it is evaluated at random positions)."""
  choice = rates.of(entry)
  if choice is None:
    return None
  if entry.eval_spec is not None:
    choice = dataclasses.replace(choice, trials={})  # 'X -> Y' takes X's rate; X's own entry reports X's grid.
  learning_rate, grid = LearningRate(choice.value, choice.how), choice.trials
  grid_seed = seeds[0] if ctx.study.selection_seed is None else None  # The first seed selected: reported too.
  per_seed = engine.seed_runs(
      seeds,
      lambda seed: _run_seed(ctx, entry, seed, learning_rate, rates.train_dir(entry, seed, learning_rate)),
      choice,
      grid_seed,
  )
  per_seed = [r for r in per_seed if r is not None]
  if not per_seed:
    return None
  merged = merge_seeds(entry, per_seed)
  merged['learning_rate'] = learning_rate.value
  merged['lr_choice'] = learning_rate.how
  if grid:
    merged['lr_grid'] = engine.grid_losses(grid, _selection_loss)
  rows = [merged]
  if ctx.study.sequential_positions and any(r.get('sequential') for r in per_seed):
    rows.append({**merge_seeds(entry, per_seed, sequential=True), 'learning_rate': learning_rate.value})
    rows[-1]['lr_choice'] = learning_rate.how
  return rows


def protocol_record(base: config_lib.Config, study: Study, data) -> dict:
  """How the study evaluates, for results.json and the report."""
  lengths = [int(n) for n in base.eval.lengths]
  record = {
      'split': study.split,
      'selection': f'{protocol.SELECTION_SPLIT} loss at the training length {train_length(base)}',
      'position_draws': base.eval.position_draws,
      'sequential_positions_row': study.sequential_positions,
      'plus_minus': stats.PLUS_MINUS,
      'lr_grid': list(study.lr_grid) if study.lr_grid is not None else None,
      'selection_seed': study.selection_seed,
  }
  record.update(data.protocol_record(lengths, study.split))  # the source's own part (a corpus: its windows)
  return record


def run_study(config, workdir: str | os.PathLike, **options) -> dict:
  """Runs (or resumes) the study of `config` in `workdir`; returns the results dict (see `report`).

  Args:
    config: a training config with a `study` section: `study.encoders` (specs, or 'label: spec'),
      optional `study.seeds` (every encoder is trained once per seed; default: `config.seed`),
      `study.title` / `study.description`, and the protocol keys (module docstring).
    workdir: where results and the runs go; calling again resumes.
    **options: keyword-only, those of `run_study_config`:
    train_fn: `train_fn(config, workdir, data=...) -> TrainResult`, config a typed Config (default
      `relpos_jax.train.loop.train`).
    on_result: called with the results dict after each encoder (e.g. to re-plot in a notebook).
    on_finished: called with the results once every encoder is done, while the workdir's lock is still held
      (the suite evaluates its held-out sets there: what it writes in the workdir, it writes as its writer).
    finished_only: train nothing and write nothing; return the (encoder, seed) runs that have finished so far
      (each run lists its own `seeds`; encoders with none are left out), e.g. while a long study is under way.
      It takes no lock, so it must not write: the study's own process may be writing the same files.

  With `study.trained_workdir` set, nothing is trained: the runs of that study are evaluated anew
  (`relpos_jax.study.reevaluate.reevaluate_study`; train_fn, on_result and finished_only do not apply).
  """
  base, study = split_study_config(config)  # The one parse of the user's config.
  return run_study_config(StudyConfig(base, study), workdir, **options)


def run_study_config(
    parsed: StudyConfig,
    workdir: str | os.PathLike,
    *,
    train_fn: Callable | None = None,
    on_result: Callable[[dict], None] | None = None,
    finished_only: bool = False,
    on_finished: Callable[[dict], None] | None = None,
) -> dict:
  """`run_study` of a study already parsed (the suite's tasks): every run is derived from `parsed.base`."""
  base, study = parsed.base, parsed.study
  if study.trained_workdir:
    return reevaluate.reevaluate_study_config(parsed, workdir, finished_only=finished_only)
  entries = check_study(base, study)
  seeds = parse_seeds(study, base)
  train_fn = None if finished_only else (loop.train if train_fn is None else train_fn)
  workdir = os.fspath(workdir)
  data = data_sources.build_data(base)  # One corpus load (or task) shared by every encoder's run.
  try:
    data.require_split(study.split, base.eval.lengths)
  except config_lib.ConfigError as e:
    raise config_lib.ConfigError(f'config.study.split={study.split!r}: {e}') from None
  check_transfers(base, entries)
  comparison_requests = parse_comparisons(study, entries, [int(n) for n in base.eval.lengths])
  check_finished_protocol(workdir, study)
  # Every check above runs before the lock: a refused config leaves no trace (not even the workdir).
  # One writer per study directory; a report only reads.
  with workdir_lock.held(workdir, enabled=not finished_only and jax.process_index() == 0):
    results = _run_study(
        base, study, entries, seeds, data, workdir, train_fn, on_result, finished_only, comparison_requests
    )
    if on_finished is not None:
      on_finished(results)
    return results


def _run_study(base, study, entries, seeds, data, workdir, train_fn, on_result, finished_only, comparison_requests):
  metric, _ = metric_name(base)
  if not finished_only:
    os.makedirs(workdir, exist_ok=True)
  train_dirs = training_dirs(workdir, entries)
  ctx = _StudyContext(base=base, study=study, workdir=workdir, train_fn=train_fn, metric=metric, data=data)
  rates = _LearningRates(ctx, entries, seeds, train_dirs)
  results = new_results(
      base,
      study,
      seeds,
      comparison_requests,
      protocol=protocol_record(base, study, data),
      meta={'data': data.describe(), 'corpus_fingerprint': data.describe().get('fingerprint')},
  )
  if finished_only:
    results['meta']['finished_only'] = True
  started = time.perf_counter()
  for n, entry in enumerate(entries):
    logging.info('study: encoder %d/%d: %s (%s)', n + 1, len(entries), entry.label, entry.reported_spec)
    rows = _run_entry(ctx, entry, seeds, rates)
    if rows is None:
      continue
    results['runs'].extend(rows)
    if finished_only:  # Read-only: the table is the caller's to print, nothing is written.
      if results.get('comparison_requests'):
        results['comparisons'] = report.comparisons(results)
      if on_result is not None:
        on_result(results)
      continue
    # Reporting finished runs takes seconds: their train_seconds say what they took.
    results['meta']['wall_seconds'] = round(time.perf_counter() - started, 1)
    write_outputs(results, workdir)
    # One chart per encoder, the metric against the evaluation length; by one process of a multi-process run.
    if tensorboard.enabled(base.train) and jax.process_index() == 0:
      tensorboard.write_study(results, workdir)
    if on_result is not None:
      on_result(results)
  return results


def edge_check(
    config,
    workdir: str | os.PathLike,
    rates: Sequence[float],
    *,
    encoders: Sequence[str] | None = None,
    train_fn: Callable | None = None,
) -> dict[str, dict[str, float]]:
  """Whether a rate past the grid's edge would have been chosen: the study's selection runs (its selection seed,
  scored on validation at the training length and nowhere else) at each of `rates`, for the study's encoders (or
  those labelled in `encoders`), trained in `workdir` (resumable; nothing reported). Returns {label:
  {plan.rate_name(rate): validation loss}} (inf for a diverged run), to set beside the grid's own losses in the study's results.json
  (`lr_grid`): the grid's choice stands where none of these is lower."""
  base, study = split_study_config(config)
  if study.selection_seed is None:
    raise config_lib.ConfigError(
        'edge_check: config.study.selection_seed is None; an edge check adds selection runs at the selection seed, '
        'so the study must choose its rates at one (a seed outside the reported ones).'
    )
  # An 'X -> Y' entry has no rate of its own (it evaluates X's runs): only the trained encoders are checked.
  entries = [e for e in check_study(base, study) if e.eval_spec is None]
  labels = [e.label for e in entries]
  unknown = sorted(set(encoders or ()) - set(labels))
  if unknown:
    raise config_lib.ConfigError(
        f'edge_check: encoders {unknown} are not trained encoders of config.study.encoders; allowed: {labels}.'
    )
  # A bool is an int to Python: rates=(True,) trained at 1.
  bad = [r for r in rates if isinstance(r, bool) or not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0)]
  if not rates or bad:
    raise config_lib.ConfigError(
        f'edge_check: rates={list(rates)!r} is invalid: allowed: one or more rates > 0 (numbers, not bools).'
    )
  chosen = [e for e in entries if encoders is None or e.label in encoders]
  data = data_sources.build_data(base)
  metric, _ = metric_name(base)
  workdir = os.fspath(workdir)
  ctx = _StudyContext(base, study, workdir, loop.train if train_fn is None else train_fn, metric, data)
  with workdir_lock.held(workdir):
    return {
        e.label: {
            plan.rate_name(r): _selection_loss(
                _run_seed(ctx, e, int(study.selection_seed), LearningRate(float(r), 'grid'), selection_only=True)
            )
            for r in rates
        }
        for e in chosen
    }

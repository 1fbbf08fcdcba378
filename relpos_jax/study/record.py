"""The record of a study: a run's result file (`RunRecord`, one type for every study), one encoder's entry merged
over its seeds, the results record, and the files written from it (results.json / .md / .png through
`relpos_jax.study.report`).

What a study (`relpos_jax.study.runner`), a re-evaluation of a trained one (`relpos_jax.study.reevaluate`) and the
grid study (`relpos_jax.study.resolution`) write; none is imported here, so all build on this module (`runner`
re-exports its names). A run record keeps its family's file layout (`LM_LAYOUT`, `GRID_LAYOUT`): the committed
runs of both are re-read as they were written.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
from typing import Sequence

import jax

from relpos_jax.study import report, stats
from relpos_jax.study.plan import SEQUENTIAL_SUFFIX, Entry, Study, metric_name, train_length
from relpos_jax.train import config as config_lib

RESULT_FILE = 'result.json'


@dataclasses.dataclass(frozen=True)
class RecordLayout:
  """How one family of studies lays a run's record out in its result.json. The LM studies (runner, reevaluate,
  the suite's tasks) and the grid study wrote different files before they shared a record type; committed runs
  of both are re-read, so each keeps its file layout and the record keeps one key set over them."""

  name: str
  config_key: str  # where the run's config (what it computes; compared on reuse) is recorded
  seed_in_config: bool  # the grid study records the seed inside its run config, the LM studies beside it
  indent: int  # the JSON indent the family's files were written with (a rewrite keeps their bytes)
  cost_adds_evaluation: bool  # the grid study times evaluation apart; an LM run's train_seconds includes it


LM_LAYOUT = RecordLayout('lm', config_key='config', seed_in_config=False, indent=2, cost_adds_evaluation=False)
GRID_LAYOUT = RecordLayout('grid', config_key='run_config', seed_in_config=True, indent=1, cost_adds_evaluation=True)
LAYOUTS = {layout.name: layout for layout in (LM_LAYOUT, GRID_LAYOUT)}
# The keys every layout names (RunRecord's fields); the rest of a result.json is the study's own measurements.
_NAMED = ('num_params', 'train_seconds', 'eval_seconds', 'diverged')


def _own_keys(layout: RecordLayout) -> tuple[str, ...]:
  """The keys of a result.json in `layout` that RunRecord's fields hold (the rest are its `values`)."""
  return (layout.config_key, *(() if layout.seed_in_config else ('seed',)), *_NAMED)


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """One (entry, seed) run of any study, as its result.json holds it: the one key set every study reads (the
  seed, what the run computes, its parameter count, its cost, whether it diverged) and the study's own
  measurements (`values`: by_length, position_curve, ... for an LM study; validation and test for the grid
  study), kept as they were written. `to_json()` is the file's object: `from_json(d, layout).to_json() == d` for
  every record a study wrote, committed ones included (a key a record left out stays out: None here means absent).
  """

  layout: RecordLayout
  seed: int
  config: dict  # the run config as recorded (the LM `config`, the grid study's `run_config`)
  train_seconds: float  # training wall seconds (an LM run's includes its evaluation; a re-evaluation's is 0)
  values: dict  # the study's own keys of the record, in the order they were written
  num_params: int | None = None  # None: a run that diverged before it was counted
  eval_seconds: float | None = None
  diverged: dict | None = None  # {'step', 'message', ...}: no finite values to report

  def __post_init__(self):
    if self.layout not in LAYOUTS.values():
      raise ValueError(f'RunRecord layout={self.layout!r} is invalid: allowed: one of {sorted(LAYOUTS)}.')
    clashes = sorted(set(self.values) & set(_own_keys(self.layout)))
    if clashes:
      raise ValueError(
          f'RunRecord values name {clashes}, which are its own fields; allowed: the study-specific keys only.'
      )

  @property
  def cost(self) -> float:
    """The wall seconds this run took, training and evaluation: what a study's cost sums. An LM run's
    train_seconds already holds its evaluation, a re-evaluation's is 0 beside its eval_seconds."""
    evaluation = float(self.eval_seconds or 0.0)
    if self.layout.cost_adds_evaluation:
      return float(self.train_seconds) + evaluation
    return max(float(self.train_seconds), evaluation)

  def to_json(self) -> dict:
    """The result.json object of this record, in its layout."""
    out = {self.layout.config_key: self.config}
    if not self.layout.seed_in_config:
      out['seed'] = self.seed
    named = {name: getattr(self, name) for name in _NAMED}
    out.update({name: value for name, value in named.items() if value is not None})
    out.update(self.values)
    return out

  @classmethod
  def from_json(cls, record: dict, layout: RecordLayout) -> RunRecord:
    """The record of a result.json object in `layout`; ValueError naming what it lacks when it is none."""
    missing = [k for k in (layout.config_key, 'train_seconds') if k not in record]
    config = record.get(layout.config_key)
    seed = (config or {}).get('seed') if layout.seed_in_config else record.get('seed')
    if missing or seed is None:
      raise ValueError(
          f'a run record in the {layout.name} layout needs {layout.config_key!r}, the seed and train_seconds; '
          f'this one lacks {missing or ["seed"]} (it has {sorted(record)}).'
      )
    values = {k: v for k, v in record.items() if k not in _own_keys(layout)}
    return cls(
        layout,
        int(seed),
        config,
        record['train_seconds'],
        values,
        num_params=record.get('num_params'),
        eval_seconds=record.get('eval_seconds'),
        diverged=record.get('diverged'),
    )

  def write(self, path: str) -> str:
    """Writes the record to `path` atomically (`report.write_json`), in its layout's format; returns the path."""
    return report.write_json(self.to_json(), path, indent=self.layout.indent)

  @classmethod
  def read(cls, path: str, layout: RecordLayout) -> RunRecord:
    """The record at `path`; ConfigError naming the file when it is truncated or is no run's record in `layout`,
    so that a damaged file is removed and its run computed again, never a traceback."""
    record = report.load_object(
        path,
        (layout.config_key,),
        "a run's record",
        'Remove its directory so that the study computes that run again.',
    )
    try:
      return cls.from_json(record, layout)
    except ValueError as e:
      raise config_lib.ConfigError(f'{path}: {e} Remove its directory so that the study computes that run again.')


def environment() -> dict:
  """Where a results file was computed: the JAX version, the devices, the platform, Python and the date."""
  device = jax.devices()[0]
  return {
      'jax_version': jax.__version__,
      'device': f'{jax.device_count()} x {device.device_kind}',
      'platform': platform.platform(),
      'python': platform.python_version(),
      'date': datetime.date.today().isoformat(),
  }


def _mean_curve(curves: Sequence[dict | None]) -> dict | None:
  """The per-position curve averaged over seeds (the bins are the same for every seed of one study)."""
  curves = [c for c in curves if c]
  if not curves:
    return None
  value = report.curve_value(curves[0])
  return {
      'context_from': curves[0]['context_from'],
      'context_to': curves[0]['context_to'],
      value: [stats.mean(column) for column in zip(*[c[value] for c in curves])],
      f'{value}_per_seed': [c[value] for c in curves],
  }


def in_current_keys(run: dict, workdir: str) -> dict:
  """A per-seed record in the one key set every study writes: `train_spec` (the trained encoder of an 'X -> Y'
  entry) and `trained_in` relative to the record's own workdir. Re-evaluations before this wrote `trained_spec`
  and an absolute `trained_in`; they are read in these keys, so a resumed study never mixes the two."""
  run = dict(run)
  if 'trained_spec' in run:
    run['train_spec'] = run.pop('trained_spec')
  if isinstance(run.get('trained_in'), str) and os.path.isabs(run['trained_in']):
    run['trained_in'] = os.path.relpath(run['trained_in'], workdir)
  return run


def seed_columns(per_seed: Sequence[dict], keys: Sequence[str], value) -> tuple[dict, dict]:
  """The two columns every study's row keeps of one measured quantity, merged over its seeds (the LM studies' per
  length, the grid study's per side and metric): ({key: the mean over the seeds that did not diverge}, {key: every
  seed's value, in the order of `per_seed`}). `value(record, key)`: one seed's value (None where it has none)."""
  finite = [r for r in per_seed if not r.get('diverged')]
  means = {k: stats.mean([value(r, k) for r in finite]) for k in keys}
  return means, {k: [value(r, k) for r in per_seed] for k in keys}


def diverged_seeds(seeds: Sequence[int], per_seed: Sequence[dict]) -> dict:
  """{seed: its diverged marker} of the seeds that diverged (a row's `diverged_seeds`; empty: none did)."""
  return {str(seed): r['diverged'] for seed, r in zip(seeds, per_seed) if r.get('diverged')}


def merge_seeds(entry: Entry, per_seed: Sequence[dict], *, sequential: bool = False) -> dict:
  """One encoder's study entry from its per-seed results: `by_length` is the mean over the seeds that did
  not diverge, `by_length_per_seed` keeps every value ({length: [one per seed]}, in the order of `seeds`;
  None for a diverged seed). Diverged seeds are listed in `diverged_seeds` ({seed: marker}); when every
  seed diverged the entry carries `diverged` (the first seed's marker) and no values.

  sequential: the row of a randomized entry evaluated at positions 0..L-1 (its runs' `sequential`
  records), named '<label>@0..L-1'.

  Runs that stored per-document totals (`runner.document_totals_record`) keep them in
  `document_totals_per_seed` ({seed: {length: totals}}, the seeds that did not diverge), for the report's
  document bootstrap; results without them read as before."""

  def view(r):  # the values of this row in one seed's result
    if not sequential:
      return r
    return {**r, **(r.get('sequential') or {'by_length': {n: None for n in r['by_length']}})}

  per_seed = [view(r) for r in per_seed]
  lengths = list(per_seed[0]['by_length'])
  finite = [r for r in per_seed if not r.get('diverged')]
  first = finite[0] if finite else per_seed[0]
  config = dict(first['config'])
  config.pop('seed', None)  # The seed is per run: `seeds` lists them.
  seeds = [r['seed'] for r in per_seed]
  by_length, by_length_per_seed = seed_columns(per_seed, lengths, lambda r, n: r['by_length'][n])
  merged = {
      'name': entry.label + (SEQUENTIAL_SUFFIX if sequential else ''),
      'spec': entry.reported_spec,
      'seeds': seeds,
      'by_length': by_length,
      'by_length_per_seed': by_length_per_seed,
      'train_metric': stats.mean([r['train_metric'] for r in finite]),
      'train_loss': stats.mean([r['train_loss'] for r in finite]),
      'steps': first['steps'],
      'train_seconds': round(sum(r['train_seconds'] for r in per_seed), 1),
      'num_params': first.get('num_params'),
      'config': config,
      'data': first.get('data'),
  }
  if any('exact_match_by_length' in r for r in per_seed):  # tasks: the per-sequence accuracy, per seed too
    merged['exact_match_by_length'], merged['exact_match_by_length_per_seed'] = seed_columns(
        per_seed, lengths, lambda r, n: (r.get('exact_match_by_length') or {}).get(n)
    )
  for key in ('split', 'positions', 'position_draws', 'scored_sets', 'same_targets', 'learning_rate'):
    if key in first:
      merged[key] = first[key]
  totals = {str(r['seed']): r['document_totals'] for r in finite if r.get('document_totals')}
  if totals and not sequential:  # per-document totals (corpus studies, 0..L-1 encoders): the document bootstrap
    merged['document_totals_per_seed'] = totals
  if any('run_dir' in r for r in per_seed):
    merged['run_dirs'] = [r.get('run_dir') for r in per_seed]
  curve = _mean_curve([r.get('position_curve') for r in finite])
  if curve:
    merged['position_curve'] = curve
  if entry.eval_spec is not None:
    merged['train_spec'] = entry.spec
    merged['trained_in'] = [r.get('trained_in') for r in per_seed]
  diverged = diverged_seeds(seeds, per_seed)
  if diverged:
    merged['diverged_seeds'] = diverged
  if not finite:
    merged['diverged'] = per_seed[0]['diverged']
  return merged


def new_results(base, study: Study, seeds, comparison_requests, *, protocol=None, meta=None) -> dict:
  """The results record of a study before its runs (the one place it is built, for a study and a
  re-evaluation alike): what is measured, at which lengths, over which seeds, and the `meta` of where."""
  metric, lower_is_better = metric_name(base)
  results = {
      'metric': metric,
      'lower_is_better': lower_is_better,
      'train_length': train_length(base),
      'eval_lengths': [int(n) for n in base.eval.lengths],
      'seeds': list(seeds),
      'split': study.split,
      'comparison_requests': comparison_requests,
      'runs': [],
      'meta': {
          'title': study.title,
          'description': study.description,
          **(meta or {}),
          'config': json.loads(json.dumps(base.to_dict())),
          **environment(),
      },
  }
  if protocol is not None:
    results['protocol'] = protocol
  return results


OUTPUT_FILES = {
    'json': 'results.json',
    'markdown': 'results.md',
    'plot': 'results.png',
    'position_plot': 'results_position.png',
}


def output_paths(workdir: str) -> dict[str, str]:
  """The outputs `write_outputs` wrote in `workdir` (those that exist), without writing anything."""
  paths = {kind: os.path.join(workdir, name) for kind, name in OUTPUT_FILES.items()}
  return {kind: path for kind, path in paths.items() if os.path.exists(path)}


def write_outputs(results: dict, workdir: str) -> dict[str, str]:
  """results.json (with the paired differences asked for), results.md, results.png and (when the runs
  recorded one) results_position.png, the loss against position, in `workdir`; returns their paths."""
  if results.get('comparison_requests'):
    results['comparisons'] = report.comparisons(results)
  paths = {
      'json': report.write_json(results, os.path.join(workdir, 'results.json')),
      'markdown': report.write_markdown(results, os.path.join(workdir, 'results.md')),
      'plot': report.plot(results, os.path.join(workdir, 'results.png')),
  }
  position_plot = report.plot_positions(results, os.path.join(workdir, 'results_position.png'))
  if position_plot:
    paths['position_plot'] = position_plot
  return paths

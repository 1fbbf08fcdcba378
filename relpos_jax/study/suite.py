"""The benchmark suite: one length-generalization study per task, and a summary across tasks.

    summary = run_suite(config, workdir)   # config: configs/studies/suite.py (or suite_published.py, ...)

A suite config is an algorithmic-task training config (configs/algorithmic.py) plus a `suite` section (each
suite its own file, configs/studies/suite*.py):

  suite.encoders    the study entries every task trains ('label: spec' or a bare spec)
  suite.seeds       the seeds every (task, encoder) is trained with
  suite.tasks       the task names, each with its protocol in `suite.protocols.<task>`
  suite.protocols   per task: `min_length`, `max_length` (training lengths), `eval_lengths`, and optionally
                    `task_kwargs`, `steps`, `loss_reduction`, `num_buckets` (else the base config's), and
                    `held_out` (below)
  suite.lr_grid     optional: the learning rates each encoder tries at the first seed (the study's lr_grid)
  suite.statistic   what the README's first table shows (STATISTICS): per-token or per-sequence accuracy,
                    mean over seeds or max over seeds; the other three follow it

Encoder specs may name the task's longest test sequence: `{longest}` or `{K*longest}` (K an int) is replaced,
per task, by K times the most tokens any of its evaluation sequences holds (padding included), so
'rope+rand.2x: randomized(rope, max_position={2*longest})' is Ruoss et al.'s max_position relative to the test
lengths; each run records the spec it ran with. A randomized encoder whose max_position is below a task's
longest test sequence is refused before anything trains (its evaluation could not draw the positions).

Evaluation follows the study's protocol (`relpos_jax.study.protocol`, the LM study's code): an encoder trained
on random positions is evaluated at ordered random positions from [0, max_position), `config.eval.position_draws`
draws, deterministic per seed (`relpos_jax.train.loop.EvalPositions`), and again at 0..L-1 as the labeled
second row '<label>@0..L-1'. The summary records, per cell, the positions and the draws.

Held-out sets (`suite.protocols.<task>.held_out`, e.g. flip_flop's Liu et al. 2023 FFL(0.98) and FFL(0.1)):
{name: task_kwargs overriding the task's}, evaluated on every finished run at `held_out_lengths` (default: the
longest training length) with `held_out_examples` examples (default: config.eval.num_examples; per set with
`held_out_examples_by_set`), at the same
positions as the run's evaluation. Each run keeps `held_out.json` beside its result (reused on the next call);
the task's `held_out.json` collects them, and the summary reports the glitch rate, the errors per thousand
scored tokens (for flip_flop: per thousand reads), per encoder over seeds, and the bound a run without an
error gives (the rule of three: below 3 / scored tokens at 95%; `stats.clean_run_bound`).

For every task the suite runs `relpos_jax.study.run_study` in `<workdir>/<task>/` (resumable exactly as a
study is: finished runs are reused, an interrupted one resumes) and then writes the summary:

  <workdir>/summary.json   task x encoder: accuracy in distribution (lengths <= the longest trained) and out
                           of distribution (longer), per token and per sequence (exact match of the whole
                           output), each as the mean over seeds (± sample std, ddof 1), the max over seeds
                           and the per-seed values it is computed from
  <workdir>/README.md      the summary table, the heatmap and each task's protocol as it ran; anything
                           written below its last line (NOTES_MARKER) is kept when it is rewritten
  <workdir>/heatmap.png    out-of-distribution accuracy by `suite.statistic`, task x encoder

An encoder whose in-distribution accuracy on a task stays below `ID_LEARNED` did not learn it at this budget:
its out-of-distribution number says nothing about length generalization, so the table and the heatmap mark
that cell, and a task no encoder learned is marked as a whole. "Learned" reads the same statistic as the table
(per-token accuracy; the mean or the max over seeds, as the table's).
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import hashlib
import json
import math
import os
import re
import time
import warnings
from typing import Callable, Sequence

import jax

from relpos_jax import files
from relpos_jax.data.tasks import registry
from relpos_jax.study import report, stats
from relpos_jax.study.plan import Study, StudyConfig
from relpos_jax.study.runner import SEQUENTIAL_SUFFIX, check_study, parse_entries, run_config, run_study_config
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files, data_sources, loop, schema

SUMMARY_FILE = 'summary.json'
HELD_OUT_FILE = 'held_out.json'
# In-distribution accuracy below this: the task is not learned, whatever the encoder (a judgement call:
# chance is 0.5 for the binary classification tasks, lower for the transductions).
ID_LEARNED = 0.9
# The generated README ends with this line; what follows it (findings written by hand) is kept on rewrite.
NOTES_MARKER = '<!-- notes: kept when the summary is rewritten -->'
# What a table can show: per-token accuracy (Deletang et al. 2023; Ruoss et al. 2023) or per-sequence accuracy
# (every scored token of an example right: exact match of the whole answer, as the addition papers score it),
# each the mean over seeds (± the sample std) or the max over seeds (Deletang et al. report the best run).
STATISTICS = ('token_mean', 'token_max', 'sequence_mean', 'sequence_max')
STATISTIC_TEXT = {
    'token': 'per-token accuracy',
    'sequence': 'per-sequence accuracy (exact match: every scored token of the example right)',
    'mean': f'{stats.PLUS_MINUS}',
    'max': 'max over seeds (the best seed; no spread)',
}
# '{longest}' or '{K*longest}' in an encoder spec: K times the task's longest test sequence, in tokens.
LONGEST = re.compile(r'\{\s*(?:(\d+)\s*\*\s*)?longest\s*\}')


@dataclasses.dataclass(frozen=True)
class Protocol:
  """How one task is trained and evaluated in the suite."""

  min_length: int = schema.key(ge=1)
  max_length: int = schema.key(ge=1)
  eval_lengths: tuple[int, ...] = schema.key(ge=1)
  task_kwargs: dict | None = schema.key(None)
  steps: int | None = schema.key(None, ge=1)
  loss_reduction: str | None = schema.key(None, choices=(None, *config_lib.LOSS_REDUCTIONS))
  num_buckets: int | None = schema.key(None, ge=1)
  # Held-out evaluation sets: {name: task_kwargs overriding the task's} (e.g. flip_flop's sparse/dense sets).
  held_out: dict | None = schema.key(None)
  held_out_lengths: tuple[int, ...] | None = schema.key(None, ge=1)
  held_out_examples: int | None = schema.key(None, ge=1)
  # Per set {name: examples}, over held_out_examples (a sparse set needs more examples for as many reads).
  held_out_examples_by_set: dict | None = schema.key(None)


@dataclasses.dataclass(frozen=True)
class Suite:
  """The `suite` section of a suite config."""

  encoders: tuple[str, ...] = schema.key()
  seeds: tuple[int, ...] = schema.key(ge=0, lt=config_lib.SEED_LIMIT)
  tasks: tuple[str, ...] = schema.key()
  protocols: dict = schema.key()
  title: str = schema.key('Length-generalization suite')
  statistic: str = schema.key('token_mean', choices=STATISTICS)
  # Peak learning rates tried per encoder at the first seed (the study's lr_grid: chosen on validation loss
  # at the training length); None: config.optim.learning_rate for every encoder.
  lr_grid: tuple[float, ...] | None = schema.key(None, gt=0)


def split_config(config) -> tuple[config_lib.Config, Suite, dict[str, Protocol]]:
  """(the base training config, parsed, the suite section, each task's protocol), checked: the one parse of a
  suite config (a ConfigDict, the entry point's)."""
  as_dict = config_files.as_dict(config)
  if 'suite' not in as_dict:
    raise config_lib.ConfigError(
        'missing key config.suite: a suite config is a task training config plus a '
        'suite section (see configs/studies/suite.py).'
    )
  suite = schema.parse_section(Suite, 'suite', as_dict.pop('suite'))
  if not suite.tasks or not suite.encoders or not suite.seeds:
    raise config_lib.ConfigError(
        f'config.suite needs at least one task, encoder and seed; got tasks='
        f'{suite.tasks!r}, encoders={suite.encoders!r}, seeds={suite.seeds!r}.'
    )
  unknown = [t for t in suite.tasks if t not in registry.TASKS]
  if unknown:
    raise config_lib.ConfigError(
        f'config.suite.tasks names unknown task(s) {unknown}; allowed: {", ".join(registry.task_names())}.'
    )
  missing = [t for t in suite.tasks if t not in suite.protocols]
  if missing:
    raise config_lib.ConfigError(
        f'config.suite.tasks names {missing} without a protocol; add '
        f'config.suite.protocols.<task> (have: {sorted(suite.protocols)}).'
    )
  protocols = {t: schema.parse_section(Protocol, f'suite.protocols.{t}', suite.protocols[t]) for t in suite.tasks}
  for task, protocol in protocols.items():
    held_out = protocol.held_out
    if held_out is not None and (
        not held_out or not all(isinstance(v, dict) and str(k).isidentifier() for k, v in held_out.items())
    ):
      raise config_lib.ConfigError(
          f'config.suite.protocols.{task}.held_out={held_out!r} is invalid: allowed: None or a non-empty dict '
          "{name: task_kwargs} with names that are identifiers, e.g. {'sparse': {'p_ignore': 0.98}}."
      )
    by_set = protocol.held_out_examples_by_set
    if by_set is not None and not (
        held_out
        and set(by_set) <= set(held_out)
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in by_set.values())
    ):
      raise config_lib.ConfigError(
          f'config.suite.protocols.{task}.held_out_examples_by_set={by_set!r} is invalid: allowed: None or a dict '
          f'{{set: examples (an int >= 1)}} whose sets are among held_out ({sorted(held_out or {})}).'
      )
  return config_lib.parse(as_dict), suite, protocols


def longest_test_sequence(base: config_lib.Config, task: str, protocol: Protocol) -> int:
  """The most tokens any evaluation sequence of `task` holds under `protocol` (padding included)."""
  try:
    made = registry.make_task(task, **dict(protocol.task_kwargs or {}))
  except ValueError as e:
    raise config_lib.ConfigError(f'config.suite.protocols.{task}.task_kwargs: {e}') from None
  multiple = base.eval.pad_multiple
  lengths = [*protocol.eval_lengths, *(held_out_lengths(protocol) if protocol.held_out else ())]
  return max(-(-made.total_length(int(n)) // multiple) * multiple for n in lengths)


def held_out_lengths(protocol: Protocol) -> tuple[int, ...]:
  return tuple(protocol.held_out_lengths or (protocol.max_length,))


def resolve_encoders(encoders: Sequence[str], longest: int) -> tuple[str, ...]:
  """The suite's encoder entries with '{longest}' / '{K*longest}' replaced by K * `longest`."""

  def value(match):
    factor = int(match.group(1) or 1)
    if factor < 1:
      raise config_lib.ConfigError(
          f'config.suite.encoders: {match.group(0)!r} is invalid: allowed: {{longest}} or {{K*longest}} with an '
          'int K >= 1.'
      )
    return str(factor * longest)

  resolved = tuple(LONGEST.sub(value, str(e)) for e in encoders)
  for original, entry in zip(encoders, resolved):
    if '{' in entry or '}' in entry:
      raise config_lib.ConfigError(
          f'config.suite.encoders entry {original!r} has a placeholder other than {{longest}} or {{K*longest}} '
          '(K an int >= 1); allowed: those two.'
      )
  return resolved


def study_config(base: config_lib.Config, suite: Suite, task: str, protocol: Protocol) -> StudyConfig:
  """The study of one task: the base run with the task's protocol, and the suite's encoders."""
  values = base.to_dict()
  values['data'].update(
      task=task,
      task_kwargs=dict(protocol.task_kwargs or {}),
      min_length=protocol.min_length,
      max_length=protocol.max_length,
  )
  for name in ('loss_reduction', 'num_buckets'):
    if getattr(protocol, name) is not None:
      values['data'][name] = getattr(protocol, name)
  if protocol.steps is not None:
    values['train']['steps'] = protocol.steps
  values['eval']['lengths'] = tuple(protocol.eval_lengths)
  run = config_lib.parse(values)
  encoders, left_out = _without_randomized_on_task_positions(
      run, resolve_encoders(suite.encoders, longest_test_sequence(base, task, protocol))
  )
  description = f'Per-output-token accuracy on {task}; lengths <= {protocol.max_length} are in distribution.'
  if left_out:
    description += (
        f' {task} hands the model its own positions, which replace randomized ones: left out: '
        + ', '.join(repr(label) for label in left_out)
        + ' (each would run exactly as its base).'
    )
  section = {
      'encoders': encoders,
      'seeds': tuple(suite.seeds),
      'title': f'{task}: trained on lengths {protocol.min_length}..{protocol.max_length}',
      'description': description,
  }
  if suite.lr_grid is not None:
    section['lr_grid'] = tuple(suite.lr_grid)
  return StudyConfig(run, schema.parse_section(Study, 'study', section))


def _without_randomized_on_task_positions(
    config: config_lib.Config, encoders: Sequence[str]
) -> tuple[tuple[str, ...], list[str]]:
  """(The entries a task's study trains, the labels left out): on a task that hands its own positions
  (addition_coupled, addition_abacus) randomized positions are replaced by the task's, so a randomized entry
  would be its base exactly, recorded as random positions; `config_lib.validate` refuses it."""
  if config_lib.task_position_bound(config) is None:
    return tuple(encoders), []
  kept, left_out = [], []
  for encoder, entry in zip(encoders, parse_entries(encoders)):
    with warnings.catch_warnings():
      warnings.simplefilter('ignore')
      randomized = config_lib.train_position_limit(run_config(config, entry).encoder) is not None
    (left_out if randomized else kept).append(entry.label if randomized else encoder)
  return tuple(kept), left_out


def held_out_config(run: config_lib.Config, protocol: Protocol, name: str) -> config_lib.Config:
  """The run config whose data is the held-out set `name` of a task's study (its task_kwargs over the task's)."""
  values = run.to_dict()
  values['data']['task_kwargs'] = {**dict(protocol.task_kwargs or {}), **protocol.held_out[name]}
  values['eval']['lengths'] = held_out_lengths(protocol)
  examples = held_out_examples(protocol, name)
  if examples is not None:
    values['eval']['num_examples'] = examples
  return config_lib.parse(values)


def held_out_examples(protocol: Protocol, name: str) -> int | None:
  """The examples of held-out set `name`: its own count, else the protocol's, else None (the study's)."""
  by_set = protocol.held_out_examples_by_set or {}
  if name in by_set:
    return int(by_set[name])
  return None if protocol.held_out_examples is None else int(protocol.held_out_examples)


def _check_max_position(task: str, parsed: StudyConfig, longest: int) -> None:
  """A randomized encoder's max_position covers the task's longest test sequence (else its evaluation at
  random positions cannot draw them)."""
  for entry in parse_entries(parsed.study.encoders):
    for spec in dict.fromkeys(s for s in (entry.spec, entry.eval_spec) if s is not None):
      with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        limit = config_lib.train_position_limit(parsed.base.derive(encoder=spec).encoder)
      if limit is not None and limit < longest:
        raise config_lib.ConfigError(
            f'config.suite.encoders entry {entry.label!r} ({spec!r}) on task {task!r}: max_position={limit} is '
            f'below the longest test sequence, {longest} tokens (config.suite.protocols.{task}.eval_lengths / '
            f'held_out_lengths); allowed: max_position >= {longest}, e.g. max_position={{2*longest}}.'
        )


def validate_suite(config) -> list[tuple[str, StudyConfig]]:
  """Every task's study of a suite config (a ConfigDict, the entry point's), each checked as its study checks it,
  before anything trains."""
  return check_suite(*split_config(config))


def check_suite(base: config_lib.Config, suite: Suite, protocols: dict[str, Protocol]) -> list[tuple[str, StudyConfig]]:
  """`validate_suite` of a suite already parsed."""
  studies = []
  for task in suite.tasks:
    protocol = protocols[task]
    try:
      study = study_config(base, suite, task, protocol)
      check_study(study.base, study.study)
    except ValueError as e:
      raise config_lib.ConfigError(f'config.suite task {task!r}: {e}') from None
    _check_max_position(task, study, longest_test_sequence(base, task, protocol))
    for name in protocol.held_out or {}:
      try:
        with warnings.catch_warnings():
          warnings.simplefilter('ignore')
          config_lib.validate(
              run_config(held_out_config(study.base, protocol, name), parse_entries(study.study.encoders)[0])
          )
      except ValueError as e:
        raise config_lib.ConfigError(f'config.suite.protocols.{task}.held_out[{name!r}]: {e}') from None
    studies.append((task, study))
  return studies


def run_suite(
    config, workdir: str | os.PathLike, *, tasks: Sequence[str] | None = None, train_fn: Callable | None = None
) -> dict:
  """Runs (or resumes) every task's study in `<workdir>/<task>`, then writes the summary; returns it.

  `tasks`: a subset of `config.suite.tasks` to run now (e.g. one per process); the summary covers every
  task whose results exist.
  """
  workdir = os.fspath(workdir)
  base, suite, protocols = split_config(config)  # The one parse of the user's config.
  studies = check_suite(base, suite, protocols)
  if tasks is not None:
    if not tasks:  # `--tasks=` would train nothing and exit 0.
      raise config_lib.ConfigError(
          f'tasks=[] names no task; allowed: some of config.suite.tasks ({[t for t, _ in studies]}), or None for all.'
      )
    unknown = sorted(set(tasks) - {t for t, _ in studies})
    if unknown:
      raise config_lib.ConfigError(f'tasks {unknown} are not in config.suite.tasks ({[t for t, _ in studies]}).')
  for task, study in studies:
    if tasks is None or task in tasks:
      task_dir = os.path.join(workdir, task)
      held_out = None
      if protocols[task].held_out:  # written in the task's directory while its study holds the lock
        held_out = functools.partial(evaluate_held_out, study, protocols[task], task_dir=task_dir)
      run_study_config(study, task_dir, train_fn=train_fn, on_finished=held_out)
      # Every task compiles its own train and eval programs (new shapes, vocabularies, encoders); one
      # process running the whole grid kept them all and ran out of memory (LLVM could not allocate)
      # after about ten tasks on a 24 GiB machine. Nothing of a finished task is needed again.
      jax.clear_caches()
      gc.collect()
  summary = summarize(load_results(workdir, [t for t, _ in studies]), title=suite.title, statistic=suite.statistic)
  write_summary(summary, workdir)
  return summary


# ----------------------------------------------------------------------------------------- held-out sets
def _held_out_request(study: config_lib.Config, protocol: Protocol, draws: int) -> dict:
  """What a run's held-out evaluation asks: its 'examples' one count for every set, or {set: count} where
  the sets differ (a request as the earlier runs wrote it stays equal, so their evaluations are reused)."""
  default = int(protocol.held_out_examples or study.eval.num_examples)
  counts = {name: held_out_examples(protocol, name) or default for name in protocol.held_out}
  return {
      'sets': {name: dict(kwargs) for name, kwargs in protocol.held_out.items()},
      'lengths': [int(n) for n in held_out_lengths(protocol)],
      'examples': default if set(counts.values()) == {default} else counts,
      'position_draws': int(draws),
      'split': 'test',
  }


def evaluate_held_out(study: StudyConfig, protocol: Protocol, results: dict, task_dir: str) -> dict:
  """Every finished run of a task's study evaluated on the protocol's held-out sets; writes each run's
  `held_out.json` (reused when it asked the same) and the task's `held_out.json`; returns the latter:
  {label: {'seeds': [...], 'per_seed': [record or None (diverged)]}}."""
  draws = study.base.eval.position_draws
  request = _held_out_request(study.base, protocol, draws)
  collected = {}
  for run in results['runs']:
    if run['name'].endswith(SEQUENTIAL_SUFFIX):
      continue  # the same runs: their 0..L-1 evaluation is recorded in the randomized entry's record
    records = []
    for k, seed in enumerate(run['seeds']):
      relative = (run.get('run_dirs') or [None] * len(run['seeds']))[k]
      if relative is None or str(seed) in (run.get('diverged_seeds') or {}):
        records.append(None)
        continue
      run_dir = os.path.join(task_dir, relative)
      path = os.path.join(run_dir, HELD_OUT_FILE)
      result = report.load_json(os.path.join(run_dir, 'result.json'))
      trained = hashlib.sha256(json.dumps(result['config'], sort_keys=True).encode()).hexdigest()[:16]
      if os.path.exists(path):  # reused only for the same request of the same trained run
        saved = report.load_json(path)
        if saved.get('request') == request and saved.get('run_config') == trained:
          records.append(saved)
          continue
      trained_in = os.path.join(task_dir, result['trained_in']) if result.get('trained_in') else run_dir
      started = time.perf_counter()
      config = config_lib.parse(result['config'])
      model, _ = loop.load_model(trained_in, config, step=int(result['steps']))
      random = loop.EvalPositions.of(model, draws, seed)
      rows = {'positions': random}
      if random.random:
        rows['sequential'] = loop.EvalPositions.of(model, draws, seed, sequential=True)
      record = {'request': request, 'run_config': trained, 'seed': seed, 'step': int(result['steps']), 'sets': {}}
      for name in protocol.held_out:
        data = data_sources.build_data(held_out_config(config, protocol, name))
        by_row = {}
        for row, positions in rows.items():
          by_length = {}
          for n in request['lengths']:
            evaluation = loop.evaluate_set(model, data, n, split='test', positions=positions)
            scored = float(evaluation.position_tokens.sum()) / positions.draws
            accuracy = evaluation.metrics['accuracy']
            by_length[str(n)] = {
                'accuracy': accuracy,
                'exact_match': evaluation.metrics.get('exact_match'),
                'scored_tokens': scored,
                'glitch_rate': 1000.0 * (1.0 - accuracy),
            }
          by_row[row] = {'positions': positions.describe(), 'by_length': by_length}
        record['sets'][name] = {'task_kwargs': request['sets'][name], **by_row['positions']}
        if 'sequential' in by_row:
          record['sets'][name]['sequential'] = by_row['sequential']
      record['eval_seconds'] = round(time.perf_counter() - started, 1)
      report.write_json(record, path)
      records.append(record)
    collected[run['name']] = {'spec': run.get('spec'), 'seeds': list(run['seeds']), 'per_seed': records}
  out = {'request': request, 'runs': collected}
  report.write_json(out, os.path.join(task_dir, HELD_OUT_FILE))
  return out


def load_results(workdir: str, tasks: Sequence[str]) -> dict[str, dict]:
  """{task: results.json} for every task of `tasks` that has results in `workdir` (with its held-out
  evaluations, the task's held_out.json, under 'held_out' where there are some)."""
  found = {}
  for task in tasks:
    path = os.path.join(workdir, task, 'results.json')
    if os.path.exists(path):
      found[task] = report.load_json(path)
      held_out = os.path.join(workdir, task, HELD_OUT_FILE)
      if os.path.exists(held_out):
        found[task]['held_out'] = report.load_json(held_out)
  return found


# ---------------------------------------------------------------------------------------------- summary
def _seed_values(run: dict, length, key: str = 'by_length') -> list[float | None]:
  """One value per seed at `length` (None: that seed has none); `key` 'by_length' (per token) or
  'exact_match_by_length' (per sequence)."""
  per_seed = run.get(f'{key}_per_seed', {}).get(str(length))
  if per_seed is None:
    value = run.get(key, {}).get(str(length))
    per_seed = [value] if (key == 'by_length' and not run.get('by_length_per_seed')) else []
    if run.get('diverged'):
      per_seed = []
  # A seed the study marked diverged (beyond chance: its values are recorded, but they are not evidence)
  # counts in no statistic, as in the study's own table (report._per_seed).
  diverged = run.get('diverged_seeds') or {}
  seeds = run.get('seeds') or []
  if diverged and len(seeds) == len(per_seed):
    per_seed = [None if str(seed) in diverged else v for seed, v in zip(seeds, per_seed)]
  return [None if v is None or math.isnan(float(v)) else float(v) for v in per_seed]


def _per_seed_means(run: dict, lengths, key: str) -> list[float]:
  """Per seed: the mean over `lengths` of its values (seeds missing a value at any of them are left out)."""
  columns = [_seed_values(run, n, key) for n in lengths]
  if not columns or not all(columns):
    return []
  seeds = min(map(len, columns))
  return [sum(c[k] for c in columns) / len(columns) for k in range(seeds) if all(c[k] is not None for c in columns)]


def _aggregate(values: list[float]) -> dict:
  return {
      'mean': stats.mean(values),
      'std': stats.std(values),
      'max': max(values) if values else None,
      'per_seed': values,
  }


def _positions(run: dict) -> dict:
  """How the run's evaluation chose positions, and its encoder's max_position (None: not randomized)."""
  limit = None
  match = re.search(r'max_position\s*=\s*(\d+)', str(run.get('spec') or ''))
  if match and 'randomized' in str(run.get('spec')):
    limit = int(match.group(1))
  return {
      'positions': run.get('positions') or '0..L-1',
      'position_draws': run.get('position_draws', 1),
      'max_position': limit,
  }


def summarize(results_by_task: dict[str, dict], title: str | None = None, statistic: str = 'token_mean') -> dict:
  """Task x encoder accuracy in and out of distribution, per token and per sequence, mean (± sample std)
  and max over seeds, recomputed from each task's per-seed values (results.json)."""
  if statistic not in STATISTICS:
    raise config_lib.ConfigError(f'config.suite.statistic={statistic!r} is invalid; allowed: one of {STATISTICS}.')
  tasks, encoders, cells = list(results_by_task), [], {}
  held_out = {}
  for task, results in results_by_task.items():
    lengths, (shortest, train) = results['eval_lengths'], training_range(results)
    ind_lengths = [n for n in lengths if shortest <= n <= train]
    ood_lengths = [n for n in lengths if not shortest <= n <= train]
    for run in results['runs']:
      if run['name'] not in encoders:
        encoders.append(run['name'])
      token = {
          'in_distribution': _aggregate(_per_seed_means(run, ind_lengths, 'by_length')),
          'out_of_distribution': _aggregate(_per_seed_means(run, ood_lengths, 'by_length')),
      }
      sequence = None
      if run.get('exact_match_by_length') or run.get('exact_match_by_length_per_seed'):
        sequence = {
            'in_distribution': _aggregate(_per_seed_means(run, ind_lengths, 'exact_match_by_length')),
            'out_of_distribution': _aggregate(_per_seed_means(run, ood_lengths, 'exact_match_by_length')),
        }
      ind, ood = token['in_distribution'], token['out_of_distribution']
      cells[f'{task}/{run["name"]}'] = {
          # ± is the sample std over seeds (stats.std, ddof 1), as in the studies.
          'in_distribution': ind['mean'],
          'in_distribution_std': ind['std'],
          'out_of_distribution': ood['mean'],
          'out_of_distribution_std': ood['std'],
          'seeds': len(ood['per_seed']),
          'diverged': bool(run.get('diverged', False)),
          'diverged_seeds': sorted(int(seed) for seed in run.get('diverged_seeds') or {}),
          'learned': ind['mean'] is not None and ind['mean'] >= ID_LEARNED,
          'learned_max': ind['max'] is not None and ind['max'] >= ID_LEARNED,
          'token': token,
          'sequence': sequence,
          **_positions(run),
      }
    if results.get('held_out'):
      held_out[task] = _glitch_rates(results['held_out'])
  learned = {t: any(_learned(cells, t, e) for e in encoders) for t in tasks}
  return {
      'title': title,
      'statistic': statistic,
      'plus_minus': stats.PLUS_MINUS,
      'tasks': tasks,
      'encoders': encoders,
      'cells': cells,
      'learned_in_distribution': learned,
      'learned_in_distribution_max': {t: any(_learned(cells, t, e, 'max') for e in encoders) for t in tasks},
      'id_learned_threshold': ID_LEARNED,
      'protocols': {t: protocol_of(results) for t, results in results_by_task.items()},
      'held_out': held_out,
  }


def training_range(results: dict) -> tuple[int, int]:
  """(shortest, longest) training length of a task's study. A range that starts above 1 (selective_copy
  trains at one length, as CoPE's authors do) puts shorter evaluation lengths out of distribution too: its
  dense split has fewer blanks than any training example."""
  trained = (results.get('meta') or {}).get('data', {}).get('train_lengths')
  return (int(trained[0]), int(trained[1])) if trained else (1, int(results['train_length']))


def _glitch_rates(held_out: dict) -> dict:
  """{label (and '<label>@0..L-1'): {set: {length: glitch rate mean/std/max/min over seeds, per seed}}}."""
  out = {}
  for label, entry in held_out['runs'].items():
    for row, suffix in (('positions', ''), ('sequential', SEQUENTIAL_SUFFIX)):
      sets = {}
      for record in entry['per_seed']:
        for name, found in (record or {}).get('sets', {}).items():
          view = found if row == 'positions' else found.get('sequential')
          if view is None:
            continue
          for n, value in view['by_length'].items():
            sets.setdefault(name, {}).setdefault(n, []).append(value)
      if not sets:
        continue
      out[label + suffix] = {
          name: {
              n: {
                  **_aggregate([v['glitch_rate'] for v in values]),
                  'min': min(v['glitch_rate'] for v in values),
                  'scored_tokens': [v['scored_tokens'] for v in values],
                  'task_kwargs': held_out['request']['sets'][name],
              }
              for n, values in by_length.items()
          }
          for name, by_length in sets.items()
      }
  return out


def _learned(cells: dict, task: str, encoder: str, how: str = 'mean') -> bool:
  """Whether `encoder` learned `task` in distribution by its mean (or max) over seeds (False: no result)."""
  cell = cells.get(f'{task}/{encoder}')
  return bool(cell) and bool(cell['learned'] if how == 'mean' else cell.get('learned_max', cell['learned']))


def protocol_of(results: dict) -> dict:
  """How a task was trained and evaluated, read back from its results (what ran, not what was asked)."""
  config = (results.get('meta') or {}).get('config') or {}
  data, train, optim = config.get('data', {}), config.get('train', {}), config.get('optim', {})
  return {
      'train_lengths': [data.get('min_length'), data.get('max_length')],
      'eval_lengths': list(results['eval_lengths']),
      'steps': train.get('steps'),
      'batch_size': train.get('batch_size'),
      'learning_rate': optim.get('learning_rate'),
      'task_kwargs': data.get('task_kwargs') or {},
      'model': config.get('model', {}),
      'reference': ((results.get('meta') or {}).get('data') or {}).get('reference'),
  }


def _statistic(cell: dict, statistic: str, where: str) -> tuple[float | None, float | None]:
  """(value, spread) of a cell by `statistic` ('token_mean', ...) at `where` ('in_distribution' or
  'out_of_distribution'); the spread is the sample std for a mean, None for a max."""
  level, how = statistic.split('_')
  if 'token' not in cell:  # a summary written before both statistics: the per-token mean only
    if statistic != 'token_mean':
      return None, None
    return cell[where], cell.get(f'{where}_std')
  found = (cell.get(level) or {}).get(where)
  if not found:
    return None, None
  return found[how], (found['std'] if how == 'mean' else None)


def _cell_text(cell: dict | None, statistic: str = 'token_mean') -> str:
  if not cell:
    return '—'
  ood, spread = _statistic(cell, statistic, 'out_of_distribution')
  if ood is None:
    return 'diverged' if cell.get('diverged') else '—'
  text = f'{ood:.2f}'
  if cell['seeds'] > 1 and spread is not None:
    text += f' ± {spread:.2f}'
  ind, _ = _statistic(cell, statistic, 'in_distribution')
  if ind is not None:
    text += f' ({ind:.2f})'
  learned = cell['learned'] if statistic.endswith('mean') else cell.get('learned_max', cell['learned'])
  return text if learned else text + ' ✗'


def caption(statistic: str) -> str:
  """What a table of `statistic` shows, and what its ± is."""
  level, how = statistic.split('_')
  spread = f'± : {stats.PLUS_MINUS}' if how == 'mean' else 'the max over seeds, so no ±'
  return (
      f'{STATISTIC_TEXT[level][0].upper()}{STATISTIC_TEXT[level][1:]}, {"mean" if how == "mean" else "max"} over '
      f'seeds, averaged over the lengths beyond the training lengths (and below them, for a task trained at '
      f"lengths from above 1) ({spread}; in brackets: the same within them). ✗: this encoder's per-token "
      f'accuracy within the training lengths ({how} over seeds) is below {ID_LEARNED}, so it did not learn the '
      'task and its number beyond them says nothing about length generalization.'
  )


def markdown(summary: dict, statistic: str | None = None) -> str:
  """The summary table by `statistic` (default the summary's): out-of-distribution accuracy (± the sample
  std over seeds for a mean; in-distribution in brackets; ✗ where that encoder did not learn the task in
  distribution), and a last row counting the tasks each encoder learned in distribution."""
  statistic = statistic or summary.get('statistic') or 'token_mean'
  if statistic not in STATISTICS:
    raise config_lib.ConfigError(f'config.suite.statistic={statistic!r} is invalid; allowed: one of {STATISTICS}.')
  how = statistic.split('_')[1]
  encoders = summary['encoders']
  task_learned = summary['learned_in_distribution']
  if how == 'max':
    task_learned = summary.get('learned_in_distribution_max', task_learned)
  lines = ['| task | ' + ' | '.join(encoders) + ' |', '|---' * (len(encoders) + 1) + '|']
  for task in summary['tasks']:
    mark = '' if task_learned[task] else ' (not learned)'
    cells = [_cell_text(summary['cells'].get(f'{task}/{e}'), statistic) for e in encoders]
    lines.append(f'| {task}{mark} | ' + ' | '.join(cells) + ' |')
  counts = [sum(_learned(summary['cells'], t, e, how) for t in summary['tasks']) for e in encoders]
  lines.append(
      f'| *learned in distribution (of {len(summary["tasks"])})* | ' + ' | '.join(str(c) for c in counts) + ' |'
  )
  return '\n'.join(lines) + '\n'


def positions_markdown(summary: dict) -> str:
  """Per encoder: how its evaluation chose positions (random draws or 0..L-1) and its max_position per task."""
  lines = ['| encoder | evaluation positions | max_position by task |', '|---|---|---|']
  for encoder in summary['encoders']:
    cells = [(t, summary['cells'].get(f'{t}/{encoder}')) for t in summary['tasks']]
    cells = [(t, c) for t, c in cells if c]
    if not cells:
      continue
    described = sorted({str(c.get('positions') or '0..L-1') for _, c in cells})
    by_task = [(t, c['max_position']) for t, c in cells if c.get('max_position') is not None]
    if len(by_task) > 1 and len({v for _, v in by_task}) == 1:
      limits = f'{by_task[0][1]} (every task)'
    else:
      limits = ', '.join(f'{t} {v}' for t, v in by_task) or '—'
    lines.append(f'| {encoder} | {"; ".join(described)} | {limits} |')
  return '\n'.join(lines) + '\n'


def held_out_markdown(summary: dict) -> str:
  """The held-out sets' glitch rates (errors per thousand scored tokens) per task and encoder: mean ± sample
  std over seeds, the best seed, and every seed's value."""
  lines = []
  for task, by_encoder in (summary.get('held_out') or {}).items():
    names = sorted({name for sets in by_encoder.values() for name in sets})
    lines += [
        f'**{task}**: glitch rate, errors per thousand scored tokens (1000 × (1 − per-token accuracy); '
        'for flip_flop the reads), mean ± sample std over seeds (ddof 1) [best seed; every seed].\n',
        '| encoder | ' + ' | '.join(names) + ' |',
        '|---' * (len(names) + 1) + '|',
    ]
    for encoder, sets in by_encoder.items():
      texts = []
      for name in names:
        parts = []
        for n, cell in (sets.get(name) or {}).items():
          text = f'{cell["mean"]:.1f}' + (f' ± {cell["std"]:.1f}' if cell['std'] is not None else '')
          text += f' [{cell["min"]:.1f}; ' + ', '.join(f'{v:.1f}' for v in cell['per_seed']) + ']'
          parts.append(f'{text} at {n}' if len(sets[name]) > 1 else text)
        texts.append('; '.join(parts) or '—')
      lines.append(f'| {encoder} | ' + ' | '.join(texts) + ' |')
    described = []
    for name in names:
      cells = next(sets[name] for sets in by_encoder.values() if name in sets)
      text = f'{name}: {next(iter(cells.values()))["task_kwargs"]} at length {", ".join(cells)}'
      for n in cells:
        reads = _fewest_scored(by_encoder, name, n)
        if reads:
          text += (
              f'; {reads:,.0f} scored tokens a run at {n}, so a run without an error there bounds its rate below '
              f'{1000 * stats.clean_run_bound(reads):.2g} per thousand (95%, the rule of three: 3 / tokens)'
          )
      described.append(text)
    lines.append(f'\nSets: {"; ".join(described)}.\n')
  return '\n'.join(lines) + ('\n' if lines else '')


def _fewest_scored(by_encoder: dict, name: str, length: str) -> float | None:
  """The fewest scored tokens (flip_flop: reads) any run of any encoder had on held-out set `name` at `length`
  (every run scores the same examples, so they agree unless a random-position row drew fewer)."""
  found = [
      float(v)
      for sets in by_encoder.values()
      for v in ((sets.get(name) or {}).get(length) or {}).get('scored_tokens') or ()
      if v is not None
  ]
  return min(found) if found else None


def _values(protocols: dict, key: str) -> str:
  return ' or '.join(str(v) for v in sorted({p[key] for p in protocols.values() if p.get(key) is not None}))


def protocol_markdown(summary: dict) -> str:
  """Each task's protocol as it ran: training and evaluation lengths, steps, task arguments."""
  protocols = summary.get('protocols') or {}
  # Compared with their optional keys at the defaults: results whose config.json left them out (written from a
  # ConfigDict) and results written from the typed Config (every key) describe the same model alike.
  models = {
      json.dumps(config_lib.with_defaults({'model': p['model']})['model'], sort_keys=True)
      for p in protocols.values()
      if p.get('model')
  }
  lines = []
  if len(models) == 1:
    model = json.loads(models.pop())
    lines.append(
        f'Model: {model.get("num_layers")} layers, model_dim {model.get("model_dim")}, '
        f'{model.get("num_heads")} heads, MLP ratio {model.get("mlp_ratio")}, dropout '
        f'{model.get("dropout_rate")}. Adam, learning rate {_values(protocols, "learning_rate")}, '
        f'batch {_values(protocols, "batch_size")}.\n'
    )
  lines += ['| task | trained on | evaluated at | steps | task arguments |', '|---|---|---|---|---|']
  for task in summary['tasks']:
    p = protocols.get(task)
    if p:
      low, high = p['train_lengths']
      kwargs = ', '.join(f'{k}={v}' for k, v in sorted(p['task_kwargs'].items())) or '—'
      lines.append(
          f'| {task} | {low}..{high} | {", ".join(map(str, p["eval_lengths"]))} | {p["steps"]:,} | ' f'{kwargs} |'
      )
  return '\n'.join(lines) + '\n'


def write_summary(summary: dict, workdir: str) -> dict[str, str]:
  """summary.json, README.md (the table) and heatmap.png in `workdir`."""
  os.makedirs(workdir, exist_ok=True)
  paths = {'json': report.write_json(summary, os.path.join(workdir, SUMMARY_FILE))}
  path = os.path.join(workdir, 'README.md')
  notes = ''
  if os.path.exists(path):  # What was written by hand below the marker survives a rerun.
    with open(path) as f:
      previous = f.read()
    if NOTES_MARKER in previous:
      notes = previous[previous.index(NOTES_MARKER) + len(NOTES_MARKER) :]
  statistic = summary.get('statistic') or 'token_mean'
  has_sequence = any(c.get('sequence') for c in summary['cells'].values())
  others = ''.join(
      (
          f'\n### {s}\n\n{caption(s)}\n\n{markdown(summary, s)}'
          if has_sequence or s.startswith('token')
          else f'\n### {s}\n\nNo per-sequence accuracy in these results (they were evaluated before it was recorded).\n'
      )
      for s in STATISTICS
      if s != statistic
  )
  held_out = held_out_markdown(summary)
  files.write_text_atomic(  # The one atomic writer (relpos_jax.files): an interrupted write leaves the old page.
      path,
      f'# {summary.get("title") or "Length-generalization suite"}\n\n'
      f'Statistic: {statistic}. {caption(statistic)} Tasks marked "not learned" are not learned by any '
      'encoder.\n\n'
      + markdown(summary, statistic)
      + f'\n![{statistic}: accuracy beyond the training lengths](heatmap.png)\n\n## The other statistics\n'
      + others
      + '\n## Evaluation positions\n\nHow each encoder was evaluated, as its results record it. The suite '
      'evaluates an encoder trained on random positions at ordered random positions from [0, max_position) '
      f"(draws deterministic per seed), and again at 0..L-1 in its row '<label>{SEQUENTIAL_SUFFIX}'; results "
      'that record no positions predate that and were evaluated at 0..L-1, which is what they read here.\n\n'
      + positions_markdown(summary)
      + (f'\n## Held-out sets\n\n{held_out}' if held_out else '')
      + '\n## Protocol\n\n'
      + protocol_markdown(summary)
      + '\n'
      + NOTES_MARKER
      + (notes or '\n'),
  )
  paths['markdown'] = path
  paths['heatmap'] = heatmap(summary, os.path.join(workdir, 'heatmap.png'))
  return paths


def heatmap(summary: dict, path: str) -> str:
  """Out-of-distribution accuracy by the summary's statistic, task x encoder (blank: no result; greyed with ✗:
  that encoder did not learn the task in distribution, so its colour is not evidence)."""
  import numpy as np
  from matplotlib.figure import Figure
  from matplotlib.patches import Rectangle

  statistic = summary.get('statistic') or 'token_mean'
  how = statistic.split('_')[1]
  tasks, encoders = summary['tasks'], summary['encoders']
  grid = np.full((len(tasks), len(encoders)), np.nan)
  learned = np.zeros(grid.shape, bool)
  for i, task in enumerate(tasks):
    for j, encoder in enumerate(encoders):
      cell = summary['cells'].get(f'{task}/{encoder}')
      value = _statistic(cell, statistic, 'out_of_distribution')[0] if cell else None
      if value is not None:
        grid[i, j] = value
        learned[i, j] = _learned(summary['cells'], task, encoder, how)
  task_learned = summary['learned_in_distribution']
  if how == 'max':
    task_learned = summary.get('learned_in_distribution_max', task_learned)
  fig = Figure(figsize=(1.1 * len(encoders) + 3, 0.4 * len(tasks) + 1.5))
  ax = fig.subplots()
  image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap='viridis', aspect='auto')
  ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha='right')
  ax.set_yticks(range(len(tasks)), [t if task_learned[t] else f'{t} (not learned)' for t in tasks])
  for i in range(len(tasks)):
    for j in range(len(encoders)):
      if np.isnan(grid[i, j]):
        continue
      if learned[i, j]:
        ax.text(
            j,
            i,
            f'{grid[i, j]:.2f}',
            ha='center',
            va='center',
            fontsize=7,
            color='white' if grid[i, j] < 0.6 else 'black',
        )
      else:
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor='lightgrey', edgecolor='white', alpha=0.85))
        ax.text(j, i, f'{grid[i, j]:.2f} ✗', ha='center', va='center', fontsize=7, color='dimgrey')
  fig.colorbar(image, ax=ax, label=f'{statistic}: accuracy beyond the training lengths')
  ax.set_title(f'grey ✗: not learned within the training lengths (< {ID_LEARNED})', fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  return path

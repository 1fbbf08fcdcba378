"""The benchmark suite: one length-generalization study per task, and a summary across tasks.

    summary = run_suite(config, workdir)   # config: configs/studies/suite.py (or suite_published.py, ...)

A suite config is an algorithmic-task training config (configs/algorithmic.py) plus a `suite` section (each
suite its own file, configs/studies/suite*.py):

  suite.encoders    the study entries every task trains ('label: spec' or a bare spec)
  suite.seeds       the seeds every (task, encoder) is trained with
  suite.tasks       the task names, each with its protocol in `suite.protocols.<task>`
  suite.protocols   per task: `min_length`, `max_length` (training lengths), `eval_lengths`, and optionally
                    `task_kwargs`, `steps`, `loss_reduction`, `num_buckets` (else the base config's), `lr_grid`
                    (else the suite's) and `held_out` (below)
  suite.lr_grid     optional: the learning rates each encoder tries at the first seed (the study's lr_grid)
  suite.selection_seed  optional: the seed the grid trains at instead, outside suite.seeds and not reported
                    (the study's selection_seed: the cross-corpus protocol); it needs a grid for every task
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
study is: finished runs are reused, an interrupted one resumes) and then writes the summary
(`relpos_jax.study.suite_summary`, the room that reads the studies' results back and renders them):

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
import os
import re
import time
import warnings
from typing import Callable, Sequence

import jax

from relpos_jax.data.tasks import registry
from relpos_jax.study import report
from relpos_jax.study.plan import Study, StudyConfig, check_selection_seed_key, random_position_limits
from relpos_jax.study.record import LM_LAYOUT, RESULT_FILE, RunRecord
from relpos_jax.study.suite_summary import HELD_OUT_FILE, STATISTICS, load_results, summarize, write_summary
from relpos_jax.study.runner import SEQUENTIAL_SUFFIX, check_study, parse_entries, run_config, run_study_config
from relpos_jax.train import config as config_lib
from relpos_jax.train import config_files, data_sources, loop, schema

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
  # This task's learning-rate grid, over `suite.lr_grid` (a task whose choices sat on the suite grid's top
  # widens its own grid, and its finished runs at the shared rates are reused).
  lr_grid: tuple[float, ...] | None = schema.key(None, gt=0)
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
  # The seed the rate grid trains at, outside `seeds` (the cross-corpus protocol, issue 52): its runs are scored
  # on validation at the training length only and never reported; None: the grid trains at the first seed, which
  # is reported too (the suites committed before it).
  selection_seed: int | None = schema.key(None, ge=0, lt=config_lib.SEED_LIMIT)


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
  gridless = [t for t in suite.tasks if protocols[t].lr_grid is None and suite.lr_grid is None]
  check_selection_seed_key(
      'config.suite.',
      suite.selection_seed,
      suite.seeds,
      f"a rate grid: tasks {gridless} have none (config.suite.lr_grid or their protocols' lr_grid)"
      if gridless
      else None,
  )
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
  data = {
      'task': task,
      'task_kwargs': dict(protocol.task_kwargs or {}),
      'min_length': protocol.min_length,
      'max_length': protocol.max_length,
  }
  for name in ('loss_reduction', 'num_buckets'):
    if getattr(protocol, name) is not None:
      data[name] = getattr(protocol, name)
  run = base.derive(
      data=data,
      train=None if protocol.steps is None else {'steps': protocol.steps},
      eval={'lengths': tuple(protocol.eval_lengths)},
  )
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
  lr_grid = protocol.lr_grid if protocol.lr_grid is not None else suite.lr_grid
  if lr_grid is not None:
    section['lr_grid'] = tuple(lr_grid)
  if suite.selection_seed is not None:
    section['selection_seed'] = int(suite.selection_seed)
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
  evaluation = {'lengths': held_out_lengths(protocol)}
  examples = held_out_examples(protocol, name)
  if examples is not None:
    evaluation['num_examples'] = examples
  return run.derive(
      data={'task_kwargs': {**dict(protocol.task_kwargs or {}), **protocol.held_out[name]}}, eval=evaluation
  )


def held_out_examples(protocol: Protocol, name: str) -> int | None:
  """The examples of held-out set `name`: its own count, else the protocol's, else None (the study's)."""
  by_set = protocol.held_out_examples_by_set or {}
  if name in by_set:
    return int(by_set[name])
  return None if protocol.held_out_examples is None else int(protocol.held_out_examples)


def _check_max_position(task: str, parsed: StudyConfig, longest: int) -> None:
  """A randomized encoder's max_position covers the task's longest test sequence (else its evaluation at
  random positions cannot draw them)."""
  for entry, spec, limit in random_position_limits(parsed.base, parse_entries(parsed.study.encoders)):
    if limit < longest:
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
    except ValueError as e:
      raise config_lib.ConfigError(f'config.suite task {task!r}: {e}') from None
    # The task's bound first (tokens, held-out lengths too): sharper than the study's own (evaluation lengths).
    _check_max_position(task, study, longest_test_sequence(base, task, protocol))
    try:
      check_study(study.base, study.study)
    except ValueError as e:
      raise config_lib.ConfigError(f'config.suite task {task!r}: {e}') from None
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
      result = RunRecord.read(os.path.join(run_dir, RESULT_FILE), LM_LAYOUT).to_json()
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

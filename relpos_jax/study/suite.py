"""The benchmark suite: one length-generalization study per task, and a summary across tasks.

    summary = run_suite(config, workdir)          # config: configs/suite.py (:cpu, or :published)

A suite config is an algorithmic-task training config (configs/algorithmic.py) plus a `suite` section:

  suite.encoders    the study entries every task trains ('label: spec' or a bare spec)
  suite.seeds       the seeds every (task, encoder) is trained with
  suite.tasks       the task names, each with its protocol in `suite.protocols.<task>`
  suite.protocols   per task: `min_length`, `max_length` (training lengths), `eval_lengths`, and optionally
                    `task_kwargs`, `steps`, `loss_reduction`, `num_buckets` (else the base config's)

For every task the suite runs `relpos_jax.study.run_study` in `<workdir>/<task>/` (resumable exactly as a
study is: finished runs are reused, an interrupted one resumes) and then writes the summary:

  <workdir>/summary.json   task x encoder: mean accuracy in distribution (lengths <= the longest trained)
                           and out of distribution (longer), each the mean over seeds, with the spread
  <workdir>/README.md      the summary table
  <workdir>/heatmap.png    mean out-of-distribution accuracy, task x encoder

A task whose in-distribution accuracy stays low was not learned at this budget: its out-of-distribution
numbers say nothing about the encoders, so the table marks it (`ID_LEARNED`).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import math
import os
from typing import Callable, Sequence

import jax
import ml_collections

from relpos_jax.study import report
from relpos_jax.study.runner import run_study, validate_study, write_outputs
from relpos_jax.train import config as config_lib

SUMMARY_FILE = 'summary.json'
# In-distribution accuracy below this: the task is not learned, whatever the encoder (a judgement call:
# chance is 0.5 for the binary classification tasks, lower for the transductions).
ID_LEARNED = 0.9


@dataclasses.dataclass(frozen=True)
class Protocol:
  """How one task is trained and evaluated in the suite."""
  min_length: int = config_lib.key(ge=1)
  max_length: int = config_lib.key(ge=1)
  eval_lengths: tuple[int, ...] = config_lib.key(ge=1)
  task_kwargs: dict | None = config_lib.key(None)
  steps: int | None = config_lib.key(None, ge=1)
  loss_reduction: str | None = config_lib.key(None, choices=(None, *config_lib.LOSS_REDUCTIONS))
  num_buckets: int | None = config_lib.key(None, ge=1)


@dataclasses.dataclass(frozen=True)
class Suite:
  """The `suite` section of a suite config."""
  encoders: tuple[str, ...] = config_lib.key()
  seeds: tuple[int, ...] = config_lib.key(ge=0)
  tasks: tuple[str, ...] = config_lib.key()
  protocols: dict = config_lib.key()
  title: str = config_lib.key('Length-generalization suite')


def split_config(config) -> tuple[ml_collections.ConfigDict, Suite, dict[str, Protocol]]:
  """(the base training config, the suite section, each task's protocol), checked."""
  if 'suite' not in config:
    raise config_lib.ConfigError('missing key config.suite: a suite config is a task training config plus a '
                                 'suite section (see configs/suite.py).')
  as_dict = config.to_dict()
  suite = config_lib.parse_section(Suite, 'suite', as_dict.pop('suite'))
  if not suite.tasks or not suite.encoders or not suite.seeds:
    raise config_lib.ConfigError(f'config.suite needs at least one task, encoder and seed; got tasks='
                                 f'{suite.tasks!r}, encoders={suite.encoders!r}, seeds={suite.seeds!r}.')
  missing = [t for t in suite.tasks if t not in suite.protocols]
  if missing:
    raise config_lib.ConfigError(f'config.suite.tasks names {missing} without a protocol; add '
                                 f'config.suite.protocols.<task> (have: {sorted(suite.protocols)}).')
  protocols = {t: config_lib.parse_section(Protocol, f'suite.protocols.{t}', suite.protocols[t])
               for t in suite.tasks}
  return ml_collections.ConfigDict(as_dict), suite, protocols


def study_config(base: ml_collections.ConfigDict, suite: Suite, task: str,
                 protocol: Protocol) -> ml_collections.ConfigDict:
  """The study config of one task: the base run with the task's protocol and the suite's encoders."""
  config = copy.deepcopy(base)
  config.data.task = task
  config.data.task_kwargs = ml_collections.ConfigDict(dict(protocol.task_kwargs or {}))
  config.data.min_length = protocol.min_length
  config.data.max_length = protocol.max_length
  for name in ('loss_reduction', 'num_buckets'):
    if getattr(protocol, name) is not None:
      config.data[name] = getattr(protocol, name)
  if protocol.steps is not None:
    config.train.steps = protocol.steps
  config.eval.lengths = tuple(protocol.eval_lengths)
  config.study = ml_collections.ConfigDict({
      'encoders': tuple(suite.encoders), 'seeds': tuple(suite.seeds),
      'title': f'{task}: trained on lengths {protocol.min_length}..{protocol.max_length}',
      'description': f'Per-output-token accuracy on {task}; lengths <= {protocol.max_length} are in distribution.'})
  return config


def validate_suite(config) -> list[tuple[str, ml_collections.ConfigDict]]:
  """Every task's study config, each checked as its study checks it, before anything trains."""
  base, suite, protocols = split_config(config)
  studies = []
  for task in suite.tasks:
    study = study_config(base, suite, task, protocols[task])
    try:
      validate_study(study)
    except ValueError as e:
      raise config_lib.ConfigError(f'config.suite task {task!r}: {e}') from None
    studies.append((task, study))
  return studies


def run_suite(config, workdir: str | os.PathLike, *, tasks: Sequence[str] | None = None,
              train_fn: Callable | None = None) -> dict:
  """Runs (or resumes) every task's study in `<workdir>/<task>`, then writes the summary; returns it.

  `tasks`: a subset of `config.suite.tasks` to run now (e.g. one per process); the summary covers every
  task whose results exist.
  """
  workdir = os.fspath(workdir)
  studies = validate_suite(config)
  if tasks is not None:
    unknown = sorted(set(tasks) - {t for t, _ in studies})
    if unknown:
      raise config_lib.ConfigError(f'tasks {unknown} are not in config.suite.tasks ({[t for t, _ in studies]}).')
  for task, study in studies:
    if tasks is None or task in tasks:
      results = run_study(study, os.path.join(workdir, task), train_fn=train_fn)
      write_outputs(results, os.path.join(workdir, task))
      # Every task compiles its own train and eval programs (new shapes, vocabularies, encoders); one
      # process running the whole grid kept them all and ran out of memory (LLVM could not allocate)
      # after about ten tasks on a 24 GiB machine. Nothing of a finished task is needed again.
      jax.clear_caches()
      gc.collect()
  summary = summarize(load_results(workdir, [t for t, _ in studies]))
  write_summary(summary, workdir)
  return summary


def load_results(workdir: str, tasks: Sequence[str]) -> dict[str, dict]:
  """{task: results.json} for every task of `tasks` that has results in `workdir`."""
  found = {}
  for task in tasks:
    path = os.path.join(workdir, task, 'results.json')
    if os.path.exists(path):
      found[task] = report.load_json(path)
  return found


def _seed_values(run: dict, length) -> list[float]:
  per_seed = run.get('by_length_per_seed', {}).get(str(length))
  values = per_seed if per_seed is not None else [run['by_length'].get(str(length))]
  return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def _split_means(run: dict, train_length: int, lengths) -> tuple[list[float], list[float]]:
  """Per seed: (mean accuracy over in-distribution lengths, mean over longer lengths)."""
  def per_seed(selected):
    columns = [_seed_values(run, n) for n in selected]
    if not columns or not all(columns):
      return []
    return [sum(c[k] for c in columns) / len(columns) for k in range(min(map(len, columns)))]
  return (per_seed([n for n in lengths if n <= train_length]),
          per_seed([n for n in lengths if n > train_length]))


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
  if not values:
    return None, None
  mean = sum(values) / len(values)
  return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def summarize(results_by_task: dict[str, dict]) -> dict:
  """Task x encoder means (over seeds) in and out of distribution, from each task's results.json."""
  tasks, encoders, cells = list(results_by_task), [], {}
  for task, results in results_by_task.items():
    for run in results['runs']:
      if run['name'] not in encoders:
        encoders.append(run['name'])
      ind, ood = _split_means(run, results['train_length'], results['eval_lengths'])
      (ind_mean, ind_std), (ood_mean, ood_std) = _mean_std(ind), _mean_std(ood)
      cells[f'{task}/{run["name"]}'] = {
          'in_distribution': ind_mean, 'in_distribution_std': ind_std, 'out_of_distribution': ood_mean,
          'out_of_distribution_std': ood_std, 'seeds': len(ood), 'diverged': bool(run.get('diverged', False))}
  learned = {t: any((cells.get(f'{t}/{e}') or {}).get('in_distribution') is not None
                    and cells[f'{t}/{e}']['in_distribution'] >= ID_LEARNED for e in encoders) for t in tasks}
  return {'tasks': tasks, 'encoders': encoders, 'cells': cells, 'learned_in_distribution': learned,
          'id_learned_threshold': ID_LEARNED}


def _cell_text(cell: dict | None) -> str:
  if not cell or cell['out_of_distribution'] is None:
    return '—'
  text = f'{cell["out_of_distribution"]:.2f}'
  if cell['seeds'] > 1:
    text += f' ± {cell["out_of_distribution_std"]:.2f}'
  if cell['in_distribution'] is not None:
    text += f' ({cell["in_distribution"]:.2f})'
  return text


def markdown(summary: dict) -> str:
  """The summary table: out-of-distribution accuracy ± std over seeds (in-distribution in brackets)."""
  lines = ['| task | ' + ' | '.join(summary['encoders']) + ' |', '|---' * (len(summary['encoders']) + 1) + '|']
  for task in summary['tasks']:
    mark = '' if summary['learned_in_distribution'][task] else ' (not learned)'
    cells = [_cell_text(summary['cells'].get(f'{task}/{e}')) for e in summary['encoders']]
    lines.append(f'| {task}{mark} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def write_summary(summary: dict, workdir: str) -> dict[str, str]:
  """summary.json, README.md (the table) and heatmap.png in `workdir`."""
  os.makedirs(workdir, exist_ok=True)
  paths = {'json': report.write_json(summary, os.path.join(workdir, SUMMARY_FILE))}
  path = os.path.join(workdir, 'README.md')
  with open(path + '.tmp', 'w') as f:
    f.write('Mean accuracy beyond the training lengths (± std over seeds; in brackets: within them). Tasks '
            f'marked "not learned" reach no in-distribution accuracy of {ID_LEARNED} with any encoder: their '
            'out-of-distribution numbers say nothing about the encoders.\n\n' + markdown(summary))
  os.replace(path + '.tmp', path)
  paths['markdown'] = path
  paths['heatmap'] = heatmap(summary, os.path.join(workdir, 'heatmap.png'))
  return paths


def heatmap(summary: dict, path: str) -> str:
  """Mean out-of-distribution accuracy, task x encoder (blank: no result; hatched rows: not learned)."""
  import numpy as np
  from matplotlib.figure import Figure
  tasks, encoders = summary['tasks'], summary['encoders']
  grid = np.full((len(tasks), len(encoders)), np.nan)
  for i, task in enumerate(tasks):
    for j, encoder in enumerate(encoders):
      cell = summary['cells'].get(f'{task}/{encoder}')
      if cell and cell['out_of_distribution'] is not None:
        grid[i, j] = cell['out_of_distribution']
  fig = Figure(figsize=(1.1 * len(encoders) + 3, 0.4 * len(tasks) + 1.5))
  ax = fig.subplots()
  image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap='viridis', aspect='auto')
  ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha='right')
  ax.set_yticks(range(len(tasks)), [t if summary['learned_in_distribution'][t] else f'{t} (not learned)'
                                    for t in tasks])
  for i in range(len(tasks)):
    for j in range(len(encoders)):
      if not np.isnan(grid[i, j]):
        ax.text(j, i, f'{grid[i, j]:.2f}', ha='center', va='center', fontsize=7,
                color='white' if grid[i, j] < 0.6 else 'black')
  fig.colorbar(image, ax=ax, label='mean accuracy beyond the training lengths')
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  return path

"""The benchmark suite: one length-generalization study per task, and a summary across tasks.

    summary = run_suite(config, workdir)   # config: configs/algorithmic.py:suite (or :published,suite)

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
  <workdir>/README.md      the summary table, the heatmap and each task's protocol as it ran; anything
                           written below its last line (NOTES_MARKER) is kept when it is rewritten
  <workdir>/heatmap.png    mean out-of-distribution accuracy, task x encoder

An encoder whose in-distribution accuracy on a task stays below `ID_LEARNED` did not learn it at this budget:
its out-of-distribution number says nothing about length generalization, so the table and the heatmap mark
that cell, and a task no encoder learned is marked as a whole.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import math
import os
from typing import Callable, Sequence

import jax
import ml_collections

from relpos_jax import files
from relpos_jax.study import report, stats
from relpos_jax.study.runner import run_study, validate_study, write_outputs
from relpos_jax.train import config as config_lib

SUMMARY_FILE = 'summary.json'
# In-distribution accuracy below this: the task is not learned, whatever the encoder (a judgement call:
# chance is 0.5 for the binary classification tasks, lower for the transductions).
ID_LEARNED = 0.9
# The generated README ends with this line; what follows it (findings written by hand) is kept on rewrite.
NOTES_MARKER = '<!-- notes: kept when the summary is rewritten -->'


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
    raise config_lib.ConfigError(
        'missing key config.suite: a suite config is a task training config plus a '
        "suite section (see configs/algorithmic.py's `suite` variant)."
    )
  as_dict = config.to_dict()
  suite = config_lib.parse_section(Suite, 'suite', as_dict.pop('suite'))
  if not suite.tasks or not suite.encoders or not suite.seeds:
    raise config_lib.ConfigError(
        f'config.suite needs at least one task, encoder and seed; got tasks='
        f'{suite.tasks!r}, encoders={suite.encoders!r}, seeds={suite.seeds!r}.'
    )
  missing = [t for t in suite.tasks if t not in suite.protocols]
  if missing:
    raise config_lib.ConfigError(
        f'config.suite.tasks names {missing} without a protocol; add '
        f'config.suite.protocols.<task> (have: {sorted(suite.protocols)}).'
    )
  protocols = {t: config_lib.parse_section(Protocol, f'suite.protocols.{t}', suite.protocols[t]) for t in suite.tasks}
  return ml_collections.ConfigDict(as_dict), suite, protocols


def study_config(
    base: ml_collections.ConfigDict, suite: Suite, task: str, protocol: Protocol
) -> ml_collections.ConfigDict:
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
  config.study = ml_collections.ConfigDict(
      {
          'encoders': tuple(suite.encoders),
          'seeds': tuple(suite.seeds),
          'title': f'{task}: trained on lengths {protocol.min_length}..{protocol.max_length}',
          'description': f'Per-output-token accuracy on {task}; lengths <= {protocol.max_length} are in distribution.',
      }
  )
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


def run_suite(
    config, workdir: str | os.PathLike, *, tasks: Sequence[str] | None = None, train_fn: Callable | None = None
) -> dict:
  """Runs (or resumes) every task's study in `<workdir>/<task>`, then writes the summary; returns it.

  `tasks`: a subset of `config.suite.tasks` to run now (e.g. one per process); the summary covers every
  task whose results exist.
  """
  workdir = os.fspath(workdir)
  studies = validate_suite(config)
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
      results = run_study(study, os.path.join(workdir, task), train_fn=train_fn)
      write_outputs(results, os.path.join(workdir, task))
      # Every task compiles its own train and eval programs (new shapes, vocabularies, encoders); one
      # process running the whole grid kept them all and ran out of memory (LLVM could not allocate)
      # after about ten tasks on a 24 GiB machine. Nothing of a finished task is needed again.
      jax.clear_caches()
      gc.collect()
  summary = summarize(load_results(workdir, [t for t, _ in studies]), title=config.suite.title)
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

  return (per_seed([n for n in lengths if n <= train_length]), per_seed([n for n in lengths if n > train_length]))


def summarize(results_by_task: dict[str, dict], title: str | None = None) -> dict:
  """Task x encoder means (over seeds) in and out of distribution, from each task's results.json."""
  tasks, encoders, cells = list(results_by_task), [], {}
  for task, results in results_by_task.items():
    for run in results['runs']:
      if run['name'] not in encoders:
        encoders.append(run['name'])
      ind, ood = _split_means(run, results['train_length'], results['eval_lengths'])
      # ± is the sample std over seeds (stats.std, ddof 1), as in the studies.
      ind_mean, ind_std, ood_mean, ood_std = stats.mean(ind), stats.std(ind), stats.mean(ood), stats.std(ood)
      cells[f'{task}/{run["name"]}'] = {
          'in_distribution': ind_mean,
          'in_distribution_std': ind_std,
          'out_of_distribution': ood_mean,
          'out_of_distribution_std': ood_std,
          'seeds': len(ood),
          'diverged': bool(run.get('diverged', False)),
          'learned': ind_mean is not None and ind_mean >= ID_LEARNED,
      }
  learned = {t: any(_learned(cells, t, e) for e in encoders) for t in tasks}
  return {
      'title': title,
      'tasks': tasks,
      'encoders': encoders,
      'cells': cells,
      'learned_in_distribution': learned,
      'id_learned_threshold': ID_LEARNED,
      'protocols': {t: protocol_of(results) for t, results in results_by_task.items()},
  }


def _learned(cells: dict, task: str, encoder: str) -> bool:
  """Whether `encoder` learned `task` in distribution (False where it has no result)."""
  return f'{task}/{encoder}' in cells and cells[f'{task}/{encoder}']['learned']


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


def _cell_text(cell: dict | None) -> str:
  if not cell or cell['out_of_distribution'] is None:
    return '—'
  text = f'{cell["out_of_distribution"]:.2f}'
  if cell['seeds'] > 1 and cell['out_of_distribution_std'] is not None:
    text += f' ± {cell["out_of_distribution_std"]:.2f}'
  if cell['in_distribution'] is not None:
    text += f' ({cell["in_distribution"]:.2f})'
  return text if cell['learned'] else text + ' ✗'


def markdown(summary: dict) -> str:
  """The summary table: out-of-distribution accuracy ± std over seeds (in-distribution in brackets; ✗ where
  that encoder did not learn the task in distribution), and a last row counting the tasks each encoder
  learned in distribution."""
  encoders = summary['encoders']
  lines = ['| task | ' + ' | '.join(encoders) + ' |', '|---' * (len(encoders) + 1) + '|']
  for task in summary['tasks']:
    mark = '' if summary['learned_in_distribution'][task] else ' (not learned)'
    cells = [_cell_text(summary['cells'].get(f'{task}/{e}')) for e in encoders]
    lines.append(f'| {task}{mark} | ' + ' | '.join(cells) + ' |')
  counts = [sum(_learned(summary['cells'], t, e) for t in summary['tasks']) for e in encoders]
  lines.append(
      f'| *learned in distribution (of {len(summary["tasks"])})* | ' + ' | '.join(str(c) for c in counts) + ' |'
  )
  return '\n'.join(lines) + '\n'


def _values(protocols: dict, key: str) -> str:
  return ' or '.join(str(v) for v in sorted({p[key] for p in protocols.values() if p.get(key) is not None}))


def protocol_markdown(summary: dict) -> str:
  """Each task's protocol as it ran: training and evaluation lengths, steps, task arguments."""
  protocols = summary.get('protocols') or {}
  models = {json.dumps(p['model'], sort_keys=True) for p in protocols.values() if p.get('model')}
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
  # issue 23: through the one atomic writer (relpos_jax.files).
  files.write_text_atomic(
      path,
      f'# {summary.get("title") or "Length-generalization suite"}\n\n'
      f'Mean accuracy beyond the training lengths (± : {stats.PLUS_MINUS}; in brackets: within them). ✗: this '
      f"encoder's mean accuracy within the training lengths is below {ID_LEARNED}, so it did not learn "
      'the task and its number beyond them says nothing about length generalization. Tasks marked "not '
      'learned" are not learned by any encoder.\n\n'
      + markdown(summary)
      + '\n![mean accuracy beyond the training lengths](heatmap.png)\n\n## Protocol\n\n'
      + protocol_markdown(summary)
      + '\n'
      + NOTES_MARKER
      + (notes or '\n'),
  )
  paths['markdown'] = path
  paths['heatmap'] = heatmap(summary, os.path.join(workdir, 'heatmap.png'))
  return paths


def heatmap(summary: dict, path: str) -> str:
  """Mean out-of-distribution accuracy, task x encoder (blank: no result; greyed with ✗: that encoder did not
  learn the task in distribution, so its colour is not evidence)."""
  import numpy as np
  from matplotlib.figure import Figure
  from matplotlib.patches import Rectangle

  tasks, encoders = summary['tasks'], summary['encoders']
  grid = np.full((len(tasks), len(encoders)), np.nan)
  learned = np.zeros(grid.shape, bool)
  for i, task in enumerate(tasks):
    for j, encoder in enumerate(encoders):
      cell = summary['cells'].get(f'{task}/{encoder}')
      if cell and cell['out_of_distribution'] is not None:
        grid[i, j] = cell['out_of_distribution']
        learned[i, j] = cell['learned']
  fig = Figure(figsize=(1.1 * len(encoders) + 3, 0.4 * len(tasks) + 1.5))
  ax = fig.subplots()
  image = ax.imshow(grid, vmin=0.0, vmax=1.0, cmap='viridis', aspect='auto')
  ax.set_xticks(range(len(encoders)), encoders, rotation=45, ha='right')
  ax.set_yticks(
      range(len(tasks)), [t if summary['learned_in_distribution'][t] else f'{t} (not learned)' for t in tasks]
  )
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
  fig.colorbar(image, ax=ax, label='mean accuracy beyond the training lengths')
  ax.set_title(f'grey ✗: not learned within the training lengths (< {ID_LEARNED})', fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  return path

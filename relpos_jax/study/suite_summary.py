"""The suite's summary across tasks: what `run_suite` writes once every task's study has run, and what
`relpos_jax.study.claims` and the docs pages' tables read back.

    summary = summarize(load_results(workdir, tasks), title, statistic)
    write_summary(summary, workdir)   # summary.json, README.md (kept below NOTES_MARKER), heatmap.png
    python -m relpos_jax.study.suite_summary docs/suite_ruoss   # the same from a directory's results alone

Per (task, encoder) cell: accuracy in distribution (lengths <= the longest trained) and out of distribution
(longer), per token and per sequence, each the mean over seeds (± sample std, ddof 1), the max over seeds and
the per-seed values; the positions the encoder was evaluated at; the held-out sets' glitch rates. Reading only
the studies' results.json, it never trains or evaluates (`relpos_jax.study.suite` does).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from typing import Sequence

from relpos_jax import files
from relpos_jax.study import report, stats
from relpos_jax.study.plan import SEQUENTIAL_SUFFIX
from relpos_jax.train import config as config_lib

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


def load_results(workdir: str, tasks: Sequence[str]) -> dict[str, dict]:
  """{task: results.json} for every task of `tasks` that has results in `workdir` (with its held-out
  evaluations, the task's held_out.json, under 'held_out' where there are some)."""
  found = {}
  for task in tasks:
    path = os.path.join(workdir, task, 'results.json')
    if os.path.exists(path):
      found[task] = report.load_object(path, ('runs', 'eval_lengths'), 'a study report (relpos_jax.study.report)')
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
      # A task run under a learning-rate grid chose each encoder's rate at its first seed (the run's record).
      'lr_grid': (results.get('protocol') or {}).get('lr_grid'),
      'seeds': list(results.get('seeds') or []),
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


def glitch_rate_text(per_thousand: float) -> str:
  """A glitch rate as the pages print it: two decimals (Liu et al.'s sets are sized to resolve 0.1 per thousand,
  configs/algorithmic.py), and two significant digits for a rate above zero that two decimals would round to
  0.00, so that a glitch never reads as a clean run (one in 31,511 reads: 0.03; one in a million: 0.001)."""
  return f'{per_thousand:.2g}' if 0 < per_thousand < 0.005 else f'{per_thousand:.2f}'


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
          text = glitch_rate_text(cell['mean'])
          text += f' ± {glitch_rate_text(cell["std"])}' if cell['std'] is not None else ''
          text += f' [{glitch_rate_text(cell["min"])}; ' + ', '.join(map(glitch_rate_text, cell['per_seed'])) + ']'
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
  """Each task's protocol as it ran: training and evaluation lengths, steps, seeds, learning rate (fixed, or
  the grid it was chosen from), task arguments. Per task, since a suite's tasks can run under different protocols
  (a suite moved to a learning-rate grid task by task)."""
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
        f'{model.get("dropout_rate")}. Adam, batch {_values(protocols, "batch_size")}.\n'
    )
  lines += [
      '| task | trained on | evaluated at | steps | seeds | learning rate | task arguments |',
      '|---|---|---|---|---|---|---|',
  ]
  for task in summary['tasks']:
    p = protocols.get(task)
    if p:
      low, high = p['train_lengths']
      kwargs = ', '.join(f'{k}={v}' for k, v in sorted(p['task_kwargs'].items())) or '—'
      seeds = ', '.join(map(str, p.get('seeds') or [])) or '—'
      lines.append(
          f'| {task} | {low}..{high} | {", ".join(map(str, p["eval_lengths"]))} | {p["steps"]:,} | {seeds} | '
          f'{_learning_rate(p)} | {kwargs} |'
      )
  return '\n'.join(lines) + '\n'


def _learning_rate(protocol: dict) -> str:
  """The fixed peak rate, or the grid each encoder's rate was chosen from (on validation at the first seed)."""
  grid = protocol.get('lr_grid')
  if grid:
    first = f' at seed {protocol["seeds"][0]}' if protocol.get('seeds') else ''
    return f'per encoder{first}, from {", ".join(f"{r:g}" for r in grid)}'
  return f'{protocol["learning_rate"]:g}' if protocol.get('learning_rate') is not None else '—'


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


def rewrite(workdir: str, tasks: Sequence[str] | None = None) -> dict:
  """The summary of a suite directory written again from its tasks' results.json alone (no run directories
  needed: e.g. a committed docs/suite* page after a task was added, or after this module's tables changed).
  `tasks`: in their order; default the order the directory's summary.json lists, then any new task folder."""
  previous = report.load_json(os.path.join(workdir, SUMMARY_FILE))
  if tasks is None:
    found = sorted(d for d in os.listdir(workdir) if os.path.exists(os.path.join(workdir, d, 'results.json')))
    tasks = list(previous['tasks']) + [t for t in found if t not in previous['tasks']]
  summary = summarize(
      load_results(workdir, tasks), title=previous.get('title'), statistic=previous.get('statistic', 'token_mean')
  )
  write_summary(summary, workdir)
  return summary


def main(argv: Sequence[str]) -> int:
  if len(argv) < 2 or not all(os.path.isfile(os.path.join(d, SUMMARY_FILE)) for d in argv[1:]):
    print(
        f'usage: python -m relpos_jax.study.suite_summary SUITE_DIR [SUITE_DIR ...] (each holding a '
        f"{SUMMARY_FILE}: rewrites its summary from its tasks' results.json); got {argv[1:]!r}",
        file=sys.stderr,
    )
    return 2
  for workdir in argv[1:]:
    rewrite(workdir)
    print(os.path.join(workdir, 'README.md'))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))

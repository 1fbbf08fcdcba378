"""Reporting a length-generalization study: results.json, a markdown table and a plot.

A study's results are plain JSON-able data, so a notebook can load, re-plot or merge them:

    {'meta': {...},                       # config, corpus fingerprint, versions, device, wall time
     'metric': 'bits_per_char',           # what the numbers are
     'lower_is_better': True,
     'train_length': 64,
     'eval_lengths': [64, 128, ...],
     'seeds': [0, 1, 2],
     'runs': [{'name': 'alibi', 'spec': 'alibi', 'seeds': [0, 1, 2],
               'by_length': {'64': 2.1, ...},                    # the mean over seeds
               'by_length_per_seed': {'64': [2.08, 2.11, 2.1], ...},
               'train_metric': 2.0, 'steps': 300, 'train_seconds': 31.2, 'num_params': 103424}, ...]}

With several seeds the table shows mean ± standard deviation (sample std, n - 1) and the plot a band of
± one standard deviation around the mean. Results without `by_length_per_seed` (one seed) read as before.

A run that diverged carries `'diverged': {'step': s, 'message': ...}` and no values; the table says
`diverged at step s` instead of numbers, and the plot leaves it out. An encoder with some diverged seeds
lists them in `'diverged_seeds': {'1': {'step': s, ...}}` (None in `by_length_per_seed`): its cells are
mean ± std over the other seeds, and its name cell says which seeds diverged.
"""

from __future__ import annotations

import json
import math
import os
import threading
from typing import Any

Results = dict[str, Any]


def write_json(results: Results, path: str) -> str:
  # One temporary file per writer: suite processes (--tasks) all write the same summary.json, and a shared
  # temporary name let one rename the other's half-written file.
  tmp = f'{path}.{os.getpid()}.{threading.get_ident()}.tmp'
  with open(tmp, 'w') as f:
    json.dump(results, f, indent=2, sort_keys=True)
  os.replace(tmp, path)  # Atomic: an interrupted write never leaves a truncated results file.
  return path


def load_json(path: str) -> Results:
  with open(path) as f:
    return json.load(f)


def _value(run, length):
  value = run['by_length'].get(str(length))
  return None if value is None else float(value)


def _per_seed(run, length) -> list[float] | None:
  """The values of every seed that did not diverge at `length`, or None (one seed, or a missing value)."""
  values = run.get('by_length_per_seed', {}).get(str(length))
  if values and run.get('diverged_seeds'):
    diverged = run['diverged_seeds']
    values = [v for seed, v in zip(run['seeds'], values) if str(seed) not in diverged]
  if not values or any(v is None for v in values):
    return None
  return [float(v) for v in values]


def _fmt(value, digits=3):
  return '—' if value is None or (isinstance(value, float) and math.isnan(value)) else f'{value:.{digits}f}'


def _mean(values):
  values = [v for v in values if v is not None]
  return sum(values) / len(values) if values else None


def std(values) -> float | None:
  """Sample standard deviation (n - 1); None for fewer than two values."""
  if values is None or len(values) < 2:
    return None
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _fmt_spread(mean, values, digits=3, spread_digits=None):
  """'mean' or 'mean ± std' when there are several seeds."""
  spread = std(values)
  spread_digits = digits if spread_digits is None else spread_digits
  if spread is None or mean is None:
    return _fmt(mean, digits)
  return f'{_fmt(mean, digits)} ± {spread:.{spread_digits}f}'


def display_lengths(lengths, max_columns: int = 10) -> list:
  """All lengths, or (for sweeps such as 41..500) an evenly spaced subset that keeps both ends.

  Only the columns are thinned: the means and the ratio always use every length.
  """
  if len(lengths) <= max_columns:
    return list(lengths)
  picks = sorted({round(k * (len(lengths) - 1) / (max_columns - 1)) for k in range(max_columns)})
  return [lengths[k] for k in picks]


def markdown_table(results: Results) -> str:
  """Encoder x evaluation length, then in- and out-of-distribution means and the longest/train ratio.

  Lengths up to the (longest) training length are in distribution. The in-distribution score sits next
  to the out-of-distribution one because a run that never fit its training lengths says nothing about
  generalization. The ratio is the metric at the longest length over the metric at the training length
  (the mean of the in-distribution lengths when the training length itself is not evaluated): near 1
  means the encoding holds up. With several seeds every cell is mean ± std over seeds (the ratio cell: the
  mean and std of the per-seed ratios; the in/out-of-distribution cells: of the per-seed means).
  """
  train_length = results['train_length']
  lengths = results['eval_lengths']
  in_dist = [length for length in lengths if length <= train_length]
  out_dist = [length for length in lengths if length > train_length]
  shown = display_lengths(lengths)
  header = (
      ['encoder']
      + [f'{length} ({length / train_length:g}×)' for length in shown]
      + ['in-dist mean', 'out-of-dist mean', f'{lengths[-1]} / train']
  )
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]

  def summary(values):  # (in-dist mean, out-of-dist mean, ratio) of one set of values by length
    reference = values.get(train_length, _mean([values[n] for n in in_dist]))
    last = values[lengths[-1]]
    ratio = None if reference in (None, 0.0) or last is None else last / reference
    return _mean([values[n] for n in in_dist]), _mean([values[n] for n in out_dist]), ratio

  for run in results['runs']:
    values = {length: _value(run, length) for length in lengths}
    per_seed = {length: _per_seed(run, length) for length in lengths}
    seeds_summaries = None
    if all(v is not None for v in per_seed.values()):
      count = len(per_seed[lengths[0]])
      seeds_summaries = list(zip(*[summary({n: per_seed[n][k] for n in lengths}) for k in range(count)]))
    in_mean, out_mean, ratio = summary(values)
    if seeds_summaries and None not in seeds_summaries[2]:
      ratio = _mean(seeds_summaries[2])  # The mean of the per-seed ratios, whose spread is shown.
    spreads = seeds_summaries or (None, None, None)
    name = run['name'] if run['spec'] == run['name'] else f'{run["name"]} (`{run["spec"]}`)'
    if 'seeds' in run and results.get('seeds') and run['seeds'] != results['seeds']:
      name += f' [seeds {", ".join(str(s) for s in run["seeds"])}]'  # A study reported before it finished.
    if run.get('diverged'):
      seeds = run.get('diverged_seeds', {})
      which = f' (seeds {", ".join(seeds)})' if len(seeds) > 1 else ''
      cells = [name, f'diverged at step {run["diverged"]["step"]}{which}'] + [''] * (len(header) - 2)
      lines.append('| ' + ' | '.join(cells) + ' |')
      continue
    for seed, marker in run.get('diverged_seeds', {}).items():
      name += f' [seed {seed} diverged at step {marker["step"]}]'  # Left out of the means.
    cells = (
        [name]
        + [_fmt_spread(values[n], per_seed[n]) for n in shown]
        + [
            _fmt_spread(in_mean, spreads[0]),
            _fmt_spread(out_mean, spreads[1]),
            _fmt_spread(ratio, spreads[2], 2, spread_digits=3),
        ]
    )
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def write_markdown(results: Results, path: str) -> str:
  meta = results.get('meta', {})
  better = 'lower is better' if results.get('lower_is_better', True) else 'higher is better'
  text = [
      f'# {meta.get("title", "Length generalization")}\n',
      f'{results["metric"]} ({better}) on evaluation sequences of each length; trained at length '
      f'{results["train_length"]}.\n',
  ]
  if 'description' in meta:
    text.append(meta['description'] + '\n')
  text.append(markdown_table(results))
  facts = {k: meta[k] for k in ('corpus_fingerprint', 'device', 'jax_version', 'wall_seconds', 'date') if k in meta}
  if results.get('seeds'):
    facts = {
        'seeds': ', '.join(str(s) for s in results['seeds'])
        + ' (cells: mean ± standard deviation over seeds)' * (len(results['seeds']) > 1),
        **facts,
    }
  data = meta.get('data')
  if isinstance(data, dict):  # One readable line; results.json keeps the whole description.
    facts = {
        'data': ', '.join(
            f'{k}={data[k]}'
            for k in ('source', 'task', 'num_train_tokens', 'num_val_tokens', 'train_lengths')
            if k in data
        ),
        **facts,
    }
  if facts:
    text.append('\n' + '\n'.join(f'- {k}: {v}' for k, v in facts.items()) + '\n')
  with open(path, 'w') as f:
    f.write('\n'.join(text))
  return path


def plot(results: Results, path: str) -> str:
  """Metric against evaluation length (log2 axis), one line per encoder, training length marked."""
  # A bare Figure, not pyplot: no backend switch, so this works headless and leaves a notebook's
  # inline figures alone.
  import matplotlib
  from matplotlib.figure import Figure

  lengths = results['eval_lengths']
  fig = Figure(figsize=(9, 5), dpi=120)
  ax = fig.subplots()
  cmap = matplotlib.colormaps['tab20']
  for n, run in enumerate(results['runs']):
    values = [_value(run, length) for length in lengths]
    points = [(length, v) for length, v in zip(lengths, values) if v is not None]
    if points:
      xs, ys = zip(*points)
      # Dark shades of tab20 first, then the light ones: neighbours in the legend never share a hue.
      color = cmap((2 * n) % 20 + (n // 10) % 2)
      ax.plot(xs, ys, marker='o', ms=3, lw=1.5, color=color, ls='-' if n < 10 else '--', label=run['name'])
      band = [(length, v, std(_per_seed(run, length))) for length, v in points]
      band = [(length, v, s) for length, v, s in band if s is not None]
      if band:  # Several seeds: mean ± one standard deviation.
        bx, bv, bs = zip(*band)
        ax.fill_between(
            bx, [v - s for v, s in zip(bv, bs)], [v + s for v, s in zip(bv, bs)], color=color, alpha=0.2, lw=0
        )
  ax.axvline(results['train_length'], color='grey', ls='--', lw=1)
  ax.text(
      results['train_length'],
      0.98,
      ' train length',
      transform=ax.get_xaxis_transform(),
      va='top',
      fontsize=8,
      color='grey',
  )
  ax.set_xscale('log', base=2)
  ax.set_xticks(lengths, [str(length) for length in lengths])
  ax.set_xlabel('evaluation sequence length')
  ax.set_ylabel(results['metric'].replace('_', ' '))
  ax.set_title(results.get('meta', {}).get('title', 'Length generalization'))
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8, frameon=False, loc='upper left', bbox_to_anchor=(1.01, 1.0))
  fig.tight_layout()
  fig.savefig(path)
  return path

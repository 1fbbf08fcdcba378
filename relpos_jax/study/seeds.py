"""Several seeds of one study, run as separate workdirs (one `--config.seed` each), combined.

    combined = combine([report.load_json(p) for p in ('seed0/results.json', 'seed1/results.json', ...)])

`combine` keeps every encoder that any seed finished, in the first seed's order, with `by_length` the mean
over the seeds that have it and `by_length_per_seed` ({length: [one value per seed]}) and `seeds` beside
it, so `report.markdown_table` / `report.plot` draw the means; `spread_table` shows mean ± standard
deviation (sample, n - 1) per length and of the per-seed ratio longest / training length.
"""

from __future__ import annotations

import copy
import math

from relpos_jax.study import report


def collect(workdir: str, labels=None) -> report.Results:
  """A workdir's results with its runs read from runs/<label>/result.json (every finished run, also those
  written by another process on the same workdir), in the order of `labels` (the study's entries)."""
  import glob
  import os
  results = report.load_json(os.path.join(workdir, 'results.json'))
  found = {}
  for path in glob.glob(os.path.join(workdir, 'runs', '*', 'result.json')):
    run = report.load_json(path)
    found[run['name']] = run
  order = list(labels) if labels is not None else sorted(found)
  results['runs'] = [found[label] for label in order if label in found]
  return results


def _seed_of(results) -> int:
  return int(results['meta']['config']['seed'])


def combine(results_by_seed) -> report.Results:
  """One results dict from a study's per-seed results dicts (same encoders, lengths and metric)."""
  if not results_by_seed:
    raise ValueError('combine: no results given; allowed: one results dict per seed.')
  first = results_by_seed[0]
  for other in results_by_seed[1:]:
    for key in ('metric', 'train_length', 'eval_lengths'):
      if other[key] != first[key]:
        raise ValueError(f'combine: the seeds disagree on {key} ({first[key]!r} vs {other[key]!r}).')
  combined = copy.deepcopy(first)
  combined['seeds'] = [_seed_of(r) for r in results_by_seed]
  combined['meta']['config'].pop('seed', None)
  runs = []
  for run in first['runs']:
    per_seed = [(s, r_run) for s, r in zip(combined['seeds'], results_by_seed)
                for r_run in r['runs'] if r_run['name'] == run['name']]
    if any(r_run['spec'] != run['spec'] for _, r_run in per_seed):
      raise ValueError(f'combine: {run["name"]} has different specs across seeds.')
    lengths = list(run['by_length'])
    values = {n: [r_run['by_length'][n] for _, r_run in per_seed] for n in lengths}
    runs.append({'name': run['name'], 'spec': run['spec'], 'seeds': [s for s, _ in per_seed],
                 'by_length': {n: sum(v) / len(v) for n, v in values.items()},
                 'by_length_per_seed': values,
                 'train_seconds': [r_run.get('train_seconds') for _, r_run in per_seed],
                 'num_params': run.get('num_params')})
  combined['runs'] = runs
  return combined


def _std(values):
  if len(values) < 2:
    return None
  mean = sum(values) / len(values)
  return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _cell(values, digits=3):
  spread = _std(values)
  mean = sum(values) / len(values)
  return f'{mean:.{digits}f}' if spread is None else f'{mean:.{digits}f} ± {spread:.{digits}f}'


def spread_table(results: report.Results) -> str:
  """Markdown: mean ± std over seeds at every length, the per-seed ratio longest / train, the seeds."""
  lengths = [str(n) for n in results['eval_lengths']]
  train = str(results['train_length'])
  header = (['encoder'] + [f'{n} ({int(n) / int(train):g}×)' for n in lengths]
            + [f'{lengths[-1]} / train', 'seeds'])
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
  for run in results['runs']:
    per_seed = run['by_length_per_seed']
    ratios = [last / ref for last, ref in zip(per_seed[lengths[-1]], per_seed[train])] if train in per_seed else []
    name = run['name'] if run['spec'] == run['name'] else f'{run["name"]} (`{run["spec"]}`)'
    cells = ([name] + [_cell(per_seed[n]) for n in lengths] + [_cell(ratios, 2) if ratios else '—',
                                                                ', '.join(str(s) for s in run['seeds'])])
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'

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
from typing import Any, Sequence

import numpy as np

from relpos_jax import files
from relpos_jax.study import stats
from relpos_jax.train import config as config_lib

Results = dict[str, Any]


def write_json(results: Results, path: str, indent: int = 2) -> str:
  """Writes `results` as JSON to `path` atomically (`relpos_jax.files`: an interrupted write never leaves a
  truncated results file, and concurrent writers of one file never tear it); returns the path. `indent`: the
  grid study's files were written with 1 from the start, and a rewrite keeps a committed file's bytes."""
  files.write_text_atomic(path, json.dumps(results, indent=indent, sort_keys=True))
  return path


def load_json(path: str) -> Results:
  """A results or record file; a truncated or corrupt one raises ConfigError naming it and what to do."""
  try:
    with open(path) as f:
      return json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise config_lib.ConfigError(
        f'{path} is not valid JSON ({e}): it was truncated (a kill or a full disk during its write?) or '
        'edited. Restore it from a copy, or remove it (for a run: its directory) so that the study '
        'computes it again.'
    ) from None


def load_object(path: str, keys: Sequence[str], what: str, fix: str = '') -> dict:
  """The JSON object at `path` holding `keys` (`load_json`); otherwise ConfigError naming the file, `what` it
  should be, what it holds and `fix` (what to do): a report or record cut short or of another kind is refused
  where it is read, never a KeyError in the code that reads it."""
  value = load_json(path)
  if not isinstance(value, dict) or any(k not in value for k in keys):
    found = sorted(value) if isinstance(value, dict) else type(value).__name__
    raise config_lib.ConfigError(
        f'{path} is not {what}: expected an object with {list(keys)}, found {found}.' + (f' {fix}' if fix else '')
    )
  return value


def _mean_at(run, length):
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


def _fmt_spread(mean, values, digits=3, spread_digits=None):
  """'mean' or 'mean ± std' when there are several seeds."""
  spread = stats.std(values)
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
  with_rates = any('learning_rate' in run for run in results['runs'])
  if with_rates:  # Which learning rate each encoder used, and how it was chosen.
    header.append('learning rate')
  lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]

  def summary(values):  # (in-dist mean, out-of-dist mean, ratio) of one set of values by length
    reference = values.get(train_length, stats.mean([values[n] for n in in_dist]))
    last = values[lengths[-1]]
    ratio = None if reference in (None, 0.0) or last is None else last / reference
    return stats.mean([values[n] for n in in_dist]), stats.mean([values[n] for n in out_dist]), ratio

  for run in results['runs']:
    values = {length: _mean_at(run, length) for length in lengths}
    per_seed = {length: _per_seed(run, length) for length in lengths}
    seeds_summaries = None
    if all(v is not None for v in per_seed.values()):
      count = len(per_seed[lengths[0]])
      seeds_summaries = list(zip(*[summary({n: per_seed[n][k] for n in lengths}) for k in range(count)]))
    in_mean, out_mean, ratio = summary(values)
    if seeds_summaries and None not in seeds_summaries[2]:
      ratio = stats.mean(seeds_summaries[2])  # The mean of the per-seed ratios, whose spread is shown.
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
    if with_rates:
      cells.append(_rate_cell(run))
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def _rate_cell(run) -> str:
  if 'learning_rate' not in run:
    return ''
  return f'{run["learning_rate"]:g} ({run.get("lr_choice", "fixed")})'


def seed_statistic(results: Results, run: dict, statistic) -> dict[int, float | None]:
  """{seed: the run's value of `statistic` at that seed} (None for a diverged seed): an evaluation length,
  'train' (the training length, or the in-distribution mean when it is not evaluated), 'ood' (the mean over
  the lengths beyond training) or 'longest'."""
  train_length, lengths = results['train_length'], results['eval_lengths']
  if statistic == 'train':
    chosen = [train_length] if train_length in lengths else [n for n in lengths if n <= train_length]
  elif statistic == 'ood':
    chosen = [n for n in lengths if n > train_length]
  elif statistic == 'longest':
    chosen = [lengths[-1]]
  else:
    chosen = [int(statistic)]
  seeds = run.get('seeds') or results.get('seeds') or [None]
  per_seed = run.get('by_length_per_seed') or {str(n): [run['by_length'].get(str(n))] for n in lengths}
  diverged = run.get('diverged_seeds', {})
  out = {}
  for k, seed in enumerate(seeds):
    values = [per_seed.get(str(n), [None] * len(seeds))[k] for n in chosen]
    bad = str(seed) in diverged or not values or any(v is None for v in values)
    out[seed] = None if bad else sum(float(v) for v in values) / len(values)
  return out


def _totals_length(results: Results, statistic) -> int | None:
  """The one evaluation length a comparison statistic reads (None for 'ood', a mean over several lengths, and
  for 'train' when the training length is not evaluated: the in-distribution mean)."""
  train_length, lengths = results['train_length'], results['eval_lengths']
  if statistic == 'ood':
    return None
  if statistic == 'train':
    return train_length if train_length in lengths else None
  return lengths[-1] if statistic == 'longest' else int(statistic)


def _seed_totals(run: dict, length: int, seeds) -> tuple | None:
  """(bits, characters) per seed and document of `run` at `length`: dense arrays of shape (len(seeds), the
  split's documents); None unless every one of those seeds stored totals at that length."""
  found = [((run.get('document_totals_per_seed') or {}).get(str(seed)) or {}).get(str(length)) for seed in seeds]
  if not found or any(t is None for t in found) or len({t['num_documents'] for t in found}) != 1:
    return None
  bits, characters = np.zeros((len(found), found[0]['num_documents'])), np.zeros(
      (len(found), found[0]['num_documents'])
  )
  for row, t in enumerate(found):
    np.add.at(bits[row], np.asarray(t['documents'], np.int64), np.asarray(t['bits'], np.float64))
    np.add.at(characters[row], np.asarray(t['documents'], np.int64), np.asarray(t['characters'], np.float64))
  return bits, characters


def _bootstraps(results: Results, a_run: dict, b_run: dict, statistic, seeds) -> dict:
  """The document bootstrap of A - B over `seeds` (the paired ones) as 'bootstrap', and the seed x document
  bootstrap (`stats.two_level_bootstrap`) as 'two_level'; where either has none, 'bootstrap_missing' /
  'two_level_missing' say why (the two-level one needs 2 seeds: 'one seed').

  Pooled over the seeds: each side's per-document bits and characters are summed over the seeds, then one
  bootstrap resamples documents (`stats.document_bootstrap`). Why pooled rather than one bootstrap per seed,
  averaged: the seeds score the same text (same windows, same documents), so a resampled document must count for
  every seed at once (independent resamples per seed would treat one text as several); and an average of
  per-seed percentile bounds is not a percentile interval of anything. Pooled, the point estimate is
  sum_s bits_s / (S chars) = the mean over seeds of bits per character (the characters of a document are the
  same for every seed), i.e. exactly the seed table's mean difference. The interval measures the text-sample
  variance of that mean with the trained models held fixed; the seed interval measures the seed variance with
  the text held fixed: they answer different questions and are reported side by side, with the seed x document
  bootstrap beside them, which resamples both (`stats.two_level_bootstrap`)."""
  length = _totals_length(results, statistic)
  random = [r['name'] for r in (a_run, b_run) if str(r.get('positions', '')).startswith('random')]
  a = b = None
  if length is None:
    missing = 'several lengths'
  elif random:
    missing = 'random positions'
  elif len(seeds) < 1:
    missing = 'no seeds'
  else:
    a, b = _seed_totals(a_run, length, seeds), _seed_totals(b_run, length, seeds)
    missing = 'no totals' if a is None or b is None or a[0].shape != b[0].shape else ''
  if missing:
    return {'bootstrap_missing': missing, 'two_level_missing': missing}
  out = {}
  try:
    out['bootstrap'] = stats.document_bootstrap(*(x.sum(0) for x in (a[0], a[1], b[0], b[1])))
  except ValueError:  # fewer than two scored documents: no interval
    return {'bootstrap_missing': 'under 2 documents', 'two_level_missing': 'under 2 documents'}
  if len(seeds) < 2:
    out['two_level_missing'] = 'one seed'
  else:
    out['two_level'] = stats.two_level_bootstrap(a[0], a[1], b[0], b[1])
  return out


def comparisons(results: Results) -> list[dict]:
  """The paired differences `results['comparison_requests']` asks for (`runner.parse_comparisons`): per
  comparison and statistic, A - B over the seeds both have (stats.paired_difference), each side's mean, and the
  paired t test's p-value ('p_value', `stats.paired_p_value`).

  Across the study's family of comparisons (every request and statistic), Holm's adjustment of those p-values
  (`stats.holm`): 'p_holm' and 'resolved_holm' (p_holm < 0.05), present when at least one comparison has a
  p-value (two seeds or more). Where both sides stored per-document totals for the paired seeds at the one
  length the statistic reads, 'bootstrap': the document bootstrap of the difference pooled over those seeds
  (`_bootstraps` says why pooled), and 'two_level': the seed x document bootstrap; where the study has totals but
  a comparison has none, 'bootstrap_missing' / 'two_level_missing' say why ('random positions': an encoder
  evaluated at random positions stores none; 'several lengths': the out-of-distribution mean; 'no totals': a side
  finished without them; 'one seed', the two-level one only: no seeds to resample)."""
  rows = {run['name']: run for run in results['runs']}
  with_totals = any(run.get('document_totals_per_seed') for run in results['runs'])
  out = []
  for request in results.get('comparison_requests', []):
    if request['a'] not in rows or request['b'] not in rows:
      continue  # A study reported before both sides finished.
    for statistic in request['statistics']:
      a = seed_statistic(results, rows[request['a']], statistic)
      b = seed_statistic(results, rows[request['b']], statistic)
      seeds = [seed for seed in a if seed in b]
      difference = stats.paired_difference([a[seed] for seed in seeds], [b[seed] for seed in seeds])
      paired = [seed for seed in seeds if a[seed] is not None and b[seed] is not None]
      row = {
          'a': request['a'],
          'b': request['b'],
          'statistic': statistic,
          'seeds': paired,
          'a_mean': stats.mean([a[seed] for seed in seeds if b[seed] is not None]),
          'b_mean': stats.mean([b[seed] for seed in seeds if a[seed] is not None]),
          **difference,
          'p_value': stats.paired_p_value([a[seed] for seed in seeds], [b[seed] for seed in seeds]),
      }
      if with_totals:
        row.update(_bootstraps(results, rows[request['a']], rows[request['b']], statistic, paired))
      out.append(row)
  family = stats.holm([row['p_value'] for row in out])
  if family['m']:
    for row, adjusted, resolved in zip(out, family['adjusted'], family['resolved']):
      row.update({'p_holm': adjusted, 'resolved_holm': resolved, 'holm_family': family['m']})
  return out


def _statistic_name(results: Results, statistic) -> str:
  return {
      'train': f'train length {results["train_length"]}',
      'ood': 'out-of-dist mean',
      'longest': f'longest ({results["eval_lengths"][-1]})',
  }.get(statistic, str(statistic))


def comparisons_table(results: Results) -> str:
  """The paired differences as a markdown table (empty string when the study asks for none)."""
  found = results.get('comparisons') or comparisons(results)
  if not found:
    return ''
  better = 'lower is better' if results.get('lower_is_better', True) else 'higher is better'
  holm = any(c.get('p_holm') is not None for c in found)
  bootstrap = any('bootstrap' in c or 'bootstrap_missing' in c for c in found)
  two_level = any('two_level' in c or 'two_level_missing' in c for c in found)  # not in reports from before it
  header = '| A | B | at | seeds | A | B | A − B | 95% interval | resolved |'
  notes = []
  if holm:  # Results computed before these columns existed have neither: their table reads as it did.
    header += ' p (Holm) | resolved (Holm) |'
    notes.append(
        f"p (Holm): the paired t test's two-sided p-value, adjusted by Holm (1979) over the study's "
        f'{found[0].get("holm_family", "")} comparisons with a p-value; resolved (Holm): adjusted p < 0.05, which '
        'bounds the chance of any false "resolved" in the family at 5%.'
    )
  if bootstrap:
    header += ' documents | document bootstrap 95% |'
    notes.append(
        'Document bootstrap: the test documents resampled with replacement (Efron & Tibshirani 1993, percentile '
        f"interval, {stats.BOOTSTRAP_RESAMPLES} resamples), each side's bits and characters per document summed "
        'over the paired seeds: the text-sample variance of the mean difference with the trained models held '
        'fixed. — (random positions): an encoder evaluated at random positions stores no per-document totals '
        '(they score 0..L-1 only); — (several lengths): the out-of-distribution mean; — (no totals): a side has '
        'none (a run finished before totals were stored, or the 0..L-1 row of a randomized encoder).'
    )
  if two_level:
    header += ' seed × document bootstrap 95% |'
    notes.append(
        'Seed × document bootstrap: the paired seeds and the test documents both resampled with replacement, one '
        'document draw for every drawn seed, as every seed scores the same documents (Owen 2007, the pigeonhole '
        f'bootstrap; percentile interval, {stats.BOOTSTRAP_RESAMPLES} resamples): the seed and the text-sample '
        'variance at once. With a handful of seeds it can read narrower than the t interval (a percentile '
        "bootstrap has no small-sample correction); the verdicts read the t interval and Holm's p. — (one seed): "
        'nothing to resample.'
    )
  lines = [
      f'## Paired differences\n\nA − B in {results["metric"]} ({better}) per seed, over the seeds both have (the '
      'same data stream and evaluation text per seed): the mean difference and its 95% t interval, '
      'mean ± t(0.975, n − 1) · sd / √n with sd the sample standard deviation of the differences (ddof 1). '
      'Resolved: the interval excludes 0; with one seed there is no interval and nothing is resolved.'
      + ''.join(' ' + note for note in notes)
      + '\n',
      header,
      '|' + '---|' * header.count(' |'),
  ]
  for c in found:
    interval = '—' if c['low'] is None else f'[{c["low"]:+.3f}, {c["high"]:+.3f}]'
    difference = '—' if c['mean'] is None else f'{c["mean"]:+.3f}'
    line = (
        f'| {c["a"]} | {c["b"]} | {_statistic_name(results, c["statistic"])} | {c["n"]} | {_fmt(c["a_mean"])} | '
        f'{_fmt(c["b_mean"])} | {difference} | {interval} | {"yes" if c["resolved"] else "no"} |'
    )
    if holm:
      adjusted = c.get('p_holm')
      line += f' {"—" if adjusted is None else f"{adjusted:.3g}"} | {"yes" if c.get("resolved_holm") else "no"} |'
    if bootstrap:
      b = c.get('bootstrap')
      if b is None:
        line += f' — | — ({c.get("bootstrap_missing", "no totals")}) |'
      else:
        line += f' {b["n_documents"]} | [{b["low"]:+.3f}, {b["high"]:+.3f}] |'
    if two_level:
      t = c.get('two_level')
      line += (
          f' — ({c.get("two_level_missing", "no totals")}) |'
          if t is None
          else f' [{t["low"]:+.3f}, {t["high"]:+.3f}] |'
      )
    lines.append(line)
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
  text.append(f'Cells: {stats.PLUS_MINUS} (a single value with one seed).\n')
  text.append(markdown_table(results))
  table = comparisons_table(results)
  if table:
    text.append(table)
  facts = {k: meta[k] for k in ('corpus_fingerprint', 'device', 'jax_version', 'wall_seconds', 'date') if k in meta}
  if results.get('seeds'):
    facts = {
        'seeds': ', '.join(str(s) for s in results['seeds'])
        + f' (cells: {stats.PLUS_MINUS})' * (len(results['seeds']) > 1),
        **facts,
    }
  evaluation = results.get('protocol')
  if evaluation:
    facts = {
        'reported split': f'{evaluation["split"]} (choices made on {evaluation["selection"]}'
        + (
            f', at seed {evaluation["selection_seed"]}, which is not reported)'
            if evaluation.get('selection_seed') is not None
            else ')'
        ),
        **(
            {
                'evaluation windows': f'{evaluation["windows"]}; T = {evaluation["scored_tail"]}, '
                f'{evaluation["num_scored"]} scored tokens per length (the same at every length)'
            }
            if 'windows' in evaluation
            else {}
        ),
        'randomized positions': f'ordered random positions from [0, max_position), mean over '
        f'{evaluation["position_draws"]} draws per run'
        + (
            '; the same runs at 0..L-1 in the rows named <label>@0..L-1'
            if evaluation['sequential_positions_row']
            else ''
        ),
        **facts,
    }
  data = meta.get('data')
  if isinstance(data, dict):  # One readable line; results.json keeps the whole description.
    facts = {
        'data': ', '.join(
            f'{k}={data[k]}'
            for k in ('source', 'task', 'num_train_tokens', 'num_val_tokens', 'num_test_tokens', 'train_lengths')
            if k in data
        ),
        **facts,
    }
  if facts:
    text.append('\n' + '\n'.join(f'- {k}: {v}' for k, v in facts.items()) + '\n')
  files.write_text_atomic(path, '\n'.join(text))
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
    values = [_mean_at(run, length) for length in lengths]
    points = [(length, v) for length, v in zip(lengths, values) if v is not None]
    if points:
      xs, ys = zip(*points)
      # Dark shades of tab20 first, then the light ones: neighbours in the legend never share a hue.
      color = cmap((2 * n) % 20 + (n // 10) % 2)
      ax.plot(xs, ys, marker='o', ms=3, lw=1.5, color=color, ls='-' if n < 10 else '--', label=run['name'])
      band = [(length, v, stats.std(_per_seed(run, length))) for length, v in points]
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


# The columns every loss-against-position curve has (`relpos_jax.study.protocol.position_curve`); a curve merged
# over seeds (`relpos_jax.study.record.merge_seeds`) keeps the bins and one value column with its '_per_seed' list.
CURVE_COLUMNS = ('context_from', 'context_to', 'loss', 'tokens')


def curve_value(curve: dict) -> str:
  """The column a loss-against-position curve is read in: the metric column its source added beside the loss
  (a corpus's 'bits_per_char': `Data.position_curve_in_bits`), else 'loss'. Read from the curve itself, so a
  results file is reported without knowing, or asking, which source wrote it."""
  extra = [k for k in curve if k not in CURVE_COLUMNS and not k.endswith('_per_seed')]
  return extra[0] if extra else 'loss'


def plot_positions(results: Results, path: str) -> str | None:
  """Loss against position at the longest evaluation length (log2 context axis), one line per encoder (mean
  over seeds): where a model's failure starts. None (nothing written) when no run recorded a curve."""
  runs = [run for run in results['runs'] if run.get('position_curve') and not run.get('diverged')]
  if not runs:
    return None
  import matplotlib
  from matplotlib.figure import Figure

  fig = Figure(figsize=(9, 5), dpi=120)
  ax = fig.subplots()
  cmap = matplotlib.colormaps['tab20']
  value = curve_value(runs[0]['position_curve'])
  for n, run in enumerate(runs):
    curve = run['position_curve']
    xs = [math.sqrt(a * b) for a, b in zip(curve['context_from'], curve['context_to'])]
    color = cmap((2 * n) % 20 + (n // 10) % 2)
    ax.plot(xs, curve[value], marker='o', ms=2, lw=1.3, color=color, ls='-' if n < 10 else '--', label=run['name'])
  ax.axvline(results['train_length'], color='grey', ls='--', lw=1)
  ax.text(results['train_length'], 0.98, ' train length', transform=ax.get_xaxis_transform(), va='top', fontsize=8)
  ax.set_xscale('log', base=2)
  ax.set_xlabel('context of the predicted token (position in the window + 1), log-spaced bins')
  ax.set_ylabel(('loss (nats)' if value == 'loss' else value.replace('_', ' ')) + ' (mean over seeds)')
  longest = results['eval_lengths'][-1]
  ax.set_title(f'{results.get("meta", {}).get("title", "Length generalization")}: loss against position at {longest}')
  ax.grid(alpha=0.3)
  ax.legend(fontsize=8, frameon=False, loc='upper left', bbox_to_anchor=(1.01, 1.0))
  fig.tight_layout()
  fig.savefig(path)
  return path

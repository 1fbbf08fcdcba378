"""The scale ladder's page: do the cross-corpus findings hold, shrink or flip as the model grows?

    python -m relpos_jax.study.ladder_page docs/study_scale_ladder     # writes README.md, ladder.png, curves.png

Reads each rung's results.json (configs/studies/study_scale_ladder.py: RUNGS; the reused rung's is docs/
study_english_bpe/results.json, the same runs) and the run records beside it (metrics.jsonl: the training curves),
and writes, all computed:

  a rung table: the model, its parameters (counted by the runs), tokens per parameter (the 819,200 training tokens
  over the parameters), the encoders and seeds finished, the CPU minutes the records say, and how flat each rung's
  training loss is at the end (`flattening`);

  the findings (configs/lm.py CROSS_CORPUS_COMPARISONS) at 16x per rung: A - B, its 95% paired t interval over
  seeds, ✓ when resolved after Holm's correction over that rung's findings (`cross_corpus.findings`), and one
  verdict per finding by the rule of `verdict`;

  ladder.png: bits per character at the longest length against parameters, a line per encoder, and its ratio to
  the training-length value; curves.png: the training loss against step, per rung.

Verdict (`verdict`, rungs smallest first), every rung must have the finding with two seeds or more:
  flips                  resolved (Holm) at two rungs with opposite signs;
  shrinks                resolved at the smallest rung and, at the largest, A - B in the smallest rung's direction
                         is less than SHRINK of its size there (resolved or not);
  holds at every rung    resolved with one sign at every rung and not shrinking;
  not resolved           anything else (the rung that lacks it is named when one does).
"""

from __future__ import annotations

import glob
import json
import math
import os
import sys
from typing import Sequence

from relpos_jax import files, resources
from relpos_jax.study import cross_corpus, report, stats
from relpos_jax.study import ladder as ladder_lib

OUT_FILE = 'README.md'
PLOT = 'ladder.png'
CURVES = 'curves.png'
SHRINK = 0.5  # 'shrinks': the largest rung keeps less than half the smallest rung's difference
VERDICTS = ('holds at every rung', 'shrinks', 'flips', 'not resolved')
# The share of training whose loss change says how flat a rung's curve ends (the last quarter of the steps).
FLAT_TAIL = 0.25
# A rung has flattened when its training loss falls by less than this share over that last quarter.
FLAT_THRESHOLD = 0.02


def ladder_config():
  return resources.config_module('studies/study_scale_ladder')


def rung_paths(ladder_docs: str) -> dict[str, str]:
  """{rung: its results.json path} in rung order; the reused rung's is its study's folder beside `ladder_docs`."""
  config = ladder_config()
  docs = os.path.dirname(os.path.abspath(ladder_docs.rstrip('/')))
  return {
      rung: (
          os.path.join(docs, config.REUSED_STUDY, 'results.json')
          if rung == config.REUSED_RUNG
          else os.path.join(ladder_docs, rung, 'results.json')
      )
      for rung in config.RUNGS
  }


def load(ladder_docs: str) -> dict[str, dict]:
  """{rung: results} of the rungs with a results.json, smallest first."""
  return {rung: report.load_json(path) for rung, path in rung_paths(ladder_docs).items() if os.path.exists(path)}


def findings_wanted() -> tuple[str, ...]:
  return tuple(resources.config_module('lm').CROSS_CORPUS_COMPARISONS)


def verdict(rows: Sequence[dict | None], rungs: Sequence[str]) -> str:
  """One finding's verdict from its rows at `rungs` (smallest first; None where a rung has not run it)."""
  for rung, row in zip(rungs, rows):
    if row is None or row.get('mean') is None or row.get('resolved_holm') is None:
      return f'not resolved ({rung}: not run on two seeds yet)'
  signs = {math.copysign(1.0, row['mean']) for row in rows if row['resolved_holm']}
  if len(signs) > 1:
    return 'flips'
  first, last = rows[0], rows[-1]
  if first['resolved_holm']:
    direction = math.copysign(1.0, first['mean'])
    if last['mean'] * direction < SHRINK * abs(first['mean']):
      return 'shrinks'
    if all(row['resolved_holm'] for row in rows):
      return 'holds at every rung'
  return 'not resolved'


def per_rung_findings(ladder: dict[str, dict], wanted: Sequence[str]) -> dict[str, dict[str, dict]]:
  return {rung: cross_corpus.findings(results, wanted) for rung, results in ladder.items()}


def columns(ladder: dict[str, dict]) -> list[str]:
  """The rungs a finding is judged over: every planned CPU rung (one not run yet reads 'not run', so a verdict
  waits for it) and the accelerator's once it has results."""
  config = ladder_config()
  return list(config.CPU_RUNGS) + [rung for rung in ladder if rung not in config.CPU_RUNGS]


def findings_table(ladder: dict[str, dict], wanted: Sequence[str]) -> str:
  rungs = columns(ladder)
  found = per_rung_findings(ladder, wanted)
  lines = [
      '| finding (A − B at 16x) | ' + ' | '.join(rungs) + ' | across sizes |',
      '|---|' + '---|' * (len(rungs) + 1),
  ]
  for finding in wanted:
    rows = [found.get(rung, {}).get(finding) for rung in rungs]
    cells = ' | '.join(cross_corpus.finding_cell(row) for row in rows)
    lines.append(f'| {finding} | {cells} | {verdict(rows, rungs)} |')
  return '\n'.join(lines) + '\n'


def verdicts(ladder: dict[str, dict], wanted: Sequence[str]) -> dict[str, str]:
  """{finding: verdict} (what the page's last column says)."""
  rungs = columns(ladder)
  found = per_rung_findings(ladder, wanted)
  return {finding: verdict([found.get(rung, {}).get(finding) for rung in rungs], rungs) for finding in wanted}


def run_folder(ladder_docs: str, rung: str) -> str:
  return os.path.join(ladder_docs, rung)


def training_curves(folder: str) -> dict[str, list[tuple[int, float]]]:
  """{'<label>/seed<s>': [(step, training loss), ...]} of the reported runs' metrics.jsonl under folder/runs."""
  curves = {}
  for path in sorted(glob.glob(os.path.join(folder, 'runs', '*', '*', 'seed*', 'metrics.jsonl'))):
    parts = path.split(os.sep)
    if parts[-2] == f'seed{ladder_config().lm.SELECTION_SEED}':
      continue
    with open(path) as f:
      points = [json.loads(line) for line in f if line.strip()]
    curves[f'{parts[-4]}/{parts[-2]}'] = [(int(p['step']), float(p['loss'])) for p in points if 'loss' in p]
  return curves


def flattening(curve: Sequence[tuple[int, float]]) -> float | None:
  """The relative drop of the training loss over the last FLAT_TAIL of the steps, (L(s0) - L(end)) / L(s0), s0
  the logged step nearest (1 - FLAT_TAIL) of the way; None for a curve with fewer than two points."""
  if len(curve) < 2:
    return None
  end_step, end_loss = curve[-1]
  start = min(curve[:-1], key=lambda p: abs(p[0] - (1 - FLAT_TAIL) * end_step))
  return (start[1] - end_loss) / start[1]


def _selection_minutes(folder: str) -> float:
  seconds = 0.0
  for path in glob.glob(os.path.join(folder, 'runs', '*', '*', 'seed*', 'result.json')):
    record = report.load_json(path)
    if record.get('selection_only'):
      seconds += float(record.get('train_seconds') or 0.0)
  return seconds / 60


def rung_parameters(results: dict) -> int | None:
  """A rung's parameter count: the smallest its runs counted (None without a count)."""
  params = [run['num_params'] for run in results['runs'] if run.get('num_params')]
  return min(params) if params else None


def rung_rows(ladder: dict[str, dict], ladder_docs: str) -> list[dict]:
  """Per rung: size, parameters, tokens per parameter, what finished, minutes, the curves' flattening."""
  rows = []
  for rung, results in ladder.items():
    model = results['runs'][0]['config']['model'] if results['runs'] else {}
    train = results['runs'][0]['config']['train'] if results['runs'] else {}
    params = rung_parameters(results)
    tokens = int(train.get('steps', 0)) * int(train.get('batch_size', 0)) * int(results['train_length'])
    reported = [run for run in results['runs'] if not run['name'].endswith('@0..L-1')]
    flats = [flattening(c) for c in training_curves(run_folder(ladder_docs, rung)).values()]
    flats = [f for f in flats if f is not None]
    rows.append(
        {
            'rung': rung,
            'model': f'{model.get("num_layers")} x {model.get("model_dim")} ({model.get("num_heads")} heads)',
            'params': params,
            'tokens': tokens,
            'tokens_per_param': tokens / params if params else None,
            'encoders': len(reported),
            'seeds': sorted({len(run.get('seeds') or ()) for run in reported}),
            'minutes': sum(float(run.get('train_seconds') or 0.0) for run in reported) / 60,
            'selection_minutes': _selection_minutes(run_folder(ladder_docs, rung)),
            'flattening': stats.mean(flats) if flats else None,
            'curves': len(flats),
        }
    )
  return rows


def rung_table(rows: Sequence[dict]) -> str:
  lines = [
      '| rung | layers x d_model | parameters | tokens / parameter | encoders finished | seeds | wall minutes '
      '(reported runs + selection runs; training and evaluation, 2 shared CPU cores) | training-loss drop over the last quarter |',
      '|---|---|---|---|---|---|---|---|',
  ]
  for row in rows:
    params = f'{row["params"]:,}' if row['params'] else '—'
    ratio = f'{row["tokens_per_param"]:.2f}' if row['tokens_per_param'] else '—'
    seeds = ', '.join(map(str, row['seeds'])) or '—'
    selection = f'{row["selection_minutes"]:.0f}' if row['selection_minutes'] else 'not in the records'
    flat = (
        f'{row["flattening"]:.1%} (mean of {row["curves"]} runs): '
        + ('flattened' if row['flattening'] < FLAT_THRESHOLD else '**still falling**')
        if row['flattening'] is not None
        else 'no curves in the records'
    )
    lines.append(
        f'| {row["rung"]} | {row["model"]} | {params} | {ratio} | {row["encoders"]} | {seeds} | '
        f'{row["minutes"]:.0f} + {selection} | {flat} |'
    )
  return '\n'.join(lines) + '\n'


def longest_and_ratio(results: dict, run: dict) -> tuple[float | None, float | None]:
  """(mean over sound seeds at the longest length, mean over seeds of longest / training-length value)."""
  longest = report.seed_statistic(results, run, 'longest')
  train = report.seed_statistic(results, run, 'train')
  values = [v for v in longest.values() if v is not None]
  ratios = [longest[s] / train[s] for s in longest if longest[s] is not None and train.get(s)]
  return (stats.mean(values) if values else None), (stats.mean(ratios) if ratios else None)


def plot(ladder: dict[str, dict], path: str, labels: Sequence[str]) -> str:
  import matplotlib

  matplotlib.use('Agg')
  from matplotlib import pyplot as plt

  fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
  # One x per rung (its smallest count: the encoders add a few parameters each), so a rung's points line up.
  sizes = {
      rung: min((r['num_params'] for r in results['runs'] if r.get('num_params')), default=None)
      for rung, results in ladder.items()
  }
  for label in labels:
    points = []
    for rung, results in ladder.items():
      run = next((r for r in results['runs'] if r['name'] == label), None)
      if run is None or sizes[rung] is None:
        continue
      value, ratio = longest_and_ratio(results, run)
      if value is not None:
        points.append((sizes[rung], value, ratio))
    if points:
      xs = [p[0] for p in points]
      left.plot(xs, [p[1] for p in points], marker='o', label=label)
      right.plot(xs, [p[2] for p in points], marker='o', label=label)
  lengths = next(iter(ladder.values()))['eval_lengths'] if ladder else [0]
  train_length = next(iter(ladder.values()))['train_length'] if ladder else 0
  for axis, ylabel in (
      (left, f'bits per character at {lengths[-1]} (16x)'),
      (right, f'bits per character at {lengths[-1]} / at {train_length}'),
  ):
    axis.set_xscale('log')
    axis.set_xlabel('parameters')
    axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
  right.legend(fontsize=7, loc='best')
  fig.suptitle('Scale ladder: mean over seeds per encoder and rung')
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


def plot_curves(ladder_docs: str, rungs: Sequence[str], path: str) -> str | None:
  import matplotlib

  matplotlib.use('Agg')
  from matplotlib import pyplot as plt

  curves = {rung: training_curves(run_folder(ladder_docs, rung)) for rung in rungs}
  curves = {rung: c for rung, c in curves.items() if c}
  if not curves:
    return None
  fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 4), squeeze=False)
  for axis, (rung, by_run) in zip(axes[0], curves.items()):
    for name, points in by_run.items():
      axis.plot([p[0] for p in points], [p[1] for p in points], lw=0.8, label=name if name.endswith('seed0') else None)
    axis.set_title(f'{rung}: training loss (nats per token), every reported run')
    axis.set_xlabel('step')
    axis.grid(alpha=0.3)
    axis.legend(fontsize=6)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path


EDGE_STUDY = 'study_edge_cross_corpus'  # where the reused rung's edge check was run (its study's entry there)


def rung_edges(ladder: dict[str, dict], ladder_docs: str) -> dict[str, dict | None]:
  """{rung: its edge check (`ladder.EDGE_FILE`'s shape) or None where none has run}; the reused rung's is its
  study's entry in docs/study_edge_cross_corpus/results.json."""
  config = ladder_config()
  out = {}
  for rung in ladder:
    if rung == config.REUSED_RUNG:
      path = os.path.join(os.path.dirname(os.path.abspath(ladder_docs.rstrip('/'))), EDGE_STUDY, 'results.json')
      found = report.load_json(path) if os.path.exists(path) else None
      study = (found or {}).get('studies', {}).get(config.REUSED_STUDY)
      out[rung] = None if study is None else {**study, 'rate': found['rate'], 'selection_seed': found['selection_seed']}
    else:
      path = os.path.join(ladder_docs, rung, ladder_lib.EDGE_FILE)
      out[rung] = report.load_json(path) if os.path.exists(path) else None
  return out


def edge_table(ladder: dict[str, dict], ladder_docs: str) -> str:
  """Per rung: the encoders that chose the grid's top, those checked one rung past it, whether any choice moves."""
  lines = [
      "| rung | chose the grid's top | checked past it | choice moves | smallest margin |",
      '|---|---|---|---|---|',
  ]
  for rung, edge in rung_edges(ladder, ladder_docs).items():
    results = ladder[rung]
    top = ladder_lib.top_choosers(results)
    trained = sum(1 for row in results['runs'] if row.get('lr_grid'))
    verdict = ladder_lib.edge_verdict(
        {'encoders': {k: v for k, v in (edge or {}).get('encoders', {}).items() if k in top}}
    )
    unchecked = [label for label in top if label not in verdict['checked']]
    if not top:
      checked = 'none needed'
    elif not verdict['checked']:
      checked = 'not yet'
    else:
      checked = f'{len(verdict["checked"])} at {edge["rate"]:g}'
      if unchecked:
        checked += f' (not yet: {", ".join(unchecked)})'
    moves = '' if not verdict['checked'] else (', '.join(verdict['moved']) or 'none')
    margin = '' if verdict['margin'] is None else f'{verdict["margin"]:+.4f}'
    chose = f'{len(top)} of {trained}' + (f' ({", ".join(top)})' if 0 < len(top) < trained else '')
    lines.append(f'| {rung} | {chose} | {checked} | {moves} | {margin} |')
  return '\n'.join(lines) + '\n'


def render(ladder: dict[str, dict], ladder_docs: str, wanted: Sequence[str], curves: str | None) -> str:
  config = ladder_config()
  planned = list(config.CPU_RUNGS)
  done = [rung for rung in planned if rung in ladder]
  rows = rung_rows(ladder, ladder_docs)
  complete = all(
      row['encoders'] == len(config.LABELS) and row['seeds'] and min(row['seeds']) >= 3 for row in rows
  ) and set(planned) <= set(ladder)
  status = (
      'every CPU rung has every encoder at 3 seeds or more'
      if complete
      else 'IN PROGRESS: the tables hold the runs finished so far (rungs with results: '
      + (', '.join(done) or 'none')
      + f'; planned: {", ".join(planned)})'
  )
  first = next(iter(ladder.values()))
  protocol = first['protocol']
  longest = first['eval_lengths'][-1]
  scored = next((r['scored_sets'][str(longest)]['num_characters'] for r in first['runs'] if r.get('scored_sets')), None)
  train_tokens = (first['meta'].get('data') or {}).get('tokenizer', {}).get('num_tokens', {}).get('train')
  steps = {(r['tokens'], r['rung']) for r in rows}
  budget = '; '.join(f'{rung}: {tokens:,}' for tokens, rung in sorted(steps, key=lambda t: t[1]))
  most = max(tokens for tokens, _ in steps)
  passes = (
      ''
      if not train_tokens
      else f' (at most {most / train_tokens:.2f} of a pass over the {train_tokens:,} training tokens)'
  )
  accelerator = ladder.get(config.ACCELERATOR_RUNG)
  device = (
      f'ran on {accelerator["meta"].get("device")}: {accelerator["meta"].get("description", "")}'
      if accelerator
      else 'has not run: no accelerator was lent to this study yet (benchmarks/accelerator.py is prepared for one)'
  )
  text = (
      '# Scale ladder: do the findings survive a larger model?\n\n'
      "Generated by `python -m relpos_jax.study.ladder_page docs/study_scale_ladder` from the rungs' "
      'results.json and run records; do not edit (configs/studies/study_scale_ladder.py says why these rungs). '
      f"Status: **{status}**. Rung {config.REUSED_RUNG} is docs/{config.REUSED_STUDY}'s runs, the same config "
      f'run for run. The accelerator rung ({config.ACCELERATOR_RUNG}) {device}.\n\n'
      f'Training tokens per run{passes}: {budget}. The protocol of every rung: the learning rate chosen per '
      f'encoder on validation at seed {protocol.get("selection_seed")} (not reported) from {protocol.get("lr_grid")}, '
      f"the same {scored:,} test characters at every length to {longest} tokens, Holm over each rung's findings.\n\n"
      + rung_table(rows)
      + f'\nFlattened: a drop under {FLAT_THRESHOLD:.0%}. The training loss is logged on batches the run has not seen before (less than one pass over the '
      'training tokens), so it is a held-out loss; the last quarter of the steps runs at the end of a cosine '
      'decay, so a small drop there says the schedule has settled, not that more data would not help: the '
      'larger rungs see far fewer tokens per parameter than compute-optimal training (about 20, Hoffmann et al. '
      '2022).\n\n'
      "Each finding: A − B at 16x [95% paired t interval over seeds]; ✓ resolved after Holm over that rung's "
      f'findings; n seeds. Verdict (rungs smallest first): *flips* when resolved with opposite signs at two rungs; '
      f'*shrinks* when resolved at the smallest rung and the largest keeps less than {SHRINK:.0%} of it in that '
      'direction; *holds at every rung* when resolved with one sign everywhere otherwise; *not resolved* else.\n\n'
      + findings_table(ladder, wanted)
      + "\n**The rate grid's edge** (the cross-corpus protocol's check, docs/study_edge_cross_corpus): each encoder "
      "whose rate was the grid's top trains again one rung past it at the selection seed, scored on validation at "
      "the training length as the grid was; its choice moves if that loss is below the grid's best. Margin: the "
      "loss past the grid minus the grid's best (nats per token), the smallest over the checked encoders.\n\n"
      + edge_table(ladder, ladder_docs)
      + f'\n![bits per character at 16x and its ratio to the training length against parameters]({PLOT})\n'
  )
  if curves:
    text += f'\n![training loss against step per rung]({CURVES})\n'
  return text


def _interval(row: dict) -> str:
  resolved = 'resolved' if row['resolved_holm'] else 'not resolved'
  return f'{row["mean"]:+.3f} [{row["low"]:+.3f}, {row["high"]:+.3f}], {resolved}, n={row["n"]}'.lstrip('+')


def readme_summary(ladder_docs: str) -> str:
  """The README's one-line ladder finding, from the committed rungs (tests/test_readme_results.py holds the README
  to it): at each larger CPU rung with results, every finding it has a row for, beside the smallest rung's, and
  the across-sizes verdict once every CPU rung has run."""
  ladder = load(ladder_docs)
  config = ladder_config()
  wanted = findings_wanted()
  found = per_rung_findings(ladder, wanted)
  smallest = config.CPU_RUNGS[0]
  size = {rung: f'{config.RUNGS[rung]["num_layers"]} x {config.RUNGS[rung]["model_dim"]}' for rung in config.RUNGS}
  parts = []
  for rung in config.CPU_RUNGS[1:]:
    # A finding is named once it has an interval there (two seeds or more); the others are counted.
    named = [f for f in wanted if (found.get(rung, {}).get(f) or {}).get('low') is not None]
    if not named:
      continue
    params = rung_parameters(ladder[rung])
    each = '; '.join(
        f'{f.replace(" vs ", " − ")} {_interval(found[rung][f])}'
        + (
            f' ({size[smallest]}: {_interval(found[smallest][f])})'
            if (found.get(smallest, {}).get(f) or {}).get('low') is not None
            else ''
        )
        for f in named
    )
    missing = len(wanted) - len(named)
    parts.append(
        f'at {size[rung]} ({params / 1e6:.2f}M parameters), A − B at 16x [95% t over n seeds]: {each}'
        + (f'; {missing} of the {len(wanted)} findings not yet run there on two seeds' if missing else '')
    )
  done = set(config.CPU_RUNGS) <= set(ladder) and all(
      (found.get(r, {}).get(f) or {}).get('low') is not None for r in config.CPU_RUNGS for f in wanted
  )
  if done:
    judged = verdicts(ladder, wanted)
    parts.append('across sizes: ' + '; '.join(f'{f.replace(" vs ", " − ")} {judged[f]}' for f in wanted))
  accelerator = 'an accelerator rung has run' if config.ACCELERATOR_RUNG in ladder else 'no accelerator rung has run'
  status = 'Done' if done else 'In progress'
  return f'{status}: ' + ('. '.join(parts) if parts else 'no larger rung has results yet') + f'; {accelerator}'


def write(ladder_docs: str) -> str:
  ladder = load(ladder_docs)
  if not ladder:
    raise ValueError(f'ladder_page: no rung under {ladder_docs!r} (nor the reused study) has a results.json.')
  os.makedirs(ladder_docs, exist_ok=True)
  wanted = findings_wanted()
  labels = [label for label in ladder_config().LABELS] + ['rope+randomized@0..L-1']
  plot(ladder, os.path.join(ladder_docs, PLOT), labels)
  curves = plot_curves(ladder_docs, list(ladder), os.path.join(ladder_docs, CURVES))
  path = os.path.join(ladder_docs, OUT_FILE)
  files.write_text_atomic(path, render(ladder, ladder_docs, wanted, curves))
  return path


def main(argv: Sequence[str]) -> int:
  if len(argv) != 2:
    print('usage: python -m relpos_jax.study.ladder_page <ladder docs directory>', file=sys.stderr)
    return 2
  try:
    print(write(argv[1]))
  except ValueError as e:
    print(f'error: {e}', file=sys.stderr)
    return 1
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))

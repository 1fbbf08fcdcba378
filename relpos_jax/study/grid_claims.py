"""The vision papers' resolution claims, judged from a resolution study's results by one rule, and which encoder
the study may call best.

    python -m relpos_jax.study.grid_claims docs/resolution_study     # writes docs/resolution_study/claims.md

A claim (GRID_CLAIMS) names the encoders it is about and the baselines its paper compared them with, and how far
past the training resolution the paper tested (`max_multiple`). It is tested only against the baselines it names:
a claim whose named encoder or baseline the study did not run is *not tested as stated* there, never judged
against a stand-in (round one judged "RoPE beats a learned relative bias" against Swin v2's CPB and LookHere's
claim against 2-D ALiBi; neither is the comparison the paper made).

The rule, the LM claims' (`relpos_jax.study.claims`) in 2-D. Cells: one per (A, B, task, side) for each side
beyond the training side up to `max_multiple` times it, on the study's position tasks (`claim_tasks`: the Holm
family's tasks where the study states them, else every task but the canvas, whose fall with size measures the
mean pool's dilution by blank tokens, not position). A cell is tested only where both encoders learned the task at
the training side: mean accuracy over seeds at least halfway from the task's majority-class floor to 1
(`learned_threshold`; a model that has not learned the task at its own resolution says nothing about
extrapolating it). The statistic: the paired t test of the per-seed accuracy differences A - B (`stats`), its
p-value adjusted by Holm over the claim's tested cells (`claims.adjust_within_claim`); a cell reproduces when that
p-value is below 0.05 with A ahead, contradicts when below 0.05 with B ahead, and is not resolved otherwise. The
verdict is `claims.verdict` of those counts, printed beside them.

Best and runner-up (`best_and_runner_up`): at each position task and each side beyond the training side, the two
rows with the highest mean accuracy, compared by the paired t test over their shared seeds, Holm over every such
comparison of the page. The page may call a row *best* at a side only where it beats the runner-up after Holm;
otherwise the two are *not separated*.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Sequence

from relpos_jax import files
from relpos_jax.study import claims as claims_lib
from relpos_jax.study import report as report_lib
from relpos_jax.study import stats
from relpos_jax.train import cli
from relpos_jax.train import config as config_lib

CLAIMS_FILE = 'claims.md'
# Tasks whose fall with grid size measures something other than position (the page of round one says why).
NOT_POSITION_TASKS = ('fashion_mnist_canvas',)
# A row learned a task when its accuracy at the training side closed at least this fraction of the gap between the
# majority-class floor and 1.
LEARNED_FRACTION = 0.5


@dataclasses.dataclass(frozen=True)
class GridClaim:
  """One paper's claim about resolution extrapolation and the comparison it made."""

  paper: str
  claim: str
  protocol: str  # what the paper trained and how far it tested, in a line
  encoders: tuple[str, ...]  # A: the rows the claim is about (study labels)
  baselines: tuple[str, ...]  # B: each row the paper compared them with
  max_multiple: float | None = None  # the sides tested, as a multiple of the training side (None: every side)

  def __post_init__(self):
    if not self.encoders or not self.baselines:
      raise ValueError(
          f'GridClaim {self.claim!r} needs encoders and baselines, got {self.encoders!r}, {self.baselines!r}'
      )
    if self.max_multiple is not None and not self.max_multiple > 1:
      raise ValueError(f'GridClaim {self.claim!r}: max_multiple={self.max_multiple!r} is invalid: allowed: > 1 or None')


GRID_CLAIMS = (
    GridClaim(
        paper='Heo et al. 2024',
        claim='RoPE-Mixed extrapolates in resolution better than axial RoPE',
        protocol='ImageNet-1k, ViT-S/B, hundreds of epochs, tested up to about 2x the training resolution',
        encoders=('rope_mixed',),
        baselines=('rope_axial',),
        max_multiple=2,
    ),
    GridClaim(
        paper='Heo et al. 2024',
        claim='2-D RoPE extrapolates better than an absolute table (APE) and a relative bias table (RPB, Swin v1)',
        protocol='as above; APE and RPB interpolated to the new resolution',
        encoders=('rope_axial', 'rope_mixed'),
        baselines=('learned2d', 'swin_v1'),
        max_multiple=2,
    ),
    GridClaim(
        paper='Fuller et al. 2024',
        claim='LookHere extrapolates better than 2-D RoPE and than the interpolated absolute table',
        protocol='ImageNet, ViT-B, trained at 224 px, tested up to 1024 px (about 4.6x)',
        encoders=('lookhere',),
        baselines=('rope_mixed', 'learned2d'),
    ),
    GridClaim(
        paper='Liu et al. 2022 (Swin v2)',
        claim="the log-spaced continuous position bias transfers to larger grids better than v1's resized table",
        protocol='ImageNet-1k and COCO / ADE20K, windows of 8 to 24 (up to 3x)',
        encoders=('swin_v2_cpb',),
        baselines=('swin_v1',),
    ),
    GridClaim(
        paper='Ruoss et al. 2023, in 2-D',
        claim='positions drawn from a larger range in training extrapolate better than the positions seen',
        protocol='1-D algorithmic tasks (the 2-D form is this library: coordinates drawn per axis from a larger grid)',
        encoders=('rope_axial+random',),
        baselines=('rope_axial',),
    ),
    GridClaim(
        paper='Siméoni et al. 2025 (DINOv3)',
        claim='coordinate augmentation (RoPE box jitter) makes axial RoPE robust to the resolution',
        protocol='self-supervised ViT-7B, evaluated across resolutions',
        encoders=('rope_axial+augment',),
        baselines=('rope_axial',),
    ),
)


def claim_tasks(results: dict) -> list[str]:
  """The tasks a claim is judged on: the study's Holm-family tasks where it states them, else every task but
  NOT_POSITION_TASKS, in the study's order."""
  family = results['protocol'].get('family_tasks')
  order = results.get('task_order') or sorted(results['tasks'])
  names = [n for n in order if n in results['tasks']]
  return [n for n in names if n in family] if family is not None else [n for n in names if n not in NOT_POSITION_TASKS]


def _rows(results: dict, task: str) -> dict[str, dict]:
  return {r['name']: r for r in results['tasks'][task]['runs']}


def _beyond(results: dict, max_multiple: float | None) -> list[int]:
  train = int(results['train_side'])
  sides = [int(s) for s in results['eval_sides'] if int(s) > train]
  return [s for s in sides if max_multiple is None or s <= max_multiple * train]


def learned_threshold(results: dict, task: str) -> float | None:
  """Halfway (LEARNED_FRACTION) from the task's majority-class floor at the training side to 1; None where the
  floor is unknown (a task re-reported without its test labels)."""
  floor = (results['tasks'][task].get('majority_baseline') or {}).get(str(results['train_side']))
  return None if floor is None else floor + LEARNED_FRACTION * (1 - floor)


def _learned(results: dict, task: str, row: dict) -> tuple[bool, float]:
  accuracy = row['accuracy'][str(results['train_side'])]
  threshold = learned_threshold(results, task)
  return threshold is None or accuracy >= threshold, accuracy


def paired_accuracies(a: dict, b: dict, side: int) -> tuple[list[float], list[float], list[int]]:
  """Rows A's and B's test accuracies at `side`, aligned by the seeds they share (A's order), and those seeds."""
  seeds = [s for s in a['seeds'] if s in b['seeds']]
  key = str(side)
  va = [a['accuracy_per_seed'][key][a['seeds'].index(s)] for s in seeds]
  vb = [b['accuracy_per_seed'][key][b['seeds'].index(s)] for s in seeds]
  return va, vb, seeds


def _cell(task: str, who: str, side: int, status: str, **extra) -> dict:
  return {'task': task, 'who': who, 'where': f'{side}x{side}', 'status': status, **extra}


def judge(claim: GridClaim, results: dict) -> dict:
  """The claim's cells and verdict by the module docstring's rule; 'not_run': the named rows the study lacks."""
  tasks = claim_tasks(results)
  present = {name for task in tasks for name in _rows(results, task)}
  not_run = [e for e in (*claim.encoders, *claim.baselines) if e not in present]
  cells = []
  for task in tasks:
    rows = _rows(results, task)
    for a in claim.encoders:
      for b in claim.baselines:
        who = f'{a} vs {b}'
        sides = _beyond(results, claim.max_multiple)
        if a not in rows or b not in rows:
          cells += [_cell(task, who, side, 'no result') for side in sides]
          continue
        learned = {name: _learned(results, task, rows[name]) for name in (a, b)}
        unlearned = [(name, value) for name, (ok, value) in learned.items() if not ok]
        for side in sides:
          if unlearned:
            why = ', '.join(f'{name} {value:.3f}' for name, value in unlearned)
            cells.append(_cell(task, who, side, 'not tested', why=why))
            continue
          va, vb, seeds = paired_accuracies(rows[a], rows[b], side)
          diff, p_value = stats.paired_difference(va, vb), stats.paired_p_value(va, vb)
          if p_value is None:
            cells.append(_cell(task, who, side, 'not tested', why=f'{len(seeds)} shared seed(s): no test'))
            continue
          cells.append(_cell(task, who, side, 'not resolved', diff=diff, p_value=p_value, seeds=len(seeds)))
  claims_lib.adjust_within_claim(cells)
  verdict = claims_lib.verdict(cells)
  if not_run:
    missing = ', '.join(not_run)
    verdict = f'not tested as stated ({missing} not run)' if verdict.startswith('not tested') else verdict
  return {'claim': claim, 'cells': cells, 'verdict': verdict, 'counts': claims_lib.counts(cells), 'not_run': not_run}


def best_and_runner_up(results: dict) -> list[dict]:
  """At each position task and side beyond the training side: the two rows of highest mean accuracy, their
  paired difference and p-value, Holm over every such pair of the page (`p_holm`), and whether the page may call
  the first best (`separated`). Rows without every seed of the study are left out."""
  seeds = list(results['seeds'])
  out = []
  for task in claim_tasks(results):
    complete = [r for r in results['tasks'][task]['runs'] if list(r['seeds']) == seeds]
    for side in _beyond(results, None):
      ranked = sorted(complete, key=lambda r: -r['accuracy'][str(side)])
      if len(ranked) < 2:
        continue
      best, runner_up = ranked[:2]
      va, vb, _ = paired_accuracies(best, runner_up, side)
      out.append(
          {
              'task': task,
              'side': side,
              'best': best['name'],
              'runner_up': runner_up['name'],
              'best_mean': best['accuracy'][str(side)],
              'runner_up_mean': runner_up['accuracy'][str(side)],
              'diff': stats.paired_difference(va, vb),
              'p_value': stats.paired_p_value(va, vb),
          }
      )
  family = stats.holm([row['p_value'] for row in out])
  for row, adjusted, resolved in zip(out, family['adjusted'], family['resolved']):
    row['p_holm'], row['separated'] = adjusted, bool(resolved)
  return out


# ------------------------------------------------------------------------------------------------- render
def _interval_text(d: dict) -> str:
  """A paired difference as '+0.150 [+0.088, +0.211]' (the mean alone without an interval)."""
  return f'{d["mean"]:+.3f} [{d["low"]:+.3f}, {d["high"]:+.3f}]' if d['low'] is not None else f'{d["mean"]:+.3f}'


def _difference_text(cell: dict) -> str:
  text = _interval_text(cell['diff'])
  return text + (f', p (Holm) {cell["p_holm"]:.2g}' if cell.get('p_holm') is not None else '')


def _cells_text(judged: dict) -> str:
  parts = []
  for status in claims_lib.TESTED:
    chosen = [c for c in judged['cells'] if c['status'] == status]
    if chosen:
      items = '; '.join(f'{c["task"]} {c["who"]} at {c["where"]} {_difference_text(c)}' for c in chosen)
      parts.append(f'{status}: {items}')
  untested = {(c['task'], c['who'], c['why']) for c in judged['cells'] if c['status'] == 'not tested'}
  if untested:
    items = '; '.join(f'{task} {who} ({why})' for task, who, why in sorted(untested))
    parts.append(f'not learned at the training side: {items}')
  if judged['not_run']:
    parts.append(f'not run: {", ".join(judged["not_run"])}')
  return ' — '.join(parts) or 'no cell'


def markdown(results: dict, claims: Sequence[GridClaim] = GRID_CLAIMS) -> str:
  """The claims table and the best-and-runner-up table of a resolution study, with the rule they follow."""
  train = results['train_side']
  tasks = ', '.join(claim_tasks(results))
  lines = [
      '## Against the published claims (generated: `python -m relpos_jax.study.grid_claims <study folder>`)',
      '',
      f'The rule (relpos_jax/study/grid_claims.py): each claim tested only against the baselines its paper named, '
      f"on {tasks}, at each side past {train}x{train} up to the paper's own multiple; a cell only where both rows "
      f'learned the task at {train}x{train} (accuracy at least {LEARNED_FRACTION:g} of the way from the '
      'majority-class floor to 1); paired t over seeds, Holm within the claim. Counts are of the tested cells.',
      '',
      '| claim | its protocol | cells here | counts | verdict |',
      '|---|---|---|---|---|',
  ]
  for claim in claims:
    judged = judge(claim, results)
    lines.append(
        f'| {claim.claim} ({claim.paper}) | {claim.protocol} | {_cells_text(judged)} | '
        f'{claims_lib.counts_text(judged)} | **{judged["verdict"]}** |'
    )
  lines += [
      '',
      '## Best and runner-up',
      '',
      'At each side past the training side, the two rows with the highest mean accuracy, paired over seeds; Holm over '
      'every row of this table. "best" only where the first beats the second after Holm.',
      '',
      '| task | side | first | second | first − second [95% t] | p (Holm) | called |',
      '|---|---|---|---|---|---|---|',
  ]
  for row in best_and_runner_up(results):
    interval = _interval_text(row['diff'])
    p = f'{row["p_holm"]:.2g}' if row['p_holm'] is not None else '—'
    called = f'best: {row["best"]}' if row['separated'] else 'not separated'
    lines.append(
        f'| {row["task"]} | {row["side"]}x{row["side"]} | {row["best"]} {row["best_mean"]:.3f} | '
        f'{row["runner_up"]} {row["runner_up_mean"]:.3f} | {interval} | {p} | {called} |'
    )
  return '\n'.join(lines) + '\n'


TABLE_MARKER = '<!-- grid-claims: python -m relpos_jax.study.grid_claims {folder} (generated from results.json) -->'
TABLE_END = '<!-- /grid-claims -->'


def with_table(page: str, table: str, folder: str) -> str:
  """`page` with the text between its marker lines replaced by `table` (the page unchanged without them)."""
  start = TABLE_MARKER.format(folder=folder)
  if start not in page or TABLE_END not in page:
    return page
  head, rest = page.split(start, 1)
  return f'{head}{start}\n{table}{TABLE_END}{rest.split(TABLE_END, 1)[1]}'


def write_results(results: dict, study_dir: str) -> list[str]:
  """Writes `<study_dir>/claims.md` from `results`, and the same tables into its README.md between the marker
  lines where it has them; returns the paths written."""
  table = markdown(results)
  written = [str(files.write_text_atomic(os.path.join(study_dir, CLAIMS_FILE), table))]
  readme = os.path.join(study_dir, 'README.md')
  if os.path.isfile(readme):
    text = open(readme, encoding='utf-8').read()
    updated = with_table(text, table, os.path.normpath(study_dir))
    if updated != text:
      written.append(str(files.write_text_atomic(readme, updated)))
  return written


def write(study_dir: str) -> list[str]:
  """`write_results` of `<study_dir>/results.json`."""
  source = os.path.join(study_dir, 'results.json')
  if not os.path.isfile(source):
    raise config_lib.ConfigError(f'{source} does not exist: allowed: a resolution study folder with its results.json')
  return write_results(report_lib.load_json(source), study_dir)


def main(argv: Sequence[str]) -> int:
  if len(argv) != 2:
    print('usage: python -m relpos_jax.study.grid_claims <resolution study folder with results.json>', file=sys.stderr)
    return 2
  with cli.errors_in_one_line():  # a missing or damaged results file: its one-line message, nothing written
    print('\n'.join(write(argv[1])))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))

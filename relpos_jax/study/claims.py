"""The papers' claims, each judged from the committed suite reports by one rule, and the claims table.

    python -m relpos_jax.study.claims docs/          # writes docs/claims.md from docs/suite*/

Each claim (CLAIMS) is data: the report it is read from, the encoders and tasks, the statistic, and its test:

  compare   encoder A beats encoder B (`a` vs each of `b`), beyond the training lengths
  fails     an encoder's accuracy beyond the training lengths stays below the suite's threshold (Delétang et al.
            count a task solved when its accuracy is at least 90%, the suite's ID_LEARNED)
  holds     an encoder's accuracy beyond the training lengths stays at or above that threshold
  glitches  a held-out set (Liu et al.'s flip-flop sets) makes every seed of an encoder err, rarely (GLITCH_RARE)

The rule. A comparison is made only where every encoder in it learned the task in distribution by the
claim's own metric (mean over seeds within the training lengths >= ID_LEARNED = 0.9, the suite's threshold: exact
match for a sequence-level claim, per-token accuracy for a token-level one or a task in `token_tasks`); a side that
did not learn the task makes the cell *not tested*. The statistic: the paired t test of the per-seed differences
(A - B for `compare`, the accuracy minus 0.9 for `holds`, 0.9 minus it for `fails`; `relpos_jax.study.stats`),
its p-value adjusted by Holm (1979) over the claim's tested cells (`stats.holm`: the claim is one family, so a claim
tested at many tasks and lengths does not reproduce by the chance of one of them). A tested cell *reproduces* the
claim when its Holm-adjusted p-value is below 0.05 and its mean is on the claim's side, *contradicts* it when that
p-value is below 0.05 on the other side, and is *not resolved* otherwise (with 2 seeds the t quantile is 12.7, so
only very consistent seeds resolve). The table prints each cell's uncorrected 95% t interval and its Holm p-value.

`glitches` (Liu et al.'s "sporadic errors" of a model that otherwise solves flip-flop): a cell reproduces when
every seed errs on the held-out set at a rare rate, above 0 and below GLITCH_RARE (1% of reads, 10 per 1,000);
contradicts it when no seed errs (a clean run bounds its rate below 3 / reads, the rule of three); is not resolved
when some seeds err rarely and others not at all; and is *not tested* when any seed errs on 1% of reads or more: a
model that fails that often has not learned the set, it is not glitching. Holm does not apply (no p-value).

The verdict, from the counts of tested cells (R reproduced, C contradicted, U not resolved of T = R + C + U), always
printed beside it: *reproduced* when R = T and every cell was tested (*reproduced where tested* when others could
not be tested or were not run), *contradicted* (*where tested*) when C = T, *not resolved* when U = T, *mostly
reproduced* when R > T / 2, *mostly contradicted* when C > T / 2, *mostly not resolved* when U > T / 2, *mixed*
when no kind is more than half, and *not tested at this scale* when T = 0. `compare`, `holds` and `fails` are
judged at each length beyond the training lengths (written with its multiple of the longest training length) or,
where the claim is the papers' mean over those lengths (`per_length=False`), on that mean.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from typing import Sequence

from relpos_jax import files
from relpos_jax.data.tasks import registry as task_registry
from relpos_jax.study import report as report_lib
from relpos_jax.study import stats, suite_summary
from relpos_jax.train import cli
from relpos_jax.train import config as config_lib

CLAIMS_FILE = 'claims.md'
# The verdict of a claim whose report folder is absent: said as such in every table (README included), never
# read as a result of the rule.
REPORT_ABSENT = 'no report (its folder is absent)'
KINDS = ('compare', 'fails', 'holds', 'glitches')
STATUSES = ('reproduced', 'contradicted', 'not resolved', 'not tested', 'no result')
TESTED = STATUSES[:3]
# A glitch is a rare error: every seed errs on fewer than this fraction of the held-out reads. Liu et al. 2023's
# glitches are sporadic errors of a model that otherwise solves flip-flop; one wrong on 1% of its reads or more
# has not learned the set (NoPE's 18% on the dense set here is failure, not a glitch). Rates are stored per 1,000
# reads, so the bound there is 1000 * GLITCH_RARE = 10.
GLITCH_RARE = 0.01
# Delétang et al.'s context-free and context-sensitive tasks, as the task registry groups them.
NON_REGULAR = tuple(cls.name for cls in (*task_registry.CHOMSKY_CONTEXT_FREE, *task_registry.CHOMSKY_CONTEXT_SENSITIVE))


@dataclasses.dataclass(frozen=True)
class Claim:
  """One paper's claim and how the reports test it (see the module docstring for the kinds)."""

  paper: str  # who claims it
  claim: str  # what they claim, in a line
  report: str  # the report folder under the docs directory, e.g. 'suite_ruoss'
  kind: str
  tasks: tuple[str, ...]
  encoders: tuple[str, ...]  # `a` (compare), or the encoders tested (fails, holds, glitches)
  baselines: tuple[str, ...] = ()  # compare: each `b`
  level: str = 'token'  # 'token' (per-token accuracy) or 'sequence' (exact match of the whole answer)
  token_tasks: tuple[str, ...] = ()  # tasks read per token whatever `level` (flip-flop's papers score each read)
  per_length: bool = True  # False: the mean over the lengths beyond the training lengths
  note: str = ''  # the protocol difference the table states beside the verdict

  def __post_init__(self):
    if self.kind not in KINDS:
      raise ValueError(f'claims: kind={self.kind!r} is invalid; allowed: one of {KINDS}.')
    if self.level not in ('token', 'sequence'):
      raise ValueError(f"claims: level={self.level!r} is invalid; allowed: 'token' or 'sequence'.")
    if (self.kind == 'compare') != bool(self.baselines):
      raise ValueError(
          f'claims: baselines={self.baselines!r} is invalid for kind {self.kind!r}; allowed: some '
          "encoders for 'compare', none otherwise."
      )
    if not self.tasks or not self.encoders:
      raise ValueError(
          f'claims: {self.paper}: tasks={self.tasks!r}, encoders={self.encoders!r}; allowed: both ' 'non-empty.'
      )


# Delétang et al.'s claim, read on the CPU preset and again on the two tasks only its 5x budget learns.
DELETANG = Claim(
    paper='Delétang et al. 2023',
    claim='transformers do not generalize beyond the training lengths on non-regular tasks (accuracy < 90%)',
    report='suite',
    kind='fails',
    tasks=NON_REGULAR,
    encoders=('nope', 'rope', 'alibi', 't5', 'dape'),
    per_length=False,
    note='a 3-layer model, 1,000-2,500 steps, 2 seeds; the tasks no encoder learns test nothing',
)


CLAIMS = (
    Claim(
        paper='Ruoss et al. 2023',
        claim='randomized positions raise accuracy beyond the training lengths (+12.0% on average over their tasks)',
        report='suite_ruoss',
        kind='compare',
        tasks=('even_pairs', 'reverse_string', 'bucket_sort', 'cycle_navigation', 'missing_duplicate', 'flip_flop'),
        encoders=('rope+rand.2x', 'rope+rand.8x', 'rope+rand.2048'),
        baselines=('rope',),
        per_length=False,
        note='2,000-2,500 steps against 2,000,000; 3 seeds against 10; the mean over the test lengths, as theirs',
    ),
    DELETANG,
    dataclasses.replace(
        DELETANG,
        claim='the same, on the two tasks learned only at 5x the steps (docs/suite_probe)',
        report='suite_budget',
        tasks=('duplicate_string', 'odds_first'),
        note='the CPU preset at 5,000 steps, 2 seeds',
    ),
    Claim(
        paper='Liu et al. 2023',
        claim='attention makes sporadic errors (glitches) on flip-flop, on sparse and dense held-out sequences',
        report='suite_contextual',
        kind='glitches',
        tasks=('flip_flop',),
        encoders=('nope', 'rope', 'alibi', 'cope', 'fox', 'stick_breaking'),
        note='1,000 steps; the sets scored at the longest training length (32 pairs), far shorter than theirs',
    ),
    Claim(
        paper='Golovneva et al. 2024 (CoPE)',
        claim='CoPE solves selective copy, counting and flip-flop where the usual position encodings fail',
        report='suite_contextual',
        kind='compare',
        tasks=('selective_copy', 'cope_counting', 'count_copy', 'flip_flop'),
        encoders=('cope',),
        baselines=('nope', 'rope', 'alibi'),
        level='sequence',
        token_tasks=('flip_flop',),
        note=(
            'splits scaled by 1/8; exact match (flip_flop: per read, as their error rate); 2 seeds, 3 where the task '
            "ran under the study protocol (the report's protocol table)"
        ),
    ),
    Claim(
        paper='Kazemnejad et al. 2023',
        claim='NoPE length-generalizes better than RoPE, ALiBi and T5 in decoder-only models',
        report='suite_contextual',
        kind='compare',
        tasks=('count_copy', 'addition'),
        encoders=('nope',),
        baselines=('rope', 'alibi'),
        level='sequence',
        note=(
            'two of their tasks (their copy variant, addition), exact match as theirs; T5 is not in this report; '
            '1,000 steps, 2 seeds (count_copy: 3, under the study protocol)'
        ),
    ),
    Claim(
        paper='Lin et al. 2025 (FoX), Tan et al. 2024 (stick-breaking)',
        claim='a learned decay by content extrapolates beyond the training lengths where RoPE does not',
        report='suite_contextual',
        kind='compare',
        tasks=('flip_flop', 'passkey_tokens', 'mqar', 'count_copy', 'selective_copy', 'cope_counting'),
        encoders=('fox', 'stick_breaking'),
        baselines=('rope',),
        note='causal tasks only (both are causal); per-token accuracy; 2 seeds, 3 under the study protocol',
    ),
    Claim(
        paper='Cho et al. 2024 (position coupling)',
        claim='coupled position ids make addition generalize to much longer operands',
        report='suite',
        kind='holds',
        tasks=('addition_coupled',),
        encoders=('rope',),
        level='sequence',
        note='trained to 8 digits, not 30; exact match of all n+1 answer digits, as theirs; 2 seeds',
    ),
    Claim(
        paper='McLeish et al. 2024 (Abacus)',
        claim='a learned embedding of digit significance, with NoPE or FIRE, adds numbers far longer than trained',
        report='suite_abacus',
        kind='holds',
        tasks=('addition_abacus',),
        encoders=('abacus+nope', 'abacus+fire', 'abacus+rope'),
        level='sequence',
        note='2,000 steps of a 3-layer, d 64 model against a day of one GPU; exact match as theirs',
    ),
)


# ------------------------------------------------------------------------------------------------ reports
def load_reports(docs: str, folders: Sequence[str] | None = None) -> dict:
  """{folder: {'summary': summary.json, 'results': {task: results.json}}} for every report the claims read
  (`folders`, default theirs) that exists under `docs` (an absent one: its claims' verdict says so).

  A report that exists must be whole: a summary that is no suite summary (an object with 'tasks' and 'cells'),
  or a task it lists whose results.json is missing or is no study report (an object with 'runs'), is refused
  naming the file (ConfigError): judging the claims on the tasks left would rewrite the verdicts from part of
  the report."""
  out = {}
  for folder in folders if folders is not None else sorted({c.report for c in CLAIMS}):
    path = os.path.join(docs, folder, suite_summary.SUMMARY_FILE)
    if not os.path.exists(path):
      continue
    summary = report_lib.load_object(path, ('tasks', 'cells'), 'a suite summary (relpos_jax.study.suite_summary)')
    results = {}
    for task in summary['tasks']:
      task_path = os.path.join(docs, folder, task, 'results.json')
      if not os.path.isfile(task_path):
        raise config_lib.ConfigError(
            f'claims: {task_path} is missing: {path} lists task {task!r}; restore its report or regenerate the '
            'summary (the claims are never judged on part of a report).'
        )
      results[task] = report_lib.load_object(task_path, ('runs',), 'a study report (relpos_jax.study.report)')
    out[folder] = {'summary': summary, 'results': results}
  return out


def _run(report: dict, task: str, encoder: str) -> dict | None:
  for run in (report['results'].get(task) or {}).get('runs', ()):
    if run['name'] == encoder:
      return run
  return None


def _per_seed(run: dict, lengths: Sequence[int], level: str) -> dict:
  """{seed: the mean over `lengths` of its values} (a seed missing a value at any of them is left out)."""
  key = 'by_length' if level == 'token' else 'exact_match_by_length'
  seeds = list(run.get('seeds') or [0])
  columns = []
  for n in lengths:
    values = (run.get(f'{key}_per_seed') or {}).get(str(n))
    if values is None and key in run and len(seeds) == 1:
      values = [run[key].get(str(n))]
    if values is None:
      return {}
    columns.append(values)
  out = {}
  for k, seed in enumerate(seeds):
    row = [c[k] if k < len(c) else None for c in columns]
    if all(v is not None and not math.isnan(float(v)) for v in row):
      out[seed] = sum(float(v) for v in row) / len(row)
  return out


def _beyond(results: dict) -> tuple[list[int], int]:
  """(the evaluation lengths outside the training range, the longest training length)."""
  shortest, longest = suite_summary.training_range(results)
  return [n for n in results['eval_lengths'] if not shortest <= n <= longest], longest


def _where(n: int, longest: int) -> str:
  return f'{n} ({n / longest:.3g}x)'


def _level(claim: Claim, task: str) -> str:
  """The metric the claim reads on `task`: 'token' or 'sequence' (exact match)."""
  return 'token' if task in claim.token_tasks else claim.level


def _learned(report: dict, task: str, encoder: str, level: str = 'token') -> tuple[bool, float | None]:
  """(learned in distribution by `level`'s metric, that metric's mean over seeds within the training lengths):
  the suite summary's per-token cell, or its exact-match one ('sequence'; None where the run stored none)."""
  cell = report['summary']['cells'].get(f'{task}/{encoder}') or {}
  if level == 'token':
    value = cell.get('in_distribution')
  else:
    value = ((cell.get('sequence') or {}).get('in_distribution') or {}).get('mean')
  return value is not None and value >= suite_summary.ID_LEARNED, value


def _cell(task, who, where, status, **extra) -> dict:
  return {'task': task, 'who': who, 'where': where, 'status': status, **extra}


def _untested(report, task, encoders, level: str = 'token') -> str | None:
  """Why a cell of these encoders on `task` is not tested (a side not learned by `level`'s metric), or None."""
  missing = [e for e in encoders if not _learned(report, task, e, level)[0]]
  if not missing:
    return None
  named = ', '.join(
      f'{e} {value:.3f}' if (value := _learned(report, task, e, level)[1]) is not None else f'{e} —' for e in missing
  )
  return named + (' exact' if level == 'sequence' else '')


def judge(claim: Claim, reports: dict) -> dict:
  """The claim's cells (one per task, encoder or pair, and length or mean) and its verdict, by the rule above."""
  report = reports.get(claim.report)
  cells = []
  if report is None:
    return {'claim': claim, 'cells': cells, 'verdict': REPORT_ABSENT, 'missing_report': True}
  for task in claim.tasks:
    results = report['results'].get(task)
    if claim.kind == 'glitches':
      cells += _glitch_cells(claim, report, task)
      continue
    groups = (
        [(a, b) for a in claim.encoders for b in claim.baselines]
        if claim.kind == 'compare'
        else [(e, None) for e in claim.encoders]
    )
    for a, b in groups:
      who = f'{a} vs {b}' if b else a
      runs = [_run(report, task, e) for e in (a, b) if e]
      if results is None or not all(runs):
        cells.append(_cell(task, who, '', 'no result'))
        continue
      level = _level(claim, task)
      reason = _untested(report, task, [e for e in (a, b) if e], level)
      beyond, longest = _beyond(results)
      points = [(f'beyond {longest}', beyond)] if not claim.per_length else [(_where(n, longest), [n]) for n in beyond]
      for where, lengths in points:
        if reason:
          cells.append(_cell(task, who, where, 'not tested', why=reason))
          continue
        first = _per_seed(runs[0], lengths, level)
        if claim.kind == 'compare':
          second = _per_seed(runs[1], lengths, level)
          seeds = sorted(set(first) & set(second))
          pair = ([first[s] for s in seeds], [second[s] for s in seeds])
        else:
          seeds = sorted(first)
          values = [first[s] for s in seeds]
          threshold = [suite_summary.ID_LEARNED] * len(values)
          pair = (values, threshold) if claim.kind == 'holds' else (threshold, values)
        diff, p_value = stats.paired_difference(*pair), stats.paired_p_value(*pair)
        if not seeds:
          cells.append(_cell(task, who, where, 'no result'))
          continue
        extra = {}
        if claim.kind != 'compare' and diff['low'] is not None:  # the accuracy itself, with its interval
          sign = 1 if claim.kind == 'holds' else -1
          ends = sorted(suite_summary.ID_LEARNED + sign * diff[k] for k in ('low', 'high'))
          extra['accuracy'] = (suite_summary.ID_LEARNED + sign * diff['mean'], *ends)
        cells.append(_cell(task, who, where, 'not resolved', diff=diff, p_value=p_value, seeds=len(seeds), **extra))
  adjust_within_claim(cells)
  return {'claim': claim, 'cells': cells, 'verdict': verdict(cells), 'counts': counts(cells)}


def adjust_within_claim(cells: list[dict]) -> None:
  """Each tested cell's status from its p-value adjusted by Holm over the claim's tested cells (in place): below
  1 - CONFIDENCE on the claim's side (mean > 0) reproduces, on the other contradicts, otherwise not resolved."""
  tested = [c for c in cells if 'p_value' in c]
  family = stats.holm([c['p_value'] for c in tested])
  for c, adjusted, resolved in zip(tested, family['adjusted'], family['resolved']):
    c['p_holm'] = adjusted
    if resolved:
      c['status'] = 'reproduced' if c['diff']['mean'] > 0 else 'contradicted'


def _glitch_cells(claim: Claim, report: dict, task: str) -> list[dict]:
  held_out = (report['summary'].get('held_out') or {}).get(task) or {}  # {encoder: {set: {length: cell}}}
  cells = []
  for encoder in claim.encoders:
    sets = held_out.get(encoder)
    if not sets:
      cells.append(_cell(task, encoder, '', 'no result'))
      continue
    reason = _untested(report, task, [encoder], _level(claim, task))
    for name in sorted(sets):
      for n, cell in sets[name].items():
        where = name if len(sets[name]) == 1 else f'{name} at {n}'
        if reason:
          cells.append(_cell(task, encoder, where, 'not tested', why=reason))
          continue
        rates, reads = cell['per_seed'], [float(r) for r in cell['scored_tokens']]
        extra = {'rates': rates, 'bound': 1000 * stats.clean_run_bound(min(reads))}
        if any(r >= 1000 * GLITCH_RARE for r in rates):  # errs too often to be glitching: not learned
          worst = suite_summary.glitch_rate_text(max(rates))
          cells.append(_cell(task, encoder, where, 'not tested', why=f'{encoder} errs {worst} per 1,000', **extra))
          continue
        if all(r > 0 for r in rates):
          status = 'reproduced'
        elif all(r == 0 for r in rates):
          status = 'contradicted'  # no glitch in any seed: the rate is below 3 / reads
        else:
          status = 'not resolved'
        cells.append(_cell(task, encoder, where, status, **extra))
  return cells


def counts(cells: Sequence[dict]) -> dict[str, int]:
  """{status: how many cells have it} for every status (STATUSES)."""
  return {status: sum(c['status'] == status for c in cells) for status in STATUSES}


def verdict(cells: Sequence[dict]) -> str:
  """The claim's verdict from its tested cells' counts, by the rule of the module docstring: 'reproduced',
  'contradicted' or 'not resolved' (every tested cell alike; 'reproduced where tested' and 'contradicted where
  tested' when some cells were not tested or not run), 'mostly reproduced' / 'mostly contradicted' / 'mostly
  not resolved' (more than half of the tested cells), 'mixed' (no kind more than half), or 'not tested at this
  scale' (no tested cell)."""
  found = counts(cells)
  tested = sum(found[s] for s in TESTED)
  if not tested:
    return 'not tested at this scale'
  for status in TESTED:
    if found[status] == tested:
      return status + ('' if tested == len(cells) or status == 'not resolved' else ' where tested')
  for status in TESTED:
    if 2 * found[status] > tested:
      return f'mostly {status}'
  return 'mixed'


def counts_text(judged: dict) -> str:
  """'6 reproduced, 0 contradicted, 2 not resolved' (of the tested cells), and the untested ones where any."""
  found = judged['counts'] if 'counts' in judged else counts(judged['cells'])
  text = ', '.join(f'{found[s]} {s}' for s in TESTED)
  untested = found['not tested'] + found['no result']
  return text + (f'; {untested} not tested' if untested else '')


# ------------------------------------------------------------------------------------------------- render
def _cell_text(claim: Claim, cell: dict, with_task: bool) -> str:
  head = ' '.join(p for p in ((cell['task'] if with_task else ''), cell['who'], cell['where']) if p)
  if 'rates' in cell:
    rates = ', '.join(map(suite_summary.glitch_rate_text, cell['rates']))
    if cell['status'] == 'contradicted':
      return f'{head} (0 in every seed: below {cell["bound"]:.2g} per 1,000)'
    if cell['status'] == 'not tested':
      return f'{head} ({rates} per 1,000: not rare, a seed at {1000 * GLITCH_RARE:g} or more)'
    return f'{head} ({rates} per 1,000)'
  if 'accuracy' in cell:
    mean, low, high = cell['accuracy']
    return f'{head} {mean:.2f} [{low:.2f}, {high:.2f}]' + _holm_text(cell)
  if 'diff' in cell:
    d = cell['diff']
    if d['low'] is None:
      return f'{head} ({d["mean"]:+.2f}, {cell["seeds"]} seed: no interval)'
    return f'{head} {d["mean"]:+.2f} [{d["low"]:+.2f}, {d["high"]:+.2f}]' + _holm_text(cell)
  if 'why' in cell:
    return f'{head} (not learned in distribution: {cell["why"]})'
  return head


def _holm_text(cell: dict) -> str:
  return '' if cell.get('p_holm') is None else f', p (Holm) {cell["p_holm"]:.2g}'


def _group(claim: Claim, cells: Sequence[dict], status: str) -> str:
  chosen = [c for c in cells if c['status'] == status]
  if status == 'not tested':  # one entry per task and pair: the reason, not every length (a glitch set's own rates)
    seen, kept = set(), []
    for c in chosen:
      where = c['where'] if 'rates' in c else ''
      if (c['task'], c['who'], where) not in seen:
        seen.add((c['task'], c['who'], where))
        kept.append({**c, 'where': where})
    chosen = kept
  if status == 'no result':
    return ', '.join(sorted({f'{c["task"]} {c["who"]}' for c in chosen}))
  return '; '.join(_cell_text(claim, c, True) for c in chosen)


LABELS = {
    'reproduced': 'reproduced',
    'contradicted': 'contradicted',
    'not resolved': 'not resolved',
    'not tested': 'not tested',
    'no result': 'no result in the report',
}
GLITCH_LABELS = {
    **LABELS,
    'reproduced': 'reproduced (a glitch in every seed)',
    'contradicted': 'no glitch in any seed',
    'not resolved': 'glitches in some seeds only',
    'not tested': f'not tested (not learned, or errors not rare: a seed at {1000 * GLITCH_RARE:g} or more per 1,000)',
}


def _multiple(where: str) -> str:
  """'24 (1.5x)' -> '1.5x'; 'dense at 32' and 'beyond 16' stay as they are."""
  return where[where.index('(') + 1 : -1] if where.endswith('x)') else where


def _by_task(cells: Sequence[dict], joiner: str = ' at ') -> str:
  """Cells grouped as 'task (who at where, where; who ...)', e.g. 'selective_copy (cope vs rope at 0.5x, 2x)'."""
  tasks = {}
  for c in cells:
    wheres = tasks.setdefault(c['task'], {}).setdefault(c['who'], [])
    where = _multiple(c['where'])
    if where and not where.startswith('beyond'):
      wheres.append(where)
  groups = []
  for task, whos in tasks.items():
    named = [who + (joiner + ', '.join(w) if w else '') for who, w in whos.items()]
    groups.append(f'{task} ({"; ".join(named)})')
  return '; '.join(groups)


def where_text(judged: dict) -> str:
  """The verdict's extent in a line: where it reproduced, where it was contradicted or not resolved, and the
  tasks that tested nothing (a side not learned) or have no result."""
  cells = judged['cells']
  parts = []
  glitches = judged['claim'].kind == 'glitches'
  labels = GLITCH_LABELS if glitches else LABELS
  for status in ('reproduced', 'contradicted', 'not resolved'):
    chosen = [c for c in cells if c['status'] == status]
    if chosen:
      parts.append(f'{labels[status]}: {_by_task(chosen, " on " if glitches else " at ")}')
  if glitches and (rare := [c for c in cells if c['status'] == 'not tested' and 'rates' in c]):
    parts.append(f'errors not rare (≥ {1000 * GLITCH_RARE:g} per 1,000 in a seed): {_by_task(rare, " on ")}')
  tested = {c['task'] for c in cells if c['status'] in TESTED}
  for status, label in (('not tested', 'not learned in distribution'), ('no result', 'not in the report')):
    tasks = sorted({c['task'] for c in cells if c['status'] == status} - tested)
    if tasks:
      parts.append(f'{label}: {", ".join(tasks)}')
  return '. '.join(parts)


def _test_text(claim: Claim) -> str:
  level = 'per-token accuracy' if claim.level == 'token' else 'exact match'
  where = 'at each length beyond the training lengths' if claim.per_length else 'mean over the lengths beyond them'
  if claim.token_tasks:
    level += f' ({", ".join(claim.token_tasks)}: per-token accuracy)'
  if claim.kind == 'compare':
    return f'{", ".join(claim.encoders)} − {", ".join(claim.baselines)}, {level}, {where}, paired over seeds'
  if claim.kind == 'glitches':
    return (
        f'{", ".join(claim.encoders)}: glitches per 1,000 reads on the held-out sets, every seed above 0 and below '
        f'{1000 * GLITCH_RARE:g}'
    )
  side = '≥' if claim.kind == 'holds' else '<'
  return f'{", ".join(claim.encoders)}: {level} {side} {suite_summary.ID_LEARNED}, {where}'


def markdown(judged: Sequence[dict], link_prefix: str = '') -> str:
  """The claims table: one row per claim (paper, claim, report, test, verdict, the protocol difference), then
  each claim's cells by status."""
  lines = [
      '| claim (paper) | report | test | verdict | the protocol difference that could explain a gap |',
      '|---|---|---|---|---|',
  ]
  for j in judged:
    c = j['claim']
    link = f'{link_prefix}{c.report}/README.md'  # docs/claims.md links beside it; a copy at the root, 'docs/'
    report = f'[docs/{c.report}]({link})' + (' (absent)' if j.get('missing_report') else '')
    extent = where_text(j)
    lines.append(
        f'| **{c.paper}**: {c.claim} | {report} | {_test_text(c)} | **{j["verdict"]}** ({counts_text(j)})'
        f'{". " + extent if extent else ""} | {c.note} |'
    )
  lines.append('')
  for j in judged:
    c = j['claim']
    lines.append(f'**{c.paper}** ({j["verdict"]}: {counts_text(j)}):\n')
    for status in STATUSES:
      text = _group(c, j['cells'], status)
      if text:
        lines.append(f'- {(GLITCH_LABELS if c.kind == "glitches" else LABELS)[status]}: {text}')
    if not j['cells']:
      lines.append(f'- no result in the report: docs/{c.report} is absent')
    lines.append('')
  return '\n'.join(lines)


HEADER = (
    "# The papers' claims, judged from the committed reports\n\n"
    'Generated by `python -m relpos_jax.study.claims docs/` from the suite reports under docs/ (do not edit by '
    'hand; `relpos_jax.study.claims` holds each claim as data). The rule: a cell is tested only where every '
    "encoder in it learned the task in distribution by the claim's own metric (exact match for a sequence-level "
    'claim, per-token accuracy for a token-level one; the mean over seeds within the training lengths, '
    f"≥ {suite_summary.ID_LEARNED}: the suite's threshold; otherwise *not tested*, with the value that fell short). "
    'A tested cell is judged by the paired t test over seeds of A − B (compare), of the accuracy − 0.9 (holds) or '
    '0.9 − the accuracy (fails; Delétang et al. count a task solved at 90%), its p-value adjusted by Holm (1979) '
    "over the claim's tested cells: it reproduces the claim when the adjusted p-value is below 0.05 on the claim's "
    'side, contradicts it below 0.05 on the other, and is not resolved otherwise (with 2 seeds the t quantile is '
    '12.7). A glitch cell (Liu et al.) reproduces when every seed errs at a rare rate, above 0 and below '
    f'{1000 * GLITCH_RARE:g} per 1,000 reads (1%), contradicts when no seed errs (a run without a glitch bounds its '
    'rate below 3 / reads at 95%, the rule of three), is not resolved when only some seeds err, and is not tested '
    'when a seed errs on 1% of reads or more (a failure, not a glitch). The verdict, from the counts of tested cells '
    '(R reproduced, C contradicted, U not resolved of T, printed beside it): reproduced, contradicted or not '
    'resolved when all T are alike ("where tested" when other cells could not be tested or were not run), mostly '
    'reproduced when R > T/2, mostly contradicted when C > T/2, mostly not resolved when U > T/2, mixed otherwise, '
    'and not tested at this scale when T = 0. Numbers: the mean difference over seeds [its uncorrected 95% t '
    'interval] (compare), the mean accuracy [its 95% interval] (holds, fails), and the Holm-adjusted p-value; each '
    "seed's glitches per 1,000 reads (glitches). Lengths are written as a multiple of the longest training "
    'length.\n\n'
)


TABLE_MARKER = '<!-- claims-table: python -m relpos_jax.study.claims docs/ (generated from the reports) -->'
TABLE_END = '<!-- /claims-table -->'


def summary_table(docs: str, link_prefix: str = '') -> str:
  """The verdicts alone, one row per claim (docs/findings.md's and docs/suite's copy; docs/claims.md has the cells):
  the paper and its claim, the verdict by the rule of `HEADER`, and where it was tested."""
  reports = load_reports(docs)
  lines = ['| claim (paper) | verdict | report |', '|---|---|---|']
  for claim in CLAIMS:
    judged = judge(claim, reports)
    link = f'[docs/{claim.report}]({link_prefix}{claim.report}/README.md)'
    lines.append(f'| **{claim.paper}**: {claim.claim} | **{judged["verdict"]}** ({counts_text(judged)}) | {link} |')
  return '\n'.join(lines)


def with_summary_table(text: str, docs: str, link_prefix: str = '') -> str:
  """`text` with the block between `TABLE_MARKER` and `TABLE_END` replaced by `summary_table`."""
  start, end = text.index(TABLE_MARKER) + len(TABLE_MARKER), text.index(TABLE_END)
  return text[:start] + '\n' + summary_table(docs, link_prefix) + '\n' + text[end:]


def render(docs: str, link_prefix: str = '') -> str:
  """docs/claims.md's text, from the reports under `docs`."""
  reports = load_reports(docs)
  return HEADER + markdown([judge(c, reports) for c in CLAIMS], link_prefix)


def write(docs: str) -> str:
  path = os.path.join(docs, CLAIMS_FILE)
  files.write_text_atomic(path, render(docs))  # the one atomic writer (relpos_jax.files)
  return path


def main(argv: Sequence[str]) -> int:
  if len(argv) != 2 or not os.path.isdir(argv[1]):
    print(
        f'usage: python -m relpos_jax.study.claims DOCS_DIR (writes DOCS_DIR/{CLAIMS_FILE}); got {argv[1:]!r}',
        file=sys.stderr,
    )
    return 2
  with cli.errors_in_one_line():  # a damaged report: its one-line message, exit status 1, nothing written
    print(write(argv[1]))
  # The copies of the verdicts in docs/findings.md and docs/suite/README.md, where they carry the marker.
  for page, prefix in (
      (os.path.join(argv[1], 'findings.md'), ''),
      (os.path.join(argv[1], 'suite', 'README.md'), '../'),
  ):
    if os.path.exists(page):
      text = open(page, encoding='utf-8').read()
      if TABLE_MARKER in text:
        files.write_text_atomic(page, with_summary_table(text, argv[1], prefix))
        print(page)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))

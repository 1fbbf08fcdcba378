"""The papers' claims, each judged from the committed suite reports by one rule, and the claims table.

    python -m relpos_jax.study.claims docs/          # writes docs/claims.md from docs/suite*/

Each claim (CLAIMS) is data: the report it is read from, the encoders and tasks, the statistic, and its test:

  compare   encoder A beats encoder B (`a` vs each of `b`), beyond the training lengths
  fails     an encoder's accuracy beyond the training lengths stays below the suite's threshold (Delétang et al.
            count a task solved when its accuracy is at least 90%, the suite's ID_LEARNED)
  holds     an encoder's accuracy beyond the training lengths stays at or above that threshold
  glitches  a held-out set (Liu et al.'s flip-flop sets) makes every seed of an encoder err at least once

The rule. A comparison is made only where every encoder in it learned the task in distribution (the suite's
threshold: per-token accuracy within the training lengths, mean over seeds, >= ID_LEARNED = 0.9); a side that
did not learn the task makes the cell *not tested*. A tested cell *reproduces* the claim when the 95% interval
over seeds excludes zero on the claim's side: the paired t interval of the per-seed differences (A - B for
`compare`, the accuracy minus 0.9 for `holds`, 0.9 minus it for `fails`; `relpos_jax.study.stats`), or, for
`glitches`, every seed erring at least once (a rate above zero; a seed without an error bounds its rate below
3 / reads, the rule of three). An interval on the other side *contradicts* it; one that holds zero leaves it
*not resolved* (with 2 seeds the t quantile is 12.7, so only very consistent seeds resolve). A claim is
*reproduced* when every cell was tested and reproduces it, *reproduced where tested* when every tested cell
does but others could not be tested (a side not learned) or were not run, *partly reproduced* when some do (the table says which
tasks and lengths), *not reproduced* when none does, and *not tested at this scale* when no cell could be
tested. `compare`, `holds` and `fails` are judged at each length beyond the training lengths (written with
its multiple of the longest training length) or, where the claim is the papers' mean over those lengths
(`per_length=False`), on that mean.
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


def _learned(report: dict, task: str, encoder: str) -> tuple[bool, float | None]:
  cell = report['summary']['cells'].get(f'{task}/{encoder}') or {}
  return bool(cell.get('learned')), cell.get('in_distribution')


def _judge(diff: dict) -> str:
  if not diff['resolved']:
    return 'not resolved'
  return 'reproduced' if diff['low'] > 0 else 'contradicted'


def _cell(task, who, where, status, **extra) -> dict:
  return {'task': task, 'who': who, 'where': where, 'status': status, **extra}


def _untested(report, task, encoders) -> str | None:
  """Why a cell of these encoders on `task` is not tested (a side not learned), or None."""
  missing = [e for e in encoders if not _learned(report, task, e)[0]]
  if not missing:
    return None
  return ', '.join(
      f'{e} {value:.3f}' if (value := _learned(report, task, e)[1]) is not None else f'{e} —' for e in missing
  )


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
      reason = _untested(report, task, [e for e in (a, b) if e])
      beyond, longest = _beyond(results)
      points = [(f'beyond {longest}', beyond)] if not claim.per_length else [(_where(n, longest), [n]) for n in beyond]
      for where, lengths in points:
        if reason:
          cells.append(_cell(task, who, where, 'not tested', why=reason))
          continue
        level = 'token' if task in claim.token_tasks else claim.level
        first = _per_seed(runs[0], lengths, level)
        if claim.kind == 'compare':
          second = _per_seed(runs[1], lengths, level)
          seeds = sorted(set(first) & set(second))
          diff = stats.paired_difference([first[s] for s in seeds], [second[s] for s in seeds])
        else:
          seeds = sorted(first)
          values = [first[s] for s in seeds]
          threshold = [suite_summary.ID_LEARNED] * len(values)
          diff = (
              stats.paired_difference(values, threshold)
              if claim.kind == 'holds'
              else stats.paired_difference(threshold, values)
          )
        if not seeds:
          cells.append(_cell(task, who, where, 'no result'))
          continue
        extra = {}
        if claim.kind != 'compare' and diff['low'] is not None:  # the accuracy itself, with its interval
          sign = 1 if claim.kind == 'holds' else -1
          ends = sorted(suite_summary.ID_LEARNED + sign * diff[k] for k in ('low', 'high'))
          extra['accuracy'] = (suite_summary.ID_LEARNED + sign * diff['mean'], *ends)
        cells.append(_cell(task, who, where, _judge(diff), diff=diff, seeds=len(seeds), **extra))
  return {'claim': claim, 'cells': cells, 'verdict': verdict(cells)}


def _glitch_cells(claim: Claim, report: dict, task: str) -> list[dict]:
  held_out = (report['summary'].get('held_out') or {}).get(task) or {}  # {encoder: {set: {length: cell}}}
  cells = []
  for encoder in claim.encoders:
    sets = held_out.get(encoder)
    if not sets:
      cells.append(_cell(task, encoder, '', 'no result'))
      continue
    reason = _untested(report, task, [encoder])
    for name in sorted(sets):
      for n, cell in sets[name].items():
        where = name if len(sets[name]) == 1 else f'{name} at {n}'
        if reason:
          cells.append(_cell(task, encoder, where, 'not tested', why=reason))
          continue
        rates, reads = cell['per_seed'], [float(r) for r in cell['scored_tokens']]
        if all(r > 0 for r in rates):
          status = 'reproduced'
        elif all(r == 0 for r in rates):
          status = 'contradicted'  # no glitch in any seed: the rate is below 3 / reads
        else:
          status = 'not resolved'
        cells.append(_cell(task, encoder, where, status, rates=rates, bound=1000 * stats.clean_run_bound(min(reads))))
  return cells


def verdict(cells: Sequence[dict]) -> str:
  """'reproduced' (every cell tested and reproduced), 'reproduced where tested' (every tested cell reproduced,
  others not tested or not run), 'partly reproduced', 'not reproduced' or 'not tested at this scale'."""
  tested = [c for c in cells if c['status'] in ('reproduced', 'contradicted', 'not resolved')]
  if not tested:
    return 'not tested at this scale'
  reproduced = sum(c['status'] == 'reproduced' for c in tested)
  if reproduced == len(tested):
    return 'reproduced' if len(tested) == len(cells) else 'reproduced where tested'
  return 'partly reproduced' if reproduced else 'not reproduced'


# ------------------------------------------------------------------------------------------------- render
def _cell_text(claim: Claim, cell: dict, with_task: bool) -> str:
  head = ' '.join(p for p in ((cell['task'] if with_task else ''), cell['who'], cell['where']) if p)
  if 'rates' in cell:
    rates = ', '.join(map(suite_summary.glitch_rate_text, cell['rates']))
    if cell['status'] == 'contradicted':
      return f'{head} (0 in every seed: below {cell["bound"]:.2g} per 1,000)'
    return f'{head} ({rates} per 1,000)'
  if 'accuracy' in cell:
    mean, low, high = cell['accuracy']
    return f'{head} {mean:.2f} [{low:.2f}, {high:.2f}]'
  if 'diff' in cell:
    d = cell['diff']
    if d['low'] is None:
      return f'{head} ({d["mean"]:+.2f}, {cell["seeds"]} seed: no interval)'
    return f'{head} {d["mean"]:+.2f} [{d["low"]:+.2f}, {d["high"]:+.2f}]'
  if 'why' in cell:
    return f'{head} (not learned in distribution: {cell["why"]})'
  return head


def _group(claim: Claim, cells: Sequence[dict], status: str) -> str:
  chosen = [c for c in cells if c['status'] == status]
  if status == 'not tested':  # one entry per task and pair: the reason, not every length
    seen, kept = set(), []
    for c in chosen:
      if (c['task'], c['who']) not in seen:
        seen.add((c['task'], c['who']))
        kept.append({**c, 'where': ''})
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
  tested = {c['task'] for c in cells if c['status'] in ('reproduced', 'contradicted', 'not resolved')}
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
    return f'{", ".join(claim.encoders)}: glitches per 1,000 reads on the held-out sets, every seed'
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
        f'| **{c.paper}**: {c.claim} | {report} | {_test_text(c)} | **{j["verdict"]}**'
        f'{". " + extent if extent else ""} | {c.note} |'
    )
  lines.append('')
  for j in judged:
    c = j['claim']
    lines.append(f'**{c.paper}** ({j["verdict"]}):\n')
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
    f'encoder in it learned the task in distribution (per-token accuracy within the training lengths, mean over '
    f"seeds, ≥ {suite_summary.ID_LEARNED}: the suite's threshold; otherwise *not tested*, with the accuracy that fell "
    "short). A tested cell reproduces the claim when the 95% interval over seeds excludes zero on the claim's "
    'side: the paired t interval of A − B (compare), of the accuracy − 0.9 (holds) or 0.9 − the accuracy '
    '(fails; Delétang et al. count a task solved at 90%), or, for glitches, every seed erring at least once '
    '(a run without a glitch bounds its rate below 3 / reads at 95%, the rule of three). An interval on the '
    'other side contradicts it; one that holds zero leaves it not resolved (with 2 seeds the t quantile is '
    '12.7). A claim is reproduced when every cell was tested and reproduces it, reproduced where tested when '
    'every tested cell does but some could not be tested or were not run, partly reproduced when some do (listed '
    'with their task and length, as a multiple of the longest training length), not reproduced when none '
    'does, and not tested at this scale when none could be tested. Numbers: the mean difference over seeds '
    "[its 95% interval] (compare), the mean accuracy [its 95% interval] (holds, fails), each seed's glitches "
    'per 1,000 reads (glitches).\n\n'
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
    lines.append(f'| **{claim.paper}**: {claim.claim} | **{judged["verdict"]}** | {link} |')
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

"""The same study on several corpora: which findings hold on every one, read from the committed reports.

    python -m relpos_jax.study.cross_corpus docs/     # writes docs/cross_corpus.md, refreshes docs/findings.md's table

A corpus is a study folder under docs/ (its results.json, written by `relpos_jax.study.report`); CORPORA names
the folders and their labels, and each must have its report: a missing or damaged one is refused by name, never
left out of the tables. Two tables:

  bits per character at the longest length (16x the training length) per encoder and corpus, mean ± sample
  std over seeds, with each encoder's rank on that corpus (1 = fewest bits);

  the findings (FINDINGS: 'A vs B', the difference of A and B at the longest length) per corpus: A - B, its 95%
  paired t interval over seeds, and whether it is resolved after Holm's correction over this table's family
  (the findings of one corpus; `report.comparisons` computes all three from the per-seed values). A finding
  *holds on every corpus* when it is resolved, Holm-corrected, with the same sign on each corpus; it *differs*
  when it is resolved on some corpus with the other sign; otherwise it is *not resolved everywhere* (which
  corpus the table says).
"""

from __future__ import annotations

import math
import os
import sys
from typing import Sequence

from relpos_jax import files
from relpos_jax.study import report, stats
from relpos_jax.train import cli
from relpos_jax.train import config as config_lib

OUT_FILE = 'cross_corpus.md'
# The page beside it whose findings table (between TABLE_MARKER and TABLE_END) the command refreshes.
FINDINGS_FILE = 'findings.md'
# (label, folder under docs/): one protocol on three corpora (configs/studies/study_python.py, study_english.py and
# study_english_bpe.py). The default study (docs/study) asks Python bytes more encoders under an older protocol.
CORPORA = (
    ('Python bytes', 'study_python'),
    ('English bytes', 'study_english'),
    ('English BPE', 'study_english_bpe'),
)
# The default study's findings (configs/lm.py STUDY_COMPARISONS less the randomized-row check, plus the two the
# English studies add): each read at the longest length.
FINDINGS = (
    'monotone-lin vs distance',
    'kerple_log vs fire',
    'fire vs fire-512',
    'rope+randomized vs rope',
    'kerple_log vs alibi',
    't5 vs distance',
)
TABLE_MARKER = '<!-- cross-corpus-table: python -m relpos_jax.study.cross_corpus docs/ (generated from the reports) -->'
TABLE_END = '<!-- /cross-corpus-table -->'


def load(docs: str, corpora: Sequence[tuple[str, str]] = CORPORA) -> dict[str, dict]:
  """{label: results} of every corpus, read from `<docs>/<folder>/results.json`.

  A corpus whose report is missing, or is no study report (an object with its `runs` and `eval_lengths`), is
  refused by name (ConfigError): every verdict is read across all the corpora, and a table rewritten from the
  others would say a finding "holds on every corpus" from part of them."""
  paths = [(label, os.path.join(docs, folder, 'results.json')) for label, folder in corpora]
  missing = [path for _, path in paths if not os.path.isfile(path)]
  if missing:
    raise config_lib.ConfigError(
        f'cross_corpus: {", ".join(missing)} missing: the tables compare every corpus of '
        f'{[folder for _, folder in corpora]}; run that study or restore its report (a table without it would '
        'judge the findings on the other corpora alone).'
    )
  out = {}
  for label, path in paths:
    out[label] = report.load_object(path, ('runs', 'eval_lengths'), 'a study report (relpos_jax.study.report)')
  return out


def _split(finding: str) -> tuple[str, str]:
  a, vs, b = finding.split()
  if vs != 'vs':
    raise ValueError(f"cross_corpus: finding {finding!r} is invalid: allowed: 'A vs B'.")
  return a, b


def findings(results: dict, wanted: Sequence[str] = FINDINGS) -> dict[str, dict]:
  """{finding: report.comparisons row at the longest length} for the findings whose encoders both ran; the Holm
  family is these findings on this corpus."""
  names = {run['name'] for run in results['runs']}
  requests = [{'a': a, 'b': b, 'statistics': ['longest']} for a, b in map(_split, wanted) if a in names and b in names]
  rows = report.comparisons({**results, 'comparison_requests': requests})
  return {f'{row["a"]} vs {row["b"]}': row for row in rows}


def verdict(rows: Sequence[dict | None]) -> str:
  """'holds on every corpus', 'differs' or 'not resolved everywhere' (module docstring) of one finding's rows."""
  signs = []
  for row in rows:
    if row is None or row.get('mean') is None:
      return 'not resolved everywhere'
    if row.get('resolved_holm'):
      signs.append(math.copysign(1.0, row['mean']))
  if len(set(signs)) > 1:
    return 'differs'
  return 'holds on every corpus' if len(signs) == len(rows) else 'not resolved everywhere'


def finding_cell(row: dict | None) -> str:
  if row is None:
    return 'not run'
  if row.get('mean') is None:
    return '—'
  interval = '' if row.get('low') is None else f' [{row["low"]:+.3f}, {row["high"]:+.3f}]'
  mark = ' ✓' if row.get('resolved_holm') else ''
  return f'{row["mean"]:+.3f}{interval}{mark} (n={row["n"]})'


def _longest(results: dict, run: dict) -> tuple[float | None, float | None]:
  """(mean, sample std or None) over the run's sound seeds at the longest length."""
  values = [v for v in report.seed_statistic(results, run, 'longest').values() if v is not None]
  if not values:
    return None, None
  return stats.mean(values), (stats.std(values))


def encoder_table(studies: dict[str, dict]) -> str:
  """Bits per character at the longest length, per encoder (rows) and corpus (columns), with ranks: the
  encoders every study ran, ranked among themselves (each study's own page has the rest)."""
  labels = list(studies)
  names = [{run['name'] for run in results['runs']} for results in studies.values()]
  first = next(iter(studies.values()))
  order = [run['name'] for run in first['runs'] if all(run['name'] in n for n in names)]
  values = {}
  for label, results in studies.items():
    runs = {run['name']: run for run in results['runs']}
    values[label] = {name: _longest(results, runs[name]) for name in order if name in runs}
  ranks = {
      label: {
          name: rank
          for rank, name in enumerate(
              sorted((n for n, v in vals.items() if v[0] is not None), key=lambda n: vals[n][0]), 1
          )
      }
      for label, vals in values.items()
  }
  lengths = {label: results['eval_lengths'][-1] for label, results in studies.items()}
  header = '| encoder | ' + ' | '.join(f'{label} at {lengths[label]} (rank)' for label in labels) + ' |'
  lines = [header, '|---|' + '---|' * len(labels)]
  for name in order:
    cells = []
    for label in labels:
      mean, std = values[label].get(name, (None, None))
      if mean is None:
        cells.append('diverged')
        continue
      spread = f' ± {std:.3f}' if std is not None else ''
      cells.append(f'{mean:.3f}{spread} ({ranks[label][name]})')
    lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines) + '\n'


def findings_table(studies: dict[str, dict], wanted: Sequence[str] = FINDINGS) -> str:
  labels = list(studies)
  per_corpus = {label: findings(results, wanted) for label, results in studies.items()}
  lines = [
      '| finding (A − B at the longest length) | ' + ' | '.join(labels) + ' | across corpora |',
      '|---|' + '---|' * (len(labels) + 1),
  ]
  for finding in wanted:
    rows = [per_corpus[label].get(finding) for label in labels]
    lines.append(f'| {finding} | ' + ' | '.join(finding_cell(row) for row in rows) + f' | {verdict(rows)} |')
  return '\n'.join(lines) + '\n'


def render(studies: dict[str, dict]) -> str:
  seeds = {label: results.get('seeds') for label, results in studies.items()}
  seeds_text = '; '.join(f'{label}: seeds {", ".join(map(str, s or []))}' for label, s in seeds.items())
  return (
      '# The same study on several corpora\n\n'
      "Generated by `python -m relpos_jax.study.cross_corpus docs/` from each study's results.json "
      f'({seeds_text}; an encoder that ran fewer seeds has no interval). Bits per character at the longest '
      'length, mean ± sample std over seeds, for the encoders every study ran (rank among them on that corpus, '
      '1 = fewest bits):\n\n'
      + encoder_table(studies)
      + "\nEach finding: A − B [95% paired t interval over seeds]; ✓ resolved after Holm's correction over the "
      'findings of that corpus; n seeds.\n\n' + findings_table(studies)
  )


def with_findings_table(text: str, studies: dict[str, dict]) -> str:
  """`text` with the findings table between TABLE_MARKER and TABLE_END replaced (ValueError without them)."""
  start, end = text.find(TABLE_MARKER), text.find(TABLE_END)
  if start < 0 or end < start:
    raise ValueError(f'cross_corpus: no {TABLE_MARKER!r} ... {TABLE_END!r} block to refresh.')
  return text[: start + len(TABLE_MARKER)] + '\n' + findings_table(studies) + text[end:]


def write(docs: str, findings_page: str | None = None) -> str:
  studies = load(docs)
  path = os.path.join(docs, OUT_FILE)
  files.write_text_atomic(path, render(studies))
  if findings_page is not None and os.path.exists(findings_page):
    with open(findings_page) as f:
      text = f.read()
    files.write_text_atomic(findings_page, with_findings_table(text, studies))
  return path


def main(argv: Sequence[str]) -> int:
  if len(argv) != 2:
    print('usage: python -m relpos_jax.study.cross_corpus <docs directory>', file=sys.stderr)
    return 2
  docs = argv[1]
  with cli.errors_in_one_line():  # a missing or damaged report: its one-line message, exit status 1
    print(write(docs, os.path.join(docs, FINDINGS_FILE)))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))

"""Re-reporting a committed study from its results.json alone, with today's statistics.

    python -m relpos_jax.study.rereport docs/study_python docs/study_english ...

A committed study keeps its results.json (per-seed values, per-document totals) but not its run workdirs, so
`runner.run_study(..., finished_only=True)` cannot re-read it. `rereport` recomputes the paired differences from
what results.json stores, through `report.comparisons` (the code path a finished study writes them with), and
rewrites results.json and results.md; the runs' values and the plots are left as they are. So a statistic added
since a study ran (the seed x document bootstrap) reaches its committed report without retraining or editing.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from relpos_jax.study import report
from relpos_jax.train import config as config_lib


def rereport(folder: str) -> dict[str, str]:
  """Rewrites `folder`'s results.json (its 'comparisons' recomputed) and results.md; returns the paths."""
  path = os.path.join(folder, 'results.json')
  if not os.path.isfile(path):
    raise config_lib.ConfigError(f'rereport: {path} does not exist; allowed: a study folder holding results.json.')
  results = report.load_json(path)
  if results.get('comparison_requests'):
    results['comparisons'] = report.comparisons(results)
  return {
      'json': report.write_json(results, path),
      'markdown': report.write_markdown(results, os.path.join(folder, 'results.md')),
  }


def main(argv: Sequence[str]) -> int:
  if len(argv) < 2 or not all(os.path.isfile(os.path.join(d, 'results.json')) for d in argv[1:]):
    print(
        f'usage: python -m relpos_jax.study.rereport STUDY_DIR... (each holding results.json); got {argv[1:]!r}',
        file=sys.stderr,
    )
    return 2
  for folder in argv[1:]:
    for written in rereport(folder).values():
      print(written)
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv))

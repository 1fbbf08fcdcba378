r"""Combines a study run once per seed (workdirs <dir>/seed0, <dir>/seed1, ...) into <dir>/results.*.

    python -m experiments.combine_seeds --dir=docs/study_contextual \
        --config=configs/lm.py:study,contextual

Writes <dir>/results.json (means, and every seed's value), results.md (mean ± std over seeds) and
results.png (the means). Everything but flag parsing is `relpos_jax.study.seeds`.
"""

from __future__ import annotations

import glob
import os

from absl import app
from absl import flags

_DIR = flags.DEFINE_string('dir', None, 'The directory holding seed<N>/results.json.', required=True)
_CONFIG = flags.DEFINE_string('config', None, 'The study config: its study.encoders give the row order.')


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  from relpos_jax.study import report, runner, seeds
  from relpos_jax.train import config as config_lib
  labels = None
  if _CONFIG.value:
    study = config_lib.load_config(_CONFIG.value, validate_config=False).study
    labels = [entry.label for entry in runner.parse_entries(tuple(study.encoders))]
  workdirs = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(_DIR.value, 'seed*', 'results.json')))
  if not workdirs:
    raise app.UsageError(f'no seed*/results.json under {_DIR.value}.')
  per_seed = [seeds.collect(w, labels) for w in workdirs]
  for workdir, results in zip(workdirs, per_seed):  # Each seed's own complete table and plot.
    runner.write_outputs(results, workdir)
  combined = seeds.combine(per_seed)
  report.write_json(combined, os.path.join(_DIR.value, 'results.json'))
  report.plot(combined, os.path.join(_DIR.value, 'results.png'))
  title = combined['meta'].get('title', 'Length generalization')
  table = seeds.spread_table(combined)
  with open(os.path.join(_DIR.value, 'results.md'), 'w') as f:
    f.write(f'# {title}\n\n{combined["meta"].get("description", "")}\n\n'
            f'Mean ± standard deviation over seeds {combined["seeds"]} ({combined["metric"]}; '
            f'{"lower" if combined["lower_is_better"] else "higher"} is better). Per-seed tables: '
            f'seed*/results.md.\n\n{table}')
  print(table)


if __name__ == '__main__':
  app.run(main)

r"""The benchmark suite: every task x encoder x seed, one study per task, a summary table and heatmap.

    python -m experiments.suite --workdir=docs/suite                           # configs/studies/suite.py
    python -m experiments.suite --tasks=even_pairs,flip_flop --workdir=docs/suite   # a subset now
    python -m experiments.suite --config=configs/studies/suite_published.py --workdir=gs://.../suite
    python -m experiments.suite --config=configs/studies/suite_ruoss.py --workdir=docs/suite_ruoss   # Ruoss et al.

Rerunning resumes (finished runs are kept); `--tasks` lets one process per task share a workdir. Everything but
flag parsing is `relpos_jax.study.suite.run_suite`.
"""

from __future__ import annotations

import functools
import os

from absl import app
from absl import flags
from ml_collections import config_flags

from relpos_jax.train import cli

_DEFAULT_CONFIG = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'configs', 'studies', 'suite.py'
)
_CONFIG = config_flags.DEFINE_config_file(
    'config',
    None,
    f'A suite config: one of configs/studies/suite*.py; default {_DEFAULT_CONFIG}.',
    lock_config=True,
)
_WORKDIR = flags.DEFINE_string('workdir', os.path.join('results', 'suite'), 'Where the suite goes (resumed).')
_TASKS = flags.DEFINE_list('tasks', None, 'Run only these tasks now (default: every task of the config).')


@cli.errors_in_one_line()  # A bad config or a busy workdir: one message, exit status 1.
def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  from relpos_jax.study import suite, suite_summary
  from relpos_jax.train import metrics

  metrics.quiet_checkpoint_logs()
  # Ctrl-C: at once (exit status 130) while compiling or evaluating, as the train command's during a run's steps.
  with cli.ExitOnInterrupt(cli.STUDY_INTERRUPTED_MESSAGE) as guard:
    summary = suite.run_suite(_CONFIG.value, _WORKDIR.value, tasks=_TASKS.value, train_fn=cli.guarded_train(guard))
  print(suite_summary.markdown(summary))
  print(f'summary: {os.path.abspath(os.path.join(_WORKDIR.value, "README.md"))}')


if __name__ == '__main__':
  app.run(main, flags_parser=functools.partial(cli.parse_flags, default=_DEFAULT_CONFIG))

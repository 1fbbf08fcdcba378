r"""The main job: how does each position encoding hold up on sequences longer than it was trained on?

    python -m experiments.length_generalization                     # configs/studies/study.py, ~10 min on CPU
    python -m experiments.length_generalization --config=configs/studies/even_pairs.py
    python -m experiments.length_generalization --config.study.encoders="('alibi', 'rope')"
    python -m experiments.length_generalization --config.study.seeds='(0,1,2)' --finished_only
                                                                    # the table so far, training nothing

Writes results.json, results.md (encoder x evaluation length) and results.png in --workdir and prints
where they are. Rerunning the same command resumes: finished encoders are kept, an interrupted one
continues from its last checkpoint. Everything but flag parsing is `relpos_jax.study.run_study`.
"""

from __future__ import annotations

import functools
import os

from absl import app
from absl import flags
from ml_collections import config_flags

from relpos_jax.train import cli

_DEFAULT_CONFIG = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'configs', 'studies', 'study.py'
)
# No default here: config_flags would load it (and apply the overrides) at import; `cli.parse_flags` adds it.
_CONFIG = config_flags.DEFINE_config_file(
    'config',
    None,
    'A study config: one of configs/studies/*.py (each study its own file, e.g. configs/studies/even_pairs.py); '
    f'default {_DEFAULT_CONFIG}.',
    lock_config=True,
)
_WORKDIR = flags.DEFINE_string(
    'workdir', os.path.join('results', 'default'), 'Where results and the per-encoder runs go (resumed if present).'
)
_MULTIHOST = flags.DEFINE_bool('multihost', False, 'Call jax.distributed.initialize() first.')
_COORDINATOR = flags.DEFINE_string(
    'coordinator_address', None, 'With --multihost: host:port of process 0 (where JAX cannot detect the cluster).'
)
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', None, 'With --multihost: the number of processes.')
_PROCESS_ID = flags.DEFINE_integer('process_id', None, 'With --multihost: this process, 0..num_processes-1.')
_FINISHED_ONLY = flags.DEFINE_bool(
    'finished_only',
    False,
    'Train nothing: report the (encoder, seed) runs finished so far (with config.study.trained_workdir: evaluate '
    'nothing new, and write the report of the evaluations finished so far).',
)


@cli.errors_in_one_line()  # A bad config or a busy workdir: one message, exit status 1.
def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  explicit = (_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
  if not _MULTIHOST.value and any(v is not None for v in explicit):
    raise app.UsageError('--coordinator_address, --num_processes and --process_id need --multihost.')
  from relpos_jax.train import sharding  # Imports jax, but calls nothing: initialize() must come first.

  if _MULTIHOST.value:
    sharding.initialize_distributed(*explicit)
  from relpos_jax.study import record, report, run_study
  from relpos_jax.train import metrics

  metrics.quiet_checkpoint_logs()
  # With config.study.trained_workdir, run_study evaluates that study's trained runs and trains nothing.
  # run_study writes its outputs while it holds the workdir's lock; nothing is written here (with
  # --finished_only nothing at all: another process may be writing that workdir).
  # Ctrl-C: at once (exit status 130) while compiling or evaluating, as the train command's during a run's steps.
  with cli.ExitOnInterrupt(cli.STUDY_INTERRUPTED_MESSAGE) as guard:
    results = run_study(
        _CONFIG.value, _WORKDIR.value, finished_only=_FINISHED_ONLY.value, train_fn=cli.guarded_train(guard)
    )
  print(report.markdown_table(results))
  if _FINISHED_ONLY.value and not results.get('meta', {}).get('trained_workdir'):
    print('--finished_only: printed, nothing written (the study writes its results.* as it runs).')
    return
  for kind, path in record.output_paths(_WORKDIR.value).items():
    print(f'{kind:>8}: {os.path.abspath(path)}')


if __name__ == '__main__':
  app.run(main, flags_parser=functools.partial(cli.parse_flags, default=_DEFAULT_CONFIG))

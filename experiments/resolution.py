r"""The resolution-extrapolation study: train at one grid side, evaluate at 1x-4x (relpos_jax.study.resolution).

    python -m experiments.resolution --config=configs/studies/resolution.py --workdir=results/resolution
    python -m experiments.resolution --config=configs/studies/resolution.py:fashion_mnist --workdir=results/res_fmnist
    python -m experiments.resolution --config.encoders="('nope', 'rope_axial')" --config.seeds='(0,1,2)'

Writes results.json, results.md, results.png (accuracy against grid side) and results_entropy.png (attention
entropy per layer against grid side) in --workdir and prints the table. Rerunning the same command resumes:
finished (task, encoder, learning rate, seed) runs are reused; Ctrl-C ends it at once, keeping the finished
runs (the run in progress trains again from its start: the study keeps no checkpoint). --finished_only prints
the runs finished so far and writes nothing (while the study runs in another process).
"""

from __future__ import annotations

import functools
import os

from absl import app
from absl import flags
from ml_collections import config_flags

from relpos_jax.train import cli

_DEFAULT_CONFIG = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'configs', 'studies', 'resolution.py'
)
_CONFIG = config_flags.DEFINE_config_file(
    'config', None, f'A resolution-study config; default {_DEFAULT_CONFIG}.', lock_config=True
)
_WORKDIR = flags.DEFINE_string(
    'workdir', os.path.join('results', 'resolution'), 'Where results and the runs go (resumed if present).'
)

_FINISHED_ONLY = flags.DEFINE_bool(
    'finished_only', False, 'Train and write nothing: print the runs finished so far (the study may be running).'
)


@cli.errors_in_one_line()  # A bad config or a busy workdir: one message, exit status 1.
def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  from relpos_jax.study import resolution

  # Ctrl-C ends the process at once (`cli.ExitOnInterrupt`), whatever it is doing: a KeyboardInterrupt unwinding
  # through JAX's compiler or runtime segfaulted the study in 3 of 4 tries. Nothing is lost that the study keeps:
  # each run's record is written atomically once the run has finished, the lock goes with the process.
  with cli.ExitOnInterrupt(cli.RESOLUTION_INTERRUPTED_MESSAGE):
    results = resolution.run_resolution_study(_CONFIG.value, _WORKDIR.value, finished_only=_FINISHED_ONLY.value)
  print(resolution.markdown(results))
  if _FINISHED_ONLY.value:
    print('--finished_only: printed, nothing written (the study writes its results.* as it runs).')
    return
  paths = resolution.write_outputs(results, _WORKDIR.value)
  for kind, path in paths.items():
    print(f'{kind:>12}: {os.path.abspath(path)}')


if __name__ == '__main__':
  app.run(main, flags_parser=functools.partial(cli.parse_flags, default=_DEFAULT_CONFIG))

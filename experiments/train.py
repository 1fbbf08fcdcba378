r"""Trains one model from a config file.

    python -m experiments.train --config=configs/lm.py --workdir=/tmp/run
    python -m experiments.train --config=configs/algorithmic.py --config.model.encoder='alibi' \
        --config.train.steps=500 --workdir=/tmp/alibi
    python -m experiments.train --config=configs/algorithmic.py:published --workdir=/tmp/rpe   # a variant

Rerunning the same command resumes from the latest checkpoint in --workdir. Outputs in --workdir:
config.json, data.json (the corpus fingerprint or task), metrics.jsonl (one JSON record per logged step)
and checkpoints/<step>/.

Several processes (multi-host TPU or GPU): the same command on every host with --multihost, which calls
jax.distributed.initialize() first; on Cloud TPU, Slurm, Open MPI and Kubernetes it finds the cluster by
itself, elsewhere add --coordinator_address=host0:port --num_processes=N --process_id=i. Everything but
flag parsing is `relpos_jax.train.loop.train`.
"""

from __future__ import annotations

import json

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from relpos_jax.train import cli

_CONFIG = config_flags.DEFINE_config_file(
    'config',
    None,
    'A config file, optionally with variants: ' 'configs/lm.py, configs/algorithmic.py:published.',
    lock_config=True,
)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Run directory: checkpoints, metrics.jsonl, config.json.')
_MULTIHOST = flags.DEFINE_bool(
    'multihost', False, 'Call jax.distributed.initialize() first (multi-host TPU / GPU runs).'
)
_COORDINATOR = flags.DEFINE_string(
    'coordinator_address', None, 'With --multihost: host:port of process 0 (where JAX cannot ' 'detect the cluster).'
)
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', None, 'With --multihost: the number of processes.')
_PROCESS_ID = flags.DEFINE_integer('process_id', None, 'With --multihost: this process, 0..num_processes-1.')
flags.mark_flags_as_required(['config', 'workdir'])


@cli.errors_in_one_line()  # A bad config, a busy workdir, a diverged run: one message, exit status 1.
def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  explicit = (_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
  if not _MULTIHOST.value and any(v is not None for v in explicit):
    raise app.UsageError('--coordinator_address, --num_processes and --process_id need --multihost.')
  with cli.interrupt_exits_before_first_step() as first_step_done:
    from relpos_jax.train import sharding  # Imports jax, but calls nothing: initialize() must come first.

    if _MULTIHOST.value:
      sharding.initialize_distributed(*explicit)
    from relpos_jax.train import loop, metrics

    metrics.quiet_checkpoint_logs()
    result = loop.train(_CONFIG.value, _WORKDIR.value, hooks=[first_step_done])
  summary = {k: v for k, v in result.final_metrics.items() if isinstance(v, (int, float))}
  logging.info('final metrics: %s', json.dumps(summary, sort_keys=True))


if __name__ == '__main__':
  app.run(main, flags_parser=cli.parse_flags)

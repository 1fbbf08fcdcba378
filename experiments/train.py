r"""Trains one model from a config file.

    python -m experiments.train --config=configs/lm.py --workdir=/tmp/run
    python -m experiments.train --config=configs/algorithmic.py --config.model.encoder='alibi' \
        --config.train.steps=500 --workdir=/tmp/alibi
    python -m experiments.train --config=configs/algorithmic.py:published --workdir=/tmp/rpe   # a variant

Rerunning the same command resumes from the latest checkpoint in --workdir. Outputs in --workdir:
config.json, metrics.jsonl (one JSON record per logged step) and checkpoints/<step>/. Multi-host TPU or
GPU: add --multihost on every host (calls jax.distributed.initialize(), which reads the cluster from the
environment). Everything but flag parsing is `relpos_jax.train.loop.train`.
"""

from __future__ import annotations

import json

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from relpos_jax.train import cli

_CONFIG = config_flags.DEFINE_config_file('config', None, 'A config file, optionally with variants: '
                                          'configs/lm.py, configs/algorithmic.py:published.',
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Run directory: checkpoints, metrics.jsonl, config.json.')
_MULTIHOST = flags.DEFINE_bool('multihost', False,
                               'Call jax.distributed.initialize() first (multi-host TPU / GPU runs).')
flags.mark_flags_as_required(['config', 'workdir'])


def main(argv) -> None:
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  import jax  # After flag parsing: initialize() must precede any other JAX call.
  if _MULTIHOST.value:
    jax.distributed.initialize()
  from relpos_jax.train import checkpoint, loop, metrics
  metrics.quiet_checkpoint_logs()
  try:
    result = loop.train(_CONFIG.value, _WORKDIR.value)
  except (loop.DivergedError, checkpoint.CheckpointError, checkpoint.CheckpointWriteError) as e:
    raise SystemExit(f'{type(e).__name__}: {e}') from None  # One message, exit status 1.
  summary = {k: v for k, v in result.final_metrics.items() if isinstance(v, (int, float))}
  logging.info('final metrics: %s', json.dumps(summary, sort_keys=True))


if __name__ == '__main__':
  app.run(main, flags_parser=cli.parse_flags)

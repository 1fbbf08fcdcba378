r"""The benchmark suite at CPU scale (docs/suite): every task of configs/algorithmic.py's SUITE_CHOMSKY and
SUITE_OTHER but the byte-level passkey, each with its own protocol (`suite_protocols(published=False)`), the six
SUITE_ENCODERS and 2 seeds; configs/algorithmic.py's docstring describes the tasks and the scale.

    python -m experiments.suite --workdir=docs/suite            # this file: the suite command's default
    python -m experiments.suite --tasks=even_pairs,flip_flop --workdir=docs/suite   # a subset now

docs/suite_sizing is this suite at seed 0 (`--config.suite.seeds='(0,)'`), as it stood before its per-task steps.
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  return algorithmic.suite_config(arg)

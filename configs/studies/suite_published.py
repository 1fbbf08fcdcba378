r"""The benchmark suite at the papers' scale, for a TPU or GPU: configs/algorithmic.py's `published` run, Ruoss et
al.'s protocol for the Chomsky tasks (train 1..40, test 41..500, every 10th length; 10,000 steps, the example
script's count, the paper's 2,000,000 one override away), the other tasks at their papers' lengths
(`suite_protocols(published=True)`), 3 seeds, randomized RoPE at 4x each task's longest test sequence.

    python -m experiments.suite --config=configs/studies/suite_published.py --workdir=gs://.../suite
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  return algorithmic.suite_config(arg, published=True)

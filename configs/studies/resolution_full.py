r"""Every grid encoder on every synthetic task at 2,000 steps (700 runs; days on a 2-core CPU, hours on an accelerator).

    python -m experiments.resolution --config=configs/studies/resolution_full.py --workdir=results/resolution_full
    python -m experiments.resolution --config=configs/studies/resolution_full.py:fashion_mnist --workdir=<dir>

The default grid study (configs/studies/resolution.py, which documents every key) with twenty grid encoders, the
five synthetic tasks (`:fashion_mnist`: the two Fashion-MNIST protocols instead), five seeds, a three-rate grid and
512 test examples per side. Built by `configs/resolution.py:full` before it had this file (an alias now).
"""

from __future__ import annotations

import ml_collections

from relpos_jax import resources

resolution = resources.config_module('studies/resolution')

# The list: iRPE's methods in bias mode and its contextual mode (on keys, the reference's default, and on
# queries, keys and values, its get_rpe_config(rpe_on='qkv')), Swin v2's CPB, the lecture's distance
# (L1), KERPLE and Shaw per axis, STRING, LookHere, PaPE and PaPE-RI, axial RoPE under DINOv3's coordinate
# augmentation, and an absolute baseline. Swin v1's table is left out: it cannot cover a grid larger than its
# window. A spec the model does not know is refused, by name, before anything trains.
ENCODERS = resolution.ENCODERS + (
    'irpe_product: irpe(method=product, mode=bias)',
    'irpe_euclidean: irpe(method=euclidean, mode=bias)',
    'irpe_ctx: irpe(method=product, mode=contextual)',
    'irpe_ctx_qkv: irpe(method=product, mode=contextual, rpe_on=qkv)',
    'swin_v2_cpb',
    'distance_l1: distance2d(metric=l1)',
    'kerple2d',
    'shaw2d',
    'string',
    'lookhere',
    'pape',
    'pape_ri',
    'rope_axial+augment: augment_coords(rope_axial)',
    'sincos2d',
)
TASKS = ('life', 'count', 'direction', 'distance', 'shift')


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """Every grid encoder; `arg` 'fashion_mnist': on the two Fashion-MNIST protocols instead of the synthetic tasks."""
  images = resolution.task_choice('configs/studies/resolution_full.py', arg)
  config = resolution.get_config(arg)
  config.encoders = ENCODERS
  config.seeds = (0, 1, 2, 3, 4)
  config.lr_grid = (1e-3, 3e-3, 1e-2)
  config.steps = 2000
  config.eval_examples = 512
  config.entropy_examples = 64
  if not images:
    config.tasks = TASKS
  return config

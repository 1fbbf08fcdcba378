r"""The resolution-extrapolation study: train a small ViT at a 7x7 grid, evaluate at 7, 14, 21 and 28 (docs/resolution).

    python -m experiments.resolution --config=configs/studies/resolution.py --workdir=results/resolution
    python -m experiments.resolution --config=configs/studies/resolution.py:fashion_mnist --workdir=results/res_fmnist
    python -m experiments.resolution --config.seeds='(0,1,2,3,4)' --config.steps=2000 --workdir=/tmp/bigger

Every key (relpos_jax.study.resolution.Settings checks each; an error names the key):
  encoders        'label: spec' entries (or bare specs): the grid encoders of relpos_jax.nn.vit.ViT (no
                  'X -> Y': a run is trained and evaluated with one encoder)
  tasks           grid tasks (relpos_jax.data.grid_tasks: life, count, direction, distance, shift) and
                  Fashion-MNIST under its three protocols (fashion_mnist_canvas, fashion_mnist_upsample,
                  fashion_mnist_tiles: relpos_jax.data.idx says what each measures; files from `apt-get install -y dataset-fashion-mnist`, read from data_dir)
  task_kwargs     {task: {parameter: value}}, e.g. {'count': {'max_count': 5}}
  train_side      tokens per side in training (pixels = side x the task's patch size: 1 for the synthetic
                  tasks, 4 for Fashion-MNIST, so 7 tokens are its 28 pixels)
  eval_sides      tokens per side evaluated on the test split (1x to 4x the training side)
  steps, batch_size, learning_rate, warmup_steps, weight_decay, grad_clip_norm: the LM studies' optimizer
                  (relpos_jax.train.optim: clipping, AdamW, decay on matrices only) with a (warmup) cosine
                  schedule to 0, the same for every encoder (resolution.optimizer_spec)
  lr_grid         peak rates tried per (task, encoder) at the first seed; the lowest validation loss at the
                  training side wins and the other seeds train with it (None or (): learning_rate for every
                  run; on the command line --config.lr_grid=None or --config.lr_grid='()')
  seeds           every (task, encoder) trains once per seed (init and training stream); each < 2^32
  data_seed       the seed of the validation and test streams: every run scores the same examples (< 2^32)
  eval_examples, eval_batch_size: test examples per side, and per evaluation call
  entropy_examples  the attention entropy is measured on the first evaluation batches covering this many
                  examples (the model rebuilds its attention weights for it: a batch costs about twice)
  comparisons     'A vs B' (at every side) or 'A vs B at <side>': paired differences over seeds, 95% t
  model           model_dim, num_heads, num_layers, mlp_ratio, pool ('mean' | 'cls'; per-cell tasks: 'none')
  selection_seed  None (the rate grid trains at the first seed, reported too) or a seed outside `seeds`: the grid
                  trains there, scored on validation only (issue 49's protocol, configs/studies/resolution_round2.py)
  edge_rates      rates above the grid's top, trained at selection_seed where a row chose the top (the edge check)
  extra_pools     {pool: labels}: those encoders also run with that pool, rows '<label>@<pool>' (classification)
  family_tasks    None (Holm over every comparison of the page) or the tasks whose comparisons form the Holm
                  family, less degenerate pairs and duplicates of shared runs (stated on the page)

This file is the default grid study, sized for minutes on a 2-core CPU (two synthetic tasks, six encoders, two
seeds, a two-rate grid; docs/resolution ran it); `:fashion_mnist` runs the two image protocols instead. Each other
grid study is its own file built on this one: configs/studies/resolution_study.py (docs/resolution_study, the
committed study), configs/studies/resolution_full.py (every grid encoder on every task) and
configs/studies/resolution_round2.py (issue 49's protocol). configs/resolution.py keeps the variant names these
had (`configs/resolution.py:study`, `:full`, `:fashion_mnist` and their pairs) as aliases of these files, so a
command recorded in a committed study still builds that study (tests/test_configs.py pins both).
"""

from __future__ import annotations

import ml_collections

# The encoders docs/resolution_study compares (spec strings of relpos_jax.nn.vit.ViT's grid encoders).
ENCODERS = (
    'nope',
    'alibi2d',
    'fire2d',
    'rope_axial',
    'rope_mixed',
    'mrope',
)
COMPARISONS = ('rope_mixed vs rope_axial', 'alibi2d vs rope_axial', 'rope_axial vs nope')


IMAGE_TASKS = ('fashion_mnist_canvas', 'fashion_mnist_upsample')


def task_choice(path: str, arg: str | None) -> bool:
  """Whether a grid studies file runs the image protocols (`arg` 'fashion_mnist') instead of its synthetic tasks;
  any other argument is refused, named."""
  if arg not in (None, '', 'fashion_mnist'):
    raise ValueError(f'{path}: argument {arg!r} is invalid; allowed: none, or fashion_mnist (the image protocols).')
  return arg == 'fashion_mnist'


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
  """The default grid study; `arg` 'fashion_mnist': on the two Fashion-MNIST protocols."""
  images = task_choice('configs/studies/resolution.py', arg)
  config = ml_collections.ConfigDict()
  config.title = 'Resolution extrapolation'
  config.description = (
      'A small ViT trained at a 7x7 grid of tokens and evaluated at 7, 14, 21 and 28 tokens per side (1x-4x).'
  )
  config.encoders = ENCODERS
  config.tasks = ('life', 'direction')
  config.task_kwargs = None
  config.data_dir = '/usr/share/datasets/fashion-mnist'
  config.train_side = 7
  config.eval_sides = (7, 14, 21, 28)
  config.steps = 300
  config.batch_size = 32
  config.learning_rate = 3e-3
  config.lr_grid = (1e-3, 3e-3)
  config.warmup_steps = 30
  config.weight_decay = 0.0
  config.grad_clip_norm = 1.0
  config.seeds = (0, 1)
  config.data_seed = 0
  config.eval_examples = 128
  config.eval_batch_size = 32
  config.entropy_examples = 32
  config.comparisons = COMPARISONS
  config.model = ml_collections.ConfigDict(
      {'model_dim': 32, 'num_heads': 4, 'num_layers': 2, 'mlp_ratio': 2, 'pool': 'mean'}
  )
  if images:
    config.title = 'Resolution extrapolation: Fashion-MNIST'
    config.tasks = IMAGE_TASKS
  return config

r"""The resolution-extrapolation study: train a small ViT at a 7x7 grid, evaluate at 7, 14, 21 and 28.

    python -m experiments.resolution --config=configs/resolution.py --workdir=results/resolution
    python -m experiments.resolution --config=configs/resolution.py:fashion_mnist --workdir=results/resolution_fmnist
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
  steps, batch_size, learning_rate, warmup_steps, weight_decay, grad_clip_norm: AdamW with a (warmup) cosine
                  schedule to 0, the same for every encoder
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

The defaults are sized for minutes on a 2-core CPU (two synthetic tasks, six encoders, two seeds, a two-rate
grid); the `fashion_mnist` variant runs the two image protocols instead. `study` is the committed study's
protocol, sized for this 2-core CPU (320 runs, about 2 hours of two processes on a quiet machine): the ten grid
encoders docs/resolution_study compares, two synthetic tasks and both Fashion-MNIST protocols, five seeds, a
four-rate grid (1e-3 to 3e-2), 600 steps. `full` is every grid encoder on every task at 2,000 steps (700 runs
per image-free variant; days on this CPU, hours on an accelerator).
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
# The list: iRPE's methods in bias mode and its contextual mode (on keys, the reference's default, and on
# queries, keys and values, its get_rpe_config(rpe_on='qkv')), Swin v2's CPB, the lecture's distance
# (L1), KERPLE and Shaw per axis, STRING, LookHere, PaPE and PaPE-RI, axial RoPE under DINOv3's coordinate
# augmentation, and an absolute baseline. Swin v1's table is left out: it cannot cover a grid larger than its
# window. A spec the model does not know is refused, by name, before anything trains.
FULL_ENCODERS = ENCODERS + (
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
COMPARISONS = ('rope_mixed vs rope_axial', 'alibi2d vs rope_axial', 'rope_axial vs nope')
# The committed study: every family the resolution literature argues over, one encoder each where the
# families' variants cost the same question twice (iRPE's methods; PaPE's two forms).
STUDY_ENCODERS = ENCODERS + (
    'irpe_product: irpe(method=product, mode=bias)',
    'irpe_ctx: irpe(method=product, mode=contextual)',
    'swin_v2_cpb',
    'rope_axial+augment: augment_coords(rope_axial)',
)
STUDY_COMPARISONS = COMPARISONS + (
    'rope_axial+augment vs rope_axial',
    'irpe_ctx vs irpe_product',
    'swin_v2_cpb vs alibi2d',
)


def get_config(variants: str | None = None) -> ml_collections.ConfigDict:
  variants = set((variants or '').split(',')) - {''}
  unknown = variants - {'fashion_mnist', 'full', 'study'}
  if unknown:
    raise ValueError(
        f'configs/resolution.py: unknown variant(s) {sorted(unknown)}; allowed: fashion_mnist, full, study.'
    )
  if {'full', 'study'} <= variants:
    raise ValueError('configs/resolution.py: variants full and study are two protocols; choose one.')
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
  if 'fashion_mnist' in variants:
    config.title = 'Resolution extrapolation: Fashion-MNIST'
    config.tasks = ('fashion_mnist_canvas', 'fashion_mnist_upsample')
  if 'study' in variants:
    config.title = 'Resolution extrapolation: the study'
    config.encoders = STUDY_ENCODERS
    config.comparisons = STUDY_COMPARISONS
    config.seeds = (0, 1, 2, 3, 4)
    # Every (task, encoder) of the first synthetic runs at (1e-3, 3e-3, 1e-2) chose 1e-2, the top (as the default
    # config's six chose its top, 3e-3), so the grid gained 3e-2; then Fashion-MNIST on a canvas chose 3e-3, the
    # bottom of (3e-3, 1e-2, 3e-2), for 7 of 10 encoders (and life for 3), so 1e-3 is back: no choice sits at an
    # edge unchecked. Every task and encoder is selected over the same four rates.
    config.lr_grid = (1e-3, 3e-3, 1e-2, 3e-2)
    config.steps = 600
    config.warmup_steps = 60
    if 'fashion_mnist' not in variants:
      config.tasks = ('life', 'direction', 'fashion_mnist_canvas', 'fashion_mnist_upsample')
  if 'full' in variants:
    config.encoders = FULL_ENCODERS
    config.seeds = (0, 1, 2, 3, 4)
    config.lr_grid = (1e-3, 3e-3, 1e-2)
    config.steps = 2000
    config.eval_examples = 512
    config.entropy_examples = 64
    if 'fashion_mnist' not in variants:
      config.tasks = ('life', 'count', 'direction', 'distance', 'shift')
  return config

r"""The resolution study's second round (issue 49): the protocol a vision reviewer can't fault. One command runs it
(resumable: rerun it to continue; Fashion-MNIST from `apt-get install -y dataset-fashion-mnist`):

    python -m experiments.resolution --config=configs/studies/resolution_round2.py \
        --workdir=docs/resolution_study_round2

What changed from docs/resolution_study (configs/studies/resolution_study.py), and why:
  protocol   the learning rate is chosen per (task, row) on validation loss at the training side at SELECTION_SEED
             (configs/lm.py's, 100), outside the reported seeds 0-4, as the cross-corpus LM studies choose it; those
             selection runs score no test example. A row that chose the grid's top, 3e-2, is also trained at 1e-1
             there (the edge check; the page marks "edge holds" or "edge binds"). 2,000 test examples per side (was
             128: a binomial standard error of up to 0.011 instead of 0.044; the page prints it beside the seed
             spread). The Holm family is stated on the page: the comparisons below on life, direction and the
             upsampled Fashion-MNIST, less degenerate pairs (A and B identical at every seed) and duplicates (the
             same runs counted again); the canvas protocol's comparisons are reported outside it (its fall with
             size measures the mean pool's dilution by blank tokens), and the upsampled protocol is kept with its
             confound stated: a larger grid there also changes what each patch contains (as a higher resolution
             of the same photograph does in Heo et al.'s and Fuller et al.'s tests).
  content    resolution apart from patch content (item 4): `fashion_mnist_tiles` fills the larger grid with more
             Fashion-MNIST objects of the example's class at the training scale (relpos_jax.data.idx, protocol
             'tiles'), so each patch shows what it showed at 7 x 7 and no blank token dilutes the pool; a fall with
             size there measures position. It is in the Holm family; its 7 x 7 runs are the other Fashion-MNIST
             tasks' (duplicates, counted once).
  model      model_dim 128 and 4 heads: head_dim 32 (was 32 and 4: head_dim 8), so axial RoPE rotates 8 frequency
             pairs per axis, M-RoPE (t, h, w) = (4, 6, 6) (was (2, 1, 1)), RoPE-Mixed and STRING 16 learned pairs;
             4 heads is what LookHere's direction sets need. Patch size unchanged: one token per cell on the
             synthetic tasks, 4 x 4 pixels on Fashion-MNIST (its 28 pixels are 7 x 7 tokens, the small-image
             ViTs' patch of 4 on 32-pixel CIFAR). Pooling: mean (as MAE / rope-vit's fine-tuning), and a class
             token as well (ViT, DeiT) for the rows of CLS_ROWS, labelled '<row>@cls' (classification tasks).
  baselines  Swin v1's relative table (`swin`) and the absolute tables (`learned2d`, `sincos2d`) resized to each
             evaluation grid by bicubic interpolation (relpos_jax.grid.resize), as ViTs and Swin are fine-tuned at
             a new resolution; `lookhere` (Fuller et al. 2024); randomized positions per axis (Ruoss et al. in
             2-D: `randomize_coords`, coordinates drawn from [0, 28) in training); STRING. Kept from round one:
             nope, alibi2d, rope_axial, rope_mixed, mrope, swin_v2_cpb (the round's best on three tasks). Not
             added: Compass-RoPE (not in the library; no cheap faithful form), FIRE-2D and iRPE (round one ran
             them; no claim of item 5 names them).

Size: 12 encoders on 5 tasks + 5 class-token rows on the 4 classification tasks = 80 (task, row) pairs, each 4
selection runs + 5 reported seeds (720 runs) + at most 80 edge runs: at most 800 runs.
Cost, measured on this 2-core CPU (shared with other jobs, load average about 7) by timing, with `date`, the
study engine on this config cut to one task, encoder and rate (direction, rope_axial, 3e-3: one selection run at
seed 100 and one reported run at seed 0; 18:17:41 to 18:25:50 UTC, 489 s with start-up and the up-front model
checks): a reported run 408 s (68.6 s of training, 339.3 s of evaluation: 2,000 examples at 7, 14, 21 and 28
tokens per side, the 28 x 28 grid most of it), a selection run 70 s (66.3 s of training, 4.1 s of validation).
Estimated total: 400 x 408 s + (320 + at most 80) x 70 s = about 191,000 s, 53 CPU-hours (about 27 hours as two
processes on that loaded machine; less on a quiet one). Fashion-MNIST's runs were not timed (its files are not
on this machine); they have the same token grids, so the same cost is assumed. The other encoders' runs were not
timed; a jitted forward of 100 examples at 28 x 28 tokens (what evaluation spends most on) took 9.7 to 20.9 s for
the 12 encoders, rope_axial 13.2 s (18:27:42 to 18:35:47 UTC; a test job of mine ran while the first two, nope
and alibi2d, the slowest, were timed), so the estimate holds within that spread.
"""

import ml_collections

from relpos_jax import resources

lm = resources.config_module('lm')
resolution_study = resources.config_module('studies/resolution_study')

ENCODERS = (
    'nope',
    'alibi2d',
    'rope_axial',
    'rope_mixed',
    'mrope',
    'string',
    'lookhere',
    'swin_v1: swin(window=7, resize=bicubic)',
    'swin_v2_cpb',
    'learned2d: learned2d(max_size=7, resize=bicubic)',
    'sincos2d: sincos2d(resize=bicubic, size=7)',
    'rope_axial+random: randomize_coords(rope_axial, max_side=28)',
)
# Rows also pooled by a class token: the absolute and relative standards and the round's best.
CLS_ROWS = ('nope', 'rope_axial', 'rope_mixed', 'swin_v2_cpb', 'learned2d')
# Each comparison a published claim names (or the class-token question), against the baseline it names.
COMPARISONS = (
    'rope_mixed vs rope_axial',  # Heo et al. 2024: RoPE-Mixed extrapolates better than axial
    'rope_axial vs learned2d',  # Heo et al. 2024: RoPE against APE (resized, as they fine-tune it)
    'rope_axial vs swin_v1',  # Heo et al. 2024: RoPE against RPB (Swin v1's table, resized)
    'lookhere vs rope_mixed',  # Fuller et al. 2024: LookHere extrapolates past 2-D RoPE
    'lookhere vs learned2d',  # Fuller et al. 2024: ... and past the interpolated absolute table
    'string vs rope_mixed',  # Schenck et al. 2025: STRING against RoPE-Mixed
    'rope_axial+random vs rope_axial',  # Ruoss et al. 2023, in 2-D: randomized positions against none
    'swin_v2_cpb vs swin_v1',  # Liu et al. 2022: v2's log-spaced CPB against v1's resized table
    'rope_axial vs nope',  # position against none
    'rope_axial@cls vs rope_axial',  # the pool: class token against mean
)
TASKS = ('life', 'direction', 'fashion_mnist_canvas', 'fashion_mnist_upsample', 'fashion_mnist_tiles')
FAMILY_TASKS = ('life', 'direction', 'fashion_mnist_upsample', 'fashion_mnist_tiles')


def get_config(arg=None) -> ml_collections.ConfigDict:
  if arg:
    raise ValueError(f'configs/studies/resolution_round2.py takes no argument, got {arg!r}.')
  config = resolution_study.get_config()
  config.title = 'Resolution extrapolation, round two: selection seed, 2,000 test examples, head_dim 32'
  config.description = (
      'A ViT trained at a 7x7 grid of tokens and evaluated at 7, 14, 21 and 28 tokens per side (1x-4x), under '
      'the protocol of issue 49 (configs/studies/resolution_round2.py).'
  )
  config.encoders = ENCODERS
  config.tasks = TASKS
  config.comparisons = COMPARISONS
  config.seeds = (0, 1, 2, 3, 4)
  config.selection_seed = lm.SELECTION_SEED
  config.lr_grid = (1e-3, 3e-3, 1e-2, 3e-2)
  config.edge_rates = (1e-1,)
  config.steps = 600
  config.warmup_steps = 60
  config.eval_examples = 2000
  config.eval_batch_size = 100
  config.entropy_examples = 100
  config.extra_pools = {'cls': CLS_ROWS}
  config.family_tasks = FAMILY_TASKS
  config.model = ml_collections.ConfigDict(
      {'model_dim': 128, 'num_heads': 4, 'num_layers': 2, 'mlp_ratio': 2, 'pool': 'mean'}
  )
  return config

r"""The default length-generalization study: every family of encodings on the built-in corpus.

Each encoder trains the small causal byte-level LM of configs/lm.py at length 64 (same data stream, same
seeds, same steps), then is evaluated on the same validation text cut into windows of 64, 128, 256, 512 and
1024 bytes (1x to 16x). Sized to finish in about 10 minutes on a 2-core CPU:

    python -m experiments.length_generalization                      # this config, ./results/default
    python -m experiments.length_generalization --config.study.seeds='(0,1,2)' \
        --workdir=results/seeds3                                     # the README's table: 3 seeds
    python -m experiments.length_generalization --config=configs/length_generalization.py \
        --config.train.steps=2000 --config.model.num_layers=4 --workdir=/tmp/bigger

`study.encoders` holds 'label: spec' entries (any encoder spec; see relpos_jax.encoders.spec);
`study.seeds` the seeds every encoder is trained with (the table shows mean ± std over them).
"""

import os

import ml_collections

from relpos_jax.train import config as config_lib

# The position-free control, absolute tables, every variant of the lecture (relative distance, Shaw's
# clipped table, piecewise-linear and logarithmic range extension, multi-scale tables, absolute + relative)
# and today's choices.
DEFAULT_ENCODERS = (
    'nope',
    'sinusoidal',
    'learned: learned(max_length=1024)',
    'distance',                                                  # the lecture's R[i, j] = j - i (section 2)
    'shaw: shaw(max_distance=16)',
    'piecewise: piecewise(bidirectional=False)',                 # section 5a, piecewise-linear
    # T5's published max_distance=128 leaves the buckets of distances >= 67 untrained at train length 64
    # (they keep their ~0 init while trained far buckets learn ~ -2); t5-32 is the layout whose every bucket
    # (saturating at distance 32) is trained, the regime of Press et al. (max_distance < train length).
    't5: t5(bidirectional=False)',                               # section 5a, logarithmic
    't5-32: t5(bidirectional=False, num_buckets=16, max_distance=32)',
    'multiscale',                                                # section 5b
    'sinusoidal+t5: sinusoidal + t5(bidirectional=False)',       # section 5c, absolute + relative
    # The lecture's log buckets made to extrapolate (docs/lecture_variants.md): t5-32's buckets as knots of
    # a bias monotone beyond distance 7, interpolated in log-distance, continued past the last knot.
    'monotone-t5-32: monotone(t5(bidirectional=False, num_buckets=16, max_distance=32), window=8, '
    'init_slope=4.0)',
    'alibi',
    'kerple_log',
    'fire',
    'rope',
    'rope+randomized: randomized(rope, max_position=2048)',
)
SEEDS = (0,)  # The quick start; the README's table: --config.study.seeds='(0,1,2)'.


def get_config() -> ml_collections.ConfigDict:
  config = config_lib.load_config(os.path.join(os.path.dirname(__file__), 'lm.py'), validate_config=False)
  config.unlock()
  config.train.steps = 400
  config.train.log_every = 100
  config.train.checkpoint_every = 200
  config.optim.warmup_steps = 40
  config.eval.every = 0                    # evaluate once, after training
  config.eval.lengths = (64, 128, 256, 512, 1024)
  config.eval.num_tokens = 65_536          # the same amount of validation text at every length
  config.eval.max_tokens_per_batch = 16_384  # long windows in small batches: fits any laptop
  config.study = ml_collections.ConfigDict()
  config.study.title = 'Byte-level LM on the Python stdlib: trained at 64, evaluated up to 16x'
  config.study.description = ('Bits per character on the validation files; every encoder trains the same '
                              'model, data stream and steps.')
  config.study.encoders = DEFAULT_ENCODERS
  config.study.seeds = SEEDS
  return config

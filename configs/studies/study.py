r"""The default length-generalization study (docs/study): every encoder of `study.encoders` trains the
byte-level LM of configs/lm.py at length 64 (same data stream and steps for every encoder, per seed), then is
evaluated on the same held-out test bytes seen through windows of 64, 128, 256, 512 and 1024 bytes (1x to 16x).
Sized to finish in about 10 minutes on a 2-core CPU:

    python -m experiments.length_generalization                      # this study, ./results/default
    python -m experiments.length_generalization --config=configs/studies/study.py \
        --config.train.steps=2000 --config.model.num_layers=4 --workdir=/tmp/bigger

docs/study ran `--config.study.seeds='(0,1,2,3,4)' --config.study.lr_grid='(1e-3,3e-3,1e-2)'`.
`study.encoders` holds 'label: spec' entries (any encoder spec; see relpos_jax.encoders.spec); `study.seeds`
the seeds every encoder is trained with (the table shows mean ± sample std over them):

    python -m experiments.length_generalization --config.study.seeds='(0,1,2,3,4)' --workdir=results/seeds5

The protocol (relpos_jax.study.protocol; every key is checked before anything is trained or written):
  eval.scored_tail       T: windows of every length end at the same anchors of the split and score only
                         their last T targets, so every length scores the same bytes (None: the shortest
                         evaluation length, 64 here; each length's scored set is fingerprinted in results.json)
  eval.num_tokens        scored tokens per length (num_tokens / T windows): 8,192 here, i.e. 128 windows per
                         length, 254k window tokens over the five lengths against 328k before (attention work
                         1.4x, since the long windows grow: 128 x 1024^2 at 1024 against 64 x 1024^2)
  eval.position_draws    K: a randomized encoder is evaluated on ordered random positions from [0,
                         max_position), the mean over K draws (as its reference code does); >= 1
  study.split            the split the tables report: 'test' (held-out files); 'validation' is refused when
                         the study chooses anything (lr_grid, learning_rates), as choices are made there
  study.lr_grid          peak learning rates tried per encoder at the first seed; the lowest validation loss
                         at the training length wins and the other seeds train with it (LR_GRID of
                         configs/lm.py: --config.study.lr_grid='(1e-3,3e-3,1e-2)'); None: no grid
  study.default_learning_rates  committed choices, 'label: lr' (STUDY_LEARNING_RATES of configs/lm.py: what
                         the grid chose), applied to the labels the study has, so the quick start does not search
                         again (study.learning_rates: your own, every label one of the study's); the table's
                         last column names each rate and how it was chosen (grid, committed, fixed =
                         optim.learning_rate; a re-evaluation: 'trained: <how>', the trained study's word)
  study.comparisons      'A vs B' or 'A vs B at <length | train | ood | longest>': paired differences over
                         seeds with 95% t intervals (results.md, results.json 'comparisons'); a randomized
                         entry's 0..L-1 row is '<label>@0..L-1'
  study.sequential_positions  randomized encoders also evaluated at 0..L-1, as the row '<label>@0..L-1'

FIRE's threshold starts at a quarter of the training length (16), the ratio of the paper (512 at 2,048);
'fire-512' keeps the reference code's absolute 512 as an ablation row (relpos_jax/encoders/fire.py).
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  return lm.study_config(arg)

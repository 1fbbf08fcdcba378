r"""GGD-BAM in the default study (not yet run): the byte-level LM of configs/studies/study.py trained at 64 and
evaluated to 16x with GGD-BAM's generalized-Gaussian prior (Bianchessi et al. 2025, relpos_jax/encoders/ggd_bam.py),
alone and with the paper's length-aware scaling (Scalable-Softmax, s initialised at 1 as in the authors' code),
beside the two decaying biases it generalizes and is compared with (ALiBi, its initial value; KERPLE-log). The
default study's committed rates were chosen for its own runs, so this study chooses every rate again from LR_GRID at
the selection seed SELECTION_SEED of configs/lm.py, outside the reported seeds 0-2. Its trained runs are what
configs/studies/study_long_context_bam.py evaluates to 1024x:

    python -m experiments.length_generalization --config=configs/studies/study_bam.py --workdir=results/bam

Size: 4 encoders x (3 rates at the selection seed + 3 seeds) = 24 runs of 400 steps at 64 bytes.
"""

from relpos_jax import resources

lm = resources.config_module('lm')

BAM_ENCODERS = (
    'alibi',
    'kerple_log',
    'ggd_bam',
    'ggd_bam+ssmax: ggd_bam + ssmax(init_s=1.0)',
)
BAM_COMPARISONS = ('ggd_bam vs alibi', 'ggd_bam+ssmax vs ggd_bam', 'ggd_bam vs kerple_log')


def get_config(arg=None):
  config = lm.study_config(arg)
  config.study.title = 'Byte-level LM on the Python stdlib: GGD-BAM trained at 64, evaluated up to 16x'
  config.study.encoders = BAM_ENCODERS
  config.study.comparisons = BAM_COMPARISONS
  config.study.seeds = (0, 1, 2)
  config.study.lr_grid = lm.LR_GRID
  config.study.selection_seed = lm.SELECTION_SEED
  config.study.default_learning_rates = ()
  return config

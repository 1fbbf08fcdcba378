r"""GGD-BAM at long context (not yet run): configs/studies/study_bam.py's trained runs (no retraining) evaluated at
1,024 ... 65,536 bytes (up to 1024x the training length) with blockwise attention, as
configs/studies/study_long_context.py evaluates the default study's. GGD-BAM claims retrieval at 500x its training
length; this asks whether its loss stays flat as the decaying biases' does. A new file rather than new rows of
study_long_context.py, whose runs are the default study's (committed, one seed) and whose config is pinned:

    python -m experiments.length_generalization --config=configs/studies/study_bam.py --workdir=results/bam
    python -m experiments.length_generalization --config=configs/studies/study_long_context_bam.py \
        --config.study.trained_workdir=results/bam --workdir=results/long_context_bam
"""

from relpos_jax import resources

lm = resources.config_module('lm')
bam = resources.config_module('studies/study_bam')


def get_config(arg=None):
  config = lm.long_context_config(arg)
  config.study.title = 'Byte-level LM on the Python stdlib: GGD-BAM trained at 64, evaluated up to 1024x'
  config.study.description = (
      "configs/studies/study_bam.py's trained runs (no retraining), evaluated with blockwise attention on the same "
      '4,096 held-out test bytes at every length.'
  )
  config.study.encoders = bam.BAM_ENCODERS
  config.study.comparisons = bam.BAM_COMPARISONS
  config.study.seeds = (0, 1, 2)
  config.study.default_learning_rates = ()  # the trained study's rates are read back with its runs
  config.study.trained_workdir = 'results/bam'
  return config

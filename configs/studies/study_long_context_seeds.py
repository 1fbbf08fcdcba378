r"""Long context on three seeds (docs/study_long_context_seeds): configs/studies/study_long_context.py's rows (the
default study's trained runs, no retraining, and RoPE's inference-time extensions, here sized for 256x) on seeds
0-2, 16 windows a length (the scored tails fall in 11 of the 21 test files), evaluated with blockwise attention at
1,024 ... 16,384 bytes (16x to 256x): the same 16,384 test bytes at every length. study_long_context.py keeps its
one seed at 1024x. Train the default study on those seeds first (an accelerator takes minutes; a 2-core CPU hours):

    python -m experiments.length_generalization --config=configs/studies/study.py \
        --config.study.seeds='(0,1,2)' --workdir=results/default
    python -m experiments.length_generalization --config=configs/studies/study_long_context_seeds.py \
        --config.study.trained_workdir=results/default --workdir=results/long_context_seeds
"""

from relpos_jax import resources

lm = resources.config_module('lm')
long_context = resources.config_module('studies/study_long_context')


def get_config(arg=None):
  config = lm.seeded_long_context_config(arg)
  config.study.encoders = lm.select(lm.LONG_CONTEXT_LABELS) + lm.SEEDED_LONG_CONTEXT_EXTENSIONS
  config.study.comparisons = long_context.get_config().study.comparisons
  config.study.trained_workdir = 'results/default'  # configs/studies/study.py at seeds 0-2
  return config

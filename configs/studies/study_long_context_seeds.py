r"""Long context on three seeds (docs/study_long_context_seeds): configs/studies/study_long_context.py's rows (the
default study's trained runs, no retraining, and RoPE's inference-time extensions, here sized for 256x) on seeds
0-2, 16 windows a length, at 1,024 ... 16,384 bytes (`seeded_long_context` of configs/lm.py); that file keeps its
one seed at 1024x. Train the default study on those seeds first (an accelerator takes minutes; a 2-core CPU hours):

    python -m experiments.length_generalization --config=configs/studies/study.py \
        --config.study.seeds='(0,1,2)' --workdir=results/default
    python -m experiments.length_generalization --config=configs/studies/study_long_context_seeds.py \
        --config.study.trained_workdir=results/default --workdir=results/long_context_seeds

configs/studies/study_long_context_contextual_seeds.py does the same for the contextual study's runs.
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  one_seed = resources.config_module('studies/study_long_context').get_config(arg)
  config = lm.seeded_long_context(one_seed, trained="The default study's")
  config.study.encoders = lm.select(lm.LONG_CONTEXT_LABELS) + lm.SEEDED_LONG_CONTEXT_EXTENSIONS
  return config

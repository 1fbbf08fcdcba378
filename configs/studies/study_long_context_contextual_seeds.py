r"""Long context for the content-dependent encoders on three seeds (docs/study_long_context_contextual_seeds):
configs/studies/study_long_context_contextual.py's rows (the contextual study's runs whose kinds tile, beside its
baselines) under configs/studies/study_long_context_seeds.py's protocol: seeds 0-2, 16 windows a length, 1,024 ...
16,384 bytes. Train the contextual study on those seeds first:

    python -m experiments.length_generalization --config=configs/studies/study_contextual.py \
        --config.study.seeds='(0,1,2)' --workdir=results/contextual
    python -m experiments.length_generalization --config=configs/studies/study_long_context_contextual_seeds.py \
        --config.study.trained_workdir=results/contextual --workdir=results/long_context_contextual_seeds
"""

from relpos_jax import resources

lm = resources.config_module('lm')
contextual = resources.config_module('studies/study_long_context_contextual')


def get_config(arg=None):
  config = lm.seeded_long_context_config(arg, trained="The contextual study's")
  config.study.title = 'Position from content: trained at 64, evaluated up to 256x on 3 seeds'
  config.study.encoders = lm.select(lm.LONG_CONTEXT_CONTEXTUAL_LABELS)
  config.study.comparisons = contextual.get_config().study.comparisons
  config.study.trained_workdir = 'results/contextual'  # configs/studies/study_contextual.py at seeds 0-2
  return config

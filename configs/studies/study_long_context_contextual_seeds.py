r"""configs/studies/study_long_context_contextual.py (the contextual study's trained runs whose kinds tile, beside
its baselines) under configs/studies/study_long_context_seeds.py's protocol (docs/study_long_context_contextual_seeds),
from the contextual study trained on seeds 0-2 (`--config=configs/studies/study_contextual.py
--config.study.seeds='(0,1,2)' --workdir=results/contextual`, then this file with that trained workdir).
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  one_seed = resources.config_module('studies/study_long_context_contextual').get_config(arg)
  one_seed.study.title = 'Position from content: trained at 64, evaluated up to 1024x'
  return lm.seeded_long_context(one_seed, trained="The contextual study's")

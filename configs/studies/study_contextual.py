r"""Position from content (docs/study_contextual): the content-dependent encoders (CoPE, FoX, stick-breaking,
DAPE, PaTH, SSMax, log-n; CONTEXTUAL_ENCODERS of configs/lm.py) beside the extrapolating baselines and RoPE,
under the default study's protocol (configs/studies/study.py documents its keys).

    python -m experiments.length_generalization --config=configs/studies/study_contextual.py \
        --config.study.seeds='(0,1,2,3,4)' --config.study.lr_grid='(1e-3,3e-3,1e-2)' --workdir=results/contextual

Its trained runs are what configs/studies/study_long_context_contextual.py evaluates at 1024x.
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  config = lm.study_config(arg)
  config.study.title = 'Position from content: trained at 64, evaluated up to 16x'
  config.study.encoders = lm.CONTEXTUAL_ENCODERS
  config.study.comparisons = lm.CONTEXTUAL_COMPARISONS
  return config

r"""Long context for the content-dependent encoders (docs/study_long_context_contextual): the evaluation of
configs/studies/study_long_context.py applied to the contextual study's runs (configs/studies/study_contextual.py)
whose kinds tile (stick-breaking, FoX, DAPE v2, FoX's bias-only gate) beside that study's own baselines
(LONG_CONTEXT_CONTEXTUAL_LABELS of configs/lm.py):

    python -m experiments.length_generalization --config=configs/studies/study_long_context_contextual.py \
        --config.study.trained_workdir=results/contextual --workdir=results/long_context_contextual
"""

from relpos_jax import resources

lm = resources.config_module('lm')


def get_config(arg=None):
  config = lm.long_context_config(arg)
  config.study.encoders = lm.select(lm.LONG_CONTEXT_CONTEXTUAL_LABELS)
  config.study.comparisons = ('stick_breaking vs dape2-kerple', 'stick_breaking vs kerple_log', 'fox vs fox-bias')
  config.study.trained_workdir = 'results/contextual'  # where configs/studies/study_contextual.py trains
  return config

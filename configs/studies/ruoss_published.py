r"""The published protocol of Ruoss et al. 2023 as a study, for a TPU or GPU: configs/algorithmic.py's `published`
run (its docstring gives the protocol: 5 layers, lengths 1..40, 2,000,000 steps, evaluated at 41..500) trained
with each encoder family that paper compares, with and without randomized positions (max_position 2048;
PUBLISHED_STUDY_ENCODERS of configs/algorithmic.py). The paper sweeps learning rates {1e-4, 3e-4, 5e-4} over
10 seeds:

    python -m experiments.length_generalization --config=configs/studies/ruoss_published.py \
        --config.data.task=reverse_string --config.optim.learning_rate=3e-4 --workdir=gs://.../reverse
"""

from relpos_jax import resources

algorithmic = resources.config_module('algorithmic')


def get_config(arg=None):
  config = algorithmic.study_config(arg, published=True)
  config.study.title = 'Ruoss et al. 2023 protocol: trained on lengths 1..40, tested on 41..500'
  config.study.description = 'Per-output-token accuracy; the paper reports the mean over lengths 41..500.'
  config.study.encoders = algorithmic.PUBLISHED_STUDY_ENCODERS
  return config

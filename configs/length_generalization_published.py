r"""The published protocol of Ruoss et al. 2023 as a study, for a TPU or GPU.

configs/algorithmic_published.py (5 layers, d_model 64, 8 heads, batch 128, lengths 1..40, every test length
41..500) for each encoder family that paper compares, with and without randomized positions
(max_position 2048, as the paper). Pick the task, steps and learning rate on the command line:

    python -m experiments.length_generalization --config=configs/length_generalization_published.py \
        --config.data.task=reverse_string --config.optim.learning_rate=3e-4 --workdir=gs://.../reverse
"""

import os

import ml_collections

from relpos_jax.train import config as config_lib

ENCODERS = (
    'nope',
    'sinusoidal',
    'transformer_xl',
    'rope',
    'alibi: alibi(bidirectional=True)',
    'sinusoidal+randomized: randomized(sinusoidal, max_position=2048)',
    'transformer_xl+randomized: randomized(transformer_xl, max_position=2048)',
    'rope+randomized: randomized(rope, max_position=2048)',
    'alibi+randomized: randomized(alibi(bidirectional=True), max_position=2048)',
)


def get_config() -> ml_collections.ConfigDict:
  path = os.path.join(os.path.dirname(__file__), 'algorithmic_published.py')
  config = config_lib.load_config(path, validate_config=False)
  config.unlock()
  config.study = ml_collections.ConfigDict()
  config.study.title = 'Ruoss et al. 2023 protocol: trained on lengths 1..40, tested on 41..500'
  config.study.description = 'Per-output-token accuracy; the paper reports the mean over lengths 41..500.'
  config.study.encoders = ENCODERS
  return config

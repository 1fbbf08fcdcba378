r"""Length generalization on an algorithmic task at CPU scale (the shape of Ruoss et al. 2023's protocol).

An bidirectional transformer (configs/algorithmic.py: 3 layers, d_model 64, 4 heads, batch 32) trained on
input lengths 1..20 of even_pairs, evaluated by per-output-token accuracy at 10 and 20 (in distribution)
and 30, 40, 60, 100 (out of distribution). About 2 minutes per encoder on a 2-core CPU:

    python -m experiments.length_generalization --config=configs/length_generalization_algorithmic.py \
        --workdir=results/even_pairs
    ... --config.data.task=reverse_string --workdir=results/reverse_string

NoPE is in the set as the control: a bidirectional model without positions cannot see order (the run
warns), so its accuracy marks chance for order-dependent tasks.
"""

import os

import ml_collections

from relpos_jax.train import config as config_lib

ENCODERS = (
    'nope',
    'sinusoidal',
    'learned: learned(max_length=128)',
    'shaw: shaw(max_distance=16)',
    't5',
    'alibi: alibi(bidirectional=True)',
    'kerple_log',
    'fire',
    'transformer_xl',
    'rope',
    'rope+randomized: randomized(rope, max_position=2048)',
)


def get_config() -> ml_collections.ConfigDict:
  path = os.path.join(os.path.dirname(__file__), 'algorithmic.py')
  config = config_lib.load_config(path, validate_config=False)
  config.unlock()
  config.eval.every = 0
  config.eval.lengths = (10, 20, 30, 40, 60, 100)
  config.study = ml_collections.ConfigDict()
  config.study.title = 'even_pairs: trained on lengths 1..20, accuracy up to 100'
  config.study.description = ('Per-output-token accuracy (Deletang et al. 2023); lengths <= 20 are in '
                              'distribution. Chance is 0.5.')
  config.study.encoders = ENCODERS
  return config

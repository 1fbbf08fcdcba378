r"""The default study's trained runs, evaluated at 32x to 1024x their training length (no retraining).

Reuses the runs of `configs/length_generalization.py` (trained at 64 tokens) from `study.trained_workdir`
and evaluates them at 2,048 ... 65,536 tokens (and at 64 and 1,024, the default study's end points, as
references) with `attention_implementation='blockwise'`: queries and keys in tiles with every position
term built per tile, so no (L, L) array exists at any length.

    python -m experiments.length_generalization                                       # trains (results/default)
    python -m experiments.length_generalization --config=configs/length_generalization_long_context.py \
        --workdir=results/long_context

Token budget (CPU): 65,536 scored tokens per length, i.e. one window at 65,536, two at 32,768, ... the same
validation text at every length. `learned(max_length=1024)` is left out (its table has no row past 1,023).
"""

import os

import ml_collections

from relpos_jax.train import config as config_lib

_DEFAULT_STUDY = os.path.join(os.path.dirname(__file__), 'length_generalization.py')

LENGTHS = (64, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
# Every encoder of the default study that can encode 65,536 positions.
def get_config() -> ml_collections.ConfigDict:
  config = config_lib.load_config(_DEFAULT_STUDY, validate_config=False)
  config.unlock()
  config.eval.lengths = LENGTHS
  config.eval.num_tokens = 65_536          # one window at the longest length
  config.eval.max_tokens_per_batch = 65_536
  config.model.attention_implementation = 'blockwise'
  config.model.attention_block_size = None  # the default tiles
  # The default study's encoders but learned (its table ends at 1,023), the extrapolating biases first, so an
  # interrupted run has the main families.
  order = ('alibi', 'kerple_log', 'fire', 'rope', 'nope', 't5-32', 'shaw', 't5', 'sinusoidal', 'multiscale',
           'rope+randomized')
  by_label = {e.partition(':')[0].strip(): e for e in config.study.encoders}
  config.study.encoders = tuple(by_label[label] for label in order)
  config.study.trained_workdir = os.path.join('results', 'default')
  config.study.title = 'Byte-level LM on the Python stdlib: trained at 64, evaluated up to 1024x'
  config.study.description = ('The default study\'s trained runs (no retraining), evaluated with blockwise '
                              'attention on 65,536 validation tokens per length.')
  return config
